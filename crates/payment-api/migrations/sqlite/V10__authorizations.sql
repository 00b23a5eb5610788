-- A card payment authorized first (`"captura": false`) and captured or undone later. NULL:
-- captured with its charge. The gateway's ledger keeps its own state of the authorization, moved
-- once from 'pendente' by a guarded UPDATE: a capture and an undo never both take effect.
ALTER TABLE payments ADD COLUMN captura text
    CHECK (captura IN ('pendente', 'capturada', 'desfeita', 'expirada'));
ALTER TABLE payments ADD COLUMN autorizacao_expira_em INTEGER;
ALTER TABLE gateway_ledger ADD COLUMN captura text
    CHECK (captura IN ('pendente', 'capturada', 'desfeita', 'expirada'));
ALTER TABLE gateway_ledger ADD COLUMN captura_expira_em INTEGER;
-- The reaper's pass over authorizations past their time.
CREATE INDEX payments_open_authorizations ON payments (autorizacao_expira_em)
    WHERE captura = 'pendente';
