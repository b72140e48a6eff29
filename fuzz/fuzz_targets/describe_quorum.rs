//! DescribeQuorum answers over several looks at three controllers and a broker, folded by
//! the quorum prober, judged and rendered. The body is
//! `kafka_watchdog::fuzz::describe_quorum`, which `cargo test` also runs over every file of
//! corpus/describe_quorum/.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kafka_watchdog::fuzz::describe_quorum(data));
