//! The real npm, pnpm, yarn 1 and yarn 4 through pkgproxy's npm side,
//! against a fake registry whose tarballs are on a second port (or named at
//! the npm registry's own host): every document and tarball fetched once,
//! checked, and served again from the cache, offline too.

use std::time::Duration;

use pkgproxy_testkit::client::send;
use pkgproxy_testkit::{
    node_tool, project_with_dependencies, FakeNpm, NodeClient, NodeSandbox, NpmPackage, TarballHost,
};

use crate::inproc::Server;

/// The project every client installs: a dependency chain, a scoped
/// package, and an old version with only a SHA-1.
const DEPENDENCIES: &[(&str, &str)] = &[("a", "^1.0.0")];

async fn registry_and_pkgproxy(host: TarballHost) -> (FakeNpm, Server) {
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    fake.set_tarball_host(host);
    let config = format!("[npm]\nmirrors = [\"{}\"]\n[upstream]\ntrust = [\"{}\"]\n", fake.url(), fake.cdn_url());
    let server = Server::start(Some(&config)).await;
    (fake, server)
}

fn registry(server: &Server) -> String {
    format!("http://{}/npm", server.proxy_addr())
}

async fn set_mode(server: &Server, mode: &str) {
    let asked = pkgproxy_control::ModeRequest { mode: mode.to_owned(), from: None, cluster: false };
    server.admin().set_offline(&asked).await.expect("the mode is set");
}

/// Every request the fake saw came from pkgproxy (which marks its own with
/// `Via`): no client went past it.
fn all_through_pkgproxy(fake: &FakeNpm) {
    let direct: Vec<_> = fake.requests().into_iter().filter(|request| request.header("via").is_none()).collect();
    assert!(direct.is_empty(), "requests that passed pkgproxy by: {direct:#?}");
}

