//! A real, signed Debian repository built with the real tools.
//!
//! It owns the on-disk layout that apt expects from a mirror: `.deb` files
//! made by `dpkg-deb` under `pool/main`, `Packages` (+ `.gz`, `.xz`) for
//! `binary-all` and `binary-amd64` with `by-hash` copies (SHA256 and SHA512,
//! since apt asks for the strongest hash), a `Release` with
//! `Acquire-By-Hash: yes`, and `InRelease` / `Release.gpg` signed by a
//! throwaway key whose keyring is exported for `signed-by=`.
//!
//! What it must not do: touch the user's GnuPG home or anything outside the
//! directory it is given, leave a `gpg-agent` running, or be modified after
//! [`AptRepo::shared_default`] hands it out. It is test support: every tool
//! failure panics with that tool's stderr.
//!
//! Layout under the directory passed to [`AptRepoBuilder::build`]:
//! `www/` is what to serve ([`AptRepo::root`]), the repository itself is
//! `www/debian/` (suite `testing`, component `main`), and `gnupg/`, `build/`,
//! `staging/` and `keyring.gpg` sit beside `www/` so they are never served.
//! Keep that directory's path short (a tempdir is fine): gpg-agent's socket
//! lives in `gnupg/` and Unix socket paths are limited to about 100 bytes.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256, Sha512};

mod deb;

/// The suite (and codename) every repository here publishes.
pub const SUITE: &str = "testing";
/// The only component.
pub const COMPONENT: &str = "main";
/// The URL path prefix of the repository inside [`AptRepo::root`].
pub const URL_PREFIX: &str = "/debian";

/// The index directories, relative to the repository.
const BINARY_DIRS: [&str; 2] = ["dists/testing/main/binary-all", "dists/testing/main/binary-amd64"];

/// What to put in one package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackageSpec {
    /// Package name, e.g. `pkgproxy-hello`.
    pub name: String,
    /// Debian version, e.g. `1.0-1` (an epoch is allowed).
    pub version: String,
    /// Bytes of pseudo-random payload in `usr/share/<name>/payload`.
    pub payload_size: u64,
    /// The `Depends:` field, if any.
    pub depends: Option<String>,
}

impl PackageSpec {
    /// A package with no dependencies.
    pub fn new(name: &str, version: &str, payload_size: u64) -> Self {
        PackageSpec { name: name.to_owned(), version: version.to_owned(), payload_size, depends: None }
    }

    /// Sets the `Depends:` field.
    pub fn depends(mut self, depends: &str) -> Self {
        self.depends = Some(depends.to_owned());
        self
    }

    /// The `.deb` file name, e.g. `pkgproxy-hello_1.0-1_all.deb` (epoch dropped,
    /// as Debian archives name them).
    pub fn deb_file_name(&self) -> String {
        let version = self.version.split_once(':').map_or(&*self.version, |v| v.1);
        format!("{}_{}_all.deb", self.name, version)
    }
}

/// A package as built into a repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Package {
    /// What it was built from.
    pub spec: PackageSpec,
    /// Path relative to the repository, as in `Filename:`, e.g.
    /// `pool/main/pkgproxy-hello_1.0-1_all.deb`.
    pub filename: String,
    /// Absolute path of the `.deb`.
    pub deb_path: PathBuf,
    /// Size of the `.deb` in bytes.
    pub deb_size: u64,
}

/// Collects package specs; [`AptRepoBuilder::build`] makes the repository.
#[derive(Clone, Debug, Default)]
pub struct AptRepoBuilder {
    /// Packages in the order added.
    specs: Vec<PackageSpec>,
    /// How long after its `Date:` the Release says it is valid
    /// (`Valid-Until:`), if it says so.
    valid_for: Option<Duration>,
}

impl AptRepoBuilder {
    /// Adds a package with `size` bytes of payload.
    pub fn package(self, name: &str, version: &str, size: u64) -> Self {
        self.spec(PackageSpec::new(name, version, size))
    }

