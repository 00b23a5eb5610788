//! Mutual TLS for a simulator that plays a provider which asks for the merchant's client
//! certificate (the API Pix's PSPs): its server certificate and the CA that signs the clients'
//! certificates, made once in a folder of its own (as a PSP's portal issues the merchant a
//! certificate), and a listener that completes the TLS handshake — refusing a client with no
//! certificate, or one its CA did not sign — before the router sees a request.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// The files of a simulator's mutual TLS, in its folder.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The CA (PEM) that signed the server's certificate and the client's: what a client trusts,
    /// and what the server accepts client certificates from.
    pub ca: PathBuf,
    /// The server's certificate chain (PEM).
    pub server_cert: PathBuf,
    /// The server's private key (PEM).
    pub server_key: PathBuf,
    /// The merchant's client certificate and its private key, in one PEM file (what the
    /// provider's client presents).
    pub client: PathBuf,
}

impl TlsFiles {
    /// The files in `dir`, made there (the folder `0700`, each file `0600`) when missing: a CA,
    /// a server certificate for `localhost` and `127.0.0.1`, and a client certificate for
    /// `client_name`.
    pub fn ensure(dir: &Path, client_name: &str) -> std::io::Result<Self> {
        let files = Self {
            ca: dir.join("ca.pem"),
            server_cert: dir.join("servidor.pem"),
            server_key: dir.join("servidor.key"),
            client: dir.join("cliente.pem"),
        };
        // Made before and whole: kept. Missing or unreadable (a power cut while they were
        // written, a file removed): made again, all four, so they fit together.
        let all = [
            &files.ca,
            &files.server_cert,
            &files.server_key,
            &files.client,
        ];
        if all.iter().all(|p| p.exists()) && files.server_config().is_ok() && files.client_whole() {
            return Ok(files);
        }
        std::fs::create_dir_all(dir)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let bad = |e: rcgen::Error| std::io::Error::other(e.to_string());
        let ca_key = rcgen::KeyPair::generate().map_err(bad)?;
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(bad)?;
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Pagar simulator CA");
        let ca = ca_params.self_signed(&ca_key).map_err(bad)?;
        let server_key = rcgen::KeyPair::generate().map_err(bad)?;
        let server = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .map_err(bad)?
            .signed_by(&server_key, &ca, &ca_key)
            .map_err(bad)?;
        let client_key = rcgen::KeyPair::generate().map_err(bad)?;
        let mut client_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(bad)?;
        client_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, client_name);
        client_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let client = client_params
            .signed_by(&client_key, &ca, &ca_key)
            .map_err(bad)?;
        write_secret(&files.ca, &ca.pem())?;
        write_secret(&files.server_cert, &server.pem())?;
        write_secret(&files.server_key, &server_key.serialize_pem())?;
        write_secret(
            &files.client,
            &format!("{}{}", client.pem(), client_key.serialize_pem()),
        )?;
        Ok(files)
    }

    /// True when the client's file holds a certificate and its key.
    fn client_whole(&self) -> bool {
        let certs = CertificateDer::pem_file_iter(&self.client)
            .map(|certs| certs.filter_map(Result::ok).count())
            .unwrap_or(0);
        certs > 0 && PrivateKeyDer::from_pem_file(&self.client).is_ok()
    }

    /// A server configuration that asks every client for a certificate signed by the CA.
    pub fn server_config(&self) -> std::io::Result<Arc<ServerConfig>> {
        let invalid = |e: &dyn std::fmt::Display| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_file_iter(&self.ca).map_err(|e| invalid(&e))? {
            roots
                .add(ca.map_err(|e| invalid(&e))?)
                .map_err(|e| invalid(&e))?;
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| invalid(&e))?;
        let chain = CertificateDer::pem_file_iter(&self.server_cert)
            .map_err(|e| invalid(&e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(&e))?;
        let key = PrivateKeyDer::from_pem_file(&self.server_key).map_err(|e| invalid(&e))?;
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(&e))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|e| invalid(&e))?;
        Ok(Arc::new(config))
    }
}

/// Writes a file `0600`, whole or not at all (a reader waiting for it never sees half, and it is
/// on disk before its name is).
fn write_secret(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let partial = path.with_extension("parcial");
    crate::own_file(&partial)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&partial)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&partial, path)
}

/// A listener whose connections are TLS ones whose handshake completed (a client without an
/// accepted certificate never reaches the router; its handshake's failure is logged).
pub(crate) struct TlsListener {
    pub(crate) tcp: TcpListener,
    pub(crate) acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (tcp, addr) = match self.tcp.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let handshake = tokio::time::timeout(Duration::from_secs(5), self.acceptor.accept(tcp));
            match handshake.await {
                Ok(Ok(tls)) => return (tls, addr),
                Ok(Err(e)) => tracing::info!(%addr, error = %e, "TLS handshake refused"),
                Err(_) => tracing::info!(%addr, "TLS handshake timed out"),
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_are_made_once_kept_and_made_again_when_one_is_broken() {
        let dir = tempfile::tempdir().unwrap();
        let tls = dir.path().join("tls");
        let made = TlsFiles::ensure(&tls, "loja").unwrap();
        let ca = std::fs::read(&made.ca).unwrap();
        made.server_config().unwrap();
        // Kept as they are.
        TlsFiles::ensure(&tls, "loja").unwrap();
        assert_eq!(std::fs::read(&made.ca).unwrap(), ca);
        // A client file cut short, then a key left empty (a power cut): all made again, and
        // they fit.
        std::fs::write(&made.client, "-----BEGIN CERTIFICATE-----\n").unwrap();
        let again = TlsFiles::ensure(&tls, "loja").unwrap();
        assert!(again.client_whole());
        let ca = std::fs::read(&again.ca).unwrap();
        std::fs::write(&made.server_key, "").unwrap();
        let again = TlsFiles::ensure(&tls, "loja").unwrap();
        assert_ne!(std::fs::read(&again.ca).unwrap(), ca);
        again.server_config().unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for f in [
                &again.ca,
                &again.server_cert,
                &again.server_key,
                &again.client,
            ] {
                let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{}", f.display());
            }
        }
    }
}
