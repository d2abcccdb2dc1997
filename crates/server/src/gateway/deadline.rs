//! How long a client connection may keep pkgproxy waiting: a request's
//! head must arrive within the header timeout, counted from the
//! connection or from the head's first byte (a client sending half a
//! request line and stopping is let go then, as nginx's
//! `client_header_timeout` does); between requests, a keep-alive
//! connection may idle for the idle timeout. While a request is being
//! answered, neither runs: a long download is never cut.
//!
//! hyper has one timer for both (its header timeout also runs while the
//! connection idles), so the connection's reads go through [`Watched`],
//! which fails the read once the deadline of the phase the connection is
//! in has passed; hyper then closes it.
//!
//! Its writes keep to the send timeout, as nginx's `send_timeout` does: a
//! write the client's socket takes nothing of for that long fails, and the
//! connection with it. The time runs between two writes that make
//! progress, not over the whole answer: a slow client that keeps taking
//! bytes is never cut, and a connection waiting on an upstream writes
//! nothing, so waits on nothing. The timer is armed only once a write
//! has to wait; a write the socket takes at once costs nothing more.

use parking_lot::Mutex;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// Where a connection stands, shared by its reads and its requests.
#[derive(Debug)]
pub struct ConnectionClock {
    header_timeout: Duration,
    idle_timeout: Duration,
    send_timeout: Duration,
    /// Requests read whose answers are not sent yet.
    answering: AtomicU32,
    /// When the phase without a request began, and which it is.
    waiting: Mutex<Waiting>,
    /// Why the connection was let go, once it was.
    expired: Mutex<Option<Expired>>,
    /// Requests answered on the connection so far.
    answered: AtomicU32,
    /// Whether the client asked for the connection to end after its answer.
    closing: std::sync::atomic::AtomicBool,
}

/// What a connection answering no request is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiting {
    /// A request's head, since then (the connection's start, or its first
    /// byte).
    Head(Instant),
    /// The next request of a keep-alive connection, since then.
    Idle(Instant),
}

/// Why a connection was let go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// A request's head did not arrive in time.
    Head,
    /// A keep-alive connection idled too long.
    Idle,
    /// The client took nothing of an answer for the send timeout.
    Send,
}

