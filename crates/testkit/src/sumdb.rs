//! A checksum database for tests, signed with a key made for the test, so
//! the real go command can verify module sums through a proxy without the
//! internet: lookup records, the signed tree head, and the level-0 hash
//! tile, as files of a module proxy tree (the layout of `go help
//! goproxy`'s `sumdb/NAME/...`).
//!
//! The tree is the transparent log of RFC 6962 (leaf hash `SHA-256(0x00 ||
//! record)`, node hash `SHA-256(0x01 || left || right)`); the tree head is
//! a signed note (`— NAME base64(key hash || Ed25519 signature)`); the
//! verifier key the go command takes in `GOSUMDB` is
//! `NAME+HASH+base64(0x01 || public key)`.

use std::path::Path;

use base64::Engine;
use ring::signature::{Ed25519KeyPair, KeyPair};
use sha2::{Digest, Sha256};

use crate::golang::escape;

/// One module version's sums, as `go mod download -json` reports them.
#[derive(Debug, Clone)]
pub struct ModuleSums {
    /// The module path.
    pub path: String,
    /// The version.
    pub version: String,
    /// The zip's `h1:` hash.
    pub zip: String,
    /// The go.mod's `h1:` hash.
    pub gomod: String,
}

/// Writes a signed database `name` of `sums` under `root/sumdb/name/` and
/// returns the verifier key for `GOSUMDB`.
pub fn write_signed(root: &Path, name: &str, sums: &[ModuleSums]) -> String {
    let random = ring::rand::SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&random).expect("an Ed25519 key");
    let key = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("the key");
    let mut public = vec![1u8];
    public.extend_from_slice(key.public_key().as_ref());
    let key_hash: [u8; 4] =
        Sha256::digest([name.as_bytes(), b"\n", &public].concat())[..4].try_into().expect("4 bytes");

    let records: Vec<String> = sums
        .iter()
        .map(|s| format!("{} {} {}\n{} {}/go.mod {}\n", s.path, s.version, s.zip, s.path, s.version, s.gomod))
        .collect();
    let leaves: Vec<[u8; 32]> = records.iter().map(|r| hash(&[&[0u8], r.as_bytes()])).collect();
    let tree = format!("go.sum database tree\n{}\n{}\n", leaves.len(), base64(&root_hash(&leaves)));
    let signature = key.sign(tree.as_bytes());
    let signed = format!("{tree}\n— {name} {}\n", base64(&[&key_hash[..], signature.as_ref()].concat()));

    let folder = root.join("sumdb").join(name);
    for (id, (record, sum)) in records.iter().zip(sums).enumerate() {
        let file = folder.join("lookup").join(format!("{}@{}", escape(&sum.path), escape(&sum.version)));
        std::fs::create_dir_all(file.parent().expect("a parent")).expect("lookup folder");
        std::fs::write(file, format!("{id}\n{record}\n{signed}")).expect("lookup");
    }
    let tile = folder.join("tile/8/0").join(format!("000.p/{}", leaves.len()));
    std::fs::create_dir_all(tile.parent().expect("a parent")).expect("tile folder");
    std::fs::write(tile, leaves.concat()).expect("tile");
    std::fs::write(folder.join("latest"), &signed).expect("latest");
    std::fs::write(folder.join("supported"), "").expect("supported");
    format!("{name}+{}+{}", hex::encode(key_hash), base64(&public))
}

/// RFC 6962's Merkle tree hash of `leaves` (at least one).
fn root_hash(leaves: &[[u8; 32]]) -> [u8; 32] {
    if leaves.len() == 1 {
        return leaves[0];
    }
    let mut split = 1;
    while split * 2 < leaves.len() {
        split *= 2;
    }
    hash(&[&[1u8], &root_hash(&leaves[..split]), &root_hash(&leaves[split..])])
}

fn hash(parts: &[&[u8]]) -> [u8; 32] {
    let mut digest = Sha256::new();
    for part in parts {
        digest.update(part);
    }
    digest.finalize().into()
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
