//! Reminders and the coalescing of updates, on paused or injected time.

use super::*;

// ---- reminders, under paused time ----

#[tokio::test(start_paused = true)]
async fn reminders_come_at_each_receivers_interval_while_open() {
    let mut hourly = hook("hourly", "http://x", WebhookFormat::Slack);
    hourly.repeat_interval = Some(Duration::from_secs(3600));
    let mut am = hook("am", "http://x", WebhookFormat::Alertmanager);
    am.repeat_interval = Some(Duration::from_secs(300));
    let never = hook("never", "http://x", WebhookFormat::Generic);
    let receivers = [&hourly, &am, &never];
    let idle = [true, true, true];
    let mut r = Reminders::default();
    let opened = event(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    );
    r.record(&opened);
    let start = tokio::time::Instant::now();
    for idx in 0..3 {
        r.sent(idx, &opened.incident.id, start);
    }
    let mut got: Vec<(usize, u64)> = Vec::new();
    for _ in 0..(2 * 3600 / 60) {
        tokio::time::advance(Duration::from_secs(60)).await;
        let now = tokio::time::Instant::now();
        for (idx, e) in r.due(&receivers, &idle, now, SystemTime::now()) {
            assert_eq!(e.kind, EventKind::Reminder);
            got.push((idx, now.duration_since(start).as_secs()));
        }
    }
    let hourly_at: Vec<u64> = got
        .iter()
        .filter(|(i, _)| *i == 0)
        .map(|(_, s)| *s)
        .collect();
    assert_eq!(hourly_at, vec![3600, 7200]);
    assert_eq!(got.iter().filter(|(i, _)| *i == 1).count(), 24);
    assert!(!got.iter().any(|(i, _)| *i == 2));
    // Resolved: no more reminders.
    r.record(&event(
        EventKind::Resolved,
        incident("lab", Some(2), Severity::Critical),
    ));
    tokio::time::advance(Duration::from_secs(7200)).await;
    assert!(r
        .due(
            &receivers,
            &idle,
            tokio::time::Instant::now(),
            SystemTime::now()
        )
        .is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_busy_receiver_gets_no_reminders_and_a_restored_incident_waits_an_interval() {
    let mut am = hook("am", "http://x", WebhookFormat::Alertmanager);
    am.repeat_interval = Some(Duration::from_secs(300));
    let mut r = Reminders::default();
    r.restore(vec![incident("lab", None, Severity::Critical)]);
    let start = tokio::time::Instant::now();
    assert!(
        r.due(&[&am], &[true], start, SystemTime::now()).is_empty(),
        "counts from now"
    );
    tokio::time::advance(Duration::from_secs(300)).await;
    assert!(
        r.due(
            &[&am],
            &[false],
            tokio::time::Instant::now(),
            SystemTime::now()
        )
        .is_empty(),
        "busy"
    );
    tokio::time::advance(Duration::from_secs(299)).await;
    assert!(r
        .due(
            &[&am],
            &[true],
            tokio::time::Instant::now(),
            SystemTime::now()
        )
        .is_empty());
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        r.due(
            &[&am],
            &[true],
            tokio::time::Instant::now(),
            SystemTime::now()
        )
        .len(),
        1
    );
    // Below the receiver's threshold: never reminded.
    let mut strict = am.clone();
    strict.min_severity = Severity::Critical;
    let mut r = Reminders::default();
    r.record(&event(
        EventKind::Opened,
        incident("lab", Some(1), Severity::Warning),
    ));
    tokio::time::advance(Duration::from_secs(3600)).await;
    r.due(
        &[&strict],
        &[true],
        tokio::time::Instant::now(),
        SystemTime::now(),
    );
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert!(r
        .due(
            &[&strict],
            &[true],
            tokio::time::Instant::now(),
            SystemTime::now()
        )
        .is_empty());
}

// ---- coalescing, on injected time ----

#[test]
fn updates_within_the_group_interval_go_as_one_message_with_the_latest_state() {
    let start = tokio::time::Instant::now();
    let group = Some(secs(30));
    let mut c = Coalescer::default();
    let opened = event(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    );
    assert!(c.offer(0, group, opened.clone(), start).is_some());
    c.sent(0, &opened, start);
    let mut first = minor_update("rules: +slow_answers", "first");
    first.previous.as_mut().unwrap().state = Some(BrokerState::Degraded);
    assert_eq!(c.offer(0, group, first, start + secs(5)), None, "held");
    let second = minor_update("partitions: +orders-2", "second");
    assert_eq!(c.offer(0, group, second, start + secs(10)), None);
    let third = minor_update("rules: +slow_answers", "third");
    assert_eq!(c.offer(0, group, third, start + secs(12)), None);
    assert_eq!(c.held_count(0), 3);
    assert!(
        c.due(start + secs(29)).is_empty(),
        "30 s after the open, not before"
    );
    let due = c.due(start + secs(30));
    assert_eq!(due.len(), 1, "one message for three updates");
    let (r, merged) = &due[0];
    assert_eq!(*r, 0);
    assert_eq!(merged.kind, EventKind::Updated);
    assert_eq!(merged.incident.evidence, ["third"], "the latest state");
    assert_eq!(
        merged.changes,
        ["rules: +slow_answers", "partitions: +orders-2"],
        "every change once, in order"
    );
    assert_eq!(
        merged.previous.unwrap().state,
        Some(BrokerState::Degraded),
        "the state before the first held update: what the receiver last heard"
    );
    assert_eq!(c.held_count(0), 0);
    assert_eq!(
        c.take_tally(0),
        Tally {
            merged: 3,
            superseded: 0
        }
    );
    // The interval counts from the last message: an update right after it waits again.
    c.sent(0, merged, start + secs(30));
    assert_eq!(
        c.offer(0, group, minor_update("x", "y"), start + secs(31)),
        None
    );
    assert_eq!(c.due(start + secs(59)).len(), 0);
    assert_eq!(c.due(start + secs(60)).len(), 1);
}

#[test]
fn an_update_long_after_the_last_message_or_without_one_goes_at_once() {
    let start = tokio::time::Instant::now();
    let group = Some(secs(30));
    let mut c = Coalescer::default();
    // No message remembered (e.g. after a restart): nothing to wait for.
    assert!(c.offer(0, group, minor_update("a", "a"), start).is_some());
    let opened = event(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    );
    c.sent(0, &opened, start);
    assert!(c
        .offer(0, group, minor_update("b", "b"), start + secs(30))
        .is_some());
    // group_interval_secs: 0 sends every update at once.
    c.sent(1, &opened, start);
    assert!(c
        .offer(1, None, minor_update("c", "c"), start + secs(1))
        .is_some());
    assert_eq!(c.held_count(0) + c.held_count(1), 0);
}

/// Issue 39 item 3: a zombie told as down renames its Alertmanager alert; held and then
/// superseded by the resolve, the receiver would keep `KafkaBrokerZombie` firing.
#[test]
fn an_update_that_renames_the_alert_goes_at_once() {
    let start = tokio::time::Instant::now();
    let group = Some(secs(30));
    let mut c = Coalescer::default();
    let opened = event(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    );
    c.sent(0, &opened, start);
    let mut down = minor_update("now also: port_closed", "down");
    down.incident.state = Some(BrokerState::Down);
    down.incident.told_state = Some(BrokerState::Down);
    assert!(!is_escalation(&down), "same severity");
    assert!(renames(&down));
    let sent = c
        .offer(0, group, down, start + secs(2))
        .expect("a renaming update is not held");
    assert_eq!(sent.incident.alert_name(), "KafkaBrokerDown");
    // A milder state is not told (the book keeps the worst told): no new name, held.
    let mut calmer = minor_update("partitions: +orders-2", "calmer");
    calmer.incident.state = Some(BrokerState::Degraded);
    assert!(!renames(&calmer));
    assert_eq!(c.offer(0, group, calmer, start + secs(3)), None);
}

#[test]
fn an_escalation_goes_at_once_and_takes_the_held_changes_with_it() {
    let start = tokio::time::Instant::now();
    let group = Some(secs(30));
    let mut c = Coalescer::default();
    let opened = event(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Warning),
    );
    c.sent(0, &opened, start);
    let mut minor = updated(Severity::Warning, Severity::Warning, Severity::Warning);
    minor.changes = vec!["partitions: +orders-2".into()];
    minor.previous.as_mut().unwrap().state = Some(BrokerState::Degraded);
    assert_eq!(c.offer(0, group, minor, start + secs(2)), None);
    let mut up = updated(Severity::Warning, Severity::Warning, Severity::Critical);
    up.changes = vec!["severity: warning -> critical".into()];
    assert!(is_escalation(&up));
    let sent = c
        .offer(0, group, up, start + secs(3))
        .expect("an escalation is not held");
    assert_eq!(sent.incident.severity, Severity::Critical);
    assert_eq!(
        sent.changes,
        ["partitions: +orders-2", "severity: warning -> critical"]
    );
    assert_eq!(sent.previous.unwrap().state, Some(BrokerState::Degraded));
    assert_eq!(c.held_count(0), 0);
    assert!(c.due(start + secs(3600)).is_empty(), "nothing left to send");
    assert_eq!(c.take_tally(0).merged, 1);
    // Not an escalation: the same severity, or lower.
    assert!(!is_escalation(&updated(
        Severity::Critical,
        Severity::Critical,
        Severity::Warning
    )));
    assert!(!is_escalation(&minor_update("a", "b")));
}

