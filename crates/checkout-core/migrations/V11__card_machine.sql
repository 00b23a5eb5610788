-- A card at the card machine ("maquininha"): an attempt sent like a Pix, answered `aguardando`
-- by the server, and followed until the machine's provider says how it ended; what the server
-- last said of its order is kept beside it (`machine_orders`).
--
-- `metodo`'s list of means moves from a CHECK to two triggers, so a means added later replaces
-- the triggers instead of rebuilding the table: SQLite cannot change a CHECK in place, so
-- `attempts` is rebuilt once more (the same rows, indexes and triggers), with `pix`, whose rows
-- point at it, set aside and put back after it.
CREATE TABLE pix_kept AS SELECT * FROM pix;
DROP TABLE pix;
CREATE TABLE attempts_v11 (
    seq             INTEGER PRIMARY KEY, -- rowid: attempts are never deleted, so it only grows
    id              TEXT    NOT NULL UNIQUE,
    sale_id         TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL UNIQUE,
    valor           INTEGER NOT NULL CHECK (valor > 0),
    cartao          TEXT    NOT NULL,
    request_body    BLOB    NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN ('pendente', 'aprovado', 'recusado', 'revisao')),
    tries           INTEGER NOT NULL DEFAULT 0,
    next_try_at     INTEGER NOT NULL,
    last_tried_at   INTEGER,
    last_error      TEXT,
    response_status INTEGER,
    response_body   BLOB,
    payment_id      TEXT,
    motivo          TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    review_checked_at INTEGER,
    kind            TEXT    NOT NULL DEFAULT 'pagamento' CHECK (kind IN ('pagamento', 'estorno')),
    refund_of       TEXT    CHECK ((kind = 'pagamento') = (refund_of IS NULL)),
    refund_payment  TEXT    CHECK ((kind = 'pagamento') = (refund_payment IS NULL) OR metodo = 'dinheiro'),
    metodo          TEXT    NOT NULL DEFAULT 'cartao',
    plano           TEXT,
    recebido        INTEGER CHECK (recebido IS NULL OR (metodo = 'dinheiro' AND recebido >= valor)),
    captura         TEXT    CHECK (captura IN
                        ('pendente', 'capturar', 'desfazer', 'capturada', 'desfeita', 'expirada')),
    captura_key     TEXT,
    captura_next_at INTEGER,
    captura_tries   INTEGER NOT NULL DEFAULT 0,
    captura_error   TEXT,
    captura_por     TEXT    CHECK (captura_por IN ('confirmacao', 'cancelamento', 'reinicio')),
    CHECK (metodo != 'dinheiro' OR state = 'aprovado')
);
INSERT INTO attempts_v11 (seq, id, sale_id, idempotency_key, valor, cartao, request_body, state,
                          tries, next_try_at, last_tried_at, last_error, response_status,
                          response_body, payment_id, motivo, created_at, updated_at,
                          review_checked_at, kind, refund_of, refund_payment, metodo, plano,
                          recebido, captura, captura_key, captura_next_at, captura_tries,
                          captura_error, captura_por)
SELECT seq, id, sale_id, idempotency_key, valor, cartao, request_body, state,
       tries, next_try_at, last_tried_at, last_error, response_status,
       response_body, payment_id, motivo, created_at, updated_at,
       review_checked_at, kind, refund_of, refund_payment, metodo, plano,
       recebido, captura, captura_key, captura_next_at, captura_tries,
       captura_error, captura_por
  FROM attempts;
DROP TABLE attempts;
ALTER TABLE attempts_v11 RENAME TO attempts;
CREATE INDEX attempts_pending_fifo ON attempts (seq) WHERE state = 'pendente';
CREATE INDEX attempts_pending_next ON attempts (next_try_at) WHERE state = 'pendente';
CREATE INDEX attempts_by_sale ON attempts (sale_id, seq);
CREATE INDEX attempts_review ON attempts (seq) WHERE state = 'revisao';
CREATE UNIQUE INDEX attempts_one_live_per_sale ON attempts (sale_id)
    WHERE kind = 'pagamento' AND (state = 'pendente' OR (state = 'revisao' AND review_checked_at IS NULL));
CREATE UNIQUE INDEX attempts_one_live_refund ON attempts (refund_of)
    WHERE kind = 'estorno' AND (state = 'pendente' OR (state = 'revisao' AND review_checked_at IS NULL));
CREATE INDEX attempts_by_refunded ON attempts (refund_of, seq) WHERE kind = 'estorno';
CREATE UNIQUE INDEX attempts_captura_key ON attempts (captura_key) WHERE captura_key IS NOT NULL;
CREATE INDEX attempts_captura_due ON attempts (captura_next_at)
    WHERE captura IN ('capturar', 'desfazer');
