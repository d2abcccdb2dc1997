//! The apt index's records on disk: compact binary led by a version byte,
//! decoded defensively (a damaged record, or one of another version, reads
//! as absent, never as a wrong sum: the index learns it again from the next
//! `Release` or `Packages` that passes through).

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use crate::apt::release::{FileSum, Release};

/// The layout written now. A change of layout takes a new version.
const VERSION: u8 = 1;

/// The layout of a Release's record written now: the first one, with its
/// `Valid-Until` after the by-hash flag. Records of version 1 are still
/// read (they say nothing of it).
const RELEASE_VERSION: u8 = 2;

/// The bytes of a sum without its version byte.
const SUM_LEN: usize = 40;

/// A pool file's record: `version (u8) | size (u64 LE) | sha256 (32)`.
pub type SumRecord = [u8; 1 + SUM_LEN];

/// The record of a file of `size` bytes with `sha256`.
pub fn encode_sum(size: u64, sha256: &[u8; 32]) -> SumRecord {
    let mut out = [0u8; 1 + SUM_LEN];
    out[0] = VERSION;
    out[1..].copy_from_slice(&sum_bytes(size, sha256));
    out
}

/// The inverse of [`encode_sum`].
pub fn decode_sum(bytes: &[u8]) -> Option<FileSum> {
    let (&version, sum) = bytes.split_first()?;
    (version == VERSION).then(|| sum_of(sum))?
}

fn sum_bytes(size: u64, sha256: &[u8; 32]) -> [u8; SUM_LEN] {
    let mut out = [0u8; SUM_LEN];
    out[..8].copy_from_slice(&size.to_le_bytes());
    out[8..].copy_from_slice(sha256);
    out
}

fn sum_of(bytes: &[u8]) -> Option<FileSum> {
    let bytes: &[u8; SUM_LEN] = bytes.try_into().ok()?;
    let size = u64::from_le_bytes(bytes[..8].try_into().ok()?);
    let sha256 = bytes[8..].try_into().ok()?;
    Some(FileSum { size, sha256 })
}

/// `version (u8) | date secs (i64 LE, -1: none) | by-hash (u8) |
/// valid-until secs (i64 LE, -1: none) | count (u32 LE) | count × (path
/// length (u16 LE) | path | size (u64 LE) | sha256 (32))`.
pub fn encode_release(release: &Release) -> Vec<u8> {
    let secs = |time: Option<std::time::SystemTime>| {
        time.and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(-1, |d| d.as_secs() as i64)
    };
    let mut out = Vec::with_capacity(25 + release.files.len() * 100);
    out.push(RELEASE_VERSION);
    out.extend_from_slice(&secs(release.date).to_le_bytes());
    out.push(u8::from(release.acquire_by_hash));
    out.extend_from_slice(&secs(release.valid_until).to_le_bytes());
    let files: Vec<_> = release.files.iter().filter(|(path, _)| path.len() <= u16::MAX as usize).collect();
    out.extend_from_slice(&(files.len() as u32).to_le_bytes());
    for (path, sum) in files {
        out.extend_from_slice(&(path.len() as u16).to_le_bytes());
        out.extend_from_slice(path.as_bytes());
        out.extend_from_slice(&sum_bytes(sum.size, &sum.sha256));
    }
    out
}

/// The inverse of [`encode_release`].
pub fn decode_release(bytes: &[u8]) -> Option<Release> {
    let mut cursor = bytes;
    let mut take = |n: usize| -> Option<&[u8]> {
        if cursor.len() < n {
            return None;
        }
        let (head, rest) = cursor.split_at(n);
        cursor = rest;
        Some(head)
    };
    let version = take(1)?[0];
    if version != VERSION && version != RELEASE_VERSION {
        return None;
    }
    let date = i64::from_le_bytes(take(8)?.try_into().ok()?);
    let acquire_by_hash = take(1)?[0] == 1;
    let valid_until = match version {
        RELEASE_VERSION => i64::from_le_bytes(take(8)?.try_into().ok()?),
        _ => -1,
    };
    let count = u32::from_le_bytes(take(4)?.try_into().ok()?);
    let mut files = BTreeMap::new();
    for _ in 0..count {
        let len = u16::from_le_bytes(take(2)?.try_into().ok()?) as usize;
        let path = std::str::from_utf8(take(len)?).ok()?.to_string();
        let sum = sum_of(take(SUM_LEN)?)?;
        files.insert(path, sum);
    }
    let time = |secs: i64| u64::try_from(secs).ok().map(|s| UNIX_EPOCH + Duration::from_secs(s));
    Some(Release { date: time(date), valid_until: time(valid_until), acquire_by_hash, files })
}
