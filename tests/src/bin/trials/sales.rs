//! (l): every divided sale shows on the server what its parts hold, and what is to give back.

use super::*;

/// (l): every divided sale's money, as the server shows the sale (`GET /vendas/{sale}`), against
/// what was taken: what its card tenders hold (from the gateway's ledger, through the payments)
/// and the Pix received at the provider for its Pix tenders. `pago` is its card tenders' and the
/// Pix paid while their charge was open (`CONCLUIDA` at the provider), never more than its total;
/// `a_devolver` is the Pix paid after their charge was removed; nothing taken is unaccounted for.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn check_sales(
    out: &mut Outcome,
    http: &reqwest::Client,
    servers: &[ApiProcess],
    api_key: &str,
    tills: &[Till],
    database: &ApiDatabase,
    merchant: &str,
    ledger: Option<&Value>,
) {
    let mut violation = |note: String| {
        out.violations[11] += 1;
        out.notes.push(format!("(l) {note}"));
    };
    // Each divided sale's tenders, from the tills' outboxes.
    let mut sales: BTreeMap<String, (i64, BTreeSet<String>)> = BTreeMap::new();
    for till in tills {
        let Ok(c) = rusqlite::Connection::open_with_flags(
            &till.outbox,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        ) else {
            continue;
        };
        let rows = c
            .prepare(
                "SELECT a.sale_id, s.total, a.id FROM attempts a JOIN sales s ON s.sale_id = a.sale_id
                  WHERE a.kind = 'pagamento' AND s.total IS NOT NULL",
            )
            .and_then(|mut st| {
                st.query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, String>(2)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()
            })
            .unwrap_or_default();
        for (sale, total, attempt) in rows {
            sales
                .entry(sale)
                .or_insert_with(|| (total, BTreeSet::new()))
                .1
                .insert(attempt);
        }
    }
    if sales.is_empty() {
        return;
    }
    let payments = match payment_rows(database, merchant).await {
        Ok(payments) => payments,
        Err(e) => return violation(format!("server payments unreadable: {e}")),
    };
    let charges = pix_rows(database, merchant)
        .await
        .map(|(charges, _)| charges)
        .unwrap_or_default();
    // Per Pix charge at the provider: (paid while open, paid after removal), in centavos.
    let mut at_provider: HashMap<&str, (i64, i64)> = HashMap::new();
    for cob in ledger
        .and_then(|l| l["cobs"].as_array())
        .into_iter()
        .flatten()
    {
        let received: i64 = cob["pix"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["valor"].as_str().and_then(pagar_rules::decimal::parse))
            .sum();
        let removed = cob["status"]
            .as_str()
            .is_some_and(|s| s.starts_with("REMOVIDA"));
        at_provider.insert(
            cob["txid"].as_str().unwrap_or_default(),
            if removed {
                (0, received)
            } else {
                (received, 0)
            },
        );
    }
    for (n, (sale, (total, tenders))) in sales.iter().enumerate() {
        let card: i64 = payments
            .iter()
            .filter(|p| p.referencia.as_ref().is_some_and(|r| tenders.contains(r)))
            .filter(|p| p.meio == "cartao" && p.holds_money())
            .map(|p| p.valor)
            .sum();
        let (pix_paid, pix_late) = charges
            .iter()
            .filter(|c| c.referencia.as_ref().is_some_and(|r| tenders.contains(r)))
            .filter_map(|c| at_provider.get(c.txid.as_str()))
            .fold((0, 0), |t, p| (t.0 + p.0, t.1 + p.1));
        let shown: Value = match read_sale(http, servers, n, api_key, sale).await {
            Ok(r) if r.status() == reqwest::StatusCode::NOT_FOUND => {
                // No tender reached the server: nothing may have been taken.
                if card + pix_paid + pix_late > 0 {
                    violation(format!(
                        "sale {sale}: {card} by card and {} by Pix taken, the server has no sale",
                        pix_paid + pix_late
                    ));
                }
                continue;
            }
            Ok(r) => match r.json().await {
                Ok(v) => v,
                Err(e) => {
                    violation(format!("sale {sale}: unreadable: {e}"));
                    continue;
                }
            },
            Err(e) => {
                violation(format!("sale {sale}: not read: {e}"));
                continue;
            }
        };
        let (pago, a_devolver) = (
            shown["pago"].as_i64().unwrap_or(-1),
            shown["a_devolver"].as_i64().unwrap_or(-1),
        );
        out.divided[2] += u32::from(pix_late > 0);
        if pago > *total || pago != card + pix_paid || a_devolver != pix_late {
            violation(format!(
                "sale {sale} (total {total}): the server shows paid {pago}, to give back {a_devolver}; taken {card} by card, {pix_paid} by Pix while open, {pix_late} by Pix after its removal"
            ));
        }
    }
}

/// `GET /vendas/{sale}`, from the `n`th server round the ring and, when a request gets no answer
/// (a loaded machine, a replica a late fault took down), from the next: at most four tries.
async fn read_sale(
    http: &reqwest::Client,
    servers: &[ApiProcess],
    n: usize,
    api_key: &str,
    sale: &str,
) -> reqwest::Result<reqwest::Response> {
    let mut tries = 0;
    loop {
        let url = servers[(n + tries) % servers.len()].url();
        let sent = http
            .get(format!("{url}/vendas/{sale}"))
            .bearer_auth(api_key)
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        tries += 1;
        match sent {
            Err(e) if tries < 4 && (e.is_connect() || e.is_timeout() || e.is_request()) => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            sent => return sent,
        }
    }
}
