//! The books the writer, the reader and the rounds share: the ledger of acknowledged
//! writes, unavailability windows and samples since the last round. Locked briefly, never
//! across an await.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::ledger::{self, Entry, Ledger, LedgerEvent};
use super::produce::{charge, ProduceFailure};
use super::record::Acks;
use super::round::{CanaryRound, FailedWrites, LossEvent, PartitionRound};
use super::stats::CanaryStats;
use super::view::{Acks1Probe, PartitionStateWithEpoch};
use super::window::{Window, Windows};
use super::writer::Attempt;
use crate::model::round::BrokerId;
use crate::model::words::AUTHORIZATION;

/// What one partition's writes did since the last round.
#[derive(Debug, Default)]
pub(super) struct SinceRound {
    pub(super) writes: u32,
    pub(super) failed: Vec<FailedWrites>,
    pub(super) end_to_end: Vec<f64>,
}

impl SinceRound {
    /// A failed write, folded into the group of its broker, kind and whether the leader
    /// had appended since it was sent; at most [`MAX_SAMPLES`] groups.
    fn note_failed(
        &mut self,
        broker: BrokerId,
        f: &ProduceFailure,
        appended: bool,
        sent_at: SystemTime,
    ) {
        let received = f.broker.is_some();
        let full = self.failed.len() >= MAX_SAMPLES;
        match self
            .failed
            .iter_mut()
            .find(|x| x.broker == broker && x.kind == f.kind && x.leader_appended == appended)
        {
            Some(x) => {
                x.count = x.count.saturating_add(1);
                x.first_sent_at = x.first_sent_at.min(sent_at);
                x.last_sent_at = x.last_sent_at.max(sent_at);
                x.received |= received;
            }
            None if !full => self.failed.push(FailedWrites {
                broker,
                kind: f.kind,
                count: 1,
                received,
                leader_appended: appended,
                first_sent_at: sent_at,
                last_sent_at: sent_at,
            }),
            None => {}
        }
    }
}

/// Kept per partition for the round: enough for a round of 10 s at ten writes a second.
pub(super) const MAX_SAMPLES: usize = 128;

/// What the writer, the reader and the rounds share. Locked briefly, never across an
/// await.
pub(super) struct Books {
    pub(super) ledger: Ledger,
    pub(super) windows: Windows,
    /// The newest acks=all write that ended, per partition: (sent at, outcome).
    pub(super) latest: BTreeMap<i32, (SystemTime, Result<Duration, ProduceFailure>)>,
    pub(super) since: BTreeMap<i32, SinceRound>,
    /// The newest acks=1 probe per (partition, broker).
    pub(super) acks1: BTreeMap<(i32, BrokerId), Acks1Probe>,
    /// Per (partition, broker), the send time of the newest acks=1 write it acknowledged
    /// in time: a leader that does so appends, and an acks=all write it holds meanwhile
    /// waits on its followers.
    pub(super) appends_since: BTreeMap<(i32, BrokerId), SystemTime>,
    pub(super) lost: Vec<LossEvent>,
    pub(super) duplicated: Vec<(i32, BrokerId)>,
    pub(super) windows_closed: Vec<Window>,
    /// Each partition's leader in the newest view, for events that do not name a broker.
    pub(super) leaders: BTreeMap<i32, BrokerId>,
    /// The (partition, broker) series of `canary_unavailable_now` that exist: removed with
    /// their partition, so a window open when it vanished does not stay 1 forever.
    pub(super) gauged: BTreeSet<(i32, BrokerId)>,
}

pub(super) struct Shared {
    pub(super) books: Mutex<Books>,
    pub(super) stats: CanaryStats,
    pub(super) cluster: String,
    pub(super) slow: Duration,
    /// Told when a partition's newest write ends differently from the one before.
    pub(super) news: Arc<tokio::sync::Notify>,
}

pub(super) fn lock(books: &Mutex<Books>) -> std::sync::MutexGuard<'_, Books> {
    // A panic while the books were held leaves them as consistent as any single update.
    books.lock().unwrap_or_else(|e| e.into_inner())
}

impl Books {
    pub(super) fn new(instance: &str, lost_after: Duration) -> Self {
        Books {
            ledger: Ledger::new(instance, lost_after),
            windows: Windows::default(),
            latest: BTreeMap::new(),
            since: BTreeMap::new(),
            acks1: BTreeMap::new(),
            appends_since: BTreeMap::new(),
            lost: Vec::new(),
            duplicated: Vec::new(),
            windows_closed: Vec::new(),
            leaders: BTreeMap::new(),
            gauged: BTreeSet::new(),
        }
    }

