//! kafka-watchdog: catches Kafka brokers that are alive at process and port level but serve
//! no working partition. Data flows one way: config -> probes -> observations -> verdicts ->
//! outputs.
//!
//! Each folder of src/ is a stage of that pipeline, earliest first. A module uses only modules
//! of its own stage or of earlier ones, and no modules use each other round a circle;
//! `tests/layers.rs` reads this table and checks both on every `crate::` and `super::` path
//! outside test code. Each stage's mod.rs says what it takes in and gives out.
//!
//! | stage   | modules                                                     | what it is |
//! |---------|-------------------------------------------------------------|------------|
//! | sys     | -                                                           | the calls into C (libc, librdkafka) behind safe functions: the one module allowed `unsafe` |
//! | model   | kind, round, silence, schedule, task_restarts, supervise, progress, time, words, metric_kit, coordinators, blocking, own_health | plain data every stage shares: a round's observations, incident kinds, silence rules; the watchdog's own tasks supervised and their progress; blocking work's way off the runtime |
//! | config  | -                                                           | the configuration, read and checked |
//! | observe | wire, host, self_metrics, own_health, liveness, cluster_view, quorum, coordinators, probe, canary | one round of observation over the Kafka protocol and /proc, merged into one view |
//! | judge   | own_health, rule, health, quorum, coordinators, certificates, verdict, report, finding, check | pure: the states and rules, partitions classified, verdicts per broker, the round's report |
//! | alert   | incident, silence, remediate, peers, notify, heartbeat, alerting | incidents, silences, remediation, webhooks, the heartbeat |
//! | serve   | metrics, status, snapshot, runbooks, http                   | /metrics, /status, /runbooks and the HTTP API |
//! | run     | preflight, setup, reload, service, cadence, cluster_loop, logging, daemon | the process: start, signals, reload, stop |
//! | cli     | args, client, status_view, silence, commands                | the command line besides the daemon: parsing, the daemon's client, terminal pages |
//! | fuzz    | -                                                           | the fuzz targets' bodies (`fuzz/`): each parser of outside input, called as the daemon calls it |

#![deny(unsafe_code)]

pub mod alert;
pub mod cli;
pub mod config;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzz;
pub mod judge;
pub mod model;
pub mod observe;
pub mod run;
pub mod serve;
pub mod sys;
