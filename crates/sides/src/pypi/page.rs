//! A project's page of the simple API, in its two forms: HTML (PEP 503:
//! an `<a href="URL#sha256=HEX" data-...>FILE</a>` per file) and JSON (PEP
//! 691: `files[]` with `url`, `hashes`, `core-metadata`, ...). What pkgproxy
//! reads of one (each file's URL and hashes, the page's serial), and an
//! HTML anchor as a client gets it, its URL pointing at pkgproxy and
//! everything else as the index wrote it (whole pages stream through the
//! side's link rewriter, which hands it each anchor).
//!
//! The anchors are found by a small scan of their own, not by an HTML
//! parser such as Cloudflare's `lol_html` (a streaming rewriter), because:
//! - where a file's link is served depends on the anchor's text (the file's
//!   name, checked against its URL), which comes after the start tag;
//!   `lol_html`'s element handlers run at the start tag and send it on
//!   before the text is read, so the anchor would be held anyway, as
//!   the side's link rewriter holds it;
//! - every byte the index wrote passes as it came, bytes that are not
//!   UTF-8 included, where `lol_html` decodes the page in one encoding and
//!   writes a changed tag anew;
//! - the streaming rewriter finds the anchors this scan finds, across any
//!   chunks (an `<a ` start tag, a quoted `>` skipped, the text up to the
//!   next `</a`), which an HTML5 tokenizer does not (its tests pin the
//!   cases);
//! - it would add 20 packages to the lock (`cssparser`, `selectors`,
//!   `phf`'s macros, ...) for the hundred lines here.
//!
//! Character references are `html-escape`'s, every one HTML names.

/// PEP 691's JSON form.
pub const JSON: &str = "application/vnd.pypi.simple.v1+json";
/// PEP 691's HTML form.
pub const HTML: &str = "application/vnd.pypi.simple.v1+html";

/// Which form of a page a client gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// PEP 691's JSON.
    Json,
    /// HTML (PEP 503, or PEP 691's HTML type).
    Html,
}

impl Form {
    /// The form `accept` (a client's `Accept`) prefers: JSON when it takes
    /// JSON at least as gladly as any HTML; HTML otherwise, and when it
    /// says nothing (every installer takes `text/html`).
    pub fn chosen(accept: Option<&str>) -> Form {
        let Some(accept) = accept else { return Form::Html };
        let json = crate::accept::weight(accept, &[JSON, "application/vnd.pypi.simple.latest+json"]);
        let html =
            crate::accept::weight(accept, &[HTML, "application/vnd.pypi.simple.latest+html", "text/html", "*/*"]);
        if json > 0.0 && json >= html {
            Form::Json
        } else {
            Form::Html
        }
    }

    /// The form a request asks for: PEP 691's `format` query parameter
    /// when it names one (what `check` and `warm` ask by, having no
    /// `Accept`), else by `accept`.
    pub fn asked(query: Option<&str>, accept: Option<&str>) -> Form {
        let format = query.into_iter().flat_map(|query| query.split('&')).find_map(|pair| {
            let value = pair.strip_prefix("format=")?;
            Some(percent_encoding::percent_decode_str(value).decode_utf8_lossy().into_owned())
        });
        match format {
            Some(format) => Form::chosen(Some(&format)),
            None => Form::chosen(accept),
        }
    }

    /// The query that asks for this form (`format`, PEP 691).
    pub fn query(self) -> &'static str {
        match self {
            Form::Json => "format=application/vnd.pypi.simple.v1%2Bjson",
            Form::Html => "format=application/vnd.pypi.simple.v1%2Bhtml",
        }
    }

    /// Its name in cache keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Json => "json",
            Form::Html => "html",
        }
    }

    /// What the upstream is asked for.
    pub fn accept(self) -> &'static str {
        match self {
            Form::Json => {
                "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
            }
            Form::Html => "application/vnd.pypi.simple.v1+html, text/html;q=0.5",
        }
    }
}

/// A file a page lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its name.
    pub filename: String,
    /// Its URL, as the page gives it (absolute, or relative to the page).
    pub url: String,
    /// Its SHA-256, when the page gives it.
    pub sha256: Option<String>,
    /// Its core metadata's SHA-256, when the page advertises core
    /// metadata with a hash.
    pub metadata_sha256: Option<String>,
}

/// What pkgproxy reads of a page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Page {
    /// Its files.
    pub files: Vec<Listed>,
    /// Its serial (`_last-serial`, or the `<!--SERIAL N-->` comment), a
    /// change counter: a page of an older serial is an older page.
    pub serial: Option<u64>,
}

