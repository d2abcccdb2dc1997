//! One `.deb` from a [`PackageSpec`]: the file tree with `DEBIAN/control`
//! and a deterministic pseudo-random payload, packed by `dpkg-deb` without
//! compression so the `.deb` is about as big as the payload.
//!
//! It writes only under the build directory it is given and the destination
//! path; the caller owns the pool and the indexes.

use std::fs;
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use super::{run, PackageSpec};

/// Builds the `.deb` for `spec` at `dest`, staging it under `build_dir`.
/// The `.deb` is moved into place by a rename, so a server never sees half
/// of it.
pub(super) fn build(build_dir: &Path, spec: &PackageSpec, dest: &Path) {
    let staging = build_dir.join(&spec.name);
    write_package_tree(&staging, spec);
    let tmp_deb = build_dir.join(spec.deb_file_name());
    run(Command::new("dpkg-deb").args(["-Znone", "--root-owner-group", "--build"]).arg(&staging).arg(&tmp_deb));
    fs::rename(&tmp_deb, dest).expect("move .deb into the pool");
    fs::remove_dir_all(&staging).expect("remove staging tree");
}

/// Lays out the package's file tree (`DEBIAN/control` and the payload).
fn write_package_tree(staging: &Path, spec: &PackageSpec) {
    if staging.exists() {
        fs::remove_dir_all(staging).expect("clear old staging tree");
    }
    let control_dir = staging.join("DEBIAN");
    let share = staging.join("usr/share").join(&spec.name);
    fs::create_dir_all(&control_dir).expect("create DEBIAN");
    fs::create_dir_all(&share).expect("create usr/share/<name>");
    // dpkg-deb insists on 0755..0775 for DEBIAN, whatever the umask.
    fs::set_permissions(&control_dir, fs::Permissions::from_mode(0o755)).expect("chmod DEBIAN");
    let mut control = format!(
        "Package: {}\nVersion: {}\nArchitecture: all\nMaintainer: pkgproxy tests <t@example.invalid>\n",
        spec.name, spec.version
    );
    if let Some(depends) = &spec.depends {
        control.push_str(&format!("Depends: {depends}\n"));
    }
    control.push_str(&format!(
        "Installed-Size: {}\nDescription: pkgproxy test package {}\n",
        spec.payload_size.div_ceil(1024),
        spec.name
    ));
    fs::write(control_dir.join("control"), control).expect("write control");
    let seed = fnv1a(format!("{}\0{}\0{}", spec.name, spec.version, spec.payload_size).as_bytes());
    write_payload(&share.join("payload"), seed, spec.payload_size);
}

/// Writes `size` bytes of xorshift64* output: deterministic, fast, and
/// incompressible enough that the `.deb` is about as big as the payload.
fn write_payload(path: &Path, seed: u64, size: u64) {
    let file = fs::File::create(path).expect("create payload");
    let mut out = BufWriter::with_capacity(1 << 16, file);
    let mut state = seed | 1;
    let mut block = [0u8; 8192];
    let mut left = size;
    while left > 0 {
        for word in block.chunks_exact_mut(8) {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            word.copy_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
        }
        let n = left.min(block.len() as u64) as usize;
        out.write_all(&block[..n]).expect("write payload");
        left -= n as u64;
    }
    out.flush().expect("flush payload");
}

/// FNV-1a, to seed each package's payload from its identity.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_is_deterministic_and_sized_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("c"));
        write_payload(&a, 7, 100_003);
        write_payload(&b, 7, 100_003);
        write_payload(&c, 8, 100_003);
        let a = fs::read(a).unwrap();
        assert_eq!(a.len(), 100_003);
        assert_eq!(a, fs::read(b).unwrap());
        assert_ne!(a, fs::read(c).unwrap());
    }
}
