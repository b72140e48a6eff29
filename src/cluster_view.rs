//! One picture of the cluster from many brokers' answers. Every broker answers Metadata from
//! its own cache; a frozen or isolated broker's cache is stale. Per partition the answer with
//! the highest leader epoch wins (epochs only grow, so the newest election is the truth), and
//! among equal epochs the one most brokers agree on. Brokers that claim a leadership the
//! newest answer has taken away are the split brains of incident 3.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::observe::{BrokerEndpoint, BrokerId, MetadataView, PartitionView, NO_LEADER};

/// A partition's identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PartitionId {
    pub topic: String,
    pub partition: i32,
}

/// A broker that claims to lead a partition whose newest known leader epoch says otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StaleLeader {
    pub topic: String,
    pub partition: i32,
    /// The broker that still believes it leads.
    pub broker: BrokerId,
    pub claimed_epoch: i32,
    /// The leader (or -1) and epoch of the newest answer.
    pub current_leader: BrokerId,
    pub current_epoch: i32,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ClusterView {
    pub cluster_id: Option<String>,
    /// Brokers any answering broker lists as registered (KRaft: unfenced).
    pub brokers: BTreeMap<BrokerId, BrokerEndpoint>,
    pub topics: BTreeMap<String, ViewTopic>,
    /// Brokers whose Metadata answer went into this view.
    pub sources: BTreeSet<BrokerId>,
    pub stale_leaders: Vec<StaleLeader>,
    /// Per broker: partitions where its answer names a different leader than the view.
    pub disagreements: BTreeMap<BrokerId, u32>,
    /// True when every source supports leader epochs (Metadata v7+).
    pub has_leader_epochs: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ViewTopic {
    pub is_internal: bool,
    pub partitions: Vec<PartitionView>,
}

impl ClusterView {
    pub fn partition_count(&self) -> usize {
        self.topics.values().map(|t| t.partitions.len()).sum()
    }
}

/// Merges the Metadata answers of several brokers, keyed by the broker that answered.
pub fn merge(answers: &[(BrokerId, &MetadataView)]) -> ClusterView {
    let mut view = ClusterView {
        has_leader_epochs: !answers.is_empty() && answers.iter().all(|(_, m)| m.has_leader_epochs),
        ..ClusterView::default()
    };
    // (topic, partition) -> every broker's answer for it.
    let mut candidates: BTreeMap<(&str, i32), Vec<(BrokerId, &PartitionView)>> = BTreeMap::new();
    for (source, md) in answers {
        view.sources.insert(*source);
        if view.cluster_id.is_none() {
            view.cluster_id.clone_from(&md.cluster_id);
        }
        for b in &md.brokers {
            view.brokers.entry(b.id).or_insert_with(|| b.clone());
        }
        for (name, topic) in &md.topics {
            // A topic-level error (being deleted, unknown) carries no partition truth.
            if topic.error_code != 0 {
                continue;
            }
            let t = view.topics.entry(name.clone()).or_default();
            t.is_internal |= topic.is_internal;
            for p in &topic.partitions {
                candidates
                    .entry((name.as_str(), p.partition))
                    .or_default()
                    .push((*source, p));
            }
        }
    }
    for ((topic, partition), answers) in candidates {
        let chosen = choose(&answers).clone();
        for (source, p) in &answers {
            if p.leader != chosen.leader {
                *view.disagreements.entry(*source).or_insert(0) += 1;
            }
            let claims_leadership = p.leader == *source;
            if claims_leadership
                && chosen.leader != *source
                && (chosen.leader_epoch > p.leader_epoch || !view.has_leader_epochs)
            {
                view.stale_leaders.push(StaleLeader {
                    topic: topic.to_string(),
                    partition,
                    broker: *source,
                    claimed_epoch: p.leader_epoch,
                    current_leader: chosen.leader,
                    current_epoch: chosen.leader_epoch,
                });
            }
        }
        if let Some(t) = view.topics.get_mut(topic) {
            t.partitions.push(chosen);
        }
    }
    view.topics.retain(|_, t| !t.partitions.is_empty());
    view
}

/// The answer to trust for one partition: highest leader epoch, then the most common
/// (leader, ISR), then the lowest answering broker id, so the choice is deterministic.
fn choose<'a>(answers: &[(BrokerId, &'a PartitionView)]) -> &'a PartitionView {
    let support = |p: &PartitionView| {
        answers
            .iter()
            .filter(|(_, q)| q.leader == p.leader && q.isr == p.isr)
            .count()
    };
    answers
        .iter()
        .max_by(|(a_src, a), (b_src, b)| {
            a.leader_epoch
                .cmp(&b.leader_epoch)
                .then_with(|| support(a).cmp(&support(b)))
                .then_with(|| b_src.cmp(a_src))
        })
        .map(|(_, p)| *p)
        .expect("a partition has at least one answer")
}

