//! The blob store: complete bodies named by their SHA-256, and the partial
//! files of downloads in progress.
//!
//! A body becomes visible only by `rename` of a fully written, fsynced
//! temporary file, so a blob file is always complete. Temporary files live in
//! `tmp/` and are deleted at start-up: after a crash they are the only trace
//! of an unfinished download. This module does no network I/O and knows
//! nothing of keys; the index maps keys to blobs.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sha2::{Digest, Sha256, Sha512};

use crate::error::StoreError;

/// The `blobs/` and `tmp/` folders under the cache directory.
#[derive(Debug)]
pub struct BlobStore {
    blobs: PathBuf,
    tmp: PathBuf,
    next_temp: AtomicU64,
}

impl BlobStore {
    /// Opens (creating) the folders under `cache_dir` and deletes every
    /// leftover temporary file.
    pub fn open(cache_dir: &Path) -> Result<Self, StoreError> {
        let blobs = cache_dir.join("blobs").join("sha256");
        let tmp = cache_dir.join("tmp");
        for dir in [&blobs, &tmp] {
            fs::create_dir_all(dir).map_err(|e| StoreError::io("create folder", dir, e))?;
        }
        // Every folder a blob named by its SHA-256 goes in, made now rather
        // than checked at each download's end.
        for fan in 0..=u8::MAX {
            let dir = blobs.join(format!("{fan:02x}"));
            fs::create_dir_all(&dir).map_err(|e| StoreError::io("create folder", &dir, e))?;
        }
        let store = BlobStore { blobs, tmp, next_temp: AtomicU64::new(0) };
        let removed = store.clear_temp()?;
        if removed > 0 {
            tracing::info!(removed, "removed partial downloads left by an earlier run");
        }
        Ok(store)
    }

    fn clear_temp(&self) -> Result<usize, StoreError> {
        let mut removed = 0;
        let entries = fs::read_dir(&self.tmp).map_err(|e| StoreError::io("list", &self.tmp, e))?;
        for entry in entries.flatten() {
            let path = entry.path();
            fs::remove_file(&path).map_err(|e| StoreError::io("remove", &path, e))?;
            removed += 1;
        }
        Ok(removed)
    }

    /// Where the blob with this hash lives (whether or not it exists).
    pub fn path(&self, sha256: &str) -> PathBuf {
        let fan = sha256.get(..2).unwrap_or("__");
        self.blobs.join(fan).join(sha256)
    }

    /// Opens a complete blob for reading.
    pub fn open_blob(&self, sha256: &str) -> std::io::Result<File> {
        File::open(self.path(sha256))
    }

    /// Length of a blob on disk, if it exists.
    pub fn blob_len(&self, sha256: &str) -> Option<u64> {
        fs::metadata(self.path(sha256)).ok().map(|m| m.len())
    }

