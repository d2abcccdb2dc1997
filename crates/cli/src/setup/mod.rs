//! What `pkgproxyctl setup CLIENT` prints, and for clients configured by a
//! file, writes (`--apply`) and takes back (`--undo`).
//!
//! - apt and go: a line to add, printed only.
//! - snap: a drop-in for `snapd.service` setting `SNAPPY_FORCE_API_URL`
//!   (as snapd's own test suite points it at a fake store), a reload and a
//!   restart; and the same variable for the `snap` command users run,
//!   which reads its own environment. Never `SNAPPY_FORCE_SAS_URL`.
//! - docker: `registry-mirrors` in `/etc/docker/daemon.json`, merged into
//!   what is there (dockerd mirrors Docker Hub only; other registries are
//!   named `HOST:PORT/ghcr.io/...`).
//! - containerd: one `certs.d/_default/hosts.toml` for every registry
//!   (containerd names the registry with `?ns=`), the registry itself
//!   staying the fallback.
//! - podman, buildah, skopeo, CRI-O: a `registries.conf.d` file with a
//!   mirror per registry (path prefixes for all but Docker Hub).
//! - k3s and rke2: `registries.yaml` with a mirror per registry.
//! - LXD, both ways ([`lxd`]): pkgproxy's image remotes for the LXD
//!   client, a profile for containers' own traffic, the daemon's proxy.
//!
//! A file pkgproxy writes whole carries a marker line: `--undo` removes
//! only such a file, and `--apply` never overwrites a file without it.

pub mod listener;
pub mod lxd;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

/// The clients `setup` knows.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Client {
    /// The go command.
    Go,
    /// apt.
    Apt,
    /// snapd and the snap command.
    Snap,
    /// dockerd.
    Docker,
    /// containerd (and Kubernetes nodes on it).
    Containerd,
    /// podman, buildah, skopeo and CRI-O (containers-registries.conf).
    Podman,
    /// k3s and rke2.
    K3s,
    /// pkgproxy's LXD image remotes (and the craft tools' remote names) in
    /// the LXD client's configuration, its certificate pinned.
    LxdRemote,
    /// A profile (or a project's default profile) sending containers' apt,
    /// snap and go traffic through pkgproxy.
    Lxd,
    /// `lxd` for the project the craft tools build in (`snapcraft`).
    Snapcraft,
    /// The LXD daemon's own proxy settings.
    LxdDaemon,
}

impl Client {
    /// Whether this is one of LXD's setups ([`lxd`]).
    pub fn is_lxd(self) -> bool {
        matches!(self, Client::LxdRemote | Client::Lxd | Client::Snapcraft | Client::LxdDaemon)
    }
}

/// The line marking a file as pkgproxy's.
const MARKER: &str = "Written by pkgproxyctl setup";

/// The registries a mirror entry is written for, beside Docker Hub.
const OTHER_REGISTRIES: [&str; 6] =
    ["ghcr.io", "quay.io", "registry.k8s.io", "gcr.io", "public.ecr.aws", "mcr.microsoft.com"];

