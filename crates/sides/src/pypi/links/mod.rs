//! A project's page as it streams to its client, each file's link pointed
//! at pkgproxy as the client reached it. A page runs to tens of megabytes
//! (a project of thousands of releases) and is served again and again, so
//! a serve never parses it whole: a lexer follows the page across chunks
//! and holds one file at a time (an entry of `files`, an `<a>` element),
//! long enough to read where its link is served. Every other byte passes
//! as it came, so every key and attribute the index wrote is kept as it
//! wrote it.

mod html;
mod json;

use super::files;
use super::page::Listed;
use crate::StreamRewriter;

/// The largest file entry or `<a>` element held to rewrite its link (one
/// of PyPI's is some 500 bytes); a larger one passes as it is.
const HELD_LIMIT: usize = 64 * 1024;

/// Where a page's files are served.
#[derive(Debug, Clone)]
pub struct Links {
    /// pkgproxy's index as the client reached it (`http://HOST/pypi`, or
    /// `.../pypi/NAME`), without a trailing slash.
    pub base: String,
}

impl Links {
    /// The link the client gets for `listed`; `None`: the page's, as it is
    /// (the page gives no hash to check the file by).
    pub fn served(&self, listed: &Listed) -> Option<String> {
        files::served_path(listed).map(|path| format!("{}/packages/{path}", self.base))
    }

    /// A rewriter of one page with these links.
    pub fn rewriter(self) -> PageRewriter {
        PageRewriter { form: Form::Unknown(self) }
    }
}

/// A page's links rewritten as it streams, in the form its first byte
/// says (`{`: JSON; anything else: HTML, as [`super::page::parse`] reads
/// it).
#[derive(Debug)]
pub struct PageRewriter {
    /// The page's form, once its first byte is read.
    form: Form,
}

/// The form of the page being rewritten.
#[derive(Debug)]
enum Form {
    /// Only white space so far (passed on as it came).
    Unknown(Links),
    /// PEP 691's JSON.
    Json(json::JsonLinks),
    /// HTML.
    Html(html::HtmlLinks),
}

impl StreamRewriter for PageRewriter {
    fn feed(&mut self, input: &[u8], output: &mut Vec<u8>) {
        let input = match &mut self.form {
            Form::Unknown(links) => {
                let Some(first) = input.iter().position(|byte| !byte.is_ascii_whitespace()) else {
                    output.extend_from_slice(input);
                    return;
                };
                output.extend_from_slice(&input[..first]);
                let links = links.clone();
                self.form = match input[first] {
                    b'{' => Form::Json(json::JsonLinks::new(links)),
                    _ => Form::Html(html::HtmlLinks::new(links)),
                };
                &input[first..]
            }
            _ => input,
        };
        match &mut self.form {
            Form::Unknown(_) => {}
            Form::Json(json) => json.feed(input, output),
            Form::Html(html) => html.feed(input, output),
        }
    }

    fn finish(&mut self, output: &mut Vec<u8>) {
        match &mut self.form {
            Form::Unknown(_) => {}
            Form::Json(json) => json.finish(output),
            Form::Html(html) => html.finish(output),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `page` as a client of `http://cache.lan:3142` gets it, fed in
    /// chunks of `chunk` bytes.
    pub fn rewritten(page: &[u8], chunk: usize) -> Vec<u8> {
        let mut rewriter = Links { base: "http://cache.lan:3142/pypi".into() }.rewriter();
        let mut output = Vec::new();
        for part in page.chunks(chunk) {
            rewriter.feed(part, &mut output);
        }
        rewriter.finish(&mut output);
        output
    }

    #[test]
    fn the_form_is_told_by_the_first_byte_after_white_space() {
        let json = " \n{\"files\":[{\"filename\":\"demo-1.0.tar.gz\",\"url\":\"https://f/demo-1.0.tar.gz\",\
                    \"hashes\":{\"sha256\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}}]}";
        let served = String::from_utf8(rewritten(json.as_bytes(), 1)).unwrap();
        assert!(served.starts_with(" \n{\"files\":[{"), "{served}");
        assert!(served.contains("\"url\":\"http://cache.lan:3142/pypi/packages/aa/aa/"), "{served}");
        for page in ["", "   ", "not a page", "[1, 2]"] {
            assert_eq!(rewritten(page.as_bytes(), 2), page.as_bytes(), "{page:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_pass_whole_and_without_a_link_unchanged(
            page in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
            json in proptest::prelude::any::<bool>(),
            chunk in 1usize..50,
        ) {
            let mut page = page;
            if json {
                page.insert(0, b'{');
            }
            let out = rewritten(&page, chunk);
            if !page.windows(3).any(|window| window == b"url" || window.eq_ignore_ascii_case(b"ref")) {
                proptest::prop_assert_eq!(out, page);
            }
        }
    }

    #[test]
    fn every_key_and_value_but_the_file_urls_is_kept() {
        let json = br#"{"meta":{"api-version":"1.1","_last-serial":7},"name":"demo","files":[{"filename":"demo-1.0.tar.gz","url":"https://files.example/x/demo-1.0.tar.gz","hashes":{"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"},"yanked":"why","core-metadata":false,"size":3,"upload-time":"2024-01-02T03:04:05Z"}]}"#;
        for chunk in [1, 5, json.len()] {
            let out: serde_json::Value = serde_json::from_slice(&rewritten(json, chunk)).unwrap();
            let mut expected: serde_json::Value = serde_json::from_slice(json).unwrap();
            expected["files"][0]["url"] =
                format!("http://cache.lan:3142/pypi/packages/bb/bb/{}/demo-1.0.tar.gz", "b".repeat(60)).into();
            assert_eq!(out, expected, "chunks of {chunk}");
        }
    }
}
