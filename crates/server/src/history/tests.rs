use super::*;
use pkgproxy_metrics::Counters;

/// Each side's counters, as `crate::stats` keeps them.
struct Sides(Vec<Counters<SideCounter>>);

impl Sides {
    fn new() -> Sides {
        Sides(SideId::ALL.iter().map(|_| Counters::default()).collect())
    }

    fn add(&self, side: SideId, counter: SideCounter, by: u64) {
        self.0[side.index()].add(counter, by);
    }

    fn snapshot(&self) -> Vec<Snapshot<SideCounter>> {
        self.0.iter().map(Counters::snapshot).collect()
    }
}

/// A time on a quarter hour's start, for round stretch numbers.
const START: u64 = 1_800_000_000 / 900 * 900;

fn requests(series: &TrafficSeries) -> Vec<u64> {
    series.stretches.iter().map(|stretch| stretch.requests).collect()
}

#[test]
fn traffic_lands_in_the_minute_and_quarter_hour_it_was_seen_in_the_one_under_way_included() {
    let (history, counters) = (History::default(), Sides::new());
    let npm = SideId::Npm;
    counters.add(npm, SideCounter::Requests, 5);
    counters.add(npm, SideCounter::Hits, 4);
    counters.add(npm, SideCounter::BytesFromCache, 4096);
    history.look(START + 10, counters.snapshot());
    counters.add(npm, SideCounter::Requests, 2);
    counters.add(npm, SideCounter::Misses, 2);
    counters.add(npm, SideCounter::BytesFromUpstream, 100);
    history.look(START + 130, counters.snapshot());
    history.look(START + 135, counters.snapshot()); // nothing moved

    let hour = history.series(npm, HOUR, START + 150);
    assert_eq!((hour.stretches.len(), hour.step_seconds), (60, 60));
    assert_eq!(hour.start, START + 120 - 59 * 60, "the last stretch is the minute under way");
    assert_eq!(&requests(&hour)[57..], [5, 0, 2]);
    assert_eq!((hour.stretches[57].hits, hour.stretches[57].bytes_from_cache), (4, 4096));
    assert_eq!((hour.stretches[59].misses, hour.stretches[59].bytes_from_upstream), (2, 100));

    let day = history.series(npm, DAY, START + 150);
    assert_eq!((day.stretches.len(), day.step_seconds, day.start), (96, 900, START - 95 * 900));
    assert_eq!(day.stretches[95].requests, 7, "both minutes are in this quarter hour");
    assert_eq!(day.stretches[95].hits + day.stretches[95].misses, 6);
    assert!(requests(&history.series(SideId::Go, DAY, START + 150)).iter().all(|r| *r == 0));
}

#[test]
fn the_hour_forgets_after_an_hour_and_the_day_after_a_day() {
    let (history, counters) = (History::default(), Sides::new());
    counters.add(SideId::Pypi, SideCounter::Requests, 3);
    history.look(START, counters.snapshot());
    let later =
        |seconds| history.series(SideId::Pypi, DAY, START + seconds).stretches.iter().map(|s| s.requests).sum::<u64>();
    assert_eq!(requests(&history.series(SideId::Pypi, HOUR, START + 3599)).iter().sum::<u64>(), 3);
    assert_eq!(requests(&history.series(SideId::Pypi, HOUR, START + 3600)).iter().sum::<u64>(), 0, "an hour on");
    assert_eq!(later(86_399), 3u64, "still in the day");
    assert_eq!(later(86_400), 0u64, "a day on");
    history.look(START + 86_400, counters.snapshot());
    assert!(history.kept().quarters.is_empty() && history.kept().minutes.is_empty(), "let go of: {:?}", history.kept());
}

#[test]
fn a_restart_within_the_day_adds_to_the_days_traffic_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (before, counters) = (History::default(), Sides::new());
    counters.add(SideId::Cargo, SideCounter::Requests, 9);
    counters.add(SideId::Cargo, SideCounter::Refused, 1);
    before.look(START + 60, counters.snapshot());
    save(dir.path(), &before.kept()).unwrap();

    // Two hours on, the counters start again from zero.
    let after = History::with(load(dir.path()), START + 7200);
    let fresh = Sides::new();
    fresh.add(SideId::Cargo, SideCounter::Requests, 1);
    after.look(START + 7200, fresh.snapshot());
    let day = after.series(SideId::Cargo, DAY, START + 7200);
    assert_eq!(day.stretches[95 - 8].requests, 9, "the day before the restart: {:?}", requests(&day));
    assert_eq!(day.stretches[95 - 8].refused, 1);
    assert_eq!(day.stretches[95].requests, 1, "and after it");
    assert_eq!(requests(&after.series(SideId::Cargo, HOUR, START + 7200)).iter().sum::<u64>(), 1);
}

#[test]
fn a_missing_torn_or_foreign_file_starts_the_charts_empty() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(load(dir.path()), Kept::default(), "missing");
    std::fs::write(dir.path().join(FILE_NAME), br#"{"version":1,"minutes":{"3":{"npm":{"requ"#).unwrap();
    assert_eq!(load(dir.path()), Kept::default(), "torn");
    std::fs::write(dir.path().join(FILE_NAME), br#"{"version":99,"minutes":{},"quarters":{}}"#).unwrap();
    assert_eq!(load(dir.path()), Kept::default(), "another layout");
    let unknown =
        br#"{"version":1,"minutes":{},"quarters":{"7":{"gem":{"requests":1,"hits":0,"misses":0,"failed":0}}}}"#;
    std::fs::write(dir.path().join(FILE_NAME), unknown).unwrap();
    let kept = load(dir.path());
    assert!(kept.quarters[&7].iter().all(|traffic| *traffic == Traffic::default()), "a side not known is left out");
}
