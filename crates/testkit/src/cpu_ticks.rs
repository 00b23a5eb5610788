//! CPU clock ticks from `/proc` (100 a second on Linux), for the benchmarks' CPU per request.

/// The machine's (busy, idle) ticks so far, from the first line of `/proc/stat`.
pub fn machine() -> (u64, u64) {
    let cpu = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = cpu
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    let busy = ticks.iter().take(8).sum::<u64>() - idle;
    (busy, idle)
}

/// The user and system ticks process `pid` (`self` for this one; all its threads) has spent
/// so far; 0 when it is gone.
pub fn process(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let f: Vec<&str> = s.rsplit_once(')')?.1.split_whitespace().collect();
            // utime and stime: the 14th and 15th fields, the 12th and 13th after the name.
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0)
}
