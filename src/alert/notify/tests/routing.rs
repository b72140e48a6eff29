//! Who hears what (severity, what a receiver was told) and whether an answer is retried.

use super::*;

// ---- routing ----

#[test]
fn routing_follows_severity_and_what_the_receiver_was_told() {
    use EventKind::*;
    use Severity::*;
    let mut pd = hook("pd", "http://x", WebhookFormat::PagerDuty);
    pd.min_severity = Critical;
    let warn_open = event(Opened, incident("lab", Some(2), Warning));
    assert_eq!(route(&pd, &warn_open), None);
    // Lifted over the threshold: the first this receiver hears is an "opened".
    assert_eq!(
        route(&pd, &updated(Warning, Warning, Critical)),
        Some(Opened)
    );
    // Already told (it peaked at critical): updates, also downwards, go through.
    assert_eq!(
        route(&pd, &updated(Critical, Critical, Warning)),
        Some(Updated)
    );
    assert_eq!(route(&pd, &updated(Warning, Warning, Warning)), None);
    let mut calmed = incident("lab", Some(2), Warning);
    calmed.peak_severity = Critical;
    calmed.notified_peak = Some(Critical);
    assert_eq!(route(&pd, &event(Resolved, calmed.clone())), Some(Resolved));
    assert_eq!(route(&pd, &event(Reminder, calmed)), Some(Reminder));
    assert_eq!(
        route(&pd, &event(Resolved, incident("lab", Some(2), Warning))),
        None,
        "never told"
    );
    pd.send_resolved = false;
    assert_eq!(
        route(&pd, &event(Resolved, incident("lab", Some(2), Critical))),
        None
    );
    let mut only_b = hook("b", "http://x", WebhookFormat::Generic);
    only_b.clusters = vec!["b".into()];
    assert_eq!(
        route(&only_b, &event(Opened, incident("lab", Some(2), Critical))),
        None
    );
    assert_eq!(
        route(&only_b, &event(Opened, incident("b", Some(2), Info))),
        Some(Opened)
    );
}

// ---- retry decisions ----

#[test]
fn answers_are_judged_retry_or_drop() {
    let cap = Duration::from_secs(900);
    for s in [200, 202, 204] {
        assert_eq!(judge(s, None, t(0), cap), Outcome::Delivered);
    }
    for s in [408, 429, 500, 502, 503, 504] {
        assert!(
            matches!(
                judge(s, None, t(0), cap),
                Outcome::Retry { after: None, .. }
            ),
            "{s}"
        );
    }
    for s in [301, 400, 401, 403, 404, 410, 413, 422] {
        assert!(
            matches!(judge(s, None, t(0), cap), Outcome::Drop { .. }),
            "{s}"
        );
    }
    assert_eq!(
        judge(429, Some("7"), t(0), cap),
        Outcome::Retry {
            after: Some(Asked {
                wait: Duration::from_secs(7),
                rate_limited: true
            }),
            why: "HTTP 429".into()
        }
    );
    assert_eq!(
        judge(503, Some("99999"), t(0), cap),
        Outcome::Retry {
            after: Some(Asked {
                wait: cap,
                rate_limited: false
            }),
            why: "HTTP 503".into()
        }
    );
}

#[test]
fn retry_after_takes_seconds_or_a_date() {
    let now = UNIX_EPOCH + Duration::from_secs(1_445_412_480); // Wed, 21 Oct 2015 07:28:00 GMT
    assert_eq!(
        parse_retry_after("120", now),
        Some(Duration::from_secs(120))
    );
    assert_eq!(parse_retry_after(" 5 ", now), Some(Duration::from_secs(5)));
    assert_eq!(
        parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
        Some(Duration::from_secs(30))
    );
    assert_eq!(
        parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now),
        Some(Duration::ZERO)
    );
    assert_eq!(parse_retry_after("soon", now), None);
}

