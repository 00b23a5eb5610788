// Draws the screen from the state: the only module that touches the DOM. What to show is
// decided in state.js; this module only puts it on the page.

import {
  brl, canKeepPix, canRefund, closingTotals, closingVerdict, connectivityText, count, controls, current,
  capturePill, discrepancyGroups, formaText, isRefund, planArgs, splitOf, trocoText, latePix, newest, nextTryText, offlineBanner, pillText, pixPanel, machinePanel, planValue, refundConfirmText,
  refundControls, refundMeta, refundsOf, refundStatus, saleNumber, saleTitle, statusFor, storeTime,
  unfinishedRefunds, unfinishedSales, notaText,
} from "./state.js";

export const $ = (id) => document.getElementById(id);

/** Draws a QR code's modules (`linhas`: rows of `1` dark / `0` light) on the Pix canvas, with the
 * four-module quiet zone readers need. */
export function drawQr(matrix) {
  const canvas = $("pix-qr");
  const ctx = canvas.getContext("2d");
  const modules = matrix.tamanho + 8;
  const scale = Math.max(1, Math.floor(Math.min(canvas.width, canvas.height) / modules));
  const side = modules * scale;
  canvas.width = side;
  canvas.height = side;
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, side, side);
  ctx.fillStyle = "#000";
  matrix.linhas.forEach((row, y) => {
    for (let x = 0; x < row.length; x++) {
      if (row[x] === "1") ctx.fillRect((x + 4) * scale, (y + 4) * scale, scale, scale);
    }
  });
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
  $("valor").disabled = c.valorDisabled;
  $("cartao").disabled = c.cartaoDisabled;
  $("forma").disabled = c.formaDisabled;
  // Cash: what the customer handed over and the change, instead of the card.
  const chosen = planArgs($("forma").value);
  const cash = chosen.forma === "dinheiro";
  $("cash-fields").hidden = !cash;
  // Cash and a card at the machine name no card token here.
  $("cartao-label").hidden = cash || Boolean(chosen.maquininha);
  $("cartao").hidden = cash || Boolean(chosen.maquininha);
  $("recebido").disabled = c.formaDisabled;
  $("troco").textContent = cash ? trocoText($("valor").value, $("recebido").value) : "";
  $("cancelar-venda").hidden = c.cancelSaleHidden;
  const split = splitOf(state, a);
  $("cancelar-venda").textContent = state.cancelSale.armed && split
    ? `Confirmar: devolver ${brl(split.pago)} (${split.partes.map((p) => p.forma).join(" + ")}) e cancelar a venda`
    : "Cancelar venda (devolver o que foi pago)";
  $("cancelar-venda").className = state.cancelSale.armed ? "primary danger wide" : "ghost wide";
  $("cancelar-venda-erro").hidden = !state.cancelSale.error;
  $("cancelar-venda-erro").textContent = state.cancelSale.error || "";
  $("dividir").disabled = c.splitDisabled;
  $("total").disabled = c.splitDisabled;
  $("dividir").checked = state.splitOn;
  $("split-total").hidden = !state.splitOn;
  $("valor-label").textContent = state.splitOn ? "Valor deste pagamento" : "Valor da venda";
  $("comprovante").hidden = c.comprovanteHidden;
  renderNota(state, a, now);
  $("pix").disabled = c.pixDisabled;
  $("pix-why").hidden = !c.pixWhy;
  $("pix-why").textContent = c.pixWhy;
  const panel = pixPanel(state, a, now);
  $("pix-panel").hidden = !panel;
  const machine = machinePanel(state, a);
  $("machine-panel").hidden = !machine;
  // While a Pix or a card at the machine waits, its panel takes the form's place: nothing else
  // can be charged meanwhile.
  $("pay-form").hidden = Boolean(panel || machine);
  if (machine) {
    $("machine-valor").textContent = machine.valor;
    $("machine-id").textContent = machine.maquininha;
    $("machine-estado").textContent = machine.estado;
    $("machine-cancel").disabled = machine.cancelDisabled;
    $("machine-cancel-label").textContent = machine.cancelLabel;
  }
  if (panel) {
    $("pix-valor").textContent = panel.valor;
    if ($("pix-copia").value !== panel.copia) $("pix-copia").value = panel.copia;
    $("pix-countdown").textContent = panel.countdown;
    $("pix-cancel").disabled = panel.cancelDisabled;
  }
  $("nova-venda").textContent = c.novaVendaText;
  $("sale-number").textContent = saleTitle(state);
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
  renderRefund(state);
}

