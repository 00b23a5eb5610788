-- How a card attempt pays: `debito`, `credito`, `voucher`, or `credito:<n>:<loja|emissor>` for
-- a parcelado (the payment API's own form). NULL: a card attempt that named no method (the
-- gateway's default, crédito à vista), or a Pix.
ALTER TABLE attempts ADD COLUMN plano TEXT;
