//! Webhook delivery: notifications by receiver and outcome, the queue waiting per receiver,
//! and the last successful delivery.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;

use super::NotifierStats;
use crate::model::metric_kit::{counter, gauge, secs, set, CounterFamily, GaugeFamily};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReceiverLabels {
    pub receiver: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeliveryLabels {
    pub receiver: String,
    /// `ok`, `failed` (and retried) or `dropped`.
    pub outcome: &'static str,
}

pub fn encode(reg: &mut Registry, stats: &NotifierStats) {
    let deliveries: CounterFamily<DeliveryLabels> = counter(
        reg,
        "webhook_deliveries",
        "Webhook notifications by receiver and outcome (ok, failed and retried, dropped)",
    );
    let depth: GaugeFamily<ReceiverLabels> = gauge(
        reg,
        "webhook_queue_depth",
        "Notifications waiting per receiver",
    );
    let last: GaugeFamily<ReceiverLabels> = gauge(
        reg,
        "webhook_last_success_timestamp_seconds",
        "Unix time of the receiver's last successful delivery",
    );
    for r in &stats.receivers {
        let receiver = || ReceiverLabels {
            receiver: r.receiver.clone(),
        };
        for (outcome, n) in r.deliveries() {
            let labels = DeliveryLabels {
                receiver: r.receiver.clone(),
                outcome,
            };
            deliveries.get_or_create(&labels).inc_by(n);
        }
        set(&depth, receiver(), r.queue_depth as f64);
        if let Some(t) = r.last_success {
            set(&last, receiver(), secs(t));
        }
    }
}