function renderUnfinished(state) {
  const open = unfinishedSales(state);
  const refunds = unfinishedRefunds(state);
  $("unfinished").hidden = open.length + refunds.length === 0;
  if (open.length + refunds.length === 0) return;
  const titles = [];
  if (open.length > 0) {
    // A Pix to give back stays listed while its sale is on screen: that one is not "another".
    titles.push(open.some((a) => a.sale_id === state.saleId)
      ? count(open.length, "venda com pagamento não concluído", "vendas com pagamento não concluído")
      : count(open.length, "outra venda com pagamento não concluído", "outras vendas com pagamento não concluído"));
  }
  if (refunds.length > 0) titles.push(count(refunds.length, "estorno não concluído", "estornos não concluídos"));
  $("unfinished-title").textContent = `${titles.join(" e ")}:`;
  const venda = (a) => (a.sale_number == null ? a.sale_id : `Venda nº ${saleNumber(a.sale_number)}`);
  $("unfinished-list").replaceChildren(...open.map((a) => {
    const li = document.createElement("li");
    const what = latePix(a)
      ? (canKeepPix(state, a)
        ? "Pix recebido após cancelamento — devolva ao cliente ou mantenha como pagamento"
        : "Pix recebido após cancelamento — devolva ao cliente")
      : a.state === "revisao" ? "requer revisão" : "pendente — não cobre de novo";
    li.textContent = `${venda(a)} · ${brl(a.valor)} · ${what}`;
    li.dataset.sale = a.sale_id;
    return li;
  }), ...refunds.map((a) => {
    const li = document.createElement("li");
    const what = a.state === "revisao" ? "estorno requer revisão" : "estorno pendente — não estorne de novo";
    li.textContent = `${venda(a)} · ${brl(a.valor)} · ${what}`;
    li.dataset.refund = a.id;
    return li;
  }));
}

/** The history's rows as drawn, by attempt id: a row is built again only when what it shows
 * changed. The screen redraws on every event (several per payment); rebuilding all 50 rows each
 * time made thousands of nodes of garbage per minute at a busy till, and the page's memory grew
 * with use. */
const historyRows = new Map();

function renderHistory(state) {
  const rows = newest(state, 50);
  const body = $("history-rows");
  if (rows.length === 0) {
    historyRows.clear();
    const tr = document.createElement("tr");
    tr.className = "empty";
    const td = cell("Nenhum pagamento nesta sessão.");
    td.colSpan = 6;
    tr.append(td);
    body.replaceChildren(tr);
    return;
  }
  const shown = new Set();
  const trs = rows.map((a) => {
    shown.add(a.id);
    const refunded = !isRefund(a) && a.state === "aprovado" ? refundsOf(state, a.id).aprovado : 0;
    const refundable = canRefund(state, a);
    const keep = canKeepPix(state, a) ? keepButton(state, a) : null;
    const sig = `${a.state}|${a.captura}|${a.pix ? a.pix.status : ""}|${a.valor}|${a.payment_id}|${a.sale_number}|${a.created_at}|${state.utcOffsetMinutes}|${refunded}|${refundable}|${JSON.stringify(keep)}`;
    const drawn = historyRows.get(a.id);
    if (drawn && drawn.sig === sig) return drawn.tr;
    const tr = historyRow(state, a, refunded, refundable, keep);
    historyRows.set(a.id, { sig, tr });
    return tr;
  });
  for (const id of historyRows.keys()) if (!shown.has(id)) historyRows.delete(id);
  const same = body.children.length === trs.length && trs.every((tr, i) => body.children[i] === tr);
  if (!same) body.replaceChildren(...trs);
}

/** The history's word for a payment: a Pix says so. */
function historyPill(a) {
  if (a.metodo !== "pix") return pillText(a.state);
  if (a.state === "pendente") return a.pix ? "aguardando Pix" : "Pix pendente";
  if (latePix(a)) return "Pix pago após cancelar";
  if (a.motivo === "pix_cancelado") return "Pix cancelado";
  if (a.motivo === "pix_expirado") return "Pix expirado";
  return `Pix ${pillText(a.state)}`;
}

/** The "Manter" button of a late Pix: its text, whether it waits for the confirming click, and
 * the refusal of the last try. */
function keepButton(state, a) {
  const k = state.keep;
  const armed = k.armed === a.id;
  return {
    armed,
    text: armed ? `Confirmar: ${brl(a.valor)} como pagamento` : "Manter",
    disabled: k.pressing,
    error: armed ? k.error : null,
  };
}

