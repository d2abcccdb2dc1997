//! A package version as the npm registry holds one: its tarball, built in
//! memory as `npm pack` lays one out, the hashes the registry publishes for
//! it, and its version object in the full and the abbreviated form.

use std::io::Write;

use base64::Engine;
use bytes::Bytes;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256, Sha512};

/// The modification time `npm pack` gives every entry (1985-10-26
/// 08:15:00 UTC), so a tarball depends on its contents only.
const NPM_PACK_MTIME: u64 = 499_162_500;

/// A version of a package, with its tarball.
#[derive(Debug, Clone)]
pub struct NpmPackage {
    /// The name, `@scope/name` for a scoped one.
    pub name: String,
    /// The version.
    pub version: String,
    /// What it depends on: names and ranges (`^1.0.0`), in order.
    pub dependencies: Vec<(String, String)>,
    /// The tarball: a gzipped tar of `package/package.json` and
    /// `package/index.js`.
    pub bytes: Bytes,
    /// The tarball's SHA-1, hex (`dist.shasum`).
    pub shasum: String,
    /// The tarball's Subresource Integrity, `sha512-BASE64`
    /// (`dist.integrity`).
    pub integrity: String,
    /// Whether its `dist` has `shasum` only, as versions published before
    /// npm 5 have: no `integrity`.
    pub old_style: bool,
    /// The unpacked size of the tarball's files, bytes
    /// (`dist.unpackedSize`).
    pub unpacked_size: usize,
}

impl NpmPackage {
    /// Version `version` of `name`, depending on `deps` (names and ranges),
    /// a small tarball.
    pub fn new(name: &str, version: &str, deps: &[(&str, &str)]) -> NpmPackage {
        NpmPackage::sized(name, version, deps, 0)
    }

    /// As [`NpmPackage::new`], its `index.js` `size` bytes at least (lines
    /// that do not compress away, so the tarball is about as large).
    pub fn sized(name: &str, version: &str, deps: &[(&str, &str)], size: usize) -> NpmPackage {
        let dependencies: Map<String, Value> =
            deps.iter().map(|(dep, range)| (dep.to_string(), json!(range))).collect();
        let manifest = json!({
            "name": name,
            "version": version,
            "description": format!("{name}, made by the test kit"),
            "main": "index.js",
            "license": "MIT",
            "dependencies": dependencies,
        });
        let manifest = serde_json::to_string_pretty(&manifest).expect("a manifest") + "\n";
        let mut index = format!("module.exports = {:?};\n", format!("{name}@{version}"));
        let mut line = 0u64;
        while index.len() < size {
            index.push_str(&format!("// {}\n", hex::encode(Sha256::digest(line.to_le_bytes()))));
            line += 1;
        }
        let mut tar = tar::Builder::new(Vec::new());
        for (path, content) in [("package/package.json", &manifest), ("package/index.js", &index)] {
            let mut header = tar::Header::new_ustar();
            header.set_size(content.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(NPM_PACK_MTIME);
            header.set_cksum();
            tar.append_data(&mut header, path, content.as_bytes()).expect("a tar entry");
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar.into_inner().expect("a tar")).expect("gzip");
        let bytes = Bytes::from(gz.finish().expect("gzip"));
        let sha1 = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &bytes);
        let sha512 = base64::engine::general_purpose::STANDARD.encode(Sha512::digest(&bytes));
        NpmPackage {
            name: name.to_owned(),
            version: version.to_owned(),
            dependencies: deps.iter().map(|(dep, range)| (dep.to_string(), range.to_string())).collect(),
            shasum: hex::encode(sha1.as_ref()),
            integrity: format!("sha512-{sha512}"),
            old_style: false,
            unpacked_size: manifest.len() + index.len(),
            bytes,
        }
    }

    /// The same version published before npm 5: its `dist` has `shasum`
    /// and no `integrity`.
    pub fn old_style(mut self) -> NpmPackage {
        self.old_style = true;
        self
    }

    /// The name without its scope: what its tarball is named after.
    pub fn basename(&self) -> &str {
        self.name.rsplit('/').next().unwrap_or(&self.name)
    }

    /// The tarball's file name, `BASENAME-VERSION.tgz`.
    pub fn filename(&self) -> String {
        format!("{}-{}.tgz", self.basename(), self.version)
    }

