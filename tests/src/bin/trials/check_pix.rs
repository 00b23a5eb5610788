//! (g): every Pix agrees between the provider, the servers and the tills; and the customer of a
//! Pix trial, who pays (or does not) the charges that check then counts.

use super::*;

/// (g): the provider's ledger, the server's Pix and the tills' Pix attempts agree.
pub(crate) async fn check_pix(
    out: &mut Outcome,
    database: &ApiDatabase,
    merchant: &str,
    tills: &[Till],
    ledger: &Value,
) {
    let found = pix_disagreements(&mut out.pix, database, merchant, tills, ledger).await;
    out.violations[6] += found.len() as u32;
    out.notes
        .extend(found.into_iter().map(|n| format!("(g) {n}")));
}

/// What (g) finds wrong; counts the trial's Pix into `pix`.
pub(crate) async fn pix_disagreements(
    pix: &mut [u32; 3],
    database: &ApiDatabase,
    merchant: &str,
    tills: &[Till],
    ledger: &Value,
) -> Vec<String> {
    let mut found = Vec::new();
    let mut violation = |note: String| found.push(note);
    let (charges, received) = match pix_rows(database, merchant).await {
        Ok(rows) => rows,
        Err(e) => return vec![format!("server Pix unreadable: {e}")],
    };
    let payments = match payment_rows(database, merchant).await {
        Ok(payments) => payments,
        Err(e) => return vec![format!("server payments unreadable: {e}")],
    };
    let by_txid: HashMap<&str, &PixChargeRow> =
        charges.iter().map(|c| (c.txid.as_str(), c)).collect();
    let cobs: Vec<&Value> = ledger["cobs"].as_array().into_iter().flatten().collect();
    let at_provider: BTreeSet<&str> = cobs.iter().filter_map(|c| c["txid"].as_str()).collect();
    // Charges: the provider's are the server's, and back.
    for cob in &cobs {
        let txid = cob["txid"].as_str().unwrap_or_default();
        let valor = cob["valor"]["original"]
            .as_str()
            .and_then(pagar_rules::decimal::parse);
        let Some(charge) = by_txid.get(txid) else {
            violation(format!(
                "charge {txid} at the provider is unknown to the server"
            ));
            continue;
        };
        if Some(charge.valor) != valor {
            violation(format!(
                "charge {txid}: {valor:?} at the provider, {} on the server",
                charge.valor
            ));
        }
        let paid: Vec<&str> = cob["pix"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["endToEndId"].as_str())
            .collect();
        let agrees = match paid.first() {
            Some(e2e) => {
                matches!(
                    charge.status.as_str(),
                    "aprovado" | "recebido_apos_cancelamento"
                ) && charge.e2eid.as_deref() == Some(*e2e)
            }
            None => matches!(charge.status.as_str(), "cancelado" | "expirado"),
        };
        if !agrees {
            violation(format!(
                "charge {txid} is {} ({:?}) on the server, {} with Pix {paid:?} at the provider",
                charge.status, charge.e2eid, cob["status"]
            ));
        }
    }
    for c in &charges {
        if !at_provider.contains(c.txid.as_str()) {
            violation(format!(
                "server charge {} ({}) is not at the provider",
                c.id, c.txid
            ));
        }
    }
    pix[0] += cobs.len() as u32;
    pix[1] += provider_pix(ledger).count() as u32;
    pix[2] += charges
        .iter()
        .filter(|c| c.status == "recebido_apos_cancelamento")
        .count() as u32;
    // Money: every Pix received is recorded once, as a payment with its amount.
    let recorded: HashMap<&str, &ReceivedRow> =
        received.iter().map(|r| (r.e2eid.as_str(), r)).collect();
    let as_payment: HashMap<&str, &PaymentRow> = payments
        .iter()
        .filter(|p| p.meio == "pix")
        .map(|p| (p.cobranca_id.as_str(), p))
        .collect();
    for (e2e, txid, valor) in provider_pix(ledger) {
        match (recorded.get(e2e), as_payment.get(e2e)) {
            (Some(r), Some(p)) if r.valor == valor && p.valor == valor && r.txid == txid => {}
            (r, p) => violation(format!(
                "Pix {e2e} of {valor} for {txid} is recorded as {r:?}, payment {p:?}"
            )),
        }
    }
    // Tills: each Pix attempt agrees with its charge; a Pix paid after it was closed is known.
    let by_ref: HashMap<&str, &PixChargeRow> = charges
        .iter()
        .filter_map(|c| Some((c.referencia.as_deref()?, c)))
        .collect();
    let mut referenced = BTreeSet::new();
    for (t, till) in tills.iter().enumerate() {
        let Ok(c) = rusqlite::Connection::open(&till.outbox) else {
            continue;
        };
        let Ok(rows) = c
            .prepare(
                "SELECT a.id, a.state, p.status, a.payment_id FROM attempts a LEFT JOIN pix p ON p.attempt_id = a.id
                  WHERE a.metodo = 'pix' AND a.kind = 'pagamento'",
            )
            .and_then(|mut st| {
                st.query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, Option<String>>(3)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()
            })
        else {
            continue;
        };
        for (id, state, seen, payment_id) in rows {
            let charge = by_ref.get(id.as_str());
            if charge.is_some() {
                referenced.insert(id.clone());
            }
            let server = charge.map(|c| c.status.as_str());
            let agrees = match (state.as_str(), server) {
                ("aprovado", Some("aprovado")) => {
                    payment_id.as_deref() == charge.map(|c| c.id.as_str())
                }
                // Paid after the server closed the charge (it lapsed, or a cancel whose answer
                // the till lost closed it) while the till still waited for it: the sale's
                // payment, as the till keeps a late Pix for a sale nothing else paid.
                ("aprovado", Some("recebido_apos_cancelamento")) => {
                    seen.as_deref() == Some("recebido_apos_cancelamento")
                        && payment_id.as_deref() == charge.map(|c| c.id.as_str())
                }
                ("recusado", None | Some("cancelado" | "expirado")) => true,
                ("recusado", Some("recebido_apos_cancelamento")) => {
                    seen.as_deref() == Some("recebido_apos_cancelamento")
                }
                ("revisao", _) => true, // (c) judges it
                _ => false,
            };
            if !agrees {
                violation(format!(
                    "till {t} Pix attempt {id} is {state} (its Pix {seen:?}); the server's charge is {server:?}"
                ));
            }
        }
    }
    for c in &charges {
        if c.referencia
            .as_deref()
            .is_none_or(|r| !referenced.contains(r))
        {
            violation(format!(
                "server charge {} ({}) has no till attempt",
                c.id, c.status
            ));
        }
    }
    found
}

