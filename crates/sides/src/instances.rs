//! The instances of one upstream pool as a side's section names them
//! (`[go] proxies`, `[snap] stores`, each `[[registry.upstream]]` and
//! `[[lxd.remote]]`): each a base URL; the side's built-in one when none is
//! configured; the configured ones trusted on local addresses; all of them
//! replaced by the parent pkgproxy's endpoint for them when there is a
//! parent.

use crate::decision::{Located, Origin};

/// The instances of one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instances {
    urls: Vec<String>,
    built_in: Option<&'static str>,
}

impl Instances {
    /// `configured`, or `built_in` when none is, each checked as a base
    /// URL. `Err`: the URL at fault and why.
    pub fn new(configured: &[String], built_in: Option<&'static str>) -> Result<Instances, String> {
        let urls: Vec<String> = match (configured.is_empty(), built_in) {
            (true, Some(built_in)) => vec![built_in.to_owned()],
            _ => configured.to_vec(),
        };
        let checked = urls.iter().map(|url| crate::path::base_url(url).map_err(|reason| format!("{url:?} {reason}")));
        Ok(Instances { urls: checked.collect::<Result<_, _>>()?, built_in })
    }

    /// The built-in instance `url` alone (checked by the side's tests).
    pub fn built_in(url: &'static str) -> Instances {
        Instances { urls: vec![url.to_owned()], built_in: Some(url) }
    }

    /// Their base URLs, in the configured order.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// The configured ones, not the built-in: these may be on local
    /// addresses (each on its own port only).
    pub fn trusted_urls(&self) -> Vec<String> {
        self.urls.iter().filter(|url| Some(url.as_str()) != self.built_in).cloned().collect()
    }

    /// The path below one of the instances' base URLs at which `url` is,
    /// starting with `/`. The instances' credentials are left out of the
    /// comparison (a registry names its own links without them); a `url`
    /// that carries credentials of its own is on no instance.
    pub fn path_below<'u>(&self, url: &'u str) -> Option<&'u str> {
        self.urls.iter().find_map(|base| path_below(base, url))
    }

    /// The instance on whose origin (scheme, host and port) `url` is, as
    /// `scheme://[user:password@]host[:port]`: a file a registry serves
    /// from its own host, beside its index, is fetched with that
    /// instance's credentials, which go to that origin alone.
    pub fn origin_of(&self, url: &str) -> Option<String> {
        let asked = UrlParts::of(url).filter(|asked| asked.userinfo.is_none())?;
        self.urls.iter().find_map(|base| {
            let instance = UrlParts::of(base)?;
            instance.same_origin(&asked).then(|| instance.origin_with_userinfo())
        })
    }

    /// A file at `url` (absolute, with a path), fetched through the pool
    /// `pool`: on an instance's host with that instance's credentials, as
    /// the registry's own; elsewhere as a foreign host's, without any.
    pub fn locate(&self, pool: String, url: &str) -> Option<Located> {
        let (scheme, rest) = url.split_once("://")?;
        let slash = rest.find('/')?;
        let path = rest[slash..].to_owned();
        match self.origin_of(url) {
            Some(instance) => Some(Located::at_registry(Origin { pool, instances: vec![instance], path })),
            None => {
                Some(Located::foreign(Origin { pool, instances: vec![format!("{scheme}://{}", &rest[..slash])], path }))
            }
        }
    }

    /// Only the side's endpoint on the parent pkgproxy at `parent`
    /// (`http://host:port`), mounted at `mount` (`/go`): the parent spreads
    /// over the upstream's own instances and caches for every child.
    pub fn chain_to(&mut self, parent: &str, mount: &str) {
        self.urls = vec![format!("{parent}{mount}")];
    }
}

/// The path below `base` (a base URL, perhaps with credentials) at which
/// `url` (without any) is: same scheme, host and port, and below the
/// base's path.
pub fn path_below<'u>(base: &str, url: &'u str) -> Option<&'u str> {
    let (base, asked) = (UrlParts::of(base)?, UrlParts::of(url)?);
    if asked.userinfo.is_some() || !base.same_origin(&asked) {
        return None;
    }
    let below = asked.rest.strip_prefix(base.rest.trim_end_matches('/'))?;
    below.starts_with('/').then_some(below)
}

/// A URL taken apart as far as an origin's comparison needs.
struct UrlParts<'u> {
    scheme: &'u str,
    userinfo: Option<&'u str>,
    host: &'u str,
    port: Option<&'u str>,
    /// The path, query and fragment.
    rest: &'u str,
}

