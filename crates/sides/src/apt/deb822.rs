//! The RFC 822-style format of Debian's `Release` and `Packages` files
//! (deb822): stanzas of `Field: value` lines, continuation lines starting
//! with a space, stanzas separated by blank lines. Pure functions over text,
//! no I/O; fuzzed with arbitrary input.

/// Strips an OpenPGP clear-signature (`InRelease`) down to the signed text;
/// text that is not clear-signed is returned as is. The signature itself is
/// apt's to check, not ours.
pub fn signed_text(text: &str) -> &str {
    const BEGIN: &str = "-----BEGIN PGP SIGNED MESSAGE-----";
    const SIGNATURE: &str = "\n-----BEGIN PGP SIGNATURE-----";
    let Some(after_begin) = text.trim_start().strip_prefix(BEGIN) else { return text };
    // Armor headers ("Hash: SHA512") end at the first empty line.
    let body = match after_begin.find("\n\n") {
        Some(end) => &after_begin[end + 2..],
        None => return "",
    };
    match body.find(SIGNATURE) {
        Some(end) => &body[..end],
        None => body,
    }
}

/// One field of a stanza: its name and its value, continuation lines
/// included (each still starting with its space).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    /// The name, as written.
    pub name: &'a str,
    /// The value: the rest of the first line, trimmed, then the continuation
    /// lines.
    pub value: &'a str,
}

/// Splits one stanza's text into fields. Lines that are neither a field nor
/// a continuation (garbage, a dash-escaped armor line) are skipped.
pub fn fields(stanza: &str) -> impl Iterator<Item = Field<'_>> {
    let mut rest = stanza;
    std::iter::from_fn(move || loop {
        if rest.is_empty() {
            return None;
        }
        let line_end = rest.find('\n').map_or(rest.len(), |i| i + 1);
        let line = &rest[..line_end];
        let start = rest;
        rest = &rest[line_end..];
        if line.starts_with([' ', '\t']) || line.trim().is_empty() {
            continue;
        }
        let Some(colon) = line.find(':') else { continue };
        let name = line[..colon].trim();
        // The value runs over the continuation lines that follow.
        let mut end = line_end;
        while rest.starts_with([' ', '\t']) {
            let next = rest.find('\n').map_or(rest.len(), |i| i + 1);
            end += next;
            rest = &rest[next..];
        }
        let value = start[colon + 1..end].trim();
        return Some(Field { name, value });
    })
}

/// Splits text into stanzas at blank lines.
pub fn stanzas(text: &str) -> impl Iterator<Item = &str> {
    text.split("\n\n").flat_map(|chunk| chunk.split("\n\r\n")).filter(|s| !s.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_signed_text_is_unwrapped() {
        let signed = "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nOrigin: Debian\nSuite: stable\n-----BEGIN PGP SIGNATURE-----\n\nabc\n-----END PGP SIGNATURE-----\n";
        assert_eq!(signed_text(signed), "Origin: Debian\nSuite: stable");
        assert_eq!(signed_text("Origin: Debian\n"), "Origin: Debian\n");
    }

    #[test]
    fn fields_with_continuation_lines() {
        let stanza = "Origin: Debian\nSHA256:\n abc 12 main/Packages\n def 34 main/Packages.xz\nDate: Sat, 01 Jan 2022 00:00:00 UTC\n";
        let found: Vec<Field> = fields(stanza).collect();
        assert_eq!(found.len(), 3);
        assert_eq!(found[0], Field { name: "Origin", value: "Debian" });
        assert_eq!(found[1].name, "SHA256");
        assert_eq!(found[1].value.lines().filter(|l| !l.trim().is_empty()).count(), 2);
        assert_eq!(found[2].value, "Sat, 01 Jan 2022 00:00:00 UTC");
    }

    #[test]
    fn stanzas_split_at_blank_lines() {
        let text = "Package: a\nFilename: pool/a.deb\n\nPackage: b\nFilename: pool/b.deb\n\n\n";
        assert_eq!(stanzas(text).count(), 2);
    }
}
