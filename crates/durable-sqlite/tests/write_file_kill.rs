//! `private::write_file` under `kill -9`: a process rewriting a file in a loop is killed at
//! random moments, and the file is always one whole version, never empty or cut.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

const CHILD: &str = "DURABLE_SQLITE_REWRITER";

/// The child: rewrites the file it is given as fast as it can until it is killed.
#[test]
fn rewriter_child() {
    let Some(path) = std::env::var_os(CHILD) else {
        return; // run as an ordinary test: nothing to do
    };
    let path = PathBuf::from(path);
    for i in 0u64.. {
        let body = format!(
            "{{\"versao\": {i}, \"enchimento\": \"{}\"}}",
            "x".repeat(4096)
        );
        durable_sqlite::private::write_file(&path, body.as_bytes()).unwrap();
    }
}

#[test]
fn a_file_rewritten_by_a_process_killed_at_random_is_always_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    durable_sqlite::private::write_file(&path, b"{\"versao\": -1}").unwrap();
    for round in 0..20u64 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "rewriter_child",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD, &path)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(20 + (round * 37) % 90));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("round {round}: not whole ({e}): {text:?}"));
        assert!(json["versao"].is_i64(), "round {round}: {json}");
    }
}
