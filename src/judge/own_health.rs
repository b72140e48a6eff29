//! Whether the watchdog's own evidence is sound (issue 38 item 4), pure: from what it
//! measured of itself (`model::own_health`) and `now`, the spans of time in which its own
//! timing cannot be trusted, and whether it is unwell now. Its own sickness is never a
//! broker's fault: evidence that rests on the watchdog's timing (a silence, a request that
//! timed out, a probe that went unanswered) is not held against a broker when it was taken
//! while the watchdog was paused, starved, its clocks jumping or its packets lost. The
//! verdicts read this judgment (`verdict::own`, `verdict::live`); Kafka's own word (a
//! broker fenced, partitions offline, a newer leader epoch) does not depend on it.
//!
//! A node that is itself slow should lower its confidence rather than accuse its peers:
//! the idea HashiCorp's Lifeguard brought to memberlist, here applied to a watchdog.
//!
//! - Unwell now: an episode that has not ended, or the watchdog's own timer silent past
//!   its schedule when the judgment is made (after a pause, whatever runs first must not
//!   judge before the timer has said so).
//! - Doubt: every episode's span, merged. A silence is counted from the end of the last
//!   one, a round's timing evidence is held when its span meets one, and the continuous
//!   looks' (coordinators, controllers) for [`SETTLE`] after it.
//! - Degraded: unwell now, or within [`SETTLE`] of the end of an episode.

use std::time::{Duration, SystemTime};

use prometheus_client::registry::Registry;

use crate::model::metric_kit::{flag, gauge, set, GaugeFamily};
use crate::model::own_health::{OwnHealthFacts, Sickness, LAG_LIMIT, MEMORY, PAUSE_MIN, TICK};

/// How long after an episode the continuous looks' timing evidence is still held, and the
/// watchdog still says it is degraded: longer than the evidence of any of them (two
/// coordinator probes of 1 s, the transaction probe's 5 s grace, a controller's look).
pub const SETTLE: Duration = Duration::from_secs(10);

/// One way the watchdog is (or was, within [`SETTLE`]) unwell.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnProblem {
    pub kind: Sickness,
    pub since: SystemTime,
    /// `None` while it lasts.
    pub ended: Option<SystemTime>,
    pub detail: String,
}

/// The watchdog's judgment of itself at one moment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OwnJudgment {
    /// Unwell now, or within [`SETTLE`] of it: one per kind, the newest.
    pub problems: Vec<OwnProblem>,
    /// Spans of unsound timing within the memory, oldest first, overlapping ones merged;
    /// the last ends at the judgment's `now` while `ongoing`.
    pub doubt: Vec<(SystemTime, SystemTime)>,
    /// Unwell at the judgment's `now`.
    pub ongoing: bool,
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The judgment of `facts` at `now`.
pub fn judge(facts: &OwnHealthFacts, now: SystemTime) -> OwnJudgment {
    let mut spans: Vec<(SystemTime, SystemTime)> = Vec::new();
    let mut problems: Vec<OwnProblem> = Vec::new();
    let recent = |end: SystemTime| now.duration_since(end).map_or(true, |ago| ago <= SETTLE);
    let mut ongoing = false;
    for e in &facts.episodes {
        let end = e.ended.unwrap_or(now);
        ongoing |= e.ended.is_none();
        if now.duration_since(end).is_ok_and(|ago| ago > MEMORY) {
            continue;
        }
        spans.push((e.started, end));
        if recent(end) {
            note(&mut problems, e.kind, e.started, e.ended, e.detail.clone());
        }
    }
    // The timer silent past its schedule: whoever judges first after a pause sees it.
    if let Some(last) = facts.last_tick {
        let silent = now.duration_since(last).unwrap_or_default();
        if silent > TICK + LAG_LIMIT {
            let kind = if silent >= PAUSE_MIN {
                Sickness::Paused
            } else {
                Sickness::EventLoopLag
            };
            let detail = format!(
                "its {} ms timer has not fired for {}",
                TICK.as_millis(),
                secs(silent)
            );
            note(&mut problems, kind, last, None, detail);
            spans.push((last, now));
            ongoing = true;
        }
    }
    problems.sort_by_key(|p| p.kind);
    OwnJudgment {
        problems,
        doubt: merged(spans),
        ongoing,
    }
}

