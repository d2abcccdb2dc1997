//! The control sockets: `stats.sock` (read-only) and `admin.sock`
//! (read-write). Both speak HTTP/1.1 with JSON bodies under `/pkgproxy/v1/`.

mod cache;
pub mod offline;
pub mod policy;

use std::sync::Arc;

use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use pkgproxy_control::{
    ErrorAnswer, ExportRequest, ItemReadiness, ModeRequest, NeedsRequest, ReadinessRequest, CACHE_ENTRIES_PATH,
    CACHE_GC_PATH, CACHE_VERIFY_PATH, CHECK_PATH, EXPLAIN_PATH, EXPORT_PATH, FROM_CONFIGURE_HOOK, IMPORT_PATH,
    IMPORT_TRUST_UNSIGNED, INFO_PATH, METRICS_PATH, NEEDS_PATH, OFFLINE_PATH, POLICY_PATH, POLICY_WHY_PATH,
    RELOAD_PATH, WARM_PATH,
};
use pkgproxy_sides::SideId;
use pkgproxy_upstream::offline::Mode;
use serde::Serialize;

use crate::body::ResponseBody;
use crate::state::State;

/// Which socket a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `stats.sock`: reads only.
    Stats,
    /// `admin.sock`: reads and changes.
    Admin,
}

