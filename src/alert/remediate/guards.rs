//! The guards of a remediation, pure: every one is checked at the moment of acting, from
//! this round's report and the cluster's remediation history, and every one that fails is
//! named. Restarting a broker is safe only when the rest of the cluster can carry its load
//! and the watchdog's own view can be trusted; each guard says why not in words.

use std::fmt;
use std::time::{Duration, SystemTime};

use crate::judge::verdict::{BrokerState, BrokerVerdict};
use crate::model::round::BrokerId;
use crate::observe::cluster_view::ClusterView;

/// Partitions named in a refusal; the total is always given.
const MAX_NAMED_PARTITIONS: usize = 10;

/// Everything the guards look at.
#[derive(Debug, Clone)]
pub struct Situation<'a> {
    pub broker: BrokerId,
    /// This round's verdicts of every broker of the cluster.
    pub verdicts: &'a [BrokerVerdict],
    /// Brokers that answered every direct request this round, and brokers known.
    pub answered: usize,
    pub known: usize,
    /// Partitions whose only in-sync replica is the broker (from the newest view).
    pub sole_in_sync_of: Vec<String>,
    /// Partitions at their `min.insync.replicas` with the broker in the ISR: a restart
    /// takes them below it, and acks=all writes to them fail until it is back.
    pub would_fall_below_min_isr: Vec<String>,
    /// The broker is a voter of the KRaft quorum (combined mode) whose restart leaves
    /// fewer caught-up voters than a majority: (caught up without it, voters).
    pub quorum_without: Option<(usize, usize)>,
    /// Remediations (commands run) in this cluster, any broker.
    pub history: &'a [SystemTime],
    /// A remediation command of this cluster is still running.
    pub running: bool,
    pub cooldown: Duration,
    pub max_per_day: u32,
    pub now: SystemTime,
    /// The silence covering the broker, described: an operator asked for quiet.
    pub silenced: Option<String>,
}

/// Why a remediation is not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Other brokers are not healthy: restarting one more could take partitions offline.
    OthersNotHealthy(Vec<(BrokerId, BrokerState)>),
    /// The broker is the last in-sync replica of these partitions.
    LastInSyncReplica {
        partitions: Vec<String>,
        total: usize,
    },
    CoolDown {
        last_ago: Duration,
        cooldown: Duration,
    },
    DailyLimit {
        done: u32,
        max: u32,
    },
    /// Fewer than a majority of the known brokers answered: the fault may be the
    /// watchdog's own network, and its verdict is not to be acted on.
    ViewIncomplete {
        answered: usize,
        known: usize,
    },
    AlreadyRunning,
    /// A silence covers the broker (planned maintenance): hands off.
    Silenced(String),
    /// Restarting it takes partitions below their `min.insync.replicas` (Strimzi refuses
    /// a roll in this case too).
    BelowMinIsr {
        partitions: Vec<String>,
        total: usize,
    },
    /// It is a controller of the KRaft quorum, and without it too few voters are caught up
    /// to elect a leader.
    QuorumMajority {
        caught_up: usize,
        voters: usize,
    },
}

impl Refusal {
    /// A stable name per guard, for logs and tests.
    pub fn guard(&self) -> &'static str {
        match self {
            Refusal::OthersNotHealthy(_) => "others_healthy",
            Refusal::LastInSyncReplica { .. } => "not_last_in_sync_replica",
            Refusal::CoolDown { .. } => "cooldown",
            Refusal::DailyLimit { .. } => "daily_limit",
            Refusal::ViewIncomplete { .. } => "view_complete",
            Refusal::AlreadyRunning => "none_running",
            Refusal::Silenced(_) => "not_silenced",
            Refusal::BelowMinIsr { .. } => "min_isr_kept",
            Refusal::QuorumMajority { .. } => "quorum_kept",
        }
    }
}

/// "t-0, t-1 and 8 more": the partitions named, and how many are not.
fn named(partitions: &[String], total: usize) -> String {
    let more = total.saturating_sub(partitions.len());
    let mut out = partitions.join(", ");
    if more > 0 {
        out.push_str(&format!(" and {more} more"));
    }
    out
}

