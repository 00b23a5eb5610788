//! The checker: invariants (a)–(f) and (h)–(i) over what the tills and the servers hold.

use super::*;

pub(crate) async fn check(
    out: &mut Outcome,
    database: &ApiDatabase,
    gateway_db: &Path,
    merchant: &str,
    tills: &[Till],
    log: &Path,
) {
    let rows = match acquirer_rows(gateway_db, merchant) {
        Ok(ledger) => payment_rows(database, merchant).await.map(|p| (ledger, p)),
        Err(e) => Err(e),
    };
    let (ledger, payments) = match rows {
        Ok(rows) => rows,
        Err(e) => {
            out.notes.push(format!("server database unreadable: {e}"));
            out.violations[3] += 1;
            return;
        }
    };
    // (a)
    let mut per_key: HashMap<&str, u32> = HashMap::new();
    for (dk, _) in &ledger {
        *per_key.entry(dk).or_default() += 1;
    }
    for (dk, n) in per_key {
        if n > 1 {
            out.violations[0] += 1;
            out.notes
                .push(format!("(a) {n} charges for downstream key {dk}"));
        }
    }
    // Outboxes: (c), (f), and what (b) and (d) compare.
    let mut attempts: Vec<(usize, AttemptRow)> = Vec::new();
    for (t, till) in tills.iter().enumerate() {
        let Ok(c) = rusqlite::Connection::open(&till.outbox) else {
            continue; // a till killed before it created its outbox accepted nothing
        };
        let integrity: String = c
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap_or_else(|e| e.to_string());
        if integrity != "ok" {
            out.violations[5] += 1;
            out.notes.push(format!("(f) till {t}: {integrity}"));
        }
        let rows = c
            .prepare(
                "SELECT a.id, a.sale_id, a.state, a.valor, a.payment_id, a.last_error, p.status,
                        CASE WHEN a.kind = 'pagamento'
                             THEN (SELECT total FROM sales s WHERE s.sale_id = a.sale_id) END,
                        a.captura, a.kind
                   FROM attempts a LEFT JOIN pix p ON p.attempt_id = a.id",
            )
            .and_then(|mut st| {
                st.query_map([], |r| {
                    Ok(AttemptRow {
                        id: r.get(0)?,
                        sale: r.get(1)?,
                        state: r.get(2)?,
                        valor: r.get(3)?,
                        payment_id: r.get(4)?,
                        last_error: r.get(5)?,
                        pix_status: r.get(6)?,
                        sale_total: r.get(7)?,
                        captura: r.get(8)?,
                        kind: r.get(9)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()
            });
        match rows {
            Ok(rows) => attempts.extend(rows.into_iter().map(|a| (t, a))),
            Err(e) if e.to_string().contains("no such table") => {}
            Err(e) => {
                out.violations[5] += 1;
                out.notes.push(format!("(f) till {t}: {e}"));
            }
        }
    }
    for (t, a) in &attempts {
        let settled = matches!(a.state.as_str(), "aprovado" | "recusado")
            || (a.state == "revisao" && a.last_error.is_some());
        if !settled {
            out.violations[2] += 1;
            out.notes
                .push(format!("(c) till {t} attempt {} is {}", a.id, a.state));
        }
    }
    let by_ref: HashMap<&str, Vec<&PaymentRow>> =
        payments.iter().fold(HashMap::new(), |mut m, p| {
            if let Some(r) = &p.referencia {
                m.entry(r.as_str()).or_default().push(p);
            }
            m
        });
    // (b): approved charges per sale, counted on the server. A Pix paid after its till closed it
    // is not counted when the till knows it (it shows it to give back); (g) checks it does.
    let mut per_sale: BTreeMap<(usize, &str), u32> = BTreeMap::new();
    for (t, a) in attempts
        .iter()
        .filter(|(_, a)| !a.knows_late_pix() && a.sale_total.is_none())
    {
        let approved = by_ref.get(a.id.as_str()).map_or(0, |ps| {
            ps.iter().filter(|p| p.status == "aprovado").count() as u32
        });
        *per_sale.entry((*t, a.sale.as_str())).or_default() += approved;
    }
    for ((t, sale), n) in per_sale {
        if n > 1 {
            out.violations[1] += 1;
            out.notes
                .push(format!("(b) till {t} sale {sale}: {n} approved charges"));
        }
    }
    // (h): a divided sale's approved tenders, on the server and at the till, within its total;
    // paid at the till means paid on the server. A Pix paid after it was cancelled is no
    // tender's payment: (l) checks it is shown to give back.
    let late: BTreeSet<String> = match pix_rows(database, merchant).await {
        Ok((charges, _)) => charges
            .into_iter()
            .filter(|c| c.status == "recebido_apos_cancelamento")
            .map(|c| c.id)
            .collect(),
        Err(_) => BTreeSet::new(), // no Pix in this trial
    };
    let mut divided: BTreeMap<(usize, &str), (i64, i64, i64)> = BTreeMap::new();
    for (t, a) in attempts.iter().filter(|(_, a)| a.sale_total.is_some()) {
        let e = divided
            .entry((*t, a.sale.as_str()))
            .or_insert((a.sale_total.unwrap_or(0), 0, 0));
        e.1 += by_ref.get(a.id.as_str()).map_or(0, |ps| {
            ps.iter()
                .filter(|p| p.holds_money() && !late.contains(&p.id))
                .map(|p| p.valor)
                .sum::<i64>()
        });
        if a.state == "aprovado"
            && !matches!(
                a.captura.as_deref(),
                Some("desfazer" | "desfeita" | "expirada")
            )
        {
            e.2 += a.valor;
        }
    }
    for ((t, sale), (total, server, till)) in divided {
        out.divided[0] += 1;
        out.divided[1] += u32::from(till == total);
        if server > total || till > total || (till == total && server != total) {
            out.violations[7] += 1;
            out.notes.push(format!(
                "(h) till {t} sale {sale}: total {total}, approved {server} on the server, {till} at the till"
            ));
        }
    }
    // (i): every authorization captured or undone, on the server and at the till.
    for p in payments
        .iter()
        .filter(|p| p.captura.as_deref() == Some("pendente"))
    {
        out.violations[8] += 1;
        out.notes.push(format!(
            "(i) payment {} ({} centavos) still authorized on the server after the drain",
            p.id, p.valor
        ));
    }
    for (t, a) in attempts.iter().filter(|(_, a)| {
        matches!(
            a.captura.as_deref(),
            Some("pendente" | "capturar" | "desfazer")
        )
    }) {
        out.violations[8] += 1;
        out.notes.push(format!(
            "(i) till {t} tender {} left {} after the drain",
            a.id,
            a.captura.as_deref().unwrap_or("")
        ));
    }
    out.authorizations[0] += payments.iter().filter(|p| p.captura.is_some()).count() as u32;
    out.authorizations[1] += payments
        .iter()
        .filter(|p| p.captura.as_deref() == Some("capturada"))
        .count() as u32;
    out.authorizations[2] += payments
        .iter()
        .filter(|p| matches!(p.captura.as_deref(), Some("desfeita" | "expirada")))
        .count() as u32;
    // (d): both ways, and every charge has its payment.
    let ids: HashMap<&str, &AttemptRow> =
        attempts.iter().map(|(_, a)| (a.id.as_str(), a)).collect();
    // (d) for refunds: every outbox refund agrees with the server's, and back.
    match server_refunds(database, merchant).await {
        Ok(refunds) => {
            for (t, a) in attempts.iter().filter(|(_, a)| a.kind == "estorno") {
                let found: Vec<&RefundRow> = refunds
                    .iter()
                    .filter(|r| r.referencia.as_deref() == Some(a.id.as_str()))
                    .collect();
                let ok = match a.state.as_str() {
                    "aprovado" | "recusado" => {
                        found.len() == 1
                            && found[0].status == a.state
                            && found[0].valor == a.valor
                            && a.payment_id.as_deref() == Some(found[0].id.as_str())
                    }
                    _ => found.iter().all(|r| r.status != "aprovado"),
                };
                if !ok {
                    out.violations[3] += 1;
                    out.notes.push(format!(
                        "(d) till {t} refund {} ({}) has server refunds {found:?}",
                        a.id, a.state
                    ));
                }
            }
            for r in &refunds {
                let attempt = r.referencia.as_deref().and_then(|id| {
                    attempts
                        .iter()
                        .find(|(_, a)| a.id == id && a.kind == "estorno")
                });
                if attempt.is_none_or(|(_, a)| a.state != r.status) {
                    out.violations[3] += 1;
                    out.notes.push(format!(
                        "(d) server refund {} ({}) has attempt {:?}",
                        r.id,
                        r.status,
                        attempt.map(|(_, a)| &a.state)
                    ));
                }
            }
            out.refunds += refunds.iter().filter(|r| r.status == "aprovado").count() as u32;
        }
        Err(e) => {
            out.violations[3] += 1;
            out.notes
                .push(format!("(d) server refunds unreadable: {e}"));
        }
    }
    for (_, a) in attempts.iter().filter(|(_, a)| a.kind == "pagamento") {
        let found = by_ref.get(a.id.as_str()).cloned().unwrap_or_default();
        match a.state.as_str() {
            "aprovado" => {
                let ok = found.len() == 1
                    && found[0].status == "aprovado"
                    && found[0].valor == a.valor
                    && a.payment_id.as_deref() == Some(found[0].id.as_str());
                if !ok {
                    out.violations[3] += 1;
                    out.notes.push(format!(
                        "(d) approved attempt {} has server payments {found:?}",
                        a.id
                    ));
                }
            }
            "recusado" if !a.knows_late_pix() && found.iter().any(|p| p.status == "aprovado") => {
                out.violations[3] += 1;
                out.notes.push(format!(
                    "(d) declined attempt {} was approved on the server",
                    a.id
                ));
            }
            _ => {}
        }
    }
    for p in &payments {
        let attempt = p.referencia.as_deref().and_then(|r| ids.get(r));
        match attempt {
            Some(a) if a.state == p.status || a.knows_late_pix() => {}
            // A payment the till never heard of in its final form: a real charge it does not show.
            other => {
                out.violations[3] += 1;
                out.notes.push(format!(
                    "(d) server payment {} ({}) has attempt {:?}",
                    p.id,
                    p.status,
                    other.map(|a| &a.state)
                ));
            }
        }
    }
    let stored: BTreeSet<&str> = payments
        .iter()
        .filter(|p| p.meio == "cartao")
        .map(|p| p.cobranca_id.as_str())
        .collect();
    for (_, cobranca) in &ledger {
        if !stored.contains(cobranca.as_str()) {
            out.violations[3] += 1;
            out.notes
                .push(format!("(d) charge {cobranca} has no payment"));
        }
    }
    // (e)
    let text = std::fs::read_to_string(log).unwrap_or_default();
    // Injected: the crash fault, PostgreSQL sessions ended by `pg_terminate_backend`, which a
    // request then meets as a closed connection and answers 503 retryable, and, in a trial whose
    // acquirer was killed or its disk cut, the gateway failures of the requests that found it
    // down (503 retryable too).
    let acquirer_down =
        out.kinds.contains("kill -9 the acquirer") || out.kinds.contains("power cut: the acquirer");
    let injected = [
        "fault: aborting the process",
        "SQLSTATE 57P01",
        "connection closed",
    ];
    for line in text.lines().filter(|l| l.contains("ERROR")) {
        let acquirer_was_down = acquirer_down && line.contains("gateway failure");
        if !acquirer_was_down && !injected.iter().any(|i| line.contains(i)) {
            out.violations[4] += 1;
            out.notes.push(format!("(e) {line}"));
        }
    }
}
