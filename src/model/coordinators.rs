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
    placed(java_string_hash(group), partitions)
}

/// `Utils.abs(hash) % partitions`, Kafka's placement of a hash.
fn placed(hash: i32, partitions: u32) -> i32 {
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    (i64::from(abs) % i64::from(partitions.max(1))) as i32
}

/// The synthetic group (or transactional id: Kafka places both alike) of a shard:
/// `<prefix>-<shard>-<n>`, with the smallest `n` that lands on that shard, so operators
/// recognise it and every shard has exactly one. About `partitions` tries: each adds the
/// digits of `n` to the hash of the rest (Java's hash is a polynomial in 31), with no
/// string made until the one found.
pub fn group_for(prefix: &str, shard: i32, partitions: u32) -> String {
    let head = format!("{prefix}-{shard}-");
    let head_hash = java_string_hash(&head);
    let n = (0u64..)
        .find(|&n| {
            let (digits_hash, shift) = digits_hash(n);
            placed(
                head_hash.wrapping_mul(shift).wrapping_add(digits_hash),
                partitions,
            ) == shard
        })
        .expect("some suffix lands on every shard");
    format!("{head}{n}")
}

/// Java's hash of `n` written in decimal, and 31 to the power of its length: the hash of
/// `s + n` is `hash(s) * that power + this hash`.
fn digits_hash(mut n: u64) -> (i32, i32) {
    let mut digits = [0u8; 20];
    let mut len = 0;
    loop {
        digits[len] = (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    digits[..len]
        .iter()
        .rev()
        .fold((0i32, 1i32), |(h, shift), d| {
            (
                h.wrapping_mul(31).wrapping_add(i32::from(b'0' + d)),
                shift.wrapping_mul(31),
            )
        })
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
    fn the_hash_of_a_number_appended_is_the_hash_of_the_whole() {
        for n in [0u64, 7, 10, 99, 12_345, u64::MAX] {
            let (h, shift) = digits_hash(n);
            let whole = java_string_hash(&format!("kafka-watchdog-probe-w1-3-{n}"));
            let head = java_string_hash("kafka-watchdog-probe-w1-3-");
            assert_eq!(head.wrapping_mul(shift).wrapping_add(h), whole, "{n}");
        }
    }

    #[test]
    fn the_group_is_the_first_that_lands() {
        // As the one-string-per-try search found it: the smallest suffix.
        for (shard, partitions) in [(0, 1), (3, 50), (49, 50), (199, 200)] {
            let g = group_for("kafka-watchdog-probe-w1", shard, partitions);
            let first = (0u32..)
                .map(|n| format!("kafka-watchdog-probe-w1-{shard}-{n}"))
                .find(|g| shard_of(g, partitions) == shard)
                .unwrap();
            assert_eq!(g, first);
        }
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