/// The first few of `names`, sorted, and how many there are.
fn first_named(names: &[String]) -> (Vec<String>, usize) {
    let mut names = names.to_vec();
    names.sort();
    let total = names.len();
    names.truncate(MAX_NAMED_PARTITIONS);
    (names, total)
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::OthersNotHealthy(others) => {
                let list: Vec<String> = others
                    .iter()
                    .map(|(b, s)| format!("broker {b} is {}", s.as_label()))
                    .collect();
                write!(
                    f,
                    "the rest of the cluster is not healthy: {}",
                    list.join(", ")
                )
            }
            Refusal::LastInSyncReplica { partitions, total } => write!(
                f,
                "it is the last in-sync replica of {total} partition(s): {}",
                named(partitions, *total)
            ),
            Refusal::CoolDown { last_ago, cooldown } => write!(
                f,
                "another remediation ran in this cluster {} s ago (cool-down {} s)",
                last_ago.as_secs(),
                cooldown.as_secs()
            ),
            Refusal::DailyLimit { done, max } => write!(
                f,
                "{done} remediation(s) in this cluster in the last 24 h (at most {max})"
            ),
            Refusal::ViewIncomplete { answered, known } => write!(
                f,
                "the watchdog's view is incomplete: only {answered} of {known} known broker(s) answered (the fault may be its own network)"
            ),
            Refusal::AlreadyRunning => {
                write!(f, "a remediation of this cluster is still running")
            }
            Refusal::Silenced(what) => write!(f, "the broker is under a {what}"),
            Refusal::BelowMinIsr { partitions, total } => write!(
                f,
                "restarting it takes {total} partition(s) below min.insync.replicas (acks=all writes to them would fail): {}",
                named(partitions, *total)
            ),
            Refusal::QuorumMajority { caught_up, voters } => write!(
                f,
                "it is a KRaft controller: without it {caught_up} of {voters} voters are caught up, short of the majority of {} the quorum needs",
                voters / 2 + 1
            ),
        }
    }
}

const DAY: Duration = Duration::from_secs(86_400);

/// Every guard that fails; empty when the remediation may run.
pub fn check(s: &Situation) -> Vec<Refusal> {
    let mut out = Vec::new();
    if let Some(what) = &s.silenced {
        out.push(Refusal::Silenced(what.clone()));
    }
    if s.running {
        out.push(Refusal::AlreadyRunning);
    }
    if s.answered * 2 <= s.known {
        out.push(Refusal::ViewIncomplete {
            answered: s.answered,
            known: s.known,
        });
    }
    let others: Vec<(BrokerId, BrokerState)> = s
        .verdicts
        .iter()
        .filter(|v| v.broker != s.broker && v.state != BrokerState::Healthy)
        .map(|v| (v.broker, v.state))
        .collect();
    if !others.is_empty() {
        out.push(Refusal::OthersNotHealthy(others));
    }
    if !s.sole_in_sync_of.is_empty() {
        let (partitions, total) = first_named(&s.sole_in_sync_of);
        out.push(Refusal::LastInSyncReplica { partitions, total });
    }
    if !s.would_fall_below_min_isr.is_empty() {
        let (partitions, total) = first_named(&s.would_fall_below_min_isr);
        out.push(Refusal::BelowMinIsr { partitions, total });
    }
    if let Some((caught_up, voters)) = s.quorum_without {
        if caught_up < voters / 2 + 1 {
            out.push(Refusal::QuorumMajority { caught_up, voters });
        }
    }
    // A clock that went backwards makes an entry look recent: refusing is the safe side.
    let ago = |t: &SystemTime| s.now.duration_since(*t).unwrap_or_default();
    if let Some(last_ago) = s.history.iter().map(ago).min() {
        if last_ago < s.cooldown {
            out.push(Refusal::CoolDown {
                last_ago,
                cooldown: s.cooldown,
            });
        }
    }
    let done = s.history.iter().filter(|t| ago(t) < DAY).count();
    let done = u32::try_from(done).unwrap_or(u32::MAX);
    if done >= s.max_per_day {
        out.push(Refusal::DailyLimit {
            done,
            max: s.max_per_day,
        });
    }
    out
}

/// Partitions whose in-sync replicas are exactly `broker`, in the merged (newest) view.
pub fn sole_in_sync_of(view: &ClusterView, broker: BrokerId) -> Vec<String> {
    view.topics
        .iter()
        .flat_map(|(topic, t)| {
            t.partitions
                .iter()
                .filter(|p| p.isr[..] == [broker])
                .map(move |p| format!("{topic}-{}", p.partition))
        })
        .collect()
}

