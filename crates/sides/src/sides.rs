//! Every side: the one list of them ([`LIST`]: how each reads its section
//! of the file, which then opens it, reads a build's files for
//! `pkgproxyctl check`, and sets its clients up), their configurations
//! ([`SidesConfig`]), and what is asked of all of them at once (the owner
//! of a request, a tunnel, what eviction takes first).

use pkgproxy_cache::Cache;

use crate::config::{configure, OpenError, SectionError, SideConfig, SidesFile};
use crate::decision::{Refusal, Target};
use crate::id::SideId;
use crate::needs::{HeldBodies, NeedsReader};
use crate::role::{Roles, UpstreamPath};
use crate::setup::SetupClient;
use crate::Side;
use crate::{apt, cargo, go, lxd, maven, npm, pypi, registry, rpm, snap};

/// How a side reads and validates its section of the file.
type Configure = fn(&SidesFile) -> Result<Box<dyn SideConfig>, SectionError>;

/// What the list says of a side, before anything is configured.
struct Listed {
    /// How it reads its section of the file.
    configure: Configure,
    /// How `pkgproxyctl check SIDE` reads a build's files, when it can.
    needs: Option<&'static dyn NeedsReader>,
    /// The clients `pkgproxyctl setup` points at it.
    clients: &'static [SetupClient],
}

/// The one list of sides, in [`SideId::ALL`] order.
const LIST: [Listed; SideId::ALL.len()] = [
    Listed { configure: configure::<apt::Config>, needs: Some(&apt::needs::Reader), clients: apt::setup::CLIENTS },
    Listed { configure: configure::<go::Config>, needs: Some(&go::needs::Reader), clients: go::setup::CLIENTS },
    Listed { configure: configure::<snap::Config>, needs: Some(&snap::needs::Reader), clients: snap::setup::CLIENTS },
    Listed {
        configure: configure::<registry::Config>,
        needs: Some(&registry::needs::Reader),
        clients: registry::setup::CLIENTS,
    },
    Listed { configure: configure::<lxd::Config>, needs: Some(&lxd::needs::Reader), clients: lxd::setup::CLIENTS },
    Listed {
        configure: configure::<cargo::Config>,
        needs: Some(&cargo::needs::Reader),
        clients: cargo::setup::CLIENTS,
    },
    Listed { configure: configure::<pypi::Config>, needs: Some(&pypi::needs::Reader), clients: pypi::setup::CLIENTS },
    Listed { configure: configure::<npm::Config>, needs: Some(&npm::needs::Reader), clients: npm::setup::CLIENTS },
    Listed {
        configure: configure::<maven::Config>,
        needs: Some(&maven::needs::Reader),
        clients: maven::setup::CLIENTS,
    },
    Listed { configure: configure::<rpm::Config>, needs: Some(&rpm::needs::Reader), clients: rpm::setup::CLIENTS },
    #[cfg(feature = "toy")]
    Listed { configure: configure::<crate::toy::Config>, needs: None, clients: &[] },
];

/// Every client `pkgproxyctl setup` points at pkgproxy, side by side.
pub fn setup_clients() -> impl Iterator<Item = &'static SetupClient> {
    LIST.iter().flat_map(|listed| listed.clients)
}

/// The readers of a build's files, by side, for `pkgproxyctl check`.
pub fn needs_readers() -> impl Iterator<Item = (SideId, &'static dyn NeedsReader)> {
    SideId::ALL.iter().zip(&LIST).filter_map(|(id, listed)| Some((*id, listed.needs?)))
}

/// Every side's configuration, validated: what [`Sides::open`] starts from.
#[derive(Debug, Clone)]
pub struct SidesConfig {
    all: Vec<Box<dyn SideConfig>>,
}

impl SidesConfig {
    /// Reads and validates every side's section of `file`.
    pub fn new(file: &SidesFile) -> Result<SidesConfig, SectionError> {
        let all = LIST.iter().map(|listed| (listed.configure)(file)).collect::<Result<Vec<_>, _>>()?;
        Ok(SidesConfig { all })
    }

    /// The configuration of type `T`, for what only its side reads.
    pub fn typed<T: SideConfig>(&self) -> Option<&T> {
        self.all.iter().find_map(|config| (config.as_ref() as &dyn std::any::Any).downcast_ref::<T>())
    }

    /// Whether `name` is the name of a side's section.
    pub fn is_section(name: &str) -> bool {
        SideId::from_name(name).is_some()
    }

