-- Recovery: the request is kept with its key (the recovery worker rebuilds a payment from it),
-- the fingerprint with the payment (a key sent again after its retention is recognised), and one
-- payment per gateway charge.
ALTER TABLE idempotency_keys ADD COLUMN request_body BLOB;
ALTER TABLE payments ADD COLUMN fingerprint TEXT;
CREATE UNIQUE INDEX payments_cobranca ON payments (cobranca_id);
CREATE INDEX idempotency_keys_started ON idempotency_keys (locked_until)
    WHERE completed_at IS NULL;
