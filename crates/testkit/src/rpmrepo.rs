//! RPM repositories made as distributions make them: packages built with
//! the real `rpmbuild` from specs the test writes, a repository's
//! metadata made by the real `createrepo_c` (zchunk, `xml:base` and all),
//! and the metalink Fedora's mirror manager would publish for it; and the
//! real `dnf`, in an installroot of its own with its own repositories and
//! cache, to drive them.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256, Sha512};

/// A package to build: a `noarch` RPM with a payload of `size` bytes.
#[derive(Debug, Clone)]
pub struct RpmPackage {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Its release.
    pub release: String,
    /// Its epoch, when it has one.
    pub epoch: Option<u32>,
    /// The names it requires (names, virtual names or files).
    pub requires: Vec<String>,
    /// The virtual names it provides besides its own.
    pub provides: Vec<String>,
    /// Files it installs besides its payload (`/usr/bin/NAME`: primary
    /// metadata lists those in a `bin/` folder, so a requirement may name
    /// them).
    pub files: Vec<String>,
    /// Its payload's size in bytes (made of pseudo-random bytes, so the
    /// package is about as large).
    pub size: usize,
}

impl RpmPackage {
    /// `name`-`version`-1, needing nothing, with a small payload.
    pub fn new(name: &str, version: &str) -> RpmPackage {
        RpmPackage {
            name: name.to_owned(),
            version: version.to_owned(),
            release: "1".to_owned(),
            epoch: None,
            requires: Vec::new(),
            provides: Vec::new(),
            files: Vec::new(),
            size: 4096,
        }
    }

    /// The same, requiring `name`.
    pub fn requires(mut self, name: &str) -> RpmPackage {
        self.requires.push(name.to_owned());
        self
    }

    /// The same, providing the virtual name `name`.
    pub fn provides(mut self, name: &str) -> RpmPackage {
        self.provides.push(name.to_owned());
        self
    }

    /// The same, installing a small file at `path` too.
    pub fn installs(mut self, path: &str) -> RpmPackage {
        self.files.push(path.to_owned());
        self
    }

    /// The same, with epoch `epoch`.
    pub fn epoch(mut self, epoch: u32) -> RpmPackage {
        self.epoch = Some(epoch);
        self
    }

    /// The same, with a payload of `size` bytes.
    pub fn sized(mut self, size: usize) -> RpmPackage {
        self.size = size;
        self
    }

    /// Its file's name: `NAME-VERSION-RELEASE.noarch.rpm`.
    pub fn file_name(&self) -> String {
        format!("{}-{}-{}.noarch.rpm", self.name, self.version, self.release)
    }

    fn spec(&self) -> String {
        let mut tags: String = self.requires.iter().map(|name| format!("Requires: {name}\n")).collect();
        tags.extend(self.provides.iter().map(|name| format!("Provides: {name}\n")));
        tags.extend(self.epoch.map(|epoch| format!("Epoch: {epoch}\n")));
        let installed: String = self
            .files
            .iter()
            .map(|path| {
                format!("mkdir -p $(dirname %{{buildroot}}{path}) && echo {} > %{{buildroot}}{path}\n", self.name)
            })
            .collect();
        let listed: String = self.files.iter().map(|path| format!("{path}\n")).collect();
        let seed = format!("{}-{}-{}", self.name, self.version, self.release);
        format!(
            "Name: {name}\nVersion: {version}\nRelease: {release}\nSummary: {name} for pkgproxy's tests\nLicense: MIT\n\
             BuildArch: noarch\n{tags}\n%description\n{name}, made by a test.\n\n%install\n\
             mkdir -p %{{buildroot}}/usr/share/{name}\n\
             python3 -c 'import random,sys; random.seed(\"{seed}\"); sys.stdout.buffer.write(random.randbytes({size}))' > %{{buildroot}}/usr/share/{name}/data\n\
             {installed}\n\
             %files\n/usr/share/{name}/data\n{listed}",
            name = self.name,
            version = self.version,
            release = self.release,
            size = self.size,
        )
    }
}

