//! What an HTTP/2 connection's answers hold of pkgproxy's memory while
//! they wait on their client, and since when the client has taken
//! nothing.
//!
//! HTTP/2's flow control lets a client shut a stream's window and keep it
//! shut. hyper reads an answer's next frame, then waits for the window to
//! have room, holding the frame; h2 takes the frame into its send buffer
//! only once the window has room for what it buffered before, and sends
//! what the window allows. So a stream whose window stays shut holds one
//! frame (a small one: see `ResponseBody::in_frames_of`) and no more, and
//! hyper polls a body again only once its last frame was taken: that is
//! how the client's progress shows here, since nothing else of h2's
//! windows is visible outside it.
//!
//! [`Streamed`] wraps each answer's body and tells the connection's
//! [`Flow`] when it gave a frame and when that frame was taken. A stream
//! whose body waits on its upstream has given nothing, so it never counts
//! as waiting on its client. The connection is stalled when a stream has
//! waited on the client for the send timeout and no frame of any stream
//! was taken meanwhile; a slow client whose windows keep opening moves
//! some stream and is never cut.
//!
//! An answer's last byte goes as a frame of its own: h2 takes it only once
//! the window has room for everything before it, so an answer whose body
//! has ended leaves nothing in h2 that the window holds back. What h2
//! then still holds waits on the socket alone, where a stalled write
//! fails after the same timeout (`deadline::Watched`).

use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::Instant;

use crate::admission::StreamPlace;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How a connection's streams stand against their client.
#[derive(Debug)]
pub struct Flow {
    /// Streams whose body gave a frame the client has not taken yet.
    waiting: AtomicU32,
    /// When a frame was last taken, or a stream began to wait with none
    /// waiting before: milliseconds since `epoch`.
    moved: AtomicU64,
    /// When the connection began.
    epoch: Instant,
}

impl Flow {
    /// The flow of a connection beginning now.
    pub fn new() -> Arc<Self> {
        Arc::new(Flow { waiting: AtomicU32::new(0), moved: AtomicU64::new(0), epoch: Instant::now() })
    }

    /// Since when the client has taken nothing while a stream waits on it;
    /// `None` when no stream waits.
    pub fn waiting_since(&self) -> Option<Instant> {
        if self.waiting.load(Ordering::Acquire) == 0 {
            return None;
        }
        Some(self.epoch + Duration::from_millis(self.moved.load(Ordering::Acquire)))
    }

    /// Resolves once the connection is stalled: a stream has waited on the
    /// client for `timeout` and nothing was taken meanwhile.
    pub async fn stalled(&self, timeout: Duration) {
        loop {
            match self.waiting_since() {
                Some(since) if Instant::now() >= since + timeout => return,
                Some(since) => tokio::time::sleep_until(since + timeout).await,
                None => tokio::time::sleep(timeout).await,
            }
        }
    }

    /// A stream gave a frame.
    fn wait(&self) {
        if self.waiting.fetch_add(1, Ordering::AcqRel) == 0 {
            self.moved_now();
        }
    }

    /// A stream's frame was taken.
    fn taken(&self) {
        self.moved_now();
        self.waiting.fetch_sub(1, Ordering::AcqRel);
    }

    /// A stream that waited ended without its frame being taken (a reset,
    /// the connection closing): it waits no more, but nothing moved.
    fn left(&self) {
        self.waiting.fetch_sub(1, Ordering::AcqRel);
    }

    fn moved_now(&self) {
        let since = Instant::now().saturating_duration_since(self.epoch);
        self.moved.store(u64::try_from(since.as_millis()).unwrap_or(u64::MAX), Ordering::Release);
    }
}

/// What a stream's body has ready beside its inner body.
#[derive(Debug)]
enum Kept {
    /// Nothing.
    Nothing,
    /// The answer's last byte, kept back to go on its own.
    LastByte(Bytes),
    /// A frame read ahead, to know whether the one before was the last.
    Ahead(Frame<Bytes>),
    /// The error read ahead.
    Failed(BoxError),
}

/// An answer's body on an HTTP/2 stream, reporting to its connection's
/// [`Flow`] and holding the stream's place in its client's share.
#[derive(Debug)]
pub struct Streamed<B> {
    inner: B,
    flow: Arc<Flow>,
    /// Whether a frame given has not been taken yet.
    waiting: bool,
    kept: Kept,
    /// Whether `inner` has nothing more to give.
    inner_ended: bool,
    _place: StreamPlace,
}

impl<B> Streamed<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    /// `inner`, on a stream of the connection whose flow is `flow`, in the
    /// place `place`.
    pub fn new(inner: B, flow: Arc<Flow>, place: StreamPlace) -> Self {
        Streamed { inner, flow, waiting: false, kept: Kept::Nothing, inner_ended: false, _place: place }
    }

    /// Gives `data`: until it is taken, the stream waits on its client.
    fn give(&mut self, data: Bytes) -> Frame<Bytes> {
        if !data.is_empty() {
            self.waiting = true;
            self.flow.wait();
        }
        Frame::data(data)
    }

    /// Whether the inner body has nothing after the frame it just gave:
    /// what it says of itself, or when it cannot say, what it has next
    /// (kept for the next poll).
    fn ends_here(&mut self, cx: &mut Context<'_>) -> bool {
        let hint = self.inner.size_hint();
        if self.inner.is_end_stream() || hint.exact() == Some(0) {
            self.inner_ended = true;
            return true;
        }
        if hint.exact().is_some() {
            return false;
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(None) => {
                self.inner_ended = true;
                true
            }
            Poll::Ready(Some(Ok(frame))) => {
                self.kept = Kept::Ahead(frame);
                false
            }
            Poll::Ready(Some(Err(error))) => {
                self.kept = Kept::Failed(error.into());
                false
            }
            Poll::Pending => false,
        }
    }
}

