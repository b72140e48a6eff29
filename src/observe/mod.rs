//! Observe: one round of looking at the cluster. Takes in the configuration and the last
//! round's merged view (to plan which brokers and partitions to ask); gives out the round's
//! observations: every broker's own answers over the Kafka protocol, the canary's writes and
//! reads, liveness, host facts, the process's own use, and the answers merged into one
//! cluster view.

pub mod canary;
pub mod cluster_view;
pub mod coordinators;
pub mod host;
pub mod liveness;
pub mod own_health;
pub mod probe;
pub mod quorum;
pub mod self_metrics;
pub mod wire;
