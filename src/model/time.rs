//! Time as webhooks, silences and the state file write it: RFC 3339 in UTC through the
//! `time` crate (a calendar that knows which days exist), milliseconds since the epoch in
//! the state file.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime};

/// Milliseconds since the Unix epoch; times before it count as 0.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub fn from_unix_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// `2025-11-29T19:05:00.123Z`: UTC, millisecond precision. A time past the year 9999 (only
/// a corrupt state file holds one) is written as the last millisecond of 9999.
pub fn rfc3339(t: SystemTime) -> String {
    let at = OffsetDateTime::from_unix_timestamp_nanos(i128::from(unix_ms(t)) * 1_000_000)
        .unwrap_or(PrimitiveDateTime::MAX.assume_utc());
    at.format(format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    ))
    .unwrap_or_default()
}

/// RFC 3339 date-time (`2026-12-01T14:00:00Z`, fractions and offsets allowed), as silences
/// take it. A date that does not exist (`2026-02-31`) is refused, not moved on to March.
pub fn parse_rfc3339(text: &str) -> Result<SystemTime, String> {
    let t = text.trim();
    let wrong = |why: &dyn std::fmt::Display| {
        format!("'{t}' is not an RFC 3339 time (e.g. 2026-12-01T14:00:00Z): {why}")
    };
    let at = OffsetDateTime::parse(t, &Rfc3339).map_err(|e| wrong(&e))?;
    // RFC 3339 lets any character stand between date and time; T and a space are what
    // people write, and what the watchdog took before.
    if !matches!(t.as_bytes()[10], b'T' | b't' | b' ') {
        return Err(wrong(&"date and time are separated by T"));
    }
    if at < OffsetDateTime::UNIX_EPOCH {
        return Err(wrong(&"it is before 1970"));
    }
    Ok(SystemTime::from(at))
}

/// `SystemTime` as integer milliseconds in the state file: exact, and readable by `jq`.
pub mod serde_ms {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::SystemTime;

    pub fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(super::unix_ms(*t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        Ok(super::from_unix_ms(u64::deserialize(d)?))
    }
}

pub mod serde_opt_ms {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::SystemTime;

    pub fn serialize<S: Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_some(&super::unix_ms(*t)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SystemTime>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(super::from_unix_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(ms)
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(at(951_782_400, 0)), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(at(1_700_000_000, 123)), "2023-11-14T22:13:20.123Z");
        assert_eq!(rfc3339(at(4_102_444_799, 999)), "2099-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(at(1_709_251_199, 0)), "2024-02-29T23:59:59.000Z");
        assert_eq!(rfc3339(at(1_709_251_200, 0)), "2024-03-01T00:00:00.000Z");
    }

    #[test]
    fn every_day_for_a_long_time_reads_back_as_written() {
        // Noon of every day from 1970 to 2400, and the year 9999 at most.
        for day in 0..(430 * 366) {
            let noon = at(day * 86_400 + 43_200, 250);
            assert_eq!(parse_rfc3339(&rfc3339(noon)), Ok(noon), "day {day}");
        }
        assert_eq!(rfc3339(at(400_000_000_000, 0)), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn milliseconds_round_trip() {
        let t = at(1_700_000_000, 42);
        assert_eq!(from_unix_ms(unix_ms(t)), t);
        assert_eq!(unix_ms(UNIX_EPOCH - Duration::from_secs(1)), 0);
    }
}
