//! Right, steady and quiet (issue 31): an incident tells its receivers what is new in
//! substance and nothing else; a flapping incident says so once; partitions a broker's fault
//! left behind are that broker's incident. Each test replays a sequence seen on the lab.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;
use crate::config::Severity;

fn t(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000) + Duration::from_millis(ms)
}

/// The defaults, but facts open at their first look (the liveness facts the lab sees carry
/// their start and do: `tests_duration` covers that part).
fn defaults() -> Hysteresis {
    Hysteresis {
        open_after: Duration::ZERO,
        ..Hysteresis::default()
    }
}

/// A broker finding as `findings` makes it: the rules at its state lead.
fn broker(
    id: BrokerId,
    state: BrokerState,
    rules: &[(&str, BrokerState)],
    summary: &str,
) -> Finding {
    let mut f = Finding::new(
        FindingKey::new("lab", Subject::Broker(id), FindingKind::Broker),
        summary,
    );
    f.severity = FindingKind::Broker.severity(Some(state));
    f.state = Some(state);
    f.rules = rules.iter().map(|(r, _)| r.to_string()).collect();
    f.lead_rules = rules
        .iter()
        .filter(|(_, s)| *s == state)
        .map(|(r, _)| r.to_string())
        .collect();
    f.suspects = vec![id];
    f
}

fn zombie(id: BrokerId) -> Finding {
    broker(
        id,
        BrokerState::Zombie,
        &[("no_answer", BrokerState::Zombie)],
        "broker is a zombie",
    )
}

fn pausing(id: BrokerId) -> Finding {
    broker(
        id,
        BrokerState::Degraded,
        &[("liveness_flapping", BrokerState::Degraded)],
        "broker pauses",
    )
}

fn down(id: BrokerId, for_secs: f64) -> Finding {
    broker(
        id,
        BrokerState::Down,
        &[("port_closed", BrokerState::Down)],
        &format!("connection refused for {for_secs:.1} s"),
    )
}

fn partitions(kind: FindingKind, names: &[&str], suspects: &[BrokerId]) -> Finding {
    let mut f = Finding::new(
        FindingKey::new("lab", Subject::Cluster, kind),
        format!("{} partition(s) {}", names.len(), kind.as_str()),
    )
    .with_partitions(names.iter().map(|s| s.to_string()).collect());
    f.suspects = suspects.to_vec();
    f
}

/// The whole episode told as one broker incident: opened, then resolved, nothing between.
fn assert_one_broker_incident(es: &[IncidentEvent]) {
    assert_eq!(
        kinds(es),
        vec![
            (EventKind::Opened, FindingKind::Broker),
            (EventKind::Resolved, FindingKind::Broker),
        ],
        "{:#?}",
        es.iter().map(|e| (&e.kind, &e.changes)).collect::<Vec<_>>()
    );
}

fn kinds(es: &[IncidentEvent]) -> Vec<(EventKind, FindingKind)> {
    es.iter().map(|e| (e.kind, e.incident.kind)).collect()
}

/// Replays `looks` (time in ms, findings), returning every event.
fn replay(looks: Vec<(u64, Vec<Finding>)>) -> (IncidentBook, Vec<IncidentEvent>) {
    let mut book = IncidentBook::new();
    let mut all = Vec::new();
    for (at, fs) in looks {
        all.extend(book.observe("lab", fs, defaults(), t(at)));
    }
    (book, all)
}

