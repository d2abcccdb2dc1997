//! The instances of one upstream pool as a side's section names them
//! (`[go] proxies`, `[snap] stores`, each `[[registry.upstream]]` and
//! `[[lxd.remote]]`): each a base URL; the side's built-in one when none is
//! configured; the configured ones trusted on local addresses; all of them
//! replaced by the parent pkgproxy's endpoint for them when there is a
//! parent.

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

    /// Only the side's endpoint on the parent pkgproxy at `parent`
    /// (`http://host:port`), mounted at `mount` (`/go`): the parent spreads
    /// over the upstream's own instances and caches for every child.
    pub fn chain_to(&mut self, parent: &str, mount: &str) {
        self.urls = vec![format!("{parent}{mount}")];
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
