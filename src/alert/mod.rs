//! Alert: what the verdicts mean for people. Takes in each round's report and the canary's
//! losses; gives out incidents (opened, held by hysteresis, resolved, kept on disk), silences,
//! guarded remediation, and webhook deliveries; with other watchdogs on the same clusters
//! (`peers`), silences shared with them and each event sent once to receivers that do not
//! deduplicate; and the watchdog's own dead man's switch (`heartbeat`).

pub mod alerting;
pub mod heartbeat;
pub mod incident;
pub mod notify;
pub mod peers;
pub mod remediate;
pub mod silence;
