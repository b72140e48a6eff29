//! `incidents_open`: open incidents by cluster, kind and severity, every combination of a
//! configured cluster present (at zero when none is open), so "no incident" is a value and
//! not an absence.

use std::collections::BTreeMap;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;

use super::{FindingKind, Incident};
use crate::config::Severity;
use crate::metric_kit::{gauge, set, GaugeFamily};

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