/// The lab's 25 webhooks: broker 2 frozen 2 s and thawed 2 s for 60 s, judged zombie and
/// degraded in turn. One `opened`, one `updated` that says it flaps, one `resolved`.
#[test]
fn a_broker_swinging_between_zombie_and_degraded_is_told_once_that_it_flaps() {
    let mut looks = Vec::new();
    for k in 0..30u64 {
        // Looks every 500 ms: frozen during the first 2 s of each 4 s, answering after.
        for half in 0..8u64 {
            let at = 1_000 + k * 4_000 + half * 500;
            let f = if half < 4 { zombie(2) } else { pausing(2) };
            looks.push((at, vec![f]));
        }
    }
    let end = 1_000 + 30 * 4_000;
    for k in 0..60u64 {
        looks.push((end + k * 1_000, vec![]));
    }
    let (_, es) = replay(looks);
    assert_eq!(
        kinds(&es),
        vec![
            (EventKind::Opened, FindingKind::Broker),
            (EventKind::Updated, FindingKind::Broker),
            (EventKind::Resolved, FindingKind::Broker),
        ],
        "{:#?}",
        es.iter().map(|e| &e.changes).collect::<Vec<_>>()
    );
    assert!(
        es[1].changes[0].starts_with("flapping: 6 state changes in 120 s"),
        "{:?}",
        es[1].changes
    );
    // The episode's worst severity throughout.
    assert!(es.iter().all(|e| e.incident.severity == Severity::Critical));
}

