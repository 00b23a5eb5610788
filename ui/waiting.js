// A payment that waits for the customer — a Pix's QR, a card at the machine —: what its panel
// shows, what its status says, and what a refused cancel leaves on screen; and the words and
// connection facts every status line shares. No DOM, no state of its own.
import { brl, clock, secondsUntil, storeTime } from "./format.js";
import { isMachine, latePix, pixWaiting } from "./attempt.js";

/** Decline reasons the gateway gives, as a cashier reads them. */
export const MOTIVOS = {
  cartao_recusado: "cartão recusado",
  saldo_insuficiente: "saldo insuficiente",
  estorno_recusado: "a operadora recusou o estorno",
  chave_cancelada: "tentativa cancelada, nada foi cobrado",
  pix_expirado: "o Pix expirou sem pagamento",
  pix_cancelado: "o Pix foi cancelado sem pagamento",
  metodo_nao_aceito: "o cartão não aceita esta forma de pagamento",
  parcelamento_nao_permitido: "o cartão não aceita parcelamento",
};

/** The server is known to answer now. */
export function serverUp(state) {
  return state.connectivity === "online";
}

/** The server cannot be used now (no connection, or its certificate refused): payments wait. */
export function serverDown(state) {
  return state.connectivity === "offline" || state.connectivity === "certificado";
}

/** The message of a command's refusal. */
export function errorText(err) {
  return err && err.message ? err.message : String(err);
}

/** Why an attempt is still `pendente`, for a payment and a refund alike. */
export function pendingWhy(state, a, now) {
  // The last error's plain part ("a conexão caiu antes da resposta"), without the details, and
  // not when it only repeats "sem conexão".
  const plain = a.last_error ? a.last_error.split(" (")[0] : "";
  const cause = plain && plain !== "sem conexão com o servidor" ? ` (${plain})` : "";
  if (state.connectivity === "certificado") {
    return "Certificado do servidor recusado: guardado com a mesma chave, será enviado quando o certificado for aceito.";
  }
  if (state.connectivity !== "online") {
    return `Sem conexão${cause}: será enviado sozinho quando a rede voltar, com a mesma chave.`;
  }
  if (a.next_try_at > now) return `Nova tentativa em ${secondsUntil(a.next_try_at, now)} s, com a mesma chave.`;
  return "Enviando de novo, com a mesma chave.";
}

/** Whether "Manter" is offered for a late Pix: the core's decision (`SaleView.manter_pix`: no
 * other payment of that sale approved or under way, no devolução of it asked for, not a part of
 * a divided sale; the outbox refuses the same when it keeps it). */
export function canKeepPix(state, a) {
  const v = a && state.sales.get(a.sale_id);
  return Boolean(v && v.manter_pix.includes(a.id));
}

/** The Pix panel: hidden, or what it shows for the attempt on screen. */
export function pixPanel(state, a, now) {
  if (!pixWaiting(a)) return null;
  const left = secondsUntil(a.pix.expira_em, now);
  return {
    valor: brl(a.valor),
    copia: a.pix.copia_e_cola,
    countdown: left > 0 ? `Expira em ${clock(left)}` : "Tempo esgotado — confirmando com o servidor…",
    cancelDisabled: state.pixCancelling || !serverUp(state),
  };
}

/** The status of a Pix attempt: [kind, label, detail]. */
export function pixStatus(state, a, now) {
  const e2e = a.pix && a.pix.e2eid ? ` · E2E ${a.pix.e2eid}` : "";
  switch (a.state) {
    case "aprovado": {
      const at = a.pix && a.pix.pago_em ? ` às ${storeTime(a.pix.pago_em, state.utcOffsetMinutes)}` : "";
      if (a.motivo === "recebido_apos_cancelamento") {
        return ["aprovado", "Pix recebido após cancelamento",
          `O cliente pagou ${brl(a.valor)}${at}, depois do cancelamento: o valor fica como pagamento desta venda${e2e}.`];
      }
      return ["aprovado", `Pix recebido${at}`, `${brl(a.valor)} · ${a.payment_id || ""}${e2e}`];
    }
    case "recusado":
      if (latePix(a)) {
        return ["revisao", "Pix recebido após cancelamento — devolva ao cliente",
          `O cliente pagou ${brl(a.valor)} depois que este Pix foi ${a.motivo === "pix_expirado" ? "expirado" : "cancelado"}${e2e}. ${canKeepPix(state, a)
            ? "Se a venda não foi paga de outra forma, \"Manter\" no histórico aceita este Pix como o pagamento dela; senão devolva em \"Estornar\"."
            : "Devolva em \"Estornar\" no histórico: a venda já foi paga de outra forma."}`];
      }
      if (a.motivo === "pix_expirado") {
        return ["recusado", "Pix expirado — nada foi recebido", "O QR foi retirado do banco. Gere outro Pix ou cobre no cartão."];
      }
      if (a.motivo === "pix_cancelado") {
        return ["recusado", "Pix cancelado — nada foi recebido", "O QR foi retirado do banco. Pode cobrar de outra forma."];
      }
      return ["recusado", `Pix recusado: ${MOTIVOS[a.motivo] || a.motivo || "sem motivo"}`, "Nada foi recebido."];
    case "pendente":
      if (!a.pix) {
        if (a.tries === 0 && !serverDown(state)) return ["pendente", "Gerando Pix…", "Pedindo o QR ao servidor."];
        return ["pendente", "Pix pendente — não cobre de novo", pendingWhy(state, a, now)];
      }
      if (state.pixCancel && state.pixCancel.id === a.id) {
        return state.pixCancel.kind === "pix_not_cancelled"
          ? ["pix", "Pix não cancelado — ainda pode ser pago", state.pixCancel.message]
          : ["pendente", "Cancelamento do Pix não confirmado — ele ainda pode ser pago", state.pixCancel.message];
      }
      if (serverDown(state)) {
        return ["pix", "Aguardando pagamento do Pix — sem conexão",
          "Se o cliente já pagou, o Pix será confirmado quando a rede voltar. Não cobre de novo."];
      }
      return ["pix", "Aguardando pagamento do Pix", `${brl(a.valor)} · mostre o QR ao cliente. Não cobre de novo.`];
    default:
      return null;
  }
}

