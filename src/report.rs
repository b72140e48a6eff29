//! From a round's observations to the report every output reads: the merged view, partition
//! health, verdicts, and the counters that accumulate across rounds. No I/O: `now` is a
//! parameter, so a whole round can be evaluated in a unit test or a benchmark.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::canary::stats::CanaryStats;
use crate::canary::CanaryRound;
use crate::cluster_view::{merge, StaleLeader};
use crate::health::{classify, Condition, Health};
use crate::observe::{
    BrokerId, BrokerProbe, FailureKind, MetadataView, ProbeFailure, RoundObservation,
};
use crate::verdict::{self, BrokerMemory, BrokerState, BrokerVerdict, VerdictSettings};

/// Decides which topics count; the canary topic and internal topics go through it too.
pub type TopicFilterFn = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// (broker, request, failure kind) -> count since the watchdog started.
pub type FailureCounts = BTreeMap<(BrokerId, &'static str, FailureKind), u64>;

/// The complete result of one round of one cluster; immutable once published.
#[derive(Debug, Clone)]
pub struct ClusterReport {
    pub cluster: String,
    /// 1 for the first round.
    pub round: u64,
    pub started_at: SystemTime,
    pub duration: Duration,
    pub cluster_id: Option<String>,
    /// At least one broker answered every request this round.
    pub reachable: bool,
    pub probes: BTreeMap<BrokerId, BrokerProbe>,
    /// Brokers the answering brokers list as registered.
    pub registered: BTreeSet<BrokerId>,
    pub health: Health,
    pub verdicts: Vec<BrokerVerdict>,
    pub stale_leaders: Vec<StaleLeader>,
    pub disagreements: BTreeMap<BrokerId, u32>,
    pub bootstrap_failures: Vec<(String, ProbeFailure)>,
    pub failures_total: FailureCounts,
    /// End of the last round in which the cluster was reachable.
    pub last_success: Option<SystemTime>,
    /// This round's canary, when the canary is on.
    pub canary: Option<CanaryRound>,
    /// Leaders elected this round from outside the partition's previous ISR.
    pub unclean_elections: Vec<UncleanElection>,
    /// Unclean elections seen since the watchdog started.
    pub unclean_elections_total: u64,
    /// Since when each broker has been in its current state.
    pub state_since: BTreeMap<BrokerId, SystemTime>,
    /// Per canary partition: the length of its last closed unavailability window.
    pub canary_last_window: BTreeMap<i32, f64>,
    /// Host mode: this round's look at the brokers on the watchdog's host.
    pub host: BTreeMap<BrokerId, crate::host::HostObservation>,
}

/// A partition whose new leader was not in the ISR the round before: it was elected
/// uncleanly, and writes acknowledged by the old ISR may be gone (incident 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UncleanElection {
    pub topic: String,
    pub partition: i32,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub previous_leader: BrokerId,
    pub previous_isr: Vec<BrokerId>,
}

/// What the last round saw of one partition: leader, epoch, ISR.
type PartitionMemory = std::collections::HashMap<(String, i32), (BrokerId, i32, Vec<BrokerId>)>;

/// Compares this round's partitions with the last round's and remembers them.
fn unclean_elections(
    view: &crate::cluster_view::ClusterView,
    memory: &mut PartitionMemory,
) -> Vec<UncleanElection> {
    let mut found = Vec::new();
    let mut next = PartitionMemory::with_capacity(memory.len());
    for (topic, t) in &view.topics {
        for p in &t.partitions {
            let key = (topic.clone(), p.partition);
            if let Some((prev_leader, prev_epoch, prev_isr)) = memory.remove(&key) {
                let newer = !view.has_leader_epochs || p.leader_epoch > prev_epoch;
                if p.leader >= 0
                    && p.leader != prev_leader
                    && newer
                    && !prev_isr.is_empty()
                    && !prev_isr.contains(&p.leader)
                {
                    found.push(UncleanElection {
                        topic: topic.clone(),
                        partition: p.partition,
                        leader: p.leader,
                        leader_epoch: p.leader_epoch,
                        previous_leader: prev_leader,
                        previous_isr: prev_isr,
                    });
                }
            }
            next.insert(key, (p.leader, p.leader_epoch, p.isr.clone()));
        }
    }
    *memory = next;
    found
}

/// How bad a report is, for `check` (Nagios-style exit codes) and summaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Ok,
    Warning,
    Critical,
    /// The watchdog could not see the cluster at all.
    Unreachable,
}

