//! Findings: what is wrong in one round, in an operator's words, keyed by (cluster,
//! subject, kind) so the incident book (`alert::incident`) can follow each across rounds.
//! Pure judgment of the report: `of_report` turns a round's verdicts, partitions, control
//! plane and certificates into findings; `canary` judges the canary's losses and the
//! unclean elections, events that each finding remembers for a while.

pub mod canary;
mod of_report;

use std::fmt;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::config::Severity;
use crate::judge::rule::BrokerState;
use crate::model::kind::FindingKind;
use crate::model::round::BrokerId;

pub use of_report::{findings, MAX_AFFECTED_PARTITIONS, ROTATION_GRACE};

use crate::judge::report::ClusterReport;
use canary::CanaryMemory;

/// One cluster's findings, round after round. The report's own findings hold as long as
/// their verdicts do; the canary's losses and the unclean elections are events, which this
/// remembers for a while (`canary`), so their incidents outlive the round that saw them.
/// Pure: `now` is a parameter; the cluster loop owns one beside its evaluator.
#[derive(Debug, Default)]
pub struct FindingJudge {
    memory: CanaryMemory,
    /// acks=1 losses are judged over a few rounds of the cluster's.
    round_interval: Duration,
    /// The last round's event findings, and when that round was judged.
    last_round: Option<(Vec<Finding>, SystemTime)>,
}

impl FindingJudge {
    pub fn new(round_interval: Duration) -> Self {
        FindingJudge {
            round_interval,
            ..FindingJudge::default()
        }
    }

    /// Every finding of a round: the report's, the canary's and the unclean elections',
    /// with the time each broker's partitions could not be written.
    pub fn round(&mut self, report: &ClusterReport, now: SystemTime) -> Vec<Finding> {
        let mut events = Vec::new();
        if let Some(round) = &report.canary {
            events = canary::canary_findings(
                &report.cluster,
                round,
                &mut self.memory,
                self.round_interval,
                now,
            );
        }
        events.extend(canary::unclean_findings(
            &report.cluster,
            report,
            &mut self.memory,
            now,
        ));
        self.last_round = Some((events.clone(), now));
        let mut out = findings(report, events);
        if let Some(round) = &report.canary {
            for f in &mut out {
                if let (Subject::Broker(b), FindingKind::Broker) = (f.key.subject, f.key.kind) {
                    f.unavailable_seconds = canary::broker_unavailability(b, round, &self.memory);
                }
            }
        }
        out
    }

    /// The findings of a round made again between rounds with newer liveness facts: the
    /// round's own keep the time they were observed (so they confirm nothing new), and the
    /// round's events stand as they were. `None` before the first round.
    pub fn reassessed(&self, report: &ClusterReport) -> Option<Vec<Finding>> {
        let (events, round_at) = self.last_round.as_ref()?;
        let mut out = findings(report, Vec::new());
        out.extend(events.iter().cloned());
        for f in &mut out {
            f.observed_at.get_or_insert(*round_at);
        }
        Some(out)
    }
}

/// What an incident is about: one broker, or the cluster as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    Broker(BrokerId),
    Cluster,
    /// A KRaft controller, by node id.
    Controller(BrokerId),
}

impl Subject {
    pub fn broker(self) -> Option<BrokerId> {
        match self {
            Subject::Broker(id) => Some(id),
            Subject::Cluster | Subject::Controller(_) => None,
        }
    }

    /// The node a broker's or a controller's incident is about.
    pub fn node(self) -> Option<BrokerId> {
        match self {
            Subject::Broker(id) | Subject::Controller(id) => Some(id),
            Subject::Cluster => None,
        }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Broker(id) => write!(f, "broker-{id}"),
            Subject::Cluster => f.write_str("cluster"),
            Subject::Controller(id) => write!(f, "controller-{id}"),
        }
    }
}

// How bad a kind is depends on the configuration's severities and the verdict's states,
// which come after the model; so this part of `FindingKind` lives here.
impl FindingKind {
    /// How bad a finding of this kind is; `state` matters only for broker findings.
    pub fn severity(self, state: Option<BrokerState>) -> Severity {
        match self {
            // A broker down (crashed, unreachable, not back after a clean stop's grace) is
            // as critical as a zombie: `KafkaBrokerDown` says so, and a receiver paged only
            // for critical must hear of a crash.
            // A controller's state is told in the broker states' words (a lagging voter
            // as degraded): frozen, wedged or gone is critical as for a broker.
            FindingKind::Broker | FindingKind::Controller => match state {
                Some(BrokerState::Zombie | BrokerState::Down) => Severity::Critical,
                Some(BrokerState::Healthy) => Severity::Info,
                _ => Severity::Warning,
            },
            // Nothing can change the cluster's metadata: no failover, no fencing.
            FindingKind::Quorum => Severity::Critical,
            FindingKind::OfflinePartitions
            | FindingKind::UnderMinIsr
            | FindingKind::SplitBrain
            | FindingKind::AcknowledgedLoss
            | FindingKind::UncleanElection
            | FindingKind::ClusterUnreachable => Severity::Critical,
            // Nothing of the cluster is watched: a zombie now would page no one.
            FindingKind::WatchdogBlind => Severity::Critical,
            // Evidence about one broker's leadership, not a broken promise: the split brain
            // and the broker's own verdict page when it is one.
            FindingKind::UnderReplicated
            | FindingKind::CanaryUnavailable
            | FindingKind::Acks1Loss
            | FindingKind::Remediation
            | FindingKind::WatchdogAccess => Severity::Warning,
            // Two weeks ahead; the finding itself says critical within `critical_days`.
            FindingKind::Certificate => Severity::Warning,
        }
    }
}