fn assert_installed(sandbox: &NodeSandbox, said: &str) {
    for (name, version) in [("a", "1.0.0"), ("b", "1.0.0"), ("@corp/c", "2.0.0"), ("old", "0.1.0")] {
        assert_eq!(sandbox.installed(name).as_deref(), Some(version), "{name}: {said}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_client_installs_through_pkgproxy_and_again_with_fresh_caches_asking_nothing_upstream() {
    for client in NodeClient::ALL {
        let (fake, server) = registry_and_pkgproxy(TarballHost::Cdn).await;
        let sandbox = NodeSandbox::new(client, DEPENDENCIES);
        let cold = sandbox.install(&registry(&server));
        assert!(cold.success, "{}: {}", client.as_str(), cold.output);
        assert_installed(&sandbox, &cold.output);
        all_through_pkgproxy(&fake);
        assert!(fake.count(".tgz") >= 4, "{}: {:#?}", client.as_str(), fake.requests());

        fake.clear_requests();
        sandbox.forget();
        let warm = sandbox.install_locked(&registry(&server));
        assert!(warm.success, "{}: {}", client.as_str(), warm.output);
        assert_installed(&sandbox, &warm.output);
        assert!(fake.requests().is_empty(), "{}: {:#?}", client.as_str(), fake.requests());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn npm_s_lockfile_names_the_npm_registry_and_pnpm_and_yarn_still_fetch_through_pkgproxy() {
    let (fake, server) = registry_and_pkgproxy(TarballHost::Npmjs).await;
    let npm = NodeSandbox::new(NodeClient::Npm, DEPENDENCIES);
    let installed = npm.install(&registry(&server));
    assert!(installed.success, "{}", installed.output);
    let lock: serde_json::Value = serde_json::from_slice(&std::fs::read(npm.lockfile()).unwrap()).unwrap();
    for (path, package) in lock["packages"].as_object().unwrap().iter().filter(|(path, _)| !path.is_empty()) {
        let resolved = package["resolved"].as_str().unwrap_or_default();
        assert!(resolved.starts_with("https://registry.npmjs.org/"), "{path}: {resolved}");
    }
    for client in [NodeClient::Pnpm, NodeClient::Yarn1, NodeClient::Yarn4] {
        let sandbox = NodeSandbox::new(client, DEPENDENCIES);
        let installed = sandbox.install(&registry(&server));
        assert!(installed.success, "{}: {}", client.as_str(), installed.output);
        assert_installed(&sandbox, &installed.output);
    }
    all_through_pkgproxy(&fake);
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_every_lockfile_installs_with_fresh_caches_and_a_package_never_seen_fails_at_once_saying_why() {
    let (fake, server) = registry_and_pkgproxy(TarballHost::Cdn).await;
    let sandboxes: Vec<NodeSandbox> =
        NodeClient::ALL.iter().map(|client| NodeSandbox::new(*client, DEPENDENCIES)).collect();
    for sandbox in &sandboxes {
        let installed = sandbox.install(&registry(&server));
        assert!(installed.success, "{}", installed.output);
    }
    set_mode(&server, "offline").await;
    fake.clear_requests();
    for sandbox in &sandboxes {
        sandbox.forget();
        let offline = sandbox.install_locked(&registry(&server));
        assert!(offline.success, "{}", offline.output);
        assert_installed(sandbox, &offline.output);
    }
    // npm ci audits by default: offline, that must not fail the install.
    let audited = &sandboxes[0];
    audited.forget();
    let output = node_tool("npm")
        .current_dir(audited.app())
        .env("HOME", audited.home())
        .args(["ci", "--registry", &format!("{}/", registry(&server)), "--cache"])
        .arg(audited.cache())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(fake.requests().is_empty(), "nothing asked while offline: {:#?}", fake.requests());

    let started = std::time::Instant::now();
    let never = NodeSandbox::new(NodeClient::Npm, &[("never-seen", "^1.0.0")]).install(&registry(&server));
    assert!(!never.success);
    assert!(never.output.contains("424") && never.output.contains("pkgproxy"), "{}", never.output);
    assert!(started.elapsed() < Duration::from_secs(20), "no minute of retries: {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_bytes_fail_npm_with_eintegrity_are_not_kept_and_the_honest_tarball_then_installs() {
    let (fake, server) = registry_and_pkgproxy(TarballHost::Registry).await;
    let sandbox = NodeSandbox::new(NodeClient::Npm, &[("b", "1.0.0")]);
    fake.set_corrupt(true);
    let failed = sandbox.install(&registry(&server));
    assert!(!failed.success);
    let told = ["EINTEGRITY", "SHA-1", "SHA-512", "sha512"].iter().any(|said| failed.output.contains(said));
    assert!(told, "the check that failed, in npm's output: {}", failed.output);
    assert!(sandbox.installed("b").is_none());
    fake.set_corrupt(false);
    sandbox.forget();
    let installed = sandbox.install(&registry(&server));
    assert!(installed.success, "the honest bytes, fetched again: {}", installed.output);
    fake.clear_requests();
    sandbox.forget();
    assert!(sandbox.install_locked(&registry(&server)).success);
    assert_eq!(fake.count(".tgz"), 0, "the honest tarball was kept: {:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_clients_of_one_tarball_and_of_one_document_make_one_fetch_each() {
    let large = NpmPackage::sized("large", "1.0.0", &[], 4 * 1024 * 1024);
    let fake = FakeNpm::start(std::slice::from_ref(&large)).await;
    let config = format!("[npm]\nmirrors = [\"{}\"]\n", fake.url());
    let server = Server::start(Some(&config)).await;
    let tarball = format!("/npm{}", large.tarball_path());
    fake.set_cut(true);
    let cut = send(server.proxy_addr(), "GET", &tarball, &[], b"").await;
    assert!(cut.status != 200 || cut.body != large.bytes, "a cut body never reaches a client whole");
    fake.set_cut(false);
    fake.clear_requests();
    for path in [tarball.as_str(), "/npm/large"] {
        let clients = (0..20).map(|_| {
            let (addr, path) = (server.proxy_addr().to_owned(), path.to_owned());
            tokio::spawn(async move { send(&addr, "GET", &path, &[], b"").await })
        });
        for answer in futures_util::future::join_all(clients).await {
            assert_eq!(answer.unwrap().status, 200, "{path}");
        }
    }
    let asked = fake.requests();
    assert_eq!(asked.iter().filter(|r| r.path.ends_with(".tgz")).count(), 1, "{asked:#?}");
    assert_eq!(asked.iter().filter(|r| r.path == "/large").count(), 1, "{asked:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_version_published_after_its_document_was_held_is_installable_at_once() {
    let (fake, server) = registry_and_pkgproxy(TarballHost::Registry).await;
    let first = NodeSandbox::new(NodeClient::Npm, &[("b", "^1.0.0")]);
    assert!(first.install(&registry(&server)).success);
    let newer = NpmPackage::new("b", "1.1.0", &[]);
    fake.publish(newer.clone());
    // A lockfile made elsewhere names it: its tarball is fetched at once.
    let fetched = send(server.proxy_addr(), "GET", &format!("/npm{}", newer.tarball_path()), &[], b"").await;
    assert_eq!(fetched.status, 200, "{}", String::from_utf8_lossy(&fetched.body));
    assert!(fetched.body == newer.bytes);
    // And the held document was asked again: an install resolves it.
    let second = NodeSandbox::new(NodeClient::Npm, &[("b", "^1.1.0")]);
    let installed = second.install(&registry(&server));
    assert!(installed.success, "{}", installed.output);
    assert_eq!(second.installed("b").as_deref(), Some("1.1.0"));
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_come_in_both_forms_under_one_key_per_spelling_and_never_go_back_in_time() {
    let (fake, server) = registry_and_pkgproxy(TarballHost::Cdn).await;
    let corgi = [("accept", "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*")];
    for path in ["/npm/@corp%2fc", "/npm/@corp%2Fc", "/npm/@corp/c"] {
        let full = send(server.proxy_addr(), "GET", path, &[], b"").await;
        assert_eq!(full.status, 200, "{path}");
        let document: serde_json::Value = serde_json::from_slice(&full.body).unwrap();
        assert!(document["time"]["modified"].is_string(), "the full form: {document}");
        let tarball = document["versions"]["2.0.0"]["dist"]["tarball"].as_str().unwrap();
        assert_eq!(tarball, format!("{}/@corp/c/-/c-2.0.0.tgz", registry(&server)), "at pkgproxy");
    }
    assert_eq!(fake.requests().iter().filter(|r| r.path.starts_with("/@corp")).count(), 1, "{:#?}", fake.requests());
    let version = send(server.proxy_addr(), "GET", "/npm/@corp%2fc/2.0.0", &[], b"").await;
    let version: serde_json::Value = serde_json::from_slice(&version.body).unwrap();
    assert_eq!(version["dist"]["tarball"], format!("{}/@corp/c/-/c-2.0.0.tgz", registry(&server)), "{version}");
    let abbreviated = send(server.proxy_addr(), "GET", "/npm/a", &corgi, b"").await;
    assert_eq!(abbreviated.header("vary"), Some("Accept, Accept-Encoding"));
    let abbreviated: serde_json::Value = serde_json::from_slice(&abbreviated.body).unwrap();
    assert!(abbreviated.get("time").is_none(), "the abbreviated form: {abbreviated}");

    let held = send(server.proxy_addr(), "GET", "/npm/a", &[], b"").await;
    fake.publish(NpmPackage::new("a", "1.1.0", &[("b", "^1.0.0")]));
    server.clock().advance(Duration::from_secs(600));
    let newer = send(server.proxy_addr(), "GET", "/npm/a", &[], b"").await;
    assert!(String::from_utf8_lossy(&newer.body).contains("\"1.1.0\""), "revalidated after the window");
    assert_ne!(held.body, newer.body);
    fake.set_modified_back(true);
    server.clock().advance(Duration::from_secs(600));
    let again = send(server.proxy_addr(), "GET", "/npm/a", &[], b"").await;
    assert!(again.body == newer.body, "the newer document kept");
    assert_eq!(again.header("x-pkgproxy-cache"), Some("stale"), "{:?}", again.header("x-pkgproxy-reason"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registry_down_leaves_what_is_held_served_and_what_is_not_told_in_npm_s_shape() {
    let (fake, server) = registry_and_pkgproxy(TarballHost::Registry).await;
    assert_eq!(send(server.proxy_addr(), "GET", "/npm/a", &[], b"").await.status, 200);
    fake.force_status(503);
    server.clock().advance(Duration::from_secs(600));
    let stale = send(server.proxy_addr(), "GET", "/npm/a", &[], b"").await;
    assert_eq!((stale.status, stale.header("x-pkgproxy-cache")), (200, Some("stale")));
    let overloaded = send(server.proxy_addr(), "GET", "/npm/b", &[], b"").await;
    assert_eq!((overloaded.status, overloaded.header("retry-after")), (503, Some("1")), "when to ask again, passed on");
    fake.force_status(500);
    let missing = send(server.proxy_addr(), "GET", "/npm/@corp/c/-/c-2.0.0.tgz", &[], b"").await;
    assert_eq!(missing.status, 424, "npm reports a 4xx at once");
    let said: serde_json::Value = serde_json::from_slice(&missing.body).unwrap();
    assert!(said["error"].as_str().unwrap().contains("pkgproxy"), "{said}");
    fake.force_status(0);
    let absent = send(server.proxy_addr(), "GET", "/npm/no-such-package", &[], b"").await;
    assert_eq!(absent.status, 404, "a true absence passes");
    let said: serde_json::Value = serde_json::from_slice(&absent.body).unwrap();
    assert_eq!(said["error"], "Not found");
}

#[tokio::test(flavor = "multi_thread")]
async fn what_a_token_brings_is_served_only_to_clients_the_registry_accepts() {
    let (fake, server) = registry_and_pkgproxy(TarballHost::Registry).await;
    fake.require_token(Some("secret"));
    let token = [("authorization", "Bearer secret")];
    let private = send(server.proxy_addr(), "GET", "/npm/@corp%2fc", &token, b"").await;
    assert_eq!(private.status, 200);
    let tarball = send(server.proxy_addr(), "GET", "/npm/@corp/c/-/c-2.0.0.tgz", &token, b"").await;
    assert_eq!(tarball.status, 200);
    for headers in [&[][..], &[("authorization", "Bearer wrong")][..]] {
        for path in ["/npm/@corp%2fc", "/npm/@corp/c/-/c-2.0.0.tgz"] {
            let refused = send(server.proxy_addr(), "GET", path, headers, b"").await;
            assert_ne!(refused.status, 200, "{path} {headers:?}: {}", String::from_utf8_lossy(&refused.body));
            assert!(refused.body != tarball.body && refused.body != private.body);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_private_package_installs_through_pkgproxy_once_the_token_line_setup_names_is_added() {
    let (fake, server) = registry_and_pkgproxy(TarballHost::Registry).await;
    fake.restrict("@corp/c", &["npm_SECRET123"]);
    let sandbox = NodeSandbox::new(NodeClient::Npm, &[("@corp/c", "^2.0.0")]);
    let npmrc = sandbox.home().join(".npmrc");
    let own = "//registry.npmjs.org/:_authToken=npm_SECRET123\n";
    std::fs::write(&npmrc, own).unwrap();
    let applied = std::process::Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
        .args(["setup", "npm", "-addr", server.proxy_addr(), "--apply"])
        .args(["-stats-socket-path", "/nonexistent/stats.sock", "-admin-socket-path", "/nonexistent/admin.sock"])
        .env("HOME", sandbox.home())
        .env_remove("NPM_CONFIG_USERCONFIG")
        .env_remove("PKGPROXY_SETUP_ROOT")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&applied.stdout).into_owned();
    assert!(applied.status.success(), "{said}{}", String::from_utf8_lossy(&applied.stderr));
    let install = || {
        let output = node_tool("npm")
            .current_dir(sandbox.app())
            .env("HOME", sandbox.home())
            .env("npm_config_userconfig", &npmrc)
            .args(["install", "--no-audit", "--no-fund", "--update-notifier=false", "--cache"])
            .arg(sandbox.cache())
            .output()
            .unwrap();
        (
            output.status.success(),
            format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)),
        )
    };
    let (installed, told) = install();
    assert!(!installed, "npm sent the npm registry's token to pkgproxy: {told}");

    // The line setup named, with the token in it.
    let wanted = format!("//{}/npm/:_authToken=", server.proxy_addr());
    let named = said.split_whitespace().find(|word| word.starts_with(&wanted)).unwrap_or_else(|| panic!("{said}"));
    assert_eq!(named, format!("{wanted}TOKEN"), "{said}");
    let mut text = std::fs::read_to_string(&npmrc).unwrap();
    text.push_str(&format!("{wanted}npm_SECRET123\n"));
    std::fs::write(&npmrc, text).unwrap();
    let (installed, told) = install();
    assert!(installed, "{told}");
    assert_eq!(sandbox.installed("@corp/c").as_deref(), Some("2.0.0"), "{told}");
    all_through_pkgproxy(&fake);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_registry_s_api_is_passed_on_uncached() {
    let (fake, server) = registry_and_pkgproxy(TarballHost::Registry).await;
    for _ in 0..2 {
        let audit = send(server.proxy_addr(), "POST", "/npm/-/npm/v1/security/advisories/bulk", &[], b"{}").await;
        assert_eq!(audit.status, 200);
    }
    assert_eq!(fake.count("/-/npm/v1/security/advisories/bulk"), 2);
    set_mode(&server, "offline").await;
    let offline = send(server.proxy_addr(), "POST", "/npm/-/npm/v1/security/advisories/bulk", &[], b"{}").await;
    assert_eq!(offline.status, 424);
    let said: serde_json::Value = serde_json::from_slice(&offline.body).unwrap();
    assert!(said["error"].as_str().unwrap().contains("offline"), "{said}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_document_is_kept_compressed_for_clients_that_take_gzip_with_their_own_links() {
    use std::io::Read;
    let mut versions: Vec<NpmPackage> =
        (0..60).map(|n| NpmPackage::new("big", &format!("1.0.{n}"), &[("b", "^1.0.0")])).collect();
    versions.push(NpmPackage::new("b", "1.0.0", &[]));
    let fake = FakeNpm::start(&versions).await;
    let server = Server::start(Some(&format!("[npm]\nmirrors = [\"{}\"]\n", fake.url()))).await;
    let plain = send(server.proxy_addr(), "GET", "/npm/big", &[], b"").await;
    assert_eq!(plain.status, 200);
    assert!(plain.body.len() > 8 * 1024, "a document worth compressing: {}", plain.body.len());
    let gzip = [("accept-encoding", "gzip, deflate")];
    // The compressed form is made in the background after the first ask.
    let mut compressed = None;
    for _ in 0..200 {
        let answer = send(server.proxy_addr(), "GET", "/npm/big", &gzip, b"").await;
        assert_eq!(answer.status, 200);
        if answer.header("content-encoding") == Some("gzip") {
            compressed = Some(answer);
            break;
        }
        assert!(answer.body == plain.body, "meanwhile, the document as it is");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let compressed = compressed.expect("a compressed form was made");
    assert!(compressed.body.len() * 4 < plain.body.len(), "{} of {}", compressed.body.len(), plain.body.len());
    assert_eq!(compressed.header("content-length"), Some(compressed.body.len().to_string().as_str()));
    let mut unpacked = Vec::new();
    flate2::read::GzDecoder::new(compressed.body.as_ref()).read_to_end(&mut unpacked).unwrap();
    assert!(unpacked == plain.body, "the same document, its links at pkgproxy");
    // npm installs from it.
    let sandbox = NodeSandbox::new(NodeClient::Npm, &[("big", "1.0.59")]);
    let installed = sandbox.install(&registry(&server));
    assert!(installed.success, "{}", installed.output);
    assert_eq!(sandbox.installed("big").as_deref(), Some("1.0.59"));
}

/// Each client's lockfile of the project, made where pkgproxy was not (npm's
/// through another pkgproxy, so that it names the npm registry as it would
/// anywhere), yarn 1's naming pkgproxy at `at` as one made through it does
/// (yarn 1 fetches its lockfile's URLs as written): what a build brings.
async fn lockfiles(fake: &FakeNpm, at: &str) -> Vec<(NodeClient, NodeSandbox)> {
    let elsewhere = Server::start(Some(&format!("[npm]\nmirrors = [\"{}\"]\n", fake.url()))).await;
    let mut made = Vec::new();
    for client in NodeClient::ALL {
        let sandbox = NodeSandbox::new(client, DEPENDENCIES);
        let (host, registry) = match client {
            NodeClient::Npm => (TarballHost::Npmjs, registry(&elsewhere)),
            _ => (TarballHost::Registry, fake.url()),
        };
        fake.set_tarball_host(host);
        let locked = sandbox.install(&registry);
        assert!(locked.success, "{}: {}", client.as_str(), locked.output);
        sandbox.forget();
        if client == NodeClient::Yarn1 {
            let lock = std::fs::read_to_string(sandbox.lockfile()).unwrap();
            std::fs::write(sandbox.lockfile(), lock.replace(&format!("{}/", fake.url()), &format!("{at}/"))).unwrap();
        }
        made.push((client, sandbox));
    }
    fake.set_tarball_host(TarballHost::Registry);
    made
}

#[tokio::test(flavor = "multi_thread")]
async fn check_says_what_each_lockfile_needs_warm_fetches_it_and_every_client_installs_it_offline() {
    use crate::common::PKGPROXY;
    use crate::readiness::ctl;
    use pkgproxy_testkit::Daemon;
    let fake = FakeNpm::start(&project_with_dependencies()).await;
    let config = format!("[npm]\nmirrors = [\"{}\"]\n", fake.url());
    let daemon = Daemon::start(PKGPROXY, Some(&config)).await;
    let at = format!("http://{}/npm", daemon.proxy_addr());
    let locks = lockfiles(&fake, &at).await;
    fake.clear_requests();
    for (client, sandbox) in &locks {
        let lock = sandbox.lockfile();
        let lock = lock.to_str().unwrap();
        let (ready, printed) = ctl(&daemon, &["check", "npm", lock]);
        if *client == NodeClient::Npm {
            assert!(!ready, "{printed}");
            assert!(printed.contains("@corp/c@2.0.0 tarball"), "{printed}");
            assert!(fake.requests().is_empty(), "a check asks nothing upstream: {:#?}", fake.requests());
        }
        let (warmed, printed) = ctl(&daemon, &["warm", "npm", lock]);
        assert!(warmed, "{}: {printed}", client.as_str());
        let (ready, printed) = ctl(&daemon, &["check", "npm", lock]);
        assert!(ready, "{}: {printed}", client.as_str());
    }
    assert_eq!(fake.count("/-/"), 4, "each tarball fetched once: {:#?}", fake.requests());
    let explained = crate::common::pkgproxyctl(&daemon, &["explain", "/npm/a/-/a-1.0.0.tgz", "--json"]);
    let told: pkgproxy_control::Explanation = serde_json::from_slice(&explained.stdout).unwrap();
    assert_eq!((told.action.as_str(), told.side.as_deref()), ("hit", Some("npm")), "{told:?}");

    assert!(ctl(&daemon, &["offline", "offline"]).0);
    fake.clear_requests();
    for (client, sandbox) in &locks {
        let offline = sandbox.install_locked(&at);
        assert!(offline.success, "{}: {}", client.as_str(), offline.output);
        assert_installed(sandbox, &offline.output);
    }
    assert!(fake.requests().is_empty(), "nothing asked while offline: {:#?}", fake.requests());
    let metrics = daemon.metrics().await;
    let hits = metrics.lines().find(|line| line.starts_with("pkgproxy_hits_total{side=\"npm\"}")).unwrap_or_default();
    assert!(hits.rsplit(' ').next().and_then(|n| n.parse::<u64>().ok()).is_some_and(|n| n >= 16), "{hits}");

    // A signed bundle of npm's lock, taken in by a pkgproxy never online.
    let dir = tempfile::tempdir().unwrap();
    let (key, trusted) = crate::bundle::signing_key(dir.path());
    let bundle = dir.path().join("build.tar");
    let (npm, sandbox) = &locks[0];
    assert_eq!(*npm, NodeClient::Npm);
    let lock = sandbox.lockfile();
    let export =
        ["export", "-o", bundle.to_str().unwrap(), "--sign", key.to_str().unwrap(), "npm", lock.to_str().unwrap()];
    let (exported, printed) = ctl(&daemon, &export);
    assert!(exported, "{printed}");
    let gapped = Daemon::start_with(PKGPROXY, Some(&format!("{config}{trusted}")), &["-offline"]).await;
    let (imported, printed) = ctl(&gapped, &["import", bundle.to_str().unwrap()]);
    assert!(imported, "{printed}");
    sandbox.forget();
    let far = sandbox.install_locked(&format!("http://{}/npm", gapped.proxy_addr()));
    assert!(far.success, "{}", far.output);
    assert_installed(sandbox, &far.output);
    assert!(fake.requests().is_empty(), "{:#?}", fake.requests());
}
