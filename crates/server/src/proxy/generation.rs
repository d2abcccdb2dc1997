//! Serving a request from a generation: a root file and the files it names
//! (a simplestreams index and its products files), kept as one unit.
//!
//! - Within the root's window (or offline, always) the last generation is
//!   served, and nothing is asked.
//! - After it, the root and every file it names are asked again (with the
//!   validators of what is held, so an unchanged file costs a `304`), read
//!   whole, checked by the side as one ([`Generations::adopt`]), and stored in one
//!   commit. One refresh per root, however many clients ask at once.
//! - A refresh that fails in any part changes nothing: the last generation
//!   is served; with none, the client is told why.
//!
//! A request for a file the generation may name but the side did not know
//! (asked for before pkgproxy read the root) is decided again once the
//! generation is current, once.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{HeaderValue, USER_AGENT};
use http::{HeaderMap, StatusCode};
use http_body_util::{BodyExt, Limited};
use pkgproxy_cache::fetch::{kept_headers, validators};
use pkgproxy_cache::{Entry, Record};
use pkgproxy_metrics::SideCounter;
use pkgproxy_sides::role::Generations;
use pkgproxy_sides::{CachedRequest, Decision, GenerationRequest, Member, Refusal, Request, Side};

use super::cached;
use super::fetching;
use super::finish::Finish;
use super::lookup::{self, Held, Lookup, Moment};
use super::outcome::Served;
use super::outcome::{Failed, Outcome};
use super::reason::Reason;
use crate::context::{Exchange, Supply};
use crate::kept::Refreshed;
use crate::state::State;

/// The largest file of a generation read (the largest products files are
/// some tens of MB).
const FILE_LIMIT: usize = 256 * 1024 * 1024;

/// The most a generation's files may weigh together: they are held
/// together while the side checks them (a side bounds how many files an
/// index names, and reads each as a stream).
const GENERATION_LIMIT: usize = 512 * 1024 * 1024;

/// Serves `generation`, decided for `routed` by `side`.
pub async fn serve(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    side: &dyn Side,
    generation: GenerationRequest,
    routed: &Request<'_>,
) -> Outcome {
    let why = match current(state, exchange, &generation.root).await {
        Ok(why) => why,
        Err(failed) => return failed.into(),
    };
    match generation.serve {
        Member::Key(key) => Finish::default().because(why).noted(member(state, exchange, &generation.root, &key)),
        Member::DecidedAgain => match side.classify(routed) {
            Decision::Cache(request) => cached::serve(state, exchange, side, *request).await,
            Decision::Refuse(refusal) => Failed::Refused(refusal).into(),
            _ => Failed::Refused(Refusal::not_found("the remote's index does not name it")).into(),
        },
    }
}

/// The entry `key` of the current generation of `root`.
fn member(state: &Arc<State>, exchange: &Exchange<'_>, root: &CachedRequest, key: &str) -> Outcome {
    match state.cache.lookup(key) {
        Some(entry) => {
            let request = CachedRequest { key: key.to_string(), ..root.clone() };
            cached::from_cache(state, exchange, &request, &entry, Served::Hit)
        }
        None => Failed::Refused(Refusal::not_found("the current index does not name it")).into(),
    }
}

/// Brings the generation of `root` up to date if its window has passed:
/// `Ok` when there is one to serve (the last one, if the refresh failed),
/// with why it is not the fresh one that was held, if it is not.
pub(super) async fn current(
    state: &Arc<State>,
    exchange: &Exchange<'_>,
    root: &CachedRequest,
) -> Result<Option<Reason>, Failed> {
    let (published, why) = match lookup::look(&Held(state), root, &Moment::of(state, exchange)) {
        Lookup::Fresh(_) | Lookup::Remembered(_) | Lookup::Adoptable { .. } => return Ok(None),
        Lookup::Stale { entry, why } => (Some(entry), why),
        Lookup::Missing(why) => (None, why),
    };
    let agent = exchange.headers.get(USER_AGENT).cloned();
    let (shared, request) = (Arc::clone(state), root.clone());
    let refreshed = state
        .kept
        .generations
        .run(&root.key, move || async move { refresh(&shared, &request, agent, None).await })
        .await;
    match (refreshed, published) {
        (Ok(()), _) => Ok(Some(why)),
        (Err(failed), Some(_)) => {
            tracing::info!(key = root.key, reason = ?failed, "refresh failed; serving the last generation");
            state.stats.of(root.side, exchange.requester()).increment(SideCounter::StaleServed);
            Ok(Some(Reason::from(&failed)))
        }
        (Err(failed), None) => Err(failed),
    }
}

