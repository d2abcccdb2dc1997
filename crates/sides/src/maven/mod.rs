//! The Maven side: Maven, Gradle and every JVM build through pkgproxy.
//! Each repository is served at `/maven/NAME/` in the layout every Maven
//! repository has (`GROUP/AS/PATH/ARTIFACT/VERSION/FILE`: [`layout`]);
//! Maven Central is `/maven/central/` ([`config`]).
//!
//! - A release's files (and a SNAPSHOT's timestamped ones) never change
//!   under their names: fetched once and kept, each checked as it streams
//!   against the strongest checksum its repository publishes beside it
//!   (`.sha512`, `.sha256`, else `.sha1`), the three asked at once before
//!   it ([`checks`]). One with none is refused where the repository
//!   requires checksums (the default).
//! - A checksum a client then asks for agrees with the file it got: one
//!   fetched is checked against the held file, and one the repository
//!   cannot give now (offline, down, or lying) is computed from it
//!   ([`sidecars`]). A `maven-metadata.xml`'s is computed from the copy
//!   held, which its client fetched a moment before.
//! - `maven-metadata.xml` is revalidated after `metadata_ttl` (Maven's
//!   `Cache-Control: no-cache`, sent with every request, is not read), and a copy
//!   older than the one held (`<lastUpdated>`) never replaces it
//!   ([`metadata`]). A file of a version the held metadata does not list
//!   yet makes the metadata be asked again (once in a while at most).
//! - A `-SNAPSHOT` file named without its build is revalidated as
//!   metadata is: Maven and Gradle resolve such names through the
//!   version's metadata to the timestamped files, which are immutable.
//! - An upstream's `404` is remembered for `negative_ttl` (a build asks
//!   every repository for every artifact), unless the held metadata lists
//!   the version since.
//! - What cannot be had now is a `424` with pkgproxy's reason in its
//!   status line, which Maven prints at once and does not retry (it
//!   retries only a `429`, for minutes).
//! - Under the fleet's policy (`[policy]`), a release's files are judged
//!   by the time its pom was published (`gate.rs`), and refused with a
//!   `403` Maven prints with the rule.

pub mod checks;
pub mod config;
mod gate;
pub mod layout;
pub mod metadata;
pub mod needs;
mod reporting;
pub mod setup;
mod sidecars;
pub mod wanted;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::Guard;
use bytes::Bytes;
use http::Method;
use parking_lot::Mutex;
use pkgproxy_cache::{Cache, Class, PassedAnswer, Verifier};

use crate::config::{ConfigError, Configures, Reloadable};
use crate::decision::{
    CachedRequest, ClientCacheControl, DatedResume, Decision, LocalAnswer, Origin, Refusal, Reply, Wanted,
};
use crate::failure::{asked_to_wait, Failure};
use crate::id::SideId;
use crate::named::REFRESH_EVERY;
use crate::needs::HeldBodies;
use crate::remembered::RememberedAnswers;
use crate::role::{Explaining, Fetching, Remembering, Roles, UpstreamFailures, UpstreamPath};
use crate::route::Request;
use crate::{ClientSetup, Side};
use checks::{CheckedFile, HeldFile, MetadataVerifier, SidecarBodyVerifier, SidecarVerifier, Unproven, METADATA_LIMIT};
use config::Repository;
pub use config::{Config, Options, RepositoryOptions};
use layout::{ArtifactFile, MavenPath, Sidecar, METADATA};
use metadata::Metadata;

/// What a path below `/maven/NAME/` asks for.
#[derive(Debug)]
enum Asked {
    /// What the Maven layout names.
    Laid(MavenPath),
    /// Another file of the repository (an archetype catalog, an index):
    /// kept as it comes, revalidated as metadata is.
    Other,
}

/// The Maven side at run time: its configuration, the "not found" answers
/// it remembers, and when it last asked metadata again for a version it
/// did not list.
#[derive(Debug)]
pub struct Maven {
    config: Reloadable<Config>,
    cache: Cache,
    not_found: RememberedAnswers,
    refreshed: Mutex<HashMap<String, Instant>>,
}

impl Maven {
    /// The side, remembering nothing yet.
    pub fn new(config: Config, cache: Cache) -> Maven {
        Maven {
            config: Reloadable::new(config),
            cache,
            not_found: RememberedAnswers::default(),
            refreshed: Mutex::default(),
        }
    }

    /// The side's validated configuration.
    pub fn config(&self) -> Guard<Arc<Config>> {
        self.config.get()
    }

