//! The QA relay: a SOCKS5 relay on loopback that QA's "Simular offline" can cut.
//!
//! It exists only in QA mode (the embedded sandbox, or `"qa": true`); in production the engine
//! talks to the API directly. checkout-core sends every connection through it as a
//! `socks5h://` proxy, so the URL, the TLS handshake (end to end, with the API's real name) and
//! the DNS lookup per connection are the same as without it. The relay mirrors real failures:
//! when the API cannot be reached it answers the SOCKS request with the matching error (refused,
//! host or network unreachable), which the engine meets as a connect error, exactly as it would
//! directly. Cutting closes the listening socket (new connections are refused by the kernel)
//! and resets every relayed connection; restoring binds the same port again. It connects only
//! to the configured API's host and port (anything else is answered "not allowed"), so it is no
//! open proxy for whatever else runs on the machine.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long the relay tries to reach the API for one connection. Longer than the engine's own
/// connect timeout, so the engine's timeout is the one that fires, as without the relay.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A cuttable SOCKS5 relay on a loopback port.
#[derive(Debug, Clone)]
pub struct QaRelay {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    local: SocketAddr,
    /// The one destination it relays to: the API's host (as the URL names it) and port.
    allowed: Arc<(String, u16)>,
    cut: watch::Sender<bool>,
    acceptor: Mutex<Option<JoinHandle<()>>>,
}

impl QaRelay {
    /// Opens the relay on a free loopback port, for connections to `host`:`port` only.
    pub async fn open(host: &str, port: u16) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let local = listener.local_addr()?;
        let (cut, _) = watch::channel(false);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let relay = Self {
            inner: Arc::new(Inner {
                allowed: Arc::new((host.to_ascii_lowercase(), port)),
                local,
                cut,
                acceptor: Mutex::new(None),
            }),
        };
        relay.serve(listener);
        Ok(relay)
    }

    /// The relay's address (the engine's `socks_relay`).
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    /// True while the path is cut.
    pub fn is_cut(&self) -> bool {
        *self.inner.cut.borrow()
    }

    /// Cuts the path (refuse new connections, reset open ones) or restores it.
    pub async fn set_cut(&self, cut: bool) -> std::io::Result<()> {
        if cut == self.is_cut() {
            return Ok(());
        }
        self.inner.cut.send_replace(cut);
        if cut {
            let acceptor = self.inner.acceptor.lock().expect("acceptor lock").take();
            if let Some(acceptor) = acceptor {
                acceptor.abort();
                let _ = acceptor.await; // the listening socket is closed once the task is gone
            }
        } else {
            let listener = TcpListener::bind(self.inner.local).await?;
            self.serve(listener);
        }
        Ok(())
    }

    fn serve(&self, listener: TcpListener) {
        let inner = self.inner.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let mut cut = inner.cut.subscribe();
                let allowed = inner.allowed.clone();
                tokio::spawn(async move {
                    let Ok(killer) = dup(&client) else { return };
                    tokio::select! {
                        _ = relay(client, &allowed) => {}
                        _ = cut.wait_for(|c| *c) => {
                            // Reset rather than close: a cut cable does not say goodbye.
                            let _ = killer.set_zero_linger();
                        }
                    }
                });
            }
        });
        *self.inner.acceptor.lock().expect("acceptor lock") = Some(task);
    }
}

/// A second handle on the client's socket, so a cut can reset it while the relay owns it.
fn dup(stream: &TcpStream) -> std::io::Result<TcpStream> {
    let std: std::net::TcpStream = socket2::SockRef::from(stream).try_clone()?.into();
    std.set_nonblocking(true)?;
    TcpStream::from_std(std)
}

/// SOCKS5 reply codes (RFC 1928 §6).
const SUCCEEDED: u8 = 0x00;
const GENERAL_FAILURE: u8 = 0x01;
const NOT_ALLOWED: u8 = 0x02;
const NETWORK_UNREACHABLE: u8 = 0x03;
const HOST_UNREACHABLE: u8 = 0x04;
const CONNECTION_REFUSED: u8 = 0x05;
const COMMAND_NOT_SUPPORTED: u8 = 0x07;
const ADDRESS_NOT_SUPPORTED: u8 = 0x08;

