//! The canary's books, pure: every acknowledged record waits until the consumer reads it
//! back at its offset. A record the log no longer holds where it was acknowledged is lost
//! (incident 3 lost 49,260 acknowledged records that way); a record read twice is a
//! duplicate. (Unavailability windows are `window`'s.)

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::record::{Acks, CanaryRecord};
use crate::model::round::BrokerId;

/// Why an acknowledged record counts as lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LossReason {
    /// Another record stands at the offset it was acknowledged at.
    Overwritten,
    /// The consumer read past its offset without finding it.
    Skipped,
    /// A broker acknowledged it while a newer leader epoch named another leader, and it was
    /// not read back in time: the write went to a stale leader's log.
    StaleLeader,
    /// It was read back once, and a re-read after a leader change no longer finds it
    /// (truncation, e.g. after an unclean leader election).
    Truncated,
}

impl LossReason {
    pub const ALL: [LossReason; 4] = [
        LossReason::Overwritten,
        LossReason::Skipped,
        LossReason::StaleLeader,
        LossReason::Truncated,
    ];

    pub fn as_label(self) -> &'static str {
        match self {
            LossReason::Overwritten => "overwritten",
            LossReason::Skipped => "skipped",
            LossReason::StaleLeader => "stale_leader",
            LossReason::Truncated => "truncated",
        }
    }
}

/// An acknowledged record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub seq: u64,
    pub acks: Acks,
    pub sent_at: SystemTime,
    pub acked_at: SystemTime,
    /// The broker that acknowledged it (the leader the write went to).
    pub broker: BrokerId,
    /// True when, at acknowledgement, the newest view named another leader.
    pub stale_ack: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum LedgerEvent {
    Confirmed {
        partition: i32,
        seq: u64,
        acks: Acks,
        broker: BrokerId,
        end_to_end: Duration,
    },
    Lost {
        partition: i32,
        offset: i64,
        seq: u64,
        acks: Acks,
        broker: BrokerId,
        reason: LossReason,
    },
    Duplicate {
        partition: i32,
        seq: u64,
        offset: i64,
        first_offset: i64,
    },
}

/// Acknowledged records kept waiting per partition: an hour at the default write rate.
const MAX_PENDING: usize = 3600;

/// What booking an acknowledged record did.
#[derive(Debug, Clone, PartialEq)]
pub enum Booked {
    /// The consumer does not read the partition: it could never be read back, so nothing
    /// was booked.
    NotRead,
    /// Waits to be read back.
    Pending,
    /// It had been read back already.
    Read(LedgerEvent),
}

#[derive(Debug, Default)]
struct PartitionBook {
    next_seq: u64,
    /// (offset, seq) -> acknowledged, not read back yet. Two records can hold one offset:
    /// a stale leader and the new leader each hand it out on their own log.
    pending: BTreeMap<(i64, u64), Entry>,
    /// Read back, kept for the re-read after a leader change.
    confirmed: BTreeMap<i64, (Entry, SystemTime)>,
    /// seq -> offset it was first read at, for duplicates.
    seen: BTreeMap<u64, (i64, SystemTime)>,
    /// Next offset the consumer will deliver.
    position: Option<i64>,
    /// The consumer is assigned to the partition at a known offset: only then can a record
    /// written to it be judged. A write while it is not (its end offset could not be
    /// fetched) is never read back and would be counted lost.
    reading: bool,
    /// A re-read after a leader change is owed from this offset: confirmed records at or
    /// beyond it have not been checked against the new leader's log yet.
    verify_from: Option<i64>,
}

/// One cluster's canary books.
#[derive(Debug)]
pub struct Ledger {
    instance: String,
    lost_after: Duration,
    partitions: BTreeMap<i32, PartitionBook>,
}

impl Ledger {
    pub fn new(instance: &str, lost_after: Duration) -> Self {
        Ledger {
            instance: instance.to_string(),
            lost_after,
            partitions: BTreeMap::new(),
        }
    }

