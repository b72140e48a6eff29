use super::*;

const TAKEOVER: Duration = Duration::from_secs(10);

fn t(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
}

fn delivery(seq: u64, event: &str, at: SystemTime) -> Delivery {
    Delivery {
        seq,
        receiver: "slack".into(),
        dedup_key: "lab/broker-2/broker".into(),
        event: event.into(),
        severity: "critical".into(),
        at,
        // Its incident began five seconds before the event (each its own look).
        started_at: Some(at - Duration::from_secs(5)),
        open_until: None,
        message: None,
    }
}

fn view(seen_at: SystemTime, deliveries: Vec<Delivery>) -> View {
    View {
        url: "http://peer:9644".into(),
        clusters: vec!["lab".into()],
        deliveries,
        seen_at,
    }
}

fn views(list: &[(&str, View)]) -> BTreeMap<String, View> {
    list.iter()
        .map(|(id, v)| (id.to_string(), v.clone()))
        .collect()
}

fn turn_of(me: &str, v: &BTreeMap<String, View>, mine: &Delivery, now: SystemTime) -> Turn {
    turn(me, v, &BTreeSet::new(), "lab", mine, now, TAKEOVER)
}

#[test]
fn the_first_in_line_sends_at_once_and_the_next_finds_its_delivery() {
    let opened = delivery(0, "opened", t(100));
    // wd-0 is first: wd-1 answering does not hold it.
    let seen = views(&[("wd-1", view(t(99), vec![]))]);
    assert_eq!(turn_of("wd-0", &seen, &opened, t(100)), Turn::Send);
    // wd-1 waits a takeover for wd-0 ...
    let before = views(&[("wd-0", view(t(100), vec![]))]);
    assert_eq!(
        turn_of("wd-1", &before, &opened, t(101)),
        Turn::Wait(Duration::from_secs(9))
    );
    // ... and drops it once wd-0 says it delivered it (its event a second earlier).
    let after = views(&[("wd-0", view(t(102), vec![delivery(7, "opened", t(99))]))]);
    assert_eq!(
        turn_of("wd-1", &after, &opened, t(102)),
        Turn::Delivered {
            by: "wd-0".into(),
            seq: 7
        }
    );
}

#[test]
fn a_silent_first_in_line_is_replaced_within_the_takeover() {
    let resolved = delivery(0, "resolved", t(200));
    // wd-0 answered 4 s ago: wd-1 waits for it until the event is a takeover old.
    let v = views(&[("wd-0", view(t(196), vec![delivery(3, "opened", t(100))]))]);
    assert!(matches!(
        turn_of("wd-1", &v, &resolved, t(200)),
        Turn::Wait(_)
    ));
    assert_eq!(turn_of("wd-1", &v, &resolved, t(210)), Turn::Send);
    // Silent for longer than the takeover: wd-1 is first in line now.
    assert_eq!(turn_of("wd-1", &v, &resolved, t(207)), Turn::Send);
}

#[test]
fn each_waits_a_takeover_per_place_in_line() {
    let opened = delivery(0, "opened", t(100));
    let v = views(&[
        ("wd-0", view(t(100), vec![])),
        ("wd-1", view(t(100), vec![])),
    ]);
    assert_eq!(
        turn_of("wd-2", &v, &opened, t(100)),
        Turn::Wait(Duration::from_secs(20))
    );
    assert_eq!(turn_of("wd-2", &v, &opened, t(120)), Turn::Send);
}

#[test]
fn instances_that_cannot_see_each_other_each_send() {
    let opened = delivery(0, "opened", t(100));
    let none = BTreeMap::new();
    for me in ["wd-0", "wd-1", "wd-2"] {
        assert_eq!(turn_of(me, &none, &opened, t(100)), Turn::Send);
    }
}

#[test]
fn a_peer_on_other_clusters_takes_no_turn() {
    let opened = delivery(0, "opened", t(100));
    let mut other = view(t(100), vec![]);
    other.clusters = vec!["billing".into()];
    assert_eq!(
        turn_of("wd-1", &views(&[("wd-0", other)]), &opened, t(100)),
        Turn::Send
    );
}

#[test]
fn another_event_or_severity_or_an_old_episode_is_not_the_same_delivery() {
    let v = views(&[(
        "wd-0",
        view(
            t(100),
            vec![
                delivery(1, "opened", t(100)),
                Delivery {
                    severity: "warning".into(),
                    ..delivery(2, "updated", t(100))
                },
            ],
        ),
    )]);
    // Long after: another episode of the same incident.
    let later = delivery(0, "opened", t(100 + 600));
    assert!(matches!(
        turn_of("wd-1", &v, &later, t(700)),
        Turn::Wait(_) | Turn::Send
    ));
    assert!(!matches!(
        turn_of("wd-1", &v, &later, t(700)),
        Turn::Delivered { .. }
    ));
    let escalated = delivery(0, "updated", t(100));
    assert!(!matches!(
        turn_of("wd-1", &v, &escalated, t(101)),
        Turn::Delivered { .. }
    ));
    let resolved = delivery(0, "resolved", t(100));
    assert!(!matches!(
        turn_of("wd-1", &v, &resolved, t(101)),
        Turn::Delivered { .. }
    ));
}