impl FindingKind {
    /// The alert rule (dashboards/alerts.yaml) whose runbook section in docs/runbooks.md
    /// tells what to do about a finding of this kind, in this state for a broker or a
    /// controller: webhooks link to `/runbooks#<it in lower case>`. A remediation event
    /// is about its broker's incident.
    pub fn runbook_section(self, state: Option<BrokerState>) -> &'static str {
        use BrokerState::{Down, Unknown, Zombie};
        match (self, state) {
            (FindingKind::Broker | FindingKind::Remediation, Some(Zombie)) => "KafkaBrokerZombie",
            (FindingKind::Broker | FindingKind::Remediation, Some(Down)) => "KafkaBrokerDown",
            // Unknown: the watchdog cannot see the cluster, and says so.
            (FindingKind::Broker | FindingKind::Remediation, Some(Unknown)) => {
                "KafkaWatchdogClusterUnreachable"
            }
            (FindingKind::Broker | FindingKind::Remediation, _) => "KafkaBrokerDegraded",
            (FindingKind::Controller, Some(Down)) => "KafkaControllerDown",
            // A frozen, wedged or lagging controller: the same first look.
            (FindingKind::Controller, _) => "KafkaControllerZombie",
            (FindingKind::Quorum, _) => "KafkaQuorumUnavailable",
            (FindingKind::OfflinePartitions, _) => "KafkaOfflinePartitions",
            (FindingKind::UnderMinIsr, _) => "KafkaUnderMinIsrPartitions",
            (FindingKind::UnderReplicated, _) => "KafkaWatchdogUnderReplicated",
            (FindingKind::SplitBrain, _) => "KafkaSplitBrain",
            (FindingKind::ClusterUnreachable, _) => "KafkaWatchdogClusterUnreachable",
            (FindingKind::AcknowledgedLoss, _) => "KafkaAcknowledgedWriteLoss",
            (FindingKind::Acks1Loss, _) => "KafkaWatchdogAcks1Loss",
            (FindingKind::CanaryUnavailable, _) => "KafkaWatchdogCanaryUnavailable",
            (FindingKind::UncleanElection, _) => "KafkaWatchdogUncleanElection",
            (FindingKind::WatchdogAccess, _) => "KafkaWatchdogAccess",
            (FindingKind::Certificate, _) => "KafkaWatchdogCertificate",
            (FindingKind::WatchdogBlind, _) => "KafkaWatchdogBlind",
        }
    }
}

/// The watchdog blind for `cluster` (issue 38 item 2): its round loop has completed no
/// round since `since`, over its allowance `allowed`. Stays the same words while it lasts,
/// so that it is no news at each look.
pub fn blind(cluster: &str, since: SystemTime, allowed: Duration) -> Finding {
    let since_text = crate::model::time::rfc3339(since);
    let mut f = Finding::new(
        FindingKey::new(cluster, Subject::Cluster, FindingKind::WatchdogBlind),
        format!(
            "the watchdog is blind for cluster {cluster} since {since_text}: its round loop has completed no round since then (allowed {} s without one), so nothing about the cluster is judged or paged until it does",
            allowed.as_secs()
        ),
    );
    f.holds_since = Some(since);
    f.evidence = vec![
        format!("last round completed: {since_text}"),
        "the watchdog's own fault, not the cluster's: its journal says why the loop is stuck or dying (task_restarts_total{task=\"cluster_loop\"} counts the deaths); /healthz answers 503 meanwhile".into(),
        "the cluster's other incidents stay as they were until rounds complete again".into(),
    ];
    f
}

/// Identifies a finding across rounds, restarts and watchdog instances.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FindingKey {
    pub cluster: String,
    pub subject: Subject,
    pub kind: FindingKind,
}

impl FindingKey {
    pub fn new(cluster: &str, subject: Subject, kind: FindingKind) -> Self {
        FindingKey {
            cluster: cluster.to_string(),
            subject,
            kind,
        }
    }

    /// The same on every watchdog that watches the cluster, so receivers (PagerDuty,
    /// Alertmanager) merge what two watchdogs report about one problem.
    pub fn dedup_key(&self) -> String {
        format!(
            "kafka-watchdog/{}/{}/{}",
            self.cluster,
            self.subject,
            self.kind.as_str()
        )
    }
}

