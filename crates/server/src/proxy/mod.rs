//! The request path of the proxy listener, in the order a request meets it:
//!
//! 1. the loop check (a request that already passed through here);
//! 2. the route table ([`pkgproxy_sides::route`]): `CONNECT` to the tunnel,
//!    everything else to the side mounted for it;
//! 3. the shadows' tap: copies of the request for traffic mirroring, sent
//!    from tasks of their own (the client never waits for them);
//! 4. the side's decision ([`pkgproxy_sides::Side::classify`]), carried
//!    out: refused, served through the cache ([`cached`]), forwarded
//!    uncached ([`forward`]) or answered by the side;
//! 5. the outcome mapped to an answer, once ([`outcome::finished`]), in
//!    the side's own words when pkgproxy cannot serve the request, with what
//!    the access log says of it beside it (the gateway writes both).

mod access;
pub mod answer;
mod cached;
pub mod decide;
pub mod explain;
mod fetching;
mod finish;
mod follow;
mod for_sides;
mod forward;
mod gate;
mod generation;
mod lookup;
mod multipart;
pub mod needs;
pub mod outcome;
mod outgoing;
mod peer;
pub mod plan;
mod pointer;
pub mod readiness;
pub mod reason;
mod rewrite;
pub mod ruling;
pub mod supplied;
mod tunnel;
mod upload;

use std::sync::Arc;

use http::header::AUTHORIZATION;
use http::{Request, Response, StatusCode};
use http_body::Body;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use pkgproxy_control::CERTIFICATE_PATH;
use pkgproxy_metrics::Timing;
use pkgproxy_sides::{route, Decision, Mount, Route, Side, SideId, Target, UpstreamAuth};
use pkgproxy_upstream::offline::Mode;
use tokio::time::Instant;

use crate::access_log::{CacheUse, Note};
use crate::body::ResponseBody;
use crate::config::Step;
use crate::context::{ClientInfo, Exchange};
use crate::shadow::{Original, Tapped};
use crate::state::State;
use crate::stats::Requester;
use outcome::{Failed, Finished, Outcome};

/// What a request for no side is told: where each side's clients are
/// pointed, as the status page says it.
fn hint(state: &State, request: &Request<Incoming>) -> String {
    let host = crate::context::host_of(request.uri(), request.headers(), state.listen);
    let mut hint = format!("pkgproxy: no side of pkgproxy serves this path. Point each client at http://{host}/:");
    for side in state.sides.iter() {
        if let Some(setup) = side.client_setup(&host) {
            // The line alone: its comment speaks of the page's next lines.
            let first = setup.lines.first().map(String::as_str).unwrap_or_default();
            let first = first.split("   #").next().unwrap_or(first);
            hint.push_str(&format!("\n  {} ({}): {first}", side.id(), setup.clients));
        }
    }
    hint.push_str(&format!(
        "\nor run pkgproxyctl setup CLIENT --addr {host}; the page at http://{host}/ shows it all."
    ));
    hint
}

/// The listener's TLS certificate, PEM.
fn certificate(tls: &crate::tls::ListenerTls) -> Response<ResponseBody> {
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/x-pem-file"));
    let pem = tls.certificate_pem.clone();
    outcome::local(pkgproxy_sides::LocalAnswer::new(StatusCode::OK, headers, pem.into()))
}

