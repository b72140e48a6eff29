//! The three requests of one empty transaction, as the transaction coordinator probe sends
//! them for a synthetic transactional id: InitProducerId (API 22), AddOffsetsToTxn (API 25,
//! which puts a consumer group's `__consumer_offsets` partition into the transaction, so
//! that no topic of anyone's is touched) and EndTxn (API 26, commit). The commit makes the
//! coordinator write its markers (`TxnMarkerSenderThread`); until they are written, the
//! next InitProducerId for that id answers CONCURRENT_TRANSACTIONS.
//!
//! Versions stay below Kafka 4's transactions v2 (EndTxn v5, AddOffsetsToTxn v4, KIP-890),
//! whose epoch bump per transaction the probe does not need: every cycle starts with a
//! fresh InitProducerId (-1, -1), which bumps the epoch and fences the cycle before.

use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, EndTxnRequest, GroupId, InitProducerIdRequest, ProducerId,
    TransactionalId,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};

/// The highest versions the probe sends (transactions v1).
pub(crate) const INIT_PRODUCER_ID: VersionRange = VersionRange { min: 0, max: 4 };
pub(crate) const ADD_OFFSETS_TO_TXN: VersionRange = VersionRange { min: 0, max: 3 };
pub(crate) const END_TXN: VersionRange = VersionRange { min: 0, max: 4 };

/// How long the coordinator lets a probe's transaction stay open before it aborts it
/// itself: a watchdog stopped between AddOffsetsToTxn and EndTxn leaves nothing open for
/// long.
pub(crate) const TRANSACTION_TIMEOUT_MS: i32 = 10_000;

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_owned()))
}

pub(crate) fn init_producer_id(id: &str) -> InitProducerIdRequest {
    InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(id)))
        .with_transaction_timeout_ms(TRANSACTION_TIMEOUT_MS)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

/// `group`'s offsets partition joins the transaction: the commit's markers go to its leader.
/// The probe names its groups with the transactional ids' prefix, so one ACL prefix covers
/// both.
pub(crate) fn add_offsets(id: &str, group: &str, producer: (i64, i16)) -> AddOffsetsToTxnRequest {
    AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
}

pub(crate) fn commit(id: &str, producer: (i64, i16)) -> EndTxnRequest {
    EndTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cycle_names_its_id_everywhere_and_commits() {
        let i = init_producer_id("kafka-watchdog-txn-w1-3-0");
        assert_eq!(
            i.transactional_id.as_ref().map(|t| t.0.as_str()),
            Some("kafka-watchdog-txn-w1-3-0")
        );
        assert_eq!((i.producer_id.0, i.producer_epoch), (-1, -1));
        let a = add_offsets(
            "kafka-watchdog-txn-w1-3-0",
            "kafka-watchdog-txn-w1-g-5-2",
            (7, 2),
        );
        assert_eq!(a.group_id.0.as_str(), "kafka-watchdog-txn-w1-g-5-2");
        assert_eq!((a.producer_id.0, a.producer_epoch), (7, 2));
        let c = commit("kafka-watchdog-txn-w1-3-0", (7, 2));
        assert!(c.committed);
    }
}