    fn classify_path(&self, request: &Request<'_>) -> Result<Decision, Refusal> {
        let path = crate::path::checked_path(request.path)?;
        let below = path.strip_prefix('/').unwrap_or(&path);
        let (name, path) = below.split_once('/').unwrap_or((below, ""));
        let config = self.config();
        let repository = config.repository(name).ok_or_else(|| {
            let names: Vec<&str> = config.repositories.iter().map(|repository| repository.name.as_str()).collect();
            Refusal::not_found(format!(
                "no repository {name:?} is configured: a repository is /maven/NAME/ (configured: {})",
                names.join(", ")
            ))
        })?;
        if path.is_empty() || path.ends_with('/') {
            return Err(Refusal::not_found("pkgproxy serves a repository's files, not its folders' listings"));
        }
        let asked = match MavenPath::parse(path) {
            Some(laid) => Asked::Laid(laid),
            None if path.split('/').all(layout::is_segment) => Asked::Other,
            None => return Err(Refusal::not_found(format!("{path:?} is not a path of a Maven repository"))),
        };
        Ok(match asked {
            Asked::Laid(MavenPath::Sidecar { of, kind }) => self.sidecar(&config, repository, path, &of, kind),
            Asked::Laid(laid) => Decision::cache(file_request(&config, repository, path, laid.is_immutable())),
            Asked::Other => Decision::cache(file_request(&config, repository, path, false)),
        })
    }

    /// A checksum or signature beside a file. One beside a file that
    /// never changes is kept as the file is, and agrees with it; one of
    /// a `maven-metadata.xml` pkgproxy holds is computed from that copy,
    /// the one its client was just given.
    fn sidecar(&self, config: &Config, repository: &Repository, path: &str, of: &MavenPath, kind: Sidecar) -> Decision {
        let of_path = path.strip_suffix(kind.extension()).and_then(|p| p.strip_suffix('.')).unwrap_or(path);
        if matches!(of, MavenPath::Metadata { .. }) && kind != Sidecar::Asc {
            let held = self.cache.read_small(&repository.key(of_path), METADATA_LIMIT);
            if let Some(answer) = held.and_then(|body| sidecars::computed(kind, &body)) {
                return Decision::Answer(answer);
            }
        }
        let mut request = file_request(config, repository, path, of.is_immutable());
        if of.is_immutable() && kind != Sidecar::Asc {
            let file = file_request(config, repository, of_path, true);
            request.reply.fallback = Some(Arc::new(sidecars::FromHeldFile { file, kind }));
        }
        Decision::cache(request)
    }

    /// The artifact-level metadata of `file`, when it is held, and
    /// whether it lists `file`'s version.
    fn lists_version(&self, repository: &Repository, file: &ArtifactFile) -> Option<bool> {
        let body = self.cache.read_small(&repository.key(&artifact_metadata_path(file)), METADATA_LIMIT)?;
        Some(Metadata::read(&body).ok()?.lists(&file.version))
    }

    /// Whether metadata `key` may be asked again now for a version it did
    /// not list: once every [`REFRESH_EVERY`] at most.
    fn may_refresh(&self, key: &str) -> bool {
        let now = Instant::now();
        let mut refreshed = self.refreshed.lock();
        refreshed.retain(|_, at| now.duration_since(*at) < REFRESH_EVERY);
        refreshed.insert(key.to_owned(), now).is_none()
    }

    /// The repository and what the path of `request`'s key names.
    fn laid_out<'c>(config: &'c Config, request: &CachedRequest) -> Option<(&'c Repository, String, MavenPath)> {
        let (repository, path) = config.repository_of_key(&request.key)?;
        Some((repository, path.to_owned(), MavenPath::parse(path)?))
    }
}

/// The request for `path` of `repository`: kept for good if it never
/// changes, revalidated after `metadata_ttl` otherwise.
fn file_request(config: &Config, repository: &Repository, path: &str, immutable: bool) -> CachedRequest {
    let origin =
        Origin { pool: repository.pool(), instances: repository.mirrors.urls().to_vec(), path: format!("/{path}") };
    let (class, fresh_for, dated_resume) = match immutable {
        true => (Class::Immutable, Duration::ZERO, DatedResume::Honoured),
        false => (Class::Revalidated, config.metadata_ttl, DatedResume::default()),
    };
    // Maven sends `Cache-Control: no-cache` with every request, whatever
    // it needs: metadata_ttl decides instead.
    let wanted = Wanted { fresh_for, client_cache_control: ClientCacheControl::Ignored, ..Wanted::default() };
    CachedRequest {
        wanted,
        reply: Reply { dated_resume, ..Reply::default() },
        ..CachedRequest::new(SideId::Maven, repository.key(path), origin, class)
    }
}

