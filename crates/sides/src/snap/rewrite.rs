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

use serde_json::{Map, Value};

use super::blob::{blob_path, is_sha3_384};
use crate::decision::ServedAt;

/// The prefix of media URLs, below the side's mount.
pub const MEDIA_PREFIX: &str = "/media/";

/// The kinds of media relayed: the store's images. A `video` is a URL its
/// publisher chose, on any host.
const MEDIA_IMAGES: [&str; 4] = ["icon", "screenshot", "banner", "banner-icon"];

/// Rewrites the URLs in a store answer.
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

impl Rewriter<'_> {
    /// The answer `body` with its URLs rewritten; `None` when it is not JSON.
    pub fn rewrite(&mut self, body: &[u8]) -> Option<Vec<u8>> {
        let mut answer: Value = serde_json::from_slice(body).ok()?;
        self.walk(&mut answer);
        serde_json::to_vec(&answer).ok()
    }

    /// Rewrites every URL in `value` (a whole answer or a part of one).
    pub fn walk(&mut self, value: &mut Value) {
        match value {
            Value::Object(object) if is_private(object) => {}
            Value::Object(object) => {
                for (name, child) in object.iter_mut() {
                    match (name.as_str(), child) {
                        ("download", Value::Object(download)) => self.download(download),
                        ("media", Value::Array(media)) => media.iter_mut().for_each(|item| self.media(item)),
                        ("assertion-stream-urls", Value::Array(urls)) => {
                            urls.iter_mut().for_each(|url| self.store_url(url))
                        }
                        (_, child) => self.walk(child),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.walk(item)),
            _ => {}
        }
    }

    /// A `download` object and the deltas in it.
    fn download(&mut self, download: &mut Map<String, Value>) {
        self.blob(download);
        if let Some(Value::Array(deltas)) = download.get_mut("deltas") {
            for delta in deltas.iter_mut() {
                if let Value::Object(delta) = delta {
                    self.blob(delta);
                }
            }
        }
    }

    /// An object with a `url`, a `sha3-384` and a `size`: a blob URL of
    /// pkgproxy's; without a digest, the store path as it is.
    fn blob(&mut self, object: &mut Map<String, Value>) {
        let digest =
            object.get("sha3-384").and_then(Value::as_str).filter(|d| is_sha3_384(d)).map(str::to_ascii_lowercase);
        let size = object.get("size").and_then(Value::as_u64);
        let Some(Value::String(url)) = object.get_mut("url") else { return };
        let Some(store_path) = below_store(url, self.stores) else { return };
        *url = match (digest, size) {
            (Some(digest), Some(size)) => format!("{}{}", self.served_at.base, blob_path(&digest, size, store_path)),
            _ => format!("{}{store_path}", self.served_at.base),
        };
    }

    /// A media item: its `url` through pkgproxy's media path, when it is
    /// an image.
    fn media(&mut self, item: &mut Value) {
        if !item.get("type").and_then(Value::as_str).is_some_and(|kind| MEDIA_IMAGES.contains(&kind)) {
            return;
        }
        let Some(Value::String(url)) = item.get_mut("url") else { return };
        let Some((scheme, rest)) = url.split_once("://") else { return };
        if !matches!(scheme, "http" | "https") {
            return;
        }
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if authority.is_empty() || authority.contains('@') {
            return;
        }
        let path = &rest[authority.len()..];
        let path = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
        let named = format!("{scheme}/{authority}{}", path.split('#').next().unwrap_or(""));
        *url = format!("{}{MEDIA_PREFIX}{named}", self.served_at.base);
        if !self.media.contains(&named) {
            self.media.push(named);
        }
    }

    /// A URL on the store: the same path on pkgproxy.
    fn store_url(&mut self, url: &mut Value) {
        let Value::String(text) = url else { return };
        if let Some(path) = below_store(text, self.stores) {
            *text = format!("{}{path}", self.served_at.base);
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
