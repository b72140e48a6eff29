//! Rules on reaching the broker: a port that refuses, a connect that fails or times out,
//! a broker that accepts connections and answers nothing, a cluster nobody answers in.

use super::facts::BrokerFacts;
use super::rules_access::{access_rule, silent_failure};
use super::{hit, Registration, RuleHit, VerdictSettings};
use crate::judge::rule::{BrokerState, Rule};
use crate::model::round::FailureKind;

pub(super) fn closed(kind: FailureKind) -> bool {
    matches!(
        kind,
        FailureKind::ConnectionRefused | FailureKind::Unresolvable
    )
}

/// The rule of a broker whose port refuses connections: `shut_down_cleanly` when it was
/// leader and in-sync replica of nothing as its port closed (Kafka's controlled shutdown moves
/// leadership away and takes it out of the ISRs before the listener stops; a crash or a kill
/// leaves both until the controller notices), `port_closed` otherwise.
pub fn refusal_rule(leads: u32, cluster_invisible: bool) -> Rule {
    if leads == 0 && !cluster_invisible {
        Rule::ShutDownCleanly
    } else {
        Rule::PortClosed
    }
}

pub(super) fn port_closed(f: &BrokerFacts, s: &VerdictSettings) -> Option<RuleHit> {
    let Err(e) = &f.probe.connect else {
        return None;
    };
    if !closed(e.kind) {
        return None;
    }
    let rule = refusal_rule(f.holds_in_cluster, f.cluster_invisible);
    if rule == Rule::ShutDownCleanly {
        return hit(
            rule,
            BrokerState::Down,
            format!(
                "{} at {}, and it leads no partition and is in no ISR: a controlled shutdown (a restart, a maintenance stop); paged only if it is not back within {} s ({})",
                e.kind.as_label().replace('_', " "),
                f.probe.endpoint.address(),
                s.restart_grace.as_secs(),
                e.detail
            ),
        );
    }
    hit(
        Rule::PortClosed,
        BrokerState::Down,
        format!(
            "{} at {}: {}",
            e.kind.as_label().replace('_', " "),
            f.probe.endpoint.address(),
            e.detail
        ),
    )
}

pub(super) fn unreachable(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let Err(e) = &f.probe.connect else {
        return None;
    };
    // A refused certificate is an answer: the port is reached (`auth_failed` says it).
    if closed(e.kind)
        || f.cluster_invisible
        || access_rule(e.kind).is_some()
        || accept_queue_full(f)
    {
        return None;
    }
    if process_alive(f) {
        // Host mode sees the process: the host is not gone, whatever the cluster says.
        return hit(
            Rule::Unreachable,
            BrokerState::Degraded,
            format!(
                "no TCP connection to {} ({}), yet its process is alive on this host",
                f.probe.endpoint.address(),
                e.detail
            ),
        );
    }
    if f.registration == Registration::Registered {
        // The cluster still sees it heartbeating: the fault may be on the watchdog's path.
        hit(
            Rule::Unreachable,
            BrokerState::Degraded,
            format!(
                "no TCP connection to {} ({}), yet the cluster lists it as registered",
                f.probe.endpoint.address(),
                e.detail
            ),
        )
    } else if f.registration == Registration::Unknown {
        // The other brokers are split on it: a tie convicts nobody.
        hit(
            Rule::Unreachable,
            BrokerState::Degraded,
            format!(
                "no TCP connection to {} ({}); the other brokers disagree on whether it is registered",
                f.probe.endpoint.address(),
                e.detail
            ),
        )
    } else {
        hit(
            Rule::Unreachable,
            BrokerState::Down,
            format!(
                "no TCP connection to {} ({}) and the cluster does not list it",
                f.probe.endpoint.address(),
                e.detail
            ),
        )
    }
}

pub(super) fn cluster_invisible(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let refused = f.probe.connect.as_ref().is_err_and(|e| closed(e.kind));
    if !f.cluster_invisible || refused {
        return None;
    }
    hit(
        Rule::ClusterInvisible,
        BrokerState::Unknown,
        "no broker of the cluster answered this round; the fault may be the watchdog's own network"
            .into(),
    )
}

/// The connect timed out after the broker had accepted connections without answering: the
/// same frozen process, whose listen backlog is now full (the kernel completes handshakes
/// for a stopped process until then). A host that is gone also times out, but it was not
/// accepting silently the round before; a port that refuses ends the episode.
pub(super) fn accept_queue_full(f: &BrokerFacts) -> bool {
    let timed_out = f
        .probe
        .connect
        .as_ref()
        .is_err_and(|e| e.kind == FailureKind::Timeout);
    timed_out && f.accepting_silently_for.is_some()
}

/// Host mode shows its process there and not exited: whatever the network says, the host
/// is not gone.
pub(super) fn process_alive(f: &BrokerFacts) -> bool {
    f.host
        .and_then(|h| h.process.as_ref())
        .is_some_and(|p| !p.state.has_exited())
}

/// The broker answered, but with a Kafka error for the whole request: it is alive and its
/// request path works, so it is no zombie; what it said is still wrong for its clients.
pub(super) fn request_error(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    if f.cluster_invisible || f.probe.answered() {
        return None;
    }
    let (step, e) = f.probe.first_failure()?;
    if e.kind != FailureKind::KafkaError {
        return None;
    }
    hit(
        Rule::RequestError,
        BrokerState::Degraded,
        format!(
            "{} answers, but {step} failed for the whole request: {}",
            f.probe.endpoint.address(),
            e.detail
        ),
    )
}

pub(super) fn no_answer(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    if f.cluster_invisible || f.probe.answered() {
        return None;
    }
    if accept_queue_full(f) {
        let e = f.probe.connect.as_ref().err()?;
        let secs = f.accepting_silently_for.unwrap_or_default().as_secs();
        return hit(
            Rule::NoAnswer,
            BrokerState::Zombie,
            format!(
                "TCP connect to {} timed out after {:.1} s: its accept queue is full, after it accepted connections without answering for {secs} s ({})",
                f.probe.endpoint.address(),
                e.after.as_secs_f64(),
                e.detail
            ),
        );
    }
    if !f.probe.tcp_open() {
        return None;
    }
    let (step, e) = silent_failure(f)?;
    let connect_ms = f
        .probe
        .connect
        .as_ref()
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0);
    hit(
        Rule::NoAnswer,
        BrokerState::Zombie,
        format!(
            "TCP connect to {} succeeded in {connect_ms:.0} ms but {step} failed: {} after {:.1} s ({})",
            f.probe.endpoint.address(),
            e.kind.as_label(),
            e.after.as_secs_f64(),
            e.detail
        ),
    )
}
