//! What a checksum database lookup says of a module version: the `h1:`
//! hashes of its zip and of its `go.mod`. The signature of the tree note is
//! the go command's to verify; pkgproxy only uses the hashes to refuse a
//! corrupt download before caching it.

/// The hashes a lookup record gives for one module version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sums {
    /// The zip's `h1:` hash.
    pub zip: Option<String>,
    /// The `go.mod`'s `h1:` hash.
    pub gomod: Option<String>,
}

/// Reads the lines `MODULE VERSION h1:...` and `MODULE VERSION/go.mod
/// h1:...` of a lookup record (module and version in their real form).
pub fn parse_lookup(record: &str, module: &str, version: &str) -> Sums {
    let mut sums = Sums::default();
    let gomod_version = format!("{version}/go.mod");
    for line in record.lines() {
        let mut fields = line.split(' ');
        let (Some(m), Some(v), Some(hash), None) = (fields.next(), fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        if m != module || !hash.starts_with("h1:") {
            continue;
        }
        if v == version {
            sums.zip = Some(hash.to_string());
        } else if v == gomod_version {
            sums.gomod = Some(hash.to_string());
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lookup_record_gives_both_hashes() {
        let record = "1234\nexample.com/m v1.0.0 h1:zip=\nexample.com/m v1.0.0/go.mod h1:mod=\n\ngo.sum database tree\n5\nabc=\n\n— sum.golang.org sig\n";
        let sums = parse_lookup(record, "example.com/m", "v1.0.0");
        assert_eq!(sums, Sums { zip: Some("h1:zip=".into()), gomod: Some("h1:mod=".into()) });
        assert_eq!(parse_lookup(record, "example.com/other", "v1.0.0"), Sums::default());
        assert_eq!(parse_lookup("garbage", "example.com/m", "v1.0.0"), Sums::default());
    }
}
