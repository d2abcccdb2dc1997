//! An entry as the index keeps it: a compact binary record (a format byte,
//! then the fields in postcard's encoding: integers as varints, the blob's
//! SHA-256 as its 32 bytes, a well-known header name or value as its place
//! in [`WORDS`]), a fifth of the JSON it replaces. A cache holds hundreds
//! of thousands of entries, and each is read from disk on its first hit
//! after a start.
//!
//! Indexes written before hold JSON records (they start with `{`) or
//! binary ones with every header as text (format 1): they are read as
//! they are, and each is written anew in this form the next time its entry
//! is written (a use, a revalidation), so a cache moves to it in place as
//! it is used, and a pkgproxy that only reads an index never rewrites it.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::entry::{Class, Entry, Validators};

/// The first byte of a binary record whose headers are all text (a JSON
/// one starts with `{`).
const BINARY: u8 = 1;
/// The first byte of a binary record naming well-known header words by
/// their place in [`WORDS`].
const WORDED: u8 = 2;

/// Header names and values most entries hold (a package's content type is
/// 30 to 60 bytes, and the same for thousands of entries). A record names
/// one by its place here, so this list is only ever appended to.
const WORDS: [&str; 40] = [
    "content-type",
    "content-encoding",
    "content-disposition",
    "content-language",
    "application/octet-stream",
    "binary/octet-stream",
    "application/vnd.debian.binary-package",
    "application/x-debian-package",
    "application/x-deb",
    "application/json",
    "application/json; charset=utf-8",
    "text/plain",
    "text/plain; charset=utf-8",
    "text/html",
    "text/html; charset=utf-8",
    "application/gzip",
    "application/x-gzip",
    "application/x-xz",
    "application/x-bzip2",
    "application/zstd",
    "application/x-tar",
    "application/zip",
    "application/pgp-signature",
    "application/vnd.snap",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.config.v1+json",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.container.image.v1+json",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.pypi.simple.v1+json",
    "application/vnd.pypi.simple.v1+html",
    "application/vnd.npm.install-v1+json",
    "application/x-tgz",
    "gzip",
    "xz",
    "zstd",
];

/// A blob's SHA-256: its 32 bytes, or, for a name that is not 64 lower-case
/// hex digits (never written by the store, kept as it is all the same), the
/// name.
#[derive(Serialize, Deserialize)]
enum Digest<'a> {
    Bytes([u8; 32]),
    Text(Cow<'a, str>),
}

/// A header name or value: its place in [`WORDS`], or the text.
#[derive(Serialize, Deserialize)]
enum Word<'a> {
    Known(u8),
    Text(Cow<'a, str>),
}

/// The fields of an entry, in the order they are written; `H` is how a
/// header name or value is written (text in format 1, a [`Word`] now).
#[derive(Serialize, Deserialize)]
struct Record<'a, H> {
    sha256: Digest<'a>,
    size: u64,
    fetched_at: u64,
    last_used_ns: u64,
    class: Class,
    etag: Option<Cow<'a, str>>,
    last_modified: Option<Cow<'a, str>>,
    headers: Vec<(H, H)>,
}

/// The 32 bytes of a SHA-256 written as 64 lower-case hex digits (as the
/// store names every blob); `None` for any other name.
pub fn digest_bytes(name: &str) -> Option<[u8; 32]> {
    if name.len() != 64 || name.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut bytes = [0; 32];
    hex::decode_to_slice(name, &mut bytes).ok()?;
    Some(bytes)
}

impl<'a> Word<'a> {
    fn of(text: &'a str) -> Self {
        match WORDS.iter().position(|word| *word == text) {
            Some(place) => Word::Known(place as u8),
            None => Word::Text(Cow::Borrowed(text)),
        }
    }

    fn into_text(self) -> Result<String, String> {
        match self {
            Word::Known(place) => {
                WORDS.get(usize::from(place)).map(|word| word.to_string()).ok_or(format!("no header word {place}"))
            }
            Word::Text(text) => Ok(text.into_owned()),
        }
    }
}

/// `entry` as a record.
pub fn encode(entry: &Entry) -> Result<Vec<u8>, String> {
    let sha256 = match digest_bytes(&entry.sha256) {
        Some(bytes) => Digest::Bytes(bytes),
        None => Digest::Text(Cow::Borrowed(&entry.sha256)),
    };
    let record = Record {
        sha256,
        size: entry.size,
        fetched_at: entry.fetched_at,
        last_used_ns: entry.last_used_ns,
        class: entry.class,
        etag: entry.validators.etag.as_deref().map(Cow::Borrowed),
        last_modified: entry.validators.last_modified.as_deref().map(Cow::Borrowed),
        headers: entry.headers.iter().map(|(name, value)| (Word::of(name), Word::of(value))).collect(),
    };
    postcard::to_extend(&record, vec![WORDED]).map_err(|error| error.to_string())
}