/// Keeps one problem per kind: the one that lasts, else the newest.
fn note(
    problems: &mut Vec<OwnProblem>,
    kind: Sickness,
    since: SystemTime,
    ended: Option<SystemTime>,
    detail: String,
) {
    let p = OwnProblem {
        kind,
        since,
        ended,
        detail,
    };
    match problems.iter_mut().find(|q| q.kind == kind) {
        Some(q) if q.ended.is_some() && (ended.is_none() || ended > q.ended) => *q = p,
        Some(_) => {}
        None => problems.push(p),
    }
}

fn merged(mut spans: Vec<(SystemTime, SystemTime)>) -> Vec<(SystemTime, SystemTime)> {
    spans.sort();
    let mut out: Vec<(SystemTime, SystemTime)> = Vec::new();
    for (a, b) in spans {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

impl OwnJudgment {
    /// Whether the watchdog says it is degraded: unwell now, or within [`SETTLE`] of it.
    pub fn degraded(&self) -> bool {
        !self.problems.is_empty()
    }

    /// When its timing became sound again after the last episode (the judgment's `now`
    /// while it is unwell); `None` when nothing is in doubt.
    pub fn trust_from(&self) -> Option<SystemTime> {
        self.doubt.last().map(|d| d.1)
    }

    /// Whether anything between `from` and `to` was measured in doubt.
    pub fn overlaps(&self, from: SystemTime, to: SystemTime) -> bool {
        self.doubt.iter().any(|&(a, b)| a <= to && from <= b)
    }

    /// Whether the continuous looks' timing evidence is held at `now`: unwell, or within
    /// [`SETTLE`] of the end of the last episode.
    pub fn holds_looks(&self, now: SystemTime) -> bool {
        self.ongoing
            || self
                .trust_from()
                .is_some_and(|t| now.duration_since(t).map_or(true, |ago| ago < SETTLE))
    }

    /// "paused (its 100 ms timer fired 30.1 s late...), 2.0 s ago", for evidence.
    pub fn words(&self, now: SystemTime) -> String {
        let parts: Vec<String> = self
            .problems
            .iter()
            .map(|p| {
                let when = match p.ended {
                    None => "now".to_string(),
                    Some(e) => format!(
                        "until {} ago",
                        secs(now.duration_since(e).unwrap_or_default())
                    ),
                };
                format!(
                    "{} ({}), {when}",
                    p.kind.as_label().replace('_', " "),
                    p.detail
                )
            })
            .collect();
        if parts.is_empty() {
            "unwell".to_string()
        } else {
            parts.join("; ")
        }
    }
}

/// `self_degraded{reason}`: 1 for each way the watchdog is unwell now (or within
/// [`SETTLE`] of it), every reason listed.
pub fn encode(reg: &mut Registry, j: &OwnJudgment) {
    #[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
    struct Reason {
        reason: &'static str,
    }
    let g: GaugeFamily<Reason> = gauge(
        reg,
        "self_degraded",
        "1 while the watchdog itself is unwell (or was within the last 10 s), by reason: event_loop_lag, paused, clock_jump, cpu_throttled, packet_loss. Meanwhile no broker or controller is judged on its timing alone (silences, timeouts, slow answers)",
    );
    for kind in Sickness::ALL {
        let on = j.problems.iter().any(|p| p.kind == kind);
        set(
            &g,
            Reason {
                reason: kind.as_label(),
            },
            flag(on),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::own_health::Episode;

    const NOW: u64 = 1_000_000;

    fn t(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
    }

    fn episode(kind: Sickness, from: u64, to: Option<u64>) -> Episode {
        Episode {
            kind,
            started: t(from),
            ended: to.map(t),
            detail: format!("{} measured", kind.as_label()),
        }
    }

    fn facts(episodes: Vec<Episode>) -> OwnHealthFacts {
        OwnHealthFacts {
            last_tick: Some(t(NOW - 50)),
            episodes,
            ..OwnHealthFacts::default()
        }
    }

    #[test]
    fn nothing_measured_is_nothing_doubted() {
        let j = judge(&OwnHealthFacts::default(), t(NOW));
        assert!(!j.degraded() && !j.ongoing && j.trust_from().is_none());
        assert!(!j.holds_looks(t(NOW)));
        let j = judge(&facts(Vec::new()), t(NOW));
        assert!(!j.degraded(), "{j:?}");
    }

    /// One test per sickness: each makes the watchdog unwell while it lasts, its span is
    /// doubt, and it stays degraded for the settle after it ends, then is well.
    #[test]
    fn every_sickness_is_doubt_while_it_lasts_and_for_the_settle_after() {
        for kind in Sickness::ALL {
            let lasting = judge(&facts(vec![episode(kind, NOW - 5_000, None)]), t(NOW));
            assert!(lasting.ongoing && lasting.degraded(), "{kind:?}");
            assert_eq!(lasting.trust_from(), Some(t(NOW)), "{kind:?}");
            assert!(lasting.overlaps(t(NOW - 6_000), t(NOW - 4_000)));
            assert!(!lasting.overlaps(t(NOW - 9_000), t(NOW - 6_000)));
            assert!(lasting.holds_looks(t(NOW)));

            let ended = facts(vec![episode(kind, NOW - 35_000, Some(NOW - 5_000))]);
            let settling = judge(&ended, t(NOW));
            assert!(!settling.ongoing && settling.degraded(), "{kind:?}");
            assert_eq!(settling.trust_from(), Some(t(NOW - 5_000)));
            assert!(settling.holds_looks(t(NOW)));
            assert_eq!(settling.problems[0].kind, kind);

            let mut ended = ended;
            ended.last_tick = Some(t(NOW + 5_950));
            let later = judge(&ended, t(NOW + 6_000));
            assert!(
                !later.degraded() && !later.holds_looks(t(NOW + 6_000)),
                "{kind:?}"
            );
            // Still remembered as doubt: a round or a stall of that time is held.
            assert!(later.overlaps(t(NOW - 20_000), t(NOW - 19_000)));
        }
    }

    /// After a pause the round loop or a liveness task may run before the timer does: the
    /// timer's silence is the evidence then.
    #[test]
    fn a_timer_silent_past_its_schedule_is_a_pause_now() {
        let mut f = facts(Vec::new());
        f.last_tick = Some(t(NOW - 30_000));
        let j = judge(&f, t(NOW));
        assert!(j.ongoing);
        assert_eq!(j.problems[0].kind, Sickness::Paused);
        assert!(
            j.problems[0].detail.contains("not fired for 30.0 s"),
            "{j:?}"
        );
        assert_eq!(j.doubt, [(t(NOW - 30_000), t(NOW))]);
        // Half a second silent: lag, not a pause; 200 ms: on schedule enough.
        f.last_tick = Some(t(NOW - 500));
        assert_eq!(judge(&f, t(NOW)).problems[0].kind, Sickness::EventLoopLag);
        f.last_tick = Some(t(NOW - 200));
        assert!(!judge(&f, t(NOW)).degraded());
    }

    #[test]
    fn overlapping_spans_merge_and_old_ones_are_forgotten() {
        let f = facts(vec![
            episode(Sickness::CpuThrottled, NOW - 60_000, Some(NOW - 40_000)),
            episode(Sickness::EventLoopLag, NOW - 45_000, Some(NOW - 30_000)),
            episode(Sickness::Paused, NOW - 300_000, Some(NOW - 290_000)),
        ]);
        let j = judge(&f, t(NOW));
        assert_eq!(j.doubt, [(t(NOW - 60_000), t(NOW - 30_000))]);
        assert!(!j.degraded(), "both ended more than the settle ago");
        assert!(j.words(t(NOW)).contains("unwell"));
    }

    #[test]
    fn the_words_say_what_and_when() {
        let f = facts(vec![
            episode(Sickness::Paused, NOW - 33_000, Some(NOW - 3_000)),
            episode(Sickness::PacketLoss, NOW - 8_000, None),
        ]);
        let j = judge(&f, t(NOW));
        assert_eq!(
            j.words(t(NOW)),
            "paused (paused measured), until 3.0 s ago; packet loss (packet_loss measured), now"
        );
    }

    #[test]
    fn the_degraded_gauge_lists_every_reason() {
        let mut reg = Registry::default();
        let j = judge(
            &facts(vec![episode(Sickness::Paused, NOW - 1_000, Some(NOW))]),
            t(NOW),
        );
        encode(&mut reg, &j);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &reg).unwrap();
        assert!(out.contains("self_degraded{reason=\"paused\"} 1"), "{out}");
        assert!(
            out.contains("self_degraded{reason=\"packet_loss\"} 0"),
            "{out}"
        );
        assert_eq!(out.matches("self_degraded{").count(), Sickness::ALL.len());
    }
}
