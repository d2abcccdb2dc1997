//! The LXD side: a relay of simplestreams image servers for LXD and the
//! craft tools, each mounted at `/lxd/<name>/` with its paths unchanged
//! (simplestreams paths are relative to the remote root: nothing is
//! rewritten).
//!
//! What it serves, and how:
//! - `streams/v1/index.json` and the products files it names are one
//!   generation ([`crate::GenerationRequest`]): fetched again together
//!   after `[lxd] index_ttl`, checked, and switched in one commit, so LXD
//!   never gets an index naming a products file pkgproxy does not hold.
//! - Image files are served only when a products file named them
//!   ([`items`]): checked against that sha256 and size as they stream, and
//!   kept by their sha256, so a file with two names is one entry. Files of
//!   older generations stay servable while cached: daemons keep an index
//!   for an hour or more, and the upstream deletes old daily serials.
//! - Anything else under a mount is a `404`, asked of no one; an item path
//!   that could leave the remote (absolute, `..`, a backslash) is never
//!   fetched.
//!
//! LXD fetches the JSON over TLS (`lxc remote add` takes only `https://`
//! simplestreams remotes) and the image files over plain HTTP on the same
//! host and port, on purpose, for caches like this one: the listener
//! serves both.
//!
//! An LXD daemon whose `core.proxy_http` is pkgproxy sends the image files
//! of a remote it knows by its own URL as plain-http forward-proxy requests
//! (its index goes through a `CONNECT` tunnel): those of a configured
//! remote's hosts are served from the same entries, with the same checks,
//! pkgproxy reading the remote's index itself to learn the sums.

pub mod items;
pub mod names;
pub mod needs;
pub mod setup;
pub mod stream;

use std::sync::Arc;

use arc_swap::Guard;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use pkgproxy_cache::{Cache, Class, Expected};

use crate::config::{ConfigError, Configures, Reloadable};
use crate::decision::{Asking, Reply, Wanted};
use crate::decision::{
    CachedRequest, DatedResume, Decision, GenerationRequest, Member, Origin, Redirects, Refusal, Target,
};
use crate::id::SideId;
use crate::instances::Instances;
use crate::learned::Learned;
use crate::needs::{HeldBodies, Needs, NeedsError};
use crate::role::{Forwarding, Generations, Informing, Resolving, Roles};
use crate::route::Request;
use crate::{ClientSetup, Side};
use items::{Items, ItemsError};
use stream::Sum;

/// How long a generation is served before the index is asked again.
pub const DEFAULT_INDEX_TTL: Duration = Duration::from_secs(10 * 60);

/// Where every generation starts.
pub const INDEX_PATH: &str = "streams/v1/index.json";

/// The simplestreams servers known without configuration.
pub const BUILT_IN: [(&str, &str); 7] = [
    ("ubuntu", "https://cloud-images.ubuntu.com/releases"),
    ("ubuntu-daily", "https://cloud-images.ubuntu.com/daily"),
    ("ubuntu-minimal", "https://cloud-images.ubuntu.com/minimal/releases"),
    ("ubuntu-minimal-daily", "https://cloud-images.ubuntu.com/minimal/daily"),
    ("images", "https://images.lxd.canonical.com"),
    ("craft-com.ubuntu.cloud-buildd", "https://cloud-images.ubuntu.com/buildd/releases"),
    ("craft-com.ubuntu.cloud-buildd-daily", "https://cloud-images.ubuntu.com/buildd/daily"),
];

/// One `[[lxd.remote]]`, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteOptions {
    /// Its name: the mount `/lxd/<name>/`.
    pub name: String,
    /// The instances of its pool (base URLs of the simplestreams root).
    pub mirrors: Vec<String>,
}

