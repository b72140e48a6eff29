//! Conversations with the in-process fake broker.

use std::time::{Duration, Instant};

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeClusterRequest, DescribeClusterResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::*;
use crate::model::round::{BrokerEndpoint, FailureKind, NO_LEADER};
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

/// A broker with the given ranges that answers ApiVersions and hands every other request to
/// `rest`.
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

fn sample_metadata() -> MetadataResponse {
    let partition = |index: i32, leader: i32, epoch: i32, offline: Vec<i32>, error: i16| {
        MetadataResponsePartition::default()
            .with_partition_index(index)
            .with_error_code(error)
            .with_leader_id(BrokerId(leader))
            .with_leader_epoch(epoch)
            .with_replica_nodes(vec![BrokerId(1), BrokerId(2), BrokerId(3)])
            .with_isr_nodes(vec![BrokerId(1), BrokerId(2)])
            .with_offline_replicas(offline.into_iter().map(BrokerId).collect())
    };
    MetadataResponse::default()
        .with_cluster_id(Some(s("lab-cluster")))
        .with_controller_id(BrokerId(-1))
        .with_brokers(vec![
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(1))
                .with_host(s("127.0.0.11"))
                .with_port(9092)
                .with_rack(Some(s("r1"))),
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(2))
                .with_host(s("127.0.0.12"))
                .with_port(9092),
        ])
        .with_topics(vec![
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(s("orders"))))
                .with_partitions(vec![
                    // Out of order on purpose: the view sorts by partition.
                    partition(1, -1, 8, vec![3], 5),
                    partition(0, 2, 7, vec![], 0),
                ]),
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(s("__consumer_offsets"))))
                .with_is_internal(true)
                .with_partitions(vec![partition(0, 1, 3, vec![3], 9)]),
        ])
}

// ---- negotiation ----

#[tokio::test]
async fn negotiates_the_highest_common_versions() {
    let b = broker(ranges_with(&[(ApiKey::Metadata, 0, 12)]), |_| Reply::Close).await;
    let connected = BrokerClient::connect(&b.address, &opts()).await.unwrap();
    let v = connected.client.versions();
    assert_eq!(v.api_versions_version(), 4);
    assert_eq!(v.negotiated(ApiKey::Metadata), Some(12));
    assert_eq!(v.negotiated(ApiKey::DescribeCluster), Some(2));
    assert_eq!(v.negotiated(ApiKey::DescribeConfigs), Some(4));
    assert_eq!(v.negotiated(ApiKey::Fetch), None);
    assert_eq!(v.broker_range(ApiKey::Metadata as i16).unwrap().max, 12);
    assert_eq!(b.seen_versions(ApiKey::ApiVersions), vec![4]);
    assert!(connected.api_versions_latency < SHORT);
    assert!(connected.connect_latency < SHORT);
}

#[tokio::test]
async fn downgrades_api_versions_after_unsupported_version() {
    let b = broker(ranges_with(&[(ApiKey::ApiVersions, 0, 2)]), move |r| {
        answer(r, &sample_metadata())
    })
    .await;
    let mut client = connect(&b).await;
    assert_eq!(client.versions().api_versions_version(), 2);
    assert_eq!(b.seen_versions(ApiKey::ApiVersions), vec![4, 2]);
    assert_eq!(client.versions().negotiated(ApiKey::Metadata), Some(13));
    // The connection stays in step after the retry.
    let view = client.metadata(None).await.unwrap().value;
    assert_eq!(view.version, 13);
}

#[tokio::test]
async fn a_broker_that_rejects_its_own_version_is_a_protocol_error() {
    // Claims ApiVersions up to v4 yet answers v4 with UNSUPPORTED_VERSION.
    let b = FakeBroker::start(|r| {
        answer_api_versions(
            &Received {
                version: 9,
                ..r.clone()
            },
            KAFKA_4_1,
        )
    })
    .await;
    let err = BrokerClient::connect(&b.address, &opts())
        .await
        .err()
        .unwrap();
    assert_eq!(err.kind(), FailureKind::Protocol, "{err}");
    assert_eq!(err.phase(), Some(Phase::ApiVersions));
    assert_eq!(b.seen_versions(ApiKey::ApiVersions), vec![4]);
}

