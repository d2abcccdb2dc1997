//! Rewriting an answer at serve time, for the client that asked: after the
//! cache, the forward or the replay, so what is stored is always the
//! upstream's own answer. Only a `200` body is rewritten: whole, or as it
//! streams when the side rewrites that way; an answer the side cannot read
//! is served as it is.

use http::header::{HeaderValue, ACCEPT_ENCODING, ACCEPT_RANGES, CONTENT_ENCODING, CONTENT_LENGTH, ETAG};
use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use pkgproxy_sides::role::Rewriting;
use pkgproxy_sides::{LocalAnswer, Pieced, Rewrite, Side};

use super::outcome::{Answer, Failed, Outcome};
use crate::body::{PiecedBody, ResponseBody, RewrittenBody};
use crate::context::Exchange;

/// The largest answer rewritten whole, in bytes: store answers are JSON of
/// a few hundred kilobytes at most (a refresh of two hundred snaps, about
/// one megabyte); an answer costs about twice its size while it is
/// rewritten. A side whose answers run larger (npm's documents, PyPI's
/// pages) rewrites them as they stream ([`Rewriting::streaming_rewrite`]),
/// with no limit but what it caches.
const REWRITE_LIMIT: usize = 16 * 1024 * 1024;

/// `outcome`, its answer rewritten by `side` as `rewrite` says (as it is,
/// from a side that rewrites nothing).
pub async fn rewritten(side: &dyn Side, rewrite: &Rewrite, exchange: &Exchange<'_>, outcome: Outcome) -> Outcome {
    let Some(side) = side.roles().rewriting else { return outcome };
    match outcome {
        Outcome::Answered(answer) if answer.status() == StatusCode::OK && *exchange.method != Method::HEAD => {
            match compressed_form(side, rewrite, exchange, &answer) {
                Some(pieced) => Outcome::Answered(compressed(answer, pieced)),
                None => rewrite_answer(side, rewrite, answer).await,
            }
        }
        Outcome::Local(answer) if answer.status == StatusCode::OK => {
            Outcome::Local(rewrite_local(side, rewrite, answer))
        }
        other => other,
    }
}

/// The compressed form a side keeps of a held body, for a client that
/// takes gzip.
fn compressed_form(
    side: &dyn Rewriting,
    rewrite: &Rewrite,
    exchange: &Exchange<'_>,
    answer: &Answer,
) -> Option<Pieced> {
    let stored = answer.stored.as_ref()?;
    accepts_gzip(exchange.headers).then(|| side.compressed(rewrite, stored)).flatten()
}

/// `answer`, its body `pieced`.
fn compressed(answer: Answer, pieced: Pieced) -> Answer {
    let (mut parts, _) = answer.response.into_parts();
    parts.headers.remove(ETAG);
    parts.headers.remove(ACCEPT_RANGES);
    parts.headers.insert(CONTENT_LENGTH, HeaderValue::from(pieced.len));
    parts.headers.insert(CONTENT_ENCODING, HeaderValue::from_static(pieced.encoding));
    let response = Response::from_parts(parts, ResponseBody::Pieced(Box::new(PiecedBody::new(pieced))));
    Answer { response, ..answer }
}

/// Whether a client takes gzip (`Accept-Encoding`, a `q` above zero).
fn accepts_gzip(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| pkgproxy_sides::accept::takes(value, &["gzip", "*"]))
}

/// `answer`, its body rewritten by `side` as `rewrite` says: as it
/// streams, or read whole.
async fn rewrite_answer(side: &dyn Rewriting, rewrite: &Rewrite, answer: Answer) -> Outcome {
    let Answer { response, served, reason, answered_by, cache_use, stored: _ } = answer;
    let (mut parts, body) = response.into_parts();
    // What was noted of it holds of the rewritten body, which is no longer
    // the stored one.
    let answer = |response| Answer { response, served, reason, answered_by, cache_use, stored: None };
    if let Some(rewriter) = side.streaming_rewrite(rewrite) {
        // The upstream's tag and length name the upstream's bytes.
        parts.headers.remove(ETAG);
        parts.headers.remove(CONTENT_LENGTH);
        let body = ResponseBody::Rewritten(Box::new(RewrittenBody::new(body, rewriter)));
        return Outcome::Answered(answer(Response::from_parts(parts, body)));
    }
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
    Outcome::Answered(answer(Response::from_parts(parts, ResponseBody::full(body))))
}

fn rewrite_local(side: &dyn Rewriting, rewrite: &Rewrite, mut answer: LocalAnswer) -> LocalAnswer {
    if let Some(rewritten) = side.rewrite(rewrite, &answer.body) {
        answer.body = rewritten;
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_taken_unless_refused() {
        let accepts = |value: &'static str| {
            let mut headers = http::HeaderMap::new();
            headers.insert(ACCEPT_ENCODING, HeaderValue::from_static(value));
            accepts_gzip(&headers)
        };
        assert!(accepts("gzip, deflate") && accepts("br;q=1, GZIP;q=0.5") && accepts("*"));
        assert!(!accepts("identity") && !accepts("gzip;q=0") && !accepts("deflate, br"));
        assert!(!accepts_gzip(&http::HeaderMap::new()));
    }
}
