//! The simplestreams format as LXD reads it: the index names products
//! files, and each products file names the image files of every version it
//! keeps, with their sha256 and size. Only what LXD itself uses is read:
//! index entries whose `datatype` is `image-downloads`, and every item of
//! every version (older serials included: a daemon may hold a products file
//! for an hour or more and fetch from it).

use std::collections::BTreeMap;

use struson::reader::{JsonReader, ReaderError};

use crate::json::{self, members};

/// The most products files an index may name for LXD.
pub const MOST_PRODUCTS_FILES: usize = 64;
/// The most image files one products file may name (every version of every
/// product: the Ubuntu releases stream names some tens of thousands).
pub const MOST_ITEMS: usize = 500_000;

/// What a file must be: its sha256 (lower-case hex) and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sum {
    /// Its SHA-256, lower-case hex.
    pub sha256: String,
    /// Its length in bytes.
    pub size: u64,
}

/// A file the format cannot be used as, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {reason}")]
pub struct FormatError {
    /// Which file.
    pub file: String,
    /// What is wrong with it.
    pub reason: String,
}

/// One product of a products file, as LXD reads it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Product {
    /// Its aliases, comma-separated (`24.04,noble`).
    pub aliases: String,
    /// Its architecture (`amd64`).
    pub arch: String,
    /// Its versions (serials), each with its items.
    pub versions: Vec<Version>,
}

/// One version of a product.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Version {
    /// The serial (`20240101`).
    pub serial: String,
    /// Its image files.
    pub items: Vec<Item>,
}

/// One image file of a version, as written (any field may be missing).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Item {
    /// `squashfs`, `lxd.tar.xz`, `disk-kvm.img`...
    pub ftype: Option<String>,
    /// Its path below the remote root.
    pub path: Option<String>,
    /// Its SHA-256, hex.
    pub sha256: Option<String>,
    /// Its length in bytes.
    pub size: Option<u64>,
}

/// The products files `index` names for LXD, relative to the remote root.
pub fn products_paths(index: &[u8]) -> Result<Vec<String>, FormatError> {
    let file = "streams/v1/index.json";
    let mut paths = Vec::new();
    let mut seen_index = false;
    let mut read = json::reader(index);
    let walked = members(&mut read, |json, name| match name {
        "index" => {
            seen_index = true;
            members(json, |json, _| -> Result<(), ReaderError> {
                if let Some(path) = index_entry(json)? {
                    paths.push(path);
                }
                Ok(())
            })
        }
        _ => json.skip_value(),
    })
    .and_then(|()| read.consume_trailing_whitespace());
    walked.map_err(|_| bad(file, "not JSON"))?;
    if !seen_index {
        return Err(bad(file, "no \"index\" object"));
    }
    paths.sort();
    paths.dedup();
    if paths.len() > MOST_PRODUCTS_FILES {
        return Err(bad(file, &format!("names more than {MOST_PRODUCTS_FILES} products files")));
    }
    Ok(paths)
}

/// The path of an index entry that names images for LXD: its `datatype` is
/// `image-downloads`, it lists products, and its path stays below the root.
fn index_entry<R: JsonReader>(json: &mut R) -> Result<Option<String>, ReaderError> {
    let (mut datatype, mut path, mut products) = (None, None, false);
    members(json, |json, name| -> Result<(), ReaderError> {
        match name {
            "datatype" => datatype = json::string(json)?,
            "path" => path = json::string(json)?,
            "products" => json::elements(json, |json| {
                products = true;
                json.skip_value()
            })?,
            _ => json.skip_value()?,
        }
        Ok(())
    })?;
    let named = datatype.as_deref() == Some("image-downloads") && products;
    Ok(path.filter(|path| named && is_safe(path)))
}

