//! The fake repository's answers: which path asks for what ([`route`],
//! pure), the files, sidecars and `maven-metadata.xml` built from the
//! versions held, with the faults switched on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, StatusCode};
use hyper::body::Incoming;
use parking_lot::Mutex;

use super::held::{instant, Held};
use super::{Checksum, PathClass};
use crate::fake::{file_reply, reply, Answer};
use crate::origin::RecordedRequest;

/// What a path asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    /// A file of an artifact, or `maven-metadata.xml` (by its path).
    File(String),
    /// The sidecar of `checksum` of the file at the path.
    Sidecar(String, Checksum),
}

impl Route {
    /// The class of path it is, for the faults.
    pub(super) fn class(&self) -> PathClass {
        match self {
            Route::File(path) if is_metadata(path) => PathClass::Metadata,
            Route::File(_) => PathClass::Artifact,
            Route::Sidecar(..) => PathClass::Sidecar,
        }
    }
}

fn is_metadata(path: &str) -> bool {
    path.ends_with("/maven-metadata.xml")
}

/// What `path` (as sent, query and all) asks for.
pub(super) fn route(path: &str) -> Route {
    let path = path.split('?').next().unwrap_or_default();
    let sidecar = Checksum::ALL.into_iter().find_map(|checksum| {
        let inner = path.strip_suffix(checksum.extension())?.strip_suffix('.')?;
        Some(Route::Sidecar(inner.to_owned(), checksum))
    });
    sidecar.unwrap_or_else(|| Route::File(path.to_owned()))
}

/// The repository's state, shared by its connections and its handle.
pub(super) struct Shared {
    /// Versions in the order published.
    pub(super) held: Mutex<Vec<Held>>,
    /// The minute the next version is published at.
    pub(super) clock: AtomicU64,
    pub(super) requests: Mutex<Vec<RecordedRequest>>,
    /// The sidecars the repository publishes beside each file.
    pub(super) sidecars: Mutex<Vec<Checksum>>,
    /// Statuses forced on a class of path.
    pub(super) forced: Mutex<HashMap<PathClass, u16>>,
    /// Classes of path whose requests are taken and never answered.
    pub(super) stalled: Mutex<Vec<PathClass>>,
    /// Artifact files with their last byte changed (sidecars honest).
    pub(super) corrupt: AtomicBool,
    /// Sidecars of artifact files naming other bytes.
    pub(super) wrong_sidecar: AtomicBool,
    /// Artifact files announced whole, half sent.
    pub(super) cut: AtomicBool,
}

impl Shared {
    pub(super) fn new() -> Shared {
        Shared {
            held: Mutex::default(),
            clock: AtomicU64::new(60),
            requests: Mutex::default(),
            sidecars: Mutex::new(Checksum::ALL.to_vec()),
            forced: Mutex::default(),
            stalled: Mutex::default(),
            corrupt: AtomicBool::new(false),
            wrong_sidecar: AtomicBool::new(false),
            cut: AtomicBool::new(false),
        }
    }
}

fn not_found() -> Answer {
    reply(StatusCode::NOT_FOUND, &[("content-type", "text/plain".into())], "404 Not Found\n")
}

/// Answers one request.
pub(super) async fn answer(owned: Arc<Shared>, request: Request<Incoming>) -> Answer {
    let shared: &Shared = &owned;
    // The request in hand, not the log's last: requests arrive at once.
    let recorded = RecordedRequest::of_parts(&request.into_parts().0);
    shared.requests.lock().push(recorded.clone());
    let route = route(&recorded.path);
    let class = route.class();
    if shared.stalled.lock().contains(&class) {
        std::future::pending::<()>().await;
    }
    let forced = shared.forced.lock().get(&class).copied();
    if let Some(status) = forced {
        return forced_answer(status);
    }
    if !matches!(recorded.method.as_str(), "GET" | "HEAD") {
        return reply(StatusCode::METHOD_NOT_ALLOWED, &[], "");
    }
    let Some((bytes, minute)) = held_file(shared, route_path(&route)) else { return not_found() };
    let headers = |content_type: &str| {
        vec![
            ("content-type", content_type.to_owned()),
            ("last-modified", httpdate::fmt_http_date(instant(minute))),
            ("etag", format!("\"{}\"", Checksum::Sha1.hex(&bytes))),
        ]
    };
    match route {
        Route::Sidecar(path, checksum) => {
            if !shared.sidecars.lock().contains(&checksum) {
                return not_found();
            }
            let wrong = class_of(&path) == PathClass::Artifact && shared.wrong_sidecar.load(Ordering::SeqCst);
            let named: &[u8] = if wrong { b"not these bytes" } else { &bytes };
            reply(StatusCode::OK, &headers("text/plain"), checksum.hex(named))
        }
        Route::File(path) if is_metadata(&path) => reply(StatusCode::OK, &headers("text/xml"), bytes),
        Route::File(path) => {
            let (corrupt, cut) = (shared.corrupt.load(Ordering::SeqCst), shared.cut.load(Ordering::SeqCst));
            let content_type = if path.ends_with(".pom") { "text/xml" } else { "application/java-archive" };
            file_reply(&bytes, &headers(content_type), corrupt, cut)
        }
    }
}

fn route_path(route: &Route) -> &str {
    match route {
        Route::File(path) | Route::Sidecar(path, _) => path,
    }
}

fn class_of(path: &str) -> PathClass {
    Route::File(path.to_owned()).class()
}

/// `status` as a forced answer: a short text, and `Retry-After: 1` on
/// `429` and `503`.
fn forced_answer(status: u16) -> Answer {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let text = format!("{} {}\n", status.as_u16(), status.canonical_reason().unwrap_or("forced"));
    let mut headers = vec![("content-type", "text/plain".to_owned())];
    if matches!(status.as_u16(), 429 | 503) {
        headers.push(("retry-after", "1".to_owned()));
    }
    reply(status, &headers, text)
}

/// The bytes at `path` now and the minute they were published: a held
/// file, or a `maven-metadata.xml` built from the versions held.
pub(super) fn held_file(shared: &Shared, path: &str) -> Option<(Bytes, u64)> {
    let held = shared.held.lock();
    if let Some(dir) = path.strip_suffix("/maven-metadata.xml") {
        return super::metadata::at(&held, dir);
    }
    held.iter().find_map(|held| {
        let artifact = &held.artifact;
        let file = artifact.files.iter().find(|file| artifact.path_of(file) == path)?;
        Some((file.bytes.clone(), held.minute))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_route_to_files_sidecars_and_metadata() {
        let jar = "/commons-io/commons-io/2.11.0/commons-io-2.11.0.jar";
        assert_eq!(route(jar), Route::File(jar.to_owned()));
        assert_eq!(route(jar).class(), PathClass::Artifact);
        assert_eq!(route(&format!("{jar}.sha256")), Route::Sidecar(jar.to_owned(), Checksum::Sha256));
        assert_eq!(route(&format!("{jar}.sha1")).class(), PathClass::Sidecar);
        assert_eq!(route("/a/b/maven-metadata.xml").class(), PathClass::Metadata);
        assert_eq!(
            route("/a/b/maven-metadata.xml.md5"),
            Route::Sidecar("/a/b/maven-metadata.xml".into(), Checksum::Md5)
        );
    }
}
