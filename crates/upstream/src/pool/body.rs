//! The body of a pool's answer: it keeps its attempt in flight while it
//! streams, fails when the upstream sends nothing for the idle limit, and
//! penalises its instance when it breaks half way.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use super::{Attempt, Pool};
use crate::error::UpstreamError;

/// An upstream body, streaming from one instance of a pool.
#[derive(Debug)]
pub struct PoolBody {
    body: Incoming,
    pool: Arc<Pool>,
    attempt: Attempt,
    /// How long the body may send nothing.
    idle: Duration,
    /// Wakes the body when it may have stalled; re-armed lazily from
    /// `last_progress` rather than on every frame.
    timer: Pin<Box<Sleep>>,
    last_progress: Instant,
    received: u64,
    /// True once the body ended or failed.
    over: bool,
    /// True once a failure of the attempt was reported (at its head, for an
    /// answer like `503`, or in the body): one attempt fails once.
    reported: bool,
}

impl PoolBody {
    pub(super) fn new(body: Incoming, pool: Arc<Pool>, attempt: Attempt, idle: Duration, reported: bool) -> Self {
        let now = Instant::now();
        let timer = Box::pin(tokio::time::sleep_until(now + idle));
        PoolBody { body, pool, attempt, idle, timer, last_progress: now, received: 0, over: false, reported }
    }

    /// The base URL of the instance sending this body.
    pub fn instance_url(&self) -> &str {
        self.pool.url(self.attempt.instance).unwrap_or_default()
    }

    fn fail(&mut self, error: UpstreamError) -> Poll<Option<Result<Frame<Bytes>, UpstreamError>>> {
        self.over = true;
        if !self.reported {
            self.reported = true;
            self.pool.penalise(self.attempt);
        }
        Poll::Ready(Some(Err(error)))
    }

    /// True when the idle limit has passed since the last byte.
    fn stalled(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return false;
            }
            let due = self.last_progress + self.idle;
            if Instant::now() >= due {
                return true;
            }
            self.timer.as_mut().reset(due);
        }
    }
}

impl Body for PoolBody {
    type Data = Bytes;
    type Error = UpstreamError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.over {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.received += data.len() as u64;
                    self.last_progress = Instant::now();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                let error = UpstreamError::Request {
                    host: self.instance_url().to_string(),
                    message: format!("body broke: {error}"),
                };
                self.fail(error)
            }
            Poll::Ready(None) => {
                self.over = true;
                Poll::Ready(None)
            }
            Poll::Pending if self.stalled(cx) => {
                let error = UpstreamError::Stalled {
                    host: self.instance_url().to_string(),
                    after: self.idle,
                    received: self.received,
                };
                self.fail(error)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.over || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for PoolBody {
    fn drop(&mut self) {
        self.pool.end(self.attempt);
    }
}
