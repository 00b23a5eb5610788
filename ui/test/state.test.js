// Unit tests of the screen's decisions (node --test ui/test/, run by `make test`).
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  applyEvent, applySnapshot, applyOpenSale, closingTotals, closingVerdict, discrepancyGroups, saleTitle,
  shortcut, snapshotMark, storeTime, brl, brlInput, controls, createState, current, nextTryText, pillText,
  STATES, statusFor, unfinishedSales, upsert, KEEP_ATTEMPTS, newest, canRefund, offlineBanner,
  refundConfirmText, refundControls, refundMeta, refundsOf, refundStatus, unfinishedRefunds,
  connectivityText, pixCancelRefused, pixPanel, pixWaiting, canKeepPix, formaText, planArgs, planValue, splitOf, splitText,
  parseBrl, trocoText, isCash, capturePill, applySaleViews, prune, machinePanel, machineCancelRefused, restoredPlanValue,
  notaText, applyNotas,
} from "../state.js";

const NOW = 1_000_000;

function attempt(over = {}) {
  return {
    id: "att_1", sale_id: "venda-1", idempotency_key: "k", valor: 123456, cartao: "tok_aprovado",
    state: "pendente", tries: 0, next_try_at: NOW, last_tried_at: null, last_error: null,
    response_status: null, payment_id: null, motivo: null, created_at: NOW, updated_at: NOW,
    review_checked_at: null, ...over,
  };
}

/** The core's view of a sale (checkout-core `SaleView`) as the events bring it: these tests give
 * what Rust decided (its rules are `sale_view.rs`'s tests) and check what the window draws. */
let viewClock = NOW;
function decided(s, { sale = "venda-1", divisao = null, estornos = [], manter_pix = [] } = {}) {
  viewClock += 1;
  applySaleViews(s, [{ sale_id: sale, divisao, estornos, manter_pix, as_of: viewClock }]);
}

/** A divided sale's standing (`SaleView.divisao`). */
function division(total, pago, over = {}) {
  return {
    total, pago, falta: Math.max(0, total - pago), partes: [], devolvido: 0, estornando: 0, cancelada: false,
    autorizado: 0, capturando: 0, liberado: 0, ...over,
  };
}

function ready(a) {
  const s = createState();
  s.ready = true;
  s.connectivity = "online";
  s.saleId = "venda-1";
  if (a) {
    upsert(s, a);
    s.attemptId = a.id;
  }
  return s;
}

test("amounts read the Brazilian way", () => {
  assert.equal(brl(123456), "R$ 1.234,56");
  assert.equal(brl(5), "R$ 0,05");
  assert.equal(brl(-100), "-R$ 1,00");
  assert.equal(brlInput(100000000), "1.000.000,00");
});

test("every known state has its own label and none reads as unknown", () => {
  const labels = new Set();
  for (const name of Object.keys(STATES)) {
    const a = attempt({ state: name, review_checked_at: name === "revisao" ? NOW : null });
    const [kind, label] = statusFor(ready(a), a, NOW);
    assert.equal(kind, name, `${name} is drawn as itself`);
    assert.ok(!label.startsWith("Estado desconhecido"), label);
    labels.add(label);
  }
  assert.equal(labels.size, Object.keys(STATES).length, "one label per state");
});

test("an unknown state is never shown as pending, ready or approved, and Pagar stays off", () => {
  const a = attempt({ state: "estornado" });
  const s = ready(a);
  const [kind, label] = statusFor(s, a, NOW);
  assert.equal(kind, "erro");
  assert.match(label, /Estado desconhecido: estornado — não cobre de novo/);
  const c = controls(s, a);
  assert.equal(c.pagarDisabled, true);
  assert.equal(c.novaVendaHidden, true, "not settled, not queued");
  assert.equal(pillText("estornado"), "estornado");
});

test("pending says not to charge again, and why it waits", () => {
  const s = ready();
  const a = attempt({ tries: 2, next_try_at: NOW + 4_000, last_error: "a conexão caiu antes da resposta (reset)" });
  upsert(s, a);
  s.attemptId = a.id;
  assert.deepEqual(statusFor(s, a, NOW).slice(0, 2), ["pendente", "Pagamento pendente — não cobre de novo"]);
  assert.match(statusFor(s, a, NOW)[2], /Nova tentativa em 4 s, com a mesma chave/);
  s.connectivity = "offline";
  assert.match(statusFor(s, a, NOW)[2], /^Sem conexão \(a conexão caiu antes da resposta\): será enviado sozinho/);
  assert.equal(nextTryText(a, NOW), "em 4 s");
  assert.equal(nextTryText(attempt({ state: "aprovado" }), NOW), "—");
});

test("Pagar is off from the press until the attempt is final", () => {
  const s = ready();
  assert.equal(controls(s, null).pagarDisabled, false);
  s.pressing = true;
  assert.equal(controls(s, null).pagarDisabled, true, "while pay runs");
  s.pressing = false;
  for (const [st, off] of [["pendente", true], ["aprovado", true], ["recusado", false]]) {
    assert.equal(controls(s, attempt({ state: st })).pagarDisabled, off, st);
  }
  const review = attempt({ state: "revisao" });
  assert.equal(controls(s, review).pagarDisabled, true, "review not yet checked");
  const checked = attempt({ state: "revisao", review_checked_at: NOW });
  assert.equal(controls(s, checked).pagarDisabled, true, "checked, but the cashier has not chosen another card");
  s.anotherCard = true;
  assert.equal(controls(s, checked).pagarDisabled, false);
});

test("a payment waiting offline lets the next sale start; online it does not", () => {
  const s = ready();
  const a = attempt();
  assert.equal(controls(s, a).novaVendaHidden, true);
  s.connectivity = "offline";
  const c = controls(s, a);
  assert.equal(c.novaVendaHidden, false);
  assert.equal(c.novaVendaText, "Próxima venda (este pagamento segue na fila)");
  assert.equal(controls(s, attempt({ state: "aprovado" })).novaVendaText, "Nova venda");
});

test("a late pay answer never replaces a newer view of the attempt", () => {
  const s = ready();
  upsert(s, attempt({ state: "aprovado", tries: 1, updated_at: NOW + 10 }));
  upsert(s, attempt({ state: "pendente", tries: 0, updated_at: NOW }));
  assert.equal(s.attempts.get("att_1").state, "aprovado");
});

test("an event for the open sale makes its new attempt the current one", () => {
  const s = ready(attempt({ state: "recusado" }));
  applyEvent(s, { type: "attempt_changed", attempt: attempt({ id: "att_2", created_at: NOW + 1 }) });
  assert.equal(current(s).id, "att_2");
  applyEvent(s, { type: "attempt_changed", attempt: attempt({ id: "att_3", sale_id: "venda-9", created_at: NOW + 2 }) });
  assert.equal(current(s).id, "att_2", "another sale's attempt does not take the screen");
  applyEvent(s, { type: "connectivity_changed", connectivity: "offline" });
  assert.equal(s.connectivity, "offline");
});

