//! The daemon's core against the real lab: direct per-broker probes, partition health
//! attributed to brokers, and the HTTP surface staying prompt while a broker hangs.

mod common;

use std::time::{Duration, Instant};

use common::watchdog::{metric_value, Watchdog, WatchdogSettings};
use common::{eventually, lab, unique_topic};
use kafka_lab::client;

const WAIT: Duration = Duration::from_secs(60);

fn start(name: &str) -> Watchdog {
    Watchdog::start(name, &WatchdogSettings::default())
}

#[test]
fn healthy_cluster_reports_every_broker_healthy_and_valid_metrics() {
    let lab = lab();
    let topic = unique_topic("core-healthy");
    client::create_topic(
        &lab.bootstrap(),
        &topic,
        &[vec![1, 2, 3], vec![2, 3, 1]],
        &[],
    )
    .unwrap();
    let w = start("healthy");
    // A couple of rounds, so rates and counters have moved.
    std::thread::sleep(Duration::from_secs(5));
    let scrape = w.metrics();
    for id in ["1", "2", "3"] {
        assert_eq!(
            metric_value(
                &scrape,
                "kafka_watchdog_broker_up",
                &[("cluster", "lab"), ("broker", id)]
            ),
            Some(1.0),
            "broker {id} up"
        );
        assert_eq!(
            metric_value(
                &scrape,
                "kafka_watchdog_broker_state",
                &[("broker", id), ("state", "healthy")]
            ),
            Some(1.0)
        );
        assert!(metric_value(
            &scrape,
            "kafka_watchdog_broker_request_seconds",
            &[("broker", id), ("request", "metadata")]
        )
        .is_some_and(|v| v > 0.0 && v < 2.0));
    }
    for state in ["offline", "under_replicated", "under_min_isr"] {
        assert_eq!(
            metric_value(
                &scrape,
                "kafka_watchdog_partitions",
                &[("cluster", "lab"), ("state", state)]
            ),
            Some(0.0),
            "{state}"
        );
    }
    assert!(metric_value(&scrape, "kafka_watchdog_partitions_observed", &[]).unwrap() >= 2.0);
    assert!(metric_value(&scrape, "kafka_watchdog_round_duration_seconds", &[]).is_some());
    let last = metric_value(
        &scrape,
        "kafka_watchdog_last_successful_round_timestamp_seconds",
        &[],
    )
    .expect("last success");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        (now - last).abs() < 10.0,
        "last success {last} vs now {now}"
    );
    let status = w.status();
    assert_eq!(status["clusters"][0]["severity"], "ok", "{status:#}");
    let (code, body) = w.get("/healthz").unwrap();
    assert_eq!((code, body.as_str()), (200, "ok\n"));
    assert_eq!(w.get("/nope").unwrap().0, 404);
    client::delete_topic(&lab.bootstrap(), &topic).unwrap();
}

