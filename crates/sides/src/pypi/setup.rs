//! pip's and uv's client setups: pkgproxy's index in a block of
//! pkgproxy's, machine-wide by default (`/etc/pip.conf`,
//! `/etc/uv/uv.toml`), or the user's with `--user`
//! (`$XDG_CONFIG_HOME/pip/pip.conf`, `$XDG_CONFIG_HOME/uv/uv.toml`, the
//! folder defaulting to `~/.config`). pip's block is options of `[global]`
//! (with `trusted-host`: pip ignores a plain-http index on another host
//! otherwise): they go into the file's own `[global]`, whatever else it
//! sets there (a `cert`, a `timeout`), as `configparser` refuses a
//! section given twice. A file that sets its own index is left as it is:
//! pip's with an `index-url` or a `trusted-host` in any section (a
//! command's own overrides `[global]`'s), uv's with a default index, in
//! any TOML spelling.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::Value;

use crate::setup::{first_held, BlockFile, Format, MarkedBlock, Own, Place, Reading, Scope, SetupClient};

/// The clients `pkgproxyctl setup` points at the PyPI side.
pub const CLIENTS: &[SetupClient] = &[
    SetupClient {
        name: "pip",
        about: "pip (the index in /etc/pip.conf; --user: ~/.config/pip/pip.conf)",
        procedure: &MarkedBlock {
            files: &[
                BlockFile { scope: Scope::System, sh: "/etc/pip.conf", path: || Ok(PathBuf::from("/etc/pip.conf")) },
                BlockFile {
                    scope: Scope::User,
                    sh: "${XDG_CONFIG_HOME:-$HOME/.config}/pip/pip.conf",
                    path: || Ok(config_home()?.join("pip/pip.conf")),
                },
            ],
            block: |base, _| pip(base),
            reading: PIP_CONF,
            note: |_, _| String::new(),
        },
    },
    SetupClient {
        name: "uv",
        about: "uv (the default index in /etc/uv/uv.toml; --user: ~/.config/uv/uv.toml)",
        procedure: &MarkedBlock {
            files: &[
                BlockFile {
                    scope: Scope::System,
                    sh: "/etc/uv/uv.toml",
                    path: || Ok(PathBuf::from("/etc/uv/uv.toml")),
                },
                BlockFile {
                    scope: Scope::User,
                    sh: "${XDG_CONFIG_HOME:-$HOME/.config}/uv/uv.toml",
                    path: || Ok(config_home()?.join("uv/uv.toml")),
                },
            ],
            block: |base, _| uv(base),
            reading: UV_TOML,
            note: |_, _| String::new(),
        },
    },
];

/// `pip.conf` as pip reads it, the index the block sets, and its section.
const PIP_CONF: Reading = Reading { format: Format::PipConf, sets: pip_index, place: Place::PipSection("global") };

/// `uv.toml` as uv reads it, and the default index the block sets.
const UV_TOML: Reading = Reading { format: Format::Toml, sets: uv_default_index, place: Place::End };

/// The user's configuration folder, as pip and uv find it:
/// `$XDG_CONFIG_HOME`, else `~/.config`.
fn config_home() -> anyhow::Result<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    match var("XDG_CONFIG_HOME") {
        Some(folder) => Ok(folder),
        None => Ok(var("HOME").context("neither XDG_CONFIG_HOME nor HOME is set")?.join(".config")),
    }
}

/// What in `pip.conf` names pip's index: an `index-url`, or a
/// `trusted-host` the block's host would join, in `[global]` or a
/// command's section (whose options win over `[global]`'s for it).
fn pip_index(file: &Value) -> Option<Own> {
    let sections = file.as_object()?;
    let set = |option: &str| {
        sections
            .iter()
            .find(|(_, options)| options.get(option).is_some())
            .map(|(name, _)| format!("{option} in [{name}]"))
    };
    set("index-url").map(Own::Setting).or_else(|| set("trusted-host").map(Own::List))
}

/// What in `uv.toml` names uv's default index: `index-url` (and `[pip]`'s),
/// `default-index`, or an index with `default = true`.
fn uv_default_index(file: &Value) -> Option<Own> {
    let named = first_held(file, &[&["index-url"], &["default-index"], &["pip", "index-url"]]);
    let indexes = file.get("index").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let default = indexes.iter().any(|index| index.get("default") == Some(&Value::Bool(true)));
    named.or_else(|| default.then(|| "a default index".to_owned())).map(Own::Setting)
}

/// pip's `[global]` options for pkgproxy at `base` (`http://HOST:PORT`).
fn pip(base: &str) -> String {
    let host = base.trim_start_matches("http://").rsplit_once(':').map_or(base, |(host, _)| host);
    format!("index-url = {base}/pypi/simple/\ntrusted-host = {host}\n")
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
        for own in [
            "",
            "[install]\nno-cache-dir = true\n",
            "[global]\ntimeout = 60\n",
            "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n[install]\nextra-index-url = https://corp/\n",
        ] {
            assert_eq!(PIP_CONF.fit("pip", own, &pip(BASE)), Fit::Fits, "{own:?}");
        }
        for own in
            ["", "cache-dir = \"/var/cache/uv\"\n", "[[index]]\nname = \"corp\"\nurl = \"https://corp/simple/\"\n"]
        {
            assert_eq!(UV_TOML.fit("uv", own, &uv(BASE)), Fit::Fits, "{own:?}");
        }
    }

    #[test]
    fn pip_s_options_go_into_the_file_s_own_global_section() {
        let own = "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n\n[install]\nno-deps = true\n";
        let placed = PIP_CONF.placed(own, &pip(BASE));
        assert_eq!(
            (placed.at, placed.within.as_deref()),
            (own.find("\n\n").unwrap() + 1, Some("its [global] section"))
        );
        assert_eq!(placed.lines, "index-url = http://10.0.0.5:3142/pypi/simple/\ntrusted-host = 10.0.0.5\n");
        let placed = PIP_CONF.placed("[install]\nno-deps = true\n", &pip(BASE));
        assert!(placed.lines.starts_with("[global]\nindex-url = ") && placed.within.is_none(), "{placed:?}");
    }

    #[test]
    fn a_file_with_an_index_of_its_own_gets_no_block() {
        for (own, fit) in [
            ("[global]\nindex-url = https://corp/\n", Fit::SetsItself("index-url in [global]".to_owned())),
            ("[DEFAULT]\nindex_url = https://corp/\n[global]\n", Fit::SetsItself("index-url in [global]".to_owned())),
            ("[install]\nindex-url = https://corp/\n", Fit::SetsItself("index-url in [install]".to_owned())),
            ("[global]\ntrusted-host = corp\n", Fit::ListsItself("trusted-host in [global]".to_owned())),
        ] {
            assert_eq!(PIP_CONF.fit("pip", own, &pip(BASE)), fit, "{own:?}");
        }
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
