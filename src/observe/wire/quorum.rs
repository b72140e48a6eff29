//! DescribeQuorum (API 55, KIP-595): the metadata log's Raft quorum as its leader sees it.
//! v1 (Kafka 3.3, KIP-836) adds each replica's last fetch and last caught-up times; v2
//! (3.9, KIP-853) adds the controllers' endpoints. A broker forwards the request to the
//! active controller; a controller answers it itself when it leads and refuses it with
//! NOT_LEADER_OR_FOLLOWER when it does not (KIP-919 lets clients address controllers,
//! Kafka 3.7+).

use std::time::Duration;

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::describe_quorum_response::ReplicaState;
use kafka_protocol::messages::{DescribeQuorumRequest, DescribeQuorumResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::model::round::{QuorumAnswer, QuorumDescription, ReplicaProgress};

/// The metadata log: the one topic partition the quorum replicates.
pub(crate) const METADATA_TOPIC: &str = "__cluster_metadata";
/// DescribeQuorum v1 added last fetch and last caught-up times.
pub(crate) const QUORUM_FETCH_TIMES: i16 = 1;
/// A controller that does not lead.
pub(crate) const NOT_LEADER_OR_FOLLOWER: i16 = 6;
/// How Kafka before 3.7 answered a controller's DescribeQuorum when it did not lead.
pub(crate) const INVALID_REQUEST_FROM_FOLLOWER: i16 = 42;
/// DescribeCluster's endpoint type for controllers (KIP-919, DescribeCluster v1+).
pub(crate) const CONTROLLER_ENDPOINTS: i8 = 2;

pub(crate) fn request() -> DescribeQuorumRequest {
    DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])])
}

/// The answer as the observation types hold it. `Err` is a whole-answer Kafka error code
/// other than "not the leader", or an answer without the metadata partition.
pub(crate) fn answer(
    response: DescribeQuorumResponse,
    version: i16,
) -> Result<Result<QuorumAnswer, i16>, String> {
    // Kafka before 3.7 refused a controller's DescribeQuorum with a top-level
    // INVALID_REQUEST when it did not lead; later ones answer NOT_LEADER_OR_FOLLOWER on the
    // partition. Either proves the controller answers.
    if response.error_code == INVALID_REQUEST_FROM_FOLLOWER {
        return Ok(Ok(QuorumAnswer::NotLeader {
            error_code: response.error_code,
        }));
    }
    if response.error_code != 0 {
        return Ok(Err(response.error_code));
    }
    let endpoints = response
        .nodes
        .iter()
        .filter_map(|n| {
            let l = n.listeners.first()?;
            Some((n.node_id.0, format!("{}:{}", l.host, l.port)))
        })
        .collect();
    let Some(p) = response
        .topics
        .into_iter()
        .filter(|t| t.topic_name.0.as_str() == METADATA_TOPIC)
        .flat_map(|t| t.partitions)
        .find(|p| p.partition_index == 0)
    else {
        return Err(format!(
            "the answer does not describe {METADATA_TOPIC} partition 0"
        ));
    };
    match p.error_code {
        0 => {}
        NOT_LEADER_OR_FOLLOWER => {
            return Ok(Ok(QuorumAnswer::NotLeader {
                error_code: p.error_code,
            }))
        }
        code => return Ok(Err(code)),
    }
    let leader = p.leader_id.0;
    // The leader's own entry carries the answer's time on the leader's clock (Kafka sets
    // its fetch and caught-up times to "now"): every other time is measured from it.
    let leader_now = (version >= QUORUM_FETCH_TIMES)
        .then(|| {
            p.current_voters
                .iter()
                .find(|v| v.replica_id.0 == leader)
                .map(|v| v.last_fetch_timestamp)
        })
        .flatten()
        .filter(|t| *t >= 0);
    let progress = |r: &ReplicaState| {
        let ago = |t: i64| {
            let now = leader_now?;
            (t >= 0).then(|| Duration::from_millis(u64::try_from(now - t).unwrap_or(0)))
        };
        ReplicaProgress {
            id: r.replica_id.0,
            log_end_offset: r.log_end_offset,
            last_fetch_ago: ago(r.last_fetch_timestamp),
            last_caught_up_ago: ago(r.last_caught_up_timestamp),
        }
    };
    Ok(Ok(QuorumAnswer::Leader(QuorumDescription {
        leader,
        epoch: p.leader_epoch,
        high_watermark: p.high_watermark,
        voters: p.current_voters.iter().map(progress).collect(),
        observers: p.observers.iter().map(progress).collect(),
        endpoints,
        version,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_measured_on_the_leaders_clock_from_its_own_entry() {
        let got = answer(super::super::tests_guard::describe_quorum(1), 1).unwrap();
        let Ok(QuorumAnswer::Leader(d)) = got else {
            panic!("{got:?}")
        };
        assert_eq!((d.leader, d.epoch, d.high_watermark), (100, 7, 5000));
        let follower = d.voter(0).unwrap();
        assert_eq!(follower.log_end_offset, 4990);
        assert_eq!(follower.last_fetch_ago, Some(Duration::from_millis(300)));
        assert_eq!(
            follower.last_caught_up_ago,
            Some(Duration::from_millis(400))
        );
        let leader = d.voter(100).unwrap();
        assert_eq!(leader.last_fetch_ago, Some(Duration::ZERO));
        assert_eq!(
            d.observer(2).unwrap().last_fetch_ago,
            Some(Duration::from_millis(100))
        );
        assert!(d.endpoints.is_empty(), "endpoints come with v2 only");
    }

    #[test]
    fn v0_has_no_times_and_v2_names_the_controllers_endpoints() {
        let Ok(Ok(QuorumAnswer::Leader(d))) =
            answer(super::super::tests_guard::describe_quorum(0), 0)
        else {
            panic!("v0 leader answer")
        };
        assert!(d.voters.iter().all(|v| v.last_fetch_ago.is_none()));
        let Ok(Ok(QuorumAnswer::Leader(d))) =
            answer(super::super::tests_guard::describe_quorum(2), 2)
        else {
            panic!("v2 leader answer")
        };
        assert_eq!(
            d.endpoints.get(&100).map(String::as_str),
            Some("127.0.0.110:9093")
        );
    }

    #[test]
    fn a_follower_says_it_does_not_lead_and_other_errors_stay_errors() {
        use kafka_protocol::messages::describe_quorum_response as dq;
        let with_code = |code: i16| {
            DescribeQuorumResponse::default().with_topics(vec![dq::TopicData::default()
                .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
                .with_partitions(vec![dq::PartitionData::default().with_error_code(code)])])
        };
        assert_eq!(
            answer(with_code(6), 1).unwrap(),
            Ok(QuorumAnswer::NotLeader { error_code: 6 })
        );
        assert_eq!(answer(with_code(3), 1).unwrap(), Err(3));
        assert_eq!(
            answer(DescribeQuorumResponse::default().with_error_code(58), 1).unwrap(),
            Err(58)
        );
        // Kafka before 3.7: a follower refused the whole request.
        assert_eq!(
            answer(DescribeQuorumResponse::default().with_error_code(42), 1).unwrap(),
            Ok(QuorumAnswer::NotLeader { error_code: 42 })
        );
        assert!(answer(DescribeQuorumResponse::default(), 1).is_err());
    }
}
