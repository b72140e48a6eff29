//! From a round's observations to the report every output reads: the merged view, partition
//! health, verdicts, and the counters that accumulate across rounds. No I/O: `now` is a
//! parameter, so a whole round can be evaluated in a unit test or a benchmark.

pub mod metrics;
mod unclean;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::judge::certificates;
use crate::judge::coordinators;
use crate::judge::health::{classify_reassigning, Condition, Health};
use crate::judge::own_health::OwnJudgment;
use crate::judge::quorum::{judge_quorum, QuorumMemory, QuorumReport, QuorumSettings};
use crate::judge::verdict::{self, BrokerMemory, BrokerState, BrokerVerdict, VerdictSettings};
use crate::model::coordinators::CoordinatorObservation;
use crate::model::own_health::OwnHealthFacts;
use crate::model::round::QuorumObservation;
use crate::model::round::{
    BrokerId, BrokerProbe, FailureKind, MetadataView, ProbeFailure, RoundObservation,
};
use crate::observe::canary::CanaryRound;
use crate::observe::cluster_view::{merge, ClusterView, StaleLeader};

pub use unclean::UncleanElection;
use unclean::{unclean_elections, PartitionMemory};

/// Decides which topics count; the canary topic and internal topics go through it too.
pub type TopicFilterFn = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// (broker, request, failure kind) -> count since the watchdog started.
pub type FailureCounts = BTreeMap<(BrokerId, &'static str, FailureKind), u64>;

/// Rounds a cluster's loop started before their interval, by why, since the watchdog
/// started (the loop's schedule: `run::cadence`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EarlyRounds {
    /// A broker's list of registered brokers changed (a peer fenced, stopped or back).
    pub registration: u64,
    /// A canary partition's writes changed how they end (working, slow, failing).
    pub canary: u64,
    /// A broker's verdict waited for the look that confirms it.
    pub confirmation: u64,
    /// The metadata log grew by more than the controller's no-op records (a change brokers
    /// must apply).
    pub metadata: u64,
}

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
    /// Brokers whose verdict's registration is `Registered` (see `verdict::registrations`).
    pub registered: BTreeSet<BrokerId>,
    /// The round's merged view (newest leader epochs), merged once: the canary, the
    /// verdicts and remediation all read this one.
    pub view: Arc<ClusterView>,
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
    pub host: BTreeMap<BrokerId, crate::observe::host::HostObservation>,
    /// The continuous liveness facts this report's verdicts were made with.
    pub liveness: BTreeMap<BrokerId, crate::observe::liveness::LivenessFact>,
    /// When the verdicts were made: the round's end, or a re-evaluation between rounds.
    pub evaluated_at: SystemTime,
    /// Rounds started early so far (set by the round loop, which schedules them).
    pub early_rounds: EarlyRounds,
    /// The control plane (KRaft): controller verdicts and the quorum's problem, from the
    /// newest look; `None` when nothing speaks DescribeQuorum or no look was made.
    pub quorum: Option<QuorumReport>,
    /// The newest look at the group coordinators, when they are probed.
    pub coordinators: Option<Arc<CoordinatorObservation>>,
    /// The brokers' listener certificates, when they use TLS.
    pub certificates: Option<certificates::CertificatesReport>,
    /// Each topic's `min.insync.replicas`, where known (remediation's guards read it).
    pub min_isr: BTreeMap<String, i32>,
    /// Brokers listed this round beyond the watchdog's cap (`observe::probe::MAX_BROKERS`).
    pub brokers_unwatched: usize,
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
            view: Arc::default(),
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
            liveness: BTreeMap::new(),
            evaluated_at: started_at,
            early_rounds: EarlyRounds::default(),
            quorum: None,
            coordinators: None,
            certificates: None,
            min_isr: BTreeMap::new(),
            brokers_unwatched: 0,
        }
    }

    pub fn severity(&self) -> Severity {
        if !self.reachable {
            return Severity::Unreachable;
        }
        let canary_loss = self.canary.as_ref().is_some_and(|c| !c.lost.is_empty())
            || !self.unclean_elections.is_empty();
        use crate::judge::quorum::ControllerState;
        let controllers = |bad: &[ControllerState]| {
            self.quorum
                .as_ref()
                .is_some_and(|q| q.controllers.iter().any(|c| bad.contains(&c.state)))
        };
        let control_plane_out = self.quorum.as_ref().is_some_and(|q| q.problem.is_some())
            || controllers(&[ControllerState::Zombie, ControllerState::Down]);
        let critical = canary_loss
            || control_plane_out
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
        let warning = controllers(&[ControllerState::Lagging])
            || self.health.count(Condition::UnderReplicated) > 0
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

/// The newest view of the cluster from every answering broker's metadata: merged once per
/// round, by the round loop, and carried in the report.
pub fn newest_view(obs: &RoundObservation) -> ClusterView {
    let answers: Vec<(BrokerId, &MetadataView)> = obs
        .probes
        .iter()
        .filter_map(|(id, p)| p.metadata_view().map(|m| (*id, m)))
        .collect();
    merge(&answers)
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
    canary_last_window: BTreeMap<i32, f64>,
    partitions: PartitionMemory,
    unclean_total: u64,
    /// The last round's verdicts before the liveness facts were merged in: what every
    /// re-evaluation until the next round starts from.
    round_verdicts: Vec<BrokerVerdict>,
    quorum_settings: QuorumSettings,
    quorum_memory: QuorumMemory,
    /// The listener certificate each broker last presented, its address and when.
    certificates_seen: CertificatesSeen,
    /// What the watchdog last measured of its own health (`set_own_health`).
    own: OwnHealthFacts,
    /// The last round's start, and the span its evidence covers: from the round before it
    /// (its canary writes ran since) to its end.
    last_round_at: Option<SystemTime>,
    round_span: Option<(SystemTime, SystemTime)>,
}

type CertificatesSeen =
    BTreeMap<BrokerId, (crate::model::round::PeerCertificate, String, SystemTime)>;

impl Evaluator {
    pub fn new(cluster: &str, settings: VerdictSettings, include: TopicFilterFn) -> Self {
        let restart_grace = settings.restart_grace;
        Evaluator {
            cluster: cluster.to_string(),
            settings,
            include,
            memory: BTreeMap::new(),
            failures: BTreeMap::new(),
            round: 0,
            last_success: None,
            canary_last_window: BTreeMap::new(),
            partitions: PartitionMemory::new(),
            unclean_total: 0,
            quorum_settings: QuorumSettings {
                restart_grace,
                ..QuorumSettings::default()
            },
            round_verdicts: Vec::new(),
            quorum_memory: QuorumMemory::default(),
            certificates_seen: BTreeMap::new(),
            own: OwnHealthFacts::default(),
            last_round_at: None,
            round_span: None,
        }
    }

    /// What the watchdog measured of its own health, for the next evaluation: evidence on
    /// its own timing taken while it was unwell is not held against a broker
    /// (`verdict::own`).
    pub fn set_own_health(&mut self, facts: OwnHealthFacts) {
        self.own = facts;
    }

    /// The round's timing hits held when the watchdog was unwell during the span it covers.
    fn hold_round(&self, verdicts: &mut [BrokerVerdict], own: &OwnJudgment, now: SystemTime) {
        if let Some(span) = self.round_span {
            verdict::own::hold_round(verdicts, own, span, &self.memory, now);
        }
    }

    /// The certificates this round's handshakes presented, kept per broker (one that did
    /// not answer keeps its last), judged for the brokers with a verdict.
    fn judge_certificates(
        &mut self,
        obs: &RoundObservation,
        verdicts: &[BrokerVerdict],
        now: SystemTime,
    ) -> Option<certificates::CertificatesReport> {
        for (id, p) in &obs.probes {
            if let Some(c) = &p.certificate {
                self.certificates_seen
                    .insert(*id, (c.clone(), p.endpoint.address(), obs.started_at));
            }
        }
        let present: BTreeSet<BrokerId> = verdicts.iter().map(|v| v.broker).collect();
        self.certificates_seen.retain(|id, _| present.contains(id));
        certificates::judge_certificates(
            &self.certificates_seen,
            &present,
            &self.settings.certificates,
            now,
        )
    }

    /// The control plane judged from `look`, and the broker verdicts it spares while it
    /// settles (see `verdict::SETTLING_SPARED`).
    fn judge_control_plane(
        &mut self,
        look: Option<&Arc<QuorumObservation>>,
        verdicts: &mut [BrokerVerdict],
        own: &OwnJudgment,
        now: SystemTime,
    ) -> Option<QuorumReport> {
        let mut report = judge_quorum(look?, &mut self.quorum_memory, &self.quorum_settings, now);
        crate::judge::quorum::hold_while_unwell(&mut report, own, now);
        if report.settling {
            verdict::spare_while_settling(verdicts);
        }
        Some(report)
    }

    /// Notes, for brokers whose port refused, how many partitions the cluster named them
    /// leader of in `probes`' answers, asked at `at`, right after the refusal: that tells a
    /// controlled shutdown (leadership moved away first) from a crash.
    pub fn note_refusals(
        &mut self,
        at: SystemTime,
        probes: &BTreeMap<BrokerId, crate::model::round::BrokerProbe>,
        refused: &[BrokerId],
    ) {
        let answers: Vec<(BrokerId, &MetadataView)> = probes
            .iter()
            .filter_map(|(id, p)| p.metadata_view().map(|m| (*id, m)))
            .collect();
        let leads = verdict::holdings_in(&merge(&answers));
        for id in refused {
            // Nobody answered: nothing tells a clean stop, so it is paged like a crash.
            let led = if answers.is_empty() {
                1
            } else {
                leads.get(id).copied().unwrap_or(0)
            };
            tracing::info!(
                cluster = %self.cluster,
                broker = id,
                answers = answers.len(),
                leader_of = led,
                "port refused: {}",
                if led == 0 {
                    "it leads no partition and is in no ISR, a controlled shutdown; held for the restart grace"
                } else {
                    "it still leads or is in-sync for partitions, a crash; paged"
                }
            );
            self.memory.entry(*id).or_default().held_when_refused = Some((at, led));
        }
    }

    /// Brokers refused since `round_at` whose leaderships nobody has looked at since.
    pub fn refusals_to_decide(
        &self,
        liveness: &BTreeMap<BrokerId, crate::observe::liveness::LivenessFact>,
        round_at: SystemTime,
    ) -> Vec<BrokerId> {
        liveness
            .iter()
            .filter_map(|(id, f)| {
                let since = f.refused_since.filter(|s| *s > round_at)?;
                let decided = self
                    .memory
                    .get(id)
                    .and_then(|m| m.held_when_refused)
                    .is_some_and(|(at, _)| at >= since);
                (!decided).then_some(*id)
            })
            .collect()
    }

    /// The last round's report made again with newer liveness facts, when a broker's
    /// liveness changed between rounds: only the verdicts (and what follows from them)
    /// change; nothing the round counted is counted again.
    pub fn reassess(
        &mut self,
        last: &ClusterReport,
        liveness: BTreeMap<BrokerId, crate::observe::liveness::LivenessFact>,
        now: SystemTime,
    ) -> ClusterReport {
        let look = last.quorum.as_ref().map(|q| q.look.clone());
        self.reassess_with(last, liveness, look, last.coordinators.clone(), now)
    }

    /// [`reassess`](Self::reassess) with a newer look at the control plane too: a frozen
    /// or wedged controller is named within seconds, not at the next round.
    pub fn reassess_with(
        &mut self,
        last: &ClusterReport,
        liveness: BTreeMap<BrokerId, crate::observe::liveness::LivenessFact>,
        look: Option<Arc<QuorumObservation>>,
        coordinators: Option<Arc<CoordinatorObservation>>,
        now: SystemTime,
    ) -> ClusterReport {
        let own = crate::judge::own_health::judge(&self.own, now);
        let mut verdicts = self.round_verdicts.clone();
        self.hold_round(&mut verdicts, &own, now);
        let quorum = self.judge_control_plane(look.as_ref(), &mut verdicts, &own, now);
        verdict::apply_liveness(
            &mut verdicts,
            &liveness,
            &last.probes,
            &self.memory,
            &self.settings,
            &own,
            last.started_at,
            now,
        );
        coordinators::apply(
            &mut verdicts,
            coordinators.as_deref(),
            &self.settings.coordinators,
            now,
        );
        verdict::own::hold_looks(&mut verdicts, &own, &self.memory, now);
        verdict::zk_controller::name_zookeeper_controller(&mut verdicts, &last.probes);
        verdict::remember_states(&mut self.memory, &verdicts, now);
        ClusterReport {
            state_since: self.state_since(),
            verdicts,
            liveness,
            evaluated_at: now,
            quorum,
            coordinators,
            ..last.clone()
        }
    }

    fn state_since(&self) -> BTreeMap<BrokerId, SystemTime> {
        self.memory
            .iter()
            .filter_map(|(id, m)| m.state.map(|(_, since)| (*id, since)))
            .collect()
    }

    /// The unclean elections of this round, counted; only a round that saw every topic
    /// says anything about elections.
    fn judge_elections(
        &mut self,
        obs: &RoundObservation,
        view: &ClusterView,
    ) -> Vec<UncleanElection> {
        let saw_everything = obs
            .probes
            .values()
            .any(|p| p.metadata_view().is_some_and(|m| m.all_topics));
        if !saw_everything {
            return Vec::new();
        }
        let found = unclean_elections(
            view,
            &mut self.partitions,
            |t| obs.unclean_allowed.contains(t),
            &obs.eligible_leaders,
        );
        self.unclean_total += found.len() as u64;
        found
    }

    /// Each canary partition's last unavailability window, kept while the partition is.
    fn remember_canary_windows(&mut self, canary: Option<&CanaryRound>) {
        let Some(c) = canary else {
            return;
        };
        for (partition, _, seconds) in &c.windows_closed {
            self.canary_last_window.insert(*partition, *seconds);
        }
        if !c.partitions.is_empty() {
            self.canary_last_window
                .retain(|p, _| c.partitions.iter().any(|q| q.partition == *p));
        }
    }

    /// Counts each broker's first failed request of the round, by request and failure kind,
    /// for the brokers still probed.
    fn count_failures(&mut self, obs: &RoundObservation) {
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
    }

    /// Each broker's verdict (the causes decided first, then the control plane, liveness,
    /// the coordinators and ZooKeeper's controller applied to them) and the control
    /// plane's own. Partition findings name the brokers the verdicts decide are the cause,
    /// not every replica missing from an ISR (issue 14).
    fn judge_nodes(
        &mut self,
        obs: &RoundObservation,
        view: &ClusterView,
        health: &mut Health,
        canary: Option<&mut CanaryRound>,
        now: SystemTime,
    ) -> (Vec<BrokerVerdict>, Option<QuorumReport>) {
        let decided = verdict::attribute_suspects(obs, view, health, canary);
        let mut verdicts = verdict::judge_decided(
            obs,
            view,
            health,
            decided,
            &self.memory,
            &self.settings,
            now,
        );
        self.round_verdicts = verdicts.clone();
        let own = crate::judge::own_health::judge(&self.own, now);
        self.round_span = Some((
            self.last_round_at.unwrap_or(obs.started_at),
            obs.started_at + obs.duration,
        ));
        self.last_round_at = Some(obs.started_at);
        self.hold_round(&mut verdicts, &own, now);
        let quorum = self.judge_control_plane(obs.quorum.as_ref(), &mut verdicts, &own, now);
        verdict::apply_liveness(
            &mut verdicts,
            &obs.liveness,
            &obs.probes,
            &self.memory,
            &self.settings,
            &own,
            obs.started_at,
            now,
        );
        coordinators::apply(
            &mut verdicts,
            obs.coordinators.as_deref(),
            &self.settings.coordinators,
            now,
        );
        verdict::own::hold_looks(&mut verdicts, &own, &self.memory, now);
        verdict::zk_controller::name_zookeeper_controller(&mut verdicts, &obs.probes);
        debug_assert!(
            verdicts
                .iter()
                .flat_map(|v| &v.hits)
                .all(|h| h.rule.allows(h.state)),
            "a rule set a state its table does not give it: {verdicts:?}"
        );
        (verdicts, quorum)
    }

    /// Evaluates a round whose view was merged already (`newest_view` of `obs`), so the
    /// canary and the verdicts read the same one. No side effects beyond the evaluator's own
    /// memory.
    pub fn evaluate_merged(
        &mut self,
        obs: RoundObservation,
        view: Arc<ClusterView>,
        canary: Option<CanaryRound>,
        now: SystemTime,
    ) -> ClusterReport {
        self.round += 1;
        let unclean_elections = self.judge_elections(&obs, &view);
        let include = self.include.clone();
        let mut health = classify_reassigning(
            &view,
            &obs.min_isr,
            verdict::catch_up::copying(&obs, &self.memory, self.settings.catch_up_window, now),
            |t| include(t),
        );
        let mut canary = canary;
        let (verdicts, quorum) = self.judge_nodes(&obs, &view, &mut health, canary.as_mut(), now);
        self.remember_canary_windows(canary.as_ref());
        verdict::remember_round(&mut self.memory, &obs, &verdicts, now);
        let certificates = self.judge_certificates(&obs, &verdicts, now);
        let state_since = self.state_since();
        self.count_failures(&obs);

        let reachable = obs.probes.values().any(BrokerProbe::answered);
        if reachable {
            self.last_success = Some(obs.started_at + obs.duration);
        }
        // The verdicts' registration is the one definition; this set is a view of it.
        let registered = verdicts
            .iter()
            .filter(|v| v.registration == verdict::Registration::Registered)
            .map(|v| v.broker)
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
            view,
            bootstrap_failures: obs.bootstrap_failures,
            min_isr: obs.min_isr,
            brokers_unwatched: obs.brokers_unwatched,
            failures_total: self.failures.clone(),
            last_success: self.last_success,
            probes: obs.probes,
            canary,
            canary_last_window: self.canary_last_window.clone(),
            state_since,
            unclean_elections_total: self.unclean_total,
            unclean_elections,
            host: obs.host,
            liveness: obs.liveness,
            evaluated_at: now,
            early_rounds: EarlyRounds::default(),
            quorum,
            coordinators: obs.coordinators,
            certificates,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::round::{EligibleLeaders, PartitionView, TopicId};
    use crate::observe::cluster_view::{ClusterView, ViewTopic};

    const ALLOWED: bool = true;
    const CLEAN: bool = false;

    fn none() -> EligibleLeaders {
        EligibleLeaders::new()
    }

    fn with_id(mut v: ClusterView, id: TopicId) -> ClusterView {
        v.topics.get_mut("t").unwrap().topic_id = id;
        v
    }

    /// A topic deleted and created again, first seen after an election of its own: its
    /// leader is compared with nothing the old topic had.
    #[test]
    fn a_recreated_topic_is_not_compared_with_the_old_one() {
        let mut m = PartitionMemory::new();
        unclean_elections(&with_id(view(2, 0, &[2]), 7), &mut m, |_| ALLOWED, &none());
        let found = unclean_elections(&with_id(view(3, 1, &[3]), 8), &mut m, |_| ALLOWED, &none());
        assert!(found.is_empty(), "{found:?}");
        // The same topic (same id) still is.
        let found = unclean_elections(&with_id(view(2, 2, &[2]), 8), &mut m, |_| ALLOWED, &none());
        assert_eq!(found.len(), 1);
    }

    /// KIP-966 (Kafka 4.x): broker 3 left the ISR while it was below min.insync.replicas and
    /// became an eligible leader replica; when the last ISR member died it was elected. That
    /// is a clean election, even on a topic that allows unclean ones.
    #[test]
    fn a_leader_elected_from_the_eligible_leader_replicas_is_clean() {
        let elr: EligibleLeaders = [("t".to_string(), [(0, [3].as_slice().into())].into())].into();
        let mut m = PartitionMemory::new();
        unclean_elections(&view(2, 4, &[2]), &mut m, |_| ALLOWED, &elr);
        let found = unclean_elections(&view(3, 5, &[3]), &mut m, |_| ALLOWED, &none());
        assert!(found.is_empty(), "{found:?}");
        // Another partition's ELR, or none, does not make it clean.
        let other: EligibleLeaders =
            [("t".to_string(), [(1, [3].as_slice().into())].into())].into();
        let mut m = PartitionMemory::new();
        unclean_elections(&view(2, 4, &[2]), &mut m, |_| ALLOWED, &other);
        assert_eq!(
            unclean_elections(&view(3, 5, &[3]), &mut m, |_| ALLOWED, &none()).len(),
            1
        );
    }

    fn view(leader: i32, epoch: i32, isr: &[i32]) -> ClusterView {
        let mut v = ClusterView {
            has_leader_epochs: true,
            ..ClusterView::default()
        };
        v.topics.insert(
            "t".into(),
            ViewTopic {
                is_internal: false,
                topic_id: 0,
                partitions: vec![PartitionView {
                    partition: 0,
                    error_code: 0,
                    leader,
                    leader_epoch: epoch,
                    replicas: [2, 3].as_slice().into(),
                    isr: isr.into(),
                    offline_replicas: Default::default(),
                }]
                .into(),
            },
        );
        v
    }

    /// Brokers 1..=3 answering; `listed[i]` is the broker list of broker i+1's Metadata.
    fn round_listing(listed: [&[i32]; 3]) -> RoundObservation {
        let ep = |id: i32| crate::model::round::BrokerEndpoint {
            id,
            host: format!("127.0.0.1{id}"),
            port: 9092,
            rack: None,
        };
        let probes = (1..=3)
            .map(|id| {
                let md = MetadataView {
                    cluster_id: Some("c".into()),
                    brokers: listed[(id - 1) as usize].iter().map(|b| ep(*b)).collect(),
                    has_leader_epochs: true,
                    has_offline_replicas: true,
                    version: 12,
                    all_topics: true,
                    ..MetadataView::default()
                };
                let probe = BrokerProbe {
                    endpoint: ep(id),
                    connect: Ok(Duration::from_millis(1)),
                    api_versions: Some(Ok(Duration::from_millis(1))),
                    metadata: Some(Ok((md, Duration::from_millis(5)))),
                    description: None,
                    certificate: None,
                    log_dirs: None,
                    speaks_quorum: None,
                };
                (id, probe)
            })
            .collect();
        RoundObservation {
            cluster: "lab".into(),
            started_at: SystemTime::UNIX_EPOCH,
            duration: Duration::from_millis(10),
            probes,
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
        }
    }

    /// Issue 14 item 5: the view is merged once per round and carried in the report; the
    /// evaluation reads the one it is given (here one no broker's answer holds: t-0 under
    /// replicated), not a merge of its own.
    #[test]
    fn the_round_is_evaluated_on_the_view_it_is_given_and_carries_it() {
        let mut e = Evaluator::new("lab", VerdictSettings::default(), Arc::new(|_| true));
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let obs = round_listing([&[1, 2, 3], &[1, 2, 3], &[1, 2, 3]]);
        assert!(newest_view(&obs).topics.is_empty());
        let given = Arc::new(view(2, 1, &[2]));
        let r = e.evaluate_merged(obs, given.clone(), None, now);
        assert!(Arc::ptr_eq(&r.view, &given));
        assert_eq!(
            r.health.count(Condition::UnderReplicated),
            1,
            "{:?}",
            r.health
        );
    }

    /// `/status` `listed_as_registered`, the `broker_registered` metric and the verdict's
    /// registration are one fact: here broker 3 does not list broker 2 and broker 1 does,
    /// which the verdict calls unknown; nothing may call it registered.
    #[test]
    fn status_metric_and_verdict_agree_on_registration() {
        let mut e = Evaluator::new("lab", VerdictSettings::default(), Arc::new(|_| true));
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let obs = round_listing([&[1, 2, 3], &[1, 2, 3], &[1, 3]]);
        let view = Arc::new(newest_view(&obs));
        let r = e.evaluate_merged(obs, view, None, now);
        let status: serde_json::Value = serde_json::from_str(&crate::serve::status::render(
            "i",
            [&r],
            &Default::default(),
        ))
        .unwrap();
        let metrics = crate::serve::metrics::render([&r], &Default::default());
        for v in &r.verdicts {
            let registered = v.registration == verdict::Registration::Registered;
            let b = status["clusters"][0]["brokers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["broker"] == v.broker)
                .unwrap();
            assert_eq!(
                b["listed_as_registered"], registered,
                "status, broker {}",
                v.broker
            );
            let series = format!(
                "kafka_watchdog_broker_registered{{cluster=\"lab\",broker=\"{}\"}} ",
                v.broker
            );
            let value = metrics
                .lines()
                .find_map(|l| l.strip_prefix(&series))
                .unwrap_or_else(|| panic!("no {series} in metrics"));
            assert_eq!(
                value,
                if registered { "1.0" } else { "0.0" },
                "metric, broker {}",
                v.broker
            );
            assert_eq!(r.registered.contains(&v.broker), registered);
        }
        assert_eq!(r.verdicts[1].registration, verdict::Registration::Unknown);
    }

    /// The control plane is judged with the round and again with each newer look: the
    /// only controller silent makes the report critical; a look with a leader again ends
    /// the problem, and the cluster settles for a while.
    #[test]
    fn the_control_plane_is_judged_with_the_round_and_with_newer_looks() {
        use crate::model::round::{
            ControllerLook, ControllerRole, QuorumDescription, ReplicaProgress,
        };
        let at = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(100 + s);
        let silent = Arc::new(QuorumObservation {
            controllers: vec![ControllerLook {
                address: "c0:9093".into(),
                id: Some(0),
                outcome: Err(ProbeFailure {
                    kind: FailureKind::Timeout,
                    detail: "no answer".into(),
                    after: Duration::from_secs(1),
                }),
                accepted: true,
                failing_since: Some(at(0)),
                accepted_in_streak: true,
                ever_reached: true,
            }],
            last_leader: Some((0, 1, at(0))),
            ..QuorumObservation::empty(at(1))
        });
        let mut e = Evaluator::new("lab", VerdictSettings::default(), Arc::new(|_| true));
        let mut obs = round_listing([&[1, 2, 3], &[1, 2, 3], &[1, 2, 3]]);
        obs.quorum = Some(silent);
        let view = Arc::new(newest_view(&obs));
        let r = e.evaluate_merged(obs, view, None, at(2));
        let q = r.quorum.as_ref().expect("judged with the round");
        assert_eq!(
            q.problem.as_ref().map(|p| p.kind),
            Some(crate::judge::quorum::QuorumProblemKind::NoLeader)
        );
        assert_eq!(r.severity(), Severity::Critical);
        assert!(r
            .verdicts
            .iter()
            .all(|v| v.state == verdict::BrokerState::Healthy));
        let back = Arc::new(QuorumObservation {
            controllers: vec![ControllerLook {
                address: "c0:9093".into(),
                id: Some(0),
                outcome: Ok(ControllerRole::Leader),
                accepted: true,
                failing_since: None,
                accepted_in_streak: false,
                ever_reached: true,
            }],
            description: Some(QuorumDescription {
                leader: 0,
                epoch: 1,
                high_watermark: 10,
                voters: vec![ReplicaProgress {
                    id: 0,
                    log_end_offset: 10,
                    last_fetch_ago: Some(Duration::ZERO),
                    last_caught_up_ago: Some(Duration::ZERO),
                }],
                observers: Vec::new(),
                endpoints: BTreeMap::new(),
                version: 1,
            }),
            ..QuorumObservation::empty(at(5))
        });
        let again = e.reassess_with(&r, BTreeMap::new(), Some(back), None, at(5));
        let q = again.quorum.as_ref().unwrap();
        assert!(q.problem.is_none());
        assert!(q.settling, "just back: settling");
        assert_eq!(again.severity(), Severity::Ok);
    }

    #[test]
    fn a_leader_from_outside_the_last_isr_is_an_unclean_election() {
        let mut m = PartitionMemory::new();
        assert!(unclean_elections(&view(3, 1, &[3, 2]), &mut m, |_| ALLOWED, &none()).is_empty());
        assert!(unclean_elections(&view(3, 1, &[3]), &mut m, |_| ALLOWED, &none()).is_empty());
        assert!(unclean_elections(&view(-1, 2, &[3]), &mut m, |_| ALLOWED, &none()).is_empty());
        let found = unclean_elections(&view(2, 3, &[2]), &mut m, |_| ALLOWED, &none());
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
            unclean_elections(&view(2, 3, &[2]), &mut m, |_| ALLOWED, &none()).is_empty(),
            "reported once"
        );
    }

    #[test]
    fn clean_failovers_and_recreated_topics_are_not_unclean() {
        let mut m = PartitionMemory::new();
        unclean_elections(&view(3, 1, &[3, 2]), &mut m, |_| ALLOWED, &none());
        assert!(unclean_elections(&view(2, 2, &[2]), &mut m, |_| ALLOWED, &none()).is_empty());
        // A recreated topic starts again at epoch 0.
        unclean_elections(&view(2, 5, &[2]), &mut m, |_| ALLOWED, &none());
        assert!(unclean_elections(&view(3, 0, &[3]), &mut m, |_| ALLOWED, &none()).is_empty());
    }

    /// Rolling restart: broker 3 was catching up (ISR [2]) when a round looked; before the
    /// next it rejoined and broker 2 shut down, handing leadership to 3. Between two rounds
    /// that looks like an unclean election, unless the topic cannot have one.
    #[test]
    fn a_leader_that_rejoined_between_rounds_is_not_unclean_where_unclean_is_off() {
        let mut m = PartitionMemory::new();
        unclean_elections(&view(2, 4, &[2]), &mut m, |_| CLEAN, &none());
        assert!(unclean_elections(&view(3, 5, &[3]), &mut m, |_| CLEAN, &none()).is_empty());
        let mut m = PartitionMemory::new();
        unclean_elections(&view(2, 4, &[2]), &mut m, |_| ALLOWED, &none());
        assert_eq!(
            unclean_elections(&view(3, 5, &[3]), &mut m, |_| ALLOWED, &none()).len(),
            1,
            "allowed on the topic: reported"
        );
    }
}
