// What an attempt is, read from the engine's record of it: its means, whether it is a refund, an
// undone authorization or a Pix paid after it was closed. No DOM, no state.

/** True for cash: local, approved when made. */
export function isCash(a) {
  return Boolean(a && a.metodo === "dinheiro");
}

/** True for a Pix attempt. */
export function isPix(a) {
  return Boolean(a && a.metodo === "pix");
}

/** The Pix of an attempt waiting for the customer: its QR is on screen. */
export function pixWaiting(a) {
  return Boolean(isPix(a) && a.state === "pendente" && a.pix && a.pix.status === "aguardando");
}

/** True for a card at the card machine. */
export function isMachine(a) {
  return Boolean(a && a.metodo === "maquininha");
}

/** A card-machine attempt whose order waits for a card (sent, or on the machine). */
export function machineWaiting(a) {
  return Boolean(isMachine(a) && a.state === "pendente" && a.maquininha && a.maquininha.status === "aguardando");
}

/** A Pix this till closed unpaid that the customer paid after all: money to give back. */
export function latePix(a) {
  return Boolean(isPix(a) && a.state === "recusado" && a.pix && a.pix.status === "recebido_apos_cancelamento");
}

/** A card part whose authorization is being or was undone, or lapsed: it pays nothing. */
export function isUndone(a) {
  return a.captura === "desfazer" || a.captura === "desfeita" || a.captura === "expirada";
}

/** True for a refund (estorno) attempt. */
export function isRefund(a) {
  return Boolean(a && a.kind === "estorno");
}