impl<B> Body for Streamed<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if std::mem::take(&mut this.waiting) {
            // hyper asks for the next frame once h2 took the last one.
            this.flow.taken();
        }
        let frame = match std::mem::replace(&mut this.kept, Kept::Nothing) {
            Kept::LastByte(byte) => return Poll::Ready(Some(Ok(this.give(byte)))),
            Kept::Failed(error) => return Poll::Ready(Some(Err(error))),
            Kept::Ahead(frame) => frame,
            Kept::Nothing if this.inner_ended => return Poll::Ready(None),
            Kept::Nothing => match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => frame,
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error.into()))),
                Poll::Ready(None) => {
                    this.inner_ended = true;
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            },
        };
        let mut data = match frame.into_data() {
            Ok(data) => data,
            Err(other) => return Poll::Ready(Some(Ok(other))),
        };
        if !data.is_empty() && this.ends_here(cx) && data.len() > 1 {
            this.kept = Kept::LastByte(data.split_off(data.len() - 1));
        }
        Poll::Ready(Some(Ok(this.give(data))))
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.kept, Kept::Nothing) && (self.inner_ended || self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        let kept = match &self.kept {
            Kept::LastByte(byte) => byte.len() as u64,
            Kept::Ahead(frame) => frame.data_ref().map_or(0, |data| data.len() as u64),
            Kept::Nothing | Kept::Failed(_) => 0,
        };
        if self.inner_ended {
            return SizeHint::with_exact(kept);
        }
        let inner = self.inner.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower() + kept);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + kept);
        }
        hint
    }
}

impl<B> Drop for Streamed<B> {
    fn drop(&mut self) {
        if self.waiting {
            self.flow.left();
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;
    use http_body_util::{BodyExt, Full, StreamBody};

    use super::*;
    use crate::admission::Admission;
    use crate::config::clients::ClientLimits;

    fn place() -> StreamPlace {
        let section = crate::config::ServerSection::default();
        let admission = Admission::new(ClientLimits::new(&section).unwrap());
        let ticket = admission.admit("127.0.0.1".parse().unwrap()).unwrap();
        ticket.streams().take().unwrap()
    }

    /// The frames `body` gives, as hyper polls them: each after the one
    /// before was taken.
    async fn frames<B>(body: B, flow: &Arc<Flow>) -> Vec<Bytes>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: Into<BoxError>,
    {
        let mut streamed = Streamed::new(body, Arc::clone(flow), place());
        let mut out = Vec::new();
        while !streamed.is_end_stream() {
            match streamed.frame().await {
                Some(frame) => out.push(frame.unwrap().into_data().unwrap()),
                None => break,
            }
        }
        out
    }

    #[tokio::test]
    async fn an_answer_s_last_byte_goes_on_its_own_whether_its_length_is_known_or_not() {
        let flow = Flow::new();
        let known = frames(Full::new(Bytes::from_static(b"hello")), &flow).await;
        assert_eq!(known, [&b"hell"[..], b"o"]);
        let chunks = ["ab", "cd", "e"].map(|chunk| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(chunk))));
        let unknown = frames(StreamBody::new(futures_util::stream::iter(chunks)), &flow).await;
        assert_eq!(unknown, [&b"ab"[..], b"cd", b"e"], "a last frame of one byte is already on its own");
        let chunks = ["ab", "cde"].map(|chunk| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(chunk))));
        let unknown = frames(StreamBody::new(futures_util::stream::iter(chunks)), &flow).await;
        assert_eq!(unknown, [&b"ab"[..], b"cd", b"e"]);
        assert_eq!(flow.waiting_since(), None, "every frame was taken");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_holding_a_frame_stalls_the_connection_after_the_timeout_unless_something_moves() {
        const TIMEOUT: Duration = Duration::from_secs(60);
        let flow = Flow::new();
        let mut held = Streamed::new(Full::new(Bytes::from(vec![1u8; 100])), Arc::clone(&flow), place());
        let _frame = held.frame().await;
        let since = flow.waiting_since().expect("waiting on the client");
        // Another stream moving keeps the connection alive.
        let mut moving = Streamed::new(Full::new(Bytes::from(vec![2u8; 100])), Arc::clone(&flow), place());
        tokio::time::advance(TIMEOUT / 2).await;
        let _ = moving.frame().await;
        tokio::time::advance(TIMEOUT / 2).await;
        let _ = moving.frame().await;
        assert!(flow.waiting_since().unwrap() > since, "a frame taken moves the connection");
        let started = Instant::now();
        flow.stalled(TIMEOUT).await;
        assert_eq!(started.elapsed(), TIMEOUT, "then nothing moves for the timeout");
        drop(held);
        drop(moving);
        assert_eq!(flow.waiting_since(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_waiting_on_its_upstream_never_stalls_the_connection() {
        let flow = Flow::new();
        let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(1);
        let upstream = StreamBody::new(tokio_stream_from(receiver));
        let mut streamed = Streamed::new(upstream, Arc::clone(&flow), place());
        assert!(streamed.frame().now_or_never().is_none(), "the upstream sent nothing yet");
        let stalled = tokio::time::timeout(Duration::from_secs(3600), flow.stalled(Duration::from_secs(60))).await;
        assert!(stalled.is_err(), "an hour waiting on the upstream is not the client's stall");
        drop(sender);
    }

    /// A stream of what `receiver` gets.
    fn tokio_stream_from<T: Send + 'static>(
        receiver: tokio::sync::mpsc::Receiver<T>,
    ) -> impl futures_util::Stream<Item = T> + Unpin {
        Box::pin(futures_util::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|item| (item, receiver))
        }))
    }
}