    /// The tarball's path on a registry, `/NAME/-/BASENAME-VERSION.tgz`
    /// (the scope and the name separated by `/`, as the registry names
    /// them).
    pub fn tarball_path(&self) -> String {
        format!("/{}/-/{}", self.name, self.filename())
    }

    /// The integrity a client records for it: `integrity`, or for an old
    /// style version the SHA-1 as `sha1-BASE64`.
    pub fn recorded_integrity(&self) -> String {
        match self.old_style {
            false => self.integrity.clone(),
            true => {
                let sha1 = hex::decode(&self.shasum).expect("hex");
                format!("sha1-{}", base64::engine::general_purpose::STANDARD.encode(sha1))
            }
        }
    }

    fn dependencies_object(&self) -> Value {
        Value::Object(self.dependencies.iter().map(|(dep, range)| (dep.clone(), json!(range))).collect())
    }

    fn dist(&self, tarball: &str) -> Value {
        match self.old_style {
            true => json!({"tarball": tarball, "shasum": self.shasum}),
            false => json!({
                "tarball": tarball,
                "shasum": self.shasum,
                "integrity": self.integrity,
                "fileCount": 2,
                "unpackedSize": self.unpacked_size,
            }),
        }
    }

    /// Its version object as the full document and `GET /NAME/VERSION`
    /// carry it, its tarball at `tarball`.
    pub(crate) fn full_version(&self, tarball: &str) -> Value {
        let maintainer = json!({"name": "testkit", "email": "testkit@example.invalid"});
        json!({
            "name": self.name,
            "version": self.version,
            "description": format!("{}, made by the test kit", self.name),
            "main": "index.js",
            "license": "MIT",
            "dependencies": self.dependencies_object(),
            "_id": format!("{}@{}", self.name, self.version),
            "_nodeVersion": "20.20.2",
            "_npmVersion": "11.19.1",
            "_npmUser": maintainer,
            "maintainers": [maintainer],
            "directories": {},
            "_hasShrinkwrap": false,
            "dist": self.dist(tarball),
        })
    }

    /// Its version object as the abbreviated document carries it.
    pub(crate) fn abbreviated_version(&self, tarball: &str) -> Value {
        json!({
            "name": self.name,
            "version": self.version,
            "dependencies": self.dependencies_object(),
            "directories": {},
            "_hasShrinkwrap": false,
            "dist": self.dist(tarball),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tarball_is_laid_out_as_npm_pack_lays_one_out_and_its_hashes_are_its_own() {
        let package = NpmPackage::sized("@corp/c", "2.0.0", &[("b", "^1.0.0")], 5000);
        let tar = flate2::read::GzDecoder::new(&package.bytes[..]);
        let entries = crate::tarball::entries_of(&std::io::Read::bytes(tar).map(Result::unwrap).collect::<Vec<_>>());
        let names: Vec<&str> = entries.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["package/package.json", "package/index.js"]);
        let manifest: Value = serde_json::from_slice(&entries[0].1).unwrap();
        assert_eq!(
            (manifest["name"].as_str(), manifest["dependencies"]["b"].as_str()),
            (Some("@corp/c"), Some("^1.0.0"))
        );
        assert!(entries[1].1.len() >= 5000 && package.bytes.len() > 2500, "a large one does not compress away");
        assert_eq!(package.shasum.len(), 40);
        let sha512 = base64::engine::general_purpose::STANDARD.encode(Sha512::digest(&package.bytes));
        assert_eq!(package.integrity, format!("sha512-{sha512}"));
        assert_eq!(
            (package.filename().as_str(), package.tarball_path().as_str()),
            ("c-2.0.0.tgz", "/@corp/c/-/c-2.0.0.tgz")
        );
    }

    #[test]
    fn an_old_style_version_has_a_shasum_and_no_integrity() {
        let package = NpmPackage::new("old", "0.1.0", &[]).old_style();
        let dist = &package.full_version("http://x/old/-/old-0.1.0.tgz")["dist"];
        assert_eq!(dist["shasum"].as_str(), Some(package.shasum.as_str()));
        assert!(dist.get("integrity").is_none());
        assert!(package.recorded_integrity().starts_with("sha1-"));
    }
}