function historyRow(state, a, refunded, refundable, keep) {
  const tr = document.createElement("tr");
  tr.dataset.attempt = a.id;
  const refund = isRefund(a);
  if (refund) tr.className = "estorno";
  const pill = document.createElement("span");
  const held = refund ? null : capturePill(a);
  pill.className = `pill ${held ? held[0] : a.state}`;
  pill.textContent = refund ? `estorno ${pillText(a.state)}` : held ? held[1] : historyPill(a);
  const st = document.createElement("td");
  st.append(pill);
  const number = a.sale_number == null ? "—" : `nº ${saleNumber(a.sale_number)}`;
  const venda = cell(refund ? `${number} · estorno` : number);
  venda.title = a.sale_id;
  const valor = cell(refund ? `-${brl(a.valor)}` : brl(a.valor), "num");
  if (refunded > 0) {
    const note = document.createElement("span");
    note.className = "refunded";
    note.textContent = refunded >= a.valor ? "estornado" : `estornado ${brl(refunded)}`;
    valor.append(note);
  }
  const action = document.createElement("td");
  if (refundable) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "ghost small";
    button.textContent = "Estornar";
    button.dataset.refund = a.id;
    button.id = `estornar-${a.id}`;
    button.setAttribute("aria-label", `Estornar venda ${number} de ${brl(a.valor)}`);
    action.append(button);
  }
  if (keep) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = keep.armed ? "primary small" : "ghost small";
    button.textContent = keep.text;
    button.disabled = keep.disabled;
    button.dataset.keep = a.id;
    button.id = `manter-${a.id}`;
    button.setAttribute("aria-label", `Manter o Pix de ${brl(a.valor)} como pagamento da venda ${number}`);
    action.append(button);
    if (keep.error) {
      const why = document.createElement("span");
      why.className = "row-error";
      why.setAttribute("role", "alert");
      why.textContent = keep.error;
      action.append(why);
    }
  }
  const pagamento = cell(a.payment_id || "—", "mono");
  const forma = formaText(a);
  if (forma && !refund) {
    const note = document.createElement("span");
    note.className = "forma";
    note.textContent = forma;
    pagamento.append(note);
  }
  tr.append(cell(storeTime(a.created_at, state.utcOffsetMinutes)), venda, valor, st, pagamento, action);
  return tr;
}

/** Redraws the refund dialog, when it is open. */
function renderRefund(state) {
  const r = state.refund;
  if (!r || state.dialog !== "refund") return;
  const p = r.info.pagamento;
  $("refund-title").textContent = p.sale_number == null ? "Estornar venda" : `Estornar venda nº ${saleNumber(p.sale_number)}`;
  $("refund-meta").textContent = refundMeta(state);
  $("refund-hint").textContent = `Até ${brl(r.info.saldo)}. Digite como na maquininha: 1.234,56`;
  const c = refundControls(state);
  $("refund-edit").hidden = c.editHidden;
  $("refund-review").hidden = c.reviewHidden;
  $("refund-confirm").hidden = c.confirmHidden;
  $("refund-confirm").disabled = c.confirmDisabled;
  $("refund-confirm").textContent = `Confirmar estorno de ${brl(r.valor)}`;
  $("refund-back").hidden = c.backHidden;
  $("refund-confirm-text").hidden = r.step === "form";
  $("refund-confirm-text").textContent = refundConfirmText(state);
  $("refund-receipt").hidden = c.receiptHidden;
  const status = refundStatus(state, Date.now());
  $("refund-status").hidden = !status;
  if (status) {
    const [kind, label, detail] = status;
    $("refund-status").dataset.state = kind;
    // Only a changed text is written: the aria-live region announces each change once.
    if ($("refund-status-label").textContent !== label) $("refund-status-label").textContent = label;
    if ($("refund-status-detail").textContent !== detail) $("refund-status-detail").textContent = detail;
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
    // Before any try (the first probe already failed), the reason the server cannot be used is
    // the attempt's last error as far as QA is concerned.
    const waiting = a.state === "pendente" && state.connectivityProblem;
    tr.append(cell(a.id, "mono"), cell(a.idempotency_key, "mono"), cell(String(a.tries), "num"), cell(a.last_error || (waiting ? `(sem envio) ${state.connectivityProblem}` : "—")), cell(nextTryText(a, now)));
    body.append(tr);
  }
}

/** Shows a receipt: the lines the app made (the same as the saved file). */
export function showReceipt(receipt) {
  $("receipt-title").textContent = receipt.titulo;
  $("receipt-lines").replaceChildren(...receipt.linhas.map((l) => {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.textContent = l.rotulo;
    tr.append(th, cell(l.valor));
    return tr;
  }));
  $("receipt-via").textContent = receipt.via;
  $("receipt-file").textContent = receipt.arquivo ? `Salvo em ${receipt.arquivo}` : "";
  $("receipt-dialog").hidden = false;
  $("receipt-print").focus();
}

