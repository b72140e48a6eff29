use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::*;
use crate::judge::health::{classify_reassigning, Reassigning};
use crate::model::round::{
    BrokerEndpoint, BrokerProbe, ClusterDescription, FailureKind, MetadataView, PartitionView,
    ProbeFailure, RegisteredBroker, RoundObservation, TopicView, NO_LEADER,
};
use crate::observe::cluster_view::{merge, ClusterView};

fn ep(id: i32) -> BrokerEndpoint {
    BrokerEndpoint {
        id,
        host: format!("127.0.0.1{id}"),
        port: 9092,
        rack: None,
    }
}

fn fail(kind: FailureKind) -> ProbeFailure {
    ProbeFailure {
        kind,
        detail: "test".into(),
        after: Duration::from_secs(2),
    }
}

/// A cluster of brokers 1..=3 with one topic; each partition (leader, epoch, replicas, isr).
struct World {
    parts: Vec<(i32, i32, Vec<i32>, Vec<i32>)>,
    registered: Vec<i32>,
    probes: BTreeMap<i32, BrokerProbe>,
    host: BTreeMap<i32, crate::observe::host::HostObservation>,
    followers: BTreeMap<i32, crate::model::round::FollowerProgress>,
    /// The canary round, over the same topic "t": the canary's partitions are the world's.
    canary: Option<crate::observe::canary::CanaryRound>,
}

impl World {
    fn healthy() -> Self {
        let mut w = World {
            parts: vec![
                (1, 1, vec![1, 2, 3], vec![1, 2, 3]),
                (2, 1, vec![2, 3, 1], vec![2, 3, 1]),
                (3, 1, vec![3, 1, 2], vec![3, 1, 2]),
            ],
            registered: vec![1, 2, 3],
            probes: BTreeMap::new(),
            host: BTreeMap::new(),
            followers: BTreeMap::new(),
            canary: None,
        };
        for id in 1..=3 {
            w.answering(id, 10);
        }
        w
    }

    fn metadata(&self) -> MetadataView {
        let partitions = self
            .parts
            .iter()
            .enumerate()
            .map(|(i, (leader, epoch, replicas, isr))| PartitionView {
                partition: i as i32,
                error_code: if *leader == NO_LEADER { 5 } else { 0 },
                leader: *leader,
                leader_epoch: *epoch,
                replicas: replicas.as_slice().into(),
                isr: isr.as_slice().into(),
                offline_replicas: Default::default(),
            })
            .collect();
        let mut topics = BTreeMap::new();
        topics.insert(
            "t".to_string(),
            TopicView {
                name: "t".into(),
                topic_id: 0,
                error_code: 0,
                is_internal: false,
                partitions,
            },
        );
        MetadataView {
            cluster_id: Some("c".into()),
            controller_id: Some(1),
            brokers: self.registered.iter().map(|id| ep(*id)).collect(),
            topics,
            has_leader_epochs: true,
            has_offline_replicas: true,
            version: 12,
            all_topics: true,
        }
    }

    fn answering(&mut self, id: i32, latency_ms: u64) -> &mut BrokerProbe {
        let md = self.metadata();
        self.probes.insert(
            id,
            BrokerProbe {
                endpoint: ep(id),
                connect: Ok(Duration::from_millis(1)),
                api_versions: Some(Ok(Duration::from_millis(2))),
                metadata: Some(Ok((md, Duration::from_millis(latency_ms)))),
                description: None,
            },
        );
        self.probes.get_mut(&id).unwrap()
    }

    /// Re-renders every answering broker's metadata from the current world.
    fn refresh(&mut self) {
        let md = self.metadata();
        for p in self.probes.values_mut() {
            if let Some(Ok((m, _))) = &mut p.metadata {
                *m = md.clone();
            }
        }
    }

    fn silent(&mut self, id: i32) {
        self.probes.insert(
            id,
            BrokerProbe {
                endpoint: ep(id),
                connect: Ok(Duration::from_millis(1)),
                api_versions: Some(Err(fail(FailureKind::Timeout))),
                metadata: None,
                description: None,
            },
        );
    }

    fn refused(&mut self, id: i32) {
        self.probes.insert(
            id,
            BrokerProbe {
                endpoint: ep(id),
                connect: Err(fail(FailureKind::ConnectionRefused)),
                api_versions: None,
                metadata: None,
                description: None,
            },
        );
    }

    fn connect_timeout(&mut self, id: i32) {
        self.probes.insert(
            id,
            BrokerProbe {
                endpoint: ep(id),
                connect: Err(fail(FailureKind::Timeout)),
                api_versions: None,
                metadata: None,
                description: None,
            },
        );
    }

    fn judge_with(&self, memory: &BTreeMap<i32, BrokerMemory>) -> BTreeMap<i32, BrokerVerdict> {
        self.judge_at(memory, 1000)
    }

    /// One round at `secs` after the epoch: judged with the memory, which then remembers it.
    fn round(
        &self,
        memory: &mut BTreeMap<i32, BrokerMemory>,
        secs: u64,
    ) -> BTreeMap<i32, BrokerVerdict> {
        let v = self.judge_at(memory, secs);
        let list: Vec<BrokerVerdict> = v.values().cloned().collect();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        remember_round(memory, &self.observation(), &list, now);
        v
    }

    fn observation(&self) -> RoundObservation {
        RoundObservation {
            cluster: "lab".into(),
            started_at: SystemTime::UNIX_EPOCH,
            duration: Duration::from_millis(50),
            probes: self.probes.clone(),
            bootstrap_failures: Vec::new(),
            min_isr: [("t".to_string(), 2)].into_iter().collect(),
            unclean_allowed: Default::default(),
            eligible_leaders: Default::default(),
            host: self.host.clone(),
            followers: self.followers.clone(),
            liveness: BTreeMap::new(),
        }
    }

    fn judge_at(
        &self,
        memory: &BTreeMap<i32, BrokerMemory>,
        secs: u64,
    ) -> BTreeMap<i32, BrokerVerdict> {
        let obs = self.observation();
        let answers: Vec<(i32, &MetadataView)> = obs
            .probes
            .iter()
            .filter_map(|(id, p)| p.metadata_view().map(|m| (*id, m)))
            .collect();
        let view: ClusterView = merge(&answers);
        let health = classify_reassigning(
            &view,
            &obs.min_isr,
            Reassigning::from_followers(&obs.followers),
            |_| true,
        );
        judge(
            &obs,
            &view,
            &health,
            self.canary.as_ref(),
            memory,
            &VerdictSettings::default(),
            SystemTime::UNIX_EPOCH + Duration::from_secs(secs),
        )
        .into_iter()
        .map(|v| (v.broker, v))
        .collect()
    }

    fn judge(&self) -> BTreeMap<i32, BrokerVerdict> {
        self.judge_with(&BTreeMap::new())
    }

    /// The partition problems with the suspects the findings will name.
    fn suspects(&self) -> BTreeMap<i32, Vec<i32>> {
        let obs = RoundObservation {
            cluster: "lab".into(),
            started_at: SystemTime::UNIX_EPOCH,
            duration: Duration::from_millis(50),
            probes: self.probes.clone(),
            bootstrap_failures: Vec::new(),
            min_isr: [("t".to_string(), 2)].into_iter().collect(),
            unclean_allowed: Default::default(),
            eligible_leaders: Default::default(),
            host: self.host.clone(),
            followers: self.followers.clone(),
            liveness: BTreeMap::new(),
        };
        let answers: Vec<(i32, &MetadataView)> = obs
            .probes
            .iter()
            .filter_map(|(id, p)| p.metadata_view().map(|m| (*id, m)))
            .collect();
        let view: ClusterView = merge(&answers);
        let mut health = classify_reassigning(
            &view,
            &obs.min_isr,
            Reassigning::from_followers(&obs.followers),
            |_| true,
        );
        attribute_suspects(&obs, &view, &mut health, self.canary.clone().as_mut());
        health
            .problems
            .into_iter()
            .map(|p| (p.partition, p.suspects))
            .collect()
    }

