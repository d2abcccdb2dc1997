//! The seam between the request path and the sides: one variant per side,
//! each delegating to its module, so the compiler lists what a new side
//! must provide (every `match self` below), and the route table
//! ([`crate::route::ROUTES`]) says where it is mounted.
//!
//! The hooks, in the order a request meets them:
//!
//! 1. [`Side::classify`]: before anything else, for every request routed to
//!    the side, whatever its method: what to do with it ([`Decision`]).
//!    Pure, and quick (it runs on every cache hit).
//! 2. [`Side::remembered`]: before the cache lookup, a "not found" the side
//!    remembers for the key (the go command probes parent paths).
//! 3. [`Side::prerequisites`], then [`Side::verifier`]: on a miss, before
//!    the fetch starts, what must be fetched first (through the cache) to
//!    check the download, and the checks themselves. Never on a hit.
//! 4. [`Side::remember`]: after an upstream's answer was passed on, not
//!    cached (go remembers a `404` or `410`; the registry, that a
//!    repository needs credentials). [`Side::granted`]: for a request with
//!    an [`crate::Access`], once the upstream confirmed the client may read
//!    the content, or served it to the fetch this request started.
//! 5. For a forwarded request that asks for a [`crate::Record`]:
//!    [`Side::record`] with a successful answer, or [`Side::replay`] when
//!    the upstream cannot be asked (offline, its breaker open) or fails.
//! 6. [`Side::rewrite`]: after the cache (or the forward, or the replay),
//!    at serve time, for every answer of a request that asks for one.
//! 7. [`Side::failure_answer`]: how the side's clients are told that
//!    pkgproxy cannot serve the request (refused, offline, overloaded,
//!    upstream failed).
//!
//! Outside the request path: [`Side::tunnels_to`] (the `CONNECT` policy)
//! and [`Side::learned`] (what the side shows in info and metrics).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::StatusCode;
use pkgproxy_cache::{Cache, PassedAnswer, Verifier};

use crate::apt::{self, Apt};
use crate::decision::{Acceptance, CachedRequest, Decision, LocalAnswer, Record, Refusal, Rewrite, Target};
use crate::failure::Failure;
use crate::go::{self, Go};
use crate::id::SideId;
use crate::learned::Learned;
use crate::lxd::{self, Lxd};
use crate::registry::{self, Registry};
use crate::route::Request;
use crate::snap::{self, Snap};

/// A side at run time: its configuration and what it has learnt.
#[derive(Debug)]
pub enum Side {
    /// apt.
    Apt(Apt),
    /// The go command.
    Go(Go),
    /// snapd.
    Snap(Snap),
    /// OCI registry clients.
    Registry(Registry),
    /// LXD and the craft tools.
    Lxd(Lxd),
}

impl Side {
    /// Which side this is.
    pub fn id(&self) -> SideId {
        match self {
            Side::Apt(_) => SideId::Apt,
            Side::Go(_) => SideId::Go,
            Side::Snap(_) => SideId::Snap,
            Side::Registry(_) => SideId::Registry,
            Side::Lxd(_) => SideId::Lxd,
        }
    }

    /// What to do with `request`.
    pub fn classify(&self, request: &Request<'_>) -> Decision {
        match self {
            Side::Apt(apt) => apt.classify(request),
            Side::Go(go) => go.classify(request),
            Side::Snap(snap) => snap.classify(request),
            Side::Registry(registry) => registry.classify(request),
            Side::Lxd(lxd) => lxd.classify(request),
        }
    }

    /// An upstream answer remembered for `request` at `now` (`frozen`:
    /// offline, time stands still): the go side's "not found", a
    /// registry's refusal of pkgproxy's own token.
    pub fn remembered(&self, request: &CachedRequest, now: Instant, frozen: bool) -> Option<Arc<PassedAnswer>> {
        match self {
            Side::Apt(_) | Side::Snap(_) | Side::Lxd(_) => None,
            Side::Go(go) => go.remembered(&request.key, now, frozen),
            Side::Registry(registry) => registry.remembered(request, now, frozen),
        }
    }

