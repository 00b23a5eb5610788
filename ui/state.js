// The cashier screen's state and every decision about what it shows: labels, which buttons are
// live, what an event changes. No DOM and no Tauri here, so `node --test ui/test/` checks it.
// view.js draws what this module decides; app.js wires both to the app's commands.

import { brl, capitalize, count, secondsUntil } from "./format.js";
import { isCash, isMachine, isPix, isRefund, isUndone, latePix, pixWaiting } from "./attempt.js";
import { current } from "./store.js";
import {
  canKeepPix, errorText, machineCancelRefused, machinePanel, machineStatus, MOTIVOS, pendingWhy, pixCancelRefused,
  pixPanel, pixStatus, serverDown, serverUp,
} from "./waiting.js";

// What the window imports of the waiting payments, from here as before.
export {
  canKeepPix, errorText, machineCancelRefused, machinePanel, MOTIVOS, pixCancelRefused, pixPanel,
};

// The modules this one builds on, re-exported: the window and the tests import from here.
export * from "./format.js";
export * from "./attempt.js";
export * from "./closing.js";
export * from "./store.js";
export * from "./nota.js";

/** Every attempt state the engine has (checkout-core's `AttemptState::ALL`; a Rust test in
 * src-tauri/tests/command_list.rs fails when the two lists differ), with the word the history
 * shows for it and whether the engine is done with it. */
export const STATES = {
  pendente: { pill: "pendente", final: false },
  aprovado: { pill: "aprovado", final: true },
  recusado: { pill: "recusado", final: true },
  revisao: { pill: "revisão", final: true },
};

/** Names of the sandbox's test cards (the tokens themselves come from the app). */
export const CARD_LABELS = {
  tok_aprovado: "Aprovado (teste)",
  tok_recusado: "Recusado (teste)",
  tok_saldo_insuficiente: "Saldo insuficiente (teste)",
  tok_lento: "Lento, aprova em segundos (teste)",
  tok_estorno_recusado: "Aprova; estornos recusados (teste)",
  tok_estorno_lento: "Aprova; estornos lentos (teste)",
  tok_somente_debito: "Só débito (teste)",
  tok_voucher: "Voucher refeição/alimentação (teste)",
  tok_sem_parcelamento: "Não parcela (teste)",
};

/** How an attempt was paid, as the status line and the history say it: the card plan's own
 * words (`Crédito 3× sem juros`), `Pix`, or nothing for a card that named no method. */
export function formaText(a) {
  if (!a) return "";
  if (isPix(a)) return "Pix";
  if (isCash(a)) return "Dinheiro";
  if (isMachine(a)) return a.plano ? `${a.plano.rotulo} na maquininha` : "Cartão na maquininha";
  return a.plano ? a.plano.rotulo : "";
}

/** The value of a plan in the "forma de pagamento" list: `debito:1`, `parcelado:3`. */
export function planValue(offer) {
  return `${offer.forma}:${offer.parcelas}`;
}

/** The list value an open sale's attempt was paid with, to show it again after a start, a crash
 * or a reload: its plan (a parcelado by its installments), under `maq:` for the card machine
 * (`maq:` alone when the customer chose there); `credito:1` when it names none. */
export function restoredPlanValue(a) {
  const p = a && a.plano;
  const plan = p ? `${p.metodo === "credito" && p.parcelas > 1 ? "parcelado" : p.metodo}:${p.parcelas}` : null;
  if (isMachine(a)) return `maq:${plan || ""}`;
  return plan || "credito:1";
}

/** The command's arguments for a list value: `{forma, parcelas}` (parcelas only for a
 * parcelado). */
export function planArgs(value) {
  const text = String(value || "credito:1");
  // A card at the machine: `maq:<forma>:<n>`, or `maq:` when the customer chooses there.
  const maquininha = text.startsWith("maq:");
  const [forma, n] = (maquininha ? text.slice(4) : text).split(":");
  const plan = forma === "parcelado" ? { forma, parcelas: Number(n) } : { forma: forma || null, parcelas: null };
  return maquininha ? { ...plan, maquininha: true } : plan;
}

/** A sale paid in parts as the core decided it (`SaleView.divisao`: `{total, pago, falta, partes,
 * …}`), or null for a sale paid at once or whose view has not arrived yet. */
export function splitOf(state, a) {
  if (!a || a.sale_total == null) return null;
  const v = state.sales.get(a.sale_id);
  return v && v.divisao ? v.divisao : null;
}

