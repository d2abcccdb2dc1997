//! What the proxy listener says of pkgproxy's health, for a load balancer
//! or a monitor: `GET /pkgproxy/v1/health` is `200` when pkgproxy can
//! serve (offline too: it serves what it holds, and says so), `503` with
//! the reason when it cannot (its cache folder cannot be written); and,
//! when `[status] metrics = true`, the counters in Prometheus' format at
//! `/metrics`, for a scraper that cannot read a unix socket. Both answer
//! only the clients the listener serves (`[server] allow`), and hold
//! nothing the status page does not show.

use http::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use pkgproxy_control::{HEALTH_PATH, METRICS_PATH};
use serde::Serialize;

use crate::body::ResponseBody;
use crate::state::State;

/// The health answer's body.
#[derive(Debug, Serialize)]
struct Health {
    /// `ok`, or `unavailable`.
    status: &'static str,
    /// Why not, when it cannot serve.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// The offline mode in effect (`never`, `offline`, `store-overloaded`).
    offline_mode: &'static str,
}

/// The answer to `request` when it asks for the health or the metrics;
/// `None` for every other request.
pub async fn answer<B>(state: &std::sync::Arc<State>, request: &Request<B>) -> Option<Response<ResponseBody>> {
    let uri = request.uri();
    if uri.scheme().is_some() || !matches!(*request.method(), Method::GET | Method::HEAD) {
        return None;
    }
    match uri.path() {
        HEALTH_PATH => Some(health(state).await),
        METRICS_PATH if state.status_metrics.load(std::sync::atomic::Ordering::Relaxed) => Some(metrics(state)),
        _ => None,
    }
}

async fn health(state: &std::sync::Arc<State>) -> Response<ResponseBody> {
    let offline_mode = state.upstream.switch.mode().as_str();
    let checked = {
        let state = std::sync::Arc::clone(state);
        tokio::task::spawn_blocking(move || cache_writable(&state.cache)).await
    };
    let reason = match checked {
        Ok(Ok(())) => None,
        Ok(Err(reason)) => Some(reason),
        Err(_) => Some("the check of the cache folder stopped".to_owned()),
    };
    let status = if reason.is_some() { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
    let health = Health { status: if reason.is_some() { "unavailable" } else { "ok" }, reason, offline_mode };
    let body = serde_json::to_vec(&health).unwrap_or_default();
    respond(status, "application/json", body.into())
}

/// Whether a download could be written now: a file made and removed in
/// the cache's folder for downloads in progress.
fn cache_writable(cache: &pkgproxy_cache::Cache) -> Result<(), String> {
    let tmp = cache.dir().join("tmp");
    let probe = tempfile::Builder::new().prefix("health-").tempfile_in(&tmp);
    match probe {
        Ok(file) => file.close().map_err(|error| format!("the cache folder {}: {error}", tmp.display())),
        Err(error) => Err(format!("the cache folder cannot be written ({error})")),
    }
}

fn metrics(state: &State) -> Response<ResponseBody> {
    let learned: Vec<_> =
        state.sides.playing(|roles| roles.informing).flat_map(|(_, informing)| informing.learned()).collect();
    let text = crate::report::metrics::render(&crate::report::info::gather(state), &learned);
    respond(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", text.into())
}

fn respond(status: StatusCode, content_type: &'static str, body: bytes::Bytes) -> Response<ResponseBody> {
    let length = body.len();
    let mut response = Response::new(ResponseBody::full(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(length));
    response
}
