-- Refunds (estornos). What a payment has paid back or holds for a refund in progress is kept on
-- the payment itself and can never pass what was charged: the guarded UPDATE that holds a refund's
-- amount and this CHECK are the database's decision, not a read in the server.
ALTER TABLE payments ADD COLUMN estornado INTEGER NOT NULL DEFAULT 0
    CHECK (estornado >= 0 AND estornado <= valor);
CREATE TABLE refunds (
    id              TEXT    PRIMARY KEY,
    payment_id      TEXT    NOT NULL REFERENCES payments (id),
    merchant        TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    valor           INTEGER NOT NULL CHECK (valor > 0),
    status          TEXT    NOT NULL CHECK (status IN ('pendente', 'aprovado', 'recusado')),
    motivo          TEXT,
    referencia      TEXT,
    recusa          TEXT,
    estorno_gateway TEXT,
    created_at      INTEGER NOT NULL,
    UNIQUE (merchant, idempotency_key)
);
CREATE INDEX refunds_by_payment ON refunds (payment_id, created_at);
-- The gateway simulator: the card of each charge (its test token decides how refunds of it go),
-- and one row per refund it executed, unique by downstream key like charges.
ALTER TABLE gateway_ledger ADD COLUMN cartao TEXT;
CREATE TABLE gateway_refunds (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    estorno_id      TEXT    NOT NULL UNIQUE,
    downstream_key  TEXT    NOT NULL UNIQUE,
    cobranca_id     TEXT    NOT NULL REFERENCES gateway_ledger (cobranca_id),
    merchant        TEXT    NOT NULL,
    valor           INTEGER NOT NULL CHECK (valor > 0),
    status          TEXT    NOT NULL,
    motivo          TEXT,
    created_at      INTEGER NOT NULL
);
