//! Sizes as the configuration file writes them: a number of bytes, or text
//! with a unit (`"64kb"`, `"1.5 MiB"`, `"50GiB"`). The one reading of a size
//! for every key that takes one; the units are `bytesize`'s.

use serde::Deserialize;

/// A size: a number of bytes, or text with a unit (`"64kb"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Size {
    /// A number of bytes (`65536`).
    Bytes(u64),
    /// Text with a unit (`"64kb"`).
    Text(String),
}

impl Size {
    /// The size in bytes, or why the text is not one.
    pub fn bytes(&self) -> Result<u64, String> {
        match self {
            Size::Bytes(bytes) => Ok(*bytes),
            Size::Text(text) => {
                parse_size(text).map_err(|reason| format!("{text:?} is not a size like \"64kb\": {reason}"))
            }
        }
    }
}

/// A size as written: a number of bytes, or text like `"64kb"`, `"1.5 MiB"`,
/// `"0"`, surrounding spaces ignored. `kb`, `mb`, `gb` (and `k`, `m`, `g`)
/// are powers of 1000, `kib`, `mib`, `gib` of 1024, in any case; a fraction
/// of a byte is dropped. The error is `bytesize`'s reason, for the caller to
/// put after the key and value it names.
pub fn parse_size(text: &str) -> Result<u64, String> {
    text.trim().parse::<bytesize::ByteSize>().map(|size| size.as_u64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("64kb"), Ok(64_000));
        assert_eq!(parse_size("64 KiB"), Ok(65_536));
        assert_eq!(parse_size("1.5mb"), Ok(1_500_000));
        assert_eq!(parse_size("2048"), Ok(2048));
        assert!(parse_size("kb").is_err());
        assert!(parse_size("-1").is_err());
    }

    #[test]
    fn the_units_the_documentation_names_are_read_in_any_case_and_spacing() {
        for (text, bytes) in [
            (" 1b ", 1),
            ("1k", 1_000),
            ("1 MB", 1_000_000),
            ("2G", 2_000_000_000),
            ("1gb", 1_000_000_000),
            ("1MiB", 1 << 20),
            ("1 gib", 1 << 30),
            ("50GiB", 50 << 30),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn text_that_is_not_a_size_says_so_with_its_key_s_value() {
        let error = Size::Text("64 parsecs".into()).bytes().unwrap_err();
        assert!(error.starts_with("\"64 parsecs\" is not a size"), "{error}");
        assert_eq!(Size::Bytes(7).bytes(), Ok(7));
    }
}
