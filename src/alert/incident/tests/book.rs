//! The incident book: hysteresis, updates, holds while the cluster is unreachable, resolves.

use super::*;

fn broker_finding(cluster: &str, id: i32, state: BrokerState, rules: &[&'static str]) -> Finding {
    let mut r = report(cluster);
    let hits: Vec<(&'static str, BrokerState, &str)> =
        rules.iter().map(|r| (*r, state, "detail")).collect();
    r.verdicts = vec![verdict(id, state, &hits)];
    findings(&r, Vec::new()).remove(0)
}

#[test]
fn one_zombie_round_between_healthy_rounds_opens_nothing() {
    // A clean restart can look like a zombie for one round; hysteresis absorbs it.
    let mut book = IncidentBook::new();
    let rules = h(2, 3);
    assert!(book.observe("lab", vec![], rules, t(0)).is_empty());
    assert!(book
        .observe("lab", vec![zombie("lab", 2)], rules, t(10))
        .is_empty());
    assert!(book.observe("lab", vec![], rules, t(20)).is_empty());
    assert!(book
        .observe("lab", vec![zombie("lab", 2)], rules, t(30))
        .is_empty());
    assert!(book.observe("lab", vec![], rules, t(40)).is_empty());
    assert!(book.open_incidents().is_empty());
    assert!(book.is_idle(), "nothing pending after a clean round");
}

#[test]
fn an_incident_opens_after_enough_rounds_and_starts_when_first_seen() {
    let mut book = IncidentBook::new();
    let rules = h(3, 2);
    assert!(book
        .observe("lab", vec![zombie("lab", 2)], rules, t(10))
        .is_empty());
    assert!(book
        .observe("lab", vec![zombie("lab", 2)], rules, t(20))
        .is_empty());
    let es = book.observe("lab", vec![zombie("lab", 2)], rules, t(30));
    assert_eq!(event_kinds(&es), vec![EventKind::Opened]);
    let i = &es[0].incident;
    assert_eq!(i.started_at, t(10));
    assert_eq!(i.updated_at, t(30));
    assert_eq!(i.broker, Some(2));
    assert_eq!(i.state, Some(BrokerState::Zombie));
    assert_eq!(i.severity, Severity::Critical);
    assert_eq!(i.dedup_key, "kafka-watchdog/lab/broker-2/broker");
    assert!(i.id.starts_with("kw-") && i.id.len() == 23, "{}", i.id);
    assert_eq!(i.duration(t(40)), Duration::from_secs(30));
    // Still there: no news.
    assert!(book
        .observe("lab", vec![zombie("lab", 2)], rules, t(40))
        .is_empty());
    assert_eq!(book.open_incidents().len(), 1);
}

#[test]
fn open_after_one_opens_at_once() {
    let mut book = IncidentBook::new();
    let es = book.observe("lab", vec![zombie("lab", 2)], h(1, 1), t(0));
    assert_eq!(event_kinds(&es), vec![EventKind::Opened]);
    let es = book.observe("lab", vec![], h(1, 1), t(10));
    assert_eq!(event_kinds(&es), vec![EventKind::Resolved]);
    assert_eq!(es[0].incident.resolved_at, Some(t(10)));
    assert_eq!(es[0].incident.duration(t(99)), Duration::from_secs(10));
}

#[test]
fn a_resolve_needs_consecutive_clean_rounds_and_ends_when_it_first_went_away() {
    let mut book = IncidentBook::new();
    let rules = h(1, 3);
    book.observe("lab", vec![zombie("lab", 2)], rules, t(0));
    assert!(book.observe("lab", vec![], rules, t(10)).is_empty());
    assert!(book.observe("lab", vec![], rules, t(20)).is_empty());
    // Back for one round: the clean streak starts again.
    assert!(book
        .observe("lab", vec![zombie("lab", 2)], rules, t(30))
        .is_empty());
    assert!(book.observe("lab", vec![], rules, t(40)).is_empty());
    assert!(book.observe("lab", vec![], rules, t(50)).is_empty());
    let es = book.observe("lab", vec![], rules, t(60));
    assert_eq!(event_kinds(&es), vec![EventKind::Resolved]);
    let i = &es[0].incident;
    assert_eq!(i.resolved_at, Some(t(40)));
    assert_eq!(i.duration(t(1000)), Duration::from_secs(40));
    assert!(book.open_incidents().is_empty());
    assert!(book.tracks.is_empty());
}

#[test]
fn a_reopened_problem_is_a_new_incident_with_the_same_dedup_key() {
    let mut book = IncidentBook::new();
    let rules = h(1, 1);
    let first = book
        .observe("lab", vec![zombie("lab", 2)], rules, t(0))
        .remove(0);
    book.observe("lab", vec![], rules, t(10));
    let second = book
        .observe("lab", vec![zombie("lab", 2)], rules, t(20))
        .remove(0);
    assert_eq!(second.kind, EventKind::Opened);
    assert_ne!(first.incident.id, second.incident.id);
    assert_eq!(first.incident.dedup_key, second.incident.dedup_key);
}

#[test]
fn a_worse_state_is_an_update_with_what_it_was() {
    let mut book = IncidentBook::new();
    let rules = h(1, 1);
    let degraded = broker_finding("lab", 2, BrokerState::Degraded, &["out_of_some_isrs"]);
    book.observe("lab", vec![degraded.clone()], rules, t(0));
    let es = book.observe("lab", vec![zombie("lab", 2)], rules, t(10));
    assert_eq!(event_kinds(&es), vec![EventKind::Updated]);
    let e = &es[0];
    assert_eq!(e.incident.severity, Severity::Critical);
    assert_eq!(e.incident.peak_severity, Severity::Critical);
    assert_eq!(e.incident.updated_at, t(10));
    let p = e.previous.unwrap();
    assert_eq!(p.severity, Severity::Warning);
    assert_eq!(p.peak_severity, Severity::Warning);
    assert_eq!(p.state, Some(BrokerState::Degraded));
    assert!(
        e.changes
            .contains(&"severity warning -> critical".to_string()),
        "{:?}",
        e.changes
    );
    assert!(
        e.changes.contains(&"state degraded -> zombie".to_string()),
        "{:?}",
        e.changes
    );
    assert!(
        e.changes.contains(&"now also: no_answer".to_string()),
        "{:?}",
        e.changes
    );
    // Better again: nothing to tell (the incident keeps its episode's worst severity, the
    // current state is the verdict's); worse again: nothing new either.
    assert!(book
        .observe("lab", vec![degraded.clone()], rules, t(20))
        .is_empty());
    let open = &book.open_incidents()[0];
    assert_eq!(open.severity, Severity::Critical);
    assert_eq!(open.state, Some(BrokerState::Degraded));
    assert!(book
        .observe("lab", vec![zombie("lab", 2)], rules, t(30))
        .is_empty());
}

#[test]
fn new_wording_alone_is_no_update_but_is_kept() {
    let mut book = IncidentBook::new();
    let rules = h(1, 1);
    book.observe("lab", vec![zombie("lab", 2)], rules, t(0));
    let mut f = zombie("lab", 2);
    f.summary = "broker 2 is a zombie: timeout after 3.0 s".into();
    f.evidence = vec!["no_answer: timeout after 3.0 s".into()];
    assert!(book.observe("lab", vec![f], rules, t(10)).is_empty());
    let open = book.open_incidents();
    assert_eq!(open[0].summary, "broker 2 is a zombie: timeout after 3.0 s");
    assert_eq!(open[0].updated_at, t(0));
}

fn under_replicated(partitions: std::ops::Range<i32>, suspect: i32) -> Finding {
    // Led by a broker that is never the suspect (9 when the suspect is 1).
    let leader = if suspect == 1 { 9 } else { 1 };
    let problems = partitions
        .map(|p| {
            problem(
                "t",
                p,
                &[Condition::UnderReplicated],
                leader,
                &[leader, suspect],
                &[leader],
                None,
            )
        })
        .collect();
    findings(&with_problems(report("lab"), problems), Vec::new()).remove(0)
}

#[test]
fn partitions_joining_is_an_update_partitions_recovering_is_not() {
    let mut book = IncidentBook::new();
    let rules = h(1, 2);
    book.observe("lab", vec![under_replicated(0..3, 2)], rules, t(0));
    let es = book.observe("lab", vec![under_replicated(0..5, 2)], rules, t(10));
    assert_eq!(event_kinds(&es), vec![EventKind::Updated]);
    assert_eq!(
        es[0].changes,
        vec!["5 partition(s) affected, was 3".to_string()]
    );
    // Recovering partition by partition: quiet.
    assert!(book
        .observe("lab", vec![under_replicated(0..4, 2)], rules, t(20))
        .is_empty());
    assert!(book
        .observe("lab", vec![under_replicated(0..1, 2)], rules, t(30))
        .is_empty());
    assert_eq!(book.open_incidents()[0].affected_partitions_total, 1);
    // Growing again, but not past the five receivers were told: quiet.
    assert!(book
        .observe("lab", vec![under_replicated(1..5, 2)], rules, t(40))
        .is_empty());
    // Another broker to suspect: news, once.
    let es = book.observe("lab", vec![under_replicated(1..2, 3)], rules, t(50));
    assert_eq!(
        es[0].changes,
        vec!["now also suspects broker(s) 3".to_string()]
    );
    assert!(book
        .observe("lab", vec![under_replicated(1..2, 2)], rules, t(60))
        .is_empty());
    assert!(book
        .observe("lab", vec![under_replicated(1..2, 3)], rules, t(70))
        .is_empty());
}

#[test]
fn an_unreachable_cluster_holds_its_broker_and_partition_incidents() {
    let mut book = IncidentBook::new();
    let rules = h(2, 2);
    let offline = {
        let p = problem("t", 0, &[Condition::Offline], -1, &[2, 3], &[], Some(1));
        findings(&with_problems(report("lab"), vec![p]), Vec::new()).remove(0)
    };
    let bad = || vec![zombie("lab", 2), offline.clone()];
    book.observe("lab", bad(), rules, t(0));
    let es = book.observe("lab", bad(), rules, t(10));
    assert_eq!(event_kinds(&es), vec![EventKind::Opened, EventKind::Opened]);
    let before = book.open_incidents();

    // The watchdog loses the cluster: every verdict is unknown, no partition is seen.
    let blind = || findings(&unreachable_report("lab"), Vec::new());
    assert!(book.observe("lab", blind(), rules, t(20)).is_empty());
    let es = book.observe("lab", blind(), rules, t(30));
    assert_eq!(event_kinds(&es), vec![EventKind::Opened]);
    assert_eq!(es[0].incident.kind, FindingKind::ClusterUnreachable);
    for round in 4..20 {
        assert!(book
            .observe("lab", blind(), rules, t(round * 10))
            .is_empty());
    }
    let held: Vec<Incident> = book
        .open_incidents()
        .into_iter()
        .filter(|i| i.kind != FindingKind::ClusterUnreachable)
        .collect();
    assert_eq!(
        held, before,
        "held unchanged: no update, no resolve, no unknown incidents"
    );

    // Back, and healthy: everything resolves after the clean rounds.
    assert!(book.observe("lab", vec![], rules, t(300)).is_empty());
    let es = book.observe("lab", vec![], rules, t(310));
    assert_eq!(event_kinds(&es), vec![EventKind::Resolved; 3]);
    let broker = es
        .iter()
        .find(|e| e.incident.kind == FindingKind::Broker)
        .unwrap();
    assert_eq!(broker.incident.resolved_at, Some(t(300)));
}

#[test]
fn a_pending_broker_finding_is_held_too_while_unreachable() {
    let mut book = IncidentBook::new();
    let rules = h(2, 1);
    book.observe("lab", vec![zombie("lab", 2)], rules, t(0));
    book.observe(
        "lab",
        findings(&unreachable_report("lab"), Vec::new()),
        rules,
        t(10),
    );
    let es = book.observe("lab", vec![zombie("lab", 2)], rules, t(20));
    assert_eq!(
        event_kinds(&es),
        vec![EventKind::Opened],
        "two rounds seen, the blind one between does not count"
    );
}

#[test]
fn canary_findings_are_not_held_while_unreachable() {
    let mut book = IncidentBook::new();
    let rules = h(1, 1);
    let mut fs = findings(&unreachable_report("lab"), Vec::new());
    fs.push(Finding::new(
        FindingKey::new("lab", Subject::Cluster, FindingKind::CanaryUnavailable),
        "canary writes time out",
    ));
    let es = book.observe("lab", fs, rules, t(0));
    let opened: BTreeSet<FindingKind> = es.iter().map(|e| e.incident.kind).collect();
    assert_eq!(
        opened,
        [
            FindingKind::ClusterUnreachable,
            FindingKind::CanaryUnavailable
        ]
        .into_iter()
        .collect()
    );
}

#[test]
fn clusters_do_not_touch_each_other() {
    let mut book = IncidentBook::new();
    let rules = h(1, 1);
    book.observe("a", vec![zombie("a", 1)], rules, t(0));
    // A round of cluster b, with a stray finding of a: a's incident neither resolves nor
    // changes.
    assert!(book.observe("b", vec![], rules, t(10)).is_empty());
    assert!(book
        .observe("b", vec![zombie("a", 9)], rules, t(20))
        .is_empty());
    assert_eq!(book.open_incidents_of("a").len(), 1);
    assert!(book.open_incidents_of("b").is_empty());
    assert_eq!(
        event_kinds(&book.observe("a", vec![], rules, t(30))),
        vec![EventKind::Resolved]
    );
}

#[test]
fn unavailable_seconds_from_the_caller_are_carried() {
    let mut book = IncidentBook::new();
    let rules = h(1, 1);
    let mut f = Finding::new(
        FindingKey::new("lab", Subject::Cluster, FindingKind::CanaryUnavailable),
        "canary down",
    );
    f.unavailable_seconds = Some(4.5);
    let es = book.observe("lab", vec![f.clone()], rules, t(0));
    assert_eq!(es[0].incident.unavailable_seconds, Some(4.5));
    f.unavailable_seconds = Some(14.5);
    assert!(
        book.observe("lab", vec![f], rules, t(10)).is_empty(),
        "not news by itself"
    );
    assert_eq!(book.open_incidents()[0].unavailable_seconds, Some(14.5));
}

#[test]
fn a_removed_cluster_resolves_its_incidents() {
    let mut book = IncidentBook::new();
    book.observe("gone", vec![zombie("gone", 1)], h(1, 1), t(0));
    book.observe("kept", vec![zombie("kept", 1)], h(1, 1), t(0));
    let es = book.retain_clusters(&["kept".to_string()], t(50));
    assert_eq!(event_kinds(&es), vec![EventKind::Resolved]);
    assert_eq!(es[0].incident.cluster, "gone");
    assert_eq!(es[0].incident.resolved_at, Some(t(50)));
    assert_eq!(book.open_incidents().len(), 1);
}

/// Every sequence of present/absent rounds up to 10 long, for several hysteresis
/// settings, against the rule written plainly: open when the last `open` rounds were all
/// present and nothing is open; resolve when the last `resolve` rounds were all absent and
/// something is open.
#[test]
fn hysteresis_matches_its_definition_on_every_short_history() {
    for (open, resolve) in [(1, 1), (1, 3), (2, 1), (2, 3), (3, 2), (4, 4)] {
        for len in 1..=10u32 {
            for bits in 0..(1u32 << len) {
                let seen: Vec<bool> = (0..len).map(|i| bits >> i & 1 == 1).collect();
                let mut book = IncidentBook::new();
                let mut is_open = false;
                for (i, present) in seen.iter().enumerate() {
                    let fs = if *present {
                        vec![zombie("lab", 1)]
                    } else {
                        vec![]
                    };
                    // Flapping is told by an update of its own (tested below); this is
                    // about opening and resolving.
                    let got: Vec<EventKind> =
                        event_kinds(&book.observe("lab", fs, h(open, resolve), t(i as u64 * 10)))
                            .into_iter()
                            .filter(|k| *k != EventKind::Updated)
                            .collect();
                    let run = |want: bool, n: u32| {
                        i + 1 >= n as usize
                            && seen[i + 1 - n as usize..=i].iter().all(|p| *p == want)
                    };
                    let expected = if !is_open && run(true, open) {
                        is_open = true;
                        vec![EventKind::Opened]
                    } else if is_open && run(false, resolve) {
                        is_open = false;
                        vec![EventKind::Resolved]
                    } else {
                        vec![]
                    };
                    assert_eq!(
                        got, expected,
                        "open {open} resolve {resolve} history {seen:?} round {i}"
                    );
                }
            }
        }
    }
}

/// The routine bench's rolling restart paged the partitions' under-replication 5 s in: the
/// missing replica moved from broker 1 (held for its clean stop) to broker 2 as it left
/// every ISR before its port closed (degraded, not yet held), and the partitions' finding,
/// one since broker 1 stopped, was old enough to open. Each broker's part waits as long as
/// that broker's own finding would.
#[test]
fn a_rolling_restart_pages_nothing_while_the_missing_replica_moves_from_broker_to_broker() {
    let mut book = IncidentBook::new();
    let rules = Hysteresis::from(&crate::config::VerdictConfig::default());
    let held = |id| {
        let mut f = broker_finding("lab", id, BrokerState::Down, &["shut_down_cleanly"]);
        f.hold_for = Some(Duration::from_secs(120));
        f
    };
    let leaving = |id| broker_finding("lab", id, BrokerState::Degraded, &["out_of_every_isr"]);
    // Back and catching up: held like its stop until it is healthy (`hold_after_clean_stop`).
    let back = |id| {
        let mut f = broker_finding("lab", id, BrokerState::Degraded, &["out_of_some_isrs"]);
        f.hold_for = Some(Duration::from_secs(120));
        f
    };
    let mut looks: Vec<(u64, Vec<Finding>)> = Vec::new();
    for (b, start) in [(1, 0), (2, 10), (3, 20)] {
        looks.push((start, vec![leaving(b), under_replicated(0..3, b)]));
        for s in 1..7 {
            looks.push((start + s, vec![held(b), under_replicated(0..3, b)]));
        }
        looks.push((start + 7, vec![back(b), under_replicated(0..3, b)]));
    }
    looks.push((30, vec![]));
    looks.push((90, vec![]));
    for (at, fs) in looks {
        let es = book.observe("lab", fs, rules, t(at));
        assert!(
            es.is_empty(),
            "at {at} s: {:?}",
            es.iter()
                .map(|e| (e.kind, e.incident.kind, e.incident.summary.clone()))
                .collect::<Vec<_>>()
        );
    }
    assert!(book.open_incidents().is_empty());

    // Replicas missing on a broker with no finding of its own (nothing explains them) page
    // after `open_after`, as before.
    let mut book = IncidentBook::new();
    let opened: Vec<EventKind> = (0..10)
        .flat_map(|s| book.observe("lab", vec![under_replicated(0..3, 2)], rules, t(100 + s)))
        .map(|e| e.kind)
        .collect();
    assert_eq!(opened, vec![EventKind::Opened]);
}
