//! Recurring windows for silences written in the file (`silences[].weekly`): a window that
//! opens on given days of the week at a given time, for a given length, in UTC or at a
//! fixed offset from it. Named time zones are not taken: their offset moves with daylight
//! saving time, and a maintenance window written as "02:00 Europe/Berlin" would be read
//! one way in winter and another in summer without the file saying so. Pure: `now` is a
//! parameter.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// Longest window: one that lasts a week is always open.
pub const MAX_WINDOW: Duration = Duration::from_secs(7 * 86_400);

const DAY_MS: i64 = 86_400_000;
const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
const FULL_NAMES: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// A window that opens every week on `days` at `start_minute` local time, for `length`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Weekly {
    /// The days it opens on, Monday 0 to Sunday 6, ascending, each once.
    pub days: Vec<u8>,
    /// Minutes after local midnight.
    pub start_minute: u16,
    /// How long it stays open, in seconds.
    pub length_secs: u64,
    /// Local time is UTC plus this many seconds.
    pub offset_secs: i32,
}

impl Weekly {
    /// The window open at `now`: when it opened and when it closes.
    pub fn window_at(&self, now: SystemTime) -> Option<(SystemTime, SystemTime)> {
        let local = unix_ms(now) + i64::from(self.offset_secs) * 1000;
        let today = local.div_euclid(DAY_MS);
        let length = self.length_ms();
        // A window may have opened on an earlier day and still be open: look back as
        // many days as it lasts.
        let back = length.div_euclid(DAY_MS) + 1;
        (0..=back).find_map(|b| {
            let opens = self.opens_on(today - b)?;
            (opens <= local && local < opens + length).then(|| self.to_utc(opens, length))
        })
    }

    /// The window open at `now`, or else the next one to open.
    pub fn current_or_next(&self, now: SystemTime) -> (SystemTime, SystemTime) {
        if let Some(w) = self.window_at(now) {
            return w;
        }
        let local = unix_ms(now) + i64::from(self.offset_secs) * 1000;
        let today = local.div_euclid(DAY_MS);
        let length = self.length_ms();
        (0..=7)
            .filter_map(|f| self.opens_on(today + f))
            .find(|opens| *opens > local)
            .map(|opens| self.to_utc(opens, length))
            // Days are never empty (parse_days), so a window opens within a week.
            .unwrap_or((now, now))
    }

    /// `sat, sun at 02:00 UTC for 3h`.
    pub fn describe(&self) -> String {
        let days: Vec<&str> = self
            .days
            .iter()
            .map(|d| DAY_NAMES[usize::from(*d)])
            .collect();
        format!(
            "{} at {:02}:{:02} {} for {}",
            days.join(", "),
            self.start_minute / 60,
            self.start_minute % 60,
            zone_name(self.offset_secs),
            length_words(self.length_secs)
        )
    }

    fn length_ms(&self) -> i64 {
        i64::try_from(self.length_secs)
            .unwrap_or(i64::MAX / 1000)
            .saturating_mul(1000)
    }

    /// When the window opens on local day `day` (days since 1970-01-01, a Thursday), in
    /// local milliseconds; `None` when it does not open that day.
    fn opens_on(&self, day: i64) -> Option<i64> {
        let weekday = (day + 3).rem_euclid(7) as u8;
        self.days
            .contains(&weekday)
            .then(|| day * DAY_MS + i64::from(self.start_minute) * 60_000)
    }

    fn to_utc(&self, opens_local: i64, length: i64) -> (SystemTime, SystemTime) {
        let opens = opens_local - i64::from(self.offset_secs) * 1000;
        (from_unix_ms(opens), from_unix_ms(opens + length))
    }
}

fn unix_ms(t: SystemTime) -> i64 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

fn from_unix_ms(ms: i64) -> SystemTime {
    let d = Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 {
        SystemTime::UNIX_EPOCH + d
    } else {
        SystemTime::UNIX_EPOCH - d
    }
}

fn zone_name(offset_secs: i32) -> String {
    if offset_secs == 0 {
        return "UTC".into();
    }
    let sign = if offset_secs < 0 { '-' } else { '+' };
    let m = offset_secs.unsigned_abs() / 60;
    format!("{sign}{:02}:{:02}", m / 60, m % 60)
}

