//! The group coordinator probe's families, per broker: the shards it leads, its last
//! answer's latency, probes unanswered in a row and shards answering a coordinator error.

use prometheus_client::registry::Registry;

use crate::model::coordinators::{CoordinatorObservation, ShardProbe};
use crate::model::metric_kit::{gauge, set, BrokerLabels, GaugeFamily};

pub struct Families {
    shards: GaugeFamily<BrokerLabels>,
    latency: GaugeFamily<BrokerLabels>,
    unanswered: GaugeFamily<BrokerLabels>,
    errors: GaugeFamily<BrokerLabels>,
}

impl Families {
    pub fn register(reg: &mut Registry) -> Self {
        Families {
            shards: gauge(
                reg,
                "group_coordinator_shards",
                "__consumer_offsets partitions the broker leads: the group coordinator shards it serves",
            ),
            latency: gauge(
                reg,
                "group_coordinator_probe_latency_seconds",
                "How long the broker's group coordinator took to answer the probe's OffsetFetch (for one synthetic group per shard it leads), at the last answer",
            ),
            unanswered: gauge(
                reg,
                "group_coordinator_unanswered_probes",
                "The probe's OffsetFetch requests in a row the broker's group coordinator left unanswered while the broker answered ApiVersions on another connection (2 or more: group_coordinator_stalled)",
            ),
            errors: gauge(
                reg,
                "group_coordinator_error_shards",
                "Shards of the broker whose synthetic group got a coordinator error (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) at the last answer",
            ),
        }
    }

    /// One cluster's look: every broker it probed, and every other broker with a verdict
    /// at 0 shards (leading no shard is a value, and the dashboard finds the families).
    pub fn record(&self, cluster: &str, look: Option<&CoordinatorObservation>, brokers: &[i32]) {
        let Some(look) = look else {
            return;
        };
        for b in brokers.iter().filter(|b| !look.brokers.contains_key(b)) {
            let labels = || BrokerLabels::new(cluster, *b);
            set(&self.shards, labels(), 0.0);
            set(&self.unanswered, labels(), 0.0);
            set(&self.errors, labels(), 0.0);
        }
        for l in look.brokers.values() {
            let labels = || BrokerLabels::new(cluster, l.broker);
            set(&self.shards, labels(), l.shards.len() as f64);
            if let ShardProbe::Answered { latency } = l.last {
                set(&self.latency, labels(), latency.as_secs_f64());
            }
            set(&self.unanswered, labels(), f64::from(l.unanswered_in_a_row));
            set(&self.errors, labels(), l.errors.len() as f64);
        }
    }
}
