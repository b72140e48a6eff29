//! One picture of the cluster from many brokers' answers. Every broker answers Metadata from
//! its own cache; a frozen or isolated broker's cache is stale. Per partition the answer with
//! the highest leader epoch wins (epochs only grow, so the newest election is the truth), and
//! among equal epochs the one most brokers agree on. Brokers that claim a leadership the
//! newest answer has taken away are the split brains of incident 3.
//!
//! Partitions are keyed by topic name and, where the brokers send one (Metadata v10+), topic
//! id: a topic deleted and created again under its name starts its epochs over, and a broker
//! still describing the old one is not evidence about the new one.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::model::round::{
    BrokerEndpoint, BrokerId, IdSet, MetadataView, PartitionView, Partitions, TopicId, NO_LEADER,
    NO_TOPIC_ID,
};

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

/// Leadership changes one broker's own metadata has not caught up with: partitions whose
/// newest leader epoch its answer does not have yet, and topics others describe that its
/// answer about every topic lacks. Normally a broker applies a change within milliseconds
/// of the controller committing it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Behind {
    /// Partitions it is behind on.
    pub partitions: u32,
    /// Of those, the partitions the newest view gives it to lead: it does not know it
    /// leads them, so nobody serves them.
    pub own: u32,
    /// The first few, its own leaderships first: "t-0 (leader 2 at epoch 5; it knows
    /// epoch 4)".
    pub shown: Vec<String>,
    /// The topics concerned, for the prober to ask again.
    #[serde(skip)]
    pub topics: BTreeSet<String>,
}

impl Behind {
    const SHOWN: usize = 5;

    fn note(&mut self, topic: &str, own: bool, words: impl FnOnce() -> String) {
        self.partitions += 1;
        self.own += u32::from(own);
        if !self.topics.contains(topic) {
            self.topics.insert(topic.to_string());
        }
        if own {
            // Its own leaderships are what a reader needs first.
            let first_other = self.shown.len().min(self.own as usize - 1);
            self.shown.insert(first_other, words());
            self.shown.truncate(Self::SHOWN);
        } else if self.shown.len() < Self::SHOWN {
            self.shown.push(words());
        }
    }
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
    /// Per broker: leadership changes its own answer has not caught up with.
    pub behind: BTreeMap<BrokerId, Behind>,
    /// True when every source supports leader epochs (Metadata v7+).
    pub has_leader_epochs: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ViewTopic {
    pub is_internal: bool,
    /// The id the answers merged here name (`NO_TOPIC_ID` when none did).
    #[serde(skip)]
    pub topic_id: TopicId,
    /// The trusted answer's own list when every answer agrees on the topic (see `merge`).
    #[serde(serialize_with = "crate::model::round::serialize_partitions")]
    pub partitions: Partitions,
}

/// One broker's partitions of one topic, whether it calls the topic internal, and the topic's id.
type TopicAnswer<'a> = (BrokerId, &'a Partitions, bool, TopicId);

/// Merges the Metadata answers of several brokers, keyed by the broker that answered.
///
/// Linear in the number of partition answers: topics are grouped by name once, and within a
/// topic every answer's partitions are read in partition order side by side (the decoder
/// sorts them), so a round of 200k partitions from a few brokers costs no per-partition map.
pub fn merge(answers: &[(BrokerId, &MetadataView)]) -> ClusterView {
    walk(answers, true)
}

/// The stale leadership claims `merge` would find, without building the view: for the
/// prober, which asks a claiming broker again before the claim counts.
pub fn stale_claims(answers: &[(BrokerId, &MetadataView)]) -> Vec<StaleLeader> {
    walk(answers, false).stale_leaders
}

/// Per broker, the topics `merge` would find it claiming a stale leadership of or behind
/// on: the prober asks those again before they count, since probes run at once and a
/// broker that answered just before a change reached it is behind for that round only.
pub fn doubted_topics(
    answers: &[(BrokerId, &MetadataView)],
) -> BTreeMap<BrokerId, BTreeSet<String>> {
    let view = walk(answers, false);
    let mut out: BTreeMap<BrokerId, BTreeSet<String>> = BTreeMap::new();
    for claim in view.stale_leaders {
        out.entry(claim.broker).or_default().insert(claim.topic);
    }
    for (broker, behind) in view.behind {
        out.entry(broker).or_default().extend(behind.topics);
    }
    out
}

