//! The listener certificates' families: each broker's certificate expiry, as a timestamp
//! (rules compare it with `time()`), and how many issuers a cluster's brokers present.

use prometheus_client::registry::Registry;

use super::CertificatesReport;
use crate::model::metric_kit::{gauge, set, BrokerLabels, ClusterLabels, GaugeFamily};

pub struct Families {
    expiry: GaugeFamily<BrokerLabels>,
    issuers: GaugeFamily<ClusterLabels>,
}

impl Families {
    pub fn register(reg: &mut Registry) -> Self {
        Families {
            expiry: gauge(
                reg,
                "broker_certificate_expiry_timestamp_seconds",
                "Unix time at which the TLS certificate the broker's listener last presented expires (its notAfter)",
            ),
            issuers: gauge(
                reg,
                "cluster_certificate_issuers",
                "Distinct issuers of the certificates the cluster's brokers present (more than 1: a rotation half done, or a broker on another CA)",
            ),
        }
    }

    pub fn record(&self, cluster: &str, report: Option<&CertificatesReport>) {
        let Some(r) = report else {
            return;
        };
        for b in &r.brokers {
            let at = b
                .certificate
                .not_after
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            set(
                &self.expiry,
                BrokerLabels::new(cluster, b.broker),
                at.as_secs_f64(),
            );
        }
        set(
            &self.issuers,
            ClusterLabels::new(cluster),
            r.issuers.len() as f64,
        );
    }
}
