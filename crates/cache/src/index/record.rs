//! An entry as the index keeps it: a compact binary record (a format byte,
//! then the fields in postcard's encoding: integers as varints, the blob's
//! SHA-256 as its 32 bytes), a tenth of the JSON it replaces. A cache holds
//! hundreds of thousands of entries, and each is read from disk on its
//! first hit after a start.
//!
//! Indexes written before hold JSON records (they start with `{`): they are
//! read as they are, and each is written anew in this form the next time
//! its entry is written (a use, a revalidation), so a cache moves to it in
//! place as it is used, and a pkgproxy that only reads an index never
//! rewrites it.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::entry::{Class, Entry, Validators};

/// The first byte of a binary record (a JSON one starts with `{`).
const BINARY: u8 = 1;

/// A blob's SHA-256: its 32 bytes, or, for a name that is not 64 lower-case
/// hex digits (never written by the store, kept as it is all the same), the
/// name.
#[derive(Serialize, Deserialize)]
enum Digest<'a> {
    Bytes([u8; 32]),
    Text(Cow<'a, str>),
}

/// The fields of an entry, in the order they are written.
#[derive(Serialize, Deserialize)]
struct Record<'a> {
    sha256: Digest<'a>,
    size: u64,
    fetched_at: u64,
    last_used_ns: u64,
    class: Class,
    etag: Option<Cow<'a, str>>,
    last_modified: Option<Cow<'a, str>>,
    headers: Vec<(Cow<'a, str>, Cow<'a, str>)>,
}

/// `entry` as a record.
pub fn encode(entry: &Entry) -> Result<Vec<u8>, String> {
    let sha256 = match hex::decode(&entry.sha256) {
        Ok(bytes) if bytes.len() == 32 && entry.sha256.bytes().all(|b| !b.is_ascii_uppercase()) => {
            Digest::Bytes(bytes.try_into().expect("32 bytes"))
        }
        _ => Digest::Text(Cow::Borrowed(&entry.sha256)),
    };
    let record = Record {
        sha256,
        size: entry.size,
        fetched_at: entry.fetched_at,
        last_used_ns: entry.last_used_ns,
        class: entry.class,
        etag: entry.validators.etag.as_deref().map(Cow::Borrowed),
        last_modified: entry.validators.last_modified.as_deref().map(Cow::Borrowed),
        headers: entry.headers.iter().map(|(name, value)| (Cow::Borrowed(&**name), Cow::Borrowed(&**value))).collect(),
    };
    postcard::to_extend(&record, vec![BINARY]).map_err(|error| error.to_string())
}

/// The entry a record holds, in either form.
pub fn decode(record: &[u8]) -> Result<Entry, String> {
    match record.split_first() {
        Some((&BINARY, fields)) => {
            let record: Record<'_> = postcard::from_bytes(fields).map_err(|error| error.to_string())?;
            Ok(Entry {
                sha256: match record.sha256 {
                    Digest::Bytes(bytes) => hex::encode(bytes),
                    Digest::Text(name) => name.into_owned(),
                },
                size: record.size,
                headers: record
                    .headers
                    .into_iter()
                    .map(|(name, value)| (name.into_owned(), value.into_owned()))
                    .collect(),
                validators: Validators {
                    etag: record.etag.map(Cow::into_owned),
                    last_modified: record.last_modified.map(Cow::into_owned),
                },
                fetched_at: record.fetched_at,
                class: record.class,
                last_used_ns: record.last_used_ns,
            })
        }
        _ => serde_json::from_slice(record).map_err(|error| error.to_string()),
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
    fn an_entry_is_read_back_as_it_was_written_in_a_tenth_of_its_json() {
        let written = entry(&"ab".repeat(32));
        let record = encode(&written).unwrap();
        assert_eq!(decode(&record).unwrap(), written);
        let json = serde_json::to_vec(&written).unwrap();
        assert!(record.len() * 2 < json.len(), "{} bytes against {}", record.len(), json.len());
        assert!(record.len() < 120, "{}", record.len());
        let odd = entry("not-a-digest");
        assert_eq!(decode(&encode(&odd).unwrap()).unwrap(), odd);
        let upper = entry(&"AB".repeat(32));
        assert_eq!(decode(&encode(&upper).unwrap()).unwrap(), upper, "kept as written");
    }

    #[test]
    fn a_json_record_of_an_older_index_is_read_as_it_is() {
        let written = entry(&"cd".repeat(32));
        assert_eq!(decode(&serde_json::to_vec(&written).unwrap()).unwrap(), written);
        assert!(decode(b"{").is_err() && decode(&[BINARY, 0xff]).is_err() && decode(b"").is_err());
    }
}
