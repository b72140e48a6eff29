//! Host mode's series: the broker's process, ports and log directories as this host sees
//! them. Only brokers configured in host mode have them.

use std::collections::BTreeMap;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;

use crate::model::metric_kit::{
    flag, float_counter, gauge, set, BrokerLabels, FloatCounterFamily, GaugeFamily,
};
use crate::model::round::{BrokerId, HostObservation, ProcessState};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    #[prometheus(flatten)]
    pub broker: BrokerLabels,
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PortLabels {
    #[prometheus(flatten)]
    pub broker: BrokerLabels,
    /// As configured: `address:port` or `port`.
    pub port: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LogDirLabels {
    #[prometheus(flatten)]
    pub broker: BrokerLabels,
    pub path: String,
}

pub struct Families {
    up: GaugeFamily<BrokerLabels>,
    state: GaugeFamily<StateLabels>,
    cpu: FloatCounterFamily<BrokerLabels>,
    threads: GaugeFamily<BrokerLabels>,
    threads_io_wait: GaugeFamily<BrokerLabels>,
    fds: GaugeFamily<BrokerLabels>,
    listening: GaugeFamily<PortLabels>,
    free_bytes: GaugeFamily<LogDirLabels>,
    free_ratio: GaugeFamily<LogDirLabels>,
}

impl Families {
    pub fn register(reg: &mut Registry) -> Self {
        // The CPU counter comes first on the page, as it always has.
        let cpu = float_counter(
            reg,
            "host_process_cpu_seconds",
            "CPU time (user + system) of the broker's process, host mode",
        );
        Families {
            up: gauge(
                reg,
                "host_process_up",
                "1 when host mode finds the broker's process and it has not exited, else 0",
            ),
            state: gauge(
                reg,
                "host_process_state",
                "1 for the process's current state (running, sleeping, disk_sleep, stopped, traced, zombie, dead, idle, other), 0 for the others",
            ),
            cpu,
            threads: gauge(reg, "host_process_threads", "Threads of the broker's process"),
            threads_io_wait: gauge(
                reg,
                "host_process_threads_io_wait",
                "Threads of the broker's process in uninterruptible wait (D state)",
            ),
            fds: gauge(
                reg,
                "host_process_open_fds",
                "Open file descriptors of the broker's process (absent when they cannot be read)",
            ),
            listening: gauge(
                reg,
                "host_port_listening",
                "1 when something listens on the configured port (address:port or port), else 0",
            ),
            free_bytes: gauge(
                reg,
                "host_log_dir_free_bytes",
                "Bytes the broker can still write in the log directory's file system",
            ),
            free_ratio: gauge(
                reg,
                "host_log_dir_free_ratio",
                "Free fraction (0 to 1) of the log directory's file system",
            ),
        }
    }

    /// One cluster's round of host observations.
    pub fn record(&self, cluster: &str, host: &BTreeMap<BrokerId, HostObservation>) {
        for (broker, h) in host {
            let b = || BrokerLabels::new(cluster, *broker);
            // A failed look says nothing; its series are left out rather than zeroed.
            if h.error.is_some() {
                continue;
            }
            let alive = h.process.as_ref().filter(|p| !p.state.has_exited());
            set(&self.up, b(), flag(alive.is_some()));
            for s in ProcessState::ALL {
                let now = h.process.as_ref().is_some_and(|p| p.state == s);
                let labels = StateLabels {
                    broker: b(),
                    state: s.as_label(),
                };
                set(&self.state, labels, flag(now));
            }
            if let Some(p) = &h.process {
                self.cpu.get_or_create(&b()).inc_by(p.cpu_seconds);
                set(&self.threads, b(), f64::from(p.threads));
                if let Some(d) = p.threads_in_io_wait {
                    set(&self.threads_io_wait, b(), f64::from(d));
                }
                if let Some(n) = p.open_fds {
                    set(&self.fds, b(), n as f64);
                }
            }
            for port in &h.ports {
                let labels = PortLabels {
                    broker: b(),
                    port: port.port.clone(),
                };
                set(&self.listening, labels, flag(port.listening));
            }
            for d in &h.log_dirs {
                let labels = LogDirLabels {
                    broker: b(),
                    path: d.path.clone(),
                };
                if let Some(free) = d.free_bytes {
                    set(&self.free_bytes, labels.clone(), free as f64);
                }
                if let Some(ratio) = d.free_ratio {
                    set(&self.free_ratio, labels, ratio);
                }
            }
        }
    }
}
