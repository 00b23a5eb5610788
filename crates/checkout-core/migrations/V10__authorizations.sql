-- A card tender of a divided sale is authorized (`"captura": false`), then captured when the sale
-- is paid and its receipt shown, or undone when the sale is abandoned or the till restarts with
-- it unfinished. NULL: captured with its charge (a sale paid at once, cash, Pix).
--   pendente            authorized, nothing decided yet
--   capturar/desfazer   decided and written ahead with `captura_key`; being sent
--   capturada/desfeita/expirada   what the server said (final)
ALTER TABLE attempts ADD COLUMN captura TEXT CHECK (captura IN
    ('pendente', 'capturar', 'desfazer', 'capturada', 'desfeita', 'expirada'));
ALTER TABLE attempts ADD COLUMN captura_key TEXT;
ALTER TABLE attempts ADD COLUMN captura_next_at INTEGER;
ALTER TABLE attempts ADD COLUMN captura_tries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN captura_error TEXT;
-- Who decided: the sale confirmed ('confirmacao'), given up ('cancelamento'), or a till that
-- started again with it unfinished ('reinicio').
ALTER TABLE attempts ADD COLUMN captura_por TEXT
    CHECK (captura_por IN ('confirmacao', 'cancelamento', 'reinicio'));
CREATE UNIQUE INDEX attempts_captura_key ON attempts (captura_key) WHERE captura_key IS NOT NULL;
CREATE INDEX attempts_captura_due ON attempts (captura_next_at)
    WHERE captura IN ('capturar', 'desfazer');
-- What a starting till undoes: authorizations nobody decided (read at every start).
CREATE INDEX attempts_captura_open ON attempts (seq) WHERE captura = 'pendente';

-- One decision per authorization, never changed: a capture is never turned into an undo (or
-- back), and a final state is final. Only the server's word moves a decision to a final state.
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
