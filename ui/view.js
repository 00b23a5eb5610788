// Draws the screen from the state: the only module that touches the DOM. What to show is
// decided in state.js; this module only puts it on the page.

import {
  brl, connectivityText, controls, current, newest, nextTryText, offlineBanner, pillText,
  statusFor, unfinishedSales,
} from "./state.js";

export const $ = (id) => document.getElementById(id);

function hour(ms) {
  return new Date(ms).toLocaleTimeString("pt-BR", { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

/** Redraws everything from `state`. */
export function render(state) {
  const now = Date.now();
  const a = current(state);
  const [kind, label, detail] = statusFor(state, a, now);
  $("status").dataset.state = kind;
  // Only a changed text is written: the aria-live region announces each change once.
  if ($("status-label").textContent !== label) $("status-label").textContent = label;
  if ($("status-detail").textContent !== detail) $("status-detail").textContent = detail;

  const c = controls(state, a);
  $("pagar").disabled = c.pagarDisabled;
  $("retry-review").hidden = c.retryReviewHidden;
  $("another-card").hidden = c.anotherCardHidden;
  $("nova-venda").hidden = c.novaVendaHidden;
  $("nova-venda").textContent = c.novaVendaText;
  $("valor").disabled = c.valorDisabled;
  $("cartao").disabled = c.cartaoDisabled;
  $("sale-id").textContent = state.saleId || "";

  const conn = $("connectivity");
  conn.dataset.state = state.startupError ? "offline" : state.connectivity;
  conn.textContent = connectivityText(state);

  const offline = state.connectivity !== "online";
  $("offline-banner").hidden = !offline || Boolean(state.startupError);
  if (offline) {
    const banner = offlineBanner(state);
    $("offline-title").textContent = banner.title;
    $("offline-detail").textContent = banner.detail;
  }
  $("offline-banner").dataset.count = String(state.queue.count);

  renderUnfinished(state);
  renderHistory(state);
  renderQa(state);
}

function renderUnfinished(state) {
  const open = unfinishedSales(state);
  $("unfinished").hidden = open.length === 0;
  if (open.length === 0) return;
  $("unfinished-title").textContent = open.length === 1
    ? "1 outra venda com pagamento não concluído:"
    : `${open.length} outras vendas com pagamento não concluído:`;
  $("unfinished-list").replaceChildren(...open.map((a) => {
    const li = document.createElement("li");
    const what = a.state === "revisao" ? "requer revisão" : "pendente — não cobre de novo";
    li.textContent = `${a.sale_id} · ${brl(a.valor)} · ${what}`;
    li.dataset.sale = a.sale_id;
    return li;
  }));
}

function renderHistory(state) {
  const rows = newest(state, 50);
  const body = $("history-rows");
  body.replaceChildren();
  if (rows.length === 0) {
    const tr = document.createElement("tr");
    tr.className = "empty";
    const td = cell("Nenhum pagamento nesta sessão.");
    td.colSpan = 5;
    tr.append(td);
    body.append(tr);
    return;
  }
  for (const a of rows) {
    const tr = document.createElement("tr");
    tr.dataset.attempt = a.id;
    const pill = document.createElement("span");
    pill.className = `pill ${a.state}`;
    pill.textContent = pillText(a.state);
    const st = document.createElement("td");
    st.append(pill);
    tr.append(cell(hour(a.created_at)), cell(a.sale_id, "mono"), cell(brl(a.valor), "num"), st, cell(a.payment_id || "—", "mono"));
    body.append(tr);
  }
}

/** Redraws the QA panel, when it is open. */
export function renderQa(state) {
  if ($("qa-panel").hidden) return;
  const now = Date.now();
  $("qa-offline").checked = state.offlineSimulated;
  const body = $("qa-rows");
  body.replaceChildren();
  for (const a of newest(state, 20)) {
    const tr = document.createElement("tr");
    tr.append(cell(a.id, "mono"), cell(a.idempotency_key, "mono"), cell(String(a.tries), "num"), cell(a.last_error || "—"), cell(nextTryText(a, now)));
    body.append(tr);
  }
}

/** Offers each card token, by its name when it has one. */
export function fillCards(tokens, labels) {
  for (const token of tokens) {
    const opt = document.createElement("option");
    opt.value = token;
    opt.textContent = labels[token] || token;
    $("cartao").append(opt);
  }
}
