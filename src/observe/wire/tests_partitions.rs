//! Produce, leader elections, reassignments and ListOffsets against the fake broker. The same
//! requests against a real Kafka: tests/wire_lab.rs.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey, BrokerId,
    ElectLeadersRequest, ElectLeadersResponse, ListOffsetsRequest, ListOffsetsResponse,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, ProduceRequest,
    ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use super::*;
use crate::model::round::FailureKind;
use kafka_watchdog_test_support::fake_broker::{
    answer, answer_api_versions, frame, ranges_with, FakeBroker, Received, Reply, KAFKA_4_1,
};

const SHORT: Duration = Duration::from_millis(300);
/// Scheduling slack allowed on top of a deadline before a test calls it a hang.
const MARGIN: Duration = Duration::from_millis(400);

fn opts() -> WireOptions {
    WireOptions {
        connect_timeout: SHORT,
        request_timeout: SHORT,
        ..WireOptions::default()
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn name(v: &str) -> TopicName {
    TopicName(s(v))
}

async fn broker<F>(ranges: Vec<(ApiKey, i16, i16)>, rest: F) -> FakeBroker
where
    F: Fn(&Received) -> Reply + Send + Sync + 'static,
{
    FakeBroker::start(move |r| {
        if r.api_key == ApiKey::ApiVersions as i16 {
            answer_api_versions(r, &ranges)
        } else {
            rest(r)
        }
    })
    .await
}

async fn connect(b: &FakeBroker) -> BrokerClient {
    BrokerClient::connect(&b.address, &opts())
        .await
        .expect("connect")
        .client
}

/// The requests the fake broker received after the negotiation.
fn requests(b: &FakeBroker) -> Vec<Received> {
    b.seen()
        .into_iter()
        .filter(|r| r.api_key != ApiKey::ApiVersions as i16)
        .collect()
}

fn assert_within(started: Instant, limit: Duration) {
    let took = started.elapsed();
    assert!(took >= limit, "gave up early after {took:?}");
    assert!(
        took < limit + MARGIN,
        "took {took:?} for a {limit:?} deadline"
    );
}

// ---- produce ----

/// A produce answer for every partition asked for, with the given error, in the layout the
/// request's version calls for.
fn produce_answer(r: &Received, error: i16, message: Option<&str>) -> Reply {
    let request: ProduceRequest = r.decode();
    let responses = request
        .topic_data
        .iter()
        .map(|t| {
            TopicProduceResponse::default()
                .with_name(t.name.clone())
                .with_partition_responses(
                    t.partition_data
                        .iter()
                        .map(|p| {
                            PartitionProduceResponse::default()
                                .with_index(p.index)
                                .with_error_code(error)
                                .with_base_offset(if error == 0 { 42 } else { -1 })
                                .with_log_append_time_ms(-1)
                                .with_log_start_offset(3)
                                .with_error_message(message.map(s))
                        })
                        .collect(),
                )
        })
        .collect();
    answer(r, &ProduceResponse::default().with_responses(responses))
}

fn canary() -> Vec<(Option<Vec<u8>>, Vec<u8>)> {
    vec![
        (Some(b"broker-2".to_vec()), b"canary 1".to_vec()),
        (None, b"canary 2".to_vec()),
    ]
}

#[tokio::test]
async fn produce_writes_one_batch_by_topic_name_and_returns_the_partition_answer() {
    let b = broker(KAFKA_4_1.to_vec(), |r| produce_answer(r, 0, None)).await;
    let mut client = connect(&b).await;
    let before = produce::now_ms();
    let timed = client
        .produce("orders", 2, 1, Duration::from_millis(1500), &canary())
        .await
        .unwrap();
    assert!(timed.latency < SHORT);
    assert_eq!(
        timed.value,
        ProduceAnswer {
            error_code: 0,
            base_offset: 42,
            log_append_time_ms: -1,
            log_start_offset: 3,
            error_message: None,
        }
    );

    let seen = requests(&b);
    assert_eq!(seen.len(), 1);
    // The broker speaks v13, which names topics by id only: v12 carries the name.
    assert_eq!(seen[0].version, 12);
    let request: ProduceRequest = seen[0].decode();
    assert_eq!(request.acks, 1);
    assert_eq!(request.timeout_ms, 1500);
    assert_eq!(request.transactional_id, None);
    assert_eq!(request.topic_data.len(), 1);
    let topic = &request.topic_data[0];
    assert_eq!(topic.name.0.as_str(), "orders");
    assert_eq!(topic.partition_data.len(), 1);
    assert_eq!(topic.partition_data[0].index, 2);

    let mut batch = topic.partition_data[0].records.clone().unwrap();
    let info = RecordBatchDecoder::decode_batch_info(&mut batch.clone()).unwrap();
    assert_eq!(info.len(), 1, "exactly one batch: {info:?}");
    assert_eq!(info[0].version, 2);
    assert_eq!(info[0].compression, Compression::None);
    assert_eq!(
        (
            info[0].producer_id,
            info[0].producer_epoch,
            info[0].base_sequence
        ),
        (-1, -1, -1)
    );
    let set = RecordBatchDecoder::decode(&mut batch).unwrap();
    let keys: Vec<_> = set.records.iter().map(|r| r.key.clone()).collect();
    assert_eq!(keys, vec![Some(Bytes::from_static(b"broker-2")), None]);
    let values: Vec<_> = set
        .records
        .iter()
        .map(|r| r.value.clone().unwrap())
        .collect();
    assert_eq!(values, vec!["canary 1", "canary 2"]);
    let after = produce::now_ms();
    assert!(set
        .records
        .iter()
        .all(|r| r.timestamp >= before && r.timestamp <= after));
}

#[tokio::test]
async fn produce_partition_errors_are_answers_for_the_caller_to_classify() {
    for (code, message) in [
        (6, Some("this broker is not the leader")),
        (7, None),
        (19, Some("ISR below min.insync.replicas")),
    ] {
        let b = broker(KAFKA_4_1.to_vec(), move |r| {
            produce_answer(r, code, message)
        })
        .await;
        let mut client = connect(&b).await;
        let answer = client
            .produce("orders", 0, -1, Duration::from_millis(100), &canary())
            .await
            .unwrap()
            .value;
        assert_eq!(answer.error_code, code);
        assert_eq!(answer.base_offset, -1);
        assert_eq!(answer.error_message.as_deref(), message);
        assert!(client.is_usable());
        let request: ProduceRequest = requests(&b)[0].decode();
        assert_eq!(request.acks, -1);
    }
}

#[tokio::test]
async fn produce_fields_follow_the_negotiated_version() {
    // (broker max, log start offset, message): v5 added the first, v8 the second.
    for (max, log_start, message) in [
        (3, -1, None),
        (5, 3, None),
        (8, 3, Some("late")),
        (9, 3, Some("late")),
    ] {
        let b = broker(ranges_with(&[(ApiKey::Produce, 3, max)]), |r| {
            produce_answer(r, 7, Some("late"))
        })
        .await;
        let mut client = connect(&b).await;
        let answer = client
            .produce("orders", 0, 1, Duration::from_millis(100), &canary())
            .await
            .unwrap()
            .value;
        assert_eq!(b.seen_versions(ApiKey::Produce), vec![max]);
        assert_eq!(answer.log_start_offset, log_start, "v{max}");
        assert_eq!(answer.error_message.as_deref(), message, "v{max}");
    }
}

#[tokio::test]
async fn produce_without_a_named_version_is_unsupported() {
    for ranges in [
        // Topic ids only: nothing this client can name a topic in.
        ranges_with(&[(ApiKey::Produce, 13, 13)]),
        // Magic v0/v1 message sets only (before Kafka 0.11).
        ranges_with(&[(ApiKey::Produce, 0, 2)]),
        ranges_with(&[(ApiKey::Produce, 0, -1)]),
    ] {
        let b = broker(ranges, |_| Reply::Close).await;
        let mut client = connect(&b).await;
        let err = client
            .produce("orders", 0, 1, SHORT, &canary())
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                WireError::Unsupported {
                    phase: Phase::Produce
                }
            ),
            "{err}"
        );
        assert!(requests(&b).is_empty());
        assert!(client.is_usable());
    }
}

