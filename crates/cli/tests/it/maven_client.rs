//! The real Maven (Debian's `mvn`, with a headless JDK) through pkgproxy's
//! Maven side, against a fake repository: every pom and jar fetched once,
//! checked against the strongest checksum beside it, served again from
//! the cache (offline too), and what cannot be had told at once in
//! Maven's own output.
//!
//! A build is `mvn -B validate` of a project whose build extensions are
//! the artifacts: Maven resolves a build's extensions (each pom and jar,
//! with their dependencies) before any phase, and `validate` runs no
//! plugin, so a build needs nothing but what the fake holds.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use pkgproxy_testkit::client::get;
use pkgproxy_testkit::maven::PathClass;
use pkgproxy_testkit::{FakeMaven, MavenArtifact};

use crate::inproc::Server;

/// The artifacts of the build: `top` depends on `middle`, which depends
/// on `leaf`; `other` stands alone. Maven adds plexus-utils 1.1 to every
/// build extension (as it does to plugins that do not name it).
fn artifacts() -> Vec<MavenArtifact> {
    vec![
        MavenArtifact::jar("org.codehaus.plexus", "plexus-utils", "1.1"),
        MavenArtifact::jar("org.example.deep", "leaf", "1.0"),
        MavenArtifact::jar("org.example", "middle", "2.1").depends_on("org.example.deep", "leaf", "1.0"),
        MavenArtifact::jar("org.example", "top", "3.0").depends_on("org.example", "middle", "2.1"),
        MavenArtifact::jar("org.example", "other", "0.9").sized(64 * 1024),
    ]
}

/// The extensions a build resolves, by group, artifact and version.
const BUILD: &[(&str, &str, &str)] = &[("org.example", "top", "3.0"), ("org.example", "other", "0.9")];

async fn repository_and_pkgproxy() -> (FakeMaven, Server) {
    let fake = FakeMaven::start(&artifacts()).await;
    let server = Server::start(Some(&config(&fake))).await;
    (fake, server)
}

fn config(fake: &FakeMaven) -> String {
    format!("[[maven.repository]]\nname = \"central\"\nmirrors = [\"{}\"]\n", fake.url())
}

/// What a Maven build printed, and whether it passed.
struct Built {
    success: bool,
    output: String,
    took: Duration,
}

/// `mvn -B validate` of a project whose build extensions are `extensions`,
/// with the local repository `local` (fresh unless the caller keeps it),
/// every repository mirrored to `repository` (`http://HOST/maven/NAME/`).
fn mvn_build(repository: &str, local: &Path, extensions: &[(&str, &str, &str)]) -> Built {
    let project = tempfile::tempdir().unwrap();
    let extensions: String = extensions
        .iter()
        .map(|(group, artifact, version)| {
            format!(
                "<extension><groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version></extension>"
            )
        })
        .collect();
    let pom = format!(
        "<project xmlns=\"http://maven.apache.org/POM/4.0.0\"><modelVersion>4.0.0</modelVersion>\
         <groupId>test</groupId><artifactId>app</artifactId><version>1</version><packaging>pom</packaging>\
         <build><extensions>{extensions}</extensions></build></project>"
    );
    std::fs::write(project.path().join("pom.xml"), pom).unwrap();
    let settings = format!(
        "<settings><mirrors><mirror><id>pkgproxy</id><mirrorOf>*</mirrorOf><url>{repository}</url></mirror></mirrors></settings>"
    );
    std::fs::write(project.path().join("settings.xml"), settings).unwrap();
    std::fs::write(project.path().join("global.xml"), "<settings/>").unwrap();
    let started = Instant::now();
    let output = Command::new("mvn")
        .args(["-B", "-s", "settings.xml", "-gs", "global.xml", "validate"])
        .arg(format!("-Dmaven.repo.local={}", local.display()))
        .current_dir(project.path())
        .env("HOME", project.path())
        .env("MAVEN_OPTS", "-Xshare:auto")
        .output()
        .expect("mvn runs (test.sh installs maven)");
    let output_text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Built { success: output.status.success(), output: output_text, took: started.elapsed() }
}

/// How many requests `fake` had for exactly `path`.
fn asked(fake: &FakeMaven, path: &str) -> usize {
    fake.requests().iter().filter(|request| request.path == path).count()
}

fn central(server: &Server) -> String {
    format!("http://{}/maven/central/", server.proxy_addr())
}

/// Whether `local` holds the jar of `group:artifact:version`.
fn has_jar(local: &Path, (group, artifact, version): (&str, &str, &str)) -> bool {
    let path = format!("{}/{artifact}/{version}/{artifact}-{version}.jar", group.replace('.', "/"));
    local.join(path).is_file()
}

