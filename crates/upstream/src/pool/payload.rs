//! What a request carries to its upstream: a body held whole, which any
//! attempt can send again, or a client's body streamed as it arrives,
//! which one attempt alone can send. A request with a streamed body is
//! never sent twice, whatever its method; it still moves on to the next
//! instance when its attempt failed to connect, since nothing of it was
//! taken then.
//!
//! A streamed body holds nothing of its own beyond the frame passing: an
//! upload of hundreds of megabytes costs what the sockets buffer. While it
//! passes, the attempt waits on the client as much as on the upstream, so
//! the attempt's limit for the answer's head runs from the body's end; a
//! body that stops passing for the idle limit ends the attempt, without
//! faulting the instance (see [`Payload::sent`]).

use parking_lot::Mutex;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use tokio::sync::watch;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request's body.
#[derive(Debug, Clone)]
pub enum Payload {
    /// Held whole (empty for none): any attempt may send it.
    Whole(Bytes),
    /// The client's, passed on as it arrives: one attempt sends it.
    Streamed(Streamed),
}

impl Default for Payload {
    fn default() -> Self {
        Payload::Whole(Bytes::new())
    }
}

impl From<Bytes> for Payload {
    fn from(bytes: Bytes) -> Self {
        Payload::Whole(bytes)
    }
}

/// A body streamed to the one attempt that takes it.
#[derive(Clone)]
pub struct Streamed {
    shared: Arc<Shared>,
}

pub(crate) struct Shared {
    /// The body, until an attempt takes it.
    body: Mutex<Option<UnsyncBoxBody<Bytes, BoxError>>>,
    /// What the body said of its length before it was taken.
    hint: SizeHint,
    /// How much of it has passed, and whether all of it.
    passed: watch::Sender<Passed>,
}

/// How far a streamed body has gone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Passed {
    bytes: u64,
    ended: bool,
}

impl std::fmt::Debug for Streamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streamed").field("passed", &*self.shared.passed.borrow()).finish_non_exhaustive()
    }
}

impl Payload {
    /// `body`, passed on as it arrives.
    pub fn streamed<B>(body: B) -> Self
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let hint = body.size_hint();
        // An empty body is never polled: it has gone from the start.
        let passed = Passed { bytes: 0, ended: body.is_end_stream() };
        let body = body.map_err(Into::into).boxed_unsync();
        let shared = Shared { body: Mutex::new(Some(body)), hint, passed: watch::Sender::new(passed) };
        Payload::Streamed(Streamed { shared: Arc::new(shared) })
    }

    /// Whether another attempt could send the body again.
    pub(crate) fn can_send_again(&self) -> bool {
        matches!(self, Payload::Whole(_))
    }

    /// The body one attempt sends.
    pub(crate) fn for_attempt(&self) -> AttemptBody {
        match self {
            Payload::Whole(bytes) => AttemptBody::Whole(Full::new(bytes.clone())),
            Payload::Streamed(streamed) => AttemptBody::Streamed { shared: Arc::clone(&streamed.shared), taken: None },
        }
    }

    /// Resolves once the body has all gone (at once for a whole one);
    /// fails when a streamed one stops passing for `idle`.
    pub(crate) async fn sent(&self, idle: Duration) -> Result<(), BodyStalled> {
        let Payload::Streamed(streamed) = self else { return Ok(()) };
        let mut passed = streamed.shared.passed.subscribe();
        loop {
            if passed.borrow_and_update().ended {
                return Ok(());
            }
            match tokio::time::timeout(idle, passed.changed()).await {
                Ok(Ok(())) => {}
                // The body is gone with its attempt: the attempt's end says why.
                Ok(Err(_)) => return std::future::pending().await,
                Err(_) => return Err(BodyStalled),
            }
        }
    }
}

/// A streamed body stopped passing for the idle limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BodyStalled;

/// The body of one attempt.
pub(crate) enum AttemptBody {
    /// A whole body's bytes.
    Whole(Full<Bytes>),
    /// A streamed body, taken at the attempt's first poll.
    Streamed { shared: Arc<Shared>, taken: Option<UnsyncBoxBody<Bytes, BoxError>> },
}

