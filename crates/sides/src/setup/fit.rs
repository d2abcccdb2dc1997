//! Whether pkgproxy's block may go at the end of a user's file, decided on
//! the file as its client reads it ([`Format`]): the client must read the
//! file as it is, the file must not set what the block sets (the client
//! would read it twice and refuse the file, or take one of the two), and
//! the file with the block at its end must read as the block says (a TOML
//! table it cannot extend, an npmrc whose last section would swallow the
//! block's key). A file pkgproxy would make unreadable, or whose setting
//! it would override, is never written. It reads text only.

use serde_json::Value;

use super::reading::Format;

/// What a file of the user's own makes of pkgproxy's block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fit {
    /// The block goes at its end.
    Fits,
    /// The file sets, outside the block, what the block sets (named).
    SetsItself(String),
    /// Its client cannot read the file as it is (why).
    Unreadable(String),
    /// With the block at its end, the file would not be read, or would not
    /// read as the block says (what its client would make of it).
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
            Fit::SetsItself(what) => Some(format!("sets {what} itself")),
            Fit::Unreadable(why) => Some(format!("cannot be read by {client} ({why})")),
            Fit::WouldBreak(how) => Some(format!("with pkgproxy's block at its end {how}")),
        }
    }

    /// Whether what the user adds by hand replaces a setting of their own.
    pub fn replaces_their_own(&self) -> bool {
        matches!(self, Fit::SetsItself(_))
    }
}

/// What a client's file is to it: how it reads it, and what in it sets
/// what pkgproxy's block sets.
#[derive(Clone, Copy)]
pub struct Reading {
    /// How the client reads the file.
    pub format: Format,
    /// What the file, read, sets itself of what the block sets, named;
    /// `None` when nothing.
    pub sets: fn(&Value) -> Option<String>,
}

impl Reading {
    /// What the file whose text outside pkgproxy's block is `outside`
    /// makes of the block `marked` (its marker lines included), for
    /// `client`.
    pub fn fit(&self, client: &str, outside: &str, marked: &str) -> Fit {
        let file = match self.format.read(outside) {
            Ok(file) => file,
            Err(why) => return Fit::Unreadable(format!("{}: {why}", self.format.as_str())),
        };
        if let Some(what) = (self.sets)(&file) {
            return Fit::SetsItself(what);
        }
        let block = match self.format.read(marked) {
            Ok(block) => block,
            Err(why) => {
                return Fit::WouldBreak(format!(
                    "would not be read: the block itself is not {} ({why})",
                    self.format.as_str()
                ))
            }
        };
        match self.format.read(&joined(outside, marked)) {
            Err(why) => Fit::WouldBreak(format!("could not be read by {client} ({why})")),
            Ok(joined) => match unread(&block, &joined) {
                Some(path) => Fit::WouldBreak(format!("would not set {path} as the block does")),
                None => Fit::Fits,
            },
        }
    }
}

/// The file holding `outside`, then `marked`: what the printed script and
/// `--apply` write (a last line without its newline gets one).
pub fn joined(outside: &str, marked: &str) -> String {
    let mut text = outside.to_owned();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(marked);
    text
}

/// The first setting of `block` that `joined` does not hold as `block`
/// does, dotted; `None` when it holds them all. An array of the block
/// must end the joined file's (uv's `[[index]]` adds to the file's).
fn unread(block: &Value, joined: &Value) -> Option<String> {
    match (block, joined) {
        (Value::Object(settings), Value::Object(read)) => {
            settings.iter().find_map(|(key, setting)| match read.get(key) {
                None => Some(key.clone()),
                Some(read) => {
                    unread(setting, read)
                        .map(|below| if below.is_empty() { key.clone() } else { format!("{key}.{below}") })
                }
            })
        }
        (Value::Array(items), Value::Array(read)) => (!read.ends_with(items)).then(String::new),
        (setting, read) => (setting != read).then(String::new),
    }
}

#[cfg(test)]
mod tests;
