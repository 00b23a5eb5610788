-- Cancelling an authorized note: a note set aside that SEFAZ turns out to have authorized is
-- cancelled by substitution (evento 110112, naming the note in contingência that replaced it:
-- `substituta`), and the note of a sale paid back in full is cancelled (evento 110111, no
-- `substituta`). The event is signed and stored in the write that decides it (`evento`), before
-- it is sent, and sent again as it is until SEFAZ registers it (`cancelada`, its protocol in
-- `cancelamento`; 573 means it had it) or refuses it for good (`cancelamento_recusado`: a
-- person's).
CREATE TABLE notas_v14 (
    chave             TEXT PRIMARY KEY CHECK (length(chave) = 44),
    sale_id           TEXT NOT NULL,
    serie             INTEGER NOT NULL,
    numero            INTEGER NOT NULL,
    tp_emis           INTEGER NOT NULL CHECK (tp_emis IN (1, 9)),
    total             INTEGER NOT NULL CHECK (total > 0),
    xml               TEXT NOT NULL,
    qrcode            TEXT NOT NULL,
    estado            TEXT NOT NULL CHECK (estado IN ('pendente', 'autorizada', 'rejeitada',
                          'numero_perdido', 'substituida', 'inutilizada', 'a_cancelar',
                          'cancelada', 'cancelamento_recusado')),
    protocolo         TEXT,
    autorizada_em     TEXT,
    c_stat            INTEGER,
    motivo            TEXT,
    tentativas        INTEGER NOT NULL DEFAULT 0,
    emitida_em        INTEGER NOT NULL,
    proxima_tentativa INTEGER NOT NULL DEFAULT 0,
    substituta        TEXT REFERENCES notas_v14 (chave) DEFERRABLE INITIALLY DEFERRED,
    evento            TEXT,
    cancelamento      TEXT,
    UNIQUE (serie, numero),
    CHECK (estado NOT IN ('autorizada', 'a_cancelar', 'inutilizada', 'cancelada',
                          'cancelamento_recusado') OR protocolo IS NOT NULL),
    CHECK (estado NOT IN ('substituida', 'inutilizada') OR substituta IS NOT NULL),
    CHECK (substituta IS NULL OR estado IN ('substituida', 'inutilizada', 'a_cancelar',
                                            'cancelada', 'cancelamento_recusado')),
    CHECK (estado NOT IN ('a_cancelar', 'cancelada', 'cancelamento_recusado')
           OR evento IS NOT NULL),
    CHECK ((estado = 'cancelada') = (cancelamento IS NOT NULL))
);
-- A note left `a_cancelar` by an earlier version has no event yet: it goes back to `substituida`
-- and is settled again (SEFAZ answers it authorized; the event is signed then).
INSERT INTO notas_v14 (chave, sale_id, serie, numero, tp_emis, total, xml, qrcode, estado,
                       protocolo, autorizada_em, c_stat, motivo, tentativas, emitida_em,
                       proxima_tentativa, substituta)
    SELECT chave, sale_id, serie, numero, tp_emis, total, xml, qrcode,
           CASE estado WHEN 'a_cancelar' THEN 'substituida' ELSE estado END,
           CASE estado WHEN 'a_cancelar' THEN NULL ELSE protocolo END,
           autorizada_em, c_stat, motivo, tentativas, emitida_em, proxima_tentativa, substituta
    FROM notas;
DROP TABLE notas;
ALTER TABLE notas_v14 RENAME TO notas;
CREATE UNIQUE INDEX notas_uma_viva_por_venda ON notas (sale_id)
    WHERE estado IN ('pendente', 'autorizada');
CREATE INDEX notas_da_venda ON notas (sale_id);
CREATE INDEX notas_a_enviar ON notas (proxima_tentativa) WHERE estado = 'pendente';
CREATE INDEX notas_substituidas ON notas (emitida_em) WHERE estado = 'substituida';
CREATE INDEX notas_a_cancelar ON notas (proxima_tentativa) WHERE estado = 'a_cancelar';
