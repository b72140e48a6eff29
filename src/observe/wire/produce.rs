//! Produce: one record batch to one partition of the broker the client is connected to, and
//! that broker's answer, taken as it is. Nothing here retries or follows a leader change: the
//! point is to learn what this one broker does with a write.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
};

/// The Produce versions this client sends. v3 is the first that carries record batches of
/// magic v2 (and the lowest Kafka 4.x accepts). v13 (KIP-516) names topics by id only and no
/// longer by name, so it would need the topic id from a Metadata request first; brokers that
/// speak v13 still accept v12, which carries the name, so v12 is the highest used.
pub(crate) const PRODUCE_BY_NAME: VersionRange = VersionRange { min: 3, max: 12 };

/// Produce v5 added `log_start_offset`.
const PRODUCE_LOG_START_OFFSET: i16 = 5;
/// Produce v8 added `error_message`.
const PRODUCE_ERROR_MESSAGE: i16 = 8;

/// What the broker answered for the partition written to. A partition-level error is data
/// here, not a failure: NOT_LEADER_OR_FOLLOWER (6), REQUEST_TIMED_OUT (7) or
/// NOT_ENOUGH_REPLICAS (19) from a broker is exactly what the caller wants to classify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceAnswer {
    /// 0 when the write was appended (and, with acks=-1, replicated to the ISR).
    pub error_code: i16,
    /// The offset of the first record written; -1 on error.
    pub base_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time_ms: i64,
    /// -1 below Produce v5, which added it.
    pub log_start_offset: i64,
    /// The broker's explanation of an error, if it gave a non-empty one; always `None` below
    /// Produce v8.
    pub error_message: Option<String>,
}

/// Encodes `records` as one uncompressed batch of magic v2, without a producer id, epoch or
/// sequence (not idempotent, not transactional), every record stamped `timestamp_ms`.
pub(crate) fn encode_batch(
    records: &[(Option<Vec<u8>>, Vec<u8>)],
    timestamp_ms: i64,
) -> Result<Bytes, String> {
    if records.is_empty() {
        return Err("no records to write".to_owned());
    }
    let count = i32::try_from(records.len())
        .map_err(|_| format!("{} records do not fit one batch", records.len()))?;
    let batch: Vec<Record> = records
        .iter()
        .zip(0..count)
        .map(|((key, value), delta)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(delta),
            // The encoder starts a new batch wherever `offset - sequence` changes and takes
            // the batch's base sequence from the first record. Keeping the difference at one
            // puts every record in a single batch (a v3+ Produce request must carry exactly
            // one) whose base sequence is NO_SEQUENCE, as a non-idempotent producer sends.
            sequence: NO_SEQUENCE.wrapping_add(delta),
            timestamp: timestamp_ms,
            key: key.as_deref().map(Bytes::copy_from_slice),
            value: Some(Bytes::copy_from_slice(value)),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &batch,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .map_err(|e| format!("cannot encode the record batch: {e:#}"))?;
    Ok(buf.freeze())
}

/// Milliseconds since the Unix epoch, as record timestamps count them. A clock set before
/// 1970 gives 0 rather than a failure: the timestamp is informational for the canary.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub(crate) fn request(
    topic: &str,
    partition: i32,
    acks: i16,
    timeout_ms: i32,
    batch: Bytes,
) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])])
}

/// The answer for the one partition written to; its absence means the broker answered
/// something other than what was asked.
pub(crate) fn answer(
    response: ProduceResponse,
    topic: &str,
    partition: i32,
    version: i16,
) -> Result<ProduceAnswer, String> {
    let found = response
        .responses
        .into_iter()
        .filter(|t| t.name.0.as_str() == topic)
        .flat_map(|t| t.partition_responses)
        .find(|p| p.index == partition)
        .ok_or_else(|| format!("answer lacks partition {topic}-{partition}"))?;
    Ok(ProduceAnswer {
        error_code: found.error_code,
        base_offset: found.base_offset,
        log_append_time_ms: found.log_append_time_ms,
        log_start_offset: if version >= PRODUCE_LOG_START_OFFSET {
            found.log_start_offset
        } else {
            -1
        },
        error_message: if version >= PRODUCE_ERROR_MESSAGE {
            found
                .error_message
                .filter(|m| !m.is_empty())
                .map(|m| m.to_string())
        } else {
            None
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;

    #[test]
    fn records_make_one_batch_without_producer_identity() {
        let records = vec![
            (Some(b"k1".to_vec()), b"v1".to_vec()),
            (None, b"v2".to_vec()),
            (Some(Vec::new()), Vec::new()),
        ];
        let batch = encode_batch(&records, 1_700_000_000_123).unwrap();
        let info = RecordBatchDecoder::decode_batch_info(&mut batch.clone()).unwrap();
        assert_eq!(info.len(), 1, "{info:?}");
        let info = &info[0];
        assert_eq!(info.version, 2);
        assert_eq!(info.compression, Compression::None);
        assert_eq!(info.record_count, 3);
        assert_eq!(info.min_offset, 0);
        assert_eq!(info.producer_id, -1);
        assert_eq!(info.producer_epoch, -1);
        assert_eq!(info.base_sequence, -1);
        assert!(!info.transactional && !info.control);
        assert_eq!(info.timestamp_type, TimestampType::Creation);

        let set = RecordBatchDecoder::decode(&mut batch.clone()).unwrap();
        let got: Vec<_> = set
            .records
            .iter()
            .map(|r| (r.offset, r.timestamp, r.key.clone(), r.value.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    0,
                    1_700_000_000_123,
                    Some(Bytes::from_static(b"k1")),
                    Some(Bytes::from_static(b"v1"))
                ),
                (1, 1_700_000_000_123, None, Some(Bytes::from_static(b"v2"))),
                (2, 1_700_000_000_123, Some(Bytes::new()), Some(Bytes::new())),
            ]
        );
    }

    #[test]
    fn an_empty_batch_is_refused() {
        assert!(encode_batch(&[], 0).is_err());
    }

    #[test]
    fn the_clock_is_in_milliseconds() {
        // 2020-09-13 in milliseconds; a seconds or microseconds clock would be far off.
        let now = now_ms();
        assert!(now > 1_600_000_000_000 && now < 10_000_000_000_000, "{now}");
    }
}
