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

/// Starts an unlocked keyring on the child's bus and waits (at most 5 s) until its Secret Service
/// answers there, so a busy machine's slow daemon start is not read as "no secret store".
const KEYRING: &str = "printf senha-de-teste | gnome-keyring-daemon --unlock --components=secrets >/dev/null && \
    for i in $(seq 1 100); do dbus-send --session --print-reply --dest=org.freedesktop.DBus \
    /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null \
    | grep -q 'boolean true' && break; sleep 0.05; done;";

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
            KEYRING,
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
    assert_eq!(settings.secrets_from, "keyring", "{:?}", settings.notices);
    assert!(settings.notices.is_empty(), "{:?}", settings.notices);
    assert_eq!(
        secrets::get(dir.path(), Secret::ApiKey).unwrap().as_deref(),
        Some("sk_segredo_da_loja")
    );
    assert_eq!(
        secrets::get(dir.path(), Secret::AdminToken)
            .unwrap()
            .as_deref(),
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

#[test]
fn two_data_folders_keep_their_own_keys_in_the_secret_service() {
    if std::env::var_os(CHILD).is_none() {
        in_child(
            "two_data_folders_keep_their_own_keys_in_the_secret_service",
            KEYRING,
            &[],
        );
        return;
    }
    // Arrange: a production folder and a QA folder, each with its own merchant's key.
    let (producao, qa) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (dir, key) in [(&producao, "sk_loja_producao"), (&qa, "sk_loja_de_testes")] {
        std::fs::write(
            dir.path().join("config.json"),
            format!(r#"{{"api_url": "http://127.0.0.1:9", "api_key": "{key}", "secret_store": "keyring"}}"#),
        )
        .unwrap();
    }
    // Act: both start (and move their keys into the store), then both start again.
    for _ in 0..2 {
        let p = Settings::resolve(producao.path().to_path_buf()).unwrap();
        let q = Settings::resolve(qa.path().to_path_buf()).unwrap();
        // Assert: neither overwrote the other.
        assert_eq!(key_of(&p), "sk_loja_producao");
        assert_eq!(key_of(&q), "sk_loja_de_testes");
        assert_eq!(
            (p.secrets_from, q.secrets_from),
            ("keyring", "keyring"),
            "{:?} {:?}",
            p.notices,
            q.notices
        );
    }
    assert_ne!(
        secrets::account(producao.path(), Secret::ApiKey),
        secrets::account(qa.path(), Secret::ApiKey)
    );
}

#[test]
fn debug_of_the_settings_and_the_admin_client_never_shows_a_secret() {
    let target = ApiTarget::External {
        url: "https://api.loja".into(),
        key: "sk_live_segredo".into(),
        admin_token: Some("adm_segredo".into()),
    };
    let admin =
        pagar_lib::admin::AdminClient::new("https://api.loja", "adm_segredo".into(), None).unwrap();
    let shown = format!("{target:?} {target:#?} {admin:?}");
    assert!(!shown.contains("segredo"), "{shown}");
    assert!(shown.contains("https://api.loja"), "{shown}");
}
