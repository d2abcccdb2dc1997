//! The apt index's records on disk: compact, versionless binary, decoded
//! defensively (a damaged record reads as absent, never as a wrong sum).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::apt::release::{FileSum, Release};

/// `size (u64 LE) | sha256 (32)`.
pub fn encode_sum(size: u64, sha256: &[u8; 32]) -> [u8; 40] {
    let mut out = [0u8; 40];
    out[..8].copy_from_slice(&size.to_le_bytes());
    out[8..].copy_from_slice(sha256);
    out
}

/// The inverse of [`encode_sum`].
pub fn decode_sum(bytes: &[u8]) -> Option<FileSum> {
    let bytes: &[u8; 40] = bytes.try_into().ok()?;
    let size = u64::from_le_bytes(bytes[..8].try_into().ok()?);
    let sha256 = bytes[8..].try_into().ok()?;
    Some(FileSum { size, sha256 })
}

/// `date secs (i64 LE, -1: none) | by-hash (u8) | count (u32 LE) |
/// count × (path length (u16 LE) | path | sum (40))`.
pub fn encode_release(release: &Release) -> Vec<u8> {
    let date = release.date.and_then(|d| d.duration_since(UNIX_EPOCH).ok()).map_or(-1, |d| d.as_secs() as i64);
    let mut out = Vec::with_capacity(16 + release.files.len() * 100);
    out.extend_from_slice(&date.to_le_bytes());
    out.push(u8::from(release.acquire_by_hash));
    let files: Vec<_> = release.files.iter().filter(|(path, _)| path.len() <= u16::MAX as usize).collect();
    out.extend_from_slice(&(files.len() as u32).to_le_bytes());
    for (path, sum) in files {
        out.extend_from_slice(&(path.len() as u16).to_le_bytes());
        out.extend_from_slice(path.as_bytes());
        out.extend_from_slice(&encode_sum(sum.size, &sum.sha256));
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
    let date = i64::from_le_bytes(take(8)?.try_into().ok()?);
    let acquire_by_hash = take(1)?[0] == 1;
    let count = u32::from_le_bytes(take(4)?.try_into().ok()?);
    let mut files = BTreeMap::new();
    for _ in 0..count {
        let len = u16::from_le_bytes(take(2)?.try_into().ok()?) as usize;
        let path = std::str::from_utf8(take(len)?).ok()?.to_string();
        let sum = decode_sum(take(40)?)?;
        files.insert(path, sum);
    }
    let date = u64::try_from(date).ok().map(|s| UNIX_EPOCH + Duration::from_secs(s));
    Some(Release { date: date.map(|d: SystemTime| d), acquire_by_hash, files })
}
