//! Bounded labels and plain words that an observing stage writes and the verdict reads: the
//! canary's produce error kinds and byte counts in an operator's units. Pure, so that the
//! verdict owns what it decides on without importing the modules that do I/O (`canary`
//! speaks librdkafka, `host` reads /proc); those re-export what they used to define.

/// The error kind of a write the cluster refused to this watchdog's user: a fact about the
/// watchdog's permissions, never about a broker.
pub const AUTHORIZATION: &str = "authorization";

/// Whether a produce error points at the replicas missing from the ISR rather than at the
/// leader that answered it.
pub fn blames_followers(kind: &str) -> bool {
    kind.starts_with("not_enough_replicas")
}

/// Whether a produce error happened in the client, before any broker had the write: the
/// local queue was full, or the message timed out waiting to be sent. It says nothing about
/// a broker.
pub fn client_side(kind: &str) -> bool {
    kind == "queue_full"
}

/// `12.3 GiB`, `512 MiB`, `900 KiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}