/// A file a client's setup writes, and what then makes the client read it.
struct Plan {
    /// Where, from the file system's root.
    path: &'static str,
    /// Its content for pkgproxy at `http://HOST:PORT`.
    content: String,
    /// The commands that make the client read it.
    restart: &'static [&'static [&'static str]],
    /// What else to tell the user.
    note: String,
}

/// What `client` sets to use pkgproxy at `base` (`http://HOST:PORT`): for
/// a client set up by a file, a root shell script writing it
/// (`pkgproxyctl setup snap | sudo sh` works).
pub fn print(client: Client, base: &str) -> String {
    if let Some(plan) = plan(client, base) {
        return script(&plan);
    }
    match client {
        Client::Docker => docker::script(base),
        Client::LxdDaemon => lxd::daemon(base),
        Client::Go | Client::Apt | Client::Snap | Client::Containerd | Client::Podman | Client::K3s => {
            format!("# pkgproxyctl setup {client:?}: nothing to print\n").to_lowercase()
        }
        Client::LxdRemote | Client::Lxd | Client::Snapcraft => {
            format!("# pkgproxyctl setup {client:?} --print shows what it does\n").to_lowercase()
        }
    }
}

/// The reverse of [`print`]: a root shell script taking `client`'s setup
/// for pkgproxy at `base` back (`pkgproxyctl setup snap --undo --print |
/// sudo sh`).
pub fn print_undo(client: Client, base: &str) -> String {
    if let Some(plan) = plan(client, base) {
        return undo_script(&plan);
    }
    match client {
        Client::Docker => docker::undo_script(base),
        Client::LxdDaemon => "lxc config unset core.proxy_http\nlxc config unset core.proxy_https\n".to_string(),
        _ => format!("# pkgproxyctl setup {client:?} --undo --print shows what it does\n").to_lowercase(),
    }
}

/// A plan as a POSIX shell script to pipe to `sh` as root (`pkgproxyctl
/// setup snap | sudo sh`): it writes the file whole, so running it again
/// changes nothing. `PKGPROXY_SETUP_ROOT=DIR` writes under DIR instead of
/// `/`, and restarts nothing.
fn script(plan: &Plan) -> String {
    let dir = plan.path.rsplit_once('/').map_or("/", |(dir, _)| dir);
    let mut text = format!(
        "#!/bin/sh\n# Writes {path} (run again, it changes nothing); pkgproxyctl setup --apply does\n# the same, --undo takes it back. PKGPROXY_SETUP_ROOT=DIR writes under DIR instead.\nset -eu\nroot=\"${{PKGPROXY_SETUP_ROOT:-}}\"\nmkdir -p \"$root{dir}\"\ncat > \"$root{path}\" <<'EOF'\n{content}EOF\n",
        path = plan.path,
        content = plan.content
    );
    if !plan.restart.is_empty() {
        text.push_str("if [ -z \"$root\" ]; then\n");
        for command in plan.restart {
            text.push_str(&format!("  {}\n", command.join(" ")));
        }
        text.push_str("fi\n");
    }
    text.push_str(&plan.note);
    text
}

/// The reverse of [`script`]: removes the plan's file if pkgproxy wrote it.
fn undo_script(plan: &Plan) -> String {
    let mut text = format!(
        "#!/bin/sh\n# Removes {path} if pkgproxyctl setup wrote it (run again, it changes nothing);\n# pkgproxyctl setup --undo does the same. PKGPROXY_SETUP_ROOT=DIR works under DIR instead.\nset -eu\nroot=\"${{PKGPROXY_SETUP_ROOT:-}}\"\nfile=\"$root{path}\"\nif [ -f \"$file\" ] && grep -q '{MARKER}' \"$file\"; then\n  rm -f \"$file\"\n",
        path = plan.path
    );
    if !plan.restart.is_empty() {
        text.push_str("  if [ -z \"$root\" ]; then\n");
        for command in plan.restart {
            text.push_str(&format!("    {}\n", command.join(" ")));
        }
        text.push_str("  fi\n");
    }
    text.push_str("elif [ -f \"$file\" ]; then\n  echo \"$file is not pkgproxy's: left as it is\" >&2\n  exit 1\nfi\n");
    text
}

/// The file `client`'s setup writes, if it is written whole.
fn plan(client: Client, base: &str) -> Option<Plan> {
    let host = base.trim_start_matches("http://");
    let marker = |comment: &str| format!("{comment} {MARKER}: downloads go through pkgproxy.\n");
    match client {
        Client::Snap => Some(Plan {
            path: "/etc/systemd/system/snapd.service.d/pkgproxy.conf",
            content: format!("{}[Service]\nEnvironment=SNAPPY_FORCE_API_URL={base}/snap/\n", marker("#")),
            restart: &[&["systemctl", "daemon-reload"], &["systemctl", "restart", "snapd.service"]],
            note: format!("# The snap command run by users (snap download, snap known --remote) reads its own environment:\n# export SNAPPY_FORCE_API_URL={base}/snap/\n"),
        }),
        Client::Containerd => Some(Plan {
            path: "/etc/containerd/certs.d/_default/hosts.toml",
            content: format!("{}[host.\"{base}\"]\n  capabilities = [\"pull\", \"resolve\"]\n", marker("#")),
            restart: &[],
            note: "# containerd reads it when its registry config_path is /etc/containerd/certs.d\n# (CRI: [plugins.\"io.containerd.grpc.v1.cri\".registry] config_path = \"/etc/containerd/certs.d\").\n".into(),
        }),
        Client::Podman => {
            let mut content = format!("{}[[registry]]\nprefix = \"docker.io\"\nlocation = \"registry-1.docker.io\"\n[[registry.mirror]]\nlocation = \"{host}\"\ninsecure = true\n", marker("#"));
            for registry in OTHER_REGISTRIES {
                content.push_str(&format!("[[registry]]\nprefix = \"{registry}\"\nlocation = \"{registry}\"\n[[registry.mirror]]\nlocation = \"{host}/{registry}\"\ninsecure = true\n"));
            }
            Some(Plan { path: "/etc/containers/registries.conf.d/50-pkgproxy.conf", content, restart: &[], note: String::new() })
        }
        Client::K3s => {
            let mut content = format!("{}mirrors:\n", marker("#"));
            for registry in std::iter::once("docker.io").chain(OTHER_REGISTRIES) {
                content.push_str(&format!("  \"{registry}\":\n    endpoint:\n      - \"{base}\"\n"));
            }
            Some(Plan { path: "/etc/rancher/k3s/registries.yaml", content, restart: &[&["systemctl", "restart", "k3s"]], note: String::new() })
        }
        Client::Apt => Some(Plan {
            path: "/etc/apt/apt.conf.d/01pkgproxy",
            content: format!("{}Acquire::http::Proxy \"{base}/\";\n", marker("//")),
            restart: &[],
            note: String::new(),
        }),
        Client::Go => Some(Plan {
            path: "/etc/profile.d/pkgproxy-go.sh",
            content: format!("{}# go checks sums through it too (GOSUMDB keeps its default).\nexport GOPROXY={base}/go\n", marker("#")),
            restart: &[],
            note: format!("# Login shells read it from now on; in this one: export GOPROXY={base}/go\n"),
        }),
        Client::Docker => None,
        Client::LxdRemote | Client::Lxd | Client::Snapcraft | Client::LxdDaemon => None,
    }
}

/// Writes `client`'s setup for pkgproxy at `base` under `root`, then,
/// when `restart`, makes the client read it.
pub fn apply(client: Client, base: &str, root: &Path, restart: bool) -> anyhow::Result<()> {
    if let Client::Docker = client {
        return docker::apply(&root.join("etc/docker/daemon.json"), base, restart);
    }
    let plan = plan(client, base).context("this client is set up by hand: print its setup and add it")?;
    let path = under(root, plan.path);
    if let Ok(existing) = std::fs::read_to_string(&path) {
        anyhow::ensure!(
            existing.contains(MARKER),
            "{} exists and is not pkgproxy's: merge this by hand:\n{}",
            path.display(),
            plan.content
        );
    }
    let dir = path.parent().context("the file's folder")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(&path, &plan.content).with_context(|| format!("cannot write {}", path.display()))?;
    println!("wrote {}", path.display());
    if restart {
        run(plan.restart)?;
    }
    print!("{}", plan.note);
    Ok(())
}

/// Takes `client`'s setup for pkgproxy at `base` back under `root`.
pub fn undo(client: Client, base: &str, root: &Path, restart: bool) -> anyhow::Result<()> {
    if let Client::Docker = client {
        return docker::undo(&root.join("etc/docker/daemon.json"), base, restart);
    }
    let plan = plan(client, base).context("this client is set up by hand: take its setup back by hand")?;
    let path = under(root, plan.path);
    match std::fs::read_to_string(&path) {
        Ok(existing) if !existing.contains(MARKER) => {
            anyhow::bail!("{} is not pkgproxy's: left as it is", path.display())
        }
        Ok(_) => std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            println!("{} was not there", path.display());
            return Ok(());
        }
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
    println!("removed {}", path.display());
    if restart {
        run(plan.restart)?;
    }
    Ok(())
}

fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// Runs `commands` in order, stopping at the first that fails.
fn run(commands: &[&[&str]]) -> anyhow::Result<()> {
    for command in commands {
        let status = Command::new(command[0])
            .args(&command[1..])
            .status()
            .with_context(|| format!("cannot run {}", command[0]))?;
        anyhow::ensure!(status.success(), "{} failed: {status}", command.join(" "));
        println!("ran {}", command.join(" "));
    }
    Ok(())
}

/// dockerd's `daemon.json`, which holds more than pkgproxy's line: the
/// mirror is merged in and taken out, the rest left as it is.
mod docker {
    use std::path::Path;