    /// The upstream answered `request` with `answer`, passed on, at `now`.
    pub fn remember(&self, request: &CachedRequest, answer: &Arc<PassedAnswer>, now: Instant) {
        match self {
            Side::Apt(_) | Side::Snap(_) | Side::Lxd(_) => {}
            Side::Go(go) if matches!(answer.status, StatusCode::NOT_FOUND | StatusCode::GONE) => {
                go.remember(&request.key, answer, now)
            }
            Side::Go(_) => {}
            Side::Registry(registry) => registry.remember(request, answer, now),
        }
    }

    /// The upstream confirmed that `request`'s client may read its content
    /// (or served it to the client's own fetch). Blocking.
    pub fn granted(&self, request: &CachedRequest) {
        match self {
            Side::Registry(registry) => registry.granted(request),
            Side::Apt(_) | Side::Go(_) | Side::Snap(_) | Side::Lxd(_) => {}
        }
    }

    /// The entries under `keys` were removed by hand (`pkgproxyctl cache
    /// rm`): what the side held about them is dropped too. Blocking.
    pub fn removed(&self, keys: &[String]) {
        match self {
            Side::Apt(apt) => apt.removed(keys),
            Side::Go(_) | Side::Snap(_) | Side::Registry(_) | Side::Lxd(_) => {}
        }
    }

    /// What must be fetched, through the cache and in this order, before
    /// `request` can be checked; a fetch that does not end in a `200` ends
    /// the list.
    pub fn prerequisites(&self, request: &CachedRequest) -> Vec<CachedRequest> {
        match self {
            Side::Apt(_) | Side::Snap(_) | Side::Registry(_) | Side::Lxd(_) => Vec::new(),
            Side::Go(go) => go.prerequisites(request),
        }
    }

    /// The request a client makes for what is cached under `key`, as the
    /// request path takes it (`http://HOST/...` for apt, `/go/...`), with
    /// its rank among the side's files: what proves others (a `Release`, a
    /// checksum database record, a tag) ranks before them. `None` for keys
    /// no request reads as they are (what is reached through a link or an
    /// index generation, records of answers). A bundle of the whole cache
    /// is made of these.
    pub fn client_url(&self, key: &str) -> Option<(u8, String)> {
        match self {
            Side::Apt(apt) => apt.client_url(key),
            Side::Go(_) => go::client_url(key),
            Side::Registry(registry) => registry.client_url(key),
            Side::Lxd(lxd) => lxd.client_url(key),
            Side::Snap(_) => None,
        }
    }

    /// Whether what is cached under `key` may be handed to anyone who asks
    /// for the key (a peer of a cluster), with no client's credentials
    /// checked: false for what only some clients may read. Blocking.
    pub fn readable_by_anyone(&self, key: &str) -> bool {
        match self {
            Side::Registry(registry) => registry.readable_by_anyone(key),
            Side::Apt(_) | Side::Go(_) | Side::Snap(_) | Side::Lxd(_) => true,
        }
    }

    /// The cache keys of what proves what is cached under `key`, beyond
    /// its prerequisites: what a bundle carries before it so that taking
    /// it in checks it (a pool file: its archive's Releases and `Packages`
    /// indexes). Only what the cache holds is carried.
    pub fn proving_keys(&self, key: &str) -> Vec<String> {
        match self {
            Side::Apt(apt) => apt.proving_keys(key),
            Side::Go(_) | Side::Snap(_) | Side::Registry(_) | Side::Lxd(_) => Vec::new(),
        }
    }

    /// Keeps `body`, which another pkgproxy recorded under `key` (an answer
    /// replayed offline, carried in a bundle), once the side has read it
    /// as one. Blocking.
    pub fn take_record(&self, key: &str, body: &[u8]) -> Result<(), String> {
        match self {
            Side::Snap(snap) => snap.take_record(key, body),
            Side::Apt(_) | Side::Go(_) | Side::Registry(_) | Side::Lxd(_) => {
                Err("this side keeps no records of answers".to_owned())
            }
        }
    }

    /// The request for the content `digest` that `request`, a
    /// [`crate::Pointer`], now points at; `None` when the digest is not one
    /// the side can fetch (the name is then fetched as it is).
    pub fn by_digest(&self, request: &CachedRequest, digest: &str) -> Option<CachedRequest> {
        match self {
            Side::Registry(registry) => registry.pointed_at(request, digest),
            Side::Apt(_) | Side::Go(_) | Side::Snap(_) | Side::Lxd(_) => None,
        }
    }

