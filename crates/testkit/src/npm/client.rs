//! The npm-family clients, run as a user with no configuration of their own
//! would run them: the machine's npm, and the pnpm, yarn 1 and yarn 4
//! `test.sh` installs into the test tools' `node` folder (each started with
//! node, their install scripts never run).
//!
//! A client runs with an environment cleared of everything but `PATH` and
//! what isolates it (no user or global npmrc, no update checks, no
//! telemetry, no CI detection, no proxy), so only what the test says
//! reaches it; its `HOME`, caches and project are a sandbox's.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Map, Value};

/// One of the npm-family clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeClient {
    /// The machine's npm.
    Npm,
    /// pnpm, current.
    Pnpm,
    /// yarn 1 (classic).
    Yarn1,
    /// yarn 4 (berry).
    Yarn4,
}

impl NodeClient {
    /// Every client.
    pub const ALL: [NodeClient; 4] = [NodeClient::Npm, NodeClient::Pnpm, NodeClient::Yarn1, NodeClient::Yarn4];

    /// Its name, as [`node_tool`] takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeClient::Npm => "npm",
            NodeClient::Pnpm => "pnpm",
            NodeClient::Yarn1 => "yarn1",
            NodeClient::Yarn4 => "yarn4",
        }
    }

    /// The lockfile it writes in a project, by name.
    pub fn lockfile(self) -> &'static str {
        match self {
            NodeClient::Npm => "package-lock.json",
            NodeClient::Pnpm => "pnpm-lock.yaml",
            NodeClient::Yarn1 | NodeClient::Yarn4 => "yarn.lock",
        }
    }

    /// The arguments of an install that follows the lockfile and fails if
    /// it would change it.
    pub fn locked_install(self) -> &'static [&'static str] {
        match self {
            NodeClient::Npm => &["ci"],
            NodeClient::Pnpm => &["install", "--frozen-lockfile"],
            NodeClient::Yarn1 => &["install", "--frozen-lockfile"],
            NodeClient::Yarn4 => &["install", "--immutable"],
        }
    }
}

/// The test tools' `node_modules` (`test.sh` installs pnpm and the yarns
/// there).
fn tools() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tools/node/node_modules")
}

/// The first of `scripts` (below the tools' `node_modules`) that exists.
fn script(scripts: &[&str]) -> PathBuf {
    let candidates: Vec<PathBuf> = scripts.iter().map(|script| tools().join(script)).collect();
    let found = candidates.iter().find(|path| path.exists());
    found.cloned().unwrap_or_else(|| panic!("{} is missing: test.sh installs it", candidates[0].display()))
}

/// Client `name` (`npm`, `pnpm`, `yarn1` or `yarn4`; see
/// [`NodeClient::as_str`]) as a command, its environment cleared but for
/// `PATH` and the settings that keep it to what the test says: no user or
/// global npmrc, no update checks, no telemetry, no CI, no proxy, no
/// `packageManager` enforcement. The caller sets `HOME` (a folder of its
/// own: npm and pnpm read `~/.npmrc`, yarn 1 `~/.yarnrc`), and the
/// registry. Panics if the tool is missing.
pub fn node_tool(name: &str) -> Command {
    let mut command = match name {
        "npm" => Command::new("npm"),
        "pnpm" | "yarn1" | "yarn4" => {
            let script = match name {
                "pnpm" => script(&["pnpm/bin/pnpm.mjs", "pnpm/bin/pnpm.cjs"]),
                "yarn1" => script(&["yarn/bin/yarn.js"]),
                _ => script(&["@yarnpkg/cli-dist/bin/yarn.js"]),
            };
            let mut command = Command::new("node");
            command.arg(script);
            command
        }
        _ => panic!("no such client as {name}: npm, pnpm, yarn1 or yarn4"),
    };
    command.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
        .env("npm_config_userconfig", "/dev/null")
        .env("npm_config_globalconfig", "/dev/null/npmrc")
        .env("npm_config_update_notifier", "false")
        .env("NO_UPDATE_NOTIFIER", "1")
        .env("COREPACK_ENABLE_STRICT", "0")
        .env("YARN_ENABLE_TELEMETRY", "0")
        .env("YARN_IGNORE_PATH", "1");
    command
}

/// Writes `dir/package.json`: a private project `app` depending on `deps`
/// (names and ranges), no `packageManager`.
pub fn npm_project(dir: &Path, deps: &[(&str, &str)]) {
    let dependencies: Map<String, Value> = deps.iter().map(|(name, range)| (name.to_string(), json!(range))).collect();
    let manifest = json!({"name": "app", "version": "1.0.0", "private": true, "dependencies": dependencies});
    let text = serde_json::to_string_pretty(&manifest).expect("a manifest") + "\n";
    std::fs::write(dir.join("package.json"), text).expect("package.json");
}

/// What a client run printed, and how it ended.
#[derive(Debug)]
pub struct NodeOutput {
    /// Whether it succeeded.
    pub success: bool,
    /// Its standard output and error, together.
    pub output: String,
}