    /// Whom each canary partition's failed writes are charged to, as the findings say.
    fn charged(&self) -> BTreeMap<i32, Vec<i32>> {
        let obs = RoundObservation {
            cluster: "lab".into(),
            started_at: SystemTime::UNIX_EPOCH,
            duration: Duration::from_millis(50),
            probes: self.probes.clone(),
            bootstrap_failures: Vec::new(),
            min_isr: [("t".to_string(), 2)].into_iter().collect(),
            unclean_allowed: Default::default(),
            eligible_leaders: Default::default(),
            host: self.host.clone(),
            followers: self.followers.clone(),
            liveness: BTreeMap::new(),
        };
        let view = crate::judge::report::newest_view(&obs);
        let mut health = classify_reassigning(
            &view,
            &obs.min_isr,
            Reassigning::from_followers(&obs.followers),
            |_| true,
        );
        let mut canary = self.canary.clone();
        attribute_suspects(&obs, &view, &mut health, canary.as_mut());
        canary
            .into_iter()
            .flat_map(|c| c.partitions)
            .filter_map(|p| Some((p.partition, p.charged_to?)))
            .filter(|(_, c)| !c.is_empty())
            .collect()
    }

    /// A canary round over the world's partitions: `errors` are (partition, error kind,
    /// broker that received the write); `acks1` the (partition, broker) direct acks=1
    /// writes that were acknowledged.
    fn canary_round(&mut self, errors: &[(i32, &'static str, Option<i32>)], acks1: &[(i32, i32)]) {
        use crate::observe::canary::{
            Acks1Probe, CanaryRound, PartitionRound, ProduceFailure, TopicStatus,
        };
        let partitions = self
            .parts
            .iter()
            .enumerate()
            .map(|(i, (leader, epoch, replicas, isr))| {
                let error =
                    errors
                        .iter()
                        .find(|(p, _, _)| *p == i as i32)
                        .map(|(_, kind, broker)| ProduceFailure {
                            kind,
                            detail: "test".into(),
                            broker: *broker,
                        });
                PartitionRound {
                    partition: i as i32,
                    leader: *leader,
                    leader_epoch: *epoch,
                    replicas: replicas.clone(),
                    isr: isr.clone(),
                    produce: None,
                    produce_seconds: error.is_none().then_some(0.01),
                    produce_error: error,
                    end_to_end_seconds: Vec::new(),
                    unavailable_seconds: None,
                    unavailable_broker: None,
                    overdue: 0,
                    writes: 1,
                    failed_writes: Vec::new(),
                    charged_to: None,
                }
            })
            .collect();
        self.canary = Some(CanaryRound {
            topic: "t".into(),
            status: TopicStatus::Ready,
            partitions,
            layout: Vec::new(),
            not_leading: Vec::new(),
            lost: Vec::new(),
            duplicated: Vec::new(),
            windows_closed: Vec::new(),
            acks1: acks1
                .iter()
                .map(|(partition, broker)| Acks1Probe {
                    partition: *partition,
                    broker: *broker,
                    stale: false,
                    offset: Some(7),
                    error: None,
                })
                .collect(),
        });
    }
}

fn rules(v: &BrokerVerdict) -> Vec<&'static str> {
    v.hits.iter().map(|h| h.rule).collect()
}

#[test]
fn healthy_cluster_is_healthy() {
    let v = World::healthy().judge();
    assert_eq!(v.len(), 3);
    for verdict in v.values() {
        assert_eq!(verdict.state, BrokerState::Healthy, "{verdict:?}");
        assert!(verdict.hits.is_empty());
        assert_eq!(verdict.registration, Registration::Registered);
    }
}

#[test]
fn frozen_broker_is_a_zombie() {
    let mut w = World::healthy();
    w.silent(2);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Zombie);
    assert_eq!(rules(&v[&2]), vec!["no_answer"]);
    assert!(v[&2].hits[0]
        .detail
        .contains("api_versions failed: timeout"));
    assert_eq!(v[&1].state, BrokerState::Healthy);
}

#[test]
fn closed_port_is_down() {
    let mut w = World::healthy();
    w.registered = vec![1, 3];
    w.refresh();
    w.refused(2);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Down);
    assert_eq!(rules(&v[&2]), vec!["port_closed"]);
}

/// With continuous liveness every restart's refusal was paged as `down` within seconds
/// (a rolling restart: one warning per broker). Kafka's controlled shutdown moves leadership
/// away before the listener closes; a crash or a kill leaves the broker leader until the
/// controller notices, and in the ISRs. What the refused broker still holds tells them apart.
#[test]
fn a_broker_that_held_nothing_when_its_port_closed_shut_down_cleanly_and_is_held() {
    let mut w = World::healthy();
    // Leadership moved from 2 to 3, and 2 left every ISR, before its port closed.
    w.parts = vec![
        (1, 1, vec![1, 2, 3], vec![1, 3]),
        (3, 2, vec![2, 3, 1], vec![3, 1]),
        (3, 1, vec![3, 1, 2], vec![3, 1]),
    ];
    w.refresh();
    w.refused(2);
    let mut memory = BTreeMap::new();
    let v = w.round(&mut memory, 1000);
    assert_eq!(v[&2].state, BrokerState::Down);
    assert_eq!(rules(&v[&2]), vec![SHUT_DOWN_CLEANLY]);
    assert!(v[&2].hits[0].detail.contains("controlled shutdown"));
    assert_eq!(v[&2].page_after, Some(Duration::from_secs(120)));
    assert_eq!(v[&1].page_after, None);
    // Back, answering but not registered yet: still held, the stop was clean.
    w.registered = vec![1, 3];
    w.refresh();
    w.answering(2, 10);
    let v = w.round(&mut memory, 1020);
    assert_ne!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
    assert_eq!(
        v[&2].page_after,
        Some(Duration::from_secs(120)),
        "{:?}",
        v[&2]
    );
    // Healthy again: the next stop is judged afresh.
    w.registered = vec![1, 2, 3];
    w.parts = World::healthy().parts;
    w.refresh();
    w.answering(2, 10);
    let v = w.round(&mut memory, 1040);
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
    assert!(memory[&2].stopped_cleanly_at.is_none());
    w.refused(2);
    let v = w.round(&mut memory, 1060);
    assert_eq!(
        rules(&v[&2]),
        vec!["port_closed"],
        "it holds partitions again: a crash"
    );
    assert_eq!(v[&2].page_after, None);
}

#[test]
fn a_refused_broker_still_leading_crashed_and_is_paged_at_once() {
    let mut w = World::healthy();
    w.refused(2);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Down);
    assert_eq!(rules(&v[&2]), vec!["port_closed"]);
    assert_eq!(v[&2].page_after, None);
    // A stop held for a clean one long ago does not hold a crash now.
    let mut memory = BTreeMap::new();
    memory.insert(
        2,
        BrokerMemory {
            stopped_cleanly_at: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(100)),
            ..BrokerMemory::default()
        },
    );
    let v = w.judge_at(&memory, 1000);
    assert_eq!(v[&2].page_after, None);
}

#[test]
fn connect_timeout_of_a_registered_broker_is_only_degraded() {
    let mut w = World::healthy();
    w.connect_timeout(3);
    let v = w.judge();
    assert_eq!(v[&3].state, BrokerState::Degraded);
    assert_eq!(v[&3].registration, Registration::Registered);
    w.registered = vec![1, 2];
    w.refresh();
    let v = w.judge();
    assert_eq!(v[&3].state, BrokerState::Down);
}

#[test]
fn nothing_answering_is_unknown_not_a_guess() {
    let mut w = World::healthy();
    for id in 1..=3 {
        w.connect_timeout(id);
    }
    let v = w.judge();
    for verdict in v.values() {
        assert_eq!(verdict.state, BrokerState::Unknown, "{verdict:?}");
        assert_eq!(rules(verdict), vec!["cluster_invisible"]);
    }
}

#[test]
fn all_ports_closed_is_down_even_when_nothing_answers() {
    let mut w = World::healthy();
    for id in 1..=3 {
        w.refused(id);
    }
    let v = w.judge();
    assert!(v.values().all(|x| x.state == BrokerState::Down));
}

