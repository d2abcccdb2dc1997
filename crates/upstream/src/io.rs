//! An upstream HTTP connection as hyper sees it: a TCP stream, plain or
//! inside TLS, or a pipe of the memory network, with the use count that
//! tells a reused connection from a fresh one.

use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A connection's byte stream.
pub(crate) enum Stream {
    /// `http://`.
    Plain(TcpStream),
    /// `https://`.
    Tls(Box<TlsStream<TcpStream>>),
    /// `http://` over the memory network (tests; see [`crate::Network`]).
    Memory(DuplexStream),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
            Stream::Memory(stream) => Pin::new(stream).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
            Stream::Memory(stream) => Pin::new(stream).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_flush(cx),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
            Stream::Memory(stream) => Pin::new(stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
            Stream::Memory(stream) => Pin::new(stream).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_write_vectored(cx, bufs),
            Stream::Memory(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(stream) => stream.is_write_vectored(),
            Stream::Tls(stream) => stream.is_write_vectored(),
            Stream::Memory(stream) => stream.is_write_vectored(),
        }
    }
}

/// How many answer heads a pooled connection has carried. hyper-util hands
/// it to every request on the connection (as a connection "extra"), so a
/// request that fails can tell a reused connection, which the upstream may
/// have closed while it sat idle, from a fresh one, which failing says
/// something about the upstream.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConnectionUses(Arc<AtomicU32>);

impl ConnectionUses {
    pub(crate) fn answered(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn reused(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }
}

/// An upstream HTTP connection: the stream and its use count.
pub(crate) struct UpstreamIo {
    io: TokioIo<Stream>,
    uses: ConnectionUses,
    peer: Peer,
}

/// What the requests on a connection are addressed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    /// The upstream itself: requests name a path.
    Origin,
    /// A forward proxy that passes them on: requests carry absolute URIs.
    ForwardProxy,
}

impl UpstreamIo {
    pub(crate) fn new(stream: Stream, peer: Peer) -> Self {
        UpstreamIo { io: TokioIo::new(stream), uses: ConnectionUses::default(), peer }
    }
}

impl Connection for UpstreamIo {
    fn connected(&self) -> Connected {
        Connected::new().extra(self.uses.clone()).proxy(self.peer == Peer::ForwardProxy)
    }
}

impl hyper::rt::Read for UpstreamIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for UpstreamIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}
