//! Break-glass entries: `side:name` or `side:name@version`, a trailing `*`
//! globbing the name (without a version) or the version.

use crate::{Ecosystem, Release};

/// One `allow` entry, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    written: String,
    ecosystem: Ecosystem,
    name: Pattern,
    version: Option<Pattern>,
}

/// A name or version: exact, or a prefix (written with a trailing `*`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Exact(String),
    Prefix(String),
}

impl Pattern {
    fn parse(text: &str, what: &str) -> Result<Pattern, AllowError> {
        let (stem, globbed) = match text.strip_suffix('*') {
            Some(stem) => (stem, true),
            None => (text, false),
        };
        if stem.contains('*') {
            return Err(AllowError(format!("a * may only end the {what}")));
        }
        if stem.is_empty() && !globbed {
            return Err(AllowError(format!("the {what} is empty")));
        }
        Ok(match globbed {
            true => Pattern::Prefix(stem.to_owned()),
            false => Pattern::Exact(stem.to_owned()),
        })
    }

    fn matches(&self, text: &str) -> bool {
        match self {
            Pattern::Exact(exact) => exact == text,
            Pattern::Prefix(prefix) => text.starts_with(prefix.as_str()),
        }
    }
}

/// Why an `allow` entry cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AllowError(String);

impl Allowed {
    /// Reads `entry` (`npm:express@4.21.2`, `pypi:requests`,
    /// `cargo:serde@1.0.*`, `npm:@scope/*`).
    pub fn parse(entry: &str) -> Result<Allowed, AllowError> {
        let (side, rest) = entry
            .split_once(':')
            .ok_or_else(|| AllowError("write side:name or side:name@version (npm:express@4.21.2)".to_owned()))?;
        let ecosystem = Ecosystem::of_side(side).ok_or_else(|| {
            AllowError(format!("unknown side {side:?}: the policy judges npm, pypi, cargo, go, maven and rpm"))
        })?;
        // A scoped npm name starts with its own `@`.
        let after_scope = usize::from(rest.starts_with('@'));
        let (name, version) = match rest[after_scope..].rfind('@') {
            Some(at) => (&rest[..after_scope + at], Some(&rest[after_scope + at + 1..])),
            None => (rest, None),
        };
        if name.contains(char::is_whitespace) || version.is_some_and(|v| v.contains(char::is_whitespace)) {
            return Err(AllowError("a name or version has no spaces".to_owned()));
        }
        let normal = match name.strip_suffix('*') {
            Some(stem) => format!("{}*", ecosystem.normal_name(stem)),
            None => ecosystem.normal_name(name),
        };
        let name = Pattern::parse(&normal, "name")?;
        if version.is_some() && matches!(name, Pattern::Prefix(_)) {
            return Err(AllowError("a name that globs names no version".to_owned()));
        }
        let version =
            version.map(|version| Pattern::parse(ecosystem.normal_version(version), "version")).transpose()?;
        Ok(Allowed { written: entry.to_owned(), ecosystem, name, version })
    }

    /// The entry as written.
    pub fn as_written(&self) -> &str {
        &self.written
    }

    /// Whether it lets `release` through.
    pub fn names(&self, release: &Release<'_>) -> bool {
        release.ecosystem == self.ecosystem
            && self.name.matches(release.name)
            && self
                .version
                .as_ref()
                .is_none_or(|version| version.matches(self.ecosystem.normal_version(release.version)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(ecosystem: Ecosystem, name: &'static str, version: &'static str) -> Release<'static> {
        Release { ecosystem, name, version }
    }

    #[test]
    fn entries_name_packages_versions_and_globs() {
        let express = Allowed::parse("npm:express@4.21.2").unwrap();
        assert!(express.names(&release(Ecosystem::Npm, "express", "4.21.2")));
        assert!(!express.names(&release(Ecosystem::Npm, "express", "4.21.3")));
        assert!(!express.names(&release(Ecosystem::Pypi, "express", "4.21.2")));
        let requests = Allowed::parse("pypi:Requests").unwrap();
        assert!(requests.names(&release(Ecosystem::Pypi, "requests", "2.0")));
        let serde = Allowed::parse("cargo:serde@1.0.*").unwrap();
        assert!(serde.names(&release(Ecosystem::Cargo, "serde", "1.0.219")));
        assert!(!serde.names(&release(Ecosystem::Cargo, "serde", "1.1.0")));
        let scoped = Allowed::parse("npm:@types/node@22.0.0").unwrap();
        assert!(scoped.names(&release(Ecosystem::Npm, "@types/node", "22.0.0")));
        let scope = Allowed::parse("npm:@ours/*").unwrap();
        assert!(scope.names(&release(Ecosystem::Npm, "@ours/tool", "1.0.0")));
        assert!(!scope.names(&release(Ecosystem::Npm, "@theirs/tool", "1.0.0")));
        let go = Allowed::parse("go:example.com/m@v1.2.3").unwrap();
        assert!(go.names(&release(Ecosystem::Go, "example.com/m", "v1.2.3")));
    }

    #[test]
    fn bad_entries_say_why() {
        for (entry, says) in [
            ("express", "side:name"),
            ("rubygems:rails", "unknown side"),
            ("npm:ex*press", "only end"),
            ("npm:express@4.*.1", "only end"),
            ("npm:ex*@1.0.0", "globs names no version"),
            ("npm:", "empty"),
        ] {
            let error = Allowed::parse(entry).unwrap_err().to_string();
            assert!(error.contains(says), "{entry}: {error}");
        }
    }
}
