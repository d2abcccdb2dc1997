//! What `pkgproxyctl setup CLIENT` prints, and for clients configured by a
//! file, writes (`--apply`) and takes back (`--undo`).
//!
//! - apt: `/etc/apt/apt.conf.d/01pkgproxy`, apt's proxy line.
//! - go: `/etc/profile.d/pkgproxy-go.sh`, `GOPROXY` for login shells.
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
//! - k3s and rke2: `registries.yaml` with a mirror per registry, each in
//!   its own folder, for its server or agent unit.
//! - LXD, both ways ([`lxd`]): pkgproxy's image remotes for the LXD
//!   client, a profile for containers' own traffic, the daemon's proxy.
//!
//! A file pkgproxy writes whole carries a marker line: `--undo` removes
//! only such a file, and neither `--apply` nor the printed script ever
//! writes over a file without it (what to add by hand is said instead, and
//! it carries no marker: an undo never takes an admin's file for
//! pkgproxy's). A service is restarted only when its file changed, and only
//! if it runs (a stopped service stays stopped). `PKGPROXY_SETUP_ROOT=DIR`
//! makes every path (script, `--apply`, `--undo`) work under DIR instead
//! of `/`, and restart nothing.

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
    /// k3s, server or agent.
    K3s,
    /// rke2, server or agent.
    Rke2,
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
    /// Its content for pkgproxy at `http://HOST:PORT`: the marker line,
    /// then [`Plan::settings`].
    content: String,
    /// What makes the client read it once changed.
    restart: Restart,
    /// What else to tell the user.
    note: String,
}

impl Plan {
    /// The content without its marker line: what an admin adds by hand to
    /// a file of their own.
    fn settings(&self) -> &str {
        self.content.split_once('\n').map_or("", |(_, rest)| rest)
    }
}

/// The services that read a setup's file, restarted when it changed.
#[derive(Debug, Clone, Copy)]
pub struct Restart {
    /// Whether systemd reads the file itself (a unit's drop-in):
    /// `daemon-reload` first.
    daemon_reload: bool,
    /// The units to restart, each only if it runs (a node runs one of
    /// k3s's server and agent).
    units: &'static [&'static str],
}

impl Restart {
    const NOTHING: Restart = Restart { daemon_reload: false, units: &[] };

    fn is_nothing(&self) -> bool {
        !self.daemon_reload && self.units.is_empty()
    }

    /// The shell lines doing it (as root, on the real system).
    fn script(&self, indent: &str) -> String {
        let mut text = String::new();
        if self.daemon_reload {
            text.push_str(&format!(
                "{indent}systemctl daemon-reload
"
            ));
        }
        for unit in self.units {
            text.push_str(&format!(
                "{indent}if systemctl is-active --quiet {unit}; then systemctl try-restart {unit}; echo \"restarted {unit}\"; fi\n"
            ));
        }
        text
    }
}

/// What `client` sets to use pkgproxy at `base` (`http://HOST:PORT`): for
/// a client set up by a file, a root shell script writing it
/// (`pkgproxyctl setup snap | sudo sh` works).
pub fn print(client: Client, base: &str) -> String {
    if let Some(plan) = plan(client, base) {
        return script(client, &plan);
    }
    match client {
        Client::Docker => docker::script(base),
        Client::LxdDaemon => lxd::daemon(base),
        Client::Go | Client::Apt | Client::Snap | Client::Containerd | Client::Podman | Client::K3s | Client::Rke2 => {
            format!("# pkgproxyctl setup {}: nothing to print\n", name(client))
        }
        Client::LxdRemote | Client::Lxd | Client::Snapcraft => {
            format!("# pkgproxyctl setup {} --print shows what it does\n", name(client))
        }
    }
}

/// The reverse of [`print()`]: a root shell script taking `client`'s setup
/// for pkgproxy at `base` back (`pkgproxyctl setup snap --undo --print |
/// sudo sh`).
pub fn print_undo(client: Client, base: &str) -> String {
    if let Some(plan) = plan(client, base) {
        return undo_script(client, &plan);
    }
    match client {
        Client::Docker => docker::undo_script(base),
        Client::LxdDaemon => "lxc config unset core.proxy_http\nlxc config unset core.proxy_https\n".to_string(),
        _ => format!("# pkgproxyctl setup {} --undo --print shows what it does\n", name(client)),
    }
}

