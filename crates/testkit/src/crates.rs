//! A fake sparse cargo registry on `127.0.0.1:0`, and a sandbox running
//! the real cargo against pkgproxy with a fresh `CARGO_HOME`.
//!
//! The registry serves `config.json` and its index files in all four path
//! shapes (`1/a`, `2/ab`, `3/a/abc`, `ab/cd/abcd…`) with an `ETag` and
//! `304`s, and its `.crate` files from a second port, as a CDN (its
//! `config.json`'s `dl` says where, with markers or without). It keeps a
//! request log, and can misbehave: a forced status (`429` with
//! `Retry-After`, `503`), a stall, wrong bytes, a cut body, and an index
//! behind the truth (a lagging mirror). A version published at an instant
//! the test chooses has it as its line's `pubtime` (as crates.io's index
//! gives it); the registry can also give no times at all.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::{Request, StatusCode};
use hyper::body::Incoming;
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::fake::{file_reply, reply, Answer};
use crate::origin::RecordedRequest;

/// A crate version the registry holds.
#[derive(Debug, Clone)]
pub struct CrateVersion {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Its `.crate`: a gzipped tar of `NAME-VERSION/Cargo.toml` and
    /// `src/lib.rs`.
    pub bytes: Bytes,
    /// Its SHA-256, hex.
    pub sha256: String,
    /// What it depends on: names and version requirements.
    pub deps: Vec<(String, String)>,
    /// Whether it is yanked.
    pub yanked: bool,
    /// When it was published (its line's `pubtime`); `None`: its line
    /// gives no time, as an index from before `pubtime`.
    pub published: Option<SystemTime>,
}

impl CrateVersion {
    /// Version `version` of crate `name`, depending on `deps`, its library
    /// `size` bytes of source at least.
    pub fn build(name: &str, version: &str, deps: &[(&str, &str)], size: usize) -> CrateVersion {
        let root = format!("{name}-{version}");
        let mut manifest =
            format!("[package]\nname = \"{name}\"\nversion = \"{version}\"\nedition = \"2021\"\n\n[dependencies]\n");
        for (dep, req) in deps {
            manifest.push_str(&format!("{dep} = \"{req}\"\n"));
        }
        let mut lib = format!("pub fn name() -> &'static str {{ \"{name} {version}\" }}\n");
        let mut line = 0u64;
        while lib.len() < size {
            // Lines that do not compress away, so the crate is as large.
            lib.push_str(&format!("// {}\n", hex::encode(Sha256::digest(line.to_le_bytes()))));
            line += 1;
        }
        let mut tar = tar::Builder::new(Vec::new());
        for (path, content) in [(format!("{root}/Cargo.toml"), manifest), (format!("{root}/src/lib.rs"), lib)] {
            let mut header = tar::Header::new_gnu();
            header.set_size(content.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            tar.append_data(&mut header, path, content.as_bytes()).expect("tar entry");
        }
        let tar = tar.into_inner().expect("tar");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar).expect("gzip");
        let bytes = Bytes::from(gz.finish().expect("gzip"));
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let deps = deps.iter().map(|(dep, req)| (dep.to_string(), req.to_string())).collect();
        CrateVersion {
            name: name.to_owned(),
            version: version.to_owned(),
            bytes,
            sha256,
            deps,
            yanked: false,
            published: None,
        }
    }

    /// The same version, published at `at`.
    pub fn published_at(self, at: SystemTime) -> CrateVersion {
        CrateVersion { published: Some(at), ..self }
    }

    /// Its line in its index file (with its `pubtime` when `timed`).
    fn index_line(&self, timed: bool) -> String {
        let deps: Vec<serde_json::Value> = self
            .deps
            .iter()
            .map(|(name, req)| {
                json!({"name": name, "req": req, "features": [], "optional": false, "default_features": true,
                       "target": null, "kind": "normal"})
            })
            .collect();
        let mut line = json!({"name": self.name, "vers": self.version, "deps": deps, "cksum": self.sha256,
                              "features": {}, "yanked": self.yanked, "v": 2});
        if let Some(at) = self.published.filter(|_| timed) {
            line["pubtime"] = json!(humantime::format_rfc3339_seconds(at).to_string());
        }
        line.to_string()
    }
}

/// The path of crate `name`'s index file.
pub fn index_path(name: &str) -> String {
    let name = name.to_ascii_lowercase();
    match name.len() {
        1 => format!("1/{name}"),
        2 => format!("2/{name}"),
        3 => format!("3/{}/{name}", &name[..1]),
        _ => format!("{}/{}/{name}", &name[..2], &name[2..4]),
    }
}

