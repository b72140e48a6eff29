//! kafka-lab: a real Apache Kafka cluster (jars from Maven Central, plain JVM processes on
//! loopback) with faults injected by broker id, for kafka-watchdog's tests and demo.

pub mod cage;
pub mod client;
pub mod cpu;
pub mod dist;
pub mod error;
pub mod lab;
pub mod logdirs;
pub mod netfault;
pub mod oauth;
pub mod quorum;
pub mod request;
pub mod scram;
pub mod secrets;
pub mod sink;
pub mod stall;
pub mod state;
pub mod sys;
pub mod topology;

pub use error::LabError;
pub use lab::{broker_address, lab_dir, Filled, Lab, NodeStatus, SessionLock, Stall, UpOptions};
pub use state::Fault;
pub use topology::{KafkaVersion, Role, Security};
