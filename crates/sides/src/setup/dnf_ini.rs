//! A dnf `.repo` file (or `dnf.conf`) read as dnf reads it: libdnf's
//! `IniParser` line by line, then its `ConfigParser`'s sections. A line is
//! what ends at `\n`; a comment is a line opening with `#` or `;` in its
//! first column (an indented one is a line of a value); a section header
//! may be indented, and followed by a comment only; `key = value` splits
//! at the first `=`, spaces and tabs around both trimmed, a value in
//! matching quotes unquoted; a value goes on over the indented lines and
//! whitespace-only lines after it, and ends at a comment, an empty line,
//! a line in the first column or a header. A header given twice opens the
//! same section again, and the last of a key given twice wins. A file dnf
//! refuses (and skips, warning) is an error here too, with libdnf's words
//! and line number.
//!
//! Every item keeps the lines it came from, so a setup can change a
//! file's lines and leave the others byte for byte. It reads text only.

use std::ops::Range;

/// What dnf refuses in a file, and on which line (from 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {fault}")]
pub struct IniError {
    /// The line, from 1.
    pub line: usize,
    /// What is wrong with it.
    pub fault: IniFault,
}

/// What libdnf's `IniParser` says of a line it refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IniFault {
    #[error("Missing ']'")]
    MissingBracket,
    #[error("Empty section name")]
    EmptySectionName,
    #[error("Text after section")]
    TextAfterSection,
    #[error("Missing section header")]
    MissingSectionHeader,
    #[error("Illegal continuation line")]
    IllegalContinuationLine,
    #[error("Missing key")]
    MissingKey,
    #[error("Missing '='")]
    MissingEqual,
}

/// What a line, or a run of lines, is to dnf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A section's header: `[name]`.
    Section { name: String, line: usize },
    /// `key = value`, on `lines` (its first line, then the lines of its
    /// value).
    Option { key: String, value: String, lines: Range<usize> },
    /// A comment line.
    Comment { line: usize },
    /// An empty or whitespace-only line outside a value.
    Empty { line: usize },
}

/// A file as dnf reads it: its lines, each with its `\n` if it has one,
/// and what they are.
#[derive(Debug, Clone)]
pub struct Ini<'t> {
    /// The lines, each with its line break.
    pub lines: Vec<&'t str>,
    /// What they are, in their order.
    pub items: Vec<Item>,
}

/// A section as dnf holds it: every run of lines under a header of its
/// name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Its name.
    pub name: String,
    /// Its options, in their order, each with its lines (a key given
    /// twice is there twice: the last is what dnf takes).
    pub options: Vec<(String, String, Range<usize>)>,
    /// Its comment lines, by index.
    pub comments: Vec<usize>,
}

impl Section {
    /// The value dnf takes for `key`: the last given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.options.iter().rev().find(|(name, _, _)| name == key).map(|(_, value, _)| value.as_str())
    }
}

impl<'t> Ini<'t> {
    /// `text` as dnf reads it, or what dnf refuses in it.
    pub fn read(text: &'t str) -> Result<Ini<'t>, IniError> {
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let items = Reader::default().items(&lines)?;
        Ok(Ini { lines, items })
    }

    /// The sections, in the order their names first come, with what
    /// every header of each name holds.
    pub fn sections(&self) -> Vec<Section> {
        let mut sections: Vec<Section> = Vec::new();
        let mut current: Option<usize> = None;
        for item in &self.items {
            match item {
                Item::Section { name, .. } => {
                    let at = sections.iter().position(|section| &section.name == name).unwrap_or_else(|| {
                        sections.push(Section { name: name.clone(), options: Vec::new(), comments: Vec::new() });
                        sections.len() - 1
                    });
                    current = Some(at);
                }
                Item::Option { key, value, lines } => {
                    if let Some(at) = current {
                        sections[at].options.push((key.clone(), value.clone(), lines.clone()));
                    }
                }
                Item::Comment { line } => {
                    if let Some(at) = current {
                        sections[at].comments.push(*line);
                    }
                }
                Item::Empty { .. } => {}
            }
        }
        sections
    }

    /// The section named `name`.
    pub fn section(&self, name: &str) -> Option<Section> {
        self.sections().into_iter().find(|section| section.name == name)
    }
}

/// The characters libdnf trims around a line's content.
const BLANK: &[char] = &[' ', '\t', '\r'];

/// libdnf's `IniParser::next`, over a whole file.
#[derive(Default)]
struct Reader {
    items: Vec<Item>,
    /// Whether a header was read.
    in_section: bool,
    /// The option whose value is being read.
    open: Option<(String, String, Range<usize>)>,
}

impl Reader {
    fn items(mut self, lines: &[&str]) -> Result<Vec<Item>, IniError> {
        for (at, line) in lines.iter().enumerate() {
            let line = line.strip_suffix('\n').unwrap_or(line);
            let line = if at == 0 { line.strip_prefix('\u{feff}').unwrap_or(line) } else { line };
            self.line(at, line).map_err(|fault| IniError { line: at + 1, fault })?;
        }
        self.close();
        Ok(self.items)
    }

