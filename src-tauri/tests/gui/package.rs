//! The installable app: the `.deb` that `make package` builds, extracted as `dpkg` would
//! install it, started under Xvfb on its embedded default, paying once through WebDriver.
//! Run by `make package-test` (it needs a `.deb`: by default one built from the dev profile).

use crate::harness::*;
use std::path::PathBuf;
use std::process::Command;

#[tokio::test]
#[ignore = "needs the .deb from `make package`; `make package-test` runs it"]
async fn the_packaged_app_from_its_deb_pays_once() {
    let deb = PathBuf::from(
        std::env::var("PAGAR_PACKAGED_DEB").expect("PAGAR_PACKAGED_DEB names the .deb"),
    );
    let root = tempfile::tempdir().unwrap();
    let status = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(root.path())
        .status()
        .unwrap();
    assert!(status.success(), "dpkg-deb -x {}", deb.display());
    let info = Command::new("dpkg-deb")
        .arg("-f")
        .arg(&deb)
        .output()
        .unwrap();
    let control = String::from_utf8_lossy(&info.stdout);
    assert!(control.contains("Package: pagar"), "{control}");
    assert!(
        control.contains("libwebkit2gtk-4.1-0"),
        "it depends on its webview: {control}"
    );

    let binary = root.path().join("usr/bin/pagar");
    assert!(binary.is_file(), "the .deb installs /usr/bin/pagar");
    let desktop = std::fs::read_to_string(root.path().join("usr/share/applications/Pagar.desktop"))
        .expect("a desktop entry");
    for want in ["Name=Pagar", "Exec=pagar", "Icon=pagar"] {
        assert!(desktop.contains(want), "{want} in {desktop}");
    }
    let icons = root.path().join("usr/share/icons/hicolor");
    assert!(
        walk(&icons).iter().any(|p| p.ends_with("apps/pagar.png")),
        "the app icon is installed"
    );

    let data = tempfile::tempdir().unwrap();
    let binary = binary.display().to_string();
    let app = GuiApp::launch_with(data.path(), &[("APP_BINARY", &binary)]).await;
    // The day, with the keyboard alone: amount and Enter, the receipt (F4), the closing (F9).
    app.count_prints().await;
    assert_eq!(app.focused().await, "valor");
    app.press(&format!("12,34{ENTER}")).await;
    app.wait_status("Pagamento aprovado").await;
    assert_eq!(
        app.ledger_rows(),
        1,
        "one charge in the packaged app's sandbox ledger"
    );
    app.screenshot("pacote-aprovado").await;
    app.press(F4).await;
    app.wait_until("the receipt", |a| async move {
        !a.hidden("receipt-dialog").await
    })
    .await;
    assert_eq!(app.prints().await, 1, "the print was asked for");
    app.press(&format!("{ESC}{F9}")).await;
    app.wait_verdict("Tudo confere").await;
    assert!(!app.hidden("closing-dialog").await);
    // Let the webview paint the dialog before the X server's pixels are read.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    app.screenshot("pacote-fechamento").await;
    app.close().await;
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
