//! Whether the rest of the cluster counts a broker as a member: every other broker's
//! answer is a vote, counted by kind of answer.

use std::collections::BTreeMap;

use super::Registration;
use crate::model::round::{BrokerId, BrokerProbe, RoundObservation};

/// How one answer speaks about the brokers it lists and does not list.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum AnswerKind {
    /// DescribeCluster v2 with fenced brokers (Kafka 4.0+): the controller's own records of
    /// registration and fencing, as this broker replayed them. Unlisted = absent.
    DescribedAll = 0,
    /// DescribeCluster without fenced brokers: unlisted may be fenced.
    DescribedUnfenced = 1,
    /// Metadata: unlisted = absent (KRaft also leaves fenced brokers out).
    Listed = 2,
}

pub(super) fn answer_kind(probe: &BrokerProbe) -> Option<AnswerKind> {
    match (&probe.description, probe.metadata_view()) {
        (Some(Ok(d)), _) if d.includes_fenced => Some(AnswerKind::DescribedAll),
        (Some(Ok(_)), _) => Some(AnswerKind::DescribedUnfenced),
        (_, Some(_)) => Some(AnswerKind::Listed),
        _ => None,
    }
}

/// What the other brokers' answers say about one broker, by kind of answer.
#[derive(Clone, Copy, Default)]
pub(super) struct Votes {
    pub(super) registered: [u32; 3],
    pub(super) fenced: [u32; 3],
    pub(super) unlisted: [u32; 3],
}

impl Votes {
    /// The one definition of a broker's registration (verdicts, `/status`
    /// `listed_as_registered` and `broker_registered` all read it).
    ///
    /// "The controller's view" is what the watchdog can actually get from brokers: the
    /// registration and fencing records the active controller wrote, as each broker replays
    /// them and reports them in DescribeCluster v2 with fenced brokers. Controllers are not
    /// asked directly (their listener is usually closed to clients, and in KRaft the
    /// `controller_id` of Metadata and DescribeCluster names a random live broker, not the
    /// active controller). So the answers of that kind decide whenever any other broker gave
    /// one; only without any do Metadata lists and older DescribeCluster answers count.
    ///
    /// Either way a side needs a strict majority of those answers: one broker whose cache is
    /// behind must not make another guilty, so a tie (1:1 with three brokers) is `Unknown`.
    pub(super) fn decide(&self) -> Registration {
        let all = AnswerKind::DescribedAll as usize;
        let (registered, fenced, absent) =
            if self.registered[all] + self.fenced[all] + self.unlisted[all] > 0 {
                (self.registered[all], self.fenced[all], self.unlisted[all])
            } else {
                let (unfenced, listed) = (
                    AnswerKind::DescribedUnfenced as usize,
                    AnswerKind::Listed as usize,
                );
                (
                    self.registered[unfenced] + self.registered[listed],
                    self.fenced[unfenced] + self.unlisted[unfenced],
                    self.unlisted[listed],
                )
            };
        let total = registered + fenced + absent;
        if total == 0 {
            Registration::Unknown
        } else if registered * 2 > total {
            Registration::Registered
        } else if (fenced + absent) * 2 > total {
            if fenced >= absent {
                Registration::Fenced
            } else {
                Registration::Absent
            }
        } else {
            Registration::Unknown
        }
    }
}

/// How the other brokers see each probed broker (see `Votes::decide`); a broker's own
/// answer does not count.
///
/// Every answer lists every broker, so the input is brokers^2 entries; they are counted in
/// one pass into dense tables, and what an answer does not list is derived from how many
/// answers of each kind there were.
pub fn registrations(obs: &RoundObservation) -> BTreeMap<BrokerId, Registration> {
    #[derive(Clone, Copy, Default)]
    struct Tally {
        votes: Votes,
        /// Listed (registered or fenced) by answers of each kind.
        listed: [u32; 3],
        /// The kind of this broker's own answer, which does not count.
        own: Option<usize>,
        /// The last answer that listed it, so a duplicated entry counts once.
        stamp: usize,
    }
    // A thousand answers listing a thousand brokers: a million lookups of a listed broker.
    let mut tallies: crate::model::round::IdTable<Tally> = Default::default();
    for id in obs.probes.keys() {
        tallies.entry(*id);
    }
    let mut answers_of_kind = [0u32; 3];
    for (n, (source, probe)) in obs.probes.iter().enumerate() {
        let Some(kind) = answer_kind(probe) else {
            continue;
        };
        let kind = kind as usize;
        tallies.entry(*source).own = Some(kind);
        answers_of_kind[kind] += 1;
        let mut count = |id: BrokerId, fenced: bool| {
            let Some(t) = tallies.get_mut(id) else { return };
            if id == *source || t.stamp == n + 1 {
                return;
            }
            t.stamp = n + 1;
            t.listed[kind] += 1;
            if fenced {
                t.votes.fenced[kind] += 1;
            } else {
                t.votes.registered[kind] += 1;
            }
        };
        match (&probe.description, probe.metadata_view()) {
            (Some(Ok(d)), _) => d
                .brokers
                .iter()
                .for_each(|b| count(b.endpoint.id, b.fenced)),
            (_, Some(m)) => m.brokers.iter().for_each(|b| count(b.id, false)),
            _ => {}
        }
    }
    tallies
        .into_list()
        .into_iter()
        .map(|(id, t)| {
            let mut votes = t.votes;
            // Answers of each kind from the other brokers that did not list this one.
            for (k, unlisted) in votes.unlisted.iter_mut().enumerate() {
                let others = answers_of_kind[k] - u32::from(t.own == Some(k));
                *unlisted = others - t.listed[k];
            }
            (id, votes.decide())
        })
        .collect()
}

/// What this round's answers say about a broker that was not probed, decided by the same
/// rule as `registrations`. One pass over the answers per broker: only for the few that
/// are not probed.
pub(super) fn unprobed_votes(obs: &RoundObservation, id: BrokerId) -> Votes {
    let mut votes = Votes::default();
    for probe in obs.probes.values() {
        let Some(kind) = answer_kind(probe) else {
            continue;
        };
        let k = kind as usize;
        let listed = match (&probe.description, probe.metadata_view()) {
            (Some(Ok(d)), _) => d
                .brokers
                .iter()
                .find(|b| b.endpoint.id == id)
                .map(|b| b.fenced),
            (_, Some(m)) => m.brokers.iter().any(|b| b.id == id).then_some(false),
            _ => None,
        };
        match listed {
            Some(true) => votes.fenced[k] += 1,
            Some(false) => votes.registered[k] += 1,
            None => votes.unlisted[k] += 1,
        }
    }
    votes
}
