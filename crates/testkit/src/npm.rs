//! A fake npm registry on `127.0.0.1:0`, as the npm registry serves one,
//! and the npm-family clients to drive against it or against pkgproxy.
//!
//! The registry serves each package's document (`/NAME`, scoped
//! `/@scope%2fname`, `%2F` or `/`) in the full form, or the abbreviated
//! ("corgi") one when `Accept` asks for [`ABBREVIATED`], with `Vary:
//! Accept`, an `ETag` and `Cache-Control: public, max-age=300` (and, as the
//! real one, `200` whatever `If-None-Match` says); one version's object at
//! `/NAME/VERSION` and `/NAME/latest`; the tarballs at
//! `/NAME/-/BASENAME-VERSION.tgz` on its own port and on a second one (a
//! CDN), with `dist.tarball` naming either, or the npm registry's own
//! address (which the fake still serves the path of, for a proxy that has
//! it as its mirror); `GET /-/ping` and `npm audit`'s bulk endpoint
//! (`{}`); and `{"error":"Not found"}` for anything else.
//!
//! It keeps a request log (both ports'; the `host` header tells them
//! apart) and can misbehave: a forced status per class of path (`429` and
//! `503` with `Retry-After: 1`), a stall, wrong tarball bytes, a cut
//! tarball, documents going back in time (a lagging CDN: a version missing,
//! an older `modified`), and a bearer token required of every request.
//!
//! The clients ([`node_tool`], [`NodeSandbox`]) are the machine's npm and
//! the pnpm, yarn 1 and yarn 4 `test.sh` installs; they run with no user
//! configuration and no way to the network but loopback.

mod client;
mod package;
mod registry;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use client::{node_tool, npm_project, NodeClient, NodeOutput, NodeSandbox};
pub use package::NpmPackage;

use crate::origin::RecordedRequest;
use registry::{Held, Shared};

/// The abbreviated document's media type ("corgi"), which installers ask
/// for.
pub const ABBREVIATED: &str = "application/vnd.npm.install-v1+json";

/// A small realistic set: `a` 1.0.0 depending on `b@^1.0.0` and
/// `@corp/c@^2.0.0`, `b` 1.0.0 depending on `old@^0.1.0`, `@corp/c` 2.0.0,
/// and `old` 0.1.0, published before npm 5 (its `dist` has a `shasum`
/// only). A project depending on `a` installs all four.
pub fn project_with_dependencies() -> Vec<NpmPackage> {
    vec![
        NpmPackage::new("a", "1.0.0", &[("b", "^1.0.0"), ("@corp/c", "^2.0.0")]),
        NpmPackage::new("b", "1.0.0", &[("old", "^0.1.0")]),
        NpmPackage::new("@corp/c", "2.0.0", &[]),
        NpmPackage::new("old", "0.1.0", &[]).old_style(),
    ]
}

/// A class of path, for the faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PathClass {
    /// A package's document, `/NAME`.
    Document,
    /// One version's object, `/NAME/VERSION`.
    Version,
    /// A tarball, `/NAME/-/FILE`.
    Tarball,
    /// The rest: `/-/ping`, the audit endpoint, unknown paths.
    Service,
}

impl PathClass {
    /// Every class.
    pub const ALL: [PathClass; 4] = [PathClass::Document, PathClass::Version, PathClass::Tarball, PathClass::Service];

    /// Its name, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            PathClass::Document => "document",
            PathClass::Version => "version",
            PathClass::Tarball => "tarball",
            PathClass::Service => "service",
        }
    }
}

/// Where `dist.tarball` says the tarballs are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TarballHost {
    /// On the registry's own port: `http://127.0.0.1:PORT/NAME/-/FILE`.
    Registry,
    /// On the CDN port.
    Cdn,
    /// At the npm registry's own address,
    /// `https://registry.npmjs.org/NAME/-/FILE`, as the documents a mirror
    /// copies name them (the fake serves the path on its own ports too).
    Npmjs,
}

impl TarballHost {
    /// Its name, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            TarballHost::Registry => "registry",
            TarballHost::Cdn => "cdn",
            TarballHost::Npmjs => "npmjs",
        }
    }
}

/// A fake npm registry and its CDN.
pub struct FakeNpm {
    shared: Arc<Shared>,
    accept: Vec<JoinHandle<()>>,
}

impl FakeNpm {
    /// A registry holding `packages`, published in that order; its
    /// tarballs on its own port.
    pub async fn start(packages: &[NpmPackage]) -> FakeNpm {
        let registry = TcpListener::bind("127.0.0.1:0").await.expect("bind the registry");
        let cdn = TcpListener::bind("127.0.0.1:0").await.expect("bind the CDN");
        let url = format!("http://{}", registry.local_addr().expect("address"));
        let cdn_url = format!("http://{}", cdn.local_addr().expect("address"));
        let shared = Arc::new(Shared::new(url, cdn_url));
        let fake = FakeNpm {
            accept: vec![
                tokio::spawn(crate::fake::serve(registry, Arc::clone(&shared), |shared, request| {
                    registry::answer(shared, request, false)
                })),
                tokio::spawn(crate::fake::serve(cdn, Arc::clone(&shared), |shared, request| {
                    registry::answer(shared, request, true)
                })),
            ],
            shared,
        };
        for package in packages {
            fake.publish(package.clone());
        }
        fake
    }

    /// The registry's URL, `http://127.0.0.1:PORT` (no trailing `/`).
    pub fn url(&self) -> String {
        self.shared.url.clone()
    }