    use anyhow::Context;
    use serde_json::{json, Value};

    const RESTART: &[&[&str]] = &[&["systemctl", "restart", "docker"]];

    /// The script's start: where the file is, and which mirror.
    fn preamble(base: &str, what: &str) -> String {
        format!(
            "#!/bin/sh\n# {what} {base} in dockerd's registry-mirrors (/etc/docker/daemon.json), keeping the rest\n# of the file; run again, it changes nothing. pkgproxyctl setup docker --apply (--undo) does the same.\n# PKGPROXY_SETUP_ROOT=DIR works under DIR instead, and restarts nothing. Merging into a file that\n# holds other settings needs python3 or jq.\nset -eu\nroot=\"${{PKGPROXY_SETUP_ROOT:-}}\"\nfile=\"$root/etc/docker/daemon.json\"\nmirror='{base}'\n"
        )
    }

    /// The restart, unless written under another root.
    const RESTART_SCRIPT: &str = "if [ -z \"$root\" ]; then\n  systemctl restart docker\nfi\n";

    /// A POSIX script putting `base` first in `registry-mirrors`.
    pub fn script(base: &str) -> String {
        let mut text = preamble(base, "Puts");
        text.push_str(
            r#"if [ ! -s "$file" ]; then
  mkdir -p "$root/etc/docker"
  printf '{\n  "registry-mirrors": [\n    "%s"\n  ]\n}\n' "$mirror" > "$file"
elif grep -q "\"$mirror\"" "$file"; then
  exit 0
"#,
        );
        text.push_str(&edited(
            "mirrors = config.setdefault(\"registry-mirrors\", [])\nif mirror not in mirrors:\n    mirrors.insert(0, mirror)\n",
            r#"."registry-mirrors" = ([$m] + ((."registry-mirrors" // []) - [$m]))"#,
            "$file holds other settings: merging needs python3 or jq (or run pkgproxyctl setup docker --apply)",
        ));
        text.push_str(RESTART_SCRIPT);
        text.push_str("# dockerd mirrors Docker Hub only: other registries are pulled as HOST:PORT/ghcr.io/OWNER/IMAGE\n# (over plain http that needs \"insecure-registries\": [\"HOST:PORT\"]).\n");
        text
    }

