//! A broker's log directories (issue 26 item 2) on the real lab: each broker has a second
//! log directory on a small tmpfs (`kafka-lab up --log-dirs 2`); filling broker 2's
//! (`kafka-lab fill 2`) makes Kafka take it offline while the broker stays up. The watchdog
//! names broker 2, the directory and what it cost within a round, pages once (the
//! partitions it moved are inside that incident), and no other broker; healed (the filler
//! removed, the broker restarted), it resolves. The lab's layout is its own: the next test
//! file's lab starts again.

mod common;

use std::time::{Duration, Instant};

use common::watchdog::{has, is_event, Receiver};
use common::{eventually, lab_with};
use kafka_lab::UpOptions;

/// One round (10 s) and the incident's confirmation, with slack.
const NAME_BOUND: Duration = Duration::from_secs(20);
const PAGE_BOUND: Duration = Duration::from_secs(25);

#[test]
fn a_failed_log_directory_names_its_broker_and_directory_and_the_broker_stays_up() {
    let mut lab = lab_with(UpOptions {
        version: common::release(),
        log_dirs: 2,
        ..UpOptions::default()
    });
    let rx = Receiver::start();
    let w = common::watchdog::start_default_timing("logdirs", &rx, "");
    eventually(
        Duration::from_secs(60),
        "every broker healthy, two log dirs each",
        || {
            let s = w.status();
            let brokers = s["clusters"][0]["brokers"].as_array()?.clone();
            let ok = brokers.len() == 3
                && brokers.iter().all(|b| {
                    b["state"] == "healthy"
                        && b["log_dirs"].as_array().is_some_and(|d| d.len() == 2)
                });
            ok.then_some(())
        },
    );
    assert_eq!(
        w.metric("kafka_watchdog_broker_log_dir_offline", &[("broker", "2")]),
        Some(0.0)
    );
    // Each broker describes its own filesystem, never the host's disk the lab and the
    // build share (CI's, 3 % free, once made all three brokers "run out of space").
    for b in lab.brokers() {
        let first = lab.log_dir_paths(b)[0].display().to_string();
        assert_eq!(
            w.metric(
                "kafka_watchdog_broker_log_dir_total_bytes",
                &[("broker", &b.to_string()), ("path", &first)]
            ),
            Some(f64::from(kafka_lab::logdirs::DATA_DIR_MIB) * 1048576.0),
            "broker {b}'s {first}"
        );
    }
    let before = rx.received().len();
    let filled = lab.fill(2).unwrap();
    let filled_at = Instant::now();
    eprintln!(
        "filled: {} ({} partitions there)",
        filled.dir.display(),
        filled.partitions.len()
    );
    eventually(NAME_BOUND, "broker 2's failed log directory named", || {
        w.rules(2)
            .iter()
            .any(|r| r == "log_dir_failed")
            .then_some(())
    });
    let named_after = filled_at.elapsed();
    let b = w.broker(2).unwrap();
    let hit = b["hits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["rule"] == "log_dir_failed")
        .cloned()
        .unwrap();
    let detail = hit["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("data2") && detail.contains("KAFKA_STORAGE_ERROR"),
        "{detail}"
    );
    let path = filled.dir.display().to_string();
    assert_eq!(
        w.metric(
            "kafka_watchdog_broker_log_dir_offline",
            &[("broker", "2"), ("path", &path)]
        ),
        Some(1.0)
    );
    let v = rx.wait("opened broker 2", PAGE_BOUND, |v| {
        is_event(v, "opened", "broker", Some(2))
    });
    let paged_after = filled_at.elapsed();
    assert!(has(&v, "evidence", "log_dir_failed"), "{v:#}");
    eprintln!(
        "broker 2's log directory filled: named after {:.1} s, paged after {:.1} s",
        named_after.as_secs_f64(),
        paged_after.as_secs_f64()
    );
    // It stays up: alive, answering, a zombie of nothing.
    assert!(lab.running_pid(2).is_some());
    assert_ne!(w.broker_state(2).as_deref(), Some("down"));
    for b in [1, 3] {
        assert_eq!(w.broker_state(b).as_deref(), Some("healthy"), "broker {b}");
    }
    std::thread::sleep(Duration::from_secs(10));
    let wrong: Vec<_> = rx
        .received()
        .into_iter()
        .skip(before)
        .filter(|v| v["event"] == "opened" && !is_event(v, "opened", "broker", Some(2)))
        .filter(|v| {
            !v["suspects"]
                .as_array()
                .is_some_and(|s| s.iter().all(|b| b == 2))
        })
        .collect();
    assert!(wrong.is_empty(), "other nodes named: {wrong:#?}");
    lab.heal(Some(2)).unwrap();
    rx.wait("resolved broker 2", Duration::from_secs(90), |v| {
        is_event(v, "resolved", "broker", Some(2))
    });
    drop(w);
}
