//! Who is to blame when replication fails, pure. A follower missing from an ISR, a write
//! refused with NOT_ENOUGH_REPLICAS or an acks=all write that times out while the leader
//! takes acks=1 writes all say "this leader and these followers no longer replicate", not
//! which end is broken. Naming the wrong end pages the on-call to a healthy machine
//! (issue 14: an isolated leader made its followers `degraded` before itself), so the
//! cause is decided here, once, for the verdicts and for the partition findings:
//!
//! 1. a leader that is unhealthy by any other evidence (silent, fenced, not registered,
//!    claiming a leadership a newer epoch gave away, its metadata behind the cluster's) is
//!    the suspect, and its followers are not;
//! 2. a follower that is unhealthy by such evidence is the suspect;
//! 3. otherwise the broker that takes part in the most broken links is the suspect: a
//!    follower that keeps up with every other leader is not at fault for the one leader it
//!    cannot follow when that leader lost its other followers too. A leader counts as a
//!    candidate only when it lost every follower of the partition (one that keeps some
//!    followers serves fetches). Ties go to the follower, as Kafka's ISR shrink says;
//!    followers that stay tied are ambiguous and nobody is named.

use std::collections::{BTreeMap, BTreeSet};

use crate::judge::health::Health;
use crate::model::round::{BrokerId, BrokerList, IdMap, RoundObservation};
use crate::observe::cluster_view::ClusterView;

use super::facts::{canary_facts, CanaryFacts, Named};
use super::registration::registrations;
use super::Registration;

/// A leader waiting on followers that do not replicate (or may not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lag {
    pub leader: BrokerId,
    /// The followers it waits on: one replica missing from the ISR, or every ISR follower
    /// of a partition whose acks=all write timed out (one of them lags, which is unknown).
    pub followers: BrokerList,
    /// It lost every follower of the partition, so it may be the broken end itself.
    pub leader_candidate: bool,
}

/// Why a broker cannot be trusted as the healthy end of a replication link, or `None`.
pub type Sickness = BTreeMap<BrokerId, &'static str>;

/// The brokers that are unhealthy by evidence other than replication, with the reason.
pub fn sickness(
    obs: &RoundObservation,
    view: &crate::observe::cluster_view::ClusterView,
) -> Sickness {
    sickness_with(obs, view, &registrations(obs))
}

pub(super) fn sickness_with(
    obs: &RoundObservation,
    view: &crate::observe::cluster_view::ClusterView,
    registrations: &BTreeMap<BrokerId, Registration>,
) -> Sickness {
    let mut out = Sickness::new();
    let stale: BTreeSet<BrokerId> = view.stale_leaders.iter().map(|s| s.broker).collect();
    for (id, probe) in &obs.probes {
        let why = if !probe.answered() {
            "it does not answer"
        } else if registrations.get(id) == Some(&Registration::Fenced) {
            "the controller has fenced it"
        } else if registrations.get(id) == Some(&Registration::Absent) {
            "the other brokers do not list it as registered"
        } else if stale.contains(id) {
            "it claims a leadership a newer leader epoch gave away"
        } else if view.disagreements.get(id).is_some_and(|n| *n > 0) {
            "its metadata is behind the cluster's (cut off from the quorum?)"
        } else {
            continue;
        };
        out.insert(*id, why);
    }
    // A leader nobody could probe is not known to be healthy.
    for b in view.brokers.keys() {
        if !obs.probes.contains_key(b) {
            out.entry(*b).or_insert("it was not probed");
        }
    }
    out
}

