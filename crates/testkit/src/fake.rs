//! What the fake upstreams share: an HTTP/1.1 server that answers every
//! request of every connection with the fake's own handler.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
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
