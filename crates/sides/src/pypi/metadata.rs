//! A wheel's core metadata when neither it nor the index can be had: the
//! wheel's own `*.dist-info/METADATA`, which PEP 658 makes the same bytes,
//! read from the wheel the cache holds (checked when it was fetched). pip
//! and uv abort an install when metadata a page promised is missing, and
//! check these bytes against the hash the page advertised.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, StatusCode};

use pkgproxy_cache::Class;

use crate::decision::{CacheView, CachedRequest, Fallback, LocalAnswer, Origin};
use crate::id::SideId;

/// The largest metadata read.
const METADATA_LIMIT: u64 = 16 * 1024 * 1024;

/// The core metadata of the wheel cached under `wheel_key`.
#[derive(Debug)]
pub struct FromWheel {
    /// The wheel's cache key, as a client's request for it is cached.
    pub wheel_key: String,
}

impl FromWheel {
    /// The request for the wheel, as far as reading it from the cache goes
    /// (its key and class; where it is fetched from plays no part).
    fn wheel(&self) -> CachedRequest {
        let origin = Origin { pool: String::new(), instances: Vec::new(), path: String::new() };
        CachedRequest::new(SideId::Pypi, self.wheel_key.clone(), origin, Class::Immutable)
    }
}

impl Fallback for FromWheel {
    fn answer(&self, cache: &dyn CacheView) -> Option<LocalAnswer> {
        let file = cache.open(&self.wheel())?;
        let length = file.metadata().ok()?.len();
        let mut wheel = zip::ZipArchive::new(Positioned { file, at: 0, length }).ok()?;
        let names = wheel.file_names().filter_map(|name| name.ok().map(|name| name.into_owned()));
        let name = names.into_iter().find(|name| is_metadata(name))?;
        let mut metadata = Vec::new();
        wheel.by_name(&name).ok()?.take(METADATA_LIMIT).read_to_end(&mut metadata).ok()?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
        Some(LocalAnswer::new(StatusCode::OK, headers, Bytes::from(metadata)))
    }
}

/// Whether `name` is a wheel's `NAME-VERSION.dist-info/METADATA`.
fn is_metadata(name: &str) -> bool {
    name.split_once('/').is_some_and(|(folder, file)| folder.ends_with(".dist-info") && file == "METADATA")
}

/// A held body read with positioned reads, its own cursor kept here.
struct Positioned {
    file: Arc<std::fs::File>,
    at: u64,
    length: u64,
}

impl Read for Positioned {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.file.read_at(buf, self.at)?;
        self.at += read as u64;
        Ok(read)
    }
}

impl Seek for Positioned {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let at = match to {
            SeekFrom::Start(at) => Some(at),
            SeekFrom::End(back) => self.length.checked_add_signed(back),
            SeekFrom::Current(by) => self.at.checked_add_signed(by),
        };
        self.at = at.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "before the start"))?;
        Ok(self.at)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_dist_info_s_own_metadata_is_taken() {
        assert!(super::is_metadata("six-1.17.0.dist-info/METADATA"));
        assert!(!super::is_metadata("six/METADATA") && !super::is_metadata("a.dist-info/sub/METADATA"));
    }
}
