-- The key table accepts any operation name of the right shape: a new money operation adds its own
-- resource tables, never a change here.
ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_operation_check;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_operation_name
    CHECK (operation ~ '^[a-z_]{1,32}$');
