//! Rules on the canary's writes the broker received as leader: failed writes, and
//! acks=all writes refused for lack of replication where the evidence points at it.

use super::facts::BrokerFacts;
use super::{hit, RuleHit, VerdictSettings};
use crate::judge::rule::{BrokerState, Rule};

pub(super) fn canary_writes_fail(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let c = &f.canary;
    if c.failed.is_empty() {
        if c.failed_elsewhere.is_empty() {
            return None;
        }
        return hit(
            Rule::CanaryWritesFail,
            BrokerState::Degraded,
            format!(
                "canary writes sent to it as the partition's leader failed, and the newest view names another leader: {}",
                c.failed_elsewhere.join(", ")
            ),
        );
    }
    let all = c.failed.len() as u32 >= c.led && f.probe.answered();
    let state = if all {
        BrokerState::Zombie
    } else {
        BrokerState::Degraded
    };
    let detail = if all {
        format!(
            "answers requests, but every canary write to the {} partition(s) it leads failed: {}",
            c.led,
            c.failed.join(", ")
        )
    } else {
        format!(
            "canary writes failed on {} of the {} partition(s) it leads: {}",
            c.failed.len(),
            c.led,
            c.failed.join(", ")
        )
    };
    hit(Rule::CanaryWritesFail, state, detail)
}

pub(super) fn canary_not_enough_replicas(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    if f.canary.blamed.is_empty() {
        return None;
    }
    hit(
        Rule::CanaryNotEnoughReplicas,
        BrokerState::Degraded,
        format!(
            "canary acks=all writes fail for lack of in-sync replicas (NOT_ENOUGH_REPLICAS, or a timeout while the leader takes acks=1 writes) and the evidence points at this broker: {}",
            f.canary.blamed.join(", ")
        ),
    )
}
