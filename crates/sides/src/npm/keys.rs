//! What the side's cache keys name: whose space (what anyone may read, or
//! what a client's token brought), which registry, and a document in one
//! of its two forms, a version's document, or a tarball.

use http::header::HeaderValue;

use super::config::{Config, Registry};
use super::name::{PackageName, Tarball};

/// Whose keys a request is served under: what anyone may read, or what a
/// client's own token brought, which is served only to clients the
/// registry accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Space {
    Shared,
    Private,
}

/// The two forms of a package's document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    /// Everything (`application/json`): what npm itself asks for.
    Full,
    /// What an install needs (`application/vnd.npm.install-v1+json`):
    /// what pnpm and yarn 1 ask for.
    Abbreviated,
}

impl Form {
    pub(super) const ABBREVIATED: &'static str = "application/vnd.npm.install-v1+json";

    /// The form a client's `Accept` asks for: the full one unless it names
    /// the abbreviated one.
    pub(super) fn asked(accept: Option<&HeaderValue>) -> Form {
        let accept = accept.and_then(|accept| accept.to_str().ok()).unwrap_or_default();
        if crate::accept::takes(accept, &[Self::ABBREVIATED]) {
            Form::Abbreviated
        } else {
            Form::Full
        }
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Form::Full => "full",
            Form::Abbreviated => "abbreviated",
        }
    }

    pub(super) fn accept(self) -> &'static str {
        match self {
            Form::Full => "application/json",
            Form::Abbreviated => "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*",
        }
    }
}

impl Registry {
    /// The key of `below` in `space`.
    pub(super) fn key(&self, space: Space, below: &str) -> String {
        match space {
            Space::Shared => format!("npm/{}/{below}", self.name),
            Space::Private => format!("npm/{}/private/{below}", self.name),
        }
    }
}

/// What a cache key of this side names.
#[derive(Debug)]
pub(super) struct Keyed<'c> {
    pub(super) registry: &'c Registry,
    pub(super) space: Space,
    pub(super) kind: KeyKind,
}

#[derive(Debug)]
pub(super) enum KeyKind {
    Document(PackageName, Form),
    Version(PackageName, String),
    Tarball(Tarball),
}

impl<'c> Keyed<'c> {
    pub(super) fn parse(config: &'c Config, key: &str) -> Option<Keyed<'c>> {
        let registry = config.registry_of_key(key)?;
        let below = key.strip_prefix(&registry.key(Space::Shared, ""))?;
        let (space, below) = match below.strip_prefix("private/") {
            Some(below) => (Space::Private, below),
            None => (Space::Shared, below),
        };
        let (kind, rest) = below.split_once('/')?;
        let kind = match kind {
            "doc" => {
                let (name, form) = rest.rsplit_once('/')?;
                let form = [Form::Full, Form::Abbreviated].into_iter().find(|f| f.as_str() == form)?;
                KeyKind::Document(PackageName::parse(name)?, form)
            }
            "version" => {
                let (name, version) = rest.rsplit_once('/')?;
                KeyKind::Version(PackageName::parse(name)?, version.to_owned())
            }
            "tarball" => {
                let (name, file) = rest.rsplit_once('/')?;
                KeyKind::Tarball(Tarball::new(PackageName::parse(name)?, file)?)
            }
            _ => return None,
        };
        Some(Keyed { registry, space, kind })
    }
}
