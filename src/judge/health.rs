//! Partition health, pure: which partitions are offline, under-replicated, under their
//! `min.insync.replicas`, or led from outside their ISR, and which brokers each one points
//! at. Aggregated per broker for the verdicts.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::model::round::{BrokerId, FollowerProgress, IdTable, PartitionView, NO_LEADER};
use crate::observe::cluster_view::ClusterView;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// No leader: nothing can be written or read (incident 1, incident 4).
    Offline,
    /// ISR smaller than min.insync.replicas: acks=all writes fail (incident 2).
    UnderMinIsr,
    /// ISR smaller than the replica set.
    UnderReplicated,
    /// The leader is not in its own ISR (a controller/leader disagreement).
    LeaderNotInIsr,
}

impl Condition {
    pub const ALL: [Condition; 4] = [
        Condition::Offline,
        Condition::UnderMinIsr,
        Condition::UnderReplicated,
        Condition::LeaderNotInIsr,
    ];

    pub fn as_label(self) -> &'static str {
        match self {
            Condition::Offline => "offline",
            Condition::UnderMinIsr => "under_min_isr",
            Condition::UnderReplicated => "under_replicated",
            Condition::LeaderNotInIsr => "leader_not_in_isr",
        }
    }
}

/// A partition with at least one condition, and the brokers it points at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionProblem {
    pub topic: String,
    pub partition: i32,
    pub conditions: Vec<Condition>,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    pub min_isr: Option<i32>,
    /// Replicas outside the ISR, or all replicas of an offline partition: the brokers to
    /// look at.
    pub suspects: Vec<BrokerId>,
    /// Replicas an ongoing reassignment is adding and that are not in the ISR yet: copying,
    /// not failing, so neither counted as missing nor suspects.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub adding: Vec<BrokerId>,
}

impl PartitionProblem {
    /// The replicas whose absence from the ISR counts: all but those being added.
    pub fn settled_replicas(&self) -> Vec<BrokerId> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.adding.contains(r))
            .collect()
    }
}

/// Per topic, the (partition, broker) replicas not counted missing from the ISR this round:
/// ongoing reassignments are adding them, a newer read showed them settled, or they copy
/// under the operator's replication throttle and their logs grow (`catch_up::copying`).
#[derive(Debug, Clone, Default)]
pub struct Reassigning(BTreeMap<String, BTreeSet<(i32, BrokerId)>>);

impl Reassigning {
    /// From the round's catch-up measurements, which list the controller's ongoing
    /// reassignments for every broker missing from an ISR.
    pub fn from_followers(followers: &BTreeMap<BrokerId, FollowerProgress>) -> Self {
        let mut r = Reassigning::default();
        for (id, f) in followers {
            // A replica a newer read shows settled is judged by that read, like one being added.
            for (topic, partition) in f.adding_to.iter().flatten().chain(&f.settled) {
                r.insert(topic, *partition, *id);
            }
        }
        r
    }

    /// Counts one more replica as copying rather than missing.
    pub fn insert(&mut self, topic: &str, partition: i32, broker: BrokerId) {
        self.0
            .entry(topic.to_string())
            .or_default()
            .insert((partition, broker));
    }

    pub fn adds(&self, topic: &str, partition: i32, broker: BrokerId) -> bool {
        self.0
            .get(topic)
            .is_some_and(|s| s.contains(&(partition, broker)))
    }
}

/// What the partitions say about one broker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BrokerPartitions {
    /// Partitions it leads.
    pub leader_of: u32,
    /// Partitions it is a replica of.
    pub replica_of: u32,
    /// Partitions it is a replica of but missing from the ISR.
    pub missing_from_isr: u32,
    /// Offline partitions it is a replica of.
    pub replica_of_offline: u32,
    /// Partitions under min ISR it is a replica of and missing from the ISR.
    pub causes_under_min_isr: u32,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Health {
    pub partitions: u64,
    pub counts: BTreeMap<Condition, u64>,
    /// Problem partitions, in topic/partition order.
    pub problems: Vec<PartitionProblem>,
    pub brokers: BTreeMap<BrokerId, BrokerPartitions>,
    /// The replicas being added, for the canary's partitions (which `include` may leave out).
    #[serde(skip)]
    pub reassigning: Reassigning,
}

