//! Requests about partitions: leader elections, reassignments and offsets. Requests are built
//! from plain (topic, partition) lists and answers flattened back into them, so callers never
//! handle kafka-protocol's nested topic/partition structures.

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, ElectLeadersRequest,
    ElectLeadersResponse, ListOffsetsRequest, ListOffsetsResponse,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};

/// Per partition that has any: topic, partition and its eligible leader replicas (KIP-966).
pub type EligibleLeaderReplicas = (String, i32, Vec<i32>);

/// Per partition: topic, partition, Kafka error code (0 for success) and the broker's message,
/// if it gave a non-empty one.
pub type PartitionOutcome = (String, i32, i16, Option<String>);

/// An ongoing reassignment: topic, partition, the full replica list, the replicas being added
/// and those being removed.
pub type OngoingReassignment = (String, i32, Vec<i32>, Vec<i32>, Vec<i32>);

/// ElectLeaders v1 added the election type; v0 elects preferred leaders only.
pub(crate) const ELECT_WITH_TYPE: VersionRange = VersionRange {
    min: 1,
    max: i16::MAX,
};
const ELECTION_PREFERRED: i8 = 0;
const ELECTION_UNCLEAN: i8 = 1;
/// ElectLeaders v1 added the top-level error code.
pub(crate) const ELECT_TOP_LEVEL_ERROR: i16 = 1;

/// Asks as a consumer does; a broker id here would make the broker answer as to a follower.
const CONSUMER_REPLICA_ID: i32 = -1;
/// Kafka's debugging replica id: the broker answers from any replica it holds, not only the
/// ones it leads, and with no isolation level, so "latest" is the replica's log end offset.
const DEBUGGING_REPLICA_ID: i32 = -2;
/// ListOffsets v1 replaced v0's list of old-style offsets with one offset per partition.
pub(crate) const LIST_OFFSETS_SINGLE: VersionRange = VersionRange {
    min: 1,
    max: i16::MAX,
};
/// One partition's latest offset as a broker answered it: topic, partition, error code, offset.
pub type LatestOffset = (String, i32, i16, i64);

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

fn broker_ids(ids: &[i32]) -> Vec<BrokerId> {
    ids.iter().copied().map(BrokerId).collect()
}

/// A message that says nothing (null, or empty as some encoders default it) is `None`.
fn message(m: Option<StrBytes>) -> Option<String> {
    m.filter(|m| !m.is_empty()).map(|m| m.to_string())
}

fn ids(ids: Vec<BrokerId>) -> Vec<i32> {
    ids.into_iter().map(|b| b.0).collect()
}

/// Groups items by topic, topics in order of first appearance and items in their given order,
/// so that what is sent follows what the caller asked.
fn by_topic<'a, T>(items: impl IntoIterator<Item = (&'a str, T)>) -> Vec<(&'a str, Vec<T>)> {
    let mut groups: Vec<(&str, Vec<T>)> = Vec::new();
    for (topic, item) in items {
        match groups.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, list)) => list.push(item),
            None => groups.push((topic, vec![item])),
        }
    }
    groups
}

/// An empty list is sent as an empty list, never as null, which would elect every partition.
pub(crate) fn elect_leaders_request(
    preferred: bool,
    partitions: &[(String, i32)],
    timeout_ms: i32,
) -> ElectLeadersRequest {
    let topics = by_topic(partitions.iter().map(|(t, p)| (t.as_str(), *p)))
        .into_iter()
        .map(|(topic, partitions)| {
            TopicPartitions::default()
                .with_topic(topic_name(topic))
                .with_partitions(partitions)
        })
        .collect();
    ElectLeadersRequest::default()
        .with_election_type(if preferred {
            ELECTION_PREFERRED
        } else {
            ELECTION_UNCLEAN
        })
        .with_topic_partitions(Some(topics))
        .with_timeout_ms(timeout_ms)
}

pub(crate) fn election_outcomes(response: ElectLeadersResponse) -> Vec<PartitionOutcome> {
    response
        .replica_election_results
        .into_iter()
        .flat_map(|t| {
            let topic = t.topic.0.to_string();
            t.partition_result.into_iter().map(move |p| {
                (
                    topic.clone(),
                    p.partition_id,
                    p.error_code,
                    message(p.error_message),
                )
            })
        })
        .collect()
}

/// `None` as the target replicas cancels the partition's ongoing reassignment.
pub(crate) fn alter_reassignments_request(
    moves: &[(String, i32, Option<Vec<i32>>)],
    timeout_ms: i32,
) -> AlterPartitionReassignmentsRequest {
    let topics = by_topic(moves.iter().map(|(t, p, r)| (t.as_str(), (*p, r))))
        .into_iter()
        .map(|(topic, partitions)| {
            ReassignableTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(p, replicas)| {
                            ReassignablePartition::default()
                                .with_partition_index(p)
                                .with_replicas(replicas.as_deref().map(broker_ids))
                        })
                        .collect(),
                )
        })
        .collect();
    AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(timeout_ms)
        .with_topics(topics)
}

