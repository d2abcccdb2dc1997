use super::*;
use crate::decision::expect::{cached, refused};
use crate::decision::CacheView;
use crate::role::{Named, Reporting};
use crate::route::Mount;
use http::HeaderMap;
use sha1::Digest;

fn side(options: &str) -> (Maven, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(pkgproxy_cache::SystemClock)).unwrap();
    let options: Options = toml::from_str(options).unwrap();
    (Maven::new(Config::new(&options).unwrap(), cache), dir)
}

fn decide(maven: &Maven, path: &str) -> Decision {
    let headers = HeaderMap::new();
    let request = Request {
        method: &Method::GET,
        headers: &headers,
        mount: Mount::Prefix("/maven"),
        path,
        query: None,
        target: None,
        host: "cache.lan:3142",
        secure: false,
    };
    maven.classify(&request)
}

const JAR: &str = "/central/commons-io/commons-io/2.11.0/commons-io-2.11.0.jar";

#[test]
fn a_release_is_kept_for_good_and_metadata_revalidated() {
    let (maven, _dir) = side("");
    let jar = cached(decide(&maven, JAR));
    assert_eq!(
        (jar.key.as_str(), jar.class),
        ("maven/central/commons-io/commons-io/2.11.0/commons-io-2.11.0.jar", Class::Immutable)
    );
    assert_eq!(jar.origin.instances, ["https://repo1.maven.org/maven2"]);
    assert_eq!(jar.origin.path, "/commons-io/commons-io/2.11.0/commons-io-2.11.0.jar");
    let metadata = cached(decide(&maven, "/central/commons-io/commons-io/maven-metadata.xml"));
    assert_eq!((metadata.class, metadata.wanted.fresh_for), (Class::Revalidated, config::DEFAULT_METADATA_TTL));
    let snapshot = cached(decide(&maven, "/central/org/x/lib/1.0-SNAPSHOT/lib-1.0-SNAPSHOT.jar"));
    assert_eq!(snapshot.class, Class::Revalidated, "a -SNAPSHOT name changes");
    let build = cached(decide(&maven, "/central/org/x/lib/1.0-SNAPSHOT/lib-1.0-20261206.101500-3.jar"));
    assert_eq!(build.class, Class::Immutable, "a timestamped build does not");
}

#[test]
fn what_is_no_repository_s_file_is_refused_saying_why() {
    let (maven, _dir) = side("");
    for (path, said) in [
        ("/nowhere/a/b/1/b-1.jar", "no repository \"nowhere\" is configured"),
        ("/central/org/apache/", "not its folders' listings"),
        ("/central/a/../b/1/b-1.jar", ""),
        ("/central/a b/c", "not a path of a Maven repository"),
    ] {
        let refusal = refused(decide(&maven, path));
        assert!(refusal.reason.contains(said), "{path}: {}", refusal.reason);
    }
    let catalog = cached(decide(&maven, "/central/archetype-catalog.xml"));
    assert_eq!(catalog.class, Class::Revalidated);
}

#[test]
fn a_file_is_checked_against_the_strongest_checksum_had() {
    let (maven, _dir) = side("");
    let jar = cached(decide(&maven, JAR));
    let asked: Vec<String> = maven.prerequisites(&jar).into_iter().map(|p| p.key).collect();
    assert_eq!(asked, [".sha512", ".sha256", ".sha1"].map(|ending| format!("{}{ending}", jar.key)));
    assert!(maven.prerequisites_independent());
    let sha1 = hex::encode(sha1::Sha1::digest(b"jar"));
    let sha256 = hex::encode(sha2::Sha256::digest(b"jar"));
    let had = [Bytes::new(), Bytes::from(format!("{sha256}  commons-io-2.11.0.jar\n")), Bytes::from(sha1)];
    let verifier = maven.verifier(&jar, &had).unwrap();
    assert_eq!(verifier.expected().sha256.as_deref(), Some(sha256.as_str()), "the SHA-256 over the SHA-1");
    let none = maven.verifier(&jar, &[Bytes::new(), Bytes::new(), Bytes::from_static(b"<html>")]).unwrap();
    assert!(format!("{none:?}").contains("Unproven"), "{none:?}");
    let (lenient, _dir) = side("require_checksums = false");
    assert!(lenient.verifier(&cached(decide(&lenient, JAR)), &[]).is_none());
}

#[test]
fn a_version_the_held_metadata_does_not_list_asks_it_again_once_in_a_while() {
    let (maven, _dir) = side("");
    let metadata_key = "maven/central/commons-io/commons-io/maven-metadata.xml";
    let held = "<metadata><versioning><versions><version>2.10.0</version></versions><lastUpdated>20260101000000</lastUpdated></versioning></metadata>";
    maven.cache.put(metadata_key, held.as_bytes(), vec![], Class::Revalidated).unwrap();
    let jar = cached(decide(&maven, JAR));
    let asked = maven.prerequisites(&jar);
    assert_eq!(asked.last().map(|p| (p.key.as_str(), p.wanted.fresh_for)), Some((metadata_key, Duration::ZERO)));
    assert_eq!(maven.prerequisites(&jar).len(), 3, "not again at once");
}

#[test]
fn a_metadata_checksum_is_computed_from_the_copy_held() {
    let (maven, _dir) = side("");
    let path = "/central/commons-io/commons-io/maven-metadata.xml";
    let body = b"<metadata><versioning><lastUpdated>20260101000000</lastUpdated></versioning></metadata>";
    maven.cache.put(&format!("maven{path}"), body, vec![], Class::Revalidated).unwrap();
    let Decision::Answer(answer) = decide(&maven, &format!("{path}.sha1")) else { panic!("computed") };
    assert_eq!(answer.body, hex::encode(sha1::Sha1::digest(body)));
    assert!(matches!(decide(&maven, "/central/x/y/maven-metadata.xml.sha1"), Decision::Cache(_)), "not held: asked");
}

struct Held<'a>(&'a Cache);

impl CacheView for Held<'_> {
    fn open(&self, request: &CachedRequest) -> Option<Arc<std::fs::File>> {
        let entry = self.0.lookup(&request.key)?;
        self.0.open_body(&entry).ok()
    }
}

#[test]
fn a_file_s_checksum_is_computed_from_the_held_file_when_the_repository_cannot_give_it() {
    let (maven, _dir) = side("");
    maven.cache.put(&format!("maven{JAR}"), b"jar bytes", vec![], Class::Immutable).unwrap();
    let md5 = cached(decide(&maven, &format!("{JAR}.md5")));
    assert_eq!(md5.class, Class::Immutable);
    let answer = md5.reply.fallback.as_ref().unwrap().answer(&Held(&maven.cache)).unwrap();
    assert_eq!(answer.body, hex::encode(<md5::Md5 as md5::Digest>::digest(b"jar bytes")));
    assert!(cached(decide(&maven, &format!("{JAR}.asc"))).reply.fallback.is_none());
}

#[test]
fn keys_name_artifacts_for_the_page_and_requests_for_bundles() {
    let (maven, _dir) = side("");
    let key = format!("maven{JAR}");
    assert_eq!(
        maven.names(&format!("{key}.sha1")),
        Named::File { package: "commons-io:commons-io".into(), version: "2.11.0".into() }
    );
    assert_eq!(
        maven.names("maven/central/commons-io/commons-io/maven-metadata.xml"),
        Named::Metadata { package: "commons-io:commons-io".into() }
    );
    assert_eq!(maven.client_url(&key), Some((1, format!("/maven{JAR}"))));
    assert_eq!(maven.client_url(&format!("{key}.sha1")).map(|(rank, _)| rank), Some(0));
}
