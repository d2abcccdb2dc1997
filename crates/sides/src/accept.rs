//! Weighted lists as `Accept` and `Accept-Encoding` write them: items
//! separated by commas, each a name and `;`-parameters, one of which may be
//! a weight `q=` (RFC 9110 §12.4.2). What a side or the server picks by a
//! client's list (a page's form, gzip) is decided by its caller; this reads
//! the list, the same way for all of them.

/// The items of `list` with their weights: each name (a media range such
/// as `text/html` or `*/*`, or a coding such as `gzip`) as written, spaces
/// trimmed, and its `q`, 1 when it has none or one that is not a number.
pub fn weighted(list: &str) -> impl Iterator<Item = (&str, f32)> {
    list.split(',').map(|item| {
        let mut parts = item.split(';').map(str::trim);
        let name = parts.next().unwrap_or_default();
        let q = parts.find_map(|parameter| parameter.strip_prefix("q=")).and_then(|q| q.trim().parse::<f32>().ok());
        (name, q.unwrap_or(1.0))
    })
}

/// The highest weight `list` gives any of `names` (compared without regard
/// to case), 0 when it names none of them: a caller names the wildcards
/// that count for it (`*/*`, `*`).
pub fn weight(list: &str, names: &[&str]) -> f32 {
    weighted(list)
        .filter(|(name, _)| names.iter().any(|wanted| name.eq_ignore_ascii_case(wanted)))
        .map(|(_, q)| q)
        .fold(0.0, f32::max)
}

/// Whether `list` takes one of `names`: an item names it with a weight
/// above 0 (`q=0` refuses it).
pub fn takes(list: &str, names: &[&str]) -> bool {
    weighted(list).any(|(name, q)| q > 0.0 && names.iter().any(|wanted| name.eq_ignore_ascii_case(wanted)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_names_with_a_weight_of_one_unless_they_say_otherwise() {
        let items: Vec<_> = weighted("text/html, application/json;q=0.5 , */*; q=0.1").collect();
        assert_eq!(items, [("text/html", 1.0), ("application/json", 0.5), ("*/*", 0.1)]);
    }

    #[test]
    fn a_weight_of_zero_refuses() {
        assert!(!takes("gzip;q=0", &["gzip"]));
        assert!(!takes("gzip; q=0.0", &["gzip"]));
        assert!(takes("gzip;q=0.001", &["gzip"]));
        assert_eq!(weight("application/json;q=0", &["application/json"]), 0.0);
    }

    #[test]
    fn wildcards_count_only_where_the_caller_names_them() {
        assert!(takes("br, *", &["gzip", "*"]));
        assert!(!takes("br, *", &["gzip"]));
        assert!(takes("gzip;q=0, *", &["gzip", "*"]), "the wildcard still takes gzip");
        assert_eq!(weight("*/*;q=0.2", &["text/html", "*/*"]), 0.2);
    }

    #[test]
    fn other_parameters_are_read_past() {
        assert!(!takes("text/html;charset=utf-8;q=0", &["text/html"]));
        assert_eq!(weight("text/html; level=1; q=0.7", &["text/html"]), 0.7);
        assert_eq!(weight("text/html; level=1", &["text/html"]), 1.0);
    }

    #[test]
    fn names_are_compared_without_regard_to_case() {
        assert!(takes("GZIP", &["gzip"]));
        assert_eq!(weight("Application/Vnd.PyPI.Simple.V1+JSON", &["application/vnd.pypi.simple.v1+json"]), 1.0);
    }

    #[test]
    fn spaces_around_items_parameters_and_weights_are_ignored() {
        assert_eq!(weight("  a ;  q= 0.5  ,b", &["a"]), 0.5);
        assert!(takes(" , gzip ", &["gzip"]));
    }

    #[test]
    fn a_weight_that_is_not_a_number_counts_as_one_and_nothing_named_as_zero() {
        assert_eq!(weight("a;q=high", &["a"]), 1.0);
        assert_eq!(weight("", &["a"]), 0.0);
        assert_eq!(weight("b", &["a"]), 0.0);
    }
}