    /// Reads the line at `at` (its text without its line break).
    fn line(&mut self, at: usize, line: &str) -> Result<(), IniFault> {
        if line.is_empty() || line.starts_with(['#', ';']) {
            self.close();
            self.items.push(if line.is_empty() { Item::Empty { line: at } } else { Item::Comment { line: at } });
            return Ok(());
        }
        let content = line.trim_matches(BLANK);
        if content.is_empty() {
            match &mut self.open {
                Some((_, value, lines)) => {
                    value.push('\n');
                    lines.end = at + 1;
                }
                None => self.items.push(Item::Empty { line: at }),
            }
            return Ok(());
        }
        let indented = !line.starts_with(content);
        if indented && !content.starts_with('[') {
            let fault =
                if self.in_section { IniFault::IllegalContinuationLine } else { IniFault::MissingSectionHeader };
            let (_, value, lines) = self.open.as_mut().ok_or(fault)?;
            value.push('\n');
            value.push_str(content);
            lines.end = at + 1;
            return Ok(());
        }
        self.close();
        if content.starts_with('[') {
            let name = header(line.trim_start_matches(BLANK))?;
            self.in_section = true;
            self.items.push(Item::Section { name: name.to_owned(), line: at });
            return Ok(());
        }
        if !self.in_section {
            return Err(IniFault::MissingSectionHeader);
        }
        let (key, value) = key_value(line)?;
        self.open = Some((key.to_owned(), value.to_owned(), at..at + 1));
        Ok(())
    }

