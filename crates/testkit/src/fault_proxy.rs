//! A TCP proxy between a client and the payment API that fails the ways a real network does.
//!
//! The fault is chosen per connection when it is accepted; changing the fault resets every
//! connection still open (as a network change would), so a client's pooled keep-alive
//! connection cannot slip past a new fault.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How the proxy treats the connections it accepts from now on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward everything both ways.
    Pass,
    /// Nothing listens at the address: the kernel refuses every connection.
    Refuse,
    /// Accept the connection, then close it at once without reading a byte.
    AcceptClose,
    /// Accept and read the request, never answer (the connection hangs until the fault changes).
    Swallow,
    /// Forward the request; the moment the server starts answering, cut both sides. The server
    /// has done its work; the client hears nothing.
    CutAfterAnswer,
    /// Answer the next `POST` itself with this status and a problem+json body, without
    /// forwarding it (a middlebox, or a key rotated under the client); everything else, and every
    /// later `POST`, passes. Until that `POST` comes, each connection carries one request.
    RejectNextPost(u16),
    /// Forward the next `POST` and cut both sides the moment its answer starts (the server did
    /// its work, the client hears nothing); everything else, and every later `POST`, passes.
    /// Until that `POST` comes, each connection carries one request.
    CutNextPostAnswer,
    /// Forward everything, each chunk held this many milliseconds (a slow link).
    Delay(u64),
    /// Forward everything eight bytes at a time with a pause between (a starved link).
    Starved,
}

/// A running proxy on a loopback port that stays the same across faults.
#[derive(Debug, Clone)]
pub struct FaultProxy {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    addr: SocketAddr,
    /// Where connections go, round robin (several replicas behind one address).
    upstreams: Vec<SocketAddr>,
    next: AtomicU64,
    /// The fault in force and its generation; connections from an older generation are reset.
    fault: watch::Sender<(u64, Fault)>,
    /// The next `POST` is the one [`Fault::RejectNextPost`] or [`Fault::CutNextPostAnswer`]
    /// acts on.
    next_post_armed: AtomicBool,
    acceptor: Mutex<Option<JoinHandle<()>>>,
    accepted: AtomicU64,
    forwarded_posts: AtomicU64,
}

impl FaultProxy {
    /// Starts a proxy in front of `upstream`, passing everything.
    pub async fn start(upstream: SocketAddr) -> Self {
        Self::balancing(vec![upstream]).await
    }

    /// Starts a proxy that spreads connections over `upstreams` round robin (a load balancer in
    /// front of replicas), passing everything.
    pub async fn balancing(upstreams: Vec<SocketAddr>) -> Self {
        Self::balancing_on("127.0.0.1:0".parse().expect("an address"), upstreams).await
    }

    /// [`FaultProxy::balancing`] on a chosen address (a port outside the ephemeral range cannot
    /// be taken by an outgoing connection while the proxy refuses).
    pub async fn balancing_on(listen: SocketAddr, upstreams: Vec<SocketAddr>) -> Self {
        Self::try_balancing_on(listen, upstreams)
            .await
            .expect("a loopback port")
    }

