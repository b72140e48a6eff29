//! kafka-watchdog: catches Kafka brokers that are alive at process and port level but serve
//! no working partition. Data flows one way: config -> probes -> observations -> verdicts ->
//! outputs.

pub mod cluster_view;
pub mod config;
pub mod health;
pub mod observe;
pub mod verdict;
pub mod wire;
