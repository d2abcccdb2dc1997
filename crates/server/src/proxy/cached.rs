//! Serving a request through the cache: a fresh entry is answered at once;
//! otherwise the client joins the key's shared fetch (a revalidation when an
//! entry is cached) and gets what it brings. A stale entry is served when
//! the upstream cannot be asked or fails, so clients keep working while a
//! mirror is down.
//!
//! What the side expects of the key overrides all of that: an entry that
//! does not match the expected checksum is superseded (never served, not
//! even stale), one that matches needs no revalidation, and expected bytes
//! the store holds under another name are served without a fetch.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{Response, StatusCode};
use pkgproxy_cache::{
    freshness, ClientDirectives, Entry, FetchError, FetchSpec, Freshness, PassedAnswer, Phase, Verifier, Window,
};
use pkgproxy_sides::{CachedRequest, Side};

use super::answer::{self, Asked, Served};
use super::{checksums, fetching};
use crate::body::ResponseBody;
use crate::state::State;

/// Answers `asked` for the decided `request`.
pub async fn serve(state: &Arc<State>, asked: &Asked<'_>, request: CachedRequest) -> Response<ResponseBody> {
    let stats = state.stats.side(request.side);
    stats.request();
    if let Some(remembered) = remembered_not_found(state, &request) {
        stats.hit(remembered.body.len() as u64);
        return answer::passed(asked, &remembered);
    }
    let cached = usable(state.cache.lookup(&request.key), &request);
    match &cached {
        Some(entry) if is_fresh(state, asked, &request, entry) => {
            return from_cache(state, asked, &request, entry, Served::Hit);
        }
        Some(_) => {}
        None => {
            if let Some(entry) = adopt(state, &request).await {
                return from_cache(state, asked, &request, &entry, Served::Hit);
            }
        }
    }

    let verifier = side_verifier(state, &request).await;
    let spec = FetchSpec {
        key: request.key.clone(),
        class: request.class,
        expected: request.expected.clone(),
        revalidating: cached.clone().filter(|e| !e.validators.is_empty()),
        verifier: verifier.clone(),
    };
    let conditional = spec.revalidating.clone();
    let joined = state.cache.fetch_from(spec, || fetching::source(state, &request, asked, conditional.as_deref()));
    let judged = verifier.as_ref().is_some_and(|v| v.judges_body());
    let phase = if judged { joined.fetch.finished().await } else { joined.fetch.answered().await };
    if joined.started {
        report_upstream_status(asked, &phase);
    }
    match phase {
        Phase::Streaming(head) => {
            stats.miss();
            answer::from_fetch(asked, &joined.fetch, &head, request.dated_resume)
        }
        Phase::Done(entry) => {
            stats.miss();
            from_cache(state, asked, &request, &entry, Served::Miss)
        }
        Phase::NotModified(entry) => {
            stats.revalidated();
            from_cache(state, asked, &request, &entry, Served::Revalidated)
        }
        Phase::Passed(passed) if passed.status.is_server_error() && cached.is_some() => {
            stale(state, asked, &request, cached.as_ref(), &format!("upstream answered {}", passed.status))
        }
        Phase::Passed(passed) => {
            stats.miss();
            let not_found = matches!(passed.status, StatusCode::NOT_FOUND | StatusCode::GONE);
            if let Some(ttl) = not_found_ttl(state, request.side).filter(|_| not_found) {
                state.negative.remember(&request.key, Arc::clone(&passed), ttl);
            }
            answer::passed(asked, &passed)
        }
        Phase::Failed(error) if cached.is_some() => {
            note_refusal(asked, &error);
            stale(state, asked, &request, cached.as_ref(), &error.to_string())
        }
        Phase::Failed(error) => {
            note_refusal(asked, &error);
            stats.miss();
            answer::text(StatusCode::BAD_GATEWAY, &format!("pkgproxy: {error}"))
        }
        Phase::Asking => answer::text(StatusCode::BAD_GATEWAY, "pkgproxy: fetch ended without an answer"),
    }
}

/// Tells the mirrors that compare what the upstream answered the request
/// whose miss started the fetch. A `304` is the answer to pkgproxy's own
/// revalidation, which the client did not ask for: not compared.
fn report_upstream_status(asked: &Asked<'_>, phase: &Phase) {
    let status = match phase {
        Phase::Streaming(_) | Phase::Done(_) => StatusCode::OK,
        Phase::Passed(passed) => passed.status,
        Phase::NotModified(_) | Phase::Failed(_) | Phase::Asking => return,
    };
    asked.upstream_answer.report(status.as_u16());
}

