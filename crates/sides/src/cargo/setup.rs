//! cargo's client setup: crates.io replaced by pkgproxy's sparse registry
//! in `$CARGO_HOME/config.toml` (`~/.cargo/config.toml`), in a block of
//! pkgproxy's that the rest of the file never sees touched. It is the
//! user's only: cargo has no machine-wide configuration file. A file that
//! defines `source.crates-io` or `source.pkgproxy` itself, in any TOML
//! spelling, is left as it is: a second definition is a TOML error, and
//! cargo would read no configuration at all.

use std::path::PathBuf;

use anyhow::Context;

use crate::setup::{first_held, BlockFile, Format, MarkedBlock, Own, Place, Reading, Scope, SetupClient};

/// The clients `pkgproxyctl setup` points at the cargo side.
pub const CLIENTS: &[SetupClient] = &[SetupClient {
    name: "cargo",
    about: "cargo (crates.io through pkgproxy, in $CARGO_HOME/config.toml; per user only)",
    procedure: &MarkedBlock {
        files: &[BlockFile { scope: Scope::User, sh: "${CARGO_HOME:-$HOME/.cargo}/config.toml", path: config_file }],
        block: |base, _| block(base),
        reading: READING,
        note: |_, _| String::new(),
    },
}];

/// `config.toml` as cargo reads it, and the two tables of the block.
const READING: Reading = Reading {
    format: Format::Toml,
    sets: |file| first_held(file, &[&["source", "crates-io"], &["source", "pkgproxy"]]).map(Own::Setting),
    place: Place::End,
};

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

#[cfg(test)]
mod tests {
    use super::{block, READING};
    use crate::setup::Fit;

    const BASE: &str = "http://10.0.0.5:3142";

    #[test]
    fn the_block_goes_into_a_config_of_other_tables() {
        for own in [
            "",
            "[build]\njobs = 4",
            "[source.vendored]\ndirectory = \"vendor\"\n",
            "source.vendored.directory = \"v\"\n",
        ] {
            assert_eq!(READING.fit("cargo", own, &block(BASE)), Fit::Fits, "{own}");
        }
    }

    #[test]
    fn a_config_defining_a_table_of_the_block_in_any_spelling_gets_none() {
        for (own, what) in [
            ("[source.crates-io]\nreplace-with = \"v\"\n", "source.crates-io"),
            ("[source.\"crates-io\"]\nreplace-with = \"v\"\n", "source.crates-io"),
            ("source.crates-io.replace-with = \"v\"\n", "source.crates-io"),
            ("source = { crates-io = { replace-with = \"v\" } }\n", "source.crates-io"),
            ("[source.'pkgproxy']\nregistry = \"sparse+https://corp/\"\n", "source.pkgproxy"),
        ] {
            assert_eq!(READING.fit("cargo", own, &block(BASE)), Fit::SetsItself(what.to_owned()), "{own}");
        }
        let broken = READING.fit("cargo", "source = \"v\"\n", &block(BASE));
        assert!(matches!(broken, Fit::WouldBreak(_)), "a table cannot extend a string: {broken:?}");
    }
}