    /// Ends the value being read, if any.
    fn close(&mut self) {
        if let Some((key, value, lines)) = self.open.take() {
            self.items.push(Item::Option { key, value: trimmed(value), lines });
        }
    }
}

/// The name of the section whose header is `line` (from its `[`): up to
/// the first `]`, after which only blanks, or a comment, may come (libdnf
/// looks at every character but the last).
fn header(line: &str) -> Result<&str, IniFault> {
    let inner = &line[1..];
    let close = inner.find(']').ok_or(IniFault::MissingBracket)?;
    if close == 0 {
        return Err(IniFault::EmptySectionName);
    }
    let after = &inner[close + 1..];
    let last = after.trim_end_matches(BLANK).len().saturating_sub(1);
    for byte in &after.as_bytes()[..last] {
        match byte {
            b'#' | b';' => break,
            b' ' | b'\t' | b'\r' => {}
            _ => return Err(IniFault::TextAfterSection),
        }
    }
    Ok(&inner[..close])
}

/// An option's line split at its first `=`, the key's trailing blanks and
/// the value's surrounding ones trimmed.
fn key_value(line: &str) -> Result<(&str, &str), IniFault> {
    if line.starts_with('=') {
        return Err(IniFault::MissingKey);
    }
    let (key, after) = line.split_once('=').ok_or(IniFault::MissingEqual)?;
    let value = after.trim_start_matches([' ', '\t']);
    // libdnf takes the value from its first character that is not a space
    // or a tab to the line's last that is not blank either: where a `\r`
    // is the first, nothing when it follows the `=`, else the rest.
    let end = value.trim_end_matches(BLANK).len();
    let value = match end {
        0 if value.len() == after.len() => "",
        0 => value,
        end => &value[..end],
    };
    Ok((key.trim_end_matches([' ', '\t']), value))
}

/// A value as libdnf ends it: its trailing line breaks dropped, then
/// unquoted when it is in matching quotes.
fn trimmed(value: String) -> String {
    let value = match value.trim_end_matches('\n') {
        "" => value.as_str(),
        ended => ended,
    };
    let quoted = value.len() > 1
        && (value.starts_with('"') && value.ends_with('"') || value.starts_with('\'') && value.ends_with('\''));
    if quoted {
        value[1..value.len() - 1].to_owned()
    } else {
        value.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::{Ini, IniFault, Item};

    /// Sections as dnf holds them: each name with its options.
    type Sections = Vec<(String, Vec<(String, String)>)>;

    /// `text`'s sections as dnf holds them, the last of a key given twice.
    fn read(text: &str) -> Sections {
        let ini = Ini::read(text).unwrap_or_else(|error| panic!("{text:?}: {error}"));
        let held = |section: &super::Section| {
            let mut options: Vec<(String, String)> = Vec::new();
            for (key, value, _) in &section.options {
                options.retain(|(known, _)| known != key);
                options.push((key.clone(), value.clone()));
            }
            options
        };
        ini.sections().iter().map(|section| (section.name.clone(), held(section))).collect()
    }

    fn pairs(name: &str, options: &[(&str, &str)]) -> (String, Vec<(String, String)>) {
        (name.to_owned(), options.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect())
    }

    #[test]
    fn it_reads_as_libdnf_does() {
        // Each reading is what libdnf 0.69's ConfigParser made of the text.
        let cases: &[(&str, Sections)] = &[
            ("[a]\nbaseurl = http://a/ , http://b/\n", vec![pairs("a", &[("baseurl", "http://a/ , http://b/")])]),
            ("[a] # c\nk=v\n", vec![pairs("a", &[("k", "v")])]),
            ("[a] x\nk=v\n", vec![pairs("a", &[("k", "v")])]),
            ("[a]\nk=v\n  # c\n", vec![pairs("a", &[("k", "v\n# c")])]),
            ("[a]\nk=v\n  [b]\nj=1\n", vec![pairs("a", &[("k", "v")]), pairs("b", &[("j", "1")])]),
            ("[a]\nk=1\n[a]\nj=2\n", vec![pairs("a", &[("k", "1"), ("j", "2")])]),
            ("[a]\nk=1\nk=2\n", vec![pairs("a", &[("k", "2")])]),
            ("[a]\nk=1\r\n  y\r\n", vec![pairs("a", &[("k", "1\ny")])]),
            ("[a]\nk=1\n \n\ty\n", vec![pairs("a", &[("k", "1\n\ny")])]),
            ("[a]\nK = 1\n", vec![pairs("a", &[("K", "1")])]),
            ("[a]\nk=1 ; c\n", vec![pairs("a", &[("k", "1 ; c")])]),
            ("\u{feff}[a]\nk=1\n", vec![pairs("a", &[("k", "1")])]),
            ("[a]\nk=\"q\"\nl='\nm=\n", vec![pairs("a", &[("k", "q"), ("l", "'"), ("m", "")])]),
            ("[ a ]\nk = a=b\n", vec![pairs(" a ", &[("k", "a=b")])]),
            ("# only\n\n; comments\n", vec![]),
        ];
        for (text, expected) in cases {
            assert_eq!(&read(text), expected, "{text:?}");
        }
    }

    #[test]
    fn what_dnf_refuses_is_an_error_with_its_line() {
        for (text, line, fault) in [
            ("[a]\nbaseurl=http://a/\n# c\n   http://b/\n", 4, IniFault::IllegalContinuationLine),
            ("[a]\nk=v\n\n  more\n", 4, IniFault::IllegalContinuationLine),
            ("[a]\n  # c\nk=v\n", 2, IniFault::IllegalContinuationLine),
            ("[a]\n k=1\n", 2, IniFault::IllegalContinuationLine),
            ("[a]\nk\n", 2, IniFault::MissingEqual),
            ("[a]\nk:1\n", 2, IniFault::MissingEqual),
            ("[a]\n=k\n", 2, IniFault::MissingKey),
            ("k=1\n[a]\n", 1, IniFault::MissingSectionHeader),
            ("[]\n", 1, IniFault::EmptySectionName),
            ("[a\n", 1, IniFault::MissingBracket),
            ("[a] xy\n", 1, IniFault::TextAfterSection),
        ] {
            let error = Ini::read(text).unwrap_err();
            assert_eq!((error.line, error.fault), (line, fault), "{text:?}");
        }
    }

    #[test]
    fn each_item_keeps_its_lines() {
        let text = "# top\n[a]\nk = 1\n  2\n \n#c\n\n[b]";
        let ini = Ini::read(text).unwrap();
        assert_eq!(ini.lines.concat(), text);
        assert_eq!(
            ini.items,
            [
                Item::Comment { line: 0 },
                Item::Section { name: "a".to_owned(), line: 1 },
                Item::Option { key: "k".to_owned(), value: "1\n2".to_owned(), lines: 2..5 },
                Item::Comment { line: 5 },
                Item::Empty { line: 6 },
                Item::Section { name: "b".to_owned(), line: 7 },
            ]
        );
        let a = ini.section("a").unwrap();
        assert_eq!((a.get("k"), a.comments.as_slice()), (Some("1\n2"), &[5][..]));
    }
}