/// The suspects of each lag, in order: a leader, some followers, or nobody when the
/// evidence cannot tell the followers apart.
pub fn decide(lags: &[Lag], sick: &Sickness) -> Vec<BrokerList> {
    let mut score: IdMap<u32> = IdMap::default();
    let mut as_follower: IdMap<u32> = IdMap::default();
    for l in lags {
        for f in &l.followers {
            *score.entry(*f).or_default() += 1;
            *as_follower.entry(*f).or_default() += 1;
        }
        if l.leader_candidate {
            *score.entry(l.leader).or_default() += 1;
        }
    }
    let get = |m: &IdMap<u32>, b: &BrokerId| m.get(b).copied().unwrap_or(0);
    lags.iter()
        .map(|l| {
            if sick.contains_key(&l.leader) {
                return BrokerList::from_slice(&[l.leader]);
            }
            let sick_followers: BrokerList = l
                .followers
                .iter()
                .copied()
                .filter(|f| sick.contains_key(f))
                .collect();
            if !sick_followers.is_empty() {
                return sick_followers;
            }
            let mut candidates: BrokerList = l.followers.clone();
            if l.leader_candidate {
                candidates.push(l.leader);
            }
            let best = candidates.iter().map(|b| get(&score, b)).max().unwrap_or(0);
            let mut top: BrokerList = candidates
                .into_iter()
                .filter(|b| get(&score, b) == best)
                .collect();
            if top.iter().any(|b| *b != l.leader) {
                top.retain(|b| *b != l.leader);
            }
            if top.len() > 1 {
                let best = top.iter().map(|b| get(&as_follower, b)).max().unwrap_or(0);
                top.retain(|b| get(&as_follower, b) == best);
            }
            if top.len() > 1 {
                BrokerList::new()
            } else {
                top
            }
        })
        .collect()
}

/// A link from a leader to one follower missing from the ISR of a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub leader: BrokerId,
    pub follower: BrokerId,
    pub leader_lost_all: bool,
}

/// Appends the links of one partition to `out`: each replica (of `replicas`, once) missing
/// from the ISR of an online partition.
pub fn links_of<'a>(
    out: &mut Vec<Link<'a>>,
    topic: &'a str,
    partition: i32,
    leader: BrokerId,
    replicas: impl IntoIterator<Item = BrokerId>,
    isr: &[BrokerId],
) {
    if leader < 0 {
        return;
    }
    let leader_lost_all = !isr.iter().any(|b| *b != leader);
    let start = out.len();
    for r in replicas {
        if r != leader && !isr.contains(&r) && !out[start..].iter().any(|l| l.follower == r) {
            out.push(Link {
                topic,
                partition,
                leader,
                follower: r,
                leader_lost_all,
            });
        }
    }
}

impl Link<'_> {
    pub fn lag(&self) -> Lag {
        Lag {
            leader: self.leader,
            followers: BrokerList::from_slice(&[self.follower]),
            leader_candidate: self.leader_lost_all,
        }
    }
}

/// The decided cause of every broken replication link of the round: the health problems'
/// links, the canary partitions' links and the canary's acks=all timeouts on leaders that
/// still take acks=1 writes, decided together (see `cause`). Decided once per round: the
/// partition findings (`attribute_suspects`) and the verdicts (`judge_decided`) read the same.
#[derive(Debug, Clone, Default)]
pub struct Causes {
    /// Per broker, the links where it is the suspect follower ("t-0 (leader 1)").
    pub lagging: BTreeMap<BrokerId, Named>,
    /// Per broker, the partitions it leads whose followers it lost ("t-0 (followers 2)").
    pub followers_lost: BTreeMap<BrokerId, Named>,
    /// The health problems' links in problem order, each as (follower, its suspects);
    /// problem i's are `problem_links[link_starts[i]..link_starts[i + 1]]`. By position
    /// rather than by name: a round can have hundreds of thousands.
    problem_links: Vec<(BrokerId, BrokerList)>,
    link_starts: Vec<usize>,
    pub canary: BTreeMap<BrokerId, CanaryFacts>,
    /// Per canary partition whose write failed, the brokers it is charged to.
    pub canary_charged: BTreeMap<i32, Vec<BrokerId>>,
}

impl Causes {
    /// The decided suspects of the link from problem `i`'s leader to `follower`, if any.
    fn of_problem(&self, i: usize, follower: BrokerId) -> Option<&BrokerList> {
        let range = *self.link_starts.get(i)?..*self.link_starts.get(i + 1)?;
        self.problem_links[range]
            .iter()
            .find(|(f, _)| *f == follower)
            .map(|(_, s)| s)
    }
}