    pub(super) fn retain_partitions(&mut self, keep: impl Fn(i32) -> bool, sh: &Shared) {
        self.gauged.retain(|&(p, b)| {
            keep(p) || {
                sh.stats.forget_window(&sh.cluster, p, b);
                false
            }
        });
        self.ledger.retain_partitions(&keep);
        self.windows.retain_partitions(&keep);
        self.latest.retain(|p, _| keep(*p));
        self.since.retain(|p, _| keep(*p));
        self.acks1.retain(|(p, _), _| keep(*p));
        self.appends_since.retain(|(p, _), _| keep(*p));
    }

    /// A ledger event: into the round's report and the cumulative metrics.
    pub(super) fn event(&mut self, ev: LedgerEvent, sh: &Shared) {
        match ev {
            LedgerEvent::Confirmed {
                partition,
                end_to_end,
                acks: Acks::All,
                broker,
                ..
            } => {
                let s = end_to_end.as_secs_f64();
                sh.stats.end_to_end(&sh.cluster, partition, broker, s);
                let e2e = &mut self.since.entry(partition).or_default().end_to_end;
                if e2e.len() < MAX_SAMPLES {
                    e2e.push(s);
                }
            }
            LedgerEvent::Confirmed { .. } => {}
            LedgerEvent::Lost {
                partition,
                offset,
                seq,
                acks,
                broker,
                reason,
            } => {
                let loss = LossEvent {
                    partition,
                    offset,
                    seq,
                    acks,
                    broker,
                    reason: reason.as_label(),
                };
                sh.stats.lost(&sh.cluster, &loss);
                if self.lost.len() < MAX_SAMPLES {
                    self.lost.push(loss);
                }
            }
            LedgerEvent::Duplicate { partition, .. } => {
                let leader = self.leaders.get(&partition).copied().unwrap_or(-1);
                sh.stats.duplicated(&sh.cluster, partition, leader);
                if self.duplicated.len() < MAX_SAMPLES {
                    self.duplicated.push((partition, leader));
                }
            }
        }
    }

    pub(super) fn window_closed(&mut self, w: Window, sh: &Shared) {
        sh.stats.window_closed(&sh.cluster, &w);
        if self.windows_closed.len() < MAX_SAMPLES {
            self.windows_closed.push(w);
        }
    }

    /// One write ended.
    pub(super) fn write_ended(&mut self, a: Attempt, sh: &Shared) {
        match a.target.acks {
            Acks::All => self.acks_all_ended(a, sh),
            Acks::One => self.acks_one_ended(a, sh),
        }
    }

    /// An acks=all write, the canary's measure: counted, charged to the broker that held
    /// it, its partition's unavailability window moved, booked for the read-back.
    fn acks_all_ended(&mut self, a: Attempt, sh: &Shared) {
        // When it ended, on the clock its send time was read from.
        let now = a.sent_at + a.took;
        let partition = a.target.partition;
        let broker = a.broker();
        let outcome = match &a.result {
            Ok(_) => "ok",
            Err(f) => f.kind,
        };
        let ok_seconds = a.result.as_ref().ok().map(|_| a.took.as_secs_f64());
        sh.stats
            .write(&sh.cluster, partition, broker, outcome, ok_seconds);
        let slow = a.result.is_ok() && a.took >= sh.slow;
        // A write held long, then acknowledged, was held by whatever ailed the leader it
        // was sent to; after a failover the new leader that finally took it is not to blame.
        let held_by = if slow { a.target.leader } else { broker };
        let appended = self
            .appends_since
            .get(&(partition, held_by))
            .is_some_and(|t| *t >= a.sent_at);
        let failure = match &a.result {
            Err(f) => Some(f.kind),
            Ok(_) if slow => Some("slow"),
            Ok(_) => None,
        };
        let charge = failure.and_then(|kind| charge(kind, held_by, appended));
        if let (Some(kind), Some(b)) = (failure, charge) {
            sh.stats.charged_failure(&sh.cluster, b, kind);
        }
        let since = self.since.entry(partition).or_default();
        since.writes = since.writes.saturating_add(1);
        if let Err(f) = &a.result {
            since.note_failed(broker, f, appended, a.sent_at);
        }
        // A refused write says what the watchdog may do, not how the partition is: it
        // measures nothing.
        if failure.is_some_and(|k| k != AUTHORIZATION) {
            if let Some(w) = self.windows.failed(partition, charge, a.sent_at) {
                self.window_closed(w, sh);
            }
            sh.stats.window_open(&sh.cluster, partition, charge, true);
            if let Some(b) = charge {
                self.gauged.insert((partition, b));
            }
        }
        if a.result.is_ok() {
            if let Some(w) = self.windows.succeeded(partition, a.sent_at, now) {
                self.window_closed(w, sh);
            }
        }
        self.note_latest(&a, sh);
        if let Ok(ack) = a.result {
            let entry = Entry {
                seq: ack.seq,
                acks: Acks::All,
                sent_at: a.sent_at,
                acked_at: now,
                broker,
                stale_ack: false,
            };
            if let ledger::Booked::Read(ev) = self.ledger.acked(partition, ack.offset, entry) {
                self.event(ev, sh);
            }
        }
    }

