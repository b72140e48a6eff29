//! The configuration loader on arbitrary text: every input must end in a `Config` or a
//! list of problems, never a panic, a stack overflow or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // `load` turns bytes that are not UTF-8 into one problem before parsing; past that
    // check, `parse` is the whole path.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = kafka_watchdog::config::parse(text, "fuzz.yaml") {
        // Rendering walks every problem too.
        let _ = e.to_string();
    }
});