#[test]
fn one_peer_delivery_covers_one_notification() {
    // Two episodes a minute apart; the first-in-line died before the second's.
    let p = Peers::new("wd-1", TAKEOVER, Duration::from_secs(1));
    let answer = Answer {
        instance_id: "wd-0".into(),
        version: "x".into(),
        clusters: vec!["lab".into()],
        silences: vec![],
        deliveries: vec![delivery(1, "opened", t(100))],
    };
    p.heard("http://wd-0:9644", &answer, t(101));
    let first = event("opened", t(100));
    assert!(matches!(
        p.turn("slack", &first, t(101)),
        Turn::Delivered { .. }
    ));
    let second = event("opened", t(160));
    // wd-0 was last heard at 101: gone by 171, and its one delivery is used.
    assert_eq!(p.turn("slack", &second, t(172)), Turn::Send);
    // The one delivery was taken once: the same notification again is not covered by it.
    assert!(!matches!(
        p.turn("slack", &first, t(101)),
        Turn::Delivered { .. }
    ));
}

#[test]
fn own_deliveries_are_kept_ten_minutes_for_the_peers() {
    let p = Peers::new("wd-0", TAKEOVER, Duration::from_secs(1));
    p.delivered("slack", &event("opened", t(100)), None, t(100));
    p.delivered("slack", &event("resolved", t(200)), None, t(200));
    assert_eq!(p.deliveries(&[], t(200)).len(), 2);
    p.delivered("slack", &event("opened", t(750)), None, t(750));
    let kept: Vec<String> = p
        .deliveries(&[], t(750))
        .into_iter()
        .map(|d| d.event)
        .collect();
    assert_eq!(kept, ["resolved", "opened"]);
    let seqs: Vec<u64> = p
        .deliveries(&[], t(750))
        .into_iter()
        .map(|d| d.seq)
        .collect();
    assert_eq!(seqs, [2, 3]);
}

/// The Slack message of a delivery reaches the peer that matches it (issue 38 item 6);
/// a peer of an earlier version, whose deliveries name none, still parses.
#[test]
fn a_delivery_tells_its_slack_message_to_the_peers() {
    let wd0 = Peers::new("wd-0", TAKEOVER, Duration::from_secs(1));
    let m = SlackMessage {
        channel: "C0OPS".into(),
        ts: "1700000000.000001".into(),
    };
    wd0.delivered("slack", &event("opened", t(100)), Some(m.clone()), t(100));
    wd0.delivered("slack", &event("resolved", t(200)), None, t(200));
    let answer = Answer {
        instance_id: "wd-0".into(),
        version: "0".into(),
        clusters: vec!["lab".into()],
        silences: vec![],
        deliveries: wd0.deliveries(&[], t(200)),
    };
    let json = serde_json::to_value(&answer).unwrap();
    assert_eq!(json["deliveries"][0]["message"]["ts"], "1700000000.000001");
    assert!(json["deliveries"][1].get("message").is_none());
    let mut older = json.clone();
    older["deliveries"][0]
        .as_object_mut()
        .unwrap()
        .remove("message");
    let older: Answer = serde_json::from_value(older).unwrap();
    assert_eq!(older.deliveries[0].message, None);

    let wd1 = Peers::new("wd-1", TAKEOVER, Duration::from_secs(1));
    wd1.heard(
        "http://wd-0:9644",
        &serde_json::from_value(json).unwrap(),
        t(101),
    );
    let Turn::Delivered { by, seq } = wd1.turn("slack", &event("opened", t(100)), t(101)) else {
        panic!("wd-0 delivered it");
    };
    assert_eq!(wd1.message(&by, seq), Some(m));
    let Turn::Delivered { by, seq } = wd1.turn("slack", &event("resolved", t(200)), t(201)) else {
        panic!("wd-0 delivered it");
    };
    assert_eq!(wd1.message(&by, seq), None);
}

#[test]
fn the_formats_that_deduplicate_are_sent_by_every_instance() {
    assert!(deduplicates(WebhookFormat::Alertmanager));
    assert!(deduplicates(WebhookFormat::PagerDuty));
    for f in [
        WebhookFormat::Slack,
        WebhookFormat::Teams,
        WebhookFormat::Generic,
    ] {
        assert!(!deduplicates(f));
    }
}