impl Health {
    pub fn count(&self, c: Condition) -> u64 {
        self.counts.get(&c).copied().unwrap_or(0)
    }
}

/// Classifies every partition of the topics `include` admits. `min_isr` holds each topic's
/// `min.insync.replicas` where known; an unknown one skips only the under-min-ISR check.
pub fn classify(
    view: &ClusterView,
    min_isr: &BTreeMap<String, i32>,
    include: impl Fn(&str) -> bool,
) -> Health {
    classify_reassigning(view, min_isr, Reassigning::default(), include)
}

/// [`classify`], knowing which replicas ongoing reassignments are adding: like Kafka's own
/// under-replicated count, a replica still being copied in is not missing from the ISR.
pub fn classify_reassigning(
    view: &ClusterView,
    min_isr: &BTreeMap<String, i32>,
    reassigning: Reassigning,
    include: impl Fn(&str) -> bool,
) -> Health {
    let mut health = Health::default();
    // A map lookup for every replica of 2M partitions was most of this function's time.
    let mut tallies: IdTable<BrokerPartitions> = IdTable::default();
    for id in view.brokers.keys() {
        tallies.entry(*id);
    }
    let mut counts = [0u64; Condition::ALL.len()];
    for (topic, t) in &view.topics {
        if !include(topic) {
            continue;
        }
        let topic_min_isr = min_isr.get(topic).copied();
        for p in t.partitions.iter() {
            health.partitions += 1;
            let weighed = Weighed::of(topic, p, topic_min_isr, &reassigning);
            weighed.tally(p, &mut tallies);
            let Some(problem) = weighed.problem(topic, p, topic_min_isr) else {
                continue;
            };
            for c in &problem.conditions {
                counts[*c as usize] += 1;
            }
            health.problems.push(problem);
        }
    }
    health.counts = Condition::ALL
        .iter()
        .map(|c| (*c, counts[*c as usize]))
        .collect();
    health.brokers = tallies.into_list().into_iter().collect();
    health.reassigning = reassigning;
    health
}

/// What one partition's leader, replicas and ISR say, before it is a problem or not.
struct Weighed {
    /// Replicas outside the ISR that an ongoing reassignment is adding.
    adding: Vec<BrokerId>,
    offline: bool,
    under_min: bool,
    under_replicated: bool,
    leader_outside: bool,
}

impl Weighed {
    /// Weighs partition `p` of `topic`, whose `min.insync.replicas` is `topic_min_isr`.
    #[inline]
    fn of(
        topic: &str,
        p: &PartitionView,
        topic_min_isr: Option<i32>,
        reassigning: &Reassigning,
    ) -> Self {
        // Replica lists are a handful of ids: a scan beats building a set.
        let (replicas, isr): (&[BrokerId], &[BrokerId]) = (&p.replicas, &p.isr);
        let in_isr = |b: &BrokerId| isr.contains(b);
        let isr_len = distinct(isr);
        let adding: Vec<BrokerId> = if reassigning.0.is_empty() {
            Vec::new()
        } else {
            replicas
                .iter()
                .copied()
                .filter(|b| !in_isr(b) && reassigning.adds(topic, p.partition, *b))
                .collect()
        };
        let offline = p.leader == NO_LEADER;
        Weighed {
            under_min: topic_min_isr.is_some_and(|m| (isr_len as i32) < m),
            under_replicated: isr_len < replicas.len() - adding.len(),
            leader_outside: !offline && !in_isr(&p.leader),
            offline,
            adding,
        }
    }

    /// Adds the partition to its leader's and its replicas' counts.
    #[inline]
    fn tally(&self, p: &PartitionView, tallies: &mut IdTable<BrokerPartitions>) {
        if !self.offline {
            tallies.entry(p.leader).leader_of += 1;
        }
        for r in p.replicas.iter() {
            let b = tallies.entry(*r);
            b.replica_of += 1;
            if self.offline {
                b.replica_of_offline += 1;
            }
            if !p.isr.contains(r) && !self.adding.contains(r) {
                b.missing_from_isr += 1;
                if self.under_min {
                    b.causes_under_min_isr += 1;
                }
            }
        }
    }