/// The LXD side's configuration, as written (`[lxd]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// Remotes beside the built-in ones, or mirrors for a built-in one
    /// (`[[lxd.remote]]`).
    #[serde(default, rename = "remote")]
    pub remotes: Vec<RemoteOptions>,
    /// How long a generation is served before the index is asked again.
    #[serde(default, with = "humantime_serde")]
    pub index_ttl: Option<Duration>,
}

/// A simplestreams server: its name and its instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// Its mount name.
    pub name: String,
    /// Its instances.
    pub mirrors: Instances,
    /// Each instance's host (lower-case) and path prefix (no trailing
    /// slash), for matching forward-proxy requests without parsing URLs
    /// on every request.
    roots: Vec<(String, String)>,
}

impl Remote {
    fn new(name: &str, mirrors: Instances) -> Remote {
        let roots = mirrors.urls().iter().filter_map(|mirror| host_and_prefix(mirror)).collect();
        Remote { name: name.to_string(), mirrors, roots }
    }
}

/// The LXD side's configuration, validated.
#[derive(Debug, Clone)]
pub struct Config {
    remotes: Vec<Remote>,
    index_ttl: Duration,
}

impl Config {
    /// Validates `options`: configured mirrors replace a built-in remote's,
    /// a new name adds a remote.
    pub fn new(options: &Options) -> Result<Config, ConfigError> {
        let mut remotes: Vec<Remote> =
            BUILT_IN.iter().map(|(name, url)| Remote::new(name, Instances::built_in(url))).collect();
        for configured in &options.remotes {
            let bad =
                |reason: String| ConfigError::new(SideId::Lxd, format_args!("remote {:?}", configured.name), reason);
            let name_ok = !configured.name.is_empty()
                && configured.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
            if !name_ok {
                return Err(bad("a remote name is letters, digits, '.', '_' and '-'".into()));
            }
            if configured.mirrors.is_empty() {
                return Err(bad("has no mirrors".into()));
            }
            let mirrors = Instances::new(&configured.mirrors, None).map_err(bad)?;
            remotes.retain(|remote| remote.name != configured.name);
            remotes.push(Remote::new(&configured.name, mirrors));
        }
        Ok(Config { remotes, index_ttl: options.index_ttl.unwrap_or(DEFAULT_INDEX_TTL) })
    }

    /// The remote named `name`.
    pub fn remote(&self, name: &str) -> Option<&Remote> {
        self.remotes.iter().find(|remote| remote.name == name)
    }

    /// Every remote.
    pub fn remotes(&self) -> &[Remote] {
        &self.remotes
    }
}

/// The LXD side at run time: its configuration, what it learnt of each
/// remote, and the cache its files are kept in.
#[derive(Debug)]
pub struct Lxd {
    config: Reloadable<Config>,
    items: Items,
    cache: Cache,
}

impl Lxd {
    /// Opens the side with what it learnt, kept beside the cache in
    /// `cache_dir`. Blocking.
    pub fn open(config: Config, cache: Cache, cache_dir: &Path) -> Result<Lxd, ItemsError> {
        let items = Items::open(&cache_dir.join("lxd-items.redb"))?;
        Ok(Lxd { config: Reloadable::new(config), items, cache })
    }

    /// Its configuration.
    pub fn config(&self) -> Guard<Arc<Config>> {
        self.config.get()
    }

