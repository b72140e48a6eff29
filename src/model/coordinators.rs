//! Group coordinators: how Kafka places a consumer group on a `__consumer_offsets`
//! partition (its coordinator shard), and the group coordinator probe's observations.
//! Those are kept with the round's (`round`), which carries them, and named here.
pub use super::round::{
    CoordinatorLook, CoordinatorObservation, ShardError, ShardProbe, TxnCoordinators,
    CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR,
};

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

/// The synthetic group (or transactional id: Kafka places both alike) of a shard: `<prefix>-<shard>-<n>`, with the smallest `n` that lands
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