/// Who may use an endpoint's method.
#[derive(Debug, Clone, Copy)]
enum Who {
    /// Either socket.
    Anyone,
    /// The admin socket only; the stats socket is told why.
    Admin(&'static str),
}

/// An endpoint of the control sockets: its path (one ending in `/` stands
/// for every path below it), its methods and who may use each. What the
/// stats socket may do is read from here, not from a guard on each answer.
struct Endpoint {
    path: &'static str,
    methods: &'static [(Method, Who)],
}

/// Every endpoint.
const ENDPOINTS: &[Endpoint] = &[
    Endpoint { path: INFO_PATH, methods: &[(Method::GET, Who::Anyone)] },
    Endpoint { path: METRICS_PATH, methods: &[(Method::GET, Who::Anyone)] },
    Endpoint { path: EXPLAIN_PATH, methods: &[(Method::GET, Who::Anyone)] },
    Endpoint { path: CHECK_PATH, methods: &[(Method::POST, Who::Anyone)] },
    Endpoint { path: POLICY_PATH, methods: &[(Method::GET, Who::Anyone)] },
    // As a client's request of the release would, it may fetch the
    // metadata that says when it was published.
    Endpoint { path: POLICY_WHY_PATH, methods: &[(Method::GET, Who::Anyone)] },
    // A warm's may ask upstreams first: the handler refuses it on the
    // stats socket.
    Endpoint { path: NEEDS_PATH, methods: &[(Method::POST, Who::Anyone)] },
    Endpoint {
        path: WARM_PATH,
        methods: &[(Method::POST, Who::Admin("the stats socket is read-only: warm the cache on the admin socket"))],
    },
    Endpoint {
        path: EXPORT_PATH,
        methods: &[(Method::POST, Who::Admin("a bundle carries the cache's content: export on the admin socket"))],
    },
    Endpoint {
        path: IMPORT_PATH,
        methods: &[(Method::POST, Who::Admin("the stats socket is read-only: import a bundle on the admin socket"))],
    },
    Endpoint {
        path: OFFLINE_PATH,
        methods: &[
            (Method::GET, Who::Anyone),
            (Method::PUT, Who::Admin("the stats socket is read-only: change the mode on the admin socket")),
        ],
    },
    Endpoint {
        path: CACHE_ENTRIES_PATH,
        methods: &[
            (Method::GET, Who::Admin("the keys name private repositories: list the cache on the admin socket")),
            (Method::DELETE, Who::Admin(CACHE_READ_ONLY)),
        ],
    },
    Endpoint { path: CACHE_GC_PATH, methods: &[(Method::POST, Who::Admin(CACHE_READ_ONLY))] },
    Endpoint {
        path: CACHE_VERIFY_PATH,
        methods: &[(Method::POST, Who::Admin(CACHE_READ_ONLY)), (Method::GET, Who::Anyone)],
    },
    Endpoint {
        path: RELOAD_PATH,
        methods: &[(Method::POST, Who::Admin("the stats socket is read-only: reload on the admin socket"))],
    },
];

/// How long a control request waits for the bodies already served to be
/// committed.
const SETTLING: std::time::Duration = std::time::Duration::from_secs(5);

/// The stats socket's refusal of what changes the cache.
const CACHE_READ_ONLY: &str = "the stats socket is read-only: change the cache on the admin socket";

/// Whether `role` may use `method` on `path`: `Err` is the status and the
/// reason when not (no such endpoint, a method it does not take, the
/// admin's only).
fn admitted(role: Role, method: &Method, path: &str) -> Result<(), (StatusCode, String)> {
    let matches = |endpoint: &&Endpoint| match endpoint.path.ends_with('/') {
        true => path.strip_prefix(endpoint.path).is_some_and(|below| !below.is_empty() && !below.contains('/')),
        false => endpoint.path == path,
    };
    let Some(endpoint) = ENDPOINTS.iter().find(matches) else {
        let socket = match role {
            Role::Stats => "stats socket",
            Role::Admin => "admin socket",
        };
        return Err((StatusCode::NOT_FOUND, format!("no such endpoint on the {socket}: {path}")));
    };
    let Some((_, who)) = endpoint.methods.iter().find(|(allowed, _)| allowed == method) else {
        let names: Vec<&str> = endpoint.methods.iter().map(|(allowed, _)| allowed.as_str()).collect();
        return Err((StatusCode::METHOD_NOT_ALLOWED, format!("use {}", names.join(" or "))));
    };
    match (who, role) {
        (Who::Admin(why), Role::Stats) => Err((StatusCode::FORBIDDEN, why.to_string())),
        _ => Ok(()),
    }
}

/// Answers a control request.
pub async fn handle(state: Arc<State>, role: Role, request: Request<Incoming>) -> Response<ResponseBody> {
    let path = request.uri().path().to_string();
    if let Err((status, why)) = admitted(role, request.method(), &path) {
        return error(status, &why);
    }
    // What a client was served is in every answer: a body already served
    // whole is committed first (a matter of milliseconds; a disk that
    // hangs does not hang the answer).
    let _ = tokio::time::timeout(SETTLING, state.cache.settled()).await;
    match (request.method().clone(), path.as_str()) {
        (_, INFO_PATH) => json(StatusCode::OK, &crate::report::info::gather(&state)),
        (_, METRICS_PATH) => metrics(&state),
        (_, EXPLAIN_PATH) => {
            let Some(url) = query_value(&request, "url") else {
                return error(StatusCode::BAD_REQUEST, "which request? ?url=...");
            };
            match tokio::task::spawn_blocking(move || crate::proxy::explain::explain(&state, &url)).await {
                Ok(Ok(explanation)) => json(StatusCode::OK, &explanation),
                Ok(Err(why)) => error(StatusCode::BAD_REQUEST, &why),
                Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the explanation stopped"),
            }
        }
        (_, CHECK_PATH) => match readiness_request(request).await {
            Ok(asked) => {
                let checked = tokio::task::spawn_blocking(move || {
                    let check = |url: &String| crate::proxy::readiness::check_for_clients(&state, url);
                    asked.urls.iter().map(check).collect::<Vec<ItemReadiness>>()
                });
                match checked.await {
                    Ok(told) => json(StatusCode::OK, &told),
                    Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the check stopped"),
                }
            }
            Err(answer) => answer,
        },
        (_, POLICY_PATH) => json(StatusCode::OK, &policy::report(&state, role)),
        (_, POLICY_WHY_PATH) => {
            let [side, name, version] = pkgproxy_control::POLICY_WHY_QUERY.map(|name| query_value(&request, name));
            let (Some(side), Some(name), Some(version)) = (side, name, version) else {
                return error(StatusCode::BAD_REQUEST, "which release? ?side=...&name=...&version=...");
            };
            match policy::why(&state, &side, &name, &version).await {
                Ok(told) => json(StatusCode::OK, &told),
                Err(why) => error(StatusCode::BAD_REQUEST, &why),
            }
        }
        (_, path) if path.starts_with(NEEDS_PATH) => {
            let side = path[NEEDS_PATH.len()..].to_owned();
            match json_body::<NeedsRequest>(request, NEEDS_LIMIT).await {
                Ok(asked) if asked.warm && role == Role::Stats => {
                    error(StatusCode::FORBIDDEN, "the stats socket is read-only: warm on the admin socket")
                }
                Ok(asked) => needs(state, &side, asked).await,
                Err(answer) => answer,
            }
        }
        (_, WARM_PATH) => match readiness_request(request).await {
            Ok(asked) => json(StatusCode::OK, &warm(&state, asked).await),
            Err(answer) => answer,
        },
        (_, EXPORT_PATH) => match json_body::<ExportRequest>(request, EXPORT_LIMIT).await {
            Ok(asked) => export(state, asked).await,
            Err(answer) => answer,
        },
        (_, IMPORT_PATH) => {
            let trust_unsigned = query_value(&request, IMPORT_TRUST_UNSIGNED).is_some_and(|value| value == "true");
            match crate::bundle::import::import(&state, request.into_body(), trust_unsigned).await {
                Ok(imported) => json(StatusCode::OK, &imported),
                Err(refused) => error(StatusCode::UNPROCESSABLE_ENTITY, &refused.to_string()),
            }
        }
        (Method::GET, OFFLINE_PATH) => json(StatusCode::OK, &offline::current(&state, None)),
        (_, OFFLINE_PATH) => put_offline(&state, request).await,
        (Method::GET, CACHE_ENTRIES_PATH) => {
            let (side, pattern) = (query_value(&request, "side"), query_value(&request, "pattern"));
            blocking(state, move |state| cache::list(state, side.as_deref(), pattern.as_deref())).await
        }
        (_, CACHE_ENTRIES_PATH) => {
            let Some(pattern) = query_value(&request, "pattern") else {
                return error(StatusCode::BAD_REQUEST, "name the entries to remove: ?pattern=...");
            };
            blocking(state, move |state| cache::remove(state, &pattern)).await
        }
        (_, CACHE_GC_PATH) => blocking(state, cache::collect).await,
        (Method::GET, CACHE_VERIFY_PATH) => json(StatusCode::OK, &cache::verifying(&state.cache)),
        (_, CACHE_VERIFY_PATH) => match state.cache.scrub_reached() {
            Some(_) => error(StatusCode::CONFLICT, "a verify of the cache is already running"),
            None => blocking(state, cache::verify).await,
        },
        (_, RELOAD_PATH) => match crate::reload::reload(&state, "the admin socket").await {
            Ok(()) => json(StatusCode::OK, &serde_json::json!({ "reloaded": true })),
            Err(reason) => error(StatusCode::UNPROCESSABLE_ENTITY, &reason),
        },
        _ => error(StatusCode::NOT_FOUND, &format!("no such endpoint: {path}")),
    }
}

/// The counters in Prometheus' format.
fn metrics(state: &State) -> Response<ResponseBody> {
    let learned: Vec<_> =
        state.sides.playing(|roles| roles.informing).flat_map(|(_, informing)| informing.learned()).collect();
    let text = crate::report::metrics::render(&crate::report::info::gather(state), &learned);
    let mut response = Response::new(ResponseBody::full(text));
    let content_type = HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8");
    response.headers_mut().insert(CONTENT_TYPE, content_type);
    response
}

/// The value of `name` in the request's query, percent-decoded.
fn query_value(request: &Request<Incoming>, name: &str) -> Option<String> {
    let query = request.uri().query()?;
    let value = query.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))?;
    Some(percent_encoding::percent_decode_str(value).decode_utf8_lossy().into_owned())
}

