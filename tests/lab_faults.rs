//! Evidence that the lab is real: each fault makes Kafka itself behave as the seed incidents
//! describe, observed from an ordinary client. Bounds are generous; the figures are printed.

mod common;

use std::time::{Duration, Instant};

use common::{answers_api_versions, eventually, lab, payloads, unique_topic};
use kafka_lab::{broker_address, client};
use rdkafka::types::RDKafkaErrorCode;

const WAIT: Duration = Duration::from_secs(60);

/// Each broker's log directory is a filesystem of its own, as in production: on the host's
/// disk every broker reported the free space the lab shares with the build beside it, and a
/// CI disk at 3 % free made every broker "run out of space" in every test.
#[test]
fn every_broker_keeps_its_logs_on_a_filesystem_of_its_own() {
    let lab = lab();
    let size = u64::from(kafka_lab::logdirs::DATA_DIR_MIB) << 20;
    for b in lab.brokers() {
        let data = &lab.log_dir_paths(b)[0];
        assert!(
            kafka_lab::logdirs::is_mounted(data),
            "broker {b}'s {} is not a mount of its own",
            data.display()
        );
        let free = kafka_lab::logdirs::free_bytes(data).unwrap();
        assert!(
            free <= size && free > size / 2,
            "broker {b}: {free} bytes free of {size}"
        );
    }
}

/// Frozen broker (SIGSTOP): the port accepts TCP but nothing answers; once the controller
/// fences it, its partition moves to another leader; thawed, it rejoins.
#[test]
fn frozen_broker_accepts_tcp_answers_nothing_and_loses_leadership() {
    let mut lab = lab();
    let bs = lab.bootstrap();
    let topic = unique_topic("freeze");
    client::create_topic(&bs, &topic, &[vec![1, 2, 3]], &[]).unwrap();
    assert!(answers_api_versions(&broker_address(1), Duration::from_secs(3)).unwrap());

    lab.freeze(1).unwrap();
    let frozen_at = Instant::now();
    let answered = answers_api_versions(&broker_address(1), Duration::from_secs(3))
        .expect("a frozen broker still completes the TCP handshake");
    assert!(!answered, "a frozen broker must not answer requests");
    assert!(lab
        .status()
        .iter()
        .any(|n| n.id == 1 && n.state == "frozen"));

    let p = eventually(
        WAIT,
        "a new leader for the frozen broker's partition",
        || {
            let ps = client::partitions(&bs, &topic).ok()?;
            ps.into_iter().find(|p| p.leader >= 0 && p.leader != 1)
        },
    );
    eprintln!(
        "freeze: leader moved to {} after {:.1} s; ISR {:?}",
        p.leader,
        frozen_at.elapsed().as_secs_f64(),
        p.isr
    );
    assert!(!p.isr.contains(&1), "a fenced broker leaves the ISR");

    lab.thaw(1).unwrap();
    eventually(WAIT, "broker 1 back in the ISR", || {
        let ps = client::partitions(&bs, &topic).ok()?;
        ps.first()?.isr.contains(&1).then_some(())
    });
    client::delete_topic(&bs, &topic).unwrap();
}

/// Both replicas of an RF=2 partition killed: the partition has no leader (incident 1).
#[test]
fn two_replicas_killed_leave_a_partition_without_leader() {
    let mut lab = lab();
    let bs = lab.bootstrap();
    let topic = unique_topic("leaderless");
    client::create_topic(&bs, &topic, &[vec![2, 3], vec![1, 2]], &[]).unwrap();

    lab.kill(2).unwrap();
    lab.kill(3).unwrap();
    let killed_at = Instant::now();
    let ps = eventually(WAIT, "partition 0 without leader", || {
        // Right after creation a broker may not list the topic's partitions yet.
        let ps = client::partitions(&broker_address(1), &topic).ok()?;
        (ps.first()?.leader == -1).then_some(ps)
    });
    eprintln!(
        "leaderless after {:.1} s: {:?}",
        killed_at.elapsed().as_secs_f64(),
        ps
    );
    assert_eq!(ps[0].replicas, vec![2, 3], "replicas are unchanged");
    assert_eq!(ps[0].error.as_deref(), Some("LeaderNotAvailable"));
    assert_eq!(
        ps[1].leader, 1,
        "the partition with a live replica keeps a leader"
    );
    let report = client::produce(
        &broker_address(1),
        &topic,
        0,
        "1",
        &payloads("x", 3),
        Duration::from_secs(4),
    )
    .unwrap();
    assert!(
        report.acknowledged.is_empty(),
        "nothing can be written to it"
    );
    drop(lab);
    client::delete_topic(&kafka_lab::Lab::open().unwrap().bootstrap(), &topic).unwrap();
}

