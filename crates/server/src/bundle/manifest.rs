//! Reading a bundle's manifest as a stream: item by item, from the file it
//! was staged in, each item's parts bounded before they are held. A
//! manifest may be large (a million items), and one written by hand may be
//! shaped to cost far more as values than as text (ten million headers in
//! one item); read whole, 100 MB of it took 3 GB. Read this way, an import
//! holds one item at a time, and a bundle past a bound is refused with it.

use std::io::Read;

use pkgproxy_sides::json;
use struson::reader::{JsonReader, ReaderError, ValueType};

use super::{is_sha256, Carried, Item, FORMAT};

/// The most items a bundle holds.
pub const MAX_ITEMS: usize = 1_000_000;
/// The most headers an item carries.
pub const MAX_HEADERS: usize = 64;
/// The longest URL, key, header or validator (bytes).
pub const MAX_TEXT: usize = 16 * 1024;

/// Why a manifest cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// Not the JSON of a manifest.
    #[error("it is not a manifest: {0}")]
    NotJson(String),
    /// Of a format this pkgproxy does not read.
    #[error("its format is {0}; this pkgproxy reads format {FORMAT}")]
    Format(u64),
    /// Larger than pkgproxy takes.
    #[error("{0}")]
    Bound(String),
    /// An item that cannot be used, by its number (from 1).
    #[error("item {number} ({label}) {why}")]
    Item {
        /// Its place in the manifest, from 1.
        number: usize,
        /// Its URL or key, as far as it was read.
        label: String,
        /// What is wrong with it.
        why: String,
    },
}

impl From<ReaderError> for ManifestError {
    fn from(error: ReaderError) -> Self {
        ManifestError::NotJson(error.to_string())
    }
}

/// What a manifest says besides its items.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contents {
    /// How many items it has.
    pub items: usize,
    /// The malicious-package records it carries.
    pub malicious: Option<Carried>,
}

/// Reads the manifest `input`, handing `each` every item in order with
/// its index; `each` may stop the reading with an error of its own. The
/// number of items and what else it carries, once the manifest is read
/// whole and its format is the one this pkgproxy reads.
pub fn read_items<E: From<ManifestError>>(
    input: impl Read,
    mut each: impl FnMut(usize, Item) -> Result<(), E>,
) -> Result<Contents, E> {
    let mut json = json::stream_reader(input);
    let (mut format, mut count, mut malicious) = (None, 0, None);
    let read = || -> Result<(), E> {
        if json.peek().map_err(ManifestError::from)? != ValueType::Object {
            return Err(ManifestError::NotJson("not an object".to_owned()).into());
        }
        json.begin_object().map_err(ManifestError::from)?;
        while json.has_next().map_err(ManifestError::from)? {
            match json.next_name_owned().map_err(ManifestError::from)?.as_str() {
                "format" => format = json::whole_number(&mut json).map_err(ManifestError::from)?,
                "items" => items(&mut json, &mut count, &mut each)?,
                "malicious" => malicious = Some(carried(&mut json, "malicious")?),
                _ => json.skip_value().map_err(ManifestError::from)?,
            }
        }
        json.end_object().map_err(ManifestError::from)?;
        json.consume_trailing_whitespace().map_err(ManifestError::from)?;
        Ok(())
    };
    read()?;
    match format {
        Some(format) if format == u64::from(FORMAT) => Ok(Contents { items: count, malicious }),
        Some(other) => Err(ManifestError::Format(other).into()),
        None => Err(ManifestError::NotJson("it says no format".to_owned()).into()),
    }
}

/// A carried file the reader is at (`what` names it): its hash and size.
fn carried<R: JsonReader>(json: &mut R, what: &str) -> Result<Carried, ManifestError> {
    let (mut sha256, mut size) = (None, None);
    let parsed = json::members(json, |json, name| -> Result<(), Bounded> {
        match name {
            "sha256" => sha256 = Some(text(json, "its sha256")?),
            "size" => size = json::whole_number(json)?,
            _ => json.skip_value()?,
        }
        Ok(())
    });
    let bad = |why: String| ManifestError::Bound(format!("its {what} {why}"));
    match parsed {
        Ok(()) => {}
        Err(Bounded::Json(error)) => return Err(error.into()),
        Err(Bounded::Over(why)) => return Err(bad(why)),
    }
    let sha256 = sha256.filter(|sha| is_sha256(sha)).ok_or_else(|| bad("has no SHA-256 in lower-case hex".into()))?;
    Ok(Carried { sha256, size: size.ok_or_else(|| bad("says no size".into()))? })
}

