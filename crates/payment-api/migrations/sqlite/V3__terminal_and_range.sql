-- The terminal (till) a payment came from, and the index of a merchant's payments in time order
-- that `GET /pagamentos?desde=…&ate=…` pages through (keyset: created_at, then id).
ALTER TABLE payments ADD COLUMN terminal TEXT;
CREATE INDEX payments_by_time ON payments (merchant, created_at, id);