#[tokio::test]
async fn acks_zero_and_empty_batches_are_refused_before_sending() {
    let b = broker(KAFKA_4_1.to_vec(), |r| produce_answer(r, 0, None)).await;
    let mut client = connect(&b).await;
    let err = client
        .produce("orders", 0, 0, SHORT, &canary())
        .await
        .unwrap_err();
    assert!(matches!(err, WireError::InvalidRequest { .. }), "{err}");
    assert_eq!(err.phase(), Some(Phase::Produce));
    assert_eq!(err.kind(), FailureKind::Protocol);
    assert!(err.to_string().contains("acks=0"), "{err}");

    let err = client
        .produce("orders", 0, 1, SHORT, &[])
        .await
        .unwrap_err();
    assert!(matches!(err, WireError::InvalidRequest { .. }), "{err}");

    assert!(requests(&b).is_empty());
    assert!(client.is_usable());
    client
        .produce("orders", 0, 1, SHORT, &canary())
        .await
        .unwrap();
}

#[tokio::test]
async fn produce_waits_for_the_broker_timeout_on_top_of_the_request_timeout() {
    // The answer comes after the request timeout but within timeout + request timeout, as
    // an acks=all write does when the broker waits for slow followers.
    let b = broker(KAFKA_4_1.to_vec(), |r| {
        let Reply::Raw(bytes) = produce_answer(r, 0, None) else {
            unreachable!()
        };
        Reply::Delayed(SHORT + Duration::from_millis(150), bytes)
    })
    .await;
    let mut client = connect(&b).await;
    let timed = client
        .produce("orders", 0, -1, Duration::from_millis(400), &canary())
        .await
        .unwrap();
    assert!(timed.latency >= SHORT + Duration::from_millis(150));
    assert_eq!(timed.value.error_code, 0);
}

