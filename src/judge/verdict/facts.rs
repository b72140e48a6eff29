//! What the rules read about one broker: its facts gathered once per round, the
//! canary's results charged to the broker that received each write, the latency of its
//! peers and what the merged view says it holds.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{catch_up, cause, Registration};
use crate::judge::health::BrokerPartitions;
use crate::model::round::{BrokerId, BrokerProbe, HostObservation, RoundObservation, NO_LEADER};
use crate::observe::cluster_view::ClusterView;

/// Everything known about one broker this round, gathered once so rules stay one-liners.
#[derive(Debug, Clone)]
pub struct BrokerFacts<'a> {
    pub id: BrokerId,
    pub probe: &'a BrokerProbe,
    pub registration: Registration,
    pub partitions: BrokerPartitions,
    pub stale_leader_of: Vec<String>,
    pub disagreements: u32,
    pub peer_median_latency: Option<Duration>,
    pub recently_down: bool,
    /// Nothing in the cluster answered this round.
    pub cluster_invisible: bool,
    /// Partitions of every topic (the filter's or not) the merged view names it leader or
    /// in-sync replica of.
    pub holds_in_cluster: u32,
    /// Some other broker's answer reported fencing (DescribeCluster v2, Kafka 4.0+). Without
    /// one, a broker the others do not list may be fenced or unregistered: nobody says which.
    pub fencing_reported: bool,
    pub canary: CanaryFacts,
    /// Host mode's look at its process, when it runs on the watchdog's host.
    pub host: Option<&'a HostObservation>,
    /// How long since it last answered; `None` while it answers or when it never did.
    pub silent_for: Option<Duration>,
    /// How long it has accepted TCP connections without answering, counted from the first
    /// such round and kept while connects then time out; `None` outside such an episode.
    pub accepting_silently_for: Option<Duration>,
    /// Whether it is catching up, when it is out of every ISR.
    pub catch_up: catch_up::CatchUpFacts,
    /// Partitions ("t-0 (leader 1)") whose ISR it is missing from, where the evidence
    /// points at it rather than at the leader (see `cause`).
    pub lagging: Named,
    /// Partitions it leads ("t-0 (followers 2, 3)") whose followers dropped out of the ISR
    /// because of it, by the same evidence.
    pub followers_lost: Named,
    /// Leadership changes its own metadata has not caught up with.
    pub behind: Option<&'a crate::observe::cluster_view::Behind>,
    /// Its Raft fetch of the metadata log as the quorum's leader describes it (it is an
    /// observer of the quorum); `None` without a description.
    pub metadata_fetch: Option<&'a crate::model::round::ReplicaProgress>,
    /// Its log directories as it described them this round.
    pub log_dirs: Option<&'a [crate::model::round::LogDirState]>,
    /// Its directories' usable bytes over the last half hour.
    pub dir_usage: Option<&'a BTreeMap<String, super::rules_disk::Usage>>,
    /// Partitions the view names it an offline replica of.
    pub offline_replica_of: Named,
}

/// Partitions some evidence names: the first few, as the rules show them, and how many in
/// all. A broker can be named by tens of thousands of partitions in a round, and only the
/// first few are ever shown, so only those are put into words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Named {
    /// The first `Named::SHOWN`, in the order they were named.
    pub shown: Vec<String>,
    pub total: usize,
}

impl Named {
    /// How many the evidence strings name.
    pub const SHOWN: usize = 5;

    /// Counts one more; `words` is called only when it is among the first shown.
    pub fn push_with(&mut self, words: impl FnOnce() -> String) {
        if self.shown.len() < Self::SHOWN {
            self.shown.push(words());
        }
        self.total += 1;
    }

