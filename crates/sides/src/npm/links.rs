//! The tarball links of a document, pointed at pkgproxy as it streams to
//! the client: pnpm and both yarns fetch `dist.tarball` as written, so a
//! link left at the registry would pass pkgproxy by. Documents run to tens
//! of megabytes, so they are never parsed whole: a small JSON lexer follows
//! strings and escapes across chunks, and only the value of a `"tarball"`
//! key is held and replaced. Every other byte passes as it came.

use memchr::memchr2;

use super::name::tarball_of_url;
use crate::StreamRewriter;

/// The host whose tarball links npm moves onto the registry it is pointed
/// at by itself (`replace-registry-host`'s default).
const NPM_REGISTRY_HOST: &str = "registry.npmjs.org";

/// The longest link held for rewriting; a longer one passes as it is.
const LINK_LIMIT: usize = 8 * 1024;

/// Where a document's tarball links point.
#[derive(Debug, Clone)]
pub struct Links {
    /// pkgproxy's registry, as the client reached it (`http://HOST/npm`).
    pub base: String,
    /// Whether links on the npm registry's host are left for the client to
    /// re-home (npm's requests: its lockfile then keeps the registry's
    /// URL).
    pub keep_npm_registry: bool,
}

impl Links {
    /// The link the client gets for `url`; `None`: `url` as it is.
    pub fn served(&self, url: &str) -> Option<String> {
        if self.keep_npm_registry && host_of(url) == Some(NPM_REGISTRY_HOST) {
            return None;
        }
        let tarball = tarball_of_url(url)?;
        Some(format!("{}{}", self.base, tarball.path()))
    }

    /// A rewriter of one document with these links.
    pub fn rewriter(self) -> LinkRewriter {
        LinkRewriter { links: self, state: State::Outside(Expecting::Nothing), key: Vec::new(), link: Vec::new() }
    }

    /// `link` (between its quotes, as a document has it) as the client
    /// gets it.
    fn write_link(&self, link: &[u8], output: &mut Vec<u8>) {
        match std::str::from_utf8(link).ok().filter(|link| !link.contains('\\')).and_then(|link| self.served(link)) {
            Some(served) => output.extend_from_slice(served.as_bytes()),
            None => output.extend_from_slice(link),
        }
    }
}

/// The host of `url`, without port or credentials.
fn host_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let host = authority.rsplit('@').next()?;
    Some(host.split(':').next().unwrap_or(host))
}

/// Where the lexer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between tokens, after what it names.
    Outside(Expecting),
    /// In a string that is not a link (`escaped`: after a backslash).
    InString { escaped: bool },
    /// In a `"tarball"` key's value, held.
    InLink { escaped: bool },
}

/// What the tokens seen so far make of the next string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expecting {
    /// Nothing: it is not a link.
    Nothing,
    /// The last string was the key `"tarball"`: a colon may follow.
    Colon,
    /// `"tarball":` was seen: the next string is a link.
    Link,
}

/// A document's tarball links rewritten as it streams.
#[derive(Debug)]
pub struct LinkRewriter {
    links: Links,
    state: State,
    /// The first bytes of the string being read (enough to tell the key
    /// `tarball`), and its length beyond them.
    key: Vec<u8>,
    /// The link being held, without its quotes.
    link: Vec<u8>,
}

impl LinkRewriter {
    /// The link held, as the client gets it.
    fn flush_link(&mut self, output: &mut Vec<u8>) {
        let link = std::mem::take(&mut self.link);
        self.links.write_link(&link, output);
    }
}

impl StreamRewriter for LinkRewriter {
    fn feed(&mut self, input: &[u8], output: &mut Vec<u8>) {
        output.reserve(input.len());
        let mut at = 0;
        while at < input.len() {
            match self.state {
                State::InString { escaped } => {
                    if escaped {
                        output.push(input[at]);
                        self.note_key(&input[at..=at]);
                        self.state = State::InString { escaped: false };
                        at += 1;
                        continue;
                    }
                    let Some(found) = memchr2(b'"', b'\\', &input[at..]) else {
                        self.note_key(&input[at..]);
                        output.extend_from_slice(&input[at..]);
                        return;
                    };
                    self.note_key(&input[at..at + found]);
                    output.extend_from_slice(&input[at..=at + found]);
                    at += found + 1;
                    self.state = match input[at - 1] {
                        b'\\' => State::InString { escaped: true },
                        _ if self.key == b"tarball" => State::Outside(Expecting::Colon),
                        _ => State::Outside(Expecting::Nothing),
                    };
                }
                State::InLink { escaped } => {
                    if escaped {
                        self.link.push(input[at]);
                        self.state = State::InLink { escaped: false };
                        at += 1;
                        continue;
                    }
                    let Some(found) = memchr2(b'"', b'\\', &input[at..]) else {
                        self.link.extend_from_slice(&input[at..]);
                        self.give_up_if_long(output);
                        return;
                    };
                    self.link.extend_from_slice(&input[at..at + found]);
                    at += found + 1;
                    if input[at - 1] == b'\\' {
                        self.link.push(b'\\');
                        self.state = State::InLink { escaped: true };
                        self.give_up_if_long(output);
                        continue;
                    }
                    self.flush_link(output);
                    output.push(b'"');
                    self.state = State::Outside(Expecting::Nothing);
                }
                State::Outside(expecting) => {
                    let byte = input[at];
                    output.push(byte);
                    at += 1;
                    self.state = match (byte, expecting) {
                        (b'"', Expecting::Link) => State::InLink { escaped: false },
                        (b'"', _) => {
                            self.key.clear();
                            State::InString { escaped: false }
                        }
                        (b':', Expecting::Colon) => State::Outside(Expecting::Link),
                        (b' ' | b'\t' | b'\r' | b'\n', _) => State::Outside(expecting),
                        _ => State::Outside(Expecting::Nothing),
                    };
                }
            }
        }
    }

