//! The verdict's tests: the `World` they build rounds with and the helpers they share; the
//! rules' tests in the files beside, by what they judge.

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

mod cause;
mod control_plane;
mod host_mode;
mod log_dirs;
mod reach;
mod registration;
mod replication;

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
        self.judge_at_with(memory, secs, &VerdictSettings::default())
    }

    /// [`World::judge_at`] with thresholds of the test's own.
    fn judge_at_with(
        &self,
        memory: &BTreeMap<i32, BrokerMemory>,
        secs: u64,
        settings: &VerdictSettings,
    ) -> BTreeMap<i32, BrokerVerdict> {
        let obs = self.observation();
        let answers: Vec<(i32, &MetadataView)> = obs
            .probes
            .iter()
            .filter_map(|(id, p)| p.metadata_view().map(|m| (*id, m)))
            .collect();
        let view: ClusterView = merge(&answers);
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
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
            settings,
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
