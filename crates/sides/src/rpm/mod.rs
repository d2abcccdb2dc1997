//! The RPM side: dnf and yum through pkgproxy. Each repository is served
//! at `/rpm/NAME/` with its distribution's own paths below ([`config`]);
//! every mirror of one repository is one cache entry per file.
//!
//! Every file is held to the chain of checksums the repository publishes
//! before it is cached ([`checks`]):
//! - `repodata/repomd.xml` is revalidated after `metadata_ttl`, and a copy
//!   older than the one held (by `<revision>`) never replaces it; where a
//!   metalink is published, a copy it does not list (a mirror that is
//!   behind) is not taken either.
//! - each metadata file `repomd.xml` names is checked against the checksum
//!   it gives, and kept for good under its checksummed name, its bytes as
//!   they came (never recompressed);
//! - each package is checked against the checksum the primary metadata
//!   gives it ([`index`]): learnt as primary passes through, or fetched by
//!   pkgproxy for the package when none was learnt yet.
//!
//! What cannot be had now is a `424` with pkgproxy's reason, which dnf
//! prints at once.

pub mod checks;
mod closure;
pub mod config;
pub mod evr;
mod gate;
pub mod index;
pub mod layout;
pub mod metalink;
pub mod needs;
pub mod nevra;
pub mod primary;
pub mod repomd;
mod reporting;
mod resolve;
pub mod setup;
mod told;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::Guard;
use bytes::Bytes;
use http::Method;
use pkgproxy_cache::{Cache, Class, Verifier};

use crate::config::{ConfigError, Configures, Reloadable};
use crate::decision::{CachedRequest, ClientCacheControl, Decision, LocalAnswer, Origin, Refusal, Target, Wanted};
use crate::failure::{asked_to_wait, Failure};
use crate::id::SideId;
use crate::named::REFRESH_EVERY;
use crate::needs::HeldBodies;
use crate::role::{Evicting, Explaining, Fetching, Forwarding, Roles, UpstreamFailures, UpstreamPath};
use crate::route::{Mount, Request};
use crate::{ClientSetup, Side};
use checks::{Learning, MetadataCheck, PackageCheck, RepomdCheck, REPOMD_LIMIT};
pub use config::{Config, Options, Repository, RepositoryOptions};
use index::RpmIndex;
use layout::RpmPath;
use metalink::Metalink;
use primary::{Compression, Package};
use repomd::{Checksum, Repomd};

/// The RPM side at run time: its configuration, the cache it reads
/// `repomd.xml` from, and its index of packages.
#[derive(Debug)]
pub struct Rpm {
    config: Reloadable<Config>,
    cache: Cache,
    index: Arc<RpmIndex>,
    /// The primaries being learnt.
    under_way: Arc<checks::UnderWay>,
}

impl Rpm {
    /// The side, with its index beside the cache (`rpm-index.redb` in
    /// `cache_dir`).
    pub fn open(config: Config, cache: Cache, cache_dir: &Path) -> Result<Rpm, index::IndexError> {
        let index = RpmIndex::open(&cache_dir.join("rpm-index.redb"))?;
        Ok(Rpm { config: Reloadable::new(config), cache, index: Arc::new(index), under_way: Arc::default() })
    }

    /// The side's validated configuration.
    pub fn config(&self) -> Guard<Arc<Config>> {
        self.config.get()
    }

    /// What primary metadata said of the packages, as learnt.
    pub fn index(&self) -> &RpmIndex {
        &self.index
    }