test("sales left unfinished by an earlier run are listed; ones queued now are not", () => {
  const s = createState();
  applyOpenSale(s, {
    sale: "venda-3",
    attempt: attempt({ id: "att_3", sale_id: "venda-3" }),
    unfinished: [attempt({ id: "att_1", sale_id: "venda-1" })],
  });
  upsert(s, attempt({ id: "att_2", sale_id: "venda-2" }));
  upsert(s, attempt({ id: "att_4", sale_id: "venda-4", state: "revisao" }));
  assert.deepEqual(unfinishedSales(s).map((a) => a.sale_id).sort(), ["venda-1", "venda-4"]);
  assert.equal(s.saleId, "venda-3");
  assert.equal(current(s).id, "att_3");
});

test("a snapshot that left before an event does not put back what the event replaced", () => {
  const s = ready();
  s.connectivity = "unknown";
  const mark = snapshotMark(s);
  // The probe's event arrives while the snapshot (read while still unknown) is on its way.
  applyEvent(s, { type: "connectivity_changed", connectivity: "offline" });
  applyEvent(s, { type: "attempt_changed", attempt: attempt({ state: "aprovado", tries: 1, updated_at: NOW + 5 }) });
  applySnapshot(s, {
    attempts: [attempt({ state: "pendente", updated_at: NOW })],
    queue: { count: 1, total: 123456 },
    connectivity: "unknown",
    offline_simulated: false,
  }, mark);
  assert.equal(s.connectivity, "offline");
  assert.equal(s.attempts.get("att_1").state, "aprovado");
  assert.deepEqual(s.queue, { count: 1, total: 123456 }, "no queue event came: the snapshot's");
  const later = snapshotMark(s);
  applySnapshot(s, { attempts: [], queue: { count: 0, total: 0 }, connectivity: "online", offline_simulated: true }, later);
  assert.equal(s.connectivity, "online", "nothing newer: the snapshot wins");
  assert.equal(s.offlineSimulated, true);
});

test("keys do what the footer says, only when the screen allows it", () => {
  const s = ready();
  assert.equal(shortcut(s, "F9"), "close-day");
  assert.equal(shortcut(s, "F3"), "cards");
  assert.equal(shortcut(s, "F2"), null, "no sale to leave yet");
  assert.equal(shortcut(s, "F4"), null, "no receipt before an approval");
  const approved = attempt({ state: "aprovado" });
  upsert(s, approved);
  s.attemptId = approved.id;
  assert.equal(shortcut(s, "F4"), "receipt");
  assert.equal(shortcut(s, "F2"), "new-sale");
  assert.equal(shortcut(s, "F3"), null, "the approved sale's card is fixed");
  for (const st of ["pendente", "recusado", "revisao"]) {
    const a = attempt({ id: `att_${st}`, state: st });
    upsert(s, a);
    s.attemptId = a.id;
    assert.equal(shortcut(s, "F4"), null, `no receipt for ${st}`);
    assert.equal(controls(s, a).comprovanteHidden, true);
  }
  s.dialog = "receipt";
  assert.equal(shortcut(s, "F9"), null, "a dialog takes the keys");
  assert.equal(shortcut(s, "Escape"), "close-dialog");
  assert.equal(shortcut(s, "x"), null);
});

test("the sale is titled by its number and the closing reads at a glance", () => {
  const s = createState();
  assert.equal(saleTitle(s), "Venda");
  applyOpenSale(s, { sale: "venda-1", numero: 42, attempt: null, unfinished: [] });
  assert.equal(saleTitle(s), "Venda nº 0042");
  const closing = {
    totals: { aprovado: { count: 2, centavos: 1500 }, recusado: { count: 1, centavos: 500 },
      pendente: { count: 0, centavos: 0 }, revisao: { count: 0, centavos: 0 } },
    refunds: { aprovado: { count: 1, centavos: 300 }, recusado: { count: 0, centavos: 0 },
      pendente: { count: 1, centavos: 200 }, revisao: { count: 0, centavos: 0 } },
    net_centavos: 1200,
    discrepancies: [
      { kind: "two_charges_for_one_sale", label: "Duas cobranças para uma venda", venda: "0004", detail: "…" },
      { kind: "amount_mismatch", label: "Valor diferente", venda: "0003", detail: "…" },
      { kind: "two_charges_for_one_sale", label: "Duas cobranças para uma venda", venda: "0007", detail: "…" },
    ],
  };
  assert.deepEqual(closingTotals(closing)[0], ["Aprovados", 2, 1500]);
  assert.deepEqual(closingTotals(closing).slice(4), [
    ["Estornos aprovados", 1, 300],
    ["Estornos pendentes", 1, 200], // refund states other than approved only when there are some
    ["Líquido do dia", null, 1200],
  ]);
  assert.deepEqual(discrepancyGroups(closing).map((g) => [g.kind, g.items.length]),
    [["two_charges_for_one_sale", 2], ["amount_mismatch", 1]]);
  assert.equal(closingVerdict(closing).ok, false);
  assert.equal(closingVerdict({ discrepancies: [] }).ok, true);
});

test("times are the store's, whatever the machine's zone", () => {
  // 2026-12-01T17:32:05Z is 14:32:05 in São Paulo (-03:00) and 23:02:05 in India (+05:30).
  const ms = Date.UTC(2026, 11, 1, 17, 32, 5);
  assert.equal(storeTime(ms, -180), "14:32:05");
  assert.equal(storeTime(ms, 330), "23:02:05");
});

test("the window keeps a bounded history, never losing an unsettled attempt or the one on screen", () => {
  const s = ready(attempt({ id: "att_screen", sale_id: "venda-0", state: "aprovado", created_at: 1 }));
  upsert(s, attempt({ id: "att_review", sale_id: "venda-r", state: "revisao", created_at: 2 }));
  upsert(s, attempt({ id: "att_pending", sale_id: "venda-p", state: "pendente", created_at: 3 }));
  for (let i = 0; i < 1000; i++) {
    upsert(s, attempt({ id: `att_${i}`, sale_id: `venda-${i}`, state: "aprovado", created_at: 10 + i }));
  }
  assert.ok(s.attempts.size <= KEEP_ATTEMPTS + 50 + 3, `kept ${s.attempts.size}`);
  for (const id of ["att_screen", "att_review", "att_pending"]) assert.ok(s.attempts.has(id), id);
  // The history still shows the newest 50.
  assert.deepEqual(newest(s, 50).map((a) => a.id), [...Array(50)].map((_, i) => `att_${999 - i}`));
});

test("counts agree with their nouns", async () => {
  const { count } = await import("../state.js");
  assert.equal(count(1, "venda", "vendas"), "1 venda");
  assert.equal(count(0, "venda", "vendas"), "0 vendas");
  assert.equal(count(2, "pagamento", "pagamentos"), "2 pagamentos");
});

/** A refund attempt of payment attempt `of`. */
function refund(over = {}) {
  return attempt({ id: "att_r1", kind: "estorno", refund_of: "att_1", refund_payment: "pay_1", valor: 3000, ...over });
}

