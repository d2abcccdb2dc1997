//! A forwarded request's body on its way to the upstream (an npm publish,
//! the registry's `/-/` API): passed on as the client sends it, so that
//! pkgproxy holds no more of it than the frame passing, and cut off at its
//! side's limit as it passes. A body announced over the limit is refused
//! before anything is sent. A small one (what an API call sends, up to
//! [`WHOLE_UP_TO`]) is read whole first, so that the pool may send it
//! again where its method allows; so is the body of a request whose answer
//! its side records, which it needs whole (its limit is small).

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::StatusCode;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Limited};
use pkgproxy_sides::Refusal;
use pkgproxy_upstream::Payload;

use super::outcome::{Failed, Outcome};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The longest body read whole before it is sent.
pub const WHOLE_UP_TO: u64 = 64 * 1024;

/// Why a streamed body was cut off, once it was.
#[derive(Debug, Clone, Default)]
pub struct Cut(Arc<OnceLock<Refusal>>);

impl Cut {
    /// `outcome`, or when the body was cut off and the upstream gave no
    /// answer, the client's refusal saying why.
    pub fn over(&self, outcome: Outcome) -> Outcome {
        match (outcome, self.0.get()) {
            (Outcome::Failed(_), Some(refusal)) => Failed::Refused(refusal.clone()).into(),
            (outcome, _) => outcome,
        }
    }
}

/// `body` read whole, up to `limit` bytes; the client's refusal when it is
/// longer or breaks off.
pub async fn whole<B>(body: B, limit: u64) -> Result<Bytes, Refusal>
where
    B: Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    match Limited::new(body, usize::try_from(limit).unwrap_or(usize::MAX)).collect().await {
        Ok(body) => Ok(body.to_bytes()),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => Err(too_large(limit)),
        Err(error) => Err(broke_off(&*error)),
    }
}

/// `body` as it goes upstream, cut off past `limit` bytes (the cut says
/// why); the client's refusal at once when it announces more.
pub async fn passed_on<B>(body: B, limit: u64) -> Result<(Payload, Cut), Refusal>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let hint = body.size_hint();
    if hint.lower() > limit {
        return Err(too_large(limit));
    }
    if hint.exact().is_some_and(|length| length <= WHOLE_UP_TO) {
        return Ok((Payload::from(whole(body, limit).await?), Cut::default()));
    }
    let cut = Cut::default();
    let capped = Capped { inner: body, left: limit, limit, cut: cut.clone() };
    Ok((Payload::streamed(capped), cut))
}

fn too_large(limit: u64) -> Refusal {
    Refusal::new(StatusCode::PAYLOAD_TOO_LARGE, format!("the request body is larger than the {limit} bytes taken here"))
}

fn broke_off(error: &dyn std::error::Error) -> Refusal {
    Refusal::bad_request(format!("the request body broke off: {error}"))
}

/// A body that fails once more than its limit has passed, saying so in its
/// [`Cut`].
struct Capped<B> {
    inner: B,
    left: u64,
    limit: u64,
    cut: Cut,
}

impl<B> Body for Capped<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, |data| data.len() as u64);
                if len > this.left {
                    let refusal = too_large(this.limit);
                    let error = refusal.reason.clone();
                    let _ = this.cut.0.set(refusal);
                    return Poll::Ready(Some(Err(error.into())));
                }
                this.left -= len;
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                let _ = this.cut.0.set(broke_off(&error));
                Poll::Ready(Some(Err(Box::new(error))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