/** What a refused "Cancelar Pix" leaves on screen: a cancel the server did not confirm is the
 * Pix's own state (it may still be paid, and the screen follows it to its end); anything else is
 * the press's error. */
export function pixCancelRefused(state, a, err) {
  if (err && (err.kind === "pix_not_cancelled" || err.kind === "pix_cancel_unknown")) {
    state.pixCancel = { id: a.id, kind: err.kind, message: errorText(err) };
  } else {
    state.error = errorText(err);
  }
}

/** The card-machine panel: hidden, or what it shows for the attempt on screen. */
export function machinePanel(state, a) {
  if (!isMachine(a) || a.state !== "pendente") return null;
  const m = a.maquininha;
  const onMachine = Boolean(m && m.estado === "at_terminal");
  return {
    valor: brl(a.valor),
    maquininha: m ? m.maquininha : (state.maquininha || ""),
    estado: !m ? "Enviando o pedido à maquininha…"
      : onMachine ? "Na maquininha: aproxime, insira ou passe o cartão"
        : "Pedido enviado — aguardando a maquininha pegar",
    // Once the machine holds it only the machine ends it: the button says so instead.
    cancelLabel: onMachine ? "Cancele na maquininha" : "Cancelar pedido",
    cancelDisabled: !m || onMachine || state.machineCancelling || !serverUp(state),
  };
}

/** What a decline at the machine says, in words. */
const MACHINE_REASONS = {
  insufficient_amount: "saldo insuficiente",
  invalid_pin: "senha incorreta",
  canceled_on_terminal: "cancelado na maquininha",
};

/** The status of a card-machine attempt: [kind, label, detail]. */
export function machineStatus(state, a, now) {
  const m = a.maquininha;
  const id = m ? m.maquininha : (state.maquininha || "");
  switch (a.state) {
    case "aprovado": {
      const com = m && m.pago_com ? ` no ${{ debito: "débito", credito: "crédito", voucher: "voucher" }[m.pago_com]}` : "";
      return ["aprovado", `Pago na maquininha${com}`, `${brl(a.valor)} · ${a.payment_id || ""} · pedido ${m ? m.pedido : ""}`];
    }
    case "recusado":
      if (a.motivo === "maquininha_cancelado" || (m && m.motivo === "canceled_on_terminal")) {
        return ["recusado", "Pedido na maquininha cancelado — nada foi cobrado", "Pode cobrar de outra forma."];
      }
      if (a.motivo === "maquininha_expirado") {
        return ["recusado", "Tempo esgotado na maquininha — nada foi cobrado", "Cobre de novo ou de outra forma."];
      }
      return ["recusado", `Recusado na maquininha: ${MACHINE_REASONS[a.motivo] || a.motivo || "sem motivo"}`,
        "Nada foi cobrado. Peça outro cartão ou outra forma."];
    case "pendente":
      if (!m) {
        if (a.tries === 0 && !serverDown(state)) return ["pendente", `Enviando à maquininha ${id}…`, "Pedindo ao servidor."];
        return ["pendente", "Pedido à maquininha pendente — não cobre de novo", pendingWhy(state, a, now)];
      }
      if (state.machineCancel && state.machineCancel.id === a.id) {
        return ["pix", "A maquininha está com o pedido — ele ainda pode ser pago", state.machineCancel.message];
      }
      if (serverDown(state)) {
        return ["pix", `Aguardando a maquininha ${id} — sem conexão`,
          "Se o cliente já pagou, o pagamento será confirmado quando a rede voltar. Não cobre de novo."];
      }
      if (m.estado === "at_terminal") {
        return ["pix", `Na maquininha ${id}: aproxime, insira ou passe o cartão`,
          `${brl(a.valor)} · não cobre de novo. Para desistir, cancele na maquininha.`];
      }
      return ["pix", `Aguardando a maquininha ${id}…`, `${brl(a.valor)} · pedido enviado; Esc cancela enquanto a maquininha não o pegar.`];
    default:
      return null;
  }
}

/** What a refused cancel of a machine order leaves on screen: the machine holding it, or no
 * answer, is the order's own state (it may still be paid); anything else is the press's error. */
export function machineCancelRefused(state, a, err) {
  if (err && (err.kind === "machine_has_order" || err.kind === "machine_cancel_unknown")) {
    state.machineCancel = { id: a.id, kind: err.kind, message: errorText(err) };
  } else {
    state.error = errorText(err);
  }
}
