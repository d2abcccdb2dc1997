//! The npm family's client setups, for the user who runs them: pkgproxy's
//! registry in a block of pkgproxy's in `~/.npmrc` (npm, pnpm and yarn 1
//! read it), and in `~/.yarnrc.yml` for yarn 2 and later, which also needs
//! pkgproxy's host allowed over plain HTTP. A file that sets its own
//! registry, in any spelling npm's ini or YAML takes for the key, is left
//! as it is: npm and yarn keep a key's last value, so pkgproxy's block
//! would win over a corp registry, and unscoped internal names would
//! resolve on the public registry.

use std::path::PathBuf;

use anyhow::Context;

use crate::setup::{first_held, Format, MarkedBlock, Reading, SetupClient};

/// The clients `pkgproxyctl setup` points at the npm side.
pub const CLIENTS: &[SetupClient] = &[
    SetupClient {
        name: "npm",
        about: "npm, pnpm and yarn 1 (the registry in ~/.npmrc)",
        procedure: &MarkedBlock {
            file_sh: "${NPM_CONFIG_USERCONFIG:-$HOME/.npmrc}",
            file: npmrc,
            block: npm,
            reading: NPMRC,
        },
    },
    SetupClient {
        name: "yarn",
        about: "yarn 2 and later (the registry in ~/.yarnrc.yml)",
        procedure: &MarkedBlock { file_sh: "$HOME/.yarnrc.yml", file: yarnrc, block: yarn, reading: YARNRC },
    },
];

/// `.npmrc` as npm reads it, and the block's key.
const NPMRC: Reading = Reading { format: Format::Npmrc, sets: |file| first_held(file, &[&["registry"]]) };

/// `.yarnrc.yml` as yarn reads it, and the block's two keys.
const YARNRC: Reading = Reading {
    format: Format::Yarnrc,
    sets: |file| first_held(file, &[&["npmRegistryServer"], &["unsafeHttpWhitelist"]]),
};

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

#[cfg(test)]
mod tests {
    use super::{npm, yarn, NPMRC, YARNRC};
    use crate::setup::Fit;

    const BASE: &str = "http://10.0.0.5:3142";

    #[test]
    fn the_blocks_go_into_files_setting_other_keys() {
        for own in
            ["", "save-exact=true", "//npm.corp.example/:_authToken=CORP\n@corp:registry=https://npm.corp.example/\n"]
        {
            assert_eq!(NPMRC.fit("npm", own, &npm(BASE)), Fit::Fits, "{own}");
        }
        for own in
            ["", "enableTelemetry: false\n", "npmScopes:\n  corp:\n    npmRegistryServer: https://npm.corp.example\n"]
        {
            assert_eq!(YARNRC.fit("yarn", own, &yarn(BASE)), Fit::Fits, "{own}");
        }
    }

    #[test]
    fn a_file_setting_the_registry_in_any_spelling_gets_no_block() {
        for own in [
            "registry  = https://corp/\n",
            "registry\t=https://corp/\n",
            "'registry' = https://corp/\n",
            "registry[]=https://corp/\n",
        ] {
            assert_eq!(NPMRC.fit("npm", own, &npm(BASE)), Fit::SetsItself("registry".to_owned()), "{own:?}");
        }
        for (own, what) in [
            ("\"npmRegistryServer\": \"https://corp\"\n", "npmRegistryServer"),
            ("{npmRegistryServer: https://corp}\n", "npmRegistryServer"),
            ("'unsafeHttpWhitelist': [corp]\n", "unsafeHttpWhitelist"),
        ] {
            assert_eq!(YARNRC.fit("yarn", own, &yarn(BASE)), Fit::SetsItself(what.to_owned()), "{own:?}");
        }
    }
}