/// Whether the canary's acks=all write to this partition timed out at a leader that still
/// took the direct acks=1 write: it appends, and waits on followers. The acks=1 writes of
/// the round say so, and so do the round's timed-out writes that the books saw the leader
/// append beside (`leader_appended`, from acks=1 writes sent since, kept across rounds):
/// an early round that starts as the first timeouts end may hold no acks=1 answer of its
/// own, and charged the leader for it (seen once on the lab: both leaders of a cut
/// follower `zombie` for 1.5 s).
pub(super) fn leader_appends(
    round: &crate::observe::canary::CanaryRound,
    p: &crate::observe::canary::PartitionRound,
) -> bool {
    let timed_out_at_leader = p
        .produce_error
        .as_ref()
        .is_some_and(|e| e.kind == "timeout" && e.broker == Some(p.leader));
    timed_out_at_leader
        && (round
            .acks1
            .iter()
            .any(|a| a.partition == p.partition && a.broker == p.leader && a.offset.is_some())
            || p.failed_writes
                .iter()
                .any(|fw| fw.broker == p.leader && fw.kind == "timeout" && fw.leader_appended))
}

/// Decides the causes of the round. `sick` is `sickness` of the round.
pub fn causes(
    health: &Health,
    canary: Option<&crate::observe::canary::CanaryRound>,
    sick: &Sickness,
) -> Causes {
    let mut links: Vec<Link> = Vec::new();
    let mut link_starts = Vec::with_capacity(health.problems.len() + 1);
    for p in &health.problems {
        link_starts.push(links.len());
        let settled = p.replicas.iter().copied().filter(|r| !p.adding.contains(r));
        links_of(&mut links, &p.topic, p.partition, p.leader, settled, &p.isr);
    }
    link_starts.push(links.len());
    let problem_link_count = links.len();
    let waits = match canary {
        Some(round) => canary_links(&mut links, health, round),
        None => Vec::new(),
    };
    let mut lags: Vec<Lag> = links.iter().map(Link::lag).collect();
    lags.extend(waits.iter().map(|(_, leader, followers)| Lag {
        leader: *leader,
        followers: followers.clone(),
        leader_candidate: true,
    }));
    let decided = decide(&lags, sick);
    drop(lags);
    let (lagging, followers_lost) = named_suspects(&links, &decided, sick);
    let mut out = Causes {
        lagging,
        followers_lost,
        problem_links: Vec::new(),
        link_starts,
        canary: BTreeMap::new(),
        canary_charged: BTreeMap::new(),
    };
    if let Some(round) = canary {
        // The canary's own topic's links by name, as `canary_facts` reads them (few).
        let named: BTreeMap<(String, i32, BrokerId), Vec<BrokerId>> = links
            .iter()
            .zip(&decided)
            .filter(|(link, _)| link.topic == round.topic)
            .map(|(link, s)| {
                (
                    (link.topic.to_string(), link.partition, link.follower),
                    s.to_vec(),
                )
            })
            .collect();
        let wait_suspects: BTreeMap<i32, &BrokerList> = waits
            .iter()
            .zip(&decided[links.len()..])
            .map(|((partition, _, _), s)| (*partition, s))
            .collect();
        (out.canary, out.canary_charged) = canary_facts(round, &named, &wait_suspects, sick);
    }
    out.problem_links = links[..problem_link_count]
        .iter()
        .zip(decided)
        .map(|(link, s)| (link.follower, s))
        .collect();
    out
}

/// A canary write's wait for its followers: the partition, its leader, and the followers
/// it waited on.
type Wait = (i32, BrokerId, BrokerList);

/// Adds the links of the canary partitions that are not health problems already, and
/// returns the waits of the writes whose leader appended but timed out.
fn canary_links<'a>(
    links: &mut Vec<Link<'a>>,
    health: &Health,
    round: &'a crate::observe::canary::CanaryRound,
) -> Vec<Wait> {
    let problems: BTreeSet<i32> = health
        .problems
        .iter()
        .filter(|p| p.topic == round.topic)
        .map(|p| p.partition)
        .collect();
    let mut waits = Vec::new();
    for p in &round.partitions {
        if !problems.contains(&p.partition) {
            let settled = p
                .replicas
                .iter()
                .copied()
                .filter(|r| !health.reassigning.adds(&round.topic, p.partition, *r));
            links_of(links, &round.topic, p.partition, p.leader, settled, &p.isr);
        }
        if leader_appends(round, p) {
            waits.extend(wait_of(p));
        }
    }
    waits
}

