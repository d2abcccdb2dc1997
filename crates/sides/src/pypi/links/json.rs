//! The links of a page in PEP 691's JSON form: each `files[]` entry of the
//! top object is held, from its `{` to its `}`, and its `url` replaced;
//! the lexer only follows strings, escapes and nesting, so a page costs
//! one pass however large it is.

use std::ops::Range;

use memchr::memchr2;

use super::{Links, HELD_LIMIT};
use crate::pypi::page::Listed;

/// What the top object reads next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Top {
    /// A key (after `{` or `,`).
    Key,
    /// The colon after a key.
    Colon,
    /// A key's value.
    Value,
    /// A comma, or the end (after a value).
    Comma,
}

/// What is done with a file entry of `files`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// None is being read.
    None,
    /// One is being read and held.
    Held,
    /// One is being read, passed as it comes (held longer than any file's).
    Passing,
}

/// A JSON page's file links rewritten as it streams.
#[derive(Debug)]
pub struct JsonLinks {
    /// Where the page's files are served.
    links: Links,
    /// How many arrays and objects are open.
    depth: usize,
    /// Whether the lexer is in a string.
    in_string: bool,
    /// Whether it is just after a backslash in one.
    escaped: bool,
    /// Whether the page is an object (what has `files`).
    top_is_object: bool,
    /// What the top object reads next.
    top: Top,
    /// Whether the string being read is a key of the top object.
    in_key: bool,
    /// The first bytes of the top object's last key: enough to tell
    /// `files` from any other.
    key: Vec<u8>,
    /// Whether the top object's `files` array is open.
    in_files: bool,
    /// What is done with the file entry being read.
    entry: Entry,
    /// What is held of it, from its `{`.
    held: Vec<u8>,
}

impl JsonLinks {
    /// A rewriter of one page with `links`.
    pub fn new(links: Links) -> JsonLinks {
        JsonLinks {
            links,
            depth: 0,
            in_string: false,
            escaped: false,
            top_is_object: false,
            top: Top::Key,
            in_key: false,
            key: Vec::new(),
            in_files: false,
            entry: Entry::None,
            held: Vec::new(),
        }
    }

    /// Takes the next bytes of the page, appending what the client gets of
    /// them to `output`.
    pub fn feed(&mut self, input: &[u8], output: &mut Vec<u8>) {
        output.reserve(input.len());
        let mut at = 0;
        while at < input.len() {
            if self.in_string && !self.escaped {
                // A run of a string's own bytes, up to its quote or a
                // backslash.
                let run = memchr2(b'"', b'\\', &input[at..]).unwrap_or(input.len() - at);
                self.pass(&input[at..at + run], output);
                at += run;
                if at == input.len() {
                    break;
                }
            }
            self.step(input[at], output);
            at += 1;
        }
    }

    /// The page ended: what is held goes as it came (a page cut in a file
    /// entry).
    pub fn finish(&mut self, output: &mut Vec<u8>) {
        output.append(&mut self.held);
        self.entry = Entry::None;
    }

    /// One byte: a string's quote or escape, or one between tokens.
    fn step(&mut self, byte: u8, output: &mut Vec<u8>) {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.in_string = false;
                if std::mem::take(&mut self.in_key) {
                    self.top = Top::Colon;
                }
                self.pass(&[byte], output);
                return;
            }
            self.pass(&[byte], output);
            return;
        }
        let at_top = self.depth == 1 && self.top_is_object;
        match byte {
            b'"' => {
                self.in_string = true;
                if at_top && self.top == Top::Key {
                    self.pass(&[byte], output);
                    // What follows the quote is the key.
                    self.in_key = true;
                    self.key.clear();
                    return;
                }
                self.value_started(at_top);
            }
            b'{' | b'[' => {
                if self.depth == 0 {
                    self.top_is_object = byte == b'{';
                    self.top = Top::Key;
                } else if at_top {
                    self.in_files = byte == b'[' && self.top == Top::Value && self.key == b"files";
                    self.top = Top::Comma;
                } else if self.depth == 2 && self.in_files && byte == b'{' && self.entry == Entry::None {
                    self.entry = Entry::Held;
                }
                self.depth += 1;
            }
            b'}' | b']' => {
                self.depth = self.depth.saturating_sub(1);
                self.pass(&[byte], output);
                match self.depth {
                    2 if self.entry != Entry::None => self.entry_ended(output),
                    1 => self.in_files = false,
                    _ => {}
                }
                return;
            }
            b':' if at_top && self.top == Top::Colon => self.top = Top::Value,
            b',' if at_top => self.top = Top::Key,
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => self.value_started(at_top),
        }
        self.pass(&[byte], output);
    }

    /// A value of the top object's began (a string or a scalar).
    fn value_started(&mut self, at_top: bool) {
        if at_top && self.top == Top::Value {
            self.top = Top::Comma;
        }
    }

    /// `bytes`, read: held with the file entry being read, or passed on.
    fn pass(&mut self, bytes: &[u8], output: &mut Vec<u8>) {
        if self.in_key {
            let room = (b"files".len() + 1).saturating_sub(self.key.len());
            self.key.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
        match self.entry {
            Entry::Held => {
                self.held.extend_from_slice(bytes);
                if self.held.len() > HELD_LIMIT {
                    output.append(&mut self.held);
                    self.entry = Entry::Passing;
                }
            }
            Entry::None | Entry::Passing => output.extend_from_slice(bytes),
        }
    }

    /// The file entry being read ended (its `}` read): it goes to the
    /// client with its link rewritten.
    fn entry_ended(&mut self, output: &mut Vec<u8>) {
        if self.entry == Entry::Held {
            let rewritten = rewritten_entry(&self.held, &self.links);
            output.extend_from_slice(rewritten.as_deref().unwrap_or(&self.held));
            self.held.clear();
        }
        self.entry = Entry::None;
    }
}