/// Builds `packages` with `rpmbuild` into `dir` (each file directly in
/// it). Panics with rpmbuild's output if one cannot be built.
pub fn build(packages: &[RpmPackage], dir: &Path) {
    let top = tempfile::tempdir().expect("a temporary folder");
    std::fs::create_dir_all(top.path().join("SPECS")).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    for package in packages {
        let spec = top.path().join("SPECS").join(format!("{}.spec", package.name));
        std::fs::write(&spec, package.spec()).unwrap();
        let output = Command::new("rpmbuild")
            .args(["--quiet", "-bb", "--define"])
            .arg(format!("_topdir {}", top.path().display()))
            .args(["--define", "_source_payload w1.gzdio", "--define", "_binary_payload w1.gzdio"])
            .arg(&spec)
            .env("HOME", top.path())
            .output()
            .expect("rpmbuild runs (test.sh installs rpm)");
        assert!(output.status.success(), "rpmbuild {}: {}", package.name, String::from_utf8_lossy(&output.stderr));
        let built = top.path().join("RPMS/noarch").join(package.file_name());
        std::fs::copy(&built, dir.join(package.file_name())).expect("the built package");
    }
}

/// How `createrepo_c` is asked to make a repository's metadata.
#[derive(Debug, Clone, Default)]
pub struct Createrepo {
    /// zchunk metadata beside the rest (`--zck`).
    pub zck: bool,
    /// Every package's location under this URL (`--baseurl`: `xml:base`).
    pub baseurl: Option<String>,
    /// The metadata's revision (`--revision`).
    pub revision: Option<u64>,
}

/// Makes the metadata of the repository in `root` (its packages anywhere
/// below it), as `options` say.
pub fn createrepo(root: &Path, options: &Createrepo) {
    let mut command = Command::new("createrepo_c");
    command.args(["--quiet", "--no-database"]);
    if options.zck {
        command.arg("--zck");
    }
    if let Some(baseurl) = &options.baseurl {
        command.args(["--baseurl", baseurl]);
    }
    if let Some(revision) = options.revision {
        command.args(["--revision", &revision.to_string()]);
    }
    let output = command.arg(root).output().expect("createrepo_c runs (test.sh installs createrepo-c)");
    assert!(output.status.success(), "createrepo_c: {}", String::from_utf8_lossy(&output.stderr));
}

/// A metalink vouching for the `repomd.xml` files at `current` (first)
/// and `alternates` (the ones kept while mirrors sync), as Fedora's mirror
/// manager writes one, its URLs at `mirrors`.
pub fn metalink(current: &Path, alternates: &[&Path], mirrors: &[String]) -> String {
    let hashes = |path: &Path| {
        let bytes = std::fs::read(path).expect("a repomd.xml");
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let sha512 = hex::encode(Sha512::digest(&bytes));
        (bytes.len(), sha256, sha512)
    };
    let (size, sha256, sha512) = hashes(current);
    let alternates: String = alternates
        .iter()
        .map(|path| {
            let (size, sha256, sha512) = hashes(path);
            format!(
                "<mm0:alternate><mm0:timestamp>1</mm0:timestamp><size>{size}</size><verification>\
                 <hash type=\"sha256\">{sha256}</hash><hash type=\"sha512\">{sha512}</hash></verification></mm0:alternate>"
            )
        })
        .collect();
    let urls: String = mirrors
        .iter()
        .enumerate()
        .map(|(i, url)| {
            format!("<url protocol=\"http\" type=\"http\" location=\"US\" preference=\"{}\">{url}/repodata/repomd.xml</url>", 100 - i)
        })
        .collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<metalink version=\"3.0\" xmlns=\"http://www.metalinker.org/\" \
         type=\"dynamic\" pubdate=\"Sun, 06 Dec 2026 12:00:00 GMT\" generator=\"mirrormanager\" \
         xmlns:mm0=\"http://fedorahosted.org/mirrormanager\">\n<files>\n<file name=\"repomd.xml\">\n\
         <mm0:timestamp>2</mm0:timestamp><size>{size}</size><verification><hash type=\"sha256\">{sha256}</hash>\
         <hash type=\"sha512\">{sha512}</hash></verification>\n<mm0:alternates>{alternates}</mm0:alternates>\n\
         <resources maxconnections=\"1\">{urls}</resources>\n</file>\n</files>\n</metalink>\n"
    )
}