/// The entry a record holds, in any of its forms.
pub fn decode(record: &[u8]) -> Result<Entry, String> {
    match record.split_first() {
        Some((&WORDED, fields)) => {
            let record: Record<'_, Word<'_>> = postcard::from_bytes(fields).map_err(|error| error.to_string())?;
            record.into_entry(Word::into_text)
        }
        Some((&BINARY, fields)) => {
            let record: Record<'_, Cow<'_, str>> = postcard::from_bytes(fields).map_err(|error| error.to_string())?;
            record.into_entry(|text| Ok(text.into_owned()))
        }
        _ => serde_json::from_slice(record).map_err(|error| error.to_string()),
    }
}

impl<H> Record<'_, H> {
    /// The entry, each header name and value read by `text`.
    fn into_entry(self, text: impl Fn(H) -> Result<String, String>) -> Result<Entry, String> {
        let headers = self
            .headers
            .into_iter()
            .map(|(name, value)| Ok((text(name)?, text(value)?)))
            .collect::<Result<_, String>>()?;
        Ok(Entry {
            sha256: match self.sha256 {
                Digest::Bytes(bytes) => hex::encode(bytes),
                Digest::Text(name) => name.into_owned(),
            },
            size: self.size,
            headers,
            validators: Validators {
                etag: self.etag.map(Cow::into_owned),
                last_modified: self.last_modified.map(Cow::into_owned),
            },
            fetched_at: self.fetched_at,
            class: self.class,
            last_used_ns: self.last_used_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(sha256: &str) -> Entry {
        Entry {
            sha256: sha256.to_owned(),
            size: 1_234_567,
            headers: vec![("content-type".into(), "application/vnd.debian.binary-package".into())],
            validators: Validators { etag: Some("\"5f3a-61b\"".into()), last_modified: None },
            fetched_at: 1_790_000_000,
            class: Class::Revalidated,
            last_used_ns: 1_790_000_000_123_456_789,
        }
    }

    #[test]
    fn an_entry_is_read_back_as_it_was_written_in_a_fifth_of_its_json() {
        let written = entry(&"ab".repeat(32));
        let record = encode(&written).unwrap();
        assert_eq!(decode(&record).unwrap(), written);
        let json = serde_json::to_vec(&written).unwrap();
        assert!(record.len() * 4 < json.len(), "{} bytes against {}", record.len(), json.len());
        assert!(record.len() <= 70, "{}", record.len());
        let odd = entry("not-a-digest");
        assert_eq!(decode(&encode(&odd).unwrap()).unwrap(), odd);
        let upper = entry(&"AB".repeat(32));
        assert_eq!(decode(&encode(&upper).unwrap()).unwrap(), upper, "kept as written");
        let mut unknown = entry(&"cd".repeat(32));
        unknown.headers =
            vec![("content-type".into(), "application/x-made-up".into()), ("x-other".into(), "gzip".into())];
        assert_eq!(decode(&encode(&unknown).unwrap()).unwrap(), unknown, "words not in the list are text");
    }

    #[test]
    fn a_record_with_its_headers_as_text_is_read_as_it_is() {
        let written = entry(&"ef".repeat(32));
        let headers = written.headers.iter().map(|(name, value)| (Cow::Borrowed(&**name), Cow::Borrowed(&**value)));
        let format_1 = Record {
            sha256: Digest::Bytes(digest_bytes(&written.sha256).unwrap()),
            size: written.size,
            fetched_at: written.fetched_at,
            last_used_ns: written.last_used_ns,
            class: written.class,
            etag: written.validators.etag.as_deref().map(Cow::Borrowed),
            last_modified: None,
            headers: headers.collect(),
        };
        let record = postcard::to_extend(&format_1, vec![BINARY]).unwrap();
        assert_eq!(decode(&record).unwrap(), written);
        assert!(encode(&written).unwrap().len() + 40 < record.len(), "the content type as a word");
    }

    #[test]
    fn a_word_beyond_the_list_makes_the_record_unreadable() {
        let mut record = encode(&entry(&"ab".repeat(32))).unwrap();
        let place = record.len() - 1;
        assert_eq!(record[place], 6, "the last byte is the content type's place");
        record[place] = WORDS.len() as u8;
        assert!(decode(&record).is_err());
    }

    #[test]
    fn a_json_record_of_an_older_index_is_read_as_it_is() {
        let written = entry(&"cd".repeat(32));
        assert_eq!(decode(&serde_json::to_vec(&written).unwrap()).unwrap(), written);
        assert!(decode(b"{").is_err() && decode(&[BINARY, 0xff]).is_err() && decode(b"").is_err());
    }
}