#[test]
fn frozen_broker_times_out_while_others_answer_and_metrics_stay_prompt() {
    let mut lab = lab();
    let w = start("frozen");
    lab.freeze(1).unwrap();
    let frozen_at = Instant::now();
    let b = eventually(WAIT, "broker 1 judged zombie", || {
        let b = w.broker(1)?;
        (b["state"] == "zombie").then_some(b)
    });
    let took = frozen_at.elapsed();
    eprintln!(
        "frozen broker 1 judged zombie after {:.1} s",
        took.as_secs_f64()
    );
    // One round (2 s) plus the request timeout (1.5 s), with room for a slow machine.
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert_eq!(b["hits"][0]["rule"], "no_answer", "{b:#}");
    // The continuous liveness check names it before the round's own probe times out: the
    // round's evidence follows.
    let b = eventually(WAIT, "the round's probe of broker 1 timed out", || {
        let b = w.broker(1)?;
        (b["probe"]["api_versions"]["failure"]["kind"] == "timeout").then_some(b)
    });
    assert_eq!(b["state"], "zombie", "{b:#}");
    assert_eq!(
        b["probe"]["connect"]["ok"], true,
        "TCP still accepted: {b:#}"
    );

    // The HTTP surface answers promptly while a broker hangs.
    for _ in 0..5 {
        let started = Instant::now();
        let scrape = w.metrics();
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "/metrics took {:?}",
            started.elapsed()
        );
        assert_eq!(
            metric_value(&scrape, "kafka_watchdog_broker_up", &[("broker", "1")]),
            Some(0.0)
        );
        assert_eq!(
            metric_value(&scrape, "kafka_watchdog_broker_up", &[("broker", "2")]),
            Some(1.0)
        );
        assert_eq!(
            metric_value(&scrape, "kafka_watchdog_broker_up", &[("broker", "3")]),
            Some(1.0)
        );
        assert!(metric_value(
            &scrape,
            "kafka_watchdog_broker_request_failures_total",
            &[
                ("broker", "1"),
                ("request", "api_versions"),
                ("kind", "timeout")
            ]
        )
        .is_some_and(|v| v >= 1.0));
        std::thread::sleep(Duration::from_millis(700));
    }
    // Fenced meanwhile, it vanished from metadata; the watchdog keeps probing it.
    eventually(WAIT, "broker 1 no longer listed as registered", || {
        (w.broker(1)?["listed_as_registered"] == false).then_some(())
    });
    assert_eq!(w.broker_state(1).as_deref(), Some("zombie"));
    assert_eq!(w.broker_state(2).as_deref(), Some("healthy"));

    lab.thaw(1).unwrap();
    eventually(WAIT, "broker 1 healthy after thaw", || {
        (w.broker_state(1)? == "healthy").then_some(())
    });
}

#[test]
fn two_replicas_killed_leave_an_offline_partition_attributed_to_them() {
    let mut lab = lab();
    let bs = lab.bootstrap();
    let topic = unique_topic("core-offline");
    client::create_topic(&bs, &topic, &[vec![2, 3], vec![1, 2]], &[]).unwrap();
    let w = start("offline");
    lab.kill(2).unwrap();
    lab.kill(3).unwrap();
    let status = eventually(WAIT, "an offline partition in /status", || {
        let s = w.status();
        let c = &s["clusters"][0];
        (c["partitions"]["offline"].as_u64()? >= 1).then_some(s)
    });
    let c = &status["clusters"][0];
    let problem = c["partitions"]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["topic"] == topic.as_str() && p["partition"] == 0)
        .cloned()
        .unwrap_or_else(|| panic!("no problem entry for {topic}-0: {status:#}"));
    assert_eq!(problem["leader"], -1);
    assert!(problem["conditions"]
        .as_array()
        .unwrap()
        .contains(&"offline".into()));
    assert_eq!(problem["suspects"], serde_json::json!([2, 3]));
    for id in [2, 3] {
        let b = w.broker(id).unwrap();
        assert_eq!(b["state"], "down", "{b:#}");
        assert_eq!(b["hits"][0]["rule"], "port_closed");
        assert!(
            b["partitions"]["replica_of_offline"].as_u64().unwrap() >= 1,
            "{b:#}"
        );
    }
    assert!(
        w.metric("kafka_watchdog_partitions", &[("state", "offline")])
            .unwrap()
            >= 1.0
    );
    assert_eq!(
        w.metric(
            "kafka_watchdog_broker_offline_partitions",
            &[("broker", "2")]
        ),
        Some(1.0)
    );
    assert_eq!(w.broker_state(1).as_deref(), Some("healthy"));
    drop(w);
    drop(lab);
    client::delete_topic(&kafka_lab::Lab::open().unwrap().bootstrap(), &topic).unwrap();
}

