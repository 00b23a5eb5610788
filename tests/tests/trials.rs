//! The randomized fault trials' smoke run in `make test`: 100 trials from a fixed seed, SQLite
//! and PostgreSQL (1–3 replicas), every invariant checked; `make trials` runs 10 000.

use std::process::Command;

#[test]
fn a_hundred_randomized_fault_trials_find_no_double_charge_and_no_lost_attempt() {
    let out = Command::new(env!("CARGO_BIN_EXE_trials"))
        .args([
            "--trials", "100", "--seed", "20261201", "--store", "mixed", "--jobs", "6",
        ])
        .output()
        .expect("the trial runner starts");
    let report = String::from_utf8_lossy(&out.stdout);
    println!("{report}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "a trial failed:\n{report}");
    assert!(report.contains("100 trials in"), "{report}");
}