test("a refund never becomes the sale's attempt, and the sale shows what was paid back", () => {
  const paid = attempt({ state: "aprovado", payment_id: "pay_1", valor: 10000, kind: "pagamento" });
  const s = ready(paid);
  applyEvent(s, { type: "attempt_changed", attempt: refund({ state: "aprovado", payment_id: "est_1", created_at: NOW + 5 }) });
  decided(s, { estornos: [{ pagamento: "att_1", aprovado: 3000, andamento: 0 }] });
  assert.equal(current(s).id, "att_1", "the screen still follows the payment");
  assert.deepEqual(refundsOf(s, "att_1"), { aprovado: 3000, andamento: 0 });
  assert.match(statusFor(s, current(s), NOW)[2], /estornado R\$ 30,00/);
  assert.equal(canRefund(s, current(s)), true, "R$ 70,00 are left");
  applyEvent(s, { type: "attempt_changed", attempt: refund({ id: "att_r2", valor: 7000, created_at: NOW + 6 }) });
  decided(s, { estornos: [{ pagamento: "att_1", aprovado: 3000, andamento: 7000 }] });
  assert.equal(canRefund(s, current(s)), false, "a refund is undecided: it is followed, not repeated");
  assert.equal(canRefund(s, s.attempts.get("att_r2")), false, "a refund is not refunded");
  assert.equal(unfinishedSales(s).length, 0, "refunds are not unfinished sales");
  assert.deepEqual(unfinishedRefunds(s).map((a) => a.id), ["att_r2"]);
});

test("the refund dialog has one honest label per state and says not to refund again while pending", () => {
  const s = ready(attempt({ state: "aprovado", payment_id: "pay_1", valor: 10000 }));
  s.dialog = "refund";
  s.refund = { payment: "att_1", info: { pagamento: s.attempts.get("att_1"), estornado: 0, em_andamento: 0, saldo: 10000, cartao: "tok_…vado" },
    step: "form", valor: 10000, motivo: "", attemptId: null, error: null, pressing: false };
  assert.equal(refundStatus(s, NOW), null, "nothing asked yet");
  assert.equal(refundControls(s).confirmHidden, true);
  s.refund.step = "confirm";
  s.refund.valor = 3000;
  assert.equal(refundConfirmText(s), "Estornar R$ 30,00 desta venda para o cartão tok_…vado?");
  assert.equal(refundControls(s).confirmDisabled, false);
  s.refund.pressing = true;
  assert.equal(refundControls(s).confirmDisabled, true, "off from the press");
  assert.equal(refundStatus(s, NOW)[1], "Registrando o estorno…");
  s.refund.pressing = false;
  s.refund.step = "sent";
  s.refund.attemptId = "att_r1";
  assert.equal(refundControls(s).confirmHidden, true, "once sent, it cannot be confirmed again");
  const labels = new Set();
  for (const [state, extra, label] of [
    ["pendente", { tries: 2 }, "Estorno pendente — não estorne de novo"],
    ["aprovado", { payment_id: "est_1" }, "Estorno aprovado"],
    ["recusado", { motivo: "estorno_recusado" }, "Estorno recusado: a operadora recusou o estorno"],
    ["revisao", {}, "Estorno requer revisão — verificando se foi feito…"],
    ["revisao", { review_checked_at: NOW }, "Estorno requer revisão — nenhum estorno encontrado"],
  ]) {
    upsert(s, refund({ state, updated_at: NOW + labels.size + 1, ...extra }));
    assert.equal(refundStatus(s, NOW)[1], label);
    labels.add(label);
  }
  s.connectivity = "offline";
  upsert(s, refund({ state: "pendente", tries: 0, updated_at: NOW + 99 }));
  assert.deepEqual(refundStatus(s, NOW).slice(0, 2), ["pendente", "Estorno pendente — não estorne de novo"]);
  assert.match(refundStatus(s, NOW)[2], /quando a rede voltar, com a mesma chave/);
  upsert(s, refund({ state: "aprovado", payment_id: "est_1", updated_at: NOW + 100 }));
  decided(s, { estornos: [{ pagamento: "att_1", aprovado: 3000, andamento: 0 }] });
  assert.equal(refundMeta(s), "Pago R$ 100,00 · já estornado R$ 30,00 · pode estornar até R$ 70,00",
    "the dialog follows what the refund did, not the figures it opened with");
  upsert(s, refund({ id: "att_r2", valor: 7000, state: "pendente", created_at: NOW + 1 }));
  decided(s, { estornos: [{ pagamento: "att_1", aprovado: 3000, andamento: 7000 }] });
  assert.equal(refundMeta(s), "Pago R$ 100,00 · já estornado R$ 30,00 · em estorno R$ 70,00 · nada mais a estornar");
});

test("the offline banner counts refunds apart from payments", () => {
  const s = createState();
  s.connectivity = "offline";
  s.queue = { count: 2, total: 5000, refund_count: 1, refund_total: 3000 };
  assert.equal(offlineBanner(s).detail,
    "2 pagamentos aguardando · R$ 50,00; 1 estorno aguardando · R$ 30,00 — serão enviados sozinhos quando a rede voltar.");
  s.queue = { count: 0, total: 0, refund_count: 1, refund_total: 3000 };
  assert.equal(offlineBanner(s).detail, "1 estorno aguardando · R$ 30,00 — será enviado sozinho quando a rede voltar.");
});

test("a sale whose key the server cancelled says nothing was charged and lets the cashier charge again", () => {
  const s = ready(attempt({ state: "recusado", motivo: "chave_cancelada" }));
  const [kind, label, detail] = statusFor(s, current(s), NOW);
  assert.equal(kind, "recusado");
  assert.equal(label, "Tentativa cancelada — nada foi cobrado");
  assert.match(detail, /não pode mais cobrar/);
  assert.equal(controls(s, current(s)).pagarDisabled, false);
});

test("a refused certificate is named as such, never as a cut cable, and says the payments wait with their keys", () => {
  const s = ready(attempt({ state: "pendente", tries: 0 }));
  applyEvent(s, {
    type: "connectivity_changed",
    connectivity: "certificado",
    problema: "o certificado do servidor de pagamentos não é de uma autoridade em que este caixa confia: configure ca_cert com a CA que o emitiu",
  });
  s.queue = { count: 1, total: 1234, refund_count: 0, refund_total: 0 };
  assert.equal(connectivityText(s), "Certificado recusado");
  const banner = offlineBanner(s);
  assert.equal(banner.title, "Certificado do servidor de pagamentos recusado.");
  assert.match(banner.detail, /^O certificado do servidor de pagamentos não é de uma autoridade/);
  assert.match(banner.detail, /configure ca_cert/);
  assert.match(banner.detail, /mesmas chaves/);
  assert.doesNotMatch(banner.detail, /rede voltar/);
  const [, label, detail] = statusFor(s, current(s), NOW);
  assert.equal(label, "Pagamento pendente — não cobre de novo");
  assert.match(detail, /Certificado do servidor recusado/);
  applyEvent(s, { type: "connectivity_changed", connectivity: "online" });
  assert.equal(s.connectivityProblem, null);
});

test("a second window on the same data folder names the other window, not the configuration", () => {
  const s = createState();
  s.startupError = "o Pagar já está aberto em outra janela com esta pasta de dados (/x/outbox.db)";
  s.startupKind = "other_window";
  const [kind, label, detail] = statusFor(s, null, NOW);
  assert.equal(kind, "erro");
  assert.equal(label, "Pagar já aberto em outra janela");
  assert.doesNotMatch(detail, /configuração/);
  s.startupKind = "startup";
  assert.match(statusFor(s, null, NOW)[2], /Corrija a configuração/);
});