/// Answers one request of `client` on the proxy listener: the response,
/// and what the access log and the trouble table say of it (which side
/// served it, and how).
pub async fn handle(state: Arc<State>, request: Request<Incoming>, client: ClientInfo) -> Finished {
    tracing::debug!(method = %request.method(), uri = %request.uri(), "request");
    let arrived = Instant::now();
    if let Some(own) = own_answer(&state, &request).await {
        return own;
    }
    match route::route(request.method(), request.uri(), state.listen.port()) {
        Route::Tunnel => {
            let outcome = Box::pin(tunnel::handle(&state, request)).await;
            // A tunnel that could not open asked nothing of the cache.
            let cache = match &outcome {
                Outcome::Failed(_) => CacheUse::Refused,
                _ => CacheUse::Passed,
            };
            let finished = outcome::finished(None, state.upstream.switch.mode(), outcome);
            Finished { note: Note { cache, ..finished.note }, ..finished }
        }
        Route::Side { side, mount, target } => {
            let side = state.sides.owner(side, target.as_ref());
            let outcome = serve(&state, side, mount, target, request, client).await;
            let mode = state.upstream.switch.mode();
            let ending = outcome.ending(mode);
            state.stats.count(side.id(), Requester::Client, ending);
            let mut finished = outcome::finished(Some(side), mode, outcome);
            // Timed as it is counted: the requests a side served.
            if ending.is_some() {
                state.stats.time(side.id(), Timing::Request, arrived.elapsed());
            }
            // Through the forward proxy, the content is the archive's
            // origin's in a browser, not pkgproxy's.
            if matches!(mount, Mount::Prefix(_)) {
                crate::headers::confine(finished.response.headers_mut());
            }
            finished
        }
        Route::Nowhere => Finished::own(answer::text(StatusCode::NOT_FOUND, &hint(&state, &request)), CacheUse::Local),
        Route::WrongScheme => {
            let refused = "pkgproxy: a request for pkgproxy's own paths names http://, or no scheme at all";
            Finished::own(answer::text(StatusCode::BAD_REQUEST, refused), CacheUse::Refused)
        }
    }
}

/// The answer of pkgproxy's own to a request no side is asked about: a
/// loop, the certificate, a peer's tail, the status page, the browser,
/// the health checks.
async fn own_answer(state: &Arc<State>, request: &Request<Incoming>) -> Option<Finished> {
    if state.loop_mark.seen_in(request.headers()) {
        let refused = answer::text(
            StatusCode::LOOP_DETECTED,
            "pkgproxy: request loop: this request already passed through this pkgproxy (is a mirror configured to be pkgproxy itself?)",
        );
        return Some(Finished::own(refused, CacheUse::Refused));
    }
    let own = request.uri().scheme().is_none();
    let page = if own && request.uri().path() == CERTIFICATE_PATH {
        Some(certificate(&state.tls))
    } else if own && request.uri().path() == pkgproxy_cluster::peer::TAIL_PATH {
        Some(peer::serve(state, request).await)
    } else if let Some(page) = crate::status::answer(state, request) {
        Some(page)
    } else if let Some(page) = crate::browse::answer(state, request).await {
        Some(page)
    } else {
        crate::health::answer(state, request).await
    };
    page.map(|page| Finished::own(page, CacheUse::Local))
}

/// Serves a request routed to `side` through `mount`.
async fn serve(
    state: &Arc<State>,
    side: &dyn Side,
    mount: Mount,
    target: Option<Target>,
    request: Request<Incoming>,
    client: ClientInfo,
) -> Outcome {
    let client = Some(client);
    let tapped = tap(state, &request, side.id(), mount, client);
    let upstream_answer = tapped.answer();
    let (parts, body) = request.into_parts();
    let host = crate::context::host_of(&parts.uri, &parts.headers, state.listen);
    let routed = pkgproxy_sides::Request {
        method: &parts.method,
        headers: &parts.headers,
        mount,
        path: route::below(mount, parts.uri.path()),
        query: parts.uri.query(),
        target: target.as_ref(),
        host: &host,
        secure: client.is_some_and(|client| client.secure),
    };
    let exchange = Exchange {
        method: &parts.method,
        headers: &parts.headers,
        mount,
        upstream_answer: &upstream_answer,
        client,
        target: Some(&parts.uri),
        supply: None,
    };
    match side.classify(&routed) {
        // The kinds of request a hit is not are boxed: the hits' tasks
        // would otherwise carry (and copy) their state too.
        Decision::Forward(request) => Box::pin(forward::forward(state, &exchange, request, tapped.tee(body))).await,
        Decision::Refuse(refusal) => {
            copy_body(tapped, body).await;
            Failed::Refused(refusal).into()
        }
        Decision::Cache(request) => {
            copy_body(tapped, body).await;
            let as_pkgproxy = matches!(request.asking.auth, UpstreamAuth::Bearer { .. });
            let outcome = cached::serve(state, &exchange, side, *request).await;
            or_with_own_credentials(state, &exchange, side, &routed, as_pkgproxy, outcome).await
        }
        Decision::Pointer(pointer) => {
            copy_body(tapped, body).await;
            let as_pkgproxy = matches!(pointer.name.asking.auth, UpstreamAuth::Bearer { .. });
            let outcome = Box::pin(pointer::serve(state, &exchange, side, *pointer)).await;
            or_with_own_credentials(state, &exchange, side, &routed, as_pkgproxy, outcome).await
        }
        Decision::Generation(generation) => {
            copy_body(tapped, body).await;
            Box::pin(generation::serve(state, &exchange, side, *generation, &routed)).await
        }
        Decision::Answer(answer) => {
            copy_body(tapped, body).await;
            Outcome::Local(answer)
        }
    }
}

