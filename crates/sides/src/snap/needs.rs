//! What a `snap download` (or a classic device's `snap install`) of a snap
//! on a channel needs from pkgproxy with the store gone: the store's answer
//! recorded for that action and device, the blob it names, and the
//! assertions `snap` fetches after it (snap-revision, snap-declaration, the
//! publisher's account, the signing account-key), each as the request
//! `snap` makes, found link by link in what the cache holds.

use serde_json::Value;

use super::actions::{self, Action, Holdings};
use super::assertion::header;
use super::device::Device;
use super::rewrite::Rewriter;
use super::Snap;
use crate::decision::ServedAt;

/// The fields `snap download` asks the store for (snapd 2.57): a recorded
/// answer with fewer cannot serve it.
pub const DOWNLOAD_FIELDS: [&str; 24] = [
    "architectures",
    "base",
    "confinement",
    "contact",
    "created-at",
    "description",
    "download",
    "epoch",
    "license",
    "name",
    "prices",
    "private",
    "publisher",
    "revision",
    "snap-id",
    "snap-yaml",
    "summary",
    "title",
    "type",
    "version",
    "website",
    "store-url",
    "media",
    "common-ids",
];

/// What newer snapd releases ask for besides: a refresh pkgproxy makes
/// itself asks for these too, so its answer serves them all.
pub const NEWER_FIELDS: [&str; 4] = ["links", "categories", "integrity", "resources"];

/// The device pkgproxy stands for: a classic machine of `architecture` on
/// the global store, as `snap` and snapd describe one.
pub fn classic_device(architecture: &str) -> Device {
    Device {
        series: "16".to_owned(),
        architecture: architecture.to_owned(),
        store: String::new(),
        classic: "true".to_owned(),
        capabilities: vec!["default-tracks".to_owned()],
    }
}

/// What a snap needs, as far as the cache says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SnapNeeds {
    /// The requests, below the side's mount, in the order `snap` makes them.
    pub paths: Vec<String>,
    /// What cannot be known yet, and why.
    pub unresolved: Vec<String>,
    /// The keys of the store's answers recorded for them (what a bundle
    /// carries besides the requests).
    pub records: Vec<String>,
}

impl Snap {
    /// Whether the store's answer to a download of `name` on `channel` by
    /// `device` is recorded, with the fields `snap download` asks for.
    pub fn holds_answer(&self, device: &Device, name: &str, channel: &str) -> bool {
        self.recorded(device, name, channel).is_some()
    }

    fn recorded(&self, device: &Device, name: &str, channel: &str) -> Option<actions::Recorded> {
        let action = Action {
            action: "download".to_owned(),
            name: Some(name.to_owned()),
            channel: Some(channel.to_owned()),
            ..Action::default()
        };
        let key = actions::action_key(device, &action, &[])?;
        let recorded = Holdings::record(self, &actions::record_key(&key))?;
        DOWNLOAD_FIELDS.iter().all(|field| recorded.fields.iter().any(|f| f == field)).then_some(recorded)
    }

    /// What `snap download name --channel channel` on `device` needs.
    pub fn offline_needs(&self, device: &Device, name: &str, channel: &str) -> SnapNeeds {
        let what = format!("{name} ({channel})");
        match self.recorded(device, name, channel) {
            Some(recorded) => self.chain(&device.scope(), device.series_or_default(), &recorded, &what),
            None => SnapNeeds {
                unresolved: vec![format!("{what}: the store's answer for it is not recorded")],
                ..SnapNeeds::default()
            },
        }
    }

    /// What replaying each recorded store answer of the global store
    /// needs (a bundle of the whole cache carries them all).
    pub fn recorded_needs(&self, record_keys: &[String]) -> SnapNeeds {
        let mut needs = SnapNeeds::default();
        for key in record_keys {
            let Some(recorded) = Holdings::record(self, key) else { continue };
            // The action key: `v1|series/arch/scope/classic/caps|...`.
            let device = recorded.key.split('|').nth(1).unwrap_or_default();
            let (series, scope) = (device.split('/').next().unwrap_or_default(), device.split('/').nth(2));
            if scope != Some("global") {
                continue;
            }
            let series = if series.is_empty() { "16" } else { series };
            let found = self.chain("global", series, &recorded, &recorded.key);
            needs.paths.extend(found.paths.into_iter().filter(|path| !needs.paths.contains(path)).collect::<Vec<_>>());
            needs.records.extend(found.records);
        }
        needs
    }