    /// A POSIX script taking `base` out of `registry-mirrors`.
    pub fn undo_script(base: &str) -> String {
        let mut text = preamble(base, "Takes out");
        text.push_str("if [ ! -f \"$file\" ] || ! grep -q \"\\\"$mirror\\\"\" \"$file\"; then\n  exit 0\n");
        text.push_str(&edited(
            "mirrors = [m for m in config.get(\"registry-mirrors\", []) if m != mirror]\nif mirrors:\n    config[\"registry-mirrors\"] = mirrors\nelse:\n    config.pop(\"registry-mirrors\", None)\n",
            r#"((."registry-mirrors" // []) - [$m]) as $left | if $left == [] then del(."registry-mirrors") else ."registry-mirrors" = $left end"#,
            "taking the mirror out of $file needs python3 or jq (or run pkgproxyctl setup docker --undo)",
        ));
        text.push_str(RESTART_SCRIPT);
        text
    }

    /// The script's branches that change `daemon.json` in place: `python`
    /// (lines changing `config`, with `mirror`), else `jq` (a filter, with
    /// `$m`), else `cannot` said and a failure.
    fn edited(python: &str, jq: &str, cannot: &str) -> String {
        format!(
            r#"elif command -v python3 >/dev/null 2>&1; then
  python3 - "$file" "$mirror" <<'EOF'
import json, sys
path, mirror = sys.argv[1], sys.argv[2]
with open(path) as f:
    config = json.load(f)
{python}with open(path, "w") as f:
    json.dump(config, f, indent=2)
    f.write("\n")
EOF
elif command -v jq >/dev/null 2>&1; then
  jq --arg m "$mirror" '{jq}' "$file" > "$file.pkgproxy"
  mv "$file.pkgproxy" "$file"
else
  echo "{cannot}" >&2
  exit 1
fi
"#
        )
    }

    fn read(path: &Path) -> anyhow::Result<Value> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(json!({})),
            Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    fn write(path: &Path, config: &Value) -> anyhow::Result<()> {
        let dir = path.parent().context("the file's folder")?;
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(path, format!("{}\n", serde_json::to_string_pretty(config)?))
            .with_context(|| format!("cannot write {}", path.display()))
    }

    fn mirrors(config: &mut Value) -> anyhow::Result<&mut Vec<Value>> {
        let object = config.as_object_mut().context("daemon.json is not a JSON object")?;
        let mirrors = object.entry("registry-mirrors").or_insert_with(|| json!([]));
        mirrors.as_array_mut().context("registry-mirrors is not a list")
    }

    pub fn apply(path: &Path, base: &str, restart: bool) -> anyhow::Result<()> {
        let mut config = read(path)?;
        let list = mirrors(&mut config)?;
        if !list.iter().any(|mirror| mirror == base) {
            list.insert(0, json!(base));
        }
        write(path, &config)?;
        println!("added {base} to registry-mirrors in {}", path.display());
        if restart {
            super::run(RESTART)?;
        }
        Ok(())
    }

    pub fn undo(path: &Path, base: &str, restart: bool) -> anyhow::Result<()> {
        let mut config = read(path)?;
        let list = mirrors(&mut config)?;
        list.retain(|mirror| mirror != base);
        if list.is_empty() {
            config.as_object_mut().map(|object| object.remove("registry-mirrors"));
        }
        write(path, &config)?;
        println!("took {base} out of registry-mirrors in {}", path.display());
        if restart {
            super::run(RESTART)?;
        }
        Ok(())
    }
}
