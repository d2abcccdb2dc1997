//! A client's file read as the client reads it, into one tree: TOML as
//! cargo and uv read it (with the `toml` crate they use), npm's ini, YAML
//! as yarn 2 and later read it, pip's ini, Maven's `settings.xml`. And how
//! pkgproxy's block is marked in each: between comment lines of the
//! format's own (`#`, or XML's `<!-- -->`). Whether a user's file sets what
//! pkgproxy's block sets, and whether the block is read back as written,
//! are asked of trees, the same way for every client, never of lines: a
//! key has many spellings (`[source."crates-io"]`,
//! `source.crates-io.replace-with`, `registry\t=`, `"npmRegistryServer":`).
//! It reads text only.

use serde_json::Value;

use super::{npmrc, pip_conf, settings_xml, MARKER};

/// How a client reads its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// TOML (cargo's `config.toml`, uv's `uv.toml`).
    Toml,
    /// npm's ini (`.npmrc`, which npm, pnpm and yarn 1 read).
    Npmrc,
    /// YAML as yarn 2 and later read `.yarnrc.yml`: a mapping, or nothing.
    Yarnrc,
    /// pip's ini (`pip.conf`).
    PipConf,
    /// Maven's `settings.xml`: XML, its root `<settings>`.
    SettingsXml,
}

impl Format {
    /// Its name, for what the user is told.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Toml => "TOML",
            Format::Npmrc => "npm's ini",
            Format::Yarnrc => "YAML",
            Format::PipConf => "pip's ini",
            Format::SettingsXml => "XML",
        }
    }

    /// How a comment line opens and closes in the format.
    fn comment(self) -> (&'static str, &'static str) {
        match self {
            Format::Toml | Format::Npmrc | Format::Yarnrc | Format::PipConf => ("# ", ""),
            Format::SettingsXml => ("<!-- ", " -->"),
        }
    }

    /// What the first line of pkgproxy's block opens with (`# >>> pkgproxy`).
    pub fn block_begin(self) -> String {
        format!("{}>>> pkgproxy", self.comment().0)
    }

    /// What the last line of pkgproxy's block opens with (`# <<< pkgproxy`).
    pub fn block_end(self) -> String {
        format!("{}<<< pkgproxy", self.comment().0)
    }

    /// `lines` between the block's marker lines: what is read back to
    /// decide where it fits and what is written.
    pub fn marked(self, lines: &str) -> String {
        let close = self.comment().1;
        format!(
            "{} ({MARKER}: downloads go through pkgproxy){close}\n{lines}{}{close}\n",
            self.block_begin(),
            self.block_end()
        )
    }

    /// `text` as the client reads it, or why it cannot.
    pub fn read(self, text: &str) -> Result<Value, String> {
        match self {
            Format::Toml => toml_tree(text),
            Format::Npmrc => npmrc::read(text, &|name| std::env::var(name).ok()),
            Format::Yarnrc => yarnrc_tree(text),
            Format::PipConf => pip_conf::read(text),
            Format::SettingsXml => settings_xml::read(text),
        }
    }
}

/// The first of `paths` that `tree` holds anything at, dotted
/// (`source.crates-io`).
pub fn first_held(tree: &Value, paths: &[&[&str]]) -> Option<String> {
    let held = |path: &&[&str]| path.iter().try_fold(tree, |tree, key| tree.get(key)).is_some();
    paths.iter().copied().find(held).map(|path| path.join("."))
}

fn toml_tree(text: &str) -> Result<Value, String> {
    let table: toml::Table = text.parse().map_err(|error: toml::de::Error| {
        let line = error.span().map_or(1, |span| text[..span.start.min(text.len())].matches('\n').count() + 1);
        format!("line {line}: {}", error.message().trim_end())
    })?;
    serde_json::to_value(table).map_err(|error| error.to_string())
}

/// yarn reads its file with js-yaml's `json` option: a key given twice
/// keeps its last value. An empty file is an empty mapping; anything but a
/// mapping, yarn refuses.
fn yarnrc_tree(text: &str) -> Result<Value, String> {
    let options = serde_saphyr::options! { duplicate_keys: serde_saphyr::options::DuplicateKeyPolicy::LastWins };
    let tree: Value =
        serde_saphyr::from_str_with_options(text, options).map_err(|error| one_line(&error.to_string()))?;
    match tree {
        Value::Null => Ok(Value::Object(serde_json::Map::new())),
        Value::Object(_) => Ok(tree),
        _ => Err("not a mapping".to_owned()),
    }
}

/// `text`'s first line: what a parser's error says, without the snippet
/// it may quote.
fn one_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{first_held, Format};

    #[test]
    fn every_toml_spelling_of_a_table_reads_the_same() {
        for text in [
            "[source.crates-io]\nreplace-with = \"v\"\n",
            "[source.\"crates-io\"]\nreplace-with = \"v\"\n",
            "[ source . 'crates-io' ]\nreplace-with = \"v\"\n",
            "source.crates-io.replace-with = \"v\"\n",
            "source = { crates-io = { replace-with = \"v\" } }\n",
            "[source]\n\"crates-io\".replace-with = \"v\"\n",
        ] {
            let tree = Format::Toml.read(text).unwrap();
            assert_eq!(tree, json!({"source": {"crates-io": {"replace-with": "v"}}}), "{text}");
            assert_eq!(
                first_held(&tree, &[&["source", "pkgproxy"], &["source", "crates-io"]]).unwrap(),
                "source.crates-io"
            );
        }
        let error = Format::Toml.read("[build]\njobs = 4\n\n[build]\n").unwrap_err();
        assert!(error.starts_with("line 4: "), "{error}");
    }

    #[test]
    fn yaml_keys_read_the_same_quoted_or_not_and_the_last_of_two_wins_as_in_yarn() {
        for text in [
            "npmRegistryServer: \"https://a\"\n",
            "\"npmRegistryServer\": https://a\n",
            "'npmRegistryServer' : 'https://a'\n",
            "{npmRegistryServer: https://a}\n",
            "? npmRegistryServer\n: https://a\n",
            "npmRegistryServer: https://b\nnpmRegistryServer: https://a\n",
        ] {
            assert_eq!(Format::Yarnrc.read(text).unwrap(), json!({"npmRegistryServer": "https://a"}), "{text}");
        }
        assert_eq!(Format::Yarnrc.read("").unwrap(), json!({}));
        assert_eq!(Format::Yarnrc.read("# nothing\n").unwrap(), json!({}));
        for text in ["- a\n", "just text\n", "a: b: c\n", "a: 1\n---\nb: 2\n"] {
            assert!(Format::Yarnrc.read(text).is_err(), "{text}");
        }
    }
}
