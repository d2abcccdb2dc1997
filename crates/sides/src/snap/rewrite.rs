//! Rewriting the URLs in the store's JSON answers so that they point at
//! pkgproxy as the client reaches it, at serve time: what is stored is the
//! store's own answer, so no client ever gets another's host name.
//!
//! Every URL snapd takes from an answer is rewritten, wherever it sits:
//! `download` objects (of a snap, its deltas, resources and integrity data,
//! an info answer's channel map, a find result's revision) become blob URLs
//! carrying their digest and size (see [`super::blob`]); the images among
//! `media` (icons, screenshots, banners: the store's own copies) go
//! through pkgproxy's media path, each one exactly, while a `video`
//! (a publisher's URL anywhere on the web) is left as it is;
//! `assertion-stream-urls` go to pkgproxy's assertion path. A URL on a host
//! pkgproxy would not fetch from is left as it is, and so is every URL of a
//! private snap: the client fetches those from the store itself, so a
//! private snap is never cached and never shared.

use std::collections::HashSet;

use serde_json::{Map, Value};
use struson::reader::{JsonReader, ReaderError, ValueType};
use struson::writer::{JsonStreamWriter, JsonWriter};

use super::blob::{blob_path, is_sha3_384};
use crate::decision::ServedAt;
use crate::json;

/// The prefix of media URLs, below the side's mount.
pub const MEDIA_PREFIX: &str = "/media/";

/// The kinds of media relayed: the store's images. A `video` is a URL its
/// publisher chose, on any host.
const MEDIA_IMAGES: [&str; 4] = ["icon", "screenshot", "banner", "banner-icon"];

/// Rewrites the URLs in a store answer, reading and writing it as a stream
/// (an answer of tens of MB costs about twice its size, never a tree of
/// it): a first pass finds the private snaps' objects, by their place
/// among the document's objects, and the second copies the answer,
/// rewriting the URLs outside them.
pub struct Rewriter<'a> {
    /// The store instances' base URLs.
    pub stores: &'a [String],
    /// Where the client reaches pkgproxy.
    pub served_at: &'a ServedAt,
    /// The media the answer named, as their paths below the media prefix
    /// (`https/dashboard.snapcraft.io/site_media/icon.png`): learnt so
    /// that pkgproxy fetches those and nothing else.
    pub media: Vec<String>,
}

/// Why a rewrite stopped: the answer is not JSON (or nests deeper than
/// the reader goes), or the output could not be written.
#[derive(Debug)]
struct NotJson;

impl From<ReaderError> for NotJson {
    fn from(_: ReaderError) -> Self {
        NotJson
    }
}

impl From<std::io::Error> for NotJson {
    fn from(_: std::io::Error) -> Self {
        NotJson
    }
}

impl From<struson::writer::JsonNumberError> for NotJson {
    fn from(_: struson::writer::JsonNumberError) -> Self {
        NotJson
    }
}

type Writer = JsonStreamWriter<Vec<u8>>;

/// Where the copy is among the document's objects (each object is given
/// the next number when it begins, in both passes), and which are private.
struct Objects {
    next: u64,
    private: HashSet<u64>,
}

impl Objects {
    fn begin(&mut self) -> u64 {
        self.next += 1;
        self.next - 1
    }
}