#[tokio::test]
async fn api_versions_error_is_a_kafka_error() {
    let b = FakeBroker::start(|r| {
        answer(
            r,
            &kafka_protocol::messages::ApiVersionsResponse::default().with_error_code(58),
        )
    })
    .await;
    let err = BrokerClient::connect(&b.address, &opts())
        .await
        .err()
        .unwrap();
    assert_eq!(err.kind(), FailureKind::KafkaError);
    assert_eq!(err.kafka_code(), Some(58));
    assert!(
        err.to_string().contains("SASL_AUTHENTICATION_FAILED"),
        "{err}"
    );
}

// ---- metadata ----

#[tokio::test]
async fn metadata_converts_leaders_epochs_and_offline_replicas() {
    let b = broker(KAFKA_4_1.to_vec(), |r| answer(r, &sample_metadata())).await;
    let mut client = connect(&b).await;
    let timed = client.metadata(None).await.unwrap();
    let view = timed.value;
    assert!(timed.latency < SHORT);
    assert_eq!(view.version, 13);
    assert!(view.has_leader_epochs && view.has_offline_replicas);
    assert_eq!(view.cluster_id.as_deref(), Some("lab-cluster"));
    assert_eq!(view.controller_id, None);
    assert_eq!(
        view.brokers,
        vec![
            BrokerEndpoint {
                id: 1,
                host: "127.0.0.11".into(),
                port: 9092,
                rack: Some("r1".into())
            },
            BrokerEndpoint {
                id: 2,
                host: "127.0.0.12".into(),
                port: 9092,
                rack: None
            },
        ]
    );
    let orders = &view.topics["orders"];
    assert!(!orders.is_internal);
    let p: Vec<_> = orders.partitions.iter().map(|p| p.partition).collect();
    assert_eq!(p, vec![0, 1]);
    let offline = &orders.partitions[1];
    assert_eq!(offline.leader, NO_LEADER);
    assert_eq!(offline.error_code, 5);
    assert_eq!(offline.leader_epoch, 8);
    assert_eq!(offline.offline_replicas.as_slice(), [3]);
    assert_eq!(offline.replicas.as_slice(), [1, 2, 3]);
    assert_eq!(offline.isr.as_slice(), [1, 2]);
    let offsets = &view.topics["__consumer_offsets"];
    assert!(offsets.is_internal);
    assert_eq!(offsets.partitions[0].error_code, 9);

    // All topics are asked for with a null list, and never auto-created.
    let request: MetadataRequest = b.seen().last().unwrap().decode();
    assert_eq!(request.topics, None);
    assert!(!request.allow_auto_topic_creation);
}

#[tokio::test]
async fn metadata_fields_follow_the_negotiated_version() {
    for (max, epochs, offline) in [(4, false, false), (6, false, true), (7, true, true)] {
        let b = broker(ranges_with(&[(ApiKey::Metadata, 0, max)]), |r| {
            answer(r, &sample_metadata())
        })
        .await;
        let mut client = connect(&b).await;
        let view = client.metadata(None).await.unwrap().value;
        assert_eq!(view.version, max);
        assert_eq!(view.has_leader_epochs, epochs, "v{max}");
        assert_eq!(view.has_offline_replicas, offline, "v{max}");
        let p = &view.topics["orders"].partitions[1];
        assert_eq!(p.leader_epoch, if epochs { 8 } else { -1 }, "v{max}");
        let expected: Vec<i32> = if offline { vec![3] } else { vec![] };
        assert_eq!(p.offline_replicas.to_vec(), expected, "v{max}");
        assert_eq!(p.leader, NO_LEADER);
    }
}