/// `body`, a page in either form.
pub fn parse(body: &[u8]) -> Option<Page> {
    match body.trim_ascii_start().first() {
        Some(b'{') => parse_json(body),
        Some(_) => Some(parse_html(&String::from_utf8_lossy(body))),
        None => None,
    }
}

fn parse_json(body: &[u8]) -> Option<Page> {
    let page: serde_json::Value = serde_json::from_slice(body).ok()?;
    let text = |value: &serde_json::Value| value.as_str().map(str::to_owned);
    let files = page.get("files")?.as_array()?;
    let files = files
        .iter()
        .filter_map(|file| {
            let metadata = file.get("core-metadata").or_else(|| file.get("dist-info-metadata"));
            Some(Listed {
                filename: text(file.get("filename")?)?,
                url: text(file.get("url")?)?,
                sha256: file.pointer("/hashes/sha256").and_then(text),
                metadata_sha256: metadata.and_then(|metadata| metadata.get("sha256")).and_then(text),
            })
        })
        .collect();
    let serial = page.pointer("/meta/_last-serial").and_then(serde_json::Value::as_u64);
    Some(Page { files, serial })
}

fn parse_html(html: &str) -> Page {
    let files = anchors(html).iter().filter_map(listed).collect();
    let serial = html.rfind("<!--SERIAL ").and_then(|at| {
        let rest = &html[at + "<!--SERIAL ".len()..];
        rest.split("-->").next()?.trim().parse().ok()
    });
    Page { files, serial }
}

/// The file an `<a>` links to.
fn listed(anchor: &Anchor<'_>) -> Option<Listed> {
    let href = anchor.attribute("href")?;
    let (url, fragment) = href.split_once('#').unwrap_or((&href, ""));
    let sha256 = fragment.strip_prefix("sha256=").map(str::to_owned);
    let metadata = anchor.attribute("data-core-metadata").or_else(|| anchor.attribute("data-dist-info-metadata"));
    let metadata_sha256 = metadata.and_then(|value| value.strip_prefix("sha256=").map(str::to_owned));
    Some(Listed {
        filename: html_escape::decode_html_entities(anchor.text.trim()).into_owned(),
        url: url.to_owned(),
        sha256,
        metadata_sha256,
    })
}

/// An `<a>` element of a page: where its start tag is, its attributes'
/// text, and its link text.
struct Anchor<'h> {
    /// The start tag's attributes, as written (`href="..." data-...`).
    attributes: &'h str,
    /// Where the attributes start in the page.
    attributes_at: usize,
    /// The link text.
    text: &'h str,
}

impl Anchor<'_> {
    /// The value of attribute `name`, unescaped (an attribute without a
    /// value is the empty string).
    fn attribute(&self, name: &str) -> Option<String> {
        attributes(self.attributes)
            .into_iter()
            .find(|attribute| attribute.name.eq_ignore_ascii_case(name))
            .map(|attribute| html_escape::decode_html_entities(attribute.value.unwrap_or_default()).into_owned())
    }
}

/// The `<a ...>text</a>` elements of `html`.
fn anchors(html: &str) -> Vec<Anchor<'_>> {
    let lower = html.to_ascii_lowercase();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = lower[from..].find("<a").map(|at| from + at) {
        from = at + 2;
        if !lower[from..].starts_with(|c: char| c.is_ascii_whitespace()) {
            continue;
        }
        let Some(end) = tag_end(html, from) else { break };
        let Some(close) = lower[end..].find("</a").map(|close| end + close) else { break };
        found.push(Anchor { attributes: &html[from..end - 1], attributes_at: from, text: &html[end..close] });
        from = close;
    }
    found
}

/// Where the tag whose attributes start at `from` ends (after its `>`),
/// quoted `>` skipped.
fn tag_end(html: &str, from: usize) -> Option<usize> {
    let mut quote = None;
    for (offset, c) in html[from..].char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(open), c) if c == open => quote = None,
            (None, '>') => return Some(from + offset + 1),
            _ => {}
        }
    }
    None
}

/// An attribute of a start tag.
struct Attribute<'t> {
    /// Its name.
    name: &'t str,
    /// Where its name ends within the tag's attributes.
    name_end: usize,
    /// Its value (`None`: none given).
    value: Option<&'t str>,
    /// Where the value's text is within the tag's attributes.
    value_at: Option<std::ops::Range<usize>>,
}

