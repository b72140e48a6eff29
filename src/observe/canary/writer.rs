//! The continuous canary writer: every `interval`, one write to every canary partition
//! (acks=all, through the regular producer) and one direct acks=1 write to every broker that
//! claims a canary leadership, whatever the metadata round does. Each write has its own
//! deadline and is reported with its send time once it ends, so an outage of a few seconds
//! between two rounds is still seen, timed and charged to the leader that had it
//! (issue 14: a frozen leader's partition moved between two rounds with no failed write).
//! The write itself is a parameter, so the schedule is tested with paused time.

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, SystemTime};

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::watch;

use super::record::Acks;
use super::{LeaderClaim, ProduceFailure};
use crate::model::round::BrokerId;

/// One write of a tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub partition: i32,
    pub acks: Acks,
    /// The partition's leader in the newest merged view when the write is sent.
    pub leader: BrokerId,
    /// The broker an acks=1 write goes to, straight: it claims to lead the partition.
    pub claim: Option<LeaderClaim>,
}

impl Target {
    /// Writes with the same key are one series: (partition, acks, broker written to).
    fn key(&self) -> (i32, Acks, BrokerId) {
        let to = self.claim.as_ref().map_or(self.leader, |c| c.broker);
        (self.partition, self.acks, to)
    }
}

/// An acknowledged write.
#[derive(Debug, Clone, PartialEq)]
pub struct Ack {
    pub offset: i64,
    pub seq: u64,
    /// The broker that acknowledged it, when the client says.
    pub broker: Option<BrokerId>,
}

/// A write that ended, one way or the other.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub target: Target,
    pub sent_at: SystemTime,
    pub took: Duration,
    pub result: Result<Ack, ProduceFailure>,
}

impl Attempt {
    /// The broker the write is charged to: the one that received it when the client knows,
    /// else the one it was sent to (the claimant, or the view's leader at send time).
    pub fn broker(&self) -> BrokerId {
        let received = match &self.result {
            Ok(a) => a.broker,
            Err(f) => f.broker,
        };
        received
            .or(self.target.claim.as_ref().map(|c| c.broker))
            .unwrap_or(self.target.leader)
    }
}

/// How the writer runs.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub interval: Duration,
    /// A write still unanswered after this ends as a timeout.
    pub deadline: Duration,
    /// Writes of one acks=all series outstanding at once; a tick that finds this many
    /// skips the series. acks=1 probes keep one each: a broker that does not answer one
    /// gets no second connection until it does or the deadline ends it.
    pub max_in_flight: usize,
}

impl Schedule {
    pub fn new(interval: Duration, deadline: Duration) -> Self {
        // Enough for every write of one deadline, so a silent leader is written to (and
        // its silence timed) every interval, and bounded whatever the settings.
        let per_deadline = deadline.as_millis() / interval.as_millis().max(1) + 2;
        Schedule {
            interval,
            deadline,
            max_in_flight: per_deadline.clamp(1, 64) as usize,
        }
    }
}