/// `work`'s answer, on a blocking thread (it writes the cache's index).
async fn blocking<T: Serialize + Send + 'static>(
    state: Arc<State>,
    work: impl FnOnce(&Arc<State>) -> Result<T, String> + Send + 'static,
) -> Response<ResponseBody> {
    match tokio::task::spawn_blocking(move || work(&state)).await {
        Ok(Ok(answer)) => json(StatusCode::OK, &answer),
        Ok(Err(reason)) => error(StatusCode::INTERNAL_SERVER_ERROR, &reason),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the cache's maintenance stopped"),
    }
}

/// The most a control request body may hold.
const BODY_LIMIT: usize = 4096;

/// The most URLs checked or warmed in one request: the client sends a long
/// list in parts.
const READINESS_BATCH: usize = 1000;

/// The most a request for a build's needs may hold (its sources, names,
/// images).
const NEEDS_LIMIT: usize = 1024 * 1024;

/// The JSON body of `request`, read up to `limit` bytes.
async fn json_body<T: serde::de::DeserializeOwned>(
    request: Request<Incoming>,
    limit: usize,
) -> Result<T, Response<ResponseBody>> {
    let body = match http_body_util::Limited::new(request.into_body(), limit).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => return Err(error(StatusCode::BAD_REQUEST, &format!("cannot read the request body: {e}"))),
    };
    serde_json::from_slice(&body).map_err(|e| error(StatusCode::BAD_REQUEST, &format!("not what this path takes: {e}")))
}

