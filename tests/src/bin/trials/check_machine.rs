//! The card machine in a trial: the customer at each till's terminal, and invariant (m) over
//! the provider's orders and the server's payments.

use super::*;

/// The customer at the trial's terminals: looks at each machine every 100 ms, as its page does
/// (the machine takes the order), and for each order it sees approves the card (three in
/// four), is declined for want of funds, or walks away (the order expires at the provider).
/// Returns the kinds of what it did.
pub(crate) async fn machine_customer(
    machine: Arc<MachineProcess>,
    terminals: Vec<String>,
    seed: u64,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> BTreeSet<&'static str> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x4355_5354_4f4d_4552);
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    while !*stop.borrow() {
        for terminal in &terminals {
            let Some(order) = machine.looks(terminal).await else {
                continue;
            };
            let Some(id) = order["id"].as_str() else {
                continue;
            };
            if !seen.insert(id.to_string()) {
                continue;
            }
            let (kind, acao) = match rng.gen_range(0..20) {
                0..=14 => ("machine: card approved", Some("aprovar")),
                15..=17 => ("machine: card declined", Some("saldo_insuficiente")),
                _ => ("machine: customer walked away", None),
            };
            kinds.insert(kind);
            if let Some(acao) = acao {
                machine.customer(terminal, acao).await;
            }
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), stop.changed()).await;
    }
    kinds
}

/// (m) Every order the machine's provider has as paid (`processed`, or `refunded` later) is
/// exactly one server payment (`meio` `maquininha`, `cobranca_id` the order's id) of its amount,
/// and every such payment is a paid order: no card paid at the machine without its sale, and no
/// sale paid by an order the customer did not pay.
pub(crate) async fn check_machine(
    out: &mut Outcome,
    database: &ApiDatabase,
    merchant: &str,
    machine: &MachineProcess,
) {
    let orders = match machine.orders().await {
        Ok(o) => o,
        Err(e) => {
            out.violations[12] += 1;
            out.notes
                .push(format!("(m) the machine's orders unreadable: {e}"));
            return;
        }
    };
    let payments = match payment_rows(database, merchant).await {
        Ok(p) => p,
        Err(e) => {
            out.violations[12] += 1;
            out.notes
                .push(format!("(m) server payments unreadable: {e}"));
            return;
        }
    };
    let paid: BTreeMap<&str, i64> = orders
        .iter()
        .filter(|o| matches!(o["status"].as_str(), Some("processed" | "refunded")))
        .filter_map(|o| {
            let amount = o["total_amount"]
                .as_str()
                .and_then(pagar_rules::decimal::parse)?;
            Some((o["id"].as_str()?, amount))
        })
        .collect();
    out.machine[0] += u32::try_from(orders.len()).unwrap_or(u32::MAX);
    out.machine[1] += u32::try_from(paid.len()).unwrap_or(u32::MAX);
    let at_machine: Vec<&PaymentRow> = payments
        .iter()
        .filter(|p| p.meio == "maquininha" && p.status == "aprovado")
        .collect();
    for (id, amount) in &paid {
        let of: Vec<&&PaymentRow> = at_machine.iter().filter(|p| p.cobranca_id == *id).collect();
        match of.as_slice() {
            [one] if one.valor == *amount => {}
            [one] => {
                out.violations[12] += 1;
                out.notes.push(format!(
                    "(m) order {id} paid {amount} but its payment {} says {}",
                    one.id, one.valor
                ));
            }
            other => {
                out.violations[12] += 1;
                out.notes.push(format!(
                    "(m) order {id} paid at the machine has {} server payments",
                    other.len()
                ));
            }
        }
    }
    for p in &at_machine {
        if !paid.contains_key(p.cobranca_id.as_str()) {
            out.violations[12] += 1;
            out.notes.push(format!(
                "(m) payment {} by the machine's order {} that no card paid",
                p.id, p.cobranca_id
            ));
        }
    }
}