/// A project for one client, with a `HOME` and caches of its own.
pub struct NodeSandbox {
    dir: tempfile::TempDir,
    client: NodeClient,
}

impl NodeSandbox {
    /// A project `app` depending on `deps` (names and ranges), for
    /// `client`.
    pub fn new(client: NodeClient, deps: &[(&str, &str)]) -> NodeSandbox {
        let dir = tempfile::Builder::new().prefix("nodesandbox").tempdir().expect("temp dir");
        for folder in ["app", "home"] {
            std::fs::create_dir_all(dir.path().join(folder)).expect("a sandbox folder");
        }
        npm_project(&dir.path().join("app"), deps);
        NodeSandbox { dir, client }
    }

    /// The project's folder.
    pub fn app(&self) -> PathBuf {
        self.dir.path().join("app")
    }

    /// The client's `HOME`.
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// Where the client keeps what it downloads (and pnpm its store).
    pub fn cache(&self) -> PathBuf {
        self.dir.path().join("cache")
    }

    /// The project's lockfile.
    pub fn lockfile(&self) -> PathBuf {
        self.app().join(self.client.lockfile())
    }

    /// The version of `name` installed in the project (at the top of
    /// `node_modules`, or where pnpm hoists what is not there), if any.
    pub fn installed(&self, name: &str) -> Option<String> {
        let modules = self.app().join("node_modules");
        [modules.join(name), modules.join(".pnpm/node_modules").join(name)].iter().find_map(|folder| {
            let manifest: Value = serde_json::from_slice(&std::fs::read(folder.join("package.json")).ok()?).ok()?;
            Some(manifest["version"].as_str()?.to_owned())
        })
    }

    /// Removes the project's `node_modules` and the client's caches (not
    /// its lockfile): the next install downloads everything again.
    pub fn forget(&self) {
        for folder in [self.app().join("node_modules"), self.cache()] {
            if folder.exists() {
                std::fs::remove_dir_all(&folder).expect("remove a sandbox folder");
            }
        }
    }

    /// The client running `args` in the project, with `registry`
    /// (`http://HOST:PORT/PATH`, no trailing `/`) as its registry, the
    /// sandbox's `HOME` and caches, and no audit, funding or progress
    /// output. yarn 4 reads its registry from the project's `.yarnrc.yml`,
    /// written here: global cache off, `node_modules` linked, plain HTTP
    /// allowed to the registry's host.
    pub fn command(&self, registry: &str, args: &[&str]) -> Command {
        let mut command = node_tool(self.client.as_str());
        command.current_dir(self.app()).env("HOME", self.home()).args(args);
        let cache = self.cache();
        let registry_slash = format!("{registry}/");
        match self.client {
            NodeClient::Npm => {
                command.args(["--registry", &registry_slash, "--cache"]).arg(&cache);
                command.args(["--no-audit", "--no-fund", "--update-notifier=false", "--progress=false"]);
            }
            NodeClient::Pnpm => {
                command.args(["--registry", &registry_slash, "--store-dir"]).arg(cache.join("store"));
                command.arg(format!("--config.cache-dir={}", cache.join("metadata").display()));
                command.args(["--config.update-notifier=false", "--reporter=append-only"]);
            }
            NodeClient::Yarn1 => {
                command.args(["--registry", &registry_slash, "--cache-folder"]).arg(&cache);
                command.args(["--non-interactive", "--no-progress"]);
            }
            NodeClient::Yarn4 => self.write_yarnrc(registry),
        }
        command
    }

    fn write_yarnrc(&self, registry: &str) {
        let host = registry.split("://").nth(1).and_then(|rest| rest.split([':', '/']).next()).unwrap_or_default();
        let yarnrc = format!(
            "npmRegistryServer: \"{registry}\"\nunsafeHttpWhitelist: [\"{host}\"]\nenableGlobalCache: false\n\
             cacheFolder: \"{}\"\nenableTelemetry: false\nnodeLinker: node-modules\n\
             enableImmutableInstalls: false\nenableMirror: false\nenableProgressBars: false\n",
            self.cache().display()
        );
        std::fs::write(self.app().join(".yarnrc.yml"), yarnrc).expect(".yarnrc.yml");
    }

    /// Runs the client with `args` against `registry` (see
    /// [`NodeSandbox::command`]).
    pub fn run(&self, registry: &str, args: &[&str]) -> NodeOutput {
        let output = self.command(registry, args).output().expect("the client runs");
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        NodeOutput { success: output.status.success(), output: text }
    }

    /// An install that resolves and writes the lockfile.
    pub fn install(&self, registry: &str) -> NodeOutput {
        self.run(registry, &["install"])
    }

    /// An install that follows the lockfile (`npm ci`, `--frozen-lockfile`,
    /// `--immutable`).
    pub fn install_locked(&self, registry: &str) -> NodeOutput {
        self.run(registry, self.client.locked_install())
    }
}