/// Issue 38 item 5: a peer's claim of delivery stands only for an event of an episode this
/// instance saw too. The peer's incident opened at 0 and resolved at 30; this instance's
/// own opened at 99, after the peer's had ended: two episodes a minute and a half apart,
/// within the two-minute window, and only this one saw the second. Its page is not
/// dropped.
#[test]
fn a_delivery_claim_for_an_episode_this_instance_did_not_see_drops_no_page() {
    let p = Peers::new("wd-1", TAKEOVER, Duration::from_secs(1));
    let first = event_of("opened", t(1), t(0));
    let theirs = Peers::new("wd-0", TAKEOVER, Duration::from_secs(1));
    theirs.delivered("slack", &first, None, t(1));
    theirs.delivered("slack", &event_of("resolved", t(30), t(0)), None, t(30));
    let answer = Answer {
        instance_id: "wd-0".into(),
        version: "x".into(),
        clusters: vec!["lab".into()],
        silences: vec![],
        // Its incident is no longer open when it answers.
        deliveries: theirs.deliveries(&[], t(100)),
    };
    p.heard("http://wd-0:9644", &answer, t(100));
    let mine = event_of("opened", t(100), t(99));
    let turn = p.turn("slack", &mine, t(100));
    assert!(!matches!(turn, Turn::Delivered { .. }), "{turn:?}");
    // Its resolve at 150 is not the peer's resolve at 30 either.
    let resolved = event_of("resolved", t(150), t(99));
    assert!(!matches!(
        p.turn("slack", &resolved, t(150)),
        Turn::Delivered { .. }
    ));
    // The same episode seen by both (this one's began at 2, while the peer's was open
    // until 30): the peer's delivery stands for it.
    let same = event_of("opened", t(3), t(2));
    assert!(matches!(
        p.turn("slack", &same, t(100)),
        Turn::Delivered { .. }
    ));
    // A peer still open when it answered covers a later start of this one's too.
    let q = Peers::new("wd-1", TAKEOVER, Duration::from_secs(1));
    let open = vec![("lab/broker-2/broker".to_string(), t(0))];
    let answer = Answer {
        deliveries: theirs.deliveries(&open, t(100)),
        ..answer
    };
    q.heard("http://wd-0:9644", &answer, t(100));
    assert!(matches!(
        q.turn("slack", &event_of("opened", t(60), t(59)), t(100)),
        Turn::Delivered { .. }
    ));
}

#[test]
fn a_claim_without_its_episode_stands_for_nothing() {
    let mut old = delivery(1, "opened", t(100));
    old.started_at = None;
    let v = views(&[("wd-0", view(t(100), vec![old]))]);
    assert!(!matches!(
        turn_of("wd-1", &v, &delivery(0, "opened", t(100)), t(101)),
        Turn::Delivered { .. }
    ));
}

/// Issue 38 item 5: the peers' views, and the `peer` label of their metric, stay bounded.
#[test]
fn peer_views_and_their_labels_stay_bounded() {
    let p = Peers::new("wd-0", TAKEOVER, Duration::from_secs(1));
    let answer = |id: String| Answer {
        instance_id: id,
        version: "x".into(),
        clusters: vec!["lab".into()],
        silences: vec![],
        deliveries: vec![],
    };
    // One address answering with a new instance_id at each look (a restarted pod, or a
    // peer gone wrong) is one peer.
    for i in 0..1000 {
        p.heard("http://wd-1:9644", &answer(format!("wd-1-{i}")), t(i));
    }
    let seen = p.stats(t(1000)).peers;
    assert_eq!(seen.len(), 1, "one view per address");
    assert_eq!(seen[0].0, "wd-1-999");
    // A thousand addresses, each its own peer: at most MAX_PEERS, the latest heard.
    for i in 0..1000 {
        p.heard(
            &format!("http://10.0.{}.{}:9644", i / 250, i % 250),
            &answer(format!("pod-{i}")),
            t(1000 + i),
        );
    }
    let seen = p.stats(t(2000)).peers;
    assert_eq!(seen.len(), MAX_PEERS);
    assert!(seen.iter().any(|x| x.0 == "pod-999"));
    // Silent for longer than their deliveries are kept: forgotten, series and all.
    assert!(p.stats(t(2000 + 601)).peers.is_empty());
}

fn event(kind: &str, at: SystemTime) -> IncidentEvent {
    event_of(kind, at, at)
}

/// An event of `kind` at `at` about broker 2's incident that began at `started`.
fn event_of(kind: &str, at: SystemTime, started: SystemTime) -> IncidentEvent {
    use crate::alert::incident::{EventKind, Incident, Subject};
    use crate::config::Severity;
    use crate::model::kind::FindingKind;
    IncidentEvent {
        kind: match kind {
            "opened" => EventKind::Opened,
            "resolved" => EventKind::Resolved,
            _ => EventKind::Updated,
        },
        at,
        incident: Incident {
            id: "kw-1".into(),
            dedup_key: "lab/broker-2/broker".into(),
            cluster: "lab".into(),
            subject: Subject::Broker(2),
            kind: FindingKind::Broker,
            broker: Some(2),
            broker_address: None,
            state: None,
            severity: Severity::Critical,
            peak_severity: Severity::Critical,
            summary: String::new(),
            evidence: Vec::new(),
            rules: Vec::new(),
            affected_partitions: Vec::new(),
            affected_partitions_total: 0,
            suspects: vec![2],
            started_at: started,
            updated_at: at,
            resolved_at: None,
            unavailable_seconds: None,
            silenced: None,
            notified_peak: None,
            flapping_since: None,
            labels: Default::default(),
        },
        previous: None,
        changes: Vec::new(),
    }
}
