//! A `pip.conf` read as pip reads it: Python's `configparser` as pip
//! makes it (`RawConfigParser()`: `=` or `:` between an option and its
//! value, whole-line `#` and `;` comments, values continued on lines
//! indented deeper, a section or an option given twice an error, nothing
//! before the first section), then each section's options with
//! `[DEFAULT]`'s, named as pip names them (lower case, `-` for `_`). A
//! file pip refuses to load is an error here too. Where a section's lines
//! end is known too: options put in after them are the section's. It
//! reads text only.

use std::collections::HashSet;

use serde_json::{Map, Value};

/// The section `configparser` gives every other section's options.
const DEFAULT: &str = "DEFAULT";

/// An option's value, one entry a line.
type Lines = Vec<String>;

/// A section's options, in their order.
type Options = Vec<(String, Lines)>;

/// The `pip.conf` `text` as pip holds it, `{section: {option: value}}`;
/// the error `configparser` would raise, if any.
pub fn read(text: &str) -> Result<Value, String> {
    let Parsed { defaults, sections } = parsed(text)?;
    let mut read = Map::new();
    for SectionRead { name, options, .. } in sections {
        let mut values = Map::new();
        for (option, lines) in defaults.iter().chain(&options) {
            values.insert(pip_name(option), Value::String(lines.join("\n").trim_end_matches(py_space).to_owned()));
        }
        read.insert(name, Value::Object(values));
    }
    Ok(Value::Object(read))
}

/// Where the last line `configparser` reads into the section `name` of
/// `text` ends (its header, an option, or a line of a value), in bytes,
/// its line break included; `None` when the text has no such section, or
/// pip refuses it. Blank lines and comments after it are no part of it.
pub fn section_end(text: &str, name: &str) -> Option<usize> {
    let Parsed { sections, .. } = parsed(text).ok()?;
    sections.into_iter().find(|section| section.name == name).map(|section| section.end)
}

/// What `configparser` read.
struct Parsed {
    /// `[DEFAULT]`'s options.
    defaults: Options,
    /// The other sections, in their order.
    sections: Vec<SectionRead>,
}

/// A section `configparser` read.
struct SectionRead {
    /// Its name, as its header spells it.
    name: String,
    /// Its own options, in their order.
    options: Options,
    /// Where its last line ends ([`section_end`]).
    end: usize,
}

/// Where the lines being read go.
#[derive(Clone, PartialEq, Eq)]
enum Section {
    Default,
    /// The n-th of [`Parsed::sections`].
    Nth(usize),
}

/// `configparser`'s `_read`, line by line.
fn parsed(text: &str) -> Result<Parsed, String> {
    let mut parsed = Parsed { defaults: Vec::new(), sections: Vec::new() };
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut current: Option<(Section, String)> = None;
    // The option being read (its index among the section's), and the
    // indent of the line that opened it.
    let mut option: Option<usize> = None;
    let mut indent = 0;
    let mut bad_lines = Vec::new();
    for (number, (line, end)) in universal_lines(text).enumerate() {
        let number = number + 1;
        let stripped = line.trim_matches(py_space);
        let comment = stripped.starts_with(['#', ';']);
        let value = if comment { "" } else { stripped };
        if value.is_empty() {
            // A blank line belongs to the value being read.
            if let (false, Some((section, _)), Some(at)) = (comment, &current, option) {
                options_of(&mut parsed, section)[at].1.push(String::new());
            }
            continue;
        }
        let line_indent = line.chars().take_while(|c| py_space(*c)).count();
        if let (Some((section, _)), Some(at)) = (&current, option) {
            if line_indent > indent {
                options_of(&mut parsed, section)[at].1.push(value.to_owned());
                ended(&mut parsed, section, end);
                continue;
            }
        }
        indent = line_indent;
        if let Some(name) = section_header(value) {
            if seen.contains(&(name.to_owned(), String::new())) {
                return Err(format!("line {number}: section [{name}] given twice"));
            }
            let section = if name == DEFAULT {
                Section::Default
            } else {
                seen.insert((name.to_owned(), String::new()));
                parsed.sections.push(SectionRead { name: name.to_owned(), options: Vec::new(), end });
                Section::Nth(parsed.sections.len() - 1)
            };
            current = Some((section, name.to_owned()));
            option = None;
            continue;
        }
        let Some((section, section_name)) = &current else {
            return Err(format!("line {number}: no section header before it"));
        };
        let Some((name, first)) = option_line(value) else {
            bad_lines.push(number);
            continue;
        };
        if name.is_empty() {
            bad_lines.push(number);
        }
        let name = name.to_lowercase();
        if !seen.insert((section_name.clone(), name.clone())) {
            return Err(format!("line {number}: option {name} given twice in [{section_name}]"));
        }
        let options = options_of(&mut parsed, section);
        options.push((name, vec![first.to_owned()]));
        option = Some(options.len() - 1);
        ended(&mut parsed, section, end);
    }
    match bad_lines.as_slice() {
        [] => Ok(parsed),
        [number, ..] => Err(format!("line {number}: neither a section, an option nor a comment")),
    }
}

