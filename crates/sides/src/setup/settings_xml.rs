//! A Maven `settings.xml` read as Maven reads it, into one tree, and where
//! a list of its root ends. Maven's reader (modello's, over a pull parser
//! that knows no namespaces) wants well-formed XML whose root is
//! `<settings>`; it names each element as written (a prefix included),
//! takes a value's text trimmed, its entities, character references and
//! CDATA resolved and its comments skipped; it refuses an element given
//! twice where it reads one (`Duplicated tag: 'mirrors'`), and reads a list
//! (`<mirrors>`, `<profiles>`, a profile's `<repositories>`, ...) as its
//! items in their order. The tree holds the root's children the same way:
//! a list an array of its items, an element of elements an object, any
//! other its text. A `<mirror>` in a comment or in CDATA is no mirror. It
//! reads text only.

use quick_xml::events::{BytesRef, Event};
use quick_xml::Reader;
use serde_json::{Map, Value};

/// The root element Maven reads.
const ROOT: &str = "settings";

/// Maven's lists, each with the name of its items.
const LISTS: &[(&str, &str)] = &[
    ("mirrors", "mirror"),
    ("servers", "server"),
    ("proxies", "proxy"),
    ("profiles", "profile"),
    ("repositories", "repository"),
    ("pluginRepositories", "pluginRepository"),
    ("activeProfiles", "activeProfile"),
    ("pluginGroups", "pluginGroup"),
];

/// The elements whose content Maven reads free-form (a profile's
/// `<properties>`, a server's `<configuration>`): a name given twice in
/// them is no error, the last one counts.
const FREE_FORM: &[&str] = &["properties", "configuration"];

/// The `settings.xml` `text` as Maven holds it: the root's children; an
/// empty object for a file of blanks, into which pkgproxy's block, a
/// whole document, goes. What Maven refuses, and a root other than
/// `<settings>`, is an error saying where and why.
pub fn read(text: &str) -> Result<Value, String> {
    Ok(parsed(text)?.map_or_else(|| Value::Object(Map::new()), |parsed| parsed.tree))
}

/// Where the lines of the root of a `settings.xml`, and of its list
/// `list`, end: what an element goes after to be the last one in them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ends {
    /// The root's list, if it has one: the start of the line holding its
    /// end tag, when nothing but blanks is before the tag on that line
    /// and after the list's last item, comment or text; `None` when there
    /// is no such line (`<mirrors/>`, `</mirror></mirrors>`).
    pub list: Option<Option<usize>>,
    /// The same for the root's end tag.
    pub root: Option<usize>,
}

/// Where the root of `text`, and its list `list`, end; `None` when Maven
/// cannot read the text, or it has no root.
pub fn ends(text: &str, list: &str) -> Option<Ends> {
    let parsed = parsed(text).ok()??;
    let list = parsed.children.iter().rev().find(|(name, _)| name == list).map(|(_, end)| *end);
    Some(Ends { list, root: parsed.root_end })
}

/// What was read of a file with a root.
struct Parsed {
    /// The root's children.
    tree: Value,
    /// The root's element children, in their order, each with the start
    /// of the line its end tag is alone on ([`Ends::list`]).
    children: Vec<(String, Option<usize>)>,
    /// The same for the root.
    root_end: Option<usize>,
}

/// An element being read.
struct Open {
    /// Its name, as written.
    name: String,
    /// Where its start tag starts.
    start: usize,
    /// The name of its items, when it is a list.
    item: Option<&'static str>,
    /// Whether its children are free-form ([`FREE_FORM`]).
    free: bool,
    /// Its element children read so far, by name.
    children: Map<String, Value>,
    /// Its items, when it is a list.
    items: Vec<Value>,
    /// Its text, references resolved.
    text: String,
    /// Whether it has element children.
    elements: bool,
    /// Where what it holds ends: after its last child, comment or text
    /// other than blanks (after its start tag when none).
    content_end: usize,
}

impl Open {
    fn new(name: String, start: usize, end: usize, parent: Option<&Open>) -> Open {
        let free_parent = parent.is_some_and(|parent| parent.free);
        let item = LISTS.iter().find(|(list, _)| *list == name && !free_parent).map(|(_, item)| *item);
        let free = free_parent || FREE_FORM.contains(&name.as_str());
        Open {
            name,
            start,
            item,
            free,
            children: Map::new(),
            items: Vec::new(),
            text: String::new(),
            elements: false,
            content_end: end,
        }
    }

    /// What Maven reads of it.
    fn value(self) -> Value {
        match (self.item, self.elements) {
            (Some(_), _) => Value::Array(self.items),
            (None, true) => Value::Object(self.children),
            (None, false) => Value::String(self.text.trim_matches(|c: char| c <= ' ').to_owned()),
        }
    }

    /// Takes in its child `name`, read as `value`, whose start tag is at
    /// line `line`; Maven's error for an element it reads once given
    /// twice.
    fn adopt(&mut self, name: String, value: Value, line: usize) -> Result<(), String> {
        self.elements = true;
        match self.item {
            Some(item) if item == name => self.items.push(value),
            // Maven skips what else a list holds.
            Some(_) => {}
            None if !self.free && self.children.contains_key(&name) => {
                return Err(format!("line {line}: Duplicated tag: '{name}'"));
            }
            None => {
                self.children.insert(name, value);
            }
        }
        Ok(())
    }
}

/// The text's line at byte `at`, from 1.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())].iter().filter(|byte| **byte == b'\n').count() + 1
}

