//! The group coordinator's part of a broker's verdict: a coordinator that does not answer
//! while its broker does (`group_coordinator_stalled`), or that keeps answering a
//! coordinator error for shards the broker leads (`group_coordinator_failing`). Either
//! stops every consumer group hashed onto those shards from committing and rebalancing
//! while produce and fetch work: the broker is a zombie for the applications that use it.
//! The transaction coordinators likewise (`txn_coordinator_stalled`, also when a shard's
//! probe transaction does not end: CONCURRENT_TRANSACTIONS past `txn_stall_grace`;
//! `txn_coordinator_failing`): every transactional producer hashed onto those shards
//! cannot begin or end a transaction.
//! Pure: the look and `now` come in, hits go onto the verdicts.

use std::time::{Duration, SystemTime};

use crate::judge::verdict::{BrokerState, BrokerVerdict, Rule, RuleHit};
use crate::model::coordinators::{
    CoordinatorLook, CoordinatorObservation, ShardError, CONCURRENT_TRANSACTIONS,
};
use crate::model::round::BrokerId;

/// Every rule this module adds.
pub const RULES: [Rule; 4] = [
    Rule::GroupCoordinatorStalled,
    Rule::GroupCoordinatorFailing,
    Rule::TxnCoordinatorStalled,
    Rule::TxnCoordinatorFailing,
];

/// What differs between the two kinds of coordinator in their evidence.
struct Kind {
    stalled: Rule,
    failing: Rule,
    what: &'static str,
    topic: &'static str,
    probe: &'static str,
    harm: &'static str,
}

const GROUPS: Kind = Kind {
    stalled: Rule::GroupCoordinatorStalled,
    failing: Rule::GroupCoordinatorFailing,
    what: "group coordinator",
    topic: crate::observe::coordinators::OFFSETS_TOPIC,
    probe: "OffsetFetch for the groups",
    harm: "the consumer groups it coordinates cannot commit offsets or rebalance",
};

const TRANSACTIONS: Kind = Kind {
    stalled: Rule::TxnCoordinatorStalled,
    failing: Rule::TxnCoordinatorFailing,
    what: "transaction coordinator",
    topic: crate::observe::coordinators::TRANSACTIONS_TOPIC,
    probe: "the probe's transactions for the ids",
    harm: "the transactional producers it coordinates cannot begin or end a transaction",
};

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

/// The hits a broker's group coordinator look gives, with when the decisive one began.
pub fn coordinator_hits(
    look: &CoordinatorLook,
    rules: &CoordinatorRules,
    timeout: Duration,
    now: SystemTime,
) -> Vec<(RuleHit, SystemTime)> {
    hits_of(&GROUPS, look, rules, timeout, now)
}

/// The hits a broker's transaction coordinator look gives.
pub fn txn_coordinator_hits(
    look: &CoordinatorLook,
    rules: &CoordinatorRules,
    timeout: Duration,
    now: SystemTime,
) -> Vec<(RuleHit, SystemTime)> {
    hits_of(&TRANSACTIONS, look, rules, timeout, now)
}

