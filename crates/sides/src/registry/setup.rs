//! The registry's client setups:
//!
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

use anyhow::Context;
use serde_json::{json, Value};

use crate::setup::{restart_script, Action, FilePlan, Procedure, Restart, Setup, SetupClient, Target, WholeFile};

/// The clients `pkgproxyctl setup` points at the registry side.
pub const CLIENTS: &[SetupClient] = &[
    SetupClient { name: "docker", about: "dockerd", procedure: &Docker },
    SetupClient {
        name: "containerd",
        about: "containerd (and Kubernetes nodes on it)",
        procedure: &WholeFile(containerd),
    },
    SetupClient {
        name: "podman",
        about: "podman, buildah, skopeo and CRI-O (containers-registries.conf)",
        procedure: &WholeFile(podman),
    },
    SetupClient { name: "k3s", about: "k3s, server or agent", procedure: &WholeFile(k3s) },
    SetupClient { name: "rke2", about: "rke2, server or agent", procedure: &WholeFile(rke2) },
];

/// The registries a mirror entry is written for, beside Docker Hub.
const OTHER_REGISTRIES: [&str; 6] =
    ["ghcr.io", "quay.io", "registry.k8s.io", "gcr.io", "public.ecr.aws", "mcr.microsoft.com"];

fn containerd(base: &str) -> FilePlan {
    let settings = format!("[host.\"{base}\"]\n  capabilities = [\"pull\", \"resolve\"]\n");
    FilePlan::new("/etc/containerd/certs.d/_default/hosts.toml", "#", &settings).noting("# containerd reads it when its registry config_path is /etc/containerd/certs.d:\n#   containerd 1.x (CRI): [plugins.\"io.containerd.grpc.v1.cri\".registry] config_path = \"/etc/containerd/certs.d\"\n#   containerd 2.x: [plugins.\"io.containerd.cri.v1.images\".registry] config_path = \"/etc/containerd/certs.d\"\n#   ctr: --hosts-dir /etc/containerd/certs.d\n# A registry's own folder (certs.d/docker.io/hosts.toml) wins over _default for that registry.\n")
}

fn podman(base: &str) -> FilePlan {
    let host = base.trim_start_matches("http://");
    let mut settings = format!("[[registry]]\nprefix = \"docker.io\"\nlocation = \"registry-1.docker.io\"\n[[registry.mirror]]\nlocation = \"{host}\"\ninsecure = true\n");
    for registry in OTHER_REGISTRIES {
        settings.push_str(&format!("[[registry]]\nprefix = \"{registry}\"\nlocation = \"{registry}\"\n[[registry.mirror]]\nlocation = \"{host}/{registry}\"\ninsecure = true\n"));
    }
    FilePlan::new("/etc/containers/registries.conf.d/50-pkgproxy.conf", "#", &settings)
        .noting("# A [[registry]] of the same prefix elsewhere in registries.conf.d is replaced by this one.\n")
}

fn k3s(base: &str) -> FilePlan {
    kubernetes(base, "/etc/rancher/k3s/registries.yaml", &["k3s.service", "k3s-agent.service"])
}

fn rke2(base: &str) -> FilePlan {
    kubernetes(base, "/etc/rancher/rke2/registries.yaml", &["rke2-server.service", "rke2-agent.service"])
}

/// A Kubernetes distribution's `registries.yaml`, read by `units`.
fn kubernetes(base: &str, path: &'static str, units: &'static [&'static str]) -> FilePlan {
    let mut settings = "mirrors:\n".to_owned();
    for registry in std::iter::once("docker.io").chain(OTHER_REGISTRIES) {
        settings.push_str(&format!("  \"{registry}\":\n    endpoint:\n      - \"{base}\"\n"));
    }
    let note = format!("# A node that runs neither {} reads it when its service starts.\n", units.join(" nor "));
    FilePlan::new(path, "#", &settings).restarting(Restart { daemon_reload: false, units }).noting(note)
}

/// dockerd's `daemon.json`, which holds more than pkgproxy's line: the
/// mirror is merged in and taken out, the rest left as it is.
struct Docker;

impl Procedure for Docker {
    fn run(&self, _client: &str, action: Action, setup: &Setup<'_>) -> anyhow::Result<()> {
        match action {
            Action::Print => print!("{}", script(setup.base)),
            Action::PrintUndo => print!("{}", undo_script(setup.base)),
            Action::Apply => apply(setup.target, setup.base)?,
            Action::Undo => undo(setup.target, setup.base)?,
        }
        Ok(())
    }
}

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
fn script(base: &str) -> String {
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
    text.push_str(&restart_script(&RESTART));
    text.push_str("# dockerd mirrors Docker Hub only: other registries are pulled as HOST:PORT/ghcr.io/OWNER/IMAGE\n# (over plain http that needs \"insecure-registries\": [\"HOST:PORT\"]).\n");
    text
}

/// A POSIX script taking `base` out of `registry-mirrors`.
fn undo_script(base: &str) -> String {
    let mut text = preamble(base, "Takes out");
    text.push_str("if [ ! -f \"$file\" ] || ! grep -q \"\\\"$mirror\\\"\" \"$file\"; then\n  changed=0\n");
    text.push_str(&edited(
        "mirrors = [m for m in config.get(\"registry-mirrors\", []) if m != mirror]\nif mirrors:\n    config[\"registry-mirrors\"] = mirrors\nelse:\n    config.pop(\"registry-mirrors\", None)\n",
        r#"((."registry-mirrors" // []) - [$m]) as $left | if $left == [] then del(."registry-mirrors") else ."registry-mirrors" = $left end"#,
        "taking the mirror out of $file needs python3 or jq (or run pkgproxyctl setup docker --undo)",
    ));
    text.push_str(&restart_script(&RESTART));
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
        Ok(text) => serde_json::from_str(&text).map(Some).with_context(|| format!("{} is not JSON", path.display())),
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

fn apply(target: &Target, base: &str) -> anyhow::Result<()> {
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

fn undo(target: &Target, base: &str) -> anyhow::Result<()> {
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
