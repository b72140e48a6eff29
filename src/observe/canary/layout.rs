//! Where the canary topic's replicas go, pure. Every broker is the preferred leader of at
//! least one partition, so a canary round trip exercises every broker as a leader. When the
//! broker set changes the topic follows, but only once the set has been stable for a while,
//! at most once per interval and never while a canary partition is under-replicated:
//! reassigning a topic in a loop is how canaries have hurt clusters before.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use crate::model::round::BrokerId;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    pub id: BrokerId,
    pub rack: Option<String>,
}

/// A canary partition as the cluster reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    pub partition: i32,
    pub leader: BrokerId,
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
}

#[derive(Debug, Clone)]
pub struct LayoutSettings {
    /// `None`: min(3, brokers).
    pub replication_factor: Option<u16>,
    /// `None`: replication factor - 1, at least 1.
    pub min_insync_replicas: Option<u16>,
    pub stable_for: Duration,
    pub min_interval: Duration,
    pub elect_preferred_leaders: bool,
}

impl LayoutSettings {
    pub fn replication_factor(&self, brokers: usize) -> usize {
        let wanted = self.replication_factor.map(usize::from).unwrap_or(3);
        wanted.min(brokers).max(1)
    }

    pub fn min_insync_replicas(&self, rf: usize) -> usize {
        self.min_insync_replicas
            .map(usize::from)
            .unwrap_or(rf.saturating_sub(1))
            .clamp(1, rf.max(1))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    Nothing,
    Create {
        assignment: Vec<Vec<BrokerId>>,
        min_insync_replicas: usize,
    },
    /// New partitions, each with its replica list, appended after the existing ones.
    AddPartitions {
        assignment: Vec<Vec<BrokerId>>,
    },
    /// New replica lists for existing partitions.
    Reassign {
        moves: BTreeMap<i32, Vec<BrokerId>>,
    },
    /// Partitions whose preferred leader is in the ISR but does not lead.
    ElectPreferred {
        partitions: Vec<i32>,
    },
    /// Something should change but a guard holds it back; said in `/status`.
    Waiting {
        why: String,
    },
}

/// What the planner remembers between rounds.
#[derive(Debug, Clone, Default)]
pub struct LayoutMemory {
    brokers: BTreeSet<BrokerId>,
    stable_since: Option<SystemTime>,
    last_change: Option<SystemTime>,
    /// The last change whose request failed as a whole: it changed nothing, so it does not
    /// hold the next one back for `min_interval`, only for `FAILED_CHANGE_RETRY`.
    last_failure: Option<SystemTime>,
}

/// How long after a layout change that failed as a whole (no connection, a timeout, the
/// controller moving) the next is tried. An hour's wait would leave a broker out of the
/// canary's reach for that hour; every round would ask the controller again and again.
pub const FAILED_CHANGE_RETRY: Duration = Duration::from_secs(300);

impl LayoutMemory {
    /// Notes the broker set seen now; a different set restarts the stability clock.
    pub fn observe(&mut self, brokers: &[BrokerInfo], now: SystemTime) {
        let set: BTreeSet<BrokerId> = brokers.iter().map(|b| b.id).collect();
        if set != self.brokers || self.stable_since.is_none() {
            self.brokers = set;
            self.stable_since = Some(now);
        }
    }

    pub fn changed(&mut self, now: SystemTime) {
        self.last_change = Some(now);
        self.last_failure = None;
    }

    /// A change was asked for and its request failed as a whole.
    pub fn failed(&mut self, now: SystemTime) {
        self.last_failure = Some(now);
    }

