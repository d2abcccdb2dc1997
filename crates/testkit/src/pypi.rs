//! A fake Python package index on `127.0.0.1:0`, as PyPI serves one: the
//! simple API in both forms (PEP 503 HTML and PEP 691 JSON, chosen by
//! `Accept`, with `Vary: Accept`, an `ETag` and `X-PyPI-Last-Serial`),
//! names normalised as PEP 503 says (another spelling is redirected), and
//! the files as absolute URLs on a second port, as PyPI's file host is
//! another host: `/packages/AA/BB/REST/FILE`, AA/BB/REST the file's
//! BLAKE2b-256, with each wheel's core metadata at `FILE.metadata` (PEP
//! 658, advertised in both forms).
//!
//! Each file has its upload time (PEP 700's `upload-time`, in the JSON
//! form), one chosen by the test or a fixed one; the index can also give
//! none at all (as Nexus and several mirrors do).
//!
//! It keeps a request log and can misbehave: a forced status (`429`, `503`
//! with `Retry-After`), a stall, wrong bytes, a cut body, pages in HTML
//! only (an older mirror), and pages going back in time (a lagging CDN:
//! fewer files, an older serial). A project may have a long history of
//! releases whose files are gone, for pages of tens of megabytes.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use base64::Engine;
use blake2::digest::consts::U32;
use blake2::{Blake2b, Digest as _};
use bytes::Bytes;
use http::{Request, StatusCode};
use hyper::body::Incoming;
use serde_json::json;
use sha2::Sha256;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::fake::{file_reply, reply, Answer};
use crate::origin::RecordedRequest;

/// PEP 691's JSON form.
pub const SIMPLE_JSON: &str = "application/vnd.pypi.simple.v1+json";

/// A project's name as PEP 503 normalises it: lower case, runs of `-`,
/// `_` and `.` one `-`.
pub fn normalize(name: &str) -> String {
    let mut normal = String::with_capacity(name.len());
    let mut separated = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            separated = true;
            continue;
        }
        if separated && !normal.is_empty() {
            normal.push('-');
        }
        separated = false;
        normal.extend(c.to_lowercase());
    }
    normal
}

/// A tool of the test tools' Python environment (`test.sh` installs a
/// current pip and uv there, and its Python).
pub fn python_tool(name: &str) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tools/python/bin");
    let path = root.join(name);
    assert!(path.exists(), "{} is missing: test.sh installs it", path.display());
    path
}

/// A project with a dependency: `Top-Level` 1.0 (a wheel and an sdist)
/// requiring `leaf.pkg`, of which 1.0 and 1.1 are published.
pub fn project_with_a_dependency() -> Vec<Distribution> {
    vec![
        Distribution::wheel("Top-Level", "1.0", &["leaf-pkg>=1"], 200),
        Distribution::sdist("Top-Level", "1.0"),
        Distribution::wheel("leaf.pkg", "1.0", &[], 200),
        Distribution::wheel("leaf.pkg", "1.1", &[], 200),
    ]
}

/// A file of a release.
#[derive(Debug, Clone)]
pub struct Distribution {
    /// The project, as its author spells it.
    pub project: String,
    /// The version.
    pub version: String,
    /// The file's name.
    pub filename: String,
    /// Its bytes.
    pub bytes: Bytes,
    /// Its SHA-256, hex.
    pub sha256: String,
    /// Its BLAKE2b-256, hex: its path on the file host.
    pub blake2b: String,
    /// A wheel's core metadata (its `METADATA`), served at `FILE.metadata`.
    pub metadata: Option<Bytes>,
    /// The Python versions it takes (`>=3.8`).
    pub requires_python: Option<String>,
    /// Why it is yanked, if it is.
    pub yanked: Option<String>,
    /// When it was uploaded; `None`: at [`DEFAULT_UPLOAD_TIME`].
    pub uploaded: Option<SystemTime>,
}

/// The upload time of a file published at no chosen instant.
pub const DEFAULT_UPLOAD_TIME: &str = "2026-12-01T12:00:00.000000Z";

impl Distribution {
    /// A pure-Python wheel of `project` `version` requiring `requires`
    /// (`name>=1`), its module `size` bytes at least.
    pub fn wheel(project: &str, version: &str, requires: &[&str], size: usize) -> Distribution {
        Distribution::wheel_tagged(project, version, "py3-none-any", requires, size)
    }

