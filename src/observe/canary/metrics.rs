//! The canary's metric families: the cumulative ones `CanaryStats` adds to as writes and
//! reads happen (registered as they are at each scrape), and the gauges of one round
//! (`canary_topic_ready`, a partition's availability, overdue records, unavailability).

use std::collections::BTreeMap;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;

use super::stats::CanaryStats;
use super::{CanaryRound, TopicStatus};
use crate::model::metric_kit::{flag, gauge, set, BrokerLabels, ClusterLabels, GaugeFamily};
use crate::model::round::BrokerId;

/// A canary partition of a cluster.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PartitionLabels {
    pub cluster: String,
    pub partition: i32,
}

impl PartitionLabels {
    pub fn new(cluster: &str, partition: i32) -> Self {
        PartitionLabels {
            cluster: cluster.to_string(),
            partition,
        }
    }
}

/// A canary partition and the broker its writes are charged to (or that leads it).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PartitionBrokerLabels {
    pub cluster: String,
    pub partition: i32,
    pub broker: BrokerId,
}

impl PartitionBrokerLabels {
    pub fn new(cluster: &str, partition: i32, broker: BrokerId) -> Self {
        PartitionBrokerLabels {
            cluster: cluster.to_string(),
            partition,
            broker,
        }
    }
}

/// `canary_produce_total`: a partition's writes by outcome (`ok` or an error kind).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    #[prometheus(flatten)]
    pub at: PartitionBrokerLabels,
    pub outcome: String,
}

/// `canary_records_lost_total`: by the acks of the write and why the record counts as lost.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LossLabels {
    #[prometheus(flatten)]
    pub at: PartitionBrokerLabels,
    pub acks: &'static str,
    pub reason: &'static str,
}

/// `canary_charged_failures_total`: by the broker charged and the failure kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChargedLabels {
    pub cluster: String,
    pub broker: BrokerId,
    pub kind: String,
}

/// Registers the cumulative families as they stand; the registry reads them when it is
/// encoded.
pub fn encode(reg: &mut Registry, cs: &CanaryStats) {
    reg.register(
        "canary_produce_seconds",
        "Latency of acknowledged acks=all canary writes, by partition and leader",
        cs.produce_seconds.clone(),
    );
    reg.register(
        "canary_end_to_end_seconds",
        "Time from sending a canary record to reading it back, by partition and leader",
        cs.end_to_end_seconds.clone(),
    );
    reg.register(
        "partition_unavailable_seconds",
        "Lengths of closed windows during which a canary partition could not be written",
        cs.unavailable_seconds.clone(),
    );
    reg.register(
        "canary_broker_unavailable_seconds",
        "Lengths of closed canary unavailability windows, by the broker the failed writes went to (the leader when they were sent)",
        cs.broker_unavailable_seconds.clone(),
    );
    reg.register(
        "canary_unavailable_now",
        "1 while the canary partition is unwritable, on the series of the broker charged with it (the leader the failed writes went to); 0 after",
        cs.unavailable_now.clone(),
    );
    reg.register(
        "canary_charged_failures",
        "Failed or slow (kind slow) acks=all canary writes charged to the broker that had them: not refused to the watchdog, not a NOT_LEADER or NOT_ENOUGH_REPLICAS, not while that broker took acks=1 writes (then its followers held them)",
        cs.charged_failures_total.clone(),
    );
    reg.register(
        "canary_produce",
        "acks=all canary writes by partition, the broker that received them (else the leader they were sent to) and outcome (ok or an error kind)",
        cs.produce_total.clone(),
    );
    reg.register(
        "canary_records_lost",
        "Acknowledged canary records later missing from the log, by the broker that acknowledged them",
        cs.lost_total.clone(),
    );
    reg.register(
        "canary_records_duplicated",
        "Canary records read back more than once",
        cs.duplicated_total.clone(),
    );
}

/// The gauges of one round's canary, of every cluster.
pub struct RoundFamilies {
    ready: GaugeFamily<ClusterLabels>,
    available: GaugeFamily<PartitionBrokerLabels>,
    overdue: GaugeFamily<PartitionLabels>,
    unavailable_for: GaugeFamily<PartitionLabels>,
    last_window: GaugeFamily<PartitionLabels>,
    led: GaugeFamily<BrokerLabels>,
}

impl RoundFamilies {
    pub fn register(reg: &mut Registry) -> Self {
        RoundFamilies {
            ready: gauge(
                reg,
                "canary_topic_ready",
                "1 when the canary topic exists and the canary can write to it, else 0",
            ),
            available: gauge(
                reg,
                "canary_partition_available",
                "1 when the newest canary write to the partition that ended was acknowledged, else 0",
            ),
            overdue: gauge(
                reg,
                "canary_records_overdue",
                "Acknowledged canary records neither read back nor lost after lost_after",
            ),
            unavailable_for: gauge(
                reg,
                "partition_unavailable_for_seconds",
                "How long the canary partition has been unwritable (0 when it works)",
            ),
            last_window: gauge(
                reg,
                "partition_last_unavailable_seconds",
                "Length of the canary partition's last closed unavailability window",
            ),
            led: gauge(
                reg,
                "canary_partitions_led",
                "Canary partitions the broker leads (0: the canary cannot vouch for it)",
            ),
        }
    }

    /// One cluster's round: `last_window` is each partition's last closed window,
    /// `brokers` every broker with a verdict (each gets a `canary_partitions_led`, 0 too).
    pub fn record(
        &self,
        cluster: &str,
        canary: &CanaryRound,
        last_window: &BTreeMap<i32, f64>,
        brokers: impl IntoIterator<Item = BrokerId>,
    ) {
        set(
            &self.ready,
            ClusterLabels::new(cluster),
            flag(canary.status == TopicStatus::Ready),
        );
        for p in &canary.partitions {
            let part = || PartitionLabels::new(cluster, p.partition);
            set(
                &self.available,
                PartitionBrokerLabels::new(cluster, p.partition, p.leader),
                flag(p.produce_seconds.is_some()),
            );
            set(&self.overdue, part(), p.overdue as f64);
            set(
                &self.unavailable_for,
                part(),
                p.unavailable_seconds.unwrap_or(0.0),
            );
            set(
                &self.last_window,
                part(),
                last_window.get(&p.partition).copied().unwrap_or(0.0),
            );
        }
        for broker in brokers {
            let n = canary
                .partitions
                .iter()
                .filter(|p| p.leader == broker)
                .count();
            set(&self.led, BrokerLabels::new(cluster, broker), n as f64);
        }
    }
}
