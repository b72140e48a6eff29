//! Follower progress: for brokers missing from some ISR, their log end offsets read against
//! their leaders', so the verdict can tell a follower catching up from one that is stuck,
//! and the partitions a reassignment is adding them to, carried across a listing race.

use std::collections::{BTreeMap, BTreeSet};

use futures::future::join_all;

use crate::model::round::{BrokerId, BrokerProbe, FollowerProgress, MetadataView, ReplicaOffsets};
use crate::observe::wire::{
    kafka_error_name, BrokerClient, LatestOffset, OngoingReassignment, WireError, WireOptions,
};

/// At most this many partitions of one broker are measured a round: growth on any of them
/// is evidence enough, and the request stays small on a broker with many replicas.
const MEASURED_PARTITIONS: usize = 1000;

/// The brokers a catch-up measurement is for, from one answer about every topic: those
/// missing from some ISR, each with the partitions whose ISR lacks it and their leaders.
/// Looser than the verdict's "out of every ISR, leading none", which counts only the topics
/// the filter admits (a broker may lead a topic the filter leaves out), so whatever the
/// verdict calls out of every ISR has been measured. Few brokers miss ISRs on a healthy
/// cluster, and those that do not answer are not asked.
pub(super) fn catch_up_candidates(
    m: &MetadataView,
) -> BTreeMap<BrokerId, Vec<(String, i32, BrokerId)>> {
    let mut missing: BTreeMap<BrokerId, Vec<(String, i32, BrokerId)>> = BTreeMap::new();
    for t in m.topics.values() {
        for p in t.partitions.iter() {
            for r in p.replicas.iter().filter(|r| !p.isr.contains(r)) {
                let list = missing.entry(*r).or_default();
                if list.len() < MEASURED_PARTITIONS {
                    list.push((t.name.clone(), p.partition, p.leader));
                }
            }
        }
    }
    missing
}

/// One broker's latest offsets, or why not, over a connection of its own.
async fn latest_offsets(
    address: String,
    wire: &WireOptions,
    partitions: Vec<(String, i32)>,
    own_replicas: bool,
) -> Result<Vec<LatestOffset>, WireError> {
    let mut c = BrokerClient::connect(&address, wire).await?;
    Ok(c.client
        .latest_offsets(&partitions, own_replicas)
        .await?
        .value)
}

/// "3 partition(s): NOT_LEADER_OR_FOLLOWER" for the partitions a broker answered with an error.
fn error_counts(answers: &[LatestOffset]) -> Vec<String> {
    let mut counts: BTreeMap<i16, usize> = BTreeMap::new();
    for (_, _, code, _) in answers.iter().filter(|a| a.2 != 0) {
        *counts.entry(*code).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(code, n)| format!("{n} partition(s): {}", kafka_error_name(code)))
        .collect()
}

/// Measures the answering brokers that are missing from ISRs: their own log end
/// offsets (ListOffsets with the debugging replica id, one request each), their leaders' high
/// watermarks (one consumer ListOffsets per leader), the ongoing reassignments (one
/// ListPartitionReassignments) and their topics' replication throttles (DescribeConfigs,
/// read fresh: a throttle is set for a move and removed after it). Chosen over DescribeLogDirs because offsets compare exactly
/// with the leader's (sizes drift with retention and compaction) and because ListOffsets needs
/// only Describe on the topics, which the watchdog already has; nothing is asked while no
/// broker is a candidate, which is every round of a healthy cluster.
pub(super) async fn measure_followers(
    probes: &BTreeMap<BrokerId, BrokerProbe>,
    wire: &WireOptions,
) -> BTreeMap<BrokerId, FollowerProgress> {
    let Some((source, view)) = probes
        .iter()
        .find_map(|(id, p)| p.metadata_view().filter(|m| m.all_topics).map(|m| (*id, m)))
    else {
        return BTreeMap::new();
    };
    let answered = |id: &BrokerId| probes.get(id).is_some_and(BrokerProbe::answered);
    let candidates: Candidates = catch_up_candidates(view)
        .into_iter()
        .filter(|(id, _)| answered(id))
        .collect();
    if candidates.is_empty() {
        return BTreeMap::new();
    }
    let address = |id: BrokerId| probes.get(&id).map(|p| p.endpoint.address());
    let own = join_all(candidates.iter().map(|(id, list)| {
        let partitions = list.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
        latest_offsets(address(*id).unwrap_or_default(), wire, partitions, true)
    }));
    let source = address(source).unwrap_or_default();
    let (own, leaders, reassignments, throttles) = futures::join!(
        own,
        leader_watermarks(probes, wire, &candidates),
        listed_reassignments(&source, wire, &candidates),
        topic_throttles(&source, wire, &candidates),
    );
    let around = Around {
        leaders,
        reassignments,
        throttles,
    };
    candidates
        .iter()
        .zip(own)
        .map(|((id, list), answer)| (*id, around.progress_of(*id, list, answer)))
        .collect()
}