    /// A wheel of `project` `version` for the tags `tag` (`cp312-cp312-
    /// manylinux_2_17_x86_64.manylinux2014_x86_64`, as a file name says
    /// them), requiring `requires`: its module pure Python, its bytes its
    /// own (the tag is in them).
    pub fn wheel_tagged(project: &str, version: &str, tag: &str, requires: &[&str], size: usize) -> Distribution {
        let module = normalize(project).replace('-', "_");
        let dist_info = format!("{module}-{version}.dist-info");
        let mut metadata = format!("Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n");
        for requirement in requires {
            metadata.push_str(&format!("Requires-Dist: {requirement}\n"));
        }
        let mut source = format!("NAME = \"{project} {version} {tag}\"\n");
        let mut line = 0u64;
        while source.len() < size {
            // Lines that do not compress away, so the wheel is as large.
            source.push_str(&format!("# {}\n", hex::encode(Sha256::digest(line.to_le_bytes()))));
            line += 1;
        }
        let mut wheel = "Wheel-Version: 1.0\nGenerator: pkgproxy-testkit\nRoot-Is-Purelib: true\n".to_owned();
        let [pythons, abis, platforms]: [&str; 3] =
            tag.splitn(3, '-').collect::<Vec<_>>().try_into().expect("a tag: PYTHON-ABI-PLATFORM");
        for python in pythons.split('.') {
            for abi in abis.split('.') {
                for platform in platforms.split('.') {
                    wheel.push_str(&format!("Tag: {python}-{abi}-{platform}\n"));
                }
            }
        }
        let files = [
            (format!("{module}/__init__.py"), source),
            (format!("{dist_info}/METADATA"), metadata.clone()),
            (format!("{dist_info}/WHEEL"), wheel),
        ];
        let mut record = String::new();
        for (path, content) in &files {
            let digest = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(content.as_bytes()));
            record.push_str(&format!("{path},sha256={digest},{}\n", content.len()));
        }
        record.push_str(&format!("{dist_info}/RECORD,,\n"));
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (path, content) in files.iter().chain(std::iter::once(&(format!("{dist_info}/RECORD"), record))) {
            zip.start_file(path.as_str(), options).expect("a zip entry");
            zip.write_all(content.as_bytes()).expect("a zip entry's bytes");
        }
        let bytes = zip.finish().expect("a zip").into_inner();
        let filename = format!("{module}-{version}-{tag}.whl");
        Distribution::of(project, version, filename, bytes.into(), Some(metadata.into()))
    }

    /// A source distribution (`.tar.gz`) of `project` `version`.
    pub fn sdist(project: &str, version: &str) -> Distribution {
        let root = format!("{}-{version}", normalize(project).replace('-', "_"));
        let pkg_info = format!("Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n");
        let mut tar = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(pkg_info.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, format!("{root}/PKG-INFO"), pkg_info.as_bytes()).expect("a tar entry");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar.into_inner().expect("a tar")).expect("gzip");
        Distribution::of(project, version, format!("{root}.tar.gz"), gz.finish().expect("gzip").into(), None)
    }

    fn of(project: &str, version: &str, filename: String, bytes: Bytes, metadata: Option<Bytes>) -> Distribution {
        Distribution {
            project: project.to_owned(),
            version: version.to_owned(),
            filename,
            sha256: hex::encode(Sha256::digest(&bytes)),
            blake2b: hex::encode(Blake2b::<U32>::digest(&bytes)),
            bytes,
            metadata,
            requires_python: None,
            yanked: None,
            uploaded: None,
        }
    }

    /// The same file, uploaded at `at`.
    pub fn uploaded_at(self, at: SystemTime) -> Distribution {
        Distribution { uploaded: Some(at), ..self }
    }

    /// Its upload time as PyPI writes it (`2026-12-01T12:00:00.000000Z`).
    pub fn upload_time(&self) -> String {
        self.uploaded.map_or(DEFAULT_UPLOAD_TIME.to_owned(), |at| humantime::format_rfc3339_micros(at).to_string())
    }

    /// Its path on the file host: `packages/AA/BB/REST/FILE`.
    pub fn path(&self) -> String {
        let b2 = &self.blake2b;
        format!("packages/{}/{}/{}/{}", &b2[..2], &b2[2..4], &b2[4..], self.filename)
    }

    /// Its core metadata's SHA-256, if it has any.
    pub fn metadata_sha256(&self) -> Option<String> {
        self.metadata.as_ref().map(|metadata| hex::encode(Sha256::digest(metadata)))
    }
}