impl Rewriter<'_> {
    /// The answer `body` with its URLs rewritten; `None` when it is not JSON.
    pub fn rewrite(&mut self, body: &[u8]) -> Option<Vec<u8>> {
        let mut objects = Objects { next: 0, private: HashSet::new() };
        let mut read = json::reader(body);
        scan(&mut read, &mut objects).ok()?;
        read.consume_trailing_whitespace().ok()?;
        objects.next = 0;
        let mut read = json::reader(body);
        let mut writer = JsonStreamWriter::new(Vec::with_capacity(body.len() + body.len() / 8));
        self.value(&mut read, &mut writer, &mut objects, false).ok()?;
        read.consume_trailing_whitespace().ok()?;
        writer.finish_document().ok()
    }

    /// Copies the value the reader is at, rewriting every URL in it
    /// (`private`: it lies in a private snap's object, copied as it is).
    fn value<R: JsonReader>(
        &mut self,
        read: &mut R,
        write: &mut Writer,
        objects: &mut Objects,
        private: bool,
    ) -> Result<(), NotJson> {
        match read.peek()? {
            ValueType::Object => {
                let me = objects.begin();
                let private = private || objects.private.contains(&me);
                read.begin_object()?;
                write.begin_object()?;
                while read.has_next()? {
                    let name = read.next_name_owned()?;
                    write.name(&name)?;
                    match (private, name.as_str(), read.peek()?) {
                        (false, "download", ValueType::Object) => self.download(read, write, objects)?,
                        (false, "media", ValueType::Array) => array(read, write, |read, write| match read.peek()? {
                            ValueType::Object => self.media_item(read, write, objects),
                            _ => copy(read, write, objects),
                        })?,
                        (false, "assertion-stream-urls", ValueType::Array) => {
                            array(read, write, |read, write| match read.peek()? {
                                ValueType::String => {
                                    let url = read.next_string()?;
                                    Ok(write.string_value(&self.store_url(url))?)
                                }
                                _ => copy(read, write, objects),
                            })?
                        }
                        _ => self.value(read, write, objects, private)?,
                    }
                }
                read.end_object()?;
                Ok(write.end_object()?)
            }
            ValueType::Array => array(read, write, |read, write| self.value(read, write, objects, private)),
            _ => copy(read, write, objects),
        }
    }

    /// A `download` object and the deltas in it: each a blob URL.
    fn download<R: JsonReader>(
        &mut self,
        read: &mut R,
        write: &mut Writer,
        objects: &mut Objects,
    ) -> Result<(), NotJson> {
        self.blob(read, write, objects, true)
    }

    /// An object with a `url`, a `sha3-384` and a `size`: a blob URL of
    /// pkgproxy's; without a digest, the store path as it is. Its `url` is
    /// written last, once the others are known.
    fn blob<R: JsonReader>(
        &mut self,
        read: &mut R,
        write: &mut Writer,
        objects: &mut Objects,
        with_deltas: bool,
    ) -> Result<(), NotJson> {
        objects.begin();
        let (mut url, mut digest, mut size) = (None, None, None);
        read.begin_object()?;
        write.begin_object()?;
        while read.has_next()? {
            let name = read.next_name_owned()?;
            match (name.as_str(), read.peek()?) {
                ("url", ValueType::String) => url = Some(read.next_string()?),
                ("sha3-384", ValueType::String) => {
                    let value = read.next_string()?;
                    write.name(&name)?;
                    write.string_value(&value)?;
                    digest = Some(value).filter(|d| is_sha3_384(d)).map(|d| d.to_ascii_lowercase());
                }
                ("size", ValueType::Number) => {
                    let value = read.next_number_as_string()?;
                    write.name(&name)?;
                    write.number_value_from_string(&value)?;
                    size = value.parse::<u64>().ok();
                }
                ("deltas", ValueType::Array) if with_deltas => {
                    write.name(&name)?;
                    array(read, write, |read, write| match read.peek()? {
                        ValueType::Object => self.blob(read, write, objects, false),
                        _ => copy(read, write, objects),
                    })?;
                }
                _ => {
                    write.name(&name)?;
                    copy(read, write, objects)?;
                }
            }
        }
        if let Some(url) = url {
            let rewritten = match (below_store(&url, self.stores), digest, size) {
                (Some(path), Some(digest), Some(size)) => {
                    format!("{}{}", self.served_at.base, blob_path(&digest, size, path))
                }
                (Some(path), _, _) => format!("{}{path}", self.served_at.base),
                (None, _, _) => url,
            };
            write.name("url")?;
            write.string_value(&rewritten)?;
        }
        read.end_object()?;
        Ok(write.end_object()?)
    }

    /// A media item: its `url` through pkgproxy's media path, when it is
    /// an image; written last, once its type is known.
    fn media_item<R: JsonReader>(
        &mut self,
        read: &mut R,
        write: &mut Writer,
        objects: &mut Objects,
    ) -> Result<(), NotJson> {
        objects.begin();
        let (mut url, mut image) = (None, false);
        read.begin_object()?;
        write.begin_object()?;
        while read.has_next()? {
            let name = read.next_name_owned()?;
            match (name.as_str(), read.peek()?) {
                ("url", ValueType::String) => url = Some(read.next_string()?),
                ("type", ValueType::String) => {
                    let kind = read.next_string()?;
                    image = MEDIA_IMAGES.contains(&kind.as_str());
                    write.name(&name)?;
                    write.string_value(&kind)?;
                }
                _ => {
                    write.name(&name)?;
                    copy(read, write, objects)?;
                }
            }
        }
        if let Some(url) = url {
            let url = match image {
                true => self.media_url(url),
                false => url,
            };
            write.name("url")?;
            write.string_value(&url)?;
        }
        read.end_object()?;
        Ok(write.end_object()?)
    }

    /// An image's URL through pkgproxy's media path, learnt; as it is when
    /// pkgproxy would not fetch it.
    fn media_url(&mut self, url: String) -> String {
        let Some((scheme, rest)) = url.split_once("://") else { return url };
        if !matches!(scheme, "http" | "https") {
            return url;
        }
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if authority.is_empty() || authority.contains('@') {
            return url;
        }
        let path = &rest[authority.len()..];
        let path = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
        let named = format!("{scheme}/{authority}{}", path.split('#').next().unwrap_or(""));
        let rewritten = format!("{}{MEDIA_PREFIX}{named}", self.served_at.base);
        if !self.media.contains(&named) {
            self.media.push(named);
        }
        rewritten
    }

    /// A URL on the store: the same path on pkgproxy.
    fn store_url(&self, url: String) -> String {
        match below_store(&url, self.stores) {
            Some(path) => format!("{}{path}", self.served_at.base),
            None => url,
        }
    }
}