    /// The partition as a problem with its conditions and suspects; none when it has none.
    #[inline]
    fn problem(
        self,
        topic: &str,
        p: &PartitionView,
        topic_min_isr: Option<i32>,
    ) -> Option<PartitionProblem> {
        if !(self.offline || self.under_min || self.under_replicated || self.leader_outside) {
            return None;
        }
        let conditions: Vec<Condition> = [
            (self.offline, Condition::Offline),
            (self.under_min, Condition::UnderMinIsr),
            (self.under_replicated, Condition::UnderReplicated),
            (self.leader_outside, Condition::LeaderNotInIsr),
        ]
        .into_iter()
        .filter_map(|(holds, c)| holds.then_some(c))
        .collect();
        Some(PartitionProblem {
            topic: topic.to_string(),
            partition: p.partition,
            conditions,
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            replicas: p.replicas.to_vec(),
            isr: p.isr.to_vec(),
            min_isr: topic_min_isr,
            suspects: self.suspects(p),
            adding: self.adding,
        })
    }

    /// The brokers to look at: every replica of an offline partition, else the replicas
    /// missing from the ISR (not those being added) and a leader outside it.
    fn suspects(&self, p: &PartitionView) -> Vec<BrokerId> {
        if self.offline {
            return p.replicas.to_vec();
        }
        let mut s: Vec<BrokerId> = p
            .replicas
            .iter()
            .copied()
            .filter(|r| !p.isr.contains(r) && !self.adding.contains(r))
            .collect();
        if self.leader_outside && !s.contains(&p.leader) {
            s.push(p.leader);
        }
        s
    }
}

