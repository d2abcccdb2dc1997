//! The PyPI side: the simple API (`http://HOST:3142/pypi/simple/`) in front
//! of PyPI's, and of each index configured beside it
//! (`/pypi/NAME/simple/`), each the mirrors of one pool.
//!
//! - A project's page is cached in the form the client asks for (JSON,
//!   PEP 691, or HTML, PEP 503, by `Accept`, with `Vary: Accept`), one
//!   entry whatever the spelling of the name (PEP 503's normalisation).
//!   It is revalidated after `index_ttl`, and a page of an older serial
//!   than the one held (a lagging CDN) never replaces it.
//! - Its links are rewritten at serve time for the host the client used,
//!   as it streams (never parsed whole for a serve), every other byte
//!   kept: files keep PyPI's own layout,
//!   `/pypi/packages/AA/BB/REST/FILE` (AA/BB/REST its BLAKE2b-256), and an
//!   index laid out otherwise has its files at the same shape by the
//!   SHA-256 its page gives.
//! - A file is fetched from where its project's page says (the page is
//!   its prerequisite, asked again once in a while when it does not list
//!   the file yet), and checked as it streams against the digest its path
//!   names and the SHA-256 its page gives; core metadata
//!   (`FILE.metadata`, PEP 658) against the hash the page advertises.
//! - Under the fleet's policy (`[policy]`), each file is judged by its own
//!   upload time, and a file the policy refuses is marked yanked on the
//!   page with the reason, not taken off it: pip and uv pass over it unless
//!   a requirement pins it, and a pinned install asks for it and is told
//!   why by the `403` its download gets (`gate.rs`). An index configured
//!   with `policy = false` is not judged.

mod files;
mod gate;
mod links;
mod metadata;
pub mod needs;
mod page;
mod reporting;
pub mod setup;

use arc_swap::Guard;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderValue, ACCEPT, CONTENT_TYPE, VARY};
use http::{HeaderMap, Method, StatusCode};
use pkgproxy_cache::{BodyHashes, BodyReader, Cache, Class, PassedAnswer, Verifier};

use crate::config::{ConfigError, Configures, Reloadable};
use crate::decision::{
    Asking, CachedRequest, DatedResume, Decision, LocalAnswer, Located, Origin, Refusal, Reply, Rewrite, Wanted,
};
use crate::failure::{asked_to_wait, Failure};
use crate::id::SideId;
use crate::instances::Instances;
use crate::named::{Naming, NEGATIVE_TTL, REFRESH_EVERY};
use crate::needs::{HeldBodies, Needs, NeedsError};
use crate::remembered::RememberedAnswers;
use crate::role::{Explaining, Fetching, Remembering, Resolving, Rewriting, Roles, UpstreamFailures};
use crate::route::Request;
use crate::{ClientSetup, Side, StreamRewriter, UpstreamPath};
use files::{FilePath, FileVerifier};
use links::Links;
use page::{Form, Listed};

/// PyPI's simple index, when none is configured.
pub const DEFAULT_INDEX: &str = "https://pypi.org/simple";
/// Where PyPI's pages link its files.
const PYPI_FILES: &str = "https://files.pythonhosted.org";
/// How long a project's page is served without asking.
pub const DEFAULT_INDEX_TTL: Duration = Duration::from_secs(300);
/// The largest page read.
const PAGE_LIMIT: u64 = 64 * 1024 * 1024;
/// PyPI's name in keys and pools.
const PYPI: &str = "pypi";

/// A project's name as PEP 503 normalises it: lower case, each run of
/// `-`, `_` and `.` one `-` (the policy names projects so too).
pub fn normalize(name: &str) -> String {
    pkgproxy_policy::Ecosystem::Pypi.normal_name(name)
}

/// Whether `name` may be a project's name (PEP 508's).
fn is_project(name: &str) -> bool {
    !name.is_empty() && name.len() <= 200 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// The PyPI side's configuration, as written (`[pypi]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// PyPI's simple index, or its mirrors (`https://host/simple`); empty:
    /// PyPI's own.
    #[serde(default)]
    pub mirrors: Vec<String>,
    /// How long a project's page is served without asking.
    #[serde(default, with = "humantime_serde")]
    pub index_ttl: Option<Duration>,
    /// Other indexes, each at `/pypi/NAME/simple/`.
    #[serde(default)]
    pub index: Vec<IndexOptions>,
}

