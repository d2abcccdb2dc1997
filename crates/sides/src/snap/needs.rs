//! What a `snap download` (or a classic device's `snap install`) of a snap
//! on a channel needs from pkgproxy with the store gone: the store's answer
//! recorded for that action and device, the blob it names, and the
//! assertions `snap` fetches after it (snap-revision, snap-declaration, the
//! publisher's account, the signing account-key), each as the request
//! `snap` makes, found link by link in what the cache holds.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::actions::{self, Action, Holdings};
use super::assertion::header;
use super::device::Device;
use super::rewrite::Rewriter;
use super::Snap;
use crate::decision::ServedAt;
use crate::id::SideId;
use crate::needs::{self, Asked, FirstAsk, NeededItem, Needs, NeedsError, NeedsReader};
use crate::route;

/// What `check snap` takes.
#[derive(Debug, clap::Args)]
struct Arguments {
    /// NAME or NAME=CHANNEL, the channel as `snap --channel` takes it
    /// (default: stable).
    #[arg(required = true, value_name = "NAME[=CHANNEL]")]
    snaps: Vec<String>,
    /// The machine's architecture (default: dpkg's).
    #[arg(long, value_name = "ARCH")]
    arch: Option<String>,
}

/// A snap asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Wanted {
    name: String,
    /// Its channel (`stable`, `latest/edge`, `2.0/beta`).
    channel: String,
}

/// What `snap download` of some snaps on a classic device needs: what the
/// daemon follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Downloads {
    snaps: Vec<Wanted>,
    /// The device's architecture (`amd64`).
    architecture: String,
}

/// The channel `snap` asks for when given none.
const DEFAULT_CHANNEL: &str = "stable";

/// The snap side's reader of the snaps a build installs.
pub struct Reader;

impl NeedsReader for Reader {
    fn command(&self) -> clap::Command {
        let about = "Snaps: what `snap download NAME --channel CHANNEL` (or a classic machine's install) needs: \
                     the store's answer, the .snap and its assertions (snap-revision, snap-declaration, account, \
                     account-key)";
        <Arguments as clap::Args>::augment_args(clap::Command::new("snap")).about(about)
    }

    fn read(&self, matches: &clap::ArgMatches) -> Result<Asked, NeedsError> {
        let arguments: Arguments = needs::arguments(matches)?;
        needs::resolve(&Downloads {
            snaps: arguments.snaps.iter().map(|argument| wanted(argument)).collect::<Result<_, _>>()?,
            architecture: arguments.arch.unwrap_or_else(needs::machine_architecture),
        })
    }
}

/// `NAME[=CHANNEL]`, as `snap --channel` takes the channel.
fn wanted(argument: &str) -> Result<Wanted, NeedsError> {
    let (name, channel) = argument.split_once('=').unwrap_or((argument, DEFAULT_CHANNEL));
    let valid = |word: &str| !word.is_empty() && word.bytes().all(|b| b.is_ascii_graphic() && b != b'=');
    match valid(name) && valid(channel) {
        true => Ok(Wanted { name: name.to_owned(), channel: channel.to_owned() }),
        false => Err(NeedsError::new(format!("{argument:?} is not NAME or NAME=CHANNEL"))),
    }
}

/// What people call a request `snap` makes (`path`, below the mount): the
/// file a download gives, the assertion's type and key.
fn label(path: &str) -> String {
    if path.starts_with("/download/") {
        return path.rsplit('/').next().unwrap_or(path).to_owned();
    }
    let assertion = path.strip_prefix("/v2/assertions/").unwrap_or(path);
    assertion.split('?').next().unwrap_or(assertion).to_owned()
}

impl Snap {
    /// What `snap download` of the asked snaps needs on a classic device
    /// of the asked architecture: the recorded store answer for each, then
    /// its download and assertion chain, as far as the cache holds them.
    /// Blocking.
    pub(super) fn download_needs(&self, asked: serde_json::Value) -> Result<Needs, NeedsError> {
        let asked: Downloads = needs::parse(asked)?;
        let mount = route::prefix_of(SideId::Snap).unwrap_or_default();
        let device = classic_device(&asked.architecture);
        let mut found = Needs::default();
        for wanted in &asked.snaps {
            let snap = self.offline_needs(&device, &wanted.name, &wanted.channel);
            let item = |path: &String| NeededItem { url: format!("{mount}{path}"), label: label(path) };
            found.items.extend(snap.paths.iter().map(item));
            found.unknown.extend(snap.unresolved);
            found.records.extend(snap.records);
        }
        let headers = device_headers(&device);
        let text =
            |(name, value): (&http::HeaderName, &HeaderValue)| Some((name.to_string(), value.to_str().ok()?.into()));
        found.headers = headers.iter().filter_map(text).collect();
        Ok(found)
    }