#[test]
fn fenced_broker_that_answers_is_a_zombie() {
    let mut w = World::healthy();
    w.registered = vec![1, 3];
    w.refresh();
    // Broker 2's own cache still lists itself.
    let stale = {
        let mut m = w.metadata();
        m.brokers = vec![ep(1), ep(2), ep(3)];
        m
    };
    if let Some(Ok((m, _))) = &mut w.answering(2, 10).metadata {
        *m = stale;
    }
    let desc = ClusterDescription {
        cluster_id: "c".into(),
        controller_id: 0,
        brokers: vec![
            RegisteredBroker {
                endpoint: ep(1),
                fenced: false,
            },
            RegisteredBroker {
                endpoint: ep(2),
                fenced: true,
            },
            RegisteredBroker {
                endpoint: ep(3),
                fenced: false,
            },
        ],
        includes_fenced: true,
    };
    w.probes.get_mut(&1).unwrap().description = Some(Ok(desc.clone()));
    w.probes.get_mut(&3).unwrap().description = Some(Ok(desc));
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Fenced);
    assert_eq!(v[&2].state, BrokerState::Zombie);
    assert!(rules(&v[&2]).contains(&"fenced_but_serving"));
}

#[test]
fn isolated_leader_with_old_epoch_is_a_stale_zombie() {
    let mut w = World::healthy();
    let old = w.metadata();
    // The cluster moved partition 0 to broker 2 at epoch 2 and fenced broker 1.
    w.parts[0] = (2, 2, vec![1, 2, 3], vec![2, 3]);
    w.registered = vec![2, 3];
    w.refresh();
    if let Some(Ok((m, _))) = &mut w.answering(1, 10).metadata {
        *m = old;
    }
    let v = w.judge();
    assert_eq!(v[&1].state, BrokerState::Zombie, "{:?}", v[&1]);
    let r = rules(&v[&1]);
    assert!(r.contains(&"stale_leader"), "{r:?}");
    assert!(v[&1]
        .hits
        .iter()
        .any(|h| h.detail.contains("t-0 (epoch 1 < 2)")));
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
}

/// Broker 3 replicates partitions 0 and 1, leads none and is in neither ISR.
fn out_of_every_isr() -> World {
    let mut w = World::healthy();
    w.parts = vec![
        (1, 1, vec![1, 3], vec![1]),
        (2, 1, vec![2, 3], vec![2]),
        (1, 1, vec![1, 2], vec![1, 2]),
    ];
    w.refresh();
    w
}

/// Broker 3's log end offsets on t-0 and t-1, the leaders' high watermark at `hw`.
fn measured(w: &mut World, log_end: [i64; 2], hw: i64, adding: Option<u32>) {
    let offsets = (0..2)
        .map(|p| {
            (
                ("t".to_string(), p),
                crate::model::round::ReplicaOffsets {
                    log_end: log_end[p as usize],
                    leader_high_watermark: Some(hw),
                },
            )
        })
        .collect();
    w.followers.insert(
        3,
        crate::model::round::FollowerProgress {
            offsets,
            adding_to: adding.map(|n| (0..n as i32).map(|p| ("t".to_string(), p)).collect()),
            errors: Vec::new(),
        },
    );
}

#[test]
fn follower_out_of_every_isr_whose_logs_stand_still_for_the_window_is_a_zombie() {
    // Incident 2's dead fetcher on a broker that leads nothing: its logs never grow.
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    measured(&mut w, [100, 100], 500, None);
    for secs in [1000, 1030] {
        let v = w.round(&mut memory, secs);
        assert_eq!(v[&3].state, BrokerState::Degraded, "at {secs}: {:?}", v[&3]);
        assert!(v[&3].hits[0]
            .detail
            .contains("watching whether it catches up"));
    }
    let v = w.round(&mut memory, 1061);
    assert_eq!(v[&3].state, BrokerState::Zombie, "{:?}", v[&3]);
    assert_eq!(rules(&v[&3]), vec!["out_of_every_isr", "out_of_some_isrs"]);
    let d = &v[&3].hits[0].detail;
    assert!(d.contains("have not grown for 61 s"), "{d}");
    assert!(d.contains("800 offset(s) behind"), "{d}");
    assert!(v[&3].hits[1]
        .detail
        .contains("2 of them now under min.insync.replicas"));
    // Without a leader that answers, standing still is not its fault.
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    measured(&mut w, [100, 100], 500, None);
    for o in w.followers.get_mut(&3).unwrap().offsets.values_mut() {
        o.leader_high_watermark = None;
    }
    w.round(&mut memory, 1000);
    let v = w.round(&mut memory, 1100);
    assert_eq!(v[&3].state, BrokerState::Degraded, "{:?}", v[&3]);
    assert!(v[&3].hits[0]
        .detail
        .contains("no leader of its partitions answered"));
    // Caught up and still outside the ISRs is no better: nothing fetches.
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    measured(&mut w, [500, 500], 500, None);
    w.round(&mut memory, 1000);
    assert_eq!(w.round(&mut memory, 1060)[&3].state, BrokerState::Zombie);
}

#[test]
fn follower_catching_up_is_never_a_zombie() {
    // A broker added between rounds (never seen down) copying a backlog under a replication
    // throttle: its logs grow in bursts, with pauses shorter than the window.
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    let mut log_end = 0;
    for round in 0..40u64 {
        if round % 5 == 0 {
            log_end += 1000;
        }
        measured(&mut w, [log_end, log_end / 2], 100_000, None);
        let v = w.round(&mut memory, 1000 + round * 10);
        assert_eq!(
            v[&3].state,
            BrokerState::Degraded,
            "round {round}: {:?}",
            v[&3]
        );
        if round % 5 == 0 && round > 0 {
            let d = &v[&3].hits[0].detail;
            assert!(
                d.contains("catching up: its logs grew by 1500 offset(s)"),
                "{d}"
            );
        }
    }
    // The time since it was first seen is no verdict: it was never down, and 400 s passed.
    assert!(memory[&3].last_down_at.is_none());
}

/// The routine day (bench/results/2026-12-01-routine.md) paged a warning for a broker a
/// planned reassignment was filling, and made the partitions' other brokers `degraded`: a
/// replica being added is copying, not failing (Kafka's own under-replicated count leaves it
/// out too).
#[test]
fn a_replica_an_ongoing_reassignment_is_adding_is_not_missing_from_the_isr() {
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    measured(&mut w, [0, 0], 9000, Some(2));
    for secs in [1000, 1100, 1200] {
        let v = w.round(&mut memory, secs);
        for b in [1, 2, 3] {
            assert_eq!(v[&b].state, BrokerState::Healthy, "at {secs}: {:?}", v[&b]);
            assert!(v[&b].hits.is_empty(), "at {secs}: {:?}", v[&b]);
        }
    }
    // Its ISRs of one are under min.insync.replicas, which is a finding, but nobody's fault.
    assert!(
        w.suspects().values().all(Vec::is_empty),
        "{:?}",
        w.suspects()
    );
    // Added to one partition only: its absence from the other ISR still counts.
    measured(&mut w, [0, 0], 9000, Some(1));
    let v = w.round(&mut memory, 1300);
    assert_eq!(rules(&v[&3]), vec!["out_of_some_isrs"], "{:?}", v[&3]);
    assert!(
        v[&3].hits[0].detail.contains("t-1 (leader 2)"),
        "{:?}",
        v[&3]
    );
    assert_eq!(w.suspects().get(&1), Some(&vec![3]), "{:?}", w.suspects());
}

#[test]
fn follower_out_of_every_isr_that_cannot_be_measured_is_degraded_not_a_zombie() {
    let w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    for secs in [1000, 1100, 1200] {
        let v = w.round(&mut memory, secs);
        assert_eq!(v[&3].state, BrokerState::Degraded, "{:?}", v[&3]);
        assert!(v[&3].hits[0].detail.contains("cannot be measured"));
    }
    // Back in an ISR: nothing about catching up is kept.
    let mut w = World::healthy();
    w.refresh();
    w.round(&mut memory, 1300);
    assert!(memory[&3].catch_up.is_none());
}

