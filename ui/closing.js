// The day's closing as the dialog shows it: the verdict, the totals table, the discrepancies
// grouped. No DOM.

/** The closing's one-line verdict and whether the day reconciles. */
export function closingVerdict(closing) {
  const n = closing.discrepancies.length;
  if (n === 0) {
    const what = closing.refunds && closing.refunds.aprovado.count + closing.refunds.recusado.count + closing.refunds.pendente.count + closing.refunds.revisao.count > 0
      ? "cada pagamento e cada estorno do caixa batem"
      : "cada pagamento do caixa bate";
    return { ok: true, text: `Tudo confere: ${what} com o servidor.` };
  }
  return { ok: false, text: `${n} ${n === 1 ? "divergência encontrada" : "divergências encontradas"} — confira antes de encerrar o dia.` };
}

/** The closing's totals as table rows: [label, count, centavos], payments then refunds (refund
 * states other than approved only when the day had some), then the day's net (count null). The
 * printed summary has the same rows (`closing_rows` in src-tauri/src/receipts.rs). */
export function closingTotals(closing) {
  const t = closing.totals;
  const r = closing.refunds;
  const rows = [["Aprovados", t.aprovado.count, t.aprovado.centavos]];
  // The approved by the way they were paid, when the day had more than the card with no method.
  const formas = closing.por_forma || [];
  if (formas.some((m) => m.forma !== "cartao")) {
    for (const m of formas) rows.push([m.rotulo, m.tally.count, m.tally.centavos]);
  }
  rows.push(
    ["Recusados", t.recusado.count, t.recusado.centavos],
    ["Pendentes", t.pendente.count, t.pendente.centavos],
    ["Em revisão", t.revisao.count, t.revisao.centavos],
    ["Estornos aprovados", r.aprovado.count, r.aprovado.centavos],
  );
  const elsewhere = closing.refunds_elsewhere || { count: 0, centavos: 0 };
  const desfeito = t.desfeito || { count: 0, centavos: 0 };
  for (const [label, x] of [["Autorizações desfeitas (nada cobrado)", desfeito], ["Estornos recusados", r.recusado], ["Estornos pendentes", r.pendente], ["Estornos em revisão", r.revisao], ["Estornos feitos fora deste caixa", elsewhere]]) {
    if (x.count > 0) rows.push([label, x.count, x.centavos]);
  }
  // The Pix apart (each is in the rows above too, by its attempt's state).
  const p = closing.pix;
  if (p && [p.recebidos, p.recebidos_apos_cancelamento, p.expirados, p.cancelados, p.aguardando, p.devolvidos].some((x) => x.count > 0)) {
    rows.push(["Pix recebidos", p.recebidos.count, p.recebidos.centavos]);
    rows.push(["Pix recebidos após cancelamento", p.recebidos_apos_cancelamento.count, p.recebidos_apos_cancelamento.centavos]);
    rows.push(["Pix expirados sem pagamento", p.expirados.count, p.expirados.centavos]);
    rows.push(["Pix cancelados sem pagamento", p.cancelados.count, p.cancelados.centavos]);
    rows.push(["Pix devolvidos", p.devolvidos.count, p.devolvidos.centavos]);
    if (p.aguardando.count > 0) rows.push(["Pix aguardando", p.aguardando.count, p.aguardando.centavos]);
  }
  rows.push(["Líquido do dia", null, closing.net_centavos]);
  // The cash drawer (`drawer_rows` in src-tauri/src/receipts.rs has the same).
  const g = closing.gaveta;
  if (g) {
    rows.push(["Dinheiro esperado na gaveta", null, g.esperado]);
    if (g.contado != null) {
      rows.push(["Dinheiro contado na gaveta", null, g.contado]);
      rows.push(["Diferença na gaveta", null, g.diferenca]);
    }
  }
  return rows;
}

/** Discrepancies grouped by kind, in the order the closing lists them: [{kind, label, items}]. */
export function discrepancyGroups(closing) {
  const groups = [];
  for (const d of closing.discrepancies) {
    let g = groups.find((x) => x.kind === d.kind);
    if (!g) {
      g = { kind: d.kind, label: d.label, items: [] };
      groups.push(g);
    }
    g.items.push(d);
  }
  return groups;
}
