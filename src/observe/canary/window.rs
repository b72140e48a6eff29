//! Unavailability windows of the canary partitions, pure. With one write per partition per
//! second, a window is measured to about a second: it opens at the send time of the first
//! write that failed (or was held so long it counts as failed) and closes at the
//! acknowledgement of the first write after it that went through in time. Each window is
//! charged to the broker the failed writes went to (the leader when they were sent), so a
//! leader that was frozen for three seconds, then replaced, is charged with those three
//! seconds, and the new leader with nothing.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::model::round::BrokerId;

/// Whom a window is charged to: the broker the failed writes went to (the leader when they
/// were sent), or nobody here when that leader took acks=1 writes meanwhile (it appends;
/// its followers held the acks=all writes, and the round's causes name the follower).
pub type Charge = Option<BrokerId>;

/// A window that closed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    pub partition: i32,
    pub broker: Charge,
    pub start: SystemTime,
    pub end: SystemTime,
    /// Writes that failed (or were too slow) in it.
    pub failed_writes: u64,
}

impl Window {
    pub fn seconds(&self) -> f64 {
        self.end
            .duration_since(self.start)
            .unwrap_or_default()
            .as_secs_f64()
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Open {
    broker: Charge,
    since: SystemTime,
    failed_writes: u64,
}

/// The open windows, per partition.
#[derive(Debug, Default)]
pub struct Windows {
    open: BTreeMap<i32, Open>,
}

impl Windows {
    /// A write to `partition` sent at `sent_at` to `broker` failed, or succeeded only after
    /// the slow-write limit. Opens a window, or extends the open one; when the open one is
    /// charged to another broker (the writes now go to a new leader, which fails too), that
    /// one closes where this failure starts and a window for `broker` opens, so each broker
    /// is charged with its own part of the outage.
    pub fn failed(
        &mut self,
        partition: i32,
        broker: Charge,
        sent_at: SystemTime,
    ) -> Option<Window> {
        match self.open.get_mut(&partition) {
            Some(o) if o.broker == broker => {
                o.failed_writes += 1;
                // Writes complete out of order (a timeout reports late): the window starts
                // at the earliest failed send.
                o.since = o.since.min(sent_at);
                None
            }
            Some(o) => {
                let closed = Window {
                    partition,
                    broker: o.broker,
                    start: o.since,
                    end: sent_at.max(o.since),
                    failed_writes: o.failed_writes,
                };
                *o = Open {
                    broker,
                    since: sent_at,
                    failed_writes: 1,
                };
                Some(closed)
            }
            None => {
                self.open.insert(
                    partition,
                    Open {
                        broker,
                        since: sent_at,
                        failed_writes: 1,
                    },
                );
                None
            }
        }
    }

    /// A write to `partition` sent at `sent_at` was acknowledged in time at `acked_at`.
    /// Closes the open window when the write was sent after it opened; a success of a write
    /// sent before the first failure says nothing about the outage that followed.
    pub fn succeeded(
        &mut self,
        partition: i32,
        sent_at: SystemTime,
        acked_at: SystemTime,
    ) -> Option<Window> {
        let o = self.open.get(&partition)?;
        if sent_at < o.since {
            return None;
        }
        let o = self.open.remove(&partition)?;
        Some(Window {
            partition,
            broker: o.broker,
            start: o.since,
            end: acked_at.max(o.since),
            failed_writes: o.failed_writes,
        })
    }

    /// The open window of `partition`: the broker charged and how long it has been open.
    pub fn open_for(&self, partition: i32, now: SystemTime) -> Option<(Charge, Duration)> {
        let o = self.open.get(&partition)?;
        Some((o.broker, now.duration_since(o.since).unwrap_or_default()))
    }

    /// Forgets partitions that no longer exist.
    pub fn retain_partitions(&mut self, keep: impl Fn(i32) -> bool) {
        self.open.retain(|p, _| keep(*p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn t(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn a_window_runs_from_the_first_failed_send_to_the_first_later_ack() {
        let mut w = Windows::default();
        assert_eq!(w.succeeded(0, t(0), t(5)), None, "nothing open");
        // Sent at 1 s, 2 s, 3 s to frozen broker 1; their timeouts report out of order.
        assert_eq!(w.failed(0, Some(1), t(2_000)), None);
        assert_eq!(w.failed(0, Some(1), t(1_000)), None);
        assert_eq!(w.failed(0, Some(1), t(3_000)), None);
        assert_eq!(
            w.open_for(0, t(4_000)),
            Some((Some(1), Duration::from_secs(3)))
        );
        // A write sent before the outage and acknowledged late closes nothing.
        assert_eq!(w.succeeded(0, t(500), t(4_100)), None);
        let closed = w.succeeded(0, t(4_000), t(4_020)).expect("closes");
        assert_eq!(
            closed,
            Window {
                partition: 0,
                broker: Some(1),
                start: t(1_000),
                end: t(4_020),
                failed_writes: 3
            }
        );
        assert!((closed.seconds() - 3.02).abs() < 1e-9);
        assert_eq!(w.open_for(0, t(5_000)), None);
    }

    #[test]
    fn each_broker_is_charged_its_own_part_of_an_outage() {
        let mut w = Windows::default();
        w.failed(0, Some(1), t(1_000));
        w.failed(0, Some(1), t(2_000));
        // The writes now go to broker 2, which fails too.
        let first = w
            .failed(0, Some(2), t(3_000))
            .expect("broker 1's part closes");
        assert_eq!(
            (first.broker, first.start, first.end),
            (Some(1), t(1_000), t(3_000))
        );
        assert_eq!(first.failed_writes, 2);
        let second = w.succeeded(0, t(5_000), t(5_010)).expect("closes");
        assert_eq!(
            (second.broker, second.start, second.end),
            (Some(2), t(3_000), t(5_010))
        );
    }

    /// A frozen follower holds the acks=all writes of the partitions it follows while their
    /// leaders take acks=1 writes: those windows are charged to no leader.
    #[test]
    fn a_window_while_the_leader_appends_is_charged_to_no_broker() {
        let mut w = Windows::default();
        w.failed(0, None, t(1_000));
        w.failed(0, None, t(2_000));
        let closed = w.succeeded(0, t(3_000), t(3_005)).expect("closes");
        assert_eq!((closed.broker, closed.failed_writes), (None, 2));
        // The leader stops appending too: from then on the leader's.
        w.failed(0, None, t(10_000));
        let part = w.failed(0, Some(1), t(11_000)).expect("splits");
        assert_eq!(part.broker, None);
        assert_eq!(w.open_for(0, t(12_000)).map(|o| o.0), Some(Some(1)));
    }

    #[test]
    fn partitions_are_independent_and_forgotten_when_gone() {
        let mut w = Windows::default();
        w.failed(0, Some(1), t(1_000));
        w.failed(1, Some(2), t(1_000));
        assert!(w.succeeded(1, t(2_000), t(2_001)).is_some());
        assert!(w.open_for(0, t(3_000)).is_some());
        w.retain_partitions(|p| p != 0);
        assert_eq!(w.open_for(0, t(3_000)), None);
    }
}
