//! Where the merchant's API key and the admin token live: the desktop's secret store (the
//! Secret Service on Linux: GNOME Keyring, KWallet) when the configuration asks for it, or
//! `config.json` (readable by its owner alone) when it does not or when no secret store runs.

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

fn entry(secret: Secret) -> Result<keyring::Entry, String> {
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

/// Reads a secret from the store: `Ok(None)` when it holds none.
pub fn get(secret: Secret) -> Result<Option<String>, String> {
    match entry(secret)?.get_password() {
        Ok(v) => Ok(Some(v)),
        Err(keyring::Error::NoEntry) => Ok(None),
        Err(e) => Err(describe(e)),
    }
}

/// Stores a secret.
pub fn set(secret: Secret, value: &str) -> Result<(), String> {
    entry(secret)?.set_password(value).map_err(describe)
}
