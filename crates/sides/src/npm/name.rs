//! Package names and what a request below a registry asks for. A scoped
//! name arrives as `@s%2fn` (npm, yarn), `@s%2Fn` (pnpm) or `@s/n`: all
//! are one name, `@s/n`, once the path is decoded.

use crate::decision::Refusal;

/// The longest name the registry accepts.
const NAME_LIMIT: usize = 214;

/// A package's name, `name` or `@scope/name`, as the registry spells it
/// (old packages keep upper-case letters: names are not folded).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PackageName(String);

impl PackageName {
    /// `name`, if it may be a package's.
    pub fn parse(name: &str) -> Option<PackageName> {
        let fine = match name.strip_prefix('@') {
            Some(scoped) => scoped.split_once('/').is_some_and(|(scope, name)| is_part(scope) && is_part(name)),
            None => is_part(name),
        };
        (fine && name.len() <= NAME_LIMIT).then(|| PackageName(name.to_owned()))
    }

    /// The name without its scope: what its tarballs are named by.
    pub fn unscoped(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }

    /// The name in a registry's path: `@scope%2fname` for a scoped one.
    pub fn in_path(&self) -> String {
        self.0.replacen('/', "%2f", 1)
    }
}

impl std::fmt::Display for PackageName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `part` may be a name or a scope: what the registry ever
/// accepted in one (URL-safe bytes), not starting with a dot.
fn is_part(part: &str) -> bool {
    !part.is_empty()
        && !part.starts_with('.')
        && part.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~!*'()".contains(&b))
}

/// Whether `version` may be a version or a dist-tag.
fn is_version(version: &str) -> bool {
    !version.is_empty()
        && version.len() <= 256
        && !version.starts_with('.')
        && version.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._+".contains(&b))
}

/// Whether `version` is a version rather than a dist-tag (`latest`): it
/// starts with a digit, as semver's do.
pub fn is_exact_version(version: &str) -> bool {
    version.bytes().next().is_some_and(|b| b.is_ascii_digit())
}

/// What a request below a registry asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// A package's document (`/NAME`).
    Document(PackageName),
    /// One version's document (`/NAME/VERSION`, or a dist-tag).
    Version(PackageName, String),
    /// A tarball (`/NAME/-/FILE`), of the version its file names.
    Tarball(Tarball),
    /// The registry's API (`/-/...`, a publish, an unpublish): passed on.
    Api,
}

/// A tarball as its path names it: `/NAME/-/UNSCOPED-VERSION.tgz`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tarball {
    /// Its package.
    pub name: PackageName,
    /// Its version, from its file's name.
    pub version: String,
    /// Its file's name.
    pub file: String,
}

impl Tarball {
    /// The tarball `file` of `name`, if the file is named as the registry
    /// names them.
    pub fn new(name: PackageName, file: &str) -> Option<Tarball> {
        let version = file.strip_prefix(name.unscoped())?.strip_prefix('-')?.strip_suffix(".tgz")?;
        is_version(version).then(|| Tarball { version: version.to_owned(), file: file.to_owned(), name })
    }

    /// Its path below a registry, as the registry lays tarballs out.
    pub fn path(&self) -> String {
        format!("/{}/-/{}", self.name, self.file)
    }
}

/// What `path` (below a registry's mount, decoded) asks for.
pub fn parse(path: &str) -> Result<Asked, Refusal> {
    let below = path.strip_prefix('/').ok_or_else(|| Refusal::not_found("not a registry path"))?;
    let segments: Vec<&str> = below.trim_end_matches('/').split('/').collect();
    let (name, rest) = match segments.as_slice() {
        ["-", ..] => return Ok(Asked::Api),
        [scope, name, rest @ ..] if scope.starts_with('@') => (format!("{scope}/{name}"), rest),
        [name, rest @ ..] if !name.is_empty() => (name.to_string(), rest),
        _ => return Err(Refusal::not_found("pkgproxy serves a package's document: /npm/NAME")),
    };
    let name =
        PackageName::parse(&name).ok_or_else(|| Refusal::not_found(format!("{name:?} is not a package's name")))?;
    match rest {
        [] => Ok(Asked::Document(name)),
        [version] if is_version(version) => Ok(Asked::Version(name, version.to_string())),
        ["-", file] => {
            let reason = format!("{file:?} is not a tarball of {name}");
            Tarball::new(name, file).map(Asked::Tarball).ok_or_else(|| Refusal::not_found(reason))
        }
        ["-rev", ..] => Ok(Asked::Api),
        _ => Err(Refusal::not_found(format!("not a path of {name}'s: /NAME, /NAME/VERSION or /NAME/-/FILE"))),
    }
}