    fn classify_path(&self, request: &Request<'_>) -> Result<Decision, Refusal> {
        let path = crate::path::checked_path(request.path)?;
        let config = self.config();
        if let (Mount::ForwardProxy, Some(target)) = (request.mount, request.target) {
            let url = format!("{}://{}:{}{path}", target.scheme, target.host, target.port);
            let url = url.replacen(":80/", "/", 1);
            let (repository, below) = config.forwarded(&url).ok_or_else(|| {
                Refusal::forbidden(format!(
                    "{url} is on no repository pkgproxy serves: configure it as [[rpm.repository]]"
                ))
            })?;
            return self.classify_in(&config, repository, below);
        }
        let below = path.strip_prefix('/').unwrap_or(&path);
        let (name, path) = below.split_once('/').unwrap_or((below, ""));
        let repository = config.repository(name).ok_or_else(|| {
            let names: Vec<&str> = config.repositories.iter().map(|repository| repository.name.as_str()).collect();
            Refusal::not_found(format!(
                "no repository {name:?} is configured: a repository is /rpm/NAME/ (configured: {})",
                names.join(", ")
            ))
        })?;
        self.classify_in(&config, repository, path)
    }

    /// What to do with a request for `path` below `repository`.
    fn classify_in(&self, config: &Config, repository: &Repository, path: &str) -> Result<Decision, Refusal> {
        if path.is_empty() || path.ends_with('/') {
            return Err(Refusal::not_found("pkgproxy serves a repository's files, not its folders' listings"));
        }
        let laid = RpmPath::parse(path)
            .ok_or_else(|| Refusal::not_found(format!("{path:?} is a name pkgproxy keeps for itself")))?;
        let mut request = file_request(config, repository, path, laid.is_immutable());
        if laid == RpmPath::Package && !self.can_check(repository, path, &request.key) {
            return Err(unknown_package(path));
        }
        if let RpmPath::Metadata { root, location } = &laid {
            if let Some((checksum, size)) = self.listed_metadata(repository, root, location) {
                request.wanted.expected = checks_expected(&checksum, size);
                request.wanted.expected_from = Some(layout::repomd_path(root));
            }
        }
        Ok(Decision::cache(request))
    }

    /// Whether the package at `path` (cache key `key`) is held, or can be
    /// checked once fetched: a primary learnt lists it, or the primary of
    /// the `repomd.xml` held above it is yet to be learnt. Asked before a
    /// miss, so that a package nothing vouches for is not fetched only to
    /// be refused.
    fn can_check(&self, repository: &Repository, path: &str, key: &str) -> bool {
        if self.cache.lookup(key).is_some() || self.index.package(&repository.name, path).is_some() {
            return true;
        }
        let Some((root, repomd)) = self.root_of_package(repository, path) else { return false };
        let Some((learning, _)) = self.learning(repository, root, &repomd) else { return false };
        !self.index.learnt(&repository.name, root, &learning.checksum)
    }

    /// The `repomd.xml` held for `root` of `repository`, read.
    fn held_repomd(&self, repository: &Repository, root: &str) -> Option<Repomd> {
        let body = self.cache.read_small(&repository.key(&layout::repomd_path(root)), REPOMD_LIMIT)?;
        Repomd::read(&body).ok()
    }

    /// The checksum and size the `repomd.xml` held for `root` gives the
    /// metadata file at `location`.
    fn listed_metadata(&self, repository: &Repository, root: &str, location: &str) -> Option<(Checksum, Option<u64>)> {
        let repomd = self.held_repomd(repository, root)?;
        let file = repomd.file_at(location)?;
        Some((file.checksum.clone(), file.size))
    }

    /// The root a package at `path` belongs to (the deepest folder above
    /// it with a `repomd.xml` held) and that `repomd.xml`.
    fn root_of_package<'p>(&self, repository: &Repository, path: &'p str) -> Option<(&'p str, Repomd)> {
        layout::roots_above(path).find_map(|root| Some((root, self.held_repomd(repository, root)?)))
    }

    /// How to learn the primary metadata `repomd` names for `root`: the
    /// one pkgproxy can read (zchunk's is not read; repositories that
    /// publish it publish another beside it).
    fn learning(&self, repository: &Repository, root: &str, repomd: &Repomd) -> Option<(Learning, String)> {
        let primary = readable_primary(repomd)?;
        let learning = Learning {
            index: Arc::clone(&self.index),
            repository: repository.name.clone(),
            root: root.to_owned(),
            checksum: primary.checksum.hex.clone(),
            compression: Compression::of(&primary.location)?,
            path_of: Arc::new(package_path(repository.clone(), root.to_owned())),
            under_way: Arc::clone(&self.under_way),
        };
        Some((learning, layout::join(root, &primary.location)))
    }
}

