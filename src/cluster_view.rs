//! One picture of the cluster from many brokers' answers. Every broker answers Metadata from
//! its own cache; a frozen or isolated broker's cache is stale. Per partition the answer with
//! the highest leader epoch wins (epochs only grow, so the newest election is the truth), and
//! among equal epochs the one most brokers agree on. Brokers that claim a leadership the
//! newest answer has taken away are the split brains of incident 3.

use std::borrow::Cow;
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

/// One broker's partitions of one topic, and whether it calls the topic internal.
type TopicAnswer<'a> = (BrokerId, &'a [PartitionView], bool);

/// Merges the Metadata answers of several brokers, keyed by the broker that answered.
///
/// Linear in the number of partition answers: topics are grouped by name once, and within a
/// topic every answer's partitions are read in partition order side by side (the decoder
/// sorts them), so a round of 200k partitions from a few brokers costs no per-partition map.
pub fn merge(answers: &[(BrokerId, &MetadataView)]) -> ClusterView {
    let mut view = ClusterView {
        has_leader_epochs: !answers.is_empty() && answers.iter().all(|(_, m)| m.has_leader_epochs),
        ..ClusterView::default()
    };
    // topic -> every broker's answer for it, in the order of `answers`.
    let mut by_topic: BTreeMap<&str, Vec<TopicAnswer>> = BTreeMap::new();
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
            if topic.error_code != 0 || topic.partitions.is_empty() {
                continue;
            }
            by_topic.entry(name.as_str()).or_default().push((
                *source,
                &topic.partitions,
                topic.is_internal,
            ));
        }
    }
    for (topic, sources) in by_topic {
        let is_internal = sources.iter().any(|(_, _, internal)| *internal);
        // Nearly always every answer names the same leader, epoch and ISR for every
        // partition of a topic: then `choose` would take the lowest broker's answer, nothing
        // disagrees and nothing is stale, so one comparison per partition is all the work.
        let lowest = sources
            .iter()
            .min_by_key(|s| s.0)
            .map(|s| s.1)
            .expect("a topic has at least one answer");
        if lowest.is_sorted_by(|a, b| a.partition < b.partition)
            && sources.iter().all(|(_, parts, _)| {
                std::ptr::eq(*parts, lowest)
                    || (parts.len() == lowest.len()
                        && parts
                            .iter()
                            .zip(lowest)
                            .all(|(p, q)| p.partition == q.partition && same_claim(p, q)))
            })
        {
            view.topics.insert(
                topic.to_string(),
                ViewTopic {
                    is_internal,
                    partitions: lowest.to_vec(),
                },
            );
            continue;
        }
        let mut merged = ViewTopic {
            is_internal,
            partitions: Vec::with_capacity(sources.iter().map(|s| s.1.len()).max().unwrap_or(0)),
        };
        let sorted: Vec<Cow<[PartitionView]>> = sources
            .iter()
            .map(|(_, parts, _)| {
                if parts.is_sorted_by_key(|p| p.partition) {
                    Cow::Borrowed(*parts)
                } else {
                    let mut owned = parts.to_vec();
                    owned.sort_by_key(|p| p.partition);
                    Cow::Owned(owned)
                }
            })
            .collect();
        let mut cursors = vec![0usize; sources.len()];
        let mut candidates: Vec<(BrokerId, &PartitionView)> = Vec::with_capacity(sources.len());
        loop {
            // The lowest partition any answer has not consumed yet.
            let next = sorted
                .iter()
                .zip(&cursors)
                .filter_map(|(parts, &c)| parts.get(c).map(|p| p.partition))
                .min();
            let Some(partition) = next else { break };
            candidates.clear();
            for (i, parts) in sorted.iter().enumerate() {
                // A duplicated partition in one answer counts once.
                while let Some(p) = parts.get(cursors[i]).filter(|p| p.partition == partition) {
                    if candidates.last().is_none_or(|(s, _)| *s != sources[i].0) {
                        candidates.push((sources[i].0, p));
                    }
                    cursors[i] += 1;
                }
            }
            let chosen = choose(&candidates);
            judge_claims(&mut view, topic, chosen, &candidates);
            merged.partitions.push(chosen.clone());
        }
        view.topics.insert(topic.to_string(), merged);
    }
    view
}