    /// The files that are one generation with `root`, whose body is
    /// `body` (a simplestreams index's products files).
    pub fn members(&self, root: &CachedRequest, body: &[u8]) -> Result<Vec<CachedRequest>, String> {
        match self {
            Side::Lxd(lxd) => lxd.members(root, body),
            Side::Apt(_) | Side::Go(_) | Side::Snap(_) | Side::Registry(_) => Ok(Vec::new()),
        }
    }

    /// Checks a new generation of `root` (its body and its members' with
    /// theirs) and makes it the side's; `Err` keeps the previous one.
    /// Blocking.
    pub fn adopt(&self, root: &CachedRequest, body: &[u8], members: &[(CachedRequest, Bytes)]) -> Result<(), String> {
        match self {
            Side::Lxd(lxd) => lxd.adopt(root, body, members),
            Side::Apt(_) | Side::Go(_) | Side::Snap(_) | Side::Registry(_) => Ok(()),
        }
    }

    /// Whether a cached body starting with `head` answers a request that
    /// `accepts` it (a snap assertion no newer than the client reads).
    pub fn accepts(&self, accepts: Acceptance, head: &[u8]) -> bool {
        match self {
            Side::Snap(snap) => snap.accepts(accepts, head),
            Side::Apt(_) | Side::Go(_) | Side::Registry(_) | Side::Lxd(_) => accepts == Acceptance::Any,
        }
    }

    /// The checks of a fetch of `request`, given the bodies of its
    /// prerequisites that were had (in order, stopping at the first that
    /// was not).
    pub fn verifier(&self, request: &CachedRequest, prerequisites: &[Bytes]) -> Option<Arc<dyn Verifier>> {
        match self {
            Side::Apt(apt) => apt.verifier(request),
            Side::Go(go) => go.verifier(request, prerequisites),
            Side::Snap(snap) => snap.verifier(request),
            Side::Registry(registry) => registry.verifier(request),
            Side::Lxd(_) => None,
        }
    }

    /// Keeps what `record` asks for of a forwarded request whose body was
    /// `sent` and whose successful answer is `answer`. Blocking.
    pub fn record(&self, record: &Record, sent: &[u8], answer: &[u8]) {
        match (self, record) {
            (Side::Snap(snap), Record::SnapActions(headers)) => snap.record(headers, sent, answer),
            (Side::Apt(_) | Side::Go(_) | Side::Registry(_) | Side::Lxd(_), _) => {}
        }
    }

    /// The answer to a forwarded request whose body was `sent`, from what
    /// `record` kept, when the upstream could not answer as `failure` says;
    /// `None`: nothing to replay, the failure stands. Blocking.
    pub fn replay(&self, record: &Record, sent: &[u8], failure: &Failure<'_>) -> Option<LocalAnswer> {
        match (self, record) {
            (Side::Snap(snap), Record::SnapActions(headers)) => snap.replay(headers, sent, failure),
            (Side::Apt(_) | Side::Go(_) | Side::Registry(_) | Side::Lxd(_), _) => None,
        }
    }

    /// `body`, an answer to a request that asked for `rewrite`, as this
    /// client is to get it; `None`: as it is.
    pub fn rewrite(&self, rewrite: &Rewrite, body: &[u8]) -> Option<Bytes> {
        match (self, rewrite) {
            (Side::Snap(snap), Rewrite::SnapUrls(at)) => snap.rewrite(at, body),
            (Side::Apt(_) | Side::Go(_) | Side::Registry(_) | Side::Lxd(_), _) => None,
        }
    }

    /// How the side's clients are told of `failure`.
    pub fn failure_answer(&self, failure: &Failure<'_>) -> LocalAnswer {
        match self {
            Side::Apt(_) | Side::Go(_) | Side::Lxd(_) => failure.plain_text(),
            Side::Snap(_) => snap::failure_answer(failure),
            Side::Registry(_) => registry::failure_answer(failure),
        }
    }

    /// Whether the side's clients may open a blind tunnel to `host`.
    pub fn tunnels_to(&self, host: &str) -> bool {
        match self {
            Side::Apt(apt) => apt.config().serves_host(host),
            Side::Lxd(lxd) => lxd.tunnels_to(host),
            Side::Go(_) | Side::Snap(_) | Side::Registry(_) => false,
        }
    }

