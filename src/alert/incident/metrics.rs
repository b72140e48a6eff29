//! `incidents_open`: open incidents by cluster, kind and severity, every combination of a
//! configured cluster present (at zero when none is open), so "no incident" is a value and
//! not an absence. `broker_incident_state` and `controller_incident_state`: the state of each
//! broker's and controller's open incident, the one state webhooks, remediation and the
//! alert rules act on.

use std::collections::BTreeMap;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;

use super::{FindingKind, Incident, Subject};
use crate::config::Severity;
use crate::model::metric_kit::{gauge, set, BrokerLabels, BrokerStateLabels, GaugeFamily};
use crate::model::round::BrokerId;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpenLabels {
    pub cluster: String,
    pub kind: &'static str,
    pub severity: &'static str,
}

pub fn encode(reg: &mut Registry, clusters: &[String], incidents: &[Incident]) {
    let open: GaugeFamily<OpenLabels> = gauge(
        reg,
        "incidents_open",
        "Open incidents by cluster, kind and severity",
    );
    let mut counts: BTreeMap<(String, &'static str, &'static str), u64> = BTreeMap::new();
    for cluster in clusters {
        for kind in FindingKind::ALL {
            for severity in [Severity::Warning, Severity::Critical] {
                counts.insert((cluster.clone(), kind.as_str(), severity.as_str()), 0);
            }
        }
    }
    for i in incidents {
        *counts
            .entry((i.cluster.clone(), i.kind.as_str(), i.severity.as_str()))
            .or_insert(0) += 1;
    }
    for ((cluster, kind, severity), n) in counts {
        let labels = OpenLabels {
            cluster,
            kind,
            severity,
        };
        set(&open, labels, n as f64);
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerStateLabels {
    pub cluster: String,
    pub controller: String,
    pub state: &'static str,
}

/// The states a broker or controller incident opens with (a lagging controller is told as
/// degraded).
const PAGED_STATES: [&str; 3] = ["degraded", "zombie", "down"];

/// 1 for the state of a broker's open incident, 0 for the others, for every broker a report
/// names and every broker with an open incident. `broker_state` is the verdict of the
/// moment; this is the verdict once confirmed (`open_after_secs`) and until resolved
/// (`resolve_after_secs`), as webhooks announce it: alert rules on it need no `for:`.
pub fn encode_broker_states(
    reg: &mut Registry,
    brokers: impl IntoIterator<Item = (String, BrokerId)>,
    incidents: &[Incident],
) {
    let family: GaugeFamily<BrokerStateLabels> = gauge(
        reg,
        "broker_incident_state",
        "The state of the broker's open incident (1), the verdict as confirmed and announced; 0 for the other states",
    );
    let of_broker = |i: &Incident| {
        (i.kind == FindingKind::Broker)
            .then_some(i.broker)
            .flatten()
    };
    for ((cluster, broker, state), v) in incident_states(brokers, incidents, of_broker) {
        let labels = BrokerStateLabels {
            broker: BrokerLabels::new(&cluster, broker),
            state,
        };
        set(&family, labels, v);
    }
}

/// The same for controllers (issue 25): 1 for the state of a controller's open incident, for
/// every controller the control plane's look names and every one with an open incident.
pub fn encode_controller_states(
    reg: &mut Registry,
    controllers: impl IntoIterator<Item = (String, BrokerId)>,
    incidents: &[Incident],
) {
    let family: GaugeFamily<ControllerStateLabels> = gauge(
        reg,
        "controller_incident_state",
        "The state of the controller's open incident (1; a lagging controller is degraded), the verdict as confirmed and announced; 0 for the other states",
    );
    let of_controller = |i: &Incident| match (i.kind, i.subject) {
        (FindingKind::Controller, Subject::Controller(id)) => Some(id),
        _ => None,
    };
    for ((cluster, controller, state), v) in incident_states(controllers, incidents, of_controller)
    {
        let labels = ControllerStateLabels {
            cluster,
            controller: controller.to_string(),
            state,
        };
        set(&family, labels, v);
    }
}

/// Every (cluster, node, paged state) of the nodes listed and of the nodes `node_of` finds an
/// open incident for: 1 for the state of that incident, 0 for the others.
fn incident_states(
    nodes: impl IntoIterator<Item = (String, BrokerId)>,
    incidents: &[Incident],
    node_of: impl Fn(&Incident) -> Option<BrokerId>,
) -> BTreeMap<(String, BrokerId, &'static str), f64> {
    let mut values: BTreeMap<(String, BrokerId, &'static str), f64> = BTreeMap::new();
    for (cluster, node) in nodes {
        for state in PAGED_STATES {
            values.insert((cluster.clone(), node, state), 0.0);
        }
    }
    for i in incidents {
        let (Some(node), Some(state)) = (node_of(i), i.state) else {
            continue;
        };
        for s in PAGED_STATES {
            values.entry((i.cluster.clone(), node, s)).or_insert(0.0);
        }
        values.insert((i.cluster.clone(), node, state.as_label()), 1.0);
    }
    values
}
