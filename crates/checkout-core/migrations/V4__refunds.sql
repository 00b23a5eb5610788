-- A refund (estorno) is an attempt like a payment: written ahead with its own key and bytes,
-- retried with them, replayed after a crash. `refund_of` is the payment attempt it pays back
-- (an approved one), `refund_payment` that attempt's server id, which the request's path names.
ALTER TABLE attempts ADD COLUMN kind TEXT NOT NULL DEFAULT 'pagamento'
    CHECK (kind IN ('pagamento', 'estorno'));
ALTER TABLE attempts ADD COLUMN refund_of TEXT
    CHECK ((kind = 'pagamento') = (refund_of IS NULL));
ALTER TABLE attempts ADD COLUMN refund_payment TEXT
    CHECK ((kind = 'pagamento') = (refund_payment IS NULL));

-- One live attempt per sale concerns payments; a refund of that sale is not a second charge.
DROP INDEX attempts_one_live_per_sale;
CREATE UNIQUE INDEX attempts_one_live_per_sale ON attempts (sale_id)
    WHERE kind = 'pagamento' AND (state = 'pendente' OR (state = 'revisao' AND review_checked_at IS NULL));
-- One live refund per payment: pressing "Estornar" again while one is undecided returns it.
CREATE UNIQUE INDEX attempts_one_live_refund ON attempts (refund_of)
    WHERE kind = 'estorno' AND (state = 'pendente' OR (state = 'revisao' AND review_checked_at IS NULL));
CREATE INDEX attempts_by_refunded ON attempts (refund_of, seq) WHERE kind = 'estorno';

-- The queue counts refunds apart: money going back is not money coming in.
ALTER TABLE queue ADD COLUMN refund_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queue ADD COLUMN refund_total INTEGER NOT NULL DEFAULT 0;
DROP TRIGGER queue_on_insert;
DROP TRIGGER queue_on_leave;
DROP TRIGGER queue_on_enter;
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
