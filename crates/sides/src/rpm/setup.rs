//! dnf's client setup (`pkgproxyctl setup dnf`; yum on a dnf machine
//! reads the same files), machine-wide: each repository of the `.repo`
//! files dnf reads ([`files`]) that is a built-in repository's
//! ([`recognised`]: by its `baseurl`, the commented `#baseurl=` its
//! distribution ships, or its metalink) gets a `baseurl` at
//! `http://HOST:PORT/rpm/NAME/PATH`, dnf's variables kept for dnf to
//! expand, and its own `baseurl`, `metalink` and `mirrorlist` lines
//! commented out, each change marked so `--undo` gives the file back
//! byte for byte ([`marks`]). Files are edited in place: dnf reads them
//! there, and their package keeps an edited one through an update (they
//! are configuration it does not replace), putting its own beside it as
//! `.rpmnew`. A repository pkgproxy does not serve (a third party's, a
//! mirror of the admin's choosing) is left exactly as it is, and named
//! with what to add to pkgproxy's configuration and to the file by hand
//! ([`told`]). A file dnf cannot read is left as it is, and said.

mod files;
mod marks;
mod plan;
mod recognised;
mod script;
mod told;

use std::path::Path;

use anyhow::Context;

use crate::setup::{Action, Procedure, Setup, SetupClient};
use files::{DnfFiles, RepoFile};
use plan::{Planned, Unread};
use script::Put;

/// The clients `pkgproxyctl setup` points at the RPM side.
pub const CLIENTS: &[SetupClient] = &[SetupClient {
    name: "dnf",
    about: "dnf and yum (the distributions' repositories in /etc/yum.repos.d/*.repo get a baseurl at pkgproxy)",
    procedure: &Dnf,
}];

/// `dnf`: the repositories of every `.repo` file dnf reads.
struct Dnf;

impl Procedure for Dnf {
    fn run(&self, _client: &str, action: Action, setup: &Setup<'_>) -> anyhow::Result<()> {
        let found = DnfFiles::of(setup.target);
        match action {
            Action::Print => print!("{}", setup_script(setup.base, &found)),
            Action::PrintUndo => print!("{}", undo_script(&found)),
            Action::Apply => apply(setup.base, &found)?,
            Action::Undo => undo(&found)?,
        }
        Ok(())
    }
}

/// The bytes of `file`.
fn read(file: &RepoFile) -> Result<Vec<u8>, Unread> {
    std::fs::read(&file.path).map_err(|error| Unread::Io(error.to_string()))
}

/// Each repository file's setup for pkgproxy at `base`, or why it is left
/// as it is.
fn plans<'f>(base: &str, found: &'f DnfFiles) -> Vec<(&'f RepoFile, Result<Planned, Unread>)> {
    let contentdir = found.contentdir.as_deref();
    found
        .files
        .iter()
        .map(|file| (file, read(file).and_then(|bytes| plan::planned(&bytes, base, contentdir))))
        .collect()
}

/// Whether a file's setup changes it, or points a repository at
/// pkgproxy: whether the setup names it.
fn concerned(planned: &Planned) -> bool {
    planned.wanted != planned.now || !planned.through.is_empty()
}

/// What is said once `planned` is written, after the file's name.
fn done(planned: &Planned) -> String {
    let ids: Vec<&str> = planned.through.iter().map(|(id, _)| id.as_str()).collect();
    match ids.as_slice() {
        [] => ": no repository through pkgproxy".to_owned(),
        ids => format!(": {} through pkgproxy", ids.join(", ")),
    }
}

/// What the user is told of the repositories the `plans` leave to dnf.
fn told_of(base: &str, plans: &[(&RepoFile, Result<Planned, Unread>)]) -> String {
    let left: Vec<(&str, &[plan::Unserved])> = plans
        .iter()
        .filter_map(|(file, planned)| Some((file.shown.as_str(), planned.as_ref().ok()?.unserved.as_slice())))
        .collect();
    told::told(base, &left)
}

