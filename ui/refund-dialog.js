// The refund dialog's actions (Estornar): open it with the payment's figures, review the amount
// the app checked, confirm once (the refund written ahead, then sent), go back, print its receipt.
// The dialog's state lives in the screen's state; what it shows is state.js's and view.js's.

import { brlInput, errorText, upsert } from "./state.js";
import { $, showReceipt } from "./view.js";

/** The dialog's actions over the screen's `state`, calling the app's commands with `invoke` and
 * drawing the screen again with `draw`. */
export function refundDialog(state, invoke, draw) {
  /** "Estornar" on an approved payment in the history: the dialog, its amount defaulting to what
   * is left of the payment. */
  async function openRefund(paymentAttemptId) {
    try {
      const info = await invoke("refund_info", { attemptId: paymentAttemptId });
      state.refund = { payment: paymentAttemptId, info, step: "form", valor: info.saldo, motivo: "", attemptId: null, error: null, pressing: false };
    } catch (err) {
      state.error = errorText(err);
      draw();
      return;
    }
    state.dialog = "refund";
    $("refund-valor").value = state.refund.info.saldo > 0 ? brlInput(state.refund.info.saldo) : "";
    $("refund-motivo").value = "";
    $("refund-dialog").hidden = false;
    draw();
    $("refund-valor").focus();
    $("refund-valor").select();
  }

  /** The amount is read and checked by the app (never charged twice, never more than is left)
   * and shown in R$ for the cashier to confirm. Nothing is stored yet. */
  async function reviewRefund(ev) {
    ev.preventDefault();
    const r = state.refund;
    if (!r || r.step !== "form" || r.pressing) return;
    r.error = null;
    try {
      const preview = await invoke("refund_preview", { attemptId: r.payment, valor: $("refund-valor").value });
      r.valor = preview.valor;
      r.motivo = $("refund-motivo").value;
      r.step = "confirm";
    } catch (err) {
      r.error = errorText(err);
    }
    draw();
    if (r.step === "confirm") $("refund-confirm").focus();
  }

  /** Confirmed: the refund is written ahead and sent; the dialog follows it to its end. */
  async function confirmRefund() {
    const r = state.refund;
    // Synchronous guard: a double click or a burst of clicks ends here.
    if (!r || r.step !== "confirm" || r.pressing || $("refund-confirm").disabled) return;
    r.pressing = true;
    r.error = null;
    $("refund-confirm").disabled = true;
    draw();
    try {
      const reply = await invoke("refund", { attemptId: r.payment, valor: r.valor, motivo: r.motivo || null });
      upsert(state, reply.attempt);
      r.attemptId = reply.attempt.id;
      r.step = "sent";
    } catch (err) {
      r.error = errorText(err);
      r.step = "form";
    } finally {
      r.pressing = false;
      draw();
    }
    $("refund-close").focus();
  }

  /** The receipt of the approved refund. */
  async function refundReceipt() {
    const r = state.refund;
    if (!r || !r.attemptId) return;
    try {
      const receipt = await invoke("receipt", { attemptId: r.attemptId });
      $("refund-dialog").hidden = true;
      state.refund = null;
      state.dialog = "receipt";
      showReceipt(receipt);
    } catch (err) {
      r.error = errorText(err);
      draw();
    }
  }

  function refundBack() {
    if (!state.refund || state.refund.pressing) return;
    state.refund.step = "form";
    draw();
    $("refund-valor").focus();
  }

  return { openRefund, reviewRefund, confirmRefund, refundReceipt, refundBack };
}
