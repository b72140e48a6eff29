//! DescribeLogDirs answers over several looks, judged (failed directories, the free-space
//! forecast) and rendered. The body is `kafka_watchdog::fuzz::describe_log_dirs`, which
//! `cargo test` also runs over every file of corpus/describe_log_dirs/.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kafka_watchdog::fuzz::describe_log_dirs(data));