    /// What the side has learnt.
    pub fn learned(&self) -> Vec<Learned> {
        match self {
            Side::Apt(apt) => apt.learned(),
            Side::Lxd(lxd) => lxd.learned(),
            Side::Go(_) | Side::Snap(_) | Side::Registry(_) => Vec::new(),
        }
    }
}

/// Every side's configuration, validated: what [`Sides::open`] starts from.
#[derive(Debug, Clone)]
pub struct SidesConfig {
    /// apt's archives and freshness window.
    pub apt: apt::Config,
    /// The go side's upstream proxies, windows and checksum database.
    pub go: go::Config,
    /// The snap side's store instances.
    pub snap: snap::Config,
    /// The registry side's upstreams and tag window.
    pub registry: registry::Config,
    /// The LXD side's remotes and index window.
    pub lxd: lxd::Config,
}

impl SidesConfig {
    /// The configured upstreams' URLs: their hosts may be on local
    /// addresses, each on its own port only.
    pub fn trusted_urls(&self) -> Vec<String> {
        let (apt, go, snap) = (self.apt.trusted_urls(), self.go.trusted_urls(), self.snap.trusted_urls());
        let (registry, lxd) = (self.registry.trusted_urls(), self.lxd.trusted_urls());
        apt.into_iter().chain(go).chain(snap).chain(registry).chain(lxd).collect()
    }

    /// Every side but apt fetched from its endpoint on the parent pkgproxy
    /// at `parent` (`http://host:port`), its one instance: the parent
    /// spreads over the upstream's own instances and caches for every
    /// child. apt needs nothing: its requests go to the parent as forward-
    /// proxy requests, and keep naming the origin's mirrors.
    pub fn chain_to(&mut self, parent: &str) {
        self.go.chain_to(parent);
        self.snap.chain_to(parent);
        self.registry.chain_to(parent);
        self.lxd.chain_to(parent);
    }
}

