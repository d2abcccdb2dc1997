//! The request path of the proxy listener: route a request to the tunnel or
//! to a side (absolute-form requests are apt's, `/go/...` the go side's),
//! copy it to the mirrors, carry out the side's decision, and answer.

pub mod answer;
mod cached;
mod checksums;
mod fetching;
mod negative;

pub use negative::NegativeCache;
pub mod plan;
mod tunnel;

use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use pkgproxy_sides::{Decision, Refusal, Side, Target};
use pkgproxy_upstream::offline::Mode;

use crate::body::ResponseBody;
use crate::config::Step;
use crate::offline::RefusalNote;
use crate::shadow::{ClientInfo, Original, Tapped};
use crate::state::State;
use answer::Asked;

/// Answers one request from a client of the proxy listener.
pub async fn handle(state: Arc<State>, request: Request<Incoming>) -> Response<ResponseBody> {
    if state.loop_mark.seen_in(request.headers()) {
        return answer::text(
            StatusCode::LOOP_DETECTED,
            "pkgproxy: request loop: this request already passed through this pkgproxy (is a mirror configured to be pkgproxy itself?)",
        );
    }
    let note = request.extensions().get::<RefusalNote>().cloned().unwrap_or_default();
    if request.method() == Method::CONNECT {
        return tunnel::handle(&state, request, &note).await;
    }
    let Some((side, target)) = route(&state, &request) else {
        return answer::text(
            StatusCode::NOT_FOUND,
            "pkgproxy: point apt at it with Acquire::http::Proxy \"http://HOST:PORT/\"; and go with GOPROXY=http://HOST:PORT/go",
        );
    };
    let client = request.extensions().get::<ClientInfo>().copied();
    let tapped = tap(&state, &request, side, client);
    let upstream_answer = tapped.answer();
    let (parts, body) = request.into_parts();
    mirror_body(tapped, body).await;
    if !matches!(parts.method, Method::GET | Method::HEAD) {
        return method_not_allowed();
    }
    let asked = Asked {
        method: &parts.method,
        headers: &parts.headers,
        note: &note,
        upstream_answer: &upstream_answer,
        client,
    };
    let decision = match target {
        Some(target) => state.apt.classify(target),
        None => state.settings.go.classify(go_path_of(parts.uri.path()).unwrap_or_default()),
    };
    match decision {
        Decision::Refuse(refusal) => {
            state.stats.side(side).refused();
            refuse(&refusal)
        }
        Decision::Cache(decided) => {
            note.handled_by(decided.side);
            cached::serve(&state, &asked, decided).await
        }
    }
}

/// Which side a request is for: an absolute-form request is apt's (a
/// forward-proxy request), `/go/...` the go side's; `None` for neither.
fn route(state: &State, request: &Request<Incoming>) -> Option<(Side, Option<Target>)> {
    let go = go_path_of(request.uri().path()).is_some();
    match target(request) {
        // GOPROXY=http://pkgproxy/go with pkgproxy as the HTTP proxy too:
        // the go command then asks pkgproxy for its own address.
        Some(target) if go && target.port == state.listen.port() => Some((Side::Go, None)),
        Some(target) => Some((Side::Apt, Some(target))),
        None if go => Some((Side::Go, None)),
        None => None,
    }
}

fn method_not_allowed() -> Response<ResponseBody> {
    let mut response = answer::text(StatusCode::METHOD_NOT_ALLOWED, "pkgproxy serves GET and HEAD only");
    response.headers_mut().insert(http::header::ALLOW, http::HeaderValue::from_static("GET, HEAD"));
    response
}

/// The path below `/go` of a request of the go side.
fn go_path_of(path: &str) -> Option<&str> {
    match path.strip_prefix("/go") {
        Some("") => Some("/"),
        Some(rest) if rest.starts_with('/') => Some(rest),
        _ => None,
    }
}

/// The copies the mirrors make of a request: an apt request as the proxy
/// request it is, a go request by its path and query.
fn tap(state: &State, request: &Request<Incoming>, side: Side, client: Option<ClientInfo>) -> Tapped {
    if state.mirrors.is_empty() {
        return Tapped::default();
    }
    let uri = match side {
        Side::Apt => request.uri().to_string(),
        Side::Go => request.uri().path_and_query().map_or("/", |p| p.as_str()).to_string(),
    };
    state.mirrors.tap(&Original {
        step: Step::Request,
        side,
        method: request.method(),
        uri: &uri,
        headers: request.headers(),
        client,
        offline: state.upstream.switch.mode() == Mode::Offline,
    })
}

/// Sends the copies of a request. pkgproxy does not use request bodies, so
/// a body a mirror copies is read here, for the copies only, up to the
/// largest a mirror takes (a longer one is not copied).
async fn mirror_body(tapped: Tapped, body: Incoming) {
    if tapped.is_empty() {
        return;
    }
    if body.is_end_stream() {
        return tapped.send();
    }
    let mut teed = tapped.tee(body);
    let read = async {
        while let Some(Ok(_)) = teed.frame().await {
            if teed.is_over_limit() {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(BODY_READ_LIMIT, read).await;
}

/// How long a request body that a mirror copies may take to arrive.
const BODY_READ_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The target of an absolute-form request; `None` for origin-form.
fn target(request: &Request<Incoming>) -> Option<Target> {
    let uri = request.uri();
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    let port = uri.port_u16().unwrap_or(if scheme == "https" { 443 } else { 80 });
    Some(Target { scheme, host, port, raw_path: uri.path().to_string() })
}

/// The answer to a refused request.
pub fn refuse(refusal: &Refusal) -> Response<ResponseBody> {
    let status = StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::FORBIDDEN);
    answer::text(status, &format!("pkgproxy: {}", refusal.reason))
}