function pix(over = {}, charge = {}) {
  return attempt({
    metodo: "pix", cartao: null,
    pix: { payment_id: "pay_1", txid: "t".repeat(32), copia_e_cola: "000201...6304ABCD", expira_em: NOW + 600_000, status: "aguardando", e2eid: null, pago_em: null, ...charge },
    tries: 1, payment_id: "pay_1", ...over,
  });
}

test("a Pix says what it waits for, online and offline, and never reads as paid before it is", () => {
  const s = ready(pix());
  assert.deepEqual(statusFor(s, current(s), NOW).slice(0, 2), ["pix", "Aguardando pagamento do Pix"]);
  assert.ok(pixWaiting(current(s)));
  const panel = pixPanel(s, current(s), NOW);
  assert.equal(panel.countdown, "Expira em 10:00");
  assert.equal(panel.valor, "R$ 1.234,56");
  assert.equal(pixPanel(s, current(s), NOW + 600_000).countdown, "Tempo esgotado — confirmando com o servidor…");
  s.connectivity = "offline";
  assert.equal(statusFor(s, current(s), NOW)[1], "Aguardando pagamento do Pix — sem conexão");
  assert.ok(pixPanel(s, current(s), NOW).cancelDisabled, "cancelling needs the server");
  // Before the server answered, there is no QR.
  const made = ready(pix({ pix: null, tries: 0 }));
  assert.equal(statusFor(made, current(made), NOW)[1], "Gerando Pix…");
  assert.equal(pixPanel(made, current(made), NOW), null);
});

test("a settled Pix: received with its time, received after cancellation, expired, cancelled", () => {
  const paid = ready(pix({ state: "aprovado" }, { status: "aprovado", e2eid: "E123", pago_em: NOW }));
  const [kind, label, detail] = statusFor(paid, current(paid), NOW);
  assert.equal(kind, "aprovado");
  assert.match(label, /^Pix recebido às \d\d:\d\d:\d\d$/);
  assert.match(detail, /E2E E123/);
  const late = ready(pix({ state: "aprovado", motivo: "recebido_apos_cancelamento" }, { status: "recebido_apos_cancelamento" }));
  assert.equal(statusFor(late, current(late), NOW)[1], "Pix recebido após cancelamento");
  const expired = ready(pix({ state: "recusado", motivo: "pix_expirado" }, { status: "expirado" }));
  assert.equal(statusFor(expired, current(expired), NOW)[1], "Pix expirado — nada foi recebido");
  assert.equal(controls(expired, current(expired)).pagarDisabled, false, "the card is offered");
  const cancelled = ready(pix({ state: "recusado", motivo: "pix_cancelado" }, { status: "cancelado" }));
  assert.equal(statusFor(cancelled, current(cancelled), NOW)[1], "Pix cancelado — nada foi recebido");
  assert.equal(canRefund(paid, current(paid)), true, "a received Pix can be given back (devolução)");
});

test("offline, moving on from a Pix says whether the customer has its QR", () => {
  const shown = ready(pix());
  shown.connectivity = "offline";
  assert.equal(controls(shown, current(shown)).novaVendaText, "Próxima venda (este Pix segue aguardando o cliente)");
  const unseen = ready(pix({ pix: null }));
  unseen.connectivity = "offline";
  assert.match(controls(unseen, current(unseen)).novaVendaText, /não chegou a ser mostrado/);
});

test("F5 makes a Pix only when Pagar could and the server answers; Esc cancels a waiting one", () => {
  const s = ready();
  assert.equal(shortcut(s, "F5"), "pix");
  s.connectivity = "offline";
  assert.equal(shortcut(s, "F5"), null);
  assert.match(controls(s, null).pixWhy, /cobre no cartão/);
  const waiting = ready(pix());
  assert.equal(shortcut(waiting, "F5"), null, "one Pix per sale at a time");
  assert.equal(controls(waiting, current(waiting)).pagarDisabled, true);
  assert.equal(shortcut(waiting, "Escape"), "cancel-pix");
  waiting.pixCancelling = true;
  assert.equal(shortcut(waiting, "Escape"), null);
});

test("a Pix paid after the till closed it asks to be given back until it is", () => {
  const late = pix({ state: "recusado", motivo: "pix_cancelado" }, { status: "recebido_apos_cancelamento", e2eid: "E9" });
  const s = ready(late);
  s.saleId = "venda-2";
  const [kind, label] = statusFor(s, late, NOW);
  assert.equal(kind, "revisao");
  assert.equal(label, "Pix recebido após cancelamento — devolva ao cliente");
  assert.equal(canRefund(s, late), true);
  assert.deepEqual(unfinishedSales(s).map((a) => a.id), [late.id]);
  upsert(s, attempt({ id: "att_dev", kind: "estorno", refund_of: late.id, state: "aprovado", valor: late.valor }));
  decided(s, { sale: late.sale_id, estornos: [{ pagamento: late.id, aprovado: late.valor, andamento: 0 }] });
  assert.deepEqual(unfinishedSales(s), [], "given back in full: nothing owed");
});

test("offline, a Pix already shown is not counted as waiting to be sent", () => {
  const s = ready(pix({ valor: 750 }));
  s.connectivity = "offline";
  s.queue = { count: 1, total: 750, refund_count: 0, refund_total: 0 };
  assert.equal(offlineBanner(s).detail, "1 Pix já enviado aguarda o cliente · R$ 7,50 — confirmado quando a rede voltar.");
  upsert(s, attempt({ id: "att_2", sale_id: "venda-2", valor: 1000 }));
  s.queue = { count: 2, total: 1750, refund_count: 0, refund_total: 0 };
  assert.equal(offlineBanner(s).detail,
    "1 pagamento aguardando · R$ 10,00 — será enviado sozinho quando a rede voltar. 1 Pix já enviado aguarda o cliente · R$ 7,50 — confirmado quando a rede voltar.");
});

test("a Pix paid after it was cancelled can be kept as the payment only of a sale paid no other way", () => {
  const late = pix({ state: "recusado", motivo: "pix_cancelado" }, { status: "recebido_apos_cancelamento", e2eid: "E9" });
  const s = ready(late);
  assert.equal(canKeepPix(s, late), false, "nothing is offered before the core decided");
  decided(s, { sale: late.sale_id, manter_pix: [late.id] });
  assert.equal(canKeepPix(s, late), true);
  assert.match(statusFor(s, late, NOW)[2], /"Manter" no histórico/);
  const card = attempt({ id: "att_card", sale_id: late.sale_id, state: "aprovado" });
  upsert(s, card);
  decided(s, { sale: late.sale_id });
  assert.equal(canKeepPix(s, late), false, "the sale was paid by card: give the Pix back");
  assert.match(statusFor(s, late, NOW)[2], /já foi paga de outra forma/);
  const kept = ready(pix({ state: "aprovado", motivo: "recebido_apos_cancelamento" }, { status: "recebido_apos_cancelamento" }));
  assert.equal(canKeepPix(kept, current(kept)), false, "kept already");
  assert.equal(statusFor(kept, current(kept), NOW)[1], "Pix recebido após cancelamento");
});