#[tokio::test]
async fn metadata_v0_asks_for_all_topics_with_an_empty_list() {
    let b = broker(ranges_with(&[(ApiKey::Metadata, 0, 0)]), |r| {
        answer(r, &sample_metadata())
    })
    .await;
    let mut client = connect(&b).await;
    let view = client.metadata(None).await.unwrap().value;
    assert_eq!(view.version, 0);
    assert_eq!(view.cluster_id, None);
    assert_eq!(view.topics.len(), 2);
    let request: MetadataRequest = b.seen().last().unwrap().decode();
    assert_eq!(request.topics, Some(vec![]));
}

const TOPIC_ID: &str = "07070707-0707-0707-0707-070707070707";

#[tokio::test]
async fn metadata_for_named_topics_keeps_topic_errors_and_id_only_topics() {
    let b = broker(KAFKA_4_1.to_vec(), |r| {
        let id = kafka_protocol::messages::metadata_response::MetadataResponseTopic::default()
            .with_name(None)
            .with_topic_id(TOPIC_ID.parse().unwrap());
        let missing = MetadataResponseTopic::default()
            .with_name(Some(TopicName(s("missing"))))
            .with_error_code(3);
        answer(
            r,
            &MetadataResponse::default()
                .with_controller_id(BrokerId(2))
                .with_topics(vec![id, missing]),
        )
    })
    .await;
    let mut client = connect(&b).await;
    let names = vec!["missing".to_owned(), "orders".to_owned()];
    let view = client.metadata(Some(&names)).await.unwrap().value;
    assert_eq!(view.controller_id, Some(2));
    assert_eq!(view.topics["missing"].error_code, 3);
    assert_eq!(view.topics[TOPIC_ID].name, TOPIC_ID);
    let request: MetadataRequest = b.seen().last().unwrap().decode();
    let asked: Vec<String> = request
        .topics
        .unwrap()
        .into_iter()
        .map(|t| t.name.unwrap().0.to_string())
        .collect();
    assert_eq!(asked, names);
}

#[tokio::test]
async fn metadata_top_level_error_is_a_kafka_error() {
    let b = broker(KAFKA_4_1.to_vec(), |r| {
        answer(r, &MetadataResponse::default().with_error_code(129))
    })
    .await;
    let mut client = connect(&b).await;
    let err = client.metadata(None).await.unwrap_err();
    assert_eq!(err.kind(), FailureKind::KafkaError);
    assert_eq!(err.kafka_code(), Some(129));
    assert!(err.to_string().contains("REBOOTSTRAP_REQUIRED"), "{err}");
    // A Kafka error leaves the connection usable.
    assert!(client.is_usable());
}

// ---- describe cluster ----

fn cluster(fenced_3: bool) -> DescribeClusterResponse {
    let b = |id: i32, fenced: bool| {
        DescribeClusterBroker::default()
            .with_broker_id(BrokerId(id))
            .with_host(s(&format!("127.0.0.1{id}")))
            .with_port(9092)
            .with_is_fenced(fenced)
    };
    DescribeClusterResponse::default()
        .with_cluster_id(s("lab-cluster"))
        .with_controller_id(BrokerId(1))
        .with_brokers(vec![b(1, false), b(2, false), b(3, fenced_3)])
}

#[tokio::test]
async fn describe_cluster_v2_reports_fenced_brokers() {
    let b = broker(KAFKA_4_1.to_vec(), |r| answer(r, &cluster(true))).await;
    let mut client = connect(&b).await;
    let d = client.describe_cluster().await.unwrap().unwrap().value;
    assert!(d.includes_fenced);
    assert_eq!(d.cluster_id, "lab-cluster");
    assert_eq!(d.controller_id, 1);
    let fenced: Vec<_> = d
        .brokers
        .iter()
        .map(|b| (b.endpoint.id, b.fenced))
        .collect();
    assert_eq!(fenced, vec![(1, false), (2, false), (3, true)]);
    assert_eq!(d.brokers[2].endpoint.address(), "127.0.0.13:9092");
    let request: DescribeClusterRequest = b.seen().last().unwrap().decode();
    assert_eq!(b.seen().last().unwrap().version, 2);
    assert!(request.include_fenced_brokers);
}

