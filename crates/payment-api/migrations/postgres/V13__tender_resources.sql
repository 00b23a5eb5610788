-- What the split-sale guard (store/sales.rs) reads of a part's own resource, for every means
-- whose part keeps one before, or instead of, a payment row: a row per part's key saying whether
-- the resource was closed (the part holds nothing of its sale) and whether it was paid after it
-- was closed (that money is the customer's, to give back). A new such means adds its branch
-- (UNION ALL) in a migration of its own; the guard's SQL names no means.
CREATE VIEW tender_resources AS
SELECT merchant, idempotency_key,
       status IN ('expirado', 'cancelado', 'recebido_apos_cancelamento') AS fechado,
       status = 'recebido_apos_cancelamento' AS apos_fechamento
  FROM pix_charges;
