//! Whether the watchdog's own loops make progress (issue 38 item 1). Each watched loop
//! stamps its progress: a cluster loop a completed round, the webhook dispatcher a pass,
//! the HTTP server's accept loop an accept or an idle second. Whatever reads the board
//! (`/healthz`, the systemd watchdog ping, the blind clusters' incidents, the heartbeat)
//! finds the loops over their allowance, and the same answer serves them all.
//!
//! The judgment is pure: `now` is a parameter. A stamp takes the clock when it ticks.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A loop whose progress is watched.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Watched {
    /// A cluster's round loop, by cluster name: a completed round, published.
    ClusterLoop(String),
    /// The webhook dispatcher: a pass (it wakes at least every second).
    Dispatcher,
    /// The HTTP server's accept loop.
    HttpServer,
}

impl fmt::Display for Watched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Watched::ClusterLoop(c) => write!(f, "the round loop of cluster {c}"),
            Watched::Dispatcher => f.write_str("the webhook dispatcher"),
            Watched::HttpServer => f.write_str("the HTTP server"),
        }
    }
}

/// The time of a loop's last progress, shared by the loop (which ticks it) and the board.
#[derive(Debug, Clone)]
pub struct Stamp(Arc<Mutex<Instant>>);

impl Stamp {
    pub fn new(now: Instant) -> Self {
        Stamp(Arc::new(Mutex::new(now)))
    }

    /// Progress now.
    pub fn tick(&self) {
        self.tick_at(Instant::now());
    }

    /// Progress at `at`; a late record of an older time does not move it back.
    pub fn tick_at(&self, at: Instant) {
        let mut last = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *last = (*last).max(at);
    }

