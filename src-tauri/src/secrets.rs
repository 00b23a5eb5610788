//! Where the merchant's API key and the admin token live: the desktop's secret store (the
//! Secret Service on Linux: GNOME Keyring, KWallet) when the configuration asks for it, or
//! `config.json` (readable by its owner alone) when it does not or when no secret store runs.
//!
//! Entries are filed per data folder (the account is `<secret>@<folder>`): a QA folder and the
//! production folder on one desktop keep their own keys, so a till never charges under the
//! merchant of another folder's configuration.

use std::path::Path;

/// The service name the secrets are filed under in the secret store.
pub const SERVICE: &str = "dev.pagar.caixa";

/// The secrets the app keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Secret {
    /// The merchant's API key (it can create charges).
    ApiKey,
    /// The QA admin token.
    AdminToken,
}

impl Secret {
    /// Its name in the store and in `config.json`.
    pub fn name(self) -> &'static str {
        match self {
            Secret::ApiKey => "api_key",
            Secret::AdminToken => "admin_token",
        }
    }
}

/// The account a secret of the data folder `dir` is filed under.
pub fn account(dir: &Path, secret: Secret) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    format!("{}@{}", secret.name(), dir.display())
}

fn entry(dir: &Path, secret: Secret) -> Result<keyring::Entry, String> {
    keyring::Entry::new(SERVICE, &account(dir, secret)).map_err(describe)
}

/// The entry of earlier versions, one for the whole desktop user.
fn legacy_entry(secret: Secret) -> Result<keyring::Entry, String> {
    keyring::Entry::new(SERVICE, secret.name()).map_err(describe)
}

fn describe(e: keyring::Error) -> String {
    match e {
        keyring::Error::PlatformFailure(inner) | keyring::Error::NoStorageAccess(inner) => {
            format!("cofre de senhas do sistema indisponível ({inner})")
        }
        other => format!("cofre de senhas do sistema: {other}"),
    }
}

fn read(entry: &keyring::Entry) -> Result<Option<String>, String> {
    match entry.get_password() {
        Ok(v) => Ok(Some(v)),
        Err(keyring::Error::NoEntry) => Ok(None),
        Err(e) => Err(describe(e)),
    }
}

/// Reads a secret of the data folder `dir` from the store: `Ok(None)` when it holds none.
pub fn get(dir: &Path, secret: Secret) -> Result<Option<String>, String> {
    read(&entry(dir, secret)?)
}

/// Stores a secret of the data folder `dir`.
pub fn set(dir: &Path, secret: Secret, value: &str) -> Result<(), String> {
    entry(dir, secret)?.set_password(value).map_err(describe)
}

/// Moves a secret an earlier version filed for the whole desktop user into the data folder
/// `dir`, and deletes the old entry so that no other folder can read it. True when one moved.
pub fn adopt_legacy(dir: &Path, secret: Secret) -> Result<bool, String> {
    let legacy = legacy_entry(secret)?;
    let Some(value) = read(&legacy)? else {
        return Ok(false);
    };
    if get(dir, secret)?.is_none() {
        set(dir, secret, &value)?;
    }
    match legacy.delete_credential() {
        Ok(()) | Err(keyring::Error::NoEntry) => Ok(true),
        Err(e) => Err(describe(e)),
    }
}
