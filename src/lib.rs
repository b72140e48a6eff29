//! kafka-watchdog: catches Kafka brokers that are alive at process and port level but serve
//! no working partition. Data flows one way: config -> probes -> observations -> verdicts ->
//! outputs.

pub mod config;
pub mod observe;
pub mod wire;
