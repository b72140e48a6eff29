//! Another watchdog's answer to /api/v1/peer: parsed, heard, its deliveries matched and its
//! silences merged. The body is `kafka_watchdog::fuzz::peer_answer`, which `cargo test`
//! also runs over every file of corpus/peer_answer/.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kafka_watchdog::fuzz::peer_answer(data));