test("the forma de pagamento goes to the command as forma and parcelas, and the screen names it", () => {
  assert.deepEqual(planArgs("debito:1"), { forma: "debito", parcelas: null });
  assert.deepEqual(planArgs("parcelado:3"), { forma: "parcelado", parcelas: 3 });
  assert.deepEqual(planArgs(""), { forma: "credito", parcelas: null });
  assert.equal(planValue({ forma: "parcelado", parcelas: 12 }), "parcelado:12");
  const plano = { metodo: "credito", parcelas: 3, parcelamento: "loja", rotulo: "Crédito 3× sem juros" };
  const paid = attempt({ state: "aprovado", payment_id: "pay_1", plano });
  assert.equal(formaText(paid), "Crédito 3× sem juros");
  assert.equal(formaText(attempt()), "");
  assert.deepEqual(statusFor(ready(paid), paid, NOW),
    ["aprovado", "Pagamento aprovado", "R$ 1.234,56 · Crédito 3× sem juros · pay_1"]);
  const refused = attempt({ state: "recusado", motivo: "parcelamento_nao_permitido", plano });
  const [kind, label, detail] = statusFor(ready(refused), refused, NOW);
  assert.equal(kind, "recusado");
  assert.equal(label, "Pagamento recusado: o cartão não aceita parcelamento");
  assert.match(detail, /Pedido: Crédito 3× sem juros\. Nenhuma cobrança foi feita/);
});

test("F6 opens the forma list only while a new attempt may be made", () => {
  assert.equal(shortcut(ready(null), "F6"), "plans");
  assert.equal(shortcut(ready(attempt()), "F6"), null, "a live attempt keeps its plan");
  assert.equal(shortcut(ready(attempt({ state: "aprovado" })), "F6"), null);
  assert.equal(shortcut(ready(attempt({ state: "recusado" })), "F6"), "plans");
  assert.equal(controls(ready(attempt()), attempt()).formaDisabled, true);
});

test("the closing lists the approved by forma when the day had card plans", () => {
  const tally = (count, centavos) => ({ count, centavos });
  const closing = {
    totals: { aprovado: tally(3, 12_000), recusado: tally(0, 0), pendente: tally(0, 0), revisao: tally(0, 0) },
    refunds: { aprovado: tally(0, 0), recusado: tally(0, 0), pendente: tally(0, 0), revisao: tally(0, 0) },
    por_forma: [
      { forma: "debito", rotulo: "Aprovados no débito", tally: tally(2, 3_000) },
      { forma: "parcelado", rotulo: "Aprovados no crédito parcelado", tally: tally(1, 9_000) },
    ],
    net_centavos: 12_000,
    discrepancies: [],
  };
  assert.deepEqual(closingTotals(closing).slice(0, 4), [
    ["Aprovados", 3, 12_000],
    ["Aprovados no débito", 2, 3_000],
    ["Aprovados no crédito parcelado", 1, 9_000],
    ["Recusados", 0, 0],
  ]);
  closing.por_forma = [{ forma: "cartao", rotulo: "Aprovados no cartão (forma não informada)", tally: tally(3, 12_000) }];
  assert.deepEqual(closingTotals(closing)[1], ["Recusados", 0, 0], "a day of cards with no method lists no forma");
});

test("a sale paid in parts takes tenders until nothing is missing, then a new sale", () => {
  const debito = { metodo: "debito", parcelas: 1, parcelamento: null, rotulo: "Débito" };
  const first = attempt({ id: "att_1", valor: 5000, state: "aprovado", payment_id: "pay_1", sale_total: 15000, plano: debito, created_at: NOW });
  const s = ready(first);
  decided(s, { divisao: division(15000, 5000, { partes: [{ valor: 5000, forma: "Débito", seq: NOW, capturada: false }] }) });
  const split = splitOf(s, first);
  assert.deepEqual([split.total, split.pago, split.falta], [15000, 5000, 10000]);
  assert.equal(splitText(split), "Total R$ 150,00 · pago R$ 50,00 (Débito R$ 50,00) · falta R$ 100,00");
  assert.deepEqual(statusFor(s, first, NOW).slice(0, 2), ["aprovado", "Pagamento aprovado — falta R$ 100,00"]);
  let c = controls(s, first);
  assert.equal(c.pagarDisabled, false, "the next tender may be paid");
  assert.equal(c.valorDisabled, false);
  assert.equal(c.novaVendaHidden, true, "a sale with something paid and something missing is not left");
  assert.equal(c.splitDisabled, true, "the total is fixed");
  assert.equal(c.pixDisabled, false, "the rest may be a Pix");
  assert.equal(c.comprovanteHidden, false);

  // The second tender, live: nothing else may be pressed.
  const live = attempt({ id: "att_2", valor: 10000, state: "pendente", sale_total: 15000, created_at: NOW + 1 });
  upsert(s, live);
  s.attemptId = live.id;
  c = controls(s, live);
  assert.equal(c.pagarDisabled, true);
  assert.equal(c.formaDisabled, true);

  // Approved: the sale is paid.
  const paid = { ...live, state: "aprovado", payment_id: "pay_2", plano: { ...debito, metodo: "credito", rotulo: "Crédito à vista" } };
  upsert(s, paid);
  decided(s, { divisao: division(15000, 15000, { partes: [
    { valor: 5000, forma: "Débito", seq: NOW, capturada: false },
    { valor: 10000, forma: "Crédito à vista", seq: NOW + 1, capturada: false },
  ] }) });
  assert.deepEqual(statusFor(s, paid, NOW),
    ["aprovado", "Venda paga", "Total R$ 150,00 · pago R$ 150,00 (Débito R$ 50,00 + Crédito à vista R$ 100,00) · falta R$ 0,00"]);
  c = controls(s, paid);
  assert.equal(c.pagarDisabled, true);
  assert.equal(c.novaVendaHidden, false);
  assert.equal(splitOf(s, attempt()), null, "a sale paid at once is not split");
});

test("a partly paid sale whose tenders were all refunded may be left", () => {
  const first = attempt({ id: "att_1", valor: 5000, state: "aprovado", payment_id: "pay_1", sale_total: 15000 });
  const s = ready(first);
  upsert(s, attempt({ id: "est_1", kind: "estorno", refund_of: "att_1", valor: 5000, state: "aprovado", sale_total: 15000 }));
  decided(s, { divisao: division(15000, 0, { devolvido: 5000, cancelada: true }) });
  assert.equal(splitOf(s, first).pago, 0);
  assert.equal(controls(s, first).novaVendaHidden, false);
  assert.equal(shortcut(ready(null), "F7"), "split");
  assert.equal(shortcut(s, "F7"), null);
});

