//! Recording refresh results and replaying them.

use std::collections::HashMap;

use http::{HeaderMap, HeaderValue};
use serde_json::json;

use super::*;

const DIGEST: &str = "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd";
const SNAP_ID: &str = "hellopkgproxyid0000000000000000a";

fn device(arch: &'static str) -> Device {
    let mut headers = HeaderMap::new();
    headers.insert("snap-device-series", HeaderValue::from_static("16"));
    headers.insert("snap-device-architecture", HeaderValue::from_static(arch));
    Device::of(&headers)
}

fn request(body: Value) -> RefreshRequest {
    serde_json::from_value(body).unwrap()
}

fn download_request(instance: &str) -> RefreshRequest {
    request(
        json!({"context": [], "actions": [{"action": "download", "instance-key": instance, "name": "hello", "epoch": null}],
                   "fields": ["download", "revision"]}),
    )
}

fn store_answer(instance: &str) -> Value {
    json!({"results": [{"result": "download", "instance-key": instance, "snap-id": SNAP_ID, "name": "hello",
        "snap": {"name": "hello", "snap-id": SNAP_ID, "revision": 3, "epoch": {"read": [0], "write": [0]},
                 "download": {"url": "https://api.snapcraft.io/api/v1/snaps/download/x_3.snap", "size": 4, "sha3-384": DIGEST,
                              "deltas": [{"url": "https://api.snapcraft.io/d", "size": 1, "sha3-384": DIGEST}]}}}],
        "error-list": []})
}

/// A cache in memory.
#[derive(Default)]
struct Held {
    records: HashMap<String, Recorded>,
    blobs: Vec<String>,
    assertions: HashMap<String, Vec<u8>>,
}

impl Holdings for Held {
    fn record(&self, key: &str) -> Option<Recorded> {
        self.records.get(key).cloned()
    }
    fn has_blob(&self, key: &str) -> bool {
        self.blobs.iter().any(|blob| blob == key)
    }
    fn assertion(&self, key: &str) -> Option<Vec<u8>> {
        self.assertions.get(key).cloned()
    }
}

impl Held {
    /// What a `snap download hello` through pkgproxy leaves in the cache.
    fn after_download(device: &Device) -> Held {
        let mut held = Held::default();
        for recorded in recordings(device, &download_request("download-1"), &store_answer("download-1")) {
            held.records.insert(record_key(&recorded.key), recorded);
        }
        held.blobs.push(blob_key("global", DIGEST));
        let revision =
            format!("type: snap-revision\nsnap-sha3-384: x\nsnap-id: {SNAP_ID}\nsign-key-sha3-384: STOREKEY\n\nsig");
        held.assertions.insert(revision_key("global", DIGEST).unwrap(), revision.into_bytes());
        let declaration = format!("type: snap-declaration\nrevision: 2\nsnap-id: {SNAP_ID}\npublisher-id: dev1\n\nsig");
        held.assertions.insert(
            assertion_key("global", "snap-declaration", &["16".into(), SNAP_ID.into()]),
            declaration.into_bytes(),
        );
        held.assertions.insert(assertion_key("global", "account", &["dev1".into()]), b"type: account\n\nsig".to_vec());
        held.assertions
            .insert(assertion_key("global", "account-key", &["STOREKEY".into()]), b"type: account-key\n\nsig".to_vec());
        held
    }
}

fn offline() -> Unavailable {
    Unavailable { code: "pkgproxy-offline", message: "pkgproxy is offline".into() }
}

#[test]
fn one_key_whatever_varies_from_call_to_call() {
    let device = device("amd64");
    let key = |body: Value| {
        let request = request(body);
        action_key(&device, &request.actions[0], &request.context).unwrap()
    };
    let a = key(json!({"actions": [{"action": "download", "instance-key": "download-1", "name": "hello"}]}));
    let b = key(
        json!({"actions": [{"action": "install", "instance-key": "install-7", "name": "hello", "channel": "stable", "epoch": null}]}),
    );
    assert_eq!(a, b, "install and download share a record; no channel is stable");
    let edge = key(
        json!({"actions": [{"action": "download", "instance-key": "download-1", "name": "hello", "channel": "edge"}]}),
    );
    assert_ne!(a, edge);
    let other_arch = {
        let request = download_request("download-1");
        action_key(&self::device("arm64"), &request.actions[0], &request.context).unwrap()
    };
    assert_ne!(a, other_arch);
    let refresh = |channel| {
        key(
            json!({"context": [{"snap-id": SNAP_ID, "tracking-channel": channel, "revision": 1, "refreshed-date": "x"}],
                   "actions": [{"action": "refresh", "instance-key": SNAP_ID, "snap-id": SNAP_ID}]}),
        )
    };
    assert_eq!(refresh("stable"), refresh("stable"));
    assert_ne!(refresh("stable"), refresh("beta"), "a refresh follows the tracked channel");
}

#[test]
fn a_recorded_download_is_replayed_with_the_request_s_instance_key_and_no_deltas() {
    let device = device("amd64");
    let held = Held::after_download(&device);
    let install = request(
        json!({"context": [], "actions": [{"action": "install", "instance-key": "install-1", "name": "hello", "channel": "stable"}],
                                 "fields": ["revision"]}),
    );
    let answer = replay(&device, &install, &offline(), &held, &["https://api.snapcraft.io".into()]);
    let result = &answer["results"][0];
    assert_eq!((result["result"].as_str(), result["instance-key"].as_str()), (Some("install"), Some("install-1")));
    assert_eq!(result["snap"]["revision"], 3);
    assert_eq!(result["snap"]["download"]["deltas"], json!([]));
    assert_eq!(result["snap"]["download"]["sha3-384"], DIGEST);
}

