-- Sales paid in parts. A sale is the till's reference with its total, one per merchant and
-- terminal; each tender (a payment key) holds its amount against its sale before it charges,
-- and the hold is refused when the sale's tenders would hold more than its total. What a tender
-- holds is read from its key and payment (store/sales.rs); the sale's row is what concurrent
-- holds serialise on.
CREATE TABLE vendas (
    id          TEXT      PRIMARY KEY,
    merchant    TEXT      NOT NULL,
    terminal    TEXT      NOT NULL,
    referencia  TEXT      NOT NULL,
    total       INTEGER      NOT NULL CHECK (total > 0),
    created_at  INTEGER      NOT NULL,
    UNIQUE (merchant, terminal, referencia)
);
CREATE TABLE venda_tenders (
    merchant        TEXT  NOT NULL,
    idempotency_key TEXT  NOT NULL,
    venda_id        TEXT  NOT NULL REFERENCES vendas (id),
    valor           INTEGER  NOT NULL CHECK (valor > 0),
    created_at      INTEGER  NOT NULL,
    PRIMARY KEY (merchant, idempotency_key)
);
CREATE INDEX venda_tenders_by_sale ON venda_tenders (venda_id, created_at);
