//! The watchdog's own sickness held out of the brokers' verdicts (issue 38 item 4): a hit
//! that rests on the watchdog's timing alone (a request that timed out or took long, a
//! connect that never completed, a probe left unanswered, canary writes that timed out) is
//! not held against the broker when it was measured while the watchdog was unwell
//! (`judge::own_health`): a lagging watchdog makes every answer slow, a lossy one makes
//! some take seconds. It becomes `watchdog_unwell` (unknown, paged to
//! nobody) unless Kafka's own word agrees (the others list the broker fenced or absent), or
//! the broker was already that bad before the watchdog fell ill. The liveness silences are
//! counted from the end of the episode in `live`; this holds the round's hits and the
//! coordinator probes'.

use std::collections::BTreeMap;
use std::time::SystemTime;

use super::{BrokerMemory, BrokerState, BrokerVerdict, Registration, Rule, RuleHit};
use crate::judge::own_health::OwnJudgment;
use crate::model::round::BrokerId;

/// Round rules that rest on the watchdog's own timing.
const ROUND_TIMING: [Rule; 6] = [
    Rule::NoAnswer,
    Rule::Unreachable,
    Rule::ProcessAliveNoAnswer,
    Rule::CanaryWritesFail,
    Rule::CanaryNotEnoughReplicas,
    Rule::Slow,
];

/// The continuous looks' rules that rest on its timing: the coordinator probes' (a probe
/// left unanswered, a transaction that did not end in time; their errors are Kafka's
/// word), and `slow` from the liveness answers.
const LOOK_TIMING: [Rule; 3] = [
    Rule::GroupCoordinatorStalled,
    Rule::TxnCoordinatorStalled,
    Rule::Slow,
];

/// Holds the round's timing hits when the round (from the round before it, whose canary
/// writes it reports, to its end) met the watchdog's doubt.
pub fn hold_round(
    verdicts: &mut [BrokerVerdict],
    own: &OwnJudgment,
    span: (SystemTime, SystemTime),
    memory: &BTreeMap<BrokerId, BrokerMemory>,
    now: SystemTime,
) {
    if !own.overlaps(span.0, span.1) {
        return;
    }
    for v in verdicts.iter_mut() {
        hold(v, &ROUND_TIMING, own, memory.get(&v.broker), now);
    }
}

/// Holds the coordinator probes' timing hits while the watchdog is unwell and for the
/// settle after.
pub fn hold_looks(
    verdicts: &mut [BrokerVerdict],
    own: &OwnJudgment,
    memory: &BTreeMap<BrokerId, BrokerMemory>,
    now: SystemTime,
) {
    if !own.holds_looks(now) {
        return;
    }
    for v in verdicts.iter_mut() {
        hold(v, &LOOK_TIMING, own, memory.get(&v.broker), now);
    }
}

/// Whether the broker's own record or Kafka's word makes `state` its fault whatever the
/// watchdog's health: the others list it fenced or absent, or it was that bad since before
/// the first doubt the watchdog remembers.
pub fn stands(
    registration: Registration,
    memory: Option<&BrokerMemory>,
    state: BrokerState,
    own: &OwnJudgment,
) -> bool {
    let kafka_says = matches!(registration, Registration::Fenced | Registration::Absent);
    let before = memory
        .and_then(|m| m.state)
        .zip(own.doubt.first())
        .is_some_and(|((s, since), (doubt, _))| s >= state && since < *doubt);
    kafka_says || before
}

/// The hit a held one becomes: what it said, and why it is not held against the broker.
pub fn unwell_hit(said: &str, own: &OwnJudgment, now: SystemTime) -> RuleHit {
    RuleHit {
        rule: Rule::WatchdogUnwell,
        state: BrokerState::Unknown,
        detail: format!(
            "{said}; not held against the broker: the watchdog itself was unwell when it measured this: {}",
            own.words(now)
        ),
    }
}