    /// The configured upstreams' URLs: their hosts may be on local
    /// addresses, each on its own port only.
    pub fn trusted_urls(&self) -> Vec<String> {
        self.all.iter().flat_map(|config| config.trusted_urls()).collect()
    }

    /// Every side fetched from its endpoint on the parent pkgproxy at
    /// `parent` (`http://host:port`), its one instance: the parent spreads
    /// over the upstream's own instances and caches for every child (apt's
    /// requests go to the parent as forward-proxy requests instead, and
    /// keep naming the origin's mirrors).
    pub fn chain_to(&mut self, parent: &str) {
        for config in &mut self.all {
            config.chain_to(parent);
        }
    }
}

/// Every side, in [`SideId::ALL`] order.
#[derive(Debug)]
pub struct Sides {
    all: Vec<Box<dyn Side>>,
}

/// The only port `CONNECT` reaches: tunnels carry TLS to HTTPS upstreams.
const TUNNEL_PORT: u16 = 443;

impl Sides {
    /// Opens every side with what it has learnt, kept in and beside the
    /// cache. Blocking.
    pub fn open(config: &SidesConfig, cache: &Cache) -> Result<Sides, OpenError> {
        let all = config.all.iter().map(|config| config.open(cache)).collect::<Result<Vec<_>, _>>()?;
        Ok(Sides::new(all))
    }

    /// Every side, each ready with what it has learnt, in [`SideId::ALL`]
    /// order.
    pub fn new(all: Vec<Box<dyn Side>>) -> Sides {
        let ids: Vec<SideId> = all.iter().map(|side| side.id()).collect();
        assert_eq!(ids, SideId::ALL, "every side, in SideId::ALL order");
        Sides { all }
    }

    /// The side `id`.
    pub fn get(&self, id: SideId) -> &dyn Side {
        self.all[id.index()].as_ref()
    }

    /// The side that serves a request routed to `routed`: the side that
    /// claims a forward-proxy request's target (an LXD remote's host, for
    /// the image files an LXD daemon sends through its proxy), else
    /// `routed`.
    pub fn owner(&self, routed: SideId, target: Option<&Target>) -> &dyn Side {
        let claimed = target.and_then(|target| {
            self.iter().find(|side| side.roles().forwarding.is_some_and(|forwarding| forwarding.claims(target)))
        });
        claimed.unwrap_or_else(|| self.get(routed))
    }

    /// The side of type `T`, for what only it does.
    pub fn typed<T: Side>(&self) -> Option<&T> {
        self.iter().find_map(|side| (side as &dyn std::any::Any).downcast_ref::<T>())
    }

    /// Every side.
    pub fn iter(&self) -> impl Iterator<Item = &dyn Side> {
        self.all.iter().map(|side| side.as_ref())
    }

    /// Every side that plays a role, with the role:
    /// `sides.playing(|roles| roles.informing)`.
    pub fn playing<'a, R: ?Sized + 'a>(
        &'a self,
        role: impl Fn(Roles<'a>) -> Option<&'a R> + 'a,
    ) -> impl Iterator<Item = (&'a dyn Side, &'a R)> + 'a {
        self.iter().filter_map(move |side| Some((side, role(side.roles())?)))
    }

    /// Takes `config` for the requests from now on (a reload): each side's
    /// configuration is swapped whole, what the sides learnt is kept.
    pub fn reconfigure(&self, config: &SidesConfig) {
        for (side, config) in self.all.iter().zip(&config.all) {
            config.reconfigure(side.as_ref());
        }
    }

    /// The side whose upstream's own URL `url` is, and where pkgproxy
    /// serves it ([`crate::role::Explaining::upstream_path`]). Blocking.
    pub fn upstream_path(&self, url: &str, held: &dyn HeldBodies) -> Option<(&dyn Side, UpstreamPath)> {
        self.iter().find_map(|side| Some((side, side.roles().explaining?.upstream_path(url, held)?)))
    }

    /// Whether what is cached under `key` may be handed to anyone who asks
    /// for the key: no side says it is only for some clients. Blocking.
    pub fn readable_by_anyone(&self, key: &str) -> bool {
        self.iter().all(|side| side.roles().private.is_none_or(|private| private.readable_by_anyone(key)))
    }