/// Runs until `plan`'s sender is dropped. Each tick writes to every target of the newest
/// plan through `write`, each ending at its deadline at the latest, and hands every ended
/// write to `done`.
pub async fn run<W, F>(
    mut plan: watch::Receiver<Vec<Target>>,
    schedule: Schedule,
    write: W,
    mut done: impl FnMut(Attempt),
) where
    W: Fn(Target, SystemTime) -> F,
    F: Future<Output = Result<Ack, ProduceFailure>>,
{
    let mut tick = tokio::time::interval(schedule.interval);
    // After a stall (a busy runtime) the cadence resumes, it does not burst.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut in_flight = FuturesUnordered::new();
    let mut outstanding: HashMap<(i32, Acks, BrokerId), usize> = HashMap::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let targets = plan.borrow_and_update().clone();
                for t in targets {
                    let n = outstanding.entry(t.key()).or_default();
                    let cap = match t.acks {
                        Acks::All => schedule.max_in_flight,
                        Acks::One => 1,
                    };
                    if *n >= cap {
                        continue;
                    }
                    *n += 1;
                    let sent_at = SystemTime::now();
                    let started = tokio::time::Instant::now();
                    let write = write(t.clone(), sent_at);
                    let deadline = schedule.deadline;
                    in_flight.push(async move {
                        let result = tokio::time::timeout(deadline, write)
                            .await
                            .unwrap_or_else(|_| {
                                Err(ProduceFailure {
                                    kind: "timeout",
                                    detail: format!("no answer within {} ms", deadline.as_millis()),
                                    broker: None,
                                })
                            });
                        Attempt {
                            target: t,
                            sent_at,
                            took: started.elapsed(),
                            result,
                        }
                    });
                }
            }
            Some(a) = in_flight.next(), if !in_flight.is_empty() => {
                let key = a.target.key();
                if let Some(n) = outstanding.get_mut(&key) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        outstanding.remove(&key);
                    }
                }
                done(a);
            }
            changed = plan.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::time::Instant;

    fn all(partition: i32, leader: BrokerId) -> Target {
        Target {
            partition,
            acks: Acks::All,
            leader,
            claim: None,
        }
    }

    fn one(partition: i32, broker: BrokerId) -> Target {
        Target {
            partition,
            acks: Acks::One,
            leader: broker,
            claim: Some(LeaderClaim {
                partition,
                broker,
                address: format!("b{broker}:9092"),
                epoch: 1,
            }),
        }
    }

    type Log = Arc<Mutex<Vec<(i32, Acks, Duration)>>>;

    /// Runs the writer over `targets` for `run_for` of paused time. Writes to partitions in
    /// `hang` never answer; the others are acknowledged after 5 ms. Returns the sends
    /// (partition, acks, time since start) and the ended writes.
    async fn drive(
        targets: Vec<Target>,
        schedule: Schedule,
        hang: &'static [i32],
        run_for: Duration,
    ) -> (Vec<(i32, Acks, Duration)>, Vec<(Attempt, Duration)>) {
        let start = Instant::now();
        let sends: Log = Arc::default();
        let ended: Arc<Mutex<Vec<(Attempt, Duration)>>> = Arc::default();
        let (tx, rx) = watch::channel(targets);
        let (s, e) = (sends.clone(), ended.clone());
        let task = tokio::spawn(async move {
            run(
                rx,
                schedule,
                move |t: Target, _| {
                    s.lock()
                        .unwrap()
                        .push((t.partition, t.acks, start.elapsed()));
                    async move {
                        if hang.contains(&t.partition) {
                            std::future::pending::<()>().await;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        Ok(Ack {
                            offset: 0,
                            seq: 0,
                            broker: Some(t.leader),
                        })
                    }
                },
                move |a| e.lock().unwrap().push((a, start.elapsed())),
            )
            .await
        });
        tokio::time::sleep(run_for).await;
        drop(tx);
        task.await.unwrap();
        let sends = sends.lock().unwrap().clone();
        let ended = std::mem::take(&mut *ended.lock().unwrap());
        (sends, ended)
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[tokio::test(start_paused = true)]
    async fn every_partition_is_written_once_per_interval() {
        let schedule = Schedule::new(secs(1.0), secs(5.0));
        let (sends, ended) = drive(vec![all(0, 1), all(1, 2)], schedule, &[], secs(3.5)).await;
        for p in [0, 1] {
            let at: Vec<Duration> = sends.iter().filter(|s| s.0 == p).map(|s| s.2).collect();
            assert_eq!(at, vec![secs(0.0), secs(1.0), secs(2.0), secs(3.0)], "{p}");
        }
        assert_eq!(ended.len(), 8);
        for (a, _) in &ended {
            assert!(a.result.is_ok());
            assert_eq!(a.took, Duration::from_millis(5));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_leader_does_not_hold_back_its_next_writes_nor_other_partitions() {
        let schedule = Schedule::new(secs(1.0), secs(2.5));
        let (sends, ended) = drive(vec![all(0, 1), all(1, 2)], schedule, &[0], secs(5.6)).await;
        let to_0: Vec<Duration> = sends.iter().filter(|s| s.0 == 0).map(|s| s.2).collect();
        assert_eq!(to_0.len(), 6, "still written every second: {to_0:?}");
        let timeouts: Vec<Duration> = ended
            .iter()
            .filter(|(a, _)| a.target.partition == 0)
            .map(|(a, at)| {
                let f = a.result.as_ref().expect_err("never answered");
                assert_eq!(f.kind, "timeout");
                assert_eq!(f.broker, None);
                assert_eq!(a.broker(), 1, "charged to the leader it was sent to");
                assert_eq!(a.took, secs(2.5), "its own deadline");
                *at
            })
            .collect();
        // Sent at 0..=3 s, each ends 2.5 s later.
        assert_eq!(timeouts, vec![secs(2.5), secs(3.5), secs(4.5), secs(5.5)]);
        assert_eq!(
            ended
                .iter()
                .filter(|(a, _)| a.target.partition == 1 && a.result.is_ok())
                .count(),
            6
        );
    }

    #[tokio::test(start_paused = true)]
    async fn writes_outstanding_at_once_are_bounded() {
        let schedule = Schedule {
            interval: secs(1.0),
            deadline: secs(100.0),
            max_in_flight: 3,
        };
        let (sends, ended) = drive(vec![all(0, 1), one(0, 1)], schedule, &[0], secs(10.5)).await;
        assert_eq!(sends.iter().filter(|s| s.1 == Acks::All).count(), 3);
        assert_eq!(
            sends.iter().filter(|s| s.1 == Acks::One).count(),
            1,
            "one acks=1 probe per claimant at a time"
        );
        assert!(ended.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_plan_is_written_from_the_next_tick() {
        let start = Instant::now();
        let sends: Log = Arc::default();
        let (tx, rx) = watch::channel(vec![all(0, 1)]);
        let s = sends.clone();
        let task = tokio::spawn(run(
            rx,
            Schedule::new(secs(1.0), secs(5.0)),
            move |t: Target, _| {
                s.lock()
                    .unwrap()
                    .push((t.partition, t.acks, start.elapsed()));
                async move {
                    Ok(Ack {
                        offset: 0,
                        seq: 0,
                        broker: None,
                    })
                }
            },
            |_| {},
        ));
        tokio::time::sleep(secs(1.5)).await;
        tx.send(vec![all(0, 2), all(3, 3)]).unwrap();
        tokio::time::sleep(secs(1.0)).await;
        drop(tx);
        task.await.unwrap();
        let sends = sends.lock().unwrap().clone();
        assert_eq!(
            sends,
            vec![
                (0, Acks::All, secs(0.0)),
                (0, Acks::All, secs(1.0)),
                (0, Acks::All, secs(2.0)),
                (3, Acks::All, secs(2.0)),
            ]
        );
    }

    #[test]
    fn the_default_schedule_keeps_a_deadline_of_writes_in_flight() {
        let s = Schedule::new(secs(1.0), secs(5.0));
        assert_eq!(s.max_in_flight, 7);
        assert_eq!(Schedule::new(secs(0.01), secs(3600.0)).max_in_flight, 64);
    }
}
