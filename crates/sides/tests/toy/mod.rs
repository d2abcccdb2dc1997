//! The toy side: files under `/toy/...`, fetched from the configured
//! mirrors (`[toy] mirrors = [...]`) and cached as they are, forever. It
//! exists to show what adding a side takes: this folder, its variant in
//! [`SideId`], its entry in the list of sides, and its line in the route
//! table. Nothing in the server, the command line or the control
//! messages names it; the test that builds it serves a file through it.

use http::Method;
use pkgproxy_cache::{Cache, Class};

use crate::config::{ConfigError, Configures, Reloadable};
use crate::decision::{CachedRequest, Decision, Origin, Refusal};
use crate::id::SideId;
use crate::instances::Instances;
use crate::route::Request;
use crate::side::Side;

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
        let origin =
            Origin { pool: "toy".to_owned(), instances: self.config.get().mirrors.urls().to_vec(), path: path.clone() };
        Decision::cache(CachedRequest::new(SideId::Toy, format!("toy{path}"), origin, Class::Immutable))
    }
}
