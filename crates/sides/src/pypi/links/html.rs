//! The links of a page in HTML: each `<a ...>FILE</a` is held, from its
//! `<` to its closing tag's `</a`, and its `href` replaced, the anchors
//! found as [`crate::pypi::page`] finds them (a start tag's quoted `>`
//! skipped); the text between anchors passes as it comes.

use memchr::memchr;

use super::{Links, HELD_LIMIT};
use crate::pypi::page;

/// Where the lexer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between anchors.
    Text,
    /// After a `<`.
    Open,
    /// After `<a`.
    OpenA,
    /// In an anchor's start tag, in a quoted value if `quote`.
    Tag { quote: Option<u8> },
    /// In an anchor's text, `closing` bytes of `</a` read.
    Content { closing: usize },
}

/// The closing tag an anchor's text ends at (its `a` of either case).
const CLOSING: &[u8; 3] = b"</a";

/// An HTML page's file links rewritten as it streams.
#[derive(Debug)]
pub struct HtmlLinks {
    /// Where the page's files are served.
    links: Links,
    /// Where the lexer is.
    state: State,
    /// The anchor being read, from its `<`.
    anchor: Vec<u8>,
    /// Whether it is held (false: it passes as it comes, held longer than
    /// any file's).
    held: bool,
}

impl HtmlLinks {
    /// A rewriter of one page with `links`.
    pub fn new(links: Links) -> HtmlLinks {
        HtmlLinks { links, state: State::Text, anchor: Vec::new(), held: false }
    }

    /// Takes the next bytes of the page, appending what the client gets of
    /// them to `output`.
    pub fn feed(&mut self, input: &[u8], output: &mut Vec<u8>) {
        output.reserve(input.len());
        let mut at = 0;
        while at < input.len() {
            let byte = input[at];
            match self.state {
                State::Text => {
                    let Some(found) = memchr(b'<', &input[at..]) else {
                        output.extend_from_slice(&input[at..]);
                        return;
                    };
                    output.extend_from_slice(&input[at..at + found]);
                    self.anchor.clear();
                    self.anchor.push(b'<');
                    self.held = true;
                    self.state = State::Open;
                    at += found + 1;
                    continue;
                }
                State::Open if byte.eq_ignore_ascii_case(&b'a') => self.state = State::OpenA,
                State::OpenA if byte.is_ascii_whitespace() => self.state = State::Tag { quote: None },
                State::Open | State::OpenA => {
                    // Not an anchor: what was held goes, and this byte is
                    // read again between anchors (it may be a `<`).
                    output.append(&mut self.anchor);
                    self.state = State::Text;
                    continue;
                }
                State::Tag { quote } => {
                    self.state = match (quote, byte) {
                        (None, b'"' | b'\'') => State::Tag { quote: Some(byte) },
                        (Some(open), _) if byte == open => State::Tag { quote: None },
                        (None, b'>') => State::Content { closing: 0 },
                        _ => self.state,
                    }
                }
                State::Content { closing } => {
                    let closing = match byte.eq_ignore_ascii_case(&CLOSING[closing]) {
                        true => closing + 1,
                        false => usize::from(byte == b'<'),
                    };
                    self.state = State::Content { closing };
                    if closing == CLOSING.len() {
                        self.hold(byte, output);
                        self.anchor_ended(output);
                        at += 1;
                        continue;
                    }
                }
            }
            self.hold(byte, output);
            at += 1;
        }
    }

    /// The page ended: what is held goes as it came.
    pub fn finish(&mut self, output: &mut Vec<u8>) {
        output.append(&mut self.anchor);
        self.state = State::Text;
    }

    /// `byte`, of the anchor being read: held, or passed on.
    fn hold(&mut self, byte: u8, output: &mut Vec<u8>) {
        if !self.held {
            output.push(byte);
            return;
        }
        self.anchor.push(byte);
        if self.anchor.len() > HELD_LIMIT {
            output.append(&mut self.anchor);
            self.held = false;
        }
    }

    /// The anchor being read ended (its `</a` read): it goes to the client
    /// with its link rewritten. A page's bytes that are not UTF-8 are read
    /// as the page's parser reads them, and kept when the link is not
    /// rewritten.
    fn anchor_ended(&mut self, output: &mut Vec<u8>) {
        self.state = State::Text;
        if !self.held {
            return;
        }
        let text = String::from_utf8_lossy(&self.anchor);
        let rewritten = page::rewritten_html(&text, &|listed| self.links.served(listed));
        match rewritten == text {
            true => output.extend_from_slice(&self.anchor),
            false => output.extend_from_slice(rewritten.as_bytes()),
        }
        self.anchor.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::rewritten;
    use super::*;

    const SHA: &str = "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd";

    fn served() -> String {
        format!("http://cache.lan:3142/pypi/packages/dd/dd/{}/demo-1.0.tar.gz", &SHA[4..])
    }

    #[test]
    fn anchors_are_found_as_the_page_s_parser_finds_them_whatever_the_chunks() {
        let page = format!(
            "<<a\rhref=\"../demo-1.0.tar.gz#sha256={SHA}\">demo-1.0.tar.gz<</A> <ab href=x>demo-1.0.tar.gz</a> \
             <a title='>' href=\"y#sha256={SHA}\">demo-1.0.tar.gz</abbr><a"
        );
        // The first anchor's text is `demo-1.0.tar.gz<`, no file's name.
        let expected = page.replacen("\"y#", &format!("\"{}#", served()), 1);
        for chunk in [1, 2, 3, 5, page.len()] {
            assert_eq!(String::from_utf8(rewritten(page.as_bytes(), chunk)).unwrap(), expected, "chunks of {chunk}");
        }
    }

    #[test]
    fn an_anchor_never_closed_or_held_too_long_passes_as_it_came() {
        for page in [
            format!("<a href=\"x#sha256={SHA}\">demo-1.0.tar.gz"),
            format!("<a href=\"x#sha256={SHA}\" title=\">demo-1.0.tar.gz</a>"),
            format!("<a title=\"{}\" href=\"x#sha256={SHA}\">demo-1.0.tar.gz</a>", "t".repeat(HELD_LIMIT)),
        ] {
            assert_eq!(rewritten(page.as_bytes(), 7), page.as_bytes());
        }
        let after_a_long_one =
            format!("<a title=\"{}\">x</a><a href=\"x#sha256={SHA}\">demo-1.0.tar.gz</a>", "t".repeat(HELD_LIMIT));
        let out = String::from_utf8(rewritten(after_a_long_one.as_bytes(), 4096)).unwrap();
        assert!(out.ends_with(&format!("<a href=\"{}#sha256={SHA}\">demo-1.0.tar.gz</a>", served())));
    }

    #[test]
    fn bytes_that_are_not_utf_8_are_kept_unless_their_anchor_s_link_is_rewritten() {
        let mut page = b"<p>\xff</p><a href=\"n\" title=\"\xfe\">demo-1.0.tar.gz</a>".to_vec();
        assert_eq!(rewritten(&page, 3), page);
        page.extend_from_slice(format!("<a href=\"x#sha256={SHA}\" title=\"é\">demo-1.0.tar.gz</a>").as_bytes());
        let out = rewritten(&page, 3);
        assert!(out.starts_with(b"<p>\xff</p><a href=\"n\" title=\"\xfe\">"));
        assert!(
            out.ends_with(format!("<a href=\"{}#sha256={SHA}\" title=\"é\">demo-1.0.tar.gz</a>", served()).as_bytes())
        );
    }
}