/// `entry`, a file entry (an object, whole), with its `url` as `links`
/// serve it; `None`: as it is.
fn rewritten_entry(entry: &[u8], links: &Links) -> Option<Vec<u8>> {
    let members = members(entry)?;
    // A key given twice is read as JSON readers do: its last value.
    let value = |name: &str| members.iter().rev().find(|(key, _)| key == name).map(|(_, range)| range.clone());
    let text = |range: Range<usize>| serde_json::from_slice::<String>(&entry[range]).ok();
    let url_at = value("url")?;
    let hashes = value("hashes").and_then(|range| serde_json::from_slice::<serde_json::Value>(&entry[range]).ok());
    let listed = Listed {
        filename: text(value("filename")?)?,
        url: text(url_at.clone())?,
        sha256: hashes.as_ref().and_then(|hashes| hashes.get("sha256")?.as_str().map(str::to_owned)),
        metadata_sha256: None,
    };
    let served = serde_json::to_string(&links.served(&listed)?).ok()?;
    let mut rewritten = Vec::with_capacity(entry.len() + served.len());
    rewritten.extend_from_slice(&entry[..url_at.start]);
    rewritten.extend_from_slice(served.as_bytes());
    rewritten.extend_from_slice(&entry[url_at.end..]);
    Some(rewritten)
}

/// The members of `object` (an object's text, whole): each key, and where
/// its value's text is. `None` when it is not one.
fn members(object: &[u8]) -> Option<Vec<(String, Range<usize>)>> {
    let mut found = Vec::new();
    let mut at = skip_space(object, 1);
    if object.first() != Some(&b'{') {
        return None;
    }
    if object.get(at) == Some(&b'}') {
        return Some(found);
    }
    loop {
        let key_end = string_end(object, at)?;
        let key = serde_json::from_slice::<String>(&object[at..key_end]).ok()?;
        at = skip_space(object, key_end);
        if object.get(at) != Some(&b':') {
            return None;
        }
        let value_at = skip_space(object, at + 1);
        let value_end = value_end(object, value_at)?;
        found.push((key, value_at..value_end));
        at = skip_space(object, value_end);
        match object.get(at) {
            Some(b',') => at = skip_space(object, at + 1),
            Some(b'}') => return Some(found),
            _ => return None,
        }
    }
}

/// Where the white space from `at` ends.
fn skip_space(text: &[u8], mut at: usize) -> usize {
    while text.get(at).is_some_and(|byte| matches!(byte, b' ' | b'\t' | b'\r' | b'\n')) {
        at += 1;
    }
    at
}

/// Where the string whose quote is at `at` ends (after its closing quote).
fn string_end(text: &[u8], at: usize) -> Option<usize> {
    if text.get(at) != Some(&b'"') {
        return None;
    }
    let mut at = at + 1;
    loop {
        at += memchr2(b'"', b'\\', text.get(at..)?)?;
        match text[at] {
            b'\\' => at += 2,
            _ => return Some(at + 1),
        }
    }
}

