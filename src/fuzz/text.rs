//! Text people write: the configuration file, and the durations and times the silences API,
//! the `silence` command and receivers' `Retry-After` carry.

use super::now;
use crate::model::silence::{parse_duration, parse_rfc3339};
use crate::model::time::{rfc3339, unix_ms};

/// Arbitrary text to the configuration loader: a `Config` or a list of problems.
pub fn config_load(data: &[u8]) {
    // `load` turns bytes that are not UTF-8 into one problem before parsing; past that
    // check, `parse` is the whole path.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = crate::config::parse(text, "fuzz.yaml") {
        // Rendering walks every problem too.
        let _ = e.to_string();
    }
}

/// A duration (`90m`, `1h30m`), an RFC 3339 time and a `Retry-After` value (seconds or an
/// HTTP date). A time that parses is written back as webhooks and `/status` write it, and
/// that text must parse again to the same instant (to the millisecond they keep).
pub fn time(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(d) = parse_duration(text) {
        let _ = now().checked_add(d);
    }
    let _ = crate::alert::notify::parse_retry_after(text, now());
    let Ok(t) = parse_rfc3339(text) else {
        return;
    };
    let written = rfc3339(t);
    // Four-digit years only: RFC 3339 has no others, and an offset can carry
    // 9999-12-31 into year 10000.
    if written.len() == "2026-12-01T14:00:00.000Z".len() {
        let again = parse_rfc3339(&written).unwrap_or_else(|e| {
            panic!("{text:?} parsed, but its own rendering {written:?} did not: {e}")
        });
        assert_eq!(
            unix_ms(again),
            unix_ms(t),
            "{text:?} -> {written:?} is another instant"
        );
    }
}
