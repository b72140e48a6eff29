//! Catching up or stuck: a broker that replicates partitions but is in none of their ISRs
//! (and leads none) is either a follower that stopped replicating (incident 2's dead fetcher:
//! a zombie) or one that is copying a backlog: a broker just added and given replicas by a
//! reassignment, one restarted between two rounds, one back from a long outage. The time
//! since it was last seen down cannot tell them apart (a broker added or restarted between
//! rounds was never seen down, a long backlog outlasts any grace); evidence over rounds can:
//! its log end offsets grow while it fetches, and an ongoing reassignment names it.
//!
//! What is remembered is one measurement per broker out of every ISR (its log end offsets and
//! its leaders' high watermarks), when its logs last grew, and when it was first seen so.
//! Beside it, the other evidence over rounds of this issue: since when a broker has accepted
//! connections without answering (a frozen process, whose accept queue later fills up).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::Rule;
use crate::model::round::{BrokerId, FailureKind, ReplicaOffsets, RoundObservation};

use super::{BrokerMemory, BrokerVerdict};
use crate::judge::health::Reassigning;

/// What the verdict remembers of a broker while it is out of every ISR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatchUpMemory {
    /// The first round it was seen out of every ISR.
    pub since: SystemTime,
    /// The last round its logs grew (`since` until they do).
    pub progress_at: SystemTime,
    /// The latest measurement of each partition (a partition not measured in a round keeps
    /// its older value, so one failed answer does not erase the baseline).
    pub last: BTreeMap<(String, i32), ReplicaOffsets>,
}

/// What this round says about a broker out of every ISR, with what was remembered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatchUpFacts {
    /// Partitions measured this round.
    pub measured: usize,
    /// Offsets its logs grew since the last measurement, over partitions measured both times;
    /// None without an earlier measurement.
    pub grew: Option<i64>,
    /// How far its logs are behind its leaders' high watermarks, summed; None when no
    /// leader answered.
    pub behind: Option<i64>,
    /// How long its logs have not grown (since it was first seen out of every ISR, at most).
    pub stalled_for: Duration,
    /// Partitions an ongoing reassignment is adding it to, where known.
    pub adding: Option<u32>,
    /// Why something could not be measured.
    pub errors: Vec<String>,
}

/// Offsets grown from `before` to `now` over the partitions present in both; a log that
/// shrank (truncated after a leader change) counts as no growth.
fn growth(
    before: &BTreeMap<(String, i32), ReplicaOffsets>,
    now: &BTreeMap<(String, i32), ReplicaOffsets>,
) -> Option<i64> {
    let mut common = false;
    let mut grew = 0i64;
    for (k, n) in now {
        if let Some(b) = before.get(k) {
            common = true;
            grew = grew.saturating_add((n.log_end - b.log_end).max(0));
        }
    }
    common.then_some(grew)
}

fn behind(now: &BTreeMap<(String, i32), ReplicaOffsets>) -> Option<i64> {
    let gaps: Vec<i64> = now
        .values()
        .filter_map(|o| o.leader_high_watermark.map(|hw| (hw - o.log_end).max(0)))
        .collect();
    (!gaps.is_empty()).then(|| gaps.iter().sum())
}

/// The facts of one broker this round (pure: memory and `now` in, nothing kept).
pub fn facts(
    obs: &RoundObservation,
    id: BrokerId,
    memory: Option<&BrokerMemory>,
    now: SystemTime,
) -> CatchUpFacts {
    let remembered = memory.and_then(|m| m.catch_up.as_ref());
    let Some(p) = obs.followers.get(&id) else {
        return CatchUpFacts {
            stalled_for: remembered
                .and_then(|c| now.duration_since(c.progress_at).ok())
                .unwrap_or_default(),
            ..CatchUpFacts::default()
        };
    };
    let grew = remembered.and_then(|c| growth(&c.last, &p.offsets));
    let stalled_for = match (grew, remembered) {
        (Some(g), _) if g > 0 => Duration::ZERO,
        (_, Some(c)) => now.duration_since(c.progress_at).unwrap_or_default(),
        (_, None) => Duration::ZERO,
    };
    CatchUpFacts {
        measured: p.offsets.len(),
        grew,
        behind: behind(&p.offsets),
        stalled_for,
        adding: p.adding_to.as_ref().map(|l| l.len() as u32),
        errors: p.errors.clone(),
    }
}