async fn set_mode(server: &Server, mode: &str) {
    let asked = pkgproxy_control::ModeRequest { mode: mode.to_owned(), from: None, cluster: false };
    server.admin().set_offline(&asked).await.expect("the mode is set");
}

#[tokio::test(flavor = "multi_thread")]
async fn maven_builds_through_pkgproxy_and_a_second_fresh_build_asks_nothing_upstream() {
    let (fake, server) = repository_and_pkgproxy().await;
    let local = tempfile::tempdir().unwrap();
    let built = mvn_build(&central(&server), local.path(), BUILD);
    assert!(built.success, "{}", built.output);
    for artifact in [("org.example.deep", "leaf", "1.0"), ("org.example", "other", "0.9")] {
        assert!(has_jar(local.path(), artifact), "{artifact:?}: {}", built.output);
    }
    let jars = fake.requests_of(PathClass::Artifact).iter().filter(|r| r.path.ends_with(".jar")).count();
    assert_eq!(jars, 5, "each jar fetched once: {:#?}", fake.requests());
    assert!(fake.count("leaf-1.0.jar.sha512") == 1, "the strongest checksum asked first: {:#?}", fake.requests());

    fake.clear_requests();
    let again = tempfile::tempdir().unwrap();
    let built = mvn_build(&central(&server), again.path(), BUILD);
    assert!(built.success, "{}", built.output);
    assert!(has_jar(again.path(), ("org.example.deep", "leaf", "1.0")));
    assert!(fake.requests().is_empty(), "nothing asked twice: {:#?}", fake.requests());

    // Offline, with another fresh local repository: all from the cache.
    set_mode(&server, "offline").await;
    let offline = tempfile::tempdir().unwrap();
    let built = mvn_build(&central(&server), offline.path(), BUILD);
    assert!(built.success, "{}", built.output);
    assert!(fake.requests().is_empty(), "nothing asked offline: {:#?}", fake.requests());

    // An artifact never seen fails at once, in pkgproxy's words.
    let unseen = mvn_build(&central(&server), offline.path(), &[("org.example", "unseen", "1.0")]);
    assert!(!unseen.success, "{}", unseen.output);
    assert!(unseen.output.contains("424 Offline (pkgproxy): not held"), "{}", unseen.output);
    assert!(unseen.took < Duration::from_secs(30), "at once: {:?}", unseen.took);
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_bytes_or_a_wrong_checksum_fail_the_build_cache_nothing_and_the_next_honest_fetch_works() {
    for fault in ["bytes", "checksum"] {
        let (fake, server) = repository_and_pkgproxy().await;
        match fault {
            "bytes" => fake.set_corrupt(true),
            _ => fake.set_wrong_sidecar(true),
        }
        let local = tempfile::tempdir().unwrap();
        let built = mvn_build(&central(&server), local.path(), &[("org.example", "other", "0.9")]);
        assert!(!built.success, "{fault}: {}", built.output);
        assert!(!has_jar(local.path(), ("org.example", "other", "0.9")), "{fault}: {}", built.output);
        let path = "/maven/central/org/example/other/0.9/other-0.9.jar";
        set_mode(&server, "offline").await;
        assert_ne!(get(server.proxy_addr(), path).await.status, 200, "{fault}: nothing cached");
        set_mode(&server, "online").await;

        fake.set_corrupt(false);
        fake.set_wrong_sidecar(false);
        fake.clear_requests();
        // The checksums of a failed try are asked again by a later one.
        server.clock().advance(Duration::from_secs(11));
        let local = tempfile::tempdir().unwrap();
        let built = mvn_build(&central(&server), local.path(), &[("org.example", "other", "0.9")]);
        assert!(built.success, "{fault}: {}", built.output);
        assert!(has_jar(local.path(), ("org.example", "other", "0.9")));
        assert_eq!(fake.count("other-0.9.jar"), 4, "{fault}: the jar and its checksums: {:#?}", fake.requests());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_concurrent_fetches_of_a_large_jar_are_one_upstream_fetch() {
    let large = MavenArtifact::jar("org.example", "large", "1.0").sized(8 * 1024 * 1024);
    let fake = FakeMaven::start(std::slice::from_ref(&large)).await;
    let server = Server::start(Some(&config(&fake))).await;
    let path = format!("/maven/central{}", large.path("jar"));
    let fetches = (0..20).map(|_| get(server.proxy_addr(), &path));
    let answers = futures_util::future::join_all(fetches).await;
    let jar = &large.file("jar").unwrap().bytes;
    for answer in &answers {
        assert_eq!((answer.status, answer.body.len()), (200, jar.len()));
        assert!(answer.body == *jar);
    }
    assert_eq!(fake.count("large-1.0.jar"), 4, "one fetch of the jar, one of each checksum: {:#?}", fake.requests());
    assert_eq!(fake.count("large-1.0.jar.sha1"), 1);

    // A range of it, from the cache.
    let url = format!("http://{}{path}", server.proxy_addr());
    let ranged =
        pkgproxy_testkit::client::proxy_request(server.proxy_addr(), "GET", &url, &[("range", "bytes=1000-1999")])
            .await;
    assert_eq!(ranged.status(), 206);
    let body = http_body_util::BodyExt::collect(ranged.into_body()).await.unwrap().to_bytes();
    assert!(body == jar.slice(1000..2000), "the range's bytes");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_artifact_asked_by_fifty_builds_is_asked_upstream_once() {
    let (fake, server) = repository_and_pkgproxy().await;
    let path = "/maven/central/org/example/absent/1.0/absent-1.0.pom";
    for _ in 0..50 {
        assert_eq!(get(server.proxy_addr(), path).await.status, 404);
    }
    let upstream_path = path.strip_prefix("/maven/central").unwrap();
    assert_eq!(asked(&fake, upstream_path), 1, "{:#?}", fake.requests());
    assert_eq!(asked(&fake, &format!("{upstream_path}.sha1")), 1, "{:#?}", fake.requests());
    // Published since, and listed by the metadata a build reads: found.
    fake.publish(MavenArtifact::jar("org.example", "absent", "1.0"));
    let metadata = get(server.proxy_addr(), "/maven/central/org/example/absent/maven-metadata.xml").await;
    assert_eq!(metadata.status, 200);
    assert_eq!(get(server.proxy_addr(), path).await.status, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn check_says_what_a_build_s_list_needs_and_warm_fetches_it_for_a_build_offline() {
    use crate::common::PKGPROXY;
    use crate::readiness::ctl;
    let fake = FakeMaven::start(&artifacts()).await;
    let daemon = pkgproxy_testkit::Daemon::start(PKGPROXY, Some(&config(&fake))).await;
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("deps.txt");
    std::fs::write(
        &list,
        "\nThe following files have been resolved:\n   org.example:middle:jar:2.1:compile\n   org.example.deep:leaf:jar:1.0:compile\n",
    )
    .unwrap();
    let other = fake.bytes("/org/example/other/0.9/other-0.9.jar").unwrap();
    let verification = dir.path().join("verification-metadata.xml");
    std::fs::write(
        &verification,
        format!(
            "<?xml version=\"1.0\"?>\n<verification-metadata><configuration><verify-metadata>true</verify-metadata></configuration>\
             <components><component group=\"org.example\" name=\"other\" version=\"0.9\">\
             <artifact name=\"other-0.9.jar\"><sha256 value=\"{}\" origin=\"Generated by Gradle\"/></artifact>\
             <artifact name=\"other-0.9.pom\"/>\
             </component></components></verification-metadata>\n",
            crate::common::sha256(&other)
        ),
    )
    .unwrap();
    for file in [&list, &verification] {
        let file = file.to_str().unwrap();
        let (ready, printed) = ctl(&daemon, &["check", "maven", file]);
        assert!(!ready, "{printed}");
        assert!(fake.requests().is_empty(), "a check asks nothing upstream: {:#?}", fake.requests());
        let (warmed, printed) = ctl(&daemon, &["warm", "maven", file]);
        assert!(warmed, "{printed}");
        let (ready, printed) = ctl(&daemon, &["check", "maven", file]);
        assert!(ready, "{printed}");
        fake.clear_requests();
    }
    assert!(ctl(&daemon, &["offline", "offline"]).0);
    for path in [
        "/maven/central/org/example/middle/2.1/middle-2.1.jar",
        "/maven/central/org/example/deep/leaf/1.0/leaf-1.0.pom",
        "/maven/central/org/example/other/0.9/other-0.9.jar.sha1",
    ] {
        assert_eq!(get(daemon.proxy_addr(), path).await.status, 200, "{path}");
    }
    let explained = crate::common::pkgproxyctl(
        &daemon,
        &["explain", "https://repo.maven.apache.org/maven2/org/example/middle/2.1/middle-2.1.jar", "--json"],
    );
    let told: pkgproxy_control::Explanation = serde_json::from_slice(&explained.stdout).unwrap();
    assert_eq!((told.action.as_str(), told.side.as_deref()), ("hit", Some("maven")), "{told:?}");
    let missing = ctl(&daemon, &["check", "maven", "--repository", "corp", list.to_str().unwrap()]);
    assert!(!missing.0, "{}", missing.1);
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_is_revalidated_after_its_ttl_served_stale_when_the_repository_fails_and_a_busy_one_is_a_424() {
    let (fake, server) = repository_and_pkgproxy().await;
    let metadata = "/maven/central/org/example/top/maven-metadata.xml";
    let first = get(server.proxy_addr(), metadata).await;
    assert_eq!(first.status, 200);
    assert!(String::from_utf8_lossy(&first.body).contains("<version>3.0</version>"));
    fake.publish(MavenArtifact::jar("org.example", "top", "3.1"));
    let held = get(server.proxy_addr(), metadata).await;
    assert!(!String::from_utf8_lossy(&held.body).contains("3.1"), "fresh for metadata_ttl");
    server.clock().advance(Duration::from_secs(301));
    let after = get(server.proxy_addr(), metadata).await;
    assert!(String::from_utf8_lossy(&after.body).contains("<version>3.1</version>"), "asked again after the ttl");
    let sha1 = get(server.proxy_addr(), &format!("{metadata}.sha1")).await;
    let digest = |body: &[u8]| pkgproxy_testkit::maven::Checksum::Sha1.hex(body);
    assert_eq!(String::from_utf8_lossy(&sha1.body), digest(&after.body), "first: {}", digest(&first.body));

    fake.force_status_on(PathClass::Metadata, 503);
    server.clock().advance(Duration::from_secs(301));
    let stale = get(server.proxy_addr(), metadata).await;
    assert_eq!(stale.status, 200, "the held copy, stale");
    assert!(stale.header("x-pkgproxy-reason").is_some(), "{:?}", stale.headers);

    fake.force_status_on(PathClass::Artifact, 429);
    let busy = get(server.proxy_addr(), "/maven/central/org/example/top/3.1/top-3.1.jar").await;
    assert_eq!(busy.status, 424, "never a 429, which Maven retries for minutes");
    assert!(busy.header("retry-after").is_some(), "{:?}", busy.headers);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_release_younger_than_min_age_fails_the_build_saying_why_then_builds_once_old_enough() {
    let fake = FakeMaven::start(&artifacts()).await;
    let config = format!("{}[policy]\nmin_age = \"1h\"\n", config(&fake));
    // The fake published its artifacts a minute apart from minute 0.
    let server = Server::start_at(Some(&config), FakeMaven::published_at(30)).await;
    let local = tempfile::tempdir().unwrap();
    let refused = mvn_build(&central(&server), local.path(), &[("org.example", "other", "0.9")]);
    assert!(!refused.success, "{}", refused.output);
    assert!(refused.output.contains("status: 403 Blocked by pkgproxy policy (min_age until"), "{}", refused.output);
    let told = refused.output.lines().find(|line| line.contains("403 Blocked")).unwrap_or_default();
    eprintln!("what Maven prints: {told}");

    server.clock().set(FakeMaven::published_at(30 + 120));
    fake.clear_requests();
    let local = tempfile::tempdir().unwrap();
    let built = mvn_build(&central(&server), local.path(), &[("org.example", "other", "0.9")]);
    assert!(built.success, "{}", built.output);
    assert_eq!(fake.count("other-0.9.pom"), 0, "the pom read for its time was kept: {:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_or_cut_repository_fails_the_build_at_once_in_pkgproxy_s_words_and_the_next_build_works() {
    for fault in ["hang", "cut"] {
        let fake = FakeMaven::start(&artifacts()).await;
        let config = format!("{}[upstream]\nfirst_byte_timeout = \"1s\"\ndeadline = \"3s\"\n", config(&fake));
        let server = Server::start(Some(&config)).await;
        match fault {
            "hang" => fake.set_stalled_on(PathClass::Artifact, true),
            _ => fake.set_cut(true),
        }
        let local = tempfile::tempdir().unwrap();
        let failed = mvn_build(&central(&server), local.path(), &[("org.example", "other", "0.9")]);
        assert!(!failed.success, "{fault}: {}", failed.output);
        assert!(failed.output.contains("status: 424 Not held (pkgproxy)"), "{fault}: {}", failed.output);
        assert!(failed.took < Duration::from_secs(60), "{fault}: not retried for minutes: {:?}", failed.took);
        fake.set_stalled_on(PathClass::Artifact, false);
        fake.set_cut(false);
        let local = tempfile::tempdir().unwrap();
        let built = mvn_build(&central(&server), local.path(), &[("org.example", "other", "0.9")]);
        assert!(built.success, "{fault}: {}", built.output);
        assert!(has_jar(local.path(), ("org.example", "other", "0.9")), "{fault}");
    }
}

/// `mvn -B validate` of a project whose build extensions come from the
/// repository `snapshots` beside Central, both mirrored to pkgproxy's.
fn mvn_build_with_snapshots(server: &Server, local: &Path, extension: (&str, &str, &str), update: bool) -> Built {
    let project = tempfile::tempdir().unwrap();
    let (group, artifact, version) = extension;
    let pom = format!(
        "<project xmlns=\"http://maven.apache.org/POM/4.0.0\"><modelVersion>4.0.0</modelVersion>\
         <groupId>test</groupId><artifactId>app</artifactId><version>1</version><packaging>pom</packaging>\
         <pluginRepositories><pluginRepository><id>snapshots</id><url>https://snapshots.example/maven</url>\
         <snapshots><enabled>true</enabled></snapshots></pluginRepository></pluginRepositories>\
         <build><extensions><extension><groupId>{group}</groupId><artifactId>{artifact}</artifactId>\
         <version>{version}</version></extension></extensions></build></project>"
    );
    std::fs::write(project.path().join("pom.xml"), pom).unwrap();
    let at = format!("http://{}/maven", server.proxy_addr());
    let settings = format!(
        "<settings><mirrors>\
         <mirror><id>pkgproxy-snapshots</id><mirrorOf>snapshots</mirrorOf><url>{at}/snapshots/</url></mirror>\
         <mirror><id>pkgproxy-central</id><mirrorOf>central</mirrorOf><url>{at}/central/</url></mirror>\
         </mirrors></settings>"
    );
    std::fs::write(project.path().join("settings.xml"), settings).unwrap();
    std::fs::write(project.path().join("global.xml"), "<settings/>").unwrap();
    let mut command = Command::new("mvn");
    command.args(["-B", "-s", "settings.xml", "-gs", "global.xml", "validate"]);
    if update {
        command.arg("-U");
    }
    let started = Instant::now();
    let output = command
        .arg(format!("-Dmaven.repo.local={}", local.display()))
        .current_dir(project.path())
        .env("HOME", project.path())
        .output()
        .expect("mvn runs");
    let output_text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Built { success: output.status.success(), output: output_text, took: started.elapsed() }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_snapshot_of_a_second_repository_resolves_through_its_metadata_and_a_new_build_is_seen_after_the_ttl() {
    let central = FakeMaven::start(&artifacts()).await;
    let first = MavenArtifact::snapshot("org.example", "snap", "1.0-SNAPSHOT", "20261206.101500", 3).depends_on(
        "org.example.deep",
        "leaf",
        "1.0",
    );
    let snapshots = FakeMaven::start(std::slice::from_ref(&first)).await;
    let config = format!(
        "{}[[maven.repository]]\nname = \"snapshots\"\nmirrors = [\"{}\"]\n",
        config(&central),
        snapshots.url()
    );
    let server = Server::start(Some(&config)).await;
    let local = tempfile::tempdir().unwrap();
    let built = mvn_build_with_snapshots(&server, local.path(), ("org.example", "snap", "1.0-SNAPSHOT"), false);
    assert!(built.success, "{}", built.output);
    let snap_jar = "/org/example/snap/1.0-SNAPSHOT/snap-1.0-20261206.101500-3.jar";
    assert_eq!(asked(&snapshots, snap_jar), 1, "{:#?}", snapshots.requests());
    assert!(central.count("leaf-1.0.jar") >= 1, "its dependency from Central: {:#?}", central.requests());

    // A fresh build within the ttl asks nothing; the next build, once the
    // version's metadata is asked again, gets the new build.
    snapshots.clear_requests();
    let again = tempfile::tempdir().unwrap();
    let built = mvn_build_with_snapshots(&server, again.path(), ("org.example", "snap", "1.0-SNAPSHOT"), false);
    assert!(built.success, "{}", built.output);
    assert!(snapshots.requests().is_empty(), "{:#?}", snapshots.requests());
    snapshots.publish(MavenArtifact::snapshot("org.example", "snap", "1.0-SNAPSHOT", "20261207.090000", 4));
    server.clock().advance(Duration::from_secs(301));
    let newer = tempfile::tempdir().unwrap();
    let built = mvn_build_with_snapshots(&server, newer.path(), ("org.example", "snap", "1.0-SNAPSHOT"), true);
    assert!(built.success, "{}", built.output);
    let newer_jar = "/org/example/snap/1.0-SNAPSHOT/snap-1.0-20261207.090000-4.jar";
    assert_eq!(asked(&snapshots, newer_jar), 1, "{:#?}", snapshots.requests());
}
