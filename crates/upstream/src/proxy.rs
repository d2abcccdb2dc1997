//! An HTTP proxy in front of the upstreams: a parent pkgproxy (a site's
//! cache drawing from a regional one), or a corporate proxy. `http://`
//! requests go to it in absolute form, as to any forward proxy; `https://`
//! ones and tunnels go through it with `CONNECT`, and TLS is still spoken
//! with the upstream itself (pkgproxy verifies the upstream's certificate,
//! and every body, whatever the proxy is).

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::UpstreamError;

/// Where the proxy listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyAddress {
    /// Its host.
    pub host: String,
    /// Its port.
    pub port: u16,
}

impl ProxyAddress {
    /// The proxy a URL such as `http://region-cache:3142` names; only plain
    /// HTTP proxies are spoken to.
    pub fn parse(url: &str) -> Result<Self, String> {
        let uri: http::Uri = url.trim().parse().map_err(|_| format!("{url:?} is not a URL"))?;
        if uri.scheme_str() != Some("http") {
            return Err(format!("{url:?}: only http:// proxies are supported"));
        }
        let host = uri.host().ok_or_else(|| format!("{url:?} names no host"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
        Ok(ProxyAddress { host, port: uri.port_u16().unwrap_or(80) })
    }

    /// `http://host:port`, the base of the proxy's own URLs.
    pub fn base_url(&self) -> String {
        match self.host.contains(':') {
            true => format!("http://[{}]:{}", self.host, self.port),
            false => format!("http://{}:{}", self.host, self.port),
        }
    }
}

/// Which upstream requests go through which proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamProxy {
    /// For `http://` upstreams.
    pub http: Option<ProxyAddress>,
    /// For `https://` upstreams and tunnels.
    pub https: Option<ProxyAddress>,
    /// Hosts reached directly (`NO_PROXY`): a name, a domain it ends with
    /// (`.example.com` or `example.com`), an address, or `*` for all.
    pub no_proxy: Vec<String>,
}

impl UpstreamProxy {
    /// The proxies the usual variables name (`HTTP_PROXY`, `HTTPS_PROXY`,
    /// `NO_PROXY`, in either case), read by `var`.
    pub fn from_environment(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let either =
            |name: &str| var(name).or_else(|| var(&name.to_ascii_lowercase())).filter(|v| !v.trim().is_empty());
        let parse = |value: Option<String>| value.map(|url| ProxyAddress::parse(&url)).transpose();
        Ok(UpstreamProxy {
            http: parse(either("HTTP_PROXY"))?,
            https: parse(either("HTTPS_PROXY"))?,
            no_proxy: either("NO_PROXY")
                .map(|list| list.split(',').map(|h| h.trim().to_ascii_lowercase()).filter(|h| !h.is_empty()).collect())
                .unwrap_or_default(),
        })
    }

    /// One proxy for every upstream.
    pub fn all(proxy: ProxyAddress) -> Self {
        UpstreamProxy { http: Some(proxy.clone()), https: Some(proxy), no_proxy: Vec::new() }
    }

    /// The proxy a request to `host:port` goes through, if any (`tls`: an
    /// `https://` upstream or a tunnel).
    pub fn for_host(&self, host: &str, port: u16, tls: bool) -> Option<&ProxyAddress> {
        let proxy = if tls { self.https.as_ref() } else { self.http.as_ref() }?;
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        // A parent pkgproxy's own endpoints are asked of it directly.
        let itself = host == proxy.host.to_ascii_lowercase() && port == proxy.port;
        let direct = itself
            || self.no_proxy.iter().any(|entry| {
                let domain = entry.trim_start_matches('.');
                entry == "*" || host == domain || host.ends_with(&format!(".{domain}"))
            });
        (!direct).then_some(proxy)
    }

    /// Every proxy host, for the address policy (a proxy on the LAN is
    /// where it was configured to be).
    pub fn hosts(&self) -> Vec<String> {
        self.hosts_and_ports().map(|proxy| proxy.host.clone()).collect()
    }

    /// Every proxy.
    pub fn hosts_and_ports(&self) -> impl Iterator<Item = &ProxyAddress> {
        self.http.iter().chain(self.https.iter())
    }
}

/// The most a proxy's answer to `CONNECT` may take before its blank line.
const CONNECT_HEAD_LIMIT: usize = 8 * 1024;

/// Asks the proxy `stream` is connected to for a tunnel to `host:port`;
/// the stream then carries the tunnel.
pub(crate) async fn tunnel(mut stream: TcpStream, host: &str, port: u16) -> Result<TcpStream, UpstreamError> {
    let target = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    let failed = |source: io::Error| UpstreamError::Connect { host: host.to_owned(), source };
    let request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.map_err(failed)?;
    // Read byte by byte up to the blank line: what follows is the tunnel's.
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= CONNECT_HEAD_LIMIT || stream.read(&mut byte).await.map_err(failed)? == 0 {
            return Err(failed(io::Error::new(io::ErrorKind::InvalidData, "the proxy's answer to CONNECT broke off")));
        }
        head.push(byte[0]);
    }
    let status = String::from_utf8_lossy(&head);
    let status = status.lines().next().unwrap_or_default();
    match status.split_whitespace().nth(1) {
        Some(code) if code.starts_with('2') => Ok(stream),
        _ => Err(failed(io::Error::other(format!("the proxy refused the tunnel: {status}")))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usual_variables_choose_a_proxy_per_scheme_and_no_proxy_exempts_domains() {
        let env = |name: &str| match name {
            "http_proxy" => Some("http://parent.lan:3142".to_owned()),
            "HTTPS_PROXY" => Some("http://corp-proxy:8080/".to_owned()),
            "NO_PROXY" => Some("internal.example, .lan ,10.0.0.5".to_owned()),
            _ => None,
        };
        let proxy = UpstreamProxy::from_environment(env).unwrap();
        assert_eq!(
            proxy.for_host("deb.debian.org", 80, false),
            Some(&ProxyAddress { host: "parent.lan".into(), port: 3142 })
        );
        assert_eq!(proxy.for_host("proxy.golang.org", 443, true).map(|p| p.port), Some(8080));
        for direct in ["internal.example", "git.internal.example", "mirror.lan", "10.0.0.5"] {
            assert_eq!(proxy.for_host(direct, 80, false), None, "{direct}");
        }
        assert!(proxy.for_host("notinternal.example", 80, false).is_some());
        let parent = UpstreamProxy::all(ProxyAddress::parse("http://region:3142").unwrap());
        assert!(parent.for_host("region", 80, false).is_some(), "another port of its host");
        assert_eq!(parent.for_host("REGION", 3142, false), None, "the parent's own URLs are asked of it directly");
        assert_eq!(ProxyAddress::parse("http://[::1]:3142").unwrap().base_url(), "http://[::1]:3142");
        assert!(UpstreamProxy::from_environment(|_| None).unwrap().for_host("deb.debian.org", 80, false).is_none());
        assert!(ProxyAddress::parse("https://secure-proxy:443").is_err());
        assert!(UpstreamProxy::from_environment(|n| (n == "HTTP_PROXY").then(|| "not a url".to_owned())).is_err());
    }
}