#[tokio::test]
async fn describe_cluster_before_v2_does_not_claim_fenced_brokers() {
    // Below v2 the field does not exist on the wire (the crate refuses to encode it).
    let b = broker(ranges_with(&[(ApiKey::DescribeCluster, 0, 1)]), |r| {
        answer(r, &cluster(r.version >= 2))
    })
    .await;
    let mut client = connect(&b).await;
    let d = client.describe_cluster().await.unwrap().unwrap().value;
    assert!(!d.includes_fenced);
    assert!(d.brokers.iter().all(|b| !b.fenced));
    let request: DescribeClusterRequest = b.seen().last().unwrap().decode();
    assert!(!request.include_fenced_brokers);
}

#[tokio::test]
async fn describe_cluster_is_none_without_the_api() {
    let b = broker(ranges_with(&[(ApiKey::DescribeCluster, 0, -1)]), |_| {
        Reply::Close
    })
    .await;
    let mut client = connect(&b).await;
    assert!(client.describe_cluster().await.unwrap().is_none());
    assert_eq!(b.seen().len(), 1);
}

#[tokio::test]
async fn describe_cluster_error_code_carries_its_message() {
    let b = broker(KAFKA_4_1.to_vec(), |r| {
        answer(
            r,
            &DescribeClusterResponse::default()
                .with_error_code(31)
                .with_error_message(Some(s("not allowed"))),
        )
    })
    .await;
    let mut client = connect(&b).await;
    let err = client.describe_cluster().await.unwrap_err();
    assert_eq!(err.kind(), FailureKind::Authorization);
    assert_eq!(
        err.to_string(),
        "describe_cluster: Kafka error 31 CLUSTER_AUTHORIZATION_FAILED: not allowed"
    );
}

// ---- describe configs ----

#[tokio::test]
async fn describe_configs_keeps_per_topic_errors() {
    let b = broker(KAFKA_4_1.to_vec(), |r| {
        let request: DescribeConfigsRequest = r.decode();
        let results = request
            .resources
            .iter()
            .map(|res| {
                let name = res.resource_name.to_string();
                let result = DescribeConfigsResult::default()
                    .with_resource_type(res.resource_type)
                    .with_resource_name(res.resource_name.clone());
                if name == "missing" {
                    result.with_error_code(3)
                } else {
                    result.with_configs(vec![
                        DescribeConfigsResourceResult::default()
                            .with_name(s("min.insync.replicas"))
                            .with_value(Some(s("2"))),
                        DescribeConfigsResourceResult::default()
                            .with_name(s("sasl.jaas.config"))
                            .with_value(None)
                            .with_is_sensitive(true),
                    ])
                }
            })
            .collect();
        answer(r, &DescribeConfigsResponse::default().with_results(results))
    })
    .await;
    let mut client = connect(&b).await;
    let topics = vec!["__consumer_offsets".to_owned(), "missing".to_owned()];
    let configs = client
        .describe_topic_configs(&topics, &["min.insync.replicas"])
        .await
        .unwrap()
        .value;
    let offsets = configs["__consumer_offsets"].as_ref().unwrap();
    assert_eq!(
        offsets.get("min.insync.replicas").map(String::as_str),
        Some("2")
    );
    assert!(!offsets.contains_key("sasl.jaas.config"));
    assert_eq!(configs["missing"], Err(3));

    let seen = b.seen();
    let last = seen.last().unwrap();
    assert_eq!(last.version, 4);
    let request: DescribeConfigsRequest = last.decode();
    assert!(request.resources.iter().all(|r| r.resource_type == 2));
    assert_eq!(
        request.resources[0].configuration_keys,
        Some(vec![s("min.insync.replicas")])
    );
}

// ---- failures ----

fn assert_within(started: Instant, limit: Duration) {
    let took = started.elapsed();
    assert!(took >= limit, "gave up early after {took:?}");
    assert!(
        took < limit + MARGIN,
        "took {took:?} for a {limit:?} deadline"
    );
}