/// Per broker missing from some ISR: the partitions it misses, each with its leader.
type Candidates = BTreeMap<BrokerId, Vec<(String, i32, BrokerId)>>;

/// The leaders' high watermarks of the candidates' partitions, and per leader why it gave
/// none.
#[derive(Default)]
struct Watermarks {
    high: BTreeMap<(String, i32), i64>,
    errors: BTreeMap<BrokerId, String>,
}

/// One consumer ListOffsets per leader of a candidate partition; a leader that did not
/// answer its probe would only cost another timeout, and is not asked.
async fn leader_watermarks(
    probes: &BTreeMap<BrokerId, BrokerProbe>,
    wire: &WireOptions,
    candidates: &Candidates,
) -> Watermarks {
    let mut by_leader: BTreeMap<BrokerId, BTreeSet<(String, i32)>> = BTreeMap::new();
    for (t, p, leader) in candidates.values().flatten().filter(|(_, _, l)| *l >= 0) {
        by_leader
            .entry(*leader)
            .or_default()
            .insert((t.clone(), *p));
    }
    let (asked, silent): (Vec<_>, Vec<_>) = by_leader
        .into_iter()
        .partition(|(l, _)| probes.get(l).is_some_and(BrokerProbe::answered));
    let answers = join_all(asked.into_iter().filter_map(|(leader, set)| {
        let a = probes.get(&leader)?.endpoint.address();
        let fut = latest_offsets(a, wire, set.into_iter().collect(), false);
        Some(async move { (leader, fut.await) })
    }))
    .await;
    let mut w = Watermarks::default();
    for (leader, answer) in answers {
        match answer {
            Ok(list) => {
                for (t, p, code, offset) in list {
                    if code == 0 && offset >= 0 {
                        w.high.insert((t, p), offset);
                    }
                }
            }
            Err(e) => {
                w.errors.insert(leader, format!("leader {leader}: {e}"));
            }
        }
    }
    for (leader, _) in silent {
        w.errors
            .insert(leader, format!("leader {leader} did not answer this round"));
    }
    w
}

/// Per broker the partitions the ongoing reassignments are adding it to, with the
/// source's metadata of the candidates' other topics read again after the listing.
type Listing = (BTreeMap<BrokerId, Vec<(String, i32)>>, Option<MetadataView>);

async fn listed_reassignments(
    source: &str,
    wire: &WireOptions,
    candidates: &Candidates,
) -> Result<Listing, WireError> {
    let mut c = BrokerClient::connect(source, wire).await?;
    let listed = c
        .client
        .list_partition_reassignments(None, wire.request_timeout)
        .await?
        .value;
    // A reassignment that completed after the metadata was read and before this listing
    // shows its new replica outside the ISR, listed by nobody. The same broker's metadata
    // of those topics, read again now, is newer than the listing's answer.
    let adding_to = adding_map(&listed);
    let topics = unlisted_topics(candidates, &adding_to);
    let again = if topics.is_empty() {
        None
    } else {
        c.client.metadata(Some(&topics)).await.ok().map(|t| t.value)
    };
    Ok((adding_to, again))
}

/// The replication throttle lists of the candidates' topics, read fresh: a throttle is
/// set for a move and removed after it.
async fn topic_throttles(
    source: &str,
    wire: &WireOptions,
    candidates: &Candidates,
) -> Result<BTreeMap<String, Throttles>, WireError> {
    let topics: BTreeSet<String> = candidates
        .values()
        .flat_map(|list| list.iter().map(|(t, _, _)| t.clone()))
        .collect();
    let topics: Vec<String> = topics.into_iter().collect();
    let mut c = BrokerClient::connect(source, wire).await?;
    let mut lists = BTreeMap::new();
    for chunk in topics.chunks(500) {
        let answer = c
            .client
            .describe_topic_configs(chunk, &[FOLLOWER_THROTTLE, LEADER_THROTTLE])
            .await?;
        for (topic, configs) in answer.value {
            if let Ok(configs) = configs {
                lists.insert(topic, Throttles::from_configs(&configs));
            }
        }
    }
    Ok(lists)
}