/// The path of `file`'s artifact-level `maven-metadata.xml`.
fn artifact_metadata_path(file: &ArtifactFile) -> String {
    format!("{}/{}/{METADATA}", file.group.replace('.', "/"), file.artifact)
}

impl Configures for Config {
    type Side = Maven;
    type Options = Options;
    type Invalid = ConfigError;
    const ID: SideId = SideId::Maven;

    fn validate(options: &Options) -> Result<Config, ConfigError> {
        Config::new(options)
    }

    fn open_side(&self, cache: &Cache) -> Result<Maven, String> {
        Ok(Maven::new(self.clone(), cache.clone()))
    }

    fn held_by(side: &Maven) -> &Reloadable<Config> {
        &side.config
    }

    /// The repositories configured: these may be on local addresses (each
    /// on its own port only).
    fn trusted(&self) -> Vec<String> {
        self.repositories.iter().flat_map(|repository| repository.mirrors.trusted_urls()).collect()
    }

    /// Every repository fetched from the parent pkgproxy at `parent`.
    fn chain(&mut self, parent: &str) {
        for repository in &mut self.repositories {
            let mount = format!("/maven/{}", repository.name);
            repository.mirrors.chain_to(parent, &mount);
        }
    }
}

impl Side for Maven {
    fn id(&self) -> SideId {
        SideId::Maven
    }

    /// A repository is read with `GET` (and `HEAD`) only.
    fn classify(&self, request: &Request<'_>) -> Decision {
        match *request.method {
            Method::GET | Method::HEAD => self.classify_path(request).unwrap_or_else(Decision::Refuse),
            _ => Decision::Refuse(Refusal::method_not_allowed("GET, HEAD")),
        }
    }

    /// A file must match the strongest checksum published beside it (given
    /// in the order of [`Sidecar::CHECKSUMS_STRONGEST_FIRST`], an empty
    /// body for one not had); metadata must not be older than the one
    /// held; a checksum must be one, and agree with the file held.
    fn verifier(&self, request: &CachedRequest, prerequisites: &[Bytes]) -> Option<Arc<dyn Verifier>> {
        let config = self.config();
        let (repository, path, laid) = Self::laid_out(&config, request)?;
        match laid {
            MavenPath::File(_) => {
                let strongest =
                    Sidecar::CHECKSUMS_STRONGEST_FIRST.iter().zip(prerequisites).find_map(|(kind, body)| {
                        Some(SidecarVerifier {
                            kind: *kind,
                            digest: checks::digest_of(*kind, body)?,
                            path: path.clone(),
                        })
                    });
                if strongest.is_none() && repository.require_checksums {
                    return Some(Arc::new(Unproven { path, repository: repository.name.clone() }));
                }
                let held = HeldFile { cache: self.cache.clone(), key: request.key.clone() };
                Some(Arc::new(CheckedFile::new(strongest, held)))
            }
            MavenPath::Metadata { .. } => {
                let held = self.cache.read_small(&request.key, METADATA_LIMIT);
                Some(Arc::new(MetadataVerifier { held: held.and_then(|body| Metadata::read(&body).ok()) }))
            }
            MavenPath::Sidecar { of, kind } if kind != Sidecar::Asc => {
                let of_key = request.key.strip_suffix(kind.extension())?.strip_suffix('.')?.to_owned();
                let held_file = (of.is_immutable() && self.cache.lookup(&of_key).is_some())
                    .then(|| HeldFile { cache: self.cache.clone(), key: of_key });
                Some(Arc::new(SidecarBodyVerifier { kind, held_file }))
            }
            MavenPath::Sidecar { .. } => None,
        }
    }

    /// What cannot be had now is a `424`, which Maven prints with its
    /// reason at once and does not retry; a repository that asks to be
    /// left alone too (Maven would retry its `429` for minutes).
    fn failure_answer(&self, failure: &Failure<'_>) -> LocalAnswer {
        match failure {
            Failure::Overloaded { retry_after } => {
                asked_to_wait(*retry_after, "repository", "Not held (pkgproxy): the repository asks to wait")
            }
            _ => failure.not_held("pkgproxyctl warm maven fetches what a build needs"),
        }
    }