/** The history's pill of a card part authorized first, while its capture is not plain
 * `aprovado`: [css class, word]; null once captured (or for anything captured at once). */
export function capturePill(a) {
  return {
    pendente: ["aprovado", "autorizado"],
    capturar: ["aprovado", "capturando"],
    desfazer: ["pendente", "desfazendo"],
    desfeita: ["recusado", "desfeito"],
    expirada: ["recusado", "expirado"],
  }[a.state === "aprovado" && a.captura] || null;
}

/** The line that says where a sale paid in parts stands: `Total R$ 150,00 · pago R$ 50,00
 * (Débito R$ 50,00) · falta R$ 100,00`. */
export function splitText(split) {
  const partes = split.partes.map((p) => `${p.forma} ${brl(p.valor)}`).join(" + ");
  return `Total ${brl(split.total)} · pago ${brl(split.pago)}${partes ? ` (${partes})` : ""} · falta ${brl(split.falta)}`;
}

/** The QA panel's fault profiles. */
export const FAULTS = {
  none: {},
  latency: { latency_ms: 2000 },
  drop: { drop_response_probability: 1.0 },
  error5xx: { error_5xx_probability: 0.5 },
};

/** A late Pix not yet given back in full (refunds approved or on their way count). */
export function owedBack(state, a) {
  if (!latePix(a)) return false;
  const r = refundsOf(state, a.id);
  return r.aprovado + r.andamento < a.valor;
}

/** A payment attempt's refunds among the attempts the window holds: approved and undecided
 * totals, in centavos. */
export function refundsOf(state, paymentAttemptId) {
  const a = state.attempts.get(paymentAttemptId);
  const v = a && state.sales.get(a.sale_id);
  const r = v && v.estornos.find((e) => e.pagamento === paymentAttemptId);
  return r ? { aprovado: r.aprovado, andamento: r.andamento } : { aprovado: 0, andamento: 0 };
}

/** Whether the history offers "Estornar" for an attempt: an approved payment with something
 * left to refund and no refund undecided (that one is followed instead). */
export function canRefund(state, a) {
  if (isRefund(a) || (a.state !== "aprovado" && !latePix(a))) return false;
  // An authorization not captured took nothing: it is undone (Cancelar venda), never refunded.
  if (a.captura && a.captura !== "capturada") return false;
  const r = refundsOf(state, a.id);
  return r.andamento === 0 && r.aprovado < a.valor;
}

