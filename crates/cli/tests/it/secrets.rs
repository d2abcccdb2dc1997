//! Credentials written into upstream URLs (`https://user:token@host/`, as
//! GOPROXY takes them for a private proxy): sent to that instance as its
//! Basic authorization and to nothing else, and shown nowhere a client, a
//! local user or the log can read.

use base64::Engine;
use http::Method;
use pkgproxy_testkit::client::{proxy_get, send, Answer};
use pkgproxy_testkit::{Daemon, FakeHub, GoModules, Image, Origin, SkopeoSandbox};

use crate::common::{pkgproxyctl, PKGPROXY};

/// Every secret planted, one per kind of upstream URL.
const TOKENS: [&str; 8] =
    ["GO-TOKEN", "SNAP-TOKEN", "REG-TOKEN", "LXD-TOKEN", "APT-TOKEN", "MVN-TOKEN", "RPM-TOKEN", "ML-TOKEN"];

/// Whether `text` shows any planted secret, as it is or Basic-encoded.
fn leaks(text: &str) -> Option<String> {
    let encoded = |user: &str, token: &str| base64::engine::general_purpose::STANDARD.encode(format!("{user}:{token}"));
    TOKENS.iter().find_map(|token| {
        let user = token.split('-').next().unwrap_or("").to_lowercase() + "user";
        let shown = [token.to_string(), encoded(&user, token), format!("{user}:")];
        shown.into_iter().find(|secret| text.contains(secret.as_str()))
    })
}

fn answer_text(answer: &Answer) -> String {
    let headers: Vec<String> =
        answer.headers.iter().map(|(n, v)| format!("{n}: {}", v.to_str().unwrap_or(""))).collect();
    format!("{} {}\n{}", answer.status, headers.join("\n"), String::from_utf8_lossy(&answer.body))
}

/// A refresh that installs a snap: one the store must be asked for.
const REFRESH: &[u8] =
    br#"{"context":[],"actions":[{"action":"install","instance-key":"install-1","name":"hello","channel":"stable"}]}"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_token_in_any_upstream_url_is_shown_nowhere_when_each_upstream_fails() {
    // Port 9 of loopback: nothing listens, every upstream fails.
    let config = r#"
