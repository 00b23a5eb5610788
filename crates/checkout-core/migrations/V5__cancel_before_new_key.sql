-- A sale gets a new payment attempt (a new key) only once its earlier one can no longer charge:
-- an attempt in review leaves that state only by a payment found on the server or by its key
-- being cancelled there (recorded as `recusado`, motivo `chave_cancelada`). The database refuses
-- a second key for a sale while one is still in review, whatever the code above it does.
CREATE TRIGGER attempts_no_new_key_while_in_review BEFORE INSERT ON attempts
    WHEN NEW.kind = 'pagamento' AND EXISTS (
        SELECT 1 FROM attempts
         WHERE sale_id = NEW.sale_id AND kind = 'pagamento' AND state = 'revisao')
BEGIN
    SELECT RAISE(ABORT, 'venda com pagamento em revisão: cancele a chave antes de criar outra');
END;
