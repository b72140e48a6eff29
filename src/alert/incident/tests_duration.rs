//! Confirmation by duration (issue 14): a fact opens an incident once it has held
//! `open_after`, measured from when its evidence says it began to its newest observation;
//! re-evaluations of one round confirm nothing; absence resolves after `resolve_after`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;

fn t(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000) + Duration::from_millis(ms)
}

const SECS: fn(u64) -> Duration = Duration::from_secs;

fn defaults() -> Hysteresis {
    Hysteresis {
        open_after: SECS(1),
        resolve_after: SECS(20),
        flap: Flap::default(),
    }
}

fn zombie(observed_at: Option<SystemTime>, holds_since: Option<SystemTime>) -> Finding {
    let mut f = Finding::new(
        FindingKey::new("lab", Subject::Broker(2), FindingKind::Broker),
        "broker 2 is a zombie",
    );
    f.state = Some(crate::judge::verdict::BrokerState::Zombie);
    f.rules = vec!["no_answer".into()];
    f.observed_at = observed_at;
    f.holds_since = holds_since;
    f
}

fn opened(es: &[IncidentEvent]) -> usize {
    es.iter().filter(|e| e.kind == EventKind::Opened).count()
}

/// A silence past its threshold carries its start: it has held long enough the moment it
/// is first seen, so the page goes out with the first evaluation that sees it.
#[test]
fn a_silence_that_began_long_enough_ago_opens_at_once() {
    let mut book = IncidentBook::new();
    let es = book.observe(
        "lab",
        vec![zombie(Some(t(1_400)), Some(t(0)))],
        defaults(),
        t(1_400),
    );
    assert_eq!(opened(&es), 1, "{es:?}");
    assert_eq!(
        es[0].incident.started_at,
        t(0),
        "it started with the silence"
    );
}

/// Verdicts made again between rounds keep the round's time: one round's fact stays one
/// observation however often it is re-evaluated, and opens at the next round.
#[test]
fn re_evaluations_of_one_round_confirm_nothing() {
    let mut book = IncidentBook::new();
    let round = t(0);
    for k in 0..20 {
        let es = book.observe(
            "lab",
            vec![zombie(Some(round), None)],
            defaults(),
            t(500 * k),
        );
        assert!(es.is_empty(), "re-evaluation {k}: {es:?}");
    }
    let es = book.observe("lab", vec![zombie(None, None)], defaults(), t(10_000));
    assert_eq!(opened(&es), 1);
}

#[test]
fn an_incident_resolves_once_absent_for_the_duration() {
    let mut book = IncidentBook::new();
    book.observe("lab", vec![zombie(None, Some(t(0)))], defaults(), t(2_000));
    assert_eq!(book.open_incidents().len(), 1);
    for ms in [3_000, 13_000, 22_999] {
        assert!(book.observe("lab", vec![], defaults(), t(ms)).is_empty());
    }
    let es = book.observe("lab", vec![], defaults(), t(23_000));
    assert_eq!(es.len(), 1);
    assert_eq!(es[0].kind, EventKind::Resolved);
    assert_eq!(es[0].incident.resolved_at, Some(t(3_000)));
}

/// GC thrashing, 2 s silent in every 4 s for a minute: one incident, not one per spell and
/// not nothing (before, no spell spanned two rounds).
#[test]
fn short_spells_again_and_again_are_one_incident() {
    let mut book = IncidentBook::new();
    let mut events = Vec::new();
    for spell in 0..15u64 {
        let start = spell * 4_000;
        // Seen at the threshold (1 s in) and a second later, then answering again.
        for at in [start + 1_000, start + 2_000] {
            events.extend(book.observe(
                "lab",
                vec![zombie(Some(t(at)), Some(t(start)))],
                defaults(),
                t(at),
            ));
        }
        events.extend(book.observe("lab", vec![], defaults(), t(start + 2_100)));
    }
    assert_eq!(opened(&events), 1, "{events:?}");
    assert!(events.iter().all(|e| e.kind != EventKind::Resolved));
}

#[test]
fn round_counts_convert_to_the_durations_they_meant() {
    let h = Hysteresis::from_rounds(2, 3, SECS(10));
    assert_eq!(h.open_after, SECS(9));
    assert_eq!(h.resolve_after, SECS(18));
    assert_eq!(
        Hysteresis::from_rounds(1, 1, SECS(10)).open_after,
        Duration::ZERO
    );
}

/// A broker that shut down cleanly is expected back: its `down` opens an incident only once
/// it has held for the finding's own, longer hold (the restart grace), not the cluster's
/// `open_after`; back before then, nothing was ever opened.
#[test]
fn a_finding_held_for_longer_opens_only_once_it_has_held_that_long() {
    let mut book = IncidentBook::new();
    let down = |at: u64| {
        let mut f = zombie(Some(t(at)), Some(t(0)));
        f.state = Some(crate::judge::verdict::BrokerState::Down);
        f.rules = vec![crate::judge::verdict::Rule::ShutDownCleanly.name().into()];
        f.hold_for = Some(SECS(120));
        f
    };
    for at in [1_500, 10_000, 60_000, 119_000] {
        let es = book.observe("lab", vec![down(at)], defaults(), t(at));
        assert_eq!(opened(&es), 0, "at {at} ms: {es:?}");
    }
    let es = book.observe("lab", vec![down(120_500)], defaults(), t(120_500));
    assert_eq!(opened(&es), 1, "{es:?}");
    // Back within the grace: the pending track goes, and a later stop starts afresh.
    let mut book = IncidentBook::new();
    book.observe("lab", vec![down(30_000)], defaults(), t(30_000));
    let es = book.observe("lab", vec![], defaults(), t(40_000));
    assert!(es.is_empty(), "{es:?}");
    let es = book.observe("lab", vec![], defaults(), t(80_000));
    assert!(es.is_empty(), "{es:?}");
}

/// A round's finding waits for a look `open_after` after it; the loop starts a round then
/// (`run::cadence`) instead of waiting for the next interval. A finding already seen over
/// that span and still pending holds out for a longer hold of its own: no early look helps.
#[test]
fn a_pending_finding_says_when_a_second_look_confirms_it() {
    let mut book = IncidentBook::new();
    assert_eq!(book.confirmation_due("lab", SECS(1)), None);
    book.observe("lab", vec![zombie(None, None)], defaults(), t(10_000));
    assert_eq!(book.confirmation_due("lab", SECS(1)), Some(t(11_000)));
    assert_eq!(book.confirmation_due("other", SECS(1)), None);
    let es = book.observe("lab", vec![zombie(None, None)], defaults(), t(11_000));
    assert_eq!(opened(&es), 1);
    assert_eq!(
        book.confirmation_due("lab", SECS(1)),
        None,
        "open: nothing waits"
    );

    let mut partitions = IncidentBook::new();
    let urp = Finding::new(
        FindingKey::new("lab", Subject::Cluster, FindingKind::UnderReplicated),
        "1 partition under-replicated",
    );
    partitions.observe("lab", vec![urp], defaults(), t(0));
    assert_eq!(
        partitions.confirmation_due("lab", SECS(1)),
        None,
        "partition findings keep the rounds' pace"
    );

    let mut grace = IncidentBook::new();
    let mut held = zombie(None, None);
    held.hold_for = Some(SECS(60));
    grace.observe("lab", vec![held.clone()], defaults(), t(0));
    assert_eq!(grace.confirmation_due("lab", SECS(1)), Some(t(1_000)));
    grace.observe("lab", vec![held], defaults(), t(1_000));
    assert_eq!(grace.confirmation_due("lab", SECS(1)), None);
}