/// Broker 3 killed: its durations change, Kafka fences it, it comes back degraded while it
/// catches up, its partitions are under-replicated. Two messages: opened and resolved, the
/// under-replicated partitions inside its incident.
#[test]
fn a_killed_broker_is_one_incident_of_two_messages_with_its_partitions_inside() {
    let under = |n: usize| {
        let names: Vec<String> = (0..n).map(|p| format!("t-{p}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        partitions(FindingKind::UnderReplicated, &refs, &[3])
    };
    let mut looks = vec![(1_000, vec![down(3, 0.2)])];
    for k in 1..30u64 {
        let mut fs = vec![down(3, 0.2 + k as f64)];
        if k >= 3 {
            fs.push(under(2 + (k as usize).min(3)));
        }
        looks.push((1_000 + k * 1_000, fs));
    }
    // Started again: its port open, not answering yet, then catching up (degraded) for
    // 5 s, partitions still under-replicated.
    for k in 30..32u64 {
        let starting = broker(
            3,
            BrokerState::Down,
            &[(
                crate::judge::verdict::Rule::Restarting.name(),
                BrokerState::Down,
            )],
            "restarting",
        );
        looks.push((1_000 + k * 1_000 - 500, vec![starting, under(5)]));
    }
    for k in 30..35u64 {
        let catching = broker(
            3,
            BrokerState::Degraded,
            &[("out_of_some_isrs", BrokerState::Degraded)],
            "catching up",
        );
        looks.push((1_000 + k * 1_000, vec![catching, under(5)]));
    }
    for k in 35..70u64 {
        looks.push((1_000 + k * 1_000, vec![]));
    }
    let (_, es) = replay(looks);
    assert_one_broker_incident(&es);
    let resolved = &es[1].incident;
    assert!(
        resolved.rules.contains(&"under_replicated".to_string()),
        "{:?}",
        resolved.rules
    );
    assert!(resolved.affected_partitions.contains(&"t-4".to_string()));
    assert!(resolved
        .evidence
        .iter()
        .any(|e| e.starts_with("impact: 5 partition(s)")));
}

/// Partitions left offline by a degraded broker (unreachable while the others still list
/// it) are its impact and make its incident critical: an escalation, told at once (a
/// `critical` receiver hears of it). Down brokers are critical already.
#[test]
fn offline_partitions_a_degraded_broker_explains_escalate_its_incident() {
    let unreachable = |k: f64| {
        broker(
            3,
            BrokerState::Degraded,
            &[("unreachable", BrokerState::Degraded)],
            &format!("connect timed out for {k:.1} s"),
        )
    };
    let mut book = IncidentBook::new();
    let es = book.observe("lab", vec![unreachable(2.0)], defaults(), t(2_000));
    assert_eq!(es[0].incident.severity, Severity::Warning);
    let offline = partitions(FindingKind::OfflinePartitions, &["rf1-0"], &[3]);
    let es = book.observe("lab", vec![unreachable(3.0), offline], defaults(), t(3_000));
    assert_eq!(kinds(&es), vec![(EventKind::Updated, FindingKind::Broker)]);
    assert_eq!(es[0].incident.severity, Severity::Critical);
    assert_eq!(es[0].previous.unwrap().severity, Severity::Warning);
    assert!(es[0]
        .changes
        .contains(&"severity warning -> critical".to_string()));
    assert_eq!(
        book.open_incidents().len(),
        1,
        "no offline incident of its own"
    );
}

/// A consequence that outlives its cause by the hold time opens on its own (a replica that
/// never catches up); one that is gone by then never does.
#[test]
fn a_consequence_outliving_its_cause_by_the_hold_opens_on_its_own() {
    let under = || partitions(FindingKind::UnderReplicated, &["t-0"], &[3]);
    let mut book = IncidentBook::new();
    book.observe("lab", vec![down(3, 2.0)], defaults(), t(2_000));
    book.observe("lab", vec![down(3, 3.0), under()], defaults(), t(3_000));
    // The broker is back; its incident clears for 20 s while the replica stays behind.
    let mut opened_at = None;
    for k in 4..60u64 {
        let es = book.observe("lab", vec![under()], defaults(), t(k * 1_000));
        if let Some(e) = es.iter().find(|e| e.kind == EventKind::Opened) {
            assert_eq!(e.incident.kind, FindingKind::UnderReplicated);
            opened_at = Some(k);
            break;
        }
    }
    // The broker's incident resolved at 24 s (absent since 4 s); 20 s more.
    assert_eq!(opened_at, Some(44));
}

/// Under-replication that opened before any broker incident explained it stays its own.
#[test]
fn a_consequence_already_open_stays_open() {
    let under = || partitions(FindingKind::UnderReplicated, &["t-0"], &[3]);
    let mut book = IncidentBook::new();
    let es = book.observe("lab", vec![under()], defaults(), t(0));
    assert_eq!(
        kinds(&es),
        vec![(EventKind::Opened, FindingKind::UnderReplicated)]
    );
    book.observe("lab", vec![under(), zombie(3)], defaults(), t(3_000));
    book.observe("lab", vec![under(), zombie(3)], defaults(), t(5_000));
    let open: Vec<FindingKind> = book.open_incidents().iter().map(|i| i.kind).collect();
    assert_eq!(
        open,
        vec![FindingKind::Broker, FindingKind::UnderReplicated]
    );
}

/// Partitions that also miss a broker no open incident covers are not explained.
#[test]
fn a_consequence_only_partly_explained_is_its_own_incident() {
    let mut book = IncidentBook::new();
    book.observe("lab", vec![zombie(2)], defaults(), t(0));
    let both = || partitions(FindingKind::UnderReplicated, &["t-0"], &[2, 3]);
    let es = book.observe("lab", vec![zombie(2), both()], defaults(), t(1_000));
    assert_eq!(
        kinds(&es),
        vec![(EventKind::Opened, FindingKind::UnderReplicated)]
    );
}

/// Durations, counters and a milder state are not news; a rule joining at the incident's
/// severity is, once; a milder rule joining is not.
#[test]
fn only_substance_is_news() {
    let mut book = IncidentBook::new();
    let es = book.observe("lab", vec![down(3, 1.0)], defaults(), t(1_000));
    assert_eq!(kinds(&es), vec![(EventKind::Opened, FindingKind::Broker)]);
    for k in 2..6u64 {
        let es = book.observe("lab", vec![down(3, k as f64)], defaults(), t(k * 1_000));
        assert!(es.is_empty(), "a duration is not news: {es:?}");
    }
    let also = broker(
        3,
        BrokerState::Down,
        &[
            ("port_closed", BrokerState::Down),
            ("not_registered", BrokerState::Down),
        ],
        "down",
    );
    let es = book.observe("lab", vec![also.clone()], defaults(), t(6_000));
    assert_eq!(es[0].changes, vec!["now also: not_registered".to_string()]);
    assert!(book
        .observe("lab", vec![down(3, 7.0)], defaults(), t(7_000))
        .is_empty());
    assert!(book
        .observe("lab", vec![also], defaults(), t(8_000))
        .is_empty());
    let milder = broker(
        3,
        BrokerState::Down,
        &[
            ("port_closed", BrokerState::Down),
            ("slow", BrokerState::Degraded),
        ],
        "down",
    );
    assert!(book
        .observe("lab", vec![milder], defaults(), t(9_000))
        .is_empty());
}

/// It stops flapping once the changes in the window fall to the low threshold, and says so
/// while it is still present (settled in one bad state).
#[test]
fn flapping_ends_below_the_low_threshold_with_one_message() {
    let mut looks = Vec::new();
    // Six swings in 12 s, then zombie for good.
    for k in 0..6u64 {
        let f = if k % 2 == 0 { zombie(2) } else { pausing(2) };
        looks.push((1_000 + k * 2_000, vec![f]));
    }
    for k in 0..150u64 {
        looks.push((13_000 + k * 1_000, vec![zombie(2)]));
    }
    let (_, es) = replay(looks);
    let changes: Vec<&Vec<String>> = es.iter().map(|e| &e.changes).collect();
    assert_eq!(es.len(), 3, "{changes:#?}");
    assert!(es[1].changes[0].starts_with("flapping"));
    assert!(es[2].changes[0].starts_with("no longer flapping"));
}

/// A state file written before this change (no told state, no changes) loads, and the
/// incident is compared with what it was when saved.
#[test]
fn an_incident_saved_before_told_states_compares_with_itself() {
    let mut book = IncidentBook::new();
    book.observe("lab", vec![zombie(2)], defaults(), t(0));
    for track in book.tracks.values_mut() {
        if let book::Track::Open { told, .. } = track {
            *told = None;
        }
    }
    assert!(book
        .observe("lab", vec![pausing(2)], defaults(), t(1_000))
        .is_empty());
    assert!(book
        .observe("lab", vec![zombie(2)], defaults(), t(2_000))
        .is_empty());
}

/// Incident 1: two zombies, and a partition whose replicas are both on them goes offline.
/// Each zombie's incident takes it, and says so once: data is now unavailable.
#[test]
fn offline_partitions_joining_a_zombie_are_told_once_in_each_cause() {
    let mut book = IncidentBook::new();
    book.observe("lab", vec![zombie(2), zombie(3)], defaults(), t(1_500));
    let offline = || partitions(FindingKind::OfflinePartitions, &["t-1"], &[2, 3]);
    let es = book.observe(
        "lab",
        vec![zombie(2), zombie(3), offline()],
        defaults(),
        t(4_000),
    );
    assert_eq!(
        kinds(&es),
        vec![
            (EventKind::Updated, FindingKind::Broker),
            (EventKind::Updated, FindingKind::Broker)
        ]
    );
    for e in &es {
        assert_eq!(e.changes, vec!["now also: offline_partitions".to_string()]);
        assert!(e.incident.affected_partitions.contains(&"t-1".to_string()));
        assert!(e
            .incident
            .evidence
            .iter()
            .any(|l| l.starts_with("impact: 1 partition(s)")));
    }
    let es = book.observe(
        "lab",
        vec![zombie(2), zombie(3), offline()],
        defaults(),
        t(5_000),
    );
    assert!(es.is_empty());
    assert_eq!(book.open_incidents().len(), 2);
}

/// Broker 2 stopped 1.2 s every 20 s for 2 min, as the verdicts now see it: a zombie during
/// the first pause only (no record yet), then `degraded` by its pauses between and during
/// the next ones, then healthy. One incident: opened and resolved.
#[test]
fn a_broker_pausing_every_20_s_is_one_incident_of_two_messages() {
    let mut looks = vec![(1_000, vec![zombie(2)]), (1_100, vec![zombie(2)])];
    for k in 0..240u64 {
        looks.push((1_500 + k * 500, vec![pausing(2)]));
    }
    for k in 0..40u64 {
        looks.push((122_000 + k * 1_000, vec![]));
    }
    let (_, es) = replay(looks);
    assert_one_broker_incident(&es);
}

/// Broker 2 stopped 0.8 s every 10 s: never past its threshold, `degraded` once its pauses
/// recur. A warning incident, never critical.
#[test]
fn short_pauses_are_a_warning_incident_never_critical() {
    let mut looks = Vec::new();
    for k in 0..200u64 {
        looks.push((20_000 + k * 500, vec![pausing(2)]));
    }
    for k in 0..30u64 {
        looks.push((121_000 + k * 1_000, vec![]));
    }
    let (_, es) = replay(looks);
    assert_eq!(es.len(), 2);
    assert!(es.iter().all(|e| e.incident.severity == Severity::Warning));
}

/// A controller finding as `findings` makes it.
fn controller(id: BrokerId, state: BrokerState, rule: &str) -> Finding {
    let mut f = Finding::new(
        FindingKey::new("lab", Subject::Controller(id), FindingKind::Controller),
        format!("controller {id} is {}", state.as_label()),
    );
    f.severity = FindingKind::Controller.severity(Some(state));
    f.state = Some(state);
    f.rules = vec![rule.to_string()];
    f.lead_rules = f.rules.clone();
    f.suspects = vec![id];
    f
}

fn quorum_out(suspects: &[BrokerId]) -> Finding {
    let mut f = Finding::new(
        FindingKey::new("lab", Subject::Cluster, FindingKind::Quorum),
        "the control plane is out (no leader)",
    );
    f.severity = FindingKind::Quorum.severity(None);
    f.rules = vec!["no_leader".into()];
    f.lead_rules = f.rules.clone();
    f.suspects = suspects.to_vec();
    f
}

/// The only controller frozen: its controller incident and the quorum it took down were two
/// pages for one fault (seen on the lab in session 8). The quorum is the controller's impact.
#[test]
fn a_quorum_out_because_of_its_frozen_controller_is_that_controllers_incident() {
    let mut book = IncidentBook::new();
    let look = || {
        vec![
            controller(0, BrokerState::Zombie, "controller_no_answer"),
            quorum_out(&[0]),
        ]
    };
    let mut events = Vec::new();
    for k in 0..10u64 {
        events.extend(book.observe("lab", look(), defaults(), t(k * 500)));
    }
    assert_eq!(
        kinds(&events),
        vec![(EventKind::Opened, FindingKind::Controller)]
    );
    let open = book.open_incidents();
    assert_eq!(open.len(), 1, "no quorum incident of its own: {open:#?}");
    assert!(
        open[0].rules.contains(&"quorum".to_string()),
        "{:?}",
        open[0].rules
    );
    assert!(
        open[0]
            .evidence
            .iter()
            .any(|e| e.starts_with("impact: the control plane is out")),
        "{:?}",
        open[0].evidence
    );
    // A quorum out with no controller incident to explain it (a controller still within its
    // restart allowance, or none suspected) pages on its own.
    let mut book = IncidentBook::new();
    let es = book.observe("lab", vec![quorum_out(&[0])], defaults(), t(0));
    assert_eq!(kinds(&es), vec![(EventKind::Opened, FindingKind::Quorum)]);
}

/// After the active controller froze, its successor fenced two brokers and their partitions
/// fell under min.insync.replicas: a page of its own for what the failover did, beside the
/// controller's (seen on the lab). While a controller's incident is open, partitions no
/// broker incident explains are its impact.
#[test]
fn partitions_a_failover_moved_are_inside_the_controllers_incident() {
    let mut book = IncidentBook::new();
    let mut events = Vec::new();
    for k in 0..4u64 {
        events.extend(book.observe(
            "lab",
            vec![controller(0, BrokerState::Zombie, "controller_no_answer")],
            defaults(),
            t(k * 500),
        ));
    }
    let under = || partitions(FindingKind::UnderMinIsr, &["t-0", "t-1"], &[1, 3]);
    for k in 4..12u64 {
        events.extend(book.observe(
            "lab",
            vec![
                controller(0, BrokerState::Zombie, "controller_no_answer"),
                under(),
            ],
            defaults(),
            t(k * 500),
        ));
    }
    let open = book.open_incidents();
    assert_eq!(
        open.len(),
        1,
        "no under_min_isr incident of its own: {open:#?}"
    );
    assert_eq!(open[0].kind, FindingKind::Controller);
    assert_eq!(open[0].affected_partitions, vec!["t-0", "t-1"]);
    assert!(
        events
            .iter()
            .all(|e| e.incident.kind == FindingKind::Controller),
        "{:?}",
        kinds(&events)
    );
}
