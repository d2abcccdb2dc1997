//! What is left out of what pkgproxy shows or logs: an upstream's
//! credentials, written into its URL, are for pkgproxy alone.

/// `url` without its user information (`https://user:secret@host/` gives
/// `https://host/`): an instance's credentials are not for every client.
/// The same split the pools make ([`pkgproxy_upstream::userinfo`]), so
/// what is shown is what the pools show.
pub fn without_user(url: &str) -> String {
    pkgproxy_upstream::userinfo::split(url).url
}

/// `text` with the user information left out of every URL in it (a
/// side's error naming a configured mirror, credentials and all).
pub fn urls_in(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start = rest[..at].rfind(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c))).map_or(0, |i| i + 1);
        let end = rest[at..].find(|c: char| c.is_whitespace() || "\"'<>,".contains(c)).map_or(rest.len(), |i| at + i);
        shown.push_str(&rest[..start]);
        shown.push_str(&without_user(&rest[start..end]));
        rest = &rest[end..];
    }
    shown.push_str(rest);
    shown
}

#[cfg(test)]
mod tests {
    use super::{urls_in, without_user};

    #[test]
    fn user_information_is_left_out_of_every_url_in_a_text() {
        let said = r#"go.proxies: "https://u:s3cret@/x" is not a URL; also http://a:b@mirror/debian, and ftp://t@h"#;
        assert_eq!(urls_in(said), r#"go.proxies: "https:///x" is not a URL; also http://mirror/debian, and ftp://h"#);
        assert_eq!(urls_in("nothing here"), "nothing here");
    }

    #[test]
    fn user_information_is_left_out_of_urls() {
        assert_eq!(without_user("https://puller:secret@registry.lan:5000/v2"), "https://registry.lan:5000/v2");
        assert_eq!(without_user("http://a:b@c@mirror/debian?x=@"), "http://mirror/debian?x=@");
        assert_eq!(without_user("http://mirror.lan/debian"), "http://mirror.lan/debian");
        assert_eq!(without_user("mirror.lan:80"), "mirror.lan:80");
    }
}
