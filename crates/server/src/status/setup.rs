//! The lines that point each side's clients at pkgproxy, filled in with
//! the host and port the reader reached it by: what a person copies from
//! the status page. `pkgproxyctl setup CLIENT -addr HOST:PORT` writes the
//! same settings for them.

use pkgproxy_control::ClientSetup;

/// Every side's setup for pkgproxy at `host` (`HOST:PORT`), with the LXD
/// remotes named `lxd_remotes`.
pub fn clients(host: &str, lxd_remotes: &[String]) -> Vec<ClientSetup> {
    let base = format!("http://{host}");
    let setup = |side: &str, clients: &str, lines: Vec<String>| ClientSetup {
        side: side.to_string(),
        clients: clients.to_string(),
        lines,
    };
    let mut lxd = vec![format!(
        "pkgproxyctl setup lxd-remote -addr {host}   # adds the remotes below, pkgproxy's certificate pinned"
    )];
    lxd.extend(lxd_remotes.iter().map(|name| {
        let local = pkgproxy_control::names::lxd_remote_name_usually(name);
        format!("lxc remote add {local} https://{host}/lxd/{name} --protocol=simplestreams --public   # and pin its certificate")
    }));
    vec![
        setup(
            "apt",
            "apt, apt-get (in /etc/apt/apt.conf.d/01pkgproxy)",
            vec![
                format!("Acquire::http::Proxy \"{base}/\";"),
                format!("pkgproxyctl setup apt -addr {host} | sudo sh"),
            ],
        ),
        setup(
            "go",
            "the go command",
            vec![format!("export GOPROXY={base}/go"), format!("pkgproxyctl setup go -addr {host} | sudo sh")],
        ),
        setup(
            "snap",
            "snapd and snap",
            vec![format!("SNAPPY_FORCE_API_URL={base}/snap/"), format!("pkgproxyctl setup snap -addr {host} | sudo sh")],
        ),
        setup(
            "registry",
            "Docker, containerd, podman, skopeo, k3s, rke2",
            vec![
                format!("{{\"registry-mirrors\": [\"{base}\"], \"insecure-registries\": [\"{host}\"]}}"),
                format!("pkgproxyctl setup docker -addr {host} | sudo sh"),
                format!("pkgproxyctl setup containerd -addr {host} | sudo sh"),
                format!("pkgproxyctl setup podman -addr {host} | sudo sh"),
                format!("pkgproxyctl setup k3s -addr {host} | sudo sh   # rke2: setup rke2"),
                format!("skopeo inspect --tls-verify=false docker://{host}/library/alpine:latest   # other registries: {host}/ghcr.io/OWNER/IMAGE"),
            ],
        ),
        setup("lxd", "LXD images (lxc), snapcraft and the craft tools", lxd),
    ]
}
