//! The simplestreams format as LXD reads it: the index names products
//! files, and each products file names the image files of every version it
//! keeps, with their sha256 and size. Only what LXD itself uses is read:
//! index entries whose `datatype` is `image-downloads`, and every item of
//! every version (older serials included: a daemon may hold a products file
//! for an hour or more and fetch from it).

use std::collections::BTreeMap;

use serde_json::Value;

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

/// The products files `index` names for LXD, relative to the remote root.
pub fn products_paths(index: &[u8]) -> Result<Vec<String>, FormatError> {
    let bad = |reason: &str| FormatError { file: "streams/v1/index.json".into(), reason: reason.into() };
    let index: Value = serde_json::from_slice(index).map_err(|_| bad("not JSON"))?;
    let entries = index.get("index").and_then(Value::as_object).ok_or_else(|| bad("no \"index\" object"))?;
    let mut paths: Vec<String> = entries
        .values()
        .filter(|entry| entry.get("datatype").and_then(Value::as_str) == Some("image-downloads"))
        .filter(|entry| entry.get("products").and_then(Value::as_array).is_some_and(|p| !p.is_empty()))
        .filter_map(|entry| entry.get("path")?.as_str())
        .filter(|path| is_safe(path))
        .map(str::to_string)
        .collect();
    paths.sort();
    paths.dedup();
    Ok(paths)
}

/// Every item `products` (the products file at `file`) names, by path
/// relative to the remote root. An item whose path could leave the remote
/// (absolute, `..`, a backslash) is dropped, never to be fetched.
pub fn items(file: &str, products: &[u8]) -> Result<BTreeMap<String, Sum>, FormatError> {
    let bad = |reason: &str| FormatError { file: file.to_string(), reason: reason.into() };
    let products: Value = serde_json::from_slice(products).map_err(|_| bad("not JSON"))?;
    let products = products.get("products").and_then(Value::as_object).ok_or_else(|| bad("no \"products\" object"))?;
    let items = products
        .values()
        .filter_map(|product| product.get("versions")?.as_object())
        .flat_map(|versions| versions.values())
        .filter_map(|version| version.get("items")?.as_object())
        .flat_map(|items| items.values());
    let mut found = BTreeMap::new();
    for item in items {
        let Some((path, sum)) = item_sum(item) else { continue };
        if is_safe(path) {
            found.insert(path.to_string(), sum);
        } else {
            tracing::warn!(file, path, "an item path that leaves the remote: never fetched");
        }
    }
    Ok(found)
}

fn item_sum(item: &Value) -> Option<(&str, Sum)> {
    let path = item.get("path")?.as_str()?;
    let sha256 = item.get("sha256")?.as_str()?;
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let size = item.get("size")?.as_u64()?;
    Some((path, Sum { sha256: sha256.to_ascii_lowercase(), size }))
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
    fn only_paths_below_the_root_are_safe() {
        for safe in ["server/releases/noble/release-20240101/x.img", "images/a/b/20260511_05:24/rootfs.squashfs"] {
            assert!(is_safe(safe), "{safe}");
        }
        for unsafe_path in ["", "/etc/passwd", "a/../../b", "./a", "a\\b", "a//b", "a/"] {
            assert!(!is_safe(unsafe_path), "{unsafe_path}");
        }
    }
}
