//! Which requests the tap copies, with a seeded sampler. The copies' wire
//! format, their tasks and the counters against real targets are tested
//! end to end (`crates/cli/tests/mirror.rs`).

use http::{HeaderMap, HeaderValue, Method};
use pkgproxy_upstream::{Upstream, UpstreamConfig};

use pkgproxy_control::ShadowInfo;
use pkgproxy_metrics::ShadowCounter;

use super::*;
use crate::config::{ConfigFile, Step};

fn shadows(extra: &str, seed: u64) -> Shadows {
    let file = ConfigFile::parse(&format!("[mirror.m]\ntarget = \"http://127.0.0.1:9\"\n{extra}")).unwrap();
    let mut config = ShadowConfig::new("m", &file.mirror["m"]).unwrap();
    config.seed = Some(seed);
    let upstream = Upstream::new(UpstreamConfig::default());
    Shadows::new(&[config], &upstream.shadow_client).unwrap()
}

fn original<'a>(method: &'a Method, headers: &'a HeaderMap) -> Original<'a> {
    Original {
        step: Step::Request,
        side: pkgproxy_sides::SideId::Apt,
        method,
        uri: "http://deb.debian.org/debian/dists/stable/InRelease?x=1",
        headers,
        client: None,
        offline: false,
    }
}

fn counters(shadows: &Shadows) -> ShadowInfo {
    shadows.report().remove(0)
}

#[test]
fn ten_percent_of_ten_thousand_requests_are_copied() {
    for seed in [1, 2, 3] {
        let shadows = shadows("percentage = 10", seed);
        let headers = HeaderMap::new();
        let copied = (0..10_000).filter(|_| !shadows.tap(&original(&Method::GET, &headers)).is_empty()).count();
        assert!((905..=1095).contains(&copied), "seed {seed}: {copied} copied");
    }
}

#[test]
fn methods_steps_sides_and_the_marker_filter() {
    let shadows = shadows("", 1);
    let headers = HeaderMap::new();
    assert!(!shadows.tap(&original(&Method::GET, &headers)).is_empty());
    assert!(!shadows.tap(&original(&Method::HEAD, &headers)).is_empty());
    assert!(shadows.tap(&original(&Method::POST, &headers)).is_empty(), "POST is not copied by default");
    assert!(shadows.tap(&original(&Method::PUT, &headers)).is_empty());
    let upstream_step = Original { step: Step::Upstream, ..original(&Method::GET, &headers) };
    assert!(shadows.tap(&upstream_step).is_empty(), "a request-step mirror does not copy upstream requests");
    let mut marked = HeaderMap::new();
    marked.insert("x-pkgproxy-mirror", HeaderValue::from_static("1"));
    assert!(shadows.tap(&original(&Method::GET, &marked)).is_empty(), "a copy is never copied again");

    let go_only = self::shadows("sides = [\"go\"]", 1);
    assert!(go_only.tap(&original(&Method::GET, &headers)).is_empty());
}

#[test]
fn offline_mode_and_bodies_over_the_limit_are_counted_as_skipped() {
    let shadows = shadows("methods = [\"GET\", \"POST\"]\nmax_body_size = \"1kb\"", 1);
    let no_headers = HeaderMap::new();
    let offline = Original { offline: true, ..original(&Method::GET, &no_headers) };
    assert!(shadows.tap(&offline).is_empty());
    assert_eq!(counters(&shadows).get(ShadowCounter::SkippedOffline), 1);

    let mut large = HeaderMap::new();
    large.insert(http::header::CONTENT_LENGTH, HeaderValue::from_static("1001"));
    assert!(shadows.tap(&original(&Method::POST, &large)).is_empty());
    assert_eq!(counters(&shadows).get(ShadowCounter::SkippedSize), 1);
    let mut small = HeaderMap::new();
    small.insert(http::header::CONTENT_LENGTH, HeaderValue::from_static("1000"));
    assert!(!shadows.tap(&original(&Method::POST, &small)).is_empty());

    let without_bodies = self::shadows("methods = [\"POST\"]", 1);
    assert!(without_bodies.tap(&original(&Method::POST, &small)).is_empty(), "max_body_size 0: no bodies");
    assert_eq!(counters(&without_bodies).get(ShadowCounter::SkippedSize), 1);
}

#[tokio::test]
async fn a_body_that_turns_out_larger_or_fails_is_not_copied() {
    use http_body_util::{BodyExt, StreamBody};
    let shadows = shadows("methods = [\"POST\"]\nmax_body_size = 10\ntimeout = \"50ms\"", 1);
    let mut chunked = HeaderMap::new();
    chunked.insert(http::header::TRANSFER_ENCODING, HeaderValue::from_static("chunked"));

    let chunks: Vec<Result<http_body::Frame<bytes::Bytes>, std::io::Error>> =
        vec![Ok(http_body::Frame::data("123456".into())), Ok(http_body::Frame::data("789012".into()))];
    let tee = shadows.tap(&original(&Method::POST, &chunked)).tee(StreamBody::new(futures_util::stream::iter(chunks)));
    tee.collect().await.unwrap();
    assert_eq!(counters(&shadows).get(ShadowCounter::SkippedSize), 1, "12 bytes turned out over the 10-byte limit");

    let broken: Vec<Result<http_body::Frame<bytes::Bytes>, std::io::Error>> =
        vec![Ok(http_body::Frame::data("1234".into())), Err(std::io::Error::other("client went away"))];
    let tee = shadows.tap(&original(&Method::POST, &chunked)).tee(StreamBody::new(futures_util::stream::iter(broken)));
    assert!(tee.collect().await.is_err());
    let report = counters(&shadows);
    assert_eq!(
        (report.get(ShadowCounter::Sent), report.get(ShadowCounter::SkippedSize)),
        (0, 1),
        "a failed upload is not copied: {report:?}"
    );
}
