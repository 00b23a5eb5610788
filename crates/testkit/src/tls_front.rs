//! A TLS endpoint in front of a plain-HTTP API, with a certificate authority made in the test.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

/// `https://localhost:<port>` terminating TLS and forwarding to an upstream in plain HTTP. The
/// server certificate is for `localhost` and `127.0.0.1`, signed by a CA that exists only in
/// this test; its PEM is at [`TlsFront::ca_pem`] for the client to trust.
pub struct TlsFront {
    addr: SocketAddr,
    ca_pem: PathBuf,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl TlsFront {
    /// Makes the CA and the certificate and starts listening.
    pub async fn start(upstream: SocketAddr) -> Self {
        let ca_key = rcgen::KeyPair::generate().expect("a key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Pagar test CA");
        let ca = ca_params.self_signed(&ca_key).expect("a CA");
        let leaf_key = rcgen::KeyPair::generate().expect("a key");
        let leaf = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .expect("params")
            .signed_by(&leaf_key, &ca, &ca_key)
            .expect("a certificate");
        let dir = tempfile::tempdir().expect("a temporary folder");
        let ca_pem = dir.path().join("ca.pem");
        std::fs::write(&ca_pem, ca.pem()).expect("the CA is written");

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone(), ca.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
            )
            .expect("a server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let addr = listener.local_addr().expect("bound");
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(client).await else {
                        return;
                    };
                    let Ok(mut server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut server).await;
                });
            }
        });
        Self {
            addr,
            ca_pem,
            task,
            _dir: dir,
        }
    }

    /// `https://localhost:<port>`.
    pub fn url(&self) -> String {
        format!("https://localhost:{}", self.addr.port())
    }

    /// The test CA's certificate (PEM).
    pub fn ca_pem(&self) -> &Path {
        &self.ca_pem
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}
