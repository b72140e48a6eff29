//! Silences written in the file, checked where they are written.

use super::*;

#[test]
fn example_silences_block_loads_uncommented() {
    let shipped = std::fs::read_to_string(example_path("example.yaml")).unwrap();
    let start = shipped
        .find("# silences:\n")
        .expect("the example shows silences");
    let block: String = shipped[start..]
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| format!("{}\n", l.strip_prefix("# ").unwrap_or("")))
        .collect();
    let text = format!(
        "clusters:\n  - name: payments-eu\n    bootstrap_servers: [\"127.0.0.11:9092\"]\n{block}"
    );
    let c = ok(&text);
    assert_eq!(c.silences.len(), 1);
    let s = &c.silences[0];
    assert_eq!(s.broker, Some(3));
    assert_eq!(s.cluster.as_deref(), Some("payments-eu"));
    assert_eq!(s.origin, crate::model::silence::Origin::Config);
    assert_eq!(s.comment, "disk replacement on broker 3, CHG-4711");
}

#[test]
fn silences_in_the_file_are_checked_where_they_are_written() {
    let got: Vec<String> = problems(&format!(
        "{MINIMAL}silences:\n  - cluster: elsewhere\n    ends_at: '2030-01-01T00:00:00Z'\n    comment: x\n  - ends_at: tomorrow\n    comment: y\n  - kind: zombie\n    ends_at: '2030-01-01T00:00:00Z'\n    comment: z\n  - duration: 2h\n    comment: w\n"
    ))
    .iter()
    .map(short)
    .collect();
    assert_eq!(got.len(), 4, "{got:#?}");
    assert!(
        got[0].starts_with("5:14: silences[0]: cluster 'elsewhere' is not watched"),
        "{got:#?}"
    );
    assert!(
        got[1].starts_with("8:14: silences[1]: ends_at: 'tomorrow' is not an RFC 3339 time"),
        "{got:#?}"
    );
    assert!(
        got[2].starts_with("10:11: silences[2]: kind 'zombie' is unknown"),
        "{got:#?}"
    );
    assert!(
        got.iter().any(|p| p.contains("use ends_at, not duration")),
        "{got:#?}"
    );
    // A window that is over is merely over, not an error: the file may be older than it.
    let c = ok(&format!(
        "{MINIMAL}silences:\n  - ends_at: '2001-01-01T00:00:00Z'\n    comment: old window\n"
    ));
    assert!(!c.silences[0].is_active(std::time::SystemTime::now()));
}

/// A weekly maintenance window: read from the file, active inside its windows only, with
/// the id of a silence that differs from the same one without a schedule.
#[test]
fn a_weekly_silence_holds_inside_its_windows() {
    use crate::model::silence::parse_rfc3339;
    let c = ok(&format!(
        "{MINIMAL}silences:\n  - cluster: lab\n    comment: OS patching, Saturdays\n    weekly:\n      days: [sat]\n      start: \"02:00\"\n      duration: 3h\n      zone: \"+01:00\"\n"
    ));
    let s = &c.silences[0];
    let w = s.weekly.as_ref().expect("a weekly window");
    assert_eq!(w.describe(), "sat at 02:00 +01:00 for 3h");
    // 2026-03-07 is a Saturday: 02:00 at +01:00 is 01:00 UTC.
    let at = |t: &str| s.is_active(parse_rfc3339(t).unwrap());
    assert!(!at("2026-03-07T00:59:00Z"));
    assert!(at("2026-03-07T01:00:00Z"));
    assert!(at("2026-03-07T03:59:00Z"));
    assert!(!at("2026-03-07T04:00:00Z"));
    assert!(!at("2026-03-08T01:30:00Z"));
    let now = s.at(parse_rfc3339("2026-03-07T02:00:00Z").unwrap());
    assert_eq!(
        crate::model::time::rfc3339(now.ends_at),
        "2026-03-07T04:00:00.000Z",
        "an incident under it carries the end of this window"
    );
    let plain = ok(&format!(
        "{MINIMAL}silences:\n  - cluster: lab\n    comment: OS patching, Saturdays\n    ends_at: '9999-12-31T00:00:00Z'\n"
    ));
    assert_ne!(plain.silences[0].id, s.id);
    // Bounded by ends_at: no window after it.
    let c = ok(&format!(
        "{MINIMAL}silences:\n  - comment: until March\n    ends_at: '2026-03-01T00:00:00Z'\n    weekly: {{days: [sat], start: \"02:00\", duration: 3h}}\n"
    ));
    assert!(!c.silences[0].is_active(parse_rfc3339("2026-03-07T02:30:00Z").unwrap()));
    assert!(c.silences[0].is_active(parse_rfc3339("2026-02-28T02:30:00Z").unwrap()));
}

#[test]
fn a_bad_weekly_silence_is_named_where_it_is_written() {
    let got: Vec<String> = problems(&format!(
        "{MINIMAL}silences:\n  - comment: x\n    weekly:\n      days: [sat, Sonntag]\n      start: \"2am\"\n      duration: 8d\n      zone: Europe/Berlin\n  - comment: y\n    weekly:\n      days: sat\n      every: 2\n"
    ))
    .iter()
    .map(short)
    .collect();
    let has = |want: &str| got.iter().any(|p| p.starts_with(want));
    assert!(
        has("7:13: days: 'Sonntag' is not a day of the week (mon, tue"),
        "{got:#?}"
    );
    assert!(
        has("8:14: start: '2am' is not a time of day (HH:MM"),
        "{got:#?}"
    );
    assert!(
        has("9:17: duration: '8d' is longer than a week"),
        "{got:#?}"
    );
    assert!(
        has("10:13: zone: 'Europe/Berlin' is not UTC or a fixed offset"),
        "{got:#?}"
    );
    assert!(
        has("14:7: unknown key 'every' in silences[1].weekly"),
        "{got:#?}"
    );
    assert!(
        got.iter()
            .any(|p| p.contains("missing required key 'start' in silences[1].weekly")),
        "{got:#?}"
    );
}