/// The items array, each item handed to `each`.
fn items<R: JsonReader, E: From<ManifestError>>(
    json: &mut R,
    count: &mut usize,
    each: &mut impl FnMut(usize, Item) -> Result<(), E>,
) -> Result<(), E> {
    if json.peek().map_err(ManifestError::from)? != ValueType::Array {
        return Err(ManifestError::NotJson("its items are not a list".to_owned()).into());
    }
    json.begin_array().map_err(ManifestError::from)?;
    while json.has_next().map_err(ManifestError::from)? {
        if *count == MAX_ITEMS {
            return Err(ManifestError::Bound(format!("it has more than {MAX_ITEMS} items")).into());
        }
        let item = item(json, *count + 1)?;
        each(*count, item)?;
        *count += 1;
    }
    json.end_array().map_err(ManifestError::from)?;
    Ok(())
}

/// The item the reader is at, the `number`th: read within its bounds and
/// checked as a name a cache can use.
fn item<R: JsonReader>(json: &mut R, number: usize) -> Result<Item, ManifestError> {
    let mut read = Parts::default();
    let label = |read: &Parts| read.url.clone().or_else(|| read.key.clone()).unwrap_or_default();
    let parsed = json::members(json, |json, name| -> Result<(), Bounded> {
        match name {
            "url" => read.url = Some(text(json, "its url")?),
            "key" => read.key = Some(text(json, "its key")?),
            "sha256" => read.sha256 = Some(text(json, "its sha256")?),
            "etag" => read.etag = Some(text(json, "its etag")?),
            "last_modified" => read.last_modified = Some(text(json, "its last_modified")?),
            "size" => read.size = json::whole_number(json)?,
            "fetched_at" => read.fetched_at = json::whole_number(json)?,
            "record" => read.record = json.next_bool()?,
            "headers" => read.headers = headers(json)?,
            _ => json.skip_value()?,
        }
        Ok(())
    });
    let label = label(&read);
    let why = match parsed {
        Ok(()) => return read.into_item().map_err(|why| ManifestError::Item { number, label, why }),
        Err(Bounded::Json(error)) => return Err(error.into()),
        Err(Bounded::Over(why)) => why,
    };
    Err(ManifestError::Item { number, label, why })
}

/// An item as read, its parts still to be checked.
#[derive(Default)]
struct Parts {
    url: Option<String>,
    key: Option<String>,
    sha256: Option<String>,
    size: Option<u64>,
    headers: Vec<(String, String)>,
    etag: Option<String>,
    last_modified: Option<String>,
    fetched_at: Option<u64>,
    record: bool,
}

impl Parts {
    fn into_item(self) -> Result<Item, String> {
        let sha256 = self.sha256.filter(|sha| is_sha256(sha)).ok_or("has no SHA-256 in lower-case hex")?;
        let key = self.key.filter(|key| !key.is_empty()).ok_or("has no key")?;
        if self.url.as_deref().is_some_and(str::is_empty) {
            return Err("has an empty url".to_owned());
        }
        Ok(Item {
            url: self.url,
            key,
            sha256,
            size: self.size.ok_or("says no size")?,
            headers: self.headers,
            etag: self.etag,
            last_modified: self.last_modified,
            fetched_at: self.fetched_at.unwrap_or(0),
            record: self.record,
        })
    }
}

/// Reading an item stopped: the JSON broke, or a part is past its bound.
enum Bounded {
    Json(ReaderError),
    Over(String),
}

impl From<ReaderError> for Bounded {
    fn from(error: ReaderError) -> Self {
        Bounded::Json(error)
    }
}

/// The string the reader is at, at most [`MAX_TEXT`] bytes of it held.
fn text<R: JsonReader>(json: &mut R, what: &str) -> Result<String, Bounded> {
    if json.peek()? != ValueType::String {
        return Err(Bounded::Over(format!("has {what} that is not a string")));
    }
    let mut value = String::new();
    let mut reader = json.next_string_reader()?.take(MAX_TEXT as u64 + 1);
    reader
        .read_to_string(&mut value)
        .map_err(|error| Bounded::Over(format!("has {what} that cannot be read: {error}")))?;
    match value.len() > MAX_TEXT {
        true => Err(Bounded::Over(format!("has {what} longer than {MAX_TEXT} bytes"))),
        false => Ok(value),
    }
}

