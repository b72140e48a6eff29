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
    /// Since when each broker has been in its current state.
    pub state_since: BTreeMap<BrokerId, SystemTime>,
    /// Per canary partition: the length of its last closed unavailability window.
    pub canary_last_window: BTreeMap<i32, f64>,
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
    pub fn severity(&self) -> Severity {
        if !self.reachable {
            return Severity::Unreachable;
        }
        let canary_loss = self.canary.as_ref().is_some_and(|c| !c.lost.is_empty());
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
        }
    }
}