#[tokio::test]
async fn silent_broker_times_out_during_api_versions() {
    let b = FakeBroker::start(|_| Reply::Hang).await;
    let started = Instant::now();
    let err = BrokerClient::connect(&b.address, &opts())
        .await
        .err()
        .unwrap();
    assert_within(started, SHORT);
    assert_eq!(err.kind(), FailureKind::Timeout);
    assert_eq!(err.phase(), Some(Phase::ApiVersions));
    let failure = err.to_failure(started.elapsed());
    assert!(
        failure.detail.contains("api_versions"),
        "{}",
        failure.detail
    );
}

#[tokio::test]
async fn open_then_negotiate_separates_connect_from_api_versions() {
    let b = FakeBroker::start(|_| Reply::Hang).await;
    let opened = BrokerClient::open(&b.address, &opts()).await.unwrap();
    assert!(opened.connect_latency < SHORT);
    let started = Instant::now();
    let err = opened.negotiate().await.unwrap_err();
    assert_within(started, SHORT);
    assert_eq!(err.phase(), Some(Phase::ApiVersions));
}

#[tokio::test]
async fn broker_freezing_after_connect_times_out_and_abandons_the_connection() {
    let b = broker(KAFKA_4_1.to_vec(), |_| Reply::Hang).await;
    let mut client = connect(&b).await;
    let started = Instant::now();
    let err = client.metadata(None).await.unwrap_err();
    assert_within(started, SHORT);
    assert_eq!(err.kind(), FailureKind::Timeout);
    assert_eq!(err.phase(), Some(Phase::Metadata));
    assert!(!client.is_usable());

    let started = Instant::now();
    let err = client.describe_cluster().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(50));
    assert_eq!(err.kind(), FailureKind::ConnectionClosed);
    assert!(
        err.to_string()
            .contains("connection abandoned after timeout in metadata"),
        "{err}"
    );
    // Nothing more was sent on the abandoned connection.
    assert_eq!(b.seen().len(), 2);
}

#[tokio::test]
async fn closed_connection_is_connection_closed() {
    let b = FakeBroker::start(|_| Reply::Close).await;
    let err = BrokerClient::connect(&b.address, &opts())
        .await
        .err()
        .unwrap();
    assert_eq!(err.kind(), FailureKind::ConnectionClosed, "{err}");
    assert_eq!(err.phase(), Some(Phase::ApiVersions));

    let b = broker(KAFKA_4_1.to_vec(), |_| Reply::Close).await;
    let mut client = connect(&b).await;
    let err = client.metadata(None).await.unwrap_err();
    assert_eq!(err.kind(), FailureKind::ConnectionClosed, "{err}");
    assert!(!client.is_usable());
}

#[tokio::test]
async fn closed_port_is_connection_refused() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    drop(listener);
    let err = BrokerClient::connect(&address, &opts())
        .await
        .err()
        .unwrap();
    assert_eq!(err.kind(), FailureKind::ConnectionRefused, "{err}");
}

#[tokio::test]
async fn address_without_port_is_unresolvable() {
    let err = BrokerClient::connect("localhost", &opts())
        .await
        .err()
        .unwrap();
    assert_eq!(err.kind(), FailureKind::Unresolvable, "{err}");
}

/// A broker whose ApiVersions answer is fine and whose answer to everything else is `bytes`.
async fn broker_answering(bytes: Vec<u8>) -> FakeBroker {
    broker(KAFKA_4_1.to_vec(), move |_| Reply::Raw(bytes.clone())).await
}

#[tokio::test]
async fn oversized_or_negative_frame_length_is_a_protocol_error() {
    for length in [i32::MAX, -1, i32::MIN] {
        let b = broker_answering(length.to_be_bytes().to_vec()).await;
        let mut client = connect(&b).await;
        let started = Instant::now();
        let err = client.metadata(None).await.unwrap_err();
        assert_eq!(err.kind(), FailureKind::Protocol, "{err}");
        assert!(started.elapsed() < SHORT, "length {length} was waited for");
        assert!(!client.is_usable());
    }
}

