//! Unclean elections: a partition whose new leader was not in the ISR the round before, found
//! by comparing each round's partitions with what the last round saw of them.

use serde::Serialize;

use crate::model::round::{BrokerId, BrokerList, EligibleLeaders, TopicId, NO_TOPIC_ID};

/// A partition whose new leader was not in the ISR the round before: it was elected
/// uncleanly, and writes acknowledged by the old ISR may be gone (incident 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UncleanElection {
    pub topic: String,
    pub partition: i32,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub previous_leader: BrokerId,
    pub previous_isr: Vec<BrokerId>,
}

/// What the last round saw of every partition: per topic, its id and, indexed by partition
/// number, the leader, epoch and ISR (None for a number the topic did not list); and the
/// eligible leader replicas the last round read (few partitions have any).
#[derive(Debug, Default)]
pub(super) struct PartitionMemory {
    pub(super) topics: std::collections::HashMap<String, (TopicId, Vec<Option<Remembered>>)>,
    pub(super) elr: EligibleLeaders,
}

#[derive(Debug, Clone)]
pub(super) struct Remembered {
    pub(super) leader: BrokerId,
    pub(super) leader_epoch: i32,
    pub(super) isr: BrokerList,
}

impl PartitionMemory {
    pub(super) fn new() -> Self {
        PartitionMemory::default()
    }
}

/// Compares this round's partitions with the last round's and remembers them. Topics are
/// looked up once each and partitions by index, and a known topic's table is updated in
/// place, so a round of 200k partitions allocates nearly nothing here.
///
/// `allows_unclean` says whether a topic's `unclean.leader.election.enable` is known to be
/// true; `elr` is this round's eligible leader replicas, remembered for the next round.
pub(super) fn unclean_elections(
    view: &crate::observe::cluster_view::ClusterView,
    memory: &mut PartitionMemory,
    allows_unclean: impl Fn(&str) -> bool,
    elr: &EligibleLeaders,
) -> Vec<UncleanElection> {
    let mut found = Vec::new();
    let previous_elr = std::mem::replace(&mut memory.elr, elr.clone());
    let remembered = memory.topics.len();
    let mut known = 0;
    let mut seen: Vec<bool> = Vec::new();
    for (topic, t) in &view.topics {
        let (known_id, table) = match memory.topics.get_mut(topic.as_str()) {
            Some(entry) => {
                known += 1;
                entry
            }
            None => memory.topics.entry(topic.clone()).or_default(),
        };
        // Deleted and created again under the name: the old topic's partitions say nothing
        // about the new one's leaders.
        if t.topic_id != NO_TOPIC_ID && t.topic_id != *known_id {
            if *known_id != NO_TOPIC_ID {
                table.fill(None);
            }
            *known_id = t.topic_id;
        }
        // A leader that was not in the ISR the last round saw rejoined it between the rounds
        // unless the topic allows unclean elections: a clean election the rounds were too far
        // apart to see (a rolling restart does this). Kafka's default is false, so a topic
        // whose setting could not be read (DescribeConfigs failed) counts as clean.
        let possible = allows_unclean(topic);
        let topic_elr = previous_elr.get(topic.as_str());
        seen.clear();
        seen.resize(table.len(), false);
        // A new topic's table is sized once, not grown a partition at a time.
        table.reserve(t.partitions.len().saturating_sub(table.len()));
        for p in t.partitions.iter() {
            let Ok(i) = usize::try_from(p.partition) else {
                continue;
            };
            if i >= table.len() {
                table.resize(i + 1, None);
            }
            // Compared and updated in place: nearly every partition is as it was.
            match &mut table[i] {
                Some(prev) => {
                    let newer = !view.has_leader_epochs || p.leader_epoch > prev.leader_epoch;
                    // A leader from the eligible leader replicas (KIP-966: replicas that left
                    // the ISR while it was below min.insync.replicas, with the whole committed
                    // log) is a clean election.
                    let eligible = || {
                        topic_elr
                            .and_then(|e| e.get(&p.partition))
                            .is_some_and(|e| e.contains(&p.leader))
                    };
                    if possible
                        && p.leader >= 0
                        && p.leader != prev.leader
                        && newer
                        && !prev.isr.is_empty()
                        && !prev.isr.contains(&p.leader)
                        && !eligible()
                    {
                        found.push(UncleanElection {
                            topic: topic.clone(),
                            partition: p.partition,
                            leader: p.leader,
                            leader_epoch: p.leader_epoch,
                            previous_leader: prev.leader,
                            previous_isr: prev.isr.to_vec(),
                        });
                    }
                    prev.leader = p.leader;
                    prev.leader_epoch = p.leader_epoch;
                    // Element by element: for a few ids a memcmp call costs more.
                    if prev.isr.len() != p.isr.len()
                        || prev.isr.iter().zip(p.isr.iter()).any(|(a, b)| a != b)
                    {
                        prev.isr = BrokerList::from_slice(&p.isr);
                    }
                }
                slot @ None => {
                    *slot = Some(Remembered {
                        leader: p.leader,
                        leader_epoch: p.leader_epoch,
                        isr: BrokerList::from_slice(&p.isr),
                    });
                }
            }
            if let Some(s) = seen.get_mut(i) {
                *s = true;
            }
        }
        // A partition the topic no longer lists is forgotten, as before.
        for (slot, seen) in table.iter_mut().zip(&seen) {
            if !seen {
                *slot = None;
            }
        }
    }
    // Topics the view no longer has are forgotten; when every remembered topic was seen
    // again (nearly every round) there is none to look for.
    if known < remembered {
        memory
            .topics
            .retain(|name, _| view.topics.contains_key(name));
    }
    found
}
