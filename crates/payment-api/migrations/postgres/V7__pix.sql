-- Pix charges (`metodo: "pix"`). A charge is made at the Pix provider under a txid derived from
-- the idempotency key (UNIQUE here as there), answered `aguardando`, and settled later by a
-- signed webhook or a poll of the provider. Every Pix received is recorded once, by its
-- end-to-end id, in the same transaction as its effect on the charge; one received for an
-- unknown txid is recorded too (charge_id NULL), so no money is ever dropped.
CREATE TABLE pix_charges (
    id              TEXT    PRIMARY KEY,
    merchant        TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    txid            TEXT    NOT NULL UNIQUE,
    valor           BIGINT NOT NULL CHECK (valor > 0),
    status          TEXT    NOT NULL CHECK (status IN
                        ('aguardando', 'aprovado', 'expirado', 'cancelado', 'recebido_apos_cancelamento')),
    copia_e_cola    TEXT    NOT NULL,
    location        TEXT    NOT NULL,
    expira_em       BIGINT NOT NULL,
    e2eid           TEXT,
    pago_em         BIGINT,
    valor_recebido  BIGINT,
    descricao       TEXT,
    referencia      TEXT,
    terminal        TEXT,
    fingerprint     TEXT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
CREATE INDEX pix_charges_referencia ON pix_charges (merchant, referencia);
CREATE INDEX pix_charges_key ON pix_charges (merchant, idempotency_key);
CREATE INDEX pix_charges_to_poll ON pix_charges (updated_at)
    WHERE status IN ('aguardando', 'expirado', 'cancelado');
CREATE TABLE pix_received (
    end_to_end_id   TEXT    PRIMARY KEY,
    txid            TEXT    NOT NULL,
    charge_id       TEXT    REFERENCES pix_charges (id),
    valor           BIGINT NOT NULL CHECK (valor > 0),
    horario         BIGINT NOT NULL,
    via             TEXT    NOT NULL CHECK (via IN ('webhook', 'consulta')),
    recorded_at     BIGINT NOT NULL
);
CREATE INDEX pix_received_charge ON pix_received (charge_id);
