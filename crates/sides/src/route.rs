//! The route table: which side owns a request, by the shape of its target.
//! A forward-proxy request (absolute form, for another host) goes to the
//! side mounted as the forward proxy; an origin-form request to the side
//! mounted at the longest matching path prefix. An absolute-form request
//! that names pkgproxy itself (a client whose `http_proxy` points at
//! pkgproxy asks for pkgproxy's own URLs that way) is routed as the origin
//! form it stands for, never forwarded to pkgproxy again.

use http::{HeaderMap, Method, Uri};

use crate::decision::{ServedAt, Target};
use crate::id::SideId;

/// Where a side is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mount {
    /// As a forward proxy: absolute-form requests for other hosts.
    ForwardProxy,
    /// Under a path prefix (`/go`): origin-form requests.
    Prefix(&'static str),
}

/// The route table: one line per side.
pub const ROUTES: &[(Mount, SideId)] = &[
    (Mount::ForwardProxy, SideId::Apt),
    (Mount::Prefix("/go"), SideId::Go),
    (Mount::Prefix("/snap"), SideId::Snap),
    (Mount::Prefix("/v2"), SideId::Registry),
    (Mount::Prefix("/lxd"), SideId::Lxd),
    (Mount::Prefix("/cargo"), SideId::Cargo),
    (Mount::Prefix("/pypi"), SideId::Pypi),
    (Mount::Prefix("/npm"), SideId::Npm),
    (Mount::Prefix("/maven"), SideId::Maven),
    (Mount::Prefix("/rpm"), SideId::Rpm),
    #[cfg(feature = "toy")]
    (Mount::Prefix("/toy"), SideId::Toy),
];

/// A request as its side sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// Its method.
    pub method: &'a Method,
    /// Its headers.
    pub headers: &'a HeaderMap,
    /// How it reached the side.
    pub mount: Mount,
    /// For a side mounted under a prefix, the path below the prefix (`/`
    /// at least); for the forward proxy, the target's path. Still
    /// percent-encoded.
    pub path: &'a str,
    /// The query, if any.
    pub query: Option<&'a str>,
    /// For the forward proxy, the target as the client named it.
    pub target: Option<&'a Target>,
    /// The host (and port) the client reached pkgproxy by, as it named it:
    /// answers that point back at pkgproxy use it.
    pub host: &'a str,
    /// Whether the client came over TLS: answers that point back at
    /// pkgproxy then say `https://`.
    pub secure: bool,
}

impl Request<'_> {
    /// Where the client reached pkgproxy's `below` of this request's side
    /// (`""`, or `/NAME` for an upstream mounted by name): answers that
    /// point back at pkgproxy are rewritten to it.
    pub fn served_at(&self, below: &str) -> ServedAt {
        let prefix = match self.mount {
            Mount::Prefix(prefix) => prefix,
            Mount::ForwardProxy => "",
        };
        let scheme = if self.secure { "https" } else { "http" };
        ServedAt { base: format!("{scheme}://{}{prefix}{below}", self.host) }
    }
}

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `CONNECT`: a blind tunnel.
    Tunnel,
    /// A side, reached through `mount`; for the forward proxy, with the
    /// target the client named.
    Side {
        /// The side that owns the request.
        side: SideId,
        /// How it is reached.
        mount: Mount,
        /// The forward proxy's target.
        target: Option<Target>,
    },
    /// No side: an origin-form request outside every mount.
    Nowhere,
    /// An absolute-form request for a side mounted on pkgproxy's own port
    /// naming another scheme than `http` (`https://HOST:PORT/go/...`):
    /// pkgproxy is asked as itself, and a scheme it does not speak there
    /// could only be a way to send it elsewhere.
    WrongScheme,
}

/// Routes a request for `uri` with `method`; `own_port` is the port
/// pkgproxy listens on, which tells a request for pkgproxy itself.
pub fn route(method: &Method, uri: &Uri, own_port: u16) -> Route {
    if method == Method::CONNECT {
        return Route::Tunnel;
    }
    let path = uri.path();
    match target_of(uri) {
        Some(target) if !(target.port == own_port && mounted(path).is_some()) => match forward_proxy() {
            Some(side) => Route::Side { side, mount: Mount::ForwardProxy, target: Some(target) },
            None => Route::Nowhere,
        },
        _ => match mounted(path) {
            Some(_) if uri.scheme_str().is_some_and(|scheme| scheme != "http") => Route::WrongScheme,
            Some((side, prefix)) => Route::Side { side, mount: Mount::Prefix(prefix), target: None },
            None => Route::Nowhere,
        },
    }
}

