//! Cli: the command line's side that is not the daemon. Takes in the arguments and a
//! configuration or a URL; gives out pages, answers and exit codes. `args` (the words),
//! `client` (finding a running daemon and calling it), `status_view` (its /status drawn for
//! a terminal), `silence` (its silences API), `commands` (each command, end to end).

pub mod args;
pub mod client;
pub mod commands;
pub mod silence;
pub mod status_view;