/// The start of the last line in `text[from..to]`, blanks only: a line
/// that an element put there is alone on, before what follows `to`.
fn line_in(text: &str, from: usize, to: usize) -> Option<usize> {
    text[from..to].rfind('\n').map(|newline| from + newline + 1)
}

/// The text of the reference `reference` (`&lt;`, `&#38;`), as XML
/// defines it without a DTD.
fn resolved(reference: &BytesRef<'_>) -> Result<char, String> {
    if let Some(character) = reference.resolve_char_ref().map_err(|error| error.to_string())? {
        return Ok(character);
    }
    let name = reference.decode().map_err(|error| error.to_string())?;
    match name.as_ref() {
        "lt" => Ok('<'),
        "gt" => Ok('>'),
        "amp" => Ok('&'),
        "apos" => Ok('\''),
        "quot" => Ok('"'),
        _ => Err(format!("the entity &{name}; is not defined")),
    }
}

/// What has been read of a file so far.
#[derive(Default)]
struct Progress {
    /// The elements open, the root first.
    open: Vec<Open>,
    /// The root's element children closed so far ([`Parsed::children`]).
    children: Vec<(String, Option<usize>)>,
    /// The root once closed: its children, and the start of the line its
    /// end tag is alone on.
    root: Option<(Value, Option<usize>)>,
}

impl Progress {
    /// Takes in `element`, just closed (its end tag at `end_tag`, `None`
    /// for an empty-element tag, the tag ending at `after`): into its
    /// parent, or as the root.
    fn close(&mut self, text: &str, element: Open, end_tag: Option<usize>, after: usize) -> Result<(), String> {
        let alone_on = end_tag.and_then(|end_tag| line_in(text, element.content_end, end_tag));
        let Some(parent) = self.open.last_mut() else {
            let tree = match element.value() {
                Value::String(_) => Value::Object(Map::new()),
                tree => tree,
            };
            self.root = Some((tree, alone_on));
            return Ok(());
        };
        let (name, line) = (element.name.clone(), line_of(text, element.start));
        parent.content_end = after;
        parent.adopt(name.clone(), element.value(), line)?;
        if self.open.len() == 1 {
            self.children.push((name, alone_on));
        }
        Ok(())
    }
}

/// `text` read as Maven reads it; `None` for a file of blanks.
fn parsed(text: &str) -> Result<Option<Parsed>, String> {
    // A byte order mark is no part of the document.
    let bom = if text.starts_with('\u{feff}') { '\u{feff}'.len_utf8() } else { 0 };
    let mut reader = Reader::from_str(&text[bom..]);
    reader.config_mut().check_comments = true;
    let mut read = Progress::default();
    loop {
        let before = bom + reader.buffer_position() as usize;
        let event = reader.read_event().map_err(|error| {
            let at = bom + reader.error_position() as usize;
            format!("line {}: {error}", line_of(text, at))
        })?;
        let after = bom + reader.buffer_position() as usize;
        let at_line = |what: &str| format!("line {}: {what}", line_of(text, before));
        match event {
            Event::Start(ref tag) | Event::Empty(ref tag) => {
                let name = String::from_utf8_lossy(tag.name().as_ref()).into_owned();
                if read.open.is_empty() && read.root.is_some() {
                    return Err(at_line(&format!("a second root element, <{name}>")));
                }
                if read.open.is_empty() && name != ROOT {
                    return Err(at_line(&format!("its root is <{name}>, not <{ROOT}>")));
                }
                for attribute in tag.attributes() {
                    attribute.map_err(|error| at_line(&error.to_string()))?;
                }
                let element = Open::new(name, before, after, read.open.last());
                match event {
                    Event::Start(_) => read.open.push(element),
                    _ => read.close(text, element, None, after)?,
                }
            }
            Event::End(_) => {
                let element = read.open.pop().ok_or_else(|| at_line("an end tag with no start"))?;
                read.close(text, element, Some(before), after)?;
            }
            Event::Text(content) => {
                let content = content.xml10_content().map_err(|error| at_line(&error.to_string()))?;
                let blank = content.trim_matches(|c: char| c <= ' ').is_empty();
                match read.open.last_mut() {
                    Some(element) => {
                        element.text.push_str(&content);
                        if !blank {
                            element.content_end = after;
                        }
                    }
                    None if blank => {}
                    None => return Err(at_line("text outside the root element")),
                }
            }
            Event::GeneralRef(reference) => {
                let character = resolved(&reference).map_err(|why| at_line(&why))?;
                let element = read.open.last_mut().ok_or_else(|| at_line("a reference outside the root element"))?;
                element.text.push(character);
                element.content_end = after;
            }
            Event::CData(content) => {
                let element = read.open.last_mut().ok_or_else(|| at_line("CDATA outside the root element"))?;
                element.text.push_str(&content.decode().map_err(|error| at_line(&error.to_string()))?);
                element.content_end = after;
            }
            Event::Comment(_) | Event::PI(_) => {
                if let Some(element) = read.open.last_mut() {
                    element.content_end = after;
                }
            }
            Event::Decl(_) if before != bom => return Err(at_line("an XML declaration after the file's start")),
            Event::Decl(_) | Event::DocType(_) => {}
            Event::Eof => break,
        }
    }
    if let Some(element) = read.open.last() {
        return Err(format!("line {}: <{}> is not closed", line_of(text, element.start), element.name));
    }
    match read.root {
        Some((tree, root_end)) => Ok(Some(Parsed { tree, children: read.children, root_end })),
        None if text[bom..].trim().is_empty() => Ok(None),
        None => Err(format!("it has no <{ROOT}> element")),
    }
}

#[cfg(test)]
mod tests;