/// Calls `each` with every product of `products` (the products file at
/// `file`), one at a time: the file is never held as a tree, and what is
/// read of it (versions and items) is bounded by [`MOST_ITEMS`].
pub fn for_each_product(file: &str, products: &[u8], mut each: impl FnMut(Product)) -> Result<(), FormatError> {
    let (mut seen_products, mut records) = (false, 0usize);
    let mut read = json::reader(products);
    let walked = members(&mut read, |json, name| match name {
        "products" => {
            seen_products = true;
            members(json, |json, _| {
                each(product(json, &mut records)?);
                Ok(())
            })
        }
        _ => Ok(json.skip_value()?),
    })
    .and_then(|()| Ok(read.consume_trailing_whitespace()?));
    match walked {
        Err(Stopped::TooMany) => {
            return Err(bad(file, &format!("names more than {MOST_ITEMS} image files and versions")))
        }
        Err(Stopped::Json) => return Err(bad(file, "not JSON")),
        Ok(()) => {}
    }
    if !seen_products {
        return Err(bad(file, "no \"products\" object"));
    }
    Ok(())
}

/// One product, counting its versions and items into `records`: reading
/// stops (an error) past [`MOST_ITEMS`].
fn product<R: JsonReader>(json: &mut R, records: &mut usize) -> Result<Product, Stopped> {
    let mut product = Product::default();
    members(json, |json, name| -> Result<(), Stopped> {
        match name {
            "aliases" => product.aliases = json::string(json)?.unwrap_or_default(),
            "arch" => product.arch = json::string(json)?.unwrap_or_default(),
            "versions" => members(json, |json, serial| {
                let mut version = Version { serial: serial.to_owned(), items: Vec::new() };
                members(json, |json, name| match name {
                    "items" => members(json, |json, _| {
                        version.items.push(item(json)?);
                        counted(records)
                    }),
                    _ => Ok(json.skip_value()?),
                })?;
                product.versions.push(version);
                counted(records)
            })?,
            _ => json.skip_value()?,
        }
        Ok(())
    })?;
    Ok(product)
}

/// Why a products file's reading stopped.
#[derive(Debug)]
enum Stopped {
    /// It is not JSON (or not as deep as it goes).
    Json,
    /// It names more than [`MOST_ITEMS`] versions and items.
    TooMany,
}

impl From<ReaderError> for Stopped {
    fn from(_: ReaderError) -> Self {
        Stopped::Json
    }
}

/// One more record read: reading stops past [`MOST_ITEMS`].
fn counted(records: &mut usize) -> Result<(), Stopped> {
    *records += 1;
    match *records > MOST_ITEMS {
        true => Err(Stopped::TooMany),
        false => Ok(()),
    }
}

fn item<R: JsonReader>(json: &mut R) -> Result<Item, ReaderError> {
    let mut item = Item::default();
    members(json, |json, name| -> Result<(), ReaderError> {
        match name {
            "ftype" => item.ftype = json::string(json)?,
            "path" => item.path = json::string(json)?,
            "sha256" => item.sha256 = json::string(json)?,
            "size" => item.size = json::whole_number(json)?,
            _ => json.skip_value()?,
        }
        Ok(())
    })?;
    Ok(item)
}

fn bad(file: &str, reason: &str) -> FormatError {
    FormatError { file: file.to_string(), reason: reason.into() }
}

/// Every item `products` (the products file at `file`) names, by path
/// relative to the remote root. An item whose path could leave the remote
/// (absolute, `..`, a backslash) is dropped, never to be fetched.
pub fn items(file: &str, products: &[u8]) -> Result<BTreeMap<String, Sum>, FormatError> {
    let mut found = BTreeMap::new();
    for_each_product(file, products, |product| {
        for item in product.versions.into_iter().flat_map(|version| version.items) {
            let Some((path, sum)) = item_sum(item) else { continue };
            if is_safe(&path) {
                found.insert(path, sum);
            } else {
                tracing::warn!(file, path, "an item path that leaves the remote: never fetched");
            }
        }
    })?;
    Ok(found)
}

fn item_sum(item: Item) -> Option<(String, Sum)> {
    let sha256 = item.sha256?;
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((item.path?, Sum { sha256: sha256.to_ascii_lowercase(), size: item.size? }))
}