    /// Keeps the newest acks=all write's end per partition; when it changes how writes end
    /// (working, slow, failing and how) a round should look. A follower that stopped
    /// fetching holds writes until its leader drops it from the ISR, and the first write
    /// that ends then is the moment a round sees it.
    fn note_latest(&mut self, a: &Attempt, sh: &Shared) {
        let partition = a.target.partition;
        if self
            .latest
            .get(&partition)
            .is_some_and(|(at, _)| *at > a.sent_at)
        {
            return;
        }
        let result = match &a.result {
            Ok(_) => Ok(a.took),
            Err(f) => Err(f.clone()),
        };
        let class = |r: &Result<Duration, ProduceFailure>| match r {
            Ok(d) if *d >= sh.slow => "slow",
            Ok(_) => "ok",
            Err(f) => f.kind,
        };
        let now_class = class(&result);
        let before = self.latest.insert(partition, (a.sent_at, result));
        if before.is_some_and(|(_, r)| class(&r) != now_class) {
            sh.news.notify_one();
        }
    }

    /// An acks=1 write, the probe of what its leader appends on its own: booked for the
    /// read-back, and kept as the broker's latest probe.
    fn acks_one_ended(&mut self, a: Attempt, sh: &Shared) {
        let now = a.sent_at + a.took;
        let partition = a.target.partition;
        let broker = a.broker();
        let stale = a.target.leader != broker;
        let mut probe = Acks1Probe {
            partition,
            broker,
            stale,
            offset: None,
            error: None,
        };
        match a.result {
            Ok(ack) => {
                probe.offset = Some(ack.offset);
                if a.took < sh.slow {
                    let t = self
                        .appends_since
                        .entry((partition, broker))
                        .or_insert(a.sent_at);
                    *t = (*t).max(a.sent_at);
                }
                let entry = Entry {
                    seq: ack.seq,
                    acks: Acks::One,
                    sent_at: a.sent_at,
                    acked_at: now,
                    broker,
                    stale_ack: stale,
                };
                if let ledger::Booked::Read(ev) = self.ledger.acked(partition, ack.offset, entry) {
                    self.event(ev, sh);
                }
            }
            Err(f) => probe.error = Some(f.detail),
        }
        self.acks1.insert((partition, broker), probe);
    }

    /// The round's report of the canary partitions, from what happened since the last one.
    pub(super) fn report(
        &mut self,
        parts: &[PartitionStateWithEpoch],
        now: SystemTime,
        out: &mut CanaryRound,
    ) {
        let overdue = self.ledger.overdue(now);
        for p in parts {
            let partition = p.state.partition;
            let since = self.since.remove(&partition).unwrap_or_default();
            let result = self.latest.get(&partition).map(|(_, r)| r.clone());
            let (produce_seconds, produce_error) = match &result {
                Some(Ok(d)) => (Some(d.as_secs_f64()), None),
                Some(Err(f)) => (None, Some(f.clone())),
                None => (None, None),
            };
            let open = self.windows.open_for(partition, now);
            out.partitions.push(PartitionRound {
                partition,
                leader: p.state.leader,
                leader_epoch: p.leader_epoch,
                replicas: p.state.replicas.clone(),
                isr: p.state.isr.clone(),
                produce: result,
                produce_seconds,
                produce_error,
                end_to_end_seconds: since.end_to_end,
                unavailable_seconds: open.map(|(_, d)| d.as_secs_f64()),
                unavailable_broker: open.and_then(|(b, _)| b),
                overdue: overdue.get(&partition).copied().unwrap_or(0),
                writes: since.writes,
                failed_writes: since.failed,
                charged_to: None,
            });
        }
        out.lost.append(&mut self.lost);
        out.duplicated.append(&mut self.duplicated);
        out.windows_closed = std::mem::take(&mut self.windows_closed)
            .into_iter()
            .map(|w| (w.partition, w.broker.unwrap_or(-1), w.seconds()))
            .collect();
        out.acks1 = std::mem::take(&mut self.acks1).into_values().collect();
    }
}