/// Partitions whose ISR holds `broker` and is no larger than the topic's
/// `min.insync.replicas` (its only member is `sole_in_sync_of`'s case): without it they are
/// under min ISR. Topics whose setting is unknown are not counted.
pub fn would_fall_below_min_isr(
    view: &ClusterView,
    min_isr: &std::collections::BTreeMap<String, i32>,
    broker: BrokerId,
) -> Vec<String> {
    view.topics
        .iter()
        .filter_map(|(topic, t)| Some((topic, t, *min_isr.get(topic)?)))
        .flat_map(|(topic, t, min)| {
            t.partitions
                .iter()
                .filter(move |p| {
                    p.isr.contains(&broker) && p.isr.len() > 1 && (p.isr.len() as i32) <= min
                })
                .map(move |p| format!("{topic}-{}", p.partition))
        })
        .collect()
}

/// For a broker that is also a voter of the quorum (KRaft combined mode): how many other
/// voters are caught up, and how many voters there are. A voter counts as caught up when
/// the leader saw it caught up within `within`; the leader itself always is.
pub fn quorum_without(
    quorum: Option<&crate::model::round::QuorumDescription>,
    broker: BrokerId,
    within: Duration,
) -> Option<(usize, usize)> {
    let d = quorum?;
    d.voter(broker)?;
    let caught_up = d
        .voters
        .iter()
        .filter(|v| v.id != broker)
        .filter(|v| v.id == d.leader || v.last_caught_up_ago.is_some_and(|a| a <= within))
        .count();
    Some((caught_up, d.voters.len()))
}

