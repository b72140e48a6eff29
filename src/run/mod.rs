//! Run: the process. Takes in the command line, the configuration file and signals; gives
//! out a started pipeline (preflight, setup, the round loop per cluster), reloads, a drained
//! stop, and the one-shot commands (`silence`).

pub mod cadence;
pub mod cluster_loop;
pub mod daemon;
pub mod logging;
pub mod preflight;
pub mod reload;
pub mod service;
pub mod setup;
