//! Which built-in repository a repository of a `.repo` file is, and at
//! which path below it, decided on the section as dnf reads it:
//!
//! 1. its `baseurl`, whose first URL is below a built-in's URL or one its
//!    distribution's files name it by ([`built_in_urls`]); a repository
//!    with a `baseurl` elsewhere (a mirror of the admin's choosing) is
//!    left to it;
//! 2. else a commented `#baseurl=` line, which distributions ship beside
//!    their metalink or mirror list (Fedora's and EPEL's at
//!    `download.example`, Rocky's and AlmaLinux's at their own hosts);
//! 3. else its `metalink`, in the shape Fedora, EPEL and CentOS Stream
//!    publish: the inverse of the built-ins' metalink rules.
//!
//! The path keeps dnf's variables (`$releasever`, `$basearch`, `$stream`)
//! for dnf to expand; only `$contentdir`, which names the host's folder in
//! Rocky's files, is read as dnf would, to compare the URL.

use crate::instances::path_below;
use crate::rpm::config::built_in_urls;
use crate::setup::Section;

use super::files::list;

/// Where a repository's files are to pkgproxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recognised {
    /// At a built-in repository's path.
    BuiltIn {
        /// The built-in repository.
        name: &'static str,
        /// The path below it, from `/`.
        path: String,
        /// What said so.
        by: By,
    },
    /// Its `baseurl` is at pkgproxy already (set by hand).
    Pkgproxy,
    /// Elsewhere: dnf reads it itself.
    Elsewhere,
}

/// What in a section says which built-in repository it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// Its `baseurl`.
    Baseurl,
    /// The commented `#baseurl=` line at this index of the file's lines.
    Commented(usize),
    /// Its `metalink`.
    Metalink,
}

/// The folder `$contentdir` names on a distribution's host, where the
/// machine's `/etc/dnf/vars` does not say it.
const CONTENTDIRS: &[(&str, &str)] = &[("dl.rockylinux.org", "pub/rocky")];

/// What `section` (of the file whose lines are `lines`) is, for pkgproxy
/// at `base`, `$contentdir` being `contentdir` where the machine sets it.
pub fn recognised(section: &Section, lines: &[&str], base: &str, contentdir: Option<&str>) -> Recognised {
    let built_in =
        |url: &str, by: By| below_built_in(url, contentdir).map(|(name, path)| Recognised::BuiltIn { name, path, by });
    if let Some(url) = section.get("baseurl").and_then(first_url) {
        if url.starts_with(&format!("{base}/rpm/")) {
            return Recognised::Pkgproxy;
        }
        return built_in(url, By::Baseurl).unwrap_or(Recognised::Elsewhere);
    }
    let commented =
        section.comments.iter().find_map(|&line| built_in(commented_baseurl(lines[line])?, By::Commented(line)));
    let by_metalink = || {
        let (name, path) = section.get("metalink").and_then(from_metalink)?;
        Some(Recognised::BuiltIn { name, path, by: By::Metalink })
    };
    commented.or_else(by_metalink).unwrap_or(Recognised::Elsewhere)
}

/// The first URL of a `baseurl`, as dnf splits its list.
pub fn first_url(value: &str) -> Option<&str> {
    list(value).next()
}

/// The first URL of a commented `baseurl` line (`#baseurl=URL`,
/// `# baseurl = URL`).
fn commented_baseurl(line: &str) -> Option<&str> {
    let text = line.trim_start_matches(['#', ';', ' ', '\t']);
    let value = text.strip_prefix("baseurl")?.trim_start_matches([' ', '\t']).strip_prefix('=')?;
    first_url(value.trim_matches([' ', '\t', '\r', '\n']))
}

/// The built-in repository `url` is below, and the path below it, with
/// `$contentdir` read. The same host and path over `http://` or
/// `https://` are the same repository: distributions' files name theirs
/// over either (Rocky's over `http://`).
fn below_built_in(url: &str, contentdir: Option<&str>) -> Option<(&'static str, String)> {
    let url = in_clear(&with_contentdir(url, contentdir));
    built_in_urls().find_map(|(name, base)| Some((name, path_below(&in_clear(base), &url)?.to_owned())))
}

/// `url` over `http://` if it is over `https://`.
fn in_clear(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => format!("http://{rest}"),
        _ => url.to_owned(),
    }
}

/// `url` with `$contentdir` (or `${contentdir}`) replaced by `contentdir`,
/// or by what its host's distribution names by it.
fn with_contentdir(url: &str, contentdir: Option<&str>) -> String {
    let host = url.split_once("://").map_or("", |(_, rest)| rest.split(['/', ':']).next().unwrap_or_default());
    let known = CONTENTDIRS.iter().find(|(known, _)| known.eq_ignore_ascii_case(host)).map(|(_, folder)| *folder);
    let Some(value) = contentdir.or(known) else {
        return url.to_owned();
    };
    let url = url.replace("${contentdir}", value);
    let mut replaced = String::new();
    let mut rest = url.as_str();
    while let Some(at) = rest.find("$contentdir") {
        let after = &rest[at + "$contentdir".len()..];
        let another = after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        replaced.push_str(&rest[..at]);
        replaced.push_str(if another { "$contentdir" } else { value });
        rest = after;
    }
    replaced.push_str(rest);
    replaced
}

/// The built-in repository, and the path below it, of a metalink of the
/// shape its distribution publishes.
fn from_metalink(url: &str) -> Option<(&'static str, String)> {
    let (scheme, rest) = url.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("https") && !scheme.eq_ignore_ascii_case("http") {
        return None;
    }
    let (place, query) = rest.split_once('?')?;
    let param = |name: &str| query.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='));
    let (repo, arch) = (param("repo")?, param("arch")?);
    if !is_word(arch) {
        return None;
    }
    match place.to_ascii_lowercase().as_str() {
        "mirrors.fedoraproject.org/metalink" => fedoras(repo, arch),
        "mirrors.centos.org/metalink" => centos_stream(repo, arch),
        _ => None,
    }
}

