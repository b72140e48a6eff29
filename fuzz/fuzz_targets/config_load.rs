//! The configuration loader on arbitrary text: every input must end in a `Config` or a list
//! of problems, never a panic, a stack overflow or a hang. The body is
//! `kafka_watchdog::fuzz::config_load`, which `cargo test` also runs over every file of
//! corpus/config_load/.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kafka_watchdog::fuzz::config_load(data));