    /// The store refresh `snap download` makes for each asked snap whose
    /// answer is not recorded, made before a warm resolves (the side's own
    /// path records each answer for offline replay); its refusals
    /// (`NAME: no such snap`) are told.
    pub(super) fn download_first(&self, asked: &serde_json::Value) -> Result<Option<FirstAsk>, NeedsError> {
        let asked: Downloads = needs::parse(asked.clone())?;
        let device = classic_device(&asked.architecture);
        let missing: Vec<Wanted> = asked
            .snaps
            .into_iter()
            .filter(|wanted| !self.holds_answer(&device, &wanted.name, &wanted.channel))
            .collect();
        if missing.is_empty() {
            return Ok(None);
        }
        let actions: Vec<Value> = missing
            .iter()
            .enumerate()
            .map(|(n, wanted)| {
                json!({"action": "download", "instance-key": format!("download-{}", n + 1),
                       "name": wanted.name, "channel": wanted.channel, "epoch": null})
            })
            .collect();
        let fields: Vec<&str> = DOWNLOAD_FIELDS.iter().chain(NEWER_FIELDS.iter()).copied().collect();
        let body = json!({"context": [], "actions": actions, "fields": fields}).to_string();
        let mut headers = device_headers(&device);
        let json = HeaderValue::from_static("application/json");
        headers.insert(http::header::ACCEPT, json.clone());
        headers.insert(http::header::CONTENT_TYPE, json);
        Ok(Some(FirstAsk {
            path: "/v2/snaps/refresh",
            headers,
            body: Bytes::from(body),
            refusals: Box::new(move |status, body| refused_actions(status, body, &missing)),
        }))
    }
}

/// The per-action errors of a refresh answer, by snap.
fn refused_actions(status: StatusCode, body: &[u8], asked: &[Wanted]) -> Vec<String> {
    let Ok(answer) = serde_json::from_slice::<Value>(body) else {
        return vec![format!("the store answered {status}")];
    };
    let results = answer["results"].as_array().into_iter().flatten();
    let errors = results.filter(|result| result["result"] == "error").map(|result| {
        let number = result["instance-key"].as_str().and_then(|key| key.strip_prefix("download-"));
        let wanted = number.and_then(|n| n.parse::<usize>().ok()).and_then(|n| asked.get(n.wrapping_sub(1)));
        let what = wanted.map_or_else(|| "a snap".to_owned(), |w| format!("{} ({})", w.name, w.channel));
        format!("{what}: {}", result["error"]["message"].as_str().unwrap_or("the store refused it"))
    });
    let global = answer["error-list"].as_array().into_iter().flatten();
    errors.chain(global.map(|error| error["message"].as_str().unwrap_or("the store refused").to_owned())).collect()
}

/// The headers by which a device says what it is.
fn device_headers(device: &Device) -> HeaderMap {
    let mut headers = HeaderMap::new();
    // The v2 names, and the v1 ones downloads and assertions go with.
    let pairs = [
        ("snap-device-series", device.series.as_str()),
        ("snap-device-architecture", device.architecture.as_str()),
        ("snap-classic", device.classic.as_str()),
        ("snap-device-capabilities", "default-tracks"),
        ("x-ubuntu-series", device.series.as_str()),
        ("x-ubuntu-architecture", device.architecture.as_str()),
        ("x-ubuntu-classic", device.classic.as_str()),
    ];
    for (name, value) in pairs {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    }
    headers
}

/// The fields `snap download` asks the store for (snapd 2.57): a recorded
/// answer with fewer cannot serve it.
const DOWNLOAD_FIELDS: [&str; 24] = [
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
const NEWER_FIELDS: [&str; 4] = ["links", "categories", "integrity", "resources"];

/// The device pkgproxy stands for: a classic machine of `architecture` on
/// the global store, as `snap` and snapd describe one.
fn classic_device(architecture: &str) -> Device {
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

#[cfg(test)]
mod reader_tests {
    use super::*;

    #[test]
    fn a_snap_is_named_with_its_channel_or_stable() {
        assert_eq!(wanted("hello").unwrap(), Wanted { name: "hello".into(), channel: "stable".into() });
        assert_eq!(wanted("lxd=5.21/edge").unwrap().channel, "5.21/edge");
        assert!(wanted("=edge").is_err() && wanted("a b").is_err());
        assert_eq!(label("/download/abc/7/api/v1/snaps/download/ID_3.snap"), "ID_3.snap");
        assert_eq!(label("/v2/assertions/account/dev1?max-format=0"), "account/dev1");
    }
}