    fn stable_for(&self, now: SystemTime) -> Duration {
        self.stable_since
            .and_then(|s| now.duration_since(s).ok())
            .unwrap_or_default()
    }
}

/// Brokers ordered so that neighbours sit in different racks where possible: one broker of
/// each rack in turn.
fn rack_order(brokers: &[BrokerInfo]) -> Vec<BrokerId> {
    let mut by_rack: BTreeMap<Option<&str>, Vec<BrokerId>> = BTreeMap::new();
    for b in brokers {
        by_rack.entry(b.rack.as_deref()).or_default().push(b.id);
    }
    for ids in by_rack.values_mut() {
        ids.sort_unstable();
    }
    let mut out = Vec::with_capacity(brokers.len());
    let mut i = 0;
    while out.len() < brokers.len() {
        for ids in by_rack.values() {
            if let Some(id) = ids.get(i) {
                out.push(*id);
            }
        }
        i += 1;
    }
    out
}

/// Replica lists for `partitions` partitions: partition i is led by the i-th broker in rack
/// order, followed by the next ones, so leadership and replicas spread evenly.
pub fn assignment(brokers: &[BrokerInfo], partitions: usize, rf: usize) -> Vec<Vec<BrokerId>> {
    let order = rack_order(brokers);
    let n = order.len();
    if n == 0 {
        return Vec::new();
    }
    (0..partitions)
        .map(|i| (0..rf.min(n)).map(|k| order[(i + k) % n]).collect())
        .collect()
}

/// What to do with the canary topic this round.
pub fn plan(
    topic: Option<&[PartitionState]>,
    brokers: &[BrokerInfo],
    settings: &LayoutSettings,
    memory: &LayoutMemory,
    now: SystemTime,
) -> Plan {
    if brokers.is_empty() {
        return Plan::Nothing;
    }
    let n = brokers.len();
    let rf = settings.replication_factor(n);
    let Some(parts) = topic else {
        return Plan::Create {
            assignment: assignment(brokers, n, rf),
            min_insync_replicas: settings.min_insync_replicas(rf),
        };
    };
    let live: BTreeSet<BrokerId> = brokers.iter().map(|b| b.id).collect();
    let preferred: BTreeSet<BrokerId> = parts
        .iter()
        .filter_map(|p| p.replicas.first().copied())
        .collect();
    let not_preferred: Vec<BrokerId> = live.difference(&preferred).copied().collect();
    let gone_replicas = parts
        .iter()
        .any(|p| p.replicas.iter().any(|r| !live.contains(r)));
    let needs_partitions = parts.len() < n;
    let needs_reassign = !not_preferred.is_empty() || gone_replicas;

    if needs_partitions || needs_reassign {
        if let Some(why) = held_back(parts, &live, settings, memory, now) {
            return Plan::Waiting { why };
        }
        if needs_partitions {
            return Plan::AddPartitions {
                assignment: new_partitions(brokers, parts.len(), &live, &not_preferred, rf),
            };
        }
        let desired = assignment(brokers, parts.len(), rf);
        let moves: BTreeMap<i32, Vec<BrokerId>> = parts
            .iter()
            .zip(desired)
            .filter(|(p, d)| p.replicas != *d)
            .map(|(p, d)| (p.partition, d))
            .collect();
        if !moves.is_empty() {
            return Plan::Reassign { moves };
        }
    }
    if settings.elect_preferred_leaders {
        let partitions = preferred_not_leading(parts);
        if !partitions.is_empty() {
            return Plan::ElectPreferred { partitions };
        }
    }
    Plan::Nothing
}

/// Why a change the layout needs waits (the broker set not stable yet, the last change too
/// recent, a partition catching up), or `None` when it may go ahead now.
fn held_back(
    parts: &[PartitionState],
    live: &BTreeSet<BrokerId>,
    settings: &LayoutSettings,
    memory: &LayoutMemory,
    now: SystemTime,
) -> Option<String> {
    if memory.stable_for(now) < settings.stable_for {
        Some(format!(
            "broker set changed {} s ago; waiting until it has been stable for {} s",
            memory.stable_for(now).as_secs(),
            settings.stable_for.as_secs()
        ))
    } else if let Some(ago) = memory
        .last_change
        .and_then(|t| now.duration_since(t).ok())
        .filter(|ago| *ago < settings.min_interval)
    {
        Some(format!(
            "last layout change {} s ago; at most one per {} s",
            ago.as_secs(),
            settings.min_interval.as_secs()
        ))
    } else if let Some(ago) = memory
        .last_failure
        .and_then(|t| now.duration_since(t).ok())
        .filter(|ago| *ago < FAILED_CHANGE_RETRY.min(settings.min_interval))
    {
        Some(format!(
            "last layout change failed {} s ago; tried again {} s after a failure",
            ago.as_secs(),
            FAILED_CHANGE_RETRY.min(settings.min_interval).as_secs()
        ))
    } else if parts.iter().any(|p| {
        // Replicas on departed brokers are what the move repairs; a live replica out of
        // the ISR means the cluster is busy catching up.
        p.replicas
            .iter()
            .any(|r| live.contains(r) && !p.isr.contains(r))
    }) {
        Some("a canary partition is under-replicated; not moving replicas now".into())
    } else {
        None
    }
}

/// Replica lists for the partitions after the `existing` ones, one per broker short, each
/// led by a broker that leads nothing yet where there is one.
fn new_partitions(
    brokers: &[BrokerInfo],
    existing: usize,
    live: &BTreeSet<BrokerId>,
    not_preferred: &[BrokerId],
    rf: usize,
) -> Vec<Vec<BrokerId>> {
    // New partitions are led first by the brokers that lead nothing yet.
    let mut leaders: Vec<BrokerId> = not_preferred.to_vec();
    leaders.extend(live.iter().filter(|b| !not_preferred.contains(b)));
    let order = rack_order(brokers);
    (existing..brokers.len())
        .enumerate()
        .map(|(k, _)| {
            let leader = leaders[k % leaders.len()];
            let mut r = vec![leader];
            r.extend(order.iter().copied().filter(|b| *b != leader).take(rf - 1));
            r
        })
        .collect()
}

/// Partitions whose preferred leader is in the ISR but does not lead.
fn preferred_not_leading(parts: &[PartitionState]) -> Vec<i32> {
    parts
        .iter()
        .filter(|p| {
            p.replicas
                .first()
                .is_some_and(|pref| *pref != p.leader && p.isr.contains(pref))
        })
        .map(|p| p.partition)
        .collect()
}

/// Brokers that lead no canary partition right now (the canary cannot vouch for them).
pub fn not_leading(parts: &[PartitionState], brokers: &[BrokerInfo]) -> Vec<BrokerId> {
    brokers
        .iter()
        .map(|b| b.id)
        .filter(|id| !parts.iter().any(|p| p.leader == *id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn brokers(ids: &[i32]) -> Vec<BrokerInfo> {
        ids.iter()
            .map(|id| BrokerInfo {
                id: *id,
                rack: None,
            })
            .collect()
    }

    fn settings() -> LayoutSettings {
        LayoutSettings {
            replication_factor: None,
            min_insync_replicas: None,
            stable_for: Duration::from_secs(300),
            min_interval: Duration::from_secs(3600),
            elect_preferred_leaders: true,
        }
    }

    fn t(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(s)
    }

    fn state(assign: &[Vec<i32>]) -> Vec<PartitionState> {
        assign
            .iter()
            .enumerate()
            .map(|(i, r)| PartitionState {
                partition: i as i32,
                leader: r[0],
                replicas: r.clone(),
                isr: r.clone(),
            })
            .collect()
    }

    #[test]
    fn every_broker_leads_one_partition_and_racks_alternate() {
        let b = vec![
            BrokerInfo {
                id: 1,
                rack: Some("a".into()),
            },
            BrokerInfo {
                id: 2,
                rack: Some("a".into()),
            },
            BrokerInfo {
                id: 3,
                rack: Some("b".into()),
            },
            BrokerInfo {
                id: 4,
                rack: Some("b".into()),
            },
        ];
        let a = assignment(&b, 4, 3);
        let leaders: BTreeSet<i32> = a.iter().map(|r| r[0]).collect();
        assert_eq!(leaders, [1, 2, 3, 4].into_iter().collect());
        for r in &a {
            assert_eq!(r.len(), 3);
            let racks: BTreeSet<i32> = r.iter().map(|id| (id - 1) / 2).collect();
            assert_eq!(racks.len(), 2, "replicas span both racks: {r:?}");
        }
    }

    #[test]
    fn missing_topic_is_created_with_rf_and_min_isr() {
        let mut m = LayoutMemory::default();
        m.observe(&brokers(&[1, 2, 3]), t(0));
        match plan(None, &brokers(&[1, 2, 3]), &settings(), &m, t(0)) {
            Plan::Create {
                assignment,
                min_insync_replicas,
            } => {
                assert_eq!(
                    assignment,
                    vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]]
                );
                assert_eq!(min_insync_replicas, 2);
            }
            other => panic!("{other:?}"),
        }
        let one = plan(None, &brokers(&[1]), &settings(), &m, t(0));
        assert_eq!(
            one,
            Plan::Create {
                assignment: vec![vec![1]],
                min_insync_replicas: 1
            }
        );
    }

    #[test]
    fn a_new_broker_gets_a_partition_only_after_the_set_is_stable() {
        let parts = state(&[vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]]);
        let b = brokers(&[1, 2, 3, 4]);
        let mut m = LayoutMemory::default();
        m.observe(&b, t(1000));
        assert!(matches!(
            plan(Some(&parts), &b, &settings(), &m, t(1100)),
            Plan::Waiting { .. }
        ));
        match plan(Some(&parts), &b, &settings(), &m, t(1300)) {
            Plan::AddPartitions { assignment } => {
                assert_eq!(assignment.len(), 1);
                assert_eq!(assignment[0][0], 4, "led by the newcomer");
                assert_eq!(assignment[0].len(), 3);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn no_loop_once_changed_and_no_moves_while_under_replicated() {
        let b = brokers(&[1, 2, 3]);
        // Broker 3 leads nothing: its partition's replicas start with 1.
        let mut parts = state(&[vec![1, 2, 3], vec![2, 3, 1], vec![1, 3, 2]]);
        let mut m = LayoutMemory::default();
        m.observe(&b, t(0));
        let p = plan(Some(&parts), &b, &settings(), &m, t(400));
        assert!(
            matches!(p, Plan::Reassign { ref moves } if moves.len() == 1),
            "{p:?}"
        );
        m.changed(t(400));
        assert!(matches!(
            plan(Some(&parts), &b, &settings(), &m, t(500)),
            Plan::Waiting { .. }
        ));
        m.last_change = None;
        parts[0].isr = vec![1, 2];
        let p = plan(Some(&parts), &b, &settings(), &m, t(5000));
        assert!(matches!(p, Plan::Waiting { ref why } if why.contains("under-replicated")));
    }

    /// A change whose request failed changed nothing: the next is tried after
    /// `FAILED_CHANGE_RETRY`, not after `min_interval` (an hour by default, while the broker
    /// the move was for led no canary partition).
    #[test]
    fn a_failed_change_is_tried_again_after_minutes_not_the_hour() {
        let b = brokers(&[1, 2, 3]);
        let parts = state(&[vec![1, 2, 3], vec![2, 3, 1], vec![1, 3, 2]]);
        let mut m = LayoutMemory::default();
        m.observe(&b, t(0));
        m.failed(t(400));
        let p = plan(Some(&parts), &b, &settings(), &m, t(500));
        assert!(
            matches!(p, Plan::Waiting { ref why } if why.contains("failed 100 s ago")),
            "{p:?}"
        );
        let p = plan(Some(&parts), &b, &settings(), &m, t(700));
        assert!(matches!(p, Plan::Reassign { .. }), "{p:?}");
        // A change that went through still holds the next one for the whole interval.
        m.changed(t(700));
        let p = plan(Some(&parts), &b, &settings(), &m, t(1100));
        assert!(
            matches!(p, Plan::Waiting { ref why } if why.contains("at most one per 3600 s")),
            "{p:?}"
        );
    }

    #[test]
    fn a_settled_layout_needs_nothing_or_a_preferred_election() {
        let b = brokers(&[1, 2, 3]);
        let mut parts = state(&[vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]]);
        let mut m = LayoutMemory::default();
        m.observe(&b, t(0));
        assert_eq!(
            plan(Some(&parts), &b, &settings(), &m, t(10)),
            Plan::Nothing
        );
        parts[1].leader = 3;
        assert_eq!(
            plan(Some(&parts), &b, &settings(), &m, t(10)),
            Plan::ElectPreferred {
                partitions: vec![1]
            }
        );
        assert_eq!(not_leading(&parts, &b), vec![2]);
        let s = LayoutSettings {
            elect_preferred_leaders: false,
            ..settings()
        };
        assert_eq!(plan(Some(&parts), &b, &s, &m, t(10)), Plan::Nothing);
    }

    #[test]
    fn a_departed_broker_is_moved_out_after_the_guards() {
        let b = brokers(&[1, 2]);
        let mut parts = state(&[vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]]);
        for p in &mut parts {
            p.isr.retain(|r| *r != 3);
        }
        let mut m = LayoutMemory::default();
        m.observe(&b, t(0));
        match plan(Some(&parts), &b, &settings(), &m, t(1000)) {
            Plan::Reassign { moves } => {
                assert_eq!(moves.len(), 3);
                assert!(moves.values().all(|r| r.len() == 2 && !r.contains(&3)));
            }
            other => panic!("{other:?}"),
        }
    }
}
