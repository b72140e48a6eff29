//! `silences_active` per cluster (a silence of every cluster counts in each) and
//! `incidents_silenced` by cluster and kind, both at zero when there are none.

use std::time::SystemTime;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;

use super::Silence;
use crate::alert::incident::Incident;
use crate::model::kind::FindingKind;
use crate::model::metric_kit::{gauge, set, ClusterLabels, GaugeFamily};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub cluster: String,
    pub kind: &'static str,
}

/// `now` decides which silences are in force.
pub fn encode(
    reg: &mut Registry,
    clusters: &[String],
    silences: &[Silence],
    incidents: &[Incident],
    now: SystemTime,
) {
    let active: GaugeFamily<ClusterLabels> = gauge(
        reg,
        "silences_active",
        "Silences in force now, by cluster (a silence of every cluster counts in each)",
    );
    let silenced: GaugeFamily<KindLabels> = gauge(
        reg,
        "incidents_silenced",
        "Open incidents under a silence: shown, not sent, not remediated",
    );
    for cluster in clusters {
        let n = silences
            .iter()
            .filter(|s| s.is_active(now) && s.cluster.as_ref().is_none_or(|c| c == cluster))
            .count();
        set(&active, ClusterLabels::new(cluster), n as f64);
        for kind in FindingKind::ALL {
            let n = incidents
                .iter()
                .filter(|i| i.cluster == *cluster && i.kind == kind && i.silenced.is_some())
                .count();
            let labels = KindLabels {
                cluster: cluster.clone(),
                kind: kind.as_str(),
            };
            set(&silenced, labels, n as f64);
        }
    }
}
