-- The key table accepts any operation name of the right shape: a new money operation adds its own
-- resource tables, never a change here. (SQLite cannot drop a column CHECK in place: the column is
-- copied, dropped and renamed.)
ALTER TABLE idempotency_keys ADD COLUMN operation_name TEXT
    CHECK (length(operation_name) BETWEEN 1 AND 32 AND operation_name NOT GLOB '*[^a-z_]*');
UPDATE idempotency_keys SET operation_name = operation;
ALTER TABLE idempotency_keys DROP COLUMN operation;
ALTER TABLE idempotency_keys RENAME COLUMN operation_name TO operation;
