//! Slack's Web API answers (status, Retry-After, body), as the Slack bot judges them. The
//! body is `kafka_watchdog::fuzz::slack_answer`, which `cargo test` also runs over every
//! file of corpus/slack_answer/.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kafka_watchdog::fuzz::slack_answer(data));