    /// The remote whose instance `target` is below (the longest such
    /// instance), and the path below its root. The scheme is not compared:
    /// LXD asks for the files of an `https://` remote over plain http.
    fn locate_target<'c>(&self, config: &'c Config, target: &Target) -> Result<(&'c Remote, String), Refusal> {
        let unknown = || Refusal::forbidden(format!("{} is not an LXD remote pkgproxy knows", target.host));
        if !self.tunnels_to(&target.host) {
            return Err(unknown());
        }
        let path = crate::path::checked_path(&collapse_slashes(&target.raw_path))?;
        let below = |remote: &'c Remote| {
            let path = &path;
            remote.roots.iter().filter_map(move |(host, prefix)| {
                let rest = path.strip_prefix(prefix.as_str())?.strip_prefix('/')?;
                (*host == target.host).then(|| (prefix.len(), remote, rest.to_string()))
            })
        };
        let found = config.remotes.iter().flat_map(below).max_by_key(|(length, _, _)| *length);
        found.map(|(_, remote, rest)| (remote, rest)).ok_or_else(unknown)
    }

    /// What `path` of `remote` is: the index or a products file (served
    /// from the generation), an image file a products file named, or
    /// nothing pkgproxy serves (`None`). A file no generation named yet is
    /// asked for again once the generation is current when `learn` (a
    /// client that never read the index through pkgproxy), else nothing.
    fn decide(&self, remote: &Remote, path: &str, learn: bool) -> Option<Decision> {
        let root = self.index_request(remote);
        if path == INDEX_PATH || self.items.is_products(&remote.name, path) {
            let key = member_key(&remote.name, path);
            return Some(Decision::Generation(Box::new(GenerationRequest { root, serve: Member::Key(key) })));
        }
        if !stream::is_safe(path) {
            return None;
        }
        match self.items.file(&remote.name, path) {
            Some(sum) => Some(Decision::cache(file_request(remote, path, &sum))),
            None if learn => {
                Some(Decision::Generation(Box::new(GenerationRequest { root, serve: Member::DecidedAgain })))
            }
            None => None,
        }
    }

    /// The request for `remote`'s index: the root of its generations.
    fn index_request(&self, remote: &Remote) -> CachedRequest {
        CachedRequest {
            wanted: Wanted { fresh_for: self.config().index_ttl, ..Wanted::default() },
            asking: Asking { redirects: Redirects::Followed, ..Asking::default() },
            ..CachedRequest::new(
                SideId::Lxd,
                member_key(&remote.name, INDEX_PATH),
                origin(remote, INDEX_PATH),
                Class::Revalidated,
            )
        }
    }

    fn remote_of(&self, root: &CachedRequest) -> Result<Remote, String> {
        let name = root.origin.pool.strip_prefix("lxd ").unwrap_or("");
        self.config().remote(name).cloned().ok_or_else(|| format!("no LXD remote {name:?}"))
    }
}

impl Configures for Config {
    type Side = Lxd;
    type Options = Options;
    type Invalid = ConfigError;
    const ID: SideId = SideId::Lxd;

    fn validate(options: &Options) -> Result<Config, ConfigError> {
        Config::new(options)
    }

    fn open_side(&self, cache: &Cache) -> Result<Lxd, String> {
        Lxd::open(self.clone(), cache.clone(), cache.dir()).map_err(|error| error.to_string())
    }

    fn held_by(side: &Lxd) -> &Reloadable<Config> {
        &side.config
    }

    /// The configured instances: these may be on local addresses (each on
    /// its own port only).
    fn trusted(&self) -> Vec<String> {
        self.remotes.iter().flat_map(|remote| remote.mirrors.trusted_urls()).collect()
    }

    /// Every remote fetched through the parent pkgproxy at `parent`
    /// (`http://host:port`), below its mount of the same name. Forward-proxy
    /// requests are still matched against the remote's own instances.
    fn chain(&mut self, parent: &str) {
        for remote in &mut self.remotes {
            remote.mirrors.chain_to(parent, &format!("/lxd/{}", remote.name));
        }
    }
}

impl Side for Lxd {
    fn id(&self) -> SideId {
        SideId::Lxd
    }

    /// Decides what to do with `request`: its path below `/lxd`, or a
    /// forward-proxy request for a remote's host.
    fn classify(&self, request: &Request<'_>) -> Decision {
        if !matches!(*request.method, Method::GET | Method::HEAD) {
            return Decision::Refuse(Refusal::method_not_allowed("GET, HEAD"));
        }
        let config = self.config();
        let located = match request.target {
            Some(target) => self.locate_target(&config, target),
            None => locate(&config, request.path),
        };
        let (remote, path) = match located {
            Ok(located) => located,
            Err(refusal) => return Decision::Refuse(refusal),
        };
        self.decide(remote, &path, request.target.is_some()).unwrap_or_else(|| {
            Decision::Refuse(Refusal::not_found(format!(
                "{path} is not named by the {} remote's index: only the index, its products files and the images they list are served",
                remote.name
            )))
        })
    }