#[test]
fn a_frozen_broker_whose_accept_queue_fills_stays_one_zombie_episode() {
    // SIGSTOP: the kernel completes handshakes until the listen backlog (50) is full, about
    // 50 s in; then connects time out. The controller fenced it long before.
    let mut w = World::healthy();
    w.registered = vec![1, 3];
    w.refresh();
    let mut memory = BTreeMap::new();
    w.silent(2);
    let v = w.round(&mut memory, 1000);
    assert_eq!(v[&2].state, BrokerState::Zombie, "{:?}", v[&2]);
    w.connect_timeout(2);
    for secs in [1050, 1060, 1120] {
        let v = w.round(&mut memory, secs);
        assert_eq!(v[&2].state, BrokerState::Zombie, "at {secs}: {:?}", v[&2]);
        assert_eq!(rules(&v[&2]), vec!["no_answer"]);
        let d = &v[&2].hits[0].detail;
        assert!(d.contains("accept queue is full"), "{d}");
        assert!(
            d.contains(&format!("without answering for {} s", secs - 1000)),
            "{d}"
        );
    }
    // A port that refuses is down, and ends the episode.
    w.refused(2);
    assert_eq!(w.round(&mut memory, 1130)[&2].state, BrokerState::Down);
    w.connect_timeout(2);
    let v = w.round(&mut memory, 1140);
    assert_eq!(v[&2].state, BrokerState::Down, "{:?}", v[&2]);
    assert_eq!(rules(&v[&2]), vec!["unreachable"]);
}

#[test]
fn a_connect_timeout_never_preceded_by_silence_is_a_host_gone() {
    let mut w = World::healthy();
    w.registered = vec![1, 3];
    w.refresh();
    let mut memory = BTreeMap::new();
    w.round(&mut memory, 990);
    w.connect_timeout(2);
    let v = w.round(&mut memory, 1000);
    assert_eq!(v[&2].state, BrokerState::Down, "{:?}", v[&2]);
    assert_eq!(rules(&v[&2]), vec!["unreachable"]);
    // Refused at authentication is an answer, not silence: no accept-queue episode follows.
    w.silent(2);
    w.probes.get_mut(&2).unwrap().api_versions = Some(Err(fail(FailureKind::Authentication)));
    w.round(&mut memory, 1010);
    w.connect_timeout(2);
    assert_eq!(w.round(&mut memory, 1020)[&2].state, BrokerState::Down);
}

#[test]
fn follower_out_of_some_isrs_is_degraded() {
    let mut w = World::healthy();
    w.parts[0] = (1, 1, vec![1, 2, 3], vec![1, 2]);
    w.refresh();
    let v = w.judge();
    assert_eq!(v[&3].state, BrokerState::Degraded);
    assert_eq!(rules(&v[&3]), vec!["out_of_some_isrs"]);
}

#[test]
fn slow_broker_is_degraded_above_factor_and_floor() {
    let mut w = World::healthy();
    w.answering(3, 2000);
    let v = w.judge();
    assert_eq!(v[&3].state, BrokerState::Degraded);
    assert_eq!(rules(&v[&3]), vec!["slow"]);
    // 5x of 10 ms is still under the 250 ms floor: noise, not a finding.
    w.answering(3, 200);
    assert_eq!(w.judge()[&3].state, BrokerState::Healthy);
}

#[test]
fn a_lagging_cache_is_a_disagreement() {
    let mut w = World::healthy();
    let old = w.metadata();
    w.parts[1] = (3, 2, vec![2, 3, 1], vec![3, 1]);
    w.refresh();
    if let Some(Ok((m, _))) = &mut w.answering(1, 10).metadata {
        *m = old;
    }
    let v = w.judge();
    assert!(
        rules(&v[&1]).contains(&"metadata_disagreement"),
        "{:?}",
        v[&1]
    );
    assert_eq!(v[&1].state, BrokerState::Degraded);
}

#[test]
fn memory_records_down_and_forgets_gone_brokers() {
    let mut memory = BTreeMap::new();
    memory.insert(9, BrokerMemory::default());
    let mut w = World::healthy();
    w.refused(2);
    let v: Vec<BrokerVerdict> = w.judge().into_values().collect();
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(5);
    remember(&mut memory, &v, now);
    assert_eq!(memory[&2].last_down_at, Some(now));
    assert!(memory[&1].last_down_at.is_none());
    assert_eq!(memory[&2].state, Some((BrokerState::Down, now)));
    // The same state later keeps its start time.
    remember(&mut memory, &v, now + Duration::from_secs(7));
    assert_eq!(memory[&2].state, Some((BrokerState::Down, now)));
    assert!(!memory.contains_key(&9));
}

#[test]
fn registration_without_fenced_listing_counts_absence_as_fenced() {
    let mut w = World::healthy();
    let desc = ClusterDescription {
        cluster_id: "c".into(),
        controller_id: 0,
        brokers: vec![RegisteredBroker {
            endpoint: ep(1),
            fenced: false,
        }],
        includes_fenced: false,
    };
    w.probes.get_mut(&1).unwrap().description = Some(Ok(desc.clone()));
    w.probes.get_mut(&3).unwrap().description = Some(Ok(desc));
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Fenced);
}

#[test]
fn a_replica_nobody_lists_is_down() {
    let mut w = World::healthy();
    w.parts.push((1, 1, vec![1, 7], vec![1]));
    w.refresh();
    let v = w.judge();
    assert_eq!(v[&7].state, BrokerState::Down);
    assert_eq!(rules(&v[&7]), vec!["not_registered"]);
    assert_eq!(v.len(), 4);
}

#[test]
fn peer_medians_match_the_median_of_the_others() {
    // Latencies with ties and one broker without an answer.
    let lat = [40u64, 10, 30, 10, 50, 20, 0];
    let mut w = World::healthy();
    w.probes.clear();
    for (i, ms) in lat.iter().enumerate() {
        let id = i as i32 + 1;
        if *ms == 0 {
            w.silent(id);
        } else {
            w.answering(id, *ms);
        }
    }
    let obs = RoundObservation {
        cluster: "lab".into(),
        started_at: SystemTime::UNIX_EPOCH,
        duration: Duration::ZERO,
        probes: w.probes.clone(),
        bootstrap_failures: Vec::new(),
        min_isr: BTreeMap::new(),
        unclean_allowed: Default::default(),
        eligible_leaders: Default::default(),
        host: BTreeMap::new(),
        followers: BTreeMap::new(),
        liveness: BTreeMap::new(),
    };
    let fast = super::peer_medians(&obs);
    for id in obs.probes.keys() {
        let mut others: Vec<Duration> = obs
            .probes
            .iter()
            .filter(|(o, _)| *o != id)
            .filter_map(|(_, p)| p.metadata_latency())
            .collect();
        others.sort_unstable();
        let naive = others.get(others.len() / 2).copied();
        assert_eq!(fast.get(id).copied(), naive, "broker {id}");
    }
}

// ---------------------------------------------------------------------------------------
// Host mode: what the broker's own host shows, beside what the protocol said.

use crate::observe::host::{HostObservation, LogDirSeen, PortSeen, ProcessSeen, ProcessState};

fn host(state: Option<ProcessState>, listening: bool) -> HostObservation {
    HostObservation {
        broker: 1,
        locator: "pid file /run/k.pid".into(),
        process: state.map(|state| ProcessSeen {
            pid: 4711,
            state,
            threads: 74,
            threads_in_io_wait: Some(0),
            cpu_seconds: 28.8,
            cpu_advancing: Some(!state.is_stopped()),
            open_fds: Some(312),
            open_fds_error: None,
        }),
        not_found: state
            .is_none()
            .then(|| "pid file /run/k.pid names 4711, which is not running".into()),
        error: None,
        locate_note: None,
        ports: vec![PortSeen {
            port: "127.0.0.11:9092".into(),
            listening,
            owned_by_process: (listening && state.is_some()).then_some(true),
        }],
        ports_error: None,
        log_dirs: vec![LogDirSeen {
            path: "/var/lib/kafka".into(),
            total_bytes: Some(100 << 30),
            free_bytes: Some(50 << 30),
            free_ratio: Some(0.5),
            error: None,
        }],
        log_dir_min_free_ratio: 0.05,
    }
}

