//! The canary record: who wrote it, for which partition, which sequence number, when, and
//! with which acks. Plain text, so `kafka-console-consumer` shows something readable.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Format marker; a record without it is not a canary of ours.
const MAGIC: &str = "kwc1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Acks {
    /// acks=all through the regular producer: the availability and latency canary.
    All,
    /// acks=1 sent straight to a broker that claims leadership: the stale-leader probe.
    One,
}

impl Acks {
    pub fn as_label(self) -> &'static str {
        match self {
            Acks::All => "all",
            Acks::One => "1",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanaryRecord {
    pub instance: String,
    pub partition: i32,
    pub seq: u64,
    pub sent_at: SystemTime,
    pub acks: Acks,
}

impl CanaryRecord {
    pub fn encode(&self) -> String {
        let ms = self
            .sent_at
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        // The instance id is last: it is the only field that could contain the separator.
        format!(
            "{MAGIC}|{}|{}|{ms}|{}|{}",
            self.partition,
            self.seq,
            self.acks.as_label(),
            self.instance
        )
    }

    /// None for anything that is not a well-formed canary record.
    pub fn decode(bytes: &[u8]) -> Option<CanaryRecord> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut parts = text.splitn(6, '|');
        if parts.next()? != MAGIC {
            return None;
        }
        let partition = parts.next()?.parse().ok()?;
        let seq = parts.next()?.parse().ok()?;
        let ms: u64 = parts.next()?.parse().ok()?;
        let acks = match parts.next()? {
            "all" => Acks::All,
            "1" => Acks::One,
            _ => return None,
        };
        let instance = parts.next()?.to_string();
        Some(CanaryRecord {
            instance,
            partition,
            seq,
            sent_at: UNIX_EPOCH + Duration::from_millis(ms),
            acks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_even_with_separators_in_the_instance() {
        let r = CanaryRecord {
            instance: "dc1|watchdog-a".into(),
            partition: 7,
            seq: 42,
            sent_at: UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
            acks: Acks::One,
        };
        assert_eq!(CanaryRecord::decode(r.encode().as_bytes()), Some(r));
    }

    #[test]
    fn foreign_and_broken_records_are_not_canaries() {
        for bad in [
            &b""[..],
            b"hello",
            b"kwc1|x|1|2|all|i",
            b"kwc1|1|2|3|some|i",
            b"kwc2|1|2|3|all|i",
            b"\xff\xfe",
            b"kwc1|1|2|3|all",
        ] {
            assert_eq!(CanaryRecord::decode(bad), None, "{bad:?}");
        }
    }
}