/** Shows the DANFE NFC-e: its page's stylesheet and content in a shadow root, so its styles and
 * the window's stay apart (the window's content-security policy allows that one stylesheet by its
 * hash; the page has no script). */
export function showDanfe(danfe) {
  const page = new DOMParser().parseFromString(danfe.html, "text/html");
  const host = $("danfe-page");
  const root = host.shadowRoot || host.attachShadow({ mode: "open" });
  root.replaceChildren(...page.head.querySelectorAll("style"), ...page.body.children);
  $("danfe-file").textContent = `Salvos em ${danfe.arquivo} e ${danfe.xml} (a nota assinada)`;
  $("danfe-dialog").hidden = false;
  $("danfe-paper").scrollTop = 0;
  $("danfe-print").focus();
}

/** The sale's NFC-e line under the status. */
function renderNota(state, a, now) {
  const t = a ? notaText(state, a.sale_id, now) : null;
  $("nfce").hidden = !t;
  if (!t) return;
  $("nfce").dataset.kind = t.kind;
  if ($("nfce-label").textContent !== t.label) $("nfce-label").textContent = t.label;
  if ($("nfce-detail").textContent !== t.detail) $("nfce-detail").textContent = t.detail;
}

/** Shows a closing: totals by state, the verdict, and every discrepancy by kind. */
export function showClosing(reply) {
  const c = reply.closing;
  $("closing-meta").textContent =
    `Dia ${c.day} · terminal ${c.terminal || "—"} · ${count(c.sales, "venda", "vendas")} · ${count(c.server_payments, "pagamento", "pagamentos")} no servidor${c.server_refunds ? ` · ${count(c.server_refunds, "estorno", "estornos")}` : ""}`;
  $("closing-totals").replaceChildren(...closingTotals(c).map(([label, n, centavos]) => {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.textContent = label;
    tr.append(th, cell(n == null ? "" : String(n), "num"), cell(brl(centavos), "num"));
    if (label === "Líquido do dia") tr.className = "net";
    return tr;
  }));
  const verdict = closingVerdict(c);
  $("closing-verdict").textContent = verdict.text;
  $("closing-verdict").className = `verdict ${verdict.ok ? "ok" : "bad"}`;
  $("closing-discrepancies").replaceChildren(...discrepancyGroups(c).map((g) => {
    const div = document.createElement("section");
    div.className = "discrepancy";
    div.dataset.kind = g.kind;
    const h = document.createElement("h3");
    h.textContent = `${g.label} (${g.items.length})`;
    const ul = document.createElement("ul");
    ul.append(...g.items.map((d) => {
      const li = document.createElement("li");
      li.textContent = `${d.venda ? `Venda nº ${d.venda}: ` : ""}${d.detail}`;
      return li;
    }));
    div.append(h, ul);
    return div;
  }));
  showClosingNotas(c.notas);
  const pending = c.pending.length;
  $("closing-pending").hidden = pending === 0;
  $("closing-pending").textContent = pending === 0 ? ""
    : `Fechado com ${pending} ${pending === 1 ? "pagamento pendente listado" : "pagamentos pendentes listados"}: ${pending === 1 ? "ele será enviado" : "eles serão enviados"} quando a rede permitir.`;
  $("closing-files").textContent = `Salvo em ${reply.csv}, ${reply.json} e ${reply.html}`;
  $("closing-anyway").hidden = true;
  $("closing-print").hidden = false;
  $("closing-dialog").hidden = false;
  $("closing-print").focus();
}

/** The closing's NFC-e (absent when the till issues none): the day's count and each open note. */
function showClosingNotas(n) {
  $("closing-nfce").hidden = !n;
  if (!n) return;
  const extra = (n.inutilizadas ? ` · ${count(n.inutilizadas, "número inutilizado", "números inutilizados")}` : "")
    + (n.canceladas ? ` · ${count(n.canceladas, "cancelada", "canceladas")}` : "");
  $("closing-nfce-resumo").textContent = `${count(n.autorizadas, "autorizada", "autorizadas")} no dia${extra}.${n.atencao.length ? "" : " Nenhuma nota pendente."}`;
  $("closing-nfce-lista").replaceChildren(...n.atencao.map((a) => {
    const li = document.createElement("li");
    li.textContent = a.texto;
    return li;
  }));
}

