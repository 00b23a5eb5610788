-- The outbox: one row per attempt (never deleted), and the queue's count and total kept by triggers.
CREATE TABLE attempts (
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
    updated_at      INTEGER NOT NULL
);
-- One live attempt per sale: a second key for a sale can only follow a decline.
CREATE UNIQUE INDEX attempts_one_live_per_sale ON attempts (sale_id) WHERE state != 'recusado';
CREATE INDEX attempts_pending_fifo ON attempts (seq) WHERE state = 'pendente';
CREATE INDEX attempts_pending_next ON attempts (next_try_at) WHERE state = 'pendente';

-- The queue's count and total, kept by triggers in the same transaction as each change.
CREATE TABLE queue (id INTEGER PRIMARY KEY CHECK (id = 1), count INTEGER NOT NULL, total INTEGER NOT NULL);
INSERT INTO queue VALUES (1, 0, 0);
CREATE TRIGGER queue_on_insert AFTER INSERT ON attempts WHEN NEW.state = 'pendente'
BEGIN UPDATE queue SET count = count + 1, total = total + NEW.valor WHERE id = 1; END;
CREATE TRIGGER queue_on_leave AFTER UPDATE OF state ON attempts
    WHEN OLD.state = 'pendente' AND NEW.state != 'pendente'
BEGIN UPDATE queue SET count = count - 1, total = total - OLD.valor WHERE id = 1; END;
CREATE TRIGGER queue_on_enter AFTER UPDATE OF state ON attempts
    WHEN OLD.state != 'pendente' AND NEW.state = 'pendente'
BEGIN UPDATE queue SET count = count + 1, total = total + NEW.valor WHERE id = 1; END;
