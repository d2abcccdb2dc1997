//! The fleet's policy on the npm side, with the real npm, pnpm and both
//! yarns against the fake registry, on pkgproxy's controlled clock: a
//! version younger than `min_age` is not resolved (the one before is), a
//! lockfile naming it fails saying why, and once it is old enough the same
//! lockfile installs from what was cached.

use std::time::Duration;

use pkgproxy_testkit::client::send;
use pkgproxy_testkit::{FakeNpm, NodeClient, NodeSandbox, NpmPackage};

use crate::inproc::Server;

const DAY: Duration = Duration::from_secs(24 * 3600);
/// When `left` 1.0.0 was published: 2026-01-01 01:00 UTC.
const OLD: u64 = 60;
/// When `left` 1.0.1 was published, ten days later.
const NEW: u64 = OLD + 10 * 24 * 60;

/// A registry holding `left` 1.0.0 and, ten days later, 1.0.1.
async fn registry() -> FakeNpm {
    let fake = FakeNpm::start(&[]).await;
    fake.publish_at(NpmPackage::new("left", "1.0.0", &[]), OLD);
    fake.publish_at(NpmPackage::new("left", "1.0.1", &[]), NEW);
    fake
}

fn config(fake: &FakeNpm, policy: &str) -> String {
    format!("[npm]\nmirrors = [\"{}\"]\n[policy]\n{policy}\n", fake.url())
}

fn at(server: &Server) -> String {
    format!("http://{}/npm", server.proxy_addr())
}

async fn get(server: &Server, path: &str) -> pkgproxy_testkit::client::Answer {
    send(server.proxy_addr(), "GET", path, &[("accept", "application/json")], b"").await
}

