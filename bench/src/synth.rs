//! Synthetic rounds for the scale benchmark: a cluster of `brokers` brokers and `partitions`
//! partitions (RF 3, 100 partitions per topic), with a few percent of partitions
//! under-replicated, under min ISR or offline, about 1 % of brokers frozen and 1 % refusing
//! connections, and one broker answering from a stale cache (it still claims leaderships a
//! newer epoch gave away). Deterministic: the same sizes give the same round.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use kafka_watchdog::model::round::{
    BrokerEndpoint, BrokerId, BrokerProbe, ClusterDescription, FailureKind, MetadataView,
    PartitionView, ProbeFailure, RegisteredBroker, RoundObservation, TopicView, NO_LEADER,
};

pub const PARTITIONS_PER_TOPIC: usize = 100;
pub const MIN_ISR: i32 = 2;
/// The broker whose Metadata answer comes from an old cache.
pub const STALE_BROKER: BrokerId = 3;

/// A tiny deterministic generator (SplitMix64), so runs are comparable without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// True with probability `per_mille` / 1000.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.next_u64() % 1000 < per_mille
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Answering,
    /// TCP accepted, ApiVersions timed out: a frozen JVM.
    Frozen,
    /// Connection refused: the process is gone.
    Refused,
}

/// Which brokers misbehave: about 1 % frozen and 1 % refused, at least one of each.
pub fn role(id: BrokerId) -> Role {
    match id % 100 {
        7 => Role::Frozen,
        13 => Role::Refused,
        _ => Role::Answering,
    }
}

pub fn endpoint(id: BrokerId) -> BrokerEndpoint {
    BrokerEndpoint {
        id,
        host: format!("kafka-{id}.bench.example.internal"),
        port: 9092,
        rack: Some(format!("rack-{}", id % 3)),
    }
}

/// The views every answering broker would send.
pub struct Views {
    /// The newest truth, as the up-to-date brokers answer.
    pub full: MetadataView,
    /// The stale broker's answer: the same partitions, some with an older leadership of its own.
    pub stale: MetadataView,
    /// A Metadata answer without topics (broker list only), for the variant where most
    /// brokers are asked only whether they answer.
    pub thin: MetadataView,
}

pub fn views(partitions: usize, brokers: usize) -> Views {
    assert!(brokers >= 3, "RF 3 needs at least three brokers");
    let b = brokers as i32;
    let mut rng = Rng::new(0x5eed ^ (partitions as u64) << 20 ^ brokers as u64);
    let registered: Vec<BrokerEndpoint> = (1..=b)
        .filter(|id| role(*id) == Role::Answering)
        .map(endpoint)
        .collect();
    let header = MetadataView {
        cluster_id: Some("bench-cluster".into()),
        controller_id: Some(1),
        brokers: registered,
        topics: BTreeMap::new(),
        has_leader_epochs: true,
        has_offline_replicas: true,
        version: 12,
        all_topics: true,
    };
    let mut thin = header.clone();
    thin.all_topics = false;
    let mut full = header.clone();
    let mut stale = header;
    let topics = partitions.div_ceil(PARTITIONS_PER_TOPIC);
    for t in 0..topics {
        let name = format!("bench-topic-{t:05}");
        let n = PARTITIONS_PER_TOPIC.min(partitions - t * PARTITIONS_PER_TOPIC);
        let mut parts = Vec::with_capacity(n);
        let mut stale_parts = Vec::with_capacity(n);
        for p in 0..n {
            let start = ((t * 31 + p) % brokers) as i32;
            let replicas: Vec<BrokerId> = (0..3).map(|k| (start + k) % b + 1).collect();
            let mut isr: Vec<BrokerId> = replicas
                .iter()
                .copied()
                .filter(|r| role(*r) == Role::Answering)
                .collect();
            let epoch = 1 + (rng.next_u64() % 40) as i32;
            let mut leader = isr.first().copied().unwrap_or(NO_LEADER);
            if rng.chance(2) {
                // Offline: every replica in the last ISR died; ELR off keeps one in the ISR.
                leader = NO_LEADER;
                isr.truncate(1);
            } else if rng.chance(5) && isr.len() > 1 {
                isr.truncate(1);
            } else if rng.chance(20) && isr.len() > 2 {
                isr.pop();
            }
            let offline_replicas: Vec<BrokerId> = replicas
                .iter()
                .copied()
                .filter(|r| role(*r) == Role::Refused)
                .collect();
            let view = PartitionView {
                partition: p as i32,
                error_code: if leader == NO_LEADER { 5 } else { 0 },
                leader,
                leader_epoch: epoch,
                replicas: replicas.as_slice().into(),
                isr: isr.as_slice().into(),
                offline_replicas: offline_replicas.into(),
            };
            let mut old = view.clone();
            if replicas.contains(&STALE_BROKER) && leader != STALE_BROKER && rng.chance(100) {
                old.leader = STALE_BROKER;
                old.leader_epoch = epoch - 1;
                old.error_code = 0;
                old.isr = replicas.as_slice().into();
            }
            parts.push(view);
            stale_parts.push(old);
        }
        full.topics.insert(
            name.clone(),
            TopicView {
                name: name.clone(),
                topic_id: 0,
                error_code: 0,
                is_internal: false,
                partitions: parts.into(),
            },
        );
        stale.topics.insert(
            name.clone(),
            TopicView {
                name,
                topic_id: 0,
                error_code: 0,
                is_internal: false,
                partitions: stale_parts.into(),
            },
        );
    }
    Views { full, stale, thin }
}

