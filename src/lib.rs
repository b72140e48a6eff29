//! kafka-watchdog: catches Kafka brokers that are alive at process and port level but serve
//! no working partition. Data flows one way: config -> probes -> observations -> verdicts ->
//! outputs.
//!
//! The modules in layers, earliest first. A module uses only modules of its own layer or of
//! earlier ones, and no modules use each other round a circle; `tests/layers.rs` reads this
//! table and checks both on every `crate::` path outside test code.
//!
//! | layer  | modules                                                    | what it is |
//! |--------|------------------------------------------------------------|------------|
//! | model  | observe, words, metric_kit                                 | plain data of a round, bounded labels |
//! | config | config                                                     | the configuration, read and checked |
//! | view   | cluster_view, health                                       | pure: answers merged into one view, partitions classified |
//! | io     | wire, host, self_metrics                                   | the Kafka protocol, /proc, the process's own use |
//! | probe  | probe, canary, liveness                                    | one round of observation (plans from the last view) |
//! | judge  | verdict, report, check                                     | pure verdicts and the round's report |
//! | alert  | incident, silence, remediate, notify, alerting             | incidents, silences, remediation, webhooks |
//! | serve  | metrics, status, http, status_view, snapshot               | /metrics, /status and their views |
//! | run    | preflight, setup, reload, service, daemon, silence_cmd     | the process: start, signals, reload, stop |

pub mod alerting;
pub mod canary;
pub mod check;
pub mod cluster_view;
pub mod config;
pub mod daemon;
pub mod health;
pub mod host;
pub mod http;
pub mod incident;
pub mod liveness;
pub mod metric_kit;
pub mod metrics;
#[cfg(test)]
mod metrics_golden;
pub mod notify;
pub mod observe;
pub mod preflight;
pub mod probe;
pub mod reload;
pub mod remediate;
pub mod report;
pub mod self_metrics;
pub mod service;
pub mod setup;
pub mod silence;
pub mod silence_cmd;
pub mod snapshot;
pub mod status;
pub mod status_view;
pub mod verdict;
pub mod wire;
pub mod words;
