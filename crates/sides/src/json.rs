//! Reading upstream JSON as a stream (struson): what a side needs is read
//! member by member and everything else skipped as it goes by, so an answer
//! costs about its own size in memory, never a tree of the whole document
//! (which `serde_json::Value` makes at many times the size: a hostile
//! products file of 150 MB took 2.7 GB).
//!
//! Each helper consumes exactly the value it is at, whatever its type: a
//! member of an unexpected type is skipped, as unknown members are.

use struson::reader::{JsonReader, JsonStreamReader, ReaderError, ReaderSettings, ValueType};

/// A reader of `bytes`, without the path bookkeeping only error messages
/// would use.
pub fn reader(bytes: &[u8]) -> JsonStreamReader<&[u8]> {
    JsonStreamReader::new_custom(bytes, ReaderSettings { track_path: false, ..ReaderSettings::default() })
}

/// A reader of `input` (a file, say), as [`reader`] reads bytes.
pub fn stream_reader<R: std::io::Read>(input: R) -> JsonStreamReader<R> {
    JsonStreamReader::new_custom(input, ReaderSettings { track_path: false, ..ReaderSettings::default() })
}

/// Calls `each` with the name of every member of the object the reader is
/// at, the reader then at the member's value, which `each` must consume
/// (read or skip). Anything but an object is skipped. `each` may stop the
/// reading with an error of its own.
pub fn members<R: JsonReader, E: From<ReaderError>>(
    json: &mut R,
    mut each: impl FnMut(&mut R, &str) -> Result<(), E>,
) -> Result<(), E> {
    if json.peek()? != ValueType::Object {
        return Ok(json.skip_value()?);
    }
    json.begin_object()?;
    while json.has_next()? {
        let name = json.next_name_owned()?;
        each(json, &name)?;
    }
    Ok(json.end_object()?)
}

/// Calls `each` with the reader at every element of the array it is at;
/// `each` must consume it. Anything but an array is skipped.
pub fn elements<R: JsonReader, E: From<ReaderError>>(
    json: &mut R,
    mut each: impl FnMut(&mut R) -> Result<(), E>,
) -> Result<(), E> {
    if json.peek()? != ValueType::Array {
        return Ok(json.skip_value()?);
    }
    json.begin_array()?;
    while json.has_next()? {
        each(json)?;
    }
    Ok(json.end_array()?)
}

/// The string the reader is at; `None` (and skipped) for any other value.
pub fn string<R: JsonReader>(json: &mut R) -> Result<Option<String>, ReaderError> {
    match json.peek()? {
        ValueType::String => json.next_string().map(Some),
        _ => json.skip_value().map(|_| None),
    }
}

/// The whole number the reader is at; `None` (and skipped) for any other
/// value, a negative or fractional number among them.
pub fn whole_number<R: JsonReader>(json: &mut R) -> Result<Option<u64>, ReaderError> {
    match json.peek()? {
        ValueType::Number => Ok(json.next_number::<u64>()?.ok()),
        _ => json.skip_value().map(|_| None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_of_the_wrong_type_are_skipped_and_the_document_read_through() {
        let text = br#"{"a": "x", "b": 7, "c": [1, {"d": true}], "d": -1, "e": 1.5, "f": {"g": null}, "h": true}"#;
        let mut json = reader(text);
        let mut seen = Vec::new();
        members(&mut json, |json, name| -> Result<(), ReaderError> {
            match name {
                "a" | "c" => seen.push(format!("{name}={:?}", string(json)?)),
                "b" | "d" | "e" => seen.push(format!("{name}={:?}", whole_number(json)?)),
                _ => json.skip_value()?,
            }
            Ok(())
        })
        .unwrap();
        json.consume_trailing_whitespace().unwrap();
        assert_eq!(seen, ["a=Some(\"x\")", "b=Some(7)", "c=None", "d=None", "e=None"]);
    }

    #[test]
    fn what_is_not_json_or_too_deep_is_an_error_not_a_panic() {
        for bad in [&b"<html>"[..], b"{\"a\": ", b"{\"a\": 1} trailing", &[b'['; 100_000][..]] {
            let mut json = reader(bad);
            let read =
                members(&mut json, |json, _| json.skip_value()).and_then(|()| json.consume_trailing_whitespace());
            assert!(read.is_err(), "{:?}", String::from_utf8_lossy(&bad[..bad.len().min(20)]));
        }
    }
}
