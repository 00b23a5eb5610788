-- The reaper's check that an expired key can no longer move money (`LIVE_KEY`: its Pix still
-- waiting, its authorization still open), read once for every key it purges. Through the
-- indexes on (merchant, idempotency_key) each check read the payment's or the Pix's row, a
-- page of its own in a store of millions, to find it closed; these hold only the open ones, so
-- a closed key's check reads one small index.
CREATE INDEX payments_live_key ON payments (merchant, idempotency_key)
    WHERE captura = 'pendente';
CREATE INDEX pix_charges_live_key ON pix_charges (merchant, idempotency_key)
    WHERE status = 'aguardando';
