//! Sizes as the configuration file writes them: a number of bytes, or text
//! with a unit (`"64kb"`, `"1.5 MiB"`).

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
    /// The size in bytes.
    pub fn bytes(&self) -> Result<u64, String> {
        match self {
            Size::Bytes(bytes) => Ok(*bytes),
            Size::Text(text) => parse_size(text),
        }
    }
}

/// A size as written: a number of bytes, or text like `"64kb"`, `"1.5 MiB"`,
/// `"0"`. `kb`, `mb`, `gb` are powers of 1000, `kib`, `mib`, `gib` of 1024.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| format!("{text:?} is not a size like \"64kb\""))?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (b, kb, kib, mb, mib, gb, gib)")),
    };
    let bytes = number * factor as f64;
    if !bytes.is_finite() || bytes > u64::MAX as f64 {
        return Err(format!("{text:?} is too large"));
    }
    Ok(bytes.round() as u64)
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
}