/// An index beside PyPI, as written (`[[pypi.index]]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexOptions {
    /// Its name: `/pypi/NAME/simple/`.
    pub name: String,
    /// Its simple index's URLs, the mirrors of one pool.
    pub mirrors: Vec<String>,
    /// Whether the fleet's policy (`[policy]`) judges its files: `false`
    /// for an index whose projects the fleet publishes itself.
    #[serde(default)]
    pub policy: Option<bool>,
}

/// How `[pypi]` names its indexes: PyPI built in, and each
/// `[[pypi.index]]` at `/pypi/NAME/`.
const NAMING: Naming = Naming {
    side: SideId::Pypi,
    table: "index",
    urls: "mirrors",
    built_in: PYPI,
    default_url: DEFAULT_INDEX,
    reserved: &["simple", "packages"],
    refused: |_| false,
    rule: "an index's name is lower-case letters, digits, - and _ (not simple, packages or pypi)",
    no_urls: "give the URLs of its simple index",
};

/// An index pkgproxy serves.
#[derive(Debug, Clone)]
struct Index {
    /// Its name in keys and pools (`pypi`, or the configured one).
    name: String,
    /// Where it is mounted below `/pypi`: `""` for PyPI, `/NAME`.
    mount: String,
    /// Its simple index's instances.
    mirrors: Instances,
    /// Whether the fleet's policy judges its files.
    gated: bool,
}

impl Index {
    fn key(&self, below: &str) -> String {
        format!("pypi/{}/{below}", self.name)
    }

    /// The page of `project` (normalised) in `form`.
    fn page(&self, project: &str, form: Form, fresh_for: Duration) -> CachedRequest {
        let mut accept = HeaderMap::new();
        accept.insert(ACCEPT, HeaderValue::from_static(form.accept()));
        let mut vary = HeaderMap::new();
        vary.insert(VARY, HeaderValue::from_static("Accept"));
        let origin = Origin {
            pool: format!("pypi {}", self.name),
            instances: self.mirrors.urls().to_vec(),
            path: format!("/{project}/"),
        };
        CachedRequest {
            wanted: Wanted { fresh_for, ..Wanted::default() },
            asking: Asking { headers: accept, ..Asking::default() },
            reply: Reply { headers: vary, ..Reply::default() },
            ..CachedRequest::new(
                SideId::Pypi,
                self.key(&format!("simple/{project}/{}", form.as_str())),
                origin,
                Class::Revalidated,
            )
        }
    }
}

/// The PyPI side's configuration, validated.
#[derive(Debug, Clone)]
pub struct Config {
    indexes: Vec<Index>,
    index_ttl: Duration,
}

impl Config {
    /// Validates `options`.
    pub fn new(options: &Options) -> Result<Config, ConfigError> {
        let configured = options.index.iter().map(|index| (&index.name, &index.mirrors[..]));
        let indexes = NAMING.registries(&options.mirrors, configured)?;
        let gated = |name: &str| options.index.iter().find(|index| index.name == name).and_then(|index| index.policy);
        let indexes = indexes.into_iter().map(|named| Index {
            gated: gated(&named.name).unwrap_or(true),
            name: named.name,
            mount: named.mount,
            mirrors: named.mirrors,
        });
        Ok(Config { indexes: indexes.collect(), index_ttl: options.index_ttl.unwrap_or(DEFAULT_INDEX_TTL) })
    }

    /// pkgproxy's path for `url`, an index's own: a page below one of its
    /// instances or PyPI's own index, or a file on PyPI's file host.
    fn upstream_path(&self, url: &str) -> Option<String> {
        let prefix = crate::route::prefix_of(SideId::Pypi)?;
        let file = crate::instances::path_below(PYPI_FILES, url).filter(|below| below.starts_with("/packages/"));
        if let Some(file) = file {
            return Some(format!("{prefix}{file}"));
        }
        let (below, index) = self
            .indexes
            .iter()
            .filter_map(|index| {
                let canonical = || (index.name == PYPI).then(|| crate::instances::path_below(DEFAULT_INDEX, url));
                Some((index.mirrors.path_below(url).or_else(|| canonical().flatten())?, index))
            })
            .min_by_key(|(below, _)| below.len())?;
        Some(format!("{prefix}{}/simple{below}", index.mount))
    }