/// The first pass: counts the objects of the value the reader is at, and
/// notes those of a private snap (an object with `"private": true`, or
/// holding a `snap` object that has it). Whether this value is an object
/// with `"private": true` itself.
fn scan<R: JsonReader>(read: &mut R, objects: &mut Objects) -> Result<bool, NotJson> {
    match read.peek()? {
        ValueType::Object => {
            let me = objects.begin();
            let (mut private, mut holds_private_snap) = (false, false);
            read.begin_object()?;
            while read.has_next()? {
                let name = read.next_name_owned()?;
                match (name.as_str(), read.peek()?) {
                    ("private", ValueType::Boolean) => private |= read.next_bool()?,
                    ("snap", ValueType::Object) => holds_private_snap |= scan(read, objects)?,
                    _ => {
                        scan(read, objects)?;
                    }
                }
            }
            read.end_object()?;
            if private || holds_private_snap {
                objects.private.insert(me);
            }
            Ok(private)
        }
        ValueType::Array => {
            read.begin_array()?;
            while read.has_next()? {
                scan(read, objects)?;
            }
            read.end_array()?;
            Ok(false)
        }
        _ => {
            read.skip_value()?;
            Ok(false)
        }
    }
}

/// Copies an array, each element by `each`.
fn array<R: JsonReader>(
    read: &mut R,
    write: &mut Writer,
    mut each: impl FnMut(&mut R, &mut Writer) -> Result<(), NotJson>,
) -> Result<(), NotJson> {
    read.begin_array()?;
    write.begin_array()?;
    while read.has_next()? {
        each(read, write)?;
    }
    read.end_array()?;
    Ok(write.end_array()?)
}

/// Copies the value the reader is at as it is, counting its objects.
fn copy<R: JsonReader>(read: &mut R, write: &mut Writer, objects: &mut Objects) -> Result<(), NotJson> {
    match read.peek()? {
        ValueType::Object => {
            objects.begin();
            read.begin_object()?;
            write.begin_object()?;
            while read.has_next()? {
                let name = read.next_name_owned()?;
                write.name(&name)?;
                copy(read, write, objects)?;
            }
            read.end_object()?;
            Ok(write.end_object()?)
        }
        ValueType::Array => array(read, write, |read, write| copy(read, write, objects)),
        ValueType::String => Ok(write.string_value(&read.next_string()?)?),
        ValueType::Number => Ok(write.number_value_from_string(&read.next_number_as_string()?)?),
        ValueType::Boolean => Ok(write.bool_value(read.next_bool()?)?),
        ValueType::Null => {
            read.next_null()?;
            Ok(write.null_value()?)
        }
    }
}

/// True for a snap object, or an object holding one (a result, an info
/// answer), that says the snap is private.
pub fn is_private(object: &Map<String, Value>) -> bool {
    let private = |object: &Map<String, Value>| object.get("private").and_then(Value::as_bool) == Some(true);
    private(object) || object.get("snap").and_then(Value::as_object).is_some_and(private)
}