    /// Adds a package described in full; a later spec with the same name wins.
    pub fn spec(mut self, spec: PackageSpec) -> Self {
        self.specs.retain(|s| s.name != spec.name);
        self.specs.push(spec);
        self
    }

    /// Sets `Depends:` of the already added package `name`.
    ///
    /// Panics if no such package was added.
    pub fn depends(mut self, name: &str, depends: &str) -> Self {
        let spec = self
            .specs
            .iter_mut()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("depends: no package {name} added yet"));
        spec.depends = Some(depends.to_owned());
        self
    }

    /// Makes each Release say it is valid until `valid_for` after it is
    /// published (`Valid-Until:`, as `apt-ftparchive` reckons it: from now,
    /// not from the Release's date).
    pub fn valid_for(mut self, valid_for: Duration) -> Self {
        self.valid_for = Some(valid_for);
        self
    }

    /// Builds the debs, indexes, key and signatures under `dir` (created if
    /// missing). See the module docs for the layout.
    pub fn build(self, dir: &Path) -> AptRepo {
        let repo = AptRepo {
            root: dir.join("www"),
            work: dir.to_path_buf(),
            keyring: dir.join("keyring.gpg"),
            packages: Vec::new(),
            first_date: SystemTime::now() - Duration::from_secs(86_400),
            generation: AtomicU64::new(0),
            valid_for: self.valid_for,
        };
        let pool = repo.repo_dir().join("pool").join(COMPONENT);
        fs::create_dir_all(&pool).expect("create pool/main");
        let gnupg = repo.gnupg_home();
        fs::create_dir_all(&gnupg).expect("create gnupg home");
        fs::set_permissions(&gnupg, fs::Permissions::from_mode(0o700)).expect("chmod gnupg home");
        repo.generate_key();
        let mut repo = repo;
        for spec in self.specs {
            repo.put_package(spec);
        }
        repo.rebuild_indexes();
        repo
    }
}

/// A signed Debian repository on disk. See the module docs.
#[derive(Debug)]
pub struct AptRepo {
    /// The directory handed to `build`; holds everything.
    work: PathBuf,
    /// The directory to serve (`work/www`).
    root: PathBuf,
    /// Binary keyring with the signing key, for `signed-by=`.
    keyring: PathBuf,
    /// The packages currently in the pool, in the order added.
    packages: Vec<Package>,
    /// The `Date:` of the first Release (a day in the past: apt refuses
    /// Releases dated in the future).
    first_date: SystemTime,
    /// Releases published so far; each is dated a minute after the last, so
    /// generations are ordered however fast a test rebuilds.
    generation: AtomicU64,
    /// How long after its date a Release is valid, if it says so.
    valid_for: Option<Duration>,
}

impl AptRepo {
    /// Starts describing a repository.
    pub fn builder() -> AptRepoBuilder {
        AptRepoBuilder::default()
    }