#[derive(Default)]
struct Shared {
    /// Files by normalised project, in the order published.
    projects: Mutex<BTreeMap<String, Vec<Distribution>>>,
    /// Older releases by normalised project, listed before the published
    /// ones, their files no longer on the file host.
    history: Mutex<BTreeMap<String, Vec<Distribution>>>,
    /// Pages as a lagging CDN serves them: their first files only (count).
    lagging: Mutex<Option<usize>>,
    requests: Mutex<Vec<RecordedRequest>>,
    forced: AtomicU16,
    stalled: AtomicBool,
    corrupt: AtomicBool,
    cut: AtomicBool,
    html_only: AtomicBool,
    /// Whether pages give no upload times.
    timeless: AtomicBool,
    files_url: Mutex<String>,
}

/// A fake index and its file host.
pub struct FakePypi {
    url: String,
    files_url: String,
    shared: Arc<Shared>,
    accept: Vec<JoinHandle<()>>,
}

impl FakePypi {
    /// An index holding `files`.
    pub async fn start(files: &[Distribution]) -> FakePypi {
        let index = TcpListener::bind("127.0.0.1:0").await.expect("bind the index");
        let host = TcpListener::bind("127.0.0.1:0").await.expect("bind the file host");
        let url = format!("http://{}", index.local_addr().expect("address"));
        let files_url = format!("http://{}", host.local_addr().expect("address"));
        let shared = Arc::new(Shared::default());
        *shared.files_url.lock() = files_url.clone();
        let fake = FakePypi {
            url,
            files_url,
            accept: vec![
                tokio::spawn(crate::fake::serve(index, Arc::clone(&shared), |shared, request| {
                    answer(shared, request, false)
                })),
                tokio::spawn(crate::fake::serve(host, Arc::clone(&shared), |shared, request| {
                    answer(shared, request, true)
                })),
            ],
            shared,
        };
        for file in files {
            fake.publish(file.clone());
        }
        fake
    }

    /// The simple index's URL (`http://127.0.0.1:PORT/simple`).
    pub fn url(&self) -> String {
        format!("{}/simple", self.url)
    }

    /// The file host's URL.
    pub fn files_url(&self) -> String {
        self.files_url.clone()
    }

    /// Adds `file` (a release published now).
    pub fn publish(&self, file: Distribution) {
        self.shared.projects.lock().entry(normalize(&file.project)).or_default().push(file);
    }

    /// Lists `releases` older releases of `project` (`0.0.N`, a wheel
    /// each) on its pages, before those published, their files gone from
    /// the file host: a project with a long history, whose page runs to
    /// tens of megabytes (some 390 bytes a release in JSON).
    pub fn add_history(&self, project: &str, releases: usize) {
        let module = normalize(project).replace('-', "_");
        let old = (0..releases).map(|n| {
            let version = format!("0.0.{n}");
            let filename = format!("{module}-{version}-py3-none-any.whl");
            let bytes = Bytes::from(format!("gone: {filename}"));
            Distribution::of(project, &version, filename, bytes, None)
        });
        self.shared.history.lock().entry(normalize(project)).or_default().extend(old);
    }

    /// Marks the file `filename` yanked for `reason`.
    pub fn yank(&self, filename: &str, reason: &str) {
        let mut projects = self.shared.projects.lock();
        for file in projects.values_mut().flatten().filter(|file| file.filename == filename) {
            file.yanked = Some(reason.to_owned());
        }
    }

    /// From now on pages list only their first `files` files, with the
    /// serial they had then (a lagging CDN), or all again with `None`.
    pub fn set_lagging(&self, files: Option<usize>) {
        *self.shared.lagging.lock() = files;
    }

    /// From now on pages are HTML whatever is asked (an older mirror).
    pub fn set_html_only(&self, html_only: bool) {
        self.shared.html_only.store(html_only, Ordering::SeqCst);
    }

    /// From now on pages give no file's upload time (`true`), as an index
    /// that does not implement PEP 700, or give them again (`false`).
    pub fn set_no_times(&self, timeless: bool) {
        self.shared.timeless.store(timeless, Ordering::SeqCst);
    }

