//! The cache's page on the proxy listener, at [`BROWSE_PATH`] beside the
//! status page, and its JSON at [`BROWSE_JSON_PATH`]: per side, the
//! packages held with their versions, sizes, last use and hits, searchable
//! by name (`?q=`), and the top clients and packages of the last day
//! ([`crate::browsing::top`]). Rendered here, with no asset from elsewhere.
//!
//! Every client of the proxy may read it, so it names nothing only some
//! clients may read: a side names its keys through its reporting role
//! ([`pkgproxy_sides::role::reporting`]), which says what is private; a side
//! without the role is shown as totals. `[status] browse = false` turns
//! the page and its JSON off.

mod listing;
mod page;

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use http::header::HeaderValue;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use pkgproxy_control::{Browse, BrowseSide, TopClient, TopPackage, BROWSE_JSON_PATH, BROWSE_PATH};
use pkgproxy_sides::role::Named;
use pkgproxy_sides::{CachedRequest, SideId};

use crate::body::ResponseBody;
use crate::html;
use crate::state::State;
use listing::Limits;

/// What the page may load and run: its own inline style and script, its
/// search form, its own JSON fetched as one types, and nothing else.
const BROWSE_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// How much of each side the page lists.
const LIMITS: Limits = Limits { packages: 200, versions: 20, grouped: 50_000 };

/// How many top clients and packages are shown.
const TOP_SHOWN: usize = 10;

/// A file of `request` was served to `client`: counted for the top
/// clients and packages (content only some clients may read, by client
/// alone).
pub fn served(
    browsing: &crate::browsing::Browsing,
    clock: &dyn pkgproxy_cache::Clock,
    client: IpAddr,
    request: &CachedRequest,
) {
    let key = request.access.is_none().then_some(request.key.as_str());
    browsing.top.served(client, key, pkgproxy_cache::unix_secs(clock.now()));
}

/// The page's own answer to `request`, when it asks for the page or its
/// JSON and they are on; `None` for every other request.
pub async fn answer<B>(state: &Arc<State>, request: &Request<B>) -> Option<Response<ResponseBody>> {
    let uri = request.uri();
    if uri.scheme().is_some() || !state.browsing.on.load(Ordering::Relaxed) {
        return None;
    }
    let json = match uri.path() {
        BROWSE_PATH | "/cache" => false,
        BROWSE_JSON_PATH => true,
        _ => return None,
    };
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        let body = "pkgproxy: the cache's page answers GET and HEAD only".into();
        return Some(html::local(StatusCode::METHOD_NOT_ALLOWED, headers, body));
    }
    let query = query_value(uri.query(), "q").unwrap_or_default();
    let browse = match gather(state, query).await {
        Ok(browse) => browse,
        Err(error) => {
            tracing::warn!(%error, "the cache's page cannot read the index");
            let body = format!("pkgproxy: the cache's index cannot be read now: {error}").into();
            return Some(html::local(StatusCode::SERVICE_UNAVAILABLE, HeaderMap::new(), body));
        }
    };
    Some(match json {
        true => html::page("application/json", BROWSE_POLICY, serde_json::to_vec(&browse).unwrap_or_default().into()),
        false => {
            let host = crate::context::host_of(uri, request.headers(), state.listen);
            let now = pkgproxy_cache::unix_secs(state.clock.now());
            html::page("text/html; charset=utf-8", BROWSE_POLICY, page::render(&browse, &host, now).into())
        }
    })
}

/// The listing for `query`, read off the async threads, one walk at a time.
async fn gather(state: &Arc<State>, query: String) -> Result<Browse, String> {
    let _walk = state.browsing.walking.lock().await;
    let walked = Arc::clone(state);
    let sides = tokio::task::spawn_blocking(move || {
        let query = query.trim().to_string();
        let sides = walked.sides.iter().map(|side| listing::side(&walked.cache, side, &query, LIMITS));
        sides.collect::<Result<Vec<BrowseSide>, _>>().map(|sides| (query, sides))
    })
    .await
    .map_err(|error| error.to_string())?;
    let (query, sides) = sides.map_err(|error| error.to_string())?;
    let now = pkgproxy_cache::unix_secs(state.clock.now());
    Ok(Browse {
        query,
        sides,
        top_clients: top_clients(&state.browsing, now),
        top_packages: top_packages(&state.browsing, &state.sides, now),
    })
}

fn top_clients(browsing: &crate::browsing::Browsing, now: u64) -> Vec<TopClient> {
    let clients = browsing.top.clients(now).into_iter().take(TOP_SHOWN);
    clients.map(|(address, requests)| TopClient { address: address.to_string(), requests }).collect()
}

/// The keys served most, summed by the package each names (a side
/// without the reporting role, or a key naming no package or a private
/// one, is left out).
fn top_packages(browsing: &crate::browsing::Browsing, sides: &pkgproxy_sides::Sides, now: u64) -> Vec<TopPackage> {
    let mut summed: Vec<TopPackage> = Vec::new();
    for (key, requests) in browsing.top.keys(now) {
        let Some(id) = key.split('/').next().and_then(SideId::from_name) else { continue };
        let Some(reporting) = sides.get(id).roles().reporting else { continue };
        let name = match reporting.names(&key) {
            Named::File { package, .. } | Named::Metadata { package } => package,
            Named::Other | Named::Private => continue,
        };
        let side = id.to_string();
        match summed.iter_mut().find(|top| top.side == side && top.name == name) {
            Some(top) => top.requests += requests,
            None => summed.push(TopPackage { side, name, requests }),
        }
    }
    summed.sort_by(|a, b| b.requests.cmp(&a.requests).then_with(|| a.name.cmp(&b.name)));
    summed.truncate(TOP_SHOWN);
    summed
}

/// The value of `name` in `query`, decoded as a form sends it.
fn query_value(query: Option<&str>, name: &str) -> Option<String> {
    let value = query?.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))?;
    let value = value.replace('+', " ");
    Some(percent_encoding::percent_decode_str(&value).decode_utf8_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_is_read_as_a_form_sends_it() {
        assert_eq!(query_value(Some("q=left+pad%2F1"), "q").as_deref(), Some("left pad/1"));
        assert_eq!(query_value(Some("x=1&q=%40corp"), "q").as_deref(), Some("@corp"));
        assert_eq!(query_value(Some("qq=1"), "q"), None);
        assert_eq!(query_value(None, "q"), None);
    }
}
