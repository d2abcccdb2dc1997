//! The go command's world for tests: a module proxy file tree of small
//! modules (served by [`crate::Origin`]), a module that depends on them,
//! and a sandboxed `go` whose caches, proxy and environment the test sets.
//!
//! The tree follows the module proxy protocol (`go help goproxy`):
//! `<escaped module>/@v/{list, VERSION.info, VERSION.mod, VERSION.zip}` and
//! `<escaped module>/@latest`, with zip entries named `module@version/...`.
//! Each version's `.info` says when it was published (`Time`), or, as a
//! proxy that does not know writes it, nothing.
//! Checksum database lookups can be added from sums the real go command
//! computed ([`GoModules::add_lookup`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

/// One module version of the tree.
#[derive(Debug, Clone)]
pub struct ModuleVersion {
    /// The module path, e.g. `example.com/HelloCaps`.
    pub path: String,
    /// The version, e.g. `v0.1.0`.
    pub version: String,
    /// Its `go.mod`.
    pub go_mod: String,
    /// Its files besides `go.mod`: name and content.
    pub files: Vec<(String, String)>,
    /// When its `.info` (and `@latest`, when it is the newest) says it was
    /// published; `None`: they give no `Time`, as a proxy that does not
    /// know it writes them.
    pub published: Option<SystemTime>,
}

/// When the standard tree's versions were published.
const STANDARD_TIME: Duration = Duration::from_secs(1_704_067_200);

impl ModuleVersion {
    /// `example.com/hello` at `version`, greeting with `greeting`.
    pub fn hello(version: &str, greeting: &str, published: Option<SystemTime>) -> ModuleVersion {
        ModuleVersion {
            path: "example.com/hello".into(),
            version: version.into(),
            go_mod: "module example.com/hello\n\ngo 1.19\n".into(),
            files: vec![(
                "hello.go".into(),
                format!("package hello\n\n// Hello greets.\nfunc Hello() string {{ return \"{greeting}\" }}\n"),
            )],
            published,
        }
    }
}

/// The case-encoded form of a module path (`!` + lower case for capitals).
pub fn escape(path: &str) -> String {
    path.chars()
        .flat_map(|c| match c.is_ascii_uppercase() {
            true => vec!['!', c.to_ascii_lowercase()],
            false => vec![c],
        })
        .collect()
}

/// A module proxy tree in a temporary folder.
pub struct GoModules {
    dir: tempfile::TempDir,
    /// The versions in it.
    pub versions: Vec<ModuleVersion>,
}

impl GoModules {
    /// The standard tree: `example.com/hello` v1.0.0 and v1.1.0, and
    /// `example.com/HelloCaps` v0.1.0, which needs hello v1.0.0.
    pub fn standard() -> GoModules {
        let published = Some(SystemTime::UNIX_EPOCH + STANDARD_TIME);
        let hello = |version: &str, greeting: &str| ModuleVersion::hello(version, greeting, published);
        let caps = ModuleVersion {
            path: "example.com/HelloCaps".into(),
            version: "v0.1.0".into(),
            go_mod: "module example.com/HelloCaps\n\ngo 1.19\n\nrequire example.com/hello v1.0.0\n".into(),
            files: vec![(
                "caps.go".into(),
                "package hellocaps\n\nimport \"example.com/hello\"\n\n// Greet greets loudly.\nfunc Greet() string { return hello.Hello() + \"!\" }\n"
                    .into(),
            )],
            published,
        };
        GoModules::build(vec![hello("v1.0.0", "hello"), hello("v1.1.0", "hello again"), caps])
    }

    /// `example.com/hello` at each of `versions`, each published when it
    /// says (`None`: its `.info` gives no `Time`).
    pub fn hello_published(versions: &[(&str, Option<SystemTime>)]) -> GoModules {
        let versions = versions
            .iter()
            .map(|(version, published)| ModuleVersion::hello(version, &format!("hello {version}"), *published))
            .collect();
        GoModules::build(versions)
    }

    /// A tree of `versions`.
    pub fn build(versions: Vec<ModuleVersion>) -> GoModules {
        let dir = tempfile::Builder::new().prefix("goproxy").tempdir().expect("temp dir");
        let modules = GoModules { dir, versions };
        for version in &modules.versions {
            modules.write_version(version);
        }
        let mut paths: Vec<&str> = modules.versions.iter().map(|v| v.path.as_str()).collect();
        paths.dedup();
        for path in paths {
            let mut list: Vec<&ModuleVersion> = modules.versions.iter().filter(|v| v.path == path).collect();
            list.sort_by(|a, b| a.version.cmp(&b.version));
            let folder = modules.module_dir(path);
            let lines: String = list.iter().map(|v| format!("{}\n", v.version)).collect();
            std::fs::write(folder.join("@v/list"), lines).expect("write list");
            let latest = list.last().expect("a version");
            std::fs::write(folder.join("@latest"), info(latest)).expect("write @latest");
        }
        modules
    }

    fn module_dir(&self, path: &str) -> PathBuf {
        self.dir.path().join(escape(path))
    }