#[test]
fn a_resolve_goes_at_once_and_drops_the_held_update() {
    let start = tokio::time::Instant::now();
    let group = Some(secs(30));
    let mut c = Coalescer::default();
    let i = incident("lab", Some(2), Severity::Critical);
    c.sent(0, &event(EventKind::Opened, i.clone()), start);
    c.sent(1, &event(EventKind::Opened, i.clone()), start);
    assert_eq!(
        c.offer(0, group, minor_update("a", "a"), start + secs(1)),
        None
    );
    assert_eq!(
        c.offer(0, group, minor_update("b", "b"), start + secs(2)),
        None
    );
    assert_eq!(
        c.offer(1, group, minor_update("a", "a"), start + secs(1)),
        None
    );
    let resolved = event(EventKind::Resolved, i.clone());
    let sent = c.offer(0, group, resolved.clone(), start + secs(3));
    assert_eq!(sent.map(|e| e.kind), Some(EventKind::Resolved));
    // Receiver 1 does not hear resolves (send_resolved: false): forgetting the incident
    // drops what it held as well.
    c.forget(&i.id);
    assert!(
        c.due(start + secs(3600)).is_empty(),
        "the update never follows the resolve"
    );
    assert_eq!(
        c.take_tally(0),
        Tally {
            merged: 0,
            superseded: 2
        }
    );
    assert_eq!(c.take_tally(1).superseded, 1);
    // Forgotten: a late update of it would not wait for anything.
    assert!(c
        .offer(0, group, minor_update("late", "late"), start + secs(4))
        .is_some());
}

