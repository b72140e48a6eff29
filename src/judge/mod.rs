//! Judge: pure verdicts, no I/O (`now` is a parameter). Takes in a round's observations and
//! merged view; gives out the partitions classified, a verdict per broker with its evidence,
//! and the round's report that alerting, /metrics, /status and `check` read.

pub mod certificates;
pub mod check;
pub mod coordinators;
pub mod health;
pub mod quorum;
pub mod report;
pub mod rule;
pub mod verdict;
