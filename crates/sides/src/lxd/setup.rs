//! LXD's setups, both directions:
//!
//! - `lxd-remote`: pkgproxy's simplestreams remotes in the user's (or,
//!   with `--system`, the machine's) LXD client configuration, with
//!   pkgproxy's certificate pinned in `servercerts/` (a plain
//!   `lxc remote add --accept-certificate` stores none for simplestreams).
//!   LXD's static remotes (`ubuntu:`, and `images:` in newer LXD) cannot be
//!   re-pointed: pkgproxy's go beside them as `pkgproxy-NAME`. The craft
//!   tools' `craft-com.ubuntu.cloud-buildd*` remotes are created (or
//!   re-pointed) under their own names, so snapcraft, rockcraft and
//!   charmcraft use the cache unchanged.
//! - `lxd` and `snapcraft`: the containers of an LXD project (or of a
//!   standalone `pkgproxy` profile) send their own apt, snap and go traffic
//!   through pkgproxy: the profile's cloud-init writes apt's proxy line and
//!   snapd's `SNAPPY_FORCE_API_URL`, and its environment carries `GOPROXY`.
//! - `lxd-daemon`: the daemon's own `core.proxy_http`, printed only.
//!
//! These change the user's own LXD configuration through `lxc`, so they
//! are done unless `--print` is given (`lxd-daemon` is only printed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use sha2::{Digest, Sha256};

use super::names::{remote_name as lxd_remote_name, remote_name_usually};
use crate::setup::{Action as Asked, Procedure, Scope, Setup, SetupClient, MARKER};

/// The clients `pkgproxyctl setup` points at the LXD side, or through it.
pub const CLIENTS: &[SetupClient] = &[
    SetupClient {
        name: "lxd-remote",
        about: "pkgproxy's LXD image remotes (and the craft tools' remote names) in the LXD client's \
                configuration, its certificate pinned",
        procedure: &Remotes,
    },
    SetupClient {
        name: "lxd",
        about: "A profile (or a project's default profile) sending containers' apt, snap and go traffic through \
                pkgproxy",
        procedure: &Profile { project: None },
    },
    SetupClient {
        name: "snapcraft",
        about: "`lxd` for the project the craft tools build in (`snapcraft`)",
        procedure: &Profile { project: Some("snapcraft") },
    },
    SetupClient { name: "lxd-daemon", about: "The LXD daemon's own proxy settings", procedure: &Daemon },
];

/// What the LXD setups done through `lxc` do for an action asked.
fn action(asked: Asked) -> anyhow::Result<Action> {
    match asked {
        Asked::Print => Ok(Action::Print),
        Asked::Apply => Ok(Action::Apply),
        Asked::Undo => Ok(Action::Undo),
        Asked::PrintUndo => anyhow::bail!("--undo runs lxc to take the LXD setup back; --print shows the setup itself"),
    }
}

/// `lxd-remote`.
struct Remotes;

impl Procedure for Remotes {
    fn run(&self, _client: &str, asked: Asked, setup: &Setup<'_>) -> anyhow::Result<()> {
        let details = setup.details.context("pkgproxy's remotes and certificate are not known")?;
        let pkgproxy =
            Pkgproxy { base: setup.base, certificate_pem: &details.certificate_pem, remotes: &details.remotes };
        remotes(&pkgproxy, action(asked)?, setup.scope)
    }

    fn unasked(&self) -> Asked {
        Asked::Apply
    }

    fn scopes(&self) -> Vec<Scope> {
        vec![Scope::User, Scope::System]
    }

    fn wants_details(&self) -> bool {
        true
    }
}

/// `lxd` and `snapcraft`: a profile, standalone or a project's default
/// (`snapcraft` has the craft tools' project unless another is named).
struct Profile {
    project: Option<&'static str>,
}

impl Procedure for Profile {
    fn run(&self, _client: &str, asked: Asked, setup: &Setup<'_>) -> anyhow::Result<()> {
        profile(setup.base, action(asked)?, setup.project.or(self.project))
    }

    fn unasked(&self) -> Asked {
        Asked::Apply
    }

    /// Containers reach the host at its address on LXD's bridge.
    fn default_host(&self) -> Option<String> {
        bridge_address()
    }
}

/// `lxd-daemon`: printed only.
struct Daemon;

impl Procedure for Daemon {
    fn run(&self, _client: &str, asked: Asked, setup: &Setup<'_>) -> anyhow::Result<()> {
        match asked {
            Asked::Print => print!("{}", daemon(setup.base)),
            Asked::PrintUndo => print!("lxc config unset core.proxy_http\nlxc config unset core.proxy_https\n"),
            Asked::Apply => anyhow::bail!("this client is set up by hand: print its setup and add it"),
            Asked::Undo => anyhow::bail!("this client is set up by hand: take its setup back by hand"),
        }
        Ok(())
    }
}

