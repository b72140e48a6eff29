//! Alert: what the verdicts mean for people. Takes in each round's report and the canary's
//! losses; gives out incidents (opened, held by hysteresis, resolved, kept on disk), silences,
//! guarded remediation, and webhook deliveries.

pub mod alerting;
pub mod incident;
pub mod notify;
pub mod remediate;
pub mod silence;
