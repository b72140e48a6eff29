//! The findings of the canary (acknowledged and acks=1 losses, unavailability charged to
//! the broker that led the partition) and of unclean elections: events more than states,
//! so each is remembered for a while between rounds and its incident outlives it.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::{Finding, FindingKey, Subject};
use crate::judge::report::ClusterReport;
use crate::model::kind::FindingKind;
use crate::model::round::BrokerId;
use crate::observe::canary::record::Acks;
use crate::observe::canary::{CanaryRound, LossEvent, PartitionRound};

/// How long an acknowledged-write loss keeps its incident open after the last lost record:
/// a loss is an event, and an incident that flapped with every round would be noise.
pub const LOSS_MEMORY: Duration = Duration::from_secs(600);

/// Rounds an acks=1 loss is remembered. The acks=1 probe writes one record per claimed
/// partition and round, so two lost records of one partition in this span mean the broker
/// went on acknowledging as leader after its first lost write: an isolated or split-brain
/// leader. One lost record is an ordinary leader change and raises nothing; the finding
/// ends this many rounds after the last loss, so hysteresis works on it as on any other.
pub const ACKS1_LOSS_ROUNDS: u32 = 3;

/// What the canary findings remember between rounds, per cluster.
#[derive(Debug, Default, Clone)]
pub struct CanaryMemory {
    /// acks=all losses of the last `LOSS_MEMORY`.
    losses: Vec<(SystemTime, LossEvent)>,
    /// acks=1 losses of the last `ACKS1_LOSS_ROUNDS` rounds.
    acks1_losses: Vec<(SystemTime, LossEvent)>,
    /// Per partition: the leader when its current unavailability window opened.
    window_leader: BTreeMap<i32, BrokerId>,
    /// Per broker: the longest window of a partition it led, closed recently.
    closed: BTreeMap<BrokerId, (SystemTime, f64)>,
    /// Unclean elections of the last `LOSS_MEMORY`.
    unclean: Vec<(SystemTime, crate::judge::report::UncleanElection)>,
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

/// The canary's findings this round (pure but for the memory it updates). `round_interval`
/// is the cluster's: acks=1 losses are judged over a few rounds.
pub fn canary_findings(
    cluster: &str,
    round: &CanaryRound,
    memory: &mut CanaryMemory,
    round_interval: Duration,
    now: SystemTime,
) -> Vec<Finding> {
    let recent = |t: SystemTime| now.duration_since(t).is_ok_and(|a| a <= LOSS_MEMORY);
    // Half a round of slack: rounds are not exactly `round_interval` apart.
    let acks1_span = round_interval * ACKS1_LOSS_ROUNDS - round_interval / 2;
    let acks1_recent = |t: SystemTime| now.duration_since(t).is_ok_and(|a| a <= acks1_span);
    for l in &round.lost {
        match l.acks {
            Acks::All => memory.losses.push((now, l.clone())),
            Acks::One => memory.acks1_losses.push((now, l.clone())),
        }
    }
    memory.losses.retain(|(t, _)| recent(*t));
    memory.acks1_losses.retain(|(t, _)| acks1_recent(*t));
    memory.closed.retain(|_, (t, _)| recent(*t));
    let mut out = Vec::new();
    out.extend(acks1_findings(cluster, &round.topic, &memory.acks1_losses));

    out.extend(acknowledged_loss_findings(
        cluster,
        &round.topic,
        &memory.losses,
    ));
    out.extend(unavailability_finding(cluster, round, memory, now));
    out
}

/// One critical finding per broker that acknowledged acks=all records now missing from
/// the log, over the losses remembered.
fn acknowledged_loss_findings(
    cluster: &str,
    topic: &str,
    losses: &[(SystemTime, LossEvent)],
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut by_broker: BTreeMap<BrokerId, Vec<&LossEvent>> = BTreeMap::new();
    for (_, l) in losses {
        by_broker.entry(l.broker).or_default().push(l);
    }
    for (broker, losses) in by_broker {
        let f = Finding::new(
            FindingKey::new(
                cluster,
                Subject::Broker(broker),
                FindingKind::AcknowledgedLoss,
            ),
            format!(
                "{} acks=all canary record(s) acknowledged by broker {broker} are not in the log",
                losses.len(),
            ),
        );
        out.push(with_losses(
            f,
            topic,
            broker,
            &losses,
            "canary_acknowledged_loss",
        ));
    }

    out
}

/// The partitions the canary cannot write now, charged to whom their failed writes went
/// to; closed windows are remembered per broker for its own finding's unavailable time.
fn unavailability_finding(
    cluster: &str,
    round: &CanaryRound,
    memory: &mut CanaryMemory,
    now: SystemTime,
) -> Option<Finding> {
    remember_closed_windows(round, memory, now);
    let open: Vec<_> = round
        .partitions
        .iter()
        .filter_map(|p| p.unavailable_seconds.map(|s| (p, s)))
        .collect();
    remember_open_windows(&open, memory);
    if open.is_empty() {
        return None;
    }
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
        .map(|(p, s)| unwritable_line(&round.topic, p, *s))
        .collect();
    f.rules = vec!["canary_unavailable".into()];
    f.suspects = unavailability_suspects(&open, &memory.window_leader);
    f.unavailable_seconds = Some(longest);
    Some(
        f.with_partitions(
            open.iter()
                .map(|(p, _)| format!("{}-{}", round.topic, p.partition))
                .collect(),
        ),
    )
}

/// Forgets the leaders of the windows that closed this round, and keeps each charged
/// broker's longest closed window.
fn remember_closed_windows(round: &CanaryRound, memory: &mut CanaryMemory, now: SystemTime) {
    // The canary charges each window to the broker its failed writes went to, at send time
    // (-1: nobody, the leader's followers held them). The view's leader at a round can be
    // the one that took over, which is the wrong broker to hand the outage to.
    for (partition, charged, seconds) in &round.windows_closed {
        memory.window_leader.remove(partition);
        if *charged < 0 {
            continue;
        }
        let e = memory.closed.entry(*charged).or_insert((now, 0.0));
        *e = (now, e.1.max(*seconds));
    }
}

/// Keeps, per open window, the leader when it opened (its failed writes' broker), and
/// forgets the windows no longer open.
fn remember_open_windows(open: &[(&PartitionRound, f64)], memory: &mut CanaryMemory) {
    for (p, _) in open {
        memory
            .window_leader
            .entry(p.partition)
            .or_insert(p.unavailable_broker.unwrap_or(p.leader));
    }
    memory
        .window_leader
        .retain(|part, _| open.iter().any(|(p, _)| p.partition == *part));
}

/// One evidence line: an unwritable partition, for how long, and why.
fn unwritable_line(topic: &str, p: &PartitionRound, seconds: f64) -> String {
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
        "{topic}-{} led by {}: unwritable for {seconds:.1} s ({why})",
        p.partition, p.leader,
    )
}