/// The path below `mount` (for the forward proxy, the whole path).
pub fn below(mount: Mount, path: &str) -> &str {
    match mount {
        Mount::ForwardProxy => path,
        Mount::Prefix(prefix) => match path.strip_prefix(prefix) {
            Some("") | None => "/",
            Some(rest) => rest,
        },
    }
}

/// The side mounted at the longest prefix of `path`, and that prefix.
fn mounted(path: &str) -> Option<(SideId, &'static str)> {
    ROUTES
        .iter()
        .filter_map(|(mount, side)| match mount {
            Mount::Prefix(prefix) if is_below(path, prefix) => Some((*side, *prefix)),
            _ => None,
        })
        .max_by_key(|(_, prefix)| prefix.len())
}

/// True when `path` is `prefix` or below it (`/go`, `/go/x`; not `/golang`).
fn is_below(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The prefix `side` is mounted at (`/snap`), when it has one.
pub fn prefix_of(side: SideId) -> Option<&'static str> {
    ROUTES.iter().find_map(|(mount, mounted)| match mount {
        Mount::Prefix(prefix) if *mounted == side => Some(*prefix),
        _ => None,
    })
}

fn forward_proxy() -> Option<SideId> {
    ROUTES.iter().find(|(mount, _)| *mount == Mount::ForwardProxy).map(|(_, side)| *side)
}

/// The target of an absolute-form request; `None` for origin form.
fn target_of(uri: &Uri) -> Option<Target> {
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    let port = uri.port_u16().unwrap_or(if scheme == "https" { 443 } else { 80 });
    Some(Target { scheme, host, port, raw_path: uri.path().to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routed(method: Method, uri: &str) -> Route {
        route(&method, &uri.parse().unwrap(), 3142)
    }

    #[test]
    fn each_request_shape_goes_to_its_side() {
        let Route::Side { side, mount, target } = routed(Method::GET, "http://deb.debian.org/debian/pool/a.deb") else {
            panic!("not routed");
        };
        assert_eq!((side, mount), (SideId::Apt, Mount::ForwardProxy));
        assert_eq!(target.unwrap().raw_path, "/debian/pool/a.deb");
        let go = routed(Method::GET, "/go/example.com/m/@v/list");
        assert_eq!(go, Route::Side { side: SideId::Go, mount: Mount::Prefix("/go"), target: None });
        assert_eq!(routed(Method::GET, "/go"), go);
        assert_eq!(routed(Method::GET, "/golang/x"), Route::Nowhere);
        let snap = routed(Method::POST, "/snap/v2/snaps/refresh");
        assert_eq!(snap, Route::Side { side: SideId::Snap, mount: Mount::Prefix("/snap"), target: None });
        let registry = Route::Side { side: SideId::Registry, mount: Mount::Prefix("/v2"), target: None };
        assert_eq!(routed(Method::GET, "/v2/"), registry);
        assert_eq!(routed(Method::HEAD, "/v2/library/alpine/manifests/3.20?ns=docker.io"), registry);
        assert_eq!(routed(Method::GET, "/v22/x"), Route::Nowhere);
        assert_eq!(routed(Method::GET, "/"), Route::Nowhere);
        let own = |uri: &str| route(&Method::GET, &uri.parse().unwrap(), 3142);
        assert!(matches!(own("http://p:3142/go/x/@v/list"), Route::Side { mount: Mount::Prefix("/go"), .. }));
        assert_eq!(own("https://evil.example:3142/go/x/@v/list"), Route::WrongScheme, "never where the client points");
        assert_eq!(own("https://127.0.0.2:3142/v2/x/manifests/v1"), Route::WrongScheme);
        assert_eq!(routed(Method::CONNECT, "deb.debian.org:443"), Route::Tunnel);
    }

    #[test]
    fn an_absolute_form_request_for_pkgproxy_itself_is_its_origin_form() {
        assert_eq!(
            routed(Method::GET, "http://proxy.lan:3142/go/example.com/m/@v/list"),
            Route::Side { side: SideId::Go, mount: Mount::Prefix("/go"), target: None }
        );
        assert_eq!(
            routed(Method::POST, "http://pkgproxy.test:3142/snap/v2/snaps/refresh"),
            Route::Side { side: SideId::Snap, mount: Mount::Prefix("/snap"), target: None },
            "a snap client whose http_proxy is pkgproxy"
        );
        let Route::Side { side, .. } = routed(Method::GET, "http://proxy.lan:8080/go/x") else { panic!() };
        assert_eq!(side, SideId::Apt, "another port is another host");
    }

    #[test]
    fn below_a_mount() {
        assert_eq!(below(Mount::Prefix("/go"), "/go/x/@v/list"), "/x/@v/list");
        assert_eq!(below(Mount::Prefix("/go"), "/go"), "/");
        assert_eq!(below(Mount::ForwardProxy, "/debian/pool"), "/debian/pool");
    }
}