/// Whom a write that timed out while its leader appended waited on. A write that timed
/// out while a replica was being dropped from the ISR waited on that replica, not on the
/// followers still in sync: with the continuous canary such a timeout often arrives after
/// the shrink (the lab's cut-replication tests saw the healthy follower blamed).
fn wait_of(p: &crate::observe::canary::PartitionRound) -> Option<Wait> {
    let dropped: BrokerList = p
        .replicas
        .iter()
        .copied()
        .filter(|r| *r != p.leader && !p.isr.contains(r))
        .collect();
    let followers: BrokerList = if dropped.is_empty() {
        p.isr.iter().copied().filter(|r| *r != p.leader).collect()
    } else {
        dropped
    };
    (!followers.is_empty()).then_some((p.partition, p.leader, followers))
}

/// Per suspect, the links it is named for: as the follower that lags, or as the leader
/// that lost its followers (with why it is sick, when it is).
fn named_suspects(
    links: &[Link],
    decided: &[BrokerList],
    sick: &Sickness,
) -> (BTreeMap<BrokerId, Named>, BTreeMap<BrokerId, Named>) {
    let mut lagging: IdMap<Named> = IdMap::default();
    let mut lost: BTreeMap<(BrokerId, &str, i32), Vec<BrokerId>> = BTreeMap::new();
    for (link, suspects) in links.iter().zip(decided) {
        for s in suspects {
            if *s == link.follower {
                lagging.entry(*s).or_default().push_with(|| {
                    format!("{}-{} (leader {})", link.topic, link.partition, link.leader)
                });
            } else if *s == link.leader {
                lost.entry((*s, link.topic, link.partition))
                    .or_default()
                    .push(link.follower);
            }
        }
    }
    let mut followers_lost: BTreeMap<BrokerId, Named> = BTreeMap::new();
    for ((leader, topic, partition), followers) in lost {
        followers_lost.entry(leader).or_default().push_with(|| {
            let list: Vec<String> = followers.iter().map(|f| f.to_string()).collect();
            let why = sick
                .get(&leader)
                .map(|w| format!("; {w}"))
                .unwrap_or_default();
            format!("{topic}-{partition} (follower(s) {}{why})", list.join(", "))
        });
    }
    (lagging.into_iter().collect(), followers_lost)
}

/// What `attribute_suspects` decided of a round, for `judge_decided`: each probed broker's
/// registration and the causes of the broken links.
pub struct Decided {
    pub(super) registrations: BTreeMap<BrokerId, Registration>,
    pub(super) causes: Causes,
}

/// Replaces the suspects of every partition problem with an online leader by the decided
/// causes of its broken links (plus the leader when it is outside its own ISR), so the
/// partition findings name the same brokers as the verdicts; notes in each failed canary
/// write whom it is charged to, for the canary findings. Returns what it decided, for
/// `judge_decided`.
pub fn attribute_suspects(
    obs: &RoundObservation,
    view: &ClusterView,
    health: &mut Health,
    canary: Option<&mut crate::observe::canary::CanaryRound>,
) -> Decided {
    let registrations = registrations(obs);
    let sick = sickness_with(obs, view, &registrations);
    let mut canary = canary;
    let c = causes(health, canary.as_deref(), &sick);
    if let Some(round) = canary.as_mut() {
        for p in &mut round.partitions {
            p.charged_to = c.canary_charged.get(&p.partition).cloned();
        }
    }
    for (i, p) in health.problems.iter_mut().enumerate() {
        if p.leader < 0 {
            continue;
        }
        let mut suspects: BrokerList = p
            .replicas
            .iter()
            .filter(|r| **r != p.leader && !p.isr.contains(r))
            .flat_map(|r| c.of_problem(i, *r).into_iter().flatten().copied())
            .collect();
        if !p.isr.contains(&p.leader) {
            suspects.push(p.leader);
        }
        // Each broker once, in the order first named.
        p.suspects.clear();
        for b in suspects {
            if !p.suspects.contains(&b) {
                p.suspects.push(b);
            }
        }
    }
    Decided {
        registrations,
        causes: c,
    }
}
