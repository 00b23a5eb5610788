//! A TCP listener whose connections a handler can cut: the means behind the "drop the response
//! after commit" and "reset before reading the body" faults. A request finds its connection's
//! [`ConnHandle`] in its extensions (`ConnectInfo<ConnHandle>`).

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

const LIVE: u8 = 0;
const CLOSE: u8 = 1;
const RESET: u8 = 2;

/// Accepts TCP connections that can be cut from inside a request.
#[derive(Debug)]
pub struct CuttableListener(TcpListener);

impl CuttableListener {
    /// Wraps a bound listener.
    pub fn new(inner: TcpListener) -> Self {
        Self(inner)
    }
}

/// A connection that stops writing once cut: the client never receives the response.
#[derive(Debug)]
pub struct CuttableStream {
    inner: TcpStream,
    state: Arc<AtomicU8>,
}

/// Cuts the connection a request arrived on.
#[derive(Debug, Clone)]
pub struct ConnHandle {
    state: Arc<AtomicU8>,
    peer: SocketAddr,
}

impl ConnHandle {
    /// Close the connection without sending a response (the client sees EOF).
    pub fn close(&self) {
        self.state.store(CLOSE, Ordering::SeqCst);
    }

    /// Reset the connection (the client sees ECONNRESET).
    pub fn reset(&self) {
        self.state.store(RESET, Ordering::SeqCst);
    }

    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }
}

impl Listener for CuttableListener {
    type Io = CuttableStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok((inner, addr)) => {
                    let _ = inner.set_nodelay(true);
                    let state = Arc::new(AtomicU8::new(LIVE));
                    return (CuttableStream { inner, state }, addr);
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

impl Connected<IncomingStream<'_, CuttableListener>> for ConnHandle {
    fn connect_info(stream: IncomingStream<'_, CuttableListener>) -> Self {
        Self {
            state: stream.io().state.clone(),
            peer: *stream.remote_addr(),
        }
    }
}

impl CuttableStream {
    fn cut(&self) -> Option<io::Error> {
        match self.state.load(Ordering::SeqCst) {
            LIVE => None,
            RESET => {
                // A zero linger makes the close send RST instead of FIN.
                let _ = self.inner.set_zero_linger();
                Some(io::ErrorKind::ConnectionReset.into())
            }
            _ => Some(io::ErrorKind::ConnectionAborted.into()),
        }
    }
}

impl AsyncRead for CuttableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(e) = self.cut() {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for CuttableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(e) = self.cut() {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(e) = self.cut() {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Some(e) = self.cut() {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
