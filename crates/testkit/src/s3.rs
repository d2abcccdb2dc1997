//! A real S3 server on 127.0.0.1 for the cluster's tests: moto's server
//! (from PyPI; `test.sh` installs it). moto checks a conditional write's
//! condition and then writes, apart: under load two concurrent creates of
//! one object may both succeed, and pkgproxy's start-up self-test then
//! rightly refuses it. Run from its own Python, it is made to take writes
//! one at a time, as the stores it stands for do. Each test takes a fresh
//! bucket. The test's own requests to it (readiness, buckets) are not
//! pkgproxy's traffic.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A moto server of this test's own, stopped when dropped.
#[derive(Debug)]
pub struct S3Server {
    child: Option<Child>,
    port: u16,
}

/// The moto server to run: `$MOTO_SERVER`, the one `test.sh` installs
/// under `target/`, or the one on the `PATH`.
fn moto_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("MOTO_SERVER") {
        return PathBuf::from(path);
    }
    let installed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tools/moto/bin/moto_server");
    if installed.exists() {
        return installed;
    }
    PathBuf::from("moto_server")
}

/// moto's server with its object writes (`PUT`, and `POST` completing a
/// multipart upload) taken one at a time, so each write's condition holds
/// when it is written.
const ONE_WRITE_AT_A_TIME: &str = r#"
import sys, threading
from moto.s3.responses import S3Response
from moto.server import main
lock = threading.Lock()
def one_at_a_time(method):
    def locked(self, *args, **kwargs):
        with lock:
            return method(self, *args, **kwargs)
    return locked
S3Response.put_object = one_at_a_time(S3Response.put_object)
S3Response._key_response_post = one_at_a_time(S3Response._key_response_post)
sys.exit(main())
"#;

/// How to start the server: moto's own Python with [`ONE_WRITE_AT_A_TIME`]
/// when it is beside the server, else the server as it is.
fn moto_command() -> Command {
    let server = moto_binary();
    match server.parent().map(|bin| bin.join("python3")).filter(|python| python.exists()) {
        Some(python) => {
            let mut command = Command::new(python);
            command.args(["-c", ONE_WRITE_AT_A_TIME]);
            command
        }
        None => Command::new(server),
    }
}

impl S3Server {
    /// Starts a server on a free port and waits until it answers.
    pub fn start() -> S3Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let mut server = S3Server { child: None, port };
        server.resume();
        server
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Makes a bucket (moto takes unsigned requests).
    pub fn bucket(&self, name: &str) -> String {
        let status = self.request("PUT", &format!("/{name}"), b"");
        assert!(
            status.starts_with("HTTP/1.1 200") || status.starts_with("HTTP/1.0 200"),
            "make bucket {name}: {status}"
        );
        name.to_owned()
    }

    /// Stops the server (its objects are lost: moto keeps them in memory).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port.
    pub fn resume(&mut self) {
        let child = moto_command()
            .args(["-H", "127.0.0.1", "-p", &self.port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run moto_server ({e}): test.sh installs it"));
        self.child = Some(child);
        let started = Instant::now();
        while !self.answers() {
            assert!(started.elapsed() < Duration::from_secs(30), "moto_server did not answer within 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the server answers HTTP (its port may open before it does).
    fn answers(&self) -> bool {
        TcpStream::connect(("127.0.0.1", self.port)).is_ok() && self.request("GET", "/", b"").starts_with("HTTP/1")
    }

    fn request(&self, method: &str, path: &str, body: &[u8]) -> String {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else { return String::new() };
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        );
        if stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(body)).is_err() {
            return String::new();
        }
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_owned()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}
