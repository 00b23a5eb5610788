-- A key records the operation it executes and, for a payment, its referencia, so a look-up by
-- reference sees an execution still in progress (the partial index holds only those rows). A key
-- can be cancelled: completed with no answer, it never executes again.
ALTER TABLE idempotency_keys ADD COLUMN operation TEXT
    CHECK (operation IN ('pagamento', 'estorno', 'cancelamento'));
ALTER TABLE idempotency_keys ADD COLUMN referencia TEXT;
ALTER TABLE idempotency_keys ADD COLUMN cancelled_at INTEGER;
-- Rows claimed before this version: a refund's request was kept in a `{"estorno": …}` envelope,
-- which the code no longer reads.
UPDATE idempotency_keys
   SET operation = CASE WHEN CAST(request_body AS TEXT) LIKE '{"estorno"%' THEN 'estorno' ELSE 'pagamento' END
 WHERE operation IS NULL;
CREATE INDEX idempotency_keys_in_progress ON idempotency_keys (merchant, referencia)
    WHERE completed_at IS NULL;
