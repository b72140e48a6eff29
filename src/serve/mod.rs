//! Serve: the outputs others read. Takes in the latest report, incidents, silences and the
//! process's own state; gives out /metrics, /status (and its JSON and text views), the
//! HTTP API for silences and the runbooks page.

pub mod http;
pub mod metrics;
#[cfg(test)]
mod metrics_golden;
pub mod runbooks;
pub mod snapshot;
pub mod status;