fn hold(
    v: &mut BrokerVerdict,
    rules: &[Rule],
    own: &OwnJudgment,
    memory: Option<&BrokerMemory>,
    now: SystemTime,
) {
    let timing = |h: &RuleHit| rules.contains(&h.rule) && h.state != BrokerState::Healthy;
    let Some(worst) = v.hits.iter().filter(|h| timing(h)).map(|h| h.state).max() else {
        return;
    };
    if stands(v.registration, memory, worst, own) {
        return;
    }
    let said: Vec<String> = v
        .hits
        .iter()
        .filter(|h| timing(h))
        .map(|h| format!("{}: {}", h.rule, h.detail))
        .collect();
    v.hits.retain(|h| !timing(h));
    v.hits.push(unwell_hit(&said.join("; "), own, now));
    v.hits.sort_by_key(|h| std::cmp::Reverse(h.state));
    v.state = v.hits.first().map_or(BrokerState::Healthy, |h| h.state);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::own_health::{Episode, OwnHealthFacts, Sickness};
    use std::time::Duration;

    const NOW: u64 = 1_000_000;

    fn t(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
    }

    fn paused(from: u64, to: u64) -> OwnJudgment {
        let f = OwnHealthFacts {
            last_tick: Some(t(NOW - 50)),
            episodes: vec![Episode {
                kind: Sickness::Paused,
                started: t(from),
                ended: Some(t(to)),
                detail: "its 100 ms timer fired 30.0 s late".into(),
            }],
            ..OwnHealthFacts::default()
        };
        crate::judge::own_health::judge(&f, t(NOW))
    }

    fn zombie(broker: BrokerId, registration: Registration) -> BrokerVerdict {
        BrokerVerdict {
            broker,
            address: format!("b{broker}:9092"),
            state: BrokerState::Zombie,
            registration,
            answered: false,
            hits: vec![RuleHit {
                rule: Rule::NoAnswer,
                state: BrokerState::Zombie,
                detail: "Metadata timed out after 3.0 s".into(),
            }],
            observed_at: None,
            held_since: None,
            page_after: None,
        }
    }

    #[test]
    fn a_round_that_met_a_pause_names_nobody_a_zombie_on_its_timeouts() {
        let own = paused(NOW - 40_000, NOW - 10_000);
        let mut vs = vec![zombie(1, Registration::Registered)];
        hold_round(
            &mut vs,
            &own,
            (t(NOW - 45_000), t(NOW - 9_000)),
            &BTreeMap::new(),
            t(NOW),
        );
        assert_eq!(vs[0].state, BrokerState::Unknown);
        assert_eq!(vs[0].hits[0].rule, Rule::WatchdogUnwell);
        let d = &vs[0].hits[0].detail;
        assert!(d.starts_with("no_answer: Metadata timed out"), "{d}");
        assert!(
            d.contains("paused (its 100 ms timer fired 30.0 s late), until 10.0 s ago"),
            "{d}"
        );
        // A round clear of it is judged as ever.
        let mut vs = vec![zombie(1, Registration::Registered)];
        hold_round(
            &mut vs,
            &own,
            (t(NOW - 8_000), t(NOW - 1_000)),
            &BTreeMap::new(),
            t(NOW),
        );
        assert_eq!(vs[0].state, BrokerState::Zombie);
    }

    #[test]
    fn kafkas_word_and_a_broker_bad_before_the_pause_still_count() {
        let own = paused(NOW - 40_000, NOW - 10_000);
        let span = (t(NOW - 45_000), t(NOW - 9_000));
        let mut vs = vec![
            zombie(1, Registration::Fenced),
            zombie(2, Registration::Absent),
        ];
        hold_round(&mut vs, &own, span, &BTreeMap::new(), t(NOW));
        assert!(vs.iter().all(|v| v.state == BrokerState::Zombie), "{vs:?}");
        let mut memory = BTreeMap::new();
        memory.insert(
            3,
            BrokerMemory {
                state: Some((BrokerState::Zombie, t(NOW - 60_000))),
                ..BrokerMemory::default()
            },
        );
        memory.insert(
            4,
            BrokerMemory {
                state: Some((BrokerState::Zombie, t(NOW - 20_000))),
                ..BrokerMemory::default()
            },
        );
        let mut vs = vec![
            zombie(3, Registration::Registered),
            zombie(4, Registration::Registered),
        ];
        hold_round(&mut vs, &own, span, &memory, t(NOW));
        assert_eq!(
            vs[0].state,
            BrokerState::Zombie,
            "zombie since before the pause"
        );
        assert_eq!(
            vs[1].state,
            BrokerState::Unknown,
            "zombie only since during it"
        );
    }

    /// A lagging or lossy watchdog makes a broker's Metadata take long: no `slow` on it.
    #[test]
    fn a_slow_answer_measured_while_the_watchdog_was_unwell_is_not_the_brokers() {
        let own = paused(NOW - 40_000, NOW - 10_000);
        let mut v = zombie(1, Registration::Registered);
        v.hits[0] = RuleHit {
            rule: Rule::Slow,
            state: BrokerState::Degraded,
            detail: "Metadata took 646 ms, peers' median 7 ms".into(),
        };
        v.state = BrokerState::Degraded;
        let mut vs = vec![v];
        hold_round(
            &mut vs,
            &own,
            (t(NOW - 45_000), t(NOW - 9_000)),
            &BTreeMap::new(),
            t(NOW),
        );
        assert_eq!(vs[0].state, BrokerState::Unknown);
        assert!(vs[0].hits[0]
            .detail
            .starts_with("slow: Metadata took 646 ms"));
    }

    #[test]
    fn only_timing_hits_are_held_and_other_evidence_stays() {
        let own = paused(NOW - 40_000, NOW - 10_000);
        let mut v = zombie(1, Registration::Registered);
        v.hits.push(RuleHit {
            rule: Rule::Unreachable,
            state: BrokerState::Degraded,
            detail: "connect timed out, yet registered".into(),
        });
        v.hits.push(RuleHit {
            rule: Rule::StaleLeader,
            state: BrokerState::Zombie,
            detail: "claims t-0 at epoch 3".into(),
        });
        let mut vs = vec![v];
        hold_round(
            &mut vs,
            &own,
            (t(NOW - 45_000), t(NOW - 9_000)),
            &BTreeMap::new(),
            t(NOW),
        );
        let rules: Vec<Rule> = vs[0].hits.iter().map(|h| h.rule).collect();
        assert_eq!(rules, [Rule::StaleLeader, Rule::WatchdogUnwell]);
        assert!(vs[0].hits[1]
            .detail
            .contains("unreachable: connect timed out"));
        assert_eq!(
            vs[0].state,
            BrokerState::Zombie,
            "Kafka's word: a stale leader"
        );
    }

    #[test]
    fn coordinator_stalls_are_held_for_the_settle_after_an_episode() {
        let stalled = || {
            let mut v = zombie(1, Registration::Registered);
            v.hits[0].rule = Rule::GroupCoordinatorStalled;
            vec![v]
        };
        let own = paused(NOW - 40_000, NOW - 5_000);
        let mut vs = stalled();
        hold_looks(&mut vs, &own, &BTreeMap::new(), t(NOW));
        assert_eq!(vs[0].state, BrokerState::Unknown);
        let own = paused(NOW - 40_000, NOW - 11_000);
        let mut vs = stalled();
        hold_looks(&mut vs, &own, &BTreeMap::new(), t(NOW));
        assert_eq!(vs[0].state, BrokerState::Zombie, "past the settle");
    }
}