/// The attributes of a start tag.
fn attributes(text: &str) -> Vec<Attribute<'_>> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        while at < bytes.len() && (bytes[at].is_ascii_whitespace() || bytes[at] == b'/') {
            at += 1;
        }
        let start = at;
        while at < bytes.len() && !bytes[at].is_ascii_whitespace() && bytes[at] != b'=' && bytes[at] != b'/' {
            at += 1;
        }
        if start == at {
            break;
        }
        let name = &text[start..at];
        let name_end = at;
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        if at >= bytes.len() || bytes[at] != b'=' {
            found.push(Attribute { name, name_end, value: None, value_at: None });
            continue;
        }
        at += 1;
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        let (value_start, value_end) = match bytes.get(at) {
            Some(&quote @ (b'"' | b'\'')) => {
                let end = text[at + 1..].find(quote as char).map_or(bytes.len(), |end| at + 1 + end);
                let range = (at + 1, end);
                at = (end + 1).min(bytes.len());
                range
            }
            _ => {
                let start = at;
                while at < bytes.len() && !bytes[at].is_ascii_whitespace() {
                    at += 1;
                }
                (start, at)
            }
        };
        let value_at = value_start..value_end;
        found.push(Attribute { name, name_end, value: Some(&text[value_at.clone()]), value_at: Some(value_at) });
    }
    found
}

/// `html`, a page or a part of one, with each file's `href` as `served`
/// says (it is given the file as the page lists it; `None` leaves its URL
/// as it is), everything else as it was: the side's link rewriter hands
/// it one anchor at a time.
pub fn rewritten_html(html: &str, served: &dyn Fn(&Listed) -> Option<String>) -> String {
    let mut out = String::with_capacity(html.len() + html.len() / 4);
    let mut copied = 0;
    for anchor in anchors(html) {
        let Some(url) = listed(&anchor).as_ref().and_then(served) else { continue };
        let href = attributes(anchor.attributes).into_iter().find(|found| found.name.eq_ignore_ascii_case("href"));
        let Some(Attribute { value: Some(value), value_at: Some(range), .. }) = href else { continue };
        let fragment = value.split_once('#').map(|(_, fragment)| format!("#{fragment}")).unwrap_or_default();
        let start = anchor.attributes_at + range.start;
        let end = anchor.attributes_at + range.end;
        out.push_str(&html[copied..start]);
        out.push_str(&html_escape::encode_double_quoted_attribute(&url));
        out.push_str(&fragment);
        copied = end;
    }
    out.push_str(&html[copied..]);
    out
}

