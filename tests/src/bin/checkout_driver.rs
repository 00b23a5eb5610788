//! A minimal owner of a checkout outbox, for crash tests: opens the outbox, pays the sales it is
//! told to (printing `stored <attempt> <key>` as soon as each is durable), then waits until the
//! queue is empty and prints `drained`. The tests `kill -9` it at chosen and random points.
//!
//! Usage: checkout-driver <outbox.db> <api-url> <api-key> <sales> <sale-prefix> [card-token]

use checkout_core::{CardToken, Centavos, Checkout, Config, PayOutcome, SaleId};
use std::io::Write;
use std::time::Duration;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (db, url, key, sales, prefix, card) = match args.as_slice() {
        [_, db, url, key, sales, prefix] => (db, url, key, sales, prefix, "tok_aprovado"),
        [_, db, url, key, sales, prefix, card] => (db, url, key, sales, prefix, card.as_str()),
        _ => {
            eprintln!("usage: checkout-driver <outbox.db> <api-url> <api-key> <sales> <sale-prefix> [card-token]");
            return std::process::ExitCode::from(2);
        }
    };
    let card = CardToken::parse(card).expect("valid card token");
    let sales: u32 = sales.parse().expect("sales is a number");
    let mut config = Config::new(url.as_str(), key.as_str());
    config.backoff_base = Duration::from_millis(50);
    config.backoff_cap = Duration::from_millis(300);
    config.probe_interval = Duration::from_millis(100);
    config.offline_caps.total = None;
    let checkout = match Checkout::open(db, config).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("checkout-driver: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    for i in 0..sales {
        let sale = SaleId::parse(&format!("{prefix}-{i}")).expect("valid sale id");
        let valor = Centavos::new(100 + i64::from(i)).expect("valid amount");
        match checkout.pay(sale, valor, card.clone()).await {
            Ok(PayOutcome::Created(a) | PayOutcome::Existing(a)) => {
                writeln!(out, "stored {} {}", a.id, a.idempotency_key).expect("stdout");
                out.flush().expect("stdout");
            }
            Err(e) => {
                eprintln!("checkout-driver: pay failed: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while checkout.queue().await.map(|q| q.count).unwrap_or(1) > 0 {
        if tokio::time::Instant::now() > deadline {
            eprintln!("checkout-driver: queue did not drain in 60 s");
            return std::process::ExitCode::FAILURE;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    writeln!(out, "drained").expect("stdout");
    checkout.shutdown().await;
    std::process::ExitCode::SUCCESS
}
