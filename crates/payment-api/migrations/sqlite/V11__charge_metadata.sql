-- What the merchant keeps with a charge at the gateway (JSON: the request's fingerprint, its
-- referencia, descricao and terminal), given back with the charge: a charge found without its
-- request (the server lost its relaxed claim of the key in a power cut; a cancellation by key
-- found the charge) still becomes the payment that request made. NULL: kept without it.
ALTER TABLE gateway_ledger ADD COLUMN metadata text;
