// Pagar cashier screen: wires the window to the app's commands (window.__TAURI__, with
// withGlobalTauri). Native ES modules, no bundler: state.js decides, view.js draws, this module
// calls commands and feeds their answers and the engine's events into the state.

import {
  applyEvent, applySaleViews, applySnapshot, applyOpenSale, brlInput, notaText, CARD_LABELS, createState, current, errorText,
  FAULTS, machineCancelRefused, machinePanel, pixCancelRefused, pixWaiting, planArgs, restoredPlanValue, shortcut,
  snapshotMark, splitOf, upsert,
} from "./state.js";
import {
  $, drawQr, fillCards, fillPlans, hideDialogs, showDrawer, showPlanDetail, render, renderQa, showClosing, showClosingRefused, showReceipt,
  showTerminal,
} from "./view.js";
import { refundDialog } from "./refund-dialog.js";
import { notaDialog } from "./nota-dialog.js";

const { invoke } = window.__TAURI__.core;

const state = createState();
// The tender whose missing amount was last put in the amount field.
let filledFor = null;
// The text whose QR the canvas shows.
let qrText = null;
const { openRefund, reviewRefund, confirmRefund, refundReceipt, refundBack } = refundDialog(state, invoke, draw);
const { openDanfe, loadNotas } = notaDialog(state, invoke, draw);

function draw() {
  const a = current(state);
  // A tender of a sale paid in parts approved with something still missing: the amount field
  // offers what is missing, once per tender.
  const split = splitOf(state, a);
  // Not while a press is on its way: the field is off until its answer (the draw after it fills).
  const fill = !state.pressing && split && a.state === "aprovado" && split.falta > 0 && filledFor !== a.id;
  if (fill) {
    filledFor = a.id;
    $("valor").value = brlInput(split.falta);
    refreshPlans();
  }
  render(state);
  // A divided sale paid and on screen (its receipt shown): its card authorizations are captured.
  if (split && !state.pressing && split.falta === 0 && !split.cancelada && split.autorizado > 0) {
    confirmSale(a.sale_id);
  }
  // A payment authorized at once ("confirmar após o comprovante"), approved and on screen.
  if (!split && !state.pressing && a && a.state === "aprovado" && a.captura === "pendente") {
    confirmSale(a.sale_id);
  }
  // The field was off while the part was charged: Enter there pays what is missing.
  if (fill) $("valor").focus();
  const text = pixWaiting(a) ? a.pix.copia_e_cola : null;
  if (text && text !== qrText) {
    qrText = text;
    invoke("pix_qr", { texto: text }).then(drawQr).catch((err) => {
      qrText = null;
      state.error = errorText(err);
      render(state);
    });
  }
}

/** F5 or the Pix button: the Pix is written ahead, then the server makes its QR. */
function payPix() {
  return startPayment("pix", "pay_pix", () => ({
    saleId: state.saleId, valor: $("valor").value, total: state.splitOn ? $("total").value : null,
  }));
}

/** "Cancelar Pix" (Esc): removed at the bank before the sale is paid another way. */
async function cancelPix() {
  const a = current(state);
  if (!pixWaiting(a) || state.pixCancelling) return;
  state.pixCancelling = true;
  state.error = null;
  state.pixCancel = null;
  draw();
  try {
    upsert(state, await invoke("cancel_pix", { attemptId: a.id }));
  } catch (err) {
    pixCancelRefused(state, a, err);
  } finally {
    state.pixCancelling = false;
    draw();
  }
}

/** "Cancelar pedido" (Esc) of a card at the machine: only while the machine has not taken the
 * order; once it has, the screen says so and follows the order to its end. */
async function cancelMachine() {
  const a = current(state);
  const panel = machinePanel(state, a);
  if (!panel || panel.cancelDisabled) return;
  state.machineCancelling = true;
  state.error = null;
  state.machineCancel = null;
  draw();
  try {
    upsert(state, await invoke("cancel_maquininha", { attemptId: a.id }));
  } catch (err) {
    machineCancelRefused(state, a, err);
  } finally {
    state.machineCancelling = false;
    draw();
  }
}

/** QA: the customer pays the Pix on screen at the simulated bank. */
async function qaPixPay() {
  const a = current(state);
  if (!pixWaiting(a)) return;
  try {
    await invoke("qa_pix_pay", { attemptId: a.id, webhook: "entregue", aceitarInativa: false });
  } catch (err) {
    state.error = errorText(err);
    draw();
  }
}