    /// [`FaultProxy::balancing_on`], with a port that cannot be bound as an error.
    pub async fn try_balancing_on(
        listen: SocketAddr,
        upstreams: Vec<SocketAddr>,
    ) -> std::io::Result<Self> {
        assert!(!upstreams.is_empty(), "at least one upstream");
        let listener = TcpListener::bind(listen).await?;
        let (fault, _) = watch::channel((0, Fault::Pass));
        let proxy = Self {
            inner: Arc::new(Inner {
                addr: listener.local_addr().expect("bound"),
                upstreams,
                next: AtomicU64::new(0),
                fault,
                next_post_armed: AtomicBool::new(false),
                acceptor: Mutex::new(None),
                accepted: AtomicU64::new(0),
                forwarded_posts: AtomicU64::new(0),
            }),
        };
        proxy.serve(listener);
        Ok(proxy)
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.inner.addr)
    }

    /// The fault in force.
    pub fn fault(&self) -> Fault {
        self.inner.fault.borrow().1
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.inner.accepted.load(Ordering::SeqCst)
    }

    /// `POST` requests seen and forwarded under [`Fault::RejectNextPost`] and after it.
    pub fn forwarded_posts(&self) -> u64 {
        self.inner.forwarded_posts.load(Ordering::SeqCst)
    }

    /// Switches the fault; every connection still open is reset.
    pub async fn set(&self, fault: Fault) {
        let before = self.fault();
        self.inner.next_post_armed.store(
            matches!(fault, Fault::RejectNextPost(_) | Fault::CutNextPostAnswer),
            Ordering::SeqCst,
        );
        self.inner.fault.send_modify(|(generation, f)| {
            *generation += 1;
            *f = fault;
        });
        match (before == Fault::Refuse, fault == Fault::Refuse) {
            (false, true) => {
                let acceptor = self.inner.acceptor.lock().expect("acceptor lock").take();
                if let Some(acceptor) = acceptor {
                    acceptor.abort();
                    let _ = acceptor.await; // the listening socket closes with the task
                }
            }
            (true, false) => {
                // The port was ours a moment ago; a few tries cover a slow release.
                let mut listener = None;
                for _ in 0..50 {
                    match TcpListener::bind(self.inner.addr).await {
                        Ok(l) => {
                            listener = Some(l);
                            break;
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                }
                self.serve(listener.expect("the proxy's port can be bound again"));
            }
            _ => {}
        }
    }

    fn serve(&self, listener: TcpListener) {
        let inner = self.inner.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                inner.accepted.fetch_add(1, Ordering::SeqCst);
                let (generation, fault) = *inner.fault.borrow();
                let mut changes = inner.fault.subscribe();
                let inner = inner.clone();
                tokio::spawn(async move {
                    // A second handle on the socket, so a fault change can reset it while the
                    // handler owns the stream.
                    let Ok(killer) = dup(&client) else { return };
                    tokio::select! {
                        _ = handle(&inner, client, fault) => {}
                        _ = changes.wait_for(|(g, _)| *g != generation) => {
                            let _ = killer.set_zero_linger();
                        }
                    }
                });
            }
        });
        *self.inner.acceptor.lock().expect("acceptor lock") = Some(task);
    }
}

fn dup(stream: &TcpStream) -> std::io::Result<TcpStream> {
    let fd = socket2::SockRef::from(stream).try_clone()?;
    let std: std::net::TcpStream = fd.into();
    std.set_nonblocking(true)?;
    TcpStream::from_std(std)
}

