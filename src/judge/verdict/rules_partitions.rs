//! Rules on what the broker does for its partitions: fenced but serving, leadership a
//! newer epoch gave away, out of the ISRs, followers that cannot replicate from it, metadata
//! behind the cluster's, answers slower than its peers'.

use super::facts::{BrokerFacts, Named};
use super::{hit, Registration, RuleHit, VerdictSettings};
use crate::judge::rule::{BrokerState, Rule};

pub(super) fn fenced_but_serving(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    if !f.probe.answered() {
        return None;
    }
    let why = match f.registration {
        Registration::Fenced if f.fencing_reported => "the controller has fenced it",
        Registration::Absent if f.fencing_reported => {
            "the other brokers do not list it as registered"
        }
        // Kafka before 4.0 reports no fencing: a broker that DescribeCluster v0-1 or Metadata
        // leaves out may be fenced or unregistered. Say what cannot be seen, not a guess.
        Registration::Fenced | Registration::Absent => {
            "the other brokers do not list it as registered (their Kafka reports no fencing \
             before 4.0: fenced or unregistered cannot be told apart)"
        }
        _ => return None,
    };
    // A broker that was down moments ago answers before it has registered and caught up:
    // that is a restart, not a zombie.
    if f.recently_down {
        return hit(
            Rule::FencedButServing,
            BrokerState::Degraded,
            format!("answers clients but {why} (restarted recently: registering)"),
        );
    }
    hit(
        Rule::FencedButServing,
        BrokerState::Zombie,
        format!("answers clients but {why}: it serves no partition"),
    )
}

pub(super) fn stale_leader(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    if f.stale_leader_of.is_empty() {
        return None;
    }
    let n = f.stale_leader_of.len();
    let sample: Vec<&str> = f
        .stale_leader_of
        .iter()
        .take(5)
        .map(String::as_str)
        .collect();
    hit(
        Rule::StaleLeader,
        BrokerState::Zombie,
        format!(
            "still claims leadership of {n} partition(s) that a newer leader epoch gave to another broker (split brain): {}{}",
            sample.join(", "),
            if n > sample.len() { ", ..." } else { "" }
        ),
    )
}

pub(super) fn out_of_every_isr(f: &BrokerFacts, s: &VerdictSettings) -> Option<RuleHit> {
    let p = &f.partitions;
    if !f.probe.answered()
        || p.replica_of == 0
        || p.leader_of > 0
        || p.missing_from_isr < p.replica_of
    {
        return None;
    }
    // Catching up (a broker added by a reassignment, restarted between rounds, back from a
    // long outage) and stuck (a dead fetcher) look the same in one round; only its logs over
    // rounds tell them apart. Until they have been still for the window: degraded.
    let c = &f.catch_up;
    let base = format!(
        "alive and answering, but missing from the ISR of all {} partition(s) it replicates and leads none",
        p.replica_of
    );
    let behind = match c.behind {
        Some(b) => format!(", {b} offset(s) behind its leaders"),
        None => String::new(),
    };
    let window = s.catch_up_window.as_secs();
    let (state, why) = if let Some(n) = c.adding.filter(|n| *n > 0) {
        (
            BrokerState::Degraded,
            format!(
                "catching up: an ongoing reassignment is adding it to {n} partition(s){behind}"
            ),
        )
    } else if c.measured == 0 {
        (
            BrokerState::Degraded,
            format!(
                "whether it catches up cannot be measured ({})",
                if c.errors.is_empty() {
                    "not measured this round".to_string()
                } else {
                    c.errors.join("; ")
                }
            ),
        )
    } else if let Some(g) = c.grew.filter(|g| *g > 0) {
        (
            BrokerState::Degraded,
            format!("catching up: its logs grew by {g} offset(s) since the last round{behind}"),
        )
    } else if c.behind.is_none() {
        // Its logs can only grow while a leader serves them.
        (
            BrokerState::Degraded,
            format!(
                "its logs have not grown for {} s, but no leader of its partitions answered: it has nothing to fetch from",
                c.stalled_for.as_secs()
            ),
        )
    } else if c.stalled_for < s.catch_up_window {
        (
            BrokerState::Degraded,
            format!(
                "watching whether it catches up: its logs have not grown for {} s of {window} s{behind}",
                c.stalled_for.as_secs()
            ),
        )
    } else {
        (
            BrokerState::Zombie,
            format!(
                "its logs have not grown for {} s{behind}: it does not replicate",
                c.stalled_for.as_secs()
            ),
        )
    };
    hit(Rule::OutOfEveryIsr, state, format!("{base}; {why}"))
}

/// "t-0 (leader 1), t-1 (leader 1), ..." with at most five named.
pub(super) fn sample_list(items: &Named) -> String {
    format!(
        "{}{}",
        items.shown.join(", "),
        if items.len() > items.shown.len() {
            ", ..."
        } else {
            ""
        }
    )
}

pub(super) fn out_of_some_isrs(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let p = &f.partitions;
    // Missing from an ISR whose leader is the suspect says nothing against this broker.
    if p.missing_from_isr == 0 || f.lagging.is_empty() || !f.probe.tcp_open() {
        return None;
    }
    let min = if p.causes_under_min_isr > 0 {
        format!(
            ", {} of them now under min.insync.replicas",
            p.causes_under_min_isr
        )
    } else {
        String::new()
    };
    hit(
        Rule::OutOfSomeIsrs,
        BrokerState::Degraded,
        format!(
            "missing from the ISR of {} of the {} partition(s) it replicates{min}: {}",
            p.missing_from_isr,
            p.replica_of,
            sample_list(&f.lagging)
        ),
    )
}