async function press(ev) {
  ev.preventDefault();
  const chosen = planArgs($("forma").value);
  if (chosen.maquininha) {
    await startPayment("pagar", "pay_maquininha", () => ({
      saleId: state.saleId, valor: $("valor").value, forma: chosen.forma, parcelas: chosen.parcelas,
      total: state.splitOn ? $("total").value : null,
    }));
    return;
  }
  if (chosen.forma === "dinheiro") {
    await startPayment("pagar", "pay_cash", () => ({
      saleId: state.saleId, valor: $("valor").value, recebido: $("recebido").value,
      total: state.splitOn ? $("total").value : null,
    }));
    return;
  }
  await startPayment("pagar", "pay", () => ({
    saleId: state.saleId, valor: $("valor").value, cartao: $("cartao").value, ...planArgs($("forma").value),
    total: state.splitOn ? $("total").value : null,
  }));
}

/** The "forma de pagamento" list follows the amount typed (each parcelado with its
 * installments); a reply older than the last one asked for is dropped. */
let plansAsked = 0;
async function refreshPlans(keep) {
  const asked = ++plansAsked;
  try {
    const offers = await invoke("card_plans", { valor: $("valor").value });
    // The choice as it is when the list comes back: one made meanwhile is kept.
    if (asked === plansAsked) fillPlans(offers, keep ?? $("forma").value, state.maquininha);
  } catch (err) {
    state.error = errorText(err);
    draw();
  }
}

/** Pagar or Pix: a synchronous guard (a double click, a held key or a burst of clicks ends
 * here), both buttons off, then the command; its attempt becomes the one the screen follows. */