    /// Whether `CONNECT host:port` may be tunnelled: port 443 of a host a
    /// side's clients use.
    pub fn allows_tunnel(&self, host: &str, port: u16) -> Result<(), Refusal> {
        if port != TUNNEL_PORT {
            return Err(Refusal::forbidden(format!("CONNECT is allowed to port {TUNNEL_PORT} only, not {port}")));
        }
        match self.iter().any(|side| side.roles().forwarding.is_some_and(|forwarding| forwarding.tunnels_to(host))) {
            true => Ok(()),
            false => Err(Refusal::forbidden(format!("CONNECT to {host} refused: not a known archive host"))),
        }
    }
}

/// Which entries can never be served again (an apt index file a newer
/// Release superseded): eviction takes them first.
impl pkgproxy_cache::Obsolete for Sides {
    fn prefixes(&self) -> Vec<String> {
        self.iter()
            .filter_map(|side| side.roles().evicting)
            .flat_map(|evicting| evicting.superseded_prefixes())
            .collect()
    }

    fn is_obsolete(&self, key: &str, entry: &pkgproxy_cache::Entry) -> bool {
        let owner = key.split('/').next().and_then(SideId::from_name);
        owner.and_then(|id| self.get(id).roles().evicting).is_some_and(|evicting| evicting.superseded(key, entry))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use http::{HeaderMap, Method, StatusCode};
    use pkgproxy_cache::PassedAnswer;

    use super::*;
    use crate::decision::{CachedRequest, Decision, Origin, Target};
    use crate::route::{Mount, Request};

    fn sides(dir: &std::path::Path) -> Sides {
        let file = SidesFile::new("[[apt.archive]]\nname = \"local\"\nmirrors = [\"http://127.0.0.1:8001/debian\"]\n");
        let cache = Cache::open(&dir.join("cache"), Arc::new(pkgproxy_cache::SystemClock)).unwrap();
        Sides::open(&SidesConfig::new(&file).unwrap(), &cache).unwrap()
    }

    fn request<'a>(
        method: &'a Method,
        headers: &'a HeaderMap,
        path: &'a str,
        target: Option<&'a Target>,
    ) -> Request<'a> {
        let mount = if target.is_some() { Mount::ForwardProxy } else { Mount::Prefix("/go") };
        Request { method, headers, mount, path, query: None, target, host: "127.0.0.1:3142", secure: false }
    }

    #[test]
    fn every_side_is_found_by_its_id() {
        let dir = tempfile::tempdir().unwrap();
        let sides = sides(dir.path());
        for &id in SideId::ALL {
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
        let fetching = go.roles().fetching.expect("go fetches prerequisites");
        let keys: Vec<String> = fetching.prerequisites(&zip).into_iter().map(|r| r.key).collect();
        assert_eq!(keys, ["go/sumdb/sum.golang.org/supported", "go/sumdb/sum.golang.org/lookup/example.com/m@v1.0.0"]);
        assert!(go.verifier(&zip, &[]).is_some(), "without the record the zip's shape is still checked");
        let list = match go.classify(&request(&Method::GET, &headers, "/example.com/m/@v/list", None)) {
            Decision::Cache(list) => *list,
            other => panic!("{other:?}"),
        };
        assert!(fetching.prerequisites(&list).is_empty());
        assert!(go.verifier(&list, &[]).is_some(), "a list is checked to be versions, and bounded");
        let apt = sides.get(SideId::Apt);
        assert!(apt.roles().fetching.is_none(), "apt needs nothing first");
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
            if let Some(remembering) = side.roles().remembering {
                remembering.remember(&request, &answer, now);
            }
        }
        let go = sides.get(SideId::Go).roles().remembering.expect("go remembers answers");
        let refused = Arc::new(PassedAnswer { status: StatusCode::FORBIDDEN, headers: vec![], body: "no".into() });
        let other = CachedRequest::new(SideId::Go, "other".into(), origin.clone(), pkgproxy_cache::Class::Revalidated);
        go.remember(&other, &refused, now);
        let asked = |id: SideId, key: &str| {
            CachedRequest::new(id, key.into(), origin.clone(), pkgproxy_cache::Class::Revalidated)
        };
        assert!(go.remembered(&other, now, false).is_none(), "only a not found");
        assert!(go.remembered(&asked(SideId::Go, "k"), now, false).is_some());
        let later = now + Duration::from_secs(61);
        assert!(go.remembered(&asked(SideId::Go, "k"), later, false).is_none());
        assert!(sides.get(SideId::Apt).roles().remembering.is_none(), "apt remembers no answer");
    }
}