/// How `config.json`'s `dl` names crates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dl {
    /// With markers: `http://CDN/files/{crate}/{crate}-{version}.crate`.
    Template,
    /// Without: `http://CDN/api/v1/crates` (cargo appends
    /// `/{crate}/{version}/download`).
    Plain,
}

#[derive(Default)]
struct Shared {
    crates: Mutex<BTreeMap<String, Vec<CrateVersion>>>,
    /// Index files as a lagging mirror serves them: their versions
    /// (count) when set.
    lagging: Mutex<Option<usize>>,
    /// Whether index lines give no `pubtime`.
    timeless: AtomicBool,
    requests: Mutex<Vec<RecordedRequest>>,
    forced: AtomicU16,
    stalled: AtomicBool,
    corrupt: AtomicBool,
    cut: AtomicBool,
    auth: Mutex<Option<String>>,
    /// Whether `config.json` says `auth-required` when `auth` is needed
    /// (a registry from before cargo 1.74's `auth-required` does not, and
    /// serves it to anyone).
    announced: AtomicBool,
    dl: Mutex<Option<Dl>>,
    cdn: Mutex<String>,
}

/// A fake sparse registry and its CDN.
pub struct FakeCrates {
    url: String,
    cdn: String,
    shared: Arc<Shared>,
    accept: Vec<JoinHandle<()>>,
}

impl FakeCrates {
    /// A registry holding `crates`, its `dl` a template.
    pub async fn start(crates: &[CrateVersion]) -> FakeCrates {
        let index = TcpListener::bind("127.0.0.1:0").await.expect("bind the index");
        let cdn = TcpListener::bind("127.0.0.1:0").await.expect("bind the CDN");
        let url = format!("http://{}", index.local_addr().expect("address"));
        let cdn_url = format!("http://{}", cdn.local_addr().expect("address"));
        let shared = Arc::new(Shared::default());
        *shared.dl.lock() = Some(Dl::Template);
        *shared.cdn.lock() = cdn_url.clone();
        let fake = FakeCrates {
            url,
            cdn: cdn_url,
            accept: vec![
                tokio::spawn(crate::fake::serve(index, Arc::clone(&shared), |shared, request| {
                    answer(shared, request, false)
                })),
                tokio::spawn(crate::fake::serve(cdn, Arc::clone(&shared), |shared, request| {
                    answer(shared, request, true)
                })),
            ],
            shared,
        };
        for version in crates {
            fake.publish(version.clone());
        }
        fake
    }

    /// The index's URL (`http://127.0.0.1:PORT`), as pkgproxy is told it.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// The CDN's URL.
    pub fn cdn_url(&self) -> String {
        self.cdn.clone()
    }

    /// pkgproxy's `[cargo]` section for this registry as crates.io's, its
    /// CDN trusted.
    pub fn config(&self) -> String {
        format!("[cargo]\nindex = [\"{}\"]\n[upstream]\ntrust = [\"{}\"]\n", self.url, self.cdn)
    }

    /// Adds `version` to the registry (a crate published now).
    pub fn publish(&self, version: CrateVersion) {
        self.shared.crates.lock().entry(version.name.clone()).or_default().push(version);
    }

    /// Marks `name` `version` yanked.
    pub fn yank(&self, name: &str, version: &str) {
        let mut crates = self.shared.crates.lock();
        let versions = crates.get_mut(name).into_iter().flatten();
        versions.filter(|held| held.version == version).for_each(|held| held.yanked = true);
    }

    /// From now on index files list only their first `versions` versions
    /// (a lagging mirror), or all again with `None`.
    pub fn set_lagging(&self, versions: Option<usize>) {
        *self.shared.lagging.lock() = versions;
    }

    /// From now on index lines give no `pubtime` (`true`), as a registry
    /// that does not publish times, or give them again (`false`).
    pub fn set_no_times(&self, timeless: bool) {
        self.shared.timeless.store(timeless, Ordering::SeqCst);
    }

    /// From now on every request is answered `status` (`0`: normally); a
    /// `429` and a `503` carry `Retry-After: 30`.
    pub fn force_status(&self, status: u16) {
        self.shared.forced.store(status, Ordering::SeqCst);
    }

    /// From now on every request is taken and never answered.
    pub fn set_stalled(&self, stalled: bool) {
        self.shared.stalled.store(stalled, Ordering::SeqCst);
    }

    /// From now on the CDN serves crates with their last byte changed.
    pub fn set_corrupt(&self, corrupt: bool) {
        self.shared.corrupt.store(corrupt, Ordering::SeqCst);
    }

    /// From now on the CDN announces crates whole and sends half of each.
    pub fn set_cut(&self, cut: bool) {
        self.shared.cut.store(cut, Ordering::SeqCst);
    }