/// What was learnt around the candidates' own offsets, for each one's progress.
struct Around {
    leaders: Watermarks,
    reassignments: Result<Listing, WireError>,
    throttles: Result<BTreeMap<String, Throttles>, WireError>,
}

impl Around {
    /// Broker `id`'s progress on the partitions of `list`, from its own offsets `answer`.
    fn progress_of(
        &self,
        id: BrokerId,
        list: &[(String, i32, BrokerId)],
        answer: Result<Vec<LatestOffset>, WireError>,
    ) -> FollowerProgress {
        let mut progress = FollowerProgress::default();
        match &self.reassignments {
            Ok((adding_to, again)) => {
                progress.adding_to = Some(adding_to.get(&id).cloned().unwrap_or_default());
                progress.settled = again
                    .as_ref()
                    .map(|m| settled(m, id, list))
                    .unwrap_or_default();
            }
            Err(e) => progress.errors.push(format!("ongoing reassignments: {e}")),
        }
        match &self.throttles {
            Ok(lists) => {
                progress.throttled = list
                    .iter()
                    .filter(|(t, p, leader)| {
                        lists.get(t).is_some_and(|l| l.covers(*p, id, *leader))
                    })
                    .map(|(t, p, _)| (t.clone(), *p))
                    .collect();
            }
            Err(e) => progress
                .errors
                .push(format!("replication throttles of its topics: {e}")),
        }
        match answer {
            Ok(answers) => {
                progress.errors.extend(error_counts(&answers));
                for (t, p, code, offset) in answers {
                    if code != 0 || offset < 0 {
                        continue;
                    }
                    let hw = self.leaders.high.get(&(t.clone(), p)).copied();
                    progress.offsets.insert(
                        (t, p),
                        ReplicaOffsets {
                            log_end: offset,
                            leader_high_watermark: hw,
                        },
                    );
                }
            }
            Err(e) => progress.errors.push(format!("its log end offsets: {e}")),
        }
        let leaders: BTreeSet<BrokerId> = list.iter().map(|(_, _, l)| *l).collect();
        progress.errors.extend(
            leaders
                .iter()
                .filter_map(|l| self.leaders.errors.get(l).cloned()),
        );
        progress
    }
}

const FOLLOWER_THROTTLE: &str = "follower.replication.throttled.replicas";
const LEADER_THROTTLE: &str = "leader.replication.throttled.replicas";

/// One topic's replication throttle lists: `partition:broker` entries, or `*` for all.
#[derive(Debug, Default, PartialEq, Eq)]
struct Throttles {
    follower: ThrottleList,
    leader: ThrottleList,
}

#[derive(Debug, Default, PartialEq, Eq)]
struct ThrottleList {
    all: bool,
    replicas: BTreeSet<(i32, BrokerId)>,
}

impl ThrottleList {
    /// Kafka's syntax: `*`, or a comma-separated list of `partition:broker`. Entries it
    /// would reject are skipped; an unset or empty value throttles nothing.
    fn parse(value: Option<&String>) -> Self {
        let mut list = ThrottleList::default();
        for entry in value.map(String::as_str).unwrap_or("").split(',') {
            let entry = entry.trim();
            if entry == "*" {
                list.all = true;
            } else if let Some((p, b)) = entry.split_once(':') {
                if let (Ok(p), Ok(b)) = (p.trim().parse(), b.trim().parse()) {
                    list.replicas.insert((p, b));
                }
            }
        }
        list
    }

    fn lists(&self, partition: i32, broker: BrokerId) -> bool {
        self.all || self.replicas.contains(&(partition, broker))
    }
}

impl Throttles {
    fn from_configs(configs: &BTreeMap<String, String>) -> Self {
        Throttles {
            follower: ThrottleList::parse(configs.get(FOLLOWER_THROTTLE)),
            leader: ThrottleList::parse(configs.get(LEADER_THROTTLE)),
        }
    }

    /// Whether the replica of `partition` on `follower` fetches under a throttle: on its
    /// own side, or on the side of the leader it fetches from.
    fn covers(&self, partition: i32, follower: BrokerId, leader: BrokerId) -> bool {
        self.follower.lists(partition, follower)
            || (leader >= 0 && self.leader.lists(partition, leader))
    }
}

