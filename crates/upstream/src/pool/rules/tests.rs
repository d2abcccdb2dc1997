//! The rules with chosen instants and "random" numbers.

use super::*;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

const NO_JITTER: Penalties =
    Penalties { penalty_base: Duration::from_secs(1), penalty_max: Duration::from_secs(300), jitter: 0.0 };

#[test]
fn a_failing_instance_is_readmitted_on_the_doubling_schedule_up_to_the_cap() {
    let mut pool = Rules::new(1, NO_JITTER);
    let mut now = Instant::now();
    let mut penalties = vec![];
    for _ in 0..11 {
        let attempt = pool.start(0, now);
        let penalty = pool.failed(attempt, now, 0.0).expect("a new failure raises the penalty");
        penalties.push(penalty.as_secs());
        assert_eq!(pool.choose(now + penalty - Duration::from_millis(1), &[false], (0, 0)), Choice::Failing(0));
        now += penalty;
        assert_eq!(pool.choose(now, &[false], (0, 0)), Choice::Healthy(0), "re-admitted when the penalty ends");
    }
    assert_eq!(penalties, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
}

#[test]
fn one_success_resets_the_penalty() {
    let mut pool = Rules::new(1, NO_JITTER);
    let now = Instant::now();
    for _ in 0..4 {
        let attempt = pool.start(0, now);
        pool.failed(attempt, now, 0.0);
    }
    let attempt = pool.start(0, now);
    pool.succeeded(attempt, Duration::from_millis(10));
    let attempt = pool.start(0, now);
    assert_eq!(pool.failed(attempt, now, 0.0), Some(secs(1)));
}

#[test]
fn fifty_concurrent_failures_of_one_outage_raise_the_penalty_once() {
    let mut pool = Rules::new(1, NO_JITTER);
    let t0 = Instant::now();
    let attempts: Vec<Attempt> = (0..50).map(|_| pool.start(0, t0)).collect();
    let raised = attempts.iter().filter_map(|&a| pool.failed(a, t0 + Duration::from_millis(200), 0.0)).count();
    assert_eq!(raised, 1);
    attempts.into_iter().for_each(|a| pool.end(a));
    assert_eq!(pool.report(t0)[0].failures, 1);
    assert_eq!(pool.report(t0)[0].in_flight, 0);
}

#[test]
fn no_instance_is_tried_twice_before_all_were_tried_and_then_the_request_is_exhausted() {
    for count in [1, 2, 3, 7, 64] {
        let pool = Rules::new(count, Penalties::default());
        let now = Instant::now();
        let mut tried = vec![false; count];
        let mut seen = 0;
        let mut random = 12345u64;
        loop {
            random = random.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            match pool.choose(now, &tried, (random >> 7, random >> 29)) {
                Choice::Healthy(i) | Choice::Failing(i) => {
                    assert!(!tried[i], "instance {i} of {count} tried twice");
                    tried[i] = true;
                    seen += 1;
                }
                Choice::Exhausted => break,
            }
        }
        assert_eq!(seen, count);
    }
    assert_eq!(Rules::new(0, Penalties::default()).choose(Instant::now(), &[], (0, 0)), Choice::Exhausted);
}

#[test]
fn penalised_instances_come_only_when_no_healthy_one_is_left_soonest_first() {
    let mut pool = Rules::new(3, NO_JITTER);
    let mut now = Instant::now();
    for (instance, failures) in [(0, 3), (1, 1)] {
        for _ in 0..failures {
            now += Duration::from_millis(1);
            let attempt = pool.start(instance, now);
            pool.failed(attempt, now, 0.0).expect("a failure after the penalty began raises it");
            pool.end(attempt);
        }
    }
    assert_eq!(pool.choose(now, &[false, false, false], (0, 1)), Choice::Healthy(2));
    assert_eq!(pool.choose(now, &[false, false, true], (0, 1)), Choice::Failing(1), "instance 1 recovers first");
}

#[test]
fn the_faster_of_two_healthy_instances_gets_more_requests() {
    let mut pool = Rules::new(2, Penalties::default());
    let now = Instant::now();
    for _ in 0..10 {
        let fast = pool.start(0, now);
        pool.succeeded(fast, Duration::from_millis(5));
        pool.end(fast);
        let slow = pool.start(1, now);
        pool.succeeded(slow, Duration::from_millis(200));
        pool.end(slow);
    }
    let mut picks = [0; 2];
    for round in 0..100u64 {
        if let Choice::Healthy(i) = pool.choose(now, &[false, false], (round, round / 2 + 1)) {
            picks[i] += 1;
            // The download goes on: load on the instance that took it.
            let attempt = pool.start(i, now);
            pool.succeeded(attempt, Duration::from_millis(if i == 0 { 5 } else { 200 }));
        }
    }
    assert!(picks[0] > picks[1], "{picks:?}");
    assert!(picks[1] > 0, "as load builds on the faster one, the slower one gets requests too: {picks:?}");
}

#[test]
fn requests_in_flight_weigh_against_an_instance() {
    let mut pool = Rules::new(2, Penalties::default());
    let now = Instant::now();
    let _busy: Vec<Attempt> = (0..5).map(|_| pool.start(0, now)).collect();
    assert_eq!(pool.choose(now, &[false, false], (0, 1)), Choice::Healthy(1));
}

#[test]
fn jitter_stays_within_its_bounds_and_the_cap() {
    let config = Penalties { penalty_base: secs(10), penalty_max: secs(12), jitter: 0.2 };
    let now = Instant::now();
    for jitter in [-1.0, -0.5, 0.0, 0.5, 1.0] {
        let mut pool = Rules::new(1, config);
        let attempt = pool.start(0, now);
        let penalty = pool.failed(attempt, now, jitter).unwrap();
        assert!(penalty >= secs(8) && penalty <= secs(12), "{penalty:?}");
    }
}

#[test]
fn a_readmitted_instance_takes_one_request_until_it_answers() {
    let mut pool = Rules::new(2, NO_JITTER);
    let t0 = Instant::now();
    let attempt = pool.start(0, t0);
    let penalty = pool.failed(attempt, t0, 0.0).unwrap();
    pool.end(attempt);
    let readmitted = t0 + penalty;
    assert_eq!(pool.choose(readmitted, &[false, true], (0, 0)), Choice::Healthy(0));
    let probe = pool.start(0, readmitted);
    assert_eq!(
        pool.choose(readmitted, &[false, true], (0, 0)),
        Choice::Failing(0),
        "while the probe is out, the instance counts as penalised"
    );
    assert_eq!(pool.choose(readmitted, &[false, false], (0, 0)), Choice::Healthy(1));
    pool.succeeded(probe, Duration::from_millis(5));
    assert_eq!(pool.choose(readmitted, &[false, true], (0, 0)), Choice::Healthy(0), "its answer ends the probation");
}

#[test]
fn an_instance_whose_request_waits_longer_than_the_others_answer_draws_no_more() {
    let mut pool = Rules::new(2, NO_JITTER);
    let t0 = Instant::now();
    for _ in 0..5 {
        for instance in [0, 1] {
            let attempt = pool.start(instance, t0);
            pool.succeeded(attempt, Duration::from_millis(50));
            pool.end(attempt);
        }
    }
    let _stuck = pool.start(1, t0);
    for _ in 0..2 {
        let streaming = pool.start(0, t0);
        pool.succeeded(streaming, Duration::from_millis(50));
    }
    // Instance 0 has more in flight, but instance 1's request has waited
    // 300 ms where answers take 50: it is the worse choice.
    let later = t0 + Duration::from_millis(300);
    assert_eq!(pool.choose(later, &[false, false], (0, 1)), Choice::Healthy(0));
    assert_eq!(pool.choose(later, &[false, false], (1, 0)), Choice::Healthy(0));
    assert_eq!(pool.choose(t0, &[false, false], (0, 1)), Choice::Healthy(1), "before it waited long, load decides");
}