CREATE INDEX attempts_captura_open ON attempts (seq) WHERE captura = 'pendente';
CREATE TRIGGER queue_on_insert AFTER INSERT ON attempts WHEN NEW.state = 'pendente'
BEGIN
    UPDATE queue SET count = count + (NEW.kind = 'pagamento'),
                     total = total + IIF(NEW.kind = 'pagamento', NEW.valor, 0),
                     refund_count = refund_count + (NEW.kind = 'estorno'),
                     refund_total = refund_total + IIF(NEW.kind = 'estorno', NEW.valor, 0)
     WHERE id = 1;
END;
CREATE TRIGGER queue_on_leave AFTER UPDATE OF state ON attempts
    WHEN OLD.state = 'pendente' AND NEW.state != 'pendente'
BEGIN
    UPDATE queue SET count = count - (OLD.kind = 'pagamento'),
                     total = total - IIF(OLD.kind = 'pagamento', OLD.valor, 0),
                     refund_count = refund_count - (OLD.kind = 'estorno'),
                     refund_total = refund_total - IIF(OLD.kind = 'estorno', OLD.valor, 0)
     WHERE id = 1;
END;
CREATE TRIGGER queue_on_enter AFTER UPDATE OF state ON attempts
    WHEN OLD.state != 'pendente' AND NEW.state = 'pendente'
BEGIN
    UPDATE queue SET count = count + (NEW.kind = 'pagamento'),
                     total = total + IIF(NEW.kind = 'pagamento', NEW.valor, 0),
                     refund_count = refund_count + (NEW.kind = 'estorno'),
                     refund_total = refund_total + IIF(NEW.kind = 'estorno', NEW.valor, 0)
     WHERE id = 1;
END;
CREATE TRIGGER attempts_no_new_key_while_in_review BEFORE INSERT ON attempts
    WHEN NEW.kind = 'pagamento' AND EXISTS (
        SELECT 1 FROM attempts
         WHERE sale_id = NEW.sale_id AND kind = 'pagamento' AND state = 'revisao')
BEGIN
    SELECT RAISE(ABORT, 'venda com pagamento em revisão: cancele a chave antes de criar outra');
END;
CREATE TRIGGER attempts_captura_one_way
BEFORE UPDATE OF captura ON attempts
WHEN OLD.captura IS NOT NEW.captura AND NOT (
       (OLD.captura IS NULL AND NEW.captura = 'pendente')
    OR (OLD.captura = 'pendente'
        AND NEW.captura IN ('capturar', 'desfazer', 'capturada', 'desfeita', 'expirada'))
    OR (OLD.captura IN ('capturar', 'desfazer')
        AND NEW.captura IN ('capturada', 'desfeita', 'expirada')))
BEGIN
    SELECT RAISE(ABORT, 'captura: uma autorização decidida não muda de decisão');
END;
-- The means an attempt may have (`Means::ALL`; a schema test holds the two together). A new
-- means drops and creates these two triggers with its name added.
CREATE TRIGGER attempts_metodo_known_on_insert BEFORE INSERT ON attempts
    WHEN NEW.metodo NOT IN ('cartao', 'pix', 'dinheiro', 'maquininha')
BEGIN
    SELECT RAISE(ABORT, 'metodo desconhecido');
END;
CREATE TRIGGER attempts_metodo_known_on_update BEFORE UPDATE OF metodo ON attempts
    WHEN NEW.metodo NOT IN ('cartao', 'pix', 'dinheiro', 'maquininha')
BEGIN
    SELECT RAISE(ABORT, 'metodo desconhecido');
END;
CREATE TABLE pix (
    attempt_id   TEXT    PRIMARY KEY REFERENCES attempts (id),
    payment_id   TEXT    NOT NULL,
    txid         TEXT    NOT NULL,
    copia_e_cola TEXT    NOT NULL,
    expira_em    INTEGER NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN
                     ('aguardando', 'aprovado', 'expirado', 'cancelado', 'recebido_apos_cancelamento')),
    e2eid        TEXT,
    pago_em      INTEGER,
    updated_at   INTEGER NOT NULL
);
INSERT INTO pix SELECT * FROM pix_kept;
DROP TABLE pix_kept;
-- What the server last said of a card-machine attempt's order.
CREATE TABLE machine_orders (
    attempt_id   TEXT    PRIMARY KEY REFERENCES attempts (id),
    payment_id   TEXT    NOT NULL,
    maquininha   TEXT    NOT NULL,
    pedido       TEXT    NOT NULL,
    estado       TEXT    NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN
                     ('aguardando', 'aprovado', 'recusado', 'cancelado', 'expirado')),
    motivo       TEXT,
    pago_com     TEXT    CHECK (pago_com IN ('debito', 'credito', 'voucher')),
    updated_at   INTEGER NOT NULL
);