#[tokio::test]
async fn produce_to_a_frozen_broker_times_out_after_both_waits() {
    let b = broker(KAFKA_4_1.to_vec(), |_| Reply::Hang).await;
    let mut client = connect(&b).await;
    let started = Instant::now();
    let err = client
        .produce("orders", 0, 1, Duration::from_millis(200), &canary())
        .await
        .unwrap_err();
    assert_within(started, Duration::from_millis(500));
    assert_eq!(err.kind(), FailureKind::Timeout);
    assert_eq!(err.to_string(), "no answer within 500ms during produce");
    assert!(!client.is_usable());
}

#[tokio::test]
async fn produce_answer_without_the_partition_is_a_protocol_error() {
    let b = broker(KAFKA_4_1.to_vec(), |r| {
        let other = TopicProduceResponse::default()
            .with_name(name("orders"))
            .with_partition_responses(vec![PartitionProduceResponse::default().with_index(1)]);
        let renamed = TopicProduceResponse::default()
            .with_name(name("other"))
            .with_partition_responses(vec![PartitionProduceResponse::default().with_index(0)]);
        answer(
            r,
            &ProduceResponse::default().with_responses(vec![other, renamed]),
        )
    })
    .await;
    let mut client = connect(&b).await;
    let err = client
        .produce("orders", 0, 1, SHORT, &canary())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), FailureKind::Protocol);
    assert!(
        err.to_string().contains("lacks partition orders-0"),
        "{err}"
    );
    // The answer was read whole: the connection is still in step.
    assert!(client.is_usable());
}

#[tokio::test]
async fn hostile_produce_answer_is_refused_before_decoding() {
    // A v12 body whose topic array claims 2^32-2 entries in five bytes.
    let b = broker(KAFKA_4_1.to_vec(), |r| {
        let body = [0xff, 0xff, 0xff, 0xff, 0x0f];
        let mut bytes = Vec::new();
        bytes.extend(((4 + 1 + body.len()) as i32).to_be_bytes());
        bytes.extend(r.correlation_id.to_be_bytes());
        bytes.push(0); // flexible response header: no tagged fields
        bytes.extend(body);
        Reply::Raw(bytes)
    })
    .await;
    let mut client = connect(&b).await;
    let err = client
        .produce("orders", 0, 1, SHORT, &canary())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), FailureKind::Protocol);
    assert!(
        err.to_string().contains("claims 4294967294 elements"),
        "{err}"
    );
}

