// Pagar cashier screen. Plain JS over window.__TAURI__ (withGlobalTauri); no bundler.
// The screen is drawn from state: the Pagar button is disabled from the press until the sale's
// attempt is final, and every state has one label, announced through the aria-live status.
"use strict";

const { invoke, Channel } = window.__TAURI__.core;

const CARD_LABELS = {
  tok_aprovado: "Aprovado (teste)",
  tok_recusado: "Recusado (teste)",
  tok_saldo_insuficiente: "Saldo insuficiente (teste)",
  tok_lento: "Lento, aprova em segundos (teste)",
};
const MOTIVOS = { cartao_recusado: "cartão recusado", saldo_insuficiente: "saldo insuficiente" };
const FAULTS = {
  none: {},
  latency: { latency_ms: 2000 },
  drop: { drop_response_probability: 1.0 },
  error5xx: { error_5xx_probability: 0.5 },
};

const state = {
  ready: false,
  saleId: null, // the sale open at the till, as the outbox keeps it
  attemptId: null, // the current sale's latest attempt
  pressing: false, // between the press and pay's answer
  anotherCard: false, // after a review found no charge, the cashier chose to try another card
  carriedOver: new Set(), // sales left unfinished by an earlier run (a crash, a restart, a reload)
  error: null, // a refusal of the last press (nothing was stored)
  startupError: null, // the app could not start: nothing can be paid
  attempts: new Map(),
  queue: { count: 0, total: 0 },
  connectivity: "unknown",
  offlineSimulated: false,
};

const $ = (id) => document.getElementById(id);

function brl(centavos) {
  const neg = centavos < 0;
  const c = Math.abs(centavos);
  const reais = Math.floor(c / 100).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ".");
  return `${neg ? "-" : ""}R$ ${reais},${String(c % 100).padStart(2, "0")}`;
}

/** Centavos as the amount field shows them: `1.234,56`. */
function brlInput(centavos) {
  return brl(centavos).replace("R$ ", "");
}

