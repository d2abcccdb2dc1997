//! Every breaker rule with instants chosen by the test: no clock, no sleep.

use std::time::Duration;

use tokio::time::Instant;

use super::*;

const FAIL: Outcome = Outcome::Failure { retry_after: None };

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn pass(b: &mut Breaker, now: Instant) -> Pass {
    match b.admit(now) {
        Admission::Pass(pass) => pass,
        Admission::Refused { retry_after } => panic!("refused, {retry_after:?} left"),
    }
}

fn refused(b: &mut Breaker, now: Instant) -> Duration {
    match b.admit(now) {
        Admission::Refused { retry_after } => retry_after,
        Admission::Pass(pass) => panic!("admitted: {pass:?}"),
    }
}

fn fail_times(b: &mut Breaker, now: Instant, n: u32) -> Transition {
    let mut last = Transition::None;
    for _ in 0..n {
        let p = pass(b, now);
        last = b.record(now, p, FAIL);
    }
    last
}

#[test]
fn two_failures_a_success_two_failures_stays_closed_and_a_third_opens() {
    let t0 = Instant::now();
    let mut b = Breaker::default();
    fail_times(&mut b, t0, 2);
    let p = pass(&mut b, t0);
    b.record(t0, p, Outcome::Answer);
    assert_eq!(fail_times(&mut b, t0, 2), Transition::None);
    assert_eq!(b.state(t0), BreakerState::Closed);
    assert_eq!(fail_times(&mut b, t0, 1), Transition::Opened(FIRST_OPEN));
}

#[test]
fn answers_of_500_and_501_never_open_it() {
    // The caller classifies 500 and 501 as answers.
    let t0 = Instant::now();
    let mut b = Breaker::default();
    for _ in 0..20 {
        let p = pass(&mut b, t0);
        assert_eq!(b.record(t0, p, Outcome::Answer), Transition::None);
    }
    assert_eq!(b.state(t0), BreakerState::Closed);
}

#[test]
fn refused_until_thirty_seconds_then_exactly_one_probe() {
    let t0 = Instant::now();
    let mut b = Breaker::default();
    fail_times(&mut b, t0, 3);
    let left = refused(&mut b, t0 + secs(29.999));
    assert!(left <= secs(0.001) + Duration::from_nanos(1) && left > Duration::ZERO, "{left:?}");
    let at = t0 + secs(30.0);
    let mut passes = 0;
    for _ in 0..50 {
        match b.admit(at) {
            Admission::Pass(p) => {
                assert!(p.is_probe());
                passes += 1;
            }
            Admission::Refused { retry_after } => assert!(retry_after >= Duration::from_secs(1)),
        }
    }
    assert_eq!(passes, 1, "exactly one of 50 concurrent requests is the probe");
}

#[test]
fn a_probe_that_keeps_failing_doubles_the_open_time_up_to_ten_minutes() {
    let mut now = Instant::now();
    let mut b = Breaker::default();
    assert_eq!(fail_times(&mut b, now, 3), Transition::Opened(secs(30.0)));
    let mut seen = vec![];
    for _ in 0..7 {
        let BreakerState::Open(left) = b.state(now) else { panic!("not open") };
        now += left;
        let probe = pass(&mut b, now);
        assert!(probe.is_probe());
        let Transition::Opened(open) = b.record(now, probe, FAIL) else { panic!("probe failure must reopen") };
        seen.push(open.as_secs());
    }
    assert_eq!(seen, [60, 120, 240, 480, 600, 600, 600]);
}

#[test]
fn a_successful_probe_closes_it_and_the_next_trip_starts_at_thirty_seconds() {
    let mut now = Instant::now();
    let mut b = Breaker::default();
    fail_times(&mut b, now, 3);
    now += secs(30.0);
    let probe = pass(&mut b, now);
    assert_eq!(b.record(now, probe, FAIL), Transition::Opened(secs(60.0)));
    now += secs(60.0);
    let probe = pass(&mut b, now);
    assert_eq!(b.record(now, probe, Outcome::Answer), Transition::Closed);
    assert_eq!(b.state(now), BreakerState::Closed);
    assert_eq!(fail_times(&mut b, now, 3), Transition::Opened(secs(30.0)));
}