/// The brokers the open windows point at, sorted and once each.
fn unavailability_suspects(
    open: &[(&PartitionRound, f64)],
    window_leader: &BTreeMap<i32, BrokerId>,
) -> Vec<BrokerId> {
    // A failed write names whom the verdicts charged it to (nobody for the client's own
    // failures); a window kept open by a slow or unconfirmed write, its leader.
    let mut s: Vec<BrokerId> = open
        .iter()
        .flat_map(|(p, _)| match &p.charged_to {
            Some(to) => to.clone(),
            None => vec![window_leader.get(&p.partition).copied().unwrap_or(p.leader)],
        })
        .collect();
    s.sort_unstable();
    s.dedup();
    s
}

/// A loss finding with its evidence (at most 20 lines), rule, suspect and partitions.
fn with_losses(
    mut f: Finding,
    topic: &str,
    broker: BrokerId,
    losses: &[&LossEvent],
    rule: &str,
) -> Finding {
    f.evidence = losses
        .iter()
        .take(20)
        .map(|l| loss_line(topic, l))
        .collect();
    f.rules = vec![rule.into()];
    f.suspects = vec![broker];
    f.with_partitions(
        losses
            .iter()
            .map(|l| format!("{topic}-{}", l.partition))
            .collect(),
    )
}

pub(super) fn loss_line(topic: &str, l: &LossEvent) -> String {
    format!(
        "{topic}-{} offset {} seq {} (acks={}): {}",
        l.partition,
        l.offset,
        l.seq,
        l.acks.as_label(),
        l.reason
    )
}

/// Per broker: acks=1 records it acknowledged in two or more rounds of one partition that
/// the log does not hold (see `ACKS1_LOSS_ROUNDS`).
pub(super) fn acks1_findings(
    cluster: &str,
    topic: &str,
    losses: &[(SystemTime, LossEvent)],
) -> Vec<Finding> {
    let mut by_broker: BTreeMap<BrokerId, Vec<&LossEvent>> = BTreeMap::new();
    for (_, l) in losses {
        by_broker.entry(l.broker).or_default().push(l);
    }
    let mut out = Vec::new();
    for (broker, losses) in by_broker {
        // One record per claimed partition and round: distinct records of one partition
        // are distinct rounds.
        let mut per_partition: BTreeMap<i32, std::collections::BTreeSet<u64>> = BTreeMap::new();
        for l in &losses {
            per_partition.entry(l.partition).or_default().insert(l.seq);
        }
        let rounds = per_partition.values().map(|s| s.len()).max().unwrap_or(0);
        if rounds < 2 {
            continue;
        }
        let stale = losses.iter().filter(|l| l.reason == "stale_leader").count();
        let f = Finding::new(
            FindingKey::new(cluster, Subject::Broker(broker), FindingKind::Acks1Loss),
            format!(
                "broker {broker} acknowledged {} acks=1 canary record(s), in {rounds} rounds, that are not in the log: it kept taking writes as leader that the partition's log does not keep (an isolated or split-brain leader){}",
                losses.len(),
                if stale > 0 {
                    format!("; {stale} acknowledged while a newer leader epoch named another leader")
                } else {
                    String::new()
                }
            ),
        );
        out.push(with_losses(f, topic, broker, &losses, "canary_acks1_loss"));
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