/// The host's address on LXD's default bridge, when LXD can say.
fn bridge_address() -> Option<String> {
    let output = Command::new("lxc").args(["network", "get", "lxdbr0", "ipv4.address"]).output().ok()?;
    let address = String::from_utf8_lossy(&output.stdout);
    let address = address.trim().split('/').next()?.to_string();
    (output.status.success() && !address.is_empty()).then_some(address)
}

/// The pkgproxy being set up for.
#[derive(Debug, Clone)]
struct Pkgproxy<'a> {
    /// `http://HOST:PORT`.
    base: &'a str,
    /// Its listener's certificate, PEM.
    certificate_pem: &'a str,
    /// The names of its LXD remotes (`/lxd/NAME/`).
    remotes: &'a [String],
}

impl Pkgproxy<'_> {
    fn host(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    fn remote_url(&self, name: &str) -> String {
        format!("https://{}/lxd/{name}", self.host())
    }
}

/// What to do through `lxc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Show the commands and files.
    Print,
    /// Do it.
    Apply,
    /// Take it back.
    Undo,
}

/// The remotes LXD holds, as `lxc remote list --format=json` tells them.
#[derive(Debug, Clone, serde::Deserialize)]
struct Listed {
    #[serde(rename = "Addr")]
    addr: String,
    #[serde(rename = "Static", default)]
    fixed: bool,
}

/// `setup lxd-remote`: pkgproxy's remotes in the LXD client configuration
/// (or the machine's).
fn remotes(pkgproxy: &Pkgproxy<'_>, action: Action, scope: Scope) -> anyhow::Result<()> {
    let conf = conf_dir(scope)?;
    if action == Action::Apply {
        std::fs::create_dir_all(&conf).with_context(|| format!("cannot create {}", conf.display()))?;
    }
    // Printing without LXD here: what it usually holds.
    let known = list(&conf).ok();
    let listed = known.clone().unwrap_or_default();
    let fingerprint = fingerprint(pkgproxy.certificate_pem)?;
    for name in pkgproxy.remotes {
        let local = local_name(name, known.as_ref());
        let url = pkgproxy.remote_url(name);
        let cert = conf.join("servercerts").join(format!("{local}.crt"));
        match action {
            Action::Print => {
                let held = known.as_ref().map(|known| known.get(&local));
                print_remote(&conf, &local, &url, held, &cert, pkgproxy.certificate_pem)
            }
            Action::Apply => add_remote(&conf, &local, &url, listed.get(&local))?,
            Action::Undo => {
                remove_remote(&conf, &local, &url, listed.get(&local), &cert)?;
                restore_remote(&conf, &local)?;
            }
        }
        if action == Action::Apply {
            write_file(&cert, pkgproxy.certificate_pem)?;
        }
    }
    if action != Action::Undo {
        println!("# pkgproxy's certificate, pinned for each remote: sha256 {fingerprint}");
        println!("# LXD configuration: {}", conf.display());
    }
    Ok(())
}

/// The name pkgproxy's remote `name` gets in LXD: its own, unless LXD
/// holds that name fixed.
fn local_name(name: &str, listed: Option<&BTreeMap<String, Listed>>) -> String {
    match listed {
        Some(listed) => lxd_remote_name(name, listed.get(name).is_some_and(|held| held.fixed)),
        None => remote_name_usually(name),
    }
}

/// The commands [`add_remote`] runs, as the remote `local` is `held` now
/// (`None`: LXD could not say).
fn print_remote(conf: &Path, local: &str, url: &str, held: Option<Option<&Listed>>, cert: &Path, pem: &str) {
    let lxc = format!("LXD_CONF={} lxc", conf.display());
    match held {
        Some(Some(held)) if held.addr.trim_end_matches('/') == url => {
            println!("# {local} is {url} already");
            return;
        }
        Some(Some(held)) => println!("{lxc} remote remove {local}   # was {}: --undo puts it back", held.addr),
        Some(None) => {}
        None => println!("{lxc} remote remove {local} 2>/dev/null || true   # one of that name is replaced"),
    }
    println!("{lxc} remote add {local} {url} --protocol=simplestreams --public");
    println!("install -D -m 644 /dev/stdin {} <<'EOF'\n{}EOF", cert.display(), with_newline(pem));
}

