//! pip's and uv's client setups, machine-wide: pkgproxy's index in a
//! block of pkgproxy's in `/etc/pip.conf` (with `trusted-host`: pip
//! ignores a plain-http index on another host otherwise) and in
//! `/etc/uv/uv.toml`. A file that sets its own index is left as it is:
//! pip's with a `[global]` section (a second one is an error to pip), uv's
//! with a default index, in any TOML spelling.

use std::path::PathBuf;

use serde_json::Value;

use crate::setup::{first_held, Format, MarkedBlock, Reading, SetupClient};

/// The clients `pkgproxyctl setup` points at the PyPI side.
pub const CLIENTS: &[SetupClient] = &[
    SetupClient {
        name: "pip",
        about: "pip (the index in /etc/pip.conf)",
        procedure: &MarkedBlock {
            file_sh: "/etc/pip.conf",
            file: || Ok(PathBuf::from("/etc/pip.conf")),
            block: pip,
            reading: PIP_CONF,
        },
    },
    SetupClient {
        name: "uv",
        about: "uv (the default index in /etc/uv/uv.toml)",
        procedure: &MarkedBlock {
            file_sh: "/etc/uv/uv.toml",
            file: || Ok(PathBuf::from("/etc/uv/uv.toml")),
            block: uv,
            reading: UV_TOML,
        },
    },
];

/// `pip.conf` as pip reads it, and the block's section.
const PIP_CONF: Reading =
    Reading { format: Format::PipConf, sets: |file| first_held(file, &[&["global"]]).map(|_| "[global]".to_owned()) };

/// `uv.toml` as uv reads it, and the default index the block sets.
const UV_TOML: Reading = Reading { format: Format::Toml, sets: uv_default_index };

/// What in `uv.toml` names uv's default index: `index-url` (and `[pip]`'s),
/// `default-index`, or an index with `default = true`.
fn uv_default_index(file: &Value) -> Option<String> {
    let named = first_held(file, &[&["index-url"], &["default-index"], &["pip", "index-url"]]);
    let indexes = file.get("index").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let default = indexes.iter().any(|index| index.get("default") == Some(&Value::Bool(true)));
    named.or_else(|| default.then(|| "a default index".to_owned()))
}

/// pip's `[global]` for pkgproxy at `base` (`http://HOST:PORT`).
fn pip(base: &str) -> String {
    let host = base.trim_start_matches("http://").rsplit_once(':').map_or(base, |(host, _)| host);
    format!("[global]\nindex-url = {base}/pypi/simple/\ntrusted-host = {host}\n")
}

/// uv's default index for pkgproxy at `base`.
fn uv(base: &str) -> String {
    format!("[[index]]\nurl = \"{base}/pypi/simple/\"\ndefault = true\n")
}

#[cfg(test)]
mod tests {
    use super::{pip, uv, PIP_CONF, UV_TOML};
    use crate::setup::Fit;

    const BASE: &str = "http://10.0.0.5:3142";

    #[test]
    fn the_blocks_go_into_files_of_other_settings() {
        for own in ["", "[install]\nno-cache-dir = true\n", "[ global ]\nindex-url = https://corp/\n"] {
            assert_eq!(PIP_CONF.fit("pip", own, &pip(BASE)), Fit::Fits, "{own:?}");
        }
        for own in
            ["", "cache-dir = \"/var/cache/uv\"\n", "[[index]]\nname = \"corp\"\nurl = \"https://corp/simple/\"\n"]
        {
            assert_eq!(UV_TOML.fit("uv", own, &uv(BASE)), Fit::Fits, "{own:?}");
        }
    }

    #[test]
    fn a_file_with_an_index_of_its_own_gets_no_block() {
        assert_eq!(PIP_CONF.fit("pip", "[global]\ntimeout = 60\n", &pip(BASE)), Fit::SetsItself("[global]".to_owned()));
        for (own, what) in [
            ("index-url = \"https://corp/simple/\"\n", "index-url"),
            ("default-index = \"https://corp/simple/\"\n", "default-index"),
            ("[pip]\nindex-url = \"https://corp/simple/\"\n", "pip.index-url"),
            ("[[index]]\nurl = \"https://corp/simple/\"\ndefault = true\n", "a default index"),
            ("index = [{ url = \"https://corp/simple/\", \"default\" = true }]\n", "a default index"),
        ] {
            assert_eq!(UV_TOML.fit("uv", own, &uv(BASE)), Fit::SetsItself(what.to_owned()), "{own:?}");
        }
    }
}