[go]
proxies = ["http://gouser:GO-TOKEN@127.0.0.1:9/goproxy"]
[snap]
stores = ["http://snapuser:SNAP-TOKEN@127.0.0.1:9/store"]
[[registry.upstream]]
name = "docker.io"
mirrors = ["http://reguser:REG-TOKEN@127.0.0.1:9"]
[[lxd.remote]]
name = "images"
mirrors = ["http://lxduser:LXD-TOKEN@127.0.0.1:9/lxd"]
[[apt.archive]]
name = "q"
mirrors = ["http://aptuser:APT-TOKEN@127.0.0.1:9/debian"]
[[maven.repository]]
name = "q"
mirrors = ["http://mvnuser:MVN-TOKEN@127.0.0.1:9/m2"]
[[rpm.repository]]
name = "q"
mirrors = ["http://rpmuser:RPM-TOKEN@127.0.0.1:9/el9"]
metalink = "http://mluser:ML-TOKEN@127.0.0.1:9/metalink?repo=el9"
[status]
page = true
"#;
    let daemon = Daemon::start(PKGPROXY, Some(config)).await;
    let proxy = daemon.proxy_addr();
    let series = [("snap-device-series", "16")];
    let mut shown = Vec::new();
    for _ in 0..2 {
        let answers = [
            send(proxy, "GET", "/go/example.com/m/@v/list", &[], b"").await,
            send(proxy, "GET", "/go/example.com/m/@v/v1.0.0.info", &[], b"").await,
            send(proxy, "GET", "/snap/v2/snaps/info/hello", &series, b"").await,
            send(proxy, "POST", "/snap/v2/snaps/refresh", &series, REFRESH).await,
            send(proxy, "GET", "/v2/library/a/manifests/1", &[], b"").await,
            send(proxy, "GET", &format!("/v2/library/a/blobs/sha256:{}", "a".repeat(64)), &[], b"").await,
            send(proxy, "GET", "/lxd/images/streams/v1/index.json", &[], b"").await,
            proxy_get(proxy, "http://127.0.0.1:9/debian/dists/x/InRelease", &[]).await,
            send(proxy, "GET", "/maven/q/org/example/a/1.0/a-1.0.pom", &[], b"").await,
            send(proxy, "GET", "/rpm/q/repodata/repomd.xml", &[], b"").await,
        ];
        for answer in &answers {
            let failed = answer.status >= 400 || String::from_utf8_lossy(&answer.body).contains("failed");
            assert!(failed, "every upstream fails: {}", answer_text(answer));
            shown.push(answer_text(answer));
        }
    }
    let status = send(proxy, "GET", "/pkgproxy/v1/status", &[], b"").await;
    shown.push(answer_text(&status));
    let stats = daemon.stats();
    let info: serde_json::Value = stats.json(Method::GET, pkgproxy_control::INFO_PATH, None).await.unwrap();
    assert!(info["pools"].as_array().is_some_and(|pools| pools.len() >= 4), "the pools exist: {info}");
    shown.push(info.to_string());
    shown.push(daemon.metrics().await);
    for args in [&["info"][..], &["info", "--json"], &["explain", "/go/example.com/m/@v/list", "--json"]] {
        let output = pkgproxyctl(&daemon, args);
        shown.push(String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr));
    }
    let (_, entries) = daemon.admin("GET", "/pkgproxy/v1/cache/entries", None).await;
    shown.push(entries.to_string());
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    shown.push(daemon.log());
    for text in &shown {
        assert_eq!(leaks(text), None, "a credential is shown in:\n{text}");
    }
    assert!(daemon.log().contains("127.0.0.1:9"), "the log names the upstreams, without their credentials");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_go_proxy_s_url_credentials_are_its_basic_authorization_and_only_its() {
    let modules = GoModules::standard();
    let (private, other) = (Origin::serve(modules.root()).await, Origin::serve(modules.root()).await);
    let with_token = private.url().replace("http://", "http://ci%40corp:GO-TOKEN@");
    let config = format!("[go]\nproxies = [\"{with_token}\", \"{}\"]\nsumdb = \"off\"\n", other.url());
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    for version in ["v1.0.0", "v1.1.0"] {
        for file in ["info", "mod", "zip"] {
            let path = format!("/go/example.com/hello/@v/{version}.{file}");
            assert_eq!(send(daemon.proxy_addr(), "GET", &path, &[], b"").await.status, 200, "{path}");
        }
    }
    let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("ci@corp:GO-TOKEN"));
    let sent = private.requests();
    assert!(!sent.is_empty(), "the private proxy was asked");
    assert!(sent.iter().all(|r| r.header("authorization") == Some(basic.as_str())), "{sent:#?}");
    assert!(other.requests().iter().all(|r| r.header("authorization").is_none()), "to that instance alone");
    assert_eq!(leaks(&daemon.log()), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registry_mirror_s_url_credentials_never_follow_a_blob_to_its_cdn() {
    let hub = FakeHub::start().await;
    let image = Image::build("hello", None);
    hub.publish("library/hello", "v1", &image);
    let mirror = hub.url().replace("http://", "http://reguser:REG-TOKEN@");
    let config = format!(
        "[upstream]\ntrust = [\"{}\"]\n[[registry.upstream]]\nname = \"docker.io\"\nmirrors = [\"{mirror}\"]\n",
        hub.cdn_url()
    );
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let skopeo = SkopeoSandbox::new(daemon.proxy_addr());
    let pulled = tokio::task::block_in_place(|| skopeo.copy("docker.io/library/hello:v1", "pulled"));
    assert!(pulled.success, "{}", pulled.stderr);
    let requests = hub.requests();
    let cdn: Vec<_> = requests.iter().filter(|r| r.path.starts_with("/cdn/")).collect();
    assert!(!cdn.is_empty() && cdn.iter().all(|r| r.header("authorization").is_none()), "{cdn:#?}");
    assert_eq!(leaks(&daemon.log()), None);
}