/// The Pix key of a trial's merchant: its charges, its callbacks and its ledger at the shared
/// provider are its own.
pub(crate) fn pix_key(seed: u64) -> String {
    format!("trial-{seed}-{}@pix.example", *RUN_ID)
}

/// The customer of a Pix trial: pays each QR of the trial's key as it appears, now or later,
/// never, or late after it was cancelled (at a bank that ignores removal), with its callback
/// delivered, lost, repeated or late. Returns what it did and when the last of it will have
/// happened.
pub(crate) async fn customer(
    psp: Arc<PixProcess>,
    chave: String,
    seed: u64,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> (BTreeSet<&'static str>, Instant) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5049_5821);
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    let mut done_by = Instant::now();
    loop {
        let ledger = psp.ledger(&chave).await;
        for cob in ledger["cobs"].as_array().into_iter().flatten() {
            let Some(txid) = cob["txid"].as_str() else {
                continue;
            };
            if !seen.insert(txid.to_string()) {
                continue;
            }
            let soon: u64 = rng.gen_range(0..1_000);
            let (kind, order) = match rng.gen_range(0..20) {
                0..=5 => ("pix: paid", json!({"atraso_ms": soon})),
                6 | 7 => (
                    "pix: paid, callback lost",
                    json!({"atraso_ms": soon, "webhook": "perdido"}),
                ),
                8 | 9 => (
                    "pix: paid, callback 2-3 times",
                    json!({"atraso_ms": soon, "webhook": (["duplicado", "triplicado"][rng.gen_range(0..2)])}),
                ),
                10 => (
                    "pix: paid, callback late",
                    json!({"atraso_ms": soon, "webhook_atraso_ms": rng.gen_range(300..1_500u64)}),
                ),
                11..=13 => ("pix: never paid", Value::Null),
                _ => (
                    "pix: paid after cancel",
                    json!({
                        "atraso_ms": rng.gen_range(1_200..2_500u64),
                        "aceitar_inativa": true,
                        "webhook": (["entregue", "perdido"][rng.gen_range(0..2)]),
                    }),
                ),
            };
            kinds.insert(kind);
            if order.is_null() {
                continue;
            }
            let after = order["atraso_ms"].as_u64().unwrap_or(0)
                + order["webhook_atraso_ms"].as_u64().unwrap_or(0);
            done_by = done_by.max(Instant::now() + Duration::from_millis(after));
            psp.customer_pays(txid, order).await;
        }
        if *stop.borrow() {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            _ = stop.changed() => {}
        }
    }
    (kinds, done_by)
}

/// Waits (at most 15 s, reviving servers a late crash fault took down) until every Pix the
/// provider received for this trial is recorded by the server.
pub(crate) async fn pix_recorded(
    database: &ApiDatabase,
    merchant: &str,
    ledger: &Value,
    servers: &mut [ApiProcess],
    notes: &mut Vec<String>,
) -> bool {
    let paid: BTreeSet<&str> = provider_pix(ledger).map(|(e2e, _, _)| e2e).collect();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok((_, received)) = pix_rows(database, merchant).await {
            let recorded: BTreeSet<&str> = received.iter().map(|r| r.e2eid.as_str()).collect();
            if paid.is_subset(&recorded) {
                return true;
            }
        }
        if Instant::now() > deadline {
            return false;
        }
        for s in servers.iter_mut() {
            if !s.is_running() {
                revive(s, notes);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every Pix in a provider ledger: (end-to-end id, txid, centavos).
pub(crate) fn provider_pix(ledger: &Value) -> impl Iterator<Item = (&str, &str, i64)> {
    ledger["cobs"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|cob| cob["pix"].as_array().into_iter().flatten())
        .filter_map(|p| {
            Some((
                p["endToEndId"].as_str()?,
                p["txid"].as_str()?,
                pagar_rules::decimal::parse(p["valor"].as_str()?)?,
            ))
        })
}
