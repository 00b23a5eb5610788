-- Sending the notes: when each is due again (its backoff), and what becomes of a note sent
-- normally whose answer was never heard while its customer waited: the sale gets a note in
-- contingência under a new number (`substituta`), and the first is settled later — SEFAZ never
-- had it (its number declared unused: `inutilizada`), or it did authorize it (`a_cancelar`: the
-- sale has two authorized notes until the first is cancelled by substitution). `fiscal` keeps
-- when the till began issuing notes (sales paid before get none) and SEFAZ's block (656).
CREATE TABLE notas_v13 (
    chave             TEXT PRIMARY KEY CHECK (length(chave) = 44),
    sale_id           TEXT NOT NULL,
    serie             INTEGER NOT NULL,
    numero            INTEGER NOT NULL,
    tp_emis           INTEGER NOT NULL CHECK (tp_emis IN (1, 9)),
    total             INTEGER NOT NULL CHECK (total > 0),
    xml               TEXT NOT NULL,
    qrcode            TEXT NOT NULL,
    estado            TEXT NOT NULL CHECK (estado IN ('pendente', 'autorizada', 'rejeitada',
                          'numero_perdido', 'substituida', 'inutilizada', 'a_cancelar')),
    protocolo         TEXT,
    autorizada_em     TEXT,
    c_stat            INTEGER,
    motivo            TEXT,
    tentativas        INTEGER NOT NULL DEFAULT 0,
    emitida_em        INTEGER NOT NULL,
    proxima_tentativa INTEGER NOT NULL DEFAULT 0,
    substituta        TEXT REFERENCES notas_v13 (chave) DEFERRABLE INITIALLY DEFERRED,
    UNIQUE (serie, numero),
    CHECK (estado NOT IN ('autorizada', 'a_cancelar', 'inutilizada') OR protocolo IS NOT NULL),
    CHECK ((estado IN ('substituida', 'inutilizada', 'a_cancelar')) = (substituta IS NOT NULL))
);
INSERT INTO notas_v13 (chave, sale_id, serie, numero, tp_emis, total, xml, qrcode, estado,
                       protocolo, c_stat, motivo, tentativas, emitida_em)
    SELECT chave, sale_id, serie, numero, tp_emis, total, xml, qrcode, estado,
           protocolo, c_stat, motivo, tentativas, emitida_em FROM notas;
DROP TABLE notas;
ALTER TABLE notas_v13 RENAME TO notas;
CREATE UNIQUE INDEX notas_uma_viva_por_venda ON notas (sale_id)
    WHERE estado IN ('pendente', 'autorizada');
CREATE INDEX notas_da_venda ON notas (sale_id);
CREATE INDEX notas_a_enviar ON notas (proxima_tentativa) WHERE estado = 'pendente';
CREATE INDEX notas_substituidas ON notas (emitida_em) WHERE estado = 'substituida';
CREATE TABLE fiscal (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    apos_tentativa INTEGER NOT NULL,
    bloqueada_ate  INTEGER NOT NULL DEFAULT 0
);