test("cash shows the change as it is typed, never a negative one", () => {
  assert.equal(parseBrl("1.234,56"), 123456);
  assert.equal(parseBrl("R$ 120"), 12000);
  assert.equal(parseBrl("5,5"), 550);
  assert.equal(parseBrl("12,345"), null);
  assert.equal(parseBrl("abc"), null);
  assert.equal(trocoText("100,00", "120,00"), "Troco R$ 20,00");
  assert.equal(trocoText("100,00", "100"), "Troco R$ 0,00");
  assert.equal(trocoText("100,00", "95,00"), "Faltam R$ 5,00");
  assert.equal(trocoText("", "95,00"), "");
  const paid = attempt({ state: "aprovado", metodo: "dinheiro", cartao: null, valor: 10000, recebido: 12000 });
  assert.equal(isCash(paid), true);
  assert.equal(formaText(paid), "Dinheiro");
  assert.deepEqual(statusFor(ready(paid), paid, NOW), ["aprovado", "Pago em dinheiro — troco R$ 20,00", "R$ 100,00 · recebido R$ 120,00"]);
  const exact = { ...paid, recebido: 10000 };
  assert.equal(statusFor(ready(exact), exact, NOW)[1], "Pago em dinheiro — sem troco");
  // The rest of a split sale in cash, with change.
  const card = attempt({ id: "att_1", state: "aprovado", valor: 5000, sale_total: 15000, plano: { rotulo: "Débito" }, created_at: NOW });
  const rest = attempt({ id: "att_2", state: "aprovado", metodo: "dinheiro", valor: 10000, recebido: 10500, sale_total: 15000, created_at: NOW + 1 });
  const s = ready(card);
  upsert(s, rest);
  decided(s, { divisao: division(15000, 15000, { partes: [
    { valor: 5000, forma: "Débito", seq: NOW, capturada: false },
    { valor: 10000, forma: "Dinheiro", seq: NOW + 1, capturada: false },
  ] }) });
  assert.deepEqual(statusFor(s, rest, NOW).slice(0, 2), ["aprovado", "Venda paga — troco R$ 5,00"]);
  assert.match(statusFor(s, rest, NOW)[2], /Débito R\$ 50,00 \+ Dinheiro R\$ 100,00/);
  assert.equal(shortcut(ready(null), "F8"), "drawer");
});

test("a divided sale given up gives its parts back, then a new sale may start", () => {
  const part = attempt({ id: "att_1", valor: 5000, state: "aprovado", payment_id: "pay_1", sale_total: 15000, plano: { rotulo: "Débito" } });
  const s = ready(part);
  const debito = [{ valor: 5000, forma: "Débito", seq: NOW, capturada: false }];
  decided(s, { divisao: division(15000, 5000, { partes: debito }) });
  assert.equal(controls(s, part).cancelSaleHidden, false);
  const back = attempt({ id: "est_1", kind: "estorno", refund_of: "att_1", valor: 5000, state: "pendente", sale_total: 15000 });
  upsert(s, back);
  decided(s, { divisao: division(15000, 5000, { partes: debito, estornando: 5000, cancelada: true }) });
  assert.deepEqual(statusFor(s, part, NOW).slice(0, 2), ["pendente", "Cancelando a venda — estorno em andamento, não cobre de novo"]);
  let c = controls(s, part);
  assert.equal(c.pagarDisabled, true, "nothing is charged while the sale is being given back");
  assert.equal(c.novaVendaHidden, true);
  assert.equal(c.cancelSaleHidden, true);
  upsert(s, { ...back, state: "aprovado" });
  decided(s, { divisao: division(15000, 0, { partes: debito, devolvido: 5000, cancelada: true }) });
  assert.deepEqual(statusFor(s, part, NOW).slice(0, 2), ["recusado", "Venda cancelada — R$ 50,00 devolvidos ao cliente"]);
  c = controls(s, part);
  assert.equal(c.pagarDisabled, true);
  assert.equal(c.novaVendaHidden, false);
});

test("a divided sale's card authorizations: undone when given up, and after a restart the rest is missing again", () => {
  const part = attempt({ id: "att_1", valor: 5000, state: "aprovado", payment_id: "pay_1", sale_total: 15000, plano: { rotulo: "Débito" }, captura: "pendente" });
  const s = ready(part);
  const debito = [{ valor: 5000, forma: "Débito", seq: NOW, capturada: false }];
  decided(s, { divisao: division(15000, 5000, { partes: debito, autorizado: 5000 }) });
  assert.deepEqual(statusFor(s, part, NOW).slice(0, 2), ["aprovado", "Pagamento aprovado — falta R$ 100,00"]);
  assert.equal(canRefund(s, part), false, "an authorization is undone, never refunded");
  assert.deepEqual(capturePill(part), ["aprovado", "autorizado"]);
  assert.deepEqual(capturePill({ ...part, captura: "desfeita" }), ["recusado", "desfeito"]);
  assert.equal(capturePill({ ...part, captura: "capturada" }), null);
  upsert(s, { ...part, captura: "desfazer" });
  decided(s, { divisao: division(15000, 0, { estornando: 5000, liberado: 5000, devolvido: 5000, cancelada: true }) });
  assert.deepEqual(statusFor(s, part, NOW).slice(0, 2),
    ["pendente", "Cancelando a venda — desfazendo a autorização no cartão, não cobre de novo"]);
  assert.equal(controls(s, part).pagarDisabled, true, "nothing is charged while the hold is released");
  upsert(s, { ...part, captura: "desfeita" });
  decided(s, { divisao: division(15000, 0, { liberado: 5000, devolvido: 5000, cancelada: true }) });
  assert.deepEqual(statusFor(s, part, NOW).slice(0, 2), ["recusado", "Venda cancelada — R$ 50,00 liberados no cartão do cliente"]);
  // With a cash part kept, an undone card part leaves its amount missing again.
  const cash = attempt({ id: "att_2", valor: 2000, state: "aprovado", metodo: "dinheiro", recebido: 2000, sale_total: 15000, created_at: NOW + 1 });
  upsert(s, cash);
  decided(s, { divisao: division(15000, 2000, {
    partes: [{ valor: 2000, forma: "Dinheiro", seq: NOW + 1, capturada: false }], liberado: 5000, devolvido: 5000,
  }) });
  const [kind, label, detail] = statusFor(s, cash, NOW);
  assert.deepEqual([kind, label], ["aprovado", "Pagamento aprovado — falta R$ 130,00"]);
  assert.match(detail, /Autorização desfeita: R\$ 50,00 liberados no cartão, nada cobrado/);
});

test("a part undone because the till started again leaves the sale open with its part missing", () => {
  const part = attempt({ id: "att_1", valor: 5000, state: "aprovado", sale_total: 15000, plano: { rotulo: "Débito" }, captura: "desfazer", captura_por: "reinicio" });
  const s = ready(part);
  decided(s, { divisao: division(15000, 0, { estornando: 5000, liberado: 5000 }) });
  assert.deepEqual(statusFor(s, part, NOW).slice(0, 2),
    ["pendente", "Desfazendo a autorização — o caixa reiniciou antes de concluir a venda"]);
  assert.equal(controls(s, part).pagarDisabled, true, "the part still holds its amount at the server");
  const undone = { ...part, captura: "desfeita" };
  upsert(s, undone);
  decided(s, { divisao: division(15000, 0, { liberado: 5000 }) });
  const [kind, label, detail] = statusFor(s, undone, NOW);
  assert.deepEqual([kind, label], ["recusado", "Autorização desfeita ao reiniciar — falta R$ 150,00"]);
  assert.match(detail, /R\$ 50,00 liberados no cartão do cliente, nada cobrado/);
  const c = controls(s, undone);
  assert.equal(c.pagarDisabled, false, "the sale is charged again");
  assert.equal(splitOf(s, undone).cancelada, false);
});

