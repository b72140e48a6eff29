//! From reports to incidents and webhooks: each round's findings (the report's own and the
//! canary's) go into the incident book, whose events go to the notifier. The book is saved
//! after every change so a restart neither loses an open incident nor announces it twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::canary::{CanaryRound, LossEvent};
use crate::config::{ClusterConfig, Config};
use crate::incident::{
    self, Finding, FindingKey, FindingKind, Hysteresis, Incident, IncidentBook, StateError, Subject,
};
use crate::notify::{Notifier, NotifierHandle, NotifierStats, NotifyError};
use crate::observe::BrokerId;
use crate::report::ClusterReport;

/// How long an acknowledged-write loss keeps its incident open after the last lost record:
/// a loss is an event, and an incident that flapped with every round would be noise.
pub const LOSS_MEMORY: Duration = Duration::from_secs(600);

#[derive(Debug, thiserror::Error)]
pub enum AlertingError {
    // The I/O error is part of the sentence, not a chained source: the chain would print
    // it twice.
    #[error(
        "state directory {path} is not usable: {error} (expected a directory this user can create and write; under systemd, StateDirectory=kafka-watchdog provides /var/lib/kafka-watchdog)"
    )]
    StateDir { path: String, error: std::io::Error },
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Notify(#[from] NotifyError),
}

/// What the canary findings remember between rounds, per cluster.
#[derive(Debug, Default, Clone)]
pub struct CanaryMemory {
    /// Losses of the last `LOSS_MEMORY`.
    losses: Vec<(SystemTime, LossEvent)>,
    /// Per partition: the leader when its current unavailability window opened.
    window_leader: BTreeMap<i32, BrokerId>,
    /// Per broker: the longest window of a partition it led, closed recently.
    closed: BTreeMap<BrokerId, (SystemTime, f64)>,
    /// Unclean elections of the last `LOSS_MEMORY`.
    unclean: Vec<(SystemTime, crate::report::UncleanElection)>,
}

/// An unclean election is an event; its incident stays open `LOSS_MEMORY` after the last one.
pub fn unclean_findings(
    cluster: &str,
    report: &ClusterReport,
    memory: &mut CanaryMemory,
    now: SystemTime,
) -> Option<Finding> {
    memory
        .unclean
        .extend(report.unclean_elections.iter().cloned().map(|u| (now, u)));
    memory
        .unclean
        .retain(|(t, _)| now.duration_since(*t).is_ok_and(|a| a <= LOSS_MEMORY));
    if memory.unclean.is_empty() {
        return None;
    }
    let mut f = Finding::new(
        FindingKey::new(cluster, Subject::Cluster, FindingKind::UncleanElection),
        format!(
            "{} partition(s) got a leader from outside their in-sync replicas: acknowledged writes may be lost",
            memory.unclean.len()
        ),
    );
    f.evidence = memory
        .unclean
        .iter()
        .take(20)
        .map(|(_, u)| {
            format!(
                "{}-{}: broker {} elected at epoch {}, previous leader {}, previous ISR {:?}",
                u.topic, u.partition, u.leader, u.leader_epoch, u.previous_leader, u.previous_isr
            )
        })
        .collect();
    f.rules = vec!["unclean_election".into()];
    let mut suspects: Vec<BrokerId> = memory
        .unclean
        .iter()
        .flat_map(|(_, u)| std::iter::once(u.leader).chain(u.previous_isr.iter().copied()))
        .collect();
    suspects.sort_unstable();
    suspects.dedup();
    f.suspects = suspects;
    Some(
        f.with_partitions(
            memory
                .unclean
                .iter()
                .map(|(_, u)| format!("{}-{}", u.topic, u.partition))
                .collect(),
        ),
    )
}

