//! A broker's log directories (issue 26 item 2): one Kafka took offline is named with the
//! partitions it cost; one whose free space runs out at its recent pace, or below 5 %, is
//! a warning before it is full. Both `degraded`: the broker serves the rest.

use super::*;
use crate::model::round::LogDirState;

const GIB: u64 = 1 << 30;

fn dir(path: &str, error_code: i16, usable_gib: u64) -> LogDirState {
    LogDirState {
        dir: path.into(),
        error_code,
        total_bytes: Some(100 * GIB),
        usable_bytes: (error_code == 0).then_some(usable_gib * GIB),
    }
}

fn rules(v: &BrokerVerdict) -> Vec<&'static str> {
    v.hits.iter().map(|h| h.rule.name()).collect()
}

#[test]
fn a_failed_log_directory_names_the_broker_the_directory_and_its_offline_partitions() {
    let mut w = World::healthy();
    w.answering(2, 2).log_dirs = Some(Ok(vec![dir("/data/a", 0, 60), dir("/data/b", 56, 0)]));
    // Metadata names broker 2 an offline replica of t-1.
    w.offline = vec![(1, 2)];
    w.refresh();
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Degraded, "{:?}", v[&2].hits);
    let hit = v[&2]
        .hits
        .iter()
        .find(|h| h.rule == Rule::LogDirFailed)
        .unwrap();
    assert!(
        hit.detail.contains("/data/b (KAFKA_STORAGE_ERROR)"),
        "{}",
        hit.detail
    );
    assert!(
        hit.detail.contains("of its 2 directories"),
        "{}",
        hit.detail
    );
    assert!(hit.detail.contains("t-1"), "{}", hit.detail);
    for b in [1, 3] {
        assert!(!rules(&v[&b]).contains(&"log_dir_failed"), "broker {b}");
    }
}

#[test]
fn a_directory_filling_at_its_pace_is_a_warning_before_it_is_full() {
    let mut w = World::healthy();
    let mut memory = BTreeMap::new();
    // Losing 1 GiB every 5 min: under 2 h left once the pace is known.
    for (i, secs) in [1000u64, 1300, 1600, 1900].iter().enumerate() {
        w.answering(2, 2).log_dirs = Some(Ok(vec![dir("/data/a", 0, 23 - i as u64)]));
        let v = w.round(&mut memory, *secs);
        let filling = rules(&v[&2]).contains(&"log_dir_filling");
        // Ten minutes of the earlier rounds' history are needed for a pace.
        assert_eq!(filling, *secs >= 1900, "at {secs}: {:?}", v[&2].hits);
    }
    w.answering(2, 2).log_dirs = Some(Ok(vec![dir("/data/a", 0, 19)]));
    let v = w.round(&mut memory, 2200);
    let hit = v[&2]
        .hits
        .iter()
        .find(|h| h.rule == Rule::LogDirFilling)
        .unwrap();
    assert!(hit.detail.contains("full in about 1.7 h"), "{}", hit.detail);
    assert_eq!(v[&2].state, BrokerState::Degraded);
}

#[test]
fn low_free_space_is_a_warning_whatever_the_pace_and_plenty_is_nothing() {
    let mut w = World::healthy();
    w.answering(2, 2).log_dirs = Some(Ok(vec![dir("/data/a", 0, 4)]));
    w.answering(3, 2).log_dirs = Some(Ok(vec![dir("/data/a", 0, 60)]));
    let v = w.judge();
    assert!(
        rules(&v[&2]).contains(&"log_dir_filling"),
        "{:?}",
        v[&2].hits
    );
    assert_eq!(v[&3].state, BrokerState::Healthy, "{:?}", v[&3].hits);
}

/// The thresholds are the operator's (`verdict.log_dir_min_free_ratio`,
/// `verdict.log_dir_full_within_secs`): a big disk at 8 % free may be news, and a forecast
/// may be off.
#[test]
fn the_free_space_thresholds_are_settings() {
    let mut w = World::healthy();
    w.answering(2, 2).log_dirs = Some(Ok(vec![dir("/data/a", 0, 8)]));
    let memory = BTreeMap::new();
    let v = w.judge_at_with(&memory, 1000, &VerdictSettings::default());
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2].hits);
    let stricter = VerdictSettings {
        log_dir_min_free_ratio: 0.1,
        log_dir_full_within: Duration::ZERO,
        ..VerdictSettings::default()
    };
    let filling = |v: &BTreeMap<i32, BrokerVerdict>| {
        v[&2]
            .hits
            .iter()
            .find(|h| h.rule == Rule::LogDirFilling)
            .map(|h| h.detail.clone())
            .unwrap_or_default()
    };
    let detail = filling(&w.judge_at_with(&memory, 1000, &stricter));
    assert!(
        detail.starts_with("log directory space runs out (below 10% free): /data/a: 8.0 GiB free"),
        "{detail}"
    );
    // The default wording stays as it was.
    w.answering(2, 2).log_dirs = Some(Ok(vec![dir("/data/a", 0, 4)]));
    let detail = filling(&w.judge_at_with(&memory, 1000, &VerdictSettings::default()));
    assert!(
        detail.starts_with("log directory space runs out (below 5% free, or full within 6 h): "),
        "{detail}"
    );
}
