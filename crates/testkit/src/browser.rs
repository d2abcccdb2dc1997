//! The real Chromium, headless, as a person's browser: the DOM a page ends
//! up with once its scripts ran (`--dump-dom`), screenshots, and what a
//! script reads from the page laid out on a phone (through the DevTools
//! protocol over a pipe: `--remote-debugging-pipe`, messages on fds 3 and
//! 4, each ended by a NUL byte).
//!
//! Every run has a profile of its own and no network but the page's: no
//! component updates, no background requests, and every host name but
//! `localhost` unresolvable, and no proxy.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long a page may take to load and settle.
const PAGE_TIME: Duration = Duration::from_secs(60);

/// A headless Chromium.
#[derive(Debug)]
pub struct Chromium {
    binary: PathBuf,
    profile: tempfile::TempDir,
}

/// A phone's screen, in CSS pixels.
pub const PHONE: (u32, u32) = (390, 844);

impl Chromium {
    /// Debian's `chromium` (`test.sh` installs it).
    pub fn new() -> Chromium {
        let binary = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .into_iter()
            .map(PathBuf::from)
            .find(|path| path.exists())
            .expect("chromium is not installed (test.sh installs Debian's chromium package)");
        Chromium { binary, profile: tempfile::tempdir().expect("a profile directory") }
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.binary);
        command.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--hide-scrollbars",
            "--no-proxy-server",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
        ]);
        command.arg(format!("--user-data-dir={}", self.profile.path().display()));
        command.stdin(Stdio::null()).stderr(Stdio::null());
        command
    }

    /// The DOM of `url` once its scripts had `settle` of virtual time.
    pub fn dump_dom(&self, url: &str, settle: Duration) -> String {
        let output = self
            .command()
            .arg(format!("--virtual-time-budget={}", settle.as_millis()))
            .args(["--dump-dom", url])
            .output()
            .expect("chromium runs");
        assert!(output.status.success(), "chromium --dump-dom {url}: {}", output.status);
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// A screenshot of `url` in a window of `size`, written to `path`.
    pub fn screenshot(&self, url: &str, size: (u32, u32), path: &Path) {
        let status = self
            .command()
            .arg(format!("--window-size={},{}", size.0, size.1))
            .arg("--virtual-time-budget=2000")
            .arg(format!("--screenshot={}", path.display()))
            .arg(url)
            .stdout(Stdio::null())
            .status()
            .expect("chromium runs");
        assert!(status.success() && path.exists(), "chromium --screenshot {url}: {status}");
    }

    /// Loads `url` as a phone of `PHONE`'s size would (its viewport meta
    /// applies), waits until `ready` (a JavaScript expression) is true,
    /// then returns what `expression` gives, by value.
    pub fn evaluate_on_phone(&self, url: &str, ready: &str, expression: &str) -> Value {
        let mut session = DevTools::start(self);
        let target = session.call(None, "Target.createTarget", json!({ "url": "about:blank" }));
        let target = target["targetId"].as_str().expect("a target").to_string();
        let attached = session.call(None, "Target.attachToTarget", json!({ "targetId": target, "flatten": true }));
        let id = attached["sessionId"].as_str().expect("a session").to_string();
        let metrics = json!({ "width": PHONE.0, "height": PHONE.1, "deviceScaleFactor": 3, "mobile": true });
        session.call(Some(&id), "Emulation.setDeviceMetricsOverride", metrics);
        session.call(Some(&id), "Page.navigate", json!({ "url": url }));
        let deadline = Instant::now() + PAGE_TIME;
        loop {
            let check = format!("document.readyState === 'complete' && Boolean({ready})");
            if session.evaluate(&id, &check) == Value::Bool(true) {
                break;
            }
            assert!(Instant::now() < deadline, "{url} was not ready ({ready}) within {PAGE_TIME:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let value = session.evaluate(&id, expression);
        session.call(None, "Browser.close", json!({}));
        value
    }
}

impl Default for Chromium {
    fn default() -> Self {
        Chromium::new()
    }
}

/// A Chromium driven over the DevTools protocol.
struct DevTools {
    child: Child,
    to_browser: std::process::ChildStdin,
    from_browser: mpsc::Receiver<Value>,
    next_id: u64,
}

impl DevTools {
    fn start(chromium: &Chromium) -> DevTools {
        // The protocol reads fd 3 and writes fd 4: the shell hands it our
        // pipes there, and keeps its own stdin and stdout out of the way.
        let mut command = Command::new("sh");
        command.arg("-c").arg("exec \"$0\" \"$@\" 3<&0 4>&1 0</dev/null 1>/dev/null");
        let inner = chromium.command();
        command.arg(inner.get_program()).args(inner.get_args()).arg("--remote-debugging-pipe");
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh runs chromium");
        let to_browser = child.stdin.take().expect("its stdin");
        let mut reader = BufReader::new(child.stdout.take().expect("its stdout"));
        let (sender, from_browser) = mpsc::channel();
        std::thread::spawn(move || loop {
            let mut message = Vec::new();
            match reader.read_until(0, &mut message) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    message.pop();
                    let Ok(value) = serde_json::from_slice::<Value>(&message) else { continue };
                    if sender.send(value).is_err() {
                        return;
                    }
                }
            }
        });
        DevTools { child, to_browser, from_browser, next_id: 1 }
    }

    /// Sends `method` (to `session`, or to the browser) and waits for its
    /// answer, passing over the events that come first.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = serde_json::to_vec(&message).expect("json");
        bytes.push(0);
        self.to_browser.write_all(&bytes).expect("chromium reads its pipe");
        let deadline = Instant::now() + PAGE_TIME;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let answer = self.from_browser.recv_timeout(left).unwrap_or_else(|_| panic!("no answer to {method}"));
            if answer["id"] == json!(id) {
                assert!(answer.get("error").is_none(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
    }

    fn evaluate(&mut self, session: &str, expression: &str) -> Value {
        let params = json!({ "expression": expression, "returnByValue": true });
        self.call(Some(session), "Runtime.evaluate", params)["result"]["value"].clone()
    }
}

impl Drop for DevTools {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