async fn handle(inner: &Inner, client: TcpStream, fault: Fault) {
    match fault {
        Fault::Pass => relay(inner, client, Vec::new(), false).await,
        Fault::Delay(ms) => slow_relay(inner, client, 64 * 1024, Duration::from_millis(ms)).await,
        Fault::Starved => slow_relay(inner, client, 8, Duration::from_millis(5)).await,
        Fault::Refuse => {} // accepted in the instant before the listener closed: drop it
        Fault::AcceptClose => drop(client),
        Fault::Swallow => {
            let mut client = client;
            let mut buf = [0u8; 4096];
            while let Ok(n) = client.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
        }
        Fault::CutAfterAnswer => relay(inner, client, Vec::new(), true).await,
        Fault::RejectNextPost(status) => {
            let mut client = client;
            let Ok(head) = read_head(&mut client).await else {
                return;
            };
            let is_post = head.starts_with(b"POST ");
            if is_post && inner.next_post_armed.swap(false, Ordering::SeqCst) {
                let body = format!(
                    r#"{{"type":"urn:pagar:problem:proxy","title":"recusado no caminho","status":{status},"detail":"a middlebox answered {status}","retryable":false}}"#
                );
                let answer = format!(
                    "HTTP/1.1 {status} Recusado\r\nContent-Type: application/problem+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = client.write_all(answer.as_bytes()).await;
                let _ = client.shutdown().await;
                // Drain what the client still sends so the close is clean, not a reset.
                let mut sink = [0u8; 1024];
                let _ = tokio::time::timeout(Duration::from_secs(1), async {
                    while matches!(client.read(&mut sink).await, Ok(n) if n > 0) {}
                })
                .await;
            } else {
                relay_one(inner, client, head).await;
            }
        }
        Fault::CutNextPostAnswer => {
            let mut client = client;
            let Ok(head) = read_head(&mut client).await else {
                return;
            };
            if head.starts_with(b"POST ") && inner.next_post_armed.swap(false, Ordering::SeqCst) {
                relay(inner, client, close_after(head), true).await;
            } else {
                relay_one(inner, client, head).await;
            }
        }
    }
}

/// Forwards a connection whose first request's head was read: while the next `POST` is still
/// awaited, each connection carries one request (a later `POST` cannot ride on a kept-alive
/// connection that began with a `GET` and slip past); after it, everything passes.
async fn relay_one(inner: &Inner, client: TcpStream, head: Vec<u8>) {
    if inner.next_post_armed.load(Ordering::SeqCst) {
        relay(inner, client, close_after(head), false).await;
    } else {
        relay(inner, client, head, false).await;
    }
}

/// The request head with `Connection: close` added after its request line, so the server ends
/// the connection after answering it.
fn close_after(head: Vec<u8>) -> Vec<u8> {
    match head.windows(2).position(|w| w == b"\r\n") {
        Some(end) => {
            let mut out = head[..end + 2].to_vec();
            out.extend_from_slice(b"Connection: close\r\n");
            out.extend_from_slice(&head[end + 2..]);
            out
        }
        None => head,
    }
}

/// Reads until the end of the first request's head (or 16 KiB).
async fn read_head(client: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        let n = client.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(head)
}

impl Inner {
    fn upstream(&self) -> SocketAddr {
        let n = self.next.fetch_add(1, Ordering::SeqCst) as usize;
        self.upstreams[n % self.upstreams.len()]
    }
}

/// Forwards both ways in chunks of at most `chunk` bytes, each held `pause` first.
async fn slow_relay(inner: &Inner, client: TcpStream, chunk: usize, pause: Duration) {
    let Ok(server) = TcpStream::connect(inner.upstream()).await else {
        let _ = client.set_zero_linger();
        return;
    };
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    tokio::join!(pump(cr, sw, chunk, pause), pump(sr, cw, chunk, pause));
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    chunk: usize,
    pause: Duration,
) {
    let mut buf = vec![0u8; chunk];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 {
            break;
        }
        tokio::time::sleep(pause).await;
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// Forwards `client` to the upstream, `prefix` first. With `cut`, both sides are dropped (the
/// client's with a reset) as soon as the server sends its first byte.
async fn relay(inner: &Inner, client: TcpStream, prefix: Vec<u8>, cut: bool) {
    let Ok(mut server) = TcpStream::connect(inner.upstream()).await else {
        let _ = client.set_zero_linger(); // the API is down: the client sees a reset
        return;
    };
    if prefix.starts_with(b"POST ") {
        inner.forwarded_posts.fetch_add(1, Ordering::SeqCst);
    }
    if server.write_all(&prefix).await.is_err() {
        return;
    }
    let mut client = client;
    if !cut {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        return;
    }
    {
        let (mut cr, _) = client.split();
        let (mut sr, mut sw) = server.split();
        let forward = async {
            let _ = tokio::io::copy(&mut cr, &mut sw).await;
            std::future::pending::<()>().await
        };
        let mut first = [0u8; 1];
        tokio::select! {
            _ = forward => {}
            _ = sr.read(&mut first) => {} // the answer starts (or the server closed): cut here
        }
    }
    let _ = client.set_zero_linger(); // a cut cable does not say goodbye
}