/// The number of different ids in a short list (a broker listed twice in an ISR counts once).
#[inline]
fn distinct(ids: &[BrokerId]) -> usize {
    ids.iter()
        .enumerate()
        .filter(|(i, b)| !ids[..*i].contains(b))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::round::PartitionView;
    use crate::observe::cluster_view::ViewTopic;

    fn view(parts: &[(i32, &[i32], &[i32])]) -> ClusterView {
        let mut v = ClusterView::default();
        v.topics.insert(
            "t".into(),
            ViewTopic {
                is_internal: false,
                topic_id: 0,
                partitions: parts
                    .iter()
                    .enumerate()
                    .map(|(i, (leader, replicas, isr))| PartitionView {
                        partition: i as i32,
                        error_code: 0,
                        leader: *leader,
                        leader_epoch: 1,
                        replicas: (*replicas).into(),
                        isr: (*isr).into(),
                        offline_replicas: Default::default(),
                    })
                    .collect::<Vec<_>>()
                    .into(),
            },
        );
        v
    }

    fn min_isr(m: i32) -> BTreeMap<String, i32> {
        [("t".to_string(), m)].into_iter().collect()
    }

    #[test]
    fn incident_one_layout() {
        // Partition 0: leader 110, ISR shrunk to it. Partition 1: no leader at all.
        let v = view(&[(110, &[110, 50], &[110]), (NO_LEADER, &[50, 82], &[])]);
        let h = classify(&v, &min_isr(1), |_| true);
        assert_eq!(h.partitions, 2);
        assert_eq!(h.count(Condition::Offline), 1);
        assert_eq!(h.count(Condition::UnderReplicated), 2);
        assert_eq!(
            h.count(Condition::UnderMinIsr),
            1,
            "the offline one has 0 < 1"
        );
        assert_eq!(h.problems[0].suspects, vec![50]);
        assert_eq!(h.problems[1].suspects, vec![50, 82]);
        assert_eq!(h.brokers[&50].missing_from_isr, 2);
        assert_eq!(h.brokers[&50].replica_of_offline, 1);
        assert_eq!(h.brokers[&110].leader_of, 1);
        assert_eq!(h.brokers[&82].leader_of, 0);
    }

    #[test]
    fn incident_two_follower_out_of_isr_under_min_isr() {
        let v = view(&[
            (192, &[192, 193], &[192]),
            (192, &[192, 193], &[192]),
            (193, &[193, 192], &[193, 192]),
        ]);
        let h = classify(&v, &min_isr(2), |_| true);
        assert_eq!(h.count(Condition::UnderMinIsr), 2);
        assert_eq!(h.count(Condition::UnderReplicated), 2);
        assert_eq!(h.count(Condition::Offline), 0);
        assert_eq!(h.brokers[&193].causes_under_min_isr, 2);
        assert_eq!(h.brokers[&193].missing_from_isr, 2);
        assert_eq!(h.brokers[&192].missing_from_isr, 0);
        assert!(h.problems.iter().all(|p| p.suspects == vec![193]));
    }

    #[test]
    fn a_replica_being_added_is_not_under_replication() {
        // Partition 0 moves from [1, 2, 3] to [2, 3, 4]: 4 is being added and copying.
        // Partition 1: 4 is being added, and 3 fell out of the ISR on its own.
        let v = view(&[(1, &[1, 2, 3, 4], &[1, 2, 3]), (2, &[2, 3, 4], &[2])]);
        let followers: BTreeMap<BrokerId, FollowerProgress> = [(
            4,
            FollowerProgress {
                adding_to: Some(vec![("t".into(), 0), ("t".into(), 1)]),
                ..FollowerProgress::default()
            },
        )]
        .into_iter()
        .collect();
        let h = classify_reassigning(
            &v,
            &min_isr(1),
            Reassigning::from_followers(&followers),
            |_| true,
        );
        assert_eq!(h.count(Condition::UnderReplicated), 1);
        assert_eq!(h.problems.len(), 1);
        assert_eq!(h.problems[0].partition, 1);
        assert_eq!(h.problems[0].suspects, vec![3]);
        assert_eq!(h.problems[0].adding, vec![4]);
        assert_eq!(h.problems[0].settled_replicas(), vec![2, 3]);
        assert_eq!(h.brokers[&4].missing_from_isr, 0);
        assert_eq!(h.brokers[&4].replica_of, 2);
        assert_eq!(h.brokers[&3].missing_from_isr, 1);
        // Without the controller's list, both look under-replicated, as before.
        let h = classify(&v, &min_isr(1), |_| true);
        assert_eq!(h.count(Condition::UnderReplicated), 2);
        assert_eq!(h.brokers[&4].missing_from_isr, 2);
    }

    #[test]
    fn healthy_partitions_are_not_problems() {
        let v = view(&[(1, &[1, 2, 3], &[1, 2, 3]), (2, &[2, 3, 1], &[3, 2, 1])]);
        let h = classify(&v, &min_isr(2), |_| true);
        assert!(h.problems.is_empty());
        assert!(h.counts.values().all(|c| *c == 0));
        assert_eq!(h.brokers[&1].replica_of, 2);
    }

    #[test]
    fn unknown_min_isr_skips_only_that_check() {
        let v = view(&[(1, &[1, 2], &[1])]);
        let h = classify(&v, &BTreeMap::new(), |_| true);
        assert_eq!(h.problems[0].conditions, vec![Condition::UnderReplicated]);
    }

    #[test]
    fn leader_outside_isr_is_reported_and_suspected() {
        let v = view(&[(1, &[1, 2], &[2])]);
        let h = classify(&v, &min_isr(1), |_| true);
        assert_eq!(
            h.problems[0].conditions,
            vec![Condition::UnderReplicated, Condition::LeaderNotInIsr]
        );
        assert_eq!(h.problems[0].suspects, vec![1]);
    }

    #[test]
    fn excluded_topics_are_not_counted() {
        let v = view(&[(NO_LEADER, &[1], &[])]);
        let h = classify(&v, &min_isr(1), |t| t != "t");
        assert_eq!(h.partitions, 0);
        assert!(h.problems.is_empty());
    }
}
