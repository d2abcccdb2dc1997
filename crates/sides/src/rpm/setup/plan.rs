//! A repository file's setup: the file as dnf reads it without
//! pkgproxy's lines, each of its repositories recognised
//! ([`recognised`]), and the file with those at a built-in repository
//! pointed at pkgproxy ([`marks`]). What is decided is decided on the
//! file's own lines, so a file set up before is set up again to the same
//! text (or to another pkgproxy's), and taken back to the same.

use crate::setup::{Ini, IniError, Section};

use super::marks::{self, Broken, Change};
use super::recognised::{first_url, recognised, By, Recognised};

/// The section of a `.repo` file that is no repository.
const MAIN: &str = "main";

/// The options that say where a repository is: what pkgproxy's
/// `baseurl` replaces.
const LOCATIONS: [&str; 3] = ["baseurl", "metalink", "mirrorlist"];

/// Why a file is left as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unread {
    #[error("cannot be read ({0})")]
    Io(String),
    #[error("is not UTF-8 text")]
    NotText,
    #[error("cannot be read by dnf ({0})")]
    Dnf(IniError),
    #[error("holds lines of pkgproxy's it cannot take out: {0}")]
    Marks(Broken),
}

/// A repository left to dnf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unserved {
    /// Its id (the section's name).
    pub id: String,
    /// Whether dnf reads it.
    pub enabled: bool,
    /// The first URL of its `baseurl`, if it has one.
    pub baseurl: Option<String>,
    /// Its metalink or mirror list, where it has no `baseurl`: the option
    /// and its value.
    pub list: Option<(&'static str, String)>,
}

/// A file's setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// The file as it is.
    pub now: String,
    /// The file without pkgproxy's lines: what `--undo` writes.
    pub outside: String,
    /// The file set up: what the setup writes.
    pub wanted: String,
    /// The repositories pointed at pkgproxy, each with the built-in
    /// repository it is.
    pub through: Vec<(String, &'static str)>,
    /// The repositories left to dnf.
    pub unserved: Vec<Unserved>,
}

/// The file `bytes`, without pkgproxy's lines; why not.
pub fn outside(bytes: &[u8]) -> Result<(String, String), Unread> {
    let now = std::str::from_utf8(bytes).ok().filter(|text| !text.contains('\0')).ok_or(Unread::NotText)?;
    let outside = marks::outside(now).map_err(Unread::Marks)?;
    Ok((now.to_owned(), outside))
}

/// The setup of the file `bytes` for pkgproxy at `base`, `$contentdir`
/// being `contentdir` where the machine sets it; why the file is left as
/// it is.
pub fn planned(bytes: &[u8], base: &str, contentdir: Option<&str>) -> Result<Planned, Unread> {
    let (now, outside) = outside(bytes)?;
    let ini = Ini::read(&outside).map_err(Unread::Dnf)?;
    let mut changes = Vec::new();
    let mut through = Vec::new();
    let mut unserved = Vec::new();
    for section in ini.sections().iter().filter(|section| section.name != MAIN) {
        match recognised(section, &ini.lines, base, contentdir) {
            Recognised::BuiltIn { name, path, by } => {
                changes.push(change(section, format!("{base}/rpm/{name}{path}"), by));
                through.push((section.name.clone(), name));
            }
            Recognised::Pkgproxy => {}
            Recognised::Elsewhere => unserved.push(left(section)),
        }
    }
    let wanted = marks::put(&ini.lines, &changes);
    Ok(Planned { now, outside, wanted, through, unserved })
}

/// The change pointing `section` at `baseurl`: its own locations
/// commented out, the block before the first of them (or before the
/// commented `baseurl` that said which repository it is, if that comes
/// first).
fn change(section: &Section, baseurl: String, by: By) -> Change {
    let off: Vec<_> = section
        .options
        .iter()
        .filter(|(key, _, _)| LOCATIONS.contains(&key.as_str()))
        .map(|(_, _, lines)| lines.clone())
        .collect();
    let commented = match by {
        By::Commented(line) => Some(line),
        By::Baseurl | By::Metalink => None,
    };
    let at = off.iter().map(|lines| lines.start).chain(commented).min().unwrap_or_default();
    Change { at, baseurl, off }
}

/// What is said of `section`, left to dnf.
fn left(section: &Section) -> Unserved {
    let disabled = section
        .get("enabled")
        .is_some_and(|value| ["0", "no", "false", "off"].iter().any(|word| value.trim().eq_ignore_ascii_case(word)));
    let baseurl = section.get("baseurl").and_then(first_url).map(str::to_owned);
    let list = ["metalink", "mirrorlist"]
        .into_iter()
        .find_map(|key| Some((key, section.get(key).filter(|value| !value.is_empty())?.to_owned())));
    Unserved { id: section.name.clone(), enabled: !disabled, baseurl, list }
}
