//! The incident checks on any lab release, and what the watchdog negotiates with it.
//!
//! The release comes from `KW_LAB_KAFKA` (a `kafka-lab up --kafka` spelling: 2.8, 3.6,
//! 3.6-kraft, 3.9, 4, 4.4), the lab default otherwise. `scripts/test-matrix` runs this file
//! on every release and prints pass/fail per release and check; CI runs the `incident_`
//! tests on the oldest and the newest release. They are `#[ignore]`d in a plain `cargo test`,
//! whose suite already runs the same incidents on the default release (tests/incidents.rs).
//! `KW_COMPAT_WRITE=1` writes the release's column of the compatibility table (docs/compat/)
//! instead of comparing with it.

mod common;

use std::time::Duration;

use common::watchdog::{
    has, ids, is_event, reports_partitions, resolves_partitions, start_incidents as start, Receiver,
};
use common::{eventually, lab, unique_topic, LabGuard};
use kafka_lab::{broker_address, client, KafkaVersion};
use kafka_watchdog::observe::wire::{self, BrokerClient, WireOptions};

const WAIT: Duration = Duration::from_secs(90);

fn version() -> KafkaVersion {
    common::release()
}

/// The lab of the release under test, for one check.
fn matrix_lab() -> LabGuard {
    eprintln!("matrix: Kafka {}", version().label());
    lab()
}

/// The broker that is the controller in ZooKeeper mode; `None` in KRaft, whose controller
/// is node 0 (Metadata's `controller_id` there names a random live broker).
fn zookeeper_controller(lab: &LabGuard) -> Option<i32> {
    if version().is_kraft() {
        return None;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    eventually(Duration::from_secs(30), "the controller's id", || {
        rt.block_on(async {
            let mut c =
                BrokerClient::connect(&broker_address(lab.brokers()[0]), &WireOptions::default())
                    .await
                    .ok()?;
            c.client.metadata(Some(&[])).await.ok()?.value.controller_id
        })
        .filter(|id| *id > 0)
        .map(Some)
    })
}

fn about_broker(v: &serde_json::Value, b: i64) -> bool {
    is_event(v, "opened", "broker", Some(b)) || is_event(v, "updated", "broker", Some(b))
}

fn compat_path(v: KafkaVersion) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/compat")
        .join(format!("{}.tsv", v.name()))
}

/// What the watchdog negotiates with every broker of the release: each broker gives the
/// same signals, the column matches the committed one (docs/compat/), and what the release
/// lacks is said as "cannot see".
#[test]
fn negotiated_signals_match_the_compatibility_table() {
    let lab = matrix_lab();
    let v = version();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut columns = Vec::new();
    let mut unseen = Vec::new();
    for id in lab.brokers() {
        // A ZooKeeper-mode broker registers before its listener accepts (seen on 3.9).
        let c = eventually(
            Duration::from_secs(30),
            &format!("broker {id} answers"),
            || {
                rt.block_on(BrokerClient::connect(
                    &broker_address(id),
                    &WireOptions::default(),
                ))
                .ok()
            },
        );
        let signals = wire::signals(c.client.versions());
        columns.push(wire::column_text(&v.label(), &signals));
        unseen = signals
            .iter()
            .filter_map(|s| s.unseen())
            .collect::<Vec<_>>();
    }
    assert!(
        columns.windows(2).all(|w| w[0] == w[1]),
        "brokers disagree: {columns:#?}"
    );
    eprintln!("matrix: Kafka {}:\n{}", v.label(), columns[0]);
    for u in &unseen {
        eprintln!("matrix: {u}");
    }
    // The signals the versions promise: fenced brokers from 4.0, DescribeCluster from 2.8.
    let fenced_seen = !unseen.iter().any(|u| u.contains("fenced brokers"));
    assert_eq!(
        fenced_seen,
        v.maven_version().starts_with('4'),
        "{unseen:?}"
    );
    let path = compat_path(v);
    if std::env::var("KW_COMPAT_WRITE").is_ok_and(|w| w == "1") {
        std::fs::write(&path, &columns[0]).unwrap();
    } else {
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            committed,
            columns[0],
            "{} differs from what Kafka {} negotiated; run `KW_COMPAT_WRITE=1 scripts/test-matrix {}` and commit",
            path.display(),
            v.label(),
            v.name()
        );
    }
}