    fn index(&self, mount: &str) -> Option<&Index> {
        self.indexes.iter().find(|index| index.mount == mount)
    }

    fn index_of_key(&self, key: &str) -> Option<&Index> {
        let name = key.strip_prefix("pypi/")?.split('/').next()?;
        self.indexes.iter().find(|index| index.name == name)
    }
}

/// What a request below `/pypi` asks for.
#[derive(Debug, PartialEq, Eq)]
enum Asked {
    /// The list of every project: not served from the index.
    Root,
    /// A project's page.
    Page(String),
    /// A file, or its core metadata.
    File(FilePath),
}

/// The index mount and what `path` (below `/pypi`, decoded) asks of it.
fn parse(path: &str) -> Result<(String, Asked), Refusal> {
    let below = path.strip_prefix('/').ok_or_else(|| Refusal::not_found("not an index path"))?;
    let (mount, rest) = match below.split_once('/') {
        Some(("simple" | "packages", _)) => ("", below),
        Some((name, rest)) => (name, rest),
        None if below == "simple" => ("", "simple/"),
        None => return Err(Refusal::not_found("not an index path: /pypi/simple/... or /pypi/NAME/simple/...")),
    };
    let mount = if mount.is_empty() { String::new() } else { format!("/{mount}") };
    if let Some(project) = rest.strip_prefix("simple/").or_else(|| (rest == "simple").then_some("")) {
        let project = project.trim_end_matches('/');
        if project.is_empty() {
            return Ok((mount, Asked::Root));
        }
        if !is_project(project) {
            return Err(Refusal::not_found(format!("{project:?} is not a project's name")));
        }
        return Ok((mount, Asked::Page(normalize(project))));
    }
    if let Some(file) = rest.strip_prefix("packages/") {
        let file = FilePath::parse(file).ok_or_else(|| Refusal::not_found("a file is packages/AA/BB/REST/FILE"))?;
        return Ok((mount, Asked::File(file)));
    }
    Err(Refusal::not_found("not an index path: simple/... or packages/..."))
}

/// The PyPI side at run time: its configuration, the "no such project"
/// answers it remembers, and when it last asked a page again for a file it
/// did not list.
#[derive(Debug)]
pub struct Pypi {
    config: Reloadable<Config>,
    cache: Cache,
    not_found: RememberedAnswers,
    refreshed: Mutex<HashMap<String, Instant>>,
}

impl Pypi {
    /// The side, remembering nothing yet.
    pub fn new(config: Config, cache: Cache) -> Pypi {
        Pypi {
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
        let (mount, asked) = parse(&path)?;
        let config = self.config();
        let index = config
            .index(&mount)
            .ok_or_else(|| Refusal::not_found(format!("no index {:?} is configured", mount.trim_start_matches('/'))))?;
        Ok(match asked {
            Asked::Root => Decision::Answer(root_page()),
            Asked::Page(project) => {
                let form =
                    Form::asked(request.query, request.headers.get(ACCEPT).and_then(|accept| accept.to_str().ok()));
                let mut page = index.page(&project, form, config.index_ttl);
                page.reply.rewrite = Some(Rewrite::at(request.served_at(&index.mount)));
                Decision::cache(page)
            }
            Asked::File(file) => Decision::cache(self.file(index, &file)),
        })
    }

    /// A file, or its core metadata: fetched from where its page says.
    fn file(&self, index: &Index, file: &FilePath) -> CachedRequest {
        let below = match file.metadata {
            true => format!("{}.metadata", file.file_path()),
            false => file.file_path(),
        };
        let origin = Origin { pool: format!("pypi {} files", index.name), instances: Vec::new(), path: String::new() };
        let key = index.key(&format!("packages/{below}"));
        // Metadata the index cannot give is read from the held wheel, whose
        // key is the metadata's without `.metadata`.
        let fallback = file.metadata.then(|| {
            let wheel_key = key.strip_suffix(".metadata").unwrap_or(&key).to_owned();
            Arc::new(metadata::FromWheel { wheel_key }) as Arc<dyn crate::decision::Fallback>
        });
        CachedRequest {
            reply: Reply { dated_resume: DatedResume::Honoured, fallback, ..Reply::default() },
            ..CachedRequest::new(SideId::Pypi, key, origin, Class::Immutable)
        }
    }

    /// The page listing the file `key` names, in JSON (the richer form),
    /// asked again when the held one does not list the file and was not
    /// asked again for that a moment ago.
    fn page_of(&self, index: &Index, file: &FilePath, fresh_for: Duration) -> Option<CachedRequest> {
        let project = files::project_of(&file.filename)?;
        let page = index.page(&project, Form::Json, fresh_for);
        let held = self.cache.read_small(&page.key, PAGE_LIMIT).and_then(|body| page::parse(&body));
        let listed = held.is_some_and(|held| held.files.iter().any(|listed| listed.filename == file.filename));
        match !listed && self.may_refresh(&page.key) {
            true => Some(CachedRequest { wanted: Wanted { fresh_for: Duration::ZERO, ..page.wanted.clone() }, ..page }),
            false => Some(page),
        }
    }

    fn may_refresh(&self, key: &str) -> bool {
        let now = Instant::now();
        let mut refreshed = self.refreshed.lock();
        refreshed.retain(|_, at| now.duration_since(*at) < REFRESH_EVERY);
        refreshed.insert(key.to_owned(), now).is_none()
    }

    /// The file `request` is for, and its index.
    fn file_of<'c>(config: &'c Config, request: &CachedRequest) -> Option<(&'c Index, FilePath)> {
        let index = config.index_of_key(&request.key)?;
        let below = request.key.strip_prefix(&index.key("packages/"))?;
        Some((index, FilePath::parse(below)?))
    }

