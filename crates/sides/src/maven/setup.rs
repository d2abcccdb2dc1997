//! Maven's and Gradle's client setups.
//!
//! - `maven`: pkgproxy's mirrors in a block of pkgproxy's in the user's
//!   `~/.m2/settings.xml`, or with `--system` in Debian's machine-wide
//!   `/etc/maven/settings.xml` (its Maven's `conf/settings.xml`), inside
//!   the file's own `<mirrors>` (a whole `<mirrors>` where it has none, a
//!   whole file where there is none): Central's always, and one for each
//!   repository the file's profiles declare at another built-in
//!   repository's URL (Google's, the Gradle plugin portal). A repository
//!   declared at another URL is pkgproxy's only once pkgproxy's
//!   configuration names it: the user is told what to add there, and the
//!   mirror to add by hand. A file whose own mirrors take one of the
//!   repositories pkgproxy would mirror (`central`, `*`, `external:*`, a
//!   list naming it) is left as it is: Maven takes a mirror naming a
//!   repository before any pattern, so pkgproxy's would win over the
//!   user's. So is one declaring `central` at another URL.
//! - `gradle`: an init script of pkgproxy's own ([`gradle`]).

mod gradle;

use std::path::PathBuf;

use anyhow::Context;
use quick_xml::escape::escape;
use serde_json::Value;

use super::config::built_in_urls;
use crate::setup::{BlockFile, Format, MarkedBlock, Own, Place, Reading, Scope, SetupClient, UsersFile};

/// The clients `pkgproxyctl setup` points at the Maven side.
pub const CLIENTS: &[SetupClient] = &[
    SetupClient {
        name: "maven",
        about: "Maven (mirrors in ~/.m2/settings.xml; --system: /etc/maven/settings.xml)",
        procedure: &MarkedBlock {
            files: &[
                BlockFile { scope: Scope::User, sh: "$HOME/.m2/settings.xml", path: user_settings },
                BlockFile {
                    scope: Scope::System,
                    sh: "/etc/maven/settings.xml",
                    path: || Ok(PathBuf::from("/etc/maven/settings.xml")),
                },
            ],
            block: mirrors,
            reading: SETTINGS_XML,
            note: unserved,
        },
    },
    SetupClient {
        name: "gradle",
        about: "Gradle (an init script in ~/.gradle/init.d; per user only)",
        procedure: &UsersFile(gradle::plan),
    },
];

/// `settings.xml` as Maven reads it, the mirrors of its own that take a
/// repository pkgproxy's would, and its `<mirrors>`.
const SETTINGS_XML: Reading = Reading {
    format: Format::SettingsXml,
    sets: own_mirror,
    place: Place::XmlList { root: "settings", open: SETTINGS, list: "mirrors" },
};

/// The root's start tag of a `settings.xml` pkgproxy writes whole.
const SETTINGS: &str = "<settings xmlns=\"http://maven.apache.org/SETTINGS/1.0.0\"\n          \
                        xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"\n          \
                        xsi:schemaLocation=\"http://maven.apache.org/SETTINGS/1.0.0 https://maven.apache.org/xsd/settings-1.0.0.xsd\">";

/// The user's `settings.xml`: `~/.m2/settings.xml`.
fn user_settings() -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("HOME").filter(|home| !home.is_empty()).context("HOME is not set")?;
    Ok(PathBuf::from(home).join(".m2/settings.xml"))
}

/// A repository a profile of a `settings.xml` declares
/// (`<repository>`, `<pluginRepository>`).
#[derive(Debug, Clone, Copy)]
struct Declared<'a> {
    id: &'a str,
    url: &'a str,
    /// The profile's id.
    profile: &'a str,
}

/// The items of `tree`'s list `name`.
fn items<'a>(tree: &'a Value, name: &str) -> impl Iterator<Item = &'a Value> {
    tree.get(name).and_then(Value::as_array).into_iter().flatten()
}

/// The text of `tree`'s element `name`; empty when it has none.
fn text<'a>(tree: &'a Value, name: &str) -> &'a str {
    tree.get(name).and_then(Value::as_str).unwrap_or_default()
}

/// The repositories the profiles of `file` declare, with an id.
fn declared(file: &Value) -> Vec<Declared<'_>> {
    let mut declared = Vec::new();
    for profile in items(file, "profiles") {
        for list in ["repositories", "pluginRepositories"] {
            for repository in items(profile, list) {
                let (id, url) = (text(repository, "id"), text(repository, "url"));
                if !id.is_empty() {
                    declared.push(Declared { id, url, profile: text(profile, "id") });
                }
            }
        }
    }
    declared
}

/// The built-in repository at `url`, if any.
fn built_in(url: &str) -> Option<&'static str> {
    let url = url.trim().trim_end_matches('/');
    built_in_urls().find(|(_, known)| known.eq_ignore_ascii_case(url)).map(|(name, _)| name)
}

/// What pkgproxy mirrors of the repositories a `settings.xml` reads.
struct Mirrored<'a> {
    /// Each repository mirrored, by its id, with the built-in repository
    /// it is: Central first.
    through: Vec<(&'a str, &'static str)>,
    /// The repositories declared at other URLs (or an id declared at
    /// several), which pkgproxy serves only once configured to.
    elsewhere: Vec<Declared<'a>>,
}

