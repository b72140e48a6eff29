//! The canary's cumulative metrics: latency histograms and counters that must keep growing
//! across rounds (and scrapes). Gauges are rendered from each round instead.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

use super::{CanaryRound, TopicStatus};

pub type Labels = Vec<(&'static str, String)>;
pub type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;
pub type CounterFamily = Family<Labels, Counter<u64>>;

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

/// Shared by the evaluator (which adds to it) and the metrics renderer (which reads it).
#[derive(Clone)]
pub struct CanaryStats {
    pub produce_seconds: HistogramFamily,
    pub end_to_end_seconds: HistogramFamily,
    pub unavailable_seconds: HistogramFamily,
    pub produce_total: CounterFamily,
    pub lost_total: CounterFamily,
    pub duplicated_total: CounterFamily,
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
            produce_total: CounterFamily::default(),
            lost_total: CounterFamily::default(),
            duplicated_total: CounterFamily::default(),
        }
    }
}

impl CanaryStats {
    /// Adds one round's results.
    pub fn record(&self, cluster: &str, round: &CanaryRound) {
        if round.status != TopicStatus::Ready && round.partitions.is_empty() {
            return;
        }
        let pb = |partition: i32, broker: i32| -> Labels {
            vec![
                ("cluster", cluster.to_string()),
                ("partition", partition.to_string()),
                ("broker", broker.to_string()),
            ]
        };
        for p in &round.partitions {
            let labels = pb(p.partition, p.leader);
            // Counters start at zero, so the first loss is an increase Prometheus can see.
            for acks in [super::record::Acks::All, super::record::Acks::One] {
                for reason in super::ledger::LossReason::ALL {
                    let mut l = labels.clone();
                    l.push(("acks", acks.as_label().to_string()));
                    l.push(("reason", reason.as_label().to_string()));
                    drop(self.lost_total.get_or_create(&l));
                }
            }
            drop(self.duplicated_total.get_or_create(&labels));
            drop(self.unavailable_seconds.get_or_create(&vec![
                ("cluster", cluster.to_string()),
                ("partition", p.partition.to_string()),
            ]));
            let outcome = match (&p.produce_seconds, &p.produce_error) {
                (Some(s), _) => {
                    self.produce_seconds.get_or_create(&labels).observe(*s);
                    "ok"
                }
                (None, Some(e)) => e.kind,
                (None, None) => continue,
            };
            let mut l = labels.clone();
            l.push(("outcome", outcome.to_string()));
            self.produce_total.get_or_create(&l).inc();
            for e2e in &p.end_to_end_seconds {
                self.end_to_end_seconds.get_or_create(&labels).observe(*e2e);
            }
        }
        for (partition, _leader, seconds) in &round.windows_closed {
            self.unavailable_seconds
                .get_or_create(&vec![
                    ("cluster", cluster.to_string()),
                    ("partition", partition.to_string()),
                ])
                .observe(*seconds);
        }
        for loss in &round.lost {
            let mut l = pb(loss.partition, loss.broker);
            l.push(("acks", loss.acks.as_label().to_string()));
            l.push(("reason", loss.reason.to_string()));
            self.lost_total.get_or_create(&l).inc();
        }
        for (partition, broker) in &round.duplicated {
            self.duplicated_total
                .get_or_create(&pb(*partition, *broker))
                .inc();
        }
    }
}
