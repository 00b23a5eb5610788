//! How a run is measured and summed up: wrk's load and its parsed line, the table, medians, and
//! the CPU a server process and the machine spent.

use super::*;

/// Runs wrk with 32 connections for `secs` seconds against `url`.
pub(super) fn wrk(
    name: &'static str,
    script: &std::path::Path,
    url: &str,
    secs: u64,
    prefix: &str,
    cycle: usize,
) -> Row {
    wrk_with(name, script, url, secs, prefix, cycle, CONCURRENCY, "")
}

// One wrk run is these eight settings; a struct for them would only be passed along once.
#[allow(clippy::too_many_arguments)]
pub(crate) fn wrk_with(
    name: &'static str,
    script: &std::path::Path,
    url: &str,
    secs: u64,
    prefix: &str,
    cycle: usize,
    connections: usize,
    cookie: &str,
) -> Row {
    let threads = connections.clamp(1, 2);
    let out = std::process::Command::new("wrk")
        .args([
            &format!("-t{threads}"),
            &format!("-c{connections}"),
            &format!("-d{secs}s"),
            "--timeout",
            "10s",
            "-s",
        ])
        .arg(script)
        .arg(url)
        .args(["--", prefix, &cycle.to_string(), API_KEY, cookie])
        .output()
        .expect("wrk is installed (make bench installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("WRK "))
        .unwrap_or_else(|| {
            panic!(
                "wrk printed no summary:\n{text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let f: Vec<u64> = line
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let errors: u64 = f[4..9].iter().sum();
    assert_eq!(
        errors, 0,
        "{name}: wrk saw errors: connect {} read {} write {} non-2xx {} timeout {}",
        f[4], f[5], f[6], f[7], f[8]
    );
    Row {
        name,
        count: f[0] as usize,
        elapsed: Duration::from_micros(f[1]),
        p50_ms: f[2] as f64 / 1_000.0,
        p99_ms: f[3] as f64 / 1_000.0,
    }
}

/// The scenario table: count, rate and latency percentiles, one row each.
pub(super) fn print_table(rows: &[&Row]) {
    println!(
        "{:<46} {:>8} {:>10} {:>9} {:>9}",
        "scenario", "n", "per s", "p50 ms", "p99 ms"
    );
    for r in rows {
        println!(
            "{:<46} {:>8} {:>10.0} {:>9.2} {:>9.2}",
            r.name,
            r.count,
            r.rate(),
            r.p50_ms,
            r.p99_ms
        );
    }
}

/// The median of three or more rows' rates, as a row named `name`.
pub(super) fn median(name: &'static str, rows: &[Row]) -> Row {
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    let m = sorted[sorted.len() / 2];
    Row {
        name,
        count: m.count,
        elapsed: m.elapsed,
        p50_ms: m.p50_ms,
        p99_ms: m.p99_ms,
    }
}

/// What a run cost the machine: the server process's CPU per request, and the share of the
/// machine's CPU time left idle (wrk and the server share its cores).
#[derive(Clone, Copy)]
pub(super) struct Cpu {
    pub(super) per_request_us: f64,
    /// The whole machine's busy CPU per request (the server, wrk, the kernel), µs.
    pub(super) machine_us: f64,
    pub(super) idle: f64,
    /// The busiest SQLite writer thread of the server (`durable-sqlite`'s one writer per
    /// database file): its share of one core during the run, and its CPU per request (µs).
    pub(super) writer: (f64, f64),
}

/// Runs `run` against the server process `pid`, measuring its CPU and the machine's.
pub(super) fn with_cpu(pid: u32, run: impl FnOnce() -> Row) -> (Row, Cpu) {
    let (ticks, machine) = (postgres::process_ticks(pid), postgres::machine_ticks());
    let writers = postgres::thread_ticks(pid, "sqlite-writer");
    let row = run();
    let spent = postgres::process_ticks(pid).saturating_sub(ticks);
    let writer = postgres::thread_ticks(pid, "sqlite-writer")
        .into_iter()
        .map(|(tid, now)| {
            let then = writers.iter().find(|(t, _)| *t == tid).map_or(0, |w| w.1);
            now.saturating_sub(then)
        })
        .max()
        .unwrap_or(0) as f64;
    let (busy, idle) = postgres::machine_ticks();
    let (busy, idle) = (
        busy.saturating_sub(machine.0) as f64,
        idle.saturating_sub(machine.1) as f64,
    );
    // USER_HZ is 100 on every Linux this runs on (`getconf CLK_TCK`): a tick is 10 ms.
    let cpu = Cpu {
        per_request_us: spent as f64 * 10_000.0 / row.count.max(1) as f64,
        machine_us: busy * 10_000.0 / row.count.max(1) as f64,
        idle: idle / (busy + idle).max(1.0),
        writer: (
            writer / 100.0 / row.elapsed.as_secs_f64().max(1e-9),
            writer * 10_000.0 / row.count.max(1) as f64,
        ),
    };
    (row, cpu)
}

/// The middle of `v` (the upper one of an even count; 0 for none).
pub(super) fn mid(mut v: Vec<f64>) -> f64 {
    v.sort_by(|x, y| x.total_cmp(y));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Each step's mean over the runs (the median of the runs' means), as `op 1.23 ms, …`.
pub(super) fn steps_median(runs: &[Vec<(String, f64, u64)>]) -> String {
    let ops = runs.first().map(|s| s.iter().map(|(op, ..)| op.as_str()));
    ops.into_iter()
        .flatten()
        .map(|op| format!("{op} {:.2} ms", step_median(runs, op)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One step's mean over the runs (the median of the runs' means), in ms.
pub(super) fn step_median(runs: &[Vec<(String, f64, u64)>], op: &str) -> f64 {
    mid(runs
        .iter()
        .filter_map(|s| s.iter().find(|(o, ..)| o == op))
        .map(|(_, ms, _)| *ms)
        .collect())
}

/// The median of the runs' CPU figures, each figure on its own.
pub(super) fn median_cpu(runs: &[Cpu]) -> Cpu {
    Cpu {
        per_request_us: mid(runs.iter().map(|c| c.per_request_us).collect()),
        machine_us: mid(runs.iter().map(|c| c.machine_us).collect()),
        writer: (
            mid(runs.iter().map(|c| c.writer.0).collect()),
            mid(runs.iter().map(|c| c.writer.1).collect()),
        ),
        idle: mid(runs.iter().map(|c| c.idle).collect()),
    }
}