/// `client` as the command line names it.
fn name(client: Client) -> String {
    clap::ValueEnum::to_possible_value(&client)
        .map_or_else(|| format!("{client:?}"), |value| value.get_name().to_owned())
}

/// The script's opening: what it does, and the root it works under.
fn preamble(client: Client, what: &str) -> String {
    format!(
        "#!/bin/sh\n# {what} (run again, it changes nothing);\n# pkgproxyctl setup {client} --apply does the same, --undo takes it back. A file that is\n# not pkgproxy's is never written over. PKGPROXY_SETUP_ROOT=DIR works under DIR instead of /,\n# and restarts nothing.\nset -eu\nroot=\"${{PKGPROXY_SETUP_ROOT:-}}\"\n",
        client = name(client)
    )
}

/// The script's lines restarting what reads the file once `changed`.
fn restart_script(restart: &Restart) -> String {
    if restart.is_nothing() {
        return String::new();
    }
    let mut text = "if [ \"$changed\" = 1 ]; then\n  if [ -z \"$root\" ]; then\n".to_string();
    text.push_str(&restart.script("    "));
    text.push_str(&format!(
        "  else\n    echo \"under $root: restarting nothing ({})\"\n  fi\nfi\n",
        restart.units.join(", ")
    ));
    text
}

/// A plan as a POSIX shell script to pipe to `sh` as root (`pkgproxyctl
/// setup snap | sudo sh`): it writes the file whole unless a file that is
/// not pkgproxy's is there, and restarts the client only when the file
/// changed.
fn script(client: Client, plan: &Plan) -> String {
    let dir = plan.path.rsplit_once('/').map_or("/", |(dir, _)| dir);
    let mut text = preamble(client, &format!("Writes {}", plan.path));
    text.push_str(&format!(
        "file=\"$root{path}\"\nif [ -f \"$file\" ] && ! grep -q '{MARKER}' \"$file\"; then\n  echo \"$file is there and is not pkgproxy's: left as it is. Add this to it by hand:\" >&2\n  cat >&2 <<'EOF'\n{settings}EOF\n  exit 1\nfi\nmkdir -p \"$root{dir}\"\ncat > \"$file.pkgproxy-new\" <<'EOF'\n{content}EOF\nif cmp -s \"$file.pkgproxy-new\" \"$file\"; then\n  rm -f \"$file.pkgproxy-new\"\n  changed=0\nelse\n  mv \"$file.pkgproxy-new\" \"$file\"\n  changed=1\n  echo \"wrote $file\"\nfi\n",
        path = plan.path,
        settings = plan.settings(),
        content = plan.content
    ));
    text.push_str(&restart_script(&plan.restart));
    text.push_str(&plan.note);
    text
}

/// The reverse of [`script`]: removes the plan's file if pkgproxy wrote it.
fn undo_script(client: Client, plan: &Plan) -> String {
    let mut text = preamble(client, &format!("Removes {} if pkgproxyctl setup wrote it", plan.path));
    text.push_str(&format!(
        "file=\"$root{path}\"\nchanged=0\nif [ -f \"$file\" ] && grep -q '{MARKER}' \"$file\"; then\n  rm -f \"$file\"\n  changed=1\n  echo \"removed $file\"\nelif [ -f \"$file\" ]; then\n  echo \"$file is not pkgproxy's: left as it is\" >&2\n  exit 1\nfi\n",
        path = plan.path
    ));
    text.push_str(&restart_script(&plan.restart));
    text
}

