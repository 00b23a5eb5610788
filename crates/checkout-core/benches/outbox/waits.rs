//! Where a press of Pagar waits: each durable write's parts (queueing for the writer, the
//! commit, the fsync) over the runs, and what the slowest presses waited on.

use super::*;

/// Prints where the outbox's writes spent their time in each pay scenario: each phase's p50 and
/// p99 by the writer's own clock ([`Timings`]), the median of the rounds.
pub(super) fn where_pay_waits(pays: &[(Vec<Vec<Duration>>, Vec<Timings>)]) {
    // The `q`-quantile of a histogram, the median of the rounds (in its own unit: µs, pages).
    let quantile = |which: usize, of: &dyn Fn(&Timings) -> &Histogram<u64>, q: f64| {
        median(
            pays.iter()
                .map(|r| of(&r.1[which]).value_at_quantile(q) as f64)
                .collect(),
        )
    };
    let ms = |which: usize, of: &dyn Fn(&Timings) -> &Histogram<u64>, q: f64| {
        quantile(which, of, q) / 1_000.0
    };
    let count = |which: usize, of: &dyn Fn(&Timings) -> u64| {
        median(pays.iter().map(|r| of(&r.1[which]) as f64).collect())
    };
    let cell = |which: usize, of: &dyn Fn(&Timings) -> &Histogram<u64>| {
        format!("{:6.3} {:6.3}", ms(which, of, 0.5), ms(which, of, 0.99))
    };
    println!("where the outbox's writes spent their time (the writer's own clock; p50 p99 ms, median of rounds; log pages a batch appended, p50 p99):");
    println!(
        "{:<44} {:>13} {:>13} {:>13} {:>13} {:>13} {:>9}",
        "", "waited", "behind", "ran", "COMMIT", "queued->done", "pages"
    );
    type Of = fn(&Timings) -> &Phases;
    let kinds: [(&str, Of); 2] = [("durable", |t| &t.durable), ("relaxed", |t| &t.relaxed)];
    for which in [ONLINE, SERVER_OTHER_DISK, PACED, IN_PROCESS, OFFLINE, FLOOR] {
        println!("{}", PAY_SCENARIOS[which].trim());
        for (kind, phases) in kinds {
            let writes = count(which, &|t| phases(t).total.len());
            if writes == 0.0 {
                continue;
            }
            let batches = count(which, &|t| phases(t).batches);
            println!(
                "{:<44} {} {} {} {} {} {:>4.0} {:>4.0}",
                format!("  {kind}: {writes:.0} writes in {batches:.0} batches"),
                cell(which, &|t| &phases(t).waited),
                cell(which, &|t| &phases(t).behind),
                cell(which, &|t| &phases(t).ran),
                cell(which, &|t| &phases(t).committed),
                cell(which, &|t| &phases(t).total),
                quantile(which, &|t| &phases(t).frames, 0.5),
                quantile(which, &|t| &phases(t).frames, 0.99),
            );
        }
        println!(
            "  checkpoints: {:.0}, p50 {:.3} p99 {:.3} ms; durable writes beside one: {:.0}, queued->done p50 {:.3} max {:.3} ms",
            count(which, &|t| t.checkpoints.len()),
            ms(which, &|t| &t.checkpoints, 0.5),
            ms(which, &|t| &t.checkpoints, 0.99),
            count(which, &|t| t.durable.beside_checkpoint.len()),
            ms(which, &|t| &t.durable.beside_checkpoint, 0.5),
            ms(which, &|t| &t.durable.beside_checkpoint, 1.0),
        );
    }
}

type Part = fn(&WriteTime) -> u64;

/// A durable write's parts as the one-by-one table prints them; the last (blocked in `COMMIT`)
/// after its columns.
pub(super) const PARTS: [Part; 10] = [
    |w| w.total,
    |w| w.waited,
    |w| w.waited_for_core,
    |w| w.behind,
    |w| w.ran,
    |w| w.ran_waiting_for_core,
    |w| w.committed,
    |w| w.commit_on_core,
    |w| w.commit_waiting_for_core,
    |w| w.commit_blocked(),
];

/// Every round's durable writes in scenario `which`.
pub(super) fn durable_writes(
    pays: &[(Vec<Vec<Duration>>, Vec<Timings>)],
    which: usize,
) -> Vec<WriteTime> {
    pays.iter()
        .flat_map(|r| r.1[which].durable.writes.iter().copied())
        .collect()
}

/// The writes around the p99 of queued->done (from its p98.5 to its p99.5): what a p99 write is
/// made of, each part their mean (so the parts add up to the whole), in ms; and how many.
pub(super) fn around_p99(writes: &[WriteTime]) -> ([f64; 10], usize) {
    let mut totals: Vec<u64> = writes.iter().map(|w| w.total).collect();
    totals.sort_unstable();
    let at = |q: f64| totals[((totals.len() as f64 * q) as usize).min(totals.len() - 1)];
    let (low, high) = (at(0.985), at(0.995));
    let band: Vec<&WriteTime> = writes
        .iter()
        .filter(|w| (low..=high).contains(&w.total))
        .collect();
    let mean =
        |part: &Part| band.iter().map(|w| part(w) as f64).sum::<f64>() / band.len() as f64 / 1e3;
    (PARTS.map(|p| mean(&p)), band.len())
}

/// Prints what the durable writes of the pay scenarios spent their time on, one by one (every
/// round's writes together): the median of each part, and what the writes around the p99 are
/// made of — which phase, and in it whether the writer was on a core, waiting for one, or
/// blocked (in a `COMMIT`, on the disk's flush).
pub(super) fn where_slowest_pays_wait(pays: &[(Vec<Vec<Duration>>, Vec<Timings>)]) {
    println!("the durable writes one by one (every round; ms): the median of each part, then the mean parts of the writes around the p99 (p98.5-p99.5)");
    println!(
        "{:<44} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "", "done", "waited", "w.core", "behind", "ran", "r.core", "COMMIT", "c.core", "c.wait"
    );
    println!(
        "{:<44} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "", "", "", "(wait)", "", "", "(wait)", "", "(on)", "(wait)"
    );
    let row = |label: String, ms: [f64; 10]| {
        let cells: Vec<String> = ms.iter().map(|v| format!("{v:>8.3}")).collect();
        println!(
            "{label:<44} {}  blocked {}",
            cells[..9].join(" "),
            cells[9].trim()
        );
    };
    for which in [ONLINE, SERVER_OTHER_DISK, PACED, IN_PROCESS, OFFLINE] {
        let writes = durable_writes(pays, which);
        if writes.is_empty() {
            continue;
        }
        println!("{}", PAY_SCENARIOS[which].trim());
        let median_of = |part: &Part| median(writes.iter().map(|w| part(w) as f64 / 1e3).collect());
        row(
            format!("  median of {} writes", writes.len()),
            PARTS.map(|p| median_of(&p)),
        );
        let (parts, n) = around_p99(&writes);
        row(format!("  around the p99: {n} writes, mean"), parts);
    }
}
