// The screen's state and how it changes: a fresh state, the attempts kept (newest view of each,
// bounded), the engine's events, snapshots, the open sale, and the core's views of sales. No DOM.
import { isRefund } from "./attempt.js";
import { upsertNota } from "./nota.js";

/** A fresh screen state. */
export function createState() {
  return {
    ready: false,
    saleId: null, // the sale open at the till, as the outbox keeps it
    saleNumber: null, // its number that day ("Venda nº 0042")
    dialog: null, // "receipt" or "closing" while one is open
    utcOffsetMinutes: -180, // the store's offset from UTC (the app says; receipts use the same)
    attemptId: null, // the current sale's latest attempt
    pressing: false, // between the press and pay's answer
    pixCancelling: false, // between "Cancelar Pix" and its answer
    // A cancel of a Pix the server did not confirm: `{id, kind, message}`; shown while that Pix
    // still waits, which then shows its own end (received, cancelled, expired) as it comes.
    pixCancel: null,
    machineCancelling: false, // between "Cancelar pedido" (the card machine's) and its answer
    // A cancel of a machine order that did not end it (the machine holds it, or no answer):
    // `{id, kind, message}`, shown while that order still waits.
    machineCancel: null,
    maquininha: null, // the card machine beside this till, if any (the app says)
    anotherCard: false, // after a review found no charge, the cashier chose to try another card
    splitOn: false, // "Dividir pagamento": the sale is paid in parts, against its total
    cancelSale: { armed: false, error: null }, // "Cancelar venda": a first click arms, a second confirms
    carriedOver: new Set(), // sales left unfinished by an earlier run (a crash, a restart, a reload)
    error: null, // a refusal of the last press (nothing was stored)
    startupError: null, // the app could not start: nothing can be paid
    startupKind: null, // why: `other_window`, or `startup` (a configuration to correct)
    attempts: new Map(),
    // The core's view of each sale the window shows (sale id → SaleView): what it may show and
    // offer, decided in Rust (`checkout-core` `sale_view.rs`); the window only reads it.
    sales: new Map(),
    // Each sale's NFC-e (sale id → key → note with `enviar_ate`), as the engine last said.
    notas: new Map(),
    queue: { count: 0, total: 0 },
    connectivity: "unknown",
    // Why the server cannot be used (a pt-BR sentence from the engine), while it cannot.
    connectivityProblem: null,
    offlineSimulated: false,
    // The refund dialog while open: { payment, info, step: "form" | "confirm" | "sent", valor,
    // motivo, attemptId, error, pressing }.
    refund: null,
    // "Manter" of a Pix paid after it was cancelled: the row armed by a first click (the second
    // keeps it), a click under way, and the refusal of the last one.
    keep: { armed: null, pressing: false, error: null },
    // How many queue and connectivity events have arrived: a snapshot asked for before one of
    // them must not put back the older value it read.
    seen: { queue: 0, connectivity: 0 },
  };
}

/** The attempt the screen follows: the open sale's latest payment. */
export function current(state) {
  return state.attemptId ? state.attempts.get(state.attemptId) : null;
}

/** How many settled attempts the window keeps (the snapshot sends as many: `WINDOW_ATTEMPTS` in
 * `src-tauri/src/commands.rs`). The history shows 50, the QA panel 20; unsettled attempts and the
 * one on screen are always kept. Without a bound a till that runs for months would hold every
 * attempt it ever made. */
export const KEEP_ATTEMPTS = 200;

/** Drops the oldest settled attempts past `keep`, never an unsettled one or the one on screen. */
export function prune(state, keep = KEEP_ATTEMPTS) {
  if (state.attempts.size <= keep) return;
  const settled = [...state.attempts.values()]
    .filter((a) => a.state !== "pendente" && a.state !== "revisao" && a.id !== state.attemptId)
    .sort((x, y) => y.created_at - x.created_at);
  for (const a of settled.slice(keep)) state.attempts.delete(a.id);
  const shown = new Set([...state.attempts.values()].map((a) => a.sale_id));
  for (const sale of state.sales.keys()) if (!shown.has(sale)) state.sales.delete(sale);
  // A sale's notes go with it too (every sale has one): a dialog opened on it later asks for them.
  for (const sale of state.notas.keys()) if (!shown.has(sale)) state.notas.delete(sale);
}

/** Keeps the newest view of an attempt: `pay`'s answer can arrive after the events that followed it. */
export function upsert(state, a) {
  const old = state.attempts.get(a.id);
  const rank = (x) => [x.updated_at, x.tries, x.state === "pendente" ? 0 : 1];
  const newer = (x, y) => {
    const [rx, ry] = [rank(x), rank(y)];
    for (let i = 0; i < rx.length; i++) if (rx[i] !== ry[i]) return rx[i] > ry[i];
    return true;
  };
  if (!old || newer(a, old)) state.attempts.set(a.id, a);
  // Pruned in steps, not on every attempt: sorting 200 attempts per event would be waste.
  if (state.attempts.size > KEEP_ATTEMPTS + 50) prune(state);
}

/** Takes the core's views of sales (`SaleView`: a divided sale's standing, each payment's
 * refunds, the late Pix that may be kept), keeping the newer of two views of a sale. */
export function applySaleViews(state, views) {
  for (const v of views || []) {
    const old = state.sales.get(v.sale_id);
    if (!old || v.as_of >= old.as_of) state.sales.set(v.sale_id, v);
  }
}

/** Applies one engine event. */
export function applyEvent(state, e) {
  if (e.type === "attempt_changed") {
    upsert(state, e.attempt);
    // A new payment attempt of the open sale (another card) becomes the one the screen follows;
    // a refund of it is followed by the refund dialog.
    const cur = current(state);
    if (!isRefund(e.attempt) && e.attempt.sale_id === state.saleId && (!cur || e.attempt.created_at >= cur.created_at)) {
      state.attemptId = e.attempt.id;
    }
  } else if (e.type === "queue_changed") {
    state.queue = e.queue;
    state.seen.queue += 1;
  } else if (e.type === "nota_changed") {
    upsertNota(state, { ...e.nota, enviar_ate: e.enviar_ate });
  } else if (e.type === "connectivity_changed") {
    state.connectivity = e.connectivity;
    state.connectivityProblem = e.problema || null;
    state.seen.connectivity += 1;
  }
}

/** What a snapshot asked for now must not overwrite if newer events arrive before its answer. */
export function snapshotMark(state) {
  return { ...state.seen };
}

/** Applies a full snapshot (on start, and after the event stream lagged), asked for at `mark`:
 * an attempt keeps its newest view, and the queue and connectivity are taken from the snapshot
 * only if no event about them arrived while it was on its way. */
export function applySnapshot(state, snap, mark) {
  for (const a of snap.attempts) upsert(state, a);
  applySaleViews(state, snap.vendas);
  if (state.seen.queue === mark.queue) state.queue = snap.queue;
  if (state.seen.connectivity === mark.connectivity) {
    state.connectivity = snap.connectivity;
    state.connectivityProblem = snap.connectivity_problem || null;
  }
  state.offlineSimulated = snap.offline_simulated;
}

/** Applies the open sale as the outbox keeps it, and the other sales left unfinished. */
export function applyOpenSale(state, open) {
  state.saleId = open.sale;
  state.saleNumber = open.numero == null ? null : open.numero;
  state.attemptId = open.attempt ? open.attempt.id : null;
  if (open.attempt) upsert(state, open.attempt);
  for (const a of open.unfinished) {
    upsert(state, a);
    state.carriedOver.add(a.sale_id);
  }
}
