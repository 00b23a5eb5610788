-- Pagar payment API on PostgreSQL: the same tables as the SQLite store.
-- Times are epoch milliseconds read from the database clock (pagar_now_ms), never a replica's.

CREATE FUNCTION pagar_now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS
$$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;

CREATE TABLE idempotency_keys (
    merchant        text    NOT NULL,
    key             text    NOT NULL,
    fingerprint     text    NOT NULL,
    created_at      bigint  NOT NULL,
    locked_until    bigint  NOT NULL,
    fence           bigint  NOT NULL,
    recovery_point  text    NOT NULL CHECK (recovery_point IN ('started', 'finished')),
    response_status integer,
    response_body   bytea,
    payment_id      text,
    completed_at    bigint,
    CONSTRAINT idempotency_keys_merchant_key UNIQUE (merchant, key)
);
CREATE INDEX idempotency_keys_completed_at ON idempotency_keys (completed_at)
    WHERE completed_at IS NOT NULL;

CREATE TABLE payments (
    id              text    PRIMARY KEY,
    merchant        text    NOT NULL,
    idempotency_key text    NOT NULL,
    valor           bigint  NOT NULL CHECK (valor > 0),
    status          text    NOT NULL CHECK (status IN ('aprovado', 'recusado')),
    motivo          text,
    descricao       text,
    referencia      text,
    cobranca_id     text    NOT NULL,
    created_at      bigint  NOT NULL
);
CREATE INDEX payments_referencia ON payments (merchant, referencia);
CREATE INDEX payments_key ON payments (merchant, idempotency_key);

CREATE TABLE gateway_ledger (
    seq             bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    cobranca_id     text    NOT NULL UNIQUE,
    downstream_key  text    NOT NULL UNIQUE,
    merchant        text    NOT NULL,
    valor           bigint  NOT NULL,
    status          text    NOT NULL,
    motivo          text,
    created_at      bigint  NOT NULL
);
