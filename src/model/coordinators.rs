//! What the group coordinator probe saw: per broker, the `__consumer_offsets` partitions
//! (coordinator shards) it leads, whether its coordinator answered the probe's OffsetFetch
//! for their synthetic groups, and how its other connection answered meanwhile.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::round::{BrokerId, FailureKind};

/// Kafka's coordinator error codes the probe keeps per shard.
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const NOT_COORDINATOR: i16 = 16;

/// How one probe of a broker's shards ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardProbe {
    /// Every group answered (errors, if any, are per shard).
    Answered { latency: Duration },
    /// No answer within the probe's deadline.
    Unanswered,
    /// The connection or the request failed otherwise (refused, closed, unsupported).
    Failed { kind: FailureKind, detail: String },
    /// The probe has not reached it yet.
    NotYet,
}

/// A shard whose group the coordinator answered with an error, and since when that error
/// has been its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardError {
    pub shard: i32,
    pub code: i16,
    pub since: SystemTime,
}

/// One broker as a group coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorLook {
    pub broker: BrokerId,
    pub address: String,
    /// The `__consumer_offsets` partitions the newest view says it leads.
    pub shards: Vec<i32>,
    pub last: ShardProbe,
    /// How fast its other connection answered ApiVersions while the probe waited; `None`
    /// when it did not answer within the deadline either.
    pub control_latency: Option<Duration>,
    /// Probes in a row that went unanswered while the other connection answered quickly:
    /// its coordinator is stuck while the broker works.
    pub unanswered_in_a_row: u32,
    /// When the first of those probes was sent.
    pub unanswered_since: Option<SystemTime>,
    /// Shards whose group got a coordinator error, with the error's start.
    pub errors: Vec<ShardError>,
}

/// One look at every broker's coordinator shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorObservation {
    pub at: SystemTime,
    /// `__consumer_offsets` partitions (Kafka's `offsets.topic.num.partitions`); 0 while
    /// the topic does not exist (no group has been used yet).
    pub offsets_partitions: u32,
    pub brokers: BTreeMap<BrokerId, CoordinatorLook>,
    /// The probe's deadline per request.
    pub timeout: Duration,
    /// Why nothing could be probed, when nothing could.
    pub blind: Option<String>,
}

/// Kafka's `String.hashCode()` of a group id (UTF-16 code units, wrapping), as the broker
/// computes it to place the group.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The `__consumer_offsets` partition of a group: `Utils.abs(hashCode) % partitions` in
/// Kafka (whose `abs` maps `i32::MIN` to 0).
pub fn shard_of(group: &str, partitions: u32) -> i32 {
    let h = java_string_hash(group);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    (i64::from(abs) % i64::from(partitions.max(1))) as i32
}

/// The synthetic group of a shard: `<prefix>-<shard>-<n>`, with the smallest `n` that lands
/// on that shard, so operators recognise it and every shard has exactly one.
pub fn group_for(prefix: &str, shard: i32, partitions: u32) -> String {
    (0u32..)
        .map(|n| format!("{prefix}-{shard}-{n}"))
        .find(|g| shard_of(g, partitions) == shard)
        .expect("some suffix lands on every shard")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_javas() {
        // Values printed by Java 17 (jshell) for "…".hashCode().
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("console-consumer-12345"), 158_455_506);
        assert_eq!(java_string_hash("kafka-watchdog-probe-0-0"), -114_059_139);
        // Beyond the BMP: two UTF-16 units.
        assert_eq!(java_string_hash("😀"), 1_772_899);
    }

    #[test]
    fn every_shard_gets_a_group_that_lands_on_it() {
        for partitions in [1, 3, 50, 200] {
            for shard in 0..partitions as i32 {
                let g = group_for("kafka-watchdog-probe-w1", shard, partitions);
                assert_eq!(shard_of(&g, partitions), shard, "{g}");
                assert!(g.starts_with(&format!("kafka-watchdog-probe-w1-{shard}-")));
            }
        }
    }
}