/// Broker 1 last answered 12 s before the judged round.
fn answered_12s_ago() -> BTreeMap<i32, BrokerMemory> {
    let mut m = BTreeMap::new();
    m.insert(
        1,
        BrokerMemory {
            last_answered_at: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(988)),
            ..BrokerMemory::default()
        },
    );
    m
}

fn hit_of<'a>(v: &'a BrokerVerdict, rule: &str) -> &'a RuleHit {
    v.hits
        .iter()
        .find(|h| h.rule == rule)
        .unwrap_or_else(|| panic!("no {rule} in {v:#?}"))
}

#[test]
fn stopped_process_with_listening_port_is_a_zombie_in_the_operators_words() {
    let mut w = World::healthy();
    w.silent(1);
    w.host.insert(1, host(Some(ProcessState::Stopped), true));
    let v = w.judge_with(&answered_12s_ago()).remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Zombie);
    assert!(!v.answered);
    assert_eq!(
        v.hits[0].rule, "process_stopped",
        "the host's sentence leads: {v:#?}"
    );
    assert_eq!(
        v.hits[0].detail,
        "process 4711 stopped by a signal (SIGSTOP or SIGTSTP), CPU time not advancing (28.8 s), 74 threads, 312 open fds; port 127.0.0.11:9092 listening (its socket); no request answered for 12 s"
    );
    assert!(
        rules(&v).contains(&"no_answer"),
        "the protocol's view stays"
    );
    assert!(!rules(&v).contains(&"process_alive_no_answer"));
}

#[test]
fn a_stopped_process_is_a_zombie_even_in_the_round_it_still_answered() {
    let mut w = World::healthy();
    w.host.insert(1, host(Some(ProcessState::Traced), true));
    let v = w.judge().remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Zombie);
    assert!(hit_of(&v, "process_stopped")
        .detail
        .contains("it answers requests"));
}

#[test]
fn a_running_process_that_does_not_answer_gets_the_host_evidence() {
    let mut w = World::healthy();
    w.silent(1);
    let mut h = host(Some(ProcessState::Sleeping), true);
    if let Some(p) = h.process.as_mut() {
        p.threads_in_io_wait = Some(12);
    }
    w.host.insert(1, h);
    let v = w.judge_with(&answered_12s_ago()).remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Zombie);
    assert_eq!(v.hits[0].rule, "process_alive_no_answer");
    assert!(
        v.hits[0]
            .detail
            .starts_with("process 4711 running (sleeping), CPU time advancing, 74 threads, 12 in uninterruptible I/O wait (D)"),
        "{}",
        v.hits[0].detail
    );
    assert!(v.hits[0].detail.ends_with("no request answered for 12 s"));
}

#[test]
fn a_gone_process_is_down_even_when_the_cluster_is_invisible() {
    let mut w = World::healthy();
    for id in 1..=3 {
        w.connect_timeout(id);
    }
    w.host.insert(1, host(None, false));
    let v = w.judge().remove(&1).unwrap();
    assert_eq!(
        v.state,
        BrokerState::Down,
        "the host saw it, the network did not: {v:#?}"
    );
    assert_eq!(
        hit_of(&v, "process_gone").detail,
        "no process found (pid file /run/k.pid names 4711, which is not running); port 127.0.0.11:9092 not listening; no request answered this round"
    );
    // Brokers without host mode stay unknown.
    assert_eq!(w.judge()[&2].state, BrokerState::Unknown);
}

#[test]
fn a_gone_process_behind_an_answering_port_points_at_the_lookup() {
    let mut w = World::healthy();
    w.host.insert(1, host(None, true));
    let v = w.judge().remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Degraded);
    assert!(hit_of(&v, "process_gone")
        .detail
        .contains("check the host.brokers process setting"));
}

#[test]
fn an_exited_process_is_down() {
    let mut w = World::healthy();
    w.refused(1);
    w.host.insert(1, host(Some(ProcessState::Zombie), false));
    let v = w.judge().remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Down);
    assert!(hit_of(&v, "process_exited")
        .detail
        .contains("exited, not yet reaped"));
    assert!(!rules(&v).contains(&"port_not_listening"));
}

#[test]
fn ports_not_listening_or_held_by_another_process_degrade() {
    let mut w = World::healthy();
    w.host.insert(1, host(Some(ProcessState::Running), false));
    let v = w.judge().remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Degraded);
    assert_eq!(
        hit_of(&v, "port_not_listening").detail,
        "process 4711 is running, but nothing listens on 127.0.0.11:9092"
    );
    let mut h = host(Some(ProcessState::Running), true);
    h.ports[0].owned_by_process = Some(false);
    w.host.insert(1, h);
    let v = w.judge().remove(&1).unwrap();
    assert!(hit_of(&v, "port_not_listening")
        .detail
        .ends_with("127.0.0.11:9092 is held by another process"));
    // Unknown ownership (descriptors unreadable) is no finding.
    let mut h = host(Some(ProcessState::Running), true);
    h.ports[0].owned_by_process = None;
    w.host.insert(1, h);
    assert_eq!(w.judge()[&1].state, BrokerState::Healthy);
}

#[test]
fn low_and_unreadable_log_dirs_degrade() {
    let mut w = World::healthy();
    let mut h = host(Some(ProcessState::Sleeping), true);
    h.log_dirs[0].free_bytes = Some(1 << 20);
    h.log_dirs[0].total_bytes = Some(16 << 20);
    h.log_dirs[0].free_ratio = Some(1.0 / 16.0);
    h.log_dir_min_free_ratio = 0.1;
    h.log_dirs.push(LogDirSeen {
        path: "/mnt/gone".into(),
        total_bytes: None,
        free_bytes: None,
        free_ratio: None,
        error: Some("cannot read /mnt/gone: No such file or directory".into()),
    });
    w.host.insert(1, h.clone());
    let v = w.judge().remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Degraded);
    assert_eq!(
        hit_of(&v, "log_dir_low_space").detail,
        "low free space, below 10.0%: log dir /var/lib/kafka: 1.0 MiB free of 16.0 MiB (6.2%)"
    );
    assert!(hit_of(&v, "log_dir_unreadable")
        .detail
        .contains("/mnt/gone"));
    // Above the threshold: nothing.
    h.log_dir_min_free_ratio = 0.05;
    h.log_dirs.pop();
    w.host.insert(1, h);
    assert_eq!(w.judge()[&1].state, BrokerState::Healthy);
}

#[test]
fn a_healthy_host_adds_nothing_and_a_failed_look_says_nothing() {
    let mut w = World::healthy();
    w.host.insert(1, host(Some(ProcessState::Sleeping), true));
    assert_eq!(w.judge()[&1].state, BrokerState::Healthy);
    assert!(w.judge()[&1].hits.is_empty());
    let mut failed = host(None, false);
    failed.not_found = None;
    failed.error = Some("reading /proc took over 3 s".into());
    failed.ports.clear();
    w.host.insert(1, failed);
    assert_eq!(
        w.judge()[&1].state,
        BrokerState::Healthy,
        "no look, no finding"
    );
}

#[test]
fn the_last_answer_is_remembered() {
    let mut w = World::healthy();
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
    let mut memory = BTreeMap::new();
    let verdicts: Vec<BrokerVerdict> = w.judge().into_values().collect();
    remember(&mut memory, &verdicts, t0);
    assert_eq!(memory[&1].last_answered_at, Some(t0));
    w.silent(1);
    let verdicts: Vec<BrokerVerdict> = w.judge().into_values().collect();
    remember(&mut memory, &verdicts, t0 + Duration::from_secs(5));
    assert_eq!(memory[&1].last_answered_at, Some(t0), "not while silent");
    assert_eq!(
        memory[&2].last_answered_at,
        Some(t0 + Duration::from_secs(5))
    );
}

// Issue 15 item 7: with retries off, librdkafka sends a write to the leader of its cached
// metadata; a failure there says nothing about the view's (new) leader.