/// The path (and query) of `url` below one of the `stores`' base URLs.
pub fn below_store<'u>(url: &'u str, stores: &[String]) -> Option<&'u str> {
    stores.iter().find_map(|store| {
        let rest = url.strip_prefix(store.as_str())?;
        (rest.starts_with('/') && rest.len() > 1).then_some(rest)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const DIGEST: &str =
        "abababababababababababababababababababababababababababababababababababababababababababababababab";

    fn rewritten(answer: Value) -> (Value, Vec<String>) {
        let stores = ["https://api.snapcraft.io".to_string()];
        let served_at = ServedAt { base: "http://proxy.lan:3142/snap".into() };
        let mut rewriter = Rewriter { stores: &stores, served_at: &served_at, media: Vec::new() };
        let body = rewriter.rewrite(answer.to_string().as_bytes()).unwrap();
        (serde_json::from_slice(&body).unwrap(), rewriter.media)
    }

    #[test]
    fn every_url_of_a_refresh_answer_points_at_pkgproxy() {
        let download =
            |path: &str| json!({"url": format!("https://api.snapcraft.io{path}"), "sha3-384": DIGEST, "size": 7});
        let mut snap_download = download("/api/v1/snaps/download/ID_3.snap");
        snap_download["deltas"] = json!([download("/api/v1/snaps/download/ID_2_3_xdelta3.delta")]);
        let answer = json!({"results": [
            {"result": "download", "snap": {
                "download": snap_download,
                "resources": [{"name": "c", "download": download("/api/v1/snaps/download/C_1.comp")}],
                "media": [{"type": "icon", "url": "https://dashboard.snapcraft.io/site_media/icon.png"}]}},
            {"result": "fetch-assertions", "assertion-stream-urls": ["https://api.snapcraft.io/v2/assertions/snap-declaration/16/ID"]}
        ]});
        let (answer, media) = rewritten(answer);
        let base = "http://proxy.lan:3142/snap";
        let snap = &answer["results"][0]["snap"];
        assert_eq!(snap["download"]["url"], format!("{base}/download/{DIGEST}/7/api/v1/snaps/download/ID_3.snap"));
        assert_eq!(
            snap["download"]["deltas"][0]["url"],
            format!("{base}/download/{DIGEST}/7/api/v1/snaps/download/ID_2_3_xdelta3.delta")
        );
        assert_eq!(
            snap["resources"][0]["download"]["url"],
            format!("{base}/download/{DIGEST}/7/api/v1/snaps/download/C_1.comp")
        );
        assert_eq!(snap["media"][0]["url"], format!("{base}/media/https/dashboard.snapcraft.io/site_media/icon.png"));
        assert_eq!(
            answer["results"][1]["assertion-stream-urls"][0],
            format!("{base}/v2/assertions/snap-declaration/16/ID")
        );
        assert_eq!(media, ["https/dashboard.snapcraft.io/site_media/icon.png"]);
    }

    #[test]
    fn only_images_go_through_pkgproxy_and_each_exactly_never_a_video() {
        let answer = json!({"snap": {"media": [
            {"type": "screenshot", "url": "https://dashboard.snapcraft.io/site_media/shot.png?v=2#top"},
            {"type": "video", "url": "https://publisher.example:8443/intro"},
            {"type": "hologram", "url": "https://dashboard.snapcraft.io/other"},
            {"url": "https://dashboard.snapcraft.io/untyped"}]}});
        let (served, media) = rewritten(answer.clone());
        assert_eq!(media, ["https/dashboard.snapcraft.io/site_media/shot.png?v=2"]);
        assert_eq!(
            served["snap"]["media"][0]["url"],
            "http://proxy.lan:3142/snap/media/https/dashboard.snapcraft.io/site_media/shot.png?v=2"
        );
        for item in 1..4 {
            assert_eq!(served["snap"]["media"][item], answer["snap"]["media"][item], "left as it is");
        }
    }

    #[test]
    fn an_info_answer_s_channel_map_and_a_find_answer_s_revisions_are_rewritten() {
        let download =
            json!({"url": "https://api.snapcraft.io/api/v1/snaps/download/ID_3.snap", "sha3-384": DIGEST, "size": 7});
        let (info, _) = rewritten(json!({"channel-map": [{"download": download.clone()}]}));
        assert!(info["channel-map"][0]["download"]["url"]
            .as_str()
            .unwrap()
            .starts_with("http://proxy.lan:3142/snap/download/"));
        let (find, _) = rewritten(json!({"results": [{"revision": {"download": download}}]}));
        assert!(find["results"][0]["revision"]["download"]["url"]
            .as_str()
            .unwrap()
            .starts_with("http://proxy.lan:3142/snap/download/"));
    }

    #[test]
    fn a_private_snap_s_urls_are_left_to_the_store() {
        let download =
            json!({"url": "https://api.snapcraft.io/api/v1/snaps/download/P_1.snap", "sha3-384": DIGEST, "size": 7});
        let answer = json!({"results": [
            {"result": "download", "snap": {"private": true, "download": download.clone()}},
            {"result": "download", "snap": {"private": false, "download": download.clone()}}],
            "channel-map": []});
        let (served, _) = rewritten(answer.clone());
        assert_eq!(served["results"][0], answer["results"][0]);
        assert_ne!(served["results"][1], answer["results"][1]);
        let info = json!({"snap": {"private": true}, "channel-map": [{"download": download}]});
        assert_eq!(rewritten(info.clone()).0, info);
    }

    #[test]
    fn a_private_snap_is_known_whatever_the_order_of_its_members_and_the_rest_is_kept_exactly() {
        let download =
            json!({"url": "https://api.snapcraft.io/api/v1/snaps/download/P_1.snap", "sha3-384": DIGEST, "size": 7});
        // `private` written after the download it governs.
        let text = format!(
            r#"{{"results": [{{"snap": {{"download": {download}, "name": "p", "private": true}}}},
                {{"snap": {{"download": {download}, "private": false, "ratio": 1.5e3, "note": "é\u00e9\n"}}}}],
              "big": 18446744073709551615, "neg": -1, "nothing": null}}"#
        );
        let served_at = ServedAt { base: "http://proxy.lan:3142/snap".into() };
        let stores = ["https://api.snapcraft.io".to_string()];
        let mut rewriter = Rewriter { stores: &stores, served_at: &served_at, media: Vec::new() };
        let served: Value = serde_json::from_slice(&rewriter.rewrite(text.as_bytes()).unwrap()).unwrap();
        let answer: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(served["results"][0], answer["results"][0], "the private snap's URLs are the store's");
        let public = &served["results"][1]["snap"];
        assert!(public["download"]["url"].as_str().unwrap().starts_with("http://proxy.lan:3142/snap/download/"));
        for kept in ["ratio", "note"] {
            assert_eq!(public[kept], answer["results"][1]["snap"][kept], "{kept}");
        }
        for kept in ["big", "neg", "nothing"] {
            assert_eq!(served[kept], answer[kept], "{kept}");
        }
    }

    #[test]
    fn what_is_not_json_or_nests_too_deep_is_not_rewritten_and_nothing_panics() {
        let stores = ["https://api.snapcraft.io".to_string()];
        let served_at = ServedAt { base: "http://p/snap".into() };
        let mut rewriter = Rewriter { stores: &stores, served_at: &served_at, media: Vec::new() };
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        for bad in ["not json", "{\"a\": 1} {}", "{\"download\": {\"url\": ", deep.as_str()] {
            assert!(rewriter.rewrite(bad.as_bytes()).is_none(), "{}", &bad[..bad.len().min(20)]);
        }
    }

    #[test]
    fn urls_elsewhere_are_left_alone() {
        let answer = json!({"snap": {"download": {"url": "https://elsewhere.example/x.snap", "sha3-384": DIGEST, "size": 1},
                                     "website": "https://api.snapcraft.io/about"}});
        let (rewritten, _) = rewritten(answer.clone());
        assert_eq!(rewritten, answer, "another host's download, and a URL snapd does not fetch");
        let stores = ["https://api.snapcraft.io".to_string()];
        let served_at = ServedAt { base: "http://p/snap".into() };
        let mut rewriter = Rewriter { stores: &stores, served_at: &served_at, media: Vec::new() };
        assert!(rewriter.rewrite(b"not json").is_none());
    }
}
