//! The files of a folder, as tests compare and serve them.

use std::path::{Path, PathBuf};

/// Every file under `root` (in its subfolders too) with its bytes, sorted
/// by path.
pub fn files(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).expect("a readable folder").flatten() {
            match entry.file_type().expect("a file type").is_dir() {
                true => dirs.push(entry.path()),
                false => files.push((entry.path(), std::fs::read(entry.path()).expect("a readable file"))),
            }
        }
    }
    files.sort();
    files
}
