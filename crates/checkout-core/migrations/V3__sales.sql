-- Sales are numbered per day at this terminal ("Venda nº 0042"): the number a cashier says
-- aloud. The sale id stays what the server sees (in descricao) and what exports carry.
CREATE TABLE sales (
    sale_id   TEXT    PRIMARY KEY,
    day       TEXT    NOT NULL,                    -- YYYY-MM-DD in the store's time zone
    number    INTEGER NOT NULL CHECK (number > 0),
    opened_at INTEGER NOT NULL,
    UNIQUE (day, number)
);
-- One closing per day ("fechar caixa"): the reconciliation as it was shown, kept as JSON.
CREATE TABLE closings (
    day       TEXT    PRIMARY KEY,
    closed_at INTEGER NOT NULL,
    report    TEXT    NOT NULL
);
