//! Silences from the API's request body or a saved silences.json, checked, shown, saved and
//! loaded again. The body is `kafka_watchdog::fuzz::silences`, which `cargo test` also runs
//! over every file of corpus/silences/.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kafka_watchdog::fuzz::silences(data));
