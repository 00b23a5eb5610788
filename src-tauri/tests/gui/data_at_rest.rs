//! The cashier's files at rest: readable by the cashier alone, whatever the umask.

use crate::harness::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn walk(dir: &Path, out: &mut Vec<(String, u32, bool)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let meta = std::fs::metadata(&path).unwrap();
        out.push((
            path.display().to_string(),
            meta.permissions().mode() & 0o777,
            meta.is_dir(),
        ));
        if meta.is_dir() {
            walk(&path, out);
        }
    }
}

#[tokio::test]
async fn under_a_permissive_umask_every_folder_is_0700_and_every_file_0600() {
    // Arrange: a config file left world-readable, and the app started under umask 0000.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("dados");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(data.join("config.json"), "{}").unwrap();
    std::fs::set_permissions(
        data.join("config.json"),
        std::fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    let app = GuiApp::launch_with(&data, &[("UMASK", "0000")]).await;
    // Act: a payment (the outbox and the sandbox write their WAL files) and both exports.
    app.type_into("valor", "3,21").await;
    app.click("pagar").await;
    app.wait_status("Pagamento aprovado").await;
    for format in ["csv", "json"] {
        let out = app
            .invoke("export_attempts", serde_json::json!({ "format": format }))
            .await;
        assert!(out["ok"].is_string(), "{out}");
    }
    // Assert
    let mut found = vec![(data.display().to_string(), 0, true)];
    found[0].1 = std::fs::metadata(&data).unwrap().permissions().mode() & 0o777;
    walk(&data, &mut found);
    let names: Vec<&str> = found.iter().map(|(p, _, _)| p.as_str()).collect();
    for want in [
        "outbox.db",
        "outbox.db-wal",
        "outbox.db.lock",
        "pagar-api.db",
        "adquirente.db",
        "exports",
    ] {
        assert!(
            names.iter().any(|n| n.ends_with(want)),
            "{want} in {names:?}"
        );
    }
    let open: Vec<_> = found
        .iter()
        .filter(|(_, mode, is_dir)| *mode != if *is_dir { 0o700 } else { 0o600 })
        .map(|(p, mode, _)| format!("{p} {mode:o}"))
        .collect();
    assert!(open.is_empty(), "more open than the owner's: {open:?}");
    app.close().await;
}