    /// The CDN's URL, `http://127.0.0.1:PORT`.
    pub fn cdn_url(&self) -> String {
        self.shared.cdn_url.clone()
    }

    /// Where `dist.tarball` says `package`'s tarball is, now.
    pub fn tarball_url(&self, package: &NpmPackage) -> String {
        self.shared.tarball_url(package)
    }

    /// Adds `package` (a version published now, a minute after the one
    /// before: its document's `modified` moves on, and its `latest` is
    /// this version).
    pub fn publish(&self, package: NpmPackage) {
        let minute = self.shared.clock.fetch_add(1, Ordering::SeqCst);
        let mut packages = self.shared.packages.lock();
        packages.entry(package.name.clone()).or_default().push(Held { package, minute });
    }

    /// Adds `package`, published `minute` minutes after 2026-01-01 00:00
    /// UTC (see [`FakeNpm::published_at`]), whatever the versions before.
    pub fn publish_at(&self, package: NpmPackage, minute: u64) {
        self.shared.clock.fetch_max(minute + 1, Ordering::SeqCst);
        let mut packages = self.shared.packages.lock();
        packages.entry(package.name.clone()).or_default().push(Held { package, minute });
    }

    /// The instant `minute` minutes after 2026-01-01 00:00 UTC, when the
    /// registry says a version of that minute was published.
    pub fn published_at(minute: u64) -> std::time::SystemTime {
        std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(registry::EPOCH + 60 * minute)
    }

    /// Whether full documents leave out `time`, as some registries do:
    /// then no version's publish time can be learnt.
    pub fn set_without_times(&self, without: bool) {
        self.shared.without_times.store(without, Ordering::SeqCst);
    }

    /// From now on every request is answered `status` (`0`: normally), a
    /// `429` and a `503` with `Retry-After: 1`.
    pub fn force_status(&self, status: u16) {
        PathClass::ALL.into_iter().for_each(|class| self.force_status_on(class, status));
    }

    /// From now on requests for `class` paths are answered `status` (`0`:
    /// normally).
    pub fn force_status_on(&self, class: PathClass, status: u16) {
        let mut forced = self.shared.forced.lock();
        match status {
            0 => forced.remove(&class),
            _ => forced.insert(class, status),
        };
    }

    /// From now on every request is taken and never answered.
    pub fn set_stalled(&self, stalled: bool) {
        PathClass::ALL.into_iter().for_each(|class| self.set_stalled_on(class, stalled));
    }

    /// From now on requests for `class` paths are taken and never answered.
    pub fn set_stalled_on(&self, class: PathClass, stalled: bool) {
        let mut classes = self.shared.stalled.lock();
        classes.retain(|held| *held != class);
        if stalled {
            classes.push(class);
        }
    }

    /// From now on tarballs come with their last byte changed (same
    /// length, `200`).
    pub fn set_corrupt(&self, corrupt: bool) {
        self.shared.corrupt.store(corrupt, Ordering::SeqCst);
    }

    /// From now on tarballs are announced whole and half sent, then the
    /// connection is dropped.
    pub fn set_cut(&self, cut: bool) {
        self.shared.cut.store(cut, Ordering::SeqCst);
    }

    /// From now on documents (and version objects) are served as a lagging
    /// CDN serves them: without each package's newest version, their
    /// `modified` and `time.modified` that of the one before (a package of
    /// one version keeps it, an hour back). Tarballs are all there.
    pub fn set_modified_back(&self, back: bool) {
        self.shared.modified_back.store(back, Ordering::SeqCst);
    }

    /// From now on `dist.tarball` names `host`.
    pub fn set_tarball_host(&self, host: TarballHost) {
        *self.shared.tarball_host.lock() = host;
    }

    /// From now on every request, on both ports, needs `Authorization:
    /// Bearer TOKEN` (else `401`, `{"error":…}`); `None`: anyone's.
    pub fn require_token(&self, token: Option<&str>) {
        *self.shared.authorization.lock() = token.map(|token| format!("Bearer {token}"));
    }

    /// From now on every request, on both ports, needs `Authorization:
    /// Basic` of `user:password` (else `401`).
    pub fn require_basic(&self, user: &str, password: &str) {
        use base64::Engine;
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        *self.shared.authorization.lock() = Some(format!("Basic {basic}"));
    }

    /// From now on the package `name` (its document, versions and
    /// tarballs on the registry's port) is read only with `Authorization:
    /// Bearer` of one of `tokens`; anyone else gets `404`, as the npm
    /// registry answers a token that may not read a package. The CDN port
    /// serves its tarballs to anyone.
    pub fn restrict(&self, name: &str, tokens: &[&str]) {
        let readers = tokens.iter().map(|token| token.to_string()).collect();
        self.shared.restricted.lock().insert(name.to_owned(), readers);
    }

    /// Every request so far, the CDN's included.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().clone()
    }

    /// The requests so far for `class` paths.
    pub fn requests_of(&self, class: PathClass) -> Vec<RecordedRequest> {
        let of_class = |request: &RecordedRequest| registry::route(&request.method, &request.path).class() == class;
        self.requests().into_iter().filter(of_class).collect()
    }

    /// How many requests so far had a path containing `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.requests().iter().filter(|request| request.path.contains(needle)).count()
    }

    /// Forgets the requests so far.
    pub fn clear_requests(&self) {
        self.shared.requests.lock().clear();
    }
}

impl Drop for FakeNpm {
    fn drop(&mut self) {
        self.accept.iter().for_each(JoinHandle::abort);
    }
}