    fn finish(&mut self, output: &mut Vec<u8>) {
        // A document cut in a link: what was held goes as it came.
        output.append(&mut self.link);
    }
}

impl LinkRewriter {
    /// Keeps the first bytes of a string: enough to tell `tarball` from
    /// any other.
    fn note_key(&mut self, bytes: &[u8]) {
        let room = (b"tarball".len() + 1).saturating_sub(self.key.len());
        self.key.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// A link longer than any tarball's is not one: it passes as it is,
    /// and the rest of the string with it.
    fn give_up_if_long(&mut self, output: &mut Vec<u8>) {
        if self.link.len() > LINK_LIMIT {
            output.append(&mut self.link);
            let escaped = matches!(self.state, State::InLink { escaped: true });
            self.key.clear();
            self.key.extend_from_slice(b"not a key");
            self.state = State::InString { escaped };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links(keep: bool) -> Links {
        Links { base: "http://p:3142/npm".into(), keep_npm_registry: keep }
    }

    fn rewritten(links: Links, document: &str, chunk: usize) -> String {
        let mut rewriter = links.rewriter();
        let mut output = Vec::new();
        for part in document.as_bytes().chunks(chunk) {
            rewriter.feed(part, &mut output);
        }
        rewriter.finish(&mut output);
        String::from_utf8(output).unwrap()
    }

    const DOCUMENT: &str = r#"{"name":"@s/n","readme":"say \"tarball\": \"https://x/n/-/n-1.0.0.tgz\" \\","versions":{"1.0.0":{"dist":{"shasum":"aa","tarball" : "https://registry.npmjs.org/@s/n/-/n-1.0.0.tgz"}},"2.0.0":{"dist":{"tarball":"http://cdn.example:81/@s%2fn/-/n-2.0.0.tgz","integrity":"sha512-x"}}}}"#;

    #[test]
    fn every_tarball_link_points_at_pkgproxy_and_nothing_else_changes_whatever_the_chunks() {
        let expected = DOCUMENT
            .replace("https://registry.npmjs.org/@s/n/-/n-1.0.0.tgz", "http://p:3142/npm/@s/n/-/n-1.0.0.tgz")
            .replace("http://cdn.example:81/@s%2fn/-/n-2.0.0.tgz", "http://p:3142/npm/@s/n/-/n-2.0.0.tgz");
        for chunk in [1, 2, 3, 7, 64, DOCUMENT.len()] {
            assert_eq!(rewritten(links(false), DOCUMENT, chunk), expected, "chunks of {chunk}");
        }
    }

    #[test]
    fn for_npm_the_npm_registry_s_own_links_are_kept() {
        let served = rewritten(links(true), DOCUMENT, 5);
        assert!(served.contains("\"https://registry.npmjs.org/@s/n/-/n-1.0.0.tgz\""), "{served}");
        assert!(served.contains("\"http://p:3142/npm/@s/n/-/n-2.0.0.tgz\""), "{served}");
    }

    #[test]
    fn what_is_not_a_tarball_link_passes_as_it_came() {
        for document in [
            r#"{"tarball":"https://x.example/download/n/1.0.0"}"#,
            r#"{"tarball":["https://x.example/n/-/n-1.0.0.tgz"]}"#,
            r#"{"tarballs":"https://x.example/n/-/n-1.0.0.tgz"}"#,
            r#"{"a":"tarball","b":"https://x.example/n/-/n-1.0.0.tgz"}"#,
            r#"{"tarball":"https:\/\/x.example\/n\/-\/n-1.0.0.tgz"}"#,
            r#"{"tarball":"https://x.example/n/-/n-1.0.0.tgz"#,
        ] {
            assert_eq!(rewritten(links(false), document, 3), document);
        }
        let long = format!(r#"{{"tarball":"{}","x":1}}"#, "a".repeat(LINK_LIMIT * 2));
        assert_eq!(rewritten(links(false), &long, 1000), long);
    }
}
