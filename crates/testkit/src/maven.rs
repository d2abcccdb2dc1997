//! A fake Maven repository on `127.0.0.1:0`, as Maven Central serves one.
//!
//! It serves the Maven 2 layout
//! (`/GROUP/PATH/ARTIFACT/VERSION/ARTIFACT-VERSION[-CLASSIFIER].EXT`): each
//! file of each version held, with its sidecars (`.sha1`, `.md5`,
//! `.sha256`, `.sha512`: the hex digest alone; which of them the
//! repository publishes is settable), `maven-metadata.xml` at artifact level
//! (`latest`, `release`, `versions`, `lastUpdated`) and at the level of a
//! SNAPSHOT version (`snapshot`, `snapshotVersions`, the files named
//! `ARTIFACT-1.0-YYYYMMDD.HHMMSS-BUILD.EXT`), each with its sidecars and a
//! `Last-Modified` of when it was published; `404` for anything else.
//! Artifacts are built in memory ([`MavenArtifact`]) or copied with their
//! real bytes from Debian's `maven-repo` ([`load_maven_repo`]).
//!
//! It keeps a request log and can misbehave: a forced status per class of
//! path ([`PathClass`]; `429` and `503` with `Retry-After: 1`), a hang,
//! wrong artifact bytes (sidecars honest), wrong sidecars, a cut body, and
//! versions published while it runs.
//!
//! What Maven 3.8.7 (wagon HTTP transport) does with each status for a
//! jar it needs, measured with `mvn -B` against a fake like this one:
//! `404` and `410` print "Could not find artifact G:A:jar:V in REPO (URL)"
//! and are cached in the local repository ("was not found in URL during a
//! previous attempt. This failure was cached in the local repository"), so
//! a later build fails without asking until the update interval passes;
//! `403` prints "authorization failed for URL, status: 403 REASON", and
//! `424`, `500`, `502`, `503` print "transfer failed for URL, status: CODE
//! REASON": one request, at once, not cached, the next build asks again.
//! `429` alone is retried, `Retry-After` ignored: six requests 5, 10, 20,
//! 40 and 80 seconds apart, 160 seconds more, then "status: 429" without
//! its reason, after 5 min 15 s. The reason phrase is printed, the body
//! never. So pkgproxy answers "refused by policy" `403` and "offline, not
//! held" `424`, its words in the reason phrase; never `404` or `410`
//! (cached as absent), nor `429` or `503` (Maven 3.9's resolver retries
//! both; newer ones `502` and `504` too).

mod artifact;
mod held;
mod metadata;
mod repository;
#[cfg(test)]
mod tests;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sha2::Digest;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use artifact::{load_maven_repo, LoadedArtifacts, MavenArtifact, MavenFile, SnapshotBuild, DEBIAN_MAVEN_REPO};

use crate::origin::RecordedRequest;
use held::Held;
use repository::Shared;

/// A class of path, for the faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PathClass {
    /// A file of an artifact: a jar, a pom, a classifier variant.
    Artifact,
    /// A sidecar: `.sha1`, `.md5`, `.sha256`, `.sha512` of any file.
    Sidecar,
    /// A `maven-metadata.xml`.
    Metadata,
}

impl PathClass {
    /// Every class.
    pub const ALL: [PathClass; 3] = [PathClass::Artifact, PathClass::Sidecar, PathClass::Metadata];

    /// Its name, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            PathClass::Artifact => "artifact",
            PathClass::Sidecar => "sidecar",
            PathClass::Metadata => "metadata",
        }
    }
}

/// A checksum a repository publishes beside a file, as a sidecar named
/// after its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Checksum {
    /// `.sha1`, which every repository has.
    Sha1,
    /// `.md5`.
    Md5,
    /// `.sha256`.
    Sha256,
    /// `.sha512`.
    Sha512,
}

impl Checksum {
    /// Every checksum.
    pub const ALL: [Checksum; 4] = [Checksum::Sha1, Checksum::Md5, Checksum::Sha256, Checksum::Sha512];

