//! The reader: the assigned consumer that reads every write back, re-reads what a leader
//! change may have lost, and where it resumes after a restart.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::auth::CanaryContext;
use super::books::{lock, Shared};
use super::record::CanaryRecord;
use super::round::CanaryRound;
use super::view::PartitionStateWithEpoch;
use super::Canary;

/// Feeds every record the consumer reads to the books, decoded.
pub(super) async fn read_loop(consumer: Arc<StreamConsumer<CanaryContext>>, shared: Arc<Shared>) {
    let mut last_error: Option<Instant> = None;
    loop {
        match consumer.recv().await {
            Ok(m) => {
                let record = m.payload().and_then(CanaryRecord::decode);
                let (partition, offset) = (m.partition(), m.offset());
                let mut books = lock(&shared.books);
                let events =
                    books
                        .ledger
                        .consumed(partition, offset, record.as_ref(), SystemTime::now());
                for ev in events {
                    books.event(ev, &shared);
                }
            }
            Err(e) => {
                // A partition without leader makes the consumer complain every poll; one
                // line a minute is enough.
                if last_error.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
                    tracing::warn!(cluster = %shared.cluster, error = %e, "canary consumer");
                    last_error = Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// What a re-read found.
pub(super) struct Reread {
    pub(super) log: BTreeMap<i64, Option<CanaryRecord>>,
    /// Every offset from the start up to this one (exclusive) was read.
    pub(super) read_to: i64,
    /// Why it stopped before the high watermark it saw at its start, if it did.
    pub(super) stopped: Option<String>,
}

/// Reads one partition from `from` to its current end, or as far as it gets within
/// `timeout`.
pub(super) fn reread(
    client: &ClientConfig,
    topic: &str,
    partition: i32,
    from: i64,
    timeout: Duration,
) -> Result<Reread, KafkaError> {
    let consumer: BaseConsumer = client
        .clone()
        .set("group.id", "kafka-watchdog-canary-verify")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "error")
        .create()?;
    let (_, high) = consumer.fetch_watermarks(topic, partition, timeout)?;
    let mut out = Reread {
        log: BTreeMap::new(),
        read_to: from,
        stopped: None,
    };
    if high <= from {
        return Ok(out);
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(from))?;
    consumer.assign(&tpl)?;
    let deadline = Instant::now() + timeout;
    while out.read_to < high {
        if Instant::now() >= deadline {
            out.stopped = Some(format!("deadline of {} ms", timeout.as_millis()));
            break;
        }
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                out.log
                    .insert(m.offset(), m.payload().and_then(CanaryRecord::decode));
                // Offsets the consumer skips (none in this topic: no transactions, no
                // compaction) were read as far as the log goes.
                out.read_to = out.read_to.max(m.offset() + 1);
            }
            // What was read so far still counts.
            Some(Err(e)) => {
                out.stopped = Some(e.to_string());
                break;
            }
            None => {}
        }
    }
    Ok(out)
}

/// Where the consumer resumes a partition on a new assignment: its own position, else where
/// the ledger last saw it; None when neither knows (never read), so its end offset must be
/// fetched first. Never "the end" as such: librdkafka resolves it when it fetches, after
/// this round's writes, and the records acknowledged before would be passed over and
/// counted lost.
pub(super) fn resume_offset(consumer: Offset, ledger: Option<i64>) -> Option<i64> {
    match consumer {
        Offset::Offset(o) => Some(o),
        _ => ledger,
    }
}

impl Canary {
    /// Assigns the consumer to every partition, new ones at their current end, before any
    /// record is written to them (so none is missed). A partition whose end offset cannot
    /// be fetched is left out, and the ledger books no write to it until it is read: the
    /// consumer would start past those writes and count them lost.
    pub(super) async fn assign(&mut self, parts: &[PartitionStateWithEpoch]) {
        let want: BTreeSet<i32> = parts.iter().map(|p| p.state.partition).collect();
        if want == self.assigned {
            return;
        }
        let Some(clients) = &self.clients else { return };
        let consumer = clients.consumer.clone();
        let topic = self.settings.topic.clone();
        let current = clients.consumer.position().unwrap_or_default();
        let mut starts: BTreeMap<i32, i64> = BTreeMap::new();
        let mut unknown: Vec<i32> = Vec::new();
        for p in &want {
            let own = current
                .find_partition(&topic, *p)
                .map(|e| e.offset())
                .unwrap_or(Offset::Invalid);
            match resume_offset(own, lock(&self.shared.books).ledger.position(*p)) {
                Some(o) => {
                    starts.insert(*p, o);
                }
                None => unknown.push(*p),
            }
        }
        let timeout = self.settings.produce_timeout;
        let fetch_topic = topic.clone();
        let ends = tokio::task::spawn_blocking(move || {
            unknown
                .into_iter()
                .map(|p| {
                    (
                        p,
                        consumer
                            .fetch_watermarks(&fetch_topic, p, timeout)
                            .map(|w| w.1),
                    )
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for (p, end) in ends {
            match end {
                Ok(o) => {
                    starts.insert(p, o);
                }
                Err(e) => {
                    tracing::warn!(cluster = %self.settings.cluster, partition = p, error = %e, "canary: no end offset yet; its writes are not checked until it is read");
                }
            }
        }
        let mut tpl = TopicPartitionList::new();
        for (p, o) in &starts {
            let _ = tpl.add_partition_offset(&topic, *p, Offset::Offset(*o));
        }
        match clients.consumer.assign(&tpl) {
            Ok(()) => {
                self.assigned = starts.keys().copied().collect();
                let mut books = lock(&self.shared.books);
                for (p, o) in &starts {
                    books.ledger.reading_from(*p, *o);
                }
            }
            Err(e) => {
                tracing::warn!(cluster = %self.settings.cluster, error = %e, "canary: cannot assign the consumer");
                // Whatever librdkafka keeps, nothing is known to be read from a known offset.
                self.assigned.clear();
            }
        }
        for p in want.iter().filter(|p| !self.assigned.contains(p)) {
            lock(&self.shared.books).ledger.not_reading(*p);
        }
    }

    /// After a leader change, re-reads what was read back before and checks it is all still
    /// there: a leader elected from outside the ISR truncates acknowledged writes. A re-read
    /// that does not get through (deadline, high watermark of the new leader still behind)
    /// judges what it read and is taken up again next round.
    pub(super) async fn check_leader_changes(
        &mut self,
        parts: &[PartitionStateWithEpoch],
        out: &mut CanaryRound,
    ) {
        for p in parts {
            let partition = p.state.partition;
            let previous = self.epochs.insert(partition, p.leader_epoch);
            if previous.is_some_and(|e| e != p.leader_epoch) {
                lock(&self.shared.books).ledger.leader_changed(partition);
            }
            if p.state.leader < 0 {
                continue;
            }
            let owed = lock(&self.shared.books).ledger.verification_owed(partition);
            let Some(from) = owed else {
                continue;
            };
            let client = self.settings.client.clone();
            let topic = self.settings.topic.clone();
            let timeout = self.settings.produce_timeout;
            let log = tokio::task::spawn_blocking(move || {
                reread(&client, &topic, partition, from, timeout)
            })
            .await;
            match log {
                Ok(Ok(r)) => {
                    let mut books = lock(&self.shared.books);
                    for ev in books.ledger.verify(partition, &r.log, r.read_to) {
                        books.event(ev, &self.shared);
                    }
                    if let Some(e) = r.stopped {
                        out.layout.push(format!(
                            "re-read of partition {partition} after its leader changed stopped at offset {} ({e}); the rest is checked next round",
                            r.read_to
                        ));
                    }
                }
                Ok(Err(e)) => out.layout.push(format!(
                    "re-read of partition {partition} after its leader changed failed: {e}; tried again next round"
                )),
                Err(_) => {}
            }
        }
    }
}