impl ConnectionClock {
    /// The clock of a connection accepted now.
    pub fn new(header_timeout: Duration, idle_timeout: Duration, send_timeout: Duration) -> Arc<Self> {
        Arc::new(ConnectionClock {
            header_timeout,
            idle_timeout,
            send_timeout,
            answering: AtomicU32::new(0),
            waiting: Mutex::new(Waiting::Head(Instant::now())),
            expired: Mutex::new(None),
            answered: AtomicU32::new(0),
            closing: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Requests answered so far.
    pub fn answered(&self) -> u32 {
        self.answered.load(Ordering::Relaxed)
    }

    /// Whether no request is being answered.
    pub fn is_idle(&self) -> bool {
        self.answering.load(Ordering::Relaxed) == 0
    }

    /// The client asked for the connection to end after this answer
    /// (`Connection: close`, or HTTP/1.0 without keep-alive).
    pub fn close_after_answer(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    /// Whether the connection ends once its answers are sent.
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    /// Why the connection was let go, if its clock did.
    pub fn expired(&self) -> Option<Expired> {
        *self.expired.lock()
    }

    /// The connection is let go for `why`.
    pub fn expire(&self, why: Expired) {
        *self.expired.lock() = Some(why);
    }

    /// How long the client may take nothing of what it is sent.
    pub fn send_timeout(&self) -> Duration {
        self.send_timeout
    }

    /// A request's head was read: no deadline until it is answered.
    pub fn request_read(&self) {
        self.answering.fetch_add(1, Ordering::Relaxed);
    }

    /// A request's answer was sent (or dropped): the connection idles when
    /// it was the last.
    pub fn request_answered(&self) {
        self.answered.fetch_add(1, Ordering::Relaxed);
        if self.answering.fetch_sub(1, Ordering::Relaxed) == 1 {
            *self.waiting.lock() = Waiting::Idle(Instant::now());
        }
    }

    /// Bytes arrived: an idle connection starts a head now.
    fn bytes_arrived(&self) {
        if self.answering.load(Ordering::Relaxed) == 0 {
            let mut waiting = self.waiting.lock();
            if let Waiting::Idle(_) = *waiting {
                *waiting = Waiting::Head(Instant::now());
            }
        }
    }

    /// When the connection is let go if nothing changes, and why; `None`
    /// while a request is answered.
    fn deadline(&self) -> Option<(Instant, Expired)> {
        if self.answering.load(Ordering::Relaxed) > 0 {
            return None;
        }
        Some(match *self.waiting.lock() {
            Waiting::Head(since) => (since + self.header_timeout, Expired::Head),
            Waiting::Idle(since) => (since + self.idle_timeout, Expired::Idle),
        })
    }
}

/// A client connection whose reads and writes keep to its
/// [`ConnectionClock`].
#[derive(Debug)]
pub struct Watched<S> {
    inner: S,
    clock: Arc<ConnectionClock>,
    timer: Pin<Box<Sleep>>,
    /// When a write waiting on the client fails: set when a write has to
    /// wait, cleared by one that makes progress.
    send_deadline: Option<Instant>,
    /// Its timer, made the first time a write has to wait.
    send_timer: Option<Pin<Box<Sleep>>>,
}

impl<S> Watched<S> {
    /// `inner`, read and written under `clock`.
    pub fn new(inner: S, clock: Arc<ConnectionClock>) -> Self {
        let timer = Box::pin(tokio::time::sleep_until(Instant::now() + clock.header_timeout));
        Watched { inner, clock, timer, send_deadline: None, send_timer: None }
    }

    /// What a write polled, under the send timeout: progress clears its
    /// deadline, a wait arms it, and a wait past it fails.
    fn sent(&mut self, cx: &mut Context<'_>, polled: Poll<std::io::Result<usize>>) -> Poll<std::io::Result<usize>> {
        match polled {
            Poll::Ready(Ok(n)) if n > 0 => {
                self.send_deadline = None;
                Poll::Ready(Ok(n))
            }
            Poll::Ready(other) => Poll::Ready(other),
            Poll::Pending => {
                let deadline = *self.send_deadline.get_or_insert_with(|| Instant::now() + self.clock.send_timeout);
                let timer = self.send_timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                if timer.deadline() != deadline {
                    timer.as_mut().reset(deadline);
                }
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        self.clock.expire(Expired::Send);
                        let message =
                            format!("the client took nothing of its answer for {:?}", self.clock.send_timeout);
                        Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, message)))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.clock.bytes_arrived();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => {
                let Some((deadline, why)) = this.clock.deadline() else { return Poll::Pending };
                if this.timer.deadline() != deadline {
                    this.timer.as_mut().reset(deadline);
                }
                match this.timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        this.clock.expire(why);
                        let message = match why {
                            Expired::Head => "the request's head did not arrive in time",
                            Expired::Idle => "the connection idled too long",
                            Expired::Send => "the client took nothing of its answer",
                        };
                        Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, message)))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.sent(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.sent(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// An answer's body that tells the connection's clock when it was sent
/// (or dropped): the connection idles from then.
#[derive(Debug)]
pub struct Answering<B> {
    inner: B,
    clock: Arc<ConnectionClock>,
}

impl<B> Answering<B> {
    /// `inner`, the body of an answer to a request `clock` counts.
    pub fn new(inner: B, clock: Arc<ConnectionClock>) -> Self {
        Answering { inner, clock }
    }
}

impl<B: http_body::Body + Unpin> http_body::Body for Answering<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl<B> Drop for Answering<B> {
    fn drop(&mut self) {
        self.clock.request_answered();
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    const HEAD: Duration = Duration::from_secs(10);
    const IDLE: Duration = Duration::from_secs(60);
    const SEND: Duration = Duration::from_secs(30);

    fn watched() -> (Watched<tokio::io::DuplexStream>, tokio::io::DuplexStream, Arc<ConnectionClock>) {
        let (server, client) = tokio::io::duplex(1024);
        let clock = ConnectionClock::new(HEAD, IDLE, SEND);
        (Watched::new(server, Arc::clone(&clock)), client, clock)
    }

    /// How long a read waits before it fails with a timeout.
    async fn read_fails_after(connection: &mut Watched<tokio::io::DuplexStream>) -> Duration {
        let started = Instant::now();
        let mut byte = [0u8; 64];
        let error = connection.read(&mut byte).await.expect_err("the read times out");
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        started.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_never_completes_a_head_is_let_go_after_the_header_timeout() {
        let (mut connection, mut client, _clock) = watched();
        tokio::time::advance(Duration::from_secs(4)).await;
        client.write_all(b"GET /half-a-line").await.unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(connection.read(&mut buf).await.unwrap(), 16);
        // From the connection's start, not from its last byte.
        assert_eq!(read_fails_after(&mut connection).await, Duration::from_secs(6));
    }

    #[tokio::test(start_paused = true)]
    async fn an_answered_connection_idles_for_the_idle_timeout_and_then_has_the_header_timeout() {
        let (mut connection, mut client, clock) = watched();
        clock.request_read();
        clock.request_answered();
        assert_eq!(read_fails_after(&mut connection).await, IDLE);

        let (mut connection, mut client_two, clock) = watched();
        clock.request_read();
        clock.request_answered();
        tokio::time::advance(Duration::from_secs(30)).await;
        client_two.write_all(b"GET / HT").await.unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(connection.read(&mut buf).await.unwrap(), 8);
        assert_eq!(read_fails_after(&mut connection).await, HEAD, "a head started: its own timeout");
        client.shutdown().await.unwrap();
    }

    /// Writes `total` bytes to `connection`, a piece at a time.
    async fn write_all(connection: &mut Watched<tokio::io::DuplexStream>, total: usize) -> Result<(), std::io::Error> {
        let piece = [7u8; 256];
        let mut written = 0;
        while written < total {
            written += connection.write(&piece).await?;
        }
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_the_client_takes_nothing_of_fails_after_the_send_timeout() {
        let (mut connection, _client, clock) = watched();
        clock.request_read();
        let started = Instant::now();
        let error = write_all(&mut connection, 64 * 1024).await.expect_err("the write times out");
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), SEND, "from the first write that had to wait");
        assert_eq!(clock.expired(), Some(Expired::Send));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_client_that_keeps_taking_bytes_is_never_cut() {
        let (mut connection, mut client, clock) = watched();
        clock.request_read();
        let reading = tokio::spawn(async move {
            let mut buf = [0u8; 512];
            let mut read = 0;
            while read < 16 * 1024 {
                tokio::time::sleep(SEND / 2).await;
                read += client.read(&mut buf).await.unwrap();
            }
            read
        });
        let started = Instant::now();
        write_all(&mut connection, 16 * 1024).await.expect("written, slowly");
        assert!(started.elapsed() > SEND * 10, "it took {:?}", started.elapsed());
        assert_eq!(reading.await.unwrap(), 16 * 1024);
        assert_eq!(clock.expired(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn no_deadline_runs_while_a_request_is_answered() {
        let (mut connection, _client, clock) = watched();
        clock.request_read();
        let mut buf = [0u8; 64];
        let waited = tokio::time::timeout(Duration::from_secs(3600), connection.read(&mut buf)).await;
        assert!(waited.is_err(), "still reading after an hour: not cut");
        clock.request_answered();
        assert_eq!(read_fails_after(&mut connection).await, IDLE);
    }
}
