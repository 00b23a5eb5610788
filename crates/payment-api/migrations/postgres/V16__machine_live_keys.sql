-- A card-machine order still waiting can be paid by a card at the machine, like a waiting Pix:
-- the reaper keeps its key past the retention (`LIVE_KEY`), so that a cancel by key finds the
-- order instead of burning the key, and a retry replays the order instead of asking again.
-- The check reads only the open orders, as V15's do for Pix and authorizations.
CREATE INDEX machine_orders_live_key ON machine_orders (merchant, idempotency_key)
    WHERE status = 'aguardando';