/// A follower whose fetchers are cut stays registered, leaves the ISR, and acks=all
/// produce fails with NOT_ENOUGH_REPLICAS under min.insync.replicas=2 (incident 2).
#[test]
fn cut_replication_shrinks_isr_and_fails_acks_all() {
    let mut lab = lab();
    let bs = lab.bootstrap();
    let topic = unique_topic("cutrepl");
    client::create_topic(&bs, &topic, &[vec![1, 2]], &[("min.insync.replicas", "2")]).unwrap();
    let ok = client::produce(&bs, &topic, 0, "all", &payloads("before", 5), WAIT).unwrap();
    assert_eq!(ok.acknowledged.len(), 5, "{ok:?}");

    lab.cut_replication(2).unwrap();
    let cut_at = Instant::now();
    // A write the follower cannot fetch makes it lag behind the leader.
    let _ = client::produce(
        &bs,
        &topic,
        0,
        "1",
        &payloads("lag", 1),
        Duration::from_secs(5),
    );
    let p = eventually(WAIT, "ISR shrunk to the leader", || {
        let ps = client::partitions(&bs, &topic).ok()?;
        (ps.first()?.isr == vec![1]).then(|| ps[0].clone())
    });
    eprintln!(
        "cut-replication: ISR {:?} after {:.1} s",
        p.isr,
        cut_at.elapsed().as_secs_f64()
    );
    assert!(
        client::registered_brokers(&bs).unwrap().contains(&2),
        "the cut follower stays registered"
    );
    let report = client::produce(
        &bs,
        &topic,
        0,
        "all",
        &payloads("after", 3),
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(report.acknowledged.len(), 0, "{report:?}");
    assert_eq!(
        report.failed_with(RDKafkaErrorCode::NotEnoughReplicas),
        3,
        "{report:?}"
    );

    lab.heal(Some(2)).unwrap();
    eventually(WAIT, "ISR restored after heal", || {
        let ps = client::partitions(&bs, &topic).ok()?;
        (ps.first()?.isr.len() == 2).then_some(())
    });
    client::delete_topic(&bs, &topic).unwrap();
}

/// A leader cut off from the controller and the other brokers but reachable by clients
/// keeps acknowledging acks=1 writes that are gone after heal; acks=all times out
/// (incident 3, scenarios 4-5).
#[test]
fn isolated_leader_acknowledges_writes_that_are_lost() {
    let mut lab = lab();
    common::isolated_leader_loses_acks1_writes(&mut lab);
}

/// Brokers listed in broker 1's metadata (KRaft lists only registered, unfenced brokers).
/// Asked of broker 1 alone, so a stalled broker 2 cannot hold the answer.
fn listed_by_broker_1() -> Option<Vec<i32>> {
    client::registered_brokers(&broker_address(1)).ok()
}

/// `stall 2`: the request handler and network threads of broker 2 are stopped, its
/// heartbeat thread is not. TCP connects, nothing is answered, and the controller keeps it
/// registered and unfenced for longer than the session timeout (3 s in the lab): the zombie
/// only a watchdog can see. Kafka does not repair it; `heal` does.
#[test]
fn stalled_request_threads_answer_nothing_while_the_broker_stays_registered() {
    let mut lab = lab();
    assert!(answers_api_versions(&broker_address(2), Duration::from_secs(3)).unwrap());
    lab.stall(2, false).unwrap();
    let stalled_at = Instant::now();
    let faults = lab
        .status()
        .into_iter()
        .find(|n| n.id == 2)
        .map(|n| n.faults)
        .unwrap();
    assert!(
        faults
            .iter()
            .any(|f| f.starts_with("stalled(request threads")),
        "{faults:?}"
    );
    let answered = answers_api_versions(&broker_address(2), Duration::from_secs(3))
        .expect("a stalled broker still completes the TCP handshake");
    assert!(!answered, "a stalled broker must not answer requests");
    let mut looks = 0;
    while stalled_at.elapsed() < Duration::from_secs(12) {
        if let Some(ids) = listed_by_broker_1() {
            assert!(
                ids.contains(&2),
                "broker 2 left the registered brokers after {:.1} s: {ids:?}",
                stalled_at.elapsed().as_secs_f64()
            );
            looks += 1;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(looks >= 5, "broker 1 answered metadata {looks} times");
    assert!(
        !answers_api_versions(&broker_address(2), Duration::from_secs(2)).unwrap(),
        "still stalled after {:.1} s",
        stalled_at.elapsed().as_secs_f64()
    );
    eprintln!(
        "stall: broker 2 silent and registered for {:.1} s",
        stalled_at.elapsed().as_secs_f64()
    );
    lab.heal(Some(2)).unwrap();
    eventually(WAIT, "broker 2 answers again after heal", || {
        answers_api_versions(&broker_address(2), Duration::from_secs(2))
            .ok()
            .filter(|a| *a)
    });
    let left = kafka_lab::Lab::leftovers();
    assert!(
        !left.iter().any(|l| l.contains("stall tracer")),
        "heal ends the tracer: {left:?}"
    );
}

/// `stall 3 --fetchers`: broker 3's replica fetcher threads are stopped (incident 2's dead
/// ReplicaFetcherThread): it drops out of an RF=3 topic's ISRs after replica.lag.time.max.ms
/// (5 s in the lab) while it still answers clients, and rejoins after `heal`.
#[test]
fn stalled_fetchers_drop_the_broker_out_of_the_isr_while_it_answers() {
    let mut lab = lab();
    let bs = lab.bootstrap();
    let topic = unique_topic("stallfetch");
    client::create_topic(&bs, &topic, &[vec![1, 2, 3], vec![2, 1, 3]], &[]).unwrap();
    eventually(WAIT, "broker 3 in both ISRs", || {
        let ps = client::partitions(&bs, &topic).ok()?;
        (ps.len() == 2 && ps.iter().all(|p| p.isr.contains(&3))).then_some(())
    });
    lab.stall(3, true).unwrap();
    let stalled_at = Instant::now();
    assert!(lab
        .status()
        .iter()
        .any(|n| n.id == 3 && n.faults.iter().any(|f| f.contains("replica fetchers"))));
    let producer = client::LabProducer::new(&bs, "1", Duration::from_secs(3)).unwrap();
    // Writes it cannot fetch make it lag; an idle follower that is caught up stays in.
    let ps = eventually(WAIT, "broker 3 out of both ISRs", || {
        for p in 0..2 {
            let _ = producer.send(&topic, p, &payloads("tick", 1));
        }
        let ps = client::partitions(&bs, &topic).ok()?;
        (ps.len() == 2 && ps.iter().all(|p| !p.isr.contains(&3))).then_some(ps)
    });
    let after = stalled_at.elapsed();
    eprintln!(
        "stall --fetchers: broker 3 out of the ISRs after {:.1} s: {:?}",
        after.as_secs_f64(),
        ps.iter().map(|p| p.isr.clone()).collect::<Vec<_>>()
    );
    assert!(
        after >= Duration::from_secs(4),
        "not before replica.lag.time.max.ms: {after:?}"
    );
    assert!(
        answers_api_versions(&broker_address(3), Duration::from_secs(3)).unwrap(),
        "a broker with stalled fetchers still answers"
    );
    assert!(listed_by_broker_1().is_some_and(|ids| ids.contains(&3)));
    lab.heal(Some(3)).unwrap();
    eventually(WAIT, "broker 3 back in both ISRs after heal", || {
        for p in 0..2 {
            let _ = producer.send(&topic, p, &payloads("tick", 1));
        }
        let ps = client::partitions(&bs, &topic).ok()?;
        (ps.len() == 2 && ps.iter().all(|p| p.isr.contains(&3))).then_some(())
    });
    client::delete_topic(&bs, &topic).unwrap();
}