/// Serves one SOCKS5 CONNECT (no authentication) to the `allowed` host and port, and relays its
/// bytes.
async fn relay(mut client: TcpStream, allowed: &(String, u16)) -> std::io::Result<()> {
    let mut head = [0u8; 2];
    client.read_exact(&mut head).await?;
    let mut methods = vec![0u8; head[1] as usize];
    client.read_exact(&mut methods).await?;
    if head[0] != 5 || !methods.contains(&0) {
        client.write_all(&[5, 0xff]).await?;
        return Ok(());
    }
    client.write_all(&[5, 0]).await?;
    let mut req = [0u8; 4];
    client.read_exact(&mut req).await?;
    if req[1] != 1 {
        return reply(&mut client, COMMAND_NOT_SUPPORTED).await;
    }
    let host = match req[3] {
        1 => {
            let mut ip = [0u8; 4];
            client.read_exact(&mut ip).await?;
            Ipv4Addr::from(ip).to_string()
        }
        3 => {
            let mut len = [0u8; 1];
            client.read_exact(&mut len).await?;
            let mut name = vec![0u8; len[0] as usize];
            client.read_exact(&mut name).await?;
            String::from_utf8_lossy(&name).into_owned()
        }
        4 => {
            let mut ip = [0u8; 16];
            client.read_exact(&mut ip).await?;
            Ipv6Addr::from(ip).to_string()
        }
        _ => return reply(&mut client, ADDRESS_NOT_SUPPORTED).await,
    };
    let mut port = [0u8; 2];
    client.read_exact(&mut port).await?;
    let port = u16::from_be_bytes(port);
    if (host.to_ascii_lowercase(), port) != *allowed {
        tracing::warn!(%host, port, "QA relay: refused a connection to something other than the API");
        return reply(&mut client, NOT_ALLOWED).await;
    }
    // Resolved here, for every connection, as the engine itself would without the relay.
    let connected = tokio::time::timeout(
        UPSTREAM_CONNECT_TIMEOUT,
        TcpStream::connect((host.as_str(), port)),
    )
    .await;
    let mut server = match connected {
        Ok(Ok(server)) => server,
        Ok(Err(e)) => {
            let code = match e.kind() {
                ErrorKind::ConnectionRefused => CONNECTION_REFUSED,
                ErrorKind::NetworkUnreachable => NETWORK_UNREACHABLE,
                ErrorKind::HostUnreachable => HOST_UNREACHABLE,
                // A name that does not resolve: the host cannot be reached.
                _ if e.to_string().contains("lookup") => HOST_UNREACHABLE,
                _ => GENERAL_FAILURE,
            };
            return reply(&mut client, code).await;
        }
        Err(_) => return reply(&mut client, HOST_UNREACHABLE).await,
    };
    reply(&mut client, SUCCEEDED).await?;
    tokio::io::copy_bidirectional(&mut client, &mut server).await?;
    Ok(())
}

async fn reply(client: &mut TcpStream, code: u8) -> std::io::Result<()> {
    client.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0]).await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    /// A SOCKS5 CONNECT to `target` by name through `relay`; returns the reply code and, when it
    /// succeeded, the echoed bytes.
    async fn through(relay: SocketAddr, host: &str, port: u16) -> std::io::Result<(u8, Vec<u8>)> {
        let mut s = TcpStream::connect(relay).await?;
        s.write_all(&[5, 1, 0]).await?;
        let mut choice = [0u8; 2];
        s.read_exact(&mut choice).await?;
        let mut req = vec![5, 1, 0, 3, host.len() as u8];
        req.extend_from_slice(host.as_bytes());
        req.extend_from_slice(&port.to_be_bytes());
        s.write_all(&req).await?;
        let mut rep = [0u8; 10];
        s.read_exact(&mut rep).await?;
        if rep[1] != SUCCEEDED {
            return Ok((rep[1], Vec::new()));
        }
        s.write_all(b"oi").await?;
        let mut buf = [0u8; 2];
        s.read_exact(&mut buf).await?;
        Ok((rep[1], buf.to_vec()))
    }

    #[tokio::test]
    async fn the_relay_forwards_by_name_and_mirrors_a_refused_api() {
        let echo = echo_server().await;
        let relay = QaRelay::open("LocalHost", echo.port()).await.unwrap();
        let (code, bytes) = through(relay.local_addr(), "localhost", echo.port())
            .await
            .unwrap();
        assert_eq!((code, bytes.as_slice()), (SUCCEEDED, &b"oi"[..]));
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let relay = QaRelay::open("127.0.0.1", port).await.unwrap();
        let (code, _) = through(relay.local_addr(), "127.0.0.1", port)
            .await
            .unwrap();
        assert_eq!(
            code, CONNECTION_REFUSED,
            "a refused API is refused through the relay too"
        );
    }

    #[tokio::test]
    async fn a_cut_relay_refuses_connections_and_a_restored_one_relays_again() {
        let echo = echo_server().await;
        let relay = QaRelay::open("127.0.0.1", echo.port()).await.unwrap();
        relay.set_cut(true).await.unwrap();
        let refused = TcpStream::connect(relay.local_addr()).await.unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);
        relay.set_cut(false).await.unwrap();
        let (code, bytes) = through(relay.local_addr(), "127.0.0.1", echo.port())
            .await
            .unwrap();
        assert_eq!((code, bytes.as_slice()), (SUCCEEDED, &b"oi"[..]));
    }

    #[tokio::test]
    async fn the_relay_connects_only_to_the_api_it_was_opened_for() {
        let api = echo_server().await;
        let other = echo_server().await;
        let relay = QaRelay::open("127.0.0.1", api.port()).await.unwrap();
        for (host, port) in [("127.0.0.1", other.port()), ("localhost", api.port())] {
            let (code, _) = through(relay.local_addr(), host, port).await.unwrap();
            assert_eq!(code, NOT_ALLOWED, "{host}:{port}");
        }
        let (code, _) = through(relay.local_addr(), "127.0.0.1", api.port())
            .await
            .unwrap();
        assert_eq!(code, SUCCEEDED);
    }
}
