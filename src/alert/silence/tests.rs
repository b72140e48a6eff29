use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;
use crate::alert::incident::find_silence as find;
use crate::alert::incident::{EventKind, Finding, FindingKey, Hysteresis, IncidentBook, Subject};
use crate::config::Severity;
use crate::model::kind::FindingKind;
use crate::model::round::BrokerId;
use crate::model::silence::*;
use crate::model::time::{rfc3339, unix_ms};

fn lab() -> Vec<String> {
    vec!["lab".to_string()]
}

fn t(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

fn silence(broker: Option<BrokerId>, kind: Option<FindingKind>, from: u64, to: u64) -> Silence {
    let mut s = Silence {
        id: String::new(),
        cluster: Some("lab".into()),
        broker,
        kind,
        starts_at: t(from),
        ends_at: t(to),
        comment: "rolling upgrade".into(),
        created_by: "ops".into(),
        origin: Origin::Api,
    };
    s.id = silence_id(&s);
    s
}

fn broker_finding(b: BrokerId) -> Finding {
    let mut f = Finding::new(
        FindingKey::new("lab", Subject::Broker(b), FindingKind::Broker),
        format!("broker {b} is a zombie"),
    );
    f.severity = Severity::Critical;
    f.state = Some(crate::judge::verdict::BrokerState::Zombie);
    f.suspects = vec![b];
    f
}

fn under_replicated(suspects: Vec<BrokerId>) -> Finding {
    let mut f = Finding::new(
        FindingKey::new("lab", Subject::Cluster, FindingKind::UnderReplicated),
        "partitions under-replicated",
    );
    f.suspects = suspects;
    f
}

const ONE_ROUND: Hysteresis = Hysteresis {
    open_after: Duration::ZERO,
    resolve_after: Duration::ZERO,
    flap: crate::alert::incident::Flap {
        window: Duration::from_secs(120),
        start: 6,
        stop: 2,
    },
};

fn webhook() -> crate::config::WebhookConfig {
    crate::config::WebhookConfig {
        name: "ops".into(),
        url: crate::config::Secret::new("http://127.0.0.1:1/"),
        target: "http://127.0.0.1:1".into(),
        format: crate::config::WebhookFormat::Generic,
        min_severity: Severity::Warning,
        clusters: Vec::new(),
        repeat_interval: Some(Duration::from_secs(60)),
        send_resolved: true,
        timeout: Duration::from_secs(1),
        tls_verify: true,
        ca_file: None,
        headers: Default::default(),
        hmac_secret: None,
        routing_key: None,
        group_interval: None,
        slack_bot: None,
    }
}

fn sent(events: &[crate::alert::incident::IncidentEvent]) -> Vec<EventKind> {
    events
        .iter()
        .filter_map(|e| crate::alert::notify::route(&webhook(), e))
        .collect()
}

#[test]
fn a_broker_silence_covers_the_broker_and_partitions_that_suspect_only_it() {
    let mut book = IncidentBook::new();
    book.set_silences(vec![silence(Some(2), None, 0, 600)]);
    let events = book.observe(
        "lab",
        vec![
            broker_finding(2),
            broker_finding(3),
            under_replicated(vec![2]),
        ],
        ONE_ROUND,
        t(10),
    );
    let told: Vec<String> = events
        .iter()
        .filter(|e| crate::alert::notify::route(&webhook(), e).is_some())
        .map(|e| e.incident.dedup_key.clone())
        .collect();
    assert_eq!(told, vec!["kafka-watchdog/lab/broker-3/broker".to_string()]);
    // Still open and shown, with the silence it is under; the partitions only broker 2 is
    // missing from are its incident's impact, silenced with it.
    let open = book.open_incidents();
    assert_eq!(open.len(), 2);
    let b2 = open.iter().find(|i| i.broker == Some(2)).unwrap();
    assert_eq!(b2.silenced.as_ref().unwrap().comment, "rolling upgrade");
    assert!(b2.rules.contains(&"under_replicated".to_string()), "{b2:?}");
    // Under-replication that also names broker 3 is not hidden by broker 2's silence.
    let mut book = IncidentBook::new();
    book.set_silences(vec![silence(Some(2), None, 0, 600)]);
    let events = book.observe("lab", vec![under_replicated(vec![2, 3])], ONE_ROUND, t(10));
    assert_eq!(sent(&events), vec![EventKind::Opened]);
}

#[test]
fn an_incident_still_open_when_its_silence_ends_is_told_as_opened() {
    let mut book = IncidentBook::new();
    book.set_silences(vec![silence(Some(2), None, 0, 100)]);
    let events = book.observe("lab", vec![broker_finding(2)], ONE_ROUND, t(10));
    assert_eq!(sent(&events), vec![]);
    let events = book.observe("lab", vec![broker_finding(2)], ONE_ROUND, t(50));
    assert_eq!(sent(&events), vec![]);
    // Reminders of a silenced incident go nowhere.
    let reminder =
        crate::alert::incident::IncidentEvent::reminder(book.open_incidents()[0].clone(), t(60));
    assert_eq!(sent(&[reminder]), vec![]);
    let events = book.observe("lab", vec![broker_finding(2)], ONE_ROUND, t(110));
    assert_eq!(sent(&events), vec![EventKind::Opened]);
    assert!(
        events[0].changes[0].contains("ended"),
        "{:?}",
        events[0].changes
    );
    let events = book.observe("lab", vec![], ONE_ROUND, t(120));
    assert_eq!(sent(&events), vec![EventKind::Resolved]);
}

#[test]
fn a_silenced_incident_that_resolves_tells_nobody_and_a_told_one_tells_its_end() {
    let mut book = IncidentBook::new();
    book.set_silences(vec![silence(None, Some(FindingKind::Broker), 0, 600)]);
    book.observe("lab", vec![broker_finding(2)], ONE_ROUND, t(10));
    let events = book.observe("lab", vec![], ONE_ROUND, t(20));
    assert_eq!(events.len(), 1);
    assert_eq!(sent(&events), vec![]);

    // Told first, silenced later: the silence stops updates and reminders; the end is told.
    let mut book = IncidentBook::new();
    let events = book.observe("lab", vec![broker_finding(3)], ONE_ROUND, t(10));
    assert_eq!(sent(&events), vec![EventKind::Opened]);
    book.set_silences(vec![silence(Some(3), None, 15, 600)]);
    let events = book.observe("lab", vec![broker_finding(3)], ONE_ROUND, t(20));
    assert_eq!(
        events.len(),
        1,
        "the silence is an event, so reminders learn of it"
    );
    assert_eq!(sent(&events), vec![]);
    let events = book.observe("lab", vec![], ONE_ROUND, t(30));
    assert_eq!(sent(&events), vec![EventKind::Resolved]);
}

#[test]
fn silences_match_by_cluster_broker_and_kind_while_active() {
    let book_incident = |b: BrokerId| {
        let mut book = IncidentBook::new();
        book.observe("lab", vec![broker_finding(b)], ONE_ROUND, t(10));
        book.open_incidents().remove(0)
    };
    let i = book_incident(2);
    assert!(silence(Some(2), None, 0, 100).covers(&i));
    assert!(!silence(Some(3), None, 0, 100).covers(&i));
    assert!(silence(None, Some(FindingKind::Broker), 0, 100).covers(&i));
    assert!(!silence(None, Some(FindingKind::SplitBrain), 0, 100).covers(&i));
    let mut other = silence(None, None, 0, 100);
    other.cluster = Some("other".into());
    assert!(!other.covers(&i));
    other.cluster = None;
    assert!(other.covers(&i));
    let s = silence(None, None, 20, 100);
    assert!(!s.is_active(t(19)) && s.is_active(t(20)) && !s.is_active(t(100)));
    assert_eq!(
        find(std::slice::from_ref(&s), &i, t(50)).map(|f| f.id.clone()),
        Some(s.id)
    );
}

#[test]
fn requests_are_checked_with_a_sentence_per_problem() {
    let known = vec!["lab".to_string()];
    let ok = Request {
        cluster: Some("lab".into()),
        broker: Some(2),
        kind: Some("broker".into()),
        duration: Some("2h".into()),
        comment: "upgrade to 4.1".into(),
        ..Request::default()
    };
    let s = ok.check(&known, t(0), Origin::Api).unwrap();
    assert_eq!(s.ends_at, t(7200));
    assert_eq!(s.kind, Some(FindingKind::Broker));
    assert!(s.id.starts_with("s-"));
    assert_eq!(s.created_by, "api");
    let err = |r: Request| r.check(&known, t(0), Origin::Api).unwrap_err().0;
    assert!(err(Request {
        cluster: Some("nope".into()),
        ..ok.clone()
    })
    .contains("not watched"));
    assert!(err(Request {
        kind: Some("zombie".into()),
        ..ok.clone()
    })
    .contains("one of: broker"));
    assert!(err(Request {
        comment: " ".into(),
        ..ok.clone()
    })
    .contains("comment is required"));
    assert!(err(Request {
        duration: None,
        ..ok.clone()
    })
    .contains("an end is required"));
    assert!(err(Request {
        ends_at: Some("2026-12-01T00:00:00Z".into()),
        ..ok.clone()
    })
    .contains("not both"));
    assert!(err(Request {
        duration: Some("31d".into()),
        ..ok.clone()
    })
    .contains("at most 30 days"));
    // Past what a clock can hold: an error, not a panic (issue 27 item 12).
    assert!(err(Request {
        duration: Some("18446744073709551615s".into()),
        ..ok.clone()
    })
    .contains("too long"));
    assert!(err(Request {
        duration: None,
        ends_at: Some("2000-01-01T00:00:00Z".into()),
        ..ok.clone()
    })
    .contains("not after"));
}

/// Issue 39: the hand-written parser checked a day against 31 whatever the month, so
/// `2026-02-31` became 3 March and a silence ended days after the one asked for. A date
/// that does not exist is refused, saying what is wrong; what was valid still parses.
#[test]
fn a_date_that_does_not_exist_is_refused_not_moved_to_the_next_month() {
    for bad in [
        "2026-02-31T00:00:00Z",
        "2026-02-29T12:00:00Z",
        "2026-04-31T00:00:00Z",
        "2100-02-29T00:00:00Z",
    ] {
        let e = parse_rfc3339(bad).expect_err(bad);
        assert!(e.contains(bad) && e.contains("day"), "{bad}: {e}");
    }
    // A leap second only where one can be: the last second of a month, in UTC.
    assert!(parse_rfc3339("2026-03-14T10:00:60Z").is_err());
    assert_eq!(
        parse_rfc3339("2016-12-31T23:59:60Z").map(unix_ms),
        Ok(1_483_228_799_999)
    );
    // The forms accepted before: T, t or a space; Z or z; any number of fraction digits;
    // an offset; spaces around.
    for (good, ms) in [
        ("2024-02-29T00:00:00Z", 1_709_164_800_000),
        ("2024-02-29t00:00:00z", 1_709_164_800_000),
        ("2024-02-29 00:00:00Z", 1_709_164_800_000),
        (" 2024-02-29T01:30:00.5+01:30 ", 1_709_164_800_500),
        ("2024-02-28T23:00:00.123456789123-01:00", 1_709_164_800_123),
    ] {
        assert_eq!(parse_rfc3339(good).map(unix_ms), Ok(ms), "{good}");
    }
    // Not a date and time separator, not a valid offset, before 1970.
    for bad in [
        "2024-02-29X00:00:00Z",
        "2024-02-29T00:00:00+24:00",
        "1969-12-31T23:59:59Z",
    ] {
        assert!(parse_rfc3339(bad).is_err(), "{bad}");
    }
}

#[test]
fn durations_and_times_parse() {
    assert_eq!(parse_duration("90m"), Ok(Duration::from_secs(5400)));
    assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
    assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
    assert_eq!(parse_duration("45s"), Ok(Duration::from_secs(45)));
    for bad in ["", "2", "h", "2x", "0m", "-1h"] {
        assert!(parse_duration(bad).is_err(), "{bad}");
    }
    // A character across the offset's colon panicked (issue 27 item 12).
    for bad in [
        "2023-11-14T22:13:20+0é00",
        "2023-11-14T22:13:20+é:00",
        "2023-11-14T22:13:20+00:é",
    ] {
        assert!(parse_rfc3339(bad).is_err(), "{bad}");
    }
    assert_eq!(
        parse_rfc3339("2023-11-14T22:13:20Z"),
        Ok(UNIX_EPOCH + Duration::from_secs(1_700_000_000))
    );
    assert_eq!(
        parse_rfc3339("2023-11-14T23:13:20.250+01:00"),
        Ok(UNIX_EPOCH + Duration::from_millis(1_700_000_000_250))
    );
    assert_eq!(
        parse_rfc3339("2024-02-29T00:00:00Z"),
        Ok(UNIX_EPOCH + Duration::from_secs(1_709_164_800))
    );
    for bad in [
        "2023-11-14",
        "2023-13-14T00:00:00Z",
        "2023-11-14T22:13:20",
        "yesterday",
    ] {
        assert!(parse_rfc3339(bad).is_err(), "{bad}");
    }
    // What the watchdog writes, it reads.
    let now = UNIX_EPOCH + Duration::from_millis(1_764_590_400_123);
    assert_eq!(parse_rfc3339(&rfc3339(now)), Ok(now));
}

#[test]
fn the_store_keeps_runtime_silences_and_refuses_to_expire_config_ones() {
    let dir = std::env::temp_dir().join(format!("kw-silences-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut store = Silences::default();
    let api = silence(Some(2), None, 0, 600);
    let mut cfg = silence(None, None, 0, 900);
    cfg.origin = Origin::Config;
    cfg.id = "s-config".into();
    store.set_config(vec![cfg.clone()]);
    store.add(api.clone(), t(10)).unwrap();
    store.save(&dir).unwrap();
    let loaded = Silences::load(&dir).unwrap();
    assert_eq!(
        loaded.all(),
        vec![api.clone()],
        "config silences are not stored"
    );
    assert!(store
        .expire("s-config", t(20))
        .unwrap_err()
        .0
        .contains("configuration file"));
    assert_eq!(store.expire("s-none", t(20)), Ok(false));
    assert_eq!(store.expire(&api.id, t(20)), Ok(true));
    assert_eq!(store.active(t(30)).len(), 1);
    // Ended a day ago: gone from the list.
    store.prune(t(20 + 86_400 + 1));
    assert_eq!(store.all().len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn peers_settle_on_the_same_silences_whatever_order_they_hear_them_in() {
    let a = silence(Some(2), None, 0, 3600);
    let b = silence(None, Some(FindingKind::UnderReplicated), 0, 7200);
    let mut one = Silences::default();
    let mut two = Silences::default();
    // One added a, the other b and then expired it; each hears the other.
    one.add(a.clone(), t(10)).unwrap();
    two.add(b.clone(), t(10)).unwrap();
    assert_eq!(
        one.merge(two.runtime(), &lab(), t(20)).changed,
        vec![b.id.clone()]
    );
    two.expire(&b.id, t(100)).unwrap();
    assert_eq!(
        two.merge(one.runtime(), &lab(), t(101)).changed,
        vec![a.id.clone()]
    );
    assert_eq!(
        one.merge(two.runtime(), &lab(), t(102)).changed,
        vec![b.id.clone()]
    );
    // Hearing its own older copy again does not revive b anywhere.
    assert!(two
        .merge(vec![b.clone()], &lab(), t(103))
        .changed
        .is_empty());
    for s in [&one, &two] {
        let mut ids: Vec<(String, SystemTime)> =
            s.runtime().into_iter().map(|s| (s.id, s.ends_at)).collect();
        ids.sort();
        let mut want = vec![(a.id.clone(), a.ends_at), (b.id.clone(), t(100))];
        want.sort();
        assert_eq!(ids, want);
        assert_eq!(s.active(t(200)).len(), 1, "only a is in force");
    }
}

#[test]
fn a_peer_cannot_pass_on_configuration_silences_or_ones_long_over() {
    let mut from_file = silence(Some(1), None, 0, 3600);
    from_file.origin = Origin::Config;
    let old = silence(Some(3), None, 0, 10);
    let mut mine = Silences::default();
    assert!(mine
        .merge(vec![from_file, old], &lab(), t(10 + 86_400 + 1))
        .changed
        .is_empty());
    assert!(mine.all().is_empty());
}

/// Issue 38 item 5: a silence a peer hands over passes the checks the API makes, so a
/// forged or buggy peer cannot add one the API would refuse.
#[test]
fn a_peer_silence_that_breaks_the_api_checks_is_refused() {
    let known = ["lab".to_string()];
    let now = t(100);
    let fine = silence(Some(2), None, 0, 3600);
    // Until 2036, as the forged answer of the issue had it: past the 30-day cap.
    let forever = silence(None, None, 0, 400_000_000);
    let mut elsewhere = silence(Some(1), None, 0, 3600);
    elsewhere.cluster = Some("billing".into());
    elsewhere.id = silence_id(&elsewhere);
    let mut mute = silence(Some(3), None, 0, 3600);
    mute.comment = "  ".into();
    let mut odd_id = silence(Some(4), None, 0, 3600);
    odd_id.id = "anything".into();
    let mut store = Silences::default();
    let merged = store.merge(
        vec![
            fine.clone(),
            forever.clone(),
            elsewhere.clone(),
            mute,
            odd_id,
        ],
        &known,
        now,
    );
    assert_eq!(merged.changed, vec![fine.id.clone()]);
    let why: Vec<String> = merged.refused.iter().map(|(_, w)| w.0.clone()).collect();
    assert_eq!(why.len(), 4, "{why:?}");
    assert!(why[0].contains("at most 30 days"), "{why:?}");
    assert!(
        why[1].contains("cluster 'billing' is not watched"),
        "{why:?}"
    );
    assert!(why[2].contains("comment is required"), "{why:?}");
    assert!(why[3].contains("not a silence id"), "{why:?}");
    assert_eq!(store.all(), vec![fine.clone()]);
    // The same check the API runs: a request for the forged silence is refused with the
    // same words.
    let request = Request {
        ends_at: Some(rfc3339(forever.ends_at)),
        comment: "x".into(),
        ..Request::default()
    };
    assert_eq!(
        request.check(&known, now, Origin::Api).unwrap_err(),
        forever.check(&known).unwrap_err()
    );
    // An expiry from a peer of a silence not yet started ends it at its start: taken.
    let later = silence(Some(5), None, 500, 900);
    store.merge(vec![later.clone()], &known, now);
    let mut expired = later.clone();
    expired.ends_at = expired.starts_at;
    assert_eq!(
        store.merge(vec![expired], &known, now).changed,
        vec![later.id.clone()]
    );
}