#[test]
fn backoff_doubles_to_its_cap_with_bounded_jitter() {
    let b = Backoff::default();
    let page: Vec<u64> = (0..8)
        .map(|a| b.wait(a, Urgency::Page, 0.0).as_secs())
        .collect();
    assert_eq!(page, vec![1, 2, 4, 8, 16, 20, 20, 20]);
    let info: Vec<u64> = (0..12)
        .map(|a| b.wait(a, Urgency::Info, 0.0).as_secs())
        .collect();
    assert_eq!(info, vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
    assert_eq!(
        b.wait(1000, Urgency::Info, 0.0),
        INFO_RETRY_CAP,
        "no overflow"
    );
    assert_eq!(b.wait(3, Urgency::Page, 1.0), Duration::from_millis(9600));
    assert_eq!(b.wait(3, Urgency::Page, -1.0), Duration::from_millis(6400));
    assert_eq!(
        b.wait(3, Urgency::Page, 7.0),
        Duration::from_millis(9600),
        "unit is clamped"
    );
    // At the cap the jitter only shortens: the cap is the longest wait there is.
    assert_eq!(b.wait(9, Urgency::Page, 1.0), PAGE_RETRY_CAP);
    assert_eq!(b.wait(9, Urgency::Page, -1.0), Duration::from_secs(16));
}

/// Issue 38 item 7: the wait doubled to five minutes whatever waited, so a receiver that
/// came back after two minutes down got the page up to two minutes later still (90 s seen
/// on the lab: the eighth attempt had scheduled a 135 s wait). A page's wait is now at
/// most `PAGE_RETRY_CAP` (tens of seconds), whatever the attempt; only information waits
/// longer, and a rate limit's `Retry-After`.
#[test]
fn a_page_is_retried_within_tens_of_seconds_however_long_the_outage() {
    let b = Backoff::default();
    assert!(PAGE_RETRY_CAP <= Duration::from_secs(30));
    for attempt in 0..200 {
        for unit in [-1.0, 0.0, 0.5, 1.0] {
            let wait = retry_wait(&b, attempt, Urgency::Page, None, unit);
            assert!(wait <= PAGE_RETRY_CAP, "attempt {attempt}: {wait:?}");
        }
    }
    // Eight failed tries in (the lab's two minutes), the next is 20 s away, not 128.
    assert_eq!(
        retry_wait(&b, 7, Urgency::Page, None, 0.0),
        Duration::from_secs(20)
    );
    assert_eq!(
        retry_wait(&b, 7, Urgency::Info, None, 0.0),
        Duration::from_secs(128)
    );
    let asked = |secs, rate_limited| {
        Some(Asked {
            wait: Duration::from_secs(secs),
            rate_limited,
        })
    };
    // A rate limit is honoured beyond the cap (`judge` cut it to `max_retry_after`) ...
    assert_eq!(
        retry_wait(&b, 7, Urgency::Page, asked(120, true), 0.0),
        Duration::from_secs(120)
    );
    // ... another answer's `Retry-After` (a 503 in maintenance) only up to the cap.
    assert_eq!(
        retry_wait(&b, 1, Urgency::Page, asked(120, false), 0.0),
        PAGE_RETRY_CAP
    );
    assert_eq!(
        retry_wait(&b, 1, Urgency::Info, asked(120, false), 0.0),
        Duration::from_secs(120)
    );
    assert_eq!(
        retry_wait(&b, 1, Urgency::Page, asked(5, false), 0.0),
        Duration::from_secs(5),
        "a shorter one is still honoured"
    );
}

#[test]
fn pages_are_what_someone_should_act_on() {
    use EventKind::*;
    let crit = incident("lab", Some(2), Severity::Critical);
    for (kind, urgency) in [
        (Opened, Urgency::Page),
        (Updated, Urgency::Page),
        (Acted, Urgency::Page),
        (Resolved, Urgency::Info),
        (Reminder, Urgency::Info),
    ] {
        assert_eq!(Urgency::of(&event(kind, crit.clone())), urgency, "{kind:?}");
    }
    let warn = incident("lab", Some(2), Severity::Warning);
    assert_eq!(Urgency::of(&event(Opened, warn)), Urgency::Page);
    let info = incident("lab", None, Severity::Info);
    assert_eq!(Urgency::of(&event(Opened, info)), Urgency::Info);
}

/// `Retry-After: 0` and a date already past were taken as a zero wait: a receiver that
/// answers 503 with either was retried in a loop without a pause (issue 27 item 4).
#[test]
fn retry_after_never_shortens_the_backoff() {
    let b = Backoff {
        jitter: 0.0,
        ..Backoff::default()
    };
    let now = UNIX_EPOCH + Duration::from_secs(1_445_412_480);
    let asked = |v: &str| {
        parse_retry_after(v, now).map(|wait| Asked {
            wait,
            rate_limited: true,
        })
    };
    let zero = asked("0");
    let past = asked("Wed, 21 Oct 2015 07:27:00 GMT");
    assert_eq!(
        retry_wait(&b, 0, Urgency::Page, zero, 0.0),
        Duration::from_secs(1)
    );
    assert_eq!(
        retry_wait(&b, 3, Urgency::Page, past, 0.0),
        Duration::from_secs(8)
    );
    // A longer wait the receiver asks for is honoured.
    assert_eq!(
        retry_wait(&b, 2, Urgency::Page, asked("120"), 0.0),
        Duration::from_secs(120)
    );
    assert_eq!(
        retry_wait(&b, 2, Urgency::Page, None, 0.0),
        Duration::from_secs(4)
    );
}

/// A full queue dropped the newest notification, however urgent: a page that came while a
/// receiver was down behind 10,000 others was lost (issue 27 item 4).
#[test]
fn a_full_queue_gives_up_what_matters_least_never_the_newest_page() {
    use EventKind::*;
    let q = |items: &[(&str, EventKind)]| -> Vec<QueuedEvent> {
        items
            .iter()
            .map(|(id, k)| Some((id.to_string(), *k)))
            .collect()
    };
    // An older update of the same incident: the new one says all of it.
    let queued = q(&[
        ("a", Opened),
        ("b", Opened),
        ("a", Updated),
        ("b", Resolved),
    ]);
    assert_eq!(evict(&queued, ("a", Updated)), Evict::Queued(2));
    // Else the oldest resolve or reminder, never the head (it may be on its way).
    let queued = q(&[
        ("z", Resolved),
        ("b", Opened),
        ("c", Reminder),
        ("d", Resolved),
    ]);
    assert_eq!(evict(&queued, ("e", Opened)), Evict::Queued(2));
    // Only pages queued: a resolve or a reminder coming in is the one given up...
    let pages = q(&[("a", Opened), ("b", Opened), ("c", Updated)]);
    assert_eq!(evict(&pages, ("a", Resolved)), Evict::Incoming);
    assert_eq!(evict(&pages, ("x", Reminder)), Evict::Incoming);
    // ... and a new page takes the place of the oldest one behind the head.
    assert_eq!(evict(&pages, ("d", Opened)), Evict::Queued(1));
    // Spooled before this start (unknown) counts as a page.
    let mut unknown = pages.clone();
    unknown.insert(1, None);
    assert_eq!(evict(&unknown, ("d", Opened)), Evict::Queued(1));
    assert_eq!(evict(&q(&[("a", Opened)]), ("d", Opened)), Evict::Incoming);
}
