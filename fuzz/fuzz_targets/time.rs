//! Durations, RFC 3339 times and Retry-After values; a time that parses must parse again
//! from its own rendering to the same instant. The body is `kafka_watchdog::fuzz::time`,
//! which `cargo test` also runs over every file of corpus/time/.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kafka_watchdog::fuzz::time(data));
