//! Which controller is active: DescribeQuorum (API 55) over one blocking connection, for
//! `kafka-lab status` and for tests that fault the active controller. rdkafka has no such
//! request, and starting Kafka's own quorum tool costs a JVM per question.
//!
//! A broker forwards DescribeQuorum to the active controller; a controller answers it
//! itself when it leads, and with NOT_LEADER_OR_FOLLOWER when it does not.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    DescribeQuorumRequest, DescribeQuorumResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use crate::error::LabError;

/// The metadata log's topic: the one partition DescribeQuorum describes.
const METADATA_TOPIC: &str = "__cluster_metadata";
/// Answers are small; a larger length prefix is not a DescribeQuorum answer.
const MAX_FRAME: usize = 1 << 20;

/// The quorum as its leader describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumState {
    pub leader: i32,
    pub epoch: i32,
    pub high_watermark: i64,
    /// Voter ids with their log end offsets, as the leader knows them.
    pub voters: Vec<(i32, i64)>,
}

/// Asks `address` (a broker, or a controller) to describe the quorum, within `timeout` for
/// the connection and again for the answer.
pub fn describe(address: &str, timeout: Duration) -> Result<QuorumState, LabError> {
    let fail = |what: String| LabError::Kafka(format!("DescribeQuorum to {address}: {what}"));
    let addr = address
        .to_socket_addrs()
        .map_err(|e| fail(e.to_string()))?
        .next()
        .ok_or_else(|| fail("no address".into()))?;
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| fail(e.to_string()))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| fail(e.to_string()))?;
    // v0 is what every KRaft release speaks, and it has what this needs.
    let version = 0;
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let header = RequestHeader::default()
        .with_request_api_key(DescribeQuorumRequest::KEY)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("kafka-lab")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, DescribeQuorumRequest::header_version(version))
        .and_then(|()| request.encode(&mut body, version))
        .map_err(|e| fail(format!("cannot encode: {e}")))?;
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame).map_err(|e| fail(e.to_string()))?;
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .map_err(|e| fail(format!("no answer: {e}")))?;
    let len = usize::try_from(i32::from_be_bytes(len))
        .ok()
        .filter(|n| *n <= MAX_FRAME)
        .ok_or_else(|| fail("bad frame length".into()))?;
    let mut answer = vec![0u8; len];
    stream
        .read_exact(&mut answer)
        .map_err(|e| fail(format!("answer cut short: {e}")))?;
    let mut buf = bytes::Bytes::from(answer);
    ResponseHeader::decode(&mut buf, DescribeQuorumResponse::header_version(version))
        .map_err(|e| fail(format!("bad header: {e}")))?;
    let response = DescribeQuorumResponse::decode(&mut buf, version)
        .map_err(|e| fail(format!("undecodable: {e}")))?;
    if buf.has_remaining() {
        return Err(fail("trailing bytes".into()));
    }
    state_of(response).map_err(fail)
}

/// The quorum state in an answer, or the Kafka error it carries.
fn state_of(response: DescribeQuorumResponse) -> Result<QuorumState, String> {
    if response.error_code != 0 {
        return Err(format!("Kafka error {}", response.error_code));
    }
    let partition = response
        .topics
        .into_iter()
        .flat_map(|t| t.partitions)
        .next()
        .ok_or("no partition in the answer")?;
    if partition.error_code != 0 {
        // 6 NOT_LEADER_OR_FOLLOWER from a controller that does not lead.
        return Err(format!("Kafka error {}", partition.error_code));
    }
    Ok(QuorumState {
        leader: partition.leader_id.0,
        epoch: partition.leader_epoch,
        high_watermark: partition.high_watermark,
        voters: partition
            .current_voters
            .iter()
            .map(|v| (v.replica_id.0, v.log_end_offset))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_quorum_response::{
        PartitionData as AnswerPartition, ReplicaState, TopicData as AnswerTopic,
    };
    use kafka_protocol::messages::BrokerId;

    #[test]
    fn a_leaders_answer_gives_leader_epoch_high_watermark_and_voters() {
        let answer = DescribeQuorumResponse::default().with_topics(vec![AnswerTopic::default()
            .with_partitions(vec![AnswerPartition::default()
                .with_leader_id(BrokerId(100))
                .with_leader_epoch(7)
                .with_high_watermark(1234)
                .with_current_voters(vec![
                    ReplicaState::default()
                        .with_replica_id(BrokerId(0))
                        .with_log_end_offset(1230),
                    ReplicaState::default()
                        .with_replica_id(BrokerId(100))
                        .with_log_end_offset(1234),
                ])])]);
        assert_eq!(
            state_of(answer),
            Ok(QuorumState {
                leader: 100,
                epoch: 7,
                high_watermark: 1234,
                voters: vec![(0, 1230), (100, 1234)],
            })
        );
    }

    #[test]
    fn a_follower_controllers_refusal_is_an_error_not_a_leader() {
        let answer = DescribeQuorumResponse::default().with_topics(vec![AnswerTopic::default()
            .with_partitions(vec![AnswerPartition::default().with_error_code(6)])]);
        assert_eq!(state_of(answer), Err("Kafka error 6".into()));
    }
}