    /// From now on every request needs `Authorization: authorization`, and
    /// `config.json` says `auth-required`; `None`: anyone's.
    pub fn require_auth(&self, authorization: Option<&str>) {
        self.shared.announced.store(true, Ordering::SeqCst);
        *self.shared.auth.lock() = authorization.map(str::to_owned);
    }

    /// From now on every request but `config.json`'s needs
    /// `Authorization: authorization`, and `config.json` does not say so.
    pub fn require_auth_unannounced(&self, authorization: &str) {
        self.shared.announced.store(false, Ordering::SeqCst);
        *self.shared.auth.lock() = Some(authorization.to_owned());
    }

    /// How `config.json` names where crates are.
    pub fn set_dl(&self, dl: Dl) {
        *self.shared.dl.lock() = Some(dl);
    }

    /// Every request so far, the CDN's included.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().clone()
    }

    /// How many requests so far had a path containing `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.requests().iter().filter(|request| request.path.contains(needle)).count()
    }

    /// Requests for index files (not `config.json`) so far.
    pub fn index_requests(&self) -> usize {
        self.requests()
            .iter()
            .filter(|r| {
                !r.path.ends_with("/config.json") && !r.path.contains(".crate") && !r.path.contains("/download")
            })
            .count()
    }

    /// Requests for crates so far.
    pub fn crate_requests(&self) -> usize {
        self.requests().iter().filter(|r| r.path.ends_with(".crate") || r.path.ends_with("/download")).count()
    }

    /// Forgets the requests so far.
    pub fn clear_requests(&self) {
        self.shared.requests.lock().clear();
    }
}

impl Drop for FakeCrates {
    fn drop(&mut self) {
        self.accept.iter().for_each(JoinHandle::abort);
    }
}

async fn answer(owned: Arc<Shared>, request: Request<Incoming>, cdn: bool) -> Answer {
    let shared: &Shared = &owned;
    // The request in hand, not the log's last: requests arrive at once.
    let recorded = RecordedRequest::of_parts(&request.into_parts().0);
    shared.requests.lock().push(recorded.clone());
    if shared.stalled.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    match shared.forced.load(Ordering::SeqCst) {
        0 => {}
        status => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return reply(status, &[("retry-after", "30".into())], "forced\n");
        }
    }
    let announced = shared.announced.load(Ordering::SeqCst);
    let open = !cdn && !announced && recorded.path == "/config.json";
    if let Some(wanted) = shared.auth.lock().clone().filter(|_| !open) {
        if recorded.header("authorization") != Some(wanted.as_str()) {
            return reply(
                StatusCode::UNAUTHORIZED,
                &[("www-authenticate", "Cargo login_url=\"https://x/me\"".into())],
                "",
            );
        }
    }
    match cdn {
        true => crate_file(shared, &recorded.path),
        false => index_file(shared, &recorded),
    }
}

fn index_file(shared: &Shared, request: &RecordedRequest) -> Answer {
    let path = request.path.split_once('?').map_or(request.path.as_str(), |(path, _)| path);
    if path == "/config.json" {
        let cdn = shared.cdn.lock().clone();
        let dl = match *shared.dl.lock() {
            Some(Dl::Plain) => format!("{cdn}/api/v1/crates"),
            _ => format!("{cdn}/files/{{crate}}/{{crate}}-{{version}}.crate"),
        };
        let mut config = json!({"dl": dl, "api": "https://registry.invalid"});
        if shared.auth.lock().is_some() && shared.announced.load(Ordering::SeqCst) {
            config["auth-required"] = json!(true);
        }
        return reply(StatusCode::OK, &[("content-type", "application/json".into())], config.to_string());
    }
    let name = path.rsplit('/').next().unwrap_or_default();
    let crates = shared.crates.lock();
    let Some(versions) = crates.iter().find(|(held, _)| held.to_ascii_lowercase() == name).map(|(_, v)| v) else {
        return reply(StatusCode::NOT_FOUND, &[], "not found\n");
    };
    if path.trim_start_matches('/') != index_path(name) {
        return reply(StatusCode::NOT_FOUND, &[], "not found\n");
    }
    let listed = shared.lagging.lock().unwrap_or(versions.len()).min(versions.len());
    let timed = !shared.timeless.load(Ordering::SeqCst);
    let body: String = versions[..listed].iter().map(|version| version.index_line(timed) + "\n").collect();
    let etag = format!("\"{}\"", &hex::encode(Sha256::digest(body.as_bytes()))[..16]);
    if request.header("if-none-match") == Some(etag.as_str()) {
        return reply(StatusCode::NOT_MODIFIED, &[("etag", etag)], "");
    }
    reply(StatusCode::OK, &[("etag", etag), ("content-type", "text/plain".into())], body)
}