/// How long a side remembers a "not found" of its upstream (`None`: it
/// does not): the go command probes parent paths of every module it
/// resolves, and expects a `404` or `410` there.
fn not_found_ttl(state: &State, side: Side) -> Option<Duration> {
    match side {
        Side::Go => Some(state.settings.go.negative_ttl()),
        Side::Apt => None,
    }
}

/// A remembered "not found" for `request`; asked only of sides that
/// remember, so apt's hits never touch the shared map.
fn remembered_not_found(state: &State, request: &CachedRequest) -> Option<Arc<PassedAnswer>> {
    not_found_ttl(state, request.side)?;
    state.negative.get(&request.key, state.upstream.switch.frozen())
}

/// The side's hooks into a fetch of `request`.
async fn side_verifier(state: &Arc<State>, request: &CachedRequest) -> Option<Arc<dyn Verifier>> {
    match request.side {
        Side::Apt => state.apt.verifier(request),
        Side::Go => {
            let sums = checksums::of(state, request).await;
            state.settings.go.verifier(request, sums)
        }
    }
}

/// Notes a refusal by the offline switch for the middleware (the leader of
/// a shared fetch and those who only joined it all see the typed error).
fn note_refusal(asked: &Asked<'_>, error: &FetchError) {
    if let FetchError::Refused { retry_after, .. } = error {
        asked.note.refused(*retry_after);
    }
}

/// The cached entry, unless what the side now expects of the key says it is
/// superseded (a newer `Release` lists other bytes): such an entry is never
/// served, not even stale, since the client would reject it.
fn usable(entry: Option<Arc<Entry>>, request: &CachedRequest) -> Option<Arc<Entry>> {
    let entry = entry?;
    let expected = &request.expected;
    let sha_ok = expected.sha256.as_ref().is_none_or(|sha| sha.eq_ignore_ascii_case(&entry.sha256));
    let size_ok = expected.size.is_none_or(|size| size == entry.size);
    if sha_ok && size_ok {
        Some(entry)
    } else {
        tracing::debug!(key = request.key, "cached entry superseded by what the index now expects");
        None
    }
}

/// Whether a usable entry may be served without asking the upstream. An
/// entry matching the checksum the side expects is current by definition
/// (the `Release` naming it was revalidated); others follow the freshness
/// rule.
fn is_fresh(state: &State, asked: &Asked<'_>, request: &CachedRequest, entry: &Entry) -> bool {
    if request.expected.sha256.is_some() {
        return true;
    }
    let directives = ClientDirectives::from_headers(asked.headers);
    let window = match state.upstream.switch.frozen() {
        true => Window::Frozen,
        false => Window::For(match request.side {
            Side::Apt => state.apt.side().index_ttl(),
            Side::Go => state.settings.go.list_ttl(),
        }),
    };
    freshness(entry, SystemTime::now(), window, directives) == Freshness::Fresh
}

/// Serves the expected bytes when the store already holds them under
/// another name (an index file fetched by name whose by-hash copy is
/// cached): no upstream request at all.
async fn adopt(state: &Arc<State>, request: &CachedRequest) -> Option<Arc<Entry>> {
    let (Some(sha256), Some(size)) = (request.expected.sha256.clone(), request.expected.size) else {
        return None;
    };
    let (cache, key, class) = (state.cache.clone(), request.key.clone(), request.class);
    let adopted = tokio::task::spawn_blocking(move || cache.adopt(&key, &sha256, size, class)).await;
    match adopted {
        Ok(Ok(entry)) => entry,
        Ok(Err(error)) => {
            tracing::warn!(key = request.key, %error, "cannot adopt a stored copy");
            None
        }
        Err(_) => None,
    }
}

fn stale(
    state: &Arc<State>,
    asked: &Asked<'_>,
    request: &CachedRequest,
    cached: Option<&Arc<Entry>>,
    why: &str,
) -> Response<ResponseBody> {
    let entry = cached.expect("callers check that an entry is cached");
    tracing::info!(key = request.key, reason = why, "revalidation failed; serving the cached entry");
    state.stats.side(request.side).stale();
    from_cache(state, asked, request, entry, Served::Stale)
}

fn from_cache(
    state: &Arc<State>,
    asked: &Asked<'_>,
    request: &CachedRequest,
    entry: &Entry,
    served: Served,
) -> Response<ResponseBody> {
    let file = match state.cache.open_body(entry) {
        Ok(file) => file,
        Err(error) => {
            tracing::error!(key = request.key, %error, "cached body cannot be opened");
            return answer::text(StatusCode::INTERNAL_SERVER_ERROR, "pkgproxy: cached body cannot be read");
        }
    };
    let (response, sent) = answer::from_entry(asked, entry, file, served, request.dated_resume);
    if served != Served::Miss {
        state.stats.side(request.side).hit(sent);
    }
    response
}
