//! When a cluster's next round starts. Rounds come every `round_interval`; a round also
//! starts early when something happened that only a round can judge (a broker left the
//! registered list, a canary partition's writes changed from working to failing or back),
//! and when a finding one round saw waits for a second look to be confirmed: the page then
//! follows the first sight by `open_after_secs`, not by a whole interval.
//!
//! Early rounds are bounded: never closer than [`MIN_GAP`] to the previous start, and at
//! most [`EARLY_BUDGET`] of them within one interval, so a cluster whose news never stops
//! costs a few rounds per interval more, not one round a second. Pure: instants are
//! parameters, so the schedule is tested without a clock.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use crate::judge::report::EarlyRounds;

/// Why a round is wanted before its interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A broker's list of registered brokers changed.
    Registration,
    /// A canary partition's writes changed how they end.
    Canary,
    /// A broker's verdict waits for the look that confirms it.
    Confirmation,
    /// The metadata log grew faster than the active controller's no-op records alone make
    /// it grow: something changed (a topic, a leadership), which only a round's Metadata
    /// answers show brokers have applied.
    Metadata,
}

/// No round starts closer than this to the previous one.
pub const MIN_GAP: Duration = Duration::from_secs(1);
/// Early rounds allowed within one round interval.
pub const EARLY_BUDGET: usize = 5;

#[derive(Debug, Clone)]
pub struct Cadence {
    interval: Duration,
    /// When the next round is due without news: one interval after the last start.
    regular: Instant,
    last_start: Option<Instant>,
    /// Starts of the early rounds of the last interval.
    early: VecDeque<Instant>,
    /// The earliest time a round was asked for and not yet started, and why.
    wanted: Option<(Instant, Why)>,
    counts: EarlyRounds,
}

impl Cadence {
    /// The first round starts at `now`.
    pub fn new(interval: Duration, now: Instant) -> Self {
        Cadence {
            interval,
            regular: now,
            last_start: None,
            early: VecDeque::new(),
            wanted: None,
            counts: EarlyRounds::default(),
        }
    }

    /// A round is wanted at `at` (now for news; later for a confirmation that is due then).
    pub fn want(&mut self, at: Instant, why: Why) {
        if self.wanted.is_none_or(|(w, _)| at < w) {
            self.wanted = Some((at, why));
        }
    }

    /// The early rounds started so far, by why.
    pub fn counts(&self) -> EarlyRounds {
        self.counts
    }

    /// When the next round starts, as things stand.
    pub fn next_start(&self, now: Instant) -> Instant {
        let Some((wanted, _)) = self.wanted else {
            return self.regular;
        };
        let in_budget = self
            .early
            .iter()
            .filter(|s| now.saturating_duration_since(**s) < self.interval)
            .count()
            < EARLY_BUDGET;
        if !in_budget {
            return self.regular;
        }
        let earliest = self.last_start.map_or(wanted, |l| wanted.max(l + MIN_GAP));
        earliest.min(self.regular)
    }

    /// A round starts at `now`; returns why, when it starts early. A round that started
    /// late (an overrun) moves the cadence with it rather than bursting to catch up.
    pub fn started(&mut self, now: Instant) -> Option<Why> {
        let early = match self.wanted {
            Some((w, why)) if now < self.regular && w <= now => Some(why),
            _ => None,
        };
        if let Some(why) = early {
            self.early.push_back(now);
            let n = match why {
                Why::Registration => &mut self.counts.registration,
                Why::Canary => &mut self.counts.canary,
                Why::Confirmation => &mut self.counts.confirmation,
                Why::Metadata => &mut self.counts.metadata,
            };
            *n += 1;
        }
        while self
            .early
            .front()
            .is_some_and(|s| now.saturating_duration_since(*s) >= self.interval)
        {
            self.early.pop_front();
        }
        // A wish from before this start is met by it; one for later stays.
        if self.wanted.is_some_and(|(w, _)| w <= now) {
            self.wanted = None;
        }
        self.last_start = Some(now);
        self.regular = now + self.interval;
        early
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn without_news_rounds_come_every_interval() {
        let t0 = Instant::now();
        let mut c = Cadence::new(secs(10.0), t0);
        assert_eq!(c.next_start(t0), t0);
        assert_eq!(c.started(t0), None, "the first round is a regular one");
        assert_eq!(c.next_start(t0), t0 + secs(10.0));
        // An overrun round: the next starts one interval after it, no burst.
        c.started(t0 + secs(13.0));
        assert_eq!(c.next_start(t0 + secs(14.0)), t0 + secs(23.0));
    }

    #[test]
    fn news_starts_a_round_at_once_but_not_closer_than_the_gap() {
        let t0 = Instant::now();
        let mut c = Cadence::new(secs(10.0), t0);
        c.started(t0);
        c.want(t0 + secs(4.0), Why::Canary);
        assert_eq!(c.next_start(t0 + secs(4.0)), t0 + secs(4.0));
        c.started(t0 + secs(4.0));
        c.want(t0 + secs(4.2), Why::Canary);
        assert_eq!(c.next_start(t0 + secs(4.2)), t0 + secs(5.0), "the gap");
        c.started(t0 + secs(5.0));
        assert_eq!(
            c.next_start(t0 + secs(5.0)),
            t0 + secs(15.0),
            "an early round moves the cadence"
        );
    }

    #[test]
    fn a_confirmation_due_later_waits_for_its_time_and_survives_rounds_before_it() {
        let t0 = Instant::now();
        let mut c = Cadence::new(secs(10.0), t0);
        c.started(t0);
        c.want(t0 + secs(3.0), Why::Confirmation);
        assert_eq!(c.next_start(t0 + secs(0.5)), t0 + secs(3.0));
        // News meanwhile: a round at once; the later wish was met by it.
        c.want(t0 + secs(1.5), Why::Canary);
        assert_eq!(c.next_start(t0 + secs(1.5)), t0 + secs(1.5));
        assert_eq!(c.started(t0 + secs(1.5)), Some(Why::Canary));
        assert_eq!(c.next_start(t0 + secs(1.5)), t0 + secs(11.5));
        assert_eq!(
            c.counts(),
            EarlyRounds {
                canary: 1,
                ..EarlyRounds::default()
            }
        );
    }

    #[test]
    fn a_wish_made_while_a_round_ran_is_met_by_the_next_round() {
        let t0 = Instant::now();
        let mut c = Cadence::new(secs(10.0), t0);
        c.started(t0);
        c.want(t0 + secs(0.4), Why::Canary); // news during the round
        assert_eq!(c.next_start(t0 + secs(0.6)), t0 + secs(1.0));
    }

    #[test]
    fn news_that_never_stops_costs_the_budget_then_waits_for_the_cadence() {
        let t0 = Instant::now();
        let mut c = Cadence::new(secs(10.0), t0);
        c.started(t0);
        let mut now = t0;
        let mut early = 0;
        for _ in 0..50 {
            now += secs(0.1);
            c.want(now, Why::Canary);
            let start = c.next_start(now);
            if start <= now {
                c.started(now);
                early += 1;
            }
        }
        // 5 s of news every 100 ms: one round a second, at most the budget.
        assert_eq!(early, EARLY_BUDGET);
        assert_eq!(c.counts().canary, EARLY_BUDGET as u64);
        let next = c.next_start(now);
        assert!(next > now, "budget spent: {next:?} vs {now:?}");
        // Once the oldest early round is an interval old, news may start rounds again.
        let later = t0 + secs(11.5);
        c.want(later, Why::Canary);
        assert_eq!(c.next_start(later), later);
    }
}