/// Incident 1: a broker alive at process and port level that answers nothing (SIGSTOP) is
/// a zombie, by name.
#[test]
#[ignore = "the release matrix: scripts/test-matrix (tests/incidents.rs covers the default release)"]
fn incident_frozen_broker_is_a_zombie() {
    let mut lab = matrix_lab();
    let bs = lab.bootstrap();
    let topic = unique_topic("mx-freeze");
    client::create_topic(&bs, &topic, &[vec![2, 1]], &[]).unwrap();
    let rx = Receiver::start();
    let w = start("mx-freeze", &rx, "");
    lab.freeze(2).unwrap();
    let v = rx.wait("broker 2 zombie", WAIT, |v| {
        about_broker(v, 2) && v["state"] == "zombie"
    });
    assert!(has(&v, "evidence", "no_answer"), "{v:#}");
    if version().is_kraft() {
        // Metadata's controller id is a random broker in KRaft: never read as the controller.
        assert!(!has(&v, "evidence", "zookeeper_controller"), "{v:#}");
    }
    lab.thaw(2).unwrap();
    // Thawed, it answers again: no longer a zombie. Whether its ISRs recover in time is
    // Kafka's business (on 2.8.2 the leader once kept it out of a canary partition's ISR for
    // minutes; the watchdog rightly said `degraded` then).
    rx.wait("broker 2 no longer a zombie", WAIT, |v| {
        is_event(v, "resolved", "broker", Some(2))
            || (is_event(v, "updated", "broker", Some(2)) && v["state"] != "zombie")
    });
    drop(w);
    let _ = client::delete_topic(&bs, &topic);
}

/// Issue 25, ZooKeeper releases: the controller is a broker, and when it is frozen its page
/// says it is the controller (nothing else heals until ZooKeeper moves the role).
#[test]
#[ignore = "the release matrix: scripts/test-matrix (tests/incidents.rs covers the default release)"]
fn incident_frozen_zookeeper_controller_is_named_the_controller() {
    let mut lab = matrix_lab();
    let Some(controller) = zookeeper_controller(&lab) else {
        eprintln!(
            "Kafka {}: KRaft, its controllers are not brokers (tests/control_plane.rs)",
            version().name()
        );
        return;
    };
    let rx = Receiver::start();
    let w = start("mx-zk-controller", &rx, "");
    lab.freeze(controller).unwrap();
    let v = rx.wait(&format!("broker {controller} zombie"), WAIT, |v| {
        about_broker(v, i64::from(controller)) && v["state"] == "zombie"
    });
    assert!(has(&v, "evidence", "zookeeper_controller"), "{v:#}");
    assert!(has(&v, "evidence", "controller (ZooKeeper mode"), "{v:#}");
    lab.thaw(controller).unwrap();
    rx.wait(
        &format!("broker {controller} no longer a zombie"),
        WAIT,
        |v| {
            is_event(v, "resolved", "broker", Some(i64::from(controller)))
                || (is_event(v, "updated", "broker", Some(i64::from(controller)))
                    && v["state"] != "zombie")
        },
    );
    let others: Vec<_> = rx
        .received()
        .into_iter()
        .filter(|v| v["event"] == "opened" && v["kind"] == "broker")
        .filter(|v| !about_broker(v, i64::from(controller)))
        .collect();
    assert!(others.is_empty(), "other brokers paged: {others:#?}");
    drop(w);
}