/// `merge`; with `build` false only the claims and disagreements are worked out.
fn walk(answers: &[(BrokerId, &MetadataView)], build: bool) -> ClusterView {
    let mut view = seeded(answers);
    // The answers' topics, walked side by side in name order (each answer's map is sorted),
    // so each topic's answers are gathered, in the order of `answers`, without a map.
    let mut walks: Vec<_> = answers
        .iter()
        .map(|(source, md)| (*source, md.topics.iter().peekable()))
        .filter(|(_, topics)| topics.len() > 0)
        .collect();
    let mut sources: Vec<TopicAnswer> = Vec::new();
    // The answers about every topic: a topic one of them lacks is one its broker does not
    // know (at scale only a few brokers are asked for every topic).
    let full: Vec<BrokerId> = answers
        .iter()
        .filter(|(_, md)| md.all_topics)
        .map(|(source, _)| *source)
        .collect();
    loop {
        walks.retain_mut(|(_, topics)| topics.peek().is_some());
        let Some(topic) = walks
            .iter_mut()
            .filter_map(|(_, topics)| topics.peek().map(|&(name, _)| name.as_str()))
            .min()
        else {
            break;
        };
        sources.clear();
        for (source, topics) in &mut walks {
            let Some((_, t)) = topics.next_if(|&(name, _)| name == topic) else {
                continue;
            };
            // A topic-level error (being deleted, unknown) carries no partition truth.
            if t.error_code != 0 || t.partitions.is_empty() {
                continue;
            }
            sources.push((*source, &t.partitions, t.is_internal, t.topic_id));
        }
        if sources.is_empty() {
            continue;
        }
        let topic_id = one_topic_id(&mut sources);
        // Answers about every topic that do not describe this one: their broker has not
        // learned of it (a topic created since it last applied metadata).
        let unaware: Vec<BrokerId> = full
            .iter()
            .copied()
            .filter(|f| !sources.iter().any(|s| s.0 == *f))
            .collect();
        let is_internal = sources.iter().any(|s| s.2);
        let partitions = match agreed(&sources) {
            Some(lowest) => {
                for broker in &unaware {
                    for p in lowest.iter() {
                        note_unaware(&mut view, *broker, topic, p);
                    }
                }
                build.then(|| Partitions::clone(lowest))
            }
            None => merge_partitions(&mut view, topic, &sources, &unaware, build),
        };
        if let Some(partitions) = partitions {
            view.topics.insert(
                topic.to_string(),
                ViewTopic {
                    is_internal,
                    topic_id,
                    partitions,
                },
            );
        }
    }
    view
}

/// The view's brokers, sources and cluster id, before any topic.
fn seeded(answers: &[(BrokerId, &MetadataView)]) -> ClusterView {
    let mut view = ClusterView {
        has_leader_epochs: !answers.is_empty() && answers.iter().all(|(_, m)| m.has_leader_epochs),
        ..ClusterView::default()
    };
    // Every broker lists (nearly) every broker: a set of the ids seen keeps a map lookup
    // per listing of a thousand brokers by a thousand answers off this path.
    let mut listed = IdSet::default();
    for (source, md) in answers {
        view.sources.insert(*source);
        if view.cluster_id.is_none() {
            view.cluster_id.clone_from(&md.cluster_id);
        }
        for b in &md.brokers {
            if listed.insert(b.id) {
                view.brokers.insert(b.id, b.clone());
            }
        }
    }
    view
}

/// The lowest broker's partitions of a topic when every answer names the same leader,
/// epoch and ISR for every partition, as nearly always: then `choose` would take them,
/// nothing disagrees and nothing is stale, so one comparison per partition is all the work.
fn agreed<'a>(sources: &[TopicAnswer<'a>]) -> Option<&'a Partitions> {
    let lowest = sources.iter().min_by_key(|s| s.0).map(|s| s.1)?;
    let all_same = lowest.is_sorted_by(|a, b| a.partition < b.partition)
        && sources.iter().all(|(_, parts, _, _)| {
            Partitions::ptr_eq(parts, lowest)
                || (parts.len() == lowest.len()
                    && parts
                        .iter()
                        .zip(lowest.iter())
                        .all(|(p, q)| p.partition == q.partition && same_claim(p, q)))
        });
    all_same.then_some(lowest)
}