#[tokio::test]
async fn frame_above_the_configured_limit_is_refused() {
    let b = broker(KAFKA_4_1.to_vec(), |r| answer(r, &sample_metadata())).await;
    let small = WireOptions {
        // Room for the ApiVersions answer, not for the metadata.
        max_frame_bytes: 128,
        ..opts()
    };
    let mut client = BrokerClient::connect(&b.address, &small)
        .await
        .unwrap()
        .client;
    let err = client.metadata(None).await.unwrap_err();
    assert_eq!(err.kind(), FailureKind::Protocol);
    assert!(
        err.to_string().contains("exceeds the limit of 128 bytes"),
        "{err}"
    );
}

#[tokio::test]
async fn garbage_is_a_protocol_error() {
    // A small deterministic generator: the point is variety, not randomness.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..40 {
        let len = 1 + (next() % 200) as usize;
        let mut bytes = (len as i32).to_be_bytes().to_vec();
        // Keep the correlation id right half of the time, so the body decoder sees garbage.
        let mut body: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if round % 2 == 0 && len >= 4 {
            body[..4].copy_from_slice(&1i32.to_be_bytes());
        }
        bytes.extend(body);
        let b = broker_answering(bytes).await;
        let mut client = connect(&b).await;
        let err = client.metadata(None).await.unwrap_err();
        assert_eq!(err.kind(), FailureKind::Protocol, "round {round}: {err}");
    }
}

#[tokio::test]
async fn huge_array_count_is_refused_before_decoding() {
    // A v13 Metadata body: throttle, then a broker array claiming 2^32-2 entries in 5 bytes.
    let mut body = vec![0, 0, 0, 0];
    body.extend([0xff, 0xff, 0xff, 0xff, 0x0f]);
    let b = broker(KAFKA_4_1.to_vec(), move |r| {
        let mut frame = Vec::new();
        frame.extend(((4 + 1 + body.len()) as i32).to_be_bytes());
        frame.extend(r.correlation_id.to_be_bytes());
        frame.push(0); // no tagged fields in the v1 header
        frame.extend(&body);
        Reply::Raw(frame)
    })
    .await;
    let mut client = connect(&b).await;
    let err = client.metadata(None).await.unwrap_err();
    assert_eq!(err.kind(), FailureKind::Protocol);
    assert!(
        err.to_string().contains("claims 4294967294 elements"),
        "{err}"
    );
    // The frame was read whole, so the stream is still in step.
    assert!(client.is_usable());
}

#[tokio::test]
async fn mismatched_correlation_id_is_a_protocol_error() {
    let b = broker(KAFKA_4_1.to_vec(), |r| {
        Reply::Raw(frame(r.correlation_id + 7, r.version, &sample_metadata()))
    })
    .await;
    let mut client = connect(&b).await;
    let err = client.metadata(None).await.unwrap_err();
    assert_eq!(err.kind(), FailureKind::Protocol);
    assert!(err.to_string().contains("correlation id"), "{err}");
    assert!(!client.is_usable());
}

#[tokio::test]
async fn unanswered_tcp_handshake_times_out_in_connect() {
    // A listener that never accepts and whose backlog is full leaves further handshakes
    // unanswered, as a host that drops packets would.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let address = listener.local_addr().unwrap();
    let mut parked = Vec::new();
    let mut full = false;
    for _ in 0..8 {
        match tokio::time::timeout(
            Duration::from_millis(100),
            tokio::net::TcpStream::connect(address),
        )
        .await
        {
            Ok(Ok(s)) => parked.push(s),
            _ => {
                full = true;
                break;
            }
        }
    }
    assert!(full, "backlog never filled");
    let started = Instant::now();
    let err = BrokerClient::connect(&address.to_string(), &opts())
        .await
        .err()
        .unwrap();
    assert_within(started, SHORT);
    assert_eq!(err.kind(), FailureKind::Timeout, "{err}");
    assert_eq!(err.phase(), Some(Phase::Connect));
    assert_eq!(err.to_string(), "no answer within 300ms during connect");
}
