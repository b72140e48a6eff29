//! kafka-watchdog: catches Kafka brokers that are alive at process and port level but serve
//! no working partition. Data flows one way: config -> probes -> observations -> verdicts ->
//! outputs.

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
pub mod metrics;
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
pub mod status;
pub mod status_view;
pub mod verdict;
pub mod wire;