    /// The repository every test may read and none may change, built once per
    /// test process into a temporary directory removed when the process exits.
    ///
    /// Packages: `pkgproxy-hello` 1.0-1 (4 KiB payload, `Depends: pkgproxy-big`),
    /// `pkgproxy-big` 1.0-1 (20 MiB), `pkgproxy-small1` and `pkgproxy-small2`
    /// 1.0-1 (a few KiB each).
    pub fn shared_default() -> &'static AptRepo {
        static SHARED: OnceLock<AptRepo> = OnceLock::new();
        SHARED.get_or_init(|| {
            let dir = tempfile::Builder::new()
                .prefix("pkgproxy-testkit-repo-")
                .tempdir()
                .expect("create temp dir for the shared repo")
                .keep();
            remove_at_exit(dir.clone());
            AptRepo::builder()
                .spec(PackageSpec::new("pkgproxy-hello", "1.0-1", 4096).depends("pkgproxy-big"))
                .package("pkgproxy-big", "1.0-1", 20 * 1024 * 1024)
                .package("pkgproxy-small1", "1.0-1", 3 * 1024)
                .package("pkgproxy-small2", "1.0-1", 5 * 1024)
                .build(&dir)
        })
    }

    /// The directory to serve; the repository is its `debian/` subdirectory,
    /// so URLs read `http://HOST/debian/dists/testing/InRelease`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The repository directory itself (`root()/debian`).
    pub fn repo_dir(&self) -> PathBuf {
        self.root.join(URL_PREFIX.trim_start_matches('/'))
    }

    /// The binary keyring holding the signing key (for `signed-by=`).
    pub fn keyring(&self) -> &Path {
        &self.keyring
    }

    /// The packages currently in the pool, in the order added.
    pub fn packages(&self) -> &[Package] {
        &self.packages
    }

    /// The package called `name`. Panics if there is none.
    pub fn package(&self, name: &str) -> &Package {
        self.packages
            .iter()
            .find(|p| p.spec.name == name)
            .unwrap_or_else(|| panic!("no package {name} in the test repository"))
    }

    /// Absolute path of the `.deb` of `name`.
    pub fn deb_path(&self, name: &str) -> PathBuf {
        self.package(name).deb_path.clone()
    }

    /// Pool-relative path of the `.deb` of `name`, as in `Filename:`, e.g.
    /// `pool/main/pkgproxy-hello_1.0-1_all.deb`.
    pub fn deb_filename(&self, name: &str) -> String {
        self.package(name).filename.clone()
    }

    /// URL path of the `.deb` of `name` on a server of [`AptRepo::root`], e.g.
    /// `/debian/pool/main/pkgproxy-hello_1.0-1_all.deb`.
    pub fn deb_url_path(&self, name: &str) -> String {
        format!("{URL_PREFIX}/{}", self.deb_filename(name))
    }

    /// Adds `name` (replacing any package of that name) and re-publishes.
    pub fn add_package(&mut self, name: &str, version: &str, size: u64) -> &Package {
        self.add(PackageSpec::new(name, version, size))
    }

    /// Adds a package described in full (replacing any of that name) and
    /// re-publishes.
    pub fn add(&mut self, spec: PackageSpec) -> &Package {
        let name = spec.name.clone();
        self.put_package(spec);
        self.rebuild_indexes();
        self.package(&name)
    }

    /// Regenerates `Packages*`, their by-hash copies, `Release`, `InRelease`
    /// and `Release.gpg` from what is in `pool/` now.
    ///
    /// The indexes are made in a staging tree (so the old `Release` is never
    /// listed in the new one), then published in the order a mirror uses:
    /// by-hash copies, indexes, then the Release files. Each file is replaced
    /// by a rename, so a server never sees half a file. Old by-hash files are
    /// kept, as real archives keep them for a while.
    pub fn rebuild_indexes(&self) {
        let staging = self.work.join("staging");
        if staging.exists() {
            fs::remove_dir_all(&staging).expect("clear staging indexes");
        }
        fs::create_dir_all(&staging).expect("create staging indexes");
        let indexes = self.stage_indexes(&staging);
        let generation = self.generation.fetch_add(1, Ordering::SeqCst);
        let date = httpdate::fmt_http_date(self.first_date + Duration::from_secs(60 * generation));
        let valid_for = self.valid_for.iter().flat_map(|valid_for| {
            ["-o".to_owned(), format!("APT::FTPArchive::Release::ValidTime={}", valid_for.as_secs())]
        });
        let release = run(Command::new("apt-ftparchive")
            .args(release_options())
            .args(valid_for)
            .arg("-o")
            .arg(format!("APT::FTPArchive::Release::Date={date}"))
            .args(["release", "dists/testing"])
            .current_dir(&staging));
        let release_path = staging.join("Release");
        fs::write(&release_path, &release).expect("write staging Release");
        let inrelease = self.sign(&["--clearsign"], &release_path);
        let detached = self.sign(&["--armor", "--detach-sign"], &release_path);
        self.stop_agent();

        let repo = self.repo_dir();
        for dir in BINARY_DIRS {
            let by_hash = repo.join(dir).join("by-hash");
            for (_, content) in &indexes {
                let sha256 = hex::encode(Sha256::digest(content));
                let sha512 = hex::encode(Sha512::digest(content));
                self.publish(&by_hash.join("SHA256").join(sha256), content);
                self.publish(&by_hash.join("SHA512").join(sha512), content);
            }
        }
        for dir in BINARY_DIRS {
            for (name, content) in &indexes {
                self.publish(&repo.join(dir).join(name), content);
            }
        }
        let dists = repo.join("dists").join(SUITE);
        self.publish(&dists.join("Release"), &release);
        self.publish(&dists.join("Release.gpg"), &detached);
        self.publish(&dists.join("InRelease"), &inrelease);
        fs::remove_dir_all(&staging).expect("remove staging indexes");
    }

    /// Gives every index file (`Packages*` and their by-hash copies; not the
    /// Release files) the modification time `mtime`, as a mirror that syncs
    /// its whole tree within one second leaves them: their `Last-Modified`
    /// then cannot tell one generation from the next.
    pub fn set_index_mtimes(&self, mtime: SystemTime) {
        let mut dirs = vec![self.repo_dir().join("dists")];
        while let Some(dir) = dirs.pop() {
            for entry in fs::read_dir(&dir).expect("read index dir").map(|e| e.expect("index dir entry")) {
                let path = entry.path();
                let name = entry.file_name();
                if path.is_dir() {
                    dirs.push(path);
                } else if !["Release", "Release.gpg", "InRelease"].iter().any(|r| name == *r) {
                    let file = fs::File::options().write(true).open(&path).expect("open index file");
                    file.set_modified(mtime).expect("set index file mtime");
                }
            }
        }
    }

    /// Writes `Packages`, `.gz` and `.xz` for the pool into both index
    /// directories under `staging`, and returns their names and contents
    /// (the same for both: every package is `Architecture: all`).
    fn stage_indexes(&self, staging: &Path) -> [(&'static str, Vec<u8>); 3] {
        let packages = run(Command::new("apt-ftparchive").args(["packages", "pool/main"]).current_dir(self.repo_dir()));
        let plain = staging.join("Packages");
        fs::write(&plain, &packages).expect("write staging Packages");
        let gz = run(Command::new("gzip").args(["-9", "-n", "-c"]).arg(&plain));
        let xz = run(Command::new("xz").arg("-c").arg(&plain));
        let indexes = [("Packages", packages), ("Packages.gz", gz), ("Packages.xz", xz)];
        for dir in BINARY_DIRS {
            fs::create_dir_all(staging.join(dir)).expect("create staging index dir");
            for (name, content) in &indexes {
                fs::write(staging.join(dir).join(name), content).expect("write staging index");
            }
        }
        indexes
    }

    fn gnupg_home(&self) -> PathBuf {
        self.work.join("gnupg")
    }

    fn gpg(&self) -> Command {
        let mut cmd = Command::new("gpg");
        cmd.env("GNUPGHOME", self.gnupg_home()).arg("--batch").arg("--yes");
        cmd
    }

    fn generate_key(&self) {
        run(self.gpg().args(["--passphrase", "", "--quick-gen-key"]).args([
            "pkgproxy test <t@example.invalid>",
            "ed25519",
            "sign",
            "never",
        ]));
        let key = run(self.gpg().arg("--export"));
        fs::write(&self.keyring, key).expect("write keyring");
        self.stop_agent();
    }

    /// Signs `file` with the repository key, returning the signature output.
    fn sign(&self, how: &[&str], file: &Path) -> Vec<u8> {
        run(self.gpg().args(how).args(["--output", "-"]).arg(file))
    }

    /// gpg starts an agent per home; stop it so none outlives the test.
    fn stop_agent(&self) {
        run(Command::new("gpgconf").env("GNUPGHOME", self.gnupg_home()).args(["--kill", "gpg-agent"]));
    }

    /// Atomically puts `content` at `path`, creating parent directories.
    ///
    /// An unchanged file is left alone, so its validators stay the same. A
    /// changed one gets an mtime at least a whole second after the old one:
    /// `Last-Modified` has one-second resolution, and a rebuild within the
    /// same second would otherwise answer apt's `If-Modified-Since` with 304.
    fn publish(&self, path: &Path, content: &[u8]) {
        let old = fs::metadata(path).ok();
        if old.as_ref().is_some_and(|m| m.len() == content.len() as u64) && fs::read(path).is_ok_and(|c| c == content) {
            return;
        }
        fs::create_dir_all(path.parent().unwrap()).expect("create index dir");
        let tmp = self.work.join("publish.tmp");
        fs::write(&tmp, content).expect("write index file");
        if let Some(old_mtime) = old.and_then(|m| m.modified().ok()) {
            let whole_secs = old_mtime.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
            let mtime = SystemTime::now().max(UNIX_EPOCH + Duration::from_secs(whole_secs + 1));
            let file = fs::File::options().write(true).open(&tmp).expect("open index file");
            file.set_modified(mtime).expect("set index file mtime");
        }
        fs::rename(&tmp, path).expect("move index file into place");
    }

    /// Builds the `.deb` for `spec` into the pool, replacing any package of
    /// the same name (its old `.deb` is removed if the file name differs).
    fn put_package(&mut self, spec: PackageSpec) {
        let file_name = spec.deb_file_name();
        let filename = format!("pool/{COMPONENT}/{file_name}");
        let deb_path = self.repo_dir().join(&filename);
        if let Some(old) = self.packages.iter().position(|p| p.spec.name == spec.name) {
            let old = self.packages.remove(old);
            if old.deb_path != deb_path {
                fs::remove_file(&old.deb_path).expect("remove replaced .deb");
            }
        }
        deb::build(&self.work.join("build"), &spec, &deb_path);
        // Pool files in a real archive are old, and their `Last-Modified`
        // a strong validator (RFC 9110 8.8.2.2) by the time anyone fetches
        // them: date them with the first Release.
        let deb = fs::File::options().write(true).open(&deb_path).expect("open .deb");
        deb.set_modified(self.first_date).expect("set .deb mtime");
        let deb_size = fs::metadata(&deb_path).expect("stat .deb").len();
        self.packages.push(Package { spec, filename, deb_path, deb_size });
    }
}