/// `html`, a whole page, with each file `reason` gives a reason for
/// marked yanked for it (PEP 592's `data-yanked`, its value replaced when
/// the index yanked the file already), every other byte as it was.
pub fn marked_yanked_html(html: &str, reason: &mut dyn FnMut(&Listed) -> Option<String>) -> String {
    let mut out = String::with_capacity(html.len() + html.len() / 8);
    let mut copied = 0;
    for anchor in anchors(html) {
        let Some(why) = listed(&anchor).as_ref().and_then(&mut *reason) else { continue };
        let escaped = html_escape::encode_double_quoted_attribute(&why);
        let yanked =
            attributes(anchor.attributes).into_iter().find(|found| found.name.eq_ignore_ascii_case("data-yanked"));
        let (at, until, written) = match yanked {
            Some(Attribute { value_at: Some(range), .. }) => (range.start, range.end, escaped.into_owned()),
            Some(Attribute { name_end, .. }) => (name_end, name_end, format!("=\"{escaped}\"")),
            None => (0, 0, format!(" data-yanked=\"{escaped}\"")),
        };
        out.push_str(&html[copied..anchor.attributes_at + at]);
        out.push_str(&written);
        copied = anchor.attributes_at + until;
    }
    out.push_str(&html[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HTML_PAGE: &str = "<!DOCTYPE html>\n<html><body><h1>Links for demo</h1>\n\
        <a href=\"https://files.example/packages/ab/cd/ef01/demo-1.0-py3-none-any.whl#sha256=aaa\" data-requires-python=\"&gt;=3.8\" data-dist-info-metadata=\"sha256=mmm\" data-core-metadata=\"sha256=mmm\">demo-1.0-py3-none-any.whl</a><br />\n\
        <A HREF='../../packages/12/34/5678/demo-1.0.tar.gz#sha256=bbb' data-yanked=\"bad &amp; broken\">demo-1.0.tar.gz</A>\n\
        </body></html>\n<!--SERIAL 42-->\n";

    #[test]
    fn pep_691_s_format_query_overrides_accept() {
        let json = Some("format=application/vnd.pypi.simple.v1%2Bjson");
        assert_eq!(Form::asked(json, Some("text/html")), Form::Json);
        assert_eq!(Form::asked(Some("format=application/vnd.pypi.simple.v1+json"), None), Form::Json);
        assert_eq!(Form::asked(Some("x=1&format=text/html"), Some(JSON)), Form::Html);
        assert_eq!(Form::asked(Some("x=1"), Some(JSON)), Form::Json);
        for form in [Form::Json, Form::Html] {
            assert_eq!(Form::asked(Some(form.query()), None), form);
        }
    }

    #[test]
    fn the_form_follows_the_client_s_accept() {
        assert_eq!(
            Form::chosen(Some(
                "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01"
            )),
            Form::Json
        );
        assert_eq!(Form::chosen(Some("text/html")), Form::Html);
        assert_eq!(Form::chosen(None), Form::Html);
        assert_eq!(Form::chosen(Some("application/vnd.pypi.simple.v1+json;q=0.1, text/html")), Form::Html);
    }

    #[test]
    fn an_html_page_gives_each_file_its_url_hash_metadata_and_serial() {
        let page = parse(HTML_PAGE.as_bytes()).unwrap();
        assert_eq!(page.serial, Some(42));
        assert_eq!(page.files.len(), 2);
        assert_eq!(page.files[0].filename, "demo-1.0-py3-none-any.whl");
        assert_eq!(page.files[0].sha256.as_deref(), Some("aaa"));
        assert_eq!(page.files[0].metadata_sha256.as_deref(), Some("mmm"));
        assert_eq!(page.files[1].url, "../../packages/12/34/5678/demo-1.0.tar.gz");
        assert_eq!(page.files[1].metadata_sha256, None);
    }

    #[test]
    fn character_references_in_names_and_links_are_read_as_html_reads_them() {
        let page = "<a href=\"../x/demo-1.0.tar.gz#sha256=a&#x62;c\" data-core-metadata=\"sha256=m&amp;m\">\
            demo&#45;1.0&period;tar.gz</a>";
        let page = parse(page.as_bytes()).unwrap();
        assert_eq!(page.files[0].filename, "demo-1.0.tar.gz");
        assert_eq!(page.files[0].sha256.as_deref(), Some("abc"));
        assert_eq!(page.files[0].metadata_sha256.as_deref(), Some("m&m"));
    }

    #[test]
    fn a_rewritten_link_is_escaped_for_its_attribute() {
        let page = "<a href=\"../x/demo-1.0.tar.gz#sha256=abc\">demo-1.0.tar.gz</a>";
        let rewritten = rewritten_html(page, &|_| Some("http://h/?a=1&b=\"<>\"".to_owned()));
        assert_eq!(rewritten, "<a href=\"http://h/?a=1&amp;b=&quot;&lt;&gt;&quot;#sha256=abc\">demo-1.0.tar.gz</a>");
    }

    #[test]
    fn a_file_is_marked_yanked_in_its_anchor_and_nothing_else_changes() {
        let mut why =
            |listed: &Listed| (listed.filename.ends_with(".tar.gz")).then(|| "held: \"fresh\" & <new>".to_owned());
        let marked = marked_yanked_html(HTML_PAGE, &mut why);
        let expected = HTML_PAGE.replacen(
            "data-yanked=\"bad &amp; broken\"",
            "data-yanked=\"held: &quot;fresh&quot; &amp; &lt;new&gt;\"",
            1,
        );
        assert_eq!(marked, expected, "an upstream yank's reason is replaced");
        let page =
            "<p>x</p><a href=\"u/demo-1.0.tar.gz\" data-yanked>demo-1.0.tar.gz</a>\n<a\thref=u>demo-2.0.tar.gz</a>";
        let marked = marked_yanked_html(page, &mut why);
        assert_eq!(
            marked,
            "<p>x</p><a href=\"u/demo-1.0.tar.gz\" data-yanked=\"held: &quot;fresh&quot; &amp; &lt;new&gt;\">demo-1.0.tar.gz</a>\n\
             <a data-yanked=\"held: &quot;fresh&quot; &amp; &lt;new&gt;\"\thref=u>demo-2.0.tar.gz</a>"
        );
        let reparsed = parse(marked.as_bytes()).unwrap();
        assert_eq!(reparsed.files.len(), 2);
        assert_eq!(marked_yanked_html(HTML_PAGE, &mut |_| None), HTML_PAGE);
    }

    #[test]
    fn a_json_page_gives_each_file_and_its_serial() {
        let json = br#"{"meta":{"api-version":"1.1","_last-serial":7},"name":"demo","files":[{"filename":"demo-1.0.tar.gz","url":"https://files.example/x/demo-1.0.tar.gz","hashes":{"sha256":"bbb"},"core-metadata":{"sha256":"mmm"}}]}"#;
        let page = parse(json).unwrap();
        assert_eq!(page.serial, Some(7));
        assert_eq!(page.files[0].url, "https://files.example/x/demo-1.0.tar.gz");
        assert_eq!(page.files[0].sha256.as_deref(), Some("bbb"));
        assert_eq!(page.files[0].metadata_sha256.as_deref(), Some("mmm"));
    }
}
