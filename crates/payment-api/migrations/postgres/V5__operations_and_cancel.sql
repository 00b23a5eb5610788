-- Operations, in-progress look-ups and cancelled keys: see migrations/sqlite/V5__operations_and_cancel.sql.
ALTER TABLE idempotency_keys ADD COLUMN operation text
    CHECK (operation IN ('pagamento', 'estorno', 'cancelamento'));
ALTER TABLE idempotency_keys ADD COLUMN referencia text;
ALTER TABLE idempotency_keys ADD COLUMN cancelled_at bigint;
CREATE INDEX idempotency_keys_in_progress ON idempotency_keys (merchant, referencia)
    WHERE completed_at IS NULL;