/// One thing wrong in one round.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub key: FindingKey,
    pub severity: Severity,
    /// The broker's verdict, for broker findings.
    pub state: Option<BrokerState>,
    /// `host:port` of the broker, when known.
    pub broker_address: Option<String>,
    /// One line, in an operator's words.
    pub summary: String,
    /// `rule: detail` lines, or one line per affected partition.
    pub evidence: Vec<String>,
    /// Names of what fired (verdict rules), and of the consequences it explains (the
    /// partition kinds folded into a broker's incident).
    pub rules: Vec<String>,
    /// The rules that decide its state (a broker's hits at its verdict's state): one of
    /// these joining an incident at its severity is news; a milder rule beside them is not.
    pub lead_rules: Vec<String>,
    /// `topic-partition`, sorted, at most `MAX_AFFECTED_PARTITIONS`.
    pub affected_partitions: Vec<String>,
    /// How many partitions are affected in all.
    pub affected_partitions_total: usize,
    /// Brokers to look at.
    pub suspects: Vec<BrokerId>,
    /// Filled by the canary: seconds the affected partitions could not be used.
    pub unavailable_seconds: Option<f64>,
    /// When its evidence was observed, when not at the evaluation (a round re-evaluated
    /// between rounds keeps its own time); `None`: now.
    pub observed_at: Option<SystemTime>,
    /// When its fact began to hold, when its evidence says so (see `BrokerVerdict`).
    pub holds_since: Option<SystemTime>,
    /// How long it must hold to open an incident when that is longer than the cluster's
    /// `open_after_secs` (a broker that shut down cleanly: `restart_grace_secs`).
    pub hold_for: Option<std::time::Duration>,
    /// The cluster's static labels (`clusters[].labels`).
    pub labels: std::collections::BTreeMap<String, String>,
}

impl Finding {
    /// A finding with the kind's own severity and nothing but a summary; callers (the
    /// canary) fill in the rest.
    pub fn new(key: FindingKey, summary: impl Into<String>) -> Self {
        Finding {
            severity: key.kind.severity(None),
            key,
            state: None,
            broker_address: None,
            summary: summary.into(),
            evidence: Vec::new(),
            rules: Vec::new(),
            lead_rules: Vec::new(),
            affected_partitions: Vec::new(),
            affected_partitions_total: 0,
            suspects: Vec::new(),
            unavailable_seconds: None,
            observed_at: None,
            holds_since: None,
            hold_for: None,
            labels: Default::default(),
        }
    }

    /// Sets the affected partitions, keeping the first `MAX_AFFECTED_PARTITIONS` in order.
    pub fn with_partitions(mut self, mut partitions: Vec<String>) -> Self {
        partitions.sort();
        partitions.dedup();
        self.affected_partitions_total = partitions.len();
        partitions.truncate(MAX_AFFECTED_PARTITIONS);
        self.affected_partitions = partitions;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::canary::record::Acks;
    use crate::observe::canary::{CanaryRound, LossEvent};

    fn t(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + s)
    }

    fn with_canary(at: SystemTime, lost: Vec<LossEvent>) -> ClusterReport {
        let mut r = ClusterReport::empty("lab", at);
        r.reachable = true;
        r.canary = Some(CanaryRound::with_losses("canary", lost));
        r
    }

    fn lost_by(broker: BrokerId) -> LossEvent {
        LossEvent {
            partition: 0,
            offset: 100,
            seq: 1,
            acks: Acks::All,
            broker,
            reason: "not in the log",
        }
    }

    fn losses(found: &[Finding]) -> Vec<(Subject, Option<SystemTime>)> {
        found
            .iter()
            .filter(|f| f.key.kind == FindingKind::AcknowledgedLoss)
            .map(|f| (f.key.subject, f.observed_at))
            .collect()
    }

    /// Issue 29 item 1: the canary's losses are judged and remembered in judge/, beside
    /// the evaluator, not in alerting: a loss seen in one round stays a finding in the next
    /// rounds and in every re-assessment between them, which keeps the round's time.
    #[test]
    fn a_loss_is_remembered_across_rounds_and_reassessments_keep_the_rounds_time() {
        let mut judge = FindingJudge::new(Duration::from_secs(10));
        assert_eq!(judge.reassessed(&with_canary(t(0), vec![])), None);
        let first = judge.round(&with_canary(t(0), vec![lost_by(2)]), t(1));
        assert_eq!(losses(&first), vec![(Subject::Broker(2), None)]);
        let between = judge.reassessed(&with_canary(t(0), vec![])).unwrap();
        assert_eq!(losses(&between), vec![(Subject::Broker(2), Some(t(1)))]);
        // No new loss: the finding holds for LOSS_MEMORY, then ends.
        let later = judge.round(&with_canary(t(300), vec![]), t(301));
        assert_eq!(losses(&later), vec![(Subject::Broker(2), None)]);
        let gone = judge.round(&with_canary(t(700), vec![]), t(701));
        assert!(losses(&gone).is_empty());
    }
}