pub(crate) fn reassignment_outcomes(
    response: AlterPartitionReassignmentsResponse,
) -> Vec<PartitionOutcome> {
    response
        .responses
        .into_iter()
        .flat_map(|t| {
            let topic = t.name.0.to_string();
            t.partitions.into_iter().map(move |p| {
                (
                    topic.clone(),
                    p.partition_index,
                    p.error_code,
                    message(p.error_message),
                )
            })
        })
        .collect()
}

/// `None` asks for every ongoing reassignment.
pub(crate) fn list_reassignments_request(
    topics: Option<&[(String, Vec<i32>)]>,
    timeout_ms: i32,
) -> ListPartitionReassignmentsRequest {
    let topics = topics.map(|topics| {
        topics
            .iter()
            .map(|(topic, partitions)| {
                ListPartitionReassignmentsTopics::default()
                    .with_name(topic_name(topic))
                    .with_partition_indexes(partitions.clone())
            })
            .collect()
    });
    ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(timeout_ms)
        .with_topics(topics)
}

pub(crate) fn ongoing_reassignments(
    response: ListPartitionReassignmentsResponse,
) -> Vec<OngoingReassignment> {
    response
        .topics
        .into_iter()
        .flat_map(|t| {
            let topic = t.name.0.to_string();
            t.partitions.into_iter().map(move |p| {
                (
                    topic.clone(),
                    p.partition_index,
                    ids(p.replicas),
                    ids(p.adding_replicas),
                    ids(p.removing_replicas),
                )
            })
        })
        .collect()
}

/// The latest offset of many partitions in one request: as a consumer (`own_replicas` false:
/// the leader's high watermark, NOT_LEADER_OR_FOLLOWER from a follower), or of the replicas
/// the broker holds (`own_replicas` true: its log end offset, leader or follower).
pub(crate) fn latest_offsets_request(
    partitions: &[(String, i32)],
    own_replicas: bool,
    timeout_ms: i32,
) -> ListOffsetsRequest {
    let topics = by_topic(partitions.iter().map(|(t, p)| (t.as_str(), *p)))
        .into_iter()
        .map(|(topic, ps)| {
            ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(
                    ps.into_iter()
                        .map(|p| {
                            ListOffsetsPartition::default()
                                .with_partition_index(p)
                                .with_current_leader_epoch(-1)
                                .with_timestamp(-1)
                        })
                        .collect(),
                )
        })
        .collect();
    let replica = if own_replicas {
        DEBUGGING_REPLICA_ID
    } else {
        CONSUMER_REPLICA_ID
    };
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(replica))
        .with_topics(topics)
        .with_timeout_ms(timeout_ms)
}

/// Every partition of the answer, flattened.
pub(crate) fn latest_offsets(response: ListOffsetsResponse) -> Vec<LatestOffset> {
    response
        .topics
        .into_iter()
        .flat_map(|t| {
            let topic = t.name.0.to_string();
            t.partitions
                .into_iter()
                .map(move |p| (topic.clone(), p.partition_index, p.error_code, p.offset))
        })
        .collect()
}

/// DescribeTopicPartitions for `topics`, from `cursor` on (the broker pages its answer).
pub(crate) fn describe_partitions_request(
    topics: &[String],
    cursor: Option<kafka_protocol::messages::describe_topic_partitions_request::Cursor>,
) -> DescribeTopicPartitionsRequest {
    use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
    DescribeTopicPartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|t| TopicRequest::default().with_name(topic_name(t)))
                .collect(),
        )
        .with_cursor(cursor)
}

/// The partitions that list eligible leader replicas, and where the next page starts. A
/// topic or partition answered with an error says nothing and is left out; so is a null or
/// empty ELR (a broker with ELR off sends null).
pub(crate) fn eligible_leader_replicas(
    answer: DescribeTopicPartitionsResponse,
) -> (
    Vec<EligibleLeaderReplicas>,
    Option<kafka_protocol::messages::describe_topic_partitions_request::Cursor>,
) {
    use kafka_protocol::messages::describe_topic_partitions_request::Cursor;
    let mut out = Vec::new();
    for topic in answer.topics {
        let Some(name) = topic.name.filter(|_| topic.error_code == 0) else {
            continue;
        };
        for p in topic.partitions {
            let Some(elr) = p
                .eligible_leader_replicas
                .filter(|e| p.error_code == 0 && !e.is_empty())
            else {
                continue;
            };
            out.push((name.0.to_string(), p.partition_index, ids(elr)));
        }
    }
    let next = answer.next_cursor.map(|c| {
        Cursor::default()
            .with_topic_name(c.topic_name)
            .with_partition_index(c.partition_index)
    });
    (out, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_keeps_the_callers_order() {
        let groups = by_topic([("b", 1), ("a", 0), ("b", 0), ("a", 2)]);
        assert_eq!(groups, vec![("b", vec![1, 0]), ("a", vec![0, 2])]);
    }

    #[test]
    fn an_empty_election_is_never_null() {
        let r = elect_leaders_request(true, &[], 1000);
        assert_eq!(r.topic_partitions, Some(vec![]));
    }
}