    /// What the page `body` lists of `file`.
    fn listed(body: &[u8], file: &FilePath) -> Option<Listed> {
        page::parse(body)?.files.into_iter().find(|listed| listed.filename == file.filename)
    }
}

/// The answer to the list of every project: a small page of pkgproxy's
/// own (installers never read it; PyPI's is tens of MB).
fn root_page() -> LocalAnswer {
    let mut answer = LocalAnswer::text(StatusCode::OK, "");
    answer.headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    answer.body = Bytes::from_static(
        b"<!DOCTYPE html>\n<html><body><p>pkgproxy serves each project's page: /pypi/simple/NAME/</p></body></html>\n",
    );
    answer
}

/// `url`, a link of the page at `page_url`, made absolute.
fn absolute(url: &str, page_url: &str) -> String {
    if url.starts_with("http://") || url.starts_with("https://") {
        return url.to_owned();
    }
    let (scheme, rest) = page_url.split_once("://").unwrap_or(("https", page_url));
    let authority = rest.split('/').next().unwrap_or_default();
    if let Some(path) = url.strip_prefix('/') {
        return format!("{scheme}://{authority}/{path}");
    }
    let mut segments: Vec<&str> = rest[authority.len()..].split('/').collect();
    segments.pop();
    for part in url.split('/') {
        match part {
            ".." => {
                segments.pop();
            }
            "." => {}
            part => segments.push(part),
        }
    }
    format!("{scheme}://{authority}{}", segments.join("/"))
}

/// The checks of a page: not of an older serial than the one held.
#[derive(Debug)]
struct PageVerifier {
    held_serial: Option<u64>,
}

impl Verifier for PageVerifier {
    fn judges_body(&self) -> bool {
        true
    }

    fn check(&self, body: &mut BodyReader<'_>, _hashes: &BodyHashes) -> Result<(), String> {
        use std::io::Read;
        let mut content = Vec::new();
        body.take(PAGE_LIMIT + 1).read_to_end(&mut content).map_err(|error| error.to_string())?;
        if content.len() as u64 > PAGE_LIMIT {
            return Err(format!("a page over {PAGE_LIMIT} bytes"));
        }
        let page = page::parse(&content).ok_or("not a project's page")?;
        match (self.held_serial, page.serial) {
            (Some(held), Some(fetched)) if fetched < held => {
                Err(format!("an older page (serial {fetched}) than the one held ({held}): a lagging mirror"))
            }
            _ => Ok(()),
        }
    }
}

/// The checks of core metadata: the hash its page advertises.
#[derive(Debug)]
struct MetadataVerifier {
    sha256: Option<String>,
}

