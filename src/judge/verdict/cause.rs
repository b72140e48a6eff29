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

use super::*;
use std::collections::{BTreeMap, BTreeSet};

use crate::model::round::{BrokerId, IdMap, RoundObservation};

use super::{registrations, Registration};

/// A leader waiting on followers that do not replicate (or may not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lag {
    pub leader: BrokerId,
    /// The followers it waits on: one replica missing from the ISR, or every ISR follower
    /// of a partition whose acks=all write timed out (one of them lags, which is unknown).
    pub followers: Vec<BrokerId>,
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
pub fn decide(lags: &[Lag], sick: &Sickness) -> Vec<Vec<BrokerId>> {
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
                return vec![l.leader];
            }
            let sick_followers: Vec<BrokerId> = l
                .followers
                .iter()
                .copied()
                .filter(|f| sick.contains_key(f))
                .collect();
            if !sick_followers.is_empty() {
                return sick_followers;
            }
            let mut candidates: Vec<BrokerId> = l.followers.clone();
            if l.leader_candidate {
                candidates.push(l.leader);
            }
            let best = candidates.iter().map(|b| get(&score, b)).max().unwrap_or(0);
            let mut top: Vec<BrokerId> = candidates
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
                Vec::new()
            } else {
                top
            }
        })
        .collect()
}

/// A link from a leader to one follower missing from the ISR of a partition.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Link {
    pub topic: String,
    pub partition: i32,
    pub leader: BrokerId,
    pub follower: BrokerId,
    pub leader_lost_all: bool,
}

/// The links of one partition: each replica missing from the ISR of an online partition.
pub fn links_of(
    topic: &str,
    partition: i32,
    leader: BrokerId,
    replicas: &[BrokerId],
    isr: &[BrokerId],
) -> Vec<Link> {
    if leader < 0 {
        return Vec::new();
    }
    let leader_lost_all = !isr.iter().any(|b| *b != leader);
    let mut seen = BTreeSet::new();
    replicas
        .iter()
        .filter(|r| **r != leader && !isr.contains(r) && seen.insert(**r))
        .map(|r| Link {
            topic: topic.to_string(),
            partition,
            leader,
            follower: *r,
            leader_lost_all,
        })
        .collect()
}

impl Link {
    pub fn lag(&self) -> Lag {
        Lag {
            leader: self.leader,
            followers: vec![self.follower],
            leader_candidate: self.leader_lost_all,
        }
    }
}

/// The decided cause of every broken replication link of the round: the health problems'
/// links, the canary partitions' links and the canary's acks=all timeouts on leaders that
/// still take acks=1 writes, decided together (see `cause`).
pub struct Causes {
    /// Per broker, the links where it is the suspect follower ("t-0 (leader 1)").
    pub lagging: BTreeMap<BrokerId, Vec<String>>,
    /// Per broker, the partitions it leads whose followers it lost ("t-0 (followers 2)").
    pub followers_lost: BTreeMap<BrokerId, Vec<String>>,
    /// Per (topic, partition, follower) link, its suspects.
    links: BTreeMap<(String, i32, BrokerId), Vec<BrokerId>>,
    pub canary: BTreeMap<BrokerId, CanaryFacts>,
    /// Per canary partition whose write failed, the brokers it is charged to.
    pub canary_charged: BTreeMap<i32, Vec<BrokerId>>,
}

/// Whether the canary's acks=all write to this partition timed out at a leader that still
/// took the direct acks=1 write: it appends, and waits on followers.
pub(super) fn leader_appends(
    round: &crate::observe::canary::CanaryRound,
    p: &crate::observe::canary::PartitionRound,
) -> bool {
    p.produce_error
        .as_ref()
        .is_some_and(|e| e.kind == "timeout" && e.broker == Some(p.leader))
        && round
            .acks1
            .iter()
            .any(|a| a.partition == p.partition && a.broker == p.leader && a.offset.is_some())
}