#[test]
fn cut_replication_is_attributed_to_the_live_follower() {
    let mut lab = lab();
    let bs = lab.bootstrap();
    let topic = unique_topic("core-cut");
    client::create_topic(&bs, &topic, &[vec![1, 2]], &[("min.insync.replicas", "2")]).unwrap();
    let w = start("cut");
    lab.cut_replication(2).unwrap();
    let producer = client::LabProducer::new(&bs, "1", Duration::from_secs(5)).unwrap();
    let problem = eventually(WAIT, "under-min-ISR partition in /status", || {
        let _ = producer.send(&topic, 0, &common::payloads("tick", 1));
        let s = w.status();
        s["clusters"][0]["partitions"]["problems"]
            .as_array()?
            .iter()
            .find(|p| {
                p["topic"] == topic.as_str()
                    && p["conditions"]
                        .as_array()
                        .is_some_and(|c| c.contains(&"under_min_isr".into()))
            })
            .cloned()
    });
    assert_eq!(problem["suspects"], serde_json::json!([2]), "{problem:#}");
    assert_eq!(problem["min_isr"], 2);
    assert_eq!(problem["isr"], serde_json::json!([1]));
    let b2 = w.broker(2).unwrap();
    assert_eq!(
        b2["listed_as_registered"], true,
        "the follower stays registered: {b2:#}"
    );
    assert_ne!(b2["state"], "healthy", "{b2:#}");
    assert!(
        b2["hits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["rule"] == "out_of_some_isrs" || h["rule"] == "out_of_every_isr"),
        "{b2:#}"
    );
    assert!(
        w.metric("kafka_watchdog_partitions", &[("state", "under_min_isr")])
            .unwrap()
            >= 1.0
    );
    assert!(
        w.metric(
            "kafka_watchdog_broker_replicas_out_of_isr",
            &[("broker", "2")]
        )
        .unwrap()
            >= 1.0
    );
    assert_eq!(w.broker_state(1).as_deref(), Some("healthy"));
    lab.heal(Some(2)).unwrap();
    eventually(WAIT, "broker 2 healthy after heal", || {
        (w.broker_state(2)? == "healthy").then_some(())
    });
    client::delete_topic(&bs, &topic).unwrap();
}

/// `topic`-0's (leader, leader epoch) as broker `id` answers it, from its own cache.
fn leader_at(id: i32, topic: &str) -> Option<(i32, i32)> {
    use kafka_watchdog::observe::wire::{BrokerClient, WireOptions};
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let address = kafka_lab::broker_address(id);
        let mut c = BrokerClient::connect(&address, &WireOptions::default())
            .await
            .ok()?
            .client;
        let md = c.metadata(Some(&[topic.to_string()])).await.ok()?.value;
        let t = md.topics.get(topic).filter(|t| t.error_code == 0)?;
        t.partitions.first().map(|p| (p.leader, p.leader_epoch))
    })
}

/// Reorders the replicas of `topic`-0 to `replicas` and elects the first one leader, which
/// bumps the partition's leader epoch.
fn move_leader(topic: &str, replicas: &[i32]) {
    use kafka_watchdog::observe::wire::{BrokerClient, WireOptions};
    let rt = tokio::runtime::Runtime::new().unwrap();
    let connect = || async {
        BrokerClient::connect(&kafka_lab::broker_address(1), &WireOptions::default())
            .await
            .unwrap()
            .client
    };
    rt.block_on(async {
        let moved = connect()
            .await
            .alter_partition_reassignments(
                &[(topic.to_string(), 0, Some(replicas.to_vec()))],
                Duration::from_secs(10),
            )
            .await
            .unwrap();
        assert!(moved.value.iter().all(|o| o.2 == 0), "{moved:?}");
    });
    eventually(WAIT, "the new replica order", || {
        let ps = client::partitions(&kafka_lab::broker_address(1), topic).ok()?;
        (ps[0].replicas == replicas).then_some(())
    });
    rt.block_on(async {
        connect()
            .await
            .elect_leaders(true, &[(topic.to_string(), 0)], Duration::from_secs(10))
            .await
            .unwrap();
    });
    eventually(WAIT, "the preferred leader elected", || {
        (leader_at(1, topic)?.0 == replicas[0]).then_some(())
    });
}

