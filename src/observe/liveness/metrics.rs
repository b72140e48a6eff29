//! The continuous liveness check's gauges, from the facts a report's verdicts were made
//! with: how long a broker had been silent then, its last answer's latency, its threshold.

use std::collections::BTreeMap;
use std::time::SystemTime;

use prometheus_client::registry::Registry;

use crate::model::metric_kit::{gauge, set, BrokerLabels, GaugeFamily};
use crate::model::round::{BrokerId, LivenessFact};

pub struct Families {
    silence: GaugeFamily<BrokerLabels>,
    latency: GaugeFamily<BrokerLabels>,
    threshold: GaugeFamily<BrokerLabels>,
}

impl Families {
    pub fn register(reg: &mut Registry) -> Self {
        Families {
            silence: gauge(
                reg,
                "broker_liveness_silence_seconds",
                "How long the broker's oldest liveness request had waited for an answer when the verdicts were last made (0 while it answers)",
            ),
            latency: gauge(
                reg,
                "broker_liveness_latency_seconds",
                "How long the broker's last answer to the continuous liveness check took",
            ),
            threshold: gauge(
                reg,
                "broker_liveness_threshold_seconds",
                "Silence beyond this is evidence against the broker (its floor, or 4x its slowest recent answer)",
            ),
        }
    }

    /// One cluster's facts, as of `evaluated_at` (when its verdicts were made).
    pub fn record(
        &self,
        cluster: &str,
        facts: &BTreeMap<BrokerId, LivenessFact>,
        evaluated_at: SystemTime,
    ) {
        for (id, f) in facts {
            let b = || BrokerLabels::new(cluster, *id);
            let silent = f.silent_for(evaluated_at).unwrap_or_default();
            set(&self.silence, b(), silent.as_secs_f64());
            if let Some(l) = f.last_latency {
                set(&self.latency, b(), l.as_secs_f64());
            }
            set(&self.threshold, b(), f.threshold.as_secs_f64());
        }
    }
}
