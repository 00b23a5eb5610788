//! Secrets at rest: with `secret_store: "keyring"` the merchant's API key and the admin token move
//! from `config.json` into the Secret Service (a real gnome-keyring-daemon on a private D-Bus,
//! with a keyring made for the test), and where no secret store runs the app says so and keeps
//! the `0600` file.

use pagar_lib::secrets::{self, Secret};
use pagar_lib::settings::{ApiTarget, Settings};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

const CHILD: &str = "PAGAR_TEST_SECRETS_CHILD";

/// Runs this test again as a child process in `setup` (a shell snippet run first), with a fresh
/// home folder, on a private D-Bus session with no activatable services.
fn in_child(test: &str, setup: &str, extra_env: &[(&str, &str)]) {
    let home = tempfile::tempdir().unwrap();
    let bus_config = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gui/dbus-session.conf");
    let script = format!("{setup} exec \"$0\" \"$1\" --exact --nocapture --test-threads=1");
    let status = Command::new("dbus-run-session")
        .arg(format!("--config-file={}", bus_config.display()))
        .args(["--", "sh", "-c", &script])
        .arg(std::env::current_exe().unwrap())
        .arg(test)
        .env(CHILD, "1")
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env("XDG_RUNTIME_DIR", home.path())
        .env_remove("PAGAR_API_KEY")
        .env_remove("PAGAR_API_URL")
        .env_remove("PAGAR_ADMIN_TOKEN")
        .env_remove("PAGAR_DATA_DIR")
        .env_remove("PAGAR_SECRET_STORE")
        .envs(extra_env.iter().copied())
        .status()
        .expect("dbus-run-session runs (make test installs it)");
    assert!(status.success(), "the child test failed: {status}");
}

fn config_with_secrets(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("config.json");
    std::fs::write(
        &path,
        r#"{"api_url": "http://127.0.0.1:9", "api_key": "sk_segredo_da_loja", "admin_token": "adm_segredo", "secret_store": "keyring"}"#,
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    path
}

fn key_of(settings: &Settings) -> &str {
    match &settings.api {
        ApiTarget::External { key, .. } => key,
        ApiTarget::Embedded => panic!("an external API was configured"),
    }
}

#[test]
fn the_api_key_moves_into_the_secret_service_and_config_json_keeps_no_secret() {
    if std::env::var_os(CHILD).is_none() {
        in_child(
            "the_api_key_moves_into_the_secret_service_and_config_json_keeps_no_secret",
            "printf senha-de-teste | gnome-keyring-daemon --unlock --components=secrets >/dev/null &&",
            &[],
        );
        return;
    }
    // Arrange: a config.json holding the secrets, world-readable.
    let dir = tempfile::tempdir().unwrap();
    let path = config_with_secrets(dir.path());
    // Act
    let settings = Settings::resolve(dir.path().to_path_buf()).unwrap();
    // Assert: the app has the key, the store holds it, the file does not.
    assert_eq!(key_of(&settings), "sk_segredo_da_loja");
    assert_eq!(settings.secrets_from, "keyring");
    assert!(settings.notices.is_empty(), "{:?}", settings.notices);
    assert_eq!(
        secrets::get(Secret::ApiKey).unwrap().as_deref(),
        Some("sk_segredo_da_loja")
    );
    assert_eq!(
        secrets::get(Secret::AdminToken).unwrap().as_deref(),
        Some("adm_segredo")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        !text.contains("segredo"),
        "config.json still has a secret: {text}"
    );
    assert!(
        text.contains("http://127.0.0.1:9"),
        "the rest is kept: {text}"
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // The next start reads them from the store.
    let again = Settings::resolve(dir.path().to_path_buf()).unwrap();
    assert_eq!(key_of(&again), "sk_segredo_da_loja");
}

#[test]
fn with_no_secret_store_running_the_app_says_so_and_keeps_the_private_file() {
    if std::env::var_os(CHILD).is_none() {
        // A session bus with nothing on it: no Secret Service answers.
        in_child(
            "with_no_secret_store_running_the_app_says_so_and_keeps_the_private_file",
            "",
            &[],
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = config_with_secrets(dir.path());
    let settings = Settings::resolve(dir.path().to_path_buf()).unwrap();
    assert_eq!(key_of(&settings), "sk_segredo_da_loja");
    assert_eq!(settings.secrets_from, "config.json");
    assert_eq!(settings.notices.len(), 1, "{:?}", settings.notices);
    assert!(
        settings.notices[0].contains("config.json"),
        "{:?}",
        settings.notices
    );
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .contains("sk_segredo_da_loja"));
}