fn crate_file(shared: &Shared, path: &str) -> Answer {
    let found = {
        let crates = shared.crates.lock();
        let all = crates.values().flatten();
        let wanted = |version: &&CrateVersion| {
            path == format!("/files/{0}/{0}-{1}.crate", version.name, version.version)
                || path == format!("/api/v1/crates/{}/{}/download", version.name, version.version)
        };
        all.into_iter().find(wanted).cloned()
    };
    let Some(version) = found else { return reply(StatusCode::NOT_FOUND, &[], "no such crate\n") };
    let (corrupt, cut) = (shared.corrupt.load(Ordering::SeqCst), shared.cut.load(Ordering::SeqCst));
    file_reply(&version.bytes, &[("content-type", "application/x-tar".into())], corrupt, cut)
}

/// What a cargo run printed, and how it ended.
#[derive(Debug)]
pub struct CargoOutput {
    /// Whether it succeeded.
    pub success: bool,
    /// Its standard output and error, together.
    pub output: String,
}

/// A cargo project whose registry is pkgproxy, each run with a
/// `CARGO_HOME` of its own (or a shared one, by name).
pub struct CargoSandbox {
    dir: tempfile::TempDir,
    registry: String,
}

impl CargoSandbox {
    /// A project `app` depending on `deps` (names and requirements), whose
    /// crates.io is pkgproxy's registry at `registry`
    /// (`sparse+http://HOST:PORT/cargo/index/`).
    pub fn new(registry: &str, deps: &[(&str, &str)]) -> CargoSandbox {
        let dir = tempfile::Builder::new().prefix("cargosandbox").tempdir().expect("temp dir");
        let app = dir.path().join("app");
        std::fs::create_dir_all(app.join("src")).expect("app folder");
        let mut manifest =
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n".to_owned();
        for (name, req) in deps {
            manifest.push_str(&format!("{name} = \"{req}\"\n"));
        }
        std::fs::write(app.join("Cargo.toml"), manifest).expect("Cargo.toml");
        std::fs::write(app.join("src/lib.rs"), "").expect("lib.rs");
        CargoSandbox { dir, registry: registry.to_owned() }
    }

    /// The project's folder.
    pub fn app(&self) -> PathBuf {
        self.dir.path().join("app")
    }

    /// The project's lockfile.
    pub fn lockfile(&self) -> PathBuf {
        self.app().join("Cargo.lock")
    }

    /// A `CARGO_HOME` named `home` (runs that share a name share it), its
    /// `config.toml` replacing crates.io with pkgproxy's registry and
    /// retrying nothing.
    pub fn cargo_home(&self, home: &str) -> PathBuf {
        let path = self.dir.path().join("homes").join(home);
        std::fs::create_dir_all(&path).expect("CARGO_HOME");
        let config = format!(
            "[source.crates-io]\nreplace-with = \"pkgproxy\"\n\n[source.pkgproxy]\nregistry = \"{}\"\n\n[net]\nretry = 0\n",
            self.registry
        );
        std::fs::write(path.join("config.toml"), config).expect("config.toml");
        path
    }

    /// Runs `cargo args...` in the project with `cargo_home` as it is
    /// (its `config.toml` written by someone else).
    pub fn run_in(&self, cargo_home: &Path, args: &[&str]) -> CargoOutput {
        run_cargo(&self.app(), cargo_home, args, &[])
    }

    /// Runs `cargo args...` as [`CargoSandbox::run`] does, printing its
    /// HTTP exchanges (`CARGO_HTTP_DEBUG`): what it negotiated.
    pub fn run_debugging_http(&self, home: &str, args: &[&str]) -> CargoOutput {
        let cargo_home = self.cargo_home(home);
        run_cargo(&self.app(), &cargo_home, args, &[("CARGO_HTTP_DEBUG", "true"), ("CARGO_LOG", "network=debug")])
    }

    /// Runs `cargo args...` in the project with the `CARGO_HOME` named
    /// `home`.
    pub fn run(&self, home: &str, args: &[&str]) -> CargoOutput {
        let cargo_home = self.cargo_home(home);
        run_cargo(&self.app(), &cargo_home, args, &[])
    }
}

/// cargo, from the toolchain on the `PATH` (Debian's is too old for the
/// sparse protocol).
fn run_cargo(dir: &Path, cargo_home: &Path, args: &[&str], env: &[(&str, &str)]) -> CargoOutput {
    let output = Command::new("cargo")
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .env("CARGO_HOME", cargo_home)
        .env("CARGO_TERM_COLOR", "never")
        .env("CARGO_NET_GIT_FETCH_WITH_CLI", "false")
        .env_remove("CARGO_REGISTRIES_CRATES_IO_PROTOCOL")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO")
        .env_remove("CARGO_MANIFEST_DIR")
        .output()
        .expect("cargo runs");
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    CargoOutput { success: output.status.success(), output: text }
}