/// What a side has learnt could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The apt index beside the cache.
    #[error("cannot open the apt index: {0}")]
    AptIndex(#[from] apt::index::IndexError),
    /// What the LXD side learnt of its remotes.
    #[error("cannot open the LXD side's store: {0}")]
    LxdItems(#[from] lxd::items::ItemsError),
}

/// Every side, in [`SideId::ALL`] order.
#[derive(Debug)]
pub struct Sides {
    all: Vec<Side>,
}

/// The only port `CONNECT` reaches: tunnels carry TLS to HTTPS upstreams.
const TUNNEL_PORT: u16 = 443;

impl Sides {
    /// Opens every side with what it has learnt, kept in and beside the
    /// cache. Blocking.
    pub fn open(config: SidesConfig, cache: &Cache) -> Result<Sides, OpenError> {
        let apt = Apt::open(config.apt, cache.dir(), cache.clock())?;
        let snap = Snap::new(config.snap, cache.clone());
        let registry = Registry::new(config.registry, cache.clone());
        let lxd = Lxd::open(config.lxd, cache.clone(), cache.dir())?;
        Ok(Sides::new(apt, Go::new(config.go), snap, registry, lxd))
    }

    /// Every side, each ready with what it has learnt.
    pub fn new(apt: Apt, go: Go, snap: Snap, registry: Registry, lxd: Lxd) -> Sides {
        let all = vec![Side::Apt(apt), Side::Go(go), Side::Snap(snap), Side::Registry(registry), Side::Lxd(lxd)];
        Sides { all }
    }

    /// The side `id`.
    pub fn get(&self, id: SideId) -> &Side {
        &self.all[id.index()]
    }

    /// The side that serves a request routed to `routed`: for a
    /// forward-proxy request for an LXD remote's host (the image files an
    /// LXD daemon sends through its proxy), the LXD side.
    pub fn owner(&self, routed: SideId, target: Option<&Target>) -> &Side {
        match (target, self.get(SideId::Lxd)) {
            (Some(target), Side::Lxd(lxd)) if lxd.serves(target) => self.get(SideId::Lxd),
            _ => self.get(routed),
        }
    }

    /// Every side.
    pub fn iter(&self) -> impl Iterator<Item = &Side> {
        self.all.iter()
    }

    /// Takes `config` for the requests from now on (a reload): each side's
    /// configuration is swapped whole, what the sides learnt is kept.
    pub fn reconfigure(&self, config: SidesConfig) {
        let SidesConfig { apt, go, snap, registry, lxd } = config;
        for side in &self.all {
            match side {
                Side::Apt(side) => side.reconfigure(apt.clone()),
                Side::Go(side) => side.reconfigure(go.clone()),
                Side::Snap(side) => side.reconfigure(snap.clone()),
                Side::Registry(side) => side.reconfigure(registry.clone()),
                Side::Lxd(side) => side.reconfigure(lxd.clone()),
            }
        }
    }

    /// Whether what is cached under `key` may be handed to anyone who asks
    /// for the key: no side says it is only for some clients. Blocking.
    pub fn readable_by_anyone(&self, key: &str) -> bool {
        self.iter().all(|side| side.readable_by_anyone(key))
    }

    /// Whether `CONNECT host:port` may be tunnelled: port 443 of a host a
    /// side's clients use.
    pub fn allows_tunnel(&self, host: &str, port: u16) -> Result<(), Refusal> {
        if port != TUNNEL_PORT {
            return Err(Refusal::forbidden(format!("CONNECT is allowed to port {TUNNEL_PORT} only, not {port}")));
        }
        match self.all.iter().any(|side| side.tunnels_to(host)) {
            true => Ok(()),
            false => Err(Refusal::forbidden(format!("CONNECT to {host} refused: not a known archive host"))),
        }
    }
}

/// Which entries can never be served again (an apt index file a newer
/// Release superseded): eviction takes them first.
impl pkgproxy_cache::Obsolete for Sides {
    fn prefixes(&self) -> Vec<String> {
        match self.get(SideId::Apt) {
            Side::Apt(apt) => apt.superseded_prefixes(),
            _ => Vec::new(),
        }
    }

    fn is_obsolete(&self, key: &str, entry: &pkgproxy_cache::Entry) -> bool {
        match (key.split('/').next(), self.get(SideId::Apt)) {
            (Some("apt"), Side::Apt(apt)) => apt.superseded(key, entry),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::{HeaderMap, Method};

    use super::*;
    use crate::apt::{ArchiveConfig, Config as AptConfig, DEFAULT_INDEX_TTL};
    use crate::decision::{Origin, Target};
    use crate::go::{Config as GoConfig, Options};
    use crate::route::Mount;

    fn sides(dir: &std::path::Path) -> Sides {
        let local = ArchiveConfig { name: "local".into(), mirrors: vec!["http://127.0.0.1:8001/debian".into()] };
        let clock = Arc::new(pkgproxy_cache::SystemClock);
        let apt = Apt::open(AptConfig::new(&[local], DEFAULT_INDEX_TTL).unwrap(), dir, clock).unwrap();
        let go = Go::new(GoConfig::new(&Options::default()).unwrap());
        let cache = Cache::open(&dir.join("cache"), Arc::new(pkgproxy_cache::SystemClock)).unwrap();
        let snap = Snap::new(snap::Config::new(&snap::Options::default()).unwrap(), cache.clone());
        let registry = Registry::new(registry::Config::new(&registry::Options::default()).unwrap(), cache.clone());
        let lxd = Lxd::open(lxd::Config::new(&lxd::Options::default()).unwrap(), cache, dir).unwrap();
        Sides::new(apt, go, snap, registry, lxd)
    }

    fn request<'a>(
        method: &'a Method,
        headers: &'a HeaderMap,
        path: &'a str,
        target: Option<&'a Target>,
    ) -> Request<'a> {
        let mount = if target.is_some() { Mount::ForwardProxy } else { Mount::Prefix("/go") };
        Request { method, headers, mount, path, query: None, target, host: "127.0.0.1:3142" }
    }

    #[test]
    fn every_side_is_found_by_its_id() {
        let dir = tempfile::tempdir().unwrap();
        let sides = sides(dir.path());
        for id in SideId::ALL {
            assert_eq!(sides.get(id).id(), id);
            assert_eq!(SideId::from_name(id.as_str()), Some(id));
        }
    }

    #[test]
    fn apt_and_go_take_get_and_head_only() {
        let dir = tempfile::tempdir().unwrap();
        let sides = sides(dir.path());
        let headers = HeaderMap::new();
        let target = Target {
            scheme: "http".into(),
            host: "deb.debian.org".into(),
            port: 80,
            raw_path: "/debian/pool/main/a/a.deb".into(),
        };
        for (side, path, target) in
            [(SideId::Apt, target.raw_path.as_str(), Some(&target)), (SideId::Go, "/example.com/m/@v/list", None)]
        {
            for method in [Method::GET, Method::HEAD] {
                let decision = sides.get(side).classify(&request(&method, &headers, path, target));
                assert!(matches!(decision, Decision::Cache(_)), "{side} {method}: {decision:?}");
            }
            let decision = sides.get(side).classify(&request(&Method::POST, &headers, path, target));
            let Decision::Refuse(refusal) = decision else { panic!("{side} POST: {decision:?}") };
            assert_eq!((refusal.status, refusal.allow), (StatusCode::METHOD_NOT_ALLOWED, Some("GET, HEAD")));
        }
    }

    #[test]
    fn tunnels_go_to_port_443_of_a_host_a_side_knows() {
        let dir = tempfile::tempdir().unwrap();
        let sides = sides(dir.path());
        assert!(sides.allows_tunnel("deb.debian.org", 443).is_ok());
        assert!(sides.allows_tunnel("ftp.fr.debian.org", 443).is_ok());
        assert_eq!(sides.allows_tunnel("deb.debian.org", 22).unwrap_err().status, StatusCode::FORBIDDEN);
        assert_eq!(sides.allows_tunnel("example.com", 443).unwrap_err().status, StatusCode::FORBIDDEN);
    }

    #[test]
    fn a_go_download_is_checked_against_the_lookup_record_fetched_first() {
        let dir = tempfile::tempdir().unwrap();
        let sides = sides(dir.path());
        let go = sides.get(SideId::Go);
        let headers = HeaderMap::new();
        let zip = match go.classify(&request(&Method::GET, &headers, "/example.com/m/@v/v1.0.0.zip", None)) {
            Decision::Cache(zip) => *zip,
            other => panic!("{other:?}"),
        };
        let keys: Vec<String> = go.prerequisites(&zip).into_iter().map(|r| r.key).collect();
        assert_eq!(keys, ["go/sumdb/sum.golang.org/supported", "go/sumdb/sum.golang.org/lookup/example.com/m@v1.0.0"]);
        assert!(go.verifier(&zip, &[]).is_some(), "without the record the zip's shape is still checked");
        let list = match go.classify(&request(&Method::GET, &headers, "/example.com/m/@v/list", None)) {
            Decision::Cache(list) => *list,
            other => panic!("{other:?}"),
        };
        assert!(go.prerequisites(&list).is_empty());
        assert!(go.verifier(&list, &[]).is_some(), "a list is checked to be versions, and bounded");
        let apt = sides.get(SideId::Apt);
        assert!(apt.prerequisites(&zip).is_empty(), "apt needs nothing first");
    }

    #[test]
    fn go_remembers_a_not_found_for_its_time_and_apt_remembers_none() {
        let dir = tempfile::tempdir().unwrap();
        let sides = sides(dir.path());
        let answer = Arc::new(PassedAnswer { status: StatusCode::NOT_FOUND, headers: vec![], body: "gone".into() });
        let now = Instant::now();
        let origin = Origin { pool: "p".into(), instances: vec!["http://127.0.0.1:1".into()], path: "/k".into() };
        for side in sides.iter() {
            let request = CachedRequest::new(side.id(), "k".into(), origin.clone(), pkgproxy_cache::Class::Revalidated);
            side.remember(&request, &answer, now);
        }
        let refused = Arc::new(PassedAnswer { status: StatusCode::FORBIDDEN, headers: vec![], body: "no".into() });
        let other = CachedRequest::new(SideId::Go, "other".into(), origin.clone(), pkgproxy_cache::Class::Revalidated);
        sides.get(SideId::Go).remember(&other, &refused, now);
        let asked = |id: SideId, key: &str| {
            CachedRequest::new(id, key.into(), origin.clone(), pkgproxy_cache::Class::Revalidated)
        };
        assert!(sides.get(SideId::Go).remembered(&other, now, false).is_none(), "only a not found");
        assert!(sides.get(SideId::Go).remembered(&asked(SideId::Go, "k"), now, false).is_some());
        let later = now + Duration::from_secs(61);
        assert!(sides.get(SideId::Go).remembered(&asked(SideId::Go, "k"), later, false).is_none());
        assert!(sides.get(SideId::Apt).remembered(&asked(SideId::Apt, "k"), now, false).is_none());
    }
}