/// A topic deleted and created again under the same name starts its leader epochs over. A
/// broker whose cache still holds the old topic (here: cut off from the controller) answers
/// with a higher epoch than the new topic's; that answer is about another topic (another
/// topic id) and must not make the new topic's leader a stale leader.
#[test]
fn a_topic_recreated_under_the_same_name_makes_no_stale_leader() {
    let mut lab = lab();
    let b1 = kafka_lab::broker_address(1);
    let topic = unique_topic("core-recreated");
    client::create_topic(&b1, &topic, &[vec![2, 1]], &[]).unwrap();
    move_leader(&topic, &[1, 2]);
    let (_, old_epoch) = leader_at(1, &topic).unwrap();
    assert!(
        old_epoch >= 1,
        "the old topic's epoch moved on: {old_epoch}"
    );
    let w = start("recreated");
    lab.isolate(3, false).unwrap();
    eventually(WAIT, "broker 3 fenced", || {
        let registered = client::registered_brokers(&b1).ok()?;
        (!registered.contains(&3)).then_some(())
    });
    client::delete_topic(&b1, &topic).unwrap();
    eventually(WAIT, "the topic gone from broker 1", || {
        leader_at(1, &topic).is_none().then_some(())
    });
    client::create_topic(&b1, &topic, &[vec![2, 1]], &[]).unwrap();
    let new = eventually(WAIT, "the new topic led by broker 2", || {
        leader_at(1, &topic).filter(|l| l.0 == 2)
    });
    let stale = leader_at(3, &topic);
    assert_eq!(
        stale,
        Some((1, old_epoch)),
        "broker 3 still answers about the old topic (new one: {new:?})"
    );
    let until = Instant::now() + Duration::from_secs(16);
    let mut rounds = std::collections::BTreeSet::new();
    while Instant::now() < until {
        let s = w.status();
        let cluster = &s["clusters"][0];
        rounds.insert(cluster["round"].as_u64().unwrap_or(0));
        let split: Vec<_> = cluster["split_brain"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|x| x["topic"] == topic.as_str())
            .cloned()
            .collect();
        assert!(
            split.is_empty(),
            "no split brain on the new topic: {split:#?}"
        );
        for b in [1, 2] {
            let rules = w.rules(b);
            assert!(
                !rules.iter().any(|r| r == "stale_leader"),
                "broker {b}: {rules:?}\n{:#}",
                w.broker(b).unwrap_or_default()
            );
            assert_ne!(w.broker_state(b).as_deref(), Some("zombie"));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(rounds.len() >= 4, "watched several rounds: {rounds:?}");
    drop(w);
    lab.heal(Some(3)).unwrap();
    client::delete_topic(&b1, &topic).unwrap();
}

/// Kafka 4.1 answers DescribeTopicPartitions (eligible leader replicas, KIP-966) in a form
/// the guarded decoder accepts; the lab formats with ELR off, so no partition lists any.
#[test]
fn kafka_4_answers_describe_topic_partitions() {
    use kafka_watchdog::observe::wire::{BrokerClient, WireOptions};
    let lab = lab();
    let topic = unique_topic("core-elr");
    client::create_topic(&lab.bootstrap(), &topic, &[vec![1, 2], vec![2, 3]], &[]).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let found = rt.block_on(async {
        let mut c = BrokerClient::connect(&kafka_lab::broker_address(1), &WireOptions::default())
            .await
            .unwrap()
            .client;
        c.eligible_leader_replicas(std::slice::from_ref(&topic), 4)
            .await
    });
    let found = found
        .expect("a decodable answer")
        .expect("Kafka 4.1 speaks API 75");
    assert_eq!(found.value, Vec::new(), "ELR is off in the lab");
    client::delete_topic(&lab.bootstrap(), &topic).unwrap();
}