/// Which kind of Metadata answer broker `id` gives in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Full,
    Stale,
    Thin,
    None,
}

/// Every answering broker sends a full view (`full_sources` None), or only the stale broker
/// and the lowest answering ids up to `full_sources` in all do, the others a thin one.
pub fn answer_of(id: BrokerId, full_sources: Option<usize>) -> Answer {
    if role(id) != Role::Answering {
        return Answer::None;
    }
    if id == STALE_BROKER {
        return Answer::Stale;
    }
    match full_sources {
        None => Answer::Full,
        Some(n) => {
            // The stale broker takes one of the slots.
            let rank = (1..id)
                .filter(|i| role(*i) == Role::Answering && *i != STALE_BROKER)
                .count();
            if rank + 1 < n {
                Answer::Full
            } else {
                Answer::Thin
            }
        }
    }
}

fn ms(x: f64) -> Duration {
    Duration::from_secs_f64(x / 1000.0)
}

/// One round's observation; `pick` gives each answering broker's Metadata answer (owned
/// clones of the views, as real probes decode one each).
pub fn observation(
    brokers: usize,
    views: &Views,
    mut pick: impl FnMut(BrokerId) -> Option<MetadataView>,
) -> RoundObservation {
    let b = brokers as i32;
    let registered: Vec<RegisteredBroker> = (1..=b)
        .filter(|id| role(*id) != Role::Refused)
        .map(|id| RegisteredBroker {
            endpoint: endpoint(id),
            fenced: role(id) == Role::Frozen,
        })
        .collect();
    let description = ClusterDescription {
        cluster_id: "bench-cluster".into(),
        controller_id: 1,
        brokers: registered,
        includes_fenced: true,
    };
    let mut probes = BTreeMap::new();
    for id in 1..=b {
        let jitter = f64::from(id % 10) / 10.0;
        let mut probe = BrokerProbe {
            endpoint: endpoint(id),
            connect: Ok(ms(0.3 + jitter / 10.0)),
            api_versions: None,
            metadata: None,
            description: None,
            certificate: None,
            log_dirs: None,
            speaks_quorum: None,
        };
        match role(id) {
            Role::Refused => {
                probe.connect = Err(ProbeFailure {
                    kind: FailureKind::ConnectionRefused,
                    detail: "Connection refused (os error 111)".into(),
                    after: ms(0.2),
                });
            }
            Role::Frozen => {
                probe.api_versions = Some(Err(ProbeFailure {
                    kind: FailureKind::Timeout,
                    detail: "no answer to ApiVersions within 3000 ms".into(),
                    after: ms(3000.0),
                }));
            }
            Role::Answering => {
                probe.api_versions = Some(Ok(ms(0.5 + jitter)));
                let md = pick(id).unwrap_or_else(|| views.thin.clone());
                probe.metadata = Some(Ok((md, ms(4.0 + jitter * 3.0))));
                probe.description = Some(Ok(description.clone()));
            }
        }
        probes.insert(id, probe);
    }
    let min_isr = views
        .full
        .topics
        .keys()
        .map(|t| (t.clone(), MIN_ISR))
        .collect();
    RoundObservation {
        cluster: "bench".into(),
        started_at: SystemTime::now(),
        duration: ms(3010.0),
        probes,
        bootstrap_failures: Vec::new(),
        min_isr,
        unclean_allowed: Default::default(),
        eligible_leaders: Default::default(),
        host: Default::default(),
        followers: Default::default(),
        liveness: Default::default(),
        quorum: None,
        coordinators: None,
        brokers_unwatched: 0,
    }
}

/// The observation of a round in which brokers answer as `answer_of` says.
pub fn round(brokers: usize, views: &Views, full_sources: Option<usize>) -> RoundObservation {
    observation(brokers, views, |id| match answer_of(id, full_sources) {
        Answer::Full => Some(decoded(&views.full)),
        Answer::Stale => Some(decoded(&views.stale)),
        Answer::Thin => Some(decoded(&views.thin)),
        Answer::None => None,
    })
}

/// A copy of `view` that shares no partition list with it, as each broker's answer is
/// decoded into its own (a clone shares them).
pub fn decoded(view: &MetadataView) -> MetadataView {
    let mut copy = view.clone();
    for t in copy.topics.values_mut() {
        t.partitions = t.partitions.to_vec().into();
    }
    copy
}

/// A copy of `obs` whose answers share no partition list with it: a new round's
/// observation, as the daemon decodes one.
pub fn decoded_round(obs: &RoundObservation) -> RoundObservation {
    let mut copy = obs.clone();
    for p in copy.probes.values_mut() {
        if let Some(Ok((md, _))) = &mut p.metadata {
            *md = decoded(md);
        }
    }
    copy
}

/// Brokers that send a Metadata answer of each kind: (full or stale, thin).
pub fn source_counts(brokers: usize, full_sources: Option<usize>) -> (usize, usize) {
    let mut full = 0;
    let mut thin = 0;
    for id in 1..=brokers as i32 {
        match answer_of(id, full_sources) {
            Answer::Full | Answer::Stale => full += 1,
            Answer::Thin => thin += 1,
            Answer::None => {}
        }
    }
    (full, thin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_full_sources_include_the_stale_broker() {
        let full: Vec<i32> = (1..=50)
            .filter(|id| matches!(answer_of(*id, Some(3)), Answer::Full | Answer::Stale))
            .collect();
        assert_eq!(full, vec![1, 2, 3]);
        assert_eq!(source_counts(50, Some(3)), (3, 45));
        assert_eq!(source_counts(50, None), (48, 0));
    }
}