/** The one label (and its detail) for the screen's current state: [kind, label, detail]. */
export function statusFor(state, a, now) {
  if (state.startupError && state.startupKind === "other_window") {
    return ["erro", "Pagar já aberto em outra janela", "Só uma janela pode usar esta pasta de dados: use a outra janela do Pagar, ou feche-a e abra esta de novo."];
  }
  if (state.startupError) return ["erro", "Pagar indisponível", "Corrija a configuração indicada acima e abra o app de novo."];
  if (state.error) return ["erro", "Pagamento não registrado", state.error];
  if (state.pressing && !a) return ["pendente", "Processando pagamento…", "Registrando o pagamento antes de enviar."];
  if (!a) return ["idle", "Pronto para cobrar.", ""];
  // A Pix that paid a part of a divided sale reads like any part: what is missing, or "Venda paga".
  if (isPix(a) && !(a.state === "aprovado" && splitOf(state, a))) {
    const pix = pixStatus(state, a, now);
    if (pix) return pix;
  }
  if (isMachine(a) && !(a.state === "aprovado" && splitOf(state, a))) {
    const machine = machineStatus(state, a, now);
    if (machine) return machine;
  }
  switch (a.state) {
    case "aprovado": {
      const split = splitOf(state, a);
      const troco = isCash(a) && a.recebido > a.valor ? ` — troco ${brl(a.recebido - a.valor)}` : "";
      if (split && isUndone(a) && a.captura_por === "reinicio") {
        return a.captura === "desfazer"
          ? ["pendente", "Desfazendo a autorização — o caixa reiniciou antes de concluir a venda",
            `${brl(a.valor)} sendo liberados no cartão do cliente; nada foi cobrado. Espere para cobrar de novo. ${splitText(split)}`]
          : ["recusado", `Autorização desfeita ao reiniciar — falta ${brl(split.falta)}`,
            `${brl(a.valor)} liberados no cartão do cliente, nada cobrado. ${splitText(split)}. Cobre de novo (Enter).`];
      }
      if (split && split.estornando > 0) {
        const how = split.liberado > 0 ? "desfazendo a autorização no cartão" : "estorno em andamento";
        return ["pendente", `Cancelando a venda — ${how}, não cobre de novo`,
          `${brl(split.estornando)} sendo devolvidos ao cliente. ${splitText(split)}`];
      }
      if (split && split.cancelada) {
        const how = split.liberado === split.devolvido ? "liberados no cartão do cliente" : "devolvidos ao cliente";
        return ["recusado", `Venda cancelada — ${brl(split.devolvido)} ${how}`,
          "Nada desta venda ficou cobrado. Pode começar a próxima venda (F2)."];
      }
      if (split) {
        if (split.falta > 0) {
          const undone = split.liberado > 0 ? ` Autorização desfeita: ${brl(split.liberado)} liberados no cartão, nada cobrado.` : "";
          return ["aprovado", `Pagamento aprovado${troco || ""} — falta ${brl(split.falta)}`, `${splitText(split)}.${undone} Cobre o que falta (Enter).`];
        }
        const card = split.autorizado + split.capturando > 0 ? " · cartão: captura em andamento"
          : split.partes.some((p) => p.capturada) ? " · cartão capturado" : "";
        return ["aprovado", `Venda paga${troco}`, `${splitText(split)}${card}`];
      }
      if (isUndone(a)) {
        return a.captura === "desfazer"
          ? ["pendente", "Desfazendo a autorização — o caixa reiniciou antes de concluir a venda",
            `${brl(a.valor)} sendo liberados no cartão do cliente; nada foi cobrado. Espere para cobrar de novo.`]
          : ["recusado", "Autorização desfeita ao reiniciar — cobre de novo",
            `${brl(a.valor)} liberados no cartão do cliente, nada cobrado. Cobre de novo (Enter).`];
      }
      if (isCash(a)) {
        return ["aprovado", `Pago em dinheiro${troco || " — sem troco"}`, `${brl(a.valor)} · recebido ${brl(a.recebido)}`];
      }
      const back = refundsOf(state, a.id).aprovado;
      const refunded = back === 0 ? "" : ` · estornado ${brl(back)}`;
      const forma = formaText(a) ? ` · ${formaText(a)}` : "";
      const card = a.captura === "pendente" || a.captura === "capturar" ? " · cartão: captura em andamento"
        : a.captura === "capturada" ? " · cartão capturado" : "";
      return ["aprovado", "Pagamento aprovado", `${brl(a.valor)}${forma} · ${a.payment_id || ""}${refunded}${card}`];
    }
    case "recusado":
      if (a.motivo === "chave_cancelada") {
        return ["recusado", "Tentativa cancelada — nada foi cobrado",
          "O servidor cancelou a chave desta tentativa: ela não cobrou e não pode mais cobrar. Pode cobrar de novo."];
      }
      if (a.motivo === "metodo_nao_aceito" || a.motivo === "parcelamento_nao_permitido") {
        return ["recusado", `Pagamento recusado: ${MOTIVOS[a.motivo]}`,
          `Pedido: ${formaText(a) || "crédito à vista"}. Nenhuma cobrança foi feita. Escolha outra forma (F6) ou outro cartão.`];
      }
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
    case "pendente": {
      if (a.tries === 0 && !serverDown(state)) {
        return ["pendente", "Processando pagamento…", "Enviando ao servidor. Não cobre de novo."];
      }
      return ["pendente", "Pagamento pendente — não cobre de novo", pendingWhy(state, a, now)];
    }
    default:
      // A state this screen does not know (a newer engine): never "ready", never "approved".
      return ["erro", `Estado desconhecido: ${a.state} — não cobre de novo`,
        "Esta versão da tela não conhece este estado. Confira o pagamento no histórico antes de cobrar."];
  }
}

/** The refund dialog's label and detail, [kind, label, detail], or null before anything was
 * asked. Every state has one honest label; `pendente` says plainly not to refund again. */