impl Verifier for MetadataVerifier {
    fn check(&self, _body: &mut BodyReader<'_>, hashes: &BodyHashes) -> Result<(), String> {
        match &self.sha256 {
            Some(sha256) if sha256.eq_ignore_ascii_case(&hashes.sha256) => Ok(()),
            Some(sha256) => Err(format!("core metadata of SHA-256 {}, its page advertises {sha256}", hashes.sha256)),
            None => Err("core metadata its page does not advertise with a hash".to_owned()),
        }
    }
}

impl Configures for Config {
    type Side = Pypi;
    type Options = Options;
    type Invalid = ConfigError;
    const ID: SideId = SideId::Pypi;

    fn validate(options: &Options) -> Result<Config, ConfigError> {
        Config::new(options)
    }

    fn open_side(&self, cache: &Cache) -> Result<Pypi, String> {
        Ok(Pypi::new(self.clone(), cache.clone()))
    }

    fn held_by(side: &Pypi) -> &Reloadable<Config> {
        &side.config
    }

    /// The indexes configured: these may be on local addresses (each on
    /// its own port only; their file hosts, if local too, go in
    /// `[upstream] trust`).
    fn trusted(&self) -> Vec<String> {
        self.indexes.iter().flat_map(|index| index.mirrors.trusted_urls()).collect()
    }

    /// Every index fetched from the parent pkgproxy at `parent`.
    fn chain(&mut self, parent: &str) {
        for index in &mut self.indexes {
            let mount = format!("/pypi{}/simple", index.mount);
            index.mirrors.chain_to(parent, &mount);
        }
    }
}

impl Side for Pypi {
    fn id(&self) -> SideId {
        SideId::Pypi
    }

    /// The simple API is `GET` (and `HEAD`) only.
    fn classify(&self, request: &Request<'_>) -> Decision {
        match *request.method {
            Method::GET | Method::HEAD => self.classify_path(request).unwrap_or_else(Decision::Refuse),
            _ => Decision::Refuse(Refusal::method_not_allowed("GET, HEAD")),
        }
    }

    /// A page must not be older than the one held; a file must be what its
    /// path and its page say; core metadata what its page advertises.
    fn verifier(&self, request: &CachedRequest, prerequisites: &[Bytes]) -> Option<Arc<dyn Verifier>> {
        let config = self.config();
        if request.key.contains("/simple/") {
            let held = self.cache.read_small(&request.key, PAGE_LIMIT).and_then(|body| page::parse(&body));
            return Some(Arc::new(PageVerifier { held_serial: held.and_then(|page| page.serial) }));
        }
        let (_, file) = Self::file_of(&config, request)?;
        let listed = prerequisites.first().and_then(|page| Self::listed(page, &file));
        match file.metadata {
            true => Some(Arc::new(MetadataVerifier { sha256: listed.and_then(|listed| listed.metadata_sha256) })),
            false => Some(Arc::new(FileVerifier::new(file.digest.clone(), listed.and_then(|listed| listed.sha256)))),
        }
    }

    /// What cannot be had now is a `424`, which pip and uv take as final:
    /// an index that asks to be left alone too, for pip sleeps a `503`'s
    /// `Retry-After` before each of its five retries (a minute's wait is
    /// five before it says anything), and uv retries a `5xx` three times.
    fn failure_answer(&self, failure: &Failure<'_>) -> LocalAnswer {
        match failure {
            Failure::Overloaded { retry_after } => {
                asked_to_wait(*retry_after, "index", "Not held (pkgproxy): the index asks to wait")
            }
            _ => failure.not_held("pkgproxyctl warm fetches what a build needs"),
        }
    }

    /// The request an installer makes for what is cached under `key`.
    fn client_url(&self, key: &str) -> Option<(u8, String)> {
        let config = self.config();
        let index = config.index_of_key(key)?;
        let below = key.strip_prefix(&index.key(""))?;
        let prefix = crate::route::prefix_of(SideId::Pypi)?;
        match below.strip_prefix("simple/") {
            Some(page) => {
                let (project, form) = page.rsplit_once('/')?;
                let form = [Form::Json, Form::Html].into_iter().find(|known| known.as_str() == form)?;
                Some((0, format!("{prefix}{}/simple/{project}/?{}", index.mount, form.query())))
            }
            None => Some((1, format!("{prefix}{}/{below}", index.mount))),
        }
    }