/// The primary metadata `repomd` names that pkgproxy reads: zchunk's is
/// not read, and repositories that publish it publish another beside it.
fn readable_primary(repomd: &Repomd) -> Option<&repomd::MetadataFile> {
    repomd.files.iter().filter(|file| file.kind == "primary").find(|file| Compression::of(&file.location).is_some())
}

/// Where below `repository` a package primary metadata of `root` lists
/// is: its `href` below the root, or below the `xml:base` it names when
/// that is on one of the repository's mirrors. `None` for a package at
/// another host: pkgproxy does not serve it.
fn package_path(repository: Repository, root: String) -> impl Fn(&Package) -> Option<String> + Send + Sync {
    move |package| {
        let path = match &package.base {
            None => layout::join(&root, &package.href),
            Some(base) => {
                let url = format!("{}/{}", base.trim_end_matches('/'), package.href);
                repository.mirrors.path_below(&url)?.trim_start_matches('/').to_owned()
            }
        };
        normalized(&path)
    }
}

/// `path` without `.` and `..` segments (an `href` of `../packages/x.rpm`),
/// as a client's URL library sends it; `None` if it climbs out.
fn normalized(path: &str) -> Option<String> {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop()?;
            }
            segment => segments.push(segment),
        }
    }
    Some(segments.join("/"))
}

/// The refusal of a package no metadata pkgproxy holds vouches for: it
/// is not fetched, since it could not be checked.
fn unknown_package(path: &str) -> Refusal {
    let reason = format!(
        "{path} is not listed by the primary metadata pkgproxy holds of its repository (or none is held: dnf fetches \
         repodata/repomd.xml and the primary it names first): pkgproxy keeps only packages it can check"
    );
    Refusal::new(http::StatusCode::FAILED_DEPENDENCY, reason)
        .with_phrase("Not held (pkgproxy): no metadata vouches for it".to_owned())
}

/// What the cache must check for `checksum` and `size` itself (SHA-256,
/// SHA-512): a held copy that does not match is stale.
fn checks_expected(checksum: &Checksum, size: Option<u64>) -> pkgproxy_cache::Expected {
    let hex = Some(checksum.hex.clone());
    match checksum.algorithm {
        repomd::Algorithm::Sha256 => pkgproxy_cache::Expected { size, sha256: hex, sha512: None },
        repomd::Algorithm::Sha512 => pkgproxy_cache::Expected { size, sha256: None, sha512: hex },
        _ => pkgproxy_cache::Expected { size, ..Default::default() },
    }
}

/// The checksum a metadata file's name carries (`HEX-primary.xml.gz`).
fn checksum_in_name(location: &str) -> Option<Checksum> {
    let name = location.rsplit('/').next()?;
    let (hex, _) = name.split_once('-')?;
    let algorithm = match hex.len() {
        40 => "sha1",
        64 => "sha256",
        96 => "sha384",
        128 => "sha512",
        _ => return None,
    };
    Checksum::new(algorithm, hex)
}

/// The request for `path` of `repository`: kept for good if it never
/// changes, revalidated after `metadata_ttl` otherwise.
fn file_request(config: &Config, repository: &Repository, path: &str, immutable: bool) -> CachedRequest {
    let origin =
        Origin { pool: repository.pool(), instances: repository.mirrors.urls().to_vec(), path: format!("/{path}") };
    let (class, fresh_for) = match immutable {
        true => (Class::Immutable, Duration::ZERO),
        false => (Class::Revalidated, config.metadata_ttl),
    };
    // dnf asks `repomd.xml` with `Cache-Control: no-cache` each time it
    // looks (its own `metadata_expire` decides when): metadata_ttl
    // decides instead, or every dnf run of a fleet would reach the mirror.
    let wanted = Wanted { fresh_for, client_cache_control: ClientCacheControl::Ignored, ..Wanted::default() };
    CachedRequest { wanted, ..CachedRequest::new(SideId::Rpm, repository.key(path), origin, class) }
}