/// The headers the reader is at: at most [`MAX_HEADERS`] pairs of strings.
fn headers<R: JsonReader>(json: &mut R) -> Result<Vec<(String, String)>, Bounded> {
    let mut headers = Vec::new();
    if json.peek()? != ValueType::Array {
        return Err(Bounded::Over("has headers that are not a list".to_owned()));
    }
    json.begin_array()?;
    while json.has_next()? {
        if headers.len() == MAX_HEADERS {
            return Err(Bounded::Over(format!("has more than {MAX_HEADERS} headers")));
        }
        if json.peek()? != ValueType::Array {
            return Err(Bounded::Over("has a header that is not a [name, value] pair".to_owned()));
        }
        json.begin_array()?;
        let mut pair = Vec::with_capacity(2);
        while json.has_next()? {
            if pair.len() == 2 {
                return Err(Bounded::Over("has a header that is not a [name, value] pair".to_owned()));
            }
            pair.push(text(json, "a header")?);
        }
        json.end_array()?;
        let (Some(value), Some(name)) = (pair.pop(), pair.pop()) else {
            return Err(Bounded::Over("has a header that is not a [name, value] pair".to_owned()));
        };
        headers.push((name, value));
    }
    json.end_array()?;
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    fn items_of(text: &str) -> Result<Vec<Item>, ManifestError> {
        let mut found = Vec::new();
        read_items(text.as_bytes(), |index, item| {
            assert_eq!(index, found.len());
            found.push(item);
            Ok::<_, ManifestError>(())
        })?;
        Ok(found)
    }

    #[test]
    fn a_manifest_is_read_item_by_item_as_written() {
        let item = Item {
            url: Some("/go/example.com/m/@v/list".into()),
            key: "go/example.com/m/@v/list".into(),
            sha256: SHA.into(),
            size: 4,
            headers: vec![("content-type".into(), "text/plain".into())],
            etag: Some("\"x\"".into()),
            last_modified: None,
            fetched_at: 1_790_000_000,
            record: false,
        };
        let manifest = super::super::Manifest {
            format: FORMAT,
            pkgproxy: "t".into(),
            created: 1,
            items: vec![item.clone(); 3],
            malicious: None,
        };
        let read = items_of(&serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
        assert_eq!(read, vec![item; 3]);
        let format_last = format!(r#"{{"items": [], "extra": {{"x": [1]}}, "format": {FORMAT}}}"#);
        assert_eq!(items_of(&format_last).unwrap(), vec![]);
        let records = Carried { sha256: SHA.into(), size: 9 };
        let carrying = super::super::Manifest { malicious: Some(records.clone()), ..manifest };
        let text = serde_json::to_string(&carrying).unwrap();
        let read = read_items(text.as_bytes(), |_, _| Ok::<_, ManifestError>(())).unwrap();
        assert_eq!(read, Contents { items: 3, malicious: Some(records) });
    }

    #[test]
    fn a_manifest_past_its_bounds_or_not_one_is_refused_saying_why() {
        let refused = |text: String| items_of(&text).unwrap_err().to_string();
        let one = |fields: &str| format!(r#"{{"format": {FORMAT}, "items": [{{"key": "k", "size": 1, {fields}}}]}}"#);
        let many_headers =
            format!(r#""sha256": "{SHA}", "headers": [{}]"#, vec![r#"["a","b"]"#; MAX_HEADERS + 1].join(","));
        assert!(refused(one(&many_headers)).contains("more than 64 headers"));
        let long_url = format!(r#""sha256": "{SHA}", "url": "/{}""#, "a".repeat(MAX_TEXT));
        assert!(refused(one(&long_url)).contains("its url longer than"));
        assert!(refused(one(r#""sha256": "ABC""#)).starts_with("item 1 (k) has no SHA-256"));
        assert!(refused(one(&format!(r#""sha256": "{SHA}", "headers": [["a"]]"#))).contains("pair"));
        assert!(refused(one(&format!(r#""sha256": "{SHA}", "headers": [["a", 1]]"#))).contains("not a string"));
        assert!(refused(one(&format!(r#""sha256": "{SHA}", "headers": [["a", "b", "c"]]"#))).contains("pair"));
        assert!(refused(format!(r#"{{"format": {}, "items": []}}"#, FORMAT + 1)).contains("its format is 2"));
        assert!(refused(r#"{"items": []}"#.to_owned()).contains("no format"));
        let unhashed = format!(r#"{{"format": {FORMAT}, "items": [], "malicious": {{"sha256": "ABC", "size": 1}}}}"#);
        assert!(refused(unhashed).contains("its malicious has no SHA-256"));
        assert!(refused("[1, 2]".to_owned()).contains("not an object"));
        assert!(refused(r#"{"format": 1, "items": [{"key": "#.to_owned()).contains("not a manifest"));
        assert!(refused(format!(r#"{{"format": {FORMAT}, "items": []}} trailing"#)).contains("not a manifest"));
    }
}
