//! The status page a person opens at `http://HOST:PORT/`: what pkgproxy is
//! doing and how to point each client at it, rendered here (no external
//! assets: it must work offline), and its JSON at
//! [`pkgproxy_control::STATUS_PATH`], which the page's script polls.
//!
//! Both are on the proxy listener, so everyone who may use the proxy may
//! read them: they hold only what the page shows (no credentials, no
//! paths of the machine, nothing only the admin socket tells).
//! `[status] page = false` turns both off.

mod chart;
mod page;

use http::header::HeaderValue;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use pkgproxy_control::{
    CacheStatus, ClientSetup, ShadowInfo, SideStatus, Status, StatusOffline, StatusPolicy, STATUS_PATH,
};
use pkgproxy_metrics::SideCounter;

use crate::body::ResponseBody;
use crate::html;
use crate::redact::without_user;
use crate::state::State;

/// The page's own answer to `request`, when it asks for the page or its
/// JSON and they are on; `None` for every other request.
pub fn answer<B>(state: &State, request: &Request<B>) -> Option<Response<ResponseBody>> {
    let uri = request.uri();
    if !state.status_page.load(std::sync::atomic::Ordering::Relaxed) || uri.scheme().is_some() {
        return None;
    }
    let wanted = match uri.path() {
        "/" => Wanted::Page,
        STATUS_PATH => Wanted::Json,
        _ => return None,
    };
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        let body = "pkgproxy: the status page answers GET and HEAD only".into();
        return Some(html::local(StatusCode::METHOD_NOT_ALLOWED, headers, body));
    }
    let host = crate::context::host_of(uri, request.headers(), state.listen);
    let status = gather(state, &host);
    Some(match wanted {
        Wanted::Page => html::page("text/html; charset=utf-8", STATUS_POLICY, page::render(&status, &host).into()),
        Wanted::Json => {
            html::page("application/json", STATUS_POLICY, serde_json::to_vec(&status).unwrap_or_default().into())
        }
    })
}

/// What the page may load and run: its own inline style and script, the
/// charts' images it draws, its JSON, and nothing else.
const STATUS_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

enum Wanted {
    Page,
    Json,
}

/// Every side's lines pointing its clients at pkgproxy at `host`.
fn clients(sides: &pkgproxy_sides::Sides, host: &str) -> Vec<ClientSetup> {
    let lines = |side: &dyn pkgproxy_sides::Side| {
        let setup = side.client_setup(host)?;
        Some(ClientSetup { side: side.id().to_string(), clients: setup.clients, lines: setup.lines })
    };
    sides.iter().filter_map(lines).collect()
}

/// What a page loaded now reads, with the setup lines for `host`.
pub fn gather(state: &State, host: &str) -> Status {
    crate::upkeep::look_at_traffic(state);
    let (entries, size) = state.cache.totals();
    let usage = state.cache.usage();
    let auto = state.auto_offline.report();
    let upstreams = crate::report::upstreams(state);
    let lxd_remotes = crate::report::lxd_remotes(state);
    Status {
        version: env!("CARGO_PKG_VERSION").to_string(),
        uptime_seconds: state.started.elapsed().as_secs(),
        offline: StatusOffline {
            mode: state.upstream.switch.mode().as_str().to_string(),
            reason: auto.in_effect.map(|(_, reason)| reason.as_str().to_string()),
            since: state.upstream.switch.since().map(pkgproxy_cache::unix_secs),
            upstreams: upstreams.into_iter().filter(|upstream| upstream.state != "closed").collect(),
        },
        sides: state.sides.iter().map(|side| side_status(state, side.id())).collect(),
        cache: CacheStatus {
            entries: entries as u64,
            size_bytes: size,
            max_size_bytes: state.cache.quota().max_size,
            free_bytes: usage.free,
            disk_bytes: usage.bytes,
            filesystem_bytes: usage.total,
        },
        pools: state.upstream.transport.report().into_iter().map(crate::report::pool_info).map(without_users).collect(),
        mirrors: state
            .shadows
            .load()
            .report()
            .into_iter()
            .map(|mirror| ShadowInfo { target: without_user(&mirror.target), ..mirror })
            .collect(),
        setup: clients(&state.sides, host),
        lxd_remotes,
        cluster: state.cluster.as_ref().map(|cluster| cluster.info()),
        apt_valid_until: crate::report::apt_valid_until(state),
        recent_trouble: state.trouble.recent(),
        policy: state
            .gate
            .policy()
            .map(|policy| StatusPolicy { rules: policy.describe(), recent: state.gate.recent_blocked(false) }),
    }
}

fn side_status(state: &State, side: pkgproxy_sides::SideId) -> SideStatus {
    let counters = state.stats.side(side).snapshot();
    let now = pkgproxy_cache::unix_secs(state.clock.now());
    let (hits, misses) = (counters.get(SideCounter::Hits), counters.get(SideCounter::Misses));
    SideStatus {
        name: side.to_string(),
        requests: counters.get(SideCounter::Requests),
        hits,
        misses,
        hit_ratio: (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64),
        bytes_saved: counters.get(SideCounter::BytesFromCache),
        bytes_fetched: counters.get(SideCounter::BytesFromUpstream),
        refused: counters.get(SideCounter::Refused),
        failed: counters.get(SideCounter::Failed),
        last_hour: state.history.series(side, crate::history::HOUR, now),
        last_day: state.history.series(side, crate::history::DAY, now),
    }
}

fn without_users(mut pool: pkgproxy_control::PoolInfo) -> pkgproxy_control::PoolInfo {
    for instance in &mut pool.instances {
        instance.url = without_user(&instance.url);
    }
    pool
}
