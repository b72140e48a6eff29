//! The coordinator probes' families (group, and transaction when that probe is on), per
//! broker: the shards it leads, its last answer's latency, probes unanswered in a row and
//! shards answering a coordinator error.

use std::collections::BTreeMap;

use prometheus_client::registry::Registry;

use crate::model::coordinators::{CoordinatorLook, CoordinatorObservation, ShardProbe};
use crate::model::metric_kit::{gauge, set, BrokerLabels, GaugeFamily};

pub struct Families {
    groups: KindFamilies,
    transactions: KindFamilies,
}

/// One kind of coordinator's families.
struct KindFamilies {
    shards: GaugeFamily<BrokerLabels>,
    latency: GaugeFamily<BrokerLabels>,
    unanswered: GaugeFamily<BrokerLabels>,
    errors: GaugeFamily<BrokerLabels>,
}

impl Families {
    pub fn register(reg: &mut Registry) -> Self {
        Families {
            groups: KindFamilies {
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
            },
            transactions: KindFamilies {
                shards: gauge(
                    reg,
                    "txn_coordinator_shards",
                    "__transaction_state partitions the broker leads: the transaction coordinator shards it serves (with coordinators.transactions on)",
                ),
                latency: gauge(
                    reg,
                    "txn_coordinator_probe_latency_seconds",
                    "How long the broker's transaction coordinator took to run the probe's empty transactions (one per shard it leads: InitProducerId, AddOffsetsToTxn, EndTxn), at the last answer",
                ),
                unanswered: gauge(
                    reg,
                    "txn_coordinator_unanswered_probes",
                    "The probe's transaction rounds in a row the broker's transaction coordinator left unanswered while the broker answered ApiVersions on another connection (2 or more: txn_coordinator_stalled)",
                ),
                errors: gauge(
                    reg,
                    "txn_coordinator_error_shards",
                    "Shards of the broker whose probe transaction got a coordinator error or CONCURRENT_TRANSACTIONS (its last transaction not ended) at the last answer",
                ),
            },
        }
    }

    /// One cluster's look: every broker it probed, and every other broker with a verdict
    /// at 0 shards (leading no shard is a value, and the dashboard finds the families).
    pub fn record(&self, cluster: &str, look: Option<&CoordinatorObservation>, brokers: &[i32]) {
        let Some(look) = look else {
            return;
        };
        self.groups.record(cluster, &look.brokers, brokers);
        if let Some(t) = &look.transactions {
            self.transactions.record(cluster, &t.brokers, brokers);
        }
    }
}

impl KindFamilies {
    fn record(&self, cluster: &str, looks: &BTreeMap<i32, CoordinatorLook>, brokers: &[i32]) {
        for b in brokers.iter().filter(|b| !looks.contains_key(b)) {
            let labels = || BrokerLabels::new(cluster, *b);
            set(&self.shards, labels(), 0.0);
            set(&self.unanswered, labels(), 0.0);
            set(&self.errors, labels(), 0.0);
        }
        for l in looks.values() {
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
