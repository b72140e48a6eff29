//! Time as webhooks and the state file write it. RFC 3339 in UTC is computed here because
//! the crate has no calendar dependency and needs nothing but this one format.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch; times before it count as 0.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub fn from_unix_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// `2025-11-29T19:05:00.123Z`: UTC, millisecond precision.
pub fn rfc3339(t: SystemTime) -> String {
    let ms = unix_ms(t);
    let secs = ms / 1000;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// Year, month, day of a count of days since 1970-01-01 in the proleptic Gregorian
/// calendar. Works in 400-year eras, which repeat exactly.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of the year from March 1
    let mp = (5 * doy + 2) / 153; // month from March, 0..=11
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
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
    fn every_day_for_a_long_time_follows_the_previous() {
        // A day at a time from 1970 to 2400: the date must advance by exactly one.
        let mut prev = civil_from_days(0);
        assert_eq!(prev, (1970, 1, 1));
        for day in 1..(430 * 366) {
            let next = civil_from_days(day);
            let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            let days_in = |y: i64, m: u32| match m {
                2 if leap(y) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            let expected = if prev.2 < days_in(prev.0, prev.1) {
                (prev.0, prev.1, prev.2 + 1)
            } else if prev.1 < 12 {
                (prev.0, prev.1 + 1, 1)
            } else {
                (prev.0 + 1, 1, 1)
            };
            assert_eq!(next, expected, "day {day}");
            prev = next;
        }
    }

    #[test]
    fn milliseconds_round_trip() {
        let t = at(1_700_000_000, 42);
        assert_eq!(from_unix_ms(unix_ms(t)), t);
        assert_eq!(unix_ms(UNIX_EPOCH - Duration::from_secs(1)), 0);
    }
}
