//! What is left out of what pkgproxy shows or logs: an upstream's
//! credentials, written into its URL, are for pkgproxy alone.

/// `url` without its user information (`https://user:secret@host/` gives
/// `https://host/`): an instance's credentials are not for every client.
/// The same split the pools make ([`pkgproxy_upstream::userinfo`]), so
/// what is shown is what the pools show.
pub fn without_user(url: &str) -> String {
    pkgproxy_upstream::userinfo::split(url).url
}

#[cfg(test)]
mod tests {
    use super::without_user;

    #[test]
    fn user_information_is_left_out_of_urls() {
        assert_eq!(without_user("https://puller:secret@registry.lan:5000/v2"), "https://registry.lan:5000/v2");
        assert_eq!(without_user("http://a:b@c@mirror/debian?x=@"), "http://mirror/debian?x=@");
        assert_eq!(without_user("http://mirror.lan/debian"), "http://mirror.lan/debian");
        assert_eq!(without_user("mirror.lan:80"), "mirror.lan:80");
    }
}