test("a divided sale paid says when its card parts are being captured and when they are", () => {
  const part = attempt({ id: "att_1", valor: 5000, state: "aprovado", sale_total: 15000, plano: { rotulo: "Débito" }, captura: "pendente" });
  const rest = attempt({ id: "att_2", valor: 10000, state: "aprovado", sale_total: 15000, plano: { rotulo: "Crédito à vista" }, captura: "pendente", created_at: NOW + 1 });
  const s = ready(part);
  upsert(s, rest);
  const partes = [
    { valor: 5000, forma: "Débito", seq: NOW, capturada: false },
    { valor: 10000, forma: "Crédito à vista", seq: NOW + 1, capturada: false },
  ];
  decided(s, { divisao: division(15000, 15000, { partes, autorizado: 15000 }) });
  assert.equal(splitOf(s, rest).autorizado, 15000);
  assert.match(statusFor(s, rest, NOW)[2], /cartão: captura em andamento$/);
  upsert(s, { ...part, captura: "capturada" });
  upsert(s, { ...rest, captura: "capturada" });
  decided(s, { divisao: division(15000, 15000, { partes: partes.map((p) => ({ ...p, capturada: true })) }) });
  assert.deepEqual(statusFor(s, rest, NOW).slice(0, 2), ["aprovado", "Venda paga"]);
  assert.match(statusFor(s, rest, NOW)[2], /cartão capturado$/);
});

test("a Pix part cancelled leaves a half-paid sale open for its next part, never for a new sale", () => {
  const part = attempt({ id: "att_1", valor: 5000, state: "aprovado", payment_id: "pay_1", sale_total: 15000, plano: { rotulo: "Débito" } });
  const s = ready(part);
  const pix = attempt({ id: "att_2", valor: 10000, state: "recusado", motivo: "pix_cancelado", metodo: "pix", cartao: null, sale_total: 15000, created_at: NOW + 1 });
  upsert(s, pix);
  s.attemptId = pix.id;
  decided(s, { divisao: division(15000, 5000, { partes: [{ valor: 5000, forma: "Débito", seq: NOW, capturada: false }] }) });
  const c = controls(s, pix);
  assert.equal(c.novaVendaHidden, true, "R$ 100,00 still missing");
  assert.equal(c.pagarDisabled, false);
  assert.equal(c.pixDisabled, false);
  assert.equal(c.cancelSaleHidden, false, "or the sale is given up");
});

test("a Pix cancel the server did not confirm says the Pix may still be paid, and the screen follows the Pix to its end", () => {
  const waiting = pix({});
  const s = ready(waiting);
  // No answer to the cancel nor to the question after it.
  pixCancelRefused(s, waiting, { kind: "pix_cancel_unknown", message: "sem resposta do servidor (…): não se sabe se o Pix foi cancelado" });
  assert.equal(s.error, null, "not a press that stored nothing");
  let [kind, label] = statusFor(s, current(s), NOW);
  assert.equal(kind, "pendente");
  assert.equal(label, "Cancelamento do Pix não confirmado — ele ainda pode ser pago");
  // The network comes back: the customer had paid.
  applyEvent(s, { type: "attempt_changed", attempt: { ...waiting, state: "aprovado", updated_at: waiting.updated_at + 1, pix: { ...waiting.pix, status: "aprovado", pago_em: NOW } } });
  [kind, label] = statusFor(s, current(s), NOW);
  assert.equal(kind, "aprovado");
  assert.match(label, /^Pix recebido às /);
  // Or the cancel had been executed: cancelled.
  const other = ready(waiting);
  pixCancelRefused(other, waiting, { kind: "pix_cancel_unknown", message: "…" });
  applyEvent(other, { type: "attempt_changed", attempt: { ...waiting, state: "recusado", motivo: "pix_cancelado", updated_at: waiting.updated_at + 1 } });
  assert.equal(statusFor(other, current(other), NOW)[1], "Pix cancelado — nada foi recebido");
  // The server says it still waits: the cancel never reached it.
  const still = ready(waiting);
  pixCancelRefused(still, waiting, { kind: "pix_not_cancelled", message: "o cancelamento não chegou ao servidor" });
  assert.equal(statusFor(still, current(still), NOW)[1], "Pix não cancelado — ainda pode ser pago");
  // Any other refusal is the press's error.
  const bad = ready(waiting);
  pixCancelRefused(bad, waiting, { kind: "invalid", message: "o Pix ainda está sendo gerado" });
  assert.equal(bad.error, "o Pix ainda está sendo gerado");
});

test("the window keeps the newer of two views of a sale and forgets those (and their notes) of sales it no longer shows", () => {
  const s = ready(attempt({ state: "aprovado", sale_total: 15000, valor: 5000 }));
  applySaleViews(s, [{ sale_id: "venda-1", divisao: division(15000, 5000), estornos: [], manter_pix: [], as_of: 20 }]);
  applySaleViews(s, [{ sale_id: "venda-1", divisao: division(15000, 0), estornos: [], manter_pix: [], as_of: 10 }]);
  assert.equal(splitOf(s, current(s)).pago, 5000, "a snapshot's older view does not replace an event's");
  applySaleViews(s, [{ sale_id: "venda-9", divisao: null, estornos: [], manter_pix: [], as_of: 1 }]);
  for (const sale_id of ["venda-1", "venda-9"]) {
    applyEvent(s, { type: "nota_changed", nota: { sale_id, chave: `chave-${sale_id}`, estado: "autorizada", numero: 1, emitida_em: 1 }, enviar_ate: null });
  }
  prune(s, 0);
  assert.deepEqual([...s.sales.keys()], ["venda-1"], "only the sales of the attempts kept");
  assert.deepEqual([...s.notas.keys()], ["venda-1"], "and only their notes: a till sells all day");
});

function atMachine(over = {}, order = {}) {
  return attempt({
    metodo: "maquininha", cartao: null, tries: 1,
    maquininha: { payment_id: "pay_1", maquininha: "POS-1", pedido: "ORD1", estado: "created", status: "aguardando", motivo: null, pago_com: null, ...order },
    ...over,
  });
}

test("a card at the machine reads its plan from the list, and the customer may choose there", () => {
  assert.deepEqual(planArgs("maq:parcelado:3"), { forma: "parcelado", parcelas: 3, maquininha: true });
  assert.deepEqual(planArgs("maq:debito:1"), { forma: "debito", parcelas: null, maquininha: true });
  assert.deepEqual(planArgs("maq:"), { forma: null, parcelas: null, maquininha: true });
  assert.equal(planArgs("debito:1").maquininha, undefined);
});

test("an order at the machine can be cancelled until the machine takes it, and never reads as cancelled while a card can pay", () => {
  const sent = ready(atMachine());
  const panel = machinePanel(sent, current(sent));
  assert.equal(panel.cancelDisabled, false);
  assert.match(panel.estado, /aguardando a maquininha/);
  assert.equal(shortcut(sent, "Escape"), "cancel-machine");
  assert.match(statusFor(sent, current(sent), NOW)[1], /Aguardando a maquininha POS-1/);

  const taken = ready(atMachine({}, { estado: "at_terminal" }));
  const held = machinePanel(taken, current(taken));
  assert.equal(held.cancelDisabled, true, "only the machine ends it now");
  assert.equal(held.cancelLabel, "Cancele na maquininha");
  assert.equal(shortcut(taken, "Escape"), null);
  assert.match(statusFor(taken, current(taken), NOW)[1], /aproxime, insira ou passe o cartão/);

  // A cancel the machine refused leaves the order's own state on screen, never "cancelado".
  machineCancelRefused(taken, current(taken), { kind: "machine_has_order", message: "a maquininha já está com o pedido" });
  const [kind, label] = statusFor(taken, current(taken), NOW);
  assert.equal(kind, "pix");
  assert.doesNotMatch(label, /cancelado/i);
  assert.equal(taken.error, null);
});