#[test]
fn retry_after_opens_at_once_and_is_capped() {
    let t0 = Instant::now();
    for (asked, open) in [(120, 120), (3600, 600), (0, 0)] {
        let mut b = Breaker::default();
        let p = pass(&mut b, t0);
        let outcome = Outcome::Failure { retry_after: Some(Duration::from_secs(asked)) };
        assert_eq!(b.record(t0, p, outcome), Transition::Opened(Duration::from_secs(open)), "Retry-After: {asked}");
    }
}

#[test]
fn an_abandoned_probe_frees_the_slot_for_the_next_request() {
    let t0 = Instant::now();
    let mut b = Breaker::default();
    fail_times(&mut b, t0, 3);
    let at = t0 + secs(30.0);
    let probe = pass(&mut b, at);
    refused(&mut b, at);
    b.abandon(at, probe);
    let next = pass(&mut b, at + secs(0.5));
    assert!(next.is_probe(), "the next request becomes the probe");
    assert_eq!(b.record(at, next, Outcome::Answer), Transition::Closed);
}

#[test]
fn answers_of_requests_in_flight_when_it_opened_say_nothing() {
    let t0 = Instant::now();
    let mut b = Breaker::default();
    let early_success = pass(&mut b, t0);
    let early_failure = pass(&mut b, t0);
    fail_times(&mut b, t0, 3);
    assert_eq!(b.record(t0, early_success, Outcome::Answer), Transition::None);
    assert!(matches!(b.state(t0), BreakerState::Open(_)), "an old success does not close it");
    let at = t0 + secs(30.0);
    let probe = pass(&mut b, at);
    assert_eq!(b.record(at, early_failure, FAIL), Transition::None, "an old failure does not reopen it");
    assert_eq!(b.state(at), BreakerState::Probing);
    assert_eq!(b.record(at, probe, Outcome::Answer), Transition::Closed);
}

#[test]
fn a_non_probe_success_after_opening_does_not_count_as_the_probe() {
    let t0 = Instant::now();
    let mut b = Breaker::default();
    fail_times(&mut b, t0, 3);
    let at = t0 + secs(30.0);
    let _probe = pass(&mut b, at);
    // A pass of the same generation but not the probe cannot exist while
    // probing; a forged one says nothing.
    let other = Pass { generation: b.generation, probe: None };
    assert_eq!(b.record(at, other, Outcome::Answer), Transition::None);
    assert_eq!(b.state(at), BreakerState::Probing);
}

#[test]
fn long_outages_do_not_overflow() {
    let mut now = Instant::now();
    let mut b = Breaker::default();
    fail_times(&mut b, now, 3);
    for _ in 0..200 {
        now += MAX_OPEN;
        let probe = pass(&mut b, now);
        b.record(now, probe, FAIL);
    }
    assert_eq!(b.state(now), BreakerState::Open(MAX_OPEN));
}

#[test]
fn a_breaker_another_node_opened_refuses_until_then_ignores_older_news_and_lifts() {
    let t0 = Instant::now();
    let mut b = Breaker::default();
    let before = pass(&mut b, t0);
    assert!(b.impose(t0, t0 + secs(30.0)));
    assert_eq!(refused(&mut b, t0 + secs(10.0)), secs(20.0));
    // A shorter opening from another node changes nothing; a request
    // admitted before the opening reports nothing.
    assert!(!b.impose(t0, t0 + secs(5.0)));
    assert_eq!(b.record(t0 + secs(11.0), before, Outcome::Answer), Transition::None);
    assert_eq!(refused(&mut b, t0 + secs(11.0)), secs(19.0));
    // The time is up: one probe, as for a breaker this node opened.
    let probe = pass(&mut b, t0 + secs(30.0));
    assert!(probe.probe.is_some());
    refused(&mut b, t0 + secs(30.5));
    // The cluster heard the host answer: open to all at once.
    b.lift();
    pass(&mut b, t0 + secs(31.0));
    pass(&mut b, t0 + secs(31.0));
    assert!(!b.impose(t0 + secs(40.0), t0 + secs(39.0)), "a time already past opens nothing");
}