/// The request for the metalink of `root`, fetched at `url` beside each
/// fetch of its `repomd.xml` (shared by the clients that join one).
fn metalink_request(repository: &Repository, root: &str, url: &str) -> Option<CachedRequest> {
    let (scheme, rest) = url.split_once("://")?;
    let slash = rest.find('/').unwrap_or(rest.len());
    let path = match &rest[slash..] {
        "" => "/".to_owned(),
        path => path.to_owned(),
    };
    let origin = Origin {
        pool: format!("{} metalink", repository.pool()),
        instances: vec![format!("{scheme}://{}", &rest[..slash])],
        path,
    };
    let mut request =
        CachedRequest::new(SideId::Rpm, repository.key(&layout::metalink_path(root)), origin, Class::Revalidated);
    request.wanted.fresh_for = REFRESH_EVERY;
    Some(request)
}

impl Configures for Config {
    type Side = Rpm;
    type Options = Options;
    type Invalid = ConfigError;
    const ID: SideId = SideId::Rpm;

    fn validate(options: &Options) -> Result<Config, ConfigError> {
        Config::new(options)
    }

    fn open_side(&self, cache: &Cache) -> Result<Rpm, String> {
        Rpm::open(self.clone(), cache.clone(), cache.dir()).map_err(|error| error.to_string())
    }

    fn held_by(side: &Rpm) -> &Reloadable<Config> {
        &side.config
    }

    /// The configured mirrors and metalinks: these may be on local
    /// addresses (each on its own port only).
    fn trusted(&self) -> Vec<String> {
        Config::trusted(self)
    }

    /// Every repository fetched from the parent pkgproxy at `parent`.
    fn chain(&mut self, parent: &str) {
        for repository in &mut self.repositories {
            let mount = format!("/rpm/{}", repository.name);
            repository.mirrors.chain_to(parent, &mount);
        }
        self.know_hosts();
    }
}

impl Side for Rpm {
    fn id(&self) -> SideId {
        SideId::Rpm
    }

    /// A repository is read with `GET` (and `HEAD`) only.
    fn classify(&self, request: &Request<'_>) -> Decision {
        match *request.method {
            Method::GET | Method::HEAD => match told::answer_for(request.query) {
                Some(answer) => Decision::Answer(answer),
                None => self.classify_path(request).unwrap_or_else(Decision::Refuse),
            },
            _ => Decision::Refuse(Refusal::method_not_allowed("GET, HEAD")),
        }
    }

    /// Each file is held to the checksum the file above it in the chain
    /// gives (see [`checks`]).
    fn verifier(&self, request: &CachedRequest, prerequisites: &[Bytes]) -> Option<Arc<dyn Verifier>> {
        let config = self.config();
        let (repository, path) = config.repository_of_key(&request.key)?;
        match RpmPath::parse(path)? {
            RpmPath::Repomd { root } => {
                let metalink = match repository.metalink(&root) {
                    Some(_) => prerequisites.first().and_then(|body| Metalink::read(body).ok()),
                    None => None,
                };
                let held = self.held_repomd(repository, &root);
                let held_in = (Arc::clone(&self.index), repository.name.clone(), root);
                Some(Arc::new(RepomdCheck { held, metalink, path: path.to_owned(), held_in }))
            }
            RpmPath::Metadata { root, location } => {
                let repomd = self.held_repomd(repository, &root);
                let listed = repomd.as_ref().and_then(|repomd| repomd.file_at(&location));
                let checksum = match listed {
                    Some(file) => Some((file.checksum.clone(), file.size)),
                    None => checksum_in_name(&location).map(|checksum| (checksum, None)),
                };
                let learning = repomd
                    .as_ref()
                    .and_then(|repomd| self.learning(repository, &root, repomd))
                    .filter(|(_, primary)| primary == path)
                    .map(|(learning, _)| learning);
                Some(Arc::new(MetadataCheck { checksum, path: path.to_owned(), learning }))
            }
            RpmPath::Package => {
                let listed = self.index.package(&repository.name, path);
                let body = prerequisites.first().filter(|body| !body.is_empty()).cloned();
                let primary = match listed {
                    None => self
                        .root_of_package(repository, path)
                        .and_then(|(root, repomd)| self.learning(repository, root, &repomd))
                        .map(|(learning, _)| (learning, body)),
                    Some(_) => None,
                };
                let lookup = Some((Arc::clone(&self.index), repository.name.clone(), path.to_owned()));
                Some(Arc::new(PackageCheck { listed, primary, lookup }))
            }
            RpmPath::RepomdSignature | RpmPath::Other => None,
        }
    }

