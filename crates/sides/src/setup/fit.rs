//! Whether pkgproxy's block may go into a user's file, and where
//! ([`Place`]), decided on the file as its client reads it ([`Format`]):
//! the client must read the file as it is, the file must not set what the
//! block sets (the client would read it twice and refuse the file, or take
//! one of the two), and the file with the block in it must read as the
//! block says and as the file said (a TOML table it cannot extend, an
//! npmrc whose last section would swallow the block's key, a line taken
//! into another's value). A file pkgproxy would make unreadable, or whose
//! setting it would override, is never written. It reads text only.

use serde_json::Value;

use super::reading::Format;
use super::{pip_conf, settings_xml};

/// What a file of the user's own makes of pkgproxy's block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fit {
    /// The block goes in.
    Fits,
    /// The file sets, outside the block, what the block sets (named).
    SetsItself(String),
    /// The file sets, outside the block, a list the block's value would
    /// join (named): the user's values and pkgproxy's go on it together.
    ListsItself(String),
    /// Its client cannot read the file as it is (why).
    Unreadable(String),
    /// With the block in it, the file would not be read, or would not
    /// read as the block and the file say (where the block would be, and
    /// what its client would make of it).
    WouldBreak(String),
}

impl Fit {
    /// Whether the block goes in.
    pub fn fits(&self) -> bool {
        *self == Fit::Fits
    }

    /// Why the block does not go in, said after the file's name.
    pub fn why(&self, client: &str) -> Option<String> {
        match self {
            Fit::Fits => None,
            Fit::SetsItself(what) | Fit::ListsItself(what) => Some(format!("sets {what} itself")),
            Fit::Unreadable(why) => Some(format!("cannot be read by {client} ({why})")),
            Fit::WouldBreak(how) => Some(format!("with pkgproxy's block {how}")),
        }
    }

    /// How what the user adds by hand goes with a setting of their own,
    /// said after "Add this by hand".
    pub fn with_their_own(&self) -> &'static str {
        match self {
            Fit::SetsItself(_) => ", in place of its own",
            Fit::ListsItself(_) => ", its own values kept beside pkgproxy's",
            _ => "",
        }
    }
}

/// What a user's file sets itself of what pkgproxy's block sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Own {
    /// A setting the block's would replace (named).
    Setting(String),
    /// A list the block's value would join (named).
    List(String),
}

/// Where pkgproxy's block goes in a user's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// At the file's end.
    End,
    /// Among the options of the `pip.conf` section named: at the end of
    /// the file's own section of that name, without its header
    /// (`configparser` refuses a section given twice); at the file's end,
    /// under the header, when the file has none.
    PipSection(&'static str),
    /// Elements of the list `list` of an XML file's root (Maven's
    /// `<mirrors>` of `<settings>`): inside the file's own list, after
    /// what it holds, on lines of their own before its end tag; the list
    /// element whole, before the root's end tag, when the file has none;
    /// the whole file when there is none (`open` the root's start tag).
    XmlList {
        /// The root element's name.
        root: &'static str,
        /// Its start tag in a file pkgproxy writes whole, namespaces
        /// included.
        open: &'static str,
        /// The list's name.
        list: &'static str,
    },
}

/// pkgproxy's block as it goes into a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// Where: the bytes of the file's lines outside the block before it,
    /// at the end of a line.
    pub at: usize,
    /// Its lines, without the marker lines: what the user adds by hand
    /// where it does not go in.
    pub lines: String,
    /// The section of the file's own it goes into, as the user is told
    /// of it (`its [global] section`); `None` for the file itself.
    pub within: Option<String>,
}

impl Placed {
    /// Where it is, as the user is told (`at its end`).
    fn said(&self) -> String {
        match &self.within {
            Some(section) => format!("in {section}"),
            None => "at its end".to_owned(),
        }
    }
}

/// What a client's file is to it: how it reads it, what in it sets what
/// pkgproxy's block sets, and where the block goes.
#[derive(Clone, Copy)]
pub struct Reading {
    /// How the client reads the file.
    pub format: Format,
    /// What the file, read, sets itself of what the block sets; `None`
    /// when nothing.
    pub sets: fn(&Value) -> Option<Own>,
    /// Where the block goes.
    pub place: Place,
}