#[test]
fn without_the_blob_or_any_link_of_the_chain_the_action_gets_an_offline_error() {
    let device = device("amd64");
    let full = Held::after_download(&device);
    let mut cases: Vec<(Held, &str)> = Vec::new();
    let mut no_blob = Held::after_download(&device);
    no_blob.blobs.clear();
    cases.push((no_blob, "the download"));
    for (key, missing) in
        full.assertions.keys().map(|k| (k.clone(), k.split('/').nth(3).unwrap().to_string())).collect::<Vec<_>>()
    {
        let mut held = Held::after_download(&device);
        held.assertions.remove(&key);
        let leaked: &'static str = Box::leak(missing.into_boxed_str());
        cases.push((held, leaked));
    }
    for (held, missing) in cases {
        let answer = replay(&device, &download_request("download-1"), &offline(), &held, &[]);
        let result = &answer["results"][0];
        assert_eq!(result["result"], "error", "{missing}");
        assert_eq!(result["error"]["code"], "pkgproxy-offline");
        let message = result["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("pkgproxy is offline: ") && message.contains(missing), "{message} / {missing}");
    }
}

#[test]
fn a_snap_never_seen_another_device_s_record_or_more_fields_are_not_replayed() {
    let amd64 = device("amd64");
    let held = Held::after_download(&amd64);
    let never = request(json!({"actions": [{"action": "download", "instance-key": "download-1", "name": "other"}]}));
    let answer = replay(&amd64, &never, &offline(), &held, &[]);
    assert!(answer["results"][0]["error"]["message"].as_str().unwrap().contains("never asked for"));
    let answer = replay(&device("arm64"), &download_request("download-1"), &offline(), &held, &[]);
    assert_eq!(answer["results"][0]["result"], "error", "an arm64 device never gets the amd64 record");
    let more = request(
        json!({"actions": [{"action": "download", "instance-key": "download-1", "name": "hello"}], "fields": ["download", "media"]}),
    );
    assert_eq!(replay(&amd64, &more, &offline(), &held, &[])["results"][0]["result"], "error");
}

#[test]
fn a_refresh_is_replayed_only_when_the_epoch_fits() {
    let device = device("amd64");
    let mut held = Held::after_download(&device);
    let refresh = |epoch: Value| {
        request(json!({"context": [{"snap-id": SNAP_ID, "tracking-channel": "stable", "revision": 1, "epoch": epoch}],
                       "actions": [{"action": "refresh", "instance-key": SNAP_ID, "snap-id": SNAP_ID}], "fields": ["revision"]}))
    };
    let online = refresh(json!({"read": [0], "write": [0]}));
    let mut answer = store_answer(SNAP_ID);
    answer["results"][0]["result"] = json!("refresh");
    for recorded in recordings(&device, &online, &answer) {
        held.records.insert(record_key(&recorded.key), recorded);
    }
    assert_eq!(replay(&device, &online, &offline(), &held, &[])["results"][0]["result"], "refresh");
    let newer_data = refresh(json!({"read": [1], "write": [1]}));
    let result = &replay(&device, &newer_data, &offline(), &held, &[])["results"][0];
    assert!(result["error"]["message"].as_str().unwrap().contains("epoch"), "{result}");
}

#[test]
fn a_private_snap_s_result_is_not_recorded() {
    let device = device("amd64");
    let mut answer = store_answer("download-1");
    answer["results"][0]["snap"]["private"] = json!(true);
    assert!(recordings(&device, &download_request("download-1"), &answer).is_empty());
}

#[test]
fn error_results_are_not_recorded() {
    let device = device("amd64");
    let answer = json!({"results": [{"result": "error", "instance-key": "download-1", "name": "hello",
                                     "error": {"code": "revision-not-found", "message": "no"}}]});
    assert!(recordings(&device, &download_request("download-1"), &answer).is_empty());
}

#[test]
fn fetch_assertions_offline_says_nothing_newer_for_what_the_device_holds() {
    let device = device("amd64");
    let held = Held::after_download(&device);
    let wanted = |assertions: Value| {
        request(
            json!({"actions": [{"action": "fetch-assertions", "key": "g1", "instance-key": "g1", "assertions": assertions}]}),
        )
    };
    let stores = ["https://api.snapcraft.io".to_string()];
    let answer = |assertions| replay(&device, &wanted(assertions), &offline(), &held, &stores)["results"][0].clone();
    let same = answer(json!([{"type": "snap-declaration", "primary-key": ["16", SNAP_ID], "if-newer-than": 2}]));
    assert_eq!((same["assertion-stream-urls"].clone(), same["error-list"].clone()), (json!([]), json!([])));
    let newer = answer(json!([{"type": "snap-declaration", "primary-key": ["16", SNAP_ID], "if-newer-than": 1}]));
    assert_eq!(
        newer["assertion-stream-urls"],
        json!([format!("https://api.snapcraft.io/v2/assertions/snap-declaration/16/{SNAP_ID}")])
    );
    let unheld = answer(
        json!([{"type": "store", "primary-key": ["acme"]}, {"type": "snap-declaration", "primary-key": ["16", "nope"], "if-newer-than": 0}]),
    );
    assert_eq!(unheld["assertion-stream-urls"], json!([]));
    assert_eq!(unheld["error-list"].as_array().unwrap().len(), 1, "{unheld}");
    assert_eq!(unheld["error-list"][0]["code"], "pkgproxy-offline");
    assert_eq!(unheld["error-list"][0]["primary-key"], json!(["acme"]));
    assert_eq!(unheld["key"], "g1");
}
