//! cargo's client setup: crates.io replaced by pkgproxy's sparse registry
//! in `$CARGO_HOME/config.toml` (`~/.cargo/config.toml`), in a block of
//! pkgproxy's that the rest of the file never sees touched.

use std::path::PathBuf;

use anyhow::Context;

use crate::setup::{MarkedBlock, SetupClient};

/// The clients `pkgproxyctl setup` points at the cargo side.
pub const CLIENTS: &[SetupClient] = &[SetupClient {
    name: "cargo",
    about: "cargo (crates.io through pkgproxy, in $CARGO_HOME/config.toml)",
    procedure: &MarkedBlock {
        file_sh: "${CARGO_HOME:-$HOME/.cargo}/config.toml",
        file: config_file,
        block,
        clashes: &["[source.crates-io]", "[source.pkgproxy]"],
    },
}];

/// `$CARGO_HOME/config.toml`, `CARGO_HOME` defaulting to `~/.cargo`.
fn config_file() -> anyhow::Result<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    let home = match var("CARGO_HOME") {
        Some(home) => home,
        None => var("HOME").context("neither CARGO_HOME nor HOME is set")?.join(".cargo"),
    };
    Ok(home.join("config.toml"))
}

/// crates.io replaced by pkgproxy's registry at `base`.
fn block(base: &str) -> String {
    format!("[source.crates-io]\nreplace-with = \"pkgproxy\"\n\n[source.pkgproxy]\nregistry = \"sparse+{base}/cargo/index/\"\n")
}