    /// The sequence number for the next record to `partition`.
    pub fn next_seq(&mut self, partition: i32) -> u64 {
        let book = self.partitions.entry(partition).or_default();
        book.next_seq += 1;
        book.next_seq
    }

    /// Books an acknowledged record. With writes every second the consumer can read a
    /// record back before its acknowledgement arrives: then it is confirmed at once, not
    /// left pending to be counted lost when the consumer reads past its offset.
    pub fn acked(&mut self, partition: i32, offset: i64, entry: Entry) -> Booked {
        let book = self.partitions.entry(partition).or_default();
        if !book.reading {
            return Booked::NotRead;
        }
        if let Some((at, read_at)) = book.seen.get(&entry.seq).copied() {
            let event = LedgerEvent::Confirmed {
                partition,
                seq: entry.seq,
                acks: entry.acks,
                broker: entry.broker,
                end_to_end: read_at.duration_since(entry.sent_at).unwrap_or_default(),
            };
            book.confirmed.insert(at, (entry, read_at));
            return Booked::Read(event);
        }
        // Records a high watermark that cannot advance keeps invisible pile up at one a
        // second: the oldest are forgotten (still counted overdue until then), so memory
        // stays bounded however long that lasts.
        while book.pending.len() >= MAX_PENDING {
            let Some(oldest) = book
                .pending
                .iter()
                .min_by_key(|(_, e)| e.acked_at)
                .map(|(k, _)| *k)
            else {
                break;
            };
            book.pending.remove(&oldest);
        }
        book.pending.insert((offset, entry.seq), entry);
        Booked::Pending
    }

    /// The consumer reads `partition` from `start` on. When it did not read it before,
    /// records acknowledged below `start` will never be delivered: they are forgotten, not
    /// lost. When it did, the consumer continues where it was and nothing is dropped.
    pub fn reading_from(&mut self, partition: i32, start: i64) {
        let book = self.partitions.entry(partition).or_default();
        if !book.reading {
            book.pending.retain(|(offset, _), _| *offset >= start);
            book.position = Some(start);
        }
        book.reading = true;
    }

    /// The consumer does not read `partition` (it could not be assigned): what was
    /// acknowledged there cannot be read back, so it is forgotten, and later writes are not
    /// booked until it reads again.
    pub fn not_reading(&mut self, partition: i32) {
        let book = self.partitions.entry(partition).or_default();
        book.reading = false;
        book.pending.clear();
    }

    /// Where the consumer stands in `partition`, as far as the ledger knows: the next offset
    /// it will deliver.
    pub fn position(&self, partition: i32) -> Option<i64> {
        self.partitions.get(&partition)?.position
    }