/// The file `client`'s setup writes, if it is written whole.
fn plan(client: Client, base: &str) -> Option<Plan> {
    let host = base.trim_start_matches("http://");
    let marker = |comment: &str| format!("{comment} {MARKER}: downloads go through pkgproxy.\n");
    let kubernetes = |path: &'static str, units: &'static [&'static str]| {
        let mut content = format!("{}mirrors:\n", marker("#"));
        for registry in std::iter::once("docker.io").chain(OTHER_REGISTRIES) {
            content.push_str(&format!("  \"{registry}\":\n    endpoint:\n      - \"{base}\"\n"));
        }
        let note = format!("# A node that runs neither {} reads it when its service starts.\n", units.join(" nor "));
        Plan { path, content, restart: Restart { daemon_reload: false, units }, note }
    };
    match client {
        Client::Snap => Some(Plan {
            path: "/etc/systemd/system/snapd.service.d/pkgproxy.conf",
            content: format!("{}[Service]\nEnvironment=SNAPPY_FORCE_API_URL={base}/snap/\n", marker("#")),
            restart: Restart { daemon_reload: true, units: &["snapd.service"] },
            note: format!("# The snap command run by users (snap download, snap known --remote) reads its own environment:\n# export SNAPPY_FORCE_API_URL={base}/snap/\n"),
        }),
        Client::Containerd => Some(Plan {
            path: "/etc/containerd/certs.d/_default/hosts.toml",
            content: format!("{}[host.\"{base}\"]\n  capabilities = [\"pull\", \"resolve\"]\n", marker("#")),
            restart: Restart::NOTHING,
            note: "# containerd reads it when its registry config_path is /etc/containerd/certs.d:\n#   containerd 1.x (CRI): [plugins.\"io.containerd.grpc.v1.cri\".registry] config_path = \"/etc/containerd/certs.d\"\n#   containerd 2.x: [plugins.\"io.containerd.cri.v1.images\".registry] config_path = \"/etc/containerd/certs.d\"\n#   ctr: --hosts-dir /etc/containerd/certs.d\n# A registry's own folder (certs.d/docker.io/hosts.toml) wins over _default for that registry.\n".into(),
        }),
        Client::Podman => {
            let mut content = format!("{}[[registry]]\nprefix = \"docker.io\"\nlocation = \"registry-1.docker.io\"\n[[registry.mirror]]\nlocation = \"{host}\"\ninsecure = true\n", marker("#"));
            for registry in OTHER_REGISTRIES {
                content.push_str(&format!("[[registry]]\nprefix = \"{registry}\"\nlocation = \"{registry}\"\n[[registry.mirror]]\nlocation = \"{host}/{registry}\"\ninsecure = true\n"));
            }
            let note = "# A [[registry]] of the same prefix elsewhere in registries.conf.d is replaced by this one.\n".into();
            Some(Plan { path: "/etc/containers/registries.conf.d/50-pkgproxy.conf", content, restart: Restart::NOTHING, note })
        }
        Client::K3s => Some(kubernetes("/etc/rancher/k3s/registries.yaml", &["k3s.service", "k3s-agent.service"])),
        Client::Rke2 => {
            Some(kubernetes("/etc/rancher/rke2/registries.yaml", &["rke2-server.service", "rke2-agent.service"]))
        }
        Client::Apt => Some(Plan {
            path: "/etc/apt/apt.conf.d/01pkgproxy",
            content: format!("{}Acquire::http::Proxy \"{base}/\";\n", marker("//")),
            restart: Restart::NOTHING,
            note: String::new(),
        }),
        Client::Go => Some(Plan {
            path: "/etc/profile.d/pkgproxy-go.sh",
            content: format!("{}# go checks sums through it too (GOSUMDB keeps its default).\nexport GOPROXY={base}/go\n", marker("#")),
            restart: Restart::NOTHING,
            note: format!("# Login shells read it from now on; in this one: export GOPROXY={base}/go\n# Services and CI runners do not read profile.d: give them GOPROXY in their own environment.\n"),
        }),
        Client::Docker => None,
        Client::LxdRemote | Client::Lxd | Client::Snapcraft | Client::LxdDaemon => None,
    }
}

/// Where a setup is written: the file system's root, or the folder
/// standing for it (`PKGPROXY_SETUP_ROOT`), where nothing is restarted.
#[derive(Debug, Clone)]
pub struct Target {
    /// The root.
    pub root: PathBuf,
    /// Whether services are restarted (the real root, and not asked not to).
    pub restarts: bool,
}