    /// From now on every request is answered `status` (`0`: normally), with
    /// `Retry-After: 30` for a `429` or a `503`.
    pub fn force_status(&self, status: u16) {
        self.shared.forced.store(status, Ordering::SeqCst);
    }

    /// From now on every request is taken and never answered.
    pub fn set_stalled(&self, stalled: bool) {
        self.shared.stalled.store(stalled, Ordering::SeqCst);
    }

    /// From now on the file host serves files with their last byte changed.
    pub fn set_corrupt(&self, corrupt: bool) {
        self.shared.corrupt.store(corrupt, Ordering::SeqCst);
    }

    /// From now on the file host announces files whole and sends half.
    pub fn set_cut(&self, cut: bool) {
        self.shared.cut.store(cut, Ordering::SeqCst);
    }

    /// Every request so far, the file host's included.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().clone()
    }

    /// How many requests so far had a path containing `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.requests().iter().filter(|request| request.path.contains(needle)).count()
    }

    /// Forgets the requests so far.
    pub fn clear_requests(&self) {
        self.shared.requests.lock().clear();
    }
}

impl Drop for FakePypi {
    fn drop(&mut self) {
        self.accept.iter().for_each(JoinHandle::abort);
    }
}

async fn answer(owned: Arc<Shared>, request: Request<Incoming>, file_host: bool) -> Answer {
    let shared: &Shared = &owned;
    let recorded = RecordedRequest::of_parts(&request.into_parts().0);
    shared.requests.lock().push(recorded.clone());
    if shared.stalled.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    match shared.forced.load(Ordering::SeqCst) {
        0 => {}
        status => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let asks_to_wait = matches!(status.as_u16(), 429 | 503);
            let headers: &[(&str, String)] = if asks_to_wait { &[("retry-after", "30".into())] } else { &[] };
            return reply(status, headers, "forced\n");
        }
    }
    match file_host {
        true => file(shared, &recorded.path),
        false => page(shared, &recorded),
    }
}

/// A project's page, or the root's.
fn page(shared: &Shared, request: &RecordedRequest) -> Answer {
    let path = request.path.split('?').next().unwrap_or_default();
    let Some(name) = path.strip_prefix("/simple/") else { return reply(StatusCode::NOT_FOUND, &[], "") };
    if name.is_empty() {
        let projects = shared.projects.lock();
        let links: String = projects.keys().map(|name| format!("<a href=\"/simple/{name}/\">{name}</a>\n")).collect();
        return reply(
            StatusCode::OK,
            &[("content-type", "text/html".into())],
            format!("<html><body>\n{links}</body></html>\n"),
        );
    }
    let name = name.trim_end_matches('/');
    if normalize(name) != name || !path.ends_with('/') {
        return reply(StatusCode::MOVED_PERMANENTLY, &[("location", format!("/simple/{}/", normalize(name)))], "");
    }
    let files = {
        let projects = shared.projects.lock();
        let Some(files) = projects.get(name) else { return reply(StatusCode::NOT_FOUND, &[], "no such project\n") };
        let history = shared.history.lock();
        history.get(name).into_iter().flatten().chain(files).cloned().collect::<Vec<_>>()
    };
    let listed = shared.lagging.lock().unwrap_or(files.len()).min(files.len());
    let (files, serial) = (&files[..listed], listed);
    let files_url = shared.files_url.lock().clone();
    let accept = request.header("accept").unwrap_or_default();
    let json = accept.contains(SIMPLE_JSON) && !shared.html_only.load(Ordering::SeqCst);
    let (content_type, body) = match json {
        true => {
            let timed = !shared.timeless.load(Ordering::SeqCst);
            (SIMPLE_JSON, json_page(name, files, serial, &files_url, timed))
        }
        false => ("text/html", html_page(name, files, serial, &files_url)),
    };
    let etag = format!("\"{}\"", &hex::encode(Sha256::digest(body.as_bytes()))[..16]);
    let headers = [
        ("content-type", content_type.to_owned()),
        ("vary", "Accept".to_owned()),
        ("etag", etag.clone()),
        ("x-pypi-last-serial", serial.to_string()),
    ];
    if request.header("if-none-match") == Some(etag.as_str()) {
        return reply(StatusCode::NOT_MODIFIED, &headers, "");
    }
    reply(StatusCode::OK, &headers, body)
}