/// Per broker, the partitions the listed reassignments are adding it to.
fn adding_map(listed: &[OngoingReassignment]) -> BTreeMap<BrokerId, Vec<(String, i32)>> {
    let mut adding_to: BTreeMap<BrokerId, Vec<(String, i32)>> = BTreeMap::new();
    for (t, p, _, added, _) in listed {
        for b in added {
            adding_to.entry(*b).or_default().push((t.clone(), *p));
        }
    }
    adding_to
}

/// The topics of candidate partitions that no listed reassignment is adding their broker to.
fn unlisted_topics(
    candidates: &Candidates,
    adding_to: &BTreeMap<BrokerId, Vec<(String, i32)>>,
) -> Vec<String> {
    let mut topics = BTreeSet::new();
    for (id, list) in candidates {
        let adding = adding_to.get(id);
        for (t, p, _) in list {
            if !adding.is_some_and(|a| a.iter().any(|(at, ap)| at == t && ap == p)) {
                topics.insert(t.clone());
            }
        }
    }
    topics.into_iter().collect()
}

/// Of the partitions broker `id` was missing from the ISR of, those the newer read `again`
/// shows it in the ISR of, or no longer a replica of. A partition the newer read does not
/// describe settles nothing.
fn settled(
    again: &MetadataView,
    id: BrokerId,
    list: &[(String, i32, BrokerId)],
) -> Vec<(String, i32)> {
    list.iter()
        .filter(|(t, p, _)| {
            again
                .topics
                .get(t)
                .filter(|topic| topic.error_code == 0)
                .and_then(|topic| topic.partitions.iter().find(|q| q.partition == *p))
                .is_some_and(|q| q.isr.contains(&id) || !q.replicas.contains(&id))
        })
        .map(|(t, p, _)| (t.clone(), *p))
        .collect()
}