/// Takes in a generation of `root` whose files `supply` holds (a bundle
/// being imported), with the checks of a refresh.
pub(super) async fn take_in(state: &Arc<State>, root: &CachedRequest, supply: &dyn Supply) -> Result<(), Failed> {
    refresh(state, root, None, Some(supply)).await
}

/// Fetches `root` and every file it names again (from `supply` when it
/// holds them), has the side check them, and stores them in one commit.
async fn refresh(
    state: &Arc<State>,
    root: &CachedRequest,
    agent: Option<HeaderValue>,
    supply: Option<&dyn Supply>,
) -> Refreshed {
    let generations = generations_of(state, root)?;
    let index = fetch_file(state, root, agent.clone(), supply).await?;
    let members = generations.members(root, &index.body).map_err(unusable)?;
    let mut fetched = Vec::with_capacity(members.len());
    let mut held = index.body.len();
    for member in members {
        let file = fetch_file(state, &member, agent.clone(), supply).await?;
        held += file.body.len();
        if held > GENERATION_LIMIT {
            return Err(unusable(format!("its files weigh more than {GENERATION_LIMIT} bytes together")));
        }
        fetched.push((member, file));
    }
    let (shared, root) = (Arc::clone(state), root.clone());
    let stored = tokio::task::spawn_blocking(move || {
        let bodies: Vec<(CachedRequest, Bytes)> = fetched.iter().map(|(m, f)| (m.clone(), f.body.clone())).collect();
        generations_of(&shared, &root)?.adopt(&root, &index.body, &bodies).map_err(unusable)?;
        let records = std::iter::once((root, index)).chain(fetched).map(|(request, file)| file.record(request));
        shared.cache.put_all(records.collect()).map_err(|error| Failed::Internal(error.to_string()))
    });
    stored.await.map_err(|_| Failed::Internal("storing a generation stopped".into()))?
}

/// A file of a generation, read whole.
struct File {
    body: Bytes,
    headers: Vec<(String, String)>,
    validators: pkgproxy_cache::Validators,
    /// When it was fetched, when that was elsewhere (a bundle's file).
    fetched_at: Option<u64>,
}

impl File {
    fn record(self, request: CachedRequest) -> Record {
        Record {
            key: request.key,
            body: self.body,
            headers: self.headers,
            validators: self.validators,
            class: request.class,
            fetched_at: self.fetched_at,
        }
    }
}

/// `request`'s file as the upstream has it now: asked with the validators
/// of the one held, which a `304` keeps; from `supply` when it holds it.
async fn fetch_file(
    state: &Arc<State>,
    request: &CachedRequest,
    agent: Option<HeaderValue>,
    supply: Option<&dyn Supply>,
) -> Result<File, Failed> {
    if let Some(source) = supply.and_then(|supply| supply.source_for(&request.key)) {
        let (parts, fetched_at, body) = supplied(source, state.clock.now()).await?;
        return file(request, &parts, fetched_at, body);
    }
    let held = state.cache.lookup(&request.key);
    let response = fetching::get(state, request, held.as_deref().map(|entry| &entry.validators), agent)
        .await
        .map_err(|error| Failed::of_fetch(&error))?;
    let (parts, body) = response.into_parts();
    let body = match (parts.status, held.as_ref()) {
        (StatusCode::NOT_MODIFIED, Some(entry)) => return held_file(state, &request.key, entry).await,
        (StatusCode::OK, _) => Limited::new(body, FILE_LIMIT).collect().await.map(|body| body.to_bytes()),
        (status, _) => return Err(refused_by_upstream(status, &parts.headers, state.clock.now())),
    };
    let file = file(request, &parts, None, body.map_err(|error| error.to_string()))?;
    state.stats.side(request.side).add(SideCounter::BytesFromUpstream, file.body.len() as u64);
    Ok(file)
}