/// Whether `path` stays below the remote root: relative, no `.` or `..`
/// segment, no backslash or NUL, no empty segment.
pub fn is_safe(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains(['\\', '\0'])
        && path.split('/').all(|segment| !matches!(segment, "" | "." | ".."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SHA: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn the_index_names_the_image_downloads_products_files_only() {
        let index = json!({"format": "index:1.0", "index": {
            "a": {"datatype": "image-downloads", "path": "streams/v1/com.ubuntu.cloud:released:download.json", "products": ["p"]},
            "b": {"datatype": "image-ids", "path": "streams/v1/ids.json", "products": ["p"]},
            "c": {"datatype": "image-downloads", "path": "streams/v1/empty.json", "products": []},
            "d": {"datatype": "image-downloads", "path": "../outside.json", "products": ["p"]}}});
        let paths = products_paths(index.to_string().as_bytes()).unwrap();
        assert_eq!(paths, ["streams/v1/com.ubuntu.cloud:released:download.json"]);
        assert!(products_paths(b"<html>").is_err());
    }

    #[test]
    fn every_version_s_items_are_read_and_escaping_paths_dropped() {
        let item = |path: &str| json!({"ftype": "squashfs", "path": path, "sha256": SHA, "size": 7});
        let products = json!({"products": {"p": {"versions": {
            "20240101": {"items": {"a": item("server/a.squashfs"), "b": item("../../escaped/x"), "c": item("/abs")}},
            "20240102": {"items": {"a": item("server/b.squashfs"), "bad": {"path": "x", "sha256": "short", "size": 1}}}}}}});
        let items = items("p.json", products.to_string().as_bytes()).unwrap();
        assert_eq!(items.keys().collect::<Vec<_>>(), ["server/a.squashfs", "server/b.squashfs"]);
        assert_eq!(items["server/a.squashfs"], Sum { sha256: SHA.into(), size: 7 });
    }

    #[test]
    fn what_one_answer_may_name_is_bounded_and_what_no_one_reads_costs_nothing_to_keep() {
        let entry = |n: usize| {
            format!(r#""e{n}": {{"datatype": "image-downloads", "path": "streams/v1/p{n}.json", "products": ["x"]}}"#)
        };
        let index = |count: usize| {
            let entries: Vec<String> = (0..count).map(entry).collect();
            format!(r#"{{"index": {{{}}}}}"#, entries.join(","))
        };
        assert_eq!(products_paths(index(MOST_PRODUCTS_FILES).as_bytes()).unwrap().len(), MOST_PRODUCTS_FILES);
        assert!(products_paths(index(MOST_PRODUCTS_FILES + 1).as_bytes()).is_err());

        let items = |count: usize| {
            let items: Vec<String> = (0..count).map(|n| format!(r#""i{n}": {{}}"#)).collect();
            format!(r#"{{"products": {{"p": {{"versions": {{"v": {{"items": {{{}}}}}}}}}}}}}"#, items.join(","))
        };
        assert!(super::items("p.json", items(MOST_ITEMS - 1).as_bytes()).is_ok(), "the version counts too");
        let error = super::items("p.json", items(MOST_ITEMS).as_bytes()).unwrap_err();
        assert!(error.reason.contains("more than"), "{error}");
        // Members nobody reads, of any size and shape, are skipped.
        let padded = format!(r#"{{"products": {{}}, "pad": [{}0], "x": {{"y": [[[]]]}}}}"#, "0,".repeat(100_000));
        assert_eq!(super::items("p.json", padded.as_bytes()).unwrap().len(), 0);
    }

    #[test]
    fn only_paths_below_the_root_are_safe() {
        for safe in ["server/releases/noble/release-20240101/x.img", "images/a/b/20260511_05:24/rootfs.squashfs"] {
            assert!(is_safe(safe), "{safe}");
        }
        for unsafe_path in ["", "/etc/passwd", "a/../../b", "./a", "a\\b", "a//b", "a/"] {
            assert!(!is_safe(unsafe_path), "{unsafe_path}");
        }
    }
}
