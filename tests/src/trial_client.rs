//! One till in a randomized trial: owns an outbox, pays the sales of its plan (some with two
//! concurrent presses), then waits for its queue to drain. The trial runner kills it at random
//! points and starts it again with an empty plan to recover.
//!
//! Usage: trial-client <outbox.db> <api-url> <api-key> <plan|-> <drain-secs>
//! where a plan is `sale:valor:card:presses:delay_ms` items joined by `;` (each paid after its
//! delay from the start; card `pix` presses F5 instead: a Pix charge; card `split` divides the
//! sale: a third of it by débito first, the rest by crédito once nothing of it is in flight;
//! `split-pix` likewise with the first third by Pix; card `maq` sends it to the card machine
//! named by `TRIAL_MAQUININHA`, offered as débito).
//! Prints `stored <attempt>` and `refused <sale> <kind>` per payment, then `drained` or `pending`.
//! A sale the machine could not take because the server was unreachable is pressed again until
//! it is taken.
//! While it waits, a sale whose payment is in review with no charge found is paid again with
//! another card, as a cashier would ("Outro cartão"): the engine cancels the old key first, and
//! the sale is settled only once that key can no longer charge. A Pix whose QR has waited
//! [`PIX_PATIENCE`] is cancelled ("Cancelar Pix") and, once cancelled, its sale is paid by card,
//! as a cashier whose customer gave up on the QR would (a part of a divided sale: the rest of
//! the sale by crédito). Once settled, it asks the server about
//! the Pix it closed (one paid anyway is recorded to give back) before it prints `drained`. A
//! divided sale is settled only once paid in full: what is missing is paid by crédito, as a
//! cashier would, by a till restarted after a crash too (which undoes the card parts it had
//! authorized, so the sale is paid again), and confirmed (its authorizations captured) once paid.
//! A sale whose id ends in `-estorno` is paid back in full once its card payment is approved
//! ("Estornar", by a till restarted after a crash too), printing `refund <attempt>`.
//! With `TRIAL_SEFAZ` (a SEFAZ simulator's URL) the till issues each paid sale's NFC-e in série
//! `TRIAL_SERIE`, and is drained only once every paid sale has its note and none waits.

use checkout_core::fiscal::{Emissor, VendaPaga};
use checkout_core::{
    Attempt, AttemptState, Capture, CardPlan, CardToken, Centavos, Checkout, Config, CoreError,
    SaleId,
};
use std::io::Write;
use std::time::Duration;

/// How long a Pix QR waits for the customer before the cashier cancels it.
const PIX_PATIENCE: Duration = Duration::from_millis(1_500);

/// The till's whole run, on a runtime of its own (one thread, as a till's engine runs): what
/// `trial-client` and `trial-client-mutant` do.
pub fn run() -> std::process::ExitCode {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(till())
}