/// The replicas this round does not count missing from an ISR: those ongoing reassignments
/// are adding (or a newer read showed settled), and those copying under the operator's
/// replication throttle while their broker's logs grow. A throttled move is planned work:
/// Kafka throttles a replica that falls behind even once it joined the ISR, so replicas
/// drop out of ISRs during one (the routine bench's add-broker phase paged for it). The
/// allowance ends as a reassignment's does, when the logs stand still for the catch-up
/// window; from then on the replica counts missing and the rules judge it as any other.
pub fn copying(
    obs: &RoundObservation,
    memory: &BTreeMap<BrokerId, BrokerMemory>,
    window: Duration,
    now: SystemTime,
) -> Reassigning {
    let mut r = Reassigning::from_followers(&obs.followers);
    for (id, p) in obs
        .followers
        .iter()
        .filter(|(_, p)| !p.throttled.is_empty())
    {
        if facts(obs, *id, memory.get(id), now).stalled_for >= window {
            continue;
        }
        for (topic, partition) in &p.throttled {
            r.insert(topic, *partition, *id);
        }
    }
    r
}

/// Keeps, after a round, what the next one needs: the measurement of every broker that the
/// rule found out of every ISR, and when its logs last grew; nothing for the others.
pub fn remember(
    memory: &mut BTreeMap<BrokerId, BrokerMemory>,
    obs: &RoundObservation,
    verdicts: &[BrokerVerdict],
    now: SystemTime,
) {
    for v in verdicts {
        let Some(m) = memory.get_mut(&v.broker) else {
            continue;
        };
        // A replica being added is measured as one out of every ISR is: the reassignment's
        // allowance ends when its logs stand still for the window.
        // And so is one copying under a replication throttle (see `copying`).
        let adding = obs.followers.get(&v.broker).is_some_and(|p| {
            p.adding_to.as_ref().is_some_and(|a| !a.is_empty()) || !p.throttled.is_empty()
        });
        if !adding && !v.hits.iter().any(|h| h.rule == Rule::OutOfEveryIsr) {
            // Only a round that saw it answer and not out of every ISR ends the window: a
            // round whose answer failed (an error in its Metadata, a timeout) says nothing
            // about its ISRs, and restarting the window there let a dead fetcher stay
            // `degraded` for as long as such rounds came often enough.
            if v.answered {
                m.catch_up = None;
            }
            continue;
        }
        let measured = obs.followers.get(&v.broker).map(|p| &p.offsets);
        let c = m.catch_up.get_or_insert_with(|| CatchUpMemory {
            since: now,
            progress_at: now,
            last: BTreeMap::new(),
        });
        let Some(offsets) = measured else { continue };
        if growth(&c.last, offsets).is_some_and(|g| g > 0) {
            c.progress_at = now;
        }
        for (k, o) in offsets {
            c.last.insert(k.clone(), *o);
        }
    }
}

/// Keeps, after a round, since when each broker has accepted TCP connections without
/// answering. A connect that then times out is the same episode (its accept queue filled up:
/// the kernel completes handshakes for a frozen process until the listen backlog is full),
/// so the mark stays; an answer, a refused port or any other failure ends it.
pub fn remember_silence(
    memory: &mut BTreeMap<BrokerId, BrokerMemory>,
    obs: &RoundObservation,
    now: SystemTime,
) {
    let cluster_invisible = !obs.probes.values().any(|p| p.answered());
    for (id, probe) in &obs.probes {
        let Some(m) = memory.get_mut(id) else {
            continue;
        };
        // Silence, not an answer it could not pass (TLS, SASL, an error code).
        let accepted_silently = probe.tcp_open()
            && !cluster_invisible
            && probe
                .first_failure()
                .is_some_and(|(_, e)| e.kind == FailureKind::Timeout);
        let connect_timed_out = probe
            .connect
            .as_ref()
            .is_err_and(|e| e.kind == FailureKind::Timeout);
        m.accepting_silently_since = if accepted_silently {
            Some(m.accepting_silently_since.unwrap_or(now))
        } else if connect_timed_out {
            m.accepting_silently_since
        } else {
            None
        };
    }
}