impl<'u> UrlParts<'u> {
    fn of(url: &'u str) -> Option<UrlParts<'u>> {
        let (scheme, after) = url.split_once("://")?;
        let end = after.find(['/', '?', '#']).unwrap_or(after.len());
        let (authority, rest) = after.split_at(end);
        let (userinfo, host_port) = match authority.rsplit_once('@') {
            Some((userinfo, host_port)) => (Some(userinfo), host_port),
            None => (None, authority),
        };
        // A bracketed IPv6 address holds colons of its own.
        let port_at = host_port.rfind(':').filter(|&at| !host_port[at..].contains(']'));
        let (host, port) = match port_at {
            Some(at) => (&host_port[..at], Some(&host_port[at + 1..])),
            None => (host_port, None),
        };
        (!host.is_empty()).then_some(UrlParts { scheme, userinfo, host, port, rest })
    }

    /// The port, the scheme's own when none is written.
    fn port(&self) -> Option<&str> {
        match (self.port.filter(|port| !port.is_empty()), self.scheme.to_ascii_lowercase().as_str()) {
            (Some(port), _) => Some(port),
            (None, "http") => Some("80"),
            (None, "https") => Some("443"),
            (None, _) => None,
        }
    }

    fn same_origin(&self, other: &UrlParts<'_>) -> bool {
        self.scheme.eq_ignore_ascii_case(other.scheme)
            && self.host.eq_ignore_ascii_case(other.host)
            && self.port() == other.port()
    }

    fn origin_with_userinfo(&self) -> String {
        let userinfo = self.userinfo.map(|userinfo| format!("{userinfo}@")).unwrap_or_default();
        let port = self.port.map(|port| format!(":{port}")).unwrap_or_default();
        format!("{}://{userinfo}{}{port}", self.scheme, self.host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUILT_IN: Option<&str> = Some("https://proxy.example.org");

    #[test]
    fn none_configured_is_the_built_in_which_is_not_trusted() {
        let instances = Instances::new(&[], BUILT_IN).unwrap();
        assert_eq!(instances.urls(), ["https://proxy.example.org"]);
        assert!(instances.trusted_urls().is_empty());
    }

    #[test]
    fn a_url_on_an_instance_is_found_whatever_its_credentials_and_default_port() {
        let configured = ["https://user:TOKEN@npm.corp:443/repo/npm".to_owned(), "http://127.0.0.1:4873".to_owned()];
        let instances = Instances::new(&configured, None).unwrap();
        assert_eq!(instances.path_below("https://NPM.corp/repo/npm/a/-/a-1.0.0.tgz"), Some("/a/-/a-1.0.0.tgz"));
        assert_eq!(instances.path_below("http://127.0.0.1:4873/a"), Some("/a"));
        assert_eq!(instances.path_below("https://npm.corp/repo/npmx/a"), None, "not below the base's path");
        assert_eq!(instances.path_below("https://npm.corp/other/a"), None);
        assert_eq!(instances.path_below("http://npm.corp/repo/npm/a"), None, "another scheme");
        assert_eq!(instances.path_below("http://127.0.0.1:4874/a"), None, "another port");
        assert_eq!(instances.path_below("http://x:y@127.0.0.1:4873/a"), None, "credentials of its own");
        assert_eq!(
            instances.origin_of("https://npm.corp/files/a.whl").as_deref(),
            Some("https://user:TOKEN@npm.corp:443")
        );
        assert_eq!(instances.origin_of("http://127.0.0.1:4873/x").as_deref(), Some("http://127.0.0.1:4873"));
        assert_eq!(instances.origin_of("https://cdn.example/x"), None);
        assert_eq!(path_below("http://[::1]:8080/p", "http://[::1]:8080/p/q"), Some("/q"));
        assert_eq!(path_below("http://[::1]:8080/p", "http://[::1]/p/q"), None);
    }

    #[test]
    fn configured_ones_are_checked_and_trusted_and_a_parent_replaces_them() {
        let configured = ["http://127.0.0.1:3000/".to_owned(), "https://b.example".to_owned()];
        let mut instances = Instances::new(&configured, BUILT_IN).unwrap();
        assert_eq!(instances.urls(), ["http://127.0.0.1:3000", "https://b.example"]);
        assert_eq!(instances.trusted_urls(), instances.urls());
        instances.chain_to("http://region:3142", "/go");
        assert_eq!(instances.urls(), ["http://region:3142/go"]);
        let bad = Instances::new(&["ftp://x".to_owned()], BUILT_IN).unwrap_err();
        assert!(bad.starts_with("\"ftp://x\""), "{bad}");
    }
}