/// The real `dnf` in a sandbox: an installroot, repositories and a cache
/// of its own, and no repository but the ones the test names.
#[derive(Debug)]
pub struct DnfSandbox {
    dir: tempfile::TempDir,
    /// dnf's `proxy=`, when it goes through one.
    proxy: Option<String>,
}

/// What a dnf command printed, and whether it passed.
#[derive(Debug)]
pub struct DnfOutput {
    /// Its exit status was 0.
    pub success: bool,
    /// Its standard output and error.
    pub output: String,
}

impl DnfSandbox {
    /// A sandbox whose one repository, `name`, is at `baseurl`.
    pub fn new(name: &str, baseurl: &str) -> DnfSandbox {
        let dir = tempfile::tempdir().expect("a temporary folder");
        for folder in ["repos", "root", "cache", "downloads"] {
            std::fs::create_dir_all(dir.path().join(folder)).unwrap();
        }
        let repo = format!("[{name}]\nname={name}\nbaseurl={baseurl}\ngpgcheck=0\nmetadata_expire=0\n");
        std::fs::write(dir.path().join("repos").join(format!("{name}.repo")), repo).unwrap();
        DnfSandbox { dir, proxy: None }
    }

    /// The same, every request going through the forward proxy `proxy`
    /// (`http://HOST:PORT`), as dnf's `proxy=` sends them.
    pub fn through_proxy(mut self, proxy: &str) -> DnfSandbox {
        self.proxy = Some(proxy.to_owned());
        self
    }

    /// Where the packages `install --downloadonly` downloads go.
    pub fn downloads(&self) -> PathBuf {
        self.dir.path().join("downloads")
    }

    /// Empties dnf's cache: the next command fetches everything again.
    pub fn clear_cache(&self) {
        let cache = self.dir.path().join("cache");
        let _ = std::fs::remove_dir_all(&cache);
        std::fs::create_dir_all(cache).unwrap();
        let downloads = self.downloads();
        let _ = std::fs::remove_dir_all(&downloads);
        std::fs::create_dir_all(downloads).unwrap();
    }

    /// Runs `dnf ARGS` in the sandbox.
    pub fn run(&self, args: &[&str]) -> DnfOutput {
        let path = |folder: &str| self.dir.path().join(folder).display().to_string();
        let output = Command::new("dnf")
            .args([
                "-y",
                "--releasever=1",
                "--setopt=install_weak_deps=0",
                "--setopt=retries=1",
                "--setopt=skip_if_unavailable=False",
            ])
            .arg(format!("--installroot={}", path("root")))
            .arg(format!("--setopt=reposdir={}", path("repos")))
            .arg(format!("--setopt=cachedir={}", path("cache")))
            .args(["--setopt=keepcache=1", "--disableplugin=*"])
            .args(self.proxy.iter().map(|proxy| format!("--setopt=proxy={proxy}")))
            .args(args)
            .output()
            .expect("dnf runs (test.sh installs dnf)");
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        DnfOutput { success: output.status.success(), output: text }
    }

    /// `dnf install --downloadonly` of `names`, into [`Self::downloads`].
    pub fn download(&self, names: &[&str]) -> DnfOutput {
        let mut args = vec!["install".to_owned(), "--downloadonly".to_owned()];
        args.push(format!("--downloaddir={}", self.downloads().display()));
        args.extend(names.iter().map(|name| (*name).to_owned()));
        self.run(&args.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// The files `download` left, by name, sorted.
    pub fn downloaded(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.downloads())
            .map(|entries| entries.flatten().map(|entry| entry.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        names.sort();
        names
    }
}