fn options_of<'a>(parsed: &'a mut Parsed, section: &Section) -> &'a mut Options {
    match section {
        Section::Default => &mut parsed.defaults,
        Section::Nth(at) => &mut parsed.sections[*at].options,
    }
}

/// Notes that a line of `section` ends at `end`.
fn ended(parsed: &mut Parsed, section: &Section, end: usize) {
    if let Section::Nth(at) = section {
        parsed.sections[*at].end = end;
    }
}

/// The lines of `text` as Python reads a file in text mode (`\n`, `\r\n`
/// and `\r` each end one), each with where it ends in `text`, its line
/// break included.
fn universal_lines(text: &str) -> impl Iterator<Item = (&str, usize)> {
    let mut start = 0;
    std::iter::from_fn(move || {
        let rest = &text[start..];
        if rest.is_empty() {
            return None;
        }
        let (line, ending) = match rest.find(['\r', '\n']) {
            Some(at) if rest[at..].starts_with("\r\n") => (&rest[..at], at + 2),
            Some(at) => (&rest[..at], at + 1),
            None => (rest, rest.len()),
        };
        start += ending;
        Some((line, start))
    })
}

/// The name of a section a (stripped) line opens: `[` and the last `]`
/// around at least one character (what follows that `]` is ignored).
fn section_header(value: &str) -> Option<&str> {
    let inner = value.strip_prefix('[')?;
    let end = inner.rfind(']')?;
    Some(&inner[..end]).filter(|name| !name.is_empty())
}

/// An option line's name and value, split at its first `=` or `:`.
fn option_line(value: &str) -> Option<(&str, &str)> {
    let at = value.find(['=', ':'])?;
    Some((value[..at].trim_end_matches(py_space), value[at + 1..].trim_matches(py_space)))
}

/// An option's name as pip names it.
fn pip_name(option: &str) -> String {
    let name = option.to_lowercase().replace('_', "-");
    name.strip_prefix("--").map_or(name.clone(), str::to_owned)
}

/// Whether Python takes `c` for a space (`str.isspace`, `\s`).
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::read;

    #[test]
    fn it_reads_as_configparser_does() {
        // Each reading is what Python 3.11's configparser made of the text.
        let read = |text: &str| read(text).unwrap();
        assert_eq!(
            read("[global]\nindex-url = x\n  y\n\n  z\nother: q\n"),
            json!({"global": {"index-url": "x\ny\n\nz", "other": "q"}})
        );
        assert_eq!(read("[ global ]\na=1\n"), json!({" global ": {"a": "1"}}));
        assert_eq!(read("[global] junk\na=1\n"), json!({"global": {"a": "1"}}));
        assert_eq!(read("[a]]\nb=1\n"), json!({"a]": {"b": "1"}}));
        assert_eq!(read("[DEFAULT]\nx=1\n[global]\ny=2\n"), json!({"global": {"x": "1", "y": "2"}}));
        assert_eq!(read("[g]\nA_b = 1\n"), json!({"g": {"a-b": "1"}}), "pip's name for it");
        assert_eq!(read("[g]\na=1\n\tb=2\n"), json!({"g": {"a": "1\nb=2"}}));
        assert_eq!(read("[g]\na = 1 # c\n"), json!({"g": {"a": "1 # c"}}), "no comment after a value");
        assert_eq!(read("[g]\r\na=1\rb=2\n"), json!({"g": {"a": "1", "b": "2"}}));
        assert_eq!(read("[g]\na=1\n\u{1c}b=2\n"), json!({"g": {"a": "1\nb=2"}}));
        assert_eq!(read("# only\n\n; comments\n"), json!({}));
        assert_eq!(read("[DEFAULT]\na=1\n[DEFAULT]\nb=2\n[g]\n"), json!({"g": {"a": "1", "b": "2"}}));
    }

    #[test]
    fn a_section_ends_with_its_last_option_or_line_of_a_value() {
        let text = "[global]\ncert = a\n  b\n\n# next\n[install]\r\nx = 1\r\n\r\n";
        assert_eq!(super::section_end(text, "global"), Some(text.find("\n\n#").unwrap() + 1));
        assert_eq!(super::section_end(text, "install"), Some(text.len() - 2));
        assert_eq!(super::section_end("[global]", "global"), Some(8));
        assert_eq!(super::section_end("[install]\n", "global"), None);
        assert_eq!(super::section_end("[global]\n[global]\n", "global"), None, "pip refuses it");
    }

    #[test]
    fn what_pip_refuses_to_load_is_an_error() {
        for text in [
            "\u{feff}[global]\n",
            "index-url = x\n",
            "[g]\n=1\n",
            "[g]\nnovalue\n",
            "[g]\na=1\n[g]\n",
            "[g]\na=1\nA = 2\n",
        ] {
            assert!(read(text).is_err(), "{text:?}");
        }
    }
}