/// Adds to this round's "being added" lists what the last round's reassignments were adding,
/// and returns this round's own lists for the next. The metadata is read before the
/// reassignments: one that completes in between shows the new replica outside the ISR and no
/// longer being added, for that one round (seen on the lab). Its last known state covers it.
pub(super) fn carry_adding(
    followers: &mut BTreeMap<BrokerId, FollowerProgress>,
    before: BTreeMap<BrokerId, Vec<(String, i32)>>,
) -> BTreeMap<BrokerId, Vec<(String, i32)>> {
    let now: BTreeMap<BrokerId, Vec<(String, i32)>> = followers
        .iter()
        .filter_map(|(id, f)| Some((*id, f.adding_to.clone()?)))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    for (id, list) in before {
        // Only onto a listing of this round: without one, nothing is known to be added.
        if let Some(adding) = followers.get_mut(&id).and_then(|f| f.adding_to.as_mut()) {
            for p in list {
                if !adding.contains(&p) {
                    adding.push(p);
                }
            }
        }
    }
    now
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reassignment_that_completes_between_metadata_and_listing_still_covers_its_replica() {
        let t1 = ("t".to_string(), 1);
        let progress = |adding_to: Vec<(String, i32)>| FollowerProgress {
            adding_to: Some(adding_to),
            ..FollowerProgress::default()
        };
        // Round 1: the controller adds broker 4 to t-0 and t-1.
        let mut round1: BTreeMap<BrokerId, FollowerProgress> =
            [(4, progress(vec![("t".into(), 0), t1.clone()]))].into();
        let carried = carry_adding(&mut round1, BTreeMap::new());
        assert_eq!(carried[&4].len(), 2);
        // Round 2: t-1 completed after this round's metadata was read.
        let mut round2: BTreeMap<BrokerId, FollowerProgress> =
            [(4, progress(vec![("t".into(), 0)]))].into();
        let carried = carry_adding(&mut round2, carried);
        let listed = round2[&4].adding_to.as_ref().unwrap();
        assert!(listed.contains(&t1), "{:?}", round2[&4]);
        assert_eq!(listed.len(), 2, "carried once, not twice");
        // Round 3: only this round's own list is carried on, so nothing lingers.
        let mut round3: BTreeMap<BrokerId, FollowerProgress> = [(4, progress(vec![]))].into();
        let carried = carry_adding(&mut round3, carried);
        assert_eq!(round3[&4].adding_to, Some(vec![("t".to_string(), 0)]));
        assert!(carried.is_empty());
    }

    #[test]
    fn a_replica_is_throttled_on_its_own_side_or_its_leaders() {
        let configs: BTreeMap<String, String> = [
            (
                FOLLOWER_THROTTLE.to_string(),
                "0:4, 1:4,bad,2:x".to_string(),
            ),
            (LEADER_THROTTLE.to_string(), "0:1,0:2,3:3".to_string()),
        ]
        .into();
        let t = Throttles::from_configs(&configs);
        assert!(t.covers(0, 4, 9), "its own side");
        assert!(t.covers(1, 4, 9), "spaces around an entry");
        assert!(
            !t.covers(2, 4, 9),
            "an entry Kafka would reject throttles nothing"
        );
        assert!(t.covers(3, 5, 3), "its leader's side");
        assert!(!t.covers(3, 5, -1), "no leader, no leader side");
        assert!(!t.covers(0, 3, 3), "neither listed");
        let all: BTreeMap<String, String> = [(LEADER_THROTTLE.to_string(), "*".to_string())].into();
        assert!(Throttles::from_configs(&all).covers(7, 2, 1));
        assert_eq!(
            Throttles::from_configs(&BTreeMap::new()),
            Throttles::default()
        );
        assert!(!Throttles::default().covers(0, 1, 2));
    }

    #[test]
    fn catch_up_candidates_miss_some_isr() {
        use crate::model::round::{PartitionView, TopicView};
        let part = |partition, leader, replicas: &[i32], isr: &[i32]| PartitionView {
            partition,
            error_code: 0,
            leader,
            leader_epoch: 1,
            replicas: replicas.into(),
            isr: isr.into(),
            offline_replicas: Default::default(),
        };
        let mut m = MetadataView {
            all_topics: true,
            ..MetadataView::default()
        };
        m.topics.insert(
            "t".into(),
            TopicView {
                name: "t".into(),
                topic_id: 0,
                error_code: 0,
                is_internal: false,
                partitions: vec![
                    part(0, 1, &[1, 4], &[1]),
                    part(1, 2, &[2, 4, 3], &[2, 4]),
                    part(2, 3, &[3, 1], &[3]),
                ]
                .into(),
            },
        );
        let c = catch_up_candidates(&m);
        // Whether it leads is the verdict's business: it may lead a topic the filter drops.
        assert_eq!(
            c.into_iter().collect::<Vec<_>>(),
            vec![
                (1, vec![("t".to_string(), 2, 3)]),
                (3, vec![("t".to_string(), 1, 2)]),
                (4, vec![("t".to_string(), 0, 1)]),
            ]
        );
    }

    #[test]
    fn a_newer_read_settles_a_replica_back_in_the_isr_or_moved_away_and_nothing_else() {
        use crate::model::round::{PartitionView, TopicView};
        let part = |partition, leader, replicas: &[i32], isr: &[i32]| PartitionView {
            partition,
            leader,
            replicas: replicas.into(),
            isr: isr.into(),
            ..PartitionView::default()
        };
        let mut again = MetadataView::default();
        again.topics.insert(
            "t".into(),
            TopicView {
                name: "t".into(),
                partitions: vec![
                    part(0, 1, &[1, 4], &[1, 4]),
                    part(1, 2, &[2, 3], &[2, 3]),
                    part(2, 3, &[3, 4], &[3]),
                ]
                .into(),
                ..TopicView::default()
            },
        );
        let missing = |p: i32| ("t".to_string(), p, 1);
        let list = vec![
            missing(0),
            missing(1),
            missing(2),
            ("gone".to_string(), 0, 1),
        ];
        // Back in t-0's ISR, no longer a replica of t-1, still missing from t-2's ISR, and
        // "gone" not described by the newer read at all.
        assert_eq!(
            settled(&again, 4, &list),
            vec![("t".to_string(), 0), ("t".to_string(), 1)]
        );
        let listed: BTreeMap<BrokerId, Vec<(String, i32)>> =
            [(4, vec![("t".to_string(), 0)])].into();
        let candidates: BTreeMap<BrokerId, Vec<(String, i32, BrokerId)>> =
            [(4, vec![missing(0)]), (5, vec![("u".to_string(), 0, 1)])].into();
        assert_eq!(unlisted_topics(&candidates, &listed), vec!["u".to_string()]);
    }
}