impl Target {
    /// The root `PKGPROXY_SETUP_ROOT` names, else `root`; restarting only
    /// on the real root, unless `no_restart`.
    pub fn new(root: &Path, no_restart: bool) -> Target {
        let root = std::env::var_os("PKGPROXY_SETUP_ROOT")
            .filter(|value| !value.is_empty())
            .map_or_else(|| root.to_path_buf(), PathBuf::from);
        let restarts = !no_restart && root == Path::new("/");
        Target { root, restarts }
    }

    fn path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// Restarts what `restart` names, if it runs, or says it does not.
    fn restart(&self, restart: &Restart) -> anyhow::Result<()> {
        if restart.is_nothing() {
            return Ok(());
        }
        if !self.restarts {
            println!("under {}: restarting nothing ({})", self.root.display(), restart.units.join(", "));
            return Ok(());
        }
        if restart.daemon_reload {
            run(&["systemctl", "daemon-reload"])?;
        }
        let mut restarted = false;
        for unit in restart.units {
            let runs = Command::new("systemctl").args(["is-active", "--quiet", unit]).status();
            if runs.is_ok_and(|status| status.success()) {
                run(&["systemctl", "try-restart", unit])?;
                restarted = true;
            }
        }
        if !restarted {
            println!("{} not running: read when it starts", restart.units.join(", "));
        }
        Ok(())
    }
}

/// Writes `client`'s setup for pkgproxy at `base` under `target`, then,
/// if the file changed, makes the client read it.
pub fn apply(client: Client, base: &str, target: &Target) -> anyhow::Result<()> {
    if let Client::Docker = client {
        return docker::apply(target, base);
    }
    let plan = plan(client, base).context("this client is set up by hand: print its setup and add it")?;
    let path = target.path(plan.path);
    let existing = match std::fs::read_to_string(&path) {
        Ok(existing) => Some(existing),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
    };
    if let Some(existing) = &existing {
        anyhow::ensure!(
            existing.contains(MARKER),
            "{} is there and is not pkgproxy's: left as it is. Add this to it by hand:\n{}",
            path.display(),
            plan.settings()
        );
    }
    if existing.as_deref() == Some(plan.content.as_str()) {
        println!("{} is as it should be", path.display());
    } else {
        let dir = path.parent().context("the file's folder")?;
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(&path, &plan.content).with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
        target.restart(&plan.restart)?;
    }
    print!("{}", plan.note);
    Ok(())
}

/// Takes `client`'s setup for pkgproxy at `base` back under `target`.
pub fn undo(client: Client, base: &str, target: &Target) -> anyhow::Result<()> {
    if let Client::Docker = client {
        return docker::undo(target, base);
    }
    let plan = plan(client, base).context("this client is set up by hand: take its setup back by hand")?;
    let path = target.path(plan.path);
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
    target.restart(&plan.restart)
}

/// Runs `command`, failing when it does.
fn run(command: &[&str]) -> anyhow::Result<()> {
    let status =
        Command::new(command[0]).args(&command[1..]).status().with_context(|| format!("cannot run {}", command[0]))?;
    anyhow::ensure!(status.success(), "{} failed: {status}", command.join(" "));
    println!("ran {}", command.join(" "));
    Ok(())
}

/// dockerd's `daemon.json`, which holds more than pkgproxy's line: the
/// mirror is merged in and taken out, the rest left as it is.
mod docker {
    use anyhow::Context;
    use serde_json::{json, Value};

    use super::{Restart, Target};

    /// What reads `daemon.json`.
    const RESTART: Restart = Restart { daemon_reload: false, units: &["docker.service"] };

    /// Where `daemon.json` is.
    const PATH: &str = "/etc/docker/daemon.json";

    /// The script's start: where the file is, and which mirror.
    fn preamble(base: &str, what: &str) -> String {
        format!(
            "#!/bin/sh\n# {what} {base} in dockerd's registry-mirrors ({PATH}), keeping the rest of the\n# file; run again, it changes nothing, and dockerd is restarted only when the file changed (if it\n# runs). pkgproxyctl setup docker --apply (--undo) does the same. PKGPROXY_SETUP_ROOT=DIR works\n# under DIR instead of /, and restarts nothing. Merging into a file that holds other settings\n# needs python3 or jq.\nset -eu\nroot=\"${{PKGPROXY_SETUP_ROOT:-}}\"\nfile=\"$root{PATH}\"\nmirror='{base}'\nchanged=1\n"
        )
    }