    /// The request LXD makes for what is cached under `key`: a remote's
    /// index (ranked first: it and the products files it names are one
    /// generation, carried with it), or an image file under a path a
    /// products file named it by.
    fn client_url(&self, key: &str) -> Option<(u8, String)> {
        if let Some(sha256) = key.strip_prefix("lxd/file/sha256/") {
            let (remote, path) = self.items.named(sha256)?;
            return Some((1, format!("{}/{remote}/{path}", mount())));
        }
        let remote = key.strip_prefix("lxd/")?.strip_suffix(&format!("/{INDEX_PATH}"))?;
        Some((0, format!("{}/{remote}/{INDEX_PATH}", mount())))
    }

    fn client_setup(&self, host: &str) -> Option<ClientSetup> {
        let mut lines = vec![format!(
            "pkgproxyctl setup lxd-remote --addr {host}   # adds the remotes below, pkgproxy's certificate pinned"
        )];
        lines.extend(self.config().remotes().iter().map(|remote| {
            let local = names::remote_name_usually(&remote.name);
            format!("lxc remote add {local} https://{host}/lxd/{} --protocol=simplestreams --public   # and pin its certificate", remote.name)
        }));
        Some(ClientSetup { clients: "LXD images (lxc), snapcraft and the craft tools".to_owned(), lines })
    }

    fn roles(&self) -> Roles<'_> {
        Roles {
            generations: Some(self),
            resolving: Some(self),
            informing: Some(self),
            forwarding: Some(self),
            ..Roles::default()
        }
    }
}

impl Generations for Lxd {
    /// The products files `index`, the body of `root`, names: the other
    /// members of its generation.
    fn members(&self, root: &CachedRequest, index: &[u8]) -> Result<Vec<CachedRequest>, String> {
        let remote = self.remote_of(root)?;
        let paths = stream::products_paths(index).map_err(|error| error.to_string())?;
        let member = |path: &String| CachedRequest {
            asking: Asking { redirects: Redirects::Followed, ..Asking::default() },
            ..CachedRequest::new(SideId::Lxd, member_key(&remote.name, path), origin(&remote, path), Class::Revalidated)
        };
        Ok(paths.iter().map(member).collect())
    }

    /// Makes `index` and `members` (the products files it names, with
    /// their bodies) the current generation of `root`'s remote: every
    /// products file must parse, and what they name becomes servable.
    /// Blocking.
    fn adopt(&self, root: &CachedRequest, index: &[u8], members: &[(CachedRequest, Bytes)]) -> Result<(), String> {
        let remote = self.remote_of(root)?;
        let products = stream::products_paths(index).map_err(|error| error.to_string())?;
        let mut files = BTreeMap::new();
        for (path, (_, body)) in products.iter().zip(members) {
            files.extend(stream::items(path, body).map_err(|error| error.to_string())?);
        }
        let cached = |sum: &Sum| self.cache.lookup(&file_key(sum)).is_some();
        self.items.adopt(&remote.name, &products, &files, cached).map_err(|error| error.to_string())?;
        tracing::info!(remote = remote.name, products = products.len(), files = files.len(), "new generation");
        Ok(())
    }
}

impl Resolving for Lxd {
    fn needs(&self, asked: serde_json::Value, _held: &dyn HeldBodies) -> Result<Needs, NeedsError> {
        self.launch_needs(asked)
    }
}

