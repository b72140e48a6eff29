//! The verdict's tests: the `World` they build rounds with, and the reach and partition
//! rules; host mode, blame and registration in the files beside.

mod cause;
mod control_plane;
mod host_mode;
mod log_dirs;
mod registration;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::*;
use crate::judge::health::classify_reassigning;
use crate::model::round::{
    BrokerEndpoint, BrokerProbe, ClusterDescription, FailureKind, MetadataView, PartitionView,
    ProbeFailure, RegisteredBroker, RoundObservation, TopicView, NO_LEADER,
};
use crate::observe::cluster_view::{merge, ClusterView};
use crate::observe::host::{HostObservation, LogDirSeen, PortSeen, ProcessSeen, ProcessState};

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
    /// The look at the control plane the round carries.
    quorum: Option<std::sync::Arc<crate::model::round::QuorumObservation>>,
    /// (partition, broker): the metadata names the broker an offline replica of it.
    offline: Vec<(i32, i32)>,
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
            quorum: None,
            offline: Vec::new(),
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
                offline_replicas: self
                    .offline
                    .iter()
                    .filter(|(p, _)| *p == i as i32)
                    .map(|(_, b)| *b)
                    .collect::<Vec<_>>()
                    .as_slice()
                    .into(),
            })
            .collect::<Vec<_>>();
        let mut topics = BTreeMap::new();
        topics.insert(
            "t".to_string(),
            TopicView {
                name: "t".into(),
                topic_id: 0,
                error_code: 0,
                is_internal: false,
                partitions: partitions.into(),
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
                certificate: None,
                log_dirs: None,
                speaks_quorum: None,
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
                certificate: None,
                log_dirs: None,
                speaks_quorum: None,
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
                certificate: None,
                log_dirs: None,
                speaks_quorum: None,
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
                certificate: None,
                log_dirs: None,
                speaks_quorum: None,
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
            quorum: self.quorum.clone(),
            coordinators: None,
            brokers_unwatched: 0,
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
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        let settings = VerdictSettings::default();
        let health = classify_reassigning(
            &view,
            &obs.min_isr,
            catch_up::copying(&obs, memory, settings.catch_up_window, now),
            |_| true,
        );
        judge(
            &obs,
            &view,
            &health,
            self.canary.as_ref(),
            memory,
            &settings,
            now,
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
            quorum: None,
            coordinators: None,
            brokers_unwatched: 0,
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
            // As a first round judges it: nothing remembered.
            catch_up::copying(
                &obs,
                &BTreeMap::new(),
                Duration::from_secs(60),
                obs.started_at,
            ),
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
            quorum: None,
            coordinators: None,
            brokers_unwatched: 0,
        };
        let view = crate::judge::report::newest_view(&obs);
        let mut health = classify_reassigning(
            &view,
            &obs.min_isr,
            // As a first round judges it: nothing remembered.
            catch_up::copying(
                &obs,
                &BTreeMap::new(),
                Duration::from_secs(60),
                obs.started_at,
            ),
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
    v.hits.iter().map(|h| h.rule.name()).collect()
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
    assert_eq!(rules(&v[&2]), vec![Rule::ShutDownCleanly.name()]);
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

/// Two replicas killed in the lab: the next rounds saw Kafka fence them, elect away and
/// shrink the ISRs, and judged from that view the crash read as a clean stop (held, not
/// paged). A refusal is told clean or crashed once, when it starts.
#[test]
fn a_crash_stays_a_crash_after_kafka_moves_the_broker_out_of_every_isr() {
    let mut w = World::healthy();
    w.refused(2);
    let mut memory = BTreeMap::new();
    let v = w.round(&mut memory, 1000);
    assert_eq!(rules(&v[&2]), vec!["port_closed"]);
    // Fenced: leadership moved from 2 and it left every ISR.
    w.parts = vec![
        (1, 1, vec![1, 2, 3], vec![1, 3]),
        (3, 2, vec![2, 3, 1], vec![3, 1]),
        (3, 1, vec![3, 1, 2], vec![3, 1]),
    ];
    w.registered = vec![1, 3];
    w.refresh();
    w.refused(2);
    for at in [1010, 1020] {
        let v = w.round(&mut memory, at);
        assert_eq!(rules(&v[&2])[0], "port_closed", "at {at}: {:?}", v[&2]);
        assert_eq!(v[&2].page_after, None);
    }
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
    let w = fenced_world();
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Fenced);
    assert_eq!(v[&2].state, BrokerState::Zombie);
    assert!(rules(&v[&2]).contains(&"fenced_but_serving"));
}

/// Issue 31: registering after a restart is the window from its last down to the first
/// round that lists it registered; a broker fenced after that is a zombie, not
/// "registering" for the rest of the restart grace.
#[test]
fn the_registering_window_ends_at_the_first_round_that_lists_it_registered() {
    let w = fenced_world();
    let at = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
    let mut memory = BTreeMap::new();
    memory.insert(
        2,
        BrokerMemory {
            last_down_at: Some(at(990)),
            ..BrokerMemory::default()
        },
    );
    let v = w.judge_with(&memory);
    assert_eq!(v[&2].state, BrokerState::Degraded, "{:?}", v[&2]);
    assert!(v[&2].hits[0].detail.contains("registering"));
    memory.get_mut(&2).unwrap().registered_at = Some(at(995));
    let v = w.judge_with(&memory);
    assert_eq!(v[&2].state, BrokerState::Zombie, "{:?}", v[&2]);
}

/// Broker 2 answers clients while the controller has fenced it.
fn fenced_world() -> World {
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
    w
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
            ..Default::default()
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
    // Copying: its logs grow every round (one standing still is the next test's).
    for (k, secs) in [1000u64, 1100, 1200].into_iter().enumerate() {
        measured(&mut w, [1000 * k as i64; 2], 9000, Some(2));
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
    measured(&mut w, [3000, 3000], 9000, Some(1));
    let v = w.round(&mut memory, 1300);
    assert_eq!(rules(&v[&3]), vec!["out_of_some_isrs"], "{:?}", v[&3]);
    assert!(
        v[&3].hits[0].detail.contains("t-1 (leader 2)"),
        "{:?}",
        v[&3]
    );
    assert_eq!(w.suspects().get(&1), Some(&vec![3]), "{:?}", w.suspects());
}

/// Issue 31, the routine bench's add-broker phase (bench/results/2026-12-04-routine-
/// controllers.md): broker 4's replica of routine-data-0 joined the ISR when its move
/// completed, fell behind under the move's throttle (Kafka throttles any replica that lags,
/// in the ISR or not), dropped out, and a `degraded` warning was paged for 30 s of a
/// planned move. A replica copying under the operator's throttle is copying, not missing,
/// for as long as its logs grow; once they stand still for the catch-up window it counts
/// missing again.
#[test]
fn a_replica_copying_under_a_replication_throttle_is_not_missing_until_its_logs_stand_still() {
    let mut w = World::healthy();
    // Broker 3 is in the ISR of t-2 and has fallen out of t-0's and t-1's.
    w.parts = vec![
        (1, 1, vec![1, 2, 3], vec![1, 2]),
        (2, 1, vec![2, 1, 3], vec![2, 1]),
        (1, 1, vec![1, 2, 3], vec![1, 2, 3]),
    ];
    w.refresh();
    let throttle = |w: &mut World, log_end: i64| {
        measured(w, [log_end; 2], 90_000, None);
        w.followers.get_mut(&3).unwrap().throttled = vec![("t".into(), 0), ("t".into(), 1)];
    };
    let mut memory = BTreeMap::new();
    for (k, secs) in [1000u64, 1010, 1020, 1030].into_iter().enumerate() {
        throttle(&mut w, 1000 * k as i64);
        let v = w.round(&mut memory, secs);
        for b in [1, 2, 3] {
            assert_eq!(v[&b].state, BrokerState::Healthy, "at {secs}: {:?}", v[&b]);
        }
        assert!(
            w.suspects().values().all(Vec::is_empty),
            "{:?}",
            w.suspects()
        );
    }
    // Standing still from 1030 on: the allowance ends with the window.
    throttle(&mut w, 3000);
    assert_eq!(w.round(&mut memory, 1080)[&3].state, BrokerState::Healthy);
    let v = w.round(&mut memory, 1091);
    assert_eq!(rules(&v[&3]), vec!["out_of_some_isrs"], "{:?}", v[&3]);
    assert!(v[&3].hits[0].detail.contains("2 of the 3"), "{:?}", v[&3]);
    // Without a throttle, the same replicas are missing at once.
    let mut w2 = World::healthy();
    w2.parts = w.parts.clone();
    w2.refresh();
    measured(&mut w2, [0; 2], 90_000, None);
    let v = w2.round(&mut BTreeMap::new(), 1000);
    assert_eq!(rules(&v[&3]), vec!["out_of_some_isrs"], "{:?}", v[&3]);
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
        quorum: None,
        coordinators: None,
        brokers_unwatched: 0,
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
        .find(|h| h.rule.name() == rule)
        .unwrap_or_else(|| panic!("no {rule} in {v:#?}"))
}

/// Issue 31: the dead fetcher's broker whose Metadata answer failed once in a while stayed
/// `degraded` for 290 s: each failed round ended its catch-up window. A round that saw no
/// answer says nothing about its ISRs; the window runs from when it left them.
#[test]
fn a_round_whose_answer_failed_does_not_restart_the_catch_up_window() {
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    measured(&mut w, [100, 100], 500, None);
    assert_eq!(w.round(&mut memory, 1000)[&3].state, BrokerState::Degraded);
    w.probes.get_mut(&3).unwrap().metadata = Some(Err(fail(FailureKind::Timeout)));
    let v = w.round(&mut memory, 1030);
    assert!(!rules(&v[&3]).contains(&"out_of_every_isr"), "{:?}", v[&3]);
    w.answering(3, 10);
    let v = w.round(&mut memory, 1061);
    assert_eq!(v[&3].state, BrokerState::Zombie, "{:?}", v[&3]);
    assert!(v[&3].hits[0].detail.contains("have not grown for 61 s"));
}

/// A reassignment adding a broker whose logs stand still has the window's limit too: the
/// partitions do not count it missing, its own verdict names it once its logs stood still
/// for the window while its leaders are ahead.
#[test]
fn a_reassignment_adding_a_replica_that_never_grows_is_a_zombie_after_the_window() {
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    for (k, secs) in [1000u64, 1010, 1020].into_iter().enumerate() {
        measured(&mut w, [100 * k as i64; 2], 9000, Some(2));
        let v = w.round(&mut memory, secs);
        assert_eq!(v[&3].state, BrokerState::Healthy, "at {secs}: {:?}", v[&3]);
    }
    // Standing still from 1020 on.
    let v = w.round(&mut memory, 1070);
    assert_eq!(v[&3].state, BrokerState::Healthy, "{:?}", v[&3]);
    let v = w.round(&mut memory, 1081);
    assert_eq!(v[&3].state, BrokerState::Zombie, "{:?}", v[&3]);
    assert_eq!(rules(&v[&3]), vec!["reassignment_stalled"]);
    assert!(
        v[&3].hits[0].detail.contains("have not grown for 61 s"),
        "{:?}",
        v[&3]
    );
    // Its leaders not ahead (caught up): not its fault.
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    measured(&mut w, [9000, 9000], 9000, Some(2));
    w.round(&mut memory, 1000);
    w.round(&mut memory, 1010);
    assert_eq!(w.round(&mut memory, 1100)[&3].state, BrokerState::Healthy);
}
