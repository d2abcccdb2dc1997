//! The answers this side writes itself, in the spec's JSON: the error
//! envelope every refusal and failure is told in, and the ping.

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, ALLOW, RETRY_AFTER};
use http::StatusCode;
use pkgproxy_cache::PassedAnswer;
use serde_json::json;

use crate::decision::LocalAnswer;
use crate::failure::{retry_after_secs, Failure};

/// The header every answer of this side carries.
pub(super) const API_VERSION: (&str, &str) = ("docker-distribution-api-version", "registry/2.0");

/// What an anonymous client is told while a refusal of pkgproxy's own
/// token is remembered: the same status and challenge, in the spec's
/// error envelope (a refusal of a `HEAD` had no body to keep).
pub(super) fn refusal_of(answer: &PassedAnswer) -> PassedAnswer {
    let (code, message) = match answer.status {
        StatusCode::FORBIDDEN => ("DENIED", "the registry does not let this client read it"),
        _ => ("UNAUTHORIZED", "the registry wants this client's own credentials for it"),
    };
    let challenges = answer.headers.iter().filter(|(name, _)| name.eq_ignore_ascii_case("www-authenticate"));
    let mut headers: Vec<(String, String)> = challenges.cloned().collect();
    headers.push(("content-type".into(), "application/json".into()));
    let body = json!({"errors": [{"code": code, "message": message}]}).to_string();
    PassedAnswer { status: answer.status, headers, body: Bytes::from(body) }
}

/// The answer to `GET /v2/`.
pub(super) fn ping() -> LocalAnswer {
    json_answer(StatusCode::OK, Bytes::from_static(b"{}"))
}

/// How a registry client is told of `failure`: the spec's error envelope.
/// A store shedding load is `429 TOOMANYREQUESTS` with its `Retry-After`
/// (clients retry it by themselves); an upstream that failed is `503`,
/// never a `500`.
pub fn failure_answer(failure: &Failure<'_>) -> LocalAnswer {
    let (status, code, message) = match failure {
        Failure::Refused(refusal) => {
            let mut answer =
                error(refusal.status, refusal.code.unwrap_or("DENIED"), &format!("pkgproxy: {}", refusal.reason));
            if let Some(allow) = refusal.allow {
                answer.headers.insert(ALLOW, HeaderValue::from_static(allow));
            }
            return answer;
        }
        Failure::Offline => (StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE", "pkgproxy is offline".to_string()),
        Failure::Overloaded { retry_after } => {
            let secs = retry_after_secs(*retry_after);
            let message = format!("pkgproxy: the registry is rate-limited or overloaded; try again in {secs} s");
            let mut answer = error(StatusCode::TOO_MANY_REQUESTS, "TOOMANYREQUESTS", &message);
            answer.headers.insert(RETRY_AFTER, HeaderValue::from(secs));
            return answer;
        }
        Failure::UpstreamFailed { reason } => {
            (StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE", format!("pkgproxy: the registry failed: {reason}"))
        }
        Failure::Internal { reason } => (StatusCode::INTERNAL_SERVER_ERROR, "UNKNOWN", format!("pkgproxy: {reason}")),
    };
    error(status, code, &message)
}

/// `{"errors": [{"code", "message"}]}` with `status`.
fn error(status: StatusCode, code: &str, message: &str) -> LocalAnswer {
    let body = json!({"errors": [{"code": code, "message": message, "detail": null}]});
    json_answer(status, Bytes::from(body.to_string()))
}

/// A JSON answer with the API version every answer of this side carries.
fn json_answer(status: StatusCode, body: Bytes) -> LocalAnswer {
    let mut answer = LocalAnswer::json(status, body);
    answer.headers.insert(HeaderName::from_static(API_VERSION.0), HeaderValue::from_static(API_VERSION.1));
    answer
}
