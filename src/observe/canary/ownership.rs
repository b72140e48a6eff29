//! Whether the canary topic is the watchdog's to write to and to lay out. A typo in
//! `canary.topic` that names a production topic would otherwise have the canary add
//! partitions to it (which cannot be undone), move its replicas, elect its leaders and
//! write canary records among its data (issue 27 item 7). Kafka keeps no free-form mark on a
//! topic (unknown topic configs are refused), so the topic's own contents decide, once each
//! time it appears:
//! - the default name `__kafka_watchdog_canary` is the watchdog's;
//! - a topic never written to (every log end offset 0) is adopted: one the watchdog just
//!   created, or one an operator created for it;
//! - a topic whose newest record on some partition is a canary record is a canary's (this
//!   instance's earlier run, or another instance watching the same cluster);
//! - a topic emptied by retention is the watchdog's if its `retention.ms` is the one the
//!   watchdog sets (an hour): its canary was away longer than that;
//! - anything else is not, and the canary leaves it alone.

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::auth::CanaryContext;
use super::record::CanaryRecord;
use crate::observe::wire::Token;

/// The topic name the watchdog uses unless told otherwise.
pub(super) const DEFAULT_TOPIC: &str = "__kafka_watchdog_canary";
/// The `retention.ms` the watchdog gives the topics it creates.
pub(super) const CANARY_RETENTION_MS: &str = "3600000";

/// What was read of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PartitionLook {
    pub partition: i32,
    /// Log start and end offsets.
    pub low: i64,
    pub high: i64,
    /// Whether its newest record is a canary record; None when it could not be read
    /// (empty, a control record last, or no answer in time).
    pub newest_is_canary: Option<bool>,
}

/// The decision, with the reason in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ownership {
    Ours(String),
    NotOurs(String),
}

/// Decides from what was read (pure).
pub(super) fn decide(
    topic: &str,
    looks: &[PartitionLook],
    retention_ms: Option<&str>,
) -> Ownership {
    if topic == DEFAULT_TOPIC {
        return Ownership::Ours("the default canary topic".into());
    }
    if let Some(p) = looks.iter().find(|p| p.newest_is_canary == Some(true)) {
        return Ownership::Ours(format!(
            "partition {}'s newest record is a canary record",
            p.partition
        ));
    }
    if looks.iter().all(|p| p.high == 0) {
        return Ownership::Ours("never written to: adopted".into());
    }
    if looks.iter().all(|p| p.low == p.high) && retention_ms == Some(CANARY_RETENTION_MS) {
        return Ownership::Ours(
            "emptied by the one-hour retention the watchdog gives its canary topics".into(),
        );
    }
    let written: Vec<String> = looks
        .iter()
        .filter(|p| p.high > p.low)
        .map(|p| format!("{}", p.partition))
        .collect();
    Ownership::NotOurs(format!(
        "topic {topic} exists and is not the watchdog's: it holds records that are not canary records (partitions {}), so the canary writes nothing to it and changes nothing in its layout. Set canary.topic to a topic of the watchdog's own (the default, {DEFAULT_TOPIC}, is created for it), or delete {topic} if it is a canary topic nobody uses",
        if written.is_empty() {
            "emptied by retention, whose retention.ms is not the canary's".to_string()
        } else {
            written.join(", ")
        }
    ))
}

/// Reads, for each partition, its offsets and whether its newest record is a canary record,
/// with a consumer of the canary's own settings that commits nothing. Blocking: run it off
/// the async runtime.
pub(super) fn look(
    client: &ClientConfig,
    context: CanaryContext,
    token: Option<&Token>,
    topic: &str,
    partitions: &[i32],
    timeout: Duration,
) -> Result<Vec<PartitionLook>, KafkaError> {
    let consumer: BaseConsumer<CanaryContext> = client
        .clone()
        .set("group.id", "kafka-watchdog-canary-ownership")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create_with_context(context.clone())?;
    // With OAUTHBEARER the client has no token until one is set: as the admin client's is.
    context.prime(consumer.client(), token).map_err(|e| {
        KafkaError::ClientCreation(format!("a token for the canary's consumer: {e}"))
    })?;
    let mut looks = Vec::with_capacity(partitions.len());
    let mut assignment = TopicPartitionList::new();
    for p in partitions {
        let (low, high) = consumer.fetch_watermarks(topic, *p, timeout)?;
        if high > low {
            assignment.add_partition_offset(topic, *p, Offset::Offset(high - 1))?;
        }
        looks.push(PartitionLook {
            partition: *p,
            low,
            high,
            newest_is_canary: None,
        });
    }
    if assignment.count() == 0 {
        return Ok(looks);
    }
    consumer.assign(&assignment)?;
    let deadline = Instant::now() + timeout;
    let mut waiting = assignment.count();
    while waiting > 0 {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            break;
        };
        match consumer.poll(left) {
            Some(Ok(m)) => {
                if let Some(l) = looks
                    .iter_mut()
                    .find(|l| l.partition == m.partition() && l.newest_is_canary.is_none())
                {
                    l.newest_is_canary = Some(m.payload().and_then(CanaryRecord::decode).is_some());
                    waiting -= 1;
                }
            }
            Some(Err(e)) => return Err(e),
            None => break,
        }
    }
    Ok(looks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(partition: i32, low: i64, high: i64, canary: Option<bool>) -> PartitionLook {
        PartitionLook {
            partition,
            low,
            high,
            newest_is_canary: canary,
        }
    }

    #[test]
    fn a_production_topic_is_not_the_canarys() {
        let looks = [part(0, 0, 5000, Some(false)), part(1, 10, 4000, None)];
        match decide("orders", &looks, Some("604800000")) {
            Ownership::NotOurs(why) => {
                assert!(why.contains("partitions 0, 1"), "{why}");
                assert!(why.contains("canary.topic"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // Emptied by a retention that is not the canary's: still not.
        let empty = [part(0, 300, 300, None)];
        assert!(matches!(
            decide("orders", &empty, Some("86400000")),
            Ownership::NotOurs(_)
        ));
    }

    #[test]
    fn the_canarys_own_topics_are() {
        let canary = [part(0, 0, 5000, Some(false)), part(1, 0, 300, Some(true))];
        assert!(matches!(decide("kwc", &canary, None), Ownership::Ours(_)));
        let fresh = [part(0, 0, 0, None), part(1, 0, 0, None)];
        assert!(matches!(decide("kwc", &fresh, None), Ownership::Ours(_)));
        let expired = [part(0, 900, 900, None)];
        assert!(matches!(
            decide("kwc", &expired, Some(CANARY_RETENTION_MS)),
            Ownership::Ours(_)
        ));
        let production_looking = [part(0, 0, 10, Some(false))];
        assert!(matches!(
            decide(DEFAULT_TOPIC, &production_looking, None),
            Ownership::Ours(_)
        ));
    }
}
