//! pip's and uv's client setups, machine-wide: pkgproxy's index in a
//! block of pkgproxy's in `/etc/pip.conf` (with `trusted-host`: pip
//! ignores a plain-http index on another host otherwise) and in
//! `/etc/uv/uv.toml`. A file that sets its own index is left as it is.

use std::path::PathBuf;

use crate::setup::{MarkedBlock, SetupClient};

/// The clients `pkgproxyctl setup` points at the PyPI side.
pub const CLIENTS: &[SetupClient] = &[
    SetupClient {
        name: "pip",
        about: "pip (the index in /etc/pip.conf)",
        procedure: &MarkedBlock {
            file_sh: "/etc/pip.conf",
            file: || Ok(PathBuf::from("/etc/pip.conf")),
            block: pip,
            clashes: &["[global]"],
        },
    },
    SetupClient {
        name: "uv",
        about: "uv (the default index in /etc/uv/uv.toml)",
        procedure: &MarkedBlock {
            file_sh: "/etc/uv/uv.toml",
            file: || Ok(PathBuf::from("/etc/uv/uv.toml")),
            block: uv,
            clashes: &["default = true", "index-url"],
        },
    },
];

/// pip's `[global]` for pkgproxy at `base` (`http://HOST:PORT`).
fn pip(base: &str) -> String {
    let host = base.trim_start_matches("http://").rsplit_once(':').map_or(base, |(host, _)| host);
    format!("[global]\nindex-url = {base}/pypi/simple/\ntrusted-host = {host}\n")
}

/// uv's default index for pkgproxy at `base`.
fn uv(base: &str) -> String {
    format!("[[index]]\nurl = \"{base}/pypi/simple/\"\ndefault = true\n")
}
