-- Refunds (estornos): see migrations/sqlite/V4__refunds.sql. Under concurrent refunds of one
-- payment from several replicas, the guarded UPDATE of payments.estornado waits on the row lock
-- and re-checks its condition on the newest row version (READ COMMITTED), and the CHECK holds
-- whatever a statement does.
ALTER TABLE payments ADD COLUMN estornado bigint NOT NULL DEFAULT 0;
ALTER TABLE payments ADD CONSTRAINT payments_estornado_within_valor
    CHECK (estornado >= 0 AND estornado <= valor);
CREATE TABLE refunds (
    id              text    PRIMARY KEY,
    payment_id      text    NOT NULL REFERENCES payments (id),
    merchant        text    NOT NULL,
    idempotency_key text    NOT NULL,
    valor           bigint  NOT NULL CHECK (valor > 0),
    status          text    NOT NULL CHECK (status IN ('pendente', 'aprovado', 'recusado')),
    motivo          text,
    referencia      text,
    recusa          text,
    estorno_gateway text,
    created_at      bigint  NOT NULL,
    CONSTRAINT refunds_merchant_key UNIQUE (merchant, idempotency_key)
);
CREATE INDEX refunds_by_payment ON refunds (payment_id, created_at);
ALTER TABLE gateway_ledger ADD COLUMN cartao text;
CREATE TABLE gateway_refunds (
    seq             bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    estorno_id      text    NOT NULL UNIQUE,
    downstream_key  text    NOT NULL UNIQUE,
    cobranca_id     text    NOT NULL REFERENCES gateway_ledger (cobranca_id),
    merchant        text    NOT NULL,
    valor           bigint  NOT NULL CHECK (valor > 0),
    status          text    NOT NULL,
    motivo          text,
    created_at      bigint  NOT NULL
);
