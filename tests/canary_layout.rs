//! The canary topic follows the brokers: a broker that joins gets a partition it leads, a
//! broker that leaves has its replicas moved away, each once the broker set has been stable
//! for a while, never in a loop. This test grows the lab to four brokers, so it takes the
//! lab down at the end; the next test starts a fresh three-broker one.

mod common;

use std::time::Duration;

use common::watchdog::{Watchdog, WatchdogSettings};
use common::{eventually, lab, unique_topic};

const WAIT: Duration = Duration::from_secs(120);

/// This round's layout notes, tagged with the round so a note read twice counts once.
fn layout_notes(w: &Watchdog) -> Vec<(u64, String)> {
    let s = w.status();
    let round = s["clusters"][0]["round"].as_u64().unwrap_or(0);
    s["clusters"][0]["canary"]["layout"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str().map(|n| (round, n.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn count(notes: &std::collections::BTreeSet<(u64, String)>, prefix: &str) -> usize {
    notes.iter().filter(|(_, n)| n.starts_with(prefix)).count()
}

#[test]
fn canary_topic_follows_a_broker_that_joins_and_one_that_leaves_without_looping() {
    let mut lab = lab();
    let topic = unique_topic("kwc-layout");
    let w = Watchdog::start(
        "layout",
        &WatchdogSettings {
            canary_yaml: format!(
                "      topic: {topic}\n      reassign_stable_secs: 6\n      reassign_min_interval_secs: 10\n      elect_preferred_leaders: true\n"
            ),
            ..WatchdogSettings::default()
        },
    );
    eventually(WAIT, "three canary partitions", || {
        (w.canary()["partitions"].as_array()?.len() == 3).then_some(())
    });

    lab.start(4).unwrap();
    let mut notes = std::collections::BTreeSet::new();
    let c = eventually(WAIT, "a canary partition led by the new broker 4", || {
        notes.extend(layout_notes(&w));
        let c = w.canary();
        let ps = c["partitions"].as_array()?;
        (ps.len() == 4
            && ps
                .iter()
                .any(|p| p["leader"] == 4 && p["produce_seconds"].is_number()))
        .then_some(c)
    });
    eprintln!("after broker 4 joined: {}", c["partitions"]);
    // Watch a while longer: the layout settles, nothing is added or moved again.
    for _ in 0..15 {
        notes.extend(layout_notes(&w));
        std::thread::sleep(Duration::from_secs(1));
    }
    let added = count(&notes, "adding partitions");
    assert_eq!(added, 1, "partitions added exactly once: {notes:#?}");
    assert_eq!(
        count(&notes, "moving replicas"),
        0,
        "nothing moved while the set only grew: {notes:#?}"
    );

    lab.stop(4).unwrap();
    let mut notes = std::collections::BTreeSet::new();
    eventually(
        WAIT,
        "no canary replica left on the stopped broker 4",
        || {
            notes.extend(layout_notes(&w));
            let c = w.canary();
            let ps = c["partitions"].as_array()?;
            (ps.len() == 4
                && ps.iter().all(|p| {
                    !p["replicas"]
                        .as_array()
                        .unwrap()
                        .contains(&serde_json::json!(4))
                        && p["produce_seconds"].is_number()
                }))
            .then_some(())
        },
    );
    for _ in 0..15 {
        notes.extend(layout_notes(&w));
        std::thread::sleep(Duration::from_secs(1));
    }
    eprintln!("layout notes after broker 4 left: {notes:#?}");
    let moves = count(&notes, "moving replicas");
    assert_eq!(moves, 1, "replicas moved exactly once: {notes:#?}");
    let c = w.canary();
    let mut leaders: Vec<i64> = c["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["leader"].as_i64().unwrap())
        .collect();
    leaders.sort_unstable();
    leaders.dedup();
    assert_eq!(
        leaders,
        vec![1, 2, 3],
        "every remaining broker leads: {c:#}"
    );
    drop(w);
    lab.take_down();
}