    /// Creates a new temporary file for a download.
    pub fn temp(&self) -> Result<TempBlob, StoreError> {
        let n = self.next_temp.fetch_add(1, Ordering::Relaxed);
        let path = self.tmp.join(format!("{}-{n}.part", std::process::id()));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| StoreError::io("create", &path, e))?;
        Ok(TempBlob {
            path,
            file: Arc::new(file),
            sha256: Sha256::new(),
            sha512: None,
            written: 0,
            spilled: 0,
            promoted: false,
        })
    }

    /// Makes a finished temporary file a blob: fsync, rename into place,
    /// fsync the folder. Blocking; call it off the async threads.
    pub fn promote(&self, mut temp: TempBlob, sha256: &str) -> Result<PathBuf, StoreError> {
        // What a failed write left past the body goes.
        temp.file.set_len(temp.written).map_err(|e| StoreError::io("truncate", &temp.path, e))?;
        temp.file.sync_all().map_err(|e| StoreError::io("fsync", &temp.path, e))?;
        let target = self.path(sha256);
        let dir = target.parent().unwrap_or(&self.blobs).to_path_buf();
        let renamed = match fs::rename(&temp.path, &target) {
            // Its folder went away behind pkgproxy's back, or is for a
            // name that is not a SHA-256.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                fs::create_dir_all(&dir).map_err(|e| StoreError::io("create folder", &dir, e))?;
                fs::rename(&temp.path, &target)
            }
            renamed => renamed,
        };
        renamed.map_err(|e| StoreError::io("rename into", &target, e))?;
        temp.promoted = true;
        File::open(&dir).and_then(|d| d.sync_all()).map_err(|e| StoreError::io("fsync folder", &dir, e))?;
        Ok(target)
    }

    /// Deletes a blob no entry refers to any more. Readers that have it open
    /// keep reading it.
    pub fn remove(&self, sha256: &str) {
        let path = self.path(sha256);
        if let Err(e) = fs::remove_file(&path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove unreferenced blob");
            }
        }
    }

    /// The SHA-256 and length of the blob `sha256` as it is on disk, read
    /// at most `pace` bytes a second, each read told to `read`; `None` when
    /// it is missing.
    pub fn rehash(&self, sha256: &str, pace: u64, read: &dyn Fn(u64)) -> Option<(String, u64)> {
        use std::io::Read;
        let mut file = self.open_blob(sha256).ok()?;
        let (mut hasher, mut length) = (Sha256::new(), 0u64);
        let mut buf = vec![0; 1 << 20];
        let started = std::time::Instant::now();
        loop {
            let n = file.read(&mut buf).ok()?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            length += n as u64;
            read(n as u64);
            // Never faster than `pace`: serving is not starved of the disk.
            let due = std::time::Duration::from_secs_f64(length as f64 / pace.max(1) as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        Some((hex::encode(hasher.finalize()), length))
    }

    /// Deletes the temporary files nothing has written for `age`: left by a
    /// download that died without cleaning up. Returns how many.
    pub fn clear_stale_temp(&self, age: std::time::Duration) -> usize {
        let Ok(entries) = fs::read_dir(&self.tmp) else { return 0 };
        let stale = |entry: &fs::DirEntry| {
            let modified = entry.metadata().and_then(|meta| meta.modified()).ok();
            modified.and_then(|at| at.elapsed().ok()).is_some_and(|elapsed| elapsed >= age)
        };
        entries.flatten().filter(stale).filter(|entry| fs::remove_file(entry.path()).is_ok()).count()
    }

    /// Deletes the blobs no entry names (`named` says) and untouched for
    /// `age` (a younger one may be a download between its rename and its
    /// index commit). Returns how many, and their bytes.
    pub fn sweep_old_orphans(&self, named: &dyn Fn(&str) -> bool, age: std::time::Duration) -> (usize, u64) {
        let (mut removed, mut bytes) = (0, 0);
        let Ok(fans) = fs::read_dir(&self.blobs) else { return (0, 0) };
        for fan in fans.flatten() {
            let Ok(blobs) = fs::read_dir(fan.path()) else { continue };
            for blob in blobs.flatten() {
                let Ok(meta) = blob.metadata() else { continue };
                let old = meta.modified().ok().and_then(|at| at.elapsed().ok()).is_some_and(|e| e >= age);
                if old && !named(blob.file_name().to_string_lossy().as_ref()) && fs::remove_file(blob.path()).is_ok() {
                    removed += 1;
                    bytes += meta.len();
                }
            }
        }
        (removed, bytes)
    }
}

/// A download being written: a temporary file plus the running hashes of what
/// was written. Dropped without being promoted, it deletes its file.
#[derive(Debug)]
pub struct TempBlob {
    path: PathBuf,
    file: Arc<File>,
    sha256: Sha256,
    /// Kept only for a body that must match a SHA-512: it costs more than
    /// the rest of a small miss's work.
    sha512: Option<Sha512>,
    written: u64,
    /// Bytes hashed but not written: the part of a body passed through
    /// when the disk had no room for it.
    spilled: u64,
    promoted: bool,
}

/// The hashes of a finished body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyHashes {
    /// Lower-case hex SHA-256.
    pub sha256: String,
    /// Lower-case hex SHA-512, when it was asked for
    /// ([`TempBlob::also_sha512`]).
    pub sha512: Option<String>,
    /// Length in bytes.
    pub size: u64,
}

impl TempBlob {
    /// Also hashes the body with SHA-512 (before anything is appended).
    pub fn also_sha512(mut self) -> Self {
        debug_assert_eq!(self.written + self.spilled, 0);
        self.sha512 = Some(Sha512::new());
        self
    }

    /// Appends bytes, updating the hashes. Written at their place in the
    /// body, not at the file's cursor: a write the disk had room for only
    /// part of leaves those bytes past the end, where a retry overwrites
    /// them, and never shifts what follows.
    pub fn append(&mut self, chunk: &[u8]) -> Result<(), StoreError> {
        use std::os::unix::fs::FileExt;
        self.file.write_all_at(chunk, self.written).map_err(|e| StoreError::io("write", &self.path, e))?;
        self.hash(chunk);
        self.written += chunk.len() as u64;
        Ok(())
    }