/// Incident 3, leader killed: the broker is down (port closed), by name.
#[test]
#[ignore = "the release matrix: scripts/test-matrix (tests/incidents.rs covers the default release)"]
fn incident_killed_leader_is_down() {
    let mut lab = matrix_lab();
    let bs = lab.bootstrap();
    let topic = unique_topic("mx-kill");
    client::create_topic(&bs, &topic, &[vec![1, 2, 3]], &[]).unwrap();
    // The victim must lead when it is killed: a broker that leads nothing and is in no ISR
    // when its port closes is judged a clean shutdown, not a crash. After the isolation
    // check, broker 1 can still be re-registering with ZooKeeper when the topic is created
    // (the leader is then 2) and out of every ISR; so wait for a full ISR and kill the
    // leader, whichever it is.
    let victim = eventually(WAIT, "the topic's ISR complete", || {
        let ps = client::partitions(&broker_address(2), &topic).ok()?;
        (ps[0].isr.len() == 3 && ps[0].leader > 0).then_some(ps[0].leader)
    });
    let rx = Receiver::start();
    let w = start("mx-kill", &rx, "");
    lab.kill(victim).unwrap();
    let v = rx.wait(&format!("broker {victim} down"), WAIT, |v| {
        about_broker(v, victim as i64) && v["state"] == "down"
    });
    assert!(has(&v, "evidence", "port_closed"), "{v:#}");
    eventually(WAIT, "a new leader", || {
        let survivor = if victim == 2 { 3 } else { 2 };
        let ps = client::partitions(&broker_address(survivor), &topic).ok()?;
        (ps[0].leader > 0 && ps[0].leader != victim).then_some(())
    });
    lab.start(victim).unwrap();
    rx.wait(&format!("resolved broker {victim}"), WAIT, |v| {
        is_event(v, "resolved", "broker", Some(victim as i64))
    });
    drop(w);
    let _ = client::delete_topic(&bs, &topic);
}

/// Incident 3, leader isolated from the quorum and the other brokers: a split brain naming
/// it, and it is a zombie.
#[test]
#[ignore = "the release matrix: scripts/test-matrix (tests/incidents.rs covers the default release)"]
fn incident_isolated_leader_is_a_split_brain() {
    let mut lab = matrix_lab();
    let bs = lab.bootstrap();
    let topic = unique_topic("mx-isolate");
    client::create_topic(&bs, &topic, &[vec![1, 2, 3]], &[]).unwrap();
    let rx = Receiver::start();
    let w = start("mx-isolate", &rx, "");
    lab.isolate(1, true).unwrap();
    let split = rx.wait("split brain naming broker 1", WAIT, |v| {
        is_event(v, "opened", "split_brain", None) && ids(v, "suspects").contains(&1)
    });
    assert!(has(&split, "affected_partitions", &topic), "{split:#}");
    rx.wait("broker 1 zombie", WAIT, |v| {
        about_broker(v, 1) && v["state"] == "zombie"
    });
    // The others stop listing it (fenced in KRaft, ZooKeeper session expired). Kafka 4
    // reports fencing; before 4.0 the verdict says it cannot tell fenced from unregistered.
    let registration = eventually(WAIT, "broker 1's registration verdict", || {
        let b = w.broker(1)?;
        b["hits"]
            .as_array()?
            .iter()
            .find(|h| h["rule"] == "fenced_but_serving")
            .and_then(|h| h["detail"].as_str().map(String::from))
    });
    eprintln!("matrix: isolated broker 1: {registration}");
    if version().maven_version().starts_with('4') {
        assert!(
            registration.contains("the controller has fenced it"),
            "{registration}"
        );
    } else {
        assert!(
            registration.contains("fenced or unregistered cannot be told apart"),
            "{registration}"
        );
    }
    lab.heal(Some(1)).unwrap();
    rx.wait("resolved split brain", WAIT, |v| {
        is_event(v, "resolved", "split_brain", None)
    });
    drop(w);
    let _ = client::delete_topic(&bs, &topic);
}