/// The script pointing the repositories at pkgproxy at `base`.
fn setup_script(base: &str, found: &DnfFiles) -> String {
    let plans = plans(base, found);
    let mut puts = Vec::new();
    let mut unread = Vec::new();
    for (file, planned) in &plans {
        match planned {
            Ok(planned) if concerned(planned) => puts.push(Put {
                shown: &file.shown,
                from: &planned.now,
                to: &planned.wanted,
                done: ("wrote ", done(planned)),
            }),
            Ok(_) => {}
            Err(why) => unread.push((file.shown.as_str(), why.clone())),
        }
    }
    let what = format!("Points dnf's repositories at {base} in {}", folders(found));
    script::script(&what, found, &puts, &unread, &told_of(base, &plans))
}

/// The script taking pkgproxy's lines out of the repository files.
fn undo_script(found: &DnfFiles) -> String {
    let mut outsides = Vec::new();
    let mut unread = Vec::new();
    for file in &found.files {
        match read(file).and_then(|bytes| outside_of(&bytes)) {
            Ok(Some((now, outside))) => outsides.push((file, now, outside)),
            Ok(None) => {}
            Err(why) => unread.push((file.shown.as_str(), why)),
        }
    }
    let done = ("took pkgproxy's lines out of ", String::new());
    let puts: Vec<Put<'_>> = outsides
        .iter()
        .map(|(file, now, outside)| Put { shown: &file.shown, from: now, to: outside, done: done.clone() })
        .collect();
    let what = format!("Takes pkgproxy's lines out of dnf's repository files in {}", folders(found));
    script::script(&what, found, &puts, &unread, "")
}

/// The folders looked in, as the user is told of them.
fn folders(found: &DnfFiles) -> String {
    match found.folders.as_slice() {
        [] => "no folder".to_owned(),
        folders => folders.join(", "),
    }
}

/// The file `bytes` as it is and without pkgproxy's lines, when it holds
/// any; why they cannot be taken out.
fn outside_of(bytes: &[u8]) -> Result<Option<(String, String)>, Unread> {
    if !marks::holds_any(&String::from_utf8_lossy(bytes)) {
        return Ok(None);
    }
    plan::outside(bytes).map(Some)
}

/// Writes `text` over the file at `path`, keeping its owner and mode.
fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Points the repositories at pkgproxy at `base`, file by file; fails at
/// the end, naming them, when files were left as they are.
fn apply(base: &str, found: &DnfFiles) -> anyhow::Result<()> {
    said(found);
    let plans = plans(base, found);
    let mut left = Vec::new();
    for (file, planned) in &plans {
        let path = file.path.display();
        match planned {
            Err(why) => left.push(format!("{path} {why}: left as it is")),
            Ok(planned) if planned.wanted != planned.now => {
                write(&file.path, &planned.wanted)?;
                println!("wrote {path}{}", done(planned));
            }
            Ok(planned) if concerned(planned) => println!("{path} is as it should be"),
            Ok(_) => {}
        }
    }
    print!("{}", told_of(base, &plans));
    anyhow::ensure!(left.is_empty(), "{}", left.join("\n"));
    Ok(())
}

/// Takes pkgproxy's lines out of every repository file that holds some;
/// fails at the end, naming them, when files were left as they are.
fn undo(found: &DnfFiles) -> anyhow::Result<()> {
    said(found);
    let mut left = Vec::new();
    let mut taken = 0;
    for file in &found.files {
        let path = file.path.display();
        match read(file).and_then(|bytes| outside_of(&bytes)) {
            Ok(Some((_, outside))) => {
                write(&file.path, &outside)?;
                println!("took pkgproxy's lines out of {path}");
                taken += 1;
            }
            Ok(None) => {}
            Err(why) => left.push(format!("{path} {why}: left as it is")),
        }
    }
    if taken == 0 && left.is_empty() {
        println!("no repository file holds lines of pkgproxy's");
    }
    anyhow::ensure!(left.is_empty(), "{}", left.join("\n"));
    Ok(())
}

/// Says what the user should know of how the files were found, and when
/// there are none.
fn said(found: &DnfFiles) {
    for said in &found.told {
        eprintln!("{said}");
    }
    if found.files.is_empty() {
        println!("no repository file of dnf's (folders: {})", folders(found));
    }
}

#[cfg(test)]
mod tests;