impl Severity {
    pub fn exit_code(self) -> u8 {
        match self {
            Severity::Ok => 0,
            Severity::Warning => 1,
            Severity::Critical => 2,
            Severity::Unreachable => 3,
        }
    }

    pub fn as_label(self) -> &'static str {
        match self {
            Severity::Ok => "OK",
            Severity::Warning => "WARNING",
            Severity::Critical => "CRITICAL",
            Severity::Unreachable => "UNREACHABLE",
        }
    }
}

impl ClusterReport {
    /// A report of a round that saw nothing, to build on in tests and benchmarks.
    pub fn empty(cluster: &str, started_at: SystemTime) -> Self {
        ClusterReport {
            cluster: cluster.to_string(),
            round: 0,
            started_at,
            duration: Duration::ZERO,
            cluster_id: None,
            reachable: false,
            probes: BTreeMap::new(),
            registered: BTreeSet::new(),
            health: Health::default(),
            verdicts: Vec::new(),
            stale_leaders: Vec::new(),
            disagreements: BTreeMap::new(),
            bootstrap_failures: Vec::new(),
            failures_total: BTreeMap::new(),
            last_success: None,
            canary: None,
            canary_last_window: BTreeMap::new(),
            state_since: BTreeMap::new(),
            unclean_elections: Vec::new(),
            unclean_elections_total: 0,
            host: BTreeMap::new(),
        }
    }

    pub fn severity(&self) -> Severity {
        if !self.reachable {
            return Severity::Unreachable;
        }
        let canary_loss = self.canary.as_ref().is_some_and(|c| !c.lost.is_empty())
            || !self.unclean_elections.is_empty();
        let critical = canary_loss
            || self.health.count(Condition::Offline) > 0
            || self.health.count(Condition::UnderMinIsr) > 0
            || !self.stale_leaders.is_empty()
            || self
                .verdicts
                .iter()
                .any(|v| matches!(v.state, BrokerState::Zombie | BrokerState::Down));
        if critical {
            return Severity::Critical;
        }
        let warning = self.health.count(Condition::UnderReplicated) > 0
            || self.health.count(Condition::LeaderNotInIsr) > 0
            || self
                .verdicts
                .iter()
                .any(|v| v.state != BrokerState::Healthy);
        if warning {
            Severity::Warning
        } else {
            Severity::Ok
        }
    }

    pub fn verdict(&self, broker: BrokerId) -> Option<&BrokerVerdict> {
        self.verdicts.iter().find(|v| v.broker == broker)
    }
}

/// Evaluates the rounds of one cluster, keeping what must carry over between them.
pub struct Evaluator {
    cluster: String,
    settings: VerdictSettings,
    include: TopicFilterFn,
    memory: BTreeMap<BrokerId, BrokerMemory>,
    failures: FailureCounts,
    round: u64,
    last_success: Option<SystemTime>,
    canary_stats: CanaryStats,
    canary_last_window: BTreeMap<i32, f64>,
    partitions: PartitionMemory,
    unclean_total: u64,
}

impl Evaluator {
    /// `canary_stats` is shared by every cluster's evaluator and the metrics renderer.
    pub fn new(
        cluster: &str,
        settings: VerdictSettings,
        include: TopicFilterFn,
        canary_stats: CanaryStats,
    ) -> Self {
        Evaluator {
            cluster: cluster.to_string(),
            settings,
            include,
            memory: BTreeMap::new(),
            failures: BTreeMap::new(),
            round: 0,
            last_success: None,
            canary_stats,
            canary_last_window: BTreeMap::new(),
            partitions: PartitionMemory::new(),
            unclean_total: 0,
        }
    }

