//! Model: the plain data every stage shares, with no behaviour beyond reading and printing it.
//! Takes in nothing from the crate; gives out a round's observations (brokers, partitions,
//! answers), bounded label words, the incident kinds, silence rules and the time formats of
//! the state files and webhooks, and the count of the watchdog's own tasks restarted.

pub mod coordinators;
pub mod kind;
pub mod metric_kit;
pub mod round;
pub mod silence;
pub mod task_restarts;
pub mod time;
pub mod words;