function hour(ms) {
  return new Date(ms).toLocaleTimeString("pt-BR", { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

function current() {
  return state.attemptId ? state.attempts.get(state.attemptId) : null;
}

function secondsUntil(ms) {
  return Math.max(0, Math.ceil((ms - Date.now()) / 1000));
}

/** The one label (and its detail) for the screen's current state. */
function statusFor(a) {
  if (state.startupError) return ["erro", "Pagar indisponível", "Corrija a configuração indicada acima e abra o app de novo."];
  if (state.error) return ["erro", "Pagamento não registrado", state.error];
  if (state.pressing && !a) return ["pendente", "Processando pagamento…", "Registrando o pagamento antes de enviar."];
  if (!a) return ["idle", "Pronto para cobrar.", ""];
  switch (a.state) {
    case "aprovado":
      return ["aprovado", "Pagamento aprovado", `${brl(a.valor)} · ${a.payment_id || ""}`];
    case "recusado":
      return ["recusado", `Pagamento recusado: ${MOTIVOS[a.motivo] || a.motivo || "sem motivo"}`,
        "Nenhuma cobrança foi feita. Tente outro cartão."];
    case "revisao":
      // Never reads as a decline: a refused try may follow one that charged and lost its answer.
      if (!a.review_checked_at) {
        return ["revisao", "Requer revisão — verificando se houve cobrança…",
          `Consultando o servidor pela referência antes de qualquer nova cobrança. Não cobre de novo. (${a.last_error || "pedido recusado"})`];
      }
      return ["revisao", "Requer revisão — nenhuma cobrança encontrada",
        `O servidor não tem pagamento desta venda (${a.last_error || "pedido recusado"}). Tente de novo com a mesma chave ou use outro cartão.`];
    default: {
      if (a.tries === 0 && state.connectivity !== "offline") {
        return ["pendente", "Processando pagamento…", "Enviando ao servidor. Não cobre de novo."];
      }
      let why;
      // The last error's plain part ("a conexão caiu antes da resposta"), without the details.
      const cause = a.last_error ? ` (${a.last_error.split(" (")[0]})` : "";
      if (state.connectivity !== "online") {
        why = `Sem conexão${cause}: será enviado sozinho quando a rede voltar, com a mesma chave.`;
      } else if (a.next_try_at > Date.now()) {
        why = `Nova tentativa em ${secondsUntil(a.next_try_at)} s, com a mesma chave.`;
      } else {
        why = "Enviando de novo, com a mesma chave.";
      }
      return ["pendente", "Pagamento pendente — não cobre de novo", why];
    }
  }
}

function render() {
  const a = current();
  const [kind, label, detail] = statusFor(a);
  const status = $("status");
  status.dataset.state = kind;
  if ($("status-label").textContent !== label) $("status-label").textContent = label;
  if ($("status-detail").textContent !== detail) $("status-detail").textContent = detail;

  // Disabled by state: from the press until the attempt is final. A decline may be retried with
  // another card (a new attempt); a review only once the server confirmed it has no charge for
  // it and the cashier chose "Outro cartão"; an approval waits for "Nova venda".
  const live = Boolean(a && a.state === "pendente");
  const review = Boolean(a && a.state === "revisao");
  const checked = review && Boolean(a.review_checked_at);
  const approved = Boolean(a && a.state === "aprovado");
  const offline = state.connectivity !== "online";
  $("pagar").disabled = !state.ready || state.pressing || live || approved || (review && !(checked && state.anotherCard));
  $("retry-review").hidden = !checked || state.pressing;
  $("another-card").hidden = !checked || state.anotherCard || state.pressing;
  // A new sale starts once this one is settled. A payment waiting offline was accepted under
  // the offline caps and is sent by itself, so the next customer may be served meanwhile.
  const settled = Boolean(a && (a.state === "recusado" || approved || checked));
  const queued = live && state.connectivity === "offline";
  $("nova-venda").hidden = state.pressing || !(settled || queued);
  $("nova-venda").textContent = queued ? "Próxima venda (este pagamento segue na fila)" : "Nova venda";
  $("valor").disabled = Boolean(live || approved || review || state.pressing);
  $("cartao").disabled = Boolean(live || approved || (review && !state.anotherCard) || state.pressing);
  $("sale-id").textContent = state.saleId || "";

  const conn = $("connectivity");
  conn.dataset.state = state.startupError ? "offline" : state.connectivity;
  conn.textContent = state.startupError
    ? "Parado"
    : { online: "Online", offline: "Offline", unknown: "Conectando…" }[state.connectivity];

  $("offline-banner").hidden = !offline || Boolean(state.startupError);
  $("offline-title").textContent = state.connectivity === "unknown"
    ? "Verificando a conexão com o servidor de pagamentos…"
    : "Sem conexão com o servidor de pagamentos.";
  if (offline) {
    const n = state.queue.count;
    $("offline-detail").textContent = n === 0
      ? "Nenhum pagamento aguardando."
      : `${n} ${n === 1 ? "pagamento aguardando" : "pagamentos aguardando"} · ${brl(state.queue.total)} — serão enviados sozinhos quando a rede voltar.`;
  }
  $("offline-banner").dataset.count = String(state.queue.count);

  renderUnfinished();
  renderHistory();
  renderQa();
}

/** The latest attempt of every other sale still unsettled that the cashier did not just queue:
 * left by an earlier run, or in review. */
function unfinishedSales() {
  const latest = new Map();
  for (const a of state.attempts.values()) {
    const seen = latest.get(a.sale_id);
    if (!seen || a.created_at >= seen.created_at) latest.set(a.sale_id, a);
  }
  return [...latest.values()]
    .filter((a) => a.sale_id !== state.saleId && (a.state === "pendente" || a.state === "revisao"))
    .filter((a) => a.state === "revisao" || state.carriedOver.has(a.sale_id))
    .sort((x, y) => x.created_at - y.created_at);
}

function renderUnfinished() {
  const open = unfinishedSales();
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

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function renderHistory() {
  const rows = [...state.attempts.values()].sort((x, y) => y.created_at - x.created_at).slice(0, 50);
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
    pill.textContent = a.state === "revisao" ? "revisão" : a.state;
    const st = document.createElement("td");
    st.append(pill);
    tr.append(cell(hour(a.created_at)), cell(a.sale_id, "mono"), cell(brl(a.valor), "num"), st, cell(a.payment_id || "—", "mono"));
    body.append(tr);
  }
}

function renderQa() {
  if ($("qa-panel").hidden) return;
  $("qa-offline").checked = state.offlineSimulated;
  const body = $("qa-rows");
  body.replaceChildren();
  const rows = [...state.attempts.values()].sort((x, y) => y.created_at - x.created_at).slice(0, 20);
  for (const a of rows) {
    const tr = document.createElement("tr");
    const next = a.state === "pendente" ? (a.next_try_at > Date.now() ? `em ${secondsUntil(a.next_try_at)} s` : "agora") : "—";
    tr.append(cell(a.id, "mono"), cell(a.idempotency_key, "mono"), cell(String(a.tries), "num"), cell(a.last_error || "—"), cell(next));
    body.append(tr);
  }
}

/** Keeps the newest view of an attempt: `pay`'s answer can arrive after the events that followed it. */
function upsert(a) {
  const old = state.attempts.get(a.id);
  const rank = (x) => [x.updated_at, x.tries, x.state === "pendente" ? 0 : 1];
  const newer = (x, y) => {
    const [rx, ry] = [rank(x), rank(y)];
    for (let i = 0; i < rx.length; i++) if (rx[i] !== ry[i]) return rx[i] > ry[i];
    return true;
  };
  if (!old || newer(a, old)) state.attempts.set(a.id, a);
}

function onEvent(e) {
  if (e.type === "attempt_changed") {
    upsert(e.attempt);
    // A new attempt of the open sale (another card) becomes the one the screen follows.
    const cur = current();
    if (e.attempt.sale_id === state.saleId && (!cur || e.attempt.created_at >= cur.created_at)) {
      state.attemptId = e.attempt.id;
    }
  }
  else if (e.type === "queue_changed") state.queue = e.queue;
  else if (e.type === "connectivity_changed") state.connectivity = e.connectivity;
  render();
}

async function press(ev) {
  ev.preventDefault();
  // Synchronous guard: a double click, a held Enter or a burst of clicks ends here.
  if ($("pagar").disabled || state.pressing) return;
  state.pressing = true;
  state.error = null;
  $("pagar").disabled = true;
  render();
  try {
    const reply = await invoke("pay", { saleId: state.saleId, valor: $("valor").value, cartao: $("cartao").value });
    upsert(reply.attempt);
    state.attemptId = reply.attempt.id;
    state.anotherCard = false;
  } catch (err) {
    state.error = err && err.message ? err.message : String(err);
  } finally {
    state.pressing = false;
    render();
  }
}

async function newSale() {
  try {
    state.saleId = await invoke("new_sale");
  } catch (err) {
    state.error = err && err.message ? err.message : String(err);
    render();
    return;
  }
  state.attemptId = null;
  state.anotherCard = false;
  state.error = null;
  $("valor").value = "";
  render();
  $("valor").focus();
}

async function retryReview() {
  const a = current();
  if (!a) return;
  try {
    upsert(await invoke("retry_review", { attemptId: a.id }));
    state.error = null;
  } catch (err) {
    state.error = err && err.message ? err.message : String(err);
  }
  render();
}

function anotherCard() {
  state.anotherCard = true;
  state.error = null;
  render();
  $("cartao").focus();
}

/** Draws the till as the outbox keeps it: the open sale (after a start, a crash or a reload). */
async function restoreTill() {
  const till = await invoke("till");
  state.saleId = till.sale;
  state.attemptId = till.attempt ? till.attempt.id : null;
  if (till.attempt) {
    upsert(till.attempt);
    $("valor").value = brlInput(till.attempt.valor);
    $("cartao").value = till.attempt.cartao;
  }
  for (const a of till.unfinished) {
    upsert(a);
    state.carriedOver.add(a.sale_id);
  }
}

async function exportAttempts(format) {
  try {
    const path = await invoke("export_attempts", { format });
    $("export-result").textContent = `Exportado para ${path}`;
  } catch (err) {
    $("export-result").textContent = `Falha ao exportar: ${err.message || err}`;
  }
}

async function qa(action, done) {
  try {
    const result = await action();
    $("qa-result").textContent = done(result);
  } catch (err) {
    $("qa-result").textContent = `Falhou: ${err.message || err}`;
  }
}

async function refresh() {
  const snap = await invoke("attempts");
  state.attempts = new Map(snap.attempts.map((a) => [a.id, a]));
  state.queue = snap.queue;
  state.connectivity = snap.connectivity;
  state.offlineSimulated = snap.offline_simulated;
  render();
}

async function start() {
  $("pay-form").addEventListener("submit", press);
  $("nova-venda").addEventListener("click", newSale);
  $("retry-review").addEventListener("click", retryReview);
  $("another-card").addEventListener("click", anotherCard);
  $("export-csv").addEventListener("click", () => exportAttempts("csv"));
  $("export-json").addEventListener("click", () => exportAttempts("json"));
  $("qa-toggle").addEventListener("click", () => {
    const panel = $("qa-panel");
    panel.hidden = !panel.hidden;
    $("qa-toggle").setAttribute("aria-expanded", String(!panel.hidden));
    render();
  });
  $("qa-offline").addEventListener("change", (e) => qa(async () => {
    await invoke("qa_set_offline", { offline: e.target.checked });
    state.offlineSimulated = e.target.checked;
  }, () => (state.offlineSimulated ? "Rede cortada: os pagamentos ficam na fila." : "Rede restaurada.")));
  $("qa-faults").addEventListener("change", (e) => qa(
    () => invoke("qa_set_faults", { faults: FAULTS[e.target.value] }),
    () => `Perfil aplicado: ${e.target.selectedOptions[0].textContent}.`));
  $("qa-export-log").addEventListener("click", () => qa(() => invoke("qa_export_log"), (p) => `Log exportado para ${p}`));

  try {
    const info = await invoke("app_info");
    for (const token of info.cartoes) {
      const opt = document.createElement("option");
      opt.value = token;
      opt.textContent = CARD_LABELS[token] || token;
      $("cartao").append(opt);
    }
    $("qa-faults").disabled = !info.faults_available;
    if (info.notices.length > 0) {
      $("notice").textContent = info.notices.join(" · ");
      $("notice").hidden = false;
    }
    $("qa-offline").disabled = !info.qa;
    const channel = new Channel();
    channel.onmessage = onEvent;
    await invoke("subscribe", { onEvent: channel });
    await refresh();
    await restoreTill();
    state.ready = true;
  } catch (err) {
    const box = $("startup-error");
    state.startupError = err && err.message ? err.message : String(err);
    box.textContent = state.startupError;
    box.hidden = false;
  }
  render();
  // Two frames later the first screen is on the glass: report the startup time once.
  requestAnimationFrame(() => requestAnimationFrame(() => invoke("ui_ready").catch(() => {})));
  // Countdown of the next retry; the data itself only changes through events.
  setInterval(() => { if (current() && current().state === "pendente") render(); else renderQa(); }, 1000);
  $("valor").focus();
}

document.addEventListener("DOMContentLoaded", start);