export function refundStatus(state, now) {
  const r = state.refund;
  if (!r) return null;
  const a = r.attemptId ? state.attempts.get(r.attemptId) : null;
  if (r.error) return ["erro", "Estorno não registrado", r.error];
  if (!a) return r.pressing ? ["pendente", "Registrando o estorno…", "Gravando o estorno antes de enviar."] : null;
  switch (a.state) {
    case "aprovado":
      return ["aprovado", "Estorno aprovado", isCash(a) ? `${brl(a.valor)} devolvidos em dinheiro, da gaveta`
        : `${brl(a.valor)} devolvidos ${isPix(a) ? "ao pagador do Pix" : "ao cartão"} · ${a.payment_id || ""}`];
    case "recusado":
      return ["recusado", `Estorno recusado: ${MOTIVOS[a.motivo] || a.motivo || "sem motivo"}`,
        "Nada foi devolvido; o valor continua disponível para estorno."];
    case "revisao":
      if (!a.review_checked_at) {
        return ["revisao", "Estorno requer revisão — verificando se foi feito…",
          `Consultando o servidor antes de qualquer novo estorno. Não estorne de novo. (${a.last_error || "pedido recusado"})`];
      }
      return ["revisao", "Estorno requer revisão — nenhum estorno encontrado",
        `O servidor não fez este estorno (${a.last_error || "pedido recusado"}). Nada foi devolvido.`];
    case "pendente":
      if (a.tries === 0 && !serverDown(state)) {
        return ["pendente", "Processando estorno…", "Enviando ao servidor. Não estorne de novo."];
      }
      return ["pendente", "Estorno pendente — não estorne de novo", pendingWhy(state, a, now)];
    default:
      return ["erro", `Estado desconhecido: ${a.state} — não estorne de novo`,
        "Esta versão da tela não conhece este estado. Confira o estorno no histórico."];
  }
}

/** The refund dialog's controls: the amount is edited, then confirmed in R$, then followed.
 * "Confirmar estorno" is disabled from the press until the refund is final, by state. */
export function refundControls(state) {
  const r = state.refund;
  const a = r && r.attemptId ? state.attempts.get(r.attemptId) : null;
  const step = r ? r.step : "form";
  return {
    editHidden: step !== "form",
    reviewHidden: step !== "form",
    confirmHidden: step !== "confirm",
    confirmDisabled: !r || r.pressing,
    backHidden: step !== "confirm" || Boolean(r && r.pressing),
    statusHidden: !refundStatus(state, Date.now()),
    receiptHidden: !(a && a.state === "aprovado"),
  };
}

/** The confirmation a cashier reads before the money goes back. */
export function refundConfirmText(state) {
  const r = state.refund;
  if (!r) return "";
  const p = r.info.pagamento;
  const venda = p.sale_number == null ? "desta venda" : `da venda nº ${saleNumber(p.sale_number)}`;
  if (isPix(p)) return `Devolver ${brl(r.valor)} ${venda} ao pagador do Pix?`;
  if (isCash(p)) return `Devolver ${brl(r.valor)} ${venda} em dinheiro, da gaveta?`;
  return `Estornar ${brl(r.valor)} ${venda} para o cartão ${r.info.cartao}?`;
}

/** The refund dialog's heading line: what was paid, paid back, and is left, kept current by
 * the events while the dialog is open (the outbox's figures when it opened are the floor). */
export function refundMeta(state) {
  const { info } = state.refund;
  const live = refundsOf(state, info.pagamento.id);
  const estornado = Math.max(live.aprovado, info.estornado);
  const andamento = live.andamento;
  const saldo = Math.max(0, info.pagamento.valor - estornado - andamento);
  const parts = [`Pago ${brl(info.pagamento.valor)}`];
  if (estornado > 0) parts.push(`já estornado ${brl(estornado)}`);
  if (andamento > 0) parts.push(`em estorno ${brl(andamento)}`);
  parts.push(saldo > 0 ? `pode estornar até ${brl(saldo)}` : "nada mais a estornar");
  return parts.join(" · ");
}

/** Which controls are live: the Pagar button is disabled from the press until the attempt is
 * final (by state, not by a timer). A decline may be retried with another card (a new attempt);
 * a review only once the server confirmed it has no charge for it and the cashier chose "Outro
 * cartão"; an approval waits for "Nova venda". */