impl Informing for Lxd {
    /// What the side has learnt.
    fn learned(&self) -> Vec<Learned> {
        let files = Learned {
            group: "lxd_items",
            name: "files",
            help: "Image files the LXD remotes' products files named.",
            value: self.items.count() as u64,
        };
        vec![files]
    }

    fn remote_names(&self) -> Vec<String> {
        self.config().remotes().iter().map(|remote| remote.name.clone()).collect()
    }
}

impl Forwarding for Lxd {
    /// Whether a forward-proxy request for `target` is for one of the
    /// remotes' hosts.
    fn claims(&self, target: &Target) -> bool {
        self.locate_target(&self.config(), target).is_ok()
    }

    /// Whether LXD may open a tunnel to `host`: a remote's host, whose
    /// index LXD fetches over https through its proxy.
    fn tunnels_to(&self, host: &str) -> bool {
        self.config().remotes.iter().flat_map(|remote| &remote.roots).any(|(known, _)| known == host)
    }
}

/// An image file: one entry per sha256, whatever named it, checked against
/// the products file's sum as it streams.
fn file_request(remote: &Remote, path: &str, sum: &Sum) -> CachedRequest {
    CachedRequest {
        wanted: Wanted {
            expected: Expected { sha256: Some(sum.sha256.clone()), size: Some(sum.size), ..Expected::default() },
            ..Wanted::default()
        },
        asking: Asking { redirects: Redirects::Followed, ..Asking::default() },
        reply: Reply { dated_resume: DatedResume::Honoured, ..Reply::default() },
        ..CachedRequest::new(SideId::Lxd, file_key(sum), origin(remote, path), Class::Immutable)
    }
}

/// The host of an instance's base URL and its path, without a trailing
/// slash.
fn host_and_prefix(url: &str) -> Option<(String, String)> {
    let uri: http::Uri = url.parse().ok()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    Some((host, uri.path().trim_end_matches('/').to_string()))
}

fn file_key(sum: &Sum) -> String {
    format!("lxd/file/sha256/{}", sum.sha256)
}

/// Where the side is mounted; each remote below it by its name.
fn mount() -> &'static str {
    crate::route::prefix_of(SideId::Lxd).unwrap_or_default()
}

fn member_key(remote: &str, path: &str) -> String {
    format!("lxd/{remote}/{path}")
}

fn origin(remote: &Remote, path: &str) -> Origin {
    let encoded = percent_encoding::utf8_percent_encode(path, PATH_ENCODED).to_string();
    Origin {
        pool: format!("lxd {}", remote.name),
        instances: remote.mirrors.urls().to_vec(),
        path: format!("/{encoded}"),
    }
}

/// What is percent-encoded in an upstream path: what cannot stand in a
/// path as it is (`:`, used in serials and products file names, can).
const PATH_ENCODED: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'%');

/// `raw` with runs of `/` made one (LXD joins URLs with `path.Join`, other
/// clients may not).
fn collapse_slashes(raw: &str) -> String {
    let mut collapsed = String::with_capacity(raw.len());
    for c in raw.chars() {
        if !(c == '/' && collapsed.ends_with('/')) {
            collapsed.push(c);
        }
    }
    collapsed
}

/// The remote of `config` and the path below its root that `raw` (below
/// `/lxd`, percent-encoded) names.
fn locate<'c>(config: &'c Config, raw: &str) -> Result<(&'c Remote, String), Refusal> {
    let collapsed = collapse_slashes(raw);
    let decoded = crate::path::checked_path(&collapsed)?;
    let (name, path) = decoded.trim_start_matches('/').split_once('/').unwrap_or((decoded.trim_start_matches('/'), ""));
    let Some(remote) = config.remote(name) else {
        let reason = format!("pkgproxy knows no LXD remote {name:?}; add it as an [[lxd.remote]]");
        return Err(Refusal::not_found(reason));
    };
    Ok((remote, path.trim_end_matches('/').to_string()))
}

#[cfg(test)]
mod tests;
