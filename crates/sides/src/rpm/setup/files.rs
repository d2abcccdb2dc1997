//! Which repository files dnf reads on a machine, found as dnf finds
//! them: the `*.repo` files, in name order, of the folders `reposdir`
//! names in `/etc/dnf/dnf.conf`'s `[main]`, or of its default folders
//! that exist; and `$contentdir`, which dnf reads from
//! `/etc/dnf/vars/contentdir` (Rocky's files name their host's folder by
//! it).

use std::path::PathBuf;

use crate::setup::{Ini, Target};

/// dnf's configuration file.
const DNF_CONF: &str = "/etc/dnf/dnf.conf";

/// The folders dnf reads repository files from when `reposdir` is not
/// set (those that exist).
const DEFAULT_FOLDERS: [&str; 3] = ["/etc/yum.repos.d", "/etc/yum/repos.d", "/etc/distro.repos.d"];

/// The file setting `$contentdir`.
const CONTENTDIR: &str = "/etc/dnf/vars/contentdir";

/// A repository file.
#[derive(Debug, Clone)]
pub struct RepoFile {
    /// Where it is, from the machine's `/`: what the user is told, and
    /// what the printed script names under its root.
    pub shown: String,
    /// Where it is under the target.
    pub path: PathBuf,
}

/// What dnf reads on a machine, for its repositories.
#[derive(Debug, Clone, Default)]
pub struct DnfFiles {
    /// The repository files, folder by folder, each folder's in name
    /// order.
    pub files: Vec<RepoFile>,
    /// The folders they were looked for in, from `/`.
    pub folders: Vec<String>,
    /// `$contentdir`, if the machine sets it.
    pub contentdir: Option<String>,
    /// What the user should know of how they were found (a `dnf.conf`
    /// dnf cannot read, a folder that cannot be listed).
    pub told: Vec<String>,
}

impl DnfFiles {
    /// What dnf reads under `target`.
    pub fn of(target: &Target) -> DnfFiles {
        let mut found = DnfFiles { contentdir: contentdir(target), ..DnfFiles::default() };
        found.folders = match reposdir(target) {
            Ok(Some(folders)) => folders,
            Ok(None) => DEFAULT_FOLDERS
                .iter()
                .filter(|folder| target.path(folder).is_dir())
                .map(|folder| (*folder).to_owned())
                .collect(),
            Err(why) => {
                found.told.push(format!("{DNF_CONF} {why}: its default folders are looked in"));
                DEFAULT_FOLDERS.iter().map(|folder| (*folder).to_owned()).collect()
            }
        };
        for folder in found.folders.clone() {
            match repo_files(target, &folder) {
                Ok(files) => found.files.extend(files),
                Err(why) => found.told.push(why),
            }
        }
        found
    }
}

/// The folders `reposdir` names in `dnf.conf` under `target`, if it is
/// set; why the file cannot be read, if it cannot.
fn reposdir(target: &Target) -> Result<Option<Vec<String>>, String> {
    let text = match std::fs::read(target.path(DNF_CONF)) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_owned())?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot be read ({error})")),
    };
    let ini = Ini::read(&text).map_err(|error| format!("cannot be read by dnf ({error})"))?;
    let main = ini.section("main");
    Ok(main.as_ref().and_then(|main| main.get("reposdir")).map(|value| list(value).map(str::to_owned).collect()))
}

/// The items of a list option's value, as dnf splits it: at spaces, commas
/// and line breaks.
pub fn list(value: &str) -> impl Iterator<Item = &str> {
    value.split([' ', ',', '\n']).filter(|item| !item.is_empty())
}

/// The `*.repo` files of `folder` (from `/`) under `target`, in name
/// order, as dnf lists them (no hidden ones); none when it is not there.
fn repo_files(target: &Target, folder: &str) -> Result<Vec<RepoFile>, String> {
    let listed = match std::fs::read_dir(target.path(folder)) {
        Ok(listed) => listed,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(format!("{folder} cannot be listed ({error}): its files are left as they are")),
    };
    let mut names: Vec<String> = listed
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".repo") && !name.starts_with('.'))
        .collect();
    names.sort();
    let folder = folder.trim_end_matches('/');
    let files = names.into_iter().map(|name| {
        let shown = format!("{folder}/{name}");
        RepoFile { path: target.path(&shown), shown }
    });
    Ok(files.filter(|file| file.path.is_file()).collect())
}

/// `$contentdir` as dnf reads it under `target`: the first line of its
/// file.
fn contentdir(target: &Target) -> Option<String> {
    let text = std::fs::read_to_string(target.path(CONTENTDIR)).ok()?;
    let value = text.lines().next()?.trim();
    (!value.is_empty()).then(|| value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::DnfFiles;
    use crate::setup::Target;

    fn machine(files: &[(&str, &str)]) -> (tempfile::TempDir, Target) {
        let root = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = root.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let target = Target { root: root.path().to_path_buf(), restarts: false };
        (root, target)
    }

    fn shown(found: &DnfFiles) -> Vec<&str> {
        found.files.iter().map(|file| file.shown.as_str()).collect()
    }

    #[test]
    fn the_default_folders_that_exist_are_read_in_name_order() {
        let (_root, target) = machine(&[
            ("/etc/yum.repos.d/fedora.repo", "[fedora]\n"),
            ("/etc/yum.repos.d/epel.repo", "[epel]\n"),
            ("/etc/yum.repos.d/.hidden.repo", "[x]\n"),
            ("/etc/yum.repos.d/fedora.repo.rpmnew", "[x]\n"),
            ("/etc/distro.repos.d/rocky.repo", "[baseos]\n"),
            ("/etc/dnf/vars/contentdir", "pub/rocky\n"),
        ]);
        let found = DnfFiles::of(&target);
        assert_eq!(found.folders, ["/etc/yum.repos.d", "/etc/distro.repos.d"]);
        assert_eq!(
            shown(&found),
            ["/etc/yum.repos.d/epel.repo", "/etc/yum.repos.d/fedora.repo", "/etc/distro.repos.d/rocky.repo"]
        );
        assert_eq!(found.contentdir.as_deref(), Some("pub/rocky"));
        assert!(found.told.is_empty(), "{:?}", found.told);
    }

    #[test]
    fn reposdir_in_dnf_conf_names_the_folders() {
        let (_root, target) = machine(&[
            ("/etc/dnf/dnf.conf", "[main]\ngpgcheck=1\nreposdir = /srv/repos, /etc/yum.repos.d\n  /opt/more\n"),
            ("/etc/yum.repos.d/fedora.repo", "[fedora]\n"),
            ("/srv/repos/corp.repo", "[corp]\n"),
        ]);
        let found = DnfFiles::of(&target);
        assert_eq!(found.folders, ["/srv/repos", "/etc/yum.repos.d", "/opt/more"]);
        assert_eq!(shown(&found), ["/srv/repos/corp.repo", "/etc/yum.repos.d/fedora.repo"]);
    }

    #[test]
    fn a_dnf_conf_dnf_cannot_read_is_said_and_the_default_folders_are_read() {
        let (_root, target) =
            machine(&[("/etc/dnf/dnf.conf", "[main]\nreposdir\n"), ("/etc/yum.repos.d/fedora.repo", "[fedora]\n")]);
        let found = DnfFiles::of(&target);
        assert_eq!(shown(&found), ["/etc/yum.repos.d/fedora.repo"]);
        assert_eq!(
            found.told,
            ["/etc/dnf/dnf.conf cannot be read by dnf (line 2: Missing '='): its default folders are looked in"]
        );
    }
}