/** The closing was refused (payments still pending, or the server out of reach). */
export function showClosingRefused(message, pendingKind) {
  $("closing-meta").textContent = "";
  $("closing-totals").replaceChildren();
  $("closing-discrepancies").replaceChildren();
  $("closing-nfce").hidden = true;
  $("closing-verdict").textContent = message;
  $("closing-verdict").className = "verdict bad";
  $("closing-pending").hidden = true;
  $("closing-files").textContent = "";
  $("closing-print").hidden = true;
  $("closing-anyway").hidden = !pendingKind;
  $("closing-dialog").hidden = false;
  (pendingKind ? $("closing-anyway") : $("closing-close")).focus();
}

/** Shows the cash drawer: what it should hold and how, and its movements. */
export function showDrawer(d, offsetMinutes) {
  const rows = [
    ["Abertura (troco inicial)", d.abertura],
    ["Vendas em dinheiro", d.vendas.centavos],
    ["Suprimentos", d.suprimentos.centavos],
    ["Sangrias", -d.sangrias.centavos.valueOf()],
    ["Devoluções em dinheiro", -d.devolucoes.centavos.valueOf()],
    ["Deve haver na gaveta", d.esperado],
  ];
  if (d.contado != null) rows.push(["Contado", d.contado], ["Diferença", d.diferenca]);
  $("drawer-summary").replaceChildren(...rows.map(([label, v]) => {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.textContent = label;
    tr.append(th, cell(brl(v), "num"));
    if (label === "Deve haver na gaveta") tr.className = "net";
    return tr;
  }));
  const names = { abertura: "Abertura", sangria: "Sangria", suprimento: "Suprimento", contagem: "Contagem" };
  $("drawer-moves").replaceChildren(...d.movimentos.map((m) => {
    const tr = document.createElement("tr");
    tr.append(cell(storeTime(m.at, offsetMinutes)), cell(names[m.kind] || m.kind), cell(brl(m.valor), "num"), cell(m.motivo || ""));
    return tr;
  }));
  // Once opened, the float is not asked again: the list starts on what comes next.
  const opened = d.movimentos.some((m) => m.kind === "abertura");
  $("drawer-kind").options[0].disabled = opened;
  if (opened && $("drawer-kind").value === "abertura") $("drawer-kind").value = "sangria";
  $("drawer-dialog").hidden = false;
}

/** Closes whichever dialog is open. */
export function hideDialogs() {
  $("danfe-dialog").hidden = true;
  $("drawer-dialog").hidden = true;
  $("receipt-dialog").hidden = true;
  $("closing-dialog").hidden = true;
  $("refund-dialog").hidden = true;
}

/** Shows the terminal's name. */
export function showTerminal(name) {
  $("terminal").textContent = name;
}

/** Fills the "forma de pagamento" list with the store's plans for the amount typed, keeping
 * the cashier's choice when it is still offered (else crédito à vista). */
export function fillPlans(offers, keep, maquininha) {
  const select = $("forma");
  // With a card machine beside the till, each card forma again under "Cartão na maquininha".
  const atMachine = maquininha
    ? [{ forma: "maquina", rotulo: "Cartão na maquininha (cliente escolhe)", detalhe: "", value: "maq:" },
      ...offers.filter((o) => o.forma !== "dinheiro").map((o) => ({
        ...o, forma: "maquina", rotulo: `${o.rotulo} na maquininha`, value: `maq:${planValue(o)}`,
      }))]
    : [];
  offers = [...offers, ...atMachine];
  const values = offers.map((o) => o.value || planValue(o));
  const same = select.options.length === offers.length
    && offers.every((o, i) => select.options[i].value === values[i] && select.options[i].textContent === o.rotulo);
  if (!same) {
    // The parcelados are listed under one heading, each with its installment.
    const group = document.createElement("optgroup");
    group.label = "Crédito parcelado";
    const machineGroup = document.createElement("optgroup");
    machineGroup.label = "Cartão na maquininha";
    const items = [];
    offers.forEach((o, i) => {
      const opt = document.createElement("option");
      opt.value = values[i];
      opt.textContent = o.rotulo;
      opt.dataset.detalhe = o.detalhe;
      if (o.forma === "maquina") {
        if (!machineGroup.children.length) items.push(machineGroup);
        machineGroup.append(opt);
      } else if (o.forma === "parcelado") {
        if (!group.children.length) items.push(group);
        group.append(opt);
      } else {
        items.push(opt);
      }
    });
    select.replaceChildren(...items);
  }
  select.value = values.includes(keep) ? keep : "credito:1";
  showPlanDetail();
}

/** The line under the forma list: the chosen parcelado's installments, exactly. */
export function showPlanDetail() {
  const opt = $("forma").selectedOptions[0];
  $("forma-hint").textContent = (opt && opt.dataset.detalhe) || "";
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