    pub fn evaluate(
        &mut self,
        obs: RoundObservation,
        canary: Option<CanaryRound>,
        now: SystemTime,
    ) -> ClusterReport {
        self.round += 1;
        let answers: Vec<(BrokerId, &MetadataView)> = obs
            .probes
            .iter()
            .filter_map(|(id, p)| p.metadata_view().map(|m| (*id, m)))
            .collect();
        let view = merge(&answers);
        // Only a round that saw the cluster says anything about elections.
        let unclean_elections = if answers.is_empty() {
            Vec::new()
        } else {
            unclean_elections(&view, &mut self.partitions)
        };
        self.unclean_total += unclean_elections.len() as u64;
        let include = self.include.clone();
        let health = classify(&view, &obs.min_isr, |t| include(t));
        let verdicts = verdict::judge(
            &obs,
            &view,
            &health,
            canary.as_ref(),
            &self.memory,
            &self.settings,
            now,
        );
        if let Some(c) = &canary {
            self.canary_stats.record(&self.cluster, c);
            for (partition, _, seconds) in &c.windows_closed {
                self.canary_last_window.insert(*partition, *seconds);
            }
            if !c.partitions.is_empty() {
                self.canary_last_window
                    .retain(|p, _| c.partitions.iter().any(|q| q.partition == *p));
            }
        }
        verdict::remember(&mut self.memory, &verdicts, now);
        let state_since = self
            .memory
            .iter()
            .filter_map(|(id, m)| m.state.map(|(_, since)| (*id, since)))
            .collect();

        for (id, probe) in &obs.probes {
            if let Some((request, failure)) = probe.first_failure() {
                *self
                    .failures
                    .entry((*id, request, failure.kind))
                    .or_insert(0) += 1;
            }
        }
        self.failures
            .retain(|(id, _, _), _| obs.probes.contains_key(id));

        let reachable = obs.probes.values().any(BrokerProbe::answered);
        if reachable {
            self.last_success = Some(obs.started_at + obs.duration);
        }
        // Registered = listed by at least one answering broker other than itself.
        let registered: BTreeSet<BrokerId> = obs
            .probes
            .iter()
            .flat_map(|(src, p)| {
                p.metadata_view()
                    .into_iter()
                    .flat_map(|m| m.brokers.iter().map(|b| b.id))
                    .filter(move |id| id != src)
            })
            .collect();
        ClusterReport {
            cluster: self.cluster.clone(),
            round: self.round,
            started_at: obs.started_at,
            duration: obs.duration,
            cluster_id: view.cluster_id.clone(),
            reachable,
            registered,
            health,
            verdicts,
            stale_leaders: view.stale_leaders.clone(),
            disagreements: view.disagreements.clone(),
            bootstrap_failures: obs.bootstrap_failures,
            failures_total: self.failures.clone(),
            last_success: self.last_success,
            probes: obs.probes,
            canary,
            canary_last_window: self.canary_last_window.clone(),
            state_since,
            unclean_elections_total: self.unclean_total,
            unclean_elections,
            host: obs.host,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_view::{ClusterView, ViewTopic};
    use crate::observe::PartitionView;

    fn view(leader: i32, epoch: i32, isr: &[i32]) -> ClusterView {
        let mut v = ClusterView {
            has_leader_epochs: true,
            ..ClusterView::default()
        };
        v.topics.insert(
            "t".into(),
            ViewTopic {
                is_internal: false,
                partitions: vec![PartitionView {
                    partition: 0,
                    error_code: 0,
                    leader,
                    leader_epoch: epoch,
                    replicas: vec![2, 3],
                    isr: isr.to_vec(),
                    offline_replicas: Vec::new(),
                }],
            },
        );
        v
    }

    #[test]
    fn a_leader_from_outside_the_last_isr_is_an_unclean_election() {
        let mut m = PartitionMemory::new();
        assert!(unclean_elections(&view(3, 1, &[3, 2]), &mut m).is_empty());
        assert!(unclean_elections(&view(3, 1, &[3]), &mut m).is_empty());
        assert!(unclean_elections(&view(-1, 2, &[3]), &mut m).is_empty());
        let found = unclean_elections(&view(2, 3, &[2]), &mut m);
        assert_eq!(
            found,
            vec![UncleanElection {
                topic: "t".into(),
                partition: 0,
                leader: 2,
                leader_epoch: 3,
                previous_leader: -1,
                previous_isr: vec![3],
            }]
        );
        assert!(
            unclean_elections(&view(2, 3, &[2]), &mut m).is_empty(),
            "reported once"
        );
    }

    #[test]
    fn clean_failovers_and_recreated_topics_are_not_unclean() {
        let mut m = PartitionMemory::new();
        unclean_elections(&view(3, 1, &[3, 2]), &mut m);
        assert!(unclean_elections(&view(2, 2, &[2]), &mut m).is_empty());
        // A recreated topic starts again at epoch 0.
        unclean_elections(&view(2, 5, &[2]), &mut m);
        assert!(unclean_elections(&view(3, 0, &[3]), &mut m).is_empty());
    }
}