fn length_words(secs: u64) -> String {
    let (d, h, m) = (secs / 86_400, secs % 86_400 / 3600, secs % 3600 / 60);
    let mut out = String::new();
    for (n, unit) in [(d, "d"), (h, "h"), (m, "m")] {
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    if out.is_empty() {
        out = format!("{secs}s");
    }
    out
}

/// The days of the week, as `mon` .. `sun` or their full names, any case; each once.
pub fn parse_days(names: &[String]) -> Result<Vec<u8>, String> {
    if names.is_empty() {
        return Err("no days: name at least one, e.g. [sat, sun]".into());
    }
    let mut days = Vec::new();
    for n in names {
        let lower = n.trim().to_ascii_lowercase();
        let Some(d) = DAY_NAMES
            .iter()
            .position(|d| *d == lower)
            .or_else(|| FULL_NAMES.iter().position(|d| *d == lower))
        else {
            return Err(format!(
                "'{}' is not a day of the week (mon, tue, wed, thu, fri, sat, sun)",
                n.chars().take(40).collect::<String>()
            ));
        };
        let d = d as u8;
        if days.contains(&d) {
            return Err(format!("{} is named twice", DAY_NAMES[usize::from(d)]));
        }
        days.push(d);
    }
    days.sort_unstable();
    Ok(days)
}

/// `HH:MM`, 24-hour, `00:00` to `23:59`.
pub fn parse_start(text: &str) -> Result<u16, String> {
    let t = text.trim();
    let wrong = || format!("'{t}' is not a time of day (HH:MM, 24-hour, e.g. 02:00 or 22:30)");
    let (h, m) = t.split_once(':').ok_or_else(wrong)?;
    if h.len() != 2 || m.len() != 2 {
        return Err(wrong());
    }
    let h: u16 = h.parse().map_err(|_| wrong())?;
    let m: u16 = m.parse().map_err(|_| wrong())?;
    if h > 23 || m > 59 {
        return Err(wrong());
    }
    Ok(h * 60 + m)
}

/// `UTC` (or `Z`), or a fixed offset `+HH:MM` / `-HH:MM` up to 14 hours.
pub fn parse_zone(text: &str) -> Result<i32, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("utc") || t == "Z" {
        return Ok(0);
    }
    let wrong = || {
        format!(
            "'{t}' is not UTC or a fixed offset such as +02:00 or -05:00 (a named zone moves with daylight saving time: write the offset the window is meant in)"
        )
    };
    let (sign, rest) = match t.as_bytes().first() {
        Some(b'+') => (1, &t[1..]),
        Some(b'-') => (-1, &t[1..]),
        _ => return Err(wrong()),
    };
    let minutes = parse_start(rest).map_err(|_| wrong())?;
    if minutes > 14 * 60 {
        return Err(wrong());
    }
    Ok(sign * i32::from(minutes) * 60)
}