/// Whether a broker has been a zombie long enough: `since` is when its current zombie
/// state began.
pub fn zombie_long_enough(since: SystemTime, now: SystemTime, zombie_for: Duration) -> bool {
    now.duration_since(since).is_ok_and(|d| d >= zombie_for)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::verdict::Registration;
    use crate::model::round::PartitionView;
    use crate::observe::cluster_view::ViewTopic;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + secs)
    }

    fn verdict(broker: BrokerId, state: BrokerState) -> BrokerVerdict {
        BrokerVerdict {
            broker,
            address: format!("127.0.0.1{broker}:9092"),
            state,
            registration: Registration::Registered,
            answered: state == BrokerState::Healthy,
            hits: Vec::new(),
            observed_at: None,
            held_since: None,
            page_after: None,
        }
    }

    fn healthy_others() -> Vec<BrokerVerdict> {
        vec![
            verdict(1, BrokerState::Zombie),
            verdict(2, BrokerState::Healthy),
            verdict(3, BrokerState::Healthy),
        ]
    }

    fn situation(verdicts: &[BrokerVerdict]) -> Situation<'_> {
        Situation {
            broker: 1,
            verdicts,
            answered: 2,
            known: 3,
            sole_in_sync_of: Vec::new(),
            would_fall_below_min_isr: Vec::new(),
            quorum_without: None,
            history: &[],
            running: false,
            cooldown: Duration::from_secs(600),
            max_per_day: 2,
            now: t(100_000),
            silenced: None,
        }
    }

    fn guards(s: &Situation) -> Vec<&'static str> {
        check(s).iter().map(Refusal::guard).collect()
    }

    #[test]
    fn every_guard_passes_on_a_lone_zombie() {
        let v = healthy_others();
        assert!(check(&situation(&v)).is_empty());
    }

    #[test]
    fn another_broker_down_or_degraded_refuses() {
        for other in [
            BrokerState::Down,
            BrokerState::Degraded,
            BrokerState::Zombie,
            BrokerState::Unknown,
        ] {
            let mut v = healthy_others();
            v[1].state = other;
            let s = situation(&v);
            let r = check(&s);
            assert_eq!(r, vec![Refusal::OthersNotHealthy(vec![(2, other)])]);
            assert_eq!(
                r[0].to_string(),
                format!(
                    "the rest of the cluster is not healthy: broker 2 is {}",
                    other.as_label()
                )
            );
        }
    }

    #[test]
    fn the_broker_itself_is_not_counted_among_the_others() {
        let v = healthy_others();
        let s = situation(&v);
        assert_eq!(s.verdicts[0].state, BrokerState::Zombie);
        assert!(guards(&s).is_empty());
    }

    #[test]
    fn the_last_in_sync_replica_refuses_with_partitions_named() {
        let v = healthy_others();
        let mut s = situation(&v);
        s.sole_in_sync_of = (0..12).rev().map(|p| format!("orders-{p}")).collect();
        let r = check(&s);
        assert_eq!(guards(&s), ["not_last_in_sync_replica"]);
        let text = r[0].to_string();
        assert!(text.starts_with("it is the last in-sync replica of 12 partition(s): orders-0, orders-1, orders-10, orders-11, orders-2"), "{text}");
        assert!(text.ends_with("and 2 more"), "{text}");
    }

    #[test]
    fn cool_down_counts_from_the_last_remediation_of_any_broker() {
        let v = healthy_others();
        let mut s = situation(&v);
        s.max_per_day = 10;
        let history = [t(100_000 - 5_000), t(100_000 - 599)];
        s.history = &history;
        assert_eq!(guards(&s), ["cooldown"]);
        assert_eq!(
            check(&s)[0].to_string(),
            "another remediation ran in this cluster 599 s ago (cool-down 600 s)"
        );
        let history = [t(100_000 - 600)];
        s.history = &history;
        assert!(guards(&s).is_empty(), "exactly the cool-down is enough");
        // A remediation "in the future" (clock stepped back) counts as just now.
        let history = [t(100_010)];
        s.history = &history;
        assert_eq!(guards(&s), ["cooldown"]);
    }

    #[test]
    fn at_most_n_per_rolling_day() {
        let v = healthy_others();
        let mut s = situation(&v);
        s.cooldown = Duration::ZERO;
        let history = [t(100_000 - 86_400), t(100_000 - 3_000), t(100_000 - 2_000)];
        s.history = &history;
        assert_eq!(guards(&s), ["daily_limit"]);
        assert_eq!(
            check(&s)[0].to_string(),
            "2 remediation(s) in this cluster in the last 24 h (at most 2)"
        );
        let history = [t(100_000 - 86_400), t(100_000 - 3_000)];
        s.history = &history;
        assert!(guards(&s).is_empty(), "a day-old one has expired");
    }

    #[test]
    fn an_incomplete_view_refuses() {
        let v = healthy_others();
        let mut s = situation(&v);
        for (answered, known, refused) in [
            (2, 3, false),
            (1, 3, true),
            (2, 4, true),
            (3, 4, false),
            (0, 0, true),
            (1, 1, false),
        ] {
            s.answered = answered;
            s.known = known;
            assert_eq!(
                guards(&s).contains(&"view_complete"),
                refused,
                "{answered} of {known}"
            );
        }
        s.answered = 1;
        s.known = 3;
        assert_eq!(
            check(&s)[0].to_string(),
            "the watchdog's view is incomplete: only 1 of 3 known broker(s) answered (the fault may be its own network)"
        );
    }

    #[test]
    fn a_running_remediation_refuses() {
        let v = healthy_others();
        let mut s = situation(&v);
        s.running = true;
        assert_eq!(guards(&s), ["none_running"]);
    }

    #[test]
    fn every_failing_guard_is_reported_at_once() {
        let mut v = healthy_others();
        v[2].state = BrokerState::Down;
        let history = [t(100_000 - 10), t(100_000 - 20)];
        let s = Situation {
            answered: 1,
            sole_in_sync_of: vec!["t-0".into()],
            history: &history,
            running: true,
            silenced: Some("silence s-1: broker 1 of cluster lab until ... (upgrade)".into()),
            ..situation(&v)
        };
        assert_eq!(
            guards(&s),
            [
                "not_silenced",
                "none_running",
                "view_complete",
                "others_healthy",
                "not_last_in_sync_replica",
                "cooldown",
                "daily_limit"
            ]
        );
    }

    /// A partition of replicas [1, 2, 3] led by the first of its ISR.
    // collect() rather than to_vec(): the partition's list type may not be a Vec.
    #[allow(clippy::iter_cloned_collect)]
    fn part(partition: i32, isr: &[i32]) -> PartitionView {
        PartitionView {
            partition,
            error_code: 0,
            leader: isr.first().copied().unwrap_or(-1),
            leader_epoch: 1,
            replicas: [1, 2, 3].into_iter().collect(),
            isr: isr.iter().copied().collect(),
            offline_replicas: Default::default(),
        }
    }

    #[test]
    fn sole_in_sync_replicas_from_the_view() {
        let mut view = ClusterView::default();
        let p = part;
        view.topics.insert(
            "t".into(),
            ViewTopic {
                is_internal: false,
                topic_id: 0,
                partitions: vec![p(0, &[1]), p(1, &[1, 2]), p(2, &[2]), p(3, &[])].into(),
            },
        );
        assert_eq!(sole_in_sync_of(&view, 1), ["t-0"]);
        assert_eq!(sole_in_sync_of(&view, 2), ["t-2"]);
        assert!(sole_in_sync_of(&view, 3).is_empty());
    }

    /// Issue 27 item 8: a restart that takes partitions below min.insync.replicas makes
    /// acks=all writes fail while the broker is away (Strimzi refuses this roll too).
    #[test]
    fn a_restart_that_takes_partitions_below_min_isr_is_refused() {
        let mut view = ClusterView::default();
        let p = part;
        for (topic, parts) in [
            (
                "orders",
                vec![p(0, &[1, 2]), p(1, &[1, 2, 3]), p(2, &[2, 3])],
            ),
            ("logs", vec![p(0, &[1, 2])]),
            ("unknown", vec![p(0, &[1, 2])]),
        ] {
            view.topics.insert(
                topic.into(),
                ViewTopic {
                    is_internal: false,
                    topic_id: 0,
                    partitions: parts.into(),
                },
            );
        }
        let min: std::collections::BTreeMap<String, i32> =
            [("orders".to_string(), 2), ("logs".to_string(), 1)].into();
        // orders-0: ISR [1, 2] at min 2 loses 1; orders-1 keeps 2 of 3; logs at min 1 keeps
        // one; the topic whose setting is unknown is not counted. Broker 3: orders-2.
        assert_eq!(would_fall_below_min_isr(&view, &min, 1), ["orders-0"]);
        assert_eq!(would_fall_below_min_isr(&view, &min, 3), ["orders-2"]);
        let v = healthy_others();
        let s = Situation {
            would_fall_below_min_isr: vec!["orders-0".into()],
            ..situation(&v)
        };
        assert_eq!(guards(&s), ["min_isr_kept"]);
        assert_eq!(
            check(&s)[0].to_string(),
            "restarting it takes 1 partition(s) below min.insync.replicas (acks=all writes to them would fail): orders-0"
        );
    }

    /// Issue 27 item 8: a broker that is also a KRaft voter (combined mode) is not restarted
    /// when the other voters caught up are no majority.
    #[test]
    fn a_restart_that_loses_the_quorum_is_refused() {
        use crate::model::round::{QuorumDescription, ReplicaProgress};
        let voter = |id, ago: Option<u64>| ReplicaProgress {
            id,
            log_end_offset: 100,
            last_fetch_ago: ago.map(Duration::from_secs),
            last_caught_up_ago: ago.map(Duration::from_secs),
        };
        let d = |voters| QuorumDescription {
            leader: 2,
            epoch: 5,
            high_watermark: 100,
            voters,
            observers: Vec::new(),
            endpoints: Default::default(),
            version: 1,
        };
        let within = Duration::from_secs(10);
        // Voters 1, 2 (leader), 3; voter 3 has not fetched for a minute.
        let lagging = d(vec![
            voter(1, Some(0)),
            voter(2, Some(0)),
            voter(3, Some(60)),
        ]);
        assert_eq!(quorum_without(Some(&lagging), 1, within), Some((1, 3)));
        let healthy = d(vec![
            voter(1, Some(0)),
            voter(2, Some(0)),
            voter(3, Some(1)),
        ]);
        assert_eq!(quorum_without(Some(&healthy), 1, within), Some((2, 3)));
        assert_eq!(
            quorum_without(Some(&healthy), 4, within),
            None,
            "not a voter"
        );
        assert_eq!(quorum_without(None, 1, within), None);
        let v = healthy_others();
        let refused = Situation {
            quorum_without: Some((1, 3)),
            ..situation(&v)
        };
        assert_eq!(guards(&refused), ["quorum_kept"]);
        assert!(check(&refused)[0].to_string().contains("1 of 3 voters"));
        let kept = Situation {
            quorum_without: Some((2, 3)),
            ..situation(&v)
        };
        assert!(guards(&kept).is_empty());
    }

    #[test]
    fn zombie_duration() {
        let z = Duration::from_secs(30);
        assert!(!zombie_long_enough(t(0), t(29), z));
        assert!(zombie_long_enough(t(0), t(30), z));
        assert!(!zombie_long_enough(t(10), t(0), z), "clock went back");
    }
}
