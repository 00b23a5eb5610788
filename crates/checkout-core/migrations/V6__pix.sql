-- Pix. An attempt records how the customer pays (`metodo`); a Pix attempt has no card (its
-- `cartao` column is empty). It stays `pendente` while its charge waits for the customer, like a
-- payment whose outcome is not known yet: one live attempt per sale, replayed after a crash. What
-- the server last said of its charge (the QR's text, the expiry, the end-to-end id once paid) is
-- kept beside it, one row per attempt, written in the same transaction as the attempt's state.
ALTER TABLE attempts ADD COLUMN metodo TEXT NOT NULL DEFAULT 'cartao' CHECK (metodo IN ('cartao', 'pix'));
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