impl Reading {
    /// Where the block of `settings` (its lines, without marker lines)
    /// goes in the file whose text outside pkgproxy's block is `outside`.
    pub fn placed(&self, outside: &str, settings: &str) -> Placed {
        let at_end = |lines: String| Placed { at: outside.len(), lines, within: None };
        match self.place {
            Place::End => at_end(settings.to_owned()),
            Place::PipSection(name) => match pip_conf::section_end(outside, name) {
                // After a whole line (the script counts lines), or at the
                // end.
                Some(at) if at == outside.len() || outside.as_bytes()[..at].ends_with(b"\n") => {
                    Placed { at, lines: settings.to_owned(), within: Some(format!("its [{name}] section")) }
                }
                _ => at_end(self.alone(settings)),
            },
            Place::XmlList { root, list, .. } => {
                let Some(ends) = settings_xml::ends(outside, list) else {
                    return at_end(self.alone(settings));
                };
                // Where there is no line of its own for it, the block is
                // said to go at the file's end, where it cannot be read:
                // what to add by hand is still said where it goes.
                match ends.list {
                    Some(line) => Placed {
                        at: line.unwrap_or(outside.len()),
                        lines: settings.to_owned(),
                        within: Some(format!("its <{list}>")),
                    },
                    None => Placed {
                        at: ends.root.unwrap_or(outside.len()),
                        lines: xml_list(list, settings),
                        within: Some(format!("its <{root}>")),
                    },
                }
            }
        }
    }

    /// `settings` as a file of their own.
    pub fn alone(&self, settings: &str) -> String {
        match self.place {
            Place::End => settings.to_owned(),
            Place::PipSection(name) => format!("[{name}]\n{settings}"),
            Place::XmlList { root, open, list } => format!("{open}\n{}</{root}>\n", xml_list(list, settings)),
        }
    }

    /// The file holding `outside` with the block `placed` in it, marker
    /// lines included: what the printed script and `--apply` write (a
    /// last line without its newline gets one before a block after it).
    pub fn joined(&self, outside: &str, placed: &Placed) -> String {
        let (before, after) = outside.split_at(placed.at);
        let mut text = before.to_owned();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&self.format.marked(&placed.lines));
        text.push_str(after);
        text
    }

    /// What the file whose text outside pkgproxy's block is `outside`
    /// makes of the block of `settings`, for `client`.
    pub fn fit(&self, client: &str, outside: &str, settings: &str) -> Fit {
        let file = match self.format.read(outside) {
            Ok(file) => file,
            Err(why) => return Fit::Unreadable(format!("{}: {why}", self.format.as_str())),
        };
        match (self.sets)(&file) {
            Some(Own::Setting(what)) => return Fit::SetsItself(what),
            Some(Own::List(what)) => return Fit::ListsItself(what),
            None => {}
        }
        let block = match self.format.read(&self.format.marked(&self.alone(settings))) {
            Ok(block) => block,
            Err(why) => {
                return Fit::WouldBreak(format!(
                    "would not be read: the block itself is not {} ({why})",
                    self.format.as_str()
                ))
            }
        };
        let placed = self.placed(outside, settings);
        let joined = match self.format.read(&self.joined(outside, &placed)) {
            Ok(joined) => joined,
            Err(why) => return Fit::WouldBreak(format!("{} could not be read by {client} ({why})", placed.said())),
        };
        if let Some(path) = unread(&block, &joined) {
            return Fit::WouldBreak(format!("{} would not set {path} as the block does", placed.said()));
        }
        match lost(&file, &joined) {
            Some(path) => Fit::WouldBreak(format!("{} would not read {path} as it is", placed.said())),
            None => Fit::Fits,
        }
    }
}

/// The XML element `list` holding the elements `items` (indented lines),
/// as a child of the root.
fn xml_list(list: &str, items: &str) -> String {
    format!("  <{list}>\n{items}  </{list}>\n")
}

/// The first setting of `block` that `joined` does not hold as `block`
/// does, dotted; `None` when it holds them all. An array of the block
/// must end the joined file's (uv's `[[index]]` adds to the file's).
fn unread(block: &Value, joined: &Value) -> Option<String> {
    match (block, joined) {
        (Value::Object(settings), Value::Object(read)) => {
            settings.iter().find_map(|(key, setting)| match read.get(key) {
                None => Some(key.clone()),
                Some(read) => unread(setting, read).map(|below| dotted(key, &below)),
            })
        }
        (Value::Array(items), Value::Array(read)) => (!read.ends_with(items)).then(String::new),
        (setting, read) => (setting != read).then(String::new),
    }
}

/// The first setting of the user's `file` that `joined` does not hold as
/// the file did, dotted; `None` when it holds them all. An array of the
/// file's must open the joined file's (the block's items follow).
fn lost(file: &Value, joined: &Value) -> Option<String> {
    match (file, joined) {
        (Value::Object(settings), Value::Object(read)) => {
            settings.iter().find_map(|(key, setting)| match read.get(key) {
                None => Some(key.clone()),
                Some(read) => lost(setting, read).map(|below| dotted(key, &below)),
            })
        }
        (Value::Array(items), Value::Array(read)) => (!read.starts_with(items)).then(String::new),
        (setting, read) => (setting != read).then(String::new),
    }
}

/// `key`, then the path `below` it if any.
fn dotted(key: &str, below: &str) -> String {
    if below.is_empty() {
        key.to_owned()
    } else {
        format!("{key}.{below}")
    }
}

#[cfg(test)]
mod tests;
