//! The OAuth token endpoint's answers (token, error) and a broker's SASL error challenge.
//! The body is `kafka_watchdog::fuzz::oauth_token`, which `cargo test` also runs over every
//! file of corpus/oauth_token/.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kafka_watchdog::fuzz::oauth_token(data));