    /// The consumer delivered `record` (any writer's) at `offset` of `partition`.
    pub fn consumed(
        &mut self,
        partition: i32,
        offset: i64,
        record: Option<&CanaryRecord>,
        now: SystemTime,
    ) -> Vec<LedgerEvent> {
        let mut events = Vec::new();
        let ours = record.filter(|r| r.instance == self.instance);
        let book = self.partitions.entry(partition).or_default();
        book.position = Some(offset + 1);
        if let Some(r) = ours {
            if let Some((first, _)) = book.seen.get(&r.seq) {
                events.push(LedgerEvent::Duplicate {
                    partition,
                    seq: r.seq,
                    offset,
                    first_offset: *first,
                });
            } else {
                book.seen.insert(r.seq, (offset, now));
            }
            // Confirm wherever it was acknowledged: the offset in the acknowledgement is the
            // acknowledging leader's, which may differ after a failover retry.
            let key = book.pending.keys().find(|(_, s)| *s == r.seq).copied();
            if let Some(key) = key {
                let entry = book.pending.remove(&key).expect("key just found");
                events.push(LedgerEvent::Confirmed {
                    partition,
                    seq: entry.seq,
                    acks: entry.acks,
                    broker: entry.broker,
                    end_to_end: now.duration_since(entry.sent_at).unwrap_or_default(),
                });
                book.confirmed.insert(offset, (entry, now));
            }
        }
        // The consumer delivers in offset order: anything still pending at or below this
        // offset is not in the log where it was acknowledged.
        let passed: Vec<(i64, u64)> = book
            .pending
            .range(..=(offset, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        for key in passed {
            let entry = book.pending.remove(&key).expect("key just listed");
            let reason = if key.0 == offset {
                LossReason::Overwritten
            } else {
                LossReason::Skipped
            };
            events.push(LedgerEvent::Lost {
                partition,
                offset: key.0,
                seq: entry.seq,
                acks: entry.acks,
                broker: entry.broker,
                reason,
            });
        }
        events
    }

    /// Called once a round: stale-leader acknowledgements not read back within
    /// `lost_after` are lost; old bookkeeping is dropped.
    pub fn expire(&mut self, now: SystemTime) -> Vec<LedgerEvent> {
        let mut events = Vec::new();
        let lost_after = self.lost_after;
        let old = |t: SystemTime| now.duration_since(t).is_ok_and(|age| age > lost_after);
        for (partition, book) in &mut self.partitions {
            let expired: Vec<(i64, u64)> = book
                .pending
                .iter()
                .filter(|(_, e)| e.stale_ack && old(e.acked_at))
                .map(|(k, _)| *k)
                .collect();
            for key in expired {
                let entry = book.pending.remove(&key).expect("key just listed");
                events.push(LedgerEvent::Lost {
                    partition: *partition,
                    offset: key.0,
                    seq: entry.seq,
                    acks: entry.acks,
                    broker: entry.broker,
                    reason: LossReason::StaleLeader,
                });
            }
            // Kept twice as long as the loss deadline: long enough for a re-read after a
            // leader change, bounded whatever the round rate.
            let keep = |t: SystemTime| now.duration_since(t).is_ok_and(|a| a > lost_after * 2);
            book.confirmed.retain(|_, (_, at)| !keep(*at));
            book.seen.retain(|_, (_, at)| !keep(*at));
        }
        events
    }

    /// Acknowledged records neither read back nor lost after `lost_after`, per partition:
    /// usually a high watermark that cannot advance (ISR below min.insync.replicas).
    pub fn overdue(&self, now: SystemTime) -> BTreeMap<i32, u64> {
        self.partitions
            .iter()
            .map(|(p, b)| {
                let n = b
                    .pending
                    .values()
                    .filter(|e| {
                        now.duration_since(e.acked_at)
                            .is_ok_and(|a| a > self.lost_after)
                    })
                    .count() as u64;
                (*p, n)
            })
            .collect()
    }

    /// The leader of `partition` changed: every record read back recently is owed a check
    /// against the new leader's log (a leader elected from outside the ISR truncates).
    pub fn leader_changed(&mut self, partition: i32) {
        let Some(book) = self.partitions.get_mut(&partition) else {
            return;
        };
        if let Some(first) = book.confirmed.keys().next().copied() {
            book.verify_from = Some(book.verify_from.map_or(first, |f| f.min(first)));
        }
    }

    /// Where a re-read of `partition` must start, while one is owed: until every record
    /// read back before the leader change has been found in a re-read, or is too old to
    /// keep.
    pub fn verification_owed(&self, partition: i32) -> Option<i64> {
        let book = self.partitions.get(&partition)?;
        let from = book.verify_from?;
        book.confirmed.range(from..).next().map(|_| from)
    }

    /// Compares a re-read of `partition` (offset -> record) with what was read back before.
    /// `read_to` is where the re-read stopped: it read every offset from the owed start up
    /// to it (exclusive). Each confirmed record in that range no longer at its offset was
    /// truncated; records beyond it were not read (the re-read hit its deadline, or the new
    /// leader's high watermark is still behind) and stay owed for the next re-read.
    pub fn verify(
        &mut self,
        partition: i32,
        log: &BTreeMap<i64, Option<CanaryRecord>>,
        read_to: i64,
    ) -> Vec<LedgerEvent> {
        let Some(book) = self.partitions.get_mut(&partition) else {
            return Vec::new();
        };
        let Some(from) = book.verify_from else {
            return Vec::new();
        };
        let instance = &self.instance;
        let gone: Vec<i64> = book
            .confirmed
            .range(from..read_to.max(from))
            .filter(|(offset, (entry, _))| {
                !matches!(log.get(offset), Some(Some(r)) if r.instance == *instance && r.seq == entry.seq)
            })
            .map(|(o, _)| *o)
            .collect();
        book.verify_from = book
            .confirmed
            .range(read_to.max(from)..)
            .next()
            .map(|_| read_to.max(from));
        gone.into_iter()
            .map(|offset| {
                let (entry, _) = book.confirmed.remove(&offset).expect("offset just listed");
                LedgerEvent::Lost {
                    partition,
                    offset,
                    seq: entry.seq,
                    acks: entry.acks,
                    broker: entry.broker,
                    reason: LossReason::Truncated,
                }
            })
            .collect()
    }

    /// Forgets partitions that no longer exist.
    pub fn retain_partitions(&mut self, keep: impl Fn(i32) -> bool) {
        self.partitions.retain(|p, _| keep(*p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn t(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(s)
    }

    fn entry(seq: u64, acks: Acks, broker: BrokerId, stale: bool, at: u64) -> Entry {
        Entry {
            seq,
            acks,
            sent_at: t(at),
            acked_at: t(at),
            broker,
            stale_ack: stale,
        }
    }

    /// A ledger whose consumer reads partitions 0 and 1 from their start.
    fn reading(lost_after: u64) -> Ledger {
        let mut l = Ledger::new("me", Duration::from_secs(lost_after));
        l.reading_from(0, 0);
        l.reading_from(1, 0);
        l
    }

    fn rec(instance: &str, seq: u64) -> CanaryRecord {
        CanaryRecord {
            instance: instance.into(),
            partition: 0,
            seq,
            sent_at: t(0),
            acks: Acks::All,
        }
    }

    #[test]
    fn read_back_records_are_confirmed_with_latency() {
        let mut l = reading(60);
        let s = l.next_seq(0);
        l.acked(0, 10, entry(s, Acks::All, 1, false, 100));
        let ev = l.consumed(0, 10, Some(&rec("me", s)), t(101));
        assert_eq!(
            ev,
            vec![LedgerEvent::Confirmed {
                partition: 0,
                seq: 1,
                acks: Acks::All,
                broker: 1,
                end_to_end: Duration::from_secs(1)
            }]
        );
        assert!(l.expire(t(1000)).is_empty());
    }

    #[test]
    fn a_record_overwritten_at_its_offset_is_lost_and_attributed() {
        // Incident 3: the stale leader acknowledged offset 50; the new leader's log holds
        // another record there.
        let mut l = reading(60);
        l.acked(0, 50, entry(7, Acks::One, 1, true, 100));
        l.acked(0, 51, entry(8, Acks::One, 1, true, 100));
        let ev = l.consumed(0, 50, Some(&rec("other-watchdog", 3)), t(110));
        assert_eq!(
            ev,
            vec![LedgerEvent::Lost {
                partition: 0,
                offset: 50,
                seq: 7,
                acks: Acks::One,
                broker: 1,
                reason: LossReason::Overwritten
            }]
        );
        let ev = l.consumed(0, 53, None, t(111));
        assert!(matches!(
            ev[..],
            [LedgerEvent::Lost {
                seq: 8,
                reason: LossReason::Skipped,
                ..
            }]
        ));
    }

    #[test]
    fn stale_acknowledgements_expire_as_lost_others_only_overdue() {
        let mut l = reading(30);
        l.acked(0, 900, entry(1, Acks::One, 1, true, 100));
        l.acked(1, 5, entry(1, Acks::One, 2, false, 100));
        assert!(l.expire(t(120)).is_empty());
        let ev = l.expire(t(131));
        assert!(matches!(
            ev[..],
            [LedgerEvent::Lost {
                partition: 0,
                broker: 1,
                reason: LossReason::StaleLeader,
                ..
            }]
        ));
        // acks=1 to the real leader while the high watermark is stuck: late, not lost.
        assert_eq!(l.overdue(t(131)).get(&1), Some(&1));
        assert_eq!(l.overdue(t(131)).get(&0), Some(&0));
    }

    #[test]
    fn a_record_read_twice_is_a_duplicate() {
        let mut l = reading(60);
        l.acked(0, 3, entry(1, Acks::All, 1, false, 100));
        l.consumed(0, 3, Some(&rec("me", 1)), t(100));
        let ev = l.consumed(0, 4, Some(&rec("me", 1)), t(101));
        assert_eq!(
            ev,
            vec![LedgerEvent::Duplicate {
                partition: 0,
                seq: 1,
                offset: 4,
                first_offset: 3
            }]
        );
    }

    #[test]
    fn other_instances_records_are_never_judged() {
        let mut l = reading(60);
        assert!(l.consumed(0, 1, Some(&rec("b", 1)), t(1)).is_empty());
        assert!(l.consumed(0, 2, Some(&rec("b", 1)), t(1)).is_empty());
    }

    #[test]
    fn truncation_after_a_leader_change_is_found_by_the_re_read() {
        let mut l = reading(60);
        for (offset, seq) in [(10, 1), (11, 2), (12, 3)] {
            l.acked(0, offset, entry(seq, Acks::All, 2, false, 100));
            l.consumed(0, offset, Some(&rec("me", seq)), t(100));
        }
        assert_eq!(l.verification_owed(0), None, "no leader change yet");
        l.leader_changed(0);
        assert_eq!(l.verification_owed(0), Some(10));
        let mut log = BTreeMap::new();
        log.insert(10, Some(rec("me", 1)));
        log.insert(11, Some(rec("someone", 9)));
        // The new leader's log ends at 12: 12 is gone as well, read up to the end.
        let ev = l.verify(0, &log, 13);
        let lost: Vec<(i64, u64, LossReason)> = ev
            .iter()
            .filter_map(|e| match e {
                LedgerEvent::Lost {
                    offset,
                    seq,
                    reason,
                    ..
                } => Some((*offset, *seq, *reason)),
                _ => None,
            })
            .collect();
        assert_eq!(
            lost,
            vec![
                (11, 2, LossReason::Truncated),
                (12, 3, LossReason::Truncated)
            ]
        );
        assert!(l.verify(0, &log, 13).is_empty(), "counted once");
        assert_eq!(l.verification_owed(0), None);
    }

    /// At one write a second the consumer often reads a record back before librdkafka
    /// delivers its acknowledgement. It must count as read back, not be booked pending and
    /// then counted lost (skipped) when the consumer reads the next record.
    #[test]
    fn a_record_read_back_before_its_acknowledgement_is_confirmed_not_lost() {
        let mut l = reading(60);
        let s = l.next_seq(0);
        assert!(l.consumed(0, 10, Some(&rec("me", s)), t(101)).is_empty());
        l.acked(0, 10, entry(s, Acks::All, 1, false, 100));
        let s2 = l.next_seq(0);
        l.acked(0, 11, entry(s2, Acks::All, 1, false, 102));
        let events = l.consumed(0, 11, Some(&rec("me", s2)), t(103));
        assert!(
            events
                .iter()
                .all(|e| matches!(e, LedgerEvent::Confirmed { .. })),
            "{events:?}"
        );
        assert!(l.expire(t(104)).is_empty());
        assert!(l.overdue(t(1000)).values().all(|n| *n == 0));
    }

    #[test]
    fn records_waiting_to_be_read_back_are_bounded() {
        let mut l = reading(60);
        for seq in 0..(MAX_PENDING as u64 + 10) {
            l.acked(0, seq as i64, entry(seq, Acks::One, 1, false, 100 + seq));
        }
        assert_eq!(l.overdue(t(100_000)).get(&0), Some(&(MAX_PENDING as u64)));
        // The newest are kept: reading the last one back confirms it.
        let last = MAX_PENDING as u64 + 9;
        let mut r = rec("me", last);
        r.acks = Acks::One;
        let ev = l.consumed(0, last as i64, Some(&r), t(100_000));
        assert!(ev
            .iter()
            .any(|e| matches!(e, LedgerEvent::Confirmed { seq, .. } if *seq == last)));
    }

    #[test]
    fn writes_while_the_consumer_does_not_read_the_partition_are_not_judged() {
        // The watermark fetch failed: the consumer skips partition 0 while the producer
        // writes to it; next round it starts at the end, past the acknowledged record.
        let mut l = reading(60);
        l.not_reading(0);
        l.acked(0, 5, entry(1, Acks::All, 1, false, 100));
        l.reading_from(0, 6);
        l.acked(0, 6, entry(2, Acks::All, 1, false, 110));
        let ev = l.consumed(0, 6, Some(&rec("me", 2)), t(111));
        assert!(
            ev.iter().all(|e| !matches!(e, LedgerEvent::Lost { .. })),
            "{ev:?}"
        );
        assert_eq!(l.overdue(t(1000)).get(&0), Some(&0));
    }

    #[test]
    fn a_partition_read_all_along_keeps_its_books_when_reassigned() {
        // Another partition was added: the consumer is reassigned and resumes this one
        // where it stood; what it acknowledged meanwhile is still read back.
        let mut l = reading(60);
        l.acked(0, 3, entry(1, Acks::All, 1, false, 100));
        l.reading_from(0, 4);
        assert_eq!(l.position(0), Some(0), "continues where it stood");
        let ev = l.consumed(0, 3, Some(&rec("me", 1)), t(101));
        assert!(
            matches!(ev[..], [LedgerEvent::Confirmed { seq: 1, .. }]),
            "{ev:?}"
        );
    }

    #[test]
    fn a_re_read_of_a_log_whose_end_is_still_behind_judges_nothing_yet() {
        // The new leader's high watermark lags the old one's for a moment after the change.
        let mut l = reading(60);
        l.acked(0, 10, entry(1, Acks::All, 2, false, 100));
        l.consumed(0, 10, Some(&rec("me", 1)), t(100));
        l.leader_changed(0);
        assert!(l.verify(0, &BTreeMap::new(), 10).is_empty());
        assert_eq!(l.verification_owed(0), Some(10));
    }

    #[test]
    fn a_re_read_cut_short_judges_only_what_it_read() {
        let mut l = reading(60);
        for (offset, seq) in [(10, 1), (11, 2), (12, 3)] {
            l.acked(0, offset, entry(seq, Acks::All, 2, false, 100));
            l.consumed(0, offset, Some(&rec("me", seq)), t(100));
        }
        // The re-read hit its deadline after offset 10: 11 and 12 were not read, not lost.
        let mut log = BTreeMap::new();
        log.insert(10, Some(rec("me", 1)));
        l.leader_changed(0);
        let ev = l.verify(0, &log, 11);
        assert!(ev.is_empty(), "{ev:?}");
        assert_eq!(l.verification_owed(0), Some(11), "11 and 12 are still owed");
        // The next re-read gets to the end: 11 holds another record now, 12 is there.
        log.insert(11, Some(rec("someone", 9)));
        log.insert(12, Some(rec("me", 3)));
        let ev = l.verify(0, &log, 13);
        assert!(
            matches!(
                ev[..],
                [LedgerEvent::Lost {
                    offset: 11,
                    seq: 2,
                    reason: LossReason::Truncated,
                    ..
                }]
            ),
            "{ev:?}"
        );
        assert_eq!(l.verification_owed(0), None);
    }

    #[test]
    fn bookkeeping_is_bounded_in_time() {
        let mut l = reading(10);
        l.acked(0, 1, entry(1, Acks::All, 1, false, 0));
        l.consumed(0, 1, Some(&rec("me", 1)), t(0));
        l.leader_changed(0);
        l.expire(t(100));
        assert_eq!(l.verification_owed(0), None);
    }
}
