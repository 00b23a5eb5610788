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
  saleId: null,
  attemptId: null, // the current sale's attempt
  pressing: false, // between the press and pay's answer
  error: null, // a refusal of the last press (nothing was stored)
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
      return ["revisao", "Requer revisão", a.last_error || "O servidor recusou o pedido; chame o supervisor."];
    default: {
      if (a.tries === 0 && state.connectivity !== "offline") {
        return ["pendente", "Processando pagamento…", "Enviando ao servidor. Não cobre de novo."];
      }
      let why;
      if (state.connectivity === "offline") {
        why = "Sem conexão: será enviado sozinho quando a rede voltar.";
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

  // Disabled by state: from the press until the attempt is final; a decline may be retried
  // with another card (a new attempt), anything else final waits for "Nova venda".
  const live = a && a.state === "pendente";
  const closed = a && (a.state === "aprovado" || a.state === "revisao");
  $("pagar").disabled = !state.ready || state.pressing || Boolean(live) || Boolean(closed);
  // A new sale may start while this one waits in the queue: it is stored and finishes by itself.
  $("nova-venda").hidden = !a || state.pressing;
  $("valor").disabled = Boolean(live || closed || state.pressing);
  $("sale-id").textContent = state.saleId || "";

  const conn = $("connectivity");
  conn.dataset.state = state.connectivity;
  conn.textContent = { online: "Online", offline: "Offline", unknown: "Conectando…" }[state.connectivity];

  const offline = state.connectivity === "offline";
  $("offline-banner").hidden = !offline;
  if (offline) {
    const n = state.queue.count;
    $("offline-detail").textContent = n === 0
      ? "Nenhum pagamento aguardando."
      : `${n} ${n === 1 ? "pagamento aguardando" : "pagamentos aguardando"} · ${brl(state.queue.total)} — serão enviados sozinhos quando a rede voltar.`;
  }
  $("offline-banner").dataset.count = String(state.queue.count);

  renderHistory();
  renderQa();
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
  if (e.type === "attempt_changed") upsert(e.attempt);
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
  } catch (err) {
    state.error = err && err.message ? err.message : String(err);
  } finally {
    state.pressing = false;
    render();
  }
}

async function newSale() {
  state.saleId = await invoke("new_sale");
  state.attemptId = null;
  state.error = null;
  $("valor").value = "";
  render();
  $("valor").focus();
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
    const channel = new Channel();
    channel.onmessage = onEvent;
    await invoke("subscribe", { onEvent: channel });
    await refresh();
    state.saleId = await invoke("new_sale");
    state.ready = true;
  } catch (err) {
    const box = $("startup-error");
    box.textContent = err && err.message ? err.message : String(err);
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
