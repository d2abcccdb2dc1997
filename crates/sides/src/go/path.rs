//! Module paths and versions as the module proxy protocol writes them: an
//! upper-case letter is `!` plus its lower-case form (`example.com/!hello`
//! is `example.com/Hello`), so paths stay distinct on case-insensitive file
//! systems. Every request is decoded to the real path, checked, and encoded
//! again, so one module has one cache key however the client spelt it.

/// The real form of a case-encoded element; `None` when it is malformed (an
/// upper-case letter, or `!` not followed by a lower-case letter).
pub fn unescape(escaped: &str) -> Option<String> {
    let mut real = String::with_capacity(escaped.len());
    let mut bang = false;
    for c in escaped.chars() {
        match (bang, c) {
            (true, 'a'..='z') => {
                real.push(c.to_ascii_uppercase());
                bang = false;
            }
            (true, _) => return None,
            (false, '!') => bang = true,
            (false, 'A'..='Z') => return None,
            (false, c) => real.push(c),
        }
    }
    (!bang).then_some(real)
}

/// The case-encoded form of a real path or version.
pub fn escape(real: &str) -> String {
    let mut escaped = String::with_capacity(real.len() + 4);
    for c in real.chars() {
        if c.is_ascii_uppercase() {
            escaped.push('!');
            escaped.push(c.to_ascii_lowercase());
        } else {
            escaped.push(c);
        }
    }
    escaped
}

/// Whether `path` is a module path pkgproxy will ask for: non-empty
/// elements of ASCII letters, digits and `-._~`, none `.` or `..` or
/// starting or ending with a dot, and a first element with a dot in it (a
/// domain), as the go command requires of what it fetches from a proxy.
pub fn is_module_path(path: &str) -> bool {
    if path.is_empty() || path.len() > 512 {
        return false;
    }
    let mut elements = path.split('/');
    let first_has_dot = elements.clone().next().is_some_and(|first| first.contains('.'));
    first_has_dot
        && elements.all(|element| {
            !element.is_empty()
                && !element.starts_with('.')
                && !element.ends_with('.')
                && element.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
        })
}

/// Whether `version` is one pkgproxy will ask for: a `v`, then ASCII
/// letters, digits and `-.+_~` (semantic versions, pseudo-versions,
/// `+incompatible`), no `..`.
pub fn is_version(version: &str) -> bool {
    version.len() <= 256
        && version.starts_with('v')
        && !version.contains("..")
        && version.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.+_~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_encoding_round_trips() {
        assert_eq!(unescape("example.com/!hello!caps").as_deref(), Some("example.com/HelloCaps"));
        assert_eq!(escape("example.com/HelloCaps"), "example.com/!hello!caps");
        assert_eq!(unescape("github.com/!burnt!sushi/toml").as_deref(), Some("github.com/BurntSushi/toml"));
        for malformed in ["example.com/Hello", "example.com/!", "example.com/!1", "x/!!a"] {
            assert_eq!(unescape(malformed), None, "{malformed}");
        }
    }

    #[test]
    fn module_paths_and_versions_are_checked() {
        assert!(is_module_path("example.com/hello"));
        assert!(is_module_path("golang.org/x/mod"));
        assert!(is_module_path("example.com/HelloCaps"));
        for bad in ["", "example", "example.com//x", "example.com/../x", "example.com/./x", "example.com/x y", "/x.com"]
        {
            assert!(!is_module_path(bad), "{bad:?}");
        }
        assert!(is_version("v1.0.0"));
        assert!(is_version("v0.0.0-20240101000000-abcdefabcdef"));
        assert!(is_version("v2.0.0+incompatible"));
        for bad in ["1.0.0", "v1/0", "v1..0", "v1 0", ""] {
            assert!(!is_version(bad), "{bad:?}");
        }
    }
}