    /// What cannot be had now is a `424`, which dnf takes as final for
    /// the mirror at once; dnf prints only the status and the URL, so the
    /// answer leads there through a redirect whose URL says why (see
    /// [`told`]). So does a refusal by the fleet's policy.
    fn failure_answer(&self, failure: &Failure<'_>) -> LocalAnswer {
        let answer = match failure {
            Failure::Overloaded { retry_after } => {
                asked_to_wait(*retry_after, "repository", "Not held (pkgproxy): the repository asks to wait")
            }
            Failure::Refused(refusal) if refusal.phrase.is_none() => return failure.plain_text(),
            _ => failure.not_held("pkgproxyctl warm rpm fetches what an image installs"),
        };
        match answer.reason.clone() {
            Some(why) => told::redirected(answer, &why),
            None => answer,
        }
    }

    /// The request dnf makes for what is cached under `key`: `repomd.xml`
    /// first, the metadata it names, then packages.
    fn client_url(&self, key: &str) -> Option<(u8, String)> {
        let config = self.config();
        let (repository, path) = config.repository_of_key(key)?;
        let rank = match RpmPath::parse(path)? {
            RpmPath::Repomd { .. } | RpmPath::RepomdSignature => 0,
            RpmPath::Metadata { .. } => 1,
            RpmPath::Package | RpmPath::Other => 2,
        };
        Some((rank, format!("/rpm/{}/{path}", repository.name)))
    }

    fn client_setup(&self, host: &str) -> Option<ClientSetup> {
        let lines = vec![
            format!("pkgproxyctl setup dnf --addr {host} | sudo sh"),
            format!("or in a .repo file: baseurl=http://{host}/rpm/fedora/releases/$releasever/Everything/$basearch/os/ (and the metalink= line commented)"),
        ];
        Some(ClientSetup { clients: "dnf and yum".to_owned(), lines })
    }

    fn roles(&self) -> Roles<'_> {
        Roles {
            fetching: Some(self),
            explaining: Some(self),
            forwarding: Some(self),
            evicting: Some(self),
            gating: Some(self),
            resolving: Some(self),
            reporting: Some(self),
            ..Roles::default()
        }
    }
}

impl Fetching for Rpm {
    /// A `repomd.xml`'s metalink, where one is published; a package's
    /// primary metadata, when no primary learnt lists the package.
    fn prerequisites(&self, request: &CachedRequest) -> Vec<CachedRequest> {
        let config = self.config();
        let Some((repository, path)) = config.repository_of_key(&request.key) else { return Vec::new() };
        match RpmPath::parse(path) {
            Some(RpmPath::Repomd { root }) => repository
                .metalink(&root)
                .and_then(|url| metalink_request(repository, &root, &url))
                .into_iter()
                .collect(),
            Some(RpmPath::Package) if self.index.package(&repository.name, path).is_none() => {
                let Some((root, repomd)) = self.root_of_package(repository, path) else { return Vec::new() };
                let Some((learning, primary)) = self.learning(repository, root, &repomd) else { return Vec::new() };
                // Learnt, or being learnt (the package's check waits for it).
                if self.index.learnt(&repository.name, root, &learning.checksum)
                    || self.under_way.is_learning(&learning.key())
                {
                    return Vec::new();
                }
                let laid = RpmPath::parse(&primary);
                let immutable = laid.as_ref().is_some_and(RpmPath::is_immutable);
                vec![file_request(&config, repository, &primary, immutable)]
            }
            _ => Vec::new(),
        }
    }

