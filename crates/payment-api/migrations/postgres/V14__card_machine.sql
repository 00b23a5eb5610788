-- Cards at the card machine (`"maquininha"` in `POST /pagamentos`). An order is made at the
-- machine's provider under an X-Idempotency-Key derived from the payment key (so a retry or a
-- takeover asks for the same order), answered `aguardando`, and settled later by a signed
-- notification or a poll of the provider. A paid order becomes a payment row (`meio`
-- `maquininha`, `cobranca_id` the order id) in the same transaction as its status. An order
-- the provider closed (declined, cancelled, expired) can no longer be paid: there is no
-- "paid after closing" state, unlike a Pix.
CREATE TABLE machine_orders (
    id              TEXT    PRIMARY KEY,
    merchant        TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    order_id        TEXT    NOT NULL UNIQUE,
    maquininha      TEXT    NOT NULL,
    valor           BIGINT NOT NULL CHECK (valor > 0),
    plano           TEXT,
    status          TEXT    NOT NULL CHECK (status IN
                        ('aguardando', 'aprovado', 'recusado', 'cancelado', 'expirado')),
    estado          TEXT    NOT NULL,
    motivo          TEXT,
    plano_pago      TEXT,
    descricao       TEXT,
    referencia      TEXT,
    terminal        TEXT,
    fingerprint     TEXT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
CREATE INDEX machine_orders_referencia ON machine_orders (merchant, referencia);
CREATE INDEX machine_orders_key ON machine_orders (merchant, idempotency_key);
CREATE INDEX machine_orders_waiting ON machine_orders (updated_at) WHERE status = 'aguardando';
-- The split-sale guard's view gains the machine's branch: an order closed unpaid holds nothing
-- of its sale; none is ever paid after it was closed.
DROP VIEW tender_resources;
CREATE VIEW tender_resources AS
SELECT merchant, idempotency_key,
       status IN ('expirado', 'cancelado', 'recebido_apos_cancelamento') AS fechado,
       status = 'recebido_apos_cancelamento' AS apos_fechamento
  FROM pix_charges
UNION ALL
SELECT merchant, idempotency_key,
       status IN ('recusado', 'cancelado', 'expirado') AS fechado,
       FALSE AS apos_fechamento
  FROM machine_orders;
