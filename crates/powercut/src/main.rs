//! `powercut <folder> <mountpoint> [fsync-delay-ms]`: serves the folder at the mountpoint with
//! volatile writes, driven by `cut` and `quit` lines on standard input (see `powercut::serve`).

use std::path::Path;
use std::time::Duration;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(folder), Some(mountpoint)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: powercut <folder> <mountpoint> [fsync-delay-ms]");
        return std::process::ExitCode::from(2);
    };
    let delay = match args.get(3).map(|d| d.parse::<u64>()) {
        None => Duration::ZERO,
        Some(Ok(ms)) => Duration::from_millis(ms),
        Some(Err(_)) => {
            eprintln!("powercut: fsync-delay-ms must be a whole number of milliseconds");
            return std::process::ExitCode::from(2);
        }
    };
    match powercut::serve(
        Path::new(folder),
        Path::new(mountpoint),
        delay,
        std::io::stdin().lock(),
        std::io::stdout().lock(),
    ) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("powercut: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