#[test]
fn a_silence_drops_what_waited_for_the_incident() {
    let start = tokio::time::Instant::now();
    let mut c = Coalescer::default();
    let i = incident("lab", Some(2), Severity::Critical);
    c.sent(0, &event(EventKind::Opened, i.clone()), start);
    assert_eq!(
        c.offer(0, Some(secs(30)), minor_update("a", "a"), start),
        None
    );
    c.drop_held(0, &i.id);
    assert!(c.due(start + secs(30)).is_empty());
    assert_eq!(c.take_tally(0).superseded, 1);
}

#[test]
fn a_reminder_while_updates_wait_sends_the_updates_instead() {
    let start = tokio::time::Instant::now();
    let group = Some(secs(30));
    let mut c = Coalescer::default();
    let i = incident("lab", Some(2), Severity::Critical);
    c.sent(0, &event(EventKind::Opened, i.clone()), start);
    assert_eq!(
        c.offer(0, group, minor_update("a", "a"), start + secs(1)),
        None
    );
    let sent = c
        .offer(
            0,
            group,
            IncidentEvent::reminder(i.clone(), t(60)),
            start + secs(2),
        )
        .unwrap();
    assert_eq!(sent.kind, EventKind::Updated);
    assert_eq!(sent.changes, ["a"]);
    assert_eq!(c.held_count(0), 0);
    // Without held updates a reminder is a reminder.
    let plain = c
        .offer(0, group, IncidentEvent::reminder(i, t(60)), start + secs(3))
        .unwrap();
    assert_eq!(plain.kind, EventKind::Reminder);
}

#[test]
fn held_updates_restored_after_a_restart_go_at_the_first_look() {
    let start = tokio::time::Instant::now();
    let mut c = Coalescer::default();
    c.restore(
        0,
        vec![minor_update("a", "a"), minor_update("b", "b")],
        start,
    );
    assert_eq!(c.held_events(0).len(), 1, "one incident");
    let due = c.due(start);
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].1.changes, ["a", "b"]);
}