export function controls(state, a) {
  const known = Boolean(a && STATES[a.state]);
  const live = Boolean(a && (a.state === "pendente" || !known));
  const review = Boolean(a && a.state === "revisao");
  const checked = review && Boolean(a.review_checked_at);
  const approved = Boolean(a && a.state === "aprovado");
  // A new sale starts once this one is settled. A payment waiting offline was accepted under
  // the offline caps and is sent by itself, so the next customer may be served meanwhile.
  // A sale paid in parts with something still missing takes its next tender; it is settled
  // (a new sale may start) once paid, or once nothing of it is left paid (every tender refunded).
  const split = splitOf(state, a);
  const partial = Boolean(split && approved && split.falta > 0 && !split.cancelada && split.estornando === 0);
  // A divided sale with a part paid and something missing is not left, whatever its last
  // tender did (a Pix cancelled, a card declined): the next tender, or Cancelar venda.
  const halfPaid = Boolean(split && split.pago > 0 && split.falta > 0 && !split.cancelada);
  const givingBack = Boolean(split && split.estornando > 0);
  const settled = !halfPaid && Boolean(a && (a.state === "recusado" || (approved && !givingBack) || checked));
  const queued = live && known && serverDown(state);
  // An authorization the till undid when it started again (the sale was not finished): nothing
  // was taken, and the sale is charged again.
  const again = Boolean(a && a.captura_por === "reinicio" && (a.captura === "desfeita" || a.captura === "expirada"));
  const done = approved && !partial && !again;
  return {
    pagarDisabled: !state.ready || state.pressing || live || done || (review && !(checked && state.anotherCard)),
    retryReviewHidden: !checked || state.pressing,
    anotherCardHidden: !checked || state.anotherCard || state.pressing,
    novaVendaHidden: state.pressing || !(settled || queued),
    novaVendaText: !queued ? "Nova venda"
      : !isPix(a) ? "Próxima venda (este pagamento segue na fila)"
        // A Pix pays itself only if the customer has its QR: say which one moves on.
        : a.pix ? "Próxima venda (este Pix segue aguardando o cliente)"
          : "Próxima venda (este Pix não chegou a ser mostrado e expira sem cobrança)",
    valorDisabled: Boolean(live || done || review || state.pressing),
    cartaoDisabled: Boolean(live || done || (review && !state.anotherCard) || state.pressing),
    // The plan is part of the attempt's request: it changes only when a new attempt may be made.
    formaDisabled: Boolean(live || done || (review && !state.anotherCard) || state.pressing),
    // A divided sale with parts paid and something missing may be given up: its parts go back.
    cancelSaleHidden: !halfPaid || live || state.pressing,
    // The total of a sale paid in parts is fixed at its first tender.
    splitDisabled: Boolean(live || approved || review || state.pressing || (a && a.sale_total != null)),
    // Only an approval has a receipt: nothing that could pass for one is offered otherwise.
    comprovanteHidden: !approved || isUndone(a) || state.pressing,
    // Pix: like Pagar, and only while the server answers (its QR comes from it).
    // A part of a divided sale may be a Pix too (its QR holds its part at the server).
    pixDisabled: !state.ready || state.pressing || live || (approved && !partial) || review || !serverUp(state),
    pixWhy: !serverUp(state) && !live && !approved && !review && state.ready
      ? "Pix indisponível sem conexão com o servidor: cobre no cartão."
      : "",
    pixCancelHidden: !pixWaiting(a),
  };
}

/** A sale's number as a cashier says it: `0042`. */
export function saleNumber(n) {
  return n == null ? "" : String(n).padStart(4, "0");
}

/** The heading of the open sale: "Venda nº 0042". */
export function saleTitle(state) {
  return state.saleNumber == null ? "Venda" : `Venda nº ${saleNumber(state.saleNumber)}`;
}

/** What a key does now, or null: the cashier never needs the mouse. Enter pays through the
 * form itself. */
export function shortcut(state, key) {
  if (key === "Escape") {
    if (state.dialog === "refund" && state.refund && state.refund.step === "confirm" && !state.refund.pressing) return "refund-back";
    if (state.dialog) return "close-dialog";
    const a = current(state);
    if (pixWaiting(a) && !state.pixCancelling) return "cancel-pix";
    const panel = machinePanel(state, a);
    return panel && !panel.cancelDisabled ? "cancel-machine" : null;
  }
  if (state.dialog || !state.ready) return null;
  const c = controls(state, current(state));
  switch (key) {
    case "F2": return c.novaVendaHidden ? null : "new-sale";
    case "F3": return c.cartaoDisabled ? null : "cards";
    case "F6": return c.formaDisabled ? null : "plans";
    case "F7": return c.splitDisabled ? null : "split";
    case "F8": return state.pressing ? null : "drawer";
    case "F4": return c.comprovanteHidden ? null : "receipt";
    case "F5": return c.pixDisabled ? null : "pix";
    case "F9": return state.pressing ? null : "close-day";
    default: return null;
  }
}

