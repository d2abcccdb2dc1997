//! What the user is told of the repositories left to dnf (a third
//! party's, a mirror of the admin's choosing): each by its file, then how
//! pkgproxy would serve it, the `[[rpm.repository]]` to add to
//! pkgproxy's configuration and the `baseurl` to set by hand. A
//! repository's mirror is its `baseurl` up to the folder before dnf's
//! first variable, so that one repository of pkgproxy's serves every
//! release and architecture (`https://download.docker.com/linux/fedora`
//! for `.../fedora/$releasever/$basearch/stable`); those of one mirror
//! share one.

use crate::rpm::config::built_in_urls;

use super::plan::Unserved;

/// A repository to add to pkgproxy's configuration.
struct Added {
    name: String,
    mirror: String,
}

/// What the user is told of the repositories `left` in each file (named
/// from `/`), for pkgproxy at `base`; nothing when there are none.
pub fn told(base: &str, left: &[(&str, &[Unserved])]) -> String {
    let all: Vec<(&str, &Unserved)> =
        left.iter().flat_map(|(file, unserved)| unserved.iter().map(move |repository| (*file, repository))).collect();
    if all.is_empty() {
        return String::new();
    }
    let mut text = "dnf reads these repositories itself, not through pkgproxy:\n".to_owned();
    for (file, repository) in &all {
        text.push_str(&format!("  {}\n", listed(file, repository)));
    }
    let mut added: Vec<Added> = Vec::new();
    let mut by_hand = String::new();
    for (_, repository) in &all {
        let Some((mirror, below)) = repository.baseurl.as_deref().and_then(mirror_of) else {
            continue;
        };
        let name = match added.iter().find(|known| known.mirror == mirror) {
            Some(known) => known.name.clone(),
            None => {
                let name = unused_name(&repository.id, &added);
                added.push(Added { name: name.clone(), mirror: mirror.to_owned() });
                name
            }
        };
        by_hand.push_str(&format!("  [{}] baseurl={base}/rpm/{name}{below}\n", repository.id));
    }
    if !added.is_empty() {
        text.push_str(
            "pkgproxy serves the repositories its pkgproxy.toml names. To read one through pkgproxy, add\nthere\n",
        );
        for Added { name, mirror } in &added {
            text.push_str(&format!("  [[rpm.repository]]\n  name = \"{name}\"\n  mirrors = [\"{mirror}\"]\n"));
        }
        text.push_str("and set its baseurl by hand, its metalink= and mirrorlist= commented out:\n");
        text.push_str(&by_hand);
    }
    text
}

/// A repository left to dnf, as listed: its id, file, and where it is.
fn listed(file: &str, repository: &Unserved) -> String {
    let disabled = if repository.enabled { "" } else { ", disabled" };
    let at = match (&repository.baseurl, &repository.list) {
        (Some(url), _) => format!(", at {url}"),
        (None, Some((key, url))) => format!(", by its {key} {url}"),
        (None, None) => ", with no URL".to_owned(),
    };
    format!("{} ({file}{disabled}){at}", repository.id)
}

/// A `baseurl`'s mirror for pkgproxy's configuration (up to the folder
/// before its first variable) and the path below it (`/` at least);
/// `None` for a URL pkgproxy cannot fetch (not http or https), or whose
/// host is a variable.
fn mirror_of(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    let path_at = scheme.len() + 3 + rest.find('/')?;
    let end = match url.find('$') {
        Some(variable) if variable < path_at => return None,
        Some(variable) => url[..variable].rfind('/')?,
        None => url.trim_end_matches('/').len(),
    };
    let (mirror, below) = url.split_at(end.max(path_at));
    Some((mirror, if below.is_empty() { "/" } else { below }))
}

