//! The continuous liveness evidence (`crate::liveness`) merged into the round's verdicts.
//! Pure: the facts are data with wall-clock times and `now` is a parameter, so the same
//! function serves the round's evaluation and every re-evaluation between rounds.
//!
//! The facts this adds, each with how long it must hold:
//! - `no_answer` (zombie): silent on its open connection past its own threshold while a
//!   majority of its peers answer, and a fresh connection was accepted (or, after one was,
//!   timed out: its accept queue is full);
//! - `port_closed` (down): new connections refused;
//! - `restarting` (down): down within the restart grace and not answering yet while its port
//!   accepts (Kafka binds its port before it serves);
//! - `liveness_flapping` (degraded): silent past its threshold again and again in short
//!   spells (GC thrashing), answering in between.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::liveness::{LivenessFact, SideOutcome, FLAP_WINDOW};
use crate::observe::{BrokerId, BrokerProbe};

use super::{BrokerMemory, BrokerState, BrokerVerdict, RuleHit, VerdictSettings};

/// Spells within [`FLAP_WINDOW`] that make a broker that answers now `degraded`.
pub const FLAPPING_SPELLS: usize = 3;

/// Round hits that a newer answer on the liveness connection proves stale: they are about
/// the connection or ApiVersions, which the liveness check asks as well.
fn superseded_by_answer(rule: &str, probe: Option<&BrokerProbe>) -> bool {
    match rule {
        "port_closed" | "unreachable" => true,
        "no_answer" => probe
            .and_then(BrokerProbe::first_failure)
            .is_some_and(|(step, _)| step == "connect" || step == "api_versions"),
        _ => false,
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn millis(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

/// "silent past its threshold 5 times in the last 120 s (longest 2.1 s)", when it flaps.
fn flapping(fact: &LivenessFact, now: SystemTime) -> Option<(usize, String)> {
    let recent: Vec<_> = fact
        .spells
        .iter()
        .filter(|s| {
            now.duration_since(s.started)
                .is_ok_and(|ago| ago <= FLAP_WINDOW)
        })
        .collect();
    let longest = recent.iter().map(|s| s.length).max()?;
    Some((
        recent.len(),
        format!(
            "silent past its threshold {} time(s) in the last {} s (longest {})",
            recent.len(),
            FLAP_WINDOW.as_secs(),
            secs(longest)
        ),
    ))
}

/// What the liveness facts say of one broker now: the hit, and since when its fact holds.
fn live_hit(
    id: BrokerId,
    fact: &LivenessFact,
    facts: &BTreeMap<BrokerId, LivenessFact>,
    recently_down: Option<Duration>,
    now: SystemTime,
) -> Option<(RuleHit, SystemTime)> {
    let address = &fact.address;
    if let Some(since) = fact.refused_since {
        let ago = now.duration_since(since).unwrap_or_default();
        return Some((
            RuleHit {
                rule: "port_closed",
                state: BrokerState::Down,
                detail: format!(
                    "connection refused at {address} for {} (continuous liveness check): {}",
                    secs(ago),
                    fact.refused_detail
                ),
            },
            since,
        ));
    }
    if !fact.past_threshold(now) {
        let (n, words) = flapping(fact, now)?;
        if n < FLAPPING_SPELLS {
            return None;
        }
        let first = fact.spells.first().map_or(now, |s| s.started);
        return Some((
            RuleHit {
                rule: "liveness_flapping",
                state: BrokerState::Degraded,
                detail: format!(
                    "{address} answers again but was {words}: short silences again and again (GC thrashing, an overloaded request queue)"
                ),
            },
            first,
        ));
    }
    let since = fact.waiting_since?;
    let silent = now.duration_since(since).unwrap_or_default();
    let peers: Vec<&LivenessFact> = facts
        .iter()
        .filter(|(p, _)| **p != id)
        .map(|(_, f)| f)
        .collect();
    let answering: Vec<&&LivenessFact> = peers.iter().filter(|f| f.answering(now)).collect();
    let peer_latency = answering
        .iter()
        .filter_map(|f| f.last_latency)
        .max()
        .map(|d| format!(" (slowest last answer {})", millis(d)))
        .unwrap_or_default();
    let own = fact
        .typical
        .map(|d| format!("its slowest recent answer took {}", millis(d)))
        .unwrap_or_else(|| "it has not answered since the watchdog started".into());
    let silence = format!(
        "no answer to ApiVersions from {address} for {} (threshold {}; {own}) while {} of {} peer(s) answer{peer_latency}",
        secs(silent),
        secs(fact.threshold),
        answering.len(),
        peers.len()
    );
    if answering.len() * 2 <= peers.len() || peers.is_empty() {
        return Some((
            RuleHit {
                rule: "no_answer",
                state: BrokerState::Unknown,
                detail: format!(
                    "{silence}: without a majority of peers answering, the silence may be the watchdog's own network"
                ),
            },
            since,
        ));
    }
    let side = fact.side.as_ref()?;
    let port = match side.outcome {
        SideOutcome::Accepted => format!(
            "a fresh TCP connection was accepted in {}: accepted but silent",
            millis(side.after)
        ),
        SideOutcome::TimedOut if fact.accepted_in_silence => format!(
            "a fresh TCP connection timed out after {} after one was accepted in this silence: its accept queue is full",
            secs(side.after)
        ),
        // Refused is `refused_since` above. A connect that never completed from the start
        // is a host gone or a path cut: the round's rules say which, not this one.
        _ => return None,
    };
    if let Some(ago) = recently_down {
        return Some((
            RuleHit {
                rule: "restarting",
                state: BrokerState::Down,
                detail: format!(
                    "{silence}; {port}, {} after it was down: Kafka accepts connections before it serves while it starts",
                    secs(ago)
                ),
            },
            since,
        ));
    }
    let flaps = flapping(fact, now)
        .map(|(_, w)| format!("; before this it was {w}"))
        .unwrap_or_default();
    Some((
        RuleHit {
            rule: "no_answer",
            state: BrokerState::Zombie,
            detail: format!("{silence}; {port}{flaps}"),
        },
        since,
    ))
}

/// Merges the liveness facts into the verdicts computed from the round that started at
/// `round_at`. A liveness fact replaces the round's hit of the same rule; an answer newer
/// than the round drops the round's hits about the connection. A verdict whose state a
/// liveness fact decides carries `observed_at = now` and `held_since` (when the fact began),
/// so that the incident book confirms it by how long it has held, not by rounds.
pub fn apply_liveness(
    verdicts: &mut [BrokerVerdict],
    facts: &BTreeMap<BrokerId, LivenessFact>,
    probes: &BTreeMap<BrokerId, BrokerProbe>,
    memory: &BTreeMap<BrokerId, BrokerMemory>,
    settings: &VerdictSettings,
    round_at: SystemTime,
    now: SystemTime,
) {
    for v in verdicts.iter_mut() {
        let Some(fact) = facts.get(&v.broker) else {
            continue;
        };
        let probe = probes.get(&v.broker);
        let newer_answer = fact.last_answer_at.is_some_and(|t| t > round_at)
            && fact.waiting_since.is_none_or(|_| !fact.past_threshold(now))
            && fact.refused_since.is_none();
        if newer_answer {
            v.hits.retain(|h| !superseded_by_answer(h.rule, probe));
        }
        let recently_down = memory
            .get(&v.broker)
            .and_then(|m| m.last_down_at)
            .and_then(|t| now.duration_since(t).ok())
            .filter(|ago| *ago < settings.restart_grace);
        if let Some((hit, since)) = live_hit(v.broker, fact, facts, recently_down, now) {
            // The port accepted during this silence: a connect that timed out in the round
            // was the full accept queue, not a host gone.
            let accepted = fact.accepted_in_silence && fact.refused_since.is_none();
            v.hits
                .retain(|h| h.rule != hit.rule && !(accepted && h.rule == "unreachable"));
            if hit.state >= v.hits.first().map_or(BrokerState::Healthy, |h| h.state) {
                v.observed_at = Some(now);
                v.held_since = Some(since);
            }
            v.hits.push(hit);
        }
        v.hits.sort_by_key(|h| std::cmp::Reverse(h.state));
        v.state = v.hits.first().map_or(BrokerState::Healthy, |h| h.state);
    }
}