    pub fn len(&self) -> usize {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

/// What this round's canary says about one broker.
#[derive(Debug, Clone, Default)]
pub struct CanaryFacts {
    /// Canary partitions it leads.
    pub led: u32,
    /// Canary writes it received for partitions it leads that failed for a reason that
    /// points at the leader ("partition 3: timeout").
    pub failed: Vec<String>,
    /// Canary writes it received as leader (because the client's metadata still named it,
    /// or because it led the partition when they were sent, since the last round) for
    /// partitions the newest view gives to another broker, that it did not refuse as
    /// NOT_LEADER (a refusal is right and charges nobody).
    pub failed_elsewhere: Vec<String>,
    /// Canary acks=all writes that failed for lack of replication (NOT_ENOUGH_REPLICAS, or
    /// a timeout while the leader took acks=1 writes) where the evidence points at it.
    pub blamed: Vec<String>,
}

/// The median Metadata latency of the other brokers, for each broker, from one sorted list.
pub(super) fn peer_medians(obs: &RoundObservation) -> BTreeMap<BrokerId, Duration> {
    let mut all: Vec<Duration> = obs
        .probes
        .values()
        .filter_map(BrokerProbe::metadata_latency)
        .collect();
    all.sort_unstable();
    let m = all.len();
    obs.probes
        .iter()
        .filter_map(|(id, p)| {
            let median = match p.metadata_latency() {
                // The median of the list without this broker's own value.
                Some(own) => {
                    if m < 2 {
                        return None;
                    }
                    let pos = all.partition_point(|d| *d < own);
                    let k = (m - 1) / 2;
                    if k < pos {
                        all[k]
                    } else {
                        all[k + 1]
                    }
                }
                None => *all.get(m / 2)?,
            };
            Some((*id, median))
        })
        .collect()
}

/// Attributes each canary partition's result to the broker that received the write, never
/// to the view's leader on the client's word: a failure for lack of in-sync replicas or an
/// acks=all timeout on a leader that still takes acks=1 writes to the decided cause of
/// the partition's broken links; a NOT_LEADER from a broker the view does not name leader
/// to nobody (it is right, the client's metadata is old); a write that never reached a
/// broker (queue full, timed out in the client) to nobody; any other failure to the broker
/// that received it.
pub(super) fn canary_facts(
    round: &crate::observe::canary::CanaryRound,
    links: &BTreeMap<(String, i32, BrokerId), Vec<BrokerId>>,
    waits: &BTreeMap<i32, &crate::model::round::BrokerList>,
    sick: &cause::Sickness,
) -> (
    BTreeMap<BrokerId, CanaryFacts>,
    BTreeMap<i32, Vec<BrokerId>>,
) {
    let mut facts: BTreeMap<BrokerId, CanaryFacts> = BTreeMap::new();
    let mut charged: BTreeMap<i32, Vec<BrokerId>> = BTreeMap::new();
    for p in &round.partitions {
        if p.leader >= 0 {
            facts.entry(p.leader).or_default().led += 1;
        }
        charge_past_leaders(p, &mut facts, &mut charged);
        let Some(err) = &p.produce_error else {
            continue;
        };
        let to = charged.entry(p.partition).or_default();
        // Refused to the watchdog's user: its permissions, not the broker, are at fault.
        if err.kind == crate::model::words::AUTHORIZATION
            || crate::model::words::client_side(err.kind)
        {
            continue;
        }
        let Some(received) = err.broker else {
            continue;
        };
        let what = format!("partition {}: {}", p.partition, err.kind);
        if received != p.leader {
            if err.kind != "not_leader" {
                to.push(received);
                facts
                    .entry(received)
                    .or_default()
                    .failed_elsewhere
                    .push(format!("{what} (the view's leader is {})", p.leader));
            }
            continue;
        }
        if crate::model::words::blames_followers(err.kind) {
            let mut suspects: Vec<BrokerId> = p
                .replicas
                .iter()
                .filter(|r| !p.isr.contains(r))
                .flat_map(|r| {
                    links
                        .get(&(round.topic.clone(), p.partition, *r))
                        .cloned()
                        .unwrap_or_default()
                })
                .collect();
            suspects.sort_unstable();
            suspects.dedup();
            to.extend(&suspects);
            blame(&mut facts, &suspects, p, "NOT_ENOUGH_REPLICAS", sick);
        } else if let Some(suspects) = waits.get(&p.partition) {
            to.extend(suspects.iter());
            blame(
                &mut facts,
                suspects,
                p,
                "acks=all timed out while the leader took acks=1 writes",
                sick,
            );
        } else {
            to.push(p.leader);
            facts.entry(p.leader).or_default().failed.push(what);
        }
    }
    (facts, charged)
}

/// Writes that failed since the last round at a broker that no longer leads the
/// partition: a leader outage shorter than a round, charged to the leader that had it
/// (issue 14 item 2). Refusals, client-side failures and replication failures (whose cause
/// the round's links decide) charge nobody here.
fn charge_past_leaders(
    p: &crate::observe::canary::PartitionRound,
    facts: &mut BTreeMap<BrokerId, CanaryFacts>,
    charged: &mut BTreeMap<i32, Vec<BrokerId>>,
) {
    for fw in &p.failed_writes {
        let latest_there = p
            .produce_error
            .as_ref()
            .is_some_and(|e| e.broker == Some(fw.broker));
        // Only where the client says which broker had them: a write that never left the
        // client charges nobody (as below).
        if !fw.received
            || fw.leader_appended
            || fw.broker == p.leader
            || latest_there
            || fw.kind == crate::observe::canary::AUTHORIZATION
            || fw.kind == "not_leader"
            || crate::observe::canary::client_side(fw.kind)
            || crate::observe::canary::blames_followers(fw.kind)
        {
            continue;
        }
        let to = charged.entry(p.partition).or_default();
        if !to.contains(&fw.broker) {
            to.push(fw.broker);
        }
        facts
            .entry(fw.broker)
            .or_default()
            .failed_elsewhere
            .push(format!(
                "partition {}: {} x{} while it led it (the view's leader is now {})",
                p.partition, fw.kind, fw.count, p.leader
            ));
    }
}

/// Blames `suspects` for partition `p`'s failed write: as its leader (with why it is sick,
/// when it is) or as the follower that does not keep up.
fn blame(
    facts: &mut BTreeMap<BrokerId, CanaryFacts>,
    suspects: &[BrokerId],
    p: &crate::observe::canary::PartitionRound,
    what: &str,
    sick: &cause::Sickness,
) {
    for s in suspects {
        let role = if *s == p.leader {
            match sick.get(s) {
                Some(why) => format!("it leads it and {why}"),
                None => "it leads it and its followers keep up with other leaders".into(),
            }
        } else {
            "it is the follower that does not keep up".into()
        };
        facts
            .entry(*s)
            .or_default()
            .blamed
            .push(format!("partition {}: {what}, {role}", p.partition));
    }
}

/// Whether any partition of the newest view names `broker` as a replica (offline replicas
/// included): the whole view, not only the topics the filter admits.
pub(super) fn named_as_replica(view: &ClusterView, broker: BrokerId) -> bool {
    view.topics.values().any(|t| {
        t.partitions
            .iter()
            .any(|p| p.replicas.contains(&broker) || p.offline_replicas.contains(&broker))
    })
}

/// Per broker, the partitions of every topic the view names it leader or in-sync replica of.
/// Kafka's controlled shutdown moves a broker's leaderships away and takes it out of every
/// ISR before its listener closes; a killed broker keeps both until the controller notices.
pub fn holdings_in(view: &ClusterView) -> BTreeMap<BrokerId, u32> {
    // A map entry for each of millions of ISR members was most of a large round's verdict time.
    let mut held: crate::model::round::IdTable<u32> = Default::default();
    let mut count = |b: BrokerId| *held.entry(b) += 1;
    for t in view.topics.values() {
        for p in t.partitions.iter() {
            // Each broker once per partition, whether in the ISR (even twice) or leading.
            for (i, b) in p.isr.iter().enumerate() {
                if !p.isr[..i].contains(b) {
                    count(*b);
                }
            }
            if p.leader != NO_LEADER && !p.isr.contains(&p.leader) {
                count(p.leader);
            }
        }
    }
    held.into_list().into_iter().collect()
}