test("how a card at the machine ended says what happened, and the history names it", () => {
  const paid = ready(atMachine({ state: "aprovado", payment_id: "pay_1" }, { status: "aprovado", estado: "processed", pago_com: "debito" }));
  assert.deepEqual(statusFor(paid, current(paid), NOW).slice(0, 2), ["aprovado", "Pago na maquininha no débito"]);
  assert.equal(machinePanel(paid, current(paid)), null);
  const declined = ready(atMachine({ state: "recusado", motivo: "insufficient_amount" }, { status: "recusado", estado: "failed" }));
  assert.equal(statusFor(declined, current(declined), NOW)[1], "Recusado na maquininha: saldo insuficiente");
  const cancelled = ready(atMachine({ state: "recusado", motivo: "maquininha_cancelado" }, { status: "cancelado", estado: "canceled" }));
  assert.match(statusFor(cancelled, current(cancelled), NOW)[1], /cancelado — nada foi cobrado/);
  assert.equal(formaText(atMachine({ plano: { rotulo: "Débito" } })), "Débito na maquininha");
  assert.equal(formaText(atMachine()), "Cartão na maquininha");
});

test("an open sale comes back with the forma it was paid with, the card machine's under maq:", () => {
  assert.equal(restoredPlanValue(null), "credito:1");
  assert.equal(restoredPlanValue(attempt()), "credito:1");
  assert.equal(restoredPlanValue(attempt({ plano: { metodo: "debito", parcelas: 1 } })), "debito:1");
  assert.equal(restoredPlanValue(attempt({ plano: { metodo: "credito", parcelas: 3 } })), "parcelado:3");
  const machine = { metodo: "maquininha", cartao: null };
  assert.equal(restoredPlanValue(attempt({ ...machine, plano: { metodo: "credito", parcelas: 1 } })), "maq:credito:1");
  assert.equal(restoredPlanValue(attempt({ ...machine, plano: { metodo: "credito", parcelas: 6 } })), "maq:parcelado:6");
  assert.equal(restoredPlanValue(attempt({ ...machine, plano: null })), "maq:");
});

/** A note as the engine tells of it (`nota_changed`). */
function nota(over = {}) {
  return {
    chave: "35261211222333000181650010000000011000000010", sale_id: "venda-1", serie: 1, numero: 1,
    tp_emis: 1, total: 1000, qrcode: "", estado: "pendente", protocolo: null, autorizada_em: null,
    c_stat: null, motivo: null, tentativas: 0, emitida_em: NOW, proxima_tentativa: NOW, substituta: null,
    ...over,
  };
}

test("a sale's note is said as it goes: sending, then authorized with its protocol", () => {
  const s = createState();
  assert.equal(notaText(s, "venda-1", NOW), null);
  applyEvent(s, { type: "nota_changed", nota: nota(), enviar_ate: null });
  assert.equal(notaText(s, "venda-1", NOW).kind, "enviando");
  applyEvent(s, { type: "nota_changed", nota: nota({ estado: "autorizada", protocolo: "135260000000001" }), enviar_ate: null });
  const t = notaText(s, "venda-1", NOW);
  assert.equal(t.label, "NFC-e nº 1 série 1 autorizada");
  assert.equal(t.detail, "Protocolo 135260000000001");
});

test("a note in contingência says so, by when it must reach SEFAZ, and when that has passed", () => {
  const s = createState();
  s.utcOffsetMinutes = -180;
  const day = 24 * 3600_000;
  // Set aside (sent normally, no answer) and replaced by number 2 in contingência.
  applyEvent(s, { type: "nota_changed", nota: nota({ estado: "substituida", substituta: "x" }), enviar_ate: null });
  applyEvent(s, {
    type: "nota_changed",
    nota: nota({ chave: "x", numero: 2, tp_emis: 9, emitida_em: NOW + 1 }),
    enviar_ate: NOW + 1 + day,
  });
  const t = notaText(s, "venda-1", NOW + 3600_000);
  assert.equal(t.kind, "contingencia");
  assert.equal(t.label, "NFC-e EMITIDA EM CONTINGÊNCIA");
  assert.match(t.detail, /^NFC-e nº 2 série 1 · enviar à SEFAZ até \d\d\/\d\d \d\d:\d\d \(faltam 23 h 00 min\)$/);
  const late = notaText(s, "venda-1", NOW + 2 * day);
  assert.equal(late.kind, "vencida");
  assert.match(late.detail, /vencido há 23 h 59 min/);
});

test("a note set aside that SEFAZ authorized after all is said to be cancelled by substitution, and a refused cancellation is a person's", () => {
  const s = createState();
  const contingencia = { ...nota({ chave: "x", numero: 2, tp_emis: 9, estado: "autorizada", protocolo: "2", emitida_em: NOW + 1 }), enviar_ate: null };
  applyNotas(s, "venda-1", [
    { ...nota({ estado: "a_cancelar", protocolo: "1", substituta: "x" }), enviar_ate: null },
    contingencia,
  ]);
  const t = notaText(s, "venda-1", NOW);
  assert.equal(t.label, "NFC-e nº 2 série 1 autorizada (emitida em contingência)");
  assert.match(t.detail, /nº 1 também foi autorizada: cancelamento por substituição enviando à SEFAZ/);
  applyNotas(s, "venda-1", [
    { ...nota({ estado: "cancelada", protocolo: "1", substituta: "x", cancelamento: "3" }), enviar_ate: null },
    contingencia,
  ]);
  assert.match(notaText(s, "venda-1", NOW).detail, /nº 1 cancelada por substituição$/);
  applyNotas(s, "venda-1", [
    { ...nota({ estado: "cancelamento_recusado", protocolo: "1", substituta: "x", c_stat: 501 }), enviar_ate: null },
    contingencia,
  ]);
  assert.match(notaText(s, "venda-1", NOW).detail, /Atenção: nº 1 também foi autorizada e a SEFAZ recusou o cancelamento por substituição \(501\): chame o responsável/);
  const paidBack = createState();
  applyNotas(paidBack, "venda-1", [{ ...nota({ estado: "a_cancelar", protocolo: "1" }), enviar_ate: null }]);
  assert.equal(notaText(paidBack, "venda-1", NOW).label, "NFC-e nº 1 série 1: cancelamento enviando à SEFAZ (venda devolvida)");
  applyNotas(paidBack, "venda-1", [{ ...nota({ estado: "cancelada", protocolo: "1", cancelamento: "9" }), enviar_ate: null }]);
  assert.equal(notaText(paidBack, "venda-1", NOW).label, "NFC-e nº 1 série 1 cancelada (venda devolvida)");
  applyNotas(paidBack, "venda-1", [{ ...nota({ estado: "cancelamento_recusado", protocolo: "1", c_stat: 501, motivo: "Prazo" }), enviar_ate: null }]);
  assert.equal(notaText(paidBack, "venda-1", NOW).kind, "erro");
  const refused = createState();
  applyNotas(refused, "venda-1", [{ ...nota({ estado: "rejeitada", c_stat: 297, motivo: "Assinatura difere" }), enviar_ate: null }]);
  assert.equal(notaText(refused, "venda-1", NOW).kind, "erro");
});
