//! Upstream pools against chaos upstreams, with millisecond settings and
//! tokio's paused clock. The chaos upstreams and the pools meet on an
//! in-memory network ([`MemoryNetwork`]) and run on the test's own runtime:
//! no byte waits in a kernel, so the clock moves only once every task waits
//! on a timer, a timeout is reached by advancing the clock, never by
//! waiting, and the figures are the same on a loaded machine. Only the
//! measurement on the real clock runs over loopback TCP.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method};
use http_body_util::BodyExt;
use pkgproxy_testkit::{Behaviour, ChaosUpstream};
use pkgproxy_upstream::offline::{Mode, Refusal, Switch};
use pkgproxy_upstream::{
    AddressPolicy, MemoryNetwork, Network, Payload, Penalties, Pool, PoolRequest, PoolSettings, Resolver, Timeouts,
    Upstream, UpstreamConfig, UpstreamError,
};
use tokio::time::Instant;

const FILE: &str = "/file";

fn settings() -> PoolSettings {
    PoolSettings {
        timeouts: Timeouts {
            connect: Duration::from_millis(200),
            first_byte: Duration::from_millis(500),
            retry: Duration::from_secs(1),
            deadline: Duration::from_secs(2),
            body_idle: Duration::from_secs(1),
            pool_idle: Duration::from_secs(60),
        },
        penalties: Penalties {
            penalty_base: Duration::from_secs(1),
            penalty_max: Duration::from_secs(60),
            jitter: 0.0,
        },
        seed: Some(7),
    }
}

/// A test's world: the network its chaos upstreams listen on and its way
/// out connects over.
struct Lab {
    network: Network,
}

impl Lab {
    /// An in-memory network, for tests on the paused clock.
    fn in_memory() -> Lab {
        Lab { network: Network::Memory(MemoryNetwork::new()) }
    }

    /// Loopback TCP, for the measurement on the real clock.
    fn on_loopback() -> Lab {
        Lab { network: Network::System }
    }

