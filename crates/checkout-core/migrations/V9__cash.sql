-- Cash ("dinheiro"): a cash payment is an attempt like any other — its sale, its number, the
-- history, the export and the closing see it — made `aprovado` at once and never sent (nothing
-- to charge; its key is never used). It records what the customer handed over (`recebido`), so
-- the change is `recebido - valor`, never negative (the CHECK). SQLite cannot change a CHECK in
-- place, so `attempts` is rebuilt with the same rows, indexes and triggers, and `pix`, whose
-- rows point at it, is set aside and put back after it.
CREATE TABLE pix_kept AS SELECT * FROM pix;
DROP TABLE pix;
CREATE TABLE attempts_v9 (
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
    metodo          TEXT    NOT NULL DEFAULT 'cartao' CHECK (metodo IN ('cartao', 'pix', 'dinheiro')),
    plano           TEXT,
    recebido        INTEGER CHECK (recebido IS NULL OR (metodo = 'dinheiro' AND recebido >= valor)),
    CHECK (metodo != 'dinheiro' OR state = 'aprovado')
);
INSERT INTO attempts_v9 (seq, id, sale_id, idempotency_key, valor, cartao, request_body, state, tries,
                         next_try_at, last_tried_at, last_error, response_status, response_body,
                         payment_id, motivo, created_at, updated_at, review_checked_at, kind,
                         refund_of, refund_payment, metodo, plano)
SELECT seq, id, sale_id, idempotency_key, valor, cartao, request_body, state, tries,
       next_try_at, last_tried_at, last_error, response_status, response_body,
       payment_id, motivo, created_at, updated_at, review_checked_at, kind,
       refund_of, refund_payment, metodo, plano
  FROM attempts;
DROP TABLE attempts;
ALTER TABLE attempts_v9 RENAME TO attempts;
CREATE INDEX attempts_pending_fifo ON attempts (seq) WHERE state = 'pendente';
CREATE INDEX attempts_pending_next ON attempts (next_try_at) WHERE state = 'pendente';
CREATE INDEX attempts_by_sale ON attempts (sale_id, seq);
CREATE INDEX attempts_review ON attempts (seq) WHERE state = 'revisao';
CREATE UNIQUE INDEX attempts_one_live_per_sale ON attempts (sale_id)
    WHERE kind = 'pagamento' AND (state = 'pendente' OR (state = 'revisao' AND review_checked_at IS NULL));
CREATE UNIQUE INDEX attempts_one_live_refund ON attempts (refund_of)
    WHERE kind = 'estorno' AND (state = 'pendente' OR (state = 'revisao' AND review_checked_at IS NULL));
CREATE INDEX attempts_by_refunded ON attempts (refund_of, seq) WHERE kind = 'estorno';
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
-- The cash drawer ("gaveta") of a store day: the float it opened with, cash taken out (sangria)
-- or put in (suprimento), each with its time and reason, and the amounts counted. Cash sales and
-- cash given back are the attempts above; what the drawer should hold is their sum with these.
CREATE TABLE drawer (
    seq     INTEGER PRIMARY KEY,
    day     TEXT    NOT NULL,
    kind    TEXT    NOT NULL CHECK (kind IN ('abertura', 'sangria', 'suprimento', 'contagem')),
    valor   INTEGER NOT NULL CHECK (valor >= 0 AND (valor > 0 OR kind = 'contagem')),
    motivo  TEXT,
    at      INTEGER NOT NULL
);
CREATE UNIQUE INDEX drawer_one_opening ON drawer (day) WHERE kind = 'abertura';
CREATE INDEX drawer_by_day ON drawer (day, seq);