/// The canary's findings this round (pure but for the memory it updates).
pub fn canary_findings(
    cluster: &str,
    round: &CanaryRound,
    memory: &mut CanaryMemory,
    now: SystemTime,
) -> Vec<Finding> {
    let recent = |t: SystemTime| now.duration_since(t).is_ok_and(|a| a <= LOSS_MEMORY);
    memory
        .losses
        .extend(round.lost.iter().cloned().map(|l| (now, l)));
    memory.losses.retain(|(t, _)| recent(*t));
    memory.closed.retain(|_, (t, _)| recent(*t));
    let mut out = Vec::new();

    let mut by_broker: BTreeMap<BrokerId, Vec<&LossEvent>> = BTreeMap::new();
    for (_, l) in &memory.losses {
        by_broker.entry(l.broker).or_default().push(l);
    }
    for (broker, losses) in by_broker {
        let stale = losses.iter().filter(|l| l.reason == "stale_leader").count();
        let mut f = Finding::new(
            FindingKey::new(cluster, Subject::Broker(broker), FindingKind::AcknowledgedLoss),
            format!(
                "{} acknowledged canary record(s) acknowledged by broker {broker} are not in the log{}",
                losses.len(),
                if stale > 0 {
                    format!(" ({stale} acknowledged while it was a stale leader)")
                } else {
                    String::new()
                }
            ),
        );
        f.evidence = losses
            .iter()
            .take(20)
            .map(|l| {
                format!(
                    "{}-{} offset {} seq {} (acks={}): {}",
                    round.topic,
                    l.partition,
                    l.offset,
                    l.seq,
                    l.acks.as_label(),
                    l.reason
                )
            })
            .collect();
        f.rules = vec!["canary_acknowledged_loss".into()];
        f.suspects = vec![broker];
        out.push(
            f.with_partitions(
                losses
                    .iter()
                    .map(|l| format!("{}-{}", round.topic, l.partition))
                    .collect(),
            ),
        );
    }

    for (partition, leader, seconds) in &round.windows_closed {
        let blamed = memory.window_leader.remove(partition).unwrap_or(*leader);
        let e = memory.closed.entry(blamed).or_insert((now, 0.0));
        *e = (now, e.1.max(*seconds));
    }
    let open: Vec<_> = round
        .partitions
        .iter()
        .filter_map(|p| p.unavailable_seconds.map(|s| (p, s)))
        .collect();
    for (p, _) in &open {
        memory.window_leader.entry(p.partition).or_insert(p.leader);
    }
    memory
        .window_leader
        .retain(|part, _| open.iter().any(|(p, _)| p.partition == *part));
    if !open.is_empty() {
        let longest = open.iter().map(|(_, s)| *s).fold(0.0, f64::max);
        let mut f = Finding::new(
            FindingKey::new(cluster, Subject::Cluster, FindingKind::CanaryUnavailable),
            format!(
                "canary writes fail on {} partition(s) of {}, the longest for {longest:.0} s",
                open.len(),
                round.topic
            ),
        );
        f.evidence = open
            .iter()
            .map(|(p, s)| {
                let why = match &p.produce_error {
                    // The client wrote to another broker than the view's leader: its
                    // metadata was older than the view.
                    Some(e) if e.broker.is_some_and(|b| b != p.leader) => format!(
                        "{} at broker {}, where the client's metadata sent it",
                        e.kind,
                        e.broker.unwrap_or(-1)
                    ),
                    Some(e) => e.kind.to_string(),
                    None => "read-back pending".into(),
                };
                format!(
                    "{}-{} led by {}: unwritable for {s:.1} s ({why})",
                    round.topic, p.partition, p.leader,
                )
            })
            .collect();
        f.rules = vec!["canary_unavailable".into()];
        // A failed write names whom the verdicts charged it to (nobody for the client's own
        // failures); a window kept open by a slow or unconfirmed write, its leader.
        f.suspects = {
            let mut s: Vec<BrokerId> = open
                .iter()
                .flat_map(|(p, _)| match &p.charged_to {
                    Some(to) => to.clone(),
                    None => vec![memory
                        .window_leader
                        .get(&p.partition)
                        .copied()
                        .unwrap_or(p.leader)],
                })
                .collect();
            s.sort_unstable();
            s.dedup();
            s
        };
        f.unavailable_seconds = Some(longest);
        out.push(
            f.with_partitions(
                open.iter()
                    .map(|(p, _)| format!("{}-{}", round.topic, p.partition))
                    .collect(),
            ),
        );
    }
    out
}