    /// A chaos upstream on a fresh port of 127.0.0.1, serving nothing.
    async fn chaos(&self) -> ChaosUpstream {
        match &self.network {
            Network::System => ChaosUpstream::start().await,
            Network::Memory(memory) => {
                let listener = memory.listen(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
                ChaosUpstream::serve_streams(listener.local_addr(), listener.into_incoming())
            }
        }
    }

    /// Chaos upstreams serving `body` at [`FILE`].
    async fn instances(&self, count: usize, body: &Bytes) -> Vec<ChaosUpstream> {
        let mut started = Vec::new();
        for _ in 0..count {
            let instance = self.chaos().await;
            instance.put(FILE, body.clone());
            started.push(instance);
        }
        started
    }

    /// The way out, trusting the host and port of each of `urls` (on
    /// 127.0.0.1).
    fn upstream(&self, settings: PoolSettings, urls: &[String]) -> Upstream {
        let mut policy = AddressPolicy::default();
        for url in urls {
            policy.trust_url(url).unwrap();
        }
        let config = UpstreamConfig { policy, pools: settings, ..UpstreamConfig::default() };
        Upstream::with_network(config, self.network.clone())
    }

    /// Instances on hosts of their own (breakers are per host), pinned to
    /// the chaos upstreams' addresses.
    fn upstream_with_hosts(&self, chaos: &[ChaosUpstream], switch: Switch) -> (Upstream, Vec<String>) {
        let mut policy = AddressPolicy::default();
        let mut resolver = Resolver::default();
        let mut urls = Vec::new();
        for (index, instance) in chaos.iter().enumerate() {
            let host = format!("instance{index}.test");
            policy.trust(&host, 80);
            resolver.pin(&host, 80, vec![instance.addr()]);
            urls.push(format!("http://{host}"));
        }
        let config = UpstreamConfig { policy, resolver, pools: settings(), switch, ..UpstreamConfig::default() };
        (Upstream::with_network(config, self.network.clone()), urls)
    }
}

/// The URL of an instance nobody listens for: the memory network refuses
/// the connection like a closed TCP port (its listeners on port 0 get
/// ports from 49152 up, so low ports stay free).
fn unreachable_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

fn urls_of(instances: &[ChaosUpstream]) -> Vec<String> {
    instances.iter().map(|i| i.url()).collect()
}

fn pool_of(upstream: &Upstream, instances: &[ChaosUpstream]) -> Arc<Pool> {
    upstream.transport.pool("test", &urls_of(instances)).unwrap()
}

fn get(path: &str) -> PoolRequest {
    PoolRequest::get(path, HeaderMap::new())
}

/// What a client of the pool gets: status, body and the instance.
async fn fetch(pool: &Arc<Pool>, request: PoolRequest) -> Result<(u16, Bytes, usize), UpstreamError> {
    let answer = pool.send(request).await?;
    let status = answer.response.status().as_u16();
    let body = answer.response.into_body().collect().await?.to_bytes();
    Ok((status, body, answer.instance))
}

fn body() -> Bytes {
    Bytes::from((0..4000u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>())
}

/// Returns once nothing else on the runtime can run without the clock, so
/// the chaos servers have seen what the client did (a closed connection,
/// a request sent again). On the paused clock a sleep ends only when every
/// task waits; this one moves the clock by 1 ms.
async fn until_idle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

/// Runs `total` GETs at concurrency `concurrency`; returns each latency, or
/// panics on a client-visible error.
async fn load(pool: &Arc<Pool>, total: usize, concurrency: usize, expected: &Bytes) -> Vec<(Instant, Duration)> {
    let mut latencies = Vec::new();
    let mut running = tokio::task::JoinSet::new();
    let mut sent = 0;
    while sent < total || !running.is_empty() {
        while sent < total && running.len() < concurrency {
            let pool = Arc::clone(pool);
            running.spawn(async move {
                let start = Instant::now();
                let got = fetch(&pool, get(FILE)).await;
                (start, start.elapsed(), got)
            });
            sent += 1;
        }
        let (start, latency, got) = running.join_next().await.unwrap().unwrap();
        let (status, body, _) = got.unwrap_or_else(|error| panic!("a client saw an error: {error}"));
        assert_eq!((status, &body), (200, expected));
        latencies.push((start, latency));
    }
    latencies
}

fn percentile(latencies: &[(Instant, Duration)], p: f64) -> Duration {
    let mut sorted: Vec<Duration> = latencies.iter().map(|(_, l)| *l).collect();
    sorted.sort();
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Three instances on `lab` answering after 50 ms, the first ones broken
/// by `bad`.
async fn run_with_broken(lab: &Lab, bad: &[Behaviour]) -> (Vec<(Instant, Duration)>, Vec<ChaosUpstream>, Arc<Pool>) {
    let body = body();
    let chaos = lab.instances(3, &body).await;
    for instance in &chaos {
        instance.set_behaviour(Behaviour::Delay(Duration::from_millis(50)));
    }
    for (instance, behaviour) in chaos.iter().zip(bad) {
        instance.set_behaviour(behaviour.clone());
    }
    let upstream = lab.upstream(settings(), &urls_of(&chaos));
    let pool = pool_of(&upstream, &chaos);
    let latencies = load(&pool, 1000, 10, &body).await;
    (latencies, chaos, pool)
}

#[tokio::test(start_paused = true)]
async fn a_black_holed_instance_costs_one_request_per_penalty_period_and_no_errors() {
    let t0 = Instant::now();
    let (latencies, chaos, pool) = run_with_broken(&Lab::in_memory(), &[Behaviour::BlackHole]).await;
    let black_hole = &chaos[0];
    let report = pool.report();
    let penalties = report.instances[0].1.failures as u64;
    // A request that touched the black hole took longer than the healthy
    // instances' 50 ms: it waited for the timeout, or for another request's
    // timeout to move it on.
    let slow: Vec<&(Instant, Duration)> = latencies.iter().filter(|(_, l)| *l > Duration::from_millis(50)).collect();
    // Until the first attempt on it times out, nobody knows the black hole
    // is bad: requests started before then may pay. After that, only the
    // probe of each re-admission does.
    let first_penalty = t0 + settings().timeouts.first_byte;
    let slow_later = slow.iter().filter(|(start, _)| *start >= first_penalty).count() as u64;
    assert!(penalties >= 2, "the run spans several penalty periods: {report:?}");
    assert_eq!(slow_later, penalties - 1, "after the first, one request per penalty period pays the timeout");
    assert_eq!(black_hole.accepted(), slow.len() as u64, "the black hole got no request while penalised");
    assert_eq!(black_hole.requests(), black_hole.accepted());

    let (baseline, _, _) = run_with_broken(&Lab::in_memory(), &[]).await;
    println!(
        "1000 GETs at concurrency 10, virtual time: one black hole p50 {:?} p99 {:?} max {:?}; \
         all healthy p50 {:?} p99 {:?} max {:?}; {} requests touched the black hole, {} after its first penalty",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0),
        percentile(&baseline, 0.5),
        percentile(&baseline, 0.99),
        percentile(&baseline, 1.0),
        slow.len(),
        slow_later,
    );
    assert_eq!(percentile(&latencies, 0.5), percentile(&baseline, 0.5));
}

#[tokio::test(start_paused = true)]
async fn a_resetting_and_a_503_instance_cost_the_clients_nothing() {
    let unavailable = Behaviour::Status { code: 503, retry_after: None };
    let (latencies, chaos, pool) =
        run_with_broken(&Lab::in_memory(), &[Behaviour::ResetBeforeHeaders, unavailable]).await;
    assert_eq!(latencies.len(), 1000);
    let report = pool.report();
    for (broken, (_, state)) in chaos.iter().zip(&report.instances).take(2) {
        assert!(state.failures >= 2, "{report:?}");
        assert!(broken.requests() <= 10 + u64::from(state.failures), "tried only at the start and once per period");
    }
    assert!(chaos[2].requests() > 950);
}

#[tokio::test(start_paused = true)]
async fn with_every_instance_black_holed_a_request_fails_within_the_deadline_trying_each_once() {
    let lab = Lab::in_memory();
    let chaos = lab.instances(3, &body()).await;
    for instance in &chaos {
        instance.set_behaviour(Behaviour::BlackHole);
    }
    let pool = pool_of(&lab.upstream(settings(), &urls_of(&chaos)), &chaos);
    let start = Instant::now();
    let error = fetch(&pool, get(FILE)).await.unwrap_err();
    let took = start.elapsed();
    // 500 ms on each of the first two, then the last one left gets the
    // patient 1 s, which the 2 s deadline bounds.
    assert!(took <= Duration::from_secs(2) + Duration::from_millis(10), "took {took:?}");
    let message = error.to_string();
    assert!(message.starts_with("all 3 instances of test failed"), "{message}");
    for instance in &chaos {
        assert_eq!(instance.accepted(), 1, "each instance attempted exactly once: {message}");
        assert_eq!(instance.requests(), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn many_unreachable_instances_are_each_tried_once_without_running_off_the_list() {
    let urls: Vec<String> = (1..=64).map(unreachable_url).collect();
    let upstream = Lab::in_memory().upstream(settings(), &urls);
    let pool = upstream.transport.pool("unreachable", &urls).unwrap();
    for _ in 0..3 {
        let Err(UpstreamError::AllFailed { attempts, .. }) = fetch(&pool, get(FILE)).await else {
            panic!("an unreachable pool answered");
        };
        assert_eq!(attempts.len(), 64, "{attempts:?}");
        assert!(attempts.iter().all(|a| a.contains("cannot connect")), "each one refused: {attempts:?}");
        let mut tried: Vec<&str> = attempts.iter().map(|a| a.split(": ").next().unwrap()).collect();
        tried.sort();
        tried.dedup();
        assert_eq!(tried.len(), 64, "each instance once");
    }
}

#[tokio::test(start_paused = true)]
async fn a_single_slow_instance_is_waited_for_with_the_patient_limit() {
    let lab = Lab::in_memory();
    let chaos = lab.instances(1, &body()).await;
    chaos[0].set_behaviour(Behaviour::Delay(Duration::from_millis(800)));
    let pool = pool_of(&lab.upstream(settings(), &urls_of(&chaos)), &chaos);
    for _ in 0..3 {
        assert_eq!(fetch(&pool, get(FILE)).await.unwrap().0, 200, "800 ms is within the 1 s limit of a last instance");
    }
    assert_eq!(chaos[0].requests(), 3);
    assert_eq!(pool.report().instances[0].1.failures, 0);
}

#[tokio::test(start_paused = true)]
async fn fifty_requests_caught_by_one_outage_raise_the_penalty_once() {
    let lab = Lab::in_memory();
    let chaos = lab.instances(1, &body()).await;
    chaos[0].set_behaviour(Behaviour::BlackHole);
    let pool = pool_of(&lab.upstream(settings(), &urls_of(&chaos)), &chaos);
    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..50 {
        let pool = Arc::clone(&pool);
        requests.spawn(async move { fetch(&pool, get(FILE)).await });
    }
    while let Some(done) = requests.join_next().await {
        assert!(done.unwrap().is_err());
    }
    let (_, state) = &pool.report().instances[0];
    assert_eq!(state.failures, 1, "one outage, one penalty step");
    assert_eq!(state.penalised_for, Some(Duration::from_secs(1)));
}

#[tokio::test(start_paused = true)]
async fn a_failing_instance_is_readmitted_on_schedule_and_one_success_resets_it() {
    let lab = Lab::in_memory();
    let chaos = lab.instances(1, &body()).await;
    chaos[0].set_behaviour(Behaviour::Status { code: 502, retry_after: None });
    let pool = pool_of(&lab.upstream(settings(), &urls_of(&chaos)), &chaos);
    let mut expected = vec![];
    let mut seen = vec![];
    for step in 0..4u32 {
        let answered = fetch(&pool, get(FILE)).await.unwrap();
        assert_eq!(answered.0, 502, "the single instance's own answer is passed on");
        let (_, state) = &pool.report().instances[0];
        let penalty = state.penalised_for.unwrap();
        seen.push(penalty);
        expected.push(Duration::from_secs(1 << step));
        tokio::time::sleep(penalty - Duration::from_millis(1)).await;
        assert_eq!(pool.report().instances[0].1.penalised_for, Some(Duration::from_millis(1)));
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(pool.report().instances[0].1.penalised_for, None, "re-admitted at the instant");
    }
    assert_eq!(seen, expected, "1 s doubling");
    chaos[0].set_behaviour(Behaviour::Ok);
    assert_eq!(fetch(&pool, get(FILE)).await.unwrap().0, 200);
    let (_, state) = &pool.report().instances[0];
    assert_eq!((state.failures, state.penalised_for), (0, None), "one success resets the penalty");
}

#[tokio::test(start_paused = true)]
async fn a_stale_pooled_connection_is_replaced_without_a_penalty_and_idle_ones_expire() {
    let lab = Lab::in_memory();
    let chaos = lab.instances(1, &body()).await;
    chaos[0].set_behaviour(Behaviour::DropReusedConnections);
    let pool = pool_of(&lab.upstream(settings(), &urls_of(&chaos)), &chaos);
    assert_eq!(fetch(&pool, get(FILE)).await.unwrap().0, 200);
    assert_eq!(chaos[0].accepted(), 1);
    assert_eq!(fetch(&pool, get(FILE)).await.unwrap().0, 200, "the upstream dropped the reused connection");
    assert_eq!(chaos[0].requests(), 3, "the request went once on the stale connection, once on a fresh one");
    assert_eq!(chaos[0].accepted(), 2);
    assert_eq!(pool.report().instances[0].1.failures, 0, "a stale connection is no failure of the instance");

    chaos[0].set_behaviour(Behaviour::Ok);
    assert_eq!(fetch(&pool, get(FILE)).await.unwrap().0, 200);
    let accepted = chaos[0].accepted();
    assert_eq!(fetch(&pool, get(FILE)).await.unwrap().0, 200);
    assert_eq!(chaos[0].accepted(), accepted, "a fresh pooled connection is reused");
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert_eq!(fetch(&pool, get(FILE)).await.unwrap().0, 200);
    assert_eq!(chaos[0].accepted(), accepted + 1, "after the idle timeout a new connection is opened");
}

/// Penalises instance `index` of `pool` by sending requests, four at a
/// time (so load spreads them over the instances), until one of them hits
/// it while it behaves as `failing`; then it answers again.
async fn penalise(pool: &Arc<Pool>, chaos: &[ChaosUpstream], index: usize, failing: Behaviour) {
    chaos[index].set_behaviour(failing);
    for _ in 0..50 {
        let round: Vec<_> = (0..4).map(|_| fetch(pool, get(FILE))).collect();
        for done in futures_util::future::join_all(round).await {
            assert_eq!(done.unwrap().0, 200);
        }
        if pool.report().instances[index].1.penalised_for.is_some() {
            chaos[index].set_behaviour(Behaviour::Ok);
            return;
        }
    }
    panic!("instance {index} was never tried");
}

#[tokio::test(start_paused = true)]
async fn a_penalty_closes_idle_sockets_and_moves_waiting_requests_on_while_bodies_stream() {
    let body = body();
    let lab = Lab::in_memory();
    let chaos = lab.instances(2, &body).await;
    let pool = pool_of(&lab.upstream(settings(), &urls_of(&chaos)), &chaos);
    penalise(&pool, &chaos, 1, Behaviour::CloseBeforeHeaders).await;
    // Instance 0 alone is healthy now: four requests at once leave four idle
    // connections to it.
    chaos[0].set_behaviour(Behaviour::Delay(Duration::from_millis(10)));
    let warm: Vec<_> = (0..4).map(|_| fetch(&pool, get(FILE))).collect();
    for done in futures_util::future::join_all(warm).await {
        assert_eq!(done.unwrap().2, 0);
    }
    let open_before = chaos[0].open_connections();
    assert!(open_before >= 4, "{open_before}");

    let slow = "/slow";
    chaos[0].put(slow, body.clone());
    chaos[0]
        .set_path_behaviour(slow, Behaviour::SlowBody { bytes_per_chunk: 100, interval: Duration::from_millis(100) });
    chaos[0].set_behaviour(Behaviour::BlackHole);
    let streaming = pool.send(get(slow)).await.unwrap();
    assert_eq!(streaming.instance, 0);
    let streaming = tokio::spawn(async move { streaming.response.into_body().collect().await.map(|b| b.to_bytes()) });

    let start = Instant::now();
    let first = tokio::spawn({
        let pool = Arc::clone(&pool);
        async move { fetch(&pool, get(FILE)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second_started = Instant::now();
    let second = fetch(&pool, get(FILE)).await.unwrap();
    let first = first.await.unwrap().unwrap();
    assert_eq!((first.0, first.2, second.0, second.2), (200, 1, 200, 1), "both moved on to the other instance");
    let (first_took, second_took) = (Instant::now() - start, Instant::now() - second_started);
    assert!(first_took >= Duration::from_millis(500) && first_took < Duration::from_millis(510), "{first_took:?}");
    assert!(
        second_took < Duration::from_millis(410),
        "the second moved on when the first's failure penalised the instance: {second_took:?}"
    );
    until_idle().await;
    assert_eq!(chaos[0].open_connections(), 1, "only the streaming body's connection is left open");
    assert_eq!(streaming.await.unwrap().unwrap(), body, "the streaming body was unaffected");
}

#[tokio::test(start_paused = true)]
async fn a_slow_steady_body_outlives_the_deadline_and_a_stalled_one_fails_and_resumes_elsewhere() {
    let body = body();
    let lab = Lab::in_memory();
    let chaos = lab.instances(2, &body).await;
    let pool = pool_of(&lab.upstream(settings(), &urls_of(&chaos)), &chaos);
    // 40 pieces of 100 bytes, 100 ms apart: 4 s, twice the deadline.
    for instance in &chaos {
        instance.set_behaviour(Behaviour::SlowBody { bytes_per_chunk: 100, interval: Duration::from_millis(100) });
    }
    let start = Instant::now();
    let (status, got, _) = fetch(&pool, get(FILE)).await.unwrap();
    assert_eq!((status, &got), (200, &body));
    assert!(start.elapsed() >= Duration::from_secs(4));

    for instance in &chaos {
        instance.set_behaviour(Behaviour::StallBody { after_bytes: 1000 });
    }
    let answer = pool.send(get(FILE)).await.unwrap();
    let stalled_on = answer.instance;
    let mut response = answer.response;
    let mut received = Vec::new();
    let error = loop {
        match response.body_mut().frame().await {
            Some(Ok(frame)) => received.extend_from_slice(frame.data_ref().unwrap()),
            Some(Err(error)) => break error,
            None => panic!("a stalled body ended"),
        }
    };
    assert!(matches!(error, UpstreamError::Stalled { received: 1000, .. }), "{error}");
    assert!(pool.report().instances[stalled_on].1.penalised_for.is_some(), "a stalled body penalises its instance");

    for instance in &chaos {
        instance.set_behaviour(Behaviour::Ok);
    }
    let mut resume = get(FILE);
    resume.headers.insert(http::header::RANGE, "bytes=1000-".parse().unwrap());
    resume.avoid = Some(stalled_on);
    let (status, rest, resumed_on) = fetch(&pool, resume).await.unwrap();
    assert_eq!(status, 206);
    assert_ne!(resumed_on, stalled_on, "resumed on the other instance");
    received.extend_from_slice(&rest);
    assert_eq!(received, body);
}

#[tokio::test(start_paused = true)]
async fn a_host_whose_breaker_is_open_is_skipped_like_a_penalised_one() {
    let lab = Lab::in_memory();
    let chaos = lab.instances(2, &body()).await;
    let (upstream, urls) = lab.upstream_with_hosts(&chaos, Switch::new(Mode::StoreOverloaded));
    let pool = upstream.transport.pool("overloaded", &urls).unwrap();
    penalise(&pool, &chaos, 0, Behaviour::Status { code: 429, retry_after: Some("60".into()) }).await;
    let asked = chaos[0].requests();
    let states = upstream.switch.upstreams(Instant::now());
    assert_eq!(states.len(), 1, "the 429 opened instance 0's breaker: {states:?}");

    // The pool's penalty (1 s) ends long before the breaker's 60 s: the
    // instance is still skipped, without an attempt.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for _ in 0..20 {
        assert_eq!(fetch(&pool, get(FILE)).await.unwrap().2, 1);
    }
    assert_eq!(chaos[0].requests(), asked, "no request reached the host whose breaker is open");

    // With every host's breaker open, the request is refused as the breaker says.
    chaos[1].set_behaviour(Behaviour::Status { code: 503, retry_after: Some("30".into()) });
    assert_eq!(fetch(&pool, get(FILE)).await.unwrap().0, 503);
    let refused = fetch(&pool, get(FILE)).await.unwrap_err();
    assert!(matches!(refused.refusal(), Some(Refusal::BreakerOpen { .. })), "{refused}");
}

#[tokio::test(start_paused = true)]
async fn penalties_alone_never_open_a_breaker() {
    let lab = Lab::in_memory();
    let chaos = lab.instances(2, &body()).await;
    let (upstream, urls) = lab.upstream_with_hosts(&chaos, Switch::new(Mode::StoreOverloaded));
    let pool = upstream.transport.pool("overloaded", &urls).unwrap();
    penalise(&pool, &chaos, 0, Behaviour::CloseBeforeHeaders).await;
    assert!(pool.report().instances[0].1.penalised_for.is_some());
    assert!(upstream.switch.upstreams(Instant::now()).is_empty(), "one failure penalises, the breaker stays closed");
}

/// The figures of the black-hole run on the real clock (a measurement, run
/// by hand: `cargo test -p pkgproxy-upstream --test pool -- --ignored --nocapture`).
#[tokio::test]
#[ignore = "a measurement, run by hand"]
async fn measure_latency_with_a_black_hole_on_the_real_clock() {
    let lab = Lab::on_loopback();
    let (latencies, _, _) = run_with_broken(&lab, &[Behaviour::BlackHole]).await;
    let (baseline, _, _) = run_with_broken(&lab, &[]).await;
    for (name, run) in [("one black hole", &latencies), ("all healthy", &baseline)] {
        println!(
            "{name}: p50 {:?} p99 {:?} max {:?}",
            percentile(run, 0.5),
            percentile(run, 0.99),
            percentile(run, 1.0)
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_file_one_mirror_lacks_is_fetched_from_another_without_a_penalty() {
    let lab = Lab::in_memory();
    let chaos = vec![lab.chaos().await, lab.chaos().await];
    chaos[1].put(FILE, body());
    let pool = pool_of(&lab.upstream(settings(), &urls_of(&chaos)), &chaos);
    for _ in 0..10 {
        let (status, got, instance) = fetch(&pool, get(FILE)).await.unwrap();
        assert_eq!((status, instance, got), (200, 1, body()), "the lagging mirror's 404 sends the request on");
    }
    assert!(chaos[0].requests() >= 1, "the lagging mirror was asked");
    assert_eq!(pool.report().instances[0].1.failures, 0, "a 404 is no fault of the instance");
    let (status, _, _) = fetch(&pool, get("/nowhere")).await.unwrap();
    assert_eq!(status, 404, "when every mirror lacks it, the 404 is passed on");
}

/// A `POST` with a body, as a forwarded request of a side.
fn post(path: &str) -> PoolRequest {
    PoolRequest { method: Method::POST, body: Bytes::from_static(b"{\"actions\": []}").into(), ..get(path) }
}

#[tokio::test(start_paused = true)]
async fn a_post_is_never_sent_twice_an_answer_or_a_failure_after_sending_ends_it() {
    let lab = Lab::in_memory();
    let chaos = lab.instances(2, &body()).await;
    let pool = pool_of(&lab.upstream(settings(), &urls_of(&chaos)), &chaos);
    let unavailable = Behaviour::Status { code: 503, retry_after: None };
    for instance in &chaos {
        instance.set_behaviour(unavailable.clone());
    }
    let (status, _, _) = fetch(&pool, post(FILE)).await.unwrap();
    assert_eq!(status, 503, "the first instance's answer is passed on");
    assert_eq!(chaos[0].requests() + chaos[1].requests(), 1, "not sent to the other instance");
    let (status, _, _) = fetch(&pool, get(FILE)).await.unwrap();
    assert_eq!(status, 503);
    assert_eq!(chaos[0].requests() + chaos[1].requests(), 3, "a GET tries both");

    let chaos = lab.instances(2, &body()).await;
    for instance in &chaos {
        instance.set_behaviour(Behaviour::BlackHole);
    }
    let pool = pool_of(&lab.upstream(settings(), &urls_of(&chaos)), &chaos);
    let Err(UpstreamError::AllFailed { attempts, .. }) = fetch(&pool, post(FILE)).await else {
        panic!("a black hole answered");
    };
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    until_idle().await;
    assert_eq!(chaos[0].requests() + chaos[1].requests(), 1, "the timed-out POST was not sent again");
}

#[tokio::test(start_paused = true)]
async fn a_post_that_could_not_connect_moves_on_to_the_next_instance() {
    let lab = Lab::in_memory();
    let refusing = unreachable_url(9);
    let live = lab.instances(1, &body()).await.remove(0);
    let mut tried_the_refusing_port = false;
    // Both orders: whichever instance the pool picks first, the POST ends
    // at the live one, once.
    for urls in [[refusing.clone(), live.url()], [live.url(), refusing.clone()]] {
        let pool = lab.upstream(settings(), &urls).transport.pool("post", &urls).unwrap();
        live.reset_counters();
        let (status, _, instance) = fetch(&pool, post(FILE)).await.unwrap();
        assert_eq!(pool.url(instance), Some(live.url().as_str()));
        assert_eq!(status, 405, "the live instance's own answer to a POST");
        assert_eq!(live.requests(), 1);
        let report = pool.report();
        tried_the_refusing_port |= report.instances.iter().any(|(url, state)| *url == refusing && state.failures > 0);
    }
    assert!(tried_the_refusing_port, "in one of the orders the refusing port was tried first");
}

/// A `PUT` whose body is streamed from its client, as an npm publish is.
fn streamed_put(path: &str) -> PoolRequest {
    let body = http_body_util::Full::new(Bytes::from_static(b"{\"name\": \"p\"}"));
    PoolRequest { method: Method::PUT, body: Payload::streamed(body), ..get(path) }
}

#[tokio::test(start_paused = true)]
async fn a_streamed_body_goes_once_whatever_the_method_and_moves_on_only_when_nothing_was_sent() {
    let lab = Lab::in_memory();
    let chaos = lab.instances(2, &body()).await;
    let pool = pool_of(&lab.upstream(settings(), &urls_of(&chaos)), &chaos);
    for instance in &chaos {
        instance.set_behaviour(Behaviour::Status { code: 503, retry_after: None });
    }
    let (status, _, _) = fetch(&pool, streamed_put(FILE)).await.unwrap();
    assert_eq!(status, 503, "the first instance's answer is passed on");
    assert_eq!(chaos[0].requests() + chaos[1].requests(), 1, "a PUT whose body went cannot go again");

    let refusing = unreachable_url(9);
    let live = lab.instances(1, &body()).await.remove(0);
    for urls in [[refusing.clone(), live.url()], [live.url(), refusing.clone()]] {
        let pool = lab.upstream(settings(), &urls).transport.pool("put", &urls).unwrap();
        live.reset_counters();
        let (status, _, instance) = fetch(&pool, streamed_put(FILE)).await.unwrap();
        assert_eq!(pool.url(instance), Some(live.url().as_str()), "a failed connect took nothing of the body");
        assert_eq!((status, live.requests()), (405, 1));
    }
}