/// The most an export request may hold (the URLs of a large build).
const EXPORT_LIMIT: usize = 64 * 1024 * 1024;

/// How many requests not held an export's refusal names.
const NOT_HELD_NAMED: usize = 20;

/// A bundle of what `asked` needs, streamed; refused before anything is
/// written when something is not held.
async fn export(state: Arc<State>, asked: ExportRequest) -> Response<ResponseBody> {
    if asked.policy && state.gate.policy().is_none() {
        return error(
            StatusCode::CONFLICT,
            "no policy is in force here: there are no malicious-package records to carry",
        );
    }
    let planning = Arc::clone(&state);
    let planned = tokio::task::spawn_blocking(move || crate::bundle::export::plan(&planning, &asked)).await;
    match planned {
        Ok(Ok(planned)) => {
            tracing::info!(items = planned.items(), "exporting a bundle");
            let mut response = Response::new(ResponseBody::Upstream(crate::bundle::export::stream(state, planned)));
            response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/x-tar"));
            response
        }
        Ok(Err(not_held)) => {
            let mut named = not_held.iter().take(NOT_HELD_NAMED).cloned().collect::<Vec<_>>().join("; ");
            if not_held.len() > NOT_HELD_NAMED {
                named.push_str(&format!("; and {} more", not_held.len() - NOT_HELD_NAMED));
            }
            let why = format!("{} of what was asked is not held (warm it first): {named}", not_held.len());
            error(StatusCode::CONFLICT, &why)
        }
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the export's planning stopped"),
    }
}

/// What the build needs of the side named `side`; for a warm, after the
/// request the side asks to be made first.
async fn needs(state: Arc<State>, side: &str, asked: NeedsRequest) -> Response<ResponseBody> {
    let Some(id) = SideId::from_name(side) else {
        return error(StatusCode::NOT_FOUND, &format!("no side is called {side:?}"));
    };
    let first = match asked.warm {
        true => state.sides.get(id).roles().resolving.map_or(Ok(None), |resolving| resolving.needs_first(&asked.asked)),
        false => Ok(None),
    };
    let refused = match first {
        Ok(Some(first)) => crate::proxy::needs::ask_first(&state, state.sides.get(id), first).await,
        Ok(None) => Vec::new(),
        Err(why) => return error(StatusCode::BAD_REQUEST, &why.to_string()),
    };
    // Dropped with this future when the requester goes: the search stops.
    let requester = crate::proxy::needs::Requester::default();
    let gone = requester.gone();
    tracing::debug!(side = id.as_str(), "following what a build needs");
    let resolved = tokio::task::spawn_blocking(move || {
        let found = crate::proxy::needs::resolve(&state, state.sides.get(id), asked.asked, &gone);
        if found.is_err() && gone.load(std::sync::atomic::Ordering::Relaxed) {
            tracing::info!(side = id.as_str(), "the search for what a build needs stopped: its requester is gone");
        }
        found
    });
    let resolved = resolved.await;
    drop(requester);
    match resolved {
        Ok(Ok(mut needs)) => {
            needs.unknown.splice(0..0, refused);
            json(StatusCode::OK, &needs)
        }
        Ok(Err(why)) => error(StatusCode::BAD_REQUEST, &why.to_string()),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the search for what the build needs stopped"),
    }
}

/// The body of a check or a warm, read.
async fn readiness_request(request: Request<Incoming>) -> Result<ReadinessRequest, Response<ResponseBody>> {
    let asked: ReadinessRequest = json_body(request, READINESS_BATCH * 2048).await?;
    if asked.urls.len() > READINESS_BATCH {
        return Err(error(StatusCode::BAD_REQUEST, &format!("at most {READINESS_BATCH} URLs at once")));
    }
    Ok(asked)
}

/// Warms the asked URLs, a few at a time (the client sends small batches
/// and shows progress between them).
async fn warm(state: &Arc<State>, asked: ReadinessRequest) -> Vec<ItemReadiness> {
    use futures_util::StreamExt;
    const AT_ONCE: usize = 4;
    let mut headers = http::HeaderMap::new();
    for (name, value) in &asked.headers {
        if let (Ok(name), Ok(value)) = (http::HeaderName::try_from(name.as_str()), HeaderValue::from_str(value)) {
            headers.append(name, value);
        }
    }
    let headers = Arc::new(headers);
    futures_util::stream::iter(asked.urls)
        .map(|url| {
            let (state, headers) = (Arc::clone(state), Arc::clone(&headers));
            async move { crate::proxy::readiness::warm(&state, &url, &headers).await }
        })
        .buffered(AT_ONCE)
        .collect()
        .await
}