pub(super) fn followers_cannot_replicate(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    if f.followers_lost.is_empty() {
        return None;
    }
    hit(
        Rule::FollowersCannotReplicate,
        BrokerState::Degraded,
        format!(
            "the followers of {} partition(s) it leads dropped out of the ISR, and the evidence points at this leader, not at them: {}",
            f.followers_lost.len(),
            sample_list(&f.followers_lost)
        ),
    )
}

/// A broker whose Raft fetch keeps up with the metadata log (the quorum's leader says so)
/// while its own answers miss leadership changes the quorum committed: its metadata loader
/// does not apply what it receives. It is never fenced (its heartbeat runs) and never
/// learns of a change, so partitions the controller moves onto it have no leader that
/// serves them, and a controlled shutdown waiting on it hangs.
pub(super) fn stale_metadata(f: &BrokerFacts, s: &VerdictSettings) -> Option<RuleHit> {
    let behind = f.behind.filter(|b| b.partitions > 0)?;
    let fetch = f.metadata_fetch?;
    let fetching = fetch
        .last_fetch_ago
        .is_some_and(|a| a < s.metadata_fetch_lag);
    let caught_up = fetch
        .last_caught_up_ago
        .is_some_and(|a| a < s.metadata_caught_up);
    if !f.probe.answered() || !fetching || !caught_up {
        return None;
    }
    let more = behind.partitions as usize - behind.shown.len().min(behind.partitions as usize);
    hit(
        Rule::StaleMetadata,
        BrokerState::Zombie,
        format!(
            "its metadata misses {} leadership change(s) the quorum committed, {} of them onto itself: {}{}; yet its Raft fetch keeps up (log end offset {}, fetched {:.1} s and caught up {:.1} s before the leader's answer): it receives the metadata log and does not apply it",
            behind.partitions,
            behind.own,
            behind.shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            },
            fetch.log_end_offset,
            fetch.last_fetch_ago.unwrap_or_default().as_secs_f64(),
            fetch.last_caught_up_ago.unwrap_or_default().as_secs_f64(),
        ),
    )
}

/// Rules that read registration, the staleness of metadata, or what fencing does to
/// leaderships, ISRs and the canary: while the control plane is out (nothing can change)
/// and for a while after it moved (a failover or a recovery fences and registers brokers
/// again in one batch), they would call brokers zombie or degraded for the control plane's
/// fault, which the controller's or the quorum's incident names. A broker that does not
/// answer is still named: the liveness and reachability rules are never spared.
pub const SETTLING_SPARED: &[Rule] = &[
    Rule::FencedButServing,
    Rule::StaleMetadata,
    Rule::MetadataDisagreement,
    Rule::StaleLeader,
    Rule::OutOfEveryIsr,
    Rule::OutOfSomeIsrs,
    Rule::FollowersCannotReplicate,
    Rule::CanaryWritesFail,
    Rule::CanaryNotEnoughReplicas,
];

/// Takes the `SETTLING_SPARED` rules out of each verdict and decides its state again.
pub fn spare_while_settling(verdicts: &mut [super::BrokerVerdict]) {
    for v in verdicts {
        let before = v.hits.len();
        v.hits.retain(|h| !SETTLING_SPARED.contains(&h.rule));
        if v.hits.len() != before {
            v.state = v.hits.first().map_or(BrokerState::Healthy, |h| h.state);
        }
    }
}

pub(super) fn metadata_disagreement(f: &BrokerFacts, s: &VerdictSettings) -> Option<RuleHit> {
    // The same fact as stale_metadata, when the quorum says why.
    if stale_metadata(f, s).is_some() {
        return None;
    }
    (f.disagreements > 0 && f.stale_leader_of.is_empty())
        .then(|| {
            hit(
                Rule::MetadataDisagreement,
                BrokerState::Degraded,
                format!(
                    "its metadata names a different leader than the newest view for {} partition(s): its cache is behind",
                    f.disagreements
                ),
            )
        })
        .flatten()
}

pub(super) fn slow(f: &BrokerFacts, s: &VerdictSettings) -> Option<RuleHit> {
    let own = f.probe.metadata_latency()?;
    let median = f.peer_median_latency?;
    let limit = median
        .mul_f64(s.latency_degraded_factor)
        .max(s.latency_floor);
    (own > limit)
        .then(|| {
            hit(
                Rule::Slow,
                BrokerState::Degraded,
                format!(
                    "Metadata took {:.0} ms, peers' median {:.0} ms",
                    own.as_secs_f64() * 1000.0,
                    median.as_secs_f64() * 1000.0
                ),
            )
        })
        .flatten()
}

/// A replica that a reassignment is adding is copying, not missing (the partitions do not
/// count it), but the allowance has the catch-up window's limit: one whose logs stand still
/// that long while its leaders are ahead is not being added, whatever the reassignment
/// says (a dead fetcher on the broker a reassignment moves partitions to).
pub(super) fn reassignment_stalled(f: &BrokerFacts, s: &VerdictSettings) -> Option<RuleHit> {
    let c = &f.catch_up;
    let n = c.adding.filter(|n| *n > 0)?;
    let behind = c.behind.filter(|b| *b > 0)?;
    if !f.probe.answered() || c.grew.is_none() || c.stalled_for < s.catch_up_window {
        return None;
    }
    hit(
        Rule::ReassignmentStalled,
        BrokerState::Zombie,
        format!(
            "an ongoing reassignment is adding it to {n} partition(s), but its logs have not grown for {} s, {behind} offset(s) behind its leaders: it does not replicate",
            c.stalled_for.as_secs()
        ),
    )
}
