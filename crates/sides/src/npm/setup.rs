//! The npm family's client setups: pkgproxy's registry in a block of
//! pkgproxy's in the user's `~/.npmrc` (npm, pnpm and yarn 1 read it), or
//! with `--system` in npm's machine-wide npmrc (`npm config get
//! globalconfig`: `$PREFIX/etc/npmrc`); and in `~/.yarnrc.yml` for yarn 2
//! and later, which also needs pkgproxy's host allowed over plain HTTP,
//! and has no machine-wide file. A file that sets its own registry, in any
//! spelling npm's ini or YAML takes for the key, is left as it is: npm and
//! yarn keep a key's last value, so pkgproxy's block would win over a corp
//! registry, and unscoped internal names would resolve on the public
//! registry. npm sends a token only to the registry its line names, so
//! the user is told which line carries one to pkgproxy.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;

use crate::setup::{first_held, BlockFile, Format, MarkedBlock, Own, Place, Reading, Scope, SetupClient};

/// The clients `pkgproxyctl setup` points at the npm side.
pub const CLIENTS: &[SetupClient] = &[
    SetupClient {
        name: "npm",
        about: "npm, pnpm and yarn 1 (the registry in ~/.npmrc; --system: npm's $PREFIX/etc/npmrc)",
        procedure: &MarkedBlock {
            files: &[
                BlockFile { scope: Scope::User, sh: "${NPM_CONFIG_USERCONFIG:-$HOME/.npmrc}", path: npmrc },
                BlockFile { scope: Scope::System, sh: "$(npm config get globalconfig)", path: global_npmrc },
            ],
            block: |base, _| npm(base),
            reading: NPMRC,
            note: |base, _| token_line(base),
        },
    },
    SetupClient {
        name: "yarn",
        about: "yarn 2 and later (the registry in ~/.yarnrc.yml; per user only)",
        procedure: &MarkedBlock {
            files: &[BlockFile { scope: Scope::User, sh: "$HOME/.yarnrc.yml", path: yarnrc }],
            block: |base, _| yarn(base),
            reading: YARNRC,
            note: |_, _| String::new(),
        },
    },
];

/// `.npmrc` as npm reads it, and the block's key.
const NPMRC: Reading = Reading {
    format: Format::Npmrc,
    sets: |file| first_held(file, &[&["registry"]]).map(Own::Setting),
    place: Place::End,
};

/// `.yarnrc.yml` as yarn reads it, and the block's two keys: the registry,
/// and the list of hosts allowed over plain HTTP.
const YARNRC: Reading = Reading {
    format: Format::Yarnrc,
    sets: |file| {
        let registry = first_held(file, &[&["npmRegistryServer"]]).map(Own::Setting);
        registry.or_else(|| first_held(file, &[&["unsafeHttpWhitelist"]]).map(Own::List))
    },
    place: Place::End,
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

/// npm's machine-wide npmrc, as npm finds it (`$PREFIX/etc/npmrc`, its
/// prefix where node is installed unless configured).
fn global_npmrc() -> anyhow::Result<PathBuf> {
    let asked = "npm config get globalconfig";
    let output = Command::new("npm")
        .args(["config", "get", "globalconfig"])
        .output()
        .with_context(|| format!("cannot run {asked}, which names npm's machine-wide npmrc"))?;
    anyhow::ensure!(output.status.success(), "{asked} failed: {}", String::from_utf8_lossy(&output.stderr).trim());
    let file = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    anyhow::ensure!(file.is_absolute(), "{asked} named no file: {}", file.display());
    Ok(file)
}

fn yarnrc() -> anyhow::Result<PathBuf> {
    Ok(home()?.join(".yarnrc.yml"))
}

/// The line that gives npm's token to pkgproxy at `base`: npm sends a
/// token only to the registry its line names, so one of the npm
/// registry's (`//registry.npmjs.org/:_authToken=`) no longer goes out.
fn token_line(base: &str) -> String {
    let registry = base.split_once("://").map_or(base, |(_, rest)| rest);
    format!(
        "npm sends a token only to the registry its line names: a token line for\n\
         //registry.npmjs.org/ is not sent to pkgproxy. For private packages, add this line\n\
         of your own, outside pkgproxy's block, with the token:\n\
         //{registry}/npm/:_authToken=TOKEN\n"
    )
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
    use super::{npm, token_line, yarn, NPMRC, YARNRC};
    use crate::setup::Fit;

    const BASE: &str = "http://10.0.0.5:3142";

    #[test]
    fn the_token_line_named_is_scoped_to_pkgproxy_s_registry() {
        let told = token_line(BASE);
        assert!(told.lines().any(|line| line == "//10.0.0.5:3142/npm/:_authToken=TOKEN"), "{told}");
        // The registry setup writes, as npm scopes a token to it.
        assert_eq!(npm(BASE), "registry=http://10.0.0.5:3142/npm/\n");
    }

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
            let own_is = match what {
                "unsafeHttpWhitelist" => Fit::ListsItself(what.to_owned()),
                _ => Fit::SetsItself(what.to_owned()),
            };
            assert_eq!(YARNRC.fit("yarn", own, &yarn(BASE)), own_is, "{own:?}");
        }
    }
}