fn json_page(name: &str, files: &[Distribution], serial: usize, files_url: &str, timed: bool) -> String {
    let entries: Vec<serde_json::Value> = files
        .iter()
        .map(|file| {
            let metadata = file.metadata_sha256().map_or(json!(false), |sha256| json!({"sha256": sha256}));
            let mut entry = json!({
                "filename": file.filename,
                "url": format!("{files_url}/{}", file.path()),
                "hashes": {"sha256": file.sha256},
                "requires-python": file.requires_python,
                "core-metadata": metadata,
                "size": file.bytes.len(),
                "yanked": file.yanked.clone().map_or(json!(false), |reason| json!(reason)),
            });
            if timed {
                entry["upload-time"] = json!(file.upload_time());
            }
            entry
        })
        .collect();
    let mut versions: Vec<&str> = files.iter().map(|file| file.version.as_str()).collect();
    versions.dedup();
    json!({"meta": {"api-version": "1.1", "_last-serial": serial}, "name": name, "versions": versions, "files": entries})
        .to_string()
}

fn html_page(name: &str, files: &[Distribution], serial: usize, files_url: &str) -> String {
    let mut html = format!(
        "<!DOCTYPE html>\n<html>\n<head>\n<meta name=\"pypi:repository-version\" content=\"1.1\">\n\
         <title>Links for {name}</title>\n</head>\n<body>\n<h1>Links for {name}</h1>\n"
    );
    for file in files {
        let mut attributes = String::new();
        if let Some(requires) = &file.requires_python {
            let escaped = requires.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
            attributes.push_str(&format!(" data-requires-python=\"{escaped}\""));
        }
        if let Some(sha256) = file.metadata_sha256() {
            attributes.push_str(&format!(
                " data-dist-info-metadata=\"sha256={sha256}\" data-core-metadata=\"sha256={sha256}\""
            ));
        }
        if let Some(reason) = &file.yanked {
            attributes.push_str(&format!(" data-yanked=\"{reason}\""));
        }
        html.push_str(&format!(
            "<a href=\"{files_url}/{}#sha256={}\"{attributes}>{}</a><br />\n",
            file.path(),
            file.sha256,
            file.filename
        ));
    }
    html.push_str(&format!("</body>\n</html>\n<!--SERIAL {serial}-->\n"));
    html
}

/// A file, or its core metadata, from the file host.
fn file(shared: &Shared, path: &str) -> Answer {
    let found = {
        let projects = shared.projects.lock();
        let all = projects.values().flatten();
        all.into_iter().find_map(|file| {
            let own = format!("/{}", file.path());
            if path == own {
                return Some(file.bytes.clone());
            }
            (path == format!("{own}.metadata")).then(|| file.metadata.clone()).flatten()
        })
    };
    let Some(bytes) = found else { return reply(StatusCode::NOT_FOUND, &[], "no such file\n") };
    let (corrupt, cut) = (shared.corrupt.load(Ordering::SeqCst), shared.cut.load(Ordering::SeqCst));
    file_reply(&bytes, &[("content-type", "application/octet-stream".into())], corrupt, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalise_as_pep_503_says() {
        for (name, normal) in [("Django", "django"), ("zope.interface", "zope-interface"), ("A__b-.C", "a-b-c")] {
            assert_eq!(normalize(name), normal, "{name}");
        }
    }

    #[test]
    fn a_wheel_s_path_is_its_blake2b_and_its_metadata_is_inside() {
        let wheel = Distribution::wheel("Hello.World", "1.0", &["dep>=1"], 100);
        assert_eq!(wheel.filename, "hello_world-1.0-py3-none-any.whl");
        assert!(wheel.path().starts_with(&format!("packages/{}/{}/", &wheel.blake2b[..2], &wheel.blake2b[2..4])));
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(wheel.bytes.to_vec())).unwrap();
        let mut inside = String::new();
        std::io::Read::read_to_string(&mut zip.by_name("hello_world-1.0.dist-info/METADATA").unwrap(), &mut inside)
            .unwrap();
        assert_eq!(Some(Bytes::from(inside.clone())), wheel.metadata);
        assert!(inside.contains("Requires-Dist: dep>=1"));
    }
}
