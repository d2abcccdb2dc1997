//! Tars made and read whole in memory, as tests write bundles by hand and
//! look into the ones pkgproxy writes.

use std::io::Read;

/// A tar of `entries` (name, bytes), in order, each a plain file.
pub fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for (name, bytes) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        tar.append_data(&mut header, name, *bytes).expect("a tar entry");
    }
    tar.into_inner().expect("a tar")
}

/// [`tar_of`] entries as [`entries_of`] reads them.
pub fn tar_of_files(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let entries: Vec<(&str, &[u8])> = files.iter().map(|(name, bytes)| (name.as_str(), bytes.as_slice())).collect();
    tar_of(&entries)
}

/// The entries of the tar `bytes` (name, bytes), in order.
pub fn entries_of(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut archive = tar::Archive::new(bytes);
    let entries = archive.entries().expect("a tar").map(|entry| {
        let mut entry = entry.expect("a tar entry");
        let name = entry.path().expect("an entry's name").to_string_lossy().into_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).expect("an entry's bytes");
        (name, bytes)
    });
    entries.collect()
}