/// A topic whose answers disagree, partition by partition in order: the answer `choose`
/// trusts, the stale claims and the brokers behind; the merged partitions when `build`.
fn merge_partitions(
    view: &mut ClusterView,
    topic: &str,
    sources: &[TopicAnswer],
    unaware: &[BrokerId],
    build: bool,
) -> Option<Partitions> {
    let mut merged: Vec<PartitionView> = Vec::with_capacity(if build {
        sources.iter().map(|s| s.1.len()).max().unwrap_or(0)
    } else {
        0
    });
    let sorted: Vec<Cow<[PartitionView]>> = sources
        .iter()
        .map(|(_, parts, _, _)| {
            if parts.is_sorted_by_key(|p| p.partition) {
                Cow::Borrowed(&parts[..])
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
        judge_claims(view, topic, chosen, &candidates);
        for broker in unaware {
            note_unaware(view, *broker, topic, chosen);
        }
        if build {
            merged.push(chosen.clone());
        }
    }
    build.then(|| merged.into())
}

/// Keeps the answers about one topic id under a name and returns that id. Answers about
/// different ids are about different topics: the name was deleted and created again, and a
/// broker that has not caught up still describes the old topic, whose leader epochs say
/// nothing about the new one's (they start over). Ids carry no order, so the id most answers
/// name is kept, on a tie the one of the lowest answering broker. Answers without an id
/// (Metadata below v10) cannot tell and stay. One comparison per answer when all agree.
fn one_topic_id(sources: &mut Vec<TopicAnswer>) -> TopicId {
    let mut ids = sources.iter().map(|s| s.3).filter(|id| *id != NO_TOPIC_ID);
    let Some(first) = ids.next() else {
        return NO_TOPIC_ID;
    };
    if ids.all(|id| id == first) {
        return first;
    }
    let support = |id: TopicId| {
        let named: Vec<BrokerId> = sources.iter().filter(|s| s.3 == id).map(|s| s.0).collect();
        (named.len(), std::cmp::Reverse(named.into_iter().min()))
    };
    let chosen = sources
        .iter()
        .map(|s| s.3)
        .filter(|id| *id != NO_TOPIC_ID)
        .max_by_key(|id| support(*id))
        .unwrap_or(first);
    sources.retain(|s| s.3 == chosen || s.3 == NO_TOPIC_ID);
    chosen
}

/// A partition of a topic `broker`'s answer about every topic does not describe.
fn note_unaware(view: &mut ClusterView, broker: BrokerId, topic: &str, chosen: &PartitionView) {
    let own = chosen.leader == broker;
    view.behind.entry(broker).or_default().note(topic, own, || {
        format!(
            "{topic}-{} (leader {} at epoch {}; it does not know the topic)",
            chosen.partition, chosen.leader, chosen.leader_epoch
        )
    });
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
        if view.has_leader_epochs && p.leader_epoch < chosen.leader_epoch {
            let own = chosen.leader == *source;
            view.behind
                .entry(*source)
                .or_default()
                .note(topic, own, || {
                    format!(
                        "{topic}-{} (leader {} at epoch {}; it knows epoch {})",
                        chosen.partition, chosen.leader, chosen.leader_epoch, p.leader_epoch
                    )
                });
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
    use crate::model::round::TopicView;

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
                topic_id: 7,
                error_code: 0,
                is_internal: false,
                partitions: parts.into(),
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

    /// A broker that stopped applying metadata: its answer keeps an older epoch of a
    /// partition whose leadership moved onto it, and does not know a topic created since.
    /// A broker asked about some topics only is never behind on the others.
    #[test]
    fn a_broker_behind_the_quorum_is_named_with_the_leaderships_it_missed() {
        let old = md(&[1, 2, 3], vec![part(0, 1, 4, &[1, 2, 3], &[1, 2, 3])]);
        let new = md(&[1, 2, 3], vec![part(0, 2, 5, &[1, 2, 3], &[1, 2, 3])]);
        let mut fresh = new.clone();
        fresh.topics.insert(
            "u".into(),
            TopicView {
                name: "u".into(),
                topic_id: 8,
                error_code: 0,
                is_internal: false,
                partitions: vec![
                    part(0, 2, 0, &[2, 1, 3], &[2, 1, 3]),
                    part(1, 3, 0, &[3, 1, 2], &[3, 1, 2]),
                ]
                .into(),
            },
        );
        let mut thin = old.clone();
        thin.topics.clear();
        thin.all_topics = false;
        let view = merge(&[(1, &fresh), (2, &old), (3, &fresh), (4, &thin)]);
        let b = &view.behind[&2];
        assert_eq!((b.partitions, b.own), (3, 2));
        assert_eq!(
            b.shown,
            [
                "t-0 (leader 2 at epoch 5; it knows epoch 4)",
                "u-0 (leader 2 at epoch 0; it does not know the topic)",
                "u-1 (leader 3 at epoch 0; it does not know the topic)",
            ]
        );
        assert_eq!(b.topics, ["t".to_string(), "u".to_string()].into());
        assert!(!view.behind.contains_key(&1));
        assert!(
            !view.behind.contains_key(&4),
            "a scoped answer is not behind"
        );
        let doubted = doubted_topics(&[(1, &fresh), (2, &old), (3, &fresh)]);
        assert_eq!(doubted.keys().copied().collect::<Vec<_>>(), [2]);
        // Every answer agreeing: nobody is behind.
        assert!(merge(&[(1, &new), (2, &new)]).behind.is_empty());
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

    fn with_id(mut m: MetadataView, id: TopicId) -> MetadataView {
        m.topics.get_mut("t").unwrap().topic_id = id;
        m
    }

    /// Deleted and created again: the old topic's leader epoch 3 says nothing about the new
    /// topic, whose epochs start at 0. A broker still describing the old one (another id)
    /// makes neither a stale leader nor a disagreement.
    #[test]
    fn a_recreated_topic_is_not_judged_by_the_old_topics_epochs() {
        let old = with_id(md(&[1, 2, 3], vec![part(0, 1, 3, &[1, 2], &[1, 2])]), 7);
        let new = with_id(md(&[1, 2], vec![part(0, 2, 0, &[2, 1], &[2, 1])]), 8);
        let view = merge(&[(1, &new), (2, &new), (3, &old)]);
        let t = &view.topics["t"];
        assert_eq!(t.topic_id, 8, "the id most answers name");
        assert_eq!(
            (t.partitions[0].leader, t.partitions[0].leader_epoch),
            (2, 0)
        );
        assert!(view.stale_leaders.is_empty(), "{:?}", view.stale_leaders);
        assert!(view.disagreements.is_empty(), "{:?}", view.disagreements);
        assert!(stale_claims(&[(1, &new), (2, &new), (3, &old)]).is_empty());
        // Within one id the epochs still decide.
        let older = with_id(md(&[1, 2], vec![part(0, 2, 2, &[2, 1], &[2, 1])]), 7);
        let view = merge(&[(1, &new), (2, &older), (3, &old)]);
        assert_eq!(view.topics["t"].topic_id, 7);
        assert_eq!(view.stale_leaders.len(), 1);
        assert_eq!(view.stale_leaders[0].broker, 2);
    }

    #[test]
    fn a_tie_of_topic_ids_keeps_the_lowest_brokers_and_answers_without_id_stay() {
        let a = with_id(md(&[1, 2], vec![part(0, 1, 5, &[1, 2], &[1, 2])]), 7);
        let b = with_id(md(&[1, 2], vec![part(0, 2, 0, &[2, 1], &[2, 1])]), 8);
        let none = with_id(
            md(&[1, 2], vec![part(0, 2, 0, &[2, 1], &[2, 1])]),
            NO_TOPIC_ID,
        );
        let view = merge(&[(2, &a), (1, &b), (3, &none)]);
        assert_eq!(view.topics["t"].topic_id, 8);
        assert!(view.stale_leaders.is_empty());
        let view = merge(&[(1, &a), (2, &b)]);
        assert_eq!(view.topics["t"].topic_id, 7);
        assert!(view.stale_leaders.is_empty());
    }

    #[test]
    fn stale_claims_are_the_merges_stale_leaders() {
        let stale = md(&[1, 2, 3], vec![part(0, 1, 4, &[1, 2, 3], &[1, 2, 3])]);
        let fresh = md(&[2, 3], vec![part(0, 2, 5, &[1, 2, 3], &[2, 3])]);
        let answers = [(1, &stale), (2, &fresh), (3, &fresh)];
        assert_eq!(stale_claims(&answers), merge(&answers).stale_leaders);
        assert_eq!(stale_claims(&answers).len(), 1);
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