/// Where the value starting at `at` ends.
fn value_end(text: &[u8], at: usize) -> Option<usize> {
    match text.get(at)? {
        b'"' => string_end(text, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut at = at;
            loop {
                match text.get(at)? {
                    b'"' => {
                        at = string_end(text, at)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        _ => {
            let length = text[at..].iter().position(|byte| b",}] \t\r\n".contains(byte)).unwrap_or(text.len() - at);
            (length > 0).then_some(at + length)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::rewritten;
    use super::*;

    const SHA: &str = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

    fn entry(url: &str) -> String {
        format!(r#"{{"filename":"demo-1.0.tar.gz","url":{url},"hashes":{{"sha256":"{SHA}"}}}}"#)
    }

    #[test]
    fn an_entry_s_members_are_found_whatever_their_spacing_and_escapes() {
        let object = br#"{ "a\"b" : [1, {"c": "]}"}] , "url":"x\\" ,"n":-1.5e3,"t":true}"#;
        let found = members(object).unwrap();
        let keys: Vec<_> = found.iter().map(|(key, _)| key.as_str()).collect();
        assert_eq!(keys, ["a\"b", "url", "n", "t"]);
        assert_eq!(&object[found[1].1.clone()], br#""x\\""#);
        assert_eq!(&object[found[2].1.clone()], b"-1.5e3");
        for broken in [&b"{"[..], b"{\"a\"}", b"{\"a\":}", b"{\"a\":1", b"[1]", b"{\"a\":1,}"] {
            assert_eq!(members(broken), None, "{}", String::from_utf8_lossy(broken));
        }
        assert_eq!(members(b"{ }"), Some(Vec::new()));
    }

    #[test]
    fn only_the_top_object_s_files_have_their_urls_rewritten() {
        let served = format!("\"http://cache.lan:3142/pypi/packages/cc/cc/{}/demo-1.0.tar.gz\"", &SHA[4..]);
        let file = entry("\"https://f.example/demo-1.0.tar.gz\"");
        let page = format!(r#"{{"x":{{"files":[{file}]}},"files":[{file}],"y":[{file}]}}"#);
        let out = String::from_utf8(rewritten(page.as_bytes(), 3)).unwrap();
        let expected = format!(r#"{{"x":{{"files":[{file}]}},"files":[{}],"y":[{file}]}}"#, entry(&served));
        assert_eq!(out, expected);
        // A URL written with escapes is read as JSON reads it.
        let escaped = format!(r#"{{"files":[{}]}}"#, entry(r#""https:\/\/f.example\/demo-1.0.tar.gz""#));
        let out = String::from_utf8(rewritten(escaped.as_bytes(), 2)).unwrap();
        assert_eq!(out, format!(r#"{{"files":[{}]}}"#, entry(&served)));
    }

    #[test]
    fn what_cannot_be_rewritten_passes_as_it_came() {
        for page in [
            format!(r#"{{"files":[{}]}}"#, entry("[\"https://f.example/demo-1.0.tar.gz\"]")),
            r#"{"files":[{"filename":"demo-1.0.tar.gz","url":"https://f.example/demo-1.0.tar.gz"}]}"#.to_owned(),
            format!(r#"{{"files":{}}}"#, entry("\"https://f.example/demo-1.0.tar.gz\"")),
            format!(r#"[{{"files":[{}]}}]"#, entry("\"https://f.example/demo-1.0.tar.gz\"")),
            format!(r#"{{"files":[{}"#, &entry("\"https://f.example/demo-1.0.tar.gz\"")[..40]),
            format!(r#"{{"files":[{}, {{"url": "y", "size": 1e99999}}]}}"#, "{}"),
        ] {
            assert_eq!(String::from_utf8(rewritten(page.as_bytes(), 4)).unwrap(), page);
        }
        let long = format!(r#"{{"files":[{{"x":"{}",{}]}}"#, "a".repeat(HELD_LIMIT), &entry("\"u\"")[1..]);
        assert_eq!(rewritten(long.as_bytes(), 1000), long.as_bytes());
    }

    #[test]
    fn a_file_entry_after_a_long_one_is_rewritten_again() {
        let long = format!(
            r#"{{"files":[{{"x":"{}"}},{}]}}"#,
            "a".repeat(HELD_LIMIT + 10),
            entry("\"https://f.example/demo-1.0.tar.gz\"")
        );
        let out = String::from_utf8(rewritten(long.as_bytes(), 4096)).unwrap();
        assert!(out.contains("\"url\":\"http://cache.lan:3142/pypi/packages/cc/cc/"), "{}", &out[out.len() - 300..]);
    }
}