    pub fn last(&self) -> Instant {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One watched loop as the board sees it at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Look {
    pub what: Watched,
    /// Since its last progress.
    pub silent: Duration,
    /// How long it may be silent before it counts as stuck.
    pub allowed: Duration,
}

impl Look {
    pub fn stuck(&self) -> bool {
        self.silent > self.allowed
    }
}

/// Every watched loop with its allowance and stamp. Shared (behind an `Arc`) by the loops'
/// owners, which watch and unwatch, and the readers.
#[derive(Debug, Default)]
pub struct Progress {
    watched: Mutex<BTreeMap<Watched, (Duration, Stamp)>>,
}

impl Progress {
    pub fn new() -> Self {
        Progress::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Watched, (Duration, Stamp)>> {
        self.watched.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts (or starts again, after a reload) watching `what`, which starts at `now`: its
    /// first progress gets the same allowance as any other, counted from `now`. The loop
    /// ticks the returned stamp.
    pub fn watch(&self, what: Watched, allowed: Duration, now: Instant) -> Stamp {
        let stamp = Stamp::new(now);
        self.watch_stamp(what, allowed, stamp.clone());
        stamp
    }

    /// Watches `what` through a stamp its loop already ticks (the dispatcher's, made with
    /// it).
    pub fn watch_stamp(&self, what: Watched, allowed: Duration, stamp: Stamp) {
        self.lock().insert(what, (allowed, stamp));
    }

    /// Stops watching: a cluster removed by a reload, a loop stopped on purpose. A stamp
    /// ticked later by its loop is ignored.
    pub fn unwatch(&self, what: &Watched) {
        self.lock().remove(what);
    }

    /// Every watched loop at `now`.
    pub fn looks(&self, now: Instant) -> Vec<Look> {
        self.lock()
            .iter()
            .map(|(what, (allowed, stamp))| Look {
                what: what.clone(),
                silent: now.saturating_duration_since(stamp.last()),
                allowed: *allowed,
            })
            .collect()
    }

    /// The loops over their allowance at `now`.
    pub fn stuck(&self, now: Instant) -> Vec<Look> {
        self.looks(now).into_iter().filter(Look::stuck).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn cluster(name: &str) -> Watched {
        Watched::ClusterLoop(name.into())
    }

    /// "fast" allowed 30 s, "slow" 120 s, both from `t0`.
    fn board(t0: Instant) -> (Progress, Stamp, Stamp) {
        let p = Progress::new();
        let fast = p.watch(cluster("fast"), 30 * S, t0);
        let slow = p.watch(cluster("slow"), 120 * S, t0);
        (p, fast, slow)
    }

    fn stuck(p: &Progress, now: Instant) -> Vec<(Watched, Duration)> {
        p.stuck(now)
            .into_iter()
            .map(|l| (l.what, l.silent))
            .collect()
    }

    #[test]
    fn a_fresh_loop_gets_its_allowance_before_its_first_progress() {
        let t0 = Instant::now();
        let (p, _, _) = board(t0);
        assert!(p.stuck(t0).is_empty());
        assert!(p.stuck(t0 + 30 * S).is_empty());
        assert_eq!(stuck(&p, t0 + 31 * S), vec![(cluster("fast"), 31 * S)]);
    }

    #[test]
    fn every_loop_must_progress() {
        let t0 = Instant::now();
        let (p, fast, slow) = board(t0);
        for i in 1..=40 {
            fast.tick_at(t0 + i * 5 * S);
        }
        // "fast" kept turning, "slow" never ended a round: 200 s > 120 s.
        let now = t0 + 200 * S;
        assert_eq!(stuck(&p, now), vec![(cluster("slow"), 200 * S)]);
        slow.tick_at(now);
        assert!(p.stuck(now).is_empty());
    }

    #[test]
    fn a_stuck_loop_is_stuck_until_it_turns_again() {
        let t0 = Instant::now();
        let (p, fast, slow) = board(t0);
        slow.tick_at(t0 + 10 * S);
        fast.tick_at(t0 + 10 * S);
        assert!(p.stuck(t0 + 40 * S).is_empty());
        assert!(!p.stuck(t0 + 41 * S).is_empty());
        fast.tick_at(t0 + 45 * S);
        assert!(p.stuck(t0 + 45 * S).is_empty());
    }

    #[test]
    fn a_late_record_of_an_older_time_does_not_move_progress_back() {
        let t0 = Instant::now();
        let (p, fast, slow) = board(t0);
        fast.tick_at(t0 + 20 * S);
        fast.tick_at(t0 + 5 * S);
        slow.tick_at(t0 + 20 * S);
        assert!(p.stuck(t0 + 50 * S).is_empty());
    }

    #[test]
    fn unwatched_loops_are_neither_waited_for_nor_brought_back() {
        let t0 = Instant::now();
        let (p, fast, _) = board(t0);
        p.unwatch(&cluster("fast"));
        assert!(p.stuck(t0 + 100 * S).is_empty());
        fast.tick_at(t0 + 100 * S);
        assert_eq!(stuck(&p, t0 + 121 * S), vec![(cluster("slow"), 121 * S)]);
    }

    #[test]
    fn watching_again_restarts_the_allowance() {
        let t0 = Instant::now();
        let (p, _, slow) = board(t0);
        slow.tick_at(t0 + 100 * S);
        assert!(!p.stuck(t0 + 100 * S).is_empty());
        // A reload restarted "fast" with a longer allowance.
        p.watch(cluster("fast"), 120 * S, t0 + 100 * S);
        assert!(p.stuck(t0 + 200 * S).is_empty());
        assert!(!p.stuck(t0 + 221 * S).is_empty());
    }

    #[test]
    fn a_stamp_made_elsewhere_is_read_through() {
        let t0 = Instant::now();
        let p = Progress::new();
        let passes = Stamp::new(t0);
        p.watch_stamp(Watched::Dispatcher, 30 * S, passes.clone());
        passes.tick_at(t0 + 20 * S);
        assert!(p.stuck(t0 + 50 * S).is_empty());
        assert_eq!(stuck(&p, t0 + 51 * S), vec![(Watched::Dispatcher, 31 * S)]);
        assert_eq!(Watched::Dispatcher.to_string(), "the webhook dispatcher");
    }

    #[test]
    fn nothing_watched_is_nothing_stuck() {
        assert!(Progress::new().stuck(Instant::now() + 3600 * S).is_empty());
    }
}
