//! Rules on the watchdog's own access: an answer kept from it by authentication or by a
//! protocol it cannot speak is its own problem, not news about the broker.

use super::facts::BrokerFacts;
use super::{hit, RuleHit, VerdictSettings};
use crate::judge::rule::{BrokerState, Rule};
use crate::model::round::FailureKind;

/// Failures that are the watchdog's own access or compatibility problem, not news about the
/// broker: its credentials or certificates were refused (or the broker's certificate is not
/// one it trusts), or it cannot decode what the broker said. The broker may be perfectly
/// healthy for its own clients, so these never make a zombie.
pub fn access_rule(kind: FailureKind) -> Option<Rule> {
    match kind {
        FailureKind::Authentication | FailureKind::Authorization | FailureKind::Tls => {
            Some(Rule::AuthFailed)
        }
        FailureKind::Protocol => Some(Rule::ProtocolError),
        _ => None,
    }
}

/// The rules whose hits are the watchdog's own access problems (see `access_rule`).
pub const ACCESS_RULES: [Rule; 2] = [Rule::AuthFailed, Rule::ProtocolError];

/// The step and failure that kept the watchdog from an answer, when it is an access problem.
fn access_failure<'a>(
    f: &'a BrokerFacts,
) -> Option<(Rule, &'static str, &'a crate::model::round::ProbeFailure)> {
    if f.probe.answered() {
        return None;
    }
    let (step, e) = f.probe.first_failure()?;
    access_rule(e.kind).map(|rule| (rule, step, e))
}

/// The step and failure that kept the watchdog from an answer when the broker said nothing:
/// not a refusal of the watchdog's access (`access_rule`) nor a Kafka error for the whole
/// request (`request_error`), both of which are answers.
pub(super) fn silent_failure<'a>(
    f: &'a BrokerFacts,
) -> Option<(&'static str, &'a crate::model::round::ProbeFailure)> {
    let (step, e) = f.probe.first_failure()?;
    (access_rule(e.kind).is_none() && e.kind != FailureKind::KafkaError).then_some((step, e))
}

pub(super) fn auth_failed(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let refused_rights =
        access_failure(f).is_some_and(|(_, _, e)| e.kind == FailureKind::Authorization);
    let (cannot, advice) = if refused_rights {
        (
            "is not authorized by",
            "grant the watchdog's principal the rights it needs (Describe on the cluster and on every topic: docs/install.md, section Least privilege on clusters with ACLs). This is the watchdog's access, not a verdict on the broker",
        )
    } else {
        (
            "cannot get in to",
            "check the watchdog's credentials and certificates, and this broker's certificate. This is the watchdog's access, not a verdict on the broker",
        )
    };
    access_hit(f, Rule::AuthFailed, cannot, advice)
}

pub(super) fn protocol_error(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    access_hit(
        f,
        Rule::ProtocolError,
        "cannot understand",
        "a compatibility problem between the watchdog and this broker's version, not a verdict on the broker",
    )
}

/// The hit of access rule `rule` when the broker's first failure is of its kind.
pub(super) fn access_hit(
    f: &BrokerFacts,
    rule: Rule,
    cannot: &str,
    advice: &str,
) -> Option<RuleHit> {
    let (found, step, e) = access_failure(f)?;
    if found != rule {
        return None;
    }
    hit(
        rule,
        BrokerState::Unknown,
        format!(
            "the watchdog {cannot} {}: {step} failed: {} ({}); {advice}",
            f.probe.endpoint.address(),
            e.kind.as_label(),
            e.detail
        ),
    )
}