async fn till() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, db, url, key, plan, drain_secs] = args.as_slice() else {
        eprintln!("usage: trial-client <outbox.db> <api-url> <api-key> <plan|-> <drain-secs>");
        return std::process::ExitCode::from(2);
    };
    let drain = Duration::from_secs(drain_secs.parse().unwrap_or(10));
    let mut config = Config::new(url.as_str(), key.as_str());
    // Short everything: a trial lasts seconds.
    config.backoff_base = Duration::from_millis(20);
    config.backoff_cap = Duration::from_millis(200);
    config.probe_interval = Duration::from_millis(50);
    config.probe_timeout = Duration::from_millis(300);
    config.connect_timeout = Duration::from_millis(300);
    config.request_timeout = Duration::from_millis(1_500);
    config.late_pix_recheck = Duration::from_millis(500);
    config.maquininha = std::env::var("TRIAL_MAQUININHA").ok();
    // The trial's SEFAZ: every paid sale gets its NFC-e, in this till's série.
    if let Ok(sefaz) = std::env::var("TRIAL_SEFAZ") {
        // The till's certificate kept beside its outbox, read again on every restart.
        let mut cert = std::ffi::OsString::from(db);
        cert.push(".certificado.p12");
        let mut fiscal = Emissor::sandbox_kept(&sefaz, std::path::Path::new(&cert))
            .expect("the sandbox's certificate");
        fiscal.serie = std::env::var("TRIAL_SERIE")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1);
        fiscal.espera = Duration::from_millis(1_000);
        fiscal.sondagem = Duration::from_millis(200);
        fiscal.reenvio = Duration::from_millis(200);
        config.fiscal = Some(fiscal);
    }
    let fiscal = config.fiscal.is_some();
    let checkout = match Checkout::open(db, config).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("trial-client: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    let started = tokio::time::Instant::now();
    // Sales the machine could not take because the server was not reachable: the cashier
    // presses again once it is.
    let mut machine_again: Vec<(SaleId, Centavos)> = Vec::new();
    for item in plan.split(';').filter(|s| !s.is_empty() && *s != "-") {
        let parts: Vec<&str> = item.split(':').collect();
        let [sale, valor, card, presses, delay_ms] = parts.as_slice() else {
            eprintln!("trial-client: bad plan item {item:?}");
            return std::process::ExitCode::from(2);
        };
        let delay = Duration::from_millis(delay_ms.parse().expect("a delay"));
        tokio::time::sleep_until(started + delay).await;
        let sale = SaleId::parse(sale).expect("a sale id");
        let valor = Centavos::new(valor.parse().expect("centavos")).expect("an amount");
        let presses: usize = presses.parse().expect("presses");
        let pays = (0..presses.max(1)).map(|_| {
            let (checkout, sale) = (&checkout, sale.clone());
            async move {
                match *card {
                    "pix" => checkout.pay_pix(sale, valor).await,
                    "maq" => {
                        checkout
                            .pay_maquininha(sale, valor, Some(CardPlan::DEBITO))
                            .await
                    }
                    "split-pix" => {
                        let part = Centavos::new((valor.get() / 3).max(1)).expect("positive");
                        checkout.pay_pix_tender(sale, valor, part).await
                    }
                    "split" => {
                        let part = Centavos::new((valor.get() / 3).max(1)).expect("positive");
                        let card = CardToken::parse("tok_aprovado").unwrap();
                        checkout
                            .pay_tender(sale, valor, part, card, CardPlan::DEBITO)
                            .await
                    }
                    token => {
                        let card = CardToken::parse(token).expect("a card token");
                        checkout.pay(sale, valor, card).await
                    }
                }
            }
        });
        for result in futures::future::join_all(pays).await {
            let line = match result {
                Ok(o) => format!("stored {}", attempt_of(o).id),
                Err(e) => {
                    if matches!(e, CoreError::MachineOffline)
                        && !machine_again.iter().any(|(s, _)| *s == sale)
                    {
                        machine_again.push((sale.clone(), valor));
                    }
                    format!("refused {} {}", sale.as_ref(), kind(&e))
                }
            };
            writeln!(out, "{line}").expect("stdout");
        }
        out.flush().expect("stdout");
    }
    drop(out);
    let deadline = tokio::time::Instant::now() + drain;
    // A cashier presses again at a person's pace, not every poll.
    let mut next_press = tokio::time::Instant::now();
    let done = loop {
        let attempts = checkout.attempts().await.unwrap_or_default();
        // A sale in review with no charge found is paid with another card, as a cashier would;
        // asked again while the server cannot settle the old key yet (an execution holding it).
        let pressing = tokio::time::Instant::now() >= next_press;
        if pressing {
            next_press = tokio::time::Instant::now() + Duration::from_millis(200);
        }
        // A sale the machine could not take: pressed again until the server takes it.
        if pressing && !machine_again.is_empty() {
            let mut out = std::io::stdout().lock();
            let mut still = Vec::new();
            for (sale, valor) in machine_again.drain(..) {
                match checkout
                    .pay_maquininha(sale.clone(), valor, Some(CardPlan::DEBITO))
                    .await
                {
                    Ok(o) => writeln!(out, "stored {}", attempt_of(o).id),
                    Err(CoreError::MachineOffline) => {
                        still.push((sale, valor));
                        Ok(())
                    }
                    Err(e) => writeln!(out, "refused {} {}", sale.as_ref(), kind(&e)),
                }
                .expect("stdout");
            }
            out.flush().expect("stdout");
            machine_again = still;
        }
        // A divided sale with nothing in flight and something missing: the rest by crédito.
        for (sale, total, rest) in missing_parts(&attempts).into_iter().filter(|_| pressing) {
            let card = CardToken::parse("tok_aprovado").unwrap();
            let line = match checkout
                .pay_tender(sale.clone(), total, rest, card, CardPlan::CREDITO)
                .await
            {
                Ok(o) => format!("split-rest {}", attempt_of(o).id),
                Err(e) => format!("refused {} {}", sale.as_ref(), kind(&e)),
            };
            let mut out = std::io::stdout().lock();
            writeln!(out, "{line}").expect("stdout");
            out.flush().expect("stdout");
        }
        // A sale the customer gives back: its approved card payment refunded in full, once.
        for payment in to_refund(&attempts).into_iter().filter(|_| pressing) {
            let line = match checkout.refund(&payment, None, None).await {
                Ok(o) => format!("refund {}", attempt_of(o).id),
                Err(e) => format!("refused {} {}", payment, kind(&e)),
            };
            let mut out = std::io::stdout().lock();
            writeln!(out, "{line}").expect("stdout");
            out.flush().expect("stdout");
        }
        // A divided sale paid in full, its receipt shown: its authorizations are captured.
        for sale in paid_unconfirmed(&attempts).into_iter().filter(|_| pressing) {
            let line = match checkout.confirm_sale(&sale).await {
                Ok(decided) => format!("confirmed {} {}", sale.as_ref(), decided.len()),
                Err(e) => format!("refused {} {}", sale.as_ref(), kind(&e)),
            };
            let mut out = std::io::stdout().lock();
            writeln!(out, "{line}").expect("stdout");
            out.flush().expect("stdout");
        }
        for a in attempts.iter().filter(|a| {
            pressing
                && !a.is_refund()
                && a.sale_total.is_none()
                && a.state == AttemptState::Revisao
                && a.review_checked_at.is_some()
        }) {
            let line = match checkout
                .pay(
                    a.sale_id.clone(),
                    a.valor,
                    CardToken::parse("tok_aprovado").unwrap(),
                )
                .await
            {
                Ok(o) => format!("another-card {}", attempt_of(o).id),
                Err(e) => format!("refused {} {}", a.sale_id.as_ref(), kind(&e)),
            };
            let mut out = std::io::stdout().lock();
            writeln!(out, "{line}").expect("stdout");
            out.flush().expect("stdout");
        }
        let now = now_ms();
        for a in attempts.iter().filter(|a| {
            pressing
                && a.is_pix()
                && a.state == AttemptState::Pendente
                && a.pix.is_some()
                // Either way: a till restarted with its clock jumped reads an old Pix as future.
                && (now - a.created_at).abs() >= PIX_PATIENCE.as_millis() as i64
        }) {
            let line = match checkout.cancel_pix(&a.id).await {
                // A part of a divided sale: what is missing is paid by crédito, as any part.
                Ok(c) if c.state == AttemptState::Recusado && a.sale_total.is_some() => {
                    format!("pix-cancelled {} part", a.id)
                }
                Ok(c) if c.state == AttemptState::Recusado => {
                    let card = CardToken::parse("tok_aprovado").unwrap();
                    match checkout.pay(a.sale_id.clone(), a.valor, card).await {
                        Ok(o) => format!("pix-cancelled {} card {}", a.id, attempt_of(o).id),
                        Err(e) => format!("pix-cancelled {} refused {}", a.id, kind(&e)),
                    }
                }
                Ok(c) => format!("pix-cancel {} {}", a.id, c.state.as_str()),
                Err(e) => format!("pix-cancel {} failed {}", a.id, kind(&e)),
            };
            let mut out = std::io::stdout().lock();
            writeln!(out, "{line}").expect("stdout");
            out.flush().expect("stdout");
        }
        let attempts = checkout.attempts().await.unwrap_or_default();
        // Settled: final, or a refund in review with no refund found (a payment in review is
        // settled only by its payment or its cancelled key).
        let settled = machine_again.is_empty()
            && missing_parts(&attempts).is_empty()
            && to_refund(&attempts).is_empty()
            && paid_unconfirmed(&attempts).is_empty()
            && attempts
                .iter()
                .all(|a| a.captura.is_none_or(Capture::is_final))
            && attempts.iter().all(|a| match a.state {
                AttemptState::Pendente => false,
                AttemptState::Revisao => a.is_refund() && a.review_checked_at.is_some(),
                _ => true,
            });
        // Then the Pix it closed are asked about once more: a customer may have paid one anyway.
        if settled
            && (!fiscal || notes_settled(&checkout, &attempts).await)
            && checkout.check_late_pix().await.is_ok()
        {
            break true;
        }
        if tokio::time::Instant::now() > deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", if done { "drained" } else { "pending" }).expect("stdout");
    drop(out);
    checkout.shutdown().await;
    std::process::ExitCode::SUCCESS
}

/// Every sale paid in full has its note, the note of a sale paid back in full is cancelled, and
/// no note waits to be sent, settled or cancelled.
async fn notes_settled(checkout: &Checkout, attempts: &[Attempt]) -> bool {
    let outbox = checkout.outbox();
    let open = outbox.notas_pendentes().await.map(|n| n.len()).unwrap_or(1)
        + outbox
            .notas_substituidas(i64::MAX)
            .await
            .map(|n| n.len())
            .unwrap_or(1)
        + outbox
            .notas_a_cancelar(i64::MAX, u32::MAX)
            .await
            .map(|n| n.len())
            .unwrap_or(1);
    if open > 0 {
        return false;
    }
    let mut sales: Vec<&SaleId> = attempts.iter().map(|a| &a.sale_id).collect();
    sales.sort_by(|a, b| a.as_ref().cmp(b.as_ref()));
    sales.dedup();
    for sale in sales {
        let of_sale: Vec<Attempt> = attempts
            .iter()
            .filter(|a| &a.sale_id == sale)
            .cloned()
            .collect();
        let nota = outbox.nota_da_venda(sale).await.ok().flatten();
        if VendaPaga::of(&of_sale).is_some() && nota.is_none() {
            return false;
        }
        // A sale paid back in full has its note cancelled (or the cancellation refused).
        if VendaPaga::devolvida(&of_sale)
            && nota.is_some_and(|n| n.estado == checkout_core::outbox::EstadoNota::Autorizada)
        {
            return false;
        }
    }
    true
}

/// The divided sales with nothing of them in flight (or in review not yet asked about) and
/// something still missing: `(sale, total, missing)`.
fn missing_parts(attempts: &[Attempt]) -> Vec<(SaleId, Centavos, Centavos)> {
    let mut sales: Vec<(SaleId, Centavos, i64, bool)> = Vec::new();
    for a in attempts.iter().filter(|a| !a.is_refund()) {
        let Some(total) = a.sale_total else { continue };
        let i = match sales.iter().position(|s| s.0 == a.sale_id) {
            Some(i) => i,
            None => {
                sales.push((a.sale_id.clone(), total, 0, false));
                sales.len() - 1
            }
        };
        if a.pays() {
            sales[i].2 += a.valor.get();
        }
        // An undo on its way still holds its part at the server: wait for it.
        if a.is_undecided() || a.captura == Some(Capture::Desfazer) {
            sales[i].3 = true;
        }
    }
    sales
        .into_iter()
        .filter(|(_, total, paid, busy)| !busy && *paid < total.get())
        .map(|(sale, total, paid, _)| {
            (
                sale,
                total,
                Centavos::new(total.get() - paid).expect("something is missing"),
            )
        })
        .collect()
}

/// The approved card payments of sales given back (`-estorno`) with no refund yet.
fn to_refund(attempts: &[Attempt]) -> Vec<checkout_core::AttemptId> {
    attempts
        .iter()
        .filter(|a| {
            !a.is_refund()
                && a.sale_id.as_ref().ends_with("-estorno")
                && a.state == AttemptState::Aprovado
                && a.metodo == checkout_core::Means::Cartao
                && a.sale_total.is_none()
                && !attempts.iter().any(|r| r.refund_of.as_ref() == Some(&a.id))
        })
        .map(|a| a.id.clone())
        .collect()
}

/// The divided sales paid in full with an authorization nobody decided yet.
fn paid_unconfirmed(attempts: &[Attempt]) -> Vec<SaleId> {
    let mut sales: Vec<SaleId> = attempts
        .iter()
        .filter(|a| a.captura == Some(Capture::Pendente))
        .map(|a| a.sale_id.clone())
        .collect();
    sales.sort_by(|x, y| x.as_ref().cmp(y.as_ref()));
    sales.dedup();
    sales.retain(|sale| {
        let of_sale = attempts.iter().filter(|a| &a.sale_id == sale);
        let total = of_sale
            .clone()
            .find_map(|a| a.sale_total)
            .map_or(0, Centavos::get);
        let paid = checkout_core::outbox::paid_of(of_sale);
        paid >= total
    });
    sales
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn attempt_of(o: checkout_core::PayOutcome) -> checkout_core::Attempt {
    match o {
        checkout_core::PayOutcome::Created(a) | checkout_core::PayOutcome::Existing(a) => a,
    }
}

fn kind(e: &CoreError) -> &'static str {
    match e {
        CoreError::OfflinePaymentTooLarge { .. } => "cap_per_payment",
        CoreError::OfflineQueueFull { .. } => "cap_total",
        CoreError::ReviewUnresolved { .. } => "review_unresolved",
        CoreError::KeyNotCancelled(_) => "key_not_cancelled",
        CoreError::PixOffline => "pix_offline",
        CoreError::MachineOffline => "machine_offline",
        CoreError::NoMachine => "no_machine",
        CoreError::Unreachable(_) => "unreachable",
        _ => "other",
    }
}