/// The `-o` options that make `apt-ftparchive release` describe the suite.
fn release_options() -> Vec<String> {
    [
        ("Origin", "pkgproxy-test"),
        ("Label", "pkgproxy-test"),
        ("Suite", SUITE),
        ("Codename", SUITE),
        ("Architectures", "amd64 all"),
        ("Components", COMPONENT),
        ("Acquire-By-Hash", "yes"),
    ]
    .iter()
    .flat_map(|(k, v)| ["-o".to_owned(), format!("APT::FTPArchive::Release::{k}={v}")])
    .collect()
}

/// Runs `cmd`, returning its stdout; panics with its stderr if it fails.
fn run(cmd: &mut Command) -> Vec<u8> {
    let output = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    if !output.status.success() {
        panic!("{cmd:?} failed with {}:\n{}", output.status, String::from_utf8_lossy(&output.stderr));
    }
    output.stdout
}

/// Deletes the shared repository's directory when the test process exits.
fn remove_at_exit(dir: PathBuf) {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    extern "C" fn remove() {
        if let Some(dir) = DIR.get() {
            let _ = fs::remove_dir_all(dir);
        }
    }
    if DIR.set(dir).is_ok() {
        // SAFETY: `remove` is a plain extern "C" fn that neither unwinds nor
        // depends on state torn down before atexit handlers run.
        unsafe {
            libc::atexit(remove);
        }
    }
}
