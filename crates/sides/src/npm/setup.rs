//! The npm family's client setups, for the user who runs them: pkgproxy's
//! registry in a block of pkgproxy's in `~/.npmrc` (npm, pnpm and yarn 1
//! read it), and in `~/.yarnrc.yml` for yarn 2 and later, which also needs
//! pkgproxy's host allowed over plain HTTP. A file that sets its own
//! registry is left as it is.

use std::path::PathBuf;

use anyhow::Context;

use crate::setup::{MarkedBlock, SetupClient};

/// The clients `pkgproxyctl setup` points at the npm side.
pub const CLIENTS: &[SetupClient] = &[
    SetupClient {
        name: "npm",
        about: "npm, pnpm and yarn 1 (the registry in ~/.npmrc)",
        procedure: &MarkedBlock {
            file_sh: "${NPM_CONFIG_USERCONFIG:-$HOME/.npmrc}",
            file: npmrc,
            block: npm,
            clashes: &["registry=", "registry ="],
        },
    },
    SetupClient {
        name: "yarn",
        about: "yarn 2 and later (the registry in ~/.yarnrc.yml)",
        procedure: &MarkedBlock {
            file_sh: "$HOME/.yarnrc.yml",
            file: yarnrc,
            block: yarn,
            clashes: &["npmRegistryServer:", "unsafeHttpWhitelist:"],
        },
    },
];

fn home() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME").filter(|home| !home.is_empty()).map(PathBuf::from).context("HOME is not set")
}

/// The user's npmrc: `NPM_CONFIG_USERCONFIG`, else `~/.npmrc`.
fn npmrc() -> anyhow::Result<PathBuf> {
    match std::env::var_os("NPM_CONFIG_USERCONFIG").filter(|file| !file.is_empty()) {
        Some(file) => Ok(PathBuf::from(file)),
        None => Ok(home()?.join(".npmrc")),
    }
}

fn yarnrc() -> anyhow::Result<PathBuf> {
    Ok(home()?.join(".yarnrc.yml"))
}

/// The npmrc's registry, for pkgproxy at `base` (`http://HOST:PORT`).
fn npm(base: &str) -> String {
    format!("registry={base}/npm/\n")
}

/// yarn's registry, and pkgproxy's host allowed over plain HTTP.
fn yarn(base: &str) -> String {
    let host = base.split_once("://").map_or(base, |(_, rest)| rest);
    let host = host.rsplit_once(':').map_or(host, |(host, _)| host);
    format!("npmRegistryServer: \"{base}/npm/\"\nunsafeHttpWhitelist:\n  - \"{host}\"\n")
}