    fn write_version(&self, version: &ModuleVersion) {
        let folder = self.module_dir(&version.path).join("@v");
        std::fs::create_dir_all(&folder).expect("module folder");
        std::fs::write(folder.join(format!("{}.info", version.version)), info(version)).expect("info");
        std::fs::write(folder.join(format!("{}.mod", version.version)), &version.go_mod).expect("mod");
        let prefix = format!("{}@{}/", version.path, version.version);
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        let mut files = vec![("go.mod".to_string(), version.go_mod.clone())];
        files.extend(version.files.iter().cloned());
        for (name, content) in files {
            zip.start_file(format!("{prefix}{name}"), options).expect("zip entry");
            zip.write_all(content.as_bytes()).expect("zip content");
        }
        let bytes = zip.finish().expect("zip").into_inner();
        std::fs::write(folder.join(format!("{}.zip", version.version)), bytes).expect("zip file");
    }

    /// The tree's root, to serve.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Says the tree's upstream proxies the checksum database `name`
    /// (`sumdb/NAME/supported`).
    pub fn support_sumdb(&self, name: &str) {
        let folder = self.dir.path().join("sumdb").join(name);
        std::fs::create_dir_all(&folder).expect("sumdb folder");
        std::fs::write(folder.join("supported"), "").expect("supported");
    }

    /// Adds a lookup record of database `name` for `path@version` with the
    /// hashes `zip_sum` and `mod_sum` (`h1:...`).
    pub fn add_lookup(&self, name: &str, path: &str, version: &str, zip_sum: &str, mod_sum: &str) {
        let lookup = format!("{}@{}", escape(path), escape(version));
        let file = self.dir.path().join("sumdb").join(name).join("lookup").join(lookup);
        std::fs::create_dir_all(file.parent().expect("a parent")).expect("lookup folder");
        let record = format!("42\n{path} {version} {zip_sum}\n{path} {version}/go.mod {mod_sum}\n\ngo.sum database tree\n43\nAAAA\n\n— {name} test\n");
        std::fs::write(file, record).expect("lookup");
    }
}

/// A version's `.info`: its version and, if known, when it was published.
fn info(version: &ModuleVersion) -> String {
    match version.published {
        Some(at) => {
            let time = humantime::format_rfc3339_seconds(at);
            format!("{{\"Version\":\"{}\",\"Time\":\"{time}\"}}\n", version.version)
        }
        None => format!("{{\"Version\":\"{}\"}}\n", version.version),
    }
}

/// A `go` run's outcome.
#[derive(Debug)]
pub struct GoOutput {
    /// Exit status success.
    pub success: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl GoOutput {
    /// Panics with the output unless the run succeeded.
    pub fn assert_success(&self) -> &Self {
        assert!(self.success, "go failed:\n{}\n{}", self.stdout, self.stderr);
        self
    }
}

/// A `go` command with its own caches and a consumer module, pointed at
/// one `GOPROXY`.
pub struct GoSandbox {
    dir: tempfile::TempDir,
    goproxy: String,
    gosumdb: String,
}

impl GoSandbox {
    /// A sandbox whose `go` fetches through `goproxy`, with `GOSUMDB=off`
    /// (a hermetic checksum database would need a note signer), and a
    /// module `example.com/app` whose main package prints
    /// `hellocaps.Greet()`.
    pub fn new(goproxy: &str) -> GoSandbox {
        let dir = tempfile::Builder::new().prefix("gosandbox").tempdir().expect("temp dir");
        let app = dir.path().join("app");
        std::fs::create_dir_all(&app).expect("app folder");
        std::fs::write(
            app.join("go.mod"),
            "module example.com/app\n\ngo 1.19\n\nrequire example.com/HelloCaps v0.1.0\n",
        )
        .expect("go.mod");
        std::fs::write(
            app.join("main.go"),
            "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/HelloCaps\"\n)\n\nfunc main() { fmt.Println(hellocaps.Greet()) }\n",
        )
        .expect("main.go");
        GoSandbox { dir, goproxy: goproxy.to_string(), gosumdb: "off".to_string() }
    }

    /// A sandbox whose consumer module `example.com/app` requires nothing
    /// and has no code: the test writes its `go.mod` and `go.sum`, or has
    /// `go get` write them.
    pub fn bare(goproxy: &str) -> GoSandbox {
        let sandbox = GoSandbox::new(goproxy);
        std::fs::write(sandbox.app().join("go.mod"), "module example.com/app\n\ngo 1.19\n").expect("go.mod");
        std::fs::remove_file(sandbox.app().join("main.go")).expect("no code");
        sandbox
    }

    /// The same, with the go command verifying sums against the checksum
    /// database `gosumdb` (a verifier key), asked through `goproxy`.
    pub fn verifying(goproxy: &str, gosumdb: &str) -> GoSandbox {
        GoSandbox { gosumdb: gosumdb.to_string(), ..GoSandbox::new(goproxy) }
    }

    /// The consumer module's folder.
    pub fn app(&self) -> PathBuf {
        self.dir.path().join("app")
    }

    /// Runs `go args...` in the consumer module with a fresh module cache
    /// named `cache` (runs that share a name share the cache).
    pub fn go(&self, cache: &str, args: &[&str]) -> GoOutput {
        let home = self.dir.path();
        let output = Command::new("go")
            .args(args)
            .current_dir(self.app())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("GOPATH", home.join("gopath"))
            .env("GOMODCACHE", home.join(format!("modcache-{cache}")))
            .env("GOCACHE", home.join("gocache"))
            .env("GOPROXY", &self.goproxy)
            .env("GOSUMDB", &self.gosumdb)
            .env("GOFLAGS", "-mod=mod -modcacherw")
            .env("GO111MODULE", "on")
            .env("GOTOOLCHAIN", "local")
            .env("CGO_ENABLED", "0")
            .output()
            .expect("run go (install golang-go)");
        GoOutput {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}