    /// A POSIX script putting `base` first in `registry-mirrors`.
    pub fn script(base: &str) -> String {
        let mut text = preamble(base, "Puts");
        text.push_str(
            r#"if [ ! -s "$file" ]; then
  mkdir -p "$root/etc/docker"
  printf '{\n  "registry-mirrors": [\n    "%s"\n  ]\n}\n' "$mirror" > "$file"
elif grep -q "\"$mirror\"" "$file"; then
  changed=0
"#,
        );
        text.push_str(&edited(
            "mirrors = config.setdefault(\"registry-mirrors\", [])\nif mirror not in mirrors:\n    mirrors.insert(0, mirror)\n",
            r#"."registry-mirrors" = ([$m] + ((."registry-mirrors" // []) - [$m]))"#,
            "$file holds other settings: merging needs python3 or jq (or run pkgproxyctl setup docker --apply)",
        ));
        text.push_str(&super::restart_script(&RESTART));
        text.push_str("# dockerd mirrors Docker Hub only: other registries are pulled as HOST:PORT/ghcr.io/OWNER/IMAGE\n# (over plain http that needs \"insecure-registries\": [\"HOST:PORT\"]).\n");
        text
    }

    /// A POSIX script taking `base` out of `registry-mirrors`.
    pub fn undo_script(base: &str) -> String {
        let mut text = preamble(base, "Takes out");
        text.push_str("if [ ! -f \"$file\" ] || ! grep -q \"\\\"$mirror\\\"\" \"$file\"; then\n  changed=0\n");
        text.push_str(&edited(
            "mirrors = [m for m in config.get(\"registry-mirrors\", []) if m != mirror]\nif mirrors:\n    config[\"registry-mirrors\"] = mirrors\nelse:\n    config.pop(\"registry-mirrors\", None)\n",
            r#"((."registry-mirrors" // []) - [$m]) as $left | if $left == [] then del(."registry-mirrors") else ."registry-mirrors" = $left end"#,
            "taking the mirror out of $file needs python3 or jq (or run pkgproxyctl setup docker --undo)",
        ));
        text.push_str(&super::restart_script(&RESTART));
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

    /// `daemon.json` as it is (`None`: not there).
    fn read(path: &std::path::Path) -> anyhow::Result<Option<Value>> {
        match std::fs::read_to_string(path) {
            Ok(text) if text.trim().is_empty() => Ok(Some(json!({}))),
            Ok(text) => {
                serde_json::from_str(&text).map(Some).with_context(|| format!("{} is not JSON", path.display()))
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    fn write(path: &std::path::Path, config: &Value) -> anyhow::Result<()> {
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

    pub fn apply(target: &Target, base: &str) -> anyhow::Result<()> {
        let path = target.path(PATH);
        let mut config = read(&path)?.unwrap_or_else(|| json!({}));
        let list = mirrors(&mut config)?;
        if list.iter().any(|mirror| mirror == base) {
            println!("{base} is in registry-mirrors in {} already", path.display());
            return Ok(());
        }
        list.insert(0, json!(base));
        write(&path, &config)?;
        println!("added {base} to registry-mirrors in {}", path.display());
        target.restart(&RESTART)
    }

    pub fn undo(target: &Target, base: &str) -> anyhow::Result<()> {
        let path = target.path(PATH);
        let Some(mut config) = read(&path)? else {
            println!("{} is not there: nothing to take out", path.display());
            return Ok(());
        };
        let list = mirrors(&mut config)?;
        if !list.iter().any(|mirror| mirror == base) {
            println!("{base} is not in registry-mirrors in {}: nothing to take out", path.display());
            return Ok(());
        }
        list.retain(|mirror| mirror != base);
        if list.is_empty() {
            config.as_object_mut().map(|object| object.remove("registry-mirrors"));
        }
        write(&path, &config)?;
        println!("took {base} out of registry-mirrors in {}", path.display());
        target.restart(&RESTART)
    }
}
