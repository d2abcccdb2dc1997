//! The toy side: files under `/toy/...`, fetched from the configured
//! mirrors (`[toy] mirrors = [...]`) and cached forever, each checked
//! against the SHA-256 its mirror publishes beside it (`FILE.sha256`) where
//! there is one. It exists to show what adding a side takes: this folder,
//! its variant in [`SideId`], its entry in the list of sides, and its line
//! in the route table; the core of [`Side`], and the roles its files need:
//! fetching (the `.sha256` first) and rewriting (a `.link` file names
//! pkgproxy as its client reached it). Nothing in the server, the command
//! line or the control messages names it; the test that builds it serves
//! files through it.

use std::sync::Arc;

use bytes::Bytes;
use http::Method;
use pkgproxy_cache::{Cache, Class, Expected, Verifier};

use crate::config::{ConfigError, Configures, Reloadable};
use crate::decision::{CachedRequest, Decision, Origin, Refusal, Reply, Rewrite};
use crate::id::SideId;
use crate::instances::Instances;
use crate::role::{Fetching, Roles};
use crate::route::Request;
use crate::side::Side;

mod links;

/// What a mirror publishes beside a file: its SHA-256.
const SIDECAR: &str = ".sha256";

/// `[toy]`, as written.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// Where the files are, the instances of one pool.
    #[serde(default)]
    pub mirrors: Vec<String>,
}

/// `[toy]`, validated.
#[derive(Debug, Clone)]
pub struct Config {
    mirrors: Instances,
}

impl Configures for Config {
    type Side = Toy;
    type Options = Options;
    type Invalid = ConfigError;
    const ID: SideId = SideId::Toy;

    fn validate(options: &Options) -> Result<Config, ConfigError> {
        let mirrors = Instances::new(&options.mirrors, None);
        Ok(Config { mirrors: mirrors.map_err(|reason| ConfigError::new(SideId::Toy, "mirrors", reason))? })
    }

    fn open_side(&self, _cache: &Cache) -> Result<Toy, String> {
        Ok(Toy { config: Reloadable::new(self.clone()) })
    }

    fn held_by(side: &Toy) -> &Reloadable<Config> {
        &side.config
    }

    fn trusted(&self) -> Vec<String> {
        self.mirrors.trusted_urls()
    }
}

/// The toy side at run time.
#[derive(Debug)]
pub struct Toy {
    config: Reloadable<Config>,
}

impl Side for Toy {
    fn id(&self) -> SideId {
        SideId::Toy
    }

    fn classify(&self, request: &Request<'_>) -> Decision {
        if !matches!(*request.method, Method::GET | Method::HEAD) {
            return Decision::Refuse(Refusal::method_not_allowed("GET, HEAD"));
        }
        let path = match crate::path::checked_path(request.path) {
            Ok(path) => path,
            Err(refusal) => return Decision::Refuse(refusal),
        };
        let mut cached = self.cached(&path);
        if path.ends_with(links::LINKS) {
            cached.reply = Reply { rewrite: Some(Rewrite::at(request.served_at(""))), ..Reply::default() };
        }
        Decision::cache(cached)
    }

    fn verifier(&self, request: &CachedRequest, prerequisites: &[Bytes]) -> Option<Arc<dyn Verifier>> {
        let sidecar = prerequisites.first().filter(|_| !request.key.ends_with(SIDECAR))?;
        let sha256 = String::from_utf8_lossy(sidecar).split_whitespace().next()?.to_ascii_lowercase();
        Some(Arc::new(Sidecar { sha256 }))
    }

    fn roles(&self) -> Roles<'_> {
        Roles { fetching: Some(self), rewriting: Some(self), ..Roles::default() }
    }
}

impl Toy {
    /// The request for the file at `path` on the mirrors.
    fn cached(&self, path: &str) -> CachedRequest {
        let origin = Origin {
            pool: "toy".to_owned(),
            instances: self.config.get().mirrors.urls().to_vec(),
            path: path.to_owned(),
        };
        CachedRequest::new(SideId::Toy, format!("toy{path}"), origin, Class::Immutable)
    }
}

impl Fetching for Toy {
    fn prerequisites(&self, request: &CachedRequest) -> Vec<CachedRequest> {
        match request.key.ends_with(SIDECAR) {
            true => Vec::new(),
            false => vec![self.cached(&format!("{}{SIDECAR}", request.origin.path))],
        }
    }
}

/// The check of a file against its mirror's `.sha256`.
#[derive(Debug)]
struct Sidecar {
    sha256: String,
}

impl Verifier for Sidecar {
    fn expected(&self) -> Expected {
        Expected { sha256: Some(self.sha256.clone()), ..Expected::default() }
    }
}
