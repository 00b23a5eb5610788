-- The server's SQLite schema: idempotency keys, payments, and the gateway simulator's ledger.
CREATE TABLE idempotency_keys (
    merchant        TEXT    NOT NULL,
    key             TEXT    NOT NULL,
    fingerprint     TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    locked_until    INTEGER NOT NULL,
    fence           INTEGER NOT NULL,
    recovery_point  TEXT    NOT NULL CHECK (recovery_point IN ('started', 'finished')),
    response_status INTEGER,
    response_body   BLOB,
    payment_id      TEXT,
    completed_at    INTEGER,
    UNIQUE (merchant, key)
);
CREATE INDEX idempotency_keys_completed_at ON idempotency_keys (completed_at)
    WHERE completed_at IS NOT NULL;
CREATE TABLE payments (
    id              TEXT    PRIMARY KEY,
    merchant        TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    valor           INTEGER NOT NULL CHECK (valor > 0),
    status          TEXT    NOT NULL CHECK (status IN ('aprovado', 'recusado')),
    motivo          TEXT,
    descricao       TEXT,
    referencia      TEXT,
    cobranca_id     TEXT    NOT NULL,
    created_at      INTEGER NOT NULL
);
CREATE INDEX payments_referencia ON payments (merchant, referencia);
CREATE INDEX payments_key ON payments (merchant, idempotency_key);
CREATE TABLE gateway_ledger (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    cobranca_id     TEXT    NOT NULL UNIQUE,
    downstream_key  TEXT    NOT NULL UNIQUE,
    merchant        TEXT    NOT NULL,
    valor           INTEGER NOT NULL,
    status          TEXT    NOT NULL,
    motivo          TEXT,
    created_at      INTEGER NOT NULL
);
