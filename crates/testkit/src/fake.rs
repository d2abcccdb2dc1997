//! What the fake upstreams share: an HTTP/1.1 server that answers every
//! request of every connection with the fake's own handler.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// Serves every connection `listener` accepts, each request answered by
/// `answer` with the fake's `shared` state, until the task running it is
/// aborted.
pub(crate) async fn serve<S, F, B>(listener: TcpListener, shared: Arc<S>, answer: fn(Arc<S>, Request<Incoming>) -> F)
where
    S: Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    while let Ok((stream, _)) = listener.accept().await {
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let answered = answer(Arc::clone(&shared), request);
                async move { Ok::<_, Infallible>(answered.await) }
            });
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

/// An answer of a fake whose bodies may also stream (and fail midway).
pub(crate) type Answer = Response<BoxBody<Bytes, std::io::Error>>;

/// An answer of `status`, `headers` and `body`.
pub(crate) fn reply(status: StatusCode, headers: &[(&str, String)], body: impl Into<Bytes>) -> Answer {
    let mut answer = Response::new(Full::new(body.into()).map_err(|never| match never {}).boxed());
    *answer.status_mut() = status;
    for (name, value) in headers {
        answer.headers_mut().insert(http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
    }
    answer
}

/// `bytes` as a `200` with `headers`, spoilt as a test asks: its last byte
/// flipped (`corrupt`: the same length, wrong bytes), or announced whole
/// and cut after half (`cut`: the head and the half go out first, a moment
/// before the connection is dropped).
pub(crate) fn file_reply(bytes: &[u8], headers: &[(&str, String)], corrupt: bool, cut: bool) -> Answer {
    let mut bytes = bytes.to_vec();
    if corrupt {
        if let Some(last) = bytes.last_mut() {
            *last ^= 0xff;
        }
    }
    if !cut {
        return reply(StatusCode::OK, headers, bytes);
    }
    let length = bytes.len();
    let half = Bytes::from(bytes[..length / 2].to_vec());
    let cut = async {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        Err(std::io::Error::other("cut"))
    };
    let frames =
        futures_util::stream::iter([Ok(hyper::body::Frame::data(half))]).chain(futures_util::stream::once(cut));
    let mut answer = reply(StatusCode::OK, headers, Bytes::new());
    *answer.body_mut() = BodyExt::boxed(http_body_util::StreamBody::new(frames));
    answer.headers_mut().insert(http::header::CONTENT_LENGTH, length.into());
    answer
}