fn add_remote(conf: &Path, local: &str, url: &str, held: Option<&Listed>) -> anyhow::Result<()> {
    match held {
        Some(held) if held.addr.trim_end_matches('/') == url => {
            println!("{local}: already {url}");
            return Ok(());
        }
        Some(held) => {
            lxc(conf, &["remote", "remove", local])?;
            remember_replaced(conf, local, &held.addr)?;
            println!("{local}: was {}", held.addr);
        }
        None => {}
    }
    lxc(conf, &["remote", "add", local, url, "--protocol=simplestreams", "--public"])?;
    println!("{local}: {url}");
    Ok(())
}

fn remove_remote(conf: &Path, local: &str, url: &str, held: Option<&Listed>, cert: &Path) -> anyhow::Result<()> {
    if held.is_none_or(|held| held.addr.trim_end_matches('/') != url) {
        return Ok(());
    }
    lxc(conf, &["remote", "remove", local])?;
    match std::fs::remove_file(cert) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            return Err(error).with_context(|| format!("cannot remove {}", cert.display()))
        }
        _ => {}
    }
    println!("{local}: removed");
    Ok(())
}

/// Where the remotes pkgproxy's replaced are kept (`NAME URL` lines), for
/// `--undo` to put back.
fn replaced_file(conf: &Path) -> PathBuf {
    conf.join("pkgproxy-replaced-remotes")
}

fn remember_replaced(conf: &Path, local: &str, addr: &str) -> anyhow::Result<()> {
    let path = replaced_file(conf);
    let mut kept = std::fs::read_to_string(&path).unwrap_or_default();
    kept.push_str(&format!("{local} {addr}\n"));
    std::fs::write(&path, kept).with_context(|| format!("cannot write {}", path.display()))
}

/// Puts back the remote `local` that `--apply` replaced, if it did.
fn restore_remote(conf: &Path, local: &str) -> anyhow::Result<()> {
    let path = replaced_file(conf);
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    let Some(addr) = kept.lines().find_map(|line| line.strip_prefix(local)?.strip_prefix(' ')) else {
        return Ok(());
    };
    lxc(conf, &["remote", "add", local, addr, "--protocol=simplestreams", "--public"])?;
    println!("{local}: {addr} again");
    let rest: String =
        kept.lines().filter(|line| line.split(' ').next() != Some(local)).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, rest).with_context(|| format!("cannot write {}", path.display()))
}

/// The LXD client configuration folder: `$LXD_CONF`; else, for the
/// machine, `$LXD_GLOBAL_CONF` or the snap's or the package's global
/// folder; for the user, the snap's folder when the LXD snap is there,
/// else `~/.config/lxc`.
fn conf_dir(scope: Scope) -> anyhow::Result<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    if scope == Scope::System {
        return Ok(var("LXD_GLOBAL_CONF").unwrap_or_else(|| match Path::new("/snap/bin/lxc").exists() {
            true => PathBuf::from("/var/snap/lxd/common/global-conf"),
            false => PathBuf::from("/etc/lxd"),
        }));
    }
    if let Some(conf) = var("LXD_CONF") {
        return Ok(conf);
    }
    let home = var("HOME").context("HOME is not set: give the folder as LXD_CONF")?;
    let snap = home.join("snap/lxd/common/config");
    if home.join("snap/lxd").exists() {
        return Ok(snap);
    }
    Ok(var("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config")).join("lxc"))
}

/// The remotes LXD holds in `conf`.
fn list(conf: &Path) -> anyhow::Result<BTreeMap<String, Listed>> {
    let json = lxc(conf, &["remote", "list", "--format=json"])?;
    serde_json::from_str(&json).context("lxc remote list printed something else than JSON")
}

