//! Judge: pure verdicts, no I/O (`now` is a parameter). Takes in a round's observations and
//! merged view; gives out the partitions classified, a verdict per broker with its evidence,
//! and the round's report that alerting, /metrics, /status and `check` read; and the
//! round's findings (what is wrong, keyed for the incident book), the canary's among them.

pub mod certificates;
pub mod check;
pub mod coordinators;
pub mod finding;
pub mod health;
pub mod own_health;
pub mod quorum;
pub mod report;
pub mod rule;
pub mod verdict;
