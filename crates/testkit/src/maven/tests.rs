//! The fake repository fetched over plain HTTP, as a resolver fetches it.

use std::time::Duration;

use super::*;
use crate::client::get;

fn host(fake: &FakeMaven) -> String {
    fake.url().trim_start_matches("http://").to_owned()
}

fn two_versions() -> Vec<MavenArtifact> {
    vec![
        MavenArtifact::jar("org.example", "lib", "1.0"),
        MavenArtifact::jar("org.example", "lib", "1.1").depends_on("org.example", "base", "2.0"),
        MavenArtifact::jar("org.example", "base", "2.0"),
    ]
}

#[tokio::test]
async fn files_are_where_the_maven_2_layout_puts_them_and_the_rest_is_404() {
    let fake = FakeMaven::start(&two_versions()).await;
    let addr = host(&fake);
    let pom = get(&addr, "/org/example/lib/1.1/lib-1.1.pom").await;
    assert_eq!(pom.status, 200);
    assert!(String::from_utf8_lossy(&pom.body).contains("<artifactId>base</artifactId>"));
    let jar = get(&addr, "/org/example/lib/1.0/lib-1.0.jar").await;
    assert_eq!(jar.status, 200);
    assert!(jar.body.starts_with(b"PK"), "a jar is a zip");
    assert!(jar.header("last-modified").is_some());
    for missing in ["/org/example/lib/1.2/lib-1.2.jar", "/org/example/lib/1.0/lib-1.0-sources.jar", "/"] {
        assert_eq!(get(&addr, missing).await.status, 404, "{missing}");
    }
    assert_eq!(fake.count("/org/example/lib/"), 4);
}

#[tokio::test]
async fn sidecars_hash_what_they_name_and_only_the_published_ones_exist() {
    let fake = FakeMaven::start(&two_versions()).await;
    let addr = host(&fake);
    let path = "/org/example/lib/1.0/lib-1.0.jar";
    let jar = get(&addr, path).await.body;
    for checksum in Checksum::ALL {
        let sidecar = get(&addr, &format!("{path}.{}", checksum.extension())).await;
        assert_eq!(sidecar.status, 200);
        assert_eq!(String::from_utf8_lossy(&sidecar.body), checksum.hex(&jar), "{}", checksum.extension());
    }
    let metadata = get(&addr, "/org/example/lib/maven-metadata.xml").await.body;
    let sidecar = get(&addr, "/org/example/lib/maven-metadata.xml.sha1").await.body;
    assert_eq!(String::from_utf8_lossy(&sidecar), Checksum::Sha1.hex(&metadata));
    fake.set_sidecars(&[Checksum::Sha1]);
    assert_eq!(get(&addr, &format!("{path}.sha1")).await.status, 200);
    assert_eq!(get(&addr, &format!("{path}.sha512")).await.status, 404);
}

#[tokio::test]
async fn metadata_lists_versions_and_moves_on_when_one_is_published() {
    let fake = FakeMaven::start(&two_versions()).await;
    let addr = host(&fake);
    let before = String::from_utf8(get(&addr, "/org/example/lib/maven-metadata.xml").await.body.to_vec()).unwrap();
    assert!(before.contains("<latest>1.1</latest>") && before.contains("<release>1.1</release>"), "{before}");
    assert!(before.contains("<version>1.0</version>") && before.contains("<version>1.1</version>"));
    fake.publish(MavenArtifact::jar("org.example", "lib", "1.2"));
    let after = String::from_utf8(get(&addr, "/org/example/lib/maven-metadata.xml").await.body.to_vec()).unwrap();
    assert!(after.contains("<release>1.2</release>") && after.contains("<version>1.2</version>"), "{after}");
    let updated = |xml: &str| xml.split("<lastUpdated>").nth(1).unwrap()[..14].to_owned();
    assert!(updated(&after) > updated(&before), "lastUpdated moves on");
    assert_eq!(get(&addr, "/org/example/lib/1.0/maven-metadata.xml").await.status, 404, "a release has none");
}

#[tokio::test]
async fn a_snapshot_s_metadata_names_its_timestamped_files() {
    let snapshot = MavenArtifact::snapshot("org.example", "lib", "1.0-SNAPSHOT", "20261206.101500", 3);
    let fake = FakeMaven::start(&[MavenArtifact::jar("org.example", "lib", "0.9"), snapshot]).await;
    let addr = host(&fake);
    let xml = get(&addr, "/org/example/lib/1.0-SNAPSHOT/maven-metadata.xml").await;
    let xml = String::from_utf8(xml.body.to_vec()).unwrap();
    assert!(xml.contains("<timestamp>20261206.101500</timestamp>") && xml.contains("<buildNumber>3</buildNumber>"));
    assert!(xml.contains("<value>1.0-20261206.101500-3</value>") && xml.contains("<extension>pom</extension>"));
    let jar = get(&addr, "/org/example/lib/1.0-SNAPSHOT/lib-1.0-20261206.101500-3.jar").await;
    assert_eq!(jar.status, 200);
    assert_eq!(get(&addr, "/org/example/lib/1.0-SNAPSHOT/lib-1.0-SNAPSHOT.jar").await.status, 404);
    let top = String::from_utf8(get(&addr, "/org/example/lib/maven-metadata.xml").await.body.to_vec()).unwrap();
    assert!(top.contains("<latest>1.0-SNAPSHOT</latest>") && top.contains("<release>0.9</release>"), "{top}");
}