/// Runs `lxc` with `conf` as its configuration; its standard output.
fn lxc(conf: &Path, args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new("lxc")
        .args(args)
        .env("LXD_CONF", conf)
        .output()
        .context("cannot run lxc (install LXD, or use --print)")?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    anyhow::ensure!(output.status.success(), "lxc {} failed: {}", args.join(" "), stderr.trim());
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn write_file(path: &Path, content: &str) -> anyhow::Result<()> {
    let dir = path.parent().context("the file's folder")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(path, with_newline(content)).with_context(|| format!("cannot write {}", path.display()))
}

fn with_newline(text: &str) -> String {
    match text.ends_with('\n') {
        true => text.to_string(),
        false => format!("{text}\n"),
    }
}

/// The SHA-256 of the certificate in `pem` (of its DER bytes, as browsers
/// and `openssl x509 -fingerprint -sha256` show it).
fn fingerprint(pem: &str) -> anyhow::Result<String> {
    use base64::Engine;
    let body: String = pem.lines().filter(|line| !line.starts_with("-----")).collect();
    let der = base64::engine::general_purpose::STANDARD.decode(body.trim()).context("the certificate is not PEM")?;
    Ok(hex::encode(Sha256::digest(der)))
}

/// The settings that send a container's apt, snap and go traffic through
/// pkgproxy at `base` (as the container reaches it).
fn profile_settings(base: &str) -> Vec<(String, String)> {
    let user_data = format!(
        "#cloud-config\n# {MARKER} lxd\nwrite_files:\n  - path: /etc/apt/apt.conf.d/01pkgproxy\n    content: |\n      Acquire::http::Proxy \"{base}/\";\n  - path: /etc/systemd/system/snapd.service.d/pkgproxy.conf\n    content: |\n      [Service]\n      Environment=SNAPPY_FORCE_API_URL={base}/snap/\n  - path: /etc/environment.d/50-pkgproxy.conf\n    content: |\n      GOPROXY={base}/go\n      SNAPPY_FORCE_API_URL={base}/snap/\nruncmd:\n  - [sh, -c, \"systemctl daemon-reload && systemctl try-restart snapd.service || true\"]\n"
    );
    vec![
        ("cloud-init.user-data".to_string(), user_data),
        ("environment.GOPROXY".to_string(), format!("{base}/go")),
        ("environment.SNAPPY_FORCE_API_URL".to_string(), format!("{base}/snap/")),
    ]
}

/// `setup lxd` and `setup snapcraft`: the settings of `project`'s default
/// profile, or of a standalone `pkgproxy` profile.
fn profile(base: &str, action: Action, project: Option<&str>) -> anyhow::Result<()> {
    let settings = profile_settings(base);
    let (profile, scope) = match project {
        Some(project) => ("default", vec!["--project".to_string(), project.to_string()]),
        None => ("pkgproxy", Vec::new()),
    };
    let lxc = |args: &[&str]| -> anyhow::Result<String> {
        let args: Vec<&str> = args.iter().copied().chain(scope.iter().map(String::as_str)).collect();
        let output =
            Command::new("lxc").args(&args).output().context("cannot run lxc (install LXD, or use --print)")?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        anyhow::ensure!(output.status.success(), "lxc {} failed: {}", args.join(" "), stderr.trim());
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    };
    // What the profile holds of each key now: pkgproxy's, or the admin's.
    let held = |key: &str| lxc(&["profile", "get", profile, key]).map(|value| value.trim_end().to_owned());
    let ours = |key: &str, value: &str| match key {
        "cloud-init.user-data" => value.contains(MARKER),
        _ => value.starts_with(base) || value.is_empty(),
    };
    match action {
        Action::Print => print_profile(profile, project, &settings),
        Action::Apply => {
            if let Some(project) = project {
                ensure_project(project)?;
            } else if lxc(&["profile", "show", profile]).is_err() {
                lxc(&["profile", "create", profile])?;
            }
            for (key, value) in &settings {
                let now = held(key)?;
                anyhow::ensure!(
                    now.is_empty() || ours(key, &now),
                    "profile {profile}{}: {key} holds a setting of its own: left as it is. Add this to it by hand:\n{value}",
                    in_project(project)
                );
            }
            for (key, value) in &settings {
                lxc(&["profile", "set", profile, key, value])?;
            }
            println!("profile {profile}{}: apt, snap and go through {base}", in_project(project));
            if project.is_none() {
                println!("# launch with: lxc launch IMAGE NAME -p default -p pkgproxy");
            }
        }
        Action::Undo => {
            for (key, _) in &settings {
                match held(key) {
                    Ok(now) if !now.is_empty() && ours(key, &now) => {
                        lxc(&["profile", "unset", profile, key])?;
                    }
                    Ok(now) if !now.is_empty() => println!("profile {profile}: {key} is not pkgproxy's: left as it is"),
                    _ => {}
                }
            }
            // A standalone profile left with nothing of anyone's goes too.
            if project.is_none() && lxc(&["profile", "show", profile]).is_ok_and(|shown| is_empty_profile(&shown)) {
                lxc(&["profile", "delete", profile])?;
            }
            println!("profile {profile}{}: pkgproxy's settings removed", in_project(project));
        }
    }
    Ok(())
}

/// Whether `lxc profile show` printed a profile holding no settings and
/// no devices (what is left of pkgproxy's own once its settings go): lxc
/// writes an empty map as `{}` on the key's line.
fn is_empty_profile(shown: &str) -> bool {
    let empty = |key: &str| shown.lines().any(|line| line.trim_end() == format!("{key}: {{}}"));
    empty("config") && empty("devices")
}

fn in_project(project: Option<&str>) -> String {
    project.map(|project| format!(" of project {project}")).unwrap_or_default()
}

fn print_profile(profile: &str, project: Option<&str>, settings: &[(String, String)]) {
    let scope = project.map(|project| format!(" --project {project}")).unwrap_or_default();
    match project {
        None => println!("lxc profile create {profile}"),
        Some(project) => println!(
            "lxc project show {project} >/dev/null 2>&1 || {{ lxc project create {project} && lxc profile show default | lxc profile edit default --project {project}; }}"
        ),
    }
    for (key, value) in settings {
        println!("lxc profile set {profile} {key}{scope} \"$(cat <<'EOF'\n{}EOF\n)\"", with_newline(value));
    }
}

/// Makes `project` if it is missing, as the craft tools make theirs: with
/// the default project's devices in its default profile (a root disk and a
/// network), so instances launched in it still start.
fn ensure_project(project: &str) -> anyhow::Result<()> {
    let exists = Command::new("lxc").args(["project", "show", project]).output().is_ok_and(|o| o.status.success());
    if exists {
        return Ok(());
    }
    let status = Command::new("lxc").args(["project", "create", project]).status().context("cannot run lxc")?;
    anyhow::ensure!(status.success(), "lxc project create {project} failed");
    let default = Command::new("lxc").args(["profile", "show", "default"]).output().context("cannot run lxc")?;
    anyhow::ensure!(default.status.success(), "lxc profile show default failed");
    let mut edit = Command::new("lxc")
        .args(["profile", "edit", "default", "--project", project])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .context("cannot run lxc")?;
    if let Some(stdin) = edit.stdin.as_mut() {
        std::io::Write::write_all(stdin, &default.stdout).context("cannot hand lxc the profile")?;
    }
    anyhow::ensure!(edit.wait().context("lxc profile edit")?.success(), "lxc profile edit default failed");
    println!("project {project}: created, with the default project's devices");
    Ok(())
}

/// `setup lxd-daemon`: the LXD daemon's own proxy settings, so the image
/// files it downloads for any remote go through pkgproxy.
fn daemon(base: &str) -> String {
    format!(
        "# The LXD daemon sends image files as plain-http requests through its proxy: pkgproxy caches and checks them.\n# Index files go over https through a tunnel (not cached). Run on the LXD host:\nlxc config set core.proxy_http {base}\nlxc config set core.proxy_https {base}\n# To take it back: lxc config unset core.proxy_http; lxc config unset core.proxy_https\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_static_remote_gets_pkgproxy_s_beside_it() {
        let listed: BTreeMap<String, Listed> = serde_json::from_str(
            r#"{"ubuntu":{"Addr":"https://cloud-images.ubuntu.com/releases","Static":true},"images":{"Addr":"https://images.linuxcontainers.org","Static":false}}"#,
        )
        .unwrap();
        assert_eq!(local_name("ubuntu", Some(&listed)), "pkgproxy-ubuntu");
        assert_eq!(local_name("images", Some(&listed)), "images");
        assert_eq!(local_name("craft-com.ubuntu.cloud-buildd", Some(&listed)), "craft-com.ubuntu.cloud-buildd");
        assert_eq!(local_name("ubuntu-daily", None), "pkgproxy-ubuntu-daily", "LXD could not say");
    }

    #[test]
    fn a_profile_with_nothing_left_is_told_from_one_holding_more() {
        let empty = "name: pkgproxy\ndescription: \"\"\nconfig: {}\ndevices: {}\nused_by: []\n";
        assert!(is_empty_profile(empty));
        let devices = "name: pkgproxy\nconfig: {}\ndevices:\n  root:\n    path: /\n    type: disk\nused_by: []\n";
        assert!(!is_empty_profile(devices));
        let config = "name: pkgproxy\nconfig:\n  limits.cpu: \"2\"\ndevices: {}\n";
        assert!(!is_empty_profile(config));
    }

    #[test]
    fn the_profile_carries_apt_snap_and_go_settings_for_the_address_given() {
        let settings = profile_settings("http://10.0.3.1:3142");
        let user_data = &settings[0].1;
        assert!(user_data.starts_with("#cloud-config\n"));
        assert!(user_data.contains("Acquire::http::Proxy \"http://10.0.3.1:3142/\";"));
        assert!(user_data.contains("Environment=SNAPPY_FORCE_API_URL=http://10.0.3.1:3142/snap/"));
        assert!(settings.contains(&("environment.GOPROXY".into(), "http://10.0.3.1:3142/go".into())));
    }
}