/// The package and file a tarball URL names, when it is laid out as
/// registries lay them out (`.../NAME/-/FILE`, the name maybe scoped,
/// maybe with its slash encoded): where pkgproxy serves it.
pub fn tarball_of_url(url: &str) -> Option<Tarball> {
    let rest = url.split_once("://")?.1;
    let path = &rest[rest.find('/')?..];
    let path = &path[..path.find(['?', '#']).unwrap_or(path.len())];
    let path = percent_encoding::percent_decode_str(path).decode_utf8().ok()?;
    let segments: Vec<&str> = path.split('/').collect();
    let [.., before, name, "-", file] = segments.as_slice() else { return None };
    let name = match before.starts_with('@') {
        true => format!("{before}/{name}"),
        false => name.to_string(),
    };
    Tarball::new(PackageName::parse(&name)?, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(name: &str) -> PackageName {
        PackageName::parse(name).unwrap()
    }

    #[test]
    fn every_spelling_of_a_scoped_name_is_one_name() {
        for path in ["/@types/node", "/@types/node/"] {
            assert_eq!(parse(path).unwrap(), Asked::Document(name("@types/node")), "{path}");
        }
        assert_eq!(name("@types/node").in_path(), "@types%2fnode");
        assert_eq!(name("@types/node").unscoped(), "node");
    }

    #[test]
    fn paths_are_documents_versions_tarballs_or_the_api() {
        assert_eq!(parse("/JSONStream").unwrap(), Asked::Document(name("JSONStream")));
        assert_eq!(parse("/is-number/7.0.0").unwrap(), Asked::Version(name("is-number"), "7.0.0".into()));
        assert_eq!(parse("/is-number/latest").unwrap(), Asked::Version(name("is-number"), "latest".into()));
        let Asked::Tarball(tarball) = parse("/@s/n/-/n-1.0.0-rc.1.tgz").unwrap() else { panic!() };
        assert_eq!((tarball.name.to_string(), tarball.version.as_str()), ("@s/n".to_owned(), "1.0.0-rc.1"));
        assert_eq!(tarball.path(), "/@s/n/-/n-1.0.0-rc.1.tgz");
        assert_eq!(parse("/-/npm/v1/security/advisories/bulk").unwrap(), Asked::Api);
        assert_eq!(parse("/x/-rev/3-abc").unwrap(), Asked::Api);
        for bad in ["/", "/.x", "/a b", "/x/-/y-1.0.0.tgz", "/x/-/x-1.0.0.zip", "/x/1/2", "/@s"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_tarball_url_names_its_package_wherever_it_is() {
        for url in [
            "https://registry.npmjs.org/@s/n/-/n-1.2.3.tgz",
            "http://127.0.0.1:9/@s%2fn/-/n-1.2.3.tgz",
            "https://corp.example/repository/npm/@s/n/-/n-1.2.3.tgz?x=1",
        ] {
            let tarball = tarball_of_url(url).unwrap();
            assert_eq!((tarball.name.to_string(), tarball.file.as_str()), ("@s/n".to_owned(), "n-1.2.3.tgz"), "{url}");
        }
        assert!(tarball_of_url("https://npm.pkg.example/download/@s/n/1.2.3/abcdef").is_none());
    }
}
