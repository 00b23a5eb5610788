-- The sale's NFC-e, written ahead: a série's next number, and each note signed and stored before
-- its first send, never rebuilt (its key, its XML, its QR Code), with what SEFAZ said of it. One
-- number one note (UNIQUE (serie, numero)); one live note per sale (a partial unique index: a
-- note rejected or whose number was spent no longer counts).
CREATE TABLE fiscal_series (
    serie    INTEGER PRIMARY KEY CHECK (serie BETWEEN 0 AND 999),
    proximo  INTEGER NOT NULL CHECK (proximo BETWEEN 1 AND 999999999)
);
CREATE TABLE notas (
    chave       TEXT PRIMARY KEY CHECK (length(chave) = 44),
    sale_id     TEXT NOT NULL,
    serie       INTEGER NOT NULL,
    numero      INTEGER NOT NULL,
    tp_emis     INTEGER NOT NULL CHECK (tp_emis IN (1, 9)),
    total       INTEGER NOT NULL CHECK (total > 0),
    xml         TEXT NOT NULL,
    qrcode      TEXT NOT NULL,
    estado      TEXT NOT NULL CHECK (estado IN ('pendente', 'autorizada', 'rejeitada', 'numero_perdido')),
    protocolo   TEXT,
    c_stat      INTEGER,
    motivo      TEXT,
    tentativas  INTEGER NOT NULL DEFAULT 0,
    emitida_em  INTEGER NOT NULL,
    UNIQUE (serie, numero),
    CHECK (estado <> 'autorizada' OR protocolo IS NOT NULL)
);
CREATE UNIQUE INDEX notas_uma_viva_por_venda ON notas (sale_id)
    WHERE estado IN ('pendente', 'autorizada');
CREATE INDEX notas_pendentes ON notas (emitida_em) WHERE estado = 'pendente';