// ---- elect leaders ----

fn election_answer(r: &Received, top_level: i16) -> Reply {
    let request: ElectLeadersRequest = r.decode();
    let results = request
        .topic_partitions
        .unwrap_or_default()
        .iter()
        .map(|t| {
            ReplicaElectionResult::default()
                .with_topic(t.topic.clone())
                .with_partition_result(
                    t.partitions
                        .iter()
                        .map(|&p| {
                            let result = PartitionResult::default().with_partition_id(p);
                            if p == 0 {
                                result
                                    .with_error_code(84)
                                    .with_error_message(Some(s("already the preferred leader")))
                            } else {
                                result
                            }
                        })
                        .collect(),
                )
        })
        .collect();
    answer(
        r,
        &ElectLeadersResponse::default()
            .with_error_code(if r.version >= 1 { top_level } else { 0 })
            .with_replica_election_results(results),
    )
}

fn partitions_of(list: &[(&str, i32)]) -> Vec<(String, i32)> {
    list.iter().map(|(t, p)| (t.to_string(), *p)).collect()
}

#[tokio::test]
async fn elect_leaders_groups_by_topic_and_flattens_the_answer() {
    let b = broker(KAFKA_4_1.to_vec(), |r| election_answer(r, 0)).await;
    let mut client = connect(&b).await;
    let asked = partitions_of(&[("orders", 1), ("audit", 0), ("orders", 0)]);
    let timed = client
        .elect_leaders(false, &asked, Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(
        timed.value,
        vec![
            ("orders".to_owned(), 1, 0, None),
            (
                "orders".to_owned(),
                0,
                84,
                Some("already the preferred leader".to_owned())
            ),
            (
                "audit".to_owned(),
                0,
                84,
                Some("already the preferred leader".to_owned())
            ),
        ]
    );
    let seen = requests(&b);
    assert_eq!(seen[0].version, 2);
    let request: ElectLeadersRequest = seen[0].decode();
    assert_eq!(request.election_type, 1);
    assert_eq!(request.timeout_ms, 2000);
    let topics: Vec<_> = request
        .topic_partitions
        .unwrap()
        .into_iter()
        .map(|t| (t.topic.0.to_string(), t.partitions))
        .collect();
    assert_eq!(
        topics,
        vec![
            ("orders".to_owned(), vec![1, 0]),
            ("audit".to_owned(), vec![0])
        ]
    );
}

#[tokio::test]
async fn elect_leaders_top_level_error_is_a_kafka_error() {
    let b = broker(KAFKA_4_1.to_vec(), |r| election_answer(r, 31)).await;
    let mut client = connect(&b).await;
    let err = client
        .elect_leaders(true, &partitions_of(&[("orders", 0)]), SHORT)
        .await
        .unwrap_err();
    assert_eq!(err.kafka_code(), Some(31));
    assert_eq!(err.phase(), Some(Phase::ElectLeaders));
    assert!(client.is_usable());
}

#[tokio::test]
async fn elect_leaders_v0_is_preferred_only() {
    let b = broker(ranges_with(&[(ApiKey::ElectLeaders, 0, 0)]), |r| {
        election_answer(r, 0)
    })
    .await;
    let mut client = connect(&b).await;
    let err = client
        .elect_leaders(false, &partitions_of(&[("orders", 1)]), SHORT)
        .await
        .unwrap_err();
    assert!(matches!(err, WireError::Unsupported { .. }), "{err}");
    assert!(requests(&b).is_empty());

    let outcomes = client
        .elect_leaders(true, &partitions_of(&[("orders", 1)]), SHORT)
        .await
        .unwrap()
        .value;
    assert_eq!(outcomes, vec![("orders".to_owned(), 1, 0, None)]);
    assert_eq!(b.seen_versions(ApiKey::ElectLeaders), vec![0]);
    let request: ElectLeadersRequest = requests(&b)[0].decode();
    assert_eq!(request.election_type, 0);
}

#[tokio::test]
async fn elect_leaders_waits_for_its_timeout_on_top_of_the_request_timeout() {
    let b = broker(KAFKA_4_1.to_vec(), |_| Reply::Hang).await;
    let mut client = connect(&b).await;
    let started = Instant::now();
    let err = client
        .elect_leaders(
            true,
            &partitions_of(&[("orders", 1)]),
            Duration::from_millis(100),
        )
        .await
        .unwrap_err();
    assert_within(started, Duration::from_millis(400));
    assert_eq!(err.kind(), FailureKind::Timeout);
    assert_eq!(err.phase(), Some(Phase::ElectLeaders));
}

// ---- reassignments ----

#[tokio::test]
async fn alter_reassignments_sends_targets_and_cancellations() {
    let b = broker(KAFKA_4_1.to_vec(), |r| {
        let request: AlterPartitionReassignmentsRequest = r.decode();
        let responses = request
            .topics
            .iter()
            .map(|t| {
                ReassignableTopicResponse::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                let result = ReassignablePartitionResponse::default()
                                    .with_partition_index(p.partition_index);
                                match p.replicas {
                                    // Cancelling what is not running.
                                    None => result
                                        .with_error_code(85)
                                        .with_error_message(Some(s("none in progress"))),
                                    Some(_) => result,
                                }
                            })
                            .collect(),
                    )
            })
            .collect();
        answer(
            r,
            &AlterPartitionReassignmentsResponse::default().with_responses(responses),
        )
    })
    .await;
    let mut client = connect(&b).await;
    let moves = vec![
        ("orders".to_owned(), 0, Some(vec![2, 3, 4])),
        ("orders".to_owned(), 1, None),
    ];
    let outcomes = client
        .alter_partition_reassignments(&moves, Duration::from_secs(5))
        .await
        .unwrap()
        .value;
    assert_eq!(
        outcomes,
        vec![
            ("orders".to_owned(), 0, 0, None),
            (
                "orders".to_owned(),
                1,
                85,
                Some("none in progress".to_owned())
            ),
        ]
    );
    let seen = requests(&b);
    assert_eq!(seen[0].version, 1);
    let request: AlterPartitionReassignmentsRequest = seen[0].decode();
    assert_eq!(request.timeout_ms, 5000);
    let partitions = &request.topics[0].partitions;
    assert_eq!(
        partitions[0].replicas,
        Some(vec![BrokerId(2), BrokerId(3), BrokerId(4)])
    );
    assert_eq!(partitions[1].replicas, None);
}

