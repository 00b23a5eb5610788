-- The open sale lives here, not only in the window, so a crash or a reload brings it back.
-- An attempt in `revisao` is checked against the server by `referencia`; only once the
-- server confirmed it has no payment for it may the sale get a new attempt.
CREATE TABLE till (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    sale_id   TEXT    NOT NULL,
    opened_at INTEGER NOT NULL
);
ALTER TABLE attempts ADD COLUMN review_checked_at INTEGER;
DROP INDEX attempts_one_live_per_sale;
CREATE UNIQUE INDEX attempts_one_live_per_sale ON attempts (sale_id)
    WHERE state = 'pendente' OR (state = 'revisao' AND review_checked_at IS NULL);
CREATE INDEX attempts_by_sale ON attempts (sale_id, seq);
CREATE INDEX attempts_review ON attempts (seq) WHERE state = 'revisao';
