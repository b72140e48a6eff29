//! Two watchdogs on one cluster (issue 9): each has its own instance id, both canaries work
//! on the same canary topic, neither judges the other's records lost, and their webhooks for
//! the same fault carry the same deduplication key, so Alertmanager or PagerDuty merges them.

mod common;

use std::time::Duration;

use common::watchdog::{is_event, metric_sum, metric_value, Receiver, Watchdog, WatchdogSettings};
use common::{eventually, lab, unique_topic};

const WAIT: Duration = Duration::from_secs(120);

fn start(instance: &str, canary_topic: &str, rx: &Receiver) -> Watchdog {
    let s = WatchdogSettings {
        canary_yaml: format!("      topic: {canary_topic}\n      lost_after_secs: 10\n"),
        extra_cluster_yaml: "    verdict:\n      open_after_secs: 2\n      resolve_after_secs: 2\n"
            .into(),
        extra_top_yaml: rx.yaml(),
        ..WatchdogSettings::default()
    };
    Watchdog::start_yaml(&format!("ha-{instance}"), |port, dir| {
        Watchdog::config_yaml(port, dir, &s)
            .replace("instance_id: test", &format!("instance_id: {instance}"))
    })
}

#[test]
fn two_instances_share_the_canary_topic_and_the_deduplication_keys() {
    let mut lab = lab();
    let topic = unique_topic("kwc-ha");
    let rx = Receiver::start();
    let a = start("dc-a", &topic, &rx);
    let b = start("dc-b", &topic, &rx);
    // Both canaries round-trip on every partition, reading each other's records as well.
    for w in [&a, &b] {
        eventually(WAIT, "canary round trips on every broker", || {
            let scrape = w.metrics();
            (1..=3)
                .all(|id| {
                    metric_value(
                        &scrape,
                        "kafka_watchdog_canary_end_to_end_seconds_count",
                        &[("broker", &id.to_string())],
                    )
                    .is_some_and(|n| n >= 3.0)
                })
                .then_some(())
        });
    }
    // Longer than lost_after (10 s): a record judged by the wrong instance would be lost by now.
    std::thread::sleep(Duration::from_secs(25));
    for (name, w) in [("dc-a", &a), ("dc-b", &b)] {
        let scrape = w.metrics();
        assert_eq!(
            metric_sum(&scrape, "kafka_watchdog_canary_records_lost_total", &[]),
            0.0,
            "{name} judged no record lost"
        );
        assert_eq!(
            metric_sum(
                &scrape,
                "kafka_watchdog_canary_records_duplicated_total",
                &[]
            ),
            0.0,
            "{name} saw no duplicate"
        );
        let c = w.canary();
        assert!(c["lost"].as_array().unwrap().is_empty(), "{name}: {c:#}");
    }
    assert!(
        rx.received().is_empty(),
        "a healthy cluster watched twice raises nothing: {:#?}",
        rx.received()
    );

    // One fault, seen by both: two notifications, one deduplication key.
    lab.freeze(2).unwrap();
    let from = |instance: &'static str| {
        move |v: &serde_json::Value| {
            is_event(v, "opened", "broker", Some(2))
                && v["state"] == "zombie"
                && v["instance_id"] == instance
        }
    };
    let va = rx.wait("dc-a opened broker 2 zombie", WAIT, from("dc-a"));
    let vb = rx.wait("dc-b opened broker 2 zombie", WAIT, from("dc-b"));
    assert_eq!(va["dedup_key"], vb["dedup_key"], "{va:#}\n{vb:#}");
    assert_eq!(va["dedup_key"], "kafka-watchdog/lab/broker-2/broker");
    assert_ne!(va["notification_id"], vb["notification_id"]);
    lab.thaw(2).unwrap();
    for instance in ["dc-a", "dc-b"] {
        rx.wait(&format!("{instance} resolved broker 2"), WAIT, |v| {
            is_event(v, "resolved", "broker", Some(2)) && v["instance_id"] == instance
        });
    }
    drop((a, b));
    let _ = kafka_lab::client::delete_topic(&lab.bootstrap(), &topic);
}