#[tokio::test]
async fn reassignment_request_errors_are_kafka_errors() {
    let b = broker(KAFKA_4_1.to_vec(), |r| {
        if r.api_key == ApiKey::AlterPartitionReassignments as i16 {
            answer(
                r,
                &AlterPartitionReassignmentsResponse::default()
                    .with_error_code(41)
                    .with_error_message(Some(s("not the controller"))),
            )
        } else {
            answer(
                r,
                &ListPartitionReassignmentsResponse::default().with_error_code(41),
            )
        }
    })
    .await;
    let mut client = connect(&b).await;
    let err = client
        .alter_partition_reassignments(&[("orders".to_owned(), 0, None)], SHORT)
        .await
        .unwrap_err();
    assert_eq!(err.kafka_code(), Some(41));
    assert_eq!(
        err.to_string(),
        "alter_partition_reassignments: Kafka error 41 NOT_CONTROLLER: not the controller"
    );
    let err = client
        .list_partition_reassignments(None, SHORT)
        .await
        .unwrap_err();
    assert_eq!(err.kafka_code(), Some(41));
    assert_eq!(err.phase(), Some(Phase::ListPartitionReassignments));
    assert!(client.is_usable());
}

#[tokio::test]
async fn list_reassignments_asks_for_all_or_the_named_partitions() {
    let b = broker(KAFKA_4_1.to_vec(), |r| {
        let ongoing = OngoingTopicReassignment::default()
            .with_name(name("orders"))
            .with_partitions(vec![OngoingPartitionReassignment::default()
                .with_partition_index(2)
                .with_replicas(vec![BrokerId(1), BrokerId(2), BrokerId(4)])
                .with_adding_replicas(vec![BrokerId(4)])
                .with_removing_replicas(vec![BrokerId(3)])]);
        answer(
            r,
            &ListPartitionReassignmentsResponse::default().with_topics(vec![ongoing]),
        )
    })
    .await;
    let mut client = connect(&b).await;
    let all = client
        .list_partition_reassignments(None, Duration::from_secs(1))
        .await
        .unwrap()
        .value;
    assert_eq!(
        all,
        vec![("orders".to_owned(), 2, vec![1, 2, 4], vec![4], vec![3])]
    );
    let named = vec![("orders".to_owned(), vec![2, 5])];
    client
        .list_partition_reassignments(Some(&named), Duration::from_secs(1))
        .await
        .unwrap();

    let seen = requests(&b);
    let first: ListPartitionReassignmentsRequest = seen[0].decode();
    assert_eq!(first.topics, None);
    assert_eq!(first.timeout_ms, 1000);
    let second: ListPartitionReassignmentsRequest = seen[1].decode();
    let topics = second.topics.unwrap();
    assert_eq!(topics[0].name.0.as_str(), "orders");
    assert_eq!(topics[0].partition_indexes, vec![2, 5]);
}

