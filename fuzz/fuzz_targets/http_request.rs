//! Raw bytes a client sends the HTTP server, served by the connection handler without a
//! socket, under each way the server can be set up. The body is
//! `kafka_watchdog::fuzz::http_request`, which `cargo test` also runs over every file of
//! corpus/http_request/.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kafka_watchdog::fuzz::http_request(data));