/// A name for the repository `id` in pkgproxy's configuration (lower
/// case letters, digits, `-` and `_`), none of a built-in's nor of those
/// `added`.
fn unused_name(id: &str, added: &[Added]) -> String {
    let name: String = id
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' { c } else { '-' })
        .take(60)
        .collect();
    let name = match name.trim_matches('-') {
        "" => "repository",
        name => name,
    };
    let taken = |name: &str| built_in_urls().any(|(known, _)| known == name) || added.iter().any(|a| a.name == name);
    (1..)
        .map(|n| if n == 1 { name.to_owned() } else { format!("{name}-{n}") })
        .find(|name| !taken(name))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::{mirror_of, told};
    use crate::rpm::setup::plan::Unserved;

    fn unserved(id: &str, baseurl: &str) -> Unserved {
        Unserved { id: id.to_owned(), enabled: true, baseurl: Some(baseurl.to_owned()), list: None }
    }

    #[test]
    fn a_mirror_is_the_baseurl_up_to_its_first_variable() {
        for (url, expected) in [
            (
                "https://download.docker.com/linux/fedora/$releasever/$basearch/stable",
                Some(("https://download.docker.com/linux/fedora", "/$releasever/$basearch/stable")),
            ),
            ("https://repo.corp.example/el9/", Some(("https://repo.corp.example/el9", "/"))),
            ("https://repo.corp.example/", Some(("https://repo.corp.example", "/"))),
            ("https://repo.corp.example/x$y/z", Some(("https://repo.corp.example", "/x$y/z"))),
            ("https://$mirror/el9/", None),
            ("file:///media/cdrom/", None),
        ] {
            assert_eq!(mirror_of(url), expected, "{url}");
        }
    }

    #[test]
    fn repositories_of_one_mirror_share_a_repository_of_pkgproxy_s() {
        let docker = [
            unserved("docker-ce-stable", "https://download.docker.com/linux/fedora/$releasever/$basearch/stable"),
            Unserved {
                enabled: false,
                ..unserved("docker-ce-test", "https://download.docker.com/linux/fedora/$releasever/$basearch/test")
            },
        ];
        let corp = [
            unserved("Fedora", "https://mirror.corp.example/fedora/releases/$releasever/Everything/$basearch/os/"),
            Unserved {
                id: "local".to_owned(),
                enabled: true,
                baseurl: None,
                list: Some(("mirrorlist", "https://corp/list".to_owned())),
            },
        ];
        let text = told(
            "http://10.0.0.5:3142",
            &[("/etc/yum.repos.d/docker-ce.repo", &docker), ("/etc/yum.repos.d/corp.repo", &corp)],
        );
        assert_eq!(
            text,
            "dnf reads these repositories itself, not through pkgproxy:
  docker-ce-stable (/etc/yum.repos.d/docker-ce.repo), at https://download.docker.com/linux/fedora/$releasever/$basearch/stable
  docker-ce-test (/etc/yum.repos.d/docker-ce.repo, disabled), at https://download.docker.com/linux/fedora/$releasever/$basearch/test
  Fedora (/etc/yum.repos.d/corp.repo), at https://mirror.corp.example/fedora/releases/$releasever/Everything/$basearch/os/
  local (/etc/yum.repos.d/corp.repo), by its mirrorlist https://corp/list
pkgproxy serves the repositories its pkgproxy.toml names. To read one through pkgproxy, add
there
  [[rpm.repository]]
  name = \"docker-ce-stable\"
  mirrors = [\"https://download.docker.com/linux/fedora\"]
  [[rpm.repository]]
  name = \"fedora-2\"
  mirrors = [\"https://mirror.corp.example/fedora/releases\"]
and set its baseurl by hand, its metalink= and mirrorlist= commented out:
  [docker-ce-stable] baseurl=http://10.0.0.5:3142/rpm/docker-ce-stable/$releasever/$basearch/stable
  [docker-ce-test] baseurl=http://10.0.0.5:3142/rpm/docker-ce-stable/$releasever/$basearch/test
  [Fedora] baseurl=http://10.0.0.5:3142/rpm/fedora-2/$releasever/Everything/$basearch/os/
"
        );
        assert_eq!(told("http://10.0.0.5:3142", &[("/etc/yum.repos.d/fedora.repo", &[])]), "");
    }
}