// ---- list offsets ----

/// Answers as a broker that leads the partition at epoch 7 does.
fn offsets_answer(r: &Received) -> Reply {
    let request: ListOffsetsRequest = r.decode();
    let topics = request
        .topics
        .iter()
        .map(|t| {
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            let asked = p.current_leader_epoch;
                            let error = match asked {
                                -1 | 7 => 0,
                                e if e < 7 => 74,
                                _ => 75,
                            };
                            let offset = match (error, p.timestamp) {
                                (0, -2) => 10,
                                (0, _) => 1234,
                                _ => -1,
                            };
                            ListOffsetsPartitionResponse::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(error)
                                .with_timestamp(-1)
                                .with_offset(offset)
                                .with_leader_epoch(if r.version >= 4 && error == 0 {
                                    7
                                } else {
                                    -1
                                })
                        })
                        .collect(),
                )
        })
        .collect();
    answer(r, &ListOffsetsResponse::default().with_topics(topics))
}

#[tokio::test]
async fn latest_offsets_ask_many_partitions_at_once_as_consumer_or_of_own_replicas() {
    let b = broker(KAFKA_4_1.to_vec(), offsets_answer).await;
    let mut client = connect(&b).await;
    let asked = vec![
        ("orders".to_string(), 0),
        ("audit".to_string(), 4),
        ("orders".to_string(), 2),
    ];
    let own = client.latest_offsets(&asked, true).await.unwrap();
    assert_eq!(
        own.value,
        vec![
            ("orders".to_string(), 0, 0, 1234),
            ("orders".to_string(), 2, 0, 1234),
            ("audit".to_string(), 4, 0, 1234),
        ]
    );
    client.latest_offsets(&asked[..1], false).await.unwrap();
    let seen = requests(&b);
    let request: ListOffsetsRequest = seen[0].decode();
    assert_eq!(request.replica_id, BrokerId(-2), "any replica it holds");
    assert_eq!(request.topics.len(), 2, "one entry per topic");
    assert_eq!(request.topics[0].partitions.len(), 2);
    assert!(request.topics[0]
        .partitions
        .iter()
        .all(|p| p.timestamp == -1));
    let request: ListOffsetsRequest = seen[1].decode();
    assert_eq!(
        request.replica_id,
        BrokerId(-1),
        "as a consumer: the high watermark"
    );
}

#[tokio::test]
async fn latest_offsets_use_the_request_timeout() {
    let b = broker(KAFKA_4_1.to_vec(), |_| Reply::Hang).await;
    let mut client = connect(&b).await;
    let started = Instant::now();
    let err = client
        .latest_offsets(&[("orders".to_string(), 0)], false)
        .await
        .unwrap_err();
    assert_within(started, SHORT);
    assert_eq!(
        err.to_string(),
        "no answer within 300ms during list_offsets"
    );
}