    /// What replaying `recorded` needs: the record, the blob it names and
    /// the assertion chain, as far as the cache holds it.
    fn chain(&self, scope: &str, series: &str, recorded: &actions::Recorded, what: &str) -> SnapNeeds {
        let mut needs = SnapNeeds { records: vec![actions::record_key(&recorded.key)], ..SnapNeeds::default() };
        let snap = recorded.result.get("snap").cloned().unwrap_or(Value::Null);
        let digest = snap.pointer("/download/sha3-384").and_then(Value::as_str).map(str::to_owned);
        let snap_id = snap.get("snap-id").and_then(Value::as_str).map(str::to_owned);
        let named_publisher = snap.pointer("/publisher/id").and_then(Value::as_str).map(str::to_owned);
        let served_at = ServedAt { base: String::new() };
        let config = self.config();
        let mut rewriter = Rewriter { stores: config.stores(), served_at: &served_at, media: Vec::new() };
        let rewritten = serde_json::to_vec(&snap).ok().and_then(|snap| rewriter.rewrite(&snap));
        let snap: Value = rewritten.and_then(|snap| serde_json::from_slice(&snap).ok()).unwrap_or(Value::Null);
        let (Some(digest), Some(download), Some(snap_id)) =
            (digest, snap.pointer("/download/url").and_then(Value::as_str), snap_id)
        else {
            needs.unresolved.push(format!("{what}: the store's answer names no download pkgproxy can fetch"));
            return needs;
        };
        needs.paths.push(download.to_owned());
        let Some(revision_key) = actions::revision_key(scope, &digest) else { return needs };
        let revision_name = revision_key.rsplit('/').next().unwrap_or_default().to_owned();
        needs.paths.push(format!("/v2/assertions/snap-revision/{revision_name}?max-format=0"));
        needs.paths.push(format!("/v2/assertions/snap-declaration/{series}/{snap_id}?max-format=5"));
        let declaration = self.assertion_text(scope, "snap-declaration", &[series.to_owned(), snap_id]);
        let publisher = declaration.as_deref().and_then(|text| header(text, "publisher-id")).map(str::to_owned);
        match publisher.or(named_publisher) {
            Some(publisher) => needs.paths.push(format!("/v2/assertions/account/{publisher}?max-format=0")),
            None => needs.unresolved.push(format!("{what}: its publisher is not known")),
        }
        let revision = Holdings::assertion(self, &revision_key);
        match revision.as_deref().and_then(|text| header(text, "sign-key-sha3-384")) {
            Some(key) => needs.paths.push(format!("/v2/assertions/account-key/{key}?max-format=0")),
            None => needs.unresolved.push(format!("{what}: its signing key is named by its snap-revision assertion")),
        }
        needs
    }

    /// Keeps `body`, a store answer another pkgproxy recorded under `key`
    /// (from a bundle), once it reads as one recorded under that key.
    /// Blocking.
    pub(super) fn taken_record(&self, key: &str, body: &[u8]) -> Result<(), String> {
        let recorded: actions::Recorded =
            serde_json::from_slice(body).map_err(|error| format!("not a recorded store answer: {error}"))?;
        if actions::record_key(&recorded.key) != key {
            return Err("recorded under another key than it says".to_owned());
        }
        let digest = recorded.result.pointer("/snap/download/sha3-384").and_then(Value::as_str);
        if !digest.is_some_and(super::blob::is_sha3_384) {
            return Err("it names no download by its SHA3-384".to_owned());
        }
        let json = vec![("content-type".to_string(), "application/json".to_string())];
        self.cache.put(key, body, json, pkgproxy_cache::Class::Immutable).map_err(|error| error.to_string())?;
        Ok(())
    }

    fn assertion_text(&self, scope: &str, kind: &str, primary_key: &[String]) -> Option<Vec<u8>> {
        Holdings::assertion(self, &super::assertion::assertion_key(scope, kind, primary_key))
    }
}