/** The connectivity pill's text. */
export function connectivityText(state) {
  if (state.startupError) return "Parado";
  return { online: "Online", offline: "Offline", unknown: "Conectando…", certificado: "Certificado recusado" }[state.connectivity];
}

/** The offline banner's title and detail. A refused certificate is named as such: it is not
 * the cable, and waiting alone will not fix it. */
export function offlineBanner(state) {
  const untrusted = state.connectivity === "certificado";
  const title = untrusted
    ? "Certificado do servidor de pagamentos recusado."
    : state.connectivity === "unknown"
      ? "Verificando a conexão com o servidor de pagamentos…"
      : "Sem conexão com o servidor de pagamentos.";
  // A Pix whose QR is shown was sent already: it waits for the customer, not for the network.
  const pix = [...state.attempts.values()].filter(pixWaiting);
  const pixTotal = pix.reduce((sum, a) => sum + a.valor, 0);
  const n = Math.max(0, state.queue.count - pix.length);
  const total = Math.max(0, state.queue.total - pixTotal);
  const refunds = state.queue.refund_count || 0;
  const parts = [];
  if (n > 0) parts.push(`${n} ${n === 1 ? "pagamento aguardando" : "pagamentos aguardando"} · ${brl(total)}`);
  if (refunds > 0) parts.push(`${refunds} ${refunds === 1 ? "estorno aguardando" : "estornos aguardando"} · ${brl(state.queue.refund_total)}`);
  const pixPart = pix.length === 0
    ? ""
    : ` ${pix.length === 1 ? "1 Pix já enviado aguarda" : `${pix.length} Pix já enviados aguardam`} o cliente · ${brl(pixTotal)} — confirmado quando a rede voltar.`;
  if (untrusted) {
    const why = state.connectivityProblem ? `${capitalize(state.connectivityProblem)}.` : "O certificado apresentado não é aceito por este caixa.";
    const waiting = parts.length === 0
      ? (pix.length === 0 ? "Nenhum pagamento aguardando." : "")
      : `${parts.join("; ")} — guardados com as mesmas chaves; ${n + refunds === 1 ? "será enviado" : "serão enviados"} quando o certificado for aceito.`;
    return { title, detail: `${why} ${waiting}${pixPart} Não cobre de novo.`.replace(/ {2,}/g, " ") };
  }
  const queued = parts.length === 0
    ? (pix.length === 0 ? "Nenhum pagamento aguardando." : "")
    : `${parts.join("; ")} — ${n + refunds === 1 ? "será enviado sozinho" : "serão enviados sozinhos"} quando a rede voltar.`;
  return { title, detail: `${queued}${pixPart}`.trim() };
}

/** The latest attempt of every other sale still unsettled that the cashier did not just queue:
 * left by an earlier run, or in review. */
export function unfinishedSales(state) {
  const latest = new Map();
  for (const a of state.attempts.values()) {
    if (isRefund(a)) continue;
    const seen = latest.get(a.sale_id);
    if (!seen || a.created_at >= seen.created_at) latest.set(a.sale_id, a);
  }
  return [...latest.values()]
    .filter((a) => owedBack(state, a) || (a.sale_id !== state.saleId && (a.state === "pendente" || a.state === "revisao")))
    .filter((a) => owedBack(state, a) || a.state === "revisao" || state.carriedOver.has(a.sale_id))
    .sort((x, y) => x.created_at - y.created_at);
}

/** Every refund not settled (`pendente`, `revisao`) but the one the refund dialog follows:
 * the cashier must not refund those payments again. */
export function unfinishedRefunds(state) {
  const open = state.dialog === "refund" && state.refund ? state.refund.attemptId : null;
  return [...state.attempts.values()]
    .filter((a) => isRefund(a) && (a.state === "pendente" || a.state === "revisao") && a.id !== open)
    .sort((x, y) => x.created_at - y.created_at);
}

/** What the history's pill says for a state (an unknown one as it is). */
export function pillText(stateName) {
  return STATES[stateName] ? STATES[stateName].pill : stateName;
}

/** The QA table's "next try" cell. */
export function nextTryText(a, now) {
  if (a.state !== "pendente") return "—";
  return a.next_try_at > now ? `em ${secondsUntil(a.next_try_at, now)} s` : "agora";
}

/** The newest `limit` attempts, newest first. */
export function newest(state, limit) {
  return [...state.attempts.values()].sort((x, y) => y.created_at - x.created_at).slice(0, limit);
}