#[tokio::test]
async fn answers_with_a_foreign_correlation_id_abandon_the_connection() {
    let b = broker(KAFKA_4_1.to_vec(), |r| {
        Reply::Raw(frame(
            r.correlation_id + 1,
            r.version,
            &ListPartitionReassignmentsResponse::default(),
        ))
    })
    .await;
    let mut client = connect(&b).await;
    let err = client
        .list_partition_reassignments(None, SHORT)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), FailureKind::Protocol);
    assert!(!client.is_usable());
}

// ---- eligible leader replicas ----

/// Two pages: the broker's cursor is sent back until it sends none. Partitions with an error,
/// a null ELR (ELR off) or an empty one, and topics with an error, are left out.
#[tokio::test]
async fn eligible_leader_replicas_follow_the_pages_and_keep_only_real_elrs() {
    use kafka_protocol::messages::describe_topic_partitions_response::{
        Cursor, DescribeTopicPartitionsResponsePartition as Partition,
        DescribeTopicPartitionsResponseTopic as Topic,
    };
    use kafka_protocol::messages::{
        DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
    };
    let mut ranges = KAFKA_4_1.to_vec();
    ranges.push((ApiKey::DescribeTopicPartitions, 0, 0));
    let b = broker(ranges, |r| {
        let request: DescribeTopicPartitionsRequest = r.decode();
        let elr = |index: i32, elr: Option<Vec<i32>>, error: i16| {
            Partition::default()
                .with_partition_index(index)
                .with_error_code(error)
                .with_eligible_leader_replicas(elr.map(|e| e.into_iter().map(BrokerId).collect()))
        };
        let answer_body = match request.cursor {
            None => DescribeTopicPartitionsResponse::default()
                .with_topics(vec![
                    Topic::default()
                        .with_name(Some(name("orders")))
                        .with_partitions(vec![
                            elr(0, Some(vec![2, 3]), 0),
                            elr(1, None, 0),
                            elr(2, Some(vec![]), 0),
                            elr(3, Some(vec![1]), 6),
                        ]),
                    Topic::default()
                        .with_name(Some(name("gone")))
                        .with_error_code(3)
                        .with_partitions(vec![elr(0, Some(vec![1]), 0)]),
                ])
                .with_next_cursor(Some(
                    Cursor::default()
                        .with_topic_name(name("orders"))
                        .with_partition_index(4),
                )),
            Some(c) => {
                assert_eq!((c.topic_name.0.as_str(), c.partition_index), ("orders", 4));
                DescribeTopicPartitionsResponse::default().with_topics(vec![Topic::default()
                    .with_name(Some(name("orders")))
                    .with_partitions(vec![elr(4, Some(vec![1]), 0)])])
            }
        };
        answer(r, &answer_body)
    })
    .await;
    let mut client = connect(&b).await;
    let topics = vec!["orders".to_owned(), "gone".to_owned()];
    let found = client
        .eligible_leader_replicas(&topics, 8)
        .await
        .unwrap()
        .unwrap()
        .value;
    assert_eq!(
        found,
        vec![
            ("orders".to_owned(), 0, vec![2, 3]),
            ("orders".to_owned(), 4, vec![1])
        ]
    );
    let asked = requests(&b);
    assert_eq!(asked.len(), 2, "one request per page");
    let first: DescribeTopicPartitionsRequest = asked[0].decode();
    let names: Vec<&str> = first.topics.iter().map(|t| t.name.0.as_str()).collect();
    assert_eq!(names, ["orders", "gone"]);

    // A page limit stops a broker that keeps sending cursors.
    let mut client = connect(&b).await;
    client.eligible_leader_replicas(&topics, 1).await.unwrap();
    assert_eq!(requests(&b).len(), 3);
}

#[tokio::test]
async fn eligible_leader_replicas_are_not_asked_of_a_broker_without_the_api() {
    let b = broker(KAFKA_4_1.to_vec(), |_| Reply::Close).await;
    let mut client = connect(&b).await;
    let none = client
        .eligible_leader_replicas(&["orders".to_owned()], 8)
        .await
        .unwrap();
    assert!(none.is_none());
    assert!(requests(&b).is_empty());
}
