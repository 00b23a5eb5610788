-- Operations, in-progress look-ups and cancelled keys: see migrations/sqlite/V5__operations_and_cancel.sql.
ALTER TABLE idempotency_keys ADD COLUMN operation text
    CHECK (operation IN ('pagamento', 'estorno', 'cancelamento'));
ALTER TABLE idempotency_keys ADD COLUMN referencia text;
ALTER TABLE idempotency_keys ADD COLUMN cancelled_at bigint;
-- Rows claimed before this version: a refund's request was kept in a `{"estorno": …}` envelope,
-- which the code no longer reads.
UPDATE idempotency_keys
   SET operation = CASE WHEN convert_from(request_body, 'UTF8') LIKE '{"estorno"%' THEN 'estorno' ELSE 'pagamento' END
 WHERE operation IS NULL;
CREATE INDEX idempotency_keys_in_progress ON idempotency_keys (merchant, referencia)
    WHERE completed_at IS NULL;