/// Counts the answers that name another leader than the chosen one, and records the brokers
/// that still claim a leadership a newer epoch gave away.
fn judge_claims(
    view: &mut ClusterView,
    topic: &str,
    chosen: &PartitionView,
    answers: &[(BrokerId, &PartitionView)],
) {
    for (source, p) in answers {
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
                partition: chosen.partition,
                broker: *source,
                claimed_epoch: p.leader_epoch,
                current_leader: chosen.leader,
                current_epoch: chosen.leader_epoch,
            });
        }
    }
}

/// The answer to trust for one partition: highest leader epoch, then the most common
/// (leader, ISR), then the lowest answering broker id, so the choice is deterministic.
/// Nearly always every answer agrees, which is checked first; counting support is only
/// needed among disagreeing answers of the same epoch.
/// Two answers agree on what matters for choosing: leader, epoch and ISR. Compared element
/// by element: these lists hold a few ids, for which a memcmp call costs more than the
/// comparison.
fn same_claim(p: &PartitionView, q: &PartitionView) -> bool {
    p.leader == q.leader
        && p.leader_epoch == q.leader_epoch
        && p.isr.len() == q.isr.len()
        && p.isr.iter().zip(q.isr.iter()).all(|(a, b)| a == b)
}

fn choose<'a>(answers: &[(BrokerId, &'a PartitionView)]) -> &'a PartitionView {
    let (first_src, first) = answers[0];
    let same = |p: &PartitionView, q: &PartitionView| p.leader == q.leader && p.isr == q.isr;
    if answers
        .iter()
        .all(|(_, p)| p.leader_epoch == first.leader_epoch && same(p, first))
    {
        let lowest = answers
            .iter()
            .min_by_key(|(s, _)| *s)
            .map_or(first_src, |a| a.0);
        return answers
            .iter()
            .find(|(s, _)| *s == lowest)
            .map_or(first, |a| a.1);
    }
    let newest = answers
        .iter()
        .map(|(_, p)| p.leader_epoch)
        .max()
        .expect("a partition has at least one answer");
    let tied: Vec<(BrokerId, &PartitionView)> = answers
        .iter()
        .copied()
        .filter(|(_, p)| p.leader_epoch == newest)
        .collect();
    let support = |p: &PartitionView| answers.iter().filter(|(_, q)| same(q, p)).count();
    tied.iter()
        .map(|(src, p)| (support(p), *src, *p))
        .max_by(|(a_n, a_src, _), (b_n, b_src, _)| a_n.cmp(b_n).then_with(|| b_src.cmp(a_src)))
        .map(|(_, _, p)| p)
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
            replicas: replicas.into(),
            isr: isr.into(),
            offline_replicas: Default::default(),
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
            all_topics: true,
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
        assert_eq!(view.topics["t"].partitions[0].isr.as_slice(), [1, 2]);
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
    fn answers_in_any_partition_order_and_with_gaps_merge_by_partition() {
        let a = md(
            &[1, 2],
            vec![
                part(2, 1, 3, &[1, 2], &[1, 2]),
                part(0, 1, 3, &[1, 2], &[1, 2]),
            ],
        );
        let b = md(
            &[1, 2],
            vec![
                part(0, 2, 4, &[1, 2], &[2]),
                part(1, 2, 1, &[1, 2], &[2, 1]),
                part(1, 2, 1, &[1, 2], &[2, 1]),
            ],
        );
        let view = merge(&[(1, &a), (2, &b)]);
        let got: Vec<(i32, i32, i32)> = view.topics["t"]
            .partitions
            .iter()
            .map(|p| (p.partition, p.leader, p.leader_epoch))
            .collect();
        assert_eq!(got, vec![(0, 2, 4), (1, 2, 1), (2, 1, 3)]);
        assert_eq!(
            view.stale_leaders.len(),
            1,
            "broker 1 still claims partition 0"
        );
        assert_eq!(view.disagreements.get(&1), Some(&1));
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