    /// Hashes bytes that cannot be written (the disk is full): the body
    /// is still checked whole, and passed through uncached.
    pub fn spill(&mut self, chunk: &[u8]) {
        self.hash(chunk);
        self.spilled += chunk.len() as u64;
    }

    fn hash(&mut self, chunk: &[u8]) {
        self.sha256.update(chunk);
        if let Some(sha512) = &mut self.sha512 {
            sha512.update(chunk);
        }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// A handle readers use (with positioned reads) while the download goes
    /// on; it stays valid after the file is renamed into the blob store.
    pub fn reader(&self) -> Arc<File> {
        Arc::clone(&self.file)
    }

    /// The hashes of everything appended.
    pub fn hashes(&self) -> BodyHashes {
        BodyHashes {
            sha256: hex::encode(self.sha256.clone().finalize()),
            sha512: self.sha512.as_ref().map(|sha512| hex::encode(sha512.clone().finalize())),
            size: self.written + self.spilled,
        }
    }
}

impl Drop for TempBlob {
    fn drop(&mut self) {
        if !self.promoted {
            let _ = fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promoted_blob_is_complete_and_named_by_hash() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path()).unwrap();
        let mut temp = store.temp().unwrap();
        temp.append(b"hello ").unwrap();
        temp.append(b"world").unwrap();
        let hashes = temp.hashes();
        assert_eq!(hashes.sha256, "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9");
        store.promote(temp, &hashes.sha256).unwrap();
        assert_eq!(fs::read(store.path(&hashes.sha256)).unwrap(), b"hello world");
        assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn what_a_write_left_past_the_body_is_overwritten_by_the_retry_and_cut_at_promotion() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path()).unwrap();
        let mut temp = store.temp().unwrap();
        temp.append(b"head ").unwrap();
        // What a write the disk had room for only part of leaves: two
        // bytes past the body, and the call failed.
        temp.file.write_all_at(b"bo", temp.written).unwrap();
        temp.append(b"body").unwrap();
        let sha = temp.hashes().sha256;
        let path = store.promote(temp, &sha).unwrap();
        assert_eq!(fs::read(path).unwrap(), b"head body");

        let mut temp = store.temp().unwrap();
        temp.append(b"whole").unwrap();
        temp.file.write_all_at(b"left over", temp.written).unwrap();
        let sha = temp.hashes().sha256;
        assert_eq!(fs::read(store.promote(temp, &sha).unwrap()).unwrap(), b"whole", "nothing past the body");
    }

    #[test]
    fn a_blob_s_folder_removed_behind_pkgproxy_s_back_is_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path()).unwrap();
        assert_eq!(fs::read_dir(dir.path().join("blobs").join("sha256")).unwrap().count(), 256, "made at open");
        let mut temp = store.temp().unwrap();
        temp.append(b"hello world").unwrap();
        let sha = temp.hashes().sha256;
        fs::remove_dir(store.path(&sha).parent().unwrap()).unwrap();
        assert_eq!(fs::read(store.promote(temp, &sha).unwrap()).unwrap(), b"hello world");
    }

    #[test]
    fn dropped_temp_file_is_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path()).unwrap();
        let mut temp = store.temp().unwrap();
        temp.append(b"partial").unwrap();
        drop(temp);
        assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn leftover_partial_files_are_removed_at_open() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("tmp")).unwrap();
        fs::write(dir.path().join("tmp").join("99-1.part"), b"half a download").unwrap();
        BlobStore::open(dir.path()).unwrap();
        assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn orphans_are_swept_and_named_blobs_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path()).unwrap();
        let mut kept = String::new();
        for body in [&b"kept"[..], &b"orphan"[..]] {
            let mut temp = store.temp().unwrap();
            temp.append(body).unwrap();
            let sha = temp.hashes().sha256;
            store.promote(temp, &sha).unwrap();
            if body == b"kept" {
                kept = sha;
            }
        }
        let named = |sha256: &str| sha256 == kept;
        assert_eq!(store.sweep_old_orphans(&named, std::time::Duration::from_secs(60)), (0, 0), "young: left");
        assert_eq!(store.sweep_old_orphans(&named, std::time::Duration::ZERO), (1, 6));
        assert!(store.path(&kept).exists());
    }
}
