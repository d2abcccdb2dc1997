//! Auto-offline edges and settling, with looks and instants the tests
//! choose.

use super::*;

const ONLINE: HostLook = HostLook { default_route: true, airplane: false };
const NO_ROUTE: HostLook = HostLook { default_route: false, airplane: false };
const AIRPLANE: HostLook = HostLook { default_route: false, airplane: true };

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn controller(trigger: Trigger, mode: Mode) -> (AutoOffline, Switch) {
    let switch = Switch::new(mode);
    (AutoOffline::new(trigger, switch.clone()), switch)
}

#[test]
fn a_lost_route_must_hold_five_seconds_before_offline_takes_effect() {
    let (auto, switch) = controller(Trigger::Network, Mode::StoreOverloaded);
    let t0 = Instant::now();
    auto.observe(t0, NO_ROUTE);
    auto.observe(t0 + secs(4), NO_ROUTE);
    assert_eq!(switch.mode(), Mode::StoreOverloaded);
    auto.observe(t0 + secs(5), NO_ROUTE);
    assert_eq!(switch.mode(), Mode::Offline);
    let report = auto.report();
    assert_eq!(report.in_effect, Some((Mode::StoreOverloaded, Reason::NoNetwork)));

    // Back online: the configured mode returns, after settling too.
    auto.observe(t0 + secs(10), ONLINE);
    assert_eq!(switch.mode(), Mode::Offline);
    auto.observe(t0 + secs(15), ONLINE);
    assert_eq!(switch.mode(), Mode::StoreOverloaded);
    assert_eq!(auto.report().in_effect, None);
}

#[test]
fn a_blip_shorter_than_the_settle_time_changes_nothing() {
    let (auto, switch) = controller(Trigger::Network, Mode::Never);
    let t0 = Instant::now();
    auto.observe(t0, NO_ROUTE);
    auto.observe(t0 + secs(3), ONLINE);
    auto.observe(t0 + secs(6), NO_ROUTE);
    auto.observe(t0 + secs(10), NO_ROUTE);
    assert_eq!(switch.mode(), Mode::Never, "the second loss has held 4 s only");
    auto.observe(t0 + secs(11), NO_ROUTE);
    assert_eq!(switch.mode(), Mode::Offline);
}

#[test]
fn rfkill_names_the_reason() {
    let (auto, _) = controller(Trigger::Network, Mode::Never);
    let t0 = Instant::now();
    auto.observe(t0, AIRPLANE);
    auto.observe(t0 + secs(5), AIRPLANE);
    assert_eq!(auto.report().in_effect, Some((Mode::Never, Reason::AirplaneMode)));
}

#[test]
fn the_airplane_trigger_ignores_routes() {
    let (auto, switch) = controller(Trigger::AirplaneMode, Mode::Never);
    let t0 = Instant::now();
    auto.observe(t0, NO_ROUTE);
    auto.observe(t0 + secs(10), NO_ROUTE);
    assert_eq!(switch.mode(), Mode::Never);
    let radios_off = HostLook { default_route: true, airplane: true };
    auto.observe(t0 + secs(11), radios_off);
    auto.observe(t0 + secs(16), radios_off);
    assert_eq!(switch.mode(), Mode::Offline);
}

#[test]
fn an_explicit_switch_wins_until_the_host_next_goes_offline() {
    let (auto, switch) = controller(Trigger::Network, Mode::Never);
    let t0 = Instant::now();
    auto.observe(t0, NO_ROUTE);
    auto.observe(t0 + secs(5), NO_ROUTE);
    assert_eq!(switch.mode(), Mode::Offline);
    // The user switches to store-overloaded while the host is still offline.
    auto.explicit(Mode::StoreOverloaded);
    switch.set_mode(Mode::StoreOverloaded);
    auto.observe(t0 + secs(30), NO_ROUTE);
    assert_eq!(switch.mode(), Mode::StoreOverloaded, "no edge, no change");
    // Coming back online is an edge, but there is no override to undo.
    auto.observe(t0 + secs(31), ONLINE);
    auto.observe(t0 + secs(36), ONLINE);
    assert_eq!(switch.mode(), Mode::StoreOverloaded);
    // The next loss overrides again, and returns to the explicit choice.
    auto.observe(t0 + secs(40), NO_ROUTE);
    auto.observe(t0 + secs(45), NO_ROUTE);
    assert_eq!(switch.mode(), Mode::Offline);
    assert_eq!(auto.report().in_effect, Some((Mode::StoreOverloaded, Reason::NoNetwork)));
}

#[test]
fn the_configure_hook_re_applying_the_mode_keeps_the_override() {
    let (auto, switch) = controller(Trigger::Network, Mode::Never);
    let t0 = Instant::now();
    auto.observe(t0, NO_ROUTE);
    auto.observe(t0 + secs(5), NO_ROUTE);
    assert!(!auto.reconfigure(Mode::StoreOverloaded), "offline stays in effect");
    assert_eq!(switch.mode(), Mode::Offline);
    auto.observe(t0 + secs(6), ONLINE);
    auto.observe(t0 + secs(11), ONLINE);
    assert_eq!(switch.mode(), Mode::StoreOverloaded, "the hook's mode returns with the network");
    assert!(auto.reconfigure(Mode::Never), "without an override the hook's mode applies at once");
}

#[test]
fn off_watches_nothing() {
    let (auto, switch) = controller(Trigger::Off, Mode::Never);
    let t0 = Instant::now();
    auto.observe(t0, NO_ROUTE);
    auto.observe(t0 + secs(60), NO_ROUTE);
    assert_eq!(switch.mode(), Mode::Never);
    assert_eq!(Trigger::parse("network"), Ok(Trigger::Network));
    assert!(Trigger::parse("sometimes").is_err());
}