    /// A repository's `5xx` and `429` are told as pkgproxy's `424`.
    fn upstream_failures(&self) -> UpstreamFailures {
        UpstreamFailures { errors_fail: true, waits_fail: true }
    }
}

impl Evicting for Rpm {
    /// The `repodata/` folder of every root whose `repomd.xml` was taken.
    fn superseded_prefixes(&self) -> Vec<String> {
        let roots = self.index.roots();
        let split = roots.iter().filter_map(|held| held.split_once('/'));
        split.map(|(name, root)| format!("rpm/{name}/{}", layout::join(root, "repodata/"))).collect()
    }

    /// Whether the entry `key` is a metadata file the `repomd.xml` held no
    /// longer names (or names with other bytes): dnf will never ask for it
    /// again.
    fn superseded(&self, key: &str, entry: &pkgproxy_cache::Entry) -> bool {
        let config = self.config();
        let Some((repository, path)) = config.repository_of_key(key) else { return false };
        let Some(RpmPath::Metadata { root, location }) = RpmPath::parse(path) else { return false };
        let Some(repomd) = self.held_repomd(repository, &root) else { return false };
        match repomd.file_at(&location) {
            None => true,
            Some(file) => file.checksum.algorithm == repomd::Algorithm::Sha256 && file.checksum.hex != entry.sha256,
        }
    }

    /// A root whose `repomd.xml` was removed by hand is forgotten.
    /// Blocking.
    fn removed(&self, keys: &[String]) {
        let config = self.config();
        for key in keys {
            let Some((repository, path)) = config.repository_of_key(key) else { continue };
            if let Some(RpmPath::Repomd { root }) = RpmPath::parse(path) {
                if let Err(error) = self.index.forget_root(&repository.name, &root) {
                    tracing::warn!(%error, "cannot forget a root");
                }
            }
        }
    }
}

impl Forwarding for Rpm {
    /// A forward-proxy request for a repository's file on its mirror (dnf's
    /// `proxy=` with an `http://` repository, or a package an `xml:base`
    /// puts on a mirror) is the RPM side's: its `repodata/` and its
    /// packages, never another file of the host (which may serve apt's
    /// archives beside).
    fn claims(&self, target: &Target) -> bool {
        let config = self.config();
        if !config.serves_host(&target.host) {
            return false;
        }
        let url =
            format!("{}://{}:{}{}", target.scheme, target.host, target.port, target.raw_path).replacen(":80/", "/", 1);
        let Some((_, path)) = config.forwarded(&url) else { return false };
        let path = percent_encoding::percent_decode_str(path).decode_utf8_lossy();
        !matches!(RpmPath::parse(&path), None | Some(RpmPath::Other))
    }

    /// dnf may open a tunnel to a repository's mirror, for an `https://`
    /// repository through its `proxy=` (not cached: pkgproxy cannot read it).
    fn tunnels_to(&self, host: &str) -> bool {
        self.config().serves_host(host)
    }
}

impl Explaining for Rpm {
    fn upstream_path(&self, url: &str, _held: &dyn HeldBodies) -> Option<UpstreamPath> {
        self.config().upstream_path(url).map(UpstreamPath::At)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_with_dot_segments_is_normalized_and_one_that_climbs_out_refused() {
        assert_eq!(normalized("os/../packages/a.rpm").as_deref(), Some("packages/a.rpm"));
        assert_eq!(normalized("./a/./b.rpm").as_deref(), Some("a/b.rpm"));
        assert_eq!(normalized("../a.rpm"), None);
    }

    #[test]
    fn a_metadata_name_carries_its_checksum() {
        let hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let checksum = checksum_in_name(&format!("repodata/{hex}-primary.xml.gz")).unwrap();
        assert_eq!(checksum.algorithm, repomd::Algorithm::Sha256);
        assert_eq!(checksum_in_name("repodata/primary.xml.gz"), None);
    }
}
