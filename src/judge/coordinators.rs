//! The group coordinator's part of a broker's verdict: a coordinator that does not answer
//! while its broker does (`group_coordinator_stalled`), or that keeps answering a
//! coordinator error for shards the broker leads (`group_coordinator_failing`). Either
//! stops every consumer group hashed onto those shards from committing and rebalancing
//! while produce and fetch work: the broker is a zombie for the applications that use it.
//! Pure: the look and `now` come in, hits go onto the verdicts.

use std::time::{Duration, SystemTime};

use crate::judge::verdict::{BrokerState, BrokerVerdict, RuleHit};
use crate::model::coordinators::{CoordinatorLook, CoordinatorObservation, ShardError};
use crate::model::round::BrokerId;

pub const STALLED: &str = "group_coordinator_stalled";
pub const FAILING: &str = "group_coordinator_failing";

// The settings sit with the verdict's (`VerdictSettings::coordinators`), which carry them.
pub use crate::judge::verdict::CoordinatorRules;

/// Shards as the evidence shows them: the first few and how many.
fn shard_list(shards: impl Iterator<Item = i32>) -> String {
    let all: Vec<i32> = shards.collect();
    let shown: Vec<String> = all.iter().take(8).map(i32::to_string).collect();
    if all.len() > shown.len() {
        format!("{} and {} more", shown.join(", "), all.len() - shown.len())
    } else {
        shown.join(", ")
    }
}

fn error_name(code: i16) -> String {
    crate::observe::wire::kafka_error_name(code)
}

/// The hits a broker's coordinator look gives, with when the decisive one began.
pub fn coordinator_hits(
    look: &CoordinatorLook,
    rules: &CoordinatorRules,
    timeout: Duration,
    now: SystemTime,
) -> Vec<(RuleHit, SystemTime)> {
    let mut hits = Vec::new();
    if look.unanswered_in_a_row >= rules.stalled_after && !look.shards.is_empty() {
        let since = look.unanswered_since.unwrap_or(now);
        let control = look
            .control_latency
            .map(|l| format!("{:.0} ms", l.as_secs_f64() * 1000.0))
            .unwrap_or_else(|| "time".into());
        hits.push((
            RuleHit {
                rule: STALLED,
                state: BrokerState::Zombie,
                detail: format!(
                    "its group coordinator has not answered OffsetFetch for the groups of __consumer_offsets partitions {} ({} probes of {:.1} s in a row, for {:.1} s) while it answered ApiVersions on another connection in {}: the consumer groups it coordinates cannot commit offsets or rebalance",
                    shard_list(look.shards.iter().copied()),
                    look.unanswered_in_a_row,
                    timeout.as_secs_f64(),
                    now.duration_since(since).unwrap_or_default().as_secs_f64(),
                    control,
                ),
            },
            since,
        ));
    }
    let lasting: Vec<&ShardError> = look
        .errors
        .iter()
        .filter(|e| now.duration_since(e.since).unwrap_or_default() >= rules.error_grace)
        .collect();
    if let Some(first) = lasting.iter().map(|e| e.since).min() {
        let mut by_code: Vec<(i16, Vec<i32>)> = Vec::new();
        for e in &lasting {
            match by_code.iter_mut().find(|(c, _)| *c == e.code) {
                Some((_, shards)) => shards.push(e.shard),
                None => by_code.push((e.code, vec![e.shard])),
            }
        }
        let parts: Vec<String> = by_code
            .iter()
            .map(|(code, shards)| {
                format!(
                    "{} for __consumer_offsets partitions {}",
                    error_name(*code),
                    shard_list(shards.iter().copied())
                )
            })
            .collect();
        hits.push((
            RuleHit {
                rule: FAILING,
                state: BrokerState::Zombie,
                detail: format!(
                    "its group coordinator answers {} (for {:.0} s, while the cluster's metadata names it their leader): the consumer groups there cannot commit offsets or rebalance",
                    parts.join("; "),
                    now.duration_since(first).unwrap_or_default().as_secs_f64(),
                ),
            },
            first,
        ));
    }
    hits
}

/// Adds each broker's coordinator hits to its verdict and settles the state again.
pub fn apply(
    verdicts: &mut [BrokerVerdict],
    look: Option<&CoordinatorObservation>,
    rules: &CoordinatorRules,
    now: SystemTime,
) {
    let Some(look) = look else {
        return;
    };
    for v in verdicts.iter_mut() {
        v.hits.retain(|h| h.rule != STALLED && h.rule != FAILING);
        let Some(l) = look.brokers.get(&v.broker) else {
            continue;
        };
        for (hit, since) in coordinator_hits(l, rules, look.timeout, now) {
            if hit.state > v.state {
                v.observed_at = Some(now);
                v.held_since = Some(since);
            }
            v.hits.push(hit);
        }
        v.hits.sort_by_key(|h| std::cmp::Reverse(h.state));
        v.state = v.hits.first().map_or(BrokerState::Healthy, |h| h.state);
    }
}

/// The brokers the look finds a coordinator problem with, for a quick re-judgment.
pub fn troubled(look: &CoordinatorObservation) -> Vec<BrokerId> {
    look.brokers
        .values()
        .filter(|l| l.unanswered_in_a_row > 0 || !l.errors.is_empty())
        .map(|l| l.broker)
        .collect()
}

pub mod metrics;

#[cfg(test)]
mod tests;