#[test]
fn a_stale_client_cache_does_not_charge_the_views_new_leader() {
    let mut w = World::healthy();
    // Partition 0 moved from broker 1 to broker 2; the client still wrote to broker 1,
    // which answered NOT_LEADER, rightly.
    w.parts[0] = (2, 2, vec![1, 2, 3], vec![1, 2, 3]);
    w.refresh();
    w.canary_round(&[(0, "not_leader", Some(1))], &[]);
    let v = w.judge();
    for b in 1..=3 {
        assert_eq!(v[&b].state, BrokerState::Healthy, "{:?}", v[&b]);
    }
    // A transport failure to the old leader (the client's connection to it broke) is the
    // old leader's, not the new one's; it leads no canary partition, so it is no zombie.
    w.canary_round(&[(0, "transport", Some(1))], &[]);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
    assert_eq!(v[&1].state, BrokerState::Degraded, "{:?}", v[&1]);
    assert!(hit_of(&v[&1], "canary_writes_fail")
        .detail
        .contains("the view's leader is 2"));
    // The view's leader answering NOT_LEADER is its own fault: its cache is behind.
    w.canary_round(&[(0, "not_leader", Some(2))], &[]);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Degraded, "{:?}", v[&2]);
    assert!(hit_of(&v[&2], "canary_writes_fail")
        .detail
        .contains("1 of the 2 partition(s) it leads: partition 0: not_leader"));
    assert_eq!(rules(&v[&2]), vec!["canary_writes_fail"]);
}

/// Issue 14 item 2: broker 1 led partition 0 and was frozen for a few seconds between two
/// rounds; the writes sent to it then timed out, and by the next round Kafka had moved the
/// partition to broker 2, whose writes work. The outage is charged to broker 1, never to 2
/// or 3.
#[test]
fn a_leader_outage_between_two_rounds_is_charged_to_the_leader_that_had_it() {
    let mut w = World::healthy();
    w.parts[0] = (2, 2, vec![1, 2, 3], vec![2, 3]);
    w.refresh();
    w.canary_round(&[], &[]);
    let failed = |broker, received, kind: &'static str| crate::observe::canary::FailedWrites {
        broker,
        kind,
        count: 3,
        received,
        leader_appended: false,
        first_sent_at: SystemTime::UNIX_EPOCH,
        last_sent_at: SystemTime::UNIX_EPOCH + Duration::from_secs(2),
    };
    if let Some(c) = w.canary.as_mut() {
        c.partitions[0].failed_writes = vec![failed(1, true, "timeout")];
    }
    let v = w.judge();
    assert_eq!(v[&1].state, BrokerState::Degraded, "{:?}", v[&1]);
    assert!(hit_of(&v[&1], "canary_writes_fail")
        .detail
        .contains("partition 0: timeout x3 while it led it (the view's leader is now 2)"));
    for b in [2, 3] {
        assert!(
            !rules(&v[&b]).contains(&"canary_writes_fail"),
            "broker {b}: {:?}",
            v[&b]
        );
    }
    assert_eq!(w.charged(), [(0, vec![1])].into_iter().collect());
    // NOT_LEADER is right, a write the client never sent charges nobody, and a
    // replication failure is the links' to decide.
    for (received, kind) in [
        (true, "not_leader"),
        (false, "timeout"),
        (true, "not_enough_replicas"),
    ] {
        if let Some(c) = w.canary.as_mut() {
            c.partitions[0].failed_writes = vec![failed(1, received, kind)];
        }
        let v = w.judge();
        assert!(
            !rules(&v[&1]).contains(&"canary_writes_fail"),
            "{kind}: {:?}",
            v[&1]
        );
    }
}

#[test]
fn client_side_canary_errors_charge_nobody() {
    let mut w = World::healthy();
    // The local queue was full, or the write timed out before it reached any broker.
    w.canary_round(&[(0, "queue_full", None), (1, "timeout", None)], &[]);
    let v = w.judge();
    for b in 1..=3 {
        assert_eq!(v[&b].state, BrokerState::Healthy, "{:?}", v[&b]);
    }
    // A timeout at the broker that leads it is still that broker's.
    w.canary_round(&[(1, "timeout", Some(2))], &[]);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Zombie, "{:?}", v[&2]);
    assert!(hit_of(&v[&2], "canary_writes_fail")
        .detail
        .contains("partition 1: timeout"));
}

// Issue 14 item 4: a follower is charged only while its leader is healthy by every other
// evidence; otherwise the leader is the suspect.

/// Partition 0 led by 1 has lost both followers and its acks=all writes fail.
fn leader_1_without_followers(kind: &'static str) -> World {
    let mut w = World::healthy();
    w.parts[0] = (1, 1, vec![1, 2, 3], vec![1]);
    w.refresh();
    w.canary_round(&[(0, kind, Some(1))], &[(0, 1)]);
    w
}

fn assert_followers_spared(v: &BTreeMap<i32, BrokerVerdict>) {
    for b in [2, 3] {
        assert_eq!(v[&b].state, BrokerState::Healthy, "{:?}", v[&b]);
    }
}

#[test]
fn a_leader_that_lost_every_follower_is_the_suspect_not_its_followers() {
    // Followers 2 and 3 keep up with leaders 2 and 3 (partitions 1, 2 have full ISRs):
    // the common end of the broken links is leader 1.
    let w = leader_1_without_followers("not_enough_replicas");
    let v = w.judge();
    assert_followers_spared(&v);
    assert_eq!(v[&1].state, BrokerState::Degraded, "{:?}", v[&1]);
    let r = rules(&v[&1]);
    assert!(r.contains(&"followers_cannot_replicate"), "{r:?}");
    assert!(r.contains(&"canary_not_enough_replicas"), "{r:?}");
    assert!(hit_of(&v[&1], "canary_not_enough_replicas")
        .detail
        .contains("it leads it"));
    assert_eq!(w.suspects()[&0], vec![1]);
}

#[test]
fn a_silent_leader_is_the_suspect_and_its_followers_are_not_flagged() {
    let mut w = leader_1_without_followers("not_enough_replicas");
    w.silent(1);
    let v = w.judge();
    assert_followers_spared(&v);
    assert_eq!(v[&1].state, BrokerState::Zombie);
    assert_eq!(w.suspects()[&0], vec![1]);
}

#[test]
fn a_fenced_leader_is_the_suspect_even_when_one_follower_lags_elsewhere() {
    // Broker 3 is also missing from partition 1 (led by 2), which alone would make it the
    // broker in most broken links; but leader 1 is fenced.
    let mut w = World::healthy();
    w.parts[0] = (1, 1, vec![1, 2, 3], vec![1]);
    w.parts[1] = (2, 1, vec![2, 3, 1], vec![2, 1]);
    w.refresh();
    w.canary_round(&[(0, "not_enough_replicas", Some(1))], &[]);
    let fenced = ClusterDescription {
        cluster_id: "c".into(),
        controller_id: 0,
        brokers: vec![
            RegisteredBroker {
                endpoint: ep(1),
                fenced: true,
            },
            RegisteredBroker {
                endpoint: ep(2),
                fenced: false,
            },
            RegisteredBroker {
                endpoint: ep(3),
                fenced: false,
            },
        ],
        includes_fenced: true,
    };
    w.probes.get_mut(&2).unwrap().description = Some(Ok(fenced.clone()));
    w.probes.get_mut(&3).unwrap().description = Some(Ok(fenced));
    let v = w.judge();
    assert_eq!(v[&1].registration, Registration::Fenced);
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
    assert!(
        !rules(&v[&3]).contains(&"canary_not_enough_replicas"),
        "{:?}",
        v[&3]
    );
    assert!(hit_of(&v[&1], "canary_not_enough_replicas")
        .detail
        .contains("fenced"));
    assert_eq!(w.suspects()[&0], vec![1]);
}

#[test]
fn a_stale_or_lagging_leader_is_the_suspect_of_acks_all_timeouts() {
    // Leader 1 still takes acks=1 writes, acks=all times out waiting on 2 and 3: with a
    // healthy leader that is ambiguous between the two followers (nobody is named); with a
    // leader whose metadata is behind the cluster's, it is the leader.
    let mut w = World::healthy();
    w.canary_round(&[(0, "timeout", Some(1))], &[(0, 1)]);
    let v = w.judge();
    for b in 1..=3 {
        assert_eq!(v[&b].state, BrokerState::Healthy, "{:?}", v[&b]);
    }
    let old = w.metadata();
    w.parts[1] = (3, 2, vec![2, 3, 1], vec![2, 3, 1]);
    w.refresh();
    if let Some(Ok((m, _))) = &mut w.answering(1, 10).metadata {
        *m = old;
    }
    let v = w.judge();
    assert_followers_spared(&v);
    assert!(
        hit_of(&v[&1], "canary_not_enough_replicas")
            .detail
            .contains("metadata is behind"),
        "{:?}",
        v[&1]
    );
}