/// How long the window stays open (the file writes it as a duration, `90m`, `3h`, `2d`):
/// a minute to a week. `written` is how it was written, for the message.
pub fn check_length(d: Duration, written: &str) -> Result<u64, String> {
    if d > MAX_WINDOW {
        return Err(format!(
            "'{}' is longer than a week: a weekly window of a week or more never closes",
            written.trim()
        ));
    }
    if d < Duration::from_secs(60) {
        return Err(format!("'{}' is shorter than a minute", written.trim()));
    }
    Ok(d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::time::{parse_rfc3339, rfc3339};

    fn t(s: &str) -> SystemTime {
        parse_rfc3339(s).unwrap()
    }

    fn length_of(text: &str) -> Result<u64, String> {
        let d = crate::model::silence::parse_duration(text)?;
        check_length(d, text)
    }

    fn weekly(days: &[&str], start: &str, length: &str, zone: &str) -> Weekly {
        let days: Vec<String> = days.iter().map(|d| d.to_string()).collect();
        Weekly {
            days: parse_days(&days).unwrap(),
            start_minute: parse_start(start).unwrap(),
            length_secs: length_of(length).unwrap(),
            offset_secs: parse_zone(zone).unwrap(),
        }
    }

    fn window(w: &Weekly, now: &str) -> Option<(String, String)> {
        w.window_at(t(now)).map(|(a, b)| (rfc3339(a), rfc3339(b)))
    }

    #[test]
    fn a_saturday_window_is_open_from_its_start_to_its_end_only() {
        // 2026-03-07 is a Saturday.
        let w = weekly(&["sat"], "02:00", "3h", "UTC");
        let open = Some((
            "2026-03-07T02:00:00.000Z".to_string(),
            "2026-03-07T05:00:00.000Z".to_string(),
        ));
        assert_eq!(window(&w, "2026-03-07T01:59:59Z"), None);
        assert_eq!(window(&w, "2026-03-07T02:00:00Z"), open);
        assert_eq!(window(&w, "2026-03-07T04:59:59Z"), open);
        assert_eq!(
            window(&w, "2026-03-07T05:00:00Z"),
            None,
            "the end is not in it"
        );
        assert_eq!(
            window(&w, "2026-03-08T02:30:00Z"),
            None,
            "Sunday is not named"
        );
        assert_eq!(
            window(&w, "2026-03-14T03:00:00Z").unwrap().0,
            "2026-03-14T02:00:00.000Z",
            "a week later"
        );
    }

    #[test]
    fn a_window_runs_past_midnight_into_the_next_day() {
        let w = weekly(&["sun"], "23:00", "4h", "UTC");
        // Sunday 2026-03-08 23:00 to Monday 03:00.
        assert_eq!(
            window(&w, "2026-03-09T02:59:00Z"),
            Some((
                "2026-03-08T23:00:00.000Z".into(),
                "2026-03-09T03:00:00.000Z".into()
            ))
        );
        assert_eq!(window(&w, "2026-03-09T03:00:00Z"), None);
        // A weekend window of 60 h, opened on Friday.
        let w = weekly(&["fri"], "20:00", "60h", "UTC");
        assert!(window(&w, "2026-03-08T12:00:00Z").is_some());
        assert!(window(&w, "2026-03-09T07:59:00Z").is_some());
        assert!(window(&w, "2026-03-09T08:00:00Z").is_none());
    }

    #[test]
    fn a_fixed_offset_moves_the_window_to_local_time() {
        // 01:00 at +02:00 on Monday is Sunday 23:00 UTC.
        let w = weekly(&["mon"], "01:00", "1h", "+02:00");
        assert_eq!(
            window(&w, "2026-03-08T23:30:00Z"),
            Some((
                "2026-03-08T23:00:00.000Z".into(),
                "2026-03-09T00:00:00.000Z".into()
            ))
        );
        assert_eq!(window(&w, "2026-03-09T23:30:00Z"), None);
        // 22:00 at -05:00 on Friday is Saturday 03:00 UTC.
        let w = weekly(&["friday"], "22:00", "2h", "-05:00");
        assert!(window(&w, "2026-03-07T03:30:00Z").is_some());
        assert!(window(&w, "2026-03-06T22:30:00Z").is_none());
    }

    #[test]
    fn the_next_window_is_named_when_none_is_open() {
        let w = weekly(&["sat", "wed"], "02:00", "1h", "UTC");
        // Thursday 2026-03-05: next is Saturday.
        let (a, b) = w.current_or_next(t("2026-03-05T12:00:00Z"));
        assert_eq!(rfc3339(a), "2026-03-07T02:00:00.000Z");
        assert_eq!(rfc3339(b), "2026-03-07T03:00:00.000Z");
        // Saturday after the window: next is Wednesday.
        let (a, _) = w.current_or_next(t("2026-03-07T03:00:00Z"));
        assert_eq!(rfc3339(a), "2026-03-11T02:00:00.000Z");
        assert_eq!(w.describe(), "wed, sat at 02:00 UTC for 1h");
    }

    #[test]
    fn bad_schedules_say_what_would_be_right() {
        let e = parse_days(&["saturday".into(), "Sa".into()]).unwrap_err();
        assert!(e.contains("'Sa' is not a day of the week (mon, tue"), "{e}");
        assert!(parse_days(&["sat".into(), "Saturday".into()])
            .unwrap_err()
            .contains("sat is named twice"));
        assert!(parse_days(&[]).unwrap_err().contains("e.g. [sat, sun]"));
        for bad in ["2:00", "24:00", "02:60", "0200", "2am"] {
            assert!(parse_start(bad).unwrap_err().contains("HH:MM"), "{bad}");
        }
        assert_eq!(parse_start("23:59"), Ok(23 * 60 + 59));
        let e = parse_zone("Europe/Berlin").unwrap_err();
        assert!(e.contains("fixed offset such as +02:00"), "{e}");
        assert!(parse_zone("+15:00").is_err());
        assert!(parse_zone("+2").is_err());
        assert_eq!(parse_zone("-05:30"), Ok(-(5 * 3600 + 30 * 60)));
        assert_eq!(parse_zone("utc"), Ok(0));
        assert!(length_of("8d").unwrap_err().contains("longer than a week"));
        assert!(length_of("30s")
            .unwrap_err()
            .contains("shorter than a minute"));
        assert!(length_of("soon").unwrap_err().contains("not a duration"));
    }
}
