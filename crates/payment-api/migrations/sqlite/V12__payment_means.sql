-- Which means took each payment (`cartao`: the gateway; `pix`: the Pix provider), a column of its
-- own instead of a prefix of `cobranca_id`. A Pix payment's `cobranca_id` becomes its
-- endToEndId, unique per means (a gateway's ids and the Pix network's never share a namespace).
-- The values are checked where the row is read (`Means::parse`), so a new means needs no
-- rebuild of the table.
ALTER TABLE payments ADD COLUMN meio text NOT NULL DEFAULT 'cartao';
UPDATE payments SET meio = 'pix', cobranca_id = substr(cobranca_id, 5) WHERE cobranca_id LIKE 'pix:%';
DROP INDEX payments_cobranca;
CREATE UNIQUE INDEX payments_cobranca ON payments (meio, cobranca_id);
