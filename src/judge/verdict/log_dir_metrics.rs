//! The brokers' log directories as they describe them (DescribeLogDirs): usable and total
//! bytes (Kafka 3.3+) and whether Kafka took the directory offline.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;

use crate::model::metric_kit::{flag, gauge, set, GaugeFamily};
use crate::model::round::{BrokerId, BrokerProbe};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BrokerDirLabels {
    pub cluster: String,
    pub broker: String,
    /// As for host mode's `host_log_dir_*`.
    pub path: String,
}

pub struct Families {
    usable: GaugeFamily<BrokerDirLabels>,
    total: GaugeFamily<BrokerDirLabels>,
    offline: GaugeFamily<BrokerDirLabels>,
}

impl Families {
    pub fn register(reg: &mut Registry) -> Self {
        Families {
            usable: gauge(
                reg,
                "broker_log_dir_usable_bytes",
                "Bytes still usable in the broker's log directory, as the broker describes it (DescribeLogDirs v4, Kafka 3.3+)",
            ),
            total: gauge(
                reg,
                "broker_log_dir_total_bytes",
                "Size of the broker's log directory's file system, as the broker describes it (DescribeLogDirs v4, Kafka 3.3+)",
            ),
            offline: gauge(
                reg,
                "broker_log_dir_offline",
                "1 when the broker answers KAFKA_STORAGE_ERROR for the log directory (Kafka took it offline: a failed or full disk), else 0",
            ),
        }
    }

    pub fn record<'a>(
        &self,
        cluster: &str,
        probes: impl IntoIterator<Item = (&'a BrokerId, &'a BrokerProbe)>,
    ) {
        for (id, p) in probes {
            let Some(Ok(dirs)) = &p.log_dirs else {
                continue;
            };
            for d in dirs {
                let labels = || BrokerDirLabels {
                    cluster: cluster.to_string(),
                    broker: id.to_string(),
                    path: d.dir.clone(),
                };
                set(&self.offline, labels(), flag(d.error_code != 0));
                if let Some(u) = d.usable_bytes {
                    set(&self.usable, labels(), u as f64);
                }
                if let Some(t) = d.total_bytes {
                    set(&self.total, labels(), t as f64);
                }
            }
        }
    }
}