impl Body for AttemptBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            AttemptBody::Whole(body) => Pin::new(body).poll_frame(cx).map_err(|never| match never {}),
            AttemptBody::Streamed { shared, taken } => {
                if taken.is_none() {
                    *taken = shared.body.lock().take();
                }
                let Some(body) = taken else {
                    return Poll::Ready(Some(Err("the request body went with an earlier attempt".into())));
                };
                let polled = Pin::new(&mut *body).poll_frame(cx);
                match &polled {
                    Poll::Ready(Some(Ok(frame))) => {
                        // hyper asks no further once the body says it ended.
                        let len = frame.data_ref().map_or(0, |data| data.len() as u64);
                        let ended = body.is_end_stream();
                        shared.passed.send_modify(|passed| {
                            passed.bytes += len;
                            passed.ended = ended;
                        });
                    }
                    Poll::Ready(None) => shared.passed.send_modify(|passed| passed.ended = true),
                    Poll::Ready(Some(Err(_))) | Poll::Pending => {}
                }
                polled
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            AttemptBody::Whole(body) => body.is_end_stream(),
            AttemptBody::Streamed { taken: Some(body), .. } => body.is_end_stream(),
            AttemptBody::Streamed { taken: None, shared } => shared.hint.exact() == Some(0),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            AttemptBody::Whole(body) => body.size_hint(),
            AttemptBody::Streamed { taken: Some(body), .. } => body.size_hint(),
            AttemptBody::Streamed { taken: None, shared } => shared.hint,
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    fn chunks(parts: &[&'static str]) -> impl Body<Data = Bytes, Error = std::convert::Infallible> + Send + 'static {
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> =
            parts.iter().map(|part| Ok(Frame::data(Bytes::from_static(part.as_bytes())))).collect();
        http_body_util::StreamBody::new(futures_util::stream::iter(frames))
    }

    #[tokio::test]
    async fn a_streamed_body_goes_once_and_says_when_it_has_all_gone() {
        let payload = Payload::streamed(chunks(&["ab", "cd"]));
        assert!(!payload.can_send_again());
        let sent = payload.sent(Duration::from_secs(60));
        let mut sent = std::pin::pin!(sent);
        assert!(sent.as_mut().now_or_never().is_none(), "nothing passed yet");
        let first = payload.for_attempt().collect().await.unwrap().to_bytes();
        assert_eq!(first, "abcd");
        assert_eq!(sent.await, Ok(()));
        let again = payload.for_attempt().collect().await;
        assert!(again.is_err(), "a second attempt has nothing to send");
    }

    #[tokio::test]
    async fn a_body_that_says_it_ended_has_gone_without_being_asked_further() {
        let payload = Payload::streamed(Full::new(Bytes::from_static(b"abc")));
        let mut attempt = payload.for_attempt();
        assert!(attempt.frame().await.is_some());
        assert!(attempt.is_end_stream(), "hyper stops here");
        assert_eq!(payload.sent(Duration::from_secs(60)).now_or_never(), Some(Ok(())));
        let empty = Payload::streamed(http_body_util::Empty::<Bytes>::new());
        assert_eq!(empty.sent(Duration::from_secs(60)).now_or_never(), Some(Ok(())), "never polled, gone at once");
    }

    #[tokio::test]
    async fn an_attempt_that_never_took_the_body_leaves_it_to_the_next() {
        let payload = Payload::streamed(chunks(&["abc"]));
        drop(payload.for_attempt());
        assert_eq!(payload.for_attempt().collect().await.unwrap().to_bytes(), "abc");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_passing_fails_after_the_idle_limit() {
        let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(1);
        let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|item| (item, receiver))
        });
        let payload = Payload::streamed(http_body_util::StreamBody::new(stream));
        let mut attempt = payload.for_attempt();
        sender.send(Ok(Frame::data(Bytes::from_static(b"x")))).await.unwrap();
        assert!(attempt.frame().await.is_some());
        let started = tokio::time::Instant::now();
        assert_eq!(payload.sent(Duration::from_secs(60)).await, Err(BodyStalled));
        assert_eq!(started.elapsed(), Duration::from_secs(60));
        drop(sender);
    }

    #[test]
    fn a_whole_body_may_go_again() {
        let payload = Payload::from(Bytes::from_static(b"{}"));
        assert!(payload.can_send_again());
        assert_eq!(payload.for_attempt().size_hint().exact(), Some(2));
        assert!(payload.sent(Duration::from_secs(1)).now_or_never() == Some(Ok(())));
    }
}