    fn client_setup(&self, host: &str) -> Option<ClientSetup> {
        let lines = vec![
            format!(
                "pip install --index-url http://{host}/pypi/simple/ --trusted-host {} ...",
                host.split(':').next()?
            ),
            format!("UV_DEFAULT_INDEX=http://{host}/pypi/simple/ uv pip install ..."),
        ];
        Some(ClientSetup { clients: "pip, uv, poetry and pdm".to_owned(), lines })
    }

    fn roles(&self) -> Roles<'_> {
        Roles {
            fetching: Some(self),
            remembering: Some(self),
            rewriting: Some(self),
            resolving: Some(self),
            reporting: Some(self),
            explaining: Some(self),
            gating: Some(self),
            ..Roles::default()
        }
    }
}

impl Fetching for Pypi {
    /// A file's page, which says where it is and what it must be.
    fn prerequisites(&self, request: &CachedRequest) -> Vec<CachedRequest> {
        let config = self.config();
        let Some((index, file)) = Self::file_of(&config, request) else { return Vec::new() };
        self.page_of(index, &file, config.index_ttl).into_iter().collect()
    }

    /// Where the file's page says it is: on an index instance's host
    /// (devpi, Artifactory and Nexus serve files beside their pages), with
    /// that instance's credentials; elsewhere, without any.
    fn located(&self, request: &CachedRequest, prerequisites: &[Bytes]) -> Option<Located> {
        let config = self.config();
        let (index, file) = Self::file_of(&config, request)?;
        let listed = Self::listed(prerequisites.first()?, &file)?;
        let page_url = format!("{}/{}/", index.mirrors.urls().first()?, files::project_of(&file.filename)?);
        let mut url = absolute(&listed.url, &page_url);
        url.truncate(url.find(['#', '?']).unwrap_or(url.len()));
        if file.metadata {
            url.push_str(".metadata");
        }
        index.mirrors.locate(format!("pypi {} files", index.name), &url)
    }

    /// An index's `5xx` is told as pkgproxy's `424`, as an unreachable
    /// index is.
    /// An index that asks to be left alone is told as one that cannot be
    /// had now, by [`Side::failure_answer`].
    fn upstream_failures(&self) -> UpstreamFailures {
        UpstreamFailures { errors_fail: true, waits_fail: true }
    }
}

impl Remembering for Pypi {
    fn remembered(&self, request: &CachedRequest, now: Instant, frozen: bool) -> Option<Arc<PassedAnswer>> {
        self.not_found.get(&request.key, now, frozen)
    }

    /// Remembers the index's "no such project" a minute: one published
    /// then is found.
    fn remember(&self, request: &CachedRequest, answer: &Arc<PassedAnswer>, now: Instant) {
        if matches!(answer.status.as_u16(), 404 | 410) && request.key.contains("/simple/") {
            self.not_found.remember(&request.key, Arc::clone(answer), NEGATIVE_TTL, now);
        }
    }
}

impl Rewriting for Pypi {
    /// A page as the client gets it, whole (an answer pkgproxy holds in
    /// memory).
    fn rewrite(&self, rewrite: &Rewrite, body: &[u8]) -> Option<Bytes> {
        let mut rewriter = self.streaming_rewrite(rewrite)?;
        let mut output = Vec::with_capacity(body.len() + body.len() / 4);
        rewriter.feed(body, &mut output);
        rewriter.finish(&mut output);
        Some(Bytes::from(output))
    }

    /// A page as it streams to the client: each file's link at pkgproxy,
    /// every other byte as held. A hit costs one pass over the page, and
    /// any page held (up to [`PAGE_LIMIT`]) is served.
    fn streaming_rewrite(&self, rewrite: &Rewrite) -> Option<Box<dyn StreamRewriter>> {
        Some(Box::new(Links { base: rewrite.served_at.base.clone() }.rewriter()))
    }
}

impl Resolving for Pypi {
    fn needs(&self, asked: serde_json::Value, held: &dyn HeldBodies) -> Result<Needs, NeedsError> {
        self.lock_needs(asked, held)
    }
}

impl Explaining for Pypi {
    fn upstream_path(&self, url: &str, _held: &dyn HeldBodies) -> Option<UpstreamPath> {
        self.config().upstream_path(url).map(UpstreamPath::At)
    }

    /// A page in the form pip and uv ask for, JSON.
    fn clients_headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static(page::JSON));
        headers
    }
}

#[cfg(test)]
mod tests;