    /// The sidecar's extension, without the dot; also its name.
    pub fn extension(self) -> &'static str {
        match self {
            Checksum::Sha1 => "sha1",
            Checksum::Md5 => "md5",
            Checksum::Sha256 => "sha256",
            Checksum::Sha512 => "sha512",
        }
    }

    /// The digest of `bytes`, lower-case hex, as the sidecar holds it.
    pub fn hex(self, bytes: &[u8]) -> String {
        match self {
            Checksum::Sha1 => hex::encode(sha1::Sha1::digest(bytes)),
            Checksum::Md5 => hex::encode(<md5::Md5 as md5::Digest>::digest(bytes)),
            Checksum::Sha256 => hex::encode(sha2::Sha256::digest(bytes)),
            Checksum::Sha512 => hex::encode(sha2::Sha512::digest(bytes)),
        }
    }
}

/// A fake Maven repository.
pub struct FakeMaven {
    url: String,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl FakeMaven {
    /// A repository holding `artifacts`, published in that order a minute
    /// apart.
    pub async fn start(artifacts: &[MavenArtifact]) -> FakeMaven {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the repository");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let shared = Arc::new(Shared::new());
        let accept = tokio::spawn(crate::fake::serve(listener, Arc::clone(&shared), repository::answer));
        let fake = FakeMaven { url, shared, accept };
        artifacts.iter().for_each(|artifact| fake.publish(artifact.clone()));
        fake
    }

    /// The repository's URL, `http://127.0.0.1:PORT` (no trailing `/`).
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Adds `artifact`, published now, a minute after the one before: its
    /// artifact's metadata lists it and its `lastUpdated` moves on.
    pub fn publish(&self, artifact: MavenArtifact) {
        let minute = self.shared.clock.fetch_add(1, Ordering::SeqCst);
        self.shared.held.lock().push(Held { artifact, minute });
    }

    /// The instant `minute` minutes after 2026-01-01 00:00 UTC: what the
    /// repository says a file published then was last modified.
    pub fn published_at(minute: u64) -> std::time::SystemTime {
        held::instant(minute)
    }

    /// The bytes served at `path` now (a file or a metadata document),
    /// whatever the faults.
    pub fn bytes(&self, path: &str) -> Option<bytes::Bytes> {
        repository::held_file(&self.shared, path).map(|(bytes, _)| bytes)
    }

    /// From now on the repository publishes only the sidecars `kinds`
    /// (the others are `404`).
    pub fn set_sidecars(&self, kinds: &[Checksum]) {
        *self.shared.sidecars.lock() = kinds.to_vec();
    }

    /// From now on every request is answered `status` (`0`: normally).
    pub fn force_status(&self, status: u16) {
        PathClass::ALL.into_iter().for_each(|class| self.force_status_on(class, status));
    }

    /// From now on requests for `class` paths are answered `status` (`0`:
    /// normally), a `429` and a `503` with `Retry-After: 1`.
    pub fn force_status_on(&self, class: PathClass, status: u16) {
        let mut forced = self.shared.forced.lock();
        match status {
            0 => forced.remove(&class),
            _ => forced.insert(class, status),
        };
    }

    /// From now on requests for `class` paths are taken and never answered.
    pub fn set_stalled_on(&self, class: PathClass, stalled: bool) {
        let mut classes = self.shared.stalled.lock();
        classes.retain(|held| *held != class);
        if stalled {
            classes.push(class);
        }
    }

    /// From now on every request is taken and never answered.
    pub fn set_stalled(&self, stalled: bool) {
        PathClass::ALL.into_iter().for_each(|class| self.set_stalled_on(class, stalled));
    }

    /// From now on artifact files come with their last byte changed (same
    /// length, `200`); their sidecars still name the honest bytes.
    pub fn set_corrupt(&self, corrupt: bool) {
        self.shared.corrupt.store(corrupt, Ordering::SeqCst);
    }

    /// From now on the sidecars of artifact files name other bytes (the
    /// files themselves are honest).
    pub fn set_wrong_sidecar(&self, wrong: bool) {
        self.shared.wrong_sidecar.store(wrong, Ordering::SeqCst);
    }

    /// From now on artifact files are announced whole and half sent, then
    /// the connection is dropped.
    pub fn set_cut(&self, cut: bool) {
        self.shared.cut.store(cut, Ordering::SeqCst);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().clone()
    }

    /// The requests so far for `class` paths.
    pub fn requests_of(&self, class: PathClass) -> Vec<RecordedRequest> {
        let of_class = |request: &RecordedRequest| repository::route(&request.path).class() == class;
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

impl Drop for FakeMaven {
    fn drop(&mut self) {
        self.accept.abort();
    }
}
