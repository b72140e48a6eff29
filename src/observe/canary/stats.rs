//! The canary's cumulative metrics: latency histograms and counters that must keep growing
//! across rounds (and scrapes), added to as writes and reads happen, and the live
//! "unavailable now" gauge. Other gauges are rendered from each round.

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

use super::metrics::{
    ChargedLabels, LossLabels, PartitionBrokerLabels, PartitionLabels, WriteLabels,
};
use super::window::{Charge, Window};
use super::LossEvent;
use crate::model::metric_kit::{BrokerLabels, CounterFamily, IntGaugeFamily};
use crate::model::round::BrokerId;

pub type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 1 ms to ~33 s: a healthy round trip is milliseconds, a timeout is seconds.
    Histogram::new([
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    ])
}

fn window_histogram() -> Histogram {
    // Unavailability windows: a leader election takes seconds, a lost broker minutes.
    Histogram::new([
        1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
    ])
}

/// Shared by every cluster's canary (which adds to it as writes and reads happen) and the
/// metrics renderer (which reads it). The evaluator does not touch it: it has no side
/// effects.
#[derive(Clone)]
pub struct CanaryStats {
    pub produce_seconds: HistogramFamily<PartitionBrokerLabels>,
    pub end_to_end_seconds: HistogramFamily<PartitionBrokerLabels>,
    pub unavailable_seconds: HistogramFamily<PartitionLabels>,
    /// Closed unavailability windows, by the broker they are charged to.
    pub broker_unavailable_seconds: HistogramFamily<BrokerLabels>,
    /// 1 while an unavailability window of the partition, charged to the broker, is open.
    pub unavailable_now: IntGaugeFamily<PartitionBrokerLabels>,
    pub produce_total: CounterFamily<WriteLabels>,
    /// Failed (or slow) acks=all writes charged to a broker, by kind (see `canary::charge`).
    pub charged_failures_total: CounterFamily<ChargedLabels>,
    pub lost_total: CounterFamily<LossLabels>,
    pub duplicated_total: CounterFamily<PartitionBrokerLabels>,
}

impl std::fmt::Debug for CanaryStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CanaryStats { .. }")
    }
}

impl Default for CanaryStats {
    fn default() -> Self {
        CanaryStats {
            produce_seconds: Family::new_with_constructor(latency_histogram),
            end_to_end_seconds: Family::new_with_constructor(latency_histogram),
            unavailable_seconds: Family::new_with_constructor(window_histogram),
            broker_unavailable_seconds: Family::new_with_constructor(window_histogram),
            unavailable_now: Family::default(),
            produce_total: Family::default(),
            charged_failures_total: Family::default(),
            lost_total: Family::default(),
            duplicated_total: Family::default(),
        }
    }
}

fn pb(cluster: &str, partition: i32, broker: BrokerId) -> PartitionBrokerLabels {
    PartitionBrokerLabels::new(cluster, partition, broker)
}

impl CanaryStats {
    /// Creates the series that must exist at zero before their first increase, so the
    /// first loss is an increase Prometheus can see.
    pub fn prime(&self, cluster: &str, partitions: impl Iterator<Item = (i32, BrokerId)>) {
        for (partition, leader) in partitions {
            let labels = pb(cluster, partition, leader);
            for acks in [super::record::Acks::All, super::record::Acks::One] {
                for reason in super::ledger::LossReason::ALL {
                    drop(self.lost_total.get_or_create(&LossLabels {
                        at: labels.clone(),
                        acks: acks.as_label(),
                        reason: reason.as_label(),
                    }));
                }
            }
            drop(self.duplicated_total.get_or_create(&labels));
            drop(
                self.unavailable_seconds
                    .get_or_create(&PartitionLabels::new(cluster, partition)),
            );
        }
    }

    /// One acks=all write ended, charged to `broker`; `ok_seconds` is its latency when it
    /// was acknowledged.
    pub fn write(
        &self,
        cluster: &str,
        partition: i32,
        broker: BrokerId,
        outcome: &str,
        ok_seconds: Option<f64>,
    ) {
        let labels = pb(cluster, partition, broker);
        if let Some(s) = ok_seconds {
            self.produce_seconds.get_or_create(&labels).observe(s);
        }
        self.produce_total
            .get_or_create(&WriteLabels {
                at: labels,
                outcome: outcome.to_string(),
            })
            .inc();
    }

    pub fn end_to_end(&self, cluster: &str, partition: i32, broker: BrokerId, seconds: f64) {
        self.end_to_end_seconds
            .get_or_create(&pb(cluster, partition, broker))
            .observe(seconds);
    }

    pub fn lost(&self, cluster: &str, loss: &LossEvent) {
        self.lost_total
            .get_or_create(&LossLabels {
                at: pb(cluster, loss.partition, loss.broker),
                acks: loss.acks.as_label(),
                reason: loss.reason,
            })
            .inc();
    }

    pub fn duplicated(&self, cluster: &str, partition: i32, broker: BrokerId) {
        self.duplicated_total
            .get_or_create(&pb(cluster, partition, broker))
            .inc();
    }

    /// A failed or slow write charged to `broker`.
    pub fn charged_failure(&self, cluster: &str, broker: BrokerId, kind: &str) {
        self.charged_failures_total
            .get_or_create(&ChargedLabels {
                cluster: cluster.to_string(),
                broker,
                kind: kind.to_string(),
            })
            .inc();
    }

    /// A window of `partition` opened (`open`) or closed; only a window charged to a broker
    /// has a series here.
    pub fn window_open(&self, cluster: &str, partition: i32, broker: Charge, open: bool) {
        if let Some(b) = broker {
            self.unavailable_now
                .get_or_create(&pb(cluster, partition, b))
                .set(i64::from(open));
        }
    }

    /// The partition is gone: its "unavailable now" series with it.
    pub fn forget_window(&self, cluster: &str, partition: i32, broker: BrokerId) {
        self.unavailable_now.remove(&pb(cluster, partition, broker));
    }

    pub fn window_closed(&self, cluster: &str, w: &Window) {
        self.window_open(cluster, w.partition, w.broker, false);
        self.unavailable_seconds
            .get_or_create(&PartitionLabels::new(cluster, w.partition))
            .observe(w.seconds());
        if let Some(b) = w.broker {
            self.broker_unavailable_seconds
                .get_or_create(&BrokerLabels::new(cluster, b))
                .observe(w.seconds());
        }
    }
}