/// The hits of one kind of coordinator: one that does not answer, one that does not end
/// transactions, one that answers errors.
fn hits_of(
    kind: &Kind,
    look: &CoordinatorLook,
    rules: &CoordinatorRules,
    timeout: Duration,
    now: SystemTime,
) -> Vec<(RuleHit, SystemTime)> {
    [
        unanswered_hit(kind, look, rules, timeout, now),
        unended_hit(kind, look, rules, now),
        failing_hit(kind, look, rules, now),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Whether a shard's error has lasted `grace` by `now`.
fn lasted(e: &ShardError, grace: Duration, now: SystemTime) -> bool {
    now.duration_since(e.since).unwrap_or_default() >= grace
}

/// The stalled hit of a coordinator whose probes went unanswered `stalled_after` times in a
/// row while its broker answered.
fn unanswered_hit(
    kind: &Kind,
    look: &CoordinatorLook,
    rules: &CoordinatorRules,
    timeout: Duration,
    now: SystemTime,
) -> Option<(RuleHit, SystemTime)> {
    if look.unanswered_in_a_row < rules.stalled_after || look.shards.is_empty() {
        return None;
    }
    let since = look.unanswered_since.unwrap_or(now);
    let control = look
        .control_latency
        .map(|l| format!("{:.0} ms", l.as_secs_f64() * 1000.0))
        .unwrap_or_else(|| "time".into());
    Some((
        RuleHit {
            rule: kind.stalled,
            state: BrokerState::Zombie,
            detail: format!(
                "its {} has not answered {} of {} partitions {} ({} probes of {:.1} s in a row, for {:.1} s) while it answered ApiVersions on another connection in {}: {}",
                kind.what,
                kind.probe,
                kind.topic,
                shard_list(look.shards.iter().copied()),
                look.unanswered_in_a_row,
                timeout.as_secs_f64(),
                now.duration_since(since).unwrap_or_default().as_secs_f64(),
                control,
                kind.harm,
            ),
        },
        since,
    ))
}

/// The stalled hit of a coordinator whose shards answered CONCURRENT_TRANSACTIONS past
/// `txn_stall_grace`.
fn unended_hit(
    kind: &Kind,
    look: &CoordinatorLook,
    rules: &CoordinatorRules,
    now: SystemTime,
) -> Option<(RuleHit, SystemTime)> {
    // A transaction that does not end: its commit markers are not being written.
    let unended: Vec<&ShardError> = look
        .errors
        .iter()
        .filter(|e| e.code == CONCURRENT_TRANSACTIONS && lasted(e, rules.txn_stall_grace, now))
        .collect();
    let first = unended.iter().map(|e| e.since).min()?;
    Some((
        RuleHit {
            rule: kind.stalled,
            state: BrokerState::Zombie,
            detail: format!(
                "its {} has not ended the probe's transactions of {} partitions {} (InitProducerId answers CONCURRENT_TRANSACTIONS for {:.1} s: the commit markers are not written): {}",
                kind.what,
                kind.topic,
                shard_list(unended.iter().map(|e| e.shard)),
                now.duration_since(first).unwrap_or_default().as_secs_f64(),
                kind.harm,
            ),
        },
        first,
    ))
}

/// The failing hit of a coordinator whose shards answered other errors past `error_grace`.
fn failing_hit(
    kind: &Kind,
    look: &CoordinatorLook,
    rules: &CoordinatorRules,
    now: SystemTime,
) -> Option<(RuleHit, SystemTime)> {
    let lasting: Vec<&ShardError> = look
        .errors
        .iter()
        .filter(|e| e.code != CONCURRENT_TRANSACTIONS && lasted(e, rules.error_grace, now))
        .collect();
    let first = lasting.iter().map(|e| e.since).min()?;
    let parts: Vec<String> = by_code(&lasting)
        .iter()
        .map(|(code, shards)| {
            format!(
                "{} for {} partitions {}",
                error_name(*code),
                kind.topic,
                shard_list(shards.iter().copied())
            )
        })
        .collect();
    Some((
        RuleHit {
            rule: kind.failing,
            state: BrokerState::Zombie,
            detail: format!(
                "its {} answers {} (for {:.0} s, while the cluster's metadata names it their leader): {}",
                kind.what,
                parts.join("; "),
                now.duration_since(first).unwrap_or_default().as_secs_f64(),
                kind.harm,
            ),
        },
        first,
    ))
}

/// The errors' shards grouped by error code, codes in the order they first appear.
fn by_code(errors: &[&ShardError]) -> Vec<(i16, Vec<i32>)> {
    let mut by_code: Vec<(i16, Vec<i32>)> = Vec::new();
    for e in errors {
        match by_code.iter_mut().find(|(c, _)| *c == e.code) {
            Some((_, shards)) => shards.push(e.shard),
            None => by_code.push((e.code, vec![e.shard])),
        }
    }
    by_code
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
        v.hits.retain(|h| !RULES.contains(&h.rule));
        let groups = look
            .brokers
            .get(&v.broker)
            .map(|l| coordinator_hits(l, rules, look.timeout, now));
        let txns = look
            .transactions
            .as_ref()
            .and_then(|t| t.brokers.get(&v.broker))
            .map(|l| txn_coordinator_hits(l, rules, look.timeout, now));
        if groups.is_none() && txns.is_none() {
            continue;
        }
        let hits: Vec<(RuleHit, SystemTime)> = groups.into_iter().chain(txns).flatten().collect();
        // A worse state than the broker's other evidence is held since the first of its
        // coordinator problems.
        let worst = hits.iter().map(|(h, _)| h.state).max();
        if let Some(worst) = worst.filter(|&w| w > v.state) {
            v.observed_at = Some(now);
            v.held_since = hits
                .iter()
                .filter(|(h, _)| h.state == worst)
                .map(|&(_, since)| since)
                .min();
        }
        v.hits.extend(hits.into_iter().map(|(hit, _)| hit));
        v.hits.sort_by_key(|h| std::cmp::Reverse(h.state));
        v.state = v.hits.first().map_or(BrokerState::Healthy, |h| h.state);
    }
}

/// The brokers the look finds a coordinator problem with, for a quick re-judgment.
pub fn troubled(look: &CoordinatorObservation) -> Vec<BrokerId> {
    let txns = look.transactions.iter().flat_map(|t| t.brokers.values());
    let mut out: Vec<BrokerId> = look
        .brokers
        .values()
        .chain(txns)
        .filter(|l| l.unanswered_in_a_row > 0 || !l.errors.is_empty())
        .map(|l| l.broker)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

pub mod metrics;

#[cfg(test)]
mod tests;