    /// The request a build makes for what is cached under `key`: checksums
    /// and metadata before the files they describe.
    fn client_url(&self, key: &str) -> Option<(u8, String)> {
        let config = self.config();
        let (repository, path) = config.repository_of_key(key)?;
        let rank = match MavenPath::parse(path) {
            Some(MavenPath::File(_)) | None => 1,
            Some(_) => 0,
        };
        Some((rank, format!("/maven/{}/{path}", repository.name)))
    }

    fn client_setup(&self, host: &str) -> Option<ClientSetup> {
        let lines = vec![
            format!("pkgproxyctl setup maven --addr {host} | sh"),
            format!("pkgproxyctl setup gradle --addr {host} | sh"),
            format!("or in ~/.m2/settings.xml: <mirror><id>pkgproxy</id><mirrorOf>central</mirrorOf><url>http://{host}/maven/central/</url></mirror>"),
        ];
        Some(ClientSetup { clients: "Maven and Gradle".to_owned(), lines })
    }

    fn roles(&self) -> Roles<'_> {
        Roles {
            fetching: Some(self),
            remembering: Some(self),
            reporting: Some(self),
            explaining: Some(self),
            gating: Some(self),
            ..Roles::default()
        }
    }
}

impl Fetching for Maven {
    /// A file's checksums, strongest first, all asked at once; and its
    /// artifact's metadata when the copy held does not list its version
    /// (a version published since: the next build that reads the
    /// metadata finds it).
    fn prerequisites(&self, request: &CachedRequest) -> Vec<CachedRequest> {
        let config = self.config();
        let Some((repository, path, MavenPath::File(file))) = Self::laid_out(&config, request) else {
            return Vec::new();
        };
        // Kept for good only once the file is (see `CheckedFile`), so a
        // wrong one is never trusted: a try of the file more than
        // `REFRESH_EVERY` after them asks them again; the clients that
        // join a try share them.
        let mut wanted: Vec<CachedRequest> = Sidecar::CHECKSUMS_STRONGEST_FIRST
            .iter()
            .map(|kind| {
                let mut sidecar = file_request(&config, repository, &format!("{path}.{}", kind.extension()), false);
                sidecar.wanted.fresh_for = REFRESH_EVERY;
                sidecar
            })
            .collect();
        let metadata_path = artifact_metadata_path(&file);
        if self.lists_version(repository, &file) == Some(false) && self.may_refresh(&repository.key(&metadata_path)) {
            let mut metadata = file_request(&config, repository, &metadata_path, false);
            metadata.wanted.fresh_for = Duration::ZERO;
            wanted.push(metadata);
        }
        wanted
    }

    /// The checksums are alternatives: each asked on its own, the
    /// strongest had wins.
    fn prerequisites_independent(&self) -> bool {
        true
    }

    /// A repository's `5xx` and `429` are told as pkgproxy's `424`.
    fn upstream_failures(&self) -> UpstreamFailures {
        UpstreamFailures { errors_fail: true, waits_fail: true }
    }
}

impl Remembering for Maven {
    /// A "not found" remembered, unless it is of a file (or a checksum of
    /// one) whose version the metadata held lists since.
    fn remembered(&self, request: &CachedRequest, now: Instant, frozen: bool) -> Option<Arc<PassedAnswer>> {
        let remembered = self.not_found.get(&request.key, now, frozen)?;
        let config = self.config();
        let Some((repository, _, laid)) = Self::laid_out(&config, request) else { return Some(remembered) };
        let file = match laid {
            MavenPath::File(file) => file,
            MavenPath::Sidecar { of, .. } => match *of {
                MavenPath::File(file) => file,
                _ => return Some(remembered),
            },
            MavenPath::Metadata { .. } => return Some(remembered),
        };
        match self.lists_version(repository, &file) {
            Some(true) => None,
            _ => Some(remembered),
        }
    }

    /// Remembers a repository's "not found" for `negative_ttl`.
    fn remember(&self, request: &CachedRequest, answer: &Arc<PassedAnswer>, now: Instant) {
        if matches!(answer.status.as_u16(), 404 | 410) {
            self.not_found.remember(&request.key, Arc::clone(answer), self.config().negative_ttl, now);
        }
    }
}

impl Explaining for Maven {
    fn upstream_path(&self, url: &str, _held: &dyn HeldBodies) -> Option<UpstreamPath> {
        self.config().upstream_path(url).map(UpstreamPath::At)
    }
}

#[cfg(test)]
mod tests;