/// `outcome`, or when it is the upstream's refusal of pkgproxy's own
/// credentials (`as_pkgproxy`) and the client brought its own, the answer
/// with the client's.
async fn or_with_own_credentials(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    side: &dyn Side,
    routed: &pkgproxy_sides::Request<'_>,
    as_pkgproxy: bool,
    outcome: Outcome,
) -> Outcome {
    match as_pkgproxy && refused(&outcome) && exchange.headers.contains_key(AUTHORIZATION) {
        true => Box::pin(with_own_credentials(state, exchange, side, routed)).await.unwrap_or(outcome),
        false => outcome,
    }
}

/// Whether the upstream refused pkgproxy's own credentials (`401`, `403`).
fn refused(outcome: &Outcome) -> bool {
    let status = match outcome {
        Outcome::Answered(answer) => answer.status(),
        Outcome::Local(answer) => answer.status,
        Outcome::Failed(_) => return false,
    };
    matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
}

/// The upstream's refusal of pkgproxy's own token taught the side that the
/// repository is private: a client that brought its own credentials is
/// served with them at once, not told to try again. `None` when the side
/// would still not use them.
async fn with_own_credentials(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    side: &dyn Side,
    routed: &pkgproxy_sides::Request<'_>,
) -> Option<Outcome> {
    match side.classify(routed) {
        Decision::Forward(request) => {
            Some(forward::forward(state, exchange, request, http_body_util::Empty::<bytes::Bytes>::new()).await)
        }
        Decision::Cache(request) if matches!(request.asking.auth, UpstreamAuth::Client(_)) => {
            Some(cached::serve(state, exchange, side, *request).await)
        }
        Decision::Pointer(pointer) if matches!(pointer.name.asking.auth, UpstreamAuth::Client(_)) => {
            Some(pointer::serve(state, exchange, side, *pointer).await)
        }
        _ => None,
    }
}

/// The copies the shadows make of a request: a forward-proxy request as the
/// proxy request it is, a mounted side's request by its path and query.
fn tap(state: &State, request: &Request<Incoming>, side: SideId, mount: Mount, client: Option<ClientInfo>) -> Tapped {
    if state.shadows.load().is_empty() {
        return Tapped::default();
    }
    let uri = match mount {
        Mount::ForwardProxy => request.uri().to_string(),
        Mount::Prefix(_) => request.uri().path_and_query().map_or("/", |p| p.as_str()).to_string(),
    };
    state.shadows.load().tap(&Original {
        step: Step::Request,
        side,
        method: request.method(),
        uri: &uri,
        headers: request.headers(),
        client,
        offline: state.upstream.switch.mode() == Mode::Offline,
    })
}

/// Sends the copies of a request whose body pkgproxy does not use: a body
/// a shadow copies is read here, for the copies only, up to the largest a
/// shadow takes (a longer one is not copied).
async fn copy_body(tapped: Tapped, body: Incoming) {
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

/// How long a request body that a shadow copies may take to arrive.
const BODY_READ_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);