/// Incident 2: a follower that stopped replicating (min ISR 2, RF 2) is the one suspect of
/// the under-min-ISR partitions; its leader is not blamed.
#[test]
#[ignore = "the release matrix: scripts/test-matrix (tests/incidents.rs covers the default release)"]
fn incident_follower_not_replicating_is_named() {
    let mut lab = matrix_lab();
    let bs = lab.bootstrap();
    // In ZooKeeper mode one broker is the controller, reached on the replication listener
    // that the cut closes: a controller cut off that way cannot apply the leader's ISR
    // shrink (seen on 3.9.1: ISR [1, 2] for 90 s of acknowledged writes). Incident 2's
    // follower was not the controller, so leader and follower are the two other brokers.
    let controller = zookeeper_controller(&lab);
    let others: Vec<i32> = lab
        .brokers()
        .into_iter()
        .filter(|b| Some(*b) != controller)
        .collect();
    let (leader, follower) = (others[0], others[1]);
    let topic = unique_topic("mx-cut");
    client::create_topic(
        &bs,
        &topic,
        &vec![vec![leader, follower]; 3],
        &[("min.insync.replicas", "2")],
    )
    .unwrap();
    let rx = Receiver::start();
    let w = start("mx-cut", &rx, "");
    lab.cut_replication(follower).unwrap();
    let producer = client::LabProducer::new(&bs, "1", Duration::from_secs(3)).unwrap();
    // Traffic: an idle follower that is caught up stays in the ISR.
    let (mut acked, mut last_error) = (0, String::new());
    let under = client::wait_until(WAIT, "under_min_isr incident", || {
        for p in 0..3 {
            match producer.send(&topic, p, &common::payloads("tick", 1)) {
                Ok(r) if !r.acknowledged.is_empty() => acked += 1,
                Ok(r) => last_error = format!("{:?}", r.failed),
                Err(e) => last_error = e.to_string(),
            }
        }
        rx.received()
            .into_iter()
            .find(|v| reports_partitions(v, "under_min_isr", &topic))
    })
    .unwrap_or_else(|e| {
        let isr = client::partitions(&bs, &topic).map(|ps| {
            ps.iter()
                .map(|p| format!("{}: isr {:?}", p.partition, p.isr))
                .collect::<Vec<_>>()
        });
        panic!("{e}; ticks acknowledged {acked}, last failure {last_error:?}; Kafka says {isr:?}")
    });
    assert_eq!(ids(&under, "suspects"), vec![follower as i64], "{under:#}");
    assert!(
        !rx.received()
            .iter()
            .any(|v| v["kind"] == "broker" && v["broker_id"] == leader),
        "the leader is not blamed"
    );
    lab.heal(Some(follower)).unwrap();
    rx.wait("resolved under_min_isr", WAIT, |v| {
        resolves_partitions(v, "under_min_isr")
            || is_event(v, "resolved", "broker", Some(follower as i64))
    });
    drop(w);
    let _ = client::delete_topic(&bs, &topic);
}

/// Incident 4: a partition whose only replica's broker is down is offline, attributed to it.
#[test]
#[ignore = "the release matrix: scripts/test-matrix (tests/incidents.rs covers the default release)"]
fn incident_offline_partition_is_attributed() {
    let mut lab = matrix_lab();
    let bs = lab.bootstrap();
    let topic = unique_topic("mx-offline");
    client::create_topic(&bs, &topic, &[vec![3]], &[]).unwrap();
    let rx = Receiver::start();
    let w = start("mx-offline", &rx, "");
    lab.kill(3).unwrap();
    let offline = rx.wait("offline partition", WAIT, |v| {
        reports_partitions(v, "offline_partitions", &format!("{topic}-0"))
    });
    assert!(ids(&offline, "suspects").contains(&3), "{offline:#}");
    lab.start(3).unwrap();
    rx.wait("offline resolved", WAIT, |v| {
        resolves_partitions(v, "offline_partitions") || is_event(v, "resolved", "broker", Some(3))
    });
    drop(w);
    let _ = client::delete_topic(&bs, &topic);
}