/// Follower 3's replication cut: partition 0 (leader 1, followers 2 and 3) held an acks=all
/// write until 3 was dropped from the ISR, and the write's timeout arrived with the ISR
/// already [1, 2]. Follower 2, still in sync, is not the cause; 3 is named by the link.
/// (The lab's cut-replication and stalled-fetcher tests saw the healthy follower blamed.)
#[test]
fn an_acks_all_timeout_that_straddled_an_isr_shrink_blames_the_dropped_follower_only() {
    let mut w = World::healthy();
    w.parts[0] = (1, 1, vec![1, 2, 3], vec![1, 2]);
    w.refresh();
    w.canary_round(&[(0, "timeout", Some(1))], &[(0, 1)]);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
    assert_eq!(v[&1].state, BrokerState::Healthy, "{:?}", v[&1]);
    assert!(rules(&v[&3]).contains(&"out_of_some_isrs"), "{:?}", v[&3]);
}

#[test]
fn a_follower_is_charged_while_its_leader_is_healthy() {
    // Incident 2: partitions of RF 2 led by 1, follower 2 stopped replicating.
    let mut w = World::healthy();
    w.parts = vec![
        (1, 1, vec![1, 2], vec![1]),
        (1, 1, vec![1, 2], vec![1]),
        (3, 1, vec![3, 2], vec![3, 2]),
    ];
    w.refresh();
    w.canary_round(&[(0, "not_enough_replicas", Some(1))], &[]);
    let v = w.judge();
    assert_eq!(v[&1].state, BrokerState::Healthy, "{:?}", v[&1]);
    assert_eq!(v[&2].state, BrokerState::Degraded);
    let r = rules(&v[&2]);
    assert!(r.contains(&"canary_not_enough_replicas"), "{r:?}");
    assert!(r.contains(&"out_of_some_isrs"), "{r:?}");
    assert!(hit_of(&v[&2], "canary_not_enough_replicas")
        .detail
        .contains("NOT_ENOUGH_REPLICAS"));
    assert_eq!(w.suspects()[&0], vec![2]);
    // The same with a timeout while leader 1 takes acks=1 writes.
    w.parts[0] = (1, 1, vec![1, 2], vec![1, 2]);
    w.refresh();
    w.canary_round(&[(0, "timeout", Some(1))], &[(0, 1)]);
    let v = w.judge();
    assert_eq!(v[&1].state, BrokerState::Healthy, "{:?}", v[&1]);
    assert!(rules(&v[&2]).contains(&"canary_not_enough_replicas"));
}

#[test]
fn a_follower_that_cannot_replicate_is_named_not_the_one_waiting_with_it() {
    // Broker 3's fetchers are cut: partition 1 (led by 2) already dropped it; partition 0
    // (led by 1) still waits on 2 and 3 and times out. Only broker 3 is named (issue 14:
    // "broker 2 degraded" went out too).
    let mut w = World::healthy();
    w.parts[1] = (2, 1, vec![2, 3, 1], vec![2, 1]);
    w.refresh();
    w.canary_round(&[(0, "timeout", Some(1))], &[(0, 1)]);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
    assert_eq!(v[&1].state, BrokerState::Healthy, "{:?}", v[&1]);
    let r = rules(&v[&3]);
    assert!(r.contains(&"canary_not_enough_replicas"), "{r:?}");
    assert!(r.contains(&"out_of_some_isrs"), "{r:?}");
    // Before any ISR shrank, both partitions it follows time out: it is common to both.
    let mut w = World::healthy();
    w.canary_round(
        &[(0, "timeout", Some(1)), (1, "timeout", Some(2))],
        &[(0, 1), (1, 2)],
    );
    let v = w.judge();
    assert_eq!(v[&1].state, BrokerState::Healthy, "{:?}", v[&1]);
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
    assert_eq!(v[&3].state, BrokerState::Degraded, "{:?}", v[&3]);
}

#[test]
fn followers_missing_from_a_silent_leaders_isr_make_no_broker_degraded() {
    // Partition findings name suspects, but a follower missing from the ISR of a leader
    // that does not answer is not degraded for it.
    let mut w = World::healthy();
    w.parts[0] = (1, 1, vec![1, 2, 3], vec![1]);
    w.refresh();
    w.silent(1);
    let v = w.judge();
    assert_followers_spared(&v);
    assert_eq!(w.suspects()[&0], vec![1]);
    // The same follower missing where its leader is healthy and kept another follower:
    // itself.
    w.answering(1, 10);
    w.parts[0] = (1, 1, vec![1, 2, 3], vec![1, 2]);
    w.refresh();
    let v = w.judge();
    assert_eq!(rules(&v[&3]), vec!["out_of_some_isrs"]);
    assert_eq!(w.suspects()[&0], vec![3]);
}

/// DescribeCluster v2 with fenced brokers: (id, fenced) for each listed broker.
fn described(brokers: &[(i32, bool)]) -> ClusterDescription {
    ClusterDescription {
        cluster_id: "c".into(),
        controller_id: 1,
        brokers: brokers
            .iter()
            .map(|(id, fenced)| RegisteredBroker {
                endpoint: ep(*id),
                fenced: *fenced,
            })
            .collect(),
        includes_fenced: true,
    }
}

/// Broker `lister` answers like the others but its Metadata omits `missing`.
fn without(w: &mut World, lister: i32, missing: i32) {
    let mut m = w.metadata();
    m.brokers.retain(|b| b.id != missing);
    if let Some(Ok((md, _))) = &mut w.probes.get_mut(&lister).unwrap().metadata {
        *md = m;
    }
}

#[test]
fn a_registration_tie_without_the_controllers_view_is_unknown_not_guilt() {
    // Three brokers, Metadata only: broker 1 lists broker 2, broker 3 (cache behind) does
    // not. One to one says nothing about broker 2.
    let mut w = World::healthy();
    without(&mut w, 3, 2);
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Unknown);
    assert_ne!(v[&2].state, BrokerState::Zombie, "{:?}", v[&2].hits);
    assert!(!rules(&v[&2]).contains(&"fenced_but_serving"));
    // Two to nothing still decides.
    without(&mut w, 1, 2);
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Absent);
    assert_eq!(v[&2].state, BrokerState::Zombie);
}

#[test]
fn describe_cluster_with_fenced_brokers_decides_over_metadata_lists() {
    // Broker 1 reports the controller's records: broker 2 registered, unfenced. Broker 3's
    // DescribeCluster failed and its Metadata does not list broker 2.
    let mut w = World::healthy();
    w.probes.get_mut(&1).unwrap().description =
        Some(Ok(described(&[(1, false), (2, false), (3, false)])));
    without(&mut w, 3, 2);
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Registered);
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2].hits);
    // And the other way: fenced in the controller's records though a Metadata lists it.
    let mut w = World::healthy();
    w.probes.get_mut(&1).unwrap().description =
        Some(Ok(described(&[(1, false), (2, true), (3, false)])));
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Fenced);
    assert_eq!(v[&2].state, BrokerState::Zombie);
}

#[test]
fn a_tie_between_describe_cluster_answers_is_unknown() {
    let mut w = World::healthy();
    w.probes.get_mut(&1).unwrap().description =
        Some(Ok(described(&[(1, false), (2, true), (3, false)])));
    w.probes.get_mut(&3).unwrap().description =
        Some(Ok(described(&[(1, false), (2, false), (3, false)])));
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Unknown);
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2].hits);
}

#[test]
fn a_replica_listed_this_round_but_not_yet_probed_is_unknown_not_down() {
    // Broker 7 joined: every answer lists it, but its address was learned from this round's
    // answers, so it is probed from the next round on.
    let mut w = World::healthy();
    w.registered.push(7);
    w.parts.push((1, 1, vec![1, 7], vec![1]));
    w.refresh();
    let v = w.judge();
    assert_eq!(v[&7].state, BrokerState::Unknown, "{:?}", v[&7].hits);
    assert_eq!(rules(&v[&7]), vec!["not_probed_yet"]);
    assert!(!v[&7].hits[0].detail.contains("no broker lists it"));
    assert_eq!(v[&7].address, "127.0.0.17:9092");
    assert_eq!(v[&7].registration, Registration::Registered);
}

