-- How a card payment was taken: `debito`, `credito`, `voucher`, or `credito:<n>:<loja|emissor>`
-- for a parcelado (NULL: the request named no method, or a Pix). The gateway's ledger records
-- the plan it charged, so a charge recovered without its request keeps it.
ALTER TABLE payments ADD COLUMN plano TEXT;
ALTER TABLE gateway_ledger ADD COLUMN plano TEXT;