/// The versions and `latest` of `left`'s document as pkgproxy serves it.
async fn served_versions(server: &Server) -> (Vec<String>, String, Vec<String>) {
    let answer = get(server, "/npm/left").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let document: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    let versions = document["versions"].as_object().unwrap().keys().cloned().collect();
    let times = document["time"].as_object().unwrap().keys().cloned().collect();
    (versions, document["dist-tags"]["latest"].as_str().unwrap_or_default().to_owned(), times)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fresh_version_is_not_resolved_a_lockfile_naming_it_fails_saying_why_and_installs_once_old_enough() {
    let fake = registry().await;
    let server = Server::start(Some(&config(&fake, "min_age = \"3d\""))).await;
    // Every lockfile made while 1.0.1 was old enough (its tarball cached).
    server.clock().set(FakeNpm::published_at(NEW) + 10 * DAY);
    let mut locked = Vec::new();
    for client in NodeClient::ALL {
        let sandbox = NodeSandbox::new(client, &[("left", "^1.0.0")]);
        let installed = sandbox.install(&at(&server));
        assert!(installed.success, "{}: {}", client.as_str(), installed.output);
        assert_eq!(sandbox.installed("left").as_deref(), Some("1.0.1"), "{}", client.as_str());
        sandbox.forget();
        locked.push((client, sandbox));
    }

    // A day after 1.0.1 was published.
    server.clock().set(FakeNpm::published_at(NEW) + DAY);
    let (versions, latest, times) = served_versions(&server).await;
    assert_eq!((versions, latest.as_str()), (vec!["1.0.0".to_owned()], "1.0.0"));
    assert!(!times.contains(&"1.0.1".to_owned()) && times.contains(&"1.0.0".to_owned()), "{times:?}");
    for client in NodeClient::ALL {
        let fresh = NodeSandbox::new(client, &[("left", "^1.0.0")]);
        let installed = fresh.install(&at(&server));
        assert!(installed.success, "{}: {}", client.as_str(), installed.output);
        assert_eq!(fresh.installed("left").as_deref(), Some("1.0.0"), "{}: {}", client.as_str(), installed.output);
    }
    let refused = get(&server, "/npm/left/-/left-1.0.1.tgz").await;
    assert_eq!(refused.status, 403);
    let body = String::from_utf8_lossy(&refused.body);
    assert!(
        body.contains("npm:left@1.0.1 is blocked by policy: published 2026-01-11T01:00Z, min_age 3d; allowed from 2026-01-14T01:00Z"),
        "{body}"
    );
    fake.clear_requests();
    for (client, sandbox) in &locked {
        let held = sandbox.install_locked(&at(&server));
        assert!(!held.success, "{}: {}", client.as_str(), held.output);
        eprintln!("{} printed:\n{}", client.as_str(), held.output);
        let says_why = match client {
            // pnpm 11 checks a lockfile against the document before any
            // tarball, and names the version the document no longer lists.
            NodeClient::Pnpm => {
                held.output.contains("ERR_PNPM_MINIMUM_RELEASE_AGE_VIOLATION") && held.output.contains("left@1.0.1")
            }
            // yarn 1 prints a tarball's status with the status's own
            // words, never the answer's (docs/policy.md says so).
            NodeClient::Yarn1 => held.output.contains("left-1.0.1.tgz: Request failed \"403 Forbidden\""),
            _ => held.output.contains("blocked by policy") || held.output.contains("Blocked by pkgproxy policy"),
        };
        assert!(says_why, "{} does not say why: {}", client.as_str(), held.output);
    }
    assert_eq!(fake.count("left-1.0.1.tgz"), 0, "nothing fetched for a refused client: {:#?}", fake.requests());

    // Four days on, the same lockfiles install from the cache.
    server.clock().advance(4 * DAY);
    for (client, sandbox) in &locked {
        sandbox.forget();
        let installed = sandbox.install_locked(&at(&server));
        assert!(installed.success, "{}: {}", client.as_str(), installed.output);
        assert_eq!(sandbox.installed("left").as_deref(), Some("1.0.1"), "{}", client.as_str());
    }
    assert_eq!(fake.count("left-1.0.1.tgz"), 0, "served from the cache: {:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn not_after_serves_only_what_was_published_before_and_latest_points_at_the_newest_such() {
    let fake = registry().await;
    fake.publish_at(NpmPackage::new("left", "2.0.0-beta.1", &[]), NEW + 1);
    let server = Server::start(Some(&config(&fake, "not_after = \"2026-01-05T00:00:00Z\""))).await;
    let (versions, latest, _) = served_versions(&server).await;
    assert_eq!((versions, latest.as_str()), (vec!["1.0.0".to_owned()], "1.0.0"));
    let sandbox = NodeSandbox::new(NodeClient::Npm, &[("left", "*")]);
    let installed = sandbox.install(&at(&server));
    assert!(installed.success, "{}", installed.output);
    assert_eq!(sandbox.installed("left").as_deref(), Some("1.0.0"));
    let refused = get(&server, "/npm/left/-/left-2.0.0-beta.1.tgz").await;
    assert_eq!(refused.status, 403);
    assert!(String::from_utf8_lossy(&refused.body).contains("after not_after 2026-01-05T00:00Z"), "{refused:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registry_that_gives_no_time_is_refused_saying_so_unless_unknown_time_allows_it() {
    let fake = registry().await;
    fake.set_without_times(true);
    let server = Server::start(Some(&config(&fake, "min_age = \"3d\""))).await;
    let refused = get(&server, "/npm/left/-/left-1.0.0.tgz").await;
    assert_eq!(refused.status, 403);
    assert!(String::from_utf8_lossy(&refused.body).contains("publish time cannot be learnt"), "{refused:?}");
    let sandbox = NodeSandbox::new(NodeClient::Npm, &[("left", "^1.0.0")]);
    let refused = sandbox.install(&at(&server));
    assert!(!refused.success, "no version with a known time: {}", refused.output);
    assert!(refused.output.contains("publish time cannot be learnt"), "npm says why: {}", refused.output);

    server.reload_with(&config(&fake, "min_age = \"3d\"\nunknown_time = \"allow\"")).await;
    sandbox.forget();
    let installed = sandbox.install(&at(&server));
    assert!(installed.success, "{}", installed.output);
    assert_eq!(sandbox.installed("left").as_deref(), Some("1.0.1"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_malicious_package_record_refuses_its_version_whatever_its_age_and_allow_lets_it_through() {
    let fake = registry().await;
    let osv = tempfile::tempdir().unwrap();
    let record = r#"{"id":"MAL-2026-77","summary":"Malicious code in left (npm)","affected":[{"package":{"ecosystem":"npm","name":"left"},"versions":["1.0.1"]}]}"#;
    std::fs::write(osv.path().join("MAL-2026-77.json"), record).unwrap();
    let rules = format!("osv = [\"{}\"]", osv.path().display());
    let server = Server::start(Some(&config(&fake, &rules))).await;
    server.clock().set(FakeNpm::published_at(NEW) + 1000 * DAY);
    let refused = get(&server, "/npm/left/-/left-1.0.1.tgz").await;
    assert_eq!(refused.status, 403);
    assert!(String::from_utf8_lossy(&refused.body).contains("MAL-2026-77"), "{refused:?}");
    assert_eq!(get(&server, "/npm/left/-/left-1.0.0.tgz").await.status, 200, "its neighbour is served");
    let (versions, latest, _) = served_versions(&server).await;
    assert_eq!((versions, latest.as_str()), (vec!["1.0.0".to_owned()], "1.0.0"));

    server.reload_with(&config(&fake, &format!("{rules}\nallow = [\"npm:left@1.0.1\"]"))).await;
    assert_eq!(get(&server, "/npm/left/-/left-1.0.1.tgz").await.status, 200, "break-glass");
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_the_policy_applies_to_what_is_cached_and_a_reload_applies_without_a_refetch() {
    let fake = registry().await;
    let server = Server::start(Some(&config(&fake, "min_age = \"3d\""))).await;
    server.clock().set(FakeNpm::published_at(NEW) + 10 * DAY);
    assert_eq!(get(&server, "/npm/left/-/left-1.0.1.tgz").await.status, 200);
    let (versions, _, _) = served_versions(&server).await;
    assert_eq!(versions.len(), 2);

    let asked = pkgproxy_control::ModeRequest { mode: "offline".to_owned(), from: None, cluster: false };
    server.admin().set_offline(&asked).await.unwrap();
    server.clock().set(FakeNpm::published_at(NEW) + DAY);
    fake.clear_requests();
    assert_eq!(get(&server, "/npm/left/-/left-1.0.1.tgz").await.status, 403, "held, and refused");
    let (versions, latest, _) = served_versions(&server).await;
    assert_eq!((versions, latest.as_str()), (vec!["1.0.0".to_owned()], "1.0.0"));

    server.reload_with(&config(&fake, "min_age = \"1h\"")).await;
    let (versions, latest, _) = served_versions(&server).await;
    assert_eq!((versions.len(), latest.as_str()), (2, "1.0.1"), "the new rule, at once");
    assert_eq!(get(&server, "/npm/left/-/left-1.0.1.tgz").await.status, 200);
    assert!(fake.requests().is_empty(), "nothing fetched again: {:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registry_configured_with_policy_false_is_served_as_published() {
    let fake = registry().await;
    let config = format!(
        "[npm]\nmirrors = [\"{url}\"]\n[[npm.registry]]\nname = \"corp\"\nmirrors = [\"{url}\"]\npolicy = false\n\
         [policy]\nmin_age = \"3d\"\n",
        url = fake.url()
    );
    let server = Server::start(Some(&config)).await;
    server.clock().set(FakeNpm::published_at(NEW) + DAY);
    assert_eq!(get(&server, "/npm/corp/left/-/left-1.0.1.tgz").await.status, 200);
    assert_eq!(get(&server, "/npm/left/-/left-1.0.1.tgz").await.status, 403);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_filtered_document_is_kept_compressed_for_clients_that_take_gzip() {
    use std::io::Read;
    let fake = FakeNpm::start(&[]).await;
    for n in 0..60 {
        fake.publish_at(NpmPackage::new("big", &format!("1.0.{n}"), &[("b", "^1.0.0")]), OLD + n);
    }
    fake.publish_at(NpmPackage::new("big", "1.0.60", &[]), NEW);
    let server = Server::start(Some(&config(&fake, "min_age = \"3d\""))).await;
    server.clock().set(FakeNpm::published_at(NEW) + DAY);
    let plain = get(&server, "/npm/big").await;
    assert_eq!(plain.status, 200);
    let document: serde_json::Value = serde_json::from_slice(&plain.body).unwrap();
    assert!(document["versions"].get("1.0.60").is_none() && document["versions"].get("1.0.59").is_some());
    let gzip = [("accept-encoding", "gzip"), ("accept", "application/json")];
    // The compressed form is made in the background after the first ask.
    let mut compressed = None;
    for _ in 0..200 {
        let answer = send(server.proxy_addr(), "GET", "/npm/big", &gzip, b"").await;
        assert_eq!(answer.status, 200);
        if answer.header("content-encoding") == Some("gzip") {
            compressed = Some(answer);
            break;
        }
        assert!(answer.body == plain.body, "meanwhile, the filtered document as it is");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let compressed = compressed.expect("a compressed form of the filtered document was made");
    let mut unpacked = Vec::new();
    flate2::read::GzDecoder::new(compressed.body.as_ref()).read_to_end(&mut unpacked).unwrap();
    assert!(unpacked == plain.body, "the filtered document, compressed");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dist_tag_naming_a_refused_version_is_refused_saying_why() {
    let fake = registry().await;
    let server = Server::start(Some(&config(&fake, "min_age = \"3d\""))).await;
    server.clock().set(FakeNpm::published_at(NEW) + DAY);
    let refused = get(&server, "/npm/left/latest").await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.body).contains("npm:left@1.0.1 is blocked by policy"), "{refused:?}");
    server.clock().advance(4 * DAY);
    let served = get(&server, "/npm/left/latest").await;
    assert_eq!(served.status, 200, "{served:?}");
    let version: serde_json::Value = serde_json::from_slice(&served.body).unwrap();
    assert_eq!(version["version"], "1.0.1");
}