/// Fedora's releases and updates, and EPEL: the inverse of their
/// metalink rules (`fedora-41`, `updates-released-f41`, `epel-9`).
fn fedoras(repo: &str, arch: &str) -> Option<(&'static str, String)> {
    let release = |prefix: &str| repo.strip_prefix(prefix).filter(|release| is_word(release));
    if let Some(release) = release("fedora-") {
        return Some(("fedora", format!("/releases/{release}/Everything/{arch}/os/")));
    }
    if let Some(release) = release("updates-released-f") {
        return Some(("fedora", format!("/updates/{release}/Everything/{arch}/")));
    }
    release("epel-").map(|release| ("epel", format!("/{release}/Everything/{arch}/")))
}

/// CentOS Stream's sections' folders, by the name their metalinks give
/// them.
const CENTOS_SECTIONS: &[(&str, &str)] = &[
    ("baseos", "BaseOS"),
    ("appstream", "AppStream"),
    ("crb", "CRB"),
    ("highavailability", "HighAvailability"),
    ("resilientstorage", "ResilientStorage"),
    ("nfv", "NFV"),
    ("rt", "RT"),
];

/// CentOS Stream's: the inverse of its metalink rule
/// (`centos-baseos-$stream`, `$stream` being `9-stream`).
fn centos_stream(repo: &str, arch: &str) -> Option<(&'static str, String)> {
    let (section, stream) = repo.strip_prefix("centos-")?.split_once('-')?;
    let numbered = stream.strip_suffix("-stream").is_some_and(|number| number.bytes().all(|b| b.is_ascii_digit()));
    if !(numbered || stream == "$stream" || stream == "${stream}") {
        return None;
    }
    let folder = CENTOS_SECTIONS.iter().find(|(name, _)| *name == section).map(|(_, folder)| *folder)?;
    Some(("centos-stream", format!("/{stream}/{folder}/{arch}/os/")))
}

/// Whether `text` is one word of a path (a release, an architecture, or
/// dnf's variable for one): no `-` (which would make it another
/// repository's, `fedora-debug-41`), `/`, `&` or blank.
fn is_word(text: &str) -> bool {
    !text.is_empty() && !text.contains(['-', '/', '&', ' ', '\t', '?', '#'])
}

#[cfg(test)]
mod tests {
    use super::{from_metalink, with_contentdir};

    #[test]
    fn metalinks_of_the_distributions_shape_are_their_repositories() {
        for (metalink, expected) in [
            (
                "https://mirrors.fedoraproject.org/metalink?repo=fedora-$releasever&arch=$basearch",
                Some(("fedora", "/releases/$releasever/Everything/$basearch/os/")),
            ),
            (
                "https://mirrors.fedoraproject.org/metalink?repo=updates-released-f$releasever&arch=$basearch",
                Some(("fedora", "/updates/$releasever/Everything/$basearch/")),
            ),
            (
                "https://mirrors.fedoraproject.org/metalink?repo=epel-$releasever&arch=$basearch&infra=$infra&content=$contentdir",
                Some(("epel", "/$releasever/Everything/$basearch/")),
            ),
            (
                "https://mirrors.centos.org/metalink?repo=centos-baseos-$stream&arch=$basearch&protocol=https,http",
                Some(("centos-stream", "/$stream/BaseOS/$basearch/os/")),
            ),
            (
                "https://mirrors.centos.org/metalink?repo=centos-crb-9-stream&arch=aarch64",
                Some(("centos-stream", "/9-stream/CRB/aarch64/os/")),
            ),
            ("https://mirrors.fedoraproject.org/metalink?repo=fedora-debug-$releasever&arch=$basearch", None),
            ("https://mirrors.fedoraproject.org/metalink?repo=updates-released-debug-f41&arch=x86_64", None),
            ("https://mirrors.fedoraproject.org/metalink?repo=epel-source-9&arch=x86_64", None),
            ("https://mirrors.centos.org/metalink?repo=centos-baseos-debug-$stream&arch=$basearch", None),
            ("https://mirrors.centos.org/metalink?repo=centos-extras-sig-extras-common-$stream&arch=$basearch", None),
            ("https://mirrors.example.org/metalink?repo=fedora-41&arch=x86_64", None),
            ("https://mirrors.fedoraproject.org/metalink?repo=fedora-41", None),
        ] {
            let found = from_metalink(metalink);
            assert_eq!(found.as_ref().map(|(name, path)| (*name, path.as_str())), expected, "{metalink}");
        }
    }

    #[test]
    fn contentdir_is_the_machine_s_else_the_distribution_s() {
        let rocky = "http://dl.rockylinux.org/$contentdir/$releasever/BaseOS/$basearch/os/";
        assert_eq!(with_contentdir(rocky, None), "http://dl.rockylinux.org/pub/rocky/$releasever/BaseOS/$basearch/os/");
        assert_eq!(
            with_contentdir(rocky, Some("vault/rocky")),
            "http://dl.rockylinux.org/vault/rocky/$releasever/BaseOS/$basearch/os/"
        );
        assert_eq!(
            with_contentdir("http://dl.rockylinux.org/${contentdir}/9/", None),
            "http://dl.rockylinux.org/pub/rocky/9/"
        );
        assert_eq!(with_contentdir("http://other.example/$contentdir/9/", None), "http://other.example/$contentdir/9/");
        assert_eq!(
            with_contentdir("http://dl.rockylinux.org/$contentdirs/9/", None),
            "http://dl.rockylinux.org/$contentdirs/9/"
        );
    }
}
