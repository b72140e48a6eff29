//! Which controller is active: DescribeQuorum (API 55) over one blocking connection, for
//! `kafka-lab status` and for tests that fault the active controller. rdkafka has no such
//! request, and starting Kafka's own quorum tool costs a JVM per question.
//!
//! A broker forwards DescribeQuorum to the active controller; a controller answers it
//! itself when it leads, and with NOT_LEADER_OR_FOLLOWER when it does not.

use std::time::Duration;

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{DescribeQuorumRequest, DescribeQuorumResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::error::LabError;

/// The metadata log's topic: the one partition DescribeQuorum describes.
const METADATA_TOPIC: &str = "__cluster_metadata";

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
    // v0 is what every KRaft release speaks, and it has what this needs.
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let response = crate::request::call(address, &request, 0, timeout).map_err(fail)?;
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
