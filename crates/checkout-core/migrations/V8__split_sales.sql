-- A sale paid in parts ("pagamento misto") has a total; each tender is its own payment attempt
-- with its own key, one at a time, and the sale is paid when its approved tenders (less what was
-- paid back) reach the total. NULL: a sale paid at once, as before.
ALTER TABLE sales ADD COLUMN total INTEGER CHECK (total IS NULL OR total > 0);