/// What a supply answers for a file (at `now`): its head, when it was
/// fetched where it was (a bundle says), and its body read whole.
async fn supplied(
    source: Box<dyn pkgproxy_cache::Source>,
    now: SystemTime,
) -> Result<(http::response::Parts, Option<u64>, Result<Bytes, String>), Failed> {
    let sourced = source.start().await.map_err(|error| Failed::of_fetch(&error))?;
    let (parts, body) = sourced.response.into_parts();
    if parts.status != StatusCode::OK {
        return Err(refused_by_upstream(parts.status, &parts.headers, now));
    }
    Ok((parts, sourced.fetched_at, read_whole(body).await))
}

/// `body` read whole, up to [`FILE_LIMIT`] bytes.
async fn read_whole(mut body: pkgproxy_cache::UpstreamBody) -> Result<Bytes, String> {
    let mut whole = Vec::new();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(|error| error.to_string())?.into_data() else { continue };
        if whole.len() + data.len() > FILE_LIMIT {
            return Err(format!("larger than {FILE_LIMIT} bytes"));
        }
        whole.extend_from_slice(&data);
    }
    Ok(Bytes::from(whole))
}

/// The file of a `200` with `parts`, fetched at `fetched_at` where it was
/// (now, if not said), whose body was read as `body`.
fn file(
    request: &CachedRequest,
    parts: &http::response::Parts,
    fetched_at: Option<u64>,
    body: Result<Bytes, String>,
) -> Result<File, Failed> {
    let body = body.map_err(|error| Failed::Upstream(format!("reading {}: {error}", request.origin.path)))?;
    Ok(File { body, headers: kept_headers(&parts.headers), validators: validators(&parts.headers), fetched_at })
}

/// The file held under `key`, confirmed by a `304`.
async fn held_file(state: &Arc<State>, key: &str, entry: &Entry) -> Result<File, Failed> {
    let (cache, owned) = (state.cache.clone(), key.to_string());
    let body = tokio::task::spawn_blocking(move || cache.read_small(&owned, FILE_LIMIT as u64))
        .await
        .ok()
        .flatten()
        .ok_or_else(|| Failed::Internal(format!("{key} cannot be read back")))?;
    Ok(File {
        body: Bytes::from(body),
        headers: entry.headers.clone(),
        validators: entry.validators.clone(),
        fetched_at: None,
    })
}

/// What a client is told when the upstream answered a generation's file
/// with `status` (at `now`).
fn refused_by_upstream(status: StatusCode, headers: &HeaderMap, now: SystemTime) -> Failed {
    match status {
        StatusCode::NOT_FOUND | StatusCode::GONE => {
            Failed::Refused(Refusal::new(status, "the remote does not have it (its index or a products file)"))
        }
        _ => Failed::rate_limited(status, headers, now)
            .unwrap_or_else(|| Failed::Upstream(format!("the remote answered {status}"))),
    }
}

/// The generations role of the side that decided `root`, which a side
/// that decides generations plays.
fn generations_of<'s>(state: &'s State, root: &CachedRequest) -> Result<&'s dyn Generations, Failed> {
    let generations = state.sides.get(root.side).roles().generations;
    generations.ok_or_else(|| Failed::Internal(format!("the {} side keeps no generations", root.side)))
}

fn unusable(reason: String) -> Failed {
    Failed::Upstream(format!("the remote's index cannot be used: {reason}"))
}
