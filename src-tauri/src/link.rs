//! The app's network path to the payment API, as a loopback TCP relay that QA can cut.
//!
//! checkout-core talks to the relay's address; the relay forwards every connection to the API.
//! "Simulate offline" closes the listening socket and every relayed connection, so the engine
//! meets real connection errors — not a flag it could peek at — and the relay rebinds the same
//! port when the path is restored.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A cuttable relay from a loopback port to `upstream`.
#[derive(Debug, Clone)]
pub struct Link {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    local: SocketAddr,
    upstream: SocketAddr,
    cut: watch::Sender<bool>,
    acceptor: Mutex<Option<JoinHandle<()>>>,
}

impl Link {
    /// Opens the relay on a free loopback port.
    pub async fn open(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let local = listener.local_addr()?;
        let (cut, _) = watch::channel(false);
        let link = Self {
            inner: Arc::new(Inner {
                local,
                upstream,
                cut,
                acceptor: Mutex::new(None),
            }),
        };
        link.serve(listener);
        Ok(link)
    }

    /// The address clients should use.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    /// True while the path is cut.
    pub fn is_cut(&self) -> bool {
        *self.inner.cut.borrow()
    }

    /// Cuts the path (refuse new connections, drop open ones) or restores it.
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
                let (upstream, mut cut) = (inner.upstream, inner.cut.subscribe());
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(upstream).await else {
                        return; // the API itself is down: the client sees the connection close
                    };
                    let mut client = client;
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.wait_for(|c| *c) => {
                            // Reset rather than close: a cut cable does not say goodbye.
                            let _ = client.set_zero_linger();
                        }
                    }
                });
            }
        });
        *self.inner.acceptor.lock().expect("acceptor lock") = Some(task);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

    async fn round_trip(addr: SocketAddr) -> std::io::Result<Vec<u8>> {
        let mut s = TcpStream::connect(addr).await?;
        s.write_all(b"oi").await?;
        let mut buf = [0u8; 2];
        s.read_exact(&mut buf).await?;
        Ok(buf.to_vec())
    }

    #[tokio::test]
    async fn a_cut_link_refuses_connections_and_a_restored_one_relays_again() {
        let link = Link::open(echo_server().await).await.unwrap();
        assert_eq!(round_trip(link.local_addr()).await.unwrap(), b"oi");
        link.set_cut(true).await.unwrap();
        let refused = TcpStream::connect(link.local_addr()).await.unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        link.set_cut(false).await.unwrap();
        assert_eq!(round_trip(link.local_addr()).await.unwrap(), b"oi");
    }
}
