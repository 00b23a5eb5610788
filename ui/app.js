// Pagar cashier screen: wires the window to the app's commands (window.__TAURI__, with
// withGlobalTauri). Native ES modules, no bundler: state.js decides, view.js draws, this module
// calls commands and feeds their answers and the engine's events into the state.

import {
  applyEvent, applySnapshot, applyTill, brlInput, CARD_LABELS, createState, current, errorText,
  FAULTS, shortcut, snapshotMark, upsert,
} from "./state.js";
import {
  $, fillCards, hideDialogs, render, renderQa, showClosing, showClosingRefused, showReceipt,
  showTerminal,
} from "./view.js";

const { invoke, Channel } = window.__TAURI__.core;

const state = createState();
const draw = () => render(state);

async function press(ev) {
  ev.preventDefault();
  // Synchronous guard: a double click, a held Enter or a burst of clicks ends here.
  if ($("pagar").disabled || state.pressing) return;
  state.pressing = true;
  state.error = null;
  $("pagar").disabled = true;
  draw();
  try {
    const reply = await invoke("pay", { saleId: state.saleId, valor: $("valor").value, cartao: $("cartao").value });
    upsert(state, reply.attempt);
    state.attemptId = reply.attempt.id;
    state.anotherCard = false;
  } catch (err) {
    state.error = errorText(err);
  } finally {
    state.pressing = false;
    draw();
  }
}

async function newSale() {
  try {
    applyTill(state, await invoke("new_sale"));
  } catch (err) {
    state.error = errorText(err);
    draw();
    return;
  }
  state.attemptId = null;
  state.anotherCard = false;
  state.error = null;
  $("valor").value = "";
  draw();
  $("valor").focus();
}

async function retryReview() {
  const a = current(state);
  if (!a) return;
  try {
    upsert(state, await invoke("retry_review", { attemptId: a.id }));
    state.error = null;
  } catch (err) {
    state.error = errorText(err);
  }
  draw();
}

/** Opens the receipt of the approved sale (saved as a file too) and the webview's print. */
async function printReceipt() {
  const a = current(state);
  if (!a) return;
  try {
    const receipt = await invoke("receipt", { attemptId: a.id });
    state.dialog = "receipt";
    showReceipt(receipt);
    window.print();
  } catch (err) {
    state.error = errorText(err);
    draw();
  }
}

/** Closes the till: the day reconciled with the server; `anyway` lists pending payments. */
async function closeTill(anyway) {
  state.dialog = "closing";
  try {
    showClosing(await invoke("close_till", { anyway }));
  } catch (err) {
    showClosingRefused(errorText(err), err && err.kind === "pending_at_close");
  }
}

function closeDialog() {
  hideDialogs();
  state.dialog = null;
  draw();
  $(current(state) && current(state).state === "aprovado" ? "nova-venda" : "valor").focus();
}

/** F3: the card list, open (as a list box) until a card is chosen. */
function openCards() {
  const select = $("cartao");
  select.size = Math.max(2, select.options.length);
  select.focus();
}

function closeCards() {
  $("cartao").size = 0;
}

function onKey(e) {
  const action = shortcut(state, e.key);
  if (!action) {
    if (e.key === "Enter" && document.activeElement === $("cartao") && $("cartao").size > 1) {
      // Enter in the open card list chooses the card and goes back to the amount.
      e.preventDefault();
      closeCards();
      $("valor").focus();
    }
    return;
  }
  e.preventDefault();
  ({
    "new-sale": () => { if (!$("nova-venda").hidden) newSale(); },
    cards: openCards,
    receipt: printReceipt,
    "close-till": () => closeTill(false),
    "close-dialog": closeDialog,
  })[action]();
}

function anotherCard() {
  state.anotherCard = true;
  state.error = null;
  draw();
  $("cartao").focus();
}

/** Draws the till as the outbox keeps it: the open sale (after a start, a crash or a reload). */
async function restoreTill() {
  const till = await invoke("till");
  applyTill(state, till);
  if (till.attempt) {
    $("valor").value = brlInput(till.attempt.valor);
    $("cartao").value = till.attempt.cartao;
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
  const mark = snapshotMark(state);
  applySnapshot(state, await invoke("attempts"), mark);
  draw();
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
    draw();
  });
  $("qa-offline").addEventListener("change", (e) => qa(async () => {
    await invoke("qa_set_offline", { offline: e.target.checked });
    state.offlineSimulated = e.target.checked;
  }, () => (state.offlineSimulated ? "Rede cortada: os pagamentos ficam na fila." : "Rede restaurada.")));
  $("qa-faults").addEventListener("change", (e) => qa(
    () => invoke("qa_set_faults", { faults: FAULTS[e.target.value] }),
    () => `Perfil aplicado: ${e.target.selectedOptions[0].textContent}.`));
  $("qa-export-log").addEventListener("click", () => qa(() => invoke("qa_export_log"), (p) => `Log exportado para ${p}`));
  $("comprovante").addEventListener("click", printReceipt);
  $("receipt-print").addEventListener("click", () => window.print());
  $("receipt-close").addEventListener("click", closeDialog);
  $("fechar-caixa").addEventListener("click", () => closeTill(false));
  $("closing-anyway").addEventListener("click", () => closeTill(true));
  $("closing-print").addEventListener("click", () => window.print());
  $("closing-close").addEventListener("click", closeDialog);
  $("cartao").addEventListener("blur", closeCards);
  document.addEventListener("keydown", onKey);

  try {
    const info = await invoke("app_info");
    fillCards(info.cartoes, CARD_LABELS);
    showTerminal(info.terminal);
    state.utcOffsetMinutes = info.utc_offset_minutes;
    $("qa-faults").disabled = !info.faults_available;
    if (info.notices.length > 0) {
      $("notice").textContent = info.notices.join(" · ");
      $("notice").hidden = false;
    }
    $("qa-offline").disabled = !info.qa;
    const channel = new Channel();
    channel.onmessage = (e) => {
      applyEvent(state, e);
      draw();
    };
    await invoke("subscribe", { onEvent: channel });
    await refresh();
    await restoreTill();
    state.ready = true;
  } catch (err) {
    const box = $("startup-error");
    state.startupError = errorText(err);
    box.textContent = state.startupError;
    box.hidden = false;
  }
  draw();
  // Two frames later the first screen is on the glass: report the startup time once.
  requestAnimationFrame(() => requestAnimationFrame(() => invoke("ui_ready").catch(() => {})));
  // Countdown of the next retry; the data itself only changes through events.
  setInterval(() => {
    const a = current(state);
    if (a && a.state === "pendente") draw();
    else renderQa(state);
  }, 1000);
  $("valor").focus();
}

// A module runs after the document is parsed (like `defer`).
start();