#[tokio::test]
async fn a_forced_status_answers_its_class_of_path_only_with_retry_after_on_429_and_503() {
    let fake = FakeMaven::start(&two_versions()).await;
    let addr = host(&fake);
    let jar = "/org/example/lib/1.0/lib-1.0.jar";
    for status in [403, 429, 503] {
        fake.force_status_on(PathClass::Artifact, status);
        let answer = get(&addr, jar).await;
        assert_eq!(answer.status, status);
        assert_eq!(answer.header("retry-after").is_some(), status != 403);
        assert_eq!(get(&addr, &format!("{jar}.sha1")).await.status, 200, "sidecars are another class");
    }
    fake.force_status_on(PathClass::Artifact, 0);
    fake.force_status_on(PathClass::Metadata, 500);
    assert_eq!(get(&addr, "/org/example/lib/maven-metadata.xml").await.status, 500);
    assert_eq!(get(&addr, jar).await.status, 200);
    fake.force_status(0);
    fake.force_status_on(PathClass::Sidecar, 502);
    assert_eq!(get(&addr, &format!("{jar}.sha256")).await.status, 502);
}

#[tokio::test]
async fn a_hang_takes_the_request_and_never_answers() {
    let fake = FakeMaven::start(&two_versions()).await;
    let addr = host(&fake);
    fake.set_stalled_on(PathClass::Artifact, true);
    let hung = tokio::time::timeout(Duration::from_millis(300), get(&addr, "/org/example/lib/1.0/lib-1.0.jar")).await;
    assert!(hung.is_err(), "no answer");
    assert_eq!(get(&addr, "/org/example/lib/maven-metadata.xml").await.status, 200);
    fake.set_stalled(false);
    assert_eq!(get(&addr, "/org/example/lib/1.0/lib-1.0.jar").await.status, 200);
}

#[tokio::test]
async fn wrong_bytes_keep_honest_sidecars_and_a_wrong_sidecar_keeps_honest_bytes() {
    let fake = FakeMaven::start(&two_versions()).await;
    let addr = host(&fake);
    let path = "/org/example/lib/1.0/lib-1.0.jar";
    let honest = fake.bytes(path).unwrap();
    fake.set_corrupt(true);
    let corrupt = get(&addr, path).await.body;
    assert_eq!(corrupt.len(), honest.len());
    assert_ne!(corrupt, honest);
    let sha1 = get(&addr, &format!("{path}.sha1")).await.body;
    assert_eq!(String::from_utf8_lossy(&sha1), Checksum::Sha1.hex(&honest));
    fake.set_corrupt(false);
    fake.set_wrong_sidecar(true);
    assert_eq!(get(&addr, path).await.body, honest);
    let sha256 = get(&addr, &format!("{path}.sha256")).await.body;
    assert_ne!(String::from_utf8_lossy(&sha256), Checksum::Sha256.hex(&honest));
    assert_eq!(sha256.len(), 64, "still a digest's length");
}

#[tokio::test]
async fn a_cut_body_is_announced_whole_and_half_sent() {
    let artifact = MavenArtifact::jar("org.example", "big", "1.0").sized(64 * 1024);
    let fake = FakeMaven::start(&[artifact]).await;
    let addr = host(&fake);
    let path = "/org/example/big/1.0/big-1.0.jar";
    let whole = fake.bytes(path).unwrap();
    fake.set_cut(true);
    let cut = get(&addr, path).await;
    assert_eq!(cut.header("content-length"), Some(whole.len().to_string().as_str()));
    assert!(!cut.complete);
    assert!(cut.body.len() < whole.len());
}

#[tokio::test]
async fn the_request_log_keeps_paths_and_headers_until_cleared() {
    let fake = FakeMaven::start(&two_versions()).await;
    let addr = host(&fake);
    get(&addr, "/org/example/lib/1.0/lib-1.0.pom").await;
    get(&addr, "/org/example/lib/1.0/lib-1.0.pom.sha1").await;
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].header("host"), Some(addr.as_str()));
    assert_eq!(fake.requests_of(PathClass::Sidecar).len(), 1);
    assert_eq!(fake.count("lib-1.0.pom"), 2);
    fake.clear_requests();
    assert!(fake.requests().is_empty());
}

#[test]
fn artifacts_load_from_a_maven_2_layout_with_their_real_bytes_and_the_missing_are_named() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("org/example/real/1.0");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("real-1.0.pom"), "<project/>").unwrap();
    std::fs::write(dir.join("real-1.0.jar"), "jar bytes").unwrap();
    let loaded = load_maven_repo(root.path(), &[("org.example", "real", "1.0"), ("org.example", "gone", "1.0")]);
    assert_eq!(loaded.loaded, ["org.example:real:1.0"]);
    assert_eq!(loaded.missing, ["org.example:gone:1.0"]);
    let artifact = &loaded.artifacts[0];
    assert_eq!(&artifact.file("jar").unwrap().bytes[..], b"jar bytes");
    assert_eq!(artifact.path("pom"), "/org/example/real/1.0/real-1.0.pom");
}

#[tokio::test]
async fn debian_s_artifacts_are_served_with_their_real_bytes_when_installed() {
    let wanted = [("commons-io", "commons-io", "2.11.0"), ("commons-cli", "commons-cli", "1.5.0")];
    let loaded = load_maven_repo(std::path::Path::new(DEBIAN_MAVEN_REPO), &wanted);
    assert_eq!(loaded.loaded.len() + loaded.missing.len(), wanted.len());
    let fake = FakeMaven::start(&loaded.artifacts).await;
    for artifact in &loaded.artifacts {
        let jar = get(&host(&fake), &artifact.path("jar")).await;
        assert_eq!(jar.status, 200, "{}", artifact.coordinates());
        assert_eq!(jar.body, artifact.file("jar").unwrap().bytes);
    }
}