/// True when the partition has no leader.
pub fn is_offline(p: &PartitionView) -> bool {
    p.leader == NO_LEADER
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::TopicView;

    fn part(
        partition: i32,
        leader: i32,
        epoch: i32,
        replicas: &[i32],
        isr: &[i32],
    ) -> PartitionView {
        PartitionView {
            partition,
            error_code: if leader == NO_LEADER { 5 } else { 0 },
            leader,
            leader_epoch: epoch,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            offline_replicas: Vec::new(),
        }
    }

    fn md(brokers: &[i32], parts: Vec<PartitionView>) -> MetadataView {
        let mut topics = BTreeMap::new();
        topics.insert(
            "t".to_string(),
            TopicView {
                name: "t".into(),
                error_code: 0,
                is_internal: false,
                partitions: parts,
            },
        );
        MetadataView {
            cluster_id: Some("c".into()),
            controller_id: None,
            brokers: brokers
                .iter()
                .map(|id| BrokerEndpoint {
                    id: *id,
                    host: format!("127.0.0.1{id}"),
                    port: 9092,
                    rack: None,
                })
                .collect(),
            topics,
            has_leader_epochs: true,
            has_offline_replicas: true,
            version: 12,
        }
    }

    #[test]
    fn newest_epoch_wins_and_the_old_leader_is_stale() {
        let stale = md(&[1, 2, 3], vec![part(0, 1, 4, &[1, 2, 3], &[1, 2, 3])]);
        let fresh = md(&[2, 3], vec![part(0, 2, 5, &[1, 2, 3], &[2, 3])]);
        let view = merge(&[(1, &stale), (2, &fresh), (3, &fresh)]);
        let p = &view.topics["t"].partitions[0];
        assert_eq!((p.leader, p.leader_epoch), (2, 5));
        assert_eq!(
            view.stale_leaders,
            vec![StaleLeader {
                topic: "t".into(),
                partition: 0,
                broker: 1,
                claimed_epoch: 4,
                current_leader: 2,
                current_epoch: 5
            }]
        );
        assert_eq!(view.disagreements.get(&1), Some(&1));
        assert_eq!(view.disagreements.get(&2), None);
        assert_eq!(view.brokers.len(), 3, "union of registered brokers");
    }

    #[test]
    fn a_stale_view_even_in_majority_loses_to_a_newer_epoch() {
        let stale = md(&[1, 2, 3], vec![part(0, 1, 4, &[1, 2, 3], &[1, 2, 3])]);
        let fresh = md(&[2, 3], vec![part(0, 2, 5, &[1, 2, 3], &[2, 3])]);
        let view = merge(&[(1, &stale), (3, &stale), (2, &fresh)]);
        assert_eq!(view.topics["t"].partitions[0].leader, 2);
    }

    #[test]
    fn equal_epochs_take_the_majority_isr() {
        let a = md(&[1, 2, 3], vec![part(0, 1, 4, &[1, 2, 3], &[1, 2, 3])]);
        let b = md(&[1, 2, 3], vec![part(0, 1, 4, &[1, 2, 3], &[1, 2])]);
        let view = merge(&[(1, &b), (2, &b), (3, &a)]);
        assert_eq!(view.topics["t"].partitions[0].isr, vec![1, 2]);
        assert!(view.stale_leaders.is_empty());
    }

    #[test]
    fn a_leader_claim_against_an_offline_partition_is_stale() {
        let stale = md(&[1], vec![part(0, 1, 4, &[1, 2], &[1, 2])]);
        let fresh = md(&[3], vec![part(0, NO_LEADER, 5, &[1, 2], &[2])]);
        let view = merge(&[(1, &stale), (3, &fresh)]);
        assert!(is_offline(&view.topics["t"].partitions[0]));
        assert_eq!(view.stale_leaders.len(), 1);
        assert_eq!(view.stale_leaders[0].broker, 1);
    }

    #[test]
    fn no_answers_make_an_empty_view() {
        let view = merge(&[]);
        assert!(view.topics.is_empty());
        assert!(!view.has_leader_epochs);
    }

    #[test]
    fn topics_with_errors_are_skipped() {
        let mut m = md(&[1], vec![part(0, 1, 1, &[1], &[1])]);
        m.topics.get_mut("t").unwrap().error_code = 3;
        let view = merge(&[(1, &m)]);
        assert!(view.topics.is_empty());
    }
}
