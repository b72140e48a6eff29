//! `remediations_total` by cluster, broker and outcome. The family is always on the page,
//! so dashboards find it before any broker has remediation.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;

use super::Outcome;
use crate::model::metric_kit::{counter, CounterFamily};
use crate::model::round::BrokerId;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub cluster: String,
    pub broker: BrokerId,
    pub outcome: &'static str,
}

/// `counts` as `RemediationLog::counts` gives them.
pub fn encode(reg: &mut Registry, counts: &[((String, BrokerId, Outcome), u64)]) {
    let total: CounterFamily<OutcomeLabels> = counter(
        reg,
        "remediations",
        "Remediation decisions by cluster, broker and outcome (acted, failed, refused, dry_run)",
    );
    for ((cluster, broker, outcome), n) in counts {
        let labels = OutcomeLabels {
            cluster: cluster.clone(),
            broker: *broker,
            outcome: outcome.as_label(),
        };
        total.get_or_create(&labels).inc_by(*n);
    }
}