/// Broker `id` accepted TCP, then `step` failed with `kind`.
fn failing_at(w: &mut World, id: i32, step: &str, kind: FailureKind) {
    let p = w.answering(id, 10);
    match step {
        "connect" => {
            p.connect = Err(fail(kind));
            p.api_versions = None;
            p.metadata = None;
        }
        "api_versions" => {
            p.api_versions = Some(Err(fail(kind)));
            p.metadata = None;
        }
        _ => p.metadata = Some(Err(fail(kind))),
    }
}

#[test]
fn a_refused_login_on_one_broker_is_the_watchdogs_access_not_a_zombie() {
    // SASL refused during the handshake (wrong credentials on this broker).
    let mut w = World::healthy();
    failing_at(&mut w, 2, "api_versions", FailureKind::Authentication);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Unknown, "{:?}", v[&2].hits);
    assert_eq!(rules(&v[&2]), vec!["auth_failed"]);
    assert!(v[&2].hits[0].detail.contains("credentials"));
    // An expired or untrusted certificate fails the TLS handshake, reported by connect:
    // the port was reached, so neither unreachable nor down.
    let mut w = World::healthy();
    failing_at(&mut w, 2, "connect", FailureKind::Tls);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Unknown, "{:?}", v[&2].hits);
    assert_eq!(rules(&v[&2]), vec!["auth_failed"]);
}

#[test]
fn an_answer_the_watchdog_cannot_decode_is_a_protocol_error_not_a_zombie() {
    let mut w = World::healthy();
    failing_at(&mut w, 3, "metadata", FailureKind::Protocol);
    let v = w.judge();
    assert_eq!(v[&3].state, BrokerState::Unknown, "{:?}", v[&3].hits);
    assert_eq!(rules(&v[&3]), vec!["protocol_error"]);
    // A timeout in the same step is still a broker that does not answer.
    let mut w = World::healthy();
    failing_at(&mut w, 3, "metadata", FailureKind::Timeout);
    assert_eq!(w.judge()[&3].state, BrokerState::Zombie);
}

#[test]
fn host_mode_does_not_turn_a_refused_login_into_a_zombie() {
    let mut w = World::healthy();
    failing_at(&mut w, 1, "api_versions", FailureKind::Authentication);
    w.host.insert(1, host(Some(ProcessState::Sleeping), true));
    let v = w.judge_with(&answered_12s_ago()).remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Unknown, "{:?}", v.hits);
    assert_eq!(rules(&v), vec!["auth_failed"]);
}

#[test]
fn a_wrong_password_everywhere_says_so_first() {
    let mut w = World::healthy();
    for id in 1..=3 {
        failing_at(&mut w, id, "api_versions", FailureKind::Authentication);
    }
    let v = w.judge();
    for id in 1..=3 {
        assert_eq!(v[&id].state, BrokerState::Unknown);
        assert_eq!(rules(&v[&id]), vec!["auth_failed", "cluster_invisible"]);
    }
}

#[test]
fn an_unreachable_broker_the_others_are_split_on_is_not_down() {
    let mut w = World::healthy();
    w.connect_timeout(2);
    without(&mut w, 3, 2);
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Unknown);
    assert_eq!(v[&2].state, BrokerState::Degraded, "{:?}", v[&2].hits);
    assert!(!v[&2].hits[0].detail.contains("does not list it"));
}

#[test]
fn a_stopped_process_whose_connects_time_out_is_a_zombie_not_down() {
    let mut w = World::healthy();
    w.registered = vec![1, 3];
    w.refresh();
    w.connect_timeout(2);
    w.host.insert(2, host(Some(ProcessState::Stopped), true));
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Zombie, "{:?}", v[&2]);
    assert_eq!(rules(&v[&2])[0], "process_stopped");
    assert!(
        v[&2].hits.iter().all(|h| h.state != BrokerState::Down),
        "{:?}",
        v[&2]
    );
}

#[test]
fn a_broker_that_left_the_cluster_is_forgotten_not_down() {
    // Broker 4 was emptied by reassignment, stopped and unregistered: nobody lists it, no
    // partition names it, its port refuses. It left; paging "down" for it is a false page.
    let mut w = World::healthy();
    w.refused(4);
    let v = w.judge();
    assert!(!v.contains_key(&4), "{:?}", v.get(&4));
    assert!(v.values().all(|v| v.state == BrokerState::Healthy), "{v:?}");
    // Still named as a replica: a broker that died with partitions on it is down.
    w.parts[0].2.push(4);
    w.refresh();
    let v = w.judge();
    assert_eq!(v[&4].state, BrokerState::Down, "{:?}", v[&4]);
    // Listed by the others (KRaft fences a dead broker, it stays registered): down.
    let mut w = World::healthy();
    w.registered.push(4);
    w.refresh();
    w.refused(4);
    assert_eq!(w.judge()[&4].state, BrokerState::Down);
}

/// Before Kafka 4.0 no answer reports fencing (DescribeCluster below v2, or none): a broker
/// the others do not list may be fenced or unregistered, and the verdict says it cannot tell
/// instead of picking one. With DescribeCluster v2 answers, unlisted means unregistered.
#[test]
fn unlisted_broker_on_a_cluster_without_fencing_says_what_it_cannot_see() {
    let mut w = World::healthy();
    w.parts = vec![(1, 2, vec![1, 2, 3], vec![1, 3])];
    w.registered = vec![1, 3];
    w.refresh();
    let view = w.metadata();
    let listed = {
        let mut m = view.clone();
        m.brokers = vec![ep(1), ep(2), ep(3)];
        m
    };
    if let Some(Ok((m, _))) = &mut w.answering(2, 10).metadata {
        *m = listed;
    }
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Absent);
    let hit = v[&2]
        .hits
        .iter()
        .find(|h| h.rule == "fenced_but_serving")
        .expect("fenced_but_serving");
    assert!(
        hit.detail
            .contains("fenced or unregistered cannot be told apart"),
        "{}",
        hit.detail
    );

    // DescribeCluster v0-1 (Kafka 2.8-3.9) lists unfenced brokers only: leaving broker 2
    // out counts as "may be fenced", and the verdict must not say the controller fenced it
    // (seen on the 2.8 lab: "the controller has fenced it" about a ZooKeeper cluster).
    let old_describe = ClusterDescription {
        cluster_id: "c".into(),
        controller_id: 1,
        brokers: vec![
            RegisteredBroker {
                endpoint: ep(1),
                fenced: false,
            },
            RegisteredBroker {
                endpoint: ep(3),
                fenced: false,
            },
        ],
        includes_fenced: false,
    };
    for id in [1, 3] {
        w.probes.get_mut(&id).unwrap().description = Some(Ok(old_describe.clone()));
    }
    let v = w.judge();
    let hit = v[&2]
        .hits
        .iter()
        .find(|h| h.rule == "fenced_but_serving")
        .expect("fenced_but_serving");
    assert!(
        !hit.detail.contains("the controller has fenced it"),
        "{}",
        hit.detail
    );
    assert!(
        hit.detail.contains("cannot be told apart"),
        "{}",
        hit.detail
    );

    let desc = ClusterDescription {
        cluster_id: "c".into(),
        controller_id: 0,
        brokers: vec![
            RegisteredBroker {
                endpoint: ep(1),
                fenced: false,
            },
            RegisteredBroker {
                endpoint: ep(3),
                fenced: false,
            },
        ],
        includes_fenced: true,
    };
    for id in [1, 3] {
        w.probes.get_mut(&id).unwrap().description = Some(Ok(desc.clone()));
    }
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Absent);
    let hit = v[&2]
        .hits
        .iter()
        .find(|h| h.rule == "fenced_but_serving")
        .unwrap();
    assert!(
        !hit.detail.contains("cannot be told apart"),
        "{}",
        hit.detail
    );
}