/// How long the canary partitions a broker led were unavailable, for its broker finding:
/// an open window of a partition it led when the window opened, or one closed recently.
pub fn broker_unavailability(
    broker: BrokerId,
    round: &CanaryRound,
    memory: &CanaryMemory,
) -> Option<f64> {
    let open = round
        .partitions
        .iter()
        .filter(|p| {
            memory
                .window_leader
                .get(&p.partition)
                .copied()
                .unwrap_or(p.leader)
                == broker
        })
        .filter_map(|p| p.unavailable_seconds)
        .fold(None, |m: Option<f64>, s| Some(m.map_or(s, |m| m.max(s))));
    let closed = memory.closed.get(&broker).map(|(_, s)| *s);
    match (open, closed) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

pub struct Alerting {
    book: Mutex<IncidentBook>,
    canary: Mutex<BTreeMap<String, CanaryMemory>>,
    notifier: std::sync::RwLock<NotifierHandle>,
    state_dir: PathBuf,
}

fn ensure_writable(dir: &Path) -> Result<(), AlertingError> {
    let err = |error| AlertingError::StateDir {
        path: dir.display().to_string(),
        error,
    };
    std::fs::create_dir_all(dir).map_err(err)?;
    let probe = dir.join(".write-test");
    std::fs::write(&probe, b"").map_err(err)?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

impl Alerting {
    /// Loads the incident book and starts webhook delivery. Call inside the runtime.
    pub fn start(config: &Config) -> Result<Alerting, AlertingError> {
        ensure_writable(&config.state_dir)?;
        let book = match IncidentBook::load(&config.state_dir) {
            Ok(b) => b,
            Err(StateError::Corrupt { .. }) => {
                // A corrupt file must not keep the watchdog from watching; keep it aside for
                // a person to look at and start with an empty book.
                let file = config.state_dir.join("incidents.json");
                let aside = config.state_dir.join(format!(
                    "incidents.json.corrupt-{}",
                    incident::time::unix_ms(SystemTime::now())
                ));
                let _ = std::fs::rename(&file, &aside);
                tracing::error!(kept = %aside.display(), "incident state file is corrupt; starting with no open incidents");
                IncidentBook::new()
            }
            Err(e) => return Err(e.into()),
        };
        let notifier = Notifier::spawn(&config.webhooks, &config.state_dir, &config.instance_id)?;
        notifier.restore_open(book.open_incidents());
        Ok(Alerting {
            book: Mutex::new(book),
            canary: Mutex::new(BTreeMap::new()),
            notifier: std::sync::RwLock::new(notifier),
            state_dir: config.state_dir.clone(),
        })
    }

    /// Turns one report into incident events and hands them to delivery.
    pub fn after_round(&self, cluster: &ClusterConfig, report: &ClusterReport, now: SystemTime) {
        let mut extra = Vec::new();
        let mut canary_memory = self.canary.lock().unwrap_or_else(|p| p.into_inner());
        let memory = canary_memory.entry(report.cluster.clone()).or_default();
        if let Some(round) = &report.canary {
            extra = canary_findings(&report.cluster, round, memory, now);
        }
        extra.extend(unclean_findings(&report.cluster, report, memory, now));
        let mut findings = incident::findings(report, extra);
        if let Some(round) = &report.canary {
            for f in &mut findings {
                if let (Subject::Broker(b), FindingKind::Broker) = (f.key.subject, f.key.kind) {
                    f.unavailable_seconds = broker_unavailability(b, round, memory);
                }
            }
        }
        drop(canary_memory);
        let mut book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        let events = book.observe(
            &report.cluster,
            findings,
            Hysteresis::from(&cluster.verdict),
            now,
        );
        for e in &events {
            tracing::warn!(
                cluster = %e.incident.cluster,
                event = e.kind.as_str(),
                kind = e.incident.kind.as_str(),
                severity = e.incident.severity.as_str(),
                summary = %e.incident.summary,
                "incident"
            );
        }
        if !(events.is_empty() && book.is_idle()) {
            if let Err(e) = book.save(&self.state_dir) {
                tracing::error!(error = %e, "cannot save incident state");
            }
        }
        drop(book);
        self.notifier().submit(events);
    }

    /// Where the incident book lives; remediation keeps its history and thread dumps
    /// below it.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// A remediation decision as a one-shot incident event (kind `remediation`): it goes
    /// to the receivers like any event, and opens nothing in the book.
    pub fn remediation(&self, r: crate::remediate::Record) {
        self.notifier().submit(vec![remediation_event(&r)]);
    }

    fn notifier(&self) -> NotifierHandle {
        self.notifier
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the receivers after a reload: the old delivery drains briefly, what it could
    /// not send stays in the spool, which the new one (same state folder) picks up.
    pub async fn reconfigure(&self, config: &Config) -> Result<(), AlertingError> {
        let old = self.notifier();
        old.shutdown(Duration::from_secs(2)).await;
        let new = Notifier::spawn(&config.webhooks, &config.state_dir, &config.instance_id)?;
        new.restore_open(self.open_incidents());
        *self.notifier.write().unwrap_or_else(|p| p.into_inner()) = new;
        Ok(())
    }

    /// Resolves the incidents of clusters no longer configured (after a reload).
    pub fn retain_clusters(&self, names: &[String]) {
        let mut book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        let events = book.retain_clusters(names, SystemTime::now());
        if let Err(e) = book.save(&self.state_dir) {
            tracing::error!(error = %e, "cannot save incident state");
        }
        drop(book);
        self.notifier().submit(events);
    }

    pub fn open_incidents(&self) -> Vec<Incident> {
        self.book
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .open_incidents()
    }

    pub fn stats(&self) -> NotifierStats {
        self.notifier().stats()
    }

    /// Flushes what delivery can within `deadline`; the rest stays spooled on disk.
    pub async fn shutdown(&self, deadline: Duration) -> NotifierStats {
        self.notifier().shutdown(deadline).await
    }
}

/// The incident event of a remediation record.
pub fn remediation_event(r: &crate::remediate::Record) -> incident::IncidentEvent {
    use crate::remediate::Outcome;
    let key = FindingKey::new(
        &r.cluster,
        Subject::Broker(r.broker),
        FindingKind::Remediation,
    );
    // A broker restarted (or a restart that failed) is worth a page; a refusal or a dry
    // run is a warning: the zombie incident itself already pages.
    let severity = match r.outcome {
        Outcome::Acted | Outcome::Failed => crate::config::Severity::Critical,
        Outcome::Refused | Outcome::DryRun => crate::config::Severity::Warning,
    };
    incident::IncidentEvent {
        kind: r.outcome.event_kind(),
        at: r.at,
        incident: Incident {
            id: incident::incident_id(&key, r.at),
            dedup_key: key.dedup_key(),
            cluster: r.cluster.clone(),
            subject: key.subject,
            kind: FindingKind::Remediation,
            broker: Some(r.broker),
            broker_address: (!r.address.is_empty()).then(|| r.address.clone()),
            state: Some(crate::verdict::BrokerState::Zombie),
            severity,
            peak_severity: severity,
            summary: r.summary(),
            evidence: r.evidence(),
            rules: vec![format!("remediation_{}", r.outcome.as_label())],
            affected_partitions: Vec::new(),
            affected_partitions_total: 0,
            suspects: vec![r.broker],
            started_at: r.at,
            updated_at: r.at,
            resolved_at: None,
            unavailable_seconds: None,
        },
        previous: None,
        changes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canary::{PartitionRound, ProduceFailure, TopicStatus};

    fn round(charged_to: Option<Vec<BrokerId>>, received: Option<BrokerId>) -> CanaryRound {
        CanaryRound {
            topic: "c".into(),
            status: TopicStatus::Ready,
            partitions: vec![PartitionRound {
                partition: 0,
                leader: 2,
                leader_epoch: 3,
                replicas: vec![1, 2, 3],
                isr: vec![2, 3],
                produce: None,
                produce_seconds: None,
                produce_error: Some(ProduceFailure {
                    kind: "timeout",
                    detail: "test".into(),
                    broker: received,
                }),
                end_to_end_seconds: Vec::new(),
                unavailable_seconds: Some(3.5),
                overdue: 0,
                charged_to,
            }],
            layout: Vec::new(),
            not_leading: Vec::new(),
            lost: Vec::new(),
            duplicated: Vec::new(),
            windows_closed: Vec::new(),
            acks1: Vec::new(),
        }
    }

    fn unavailable(r: &CanaryRound) -> Finding {
        canary_findings("lab", r, &mut CanaryMemory::default(), SystemTime::now())
            .into_iter()
            .find(|f| f.key.kind == FindingKind::CanaryUnavailable)
            .expect("a canary_unavailable finding")
    }

    #[test]
    fn an_unwritable_canary_partition_names_whom_the_write_is_charged_to() {
        // Written on the client's stale metadata to the old leader 1, which timed out:
        // broker 1, not the view's new leader 2 (issue 14: "broker 2" was named).
        let f = unavailable(&round(Some(vec![1]), Some(1)));
        assert_eq!(f.suspects, vec![1]);
        assert!(
            f.evidence[0].contains("timeout at broker 1, where the client's metadata sent it"),
            "{:?}",
            f.evidence
        );
        // A failure of the client's own names nobody.
        assert!(unavailable(&round(Some(vec![]), None)).suspects.is_empty());
        // A follower decided to be the cause of an acks=all timeout is named, not the leader.
        assert_eq!(
            unavailable(&round(Some(vec![3]), Some(2))).suspects,
            vec![3]
        );
        // Not decided (no verdict ran): the leader, as before.
        assert_eq!(unavailable(&round(None, Some(2))).suspects, vec![2]);
    }
}