async function startPayment(button, command, args) {
  if ($(button).disabled || state.pressing) return;
  state.pressing = true;
  state.error = null;
  $("pagar").disabled = true;
  $("pix").disabled = true;
  draw();
  try {
    const reply = await invoke(command, args());
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
    applyOpenSale(state, await invoke("new_sale"));
  } catch (err) {
    state.error = errorText(err);
    draw();
    return;
  }
  state.attemptId = null;
  state.anotherCard = false;
  state.splitOn = false;
  state.cancelSale = { armed: false, error: null };
  state.error = null;
  $("valor").value = "";
  $("total").value = "";
  $("recebido").value = "";
  await refreshPlans("credito:1");
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

/** "Manter" on a Pix paid after it was cancelled: the first click arms the row, the second keeps
 * the Pix as its sale's payment (the outbox refuses it if the sale was paid another way). */
async function keepLatePix(id) {
  const k = state.keep;
  if (k.pressing) return;
  if (k.armed !== id) {
    k.armed = id;
    k.error = null;
    draw();
    return;
  }
  k.pressing = true;
  draw();
  try {
    upsert(state, await invoke("keep_late_pix", { attemptId: id }));
    k.armed = null;
  } catch (err) {
    k.error = errorText(err);
  } finally {
    k.pressing = false;
    draw();
  }
}

/** Closes the day at the till (the closing): the day reconciled with the server; `anyway` lists
 * pending payments. */
async function closeDay(anyway) {
  state.dialog = "closing";
  try {
    showClosing(await invoke("close_day", { anyway }));
  } catch (err) {
    showClosingRefused(errorText(err), err && err.kind === "pending_at_close");
  }
}

function closeDialog() {
  hideDialogs();
  state.dialog = null;
  state.refund = null;
  draw();
  $(current(state) && current(state).state === "aprovado" ? "nova-venda" : "valor").focus();
}

/** F3: the card list, open (as a list box) until a card is chosen; F6 the same for the forma
 * de pagamento. */
function openList(id) {
  const select = $(id);
  select.size = Math.max(2, Math.min(select.options.length, 15));
  select.focus();
}

function closeList(id) {
  $(id).size = 0;
}

function onKey(e) {
  // A held key must not confirm a refund: only a fresh press does.
  if (e.repeat && state.dialog === "refund" && e.key === "Enter") {
    e.preventDefault();
    return;
  }
  // F5 is Pix here, never the webview's reload.
  if (e.key === "F5") e.preventDefault();
  // Esc takes back a first click on "Manter" or "Cancelar venda" before anything else it does.
  if (e.key === "Escape" && (state.keep.armed || state.cancelSale.armed) && !state.dialog) {
    e.preventDefault();
    state.keep.armed = null;
    state.keep.error = null;
    state.cancelSale = { armed: false, error: null };
    draw();
    return;
  }
  // Enter in the sale's total goes on to the amount of this payment; only there does it pay.
  if (e.key === "Enter" && document.activeElement === $("total")) {
    e.preventDefault();
    $("valor").focus();
    return;
  }
  const action = shortcut(state, e.key);
  if (!action) {
    const list = document.activeElement;
    if (e.key === "Enter" && (list === $("cartao") || list === $("forma")) && list.size > 1) {
      // Enter in an open list chooses and goes back to the amount (Enter there pays).
      e.preventDefault();
      closeList(list.id);
      $("valor").focus();
    }
    return;
  }
  e.preventDefault();
  ({
    "new-sale": () => { if (!$("nova-venda").hidden) newSale(); },
    cards: () => openList("cartao"),
    plans: () => openList("forma"),
    split: () => toggleSplit(!state.splitOn),
    drawer: openDrawer,
    receipt: printReceipt,
    "close-day": () => closeDay(false),
    "close-dialog": closeDialog,
    "refund-back": refundBack,
    pix: payPix,
    "cancel-pix": cancelPix,
    "cancel-machine": cancelMachine,
  })[action]();
}

/** "Cancelar venda": a first click arms (the button says what goes back), a second gives every
 * paid part of the sale back; Esc disarms. */
async function cancelSale() {
  if (!state.cancelSale.armed) {
    state.cancelSale = { armed: true, error: null };
    draw();
    return;
  }
  state.cancelSale = { armed: false, error: null };
  try {
    for (const r of await invoke("abandon_sale", { saleId: state.saleId })) upsert(state, r);
  } catch (err) {
    state.cancelSale.error = errorText(err);
  }
  draw();
}

/** Captures the card parts of a divided sale once it is paid and shown (asked once per sale
 * per window; asking again changes nothing). */
const confirming = new Set();
async function confirmSale(saleId) {
  if (confirming.has(saleId)) return;
  confirming.add(saleId);
  try {
    for (const r of await invoke("confirm_sale", { saleId })) upsert(state, r);
  } catch (err) {
    confirming.delete(saleId);
    state.error = errorText(err);
  }
  draw();
}

/** F8: the cash drawer. */
async function openDrawer() {
  try {
    showDrawer(await invoke("drawer"), state.utcOffsetMinutes);
    state.dialog = "drawer";
    // A fresh form each time: what was typed and refused last time is not carried over.
    $("drawer-result").textContent = "";
    $("drawer-valor").value = "";
    $("drawer-motivo").value = "";
    $("drawer-valor").focus();
  } catch (err) {
    state.error = errorText(err);
    draw();
  }
}

/** Records the movement typed in the drawer dialog; bad input says why and keeps what was typed. */
async function saveDrawer(ev) {
  ev.preventDefault();
  try {
    const d = await invoke("drawer_move", {
      kind: $("drawer-kind").value, valor: $("drawer-valor").value, motivo: $("drawer-motivo").value || null,
    });
    showDrawer(d, state.utcOffsetMinutes);
    $("drawer-result").textContent = "Registrado.";
    $("drawer-valor").value = "";
    $("drawer-motivo").value = "";
  } catch (err) {
    $("drawer-result").textContent = errorText(err);
  }
  $("drawer-valor").focus();
}

/** "Dividir o pagamento" (F7): the sale's total, then each payment of it in turn. */
function toggleSplit(on) {
  if ($("dividir").disabled) return;
  state.splitOn = on;
  draw();
  $(on ? "total" : "valor").focus();
}

function anotherCard() {
  state.anotherCard = true;
  state.error = null;
  draw();
  $("cartao").focus();
}

/** Draws the open sale as the outbox keeps it (after a start, a crash or a reload). */
async function restoreOpenSale() {
  const open = await invoke("open_sale");
  applyOpenSale(state, open);
  if (open.attempt) {
    $("valor").value = brlInput(open.attempt.valor);
    if (open.attempt.cartao) $("cartao").value = open.attempt.cartao;
  }
  if (open.attempt && open.attempt.sale_total != null) {
    state.splitOn = true;
    $("total").value = brlInput(open.attempt.sale_total);
  }
  await refreshPlans(restoredPlanValue(open.attempt));
  await loadNotas(open.sale);
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

/** Follows the engine's events for as long as the window lives: each `events` call answers what
 * came since the last (waiting for the next when nothing has). Asked, not pushed: a pushed
 * message is a new script evaluated in the page, and the page would keep the code of each. After
 * an overflow the snapshot is taken again, once the events before it are applied. */
async function follow() {
  for (;;) {
    let batch;
    try {
      batch = await invoke("events");
    } catch (err) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      continue;
    }
    for (const e of batch.events) applyEvent(state, e);
    applySaleViews(state, batch.vendas);
    if (batch.lagged) await refresh().catch(() => {});
    else if (batch.events.length > 0) draw();
    if (batch.closed) return;
  }
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
  $("qa-sefaz").addEventListener("change", (e) => qa(
    () => invoke("qa_sefaz", { modo: e.target.value }),
    () => `SEFAZ simulada: ${e.target.selectedOptions[0].textContent}.`));
  $("qa-export-log").addEventListener("click", () => qa(() => invoke("qa_export_log"), (p) => `Log exportado para ${p}`));
  $("comprovante").addEventListener("click", printReceipt);
  $("pix").addEventListener("click", payPix);
  $("machine-cancel").addEventListener("click", cancelMachine);
  $("pix-cancel").addEventListener("click", cancelPix);
  $("qa-pix-pay").addEventListener("click", qaPixPay);
  $("pix-copy").addEventListener("click", async () => {
    const text = $("pix-copia").value;
    try {
      await navigator.clipboard.writeText(text);
      $("pix-copy").textContent = "Copiado";
    } catch {
      // Without clipboard access the text is selected for Ctrl+C.
      $("pix-copia").select();
      $("pix-copy").textContent = "Selecionado: Ctrl+C";
    }
    setTimeout(() => { $("pix-copy").textContent = "Copiar"; }, 2000);
  });
  $("receipt-print").addEventListener("click", () => window.print());
  $("danfe").addEventListener("click", openDanfe);
  $("danfe-print").addEventListener("click", () => window.print());
  $("danfe-close").addEventListener("click", closeDialog);
  $("receipt-close").addEventListener("click", closeDialog);
  $("fechar-caixa").addEventListener("click", () => closeDay(false));
  $("closing-anyway").addEventListener("click", () => closeDay(true));
  $("closing-print").addEventListener("click", () => window.print());
  $("closing-close").addEventListener("click", closeDialog);
  $("history-rows").addEventListener("click", (e) => {
    const button = e.target.closest("button[data-refund]");
    if (button && !state.dialog) openRefund(button.dataset.refund);
    const keep = e.target.closest("button[data-keep]");
    if (keep && !state.dialog) keepLatePix(keep.dataset.keep);
  });
  $("refund-form").addEventListener("submit", reviewRefund);
  $("refund-confirm").addEventListener("click", confirmRefund);
  $("refund-back").addEventListener("click", refundBack);
  $("refund-receipt").addEventListener("click", refundReceipt);
  $("refund-close").addEventListener("click", closeDialog);
  $("cartao").addEventListener("blur", () => closeList("cartao"));
  $("forma").addEventListener("blur", () => closeList("forma"));
  $("forma").addEventListener("change", showPlanDetail);
  $("forma").addEventListener("input", showPlanDetail);
  $("valor").addEventListener("input", () => refreshPlans());
  $("dividir").addEventListener("change", (e) => toggleSplit(e.target.checked));
  $("forma").addEventListener("change", draw);
  $("recebido").addEventListener("input", draw);
  $("valor").addEventListener("input", draw);
  $("gaveta").addEventListener("click", openDrawer);
  $("cancelar-venda").addEventListener("click", cancelSale);
  $("drawer-form").addEventListener("submit", saveDrawer);
  $("drawer-close").addEventListener("click", closeDialog);
  document.addEventListener("keydown", onKey);

  // When each step of the start ended, in ms from the page's navigation: the app logs them with
  // the first painted frame, so a slow start says where its time went. `mark` passes `value` on.
  const marks = { script: Math.round(performance.now()) };
  const mark = (step, value) => { marks[step] = Math.round(performance.now()); return value; };
  try {
    const info = mark("app_info", await invoke("app_info"));
    fillCards(info.cartoes, CARD_LABELS);
    showTerminal(info.terminal);
    state.utcOffsetMinutes = info.utc_offset_minutes;
    $("qa-faults").disabled = !info.faults_available;
    $("qa-sefaz").disabled = !info.nfce;
    if (info.notices.length > 0) {
      $("notice").textContent = info.notices.join(" · ");
      $("notice").hidden = false;
    }
    $("qa-offline").disabled = !info.qa;
    $("qa-pix-pay").hidden = !info.pix_simulado;
    state.maquininha = info.maquininha;
    mark("subscribe", await invoke("subscribe"));
    mark("refresh", await refresh());
    mark("open_sale", await restoreOpenSale());
    state.ready = true;
    follow();
  } catch (err) {
    const box = $("startup-error");
    state.startupError = errorText(err);
    state.startupKind = err && err.kind ? err.kind : null;
    box.textContent = state.startupError;
    box.hidden = false;
  }
  draw();
  // Two frames later the first screen is on the glass: report the startup time once.
  mark("drawn");
  requestAnimationFrame(() => {
    mark("frame");
    requestAnimationFrame(() => invoke("ui_ready", { marks: mark("painted", marks) }).catch(() => {}));
  });
  // Countdown of the next retry; the data itself only changes through events.
  setInterval(() => {
    const a = current(state);
    const r = state.refund && state.refund.attemptId ? state.attempts.get(state.refund.attemptId) : null;
    const nota = a ? notaText(state, a.sale_id, Date.now()) : null;
    const counting = nota && nota.kind === "contingencia";
    if ((a && a.state === "pendente") || (r && r.state === "pendente") || counting) draw();
    else renderQa(state);
  }, 1000);
  $("valor").focus();
}

// A module runs after the document is parsed (like `defer`).
start();