async fn put_offline(state: &Arc<State>, request: Request<Incoming>) -> Response<ResponseBody> {
    let body = match http_body_util::Limited::new(request.into_body(), BODY_LIMIT).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("cannot read the request body: {e}")),
    };
    let asked: ModeRequest = match serde_json::from_slice(&body) {
        Ok(asked) => asked,
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("expected {{\"mode\": \"...\"}}: {e}")),
    };
    match asked.mode.parse::<Mode>() {
        Ok(mode) => {
            let from_hook = match asked.from.as_deref() {
                None => false,
                Some(FROM_CONFIGURE_HOOK) => true,
                Some(other) => return error(StatusCode::BAD_REQUEST, &format!("unknown \"from\": {other:?}")),
            };
            if asked.cluster {
                let Some(tier) = state.cluster.as_ref().and_then(|cluster| cluster.tier()) else {
                    return error(StatusCode::CONFLICT, "this pkgproxy is not connected to a cluster store");
                };
                if let Err(failed) = pkgproxy_cluster::switch::set(&tier, mode.as_str()).await {
                    return error(StatusCode::BAD_GATEWAY, &format!("the cluster's switch was not set: {failed}"));
                }
            }
            json(StatusCode::OK, &offline::set(state, mode, from_hook).await)
        }
        Err(e) => error(StatusCode::BAD_REQUEST, &e.to_string()),
    }
}

fn json(status: StatusCode, value: &impl Serialize) -> Response<ResponseBody> {
    let mut body = serde_json::to_vec_pretty(value).unwrap_or_else(|_| b"{}".to_vec());
    body.push(b'\n');
    let mut response = Response::new(ResponseBody::full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn error(status: StatusCode, message: &str) -> Response<ResponseBody> {
    json(status, &ErrorAnswer { error: message.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_changes_pkgproxy_is_the_admin_socket_s_and_the_stats_socket_is_told_why() {
        for (method, path) in [
            (Method::POST, WARM_PATH),
            (Method::POST, EXPORT_PATH),
            (Method::POST, IMPORT_PATH),
            (Method::PUT, OFFLINE_PATH),
            (Method::GET, CACHE_ENTRIES_PATH),
            (Method::DELETE, CACHE_ENTRIES_PATH),
            (Method::POST, CACHE_GC_PATH),
            (Method::POST, CACHE_VERIFY_PATH),
            (Method::POST, RELOAD_PATH),
        ] {
            let (status, why) = admitted(Role::Stats, &method, path).unwrap_err();
            assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}");
            assert!(why.contains("admin socket"), "{method} {path}: {why}");
            assert!(admitted(Role::Admin, &method, path).is_ok(), "{method} {path}");
        }
        let needs_apt = format!("{NEEDS_PATH}apt");
        let read = [(Method::GET, INFO_PATH), (Method::POST, CHECK_PATH), (Method::GET, OFFLINE_PATH)];
        let read = read.into_iter().chain([(Method::GET, POLICY_PATH), (Method::GET, POLICY_WHY_PATH)]);
        for (method, path) in read.chain([(Method::POST, needs_apt.as_str())]) {
            assert!(admitted(Role::Stats, &method, path).is_ok(), "{method} {path}");
        }
    }

    #[test]
    fn a_wrong_method_is_told_the_right_ones_and_an_unknown_path_is_not_found() {
        assert_eq!(admitted(Role::Admin, &Method::DELETE, OFFLINE_PATH).unwrap_err().1, "use GET or PUT");
        for path in ["/pkgproxy/v1/nothing", NEEDS_PATH, "/pkgproxy/v1/needs/apt/more"] {
            assert_eq!(admitted(Role::Stats, &Method::POST, path).unwrap_err().0, StatusCode::NOT_FOUND, "{path}");
        }
        let paths: std::collections::HashSet<&str> = ENDPOINTS.iter().map(|endpoint| endpoint.path).collect();
        assert_eq!(paths.len(), ENDPOINTS.len(), "each path once");
    }
}
