//! One till in a randomized trial: owns an outbox, pays the sales of its plan (some with two
//! concurrent presses), then waits for its queue to drain. The trial runner kills it at random
//! points and starts it again with an empty plan to recover.
//!
//! Usage: trial-client <outbox.db> <api-url> <api-key> <plan|-> <drain-secs>
//! where a plan is `sale:valor:card:presses:delay_ms` items joined by `;` (each paid after its
//! delay from the start).
//! Prints `stored <attempt>` and `refused <sale> <kind>` per payment, then `drained` or `pending`.
//! While it waits, a sale whose payment is in review with no charge found is paid again with
//! another card, as a cashier would ("Outro cartão"): the engine cancels the old key first, and
//! the sale is settled only once that key can no longer charge.

use checkout_core::{AttemptState, CardToken, Centavos, Checkout, Config, CoreError, SaleId};
use std::io::Write;
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
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
    let checkout = match Checkout::open(db, config).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("trial-client: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    let started = tokio::time::Instant::now();
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
        let card = CardToken::parse(card).expect("a card token");
        let presses: usize = presses.parse().expect("presses");
        let pays = (0..presses.max(1)).map(|_| checkout.pay(sale.clone(), valor, card.clone()));
        for result in futures::future::join_all(pays).await {
            let line = match result {
                Ok(o) => format!("stored {}", attempt_of(o).id),
                Err(e) => format!("refused {} {}", sale.as_ref(), kind(&e)),
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
        for a in attempts.iter().filter(|a| {
            pressing
                && !a.is_refund()
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
        let attempts = checkout.attempts().await.unwrap_or_default();
        // Settled: final, or a refund in review with no refund found (a payment in review is
        // settled only by its payment or its cancelled key).
        let settled = attempts.iter().all(|a| match a.state {
            AttemptState::Pendente => false,
            AttemptState::Revisao => a.is_refund() && a.review_checked_at.is_some(),
            _ => true,
        });
        if settled {
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
        _ => "other",
    }
}