/// What pkgproxy mirrors of the repositories `file` reads.
fn mirrored(file: &Value) -> Mirrored<'_> {
    let declared = declared(file);
    let mut mirrored = Mirrored { through: vec![("central", "central")], elsewhere: Vec::new() };
    for repository in &declared {
        let id = repository.id;
        if mirrored.through.iter().any(|(known, _)| *known == id) || mirrored.elsewhere.iter().any(|r| r.id == id) {
            continue;
        }
        let mut urls = declared.iter().filter(|other| other.id == id).map(|other| built_in(other.url));
        match urls.next().flatten() {
            Some(name) if urls.all(|other| other == Some(name)) => mirrored.through.push((id, name)),
            _ => mirrored.elsewhere.push(*repository),
        }
    }
    mirrored
}

/// Whether Maven takes a mirror whose `<mirrorOf>` is `pattern` for the
/// repository `id`, one on another host over HTTPS (Maven's
/// `DefaultMirrorSelector`): `*`, `external:*`, the id, alone or in a
/// list, unless `!id` in it excludes it.
fn mirror_of(pattern: &str, id: &str) -> bool {
    if pattern == "*" || pattern == id {
        return true;
    }
    let mut taken = false;
    for part in pattern.split(',').map(str::trim) {
        match part.strip_prefix('!') {
            Some(excluded) if !excluded.is_empty() => {
                if excluded == id {
                    return false;
                }
            }
            _ if part == id => return true,
            _ => taken |= part == "*" || part == "external:*",
        }
    }
    taken
}

/// The id of pkgproxy's mirror of the repository `id`.
fn mirror_id(id: &str) -> String {
    format!("pkgproxy-{id}")
}

/// What in `file` sets what pkgproxy's mirrors would: a mirror of its
/// own taking a repository pkgproxy would mirror (named alone, or in a
/// pattern whose other repositories it keeps), or bearing one of their ids
/// (Maven wants them unique), or `central` declared at another URL.
fn own_mirror(file: &Value) -> Option<Own> {
    let central = declared(file).into_iter().find(|repository| {
        repository.id == "central" && !repository.url.is_empty() && built_in(repository.url) != Some("central")
    });
    if let Some(central) = central {
        return Some(Own::Setting(format!("repository central at {} (profile {})", central.url, central.profile)));
    }
    let mirrored = mirrored(file);
    for mirror in items(file, "mirrors") {
        let (id, of) = (text(mirror, "id"), text(mirror, "mirrorOf"));
        if let Some((repository, _)) = mirrored.through.iter().find(|(repository, _)| mirror_of(of, repository)) {
            let what = format!("a mirror of {repository} ({id})");
            // A mirror of that repository alone is replaced by pkgproxy's;
            // one of a pattern keeps the others, pkgproxy's beside it.
            return Some(if of == *repository { Own::Setting(what) } else { Own::List(what) });
        }
        if mirrored.through.iter().any(|(repository, _)| mirror_id(repository) == id) {
            return Some(Own::Setting(format!("a mirror with the id {id}")));
        }
    }
    None
}

/// pkgproxy's `<mirror>` of the repository `id`, the built-in `name`, for
/// pkgproxy at `base`.
fn mirror(base: &str, id: &str, name: &str) -> String {
    let id = escape(id);
    format!(
        "    <mirror>\n      <id>{}</id>\n      <name>{id} through pkgproxy</name>\n      \
         <mirrorOf>{id}</mirrorOf>\n      <url>{base}/maven/{name}/</url>\n    </mirror>\n",
        mirror_id(&id)
    )
}

/// pkgproxy's mirrors of what `file` reads, for pkgproxy at `base`
/// (`http://HOST:PORT`): the block.
fn mirrors(base: &str, file: &Value) -> String {
    mirrored(file).through.iter().map(|(id, name)| mirror(base, id, name)).collect()
}

/// The name pkgproxy's configuration can give the repository `id`: lower
/// case letters, digits, `-` and `_`.
fn repository_name(id: &str) -> String {
    let name: String = id
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' { c } else { '-' })
        .take(64)
        .collect();
    let name = name.trim_matches('-');
    if name.is_empty() {
        "repository".to_owned()
    } else {
        name.to_owned()
    }
}

/// What the user is told of the repositories `file` declares at other
/// URLs and no mirror of its own takes: how pkgproxy serves them (its
/// configuration, then a mirror added by hand, for pkgproxy at `base`).
fn unserved(base: &str, file: &Value) -> String {
    let own: Vec<&str> = items(file, "mirrors").map(|mirror| text(mirror, "mirrorOf")).collect();
    let mut told = String::new();
    for repository in mirrored(file).elsewhere {
        let Declared { id, url, profile } = repository;
        if own.iter().any(|pattern| mirror_of(pattern, id)) {
            continue;
        }
        let name = repository_name(id);
        told.push_str(&format!(
            "Maven reads the repository {id} (profile {profile}) itself, at\n{url}: pkgproxy serves the\n\
             repositories its pkgproxy.toml names. To read it through pkgproxy, add there\n  \
             [[maven.repository]]\n  name = \"{name}\"\n  mirrors = [\"{url}\"]\n\
             and this mirror to the file's <mirrors> by hand, outside pkgproxy's block:\n  \
             <mirror><id>{}</id><mirrorOf>{}</mirrorOf><url>{base}/maven/{name}/</url></mirror>\n",
            escape(mirror_id(id)),
            escape(id),
        ));
    }
    told
}

#[cfg(test)]
mod tests;
