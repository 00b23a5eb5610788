-- Sales paid in parts. A sale is the till's reference with its total, one per merchant and
-- terminal; each tender (a payment key) holds its amount against its sale before it charges,
-- and the hold is refused when the sale's tenders would hold more than its total. What a tender
-- holds is read from its key and payment (store/sales.rs); the sale's row is what concurrent
-- holds serialise on.
CREATE TABLE vendas (
    id          text      PRIMARY KEY,
    merchant    text      NOT NULL,
    terminal    text      NOT NULL,
    referencia  text      NOT NULL,
    total       bigint      NOT NULL CHECK (total > 0),
    created_at  bigint      NOT NULL,
    UNIQUE (merchant, terminal, referencia)
);
CREATE TABLE venda_tenders (
    merchant        text  NOT NULL,
    idempotency_key text  NOT NULL,
    venda_id        text  NOT NULL REFERENCES vendas (id),
    valor           bigint  NOT NULL CHECK (valor > 0),
    created_at      bigint  NOT NULL,
    PRIMARY KEY (merchant, idempotency_key)
);
CREATE INDEX venda_tenders_by_sale ON venda_tenders (venda_id, created_at);