/// Decides the causes of the round. `sick` is `sickness` of the round.
pub fn causes(
    health: &Health,
    canary: Option<&crate::observe::canary::CanaryRound>,
    sick: &Sickness,
) -> Causes {
    let mut links: Vec<Link> = Vec::new();
    let mut seen: std::collections::BTreeSet<(String, i32)> = Default::default();
    for p in &health.problems {
        seen.insert((p.topic.clone(), p.partition));
        links.extend(links_of(
            &p.topic,
            p.partition,
            p.leader,
            &p.settled_replicas(),
            &p.isr,
        ));
    }
    let mut waits: Vec<(i32, BrokerId, Vec<BrokerId>)> = Vec::new();
    if let Some(round) = canary {
        for p in &round.partitions {
            if !seen.contains(&(round.topic.clone(), p.partition)) {
                let settled: Vec<BrokerId> = p
                    .replicas
                    .iter()
                    .copied()
                    .filter(|r| !health.reassigning.adds(&round.topic, p.partition, *r))
                    .collect();
                links.extend(links_of(
                    &round.topic,
                    p.partition,
                    p.leader,
                    &settled,
                    &p.isr,
                ));
            }
            if leader_appends(round, p) {
                // A write that timed out while a replica was being dropped from the ISR
                // waited on that replica, not on the followers still in sync: with the
                // continuous canary such a timeout often arrives after the shrink (the lab's
                // cut-replication tests saw the healthy follower blamed).
                let dropped: Vec<BrokerId> = p
                    .replicas
                    .iter()
                    .copied()
                    .filter(|r| *r != p.leader && !p.isr.contains(r))
                    .collect();
                let followers: Vec<BrokerId> = if dropped.is_empty() {
                    p.isr.iter().copied().filter(|r| *r != p.leader).collect()
                } else {
                    dropped
                };
                if !followers.is_empty() {
                    waits.push((p.partition, p.leader, followers));
                }
            }
        }
    }
    let mut lags: Vec<Lag> = links.iter().map(Link::lag).collect();
    lags.extend(waits.iter().map(|(_, leader, followers)| Lag {
        leader: *leader,
        followers: followers.clone(),
        leader_candidate: true,
    }));
    let decided = decide(&lags, sick);
    let mut out = Causes {
        lagging: BTreeMap::new(),
        followers_lost: BTreeMap::new(),
        links: BTreeMap::new(),
        canary: BTreeMap::new(),
        canary_charged: BTreeMap::new(),
    };
    let mut lost: BTreeMap<(BrokerId, String, i32), Vec<BrokerId>> = BTreeMap::new();
    for (link, suspects) in links.iter().zip(&decided) {
        let name = format!("{}-{}", link.topic, link.partition);
        for s in suspects {
            if *s == link.follower {
                out.lagging
                    .entry(*s)
                    .or_default()
                    .push(format!("{name} (leader {})", link.leader));
            } else if *s == link.leader {
                lost.entry((*s, link.topic.clone(), link.partition))
                    .or_default()
                    .push(link.follower);
            }
        }
        out.links.insert(
            (link.topic.clone(), link.partition, link.follower),
            suspects.clone(),
        );
    }
    for ((leader, topic, partition), followers) in lost {
        let list: Vec<String> = followers.iter().map(|f| f.to_string()).collect();
        let why = sick
            .get(&leader)
            .map(|w| format!("; {w}"))
            .unwrap_or_default();
        out.followers_lost.entry(leader).or_default().push(format!(
            "{topic}-{partition} (follower(s) {}{why})",
            list.join(", ")
        ));
    }
    if let Some(round) = canary {
        let wait_suspects: BTreeMap<i32, &Vec<BrokerId>> = waits
            .iter()
            .zip(&decided[links.len()..])
            .map(|((partition, _, _), s)| (*partition, s))
            .collect();
        (out.canary, out.canary_charged) = canary_facts(round, &out.links, &wait_suspects, sick);
    }
    out
}

/// Replaces the suspects of every partition problem with an online leader by the decided
/// causes of its broken links (plus the leader when it is outside its own ISR), so the
/// partition findings name the same brokers as the verdicts; notes in each failed canary
/// write whom it is charged to, for the canary findings.
pub fn attribute_suspects(
    obs: &RoundObservation,
    view: &ClusterView,
    health: &mut Health,
    canary: Option<&mut crate::observe::canary::CanaryRound>,
) {
    let sick = sickness(obs, view);
    let mut canary = canary;
    let c = causes(health, canary.as_deref(), &sick);
    if let Some(round) = canary.as_mut() {
        for p in &mut round.partitions {
            p.charged_to = c.canary_charged.get(&p.partition).cloned();
        }
    }
    for p in &mut health.problems {
        if p.leader < 0 {
            continue;
        }
        let mut suspects: Vec<BrokerId> = p
            .replicas
            .iter()
            .filter(|r| **r != p.leader && !p.isr.contains(r))
            .flat_map(|r| {
                c.links
                    .get(&(p.topic.clone(), p.partition, *r))
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
        if !p.isr.contains(&p.leader) {
            suspects.push(p.leader);
        }
        let mut seen = std::collections::BTreeSet::new();
        suspects.retain(|b| seen.insert(*b));
        p.suspects = suspects;
    }
}
