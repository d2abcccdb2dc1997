//! Rewriting an answer at serve time, for the client that asked: after the
//! cache, the forward or the replay, so what is stored is always the
//! upstream's own answer. Only a whole `200` body is rewritten; an answer
//! the side cannot read is served as it is.

use http::header::{HeaderValue, CONTENT_LENGTH, ETAG};
use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use pkgproxy_sides::{LocalAnswer, Rewrite, Side};

use super::outcome::{Failed, Outcome};
use crate::body::ResponseBody;
use crate::context::Exchange;

/// The largest answer rewritten, in bytes: store answers are JSON of a few
/// hundred kilobytes at most (a refresh of two hundred snaps, about one
/// megabyte). The side rewrites as a stream: an answer costs about twice
/// its size while it is rewritten.
const REWRITE_LIMIT: usize = 16 * 1024 * 1024;

/// `outcome`, its answer rewritten by `side` as `rewrite` says.
pub async fn rewritten(side: &dyn Side, rewrite: &Rewrite, exchange: &Exchange<'_>, outcome: Outcome) -> Outcome {
    match outcome {
        Outcome::Answered(response) if response.status() == StatusCode::OK && *exchange.method != Method::HEAD => {
            rewrite_response(side, rewrite, response).await
        }
        Outcome::Local(answer) if answer.status == StatusCode::OK => {
            Outcome::Local(rewrite_local(side, rewrite, answer))
        }
        other => other,
    }
}

async fn rewrite_response(side: &dyn Side, rewrite: &Rewrite, response: Response<ResponseBody>) -> Outcome {
    let (mut parts, body) = response.into_parts();
    let body = match Limited::new(body, REWRITE_LIMIT).collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => return Failed::Upstream(format!("the answer could not be read whole: {error}")).into(),
    };
    let body = match side.rewrite(rewrite, &body) {
        Some(rewritten) => {
            // The upstream's tag names the upstream's bytes, not these.
            parts.headers.remove(ETAG);
            rewritten
        }
        None => body,
    };
    parts.headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    Outcome::Answered(Response::from_parts(parts, ResponseBody::full(body)))
}

fn rewrite_local(side: &dyn Side, rewrite: &Rewrite, mut answer: LocalAnswer) -> LocalAnswer {
    if let Some(rewritten) = side.rewrite(rewrite, &answer.body) {
        answer.body = rewritten;
    }
    answer
}
