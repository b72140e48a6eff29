//! The guard's tests: every decoded response type is walked before it is trusted, and a
//! seed per type feeds the fuzzer.

use super::guard::*;
use bytes::Bytes;
use bytes::BytesMut;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    alter_partition_reassignments_response as alter, elect_leaders_response as elect,
    list_offsets_response as offsets, list_partition_reassignments_response as listing,
    produce_response as produce,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsResponse, ApiVersionsResponse, DescribeClusterResponse,
    DescribeConfigsResponse, DescribeQuorumResponse, DescribeTopicPartitionsResponse,
    ElectLeadersResponse, ListOffsetsResponse, ListPartitionReassignmentsResponse,
    MetadataResponse, ProduceResponse, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use std::collections::BTreeMap;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// An unknown tagged field, for flexible versions, so that skipping is exercised too.
fn extra_tags(flexible: bool) -> BTreeMap<i32, Bytes> {
    if flexible {
        BTreeMap::from([(77, Bytes::from_static(b"later"))])
    } else {
        BTreeMap::new()
    }
}

fn encode<T: Encodable>(value: &T, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    value.encode(&mut buf, version).unwrap();
    buf.freeze()
}

fn api_versions(v: i16) -> ApiVersionsResponse {
    let flex = v >= 3;
    let mut r = ApiVersionsResponse::default()
        .with_error_code(0)
        .with_api_keys(vec![
            ApiVersion::default()
                .with_api_key(18)
                .with_max_version(4)
                .with_unknown_tagged_fields(extra_tags(flex)),
            ApiVersion::default().with_api_key(3).with_max_version(13),
        ])
        .with_throttle_time_ms(if v >= 1 { 5 } else { 0 });
    if flex {
        r = r
            .with_supported_features(vec![SupportedFeatureKey::default()
                .with_name(s("metadata.version"))
                .with_min_version(1)
                .with_max_version(27)
                .with_unknown_tagged_fields(extra_tags(true))])
            .with_finalized_features_epoch(42)
            .with_finalized_features(vec![FinalizedFeatureKey::default()
                .with_name(s("kraft.version"))
                .with_max_version_level(1)])
            .with_zk_migration_ready(true)
            .with_unknown_tagged_fields(extra_tags(true));
    }
    r
}

fn metadata(v: i16) -> MetadataResponse {
    let flex = v >= 9;
    let partition = MetadataResponsePartition::default()
        .with_error_code(9)
        .with_partition_index(3)
        .with_leader_id(BrokerId(2))
        .with_leader_epoch(if v >= 7 { 11 } else { -1 })
        .with_replica_nodes(vec![BrokerId(1), BrokerId(2), BrokerId(3)])
        .with_isr_nodes(vec![BrokerId(2)])
        .with_offline_replicas(if v >= 5 { vec![BrokerId(3)] } else { vec![] })
        .with_unknown_tagged_fields(extra_tags(flex));
    let mut topic = MetadataResponseTopic::default()
        .with_name(Some(TopicName(s("orders"))))
        .with_is_internal(v >= 1)
        .with_partitions(vec![partition.clone(), partition])
        .with_unknown_tagged_fields(extra_tags(flex));
    if v >= 10 {
        topic = topic.with_topic_id("0102030405060708090a0b0c0d0e0f10".parse().unwrap());
    }
    if v >= 8 {
        topic = topic.with_topic_authorized_operations(8);
    }
    let mut r = MetadataResponse::default()
        .with_throttle_time_ms(if v >= 3 { 1 } else { 0 })
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(1))
            .with_host(s("broker-1"))
            .with_port(9092)
            .with_rack(if v >= 1 { Some(s("r1")) } else { None })
            .with_unknown_tagged_fields(extra_tags(flex))])
        .with_cluster_id(if v >= 2 { Some(s("c1")) } else { None })
        .with_controller_id(BrokerId(if v >= 1 { 1 } else { -1 }))
        .with_topics(vec![topic.clone(), topic.with_error_code(3)])
        .with_unknown_tagged_fields(extra_tags(flex));
    if (8..=10).contains(&v) {
        r = r.with_cluster_authorized_operations(4);
    }
    if v >= 13 {
        r = r.with_error_code(0);
    }
    r
}

fn describe_cluster(v: i16) -> DescribeClusterResponse {
    let broker = DescribeClusterBroker::default()
        .with_broker_id(BrokerId(1))
        .with_host(s("broker-1"))
        .with_port(9092)
        .with_rack(Some(s("r1")))
        .with_is_fenced(v >= 2)
        .with_unknown_tagged_fields(extra_tags(true));
    DescribeClusterResponse::default()
        .with_error_message(Some(s("fine")))
        .with_cluster_id(s("c1"))
        .with_controller_id(BrokerId(1))
        .with_brokers(vec![broker.clone(), broker])
        .with_unknown_tagged_fields(extra_tags(true))
}

fn describe_configs(v: i16) -> DescribeConfigsResponse {
    let flex = v >= 4;
    let mut config = DescribeConfigsResourceResult::default()
        .with_name(s("min.insync.replicas"))
        .with_value(Some(s("2")))
        .with_config_source(5)
        .with_synonyms(vec![DescribeConfigsSynonym::default()
            .with_name(s("min.insync.replicas"))
            .with_value(Some(s("2")))
            .with_source(5)
            .with_unknown_tagged_fields(extra_tags(flex))])
        .with_unknown_tagged_fields(extra_tags(flex));
    if v >= 3 {
        config = config
            .with_config_type(3)
            .with_documentation(Some(s("docs")));
    }
    DescribeConfigsResponse::default()
        .with_results(vec![
            DescribeConfigsResult::default()
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_configs(vec![config.clone(), config])
                .with_unknown_tagged_fields(extra_tags(flex)),
            DescribeConfigsResult::default()
                .with_error_code(3)
                .with_error_message(Some(s("unknown")))
                .with_resource_type(2)
                .with_resource_name(s("gone")),
        ])
        .with_unknown_tagged_fields(extra_tags(flex))
}

fn sasl_handshake(_v: i16) -> SaslHandshakeResponse {
    SaslHandshakeResponse::default().with_mechanisms(vec![s("PLAIN"), s("SCRAM-SHA-512")])
}

fn sasl_authenticate(v: i16) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_message(Some(s("ok")))
        .with_auth_bytes(Bytes::from_static(b"v=abc"))
        .with_session_lifetime_ms(if v >= 1 { 3_600_000 } else { 0 })
        .with_unknown_tagged_fields(extra_tags(v >= 2))
}

/// Partition indexes that mark where a partition array's first element starts, so a test
/// can find the array's count just before it.
const PARTITION_MARK: i32 = 0x5a5a_5a5a;
const NODE_MARK: i32 = 0x5b5b_5b5b;

fn produce(v: i16) -> ProduceResponse {
    let flex = v >= 9;
    let mut partition = produce::PartitionProduceResponse::default()
        .with_index(PARTITION_MARK)
        .with_error_code(6)
        .with_base_offset(41)
        .with_log_append_time_ms(-1)
        .with_unknown_tagged_fields(extra_tags(flex));
    if v >= 5 {
        partition = partition.with_log_start_offset(7);
    }
    if v >= 8 {
        partition = partition
            .with_record_errors(vec![produce::BatchIndexAndErrorMessage::default()
                .with_batch_index(0)
                .with_batch_index_error_message(Some(s("bad record")))
                .with_unknown_tagged_fields(extra_tags(flex))])
            .with_error_message(Some(s("not the leader")));
    }
    if v >= 10 {
        partition = partition.with_current_leader(
            produce::LeaderIdAndEpoch::default()
                .with_leader_id(BrokerId(2))
                .with_leader_epoch(9)
                .with_unknown_tagged_fields(extra_tags(true)),
        );
    }
    let mut topic = produce::TopicProduceResponse::default()
        .with_partition_responses(vec![partition.clone(), partition.with_index(1)])
        .with_unknown_tagged_fields(extra_tags(flex));
    topic = if v >= 13 {
        topic.with_topic_id("0102030405060708090a0b0c0d0e0f10".parse().unwrap())
    } else {
        topic.with_name(TopicName(s("orders")))
    };
    let mut r = ProduceResponse::default()
        .with_responses(vec![topic.clone(), topic])
        .with_throttle_time_ms(3)
        .with_unknown_tagged_fields(extra_tags(flex));
    if v >= 10 {
        r = r.with_node_endpoints(vec![produce::NodeEndpoint::default()
            .with_node_id(BrokerId(NODE_MARK))
            .with_host(s("broker-2"))
            .with_port(9092)
            .with_rack(Some(s("r2")))
            .with_unknown_tagged_fields(extra_tags(true))]);
    }
    r
}

fn elect_leaders(v: i16) -> ElectLeadersResponse {
    let flex = v >= 2;
    let partition = elect::PartitionResult::default()
        .with_partition_id(PARTITION_MARK)
        .with_error_code(84)
        .with_error_message(Some(s("election not needed")))
        .with_unknown_tagged_fields(extra_tags(flex));
    let topic = elect::ReplicaElectionResult::default()
        .with_topic(TopicName(s("orders")))
        .with_partition_result(vec![
            partition.clone(),
            partition.with_partition_id(1).with_error_message(None),
        ])
        .with_unknown_tagged_fields(extra_tags(flex));
    ElectLeadersResponse::default()
        .with_throttle_time_ms(2)
        .with_error_code(if v >= 1 { 41 } else { 0 })
        .with_replica_election_results(vec![topic.clone(), topic])
        .with_unknown_tagged_fields(extra_tags(flex))
}

fn alter_reassignments(v: i16) -> AlterPartitionReassignmentsResponse {
    let partition = alter::ReassignablePartitionResponse::default()
        .with_partition_index(PARTITION_MARK)
        .with_error_code(85)
        .with_error_message(Some(s("no reassignment in progress")))
        .with_unknown_tagged_fields(extra_tags(true));
    let topic = alter::ReassignableTopicResponse::default()
        .with_name(TopicName(s("orders")))
        .with_partitions(vec![partition.clone(), partition.with_partition_index(1)])
        .with_unknown_tagged_fields(extra_tags(true));
    AlterPartitionReassignmentsResponse::default()
        .with_throttle_time_ms(2)
        // v0 has no such field and decodes it as true.
        .with_allow_replication_factor_change(v < 1)
        .with_error_message(Some(s("partly")))
        .with_responses(vec![topic.clone(), topic])
        .with_unknown_tagged_fields(extra_tags(true))
}

fn list_reassignments(_v: i16) -> ListPartitionReassignmentsResponse {
    let partition = listing::OngoingPartitionReassignment::default()
        .with_partition_index(PARTITION_MARK)
        .with_replicas(vec![BrokerId(1), BrokerId(2), BrokerId(4)])
        .with_adding_replicas(vec![BrokerId(4)])
        .with_removing_replicas(vec![BrokerId(3)])
        .with_unknown_tagged_fields(extra_tags(true));
    let topic = listing::OngoingTopicReassignment::default()
        .with_name(TopicName(s("orders")))
        .with_partitions(vec![partition.clone(), partition.with_partition_index(1)])
        .with_unknown_tagged_fields(extra_tags(true));
    ListPartitionReassignmentsResponse::default()
        .with_throttle_time_ms(2)
        .with_error_message(None)
        .with_topics(vec![topic.clone(), topic])
        .with_unknown_tagged_fields(extra_tags(true))
}

fn list_offsets(v: i16) -> ListOffsetsResponse {
    let flex = v >= 6;
    let partition = offsets::ListOffsetsPartitionResponse::default()
        .with_partition_index(PARTITION_MARK)
        .with_error_code(74)
        .with_timestamp(-1)
        .with_offset(1234)
        .with_leader_epoch(if v >= 4 { 12 } else { -1 })
        .with_unknown_tagged_fields(extra_tags(flex));
    let topic = offsets::ListOffsetsTopicResponse::default()
        .with_name(TopicName(s("orders")))
        .with_partitions(vec![partition.clone(), partition.with_partition_index(1)])
        .with_unknown_tagged_fields(extra_tags(flex));
    ListOffsetsResponse::default()
        .with_throttle_time_ms(if v >= 2 { 2 } else { 0 })
        .with_topics(vec![topic.clone(), topic])
        .with_unknown_tagged_fields(extra_tags(flex))
}

fn describe_partitions(_v: i16) -> DescribeTopicPartitionsResponse {
    use kafka_protocol::messages::describe_topic_partitions_response as dtp;
    let partition = dtp::DescribeTopicPartitionsResponsePartition::default()
        .with_partition_index(2)
        .with_leader_id(BrokerId(-1))
        .with_leader_epoch(7)
        .with_replica_nodes(vec![BrokerId(1), BrokerId(2), BrokerId(3)])
        .with_isr_nodes(vec![])
        .with_eligible_leader_replicas(Some(vec![BrokerId(2), BrokerId(3)]))
        .with_last_known_elr(Some(vec![BrokerId(1)]))
        .with_offline_replicas(vec![BrokerId(1)])
        .with_unknown_tagged_fields(extra_tags(true));
    let topic = dtp::DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(TopicName(s("orders"))))
        .with_topic_id("0102030405060708090a0b0c0d0e0f10".parse().unwrap())
        .with_partitions(vec![
            partition.clone(),
            partition
                .with_eligible_leader_replicas(None)
                .with_last_known_elr(None),
        ])
        .with_topic_authorized_operations(8)
        .with_unknown_tagged_fields(extra_tags(true));
    DescribeTopicPartitionsResponse::default()
        .with_topics(vec![
            topic.clone(),
            topic.with_name(None).with_error_code(3),
        ])
        .with_next_cursor(Some(
            dtp::Cursor::default()
                .with_topic_name(TopicName(s("orders")))
                .with_partition_index(3)
                .with_unknown_tagged_fields(extra_tags(true)),
        ))
        .with_unknown_tagged_fields(extra_tags(true))
}

/// A leader's answer with a voter and an observer, and the controllers' endpoints (v2).
/// DescribeLogDirs' answer: two directories, one with a topic of two partitions.
fn describe_log_dirs(v: i16) -> kafka_protocol::messages::DescribeLogDirsResponse {
    use kafka_protocol::messages::describe_log_dirs_response as dl;
    let flex = v >= 2;
    let partition = dl::DescribeLogDirsPartition::default()
        .with_partition_index(PARTITION_MARK)
        .with_partition_size(1234)
        .with_unknown_tagged_fields(extra_tags(flex));
    let topic = dl::DescribeLogDirsTopic::default()
        .with_name(TopicName(s("orders")))
        .with_partitions(vec![partition.clone(), partition])
        .with_unknown_tagged_fields(extra_tags(flex));
    let dir = dl::DescribeLogDirsResult::default()
        .with_log_dir(s("/data/a"))
        .with_topics(vec![topic])
        .with_total_bytes(if v >= 4 { 1000 } else { -1 })
        .with_usable_bytes(if v >= 4 { 400 } else { -1 })
        .with_unknown_tagged_fields(extra_tags(flex));
    kafka_protocol::messages::DescribeLogDirsResponse::default()
        .with_throttle_time_ms(1)
        .with_results(vec![
            dir.clone(),
            dir.with_error_code(56).with_topics(vec![]),
        ])
        .with_unknown_tagged_fields(extra_tags(flex))
}

/// OffsetFetch's answer: one topic of two partitions before v8, two groups of that after.
fn offset_fetch(v: i16) -> kafka_protocol::messages::OffsetFetchResponse {
    use kafka_protocol::messages::offset_fetch_response as of;
    let flex = v >= 6;
    let mut r = kafka_protocol::messages::OffsetFetchResponse::default()
        .with_throttle_time_ms(if v >= 3 { 2 } else { 0 })
        .with_unknown_tagged_fields(extra_tags(flex));
    if v <= 7 {
        let partition = of::OffsetFetchResponsePartition::default()
            .with_partition_index(PARTITION_MARK)
            .with_committed_offset(42)
            .with_committed_leader_epoch(if v >= 5 { 3 } else { -1 })
            .with_metadata(Some(s("kafka-watchdog")))
            .with_unknown_tagged_fields(extra_tags(flex));
        let topic = of::OffsetFetchResponseTopic::default()
            .with_name(TopicName(s("orders")))
            .with_partitions(vec![partition.clone(), partition.with_metadata(None)])
            .with_unknown_tagged_fields(extra_tags(flex));
        r = r.with_topics(vec![topic]);
        if v >= 2 {
            r = r.with_error_code(16);
        }
    } else {
        let partition = of::OffsetFetchResponsePartitions::default()
            .with_partition_index(PARTITION_MARK)
            .with_committed_offset(42)
            .with_committed_leader_epoch(3)
            .with_metadata(Some(s("kafka-watchdog")))
            .with_unknown_tagged_fields(extra_tags(true));
        let topic = of::OffsetFetchResponseTopics::default()
            .with_name(TopicName(s("orders")))
            .with_topic_id("0102030405060708090a0b0c0d0e0f10".parse().unwrap())
            .with_partitions(vec![partition.clone(), partition.with_metadata(None)])
            .with_unknown_tagged_fields(extra_tags(true));
        let group = of::OffsetFetchResponseGroup::default()
            .with_group_id(kafka_protocol::messages::GroupId(s("g")))
            .with_topics(vec![topic])
            .with_error_code(14)
            .with_unknown_tagged_fields(extra_tags(true));
        r = r.with_groups(vec![group.clone(), group.with_topics(vec![])]);
    }
    r
}

pub(super) fn describe_quorum(v: i16) -> DescribeQuorumResponse {
    use kafka_protocol::messages::describe_quorum_response as dq;
    let replica = |id: i32, leo: i64, fetch: i64| {
        let r = dq::ReplicaState::default()
            .with_replica_id(BrokerId(id))
            .with_log_end_offset(leo)
            .with_unknown_tagged_fields(extra_tags(true));
        let r = if v >= 1 {
            r.with_last_fetch_timestamp(fetch)
                .with_last_caught_up_timestamp(fetch - 100)
        } else {
            r
        };
        if v >= 2 {
            r.with_replica_directory_id("0102030405060708090a0b0c0d0e0f10".parse().unwrap())
        } else {
            r
        }
    };
    let partition = dq::PartitionData::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(100))
        .with_leader_epoch(7)
        .with_high_watermark(5000)
        .with_current_voters(vec![
            replica(100, 5000, 1_700_000_010_000),
            replica(0, 4990, 1_700_000_009_700),
        ])
        .with_observers(vec![replica(2, 5000, 1_700_000_009_900)])
        .with_unknown_tagged_fields(extra_tags(true));
    let topic = dq::TopicData::default()
        .with_topic_name(TopicName(s("__cluster_metadata")))
        .with_partitions(vec![partition])
        .with_unknown_tagged_fields(extra_tags(true));
    let mut r = DescribeQuorumResponse::default()
        .with_topics(vec![topic])
        .with_unknown_tagged_fields(extra_tags(true));
    if v >= 2 {
        r = r.with_nodes(vec![dq::Node::default()
            .with_node_id(BrokerId(100))
            .with_listeners(vec![dq::Listener::default()
                .with_name(s("CONTROLLER"))
                .with_host(s("127.0.0.110"))
                .with_port(9093)
                .with_unknown_tagged_fields(extra_tags(true))])
            .with_unknown_tagged_fields(extra_tags(true))]);
    }
    r
}

/// The walk must end exactly where the crate's decoder ends, at every version, and every
/// truncation must be refused without a panic.
fn check_all_versions<T>(range: std::ops::RangeInclusive<i16>, build: fn(i16) -> T)
where
    T: Guarded + Encodable + PartialEq + std::fmt::Debug,
{
    for v in range {
        let value = build(v);
        let body = encode(&value, v);
        let mut r = Reader::new(&body);
        T::walk(&mut r, v).unwrap_or_else(|e| panic!("v{v}: {e}"));
        assert_eq!(r.remaining(), 0, "v{v}: walk stopped early");
        assert_eq!(decode::<T>(&body, v).unwrap(), value, "v{v}");
        for cut in 0..body.len() {
            assert!(
                decode::<T>(&body.slice(..cut), v).is_err(),
                "v{v}: prefix of {cut} bytes accepted"
            );
        }
    }
}

#[test]
fn walks_match_the_crate_at_every_version() {
    check_all_versions(0..=4, api_versions);
    check_all_versions(0..=13, metadata);
    check_all_versions(0..=2, describe_cluster);
    check_all_versions(1..=4, describe_configs);
    check_all_versions(0..=1, sasl_handshake);
    check_all_versions(0..=2, sasl_authenticate);
    check_all_versions(3..=13, produce);
    check_all_versions(0..=2, elect_leaders);
    check_all_versions(0..=1, alter_reassignments);
    check_all_versions(0..=0, list_reassignments);
    check_all_versions(1..=10, list_offsets);
    check_all_versions(0..=0, describe_partitions);
    check_all_versions(0..=0, |v| describe_partitions(v).with_next_cursor(None));
    check_all_versions(0..=2, describe_quorum);
}

/// Flipped bytes anywhere in valid bodies must give an answer or an error, never a panic
/// or an allocation the frame cannot back.
#[test]
fn mutated_bodies_never_panic() {
    fn mutate_all<T: Guarded + Encodable>(
        versions: std::ops::RangeInclusive<i16>,
        build: fn(i16) -> T,
        next: &mut impl FnMut() -> u64,
    ) {
        for v in versions {
            let body = encode(&build(v), v).to_vec();
            for _ in 0..300 {
                let mut copy = body.clone();
                for _ in 0..1 + next() % 4 {
                    let at = (next() % copy.len() as u64) as usize;
                    copy[at] = next() as u8;
                }
                let _ = decode::<T>(&Bytes::from(copy), v);
            }
        }
    }
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    mutate_all(0..=4, api_versions, &mut next);
    mutate_all(0..=13, metadata, &mut next);
    mutate_all(0..=2, describe_cluster, &mut next);
    mutate_all(1..=4, describe_configs, &mut next);
    mutate_all(0..=1, sasl_handshake, &mut next);
    mutate_all(0..=2, sasl_authenticate, &mut next);
    mutate_all(3..=13, produce, &mut next);
    mutate_all(0..=2, elect_leaders, &mut next);
    mutate_all(0..=1, alter_reassignments, &mut next);
    mutate_all(0..=0, list_reassignments, &mut next);
    mutate_all(1..=10, list_offsets, &mut next);
    mutate_all(0..=0, describe_partitions, &mut next);
    mutate_all(0..=2, describe_quorum, &mut next);
    mutate_all(1..=10, offset_fetch, &mut next);
    mutate_all(1..=4, describe_log_dirs, &mut next);
}

/// Every version of every response above is a seed for the `wire_decode` fuzz target
/// (`fuzz/`), whose input is `[api key: i16][version: i16][body]`, big-endian. Run with
/// `KAFKA_WATCHDOG_FUZZ_SEEDS=fuzz/corpus/wire_decode` to write them there.
#[test]
fn fuzz_seeds_pass_the_fuzzing_entry() {
    use kafka_protocol::messages::ApiKey;
    fn seeds<T: Encodable>(
        out: &mut Vec<(String, Vec<u8>)>,
        key: ApiKey,
        versions: std::ops::RangeInclusive<i16>,
        build: fn(i16) -> T,
    ) {
        for v in versions {
            let mut input = (key as i16).to_be_bytes().to_vec();
            input.extend(v.to_be_bytes());
            input.extend(encode(&build(v), v));
            out.push((format!("{key:?}-v{v}"), input));
        }
    }
    let mut all = Vec::new();
    seeds(&mut all, ApiKey::ApiVersions, 0..=4, api_versions);
    seeds(&mut all, ApiKey::Metadata, 0..=13, metadata);
    seeds(&mut all, ApiKey::DescribeCluster, 0..=2, describe_cluster);
    seeds(&mut all, ApiKey::DescribeConfigs, 1..=4, describe_configs);
    seeds(&mut all, ApiKey::SaslHandshake, 0..=1, sasl_handshake);
    seeds(&mut all, ApiKey::SaslAuthenticate, 0..=2, sasl_authenticate);
    seeds(&mut all, ApiKey::Produce, 3..=13, produce);
    seeds(&mut all, ApiKey::ElectLeaders, 0..=2, elect_leaders);
    seeds(
        &mut all,
        ApiKey::AlterPartitionReassignments,
        0..=1,
        alter_reassignments,
    );
    seeds(
        &mut all,
        ApiKey::ListPartitionReassignments,
        0..=0,
        list_reassignments,
    );
    seeds(&mut all, ApiKey::ListOffsets, 1..=10, list_offsets);
    seeds(
        &mut all,
        ApiKey::DescribeTopicPartitions,
        0..=0,
        describe_partitions,
    );
    seeds(&mut all, ApiKey::DescribeQuorum, 0..=2, describe_quorum);
    seeds(&mut all, ApiKey::OffsetFetch, 1..=10, offset_fetch);
    seeds(&mut all, ApiKey::DescribeLogDirs, 1..=4, describe_log_dirs);
    seeds(&mut all, ApiKey::InitProducerId, 0..=4, |_| {
        kafka_protocol::messages::InitProducerIdResponse::default()
            .with_producer_id(kafka_protocol::messages::ProducerId(4000))
            .with_producer_epoch(3)
    });
    seeds(&mut all, ApiKey::AddOffsetsToTxn, 0..=3, |_| {
        kafka_protocol::messages::AddOffsetsToTxnResponse::default()
    });
    seeds(&mut all, ApiKey::EndTxn, 0..=4, |_| {
        kafka_protocol::messages::EndTxnResponse::default().with_error_code(51)
    });

    let keys: std::collections::BTreeSet<i16> = all
        .iter()
        .map(|(_, s)| i16::from_be_bytes([s[0], s[1]]))
        .collect();
    let mut fuzzed = super::fuzzing::FUZZED_API_KEYS.to_vec();
    fuzzed.sort_unstable();
    assert_eq!(
        keys.into_iter().collect::<Vec<_>>(),
        fuzzed,
        "a decoded type has no seed"
    );

    let out = std::env::var_os("KAFKA_WATCHDOG_FUZZ_SEEDS").map(std::path::PathBuf::from);
    for (name, input) in &all {
        let key = i16::from_be_bytes([input[0], input[1]]);
        let version = i16::from_be_bytes([input[2], input[3]]);
        // Produce and ListOffsets seeds answer for partition 1 of "orders", which is
        // what the entry looks for, so every seed reaches the end of its path.
        super::decode_response_for_fuzzing(key, version, &input[4..])
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Some(dir) = &out {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join(name), input).unwrap();
        }
    }
}

/// Where `needle` first occurs in `body`.
fn find(body: &[u8], needle: &[u8]) -> usize {
    body.windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("{needle:?} not in body"))
}

/// Offset of the count of the array whose first element starts with `mark`.
fn count_before(body: &[u8], mark: i32, flexible: bool) -> usize {
    find(body, &mark.to_be_bytes()) - if flexible { 1 } else { 4 }
}

/// `body` with the array count at `at` replaced by the largest one its encoding holds:
/// 2^31-1 for a classic count, 2^32-2 for a compact one (a one-byte varint made five).
fn inflate(body: &[u8], at: usize, flexible: bool) -> (Bytes, u64) {
    let mut out = body[..at].to_vec();
    let rest = if flexible {
        assert!(body[at] < 0x80, "count at {at} is not a one-byte varint");
        out.extend([0xff, 0xff, 0xff, 0xff, 0x0f]);
        (&body[at + 1..], u64::from(u32::MAX) - 1)
    } else {
        out.extend(i32::MAX.to_be_bytes());
        (&body[at + 4..], i32::MAX as u64)
    };
    out.extend(rest.0);
    (Bytes::from(out), rest.1)
}

/// Each array of each new response, inflated in turn, at classic and flexible versions.
#[test]
fn inflated_counts_in_new_responses_are_refused() {
    fn refused<T: Guarded + std::fmt::Debug>(
        what: &str,
        v: i16,
        body: &[u8],
        at: usize,
        flexible: bool,
    ) {
        let (bad, count) = inflate(body, at, flexible);
        let err = decode::<T>(&bad, v).unwrap_err();
        assert!(
            err.contains(&format!("claims {count} elements")),
            "{what} v{v}: {err}"
        );
    }

    for v in [3, 5, 8, 9, 10, 12, 13] {
        let flex = v >= 9;
        let body = encode(&produce(v), v);
        refused::<ProduceResponse>("topics", v, &body, 0, flex);
        let partitions = count_before(&body, PARTITION_MARK, flex);
        refused::<ProduceResponse>("partitions", v, &body, partitions, flex);
        if v >= 8 {
            // index, error, base offset, append time, log start offset
            let errors = partitions + if flex { 1 } else { 4 } + 30;
            refused::<ProduceResponse>("record_errors", v, &body, errors, flex);
        }
        if v >= 10 {
            let nodes = count_before(&body, NODE_MARK, true);
            refused::<ProduceResponse>("node_endpoints", v, &body, nodes, true);
        }
    }

    for v in 0..=2 {
        let flex = v >= 2;
        let body = encode(&elect_leaders(v), v);
        let results = if v >= 1 { 6 } else { 4 };
        refused::<ElectLeadersResponse>("results", v, &body, results, flex);
        let partitions = count_before(&body, PARTITION_MARK, flex);
        refused::<ElectLeadersResponse>("partitions", v, &body, partitions, flex);
    }

    for v in 0..=1 {
        let body = encode(&alter_reassignments(v), v);
        // throttle, [allow_rf_change], error code, then a 7-byte message
        let topics = 4 + usize::from(v >= 1) + 2 + 7;
        refused::<AlterPartitionReassignmentsResponse>("topics", v, &body, topics, true);
        let partitions = count_before(&body, PARTITION_MARK, true);
        refused::<AlterPartitionReassignmentsResponse>("partitions", v, &body, partitions, true);
    }

    let body = encode(&list_reassignments(0), 0);
    // throttle, error code, null message
    refused::<ListPartitionReassignmentsResponse>("topics", 0, &body, 7, true);
    let partitions = count_before(&body, PARTITION_MARK, true);
    refused::<ListPartitionReassignmentsResponse>("partitions", 0, &body, partitions, true);
    let replicas = partitions + 1 + 4;
    refused::<ListPartitionReassignmentsResponse>("replicas", 0, &body, replicas, true);
    // replicas holds three ids; adding_replicas follows it.
    let adding = replicas + 1 + 12;
    refused::<ListPartitionReassignmentsResponse>("adding", 0, &body, adding, true);
    refused::<ListPartitionReassignmentsResponse>("removing", 0, &body, adding + 5, true);

    for v in [1, 2, 4, 5, 6, 9, 10] {
        let flex = v >= 6;
        let body = encode(&list_offsets(v), v);
        let topics = if v >= 2 { 4 } else { 0 };
        refused::<ListOffsetsResponse>("topics", v, &body, topics, flex);
        let partitions = count_before(&body, PARTITION_MARK, flex);
        refused::<ListOffsetsResponse>("partitions", v, &body, partitions, flex);
    }

    type OffsetFetch = kafka_protocol::messages::OffsetFetchResponse;
    for v in [1, 2, 3, 5, 6, 7, 8, 9, 10] {
        let flex = v >= 6;
        let body = encode(&offset_fetch(v), v);
        let partitions = count_before(&body, PARTITION_MARK, flex);
        refused::<OffsetFetch>("partitions", v, &body, partitions, flex);
        let first = if v >= 3 { 4 } else { 0 };
        refused::<OffsetFetch>(
            if v >= 8 { "groups" } else { "topics" },
            v,
            &body,
            first,
            flex,
        );
    }
}

/// A stream of bytes far shorter than any element: even modest counts are refused before
/// the crate reserves anything for them.
#[test]
fn counts_beyond_the_body_are_refused_in_new_responses() {
    // Produce v8: a topic array of 1000 in four bytes.
    let err = decode::<ProduceResponse>(&Bytes::from_static(&[0, 0, 0x03, 0xe8]), 8).unwrap_err();
    assert!(err.contains("claims 1000 elements"), "{err}");
    // ListOffsets v1: 5 topics, nothing after.
    let err = decode::<ListOffsetsResponse>(&Bytes::from_static(&[0, 0, 0, 5]), 1).unwrap_err();
    assert!(err.contains("claims 5 elements"), "{err}");
    // ElectLeaders v0: throttle, then -2 topics.
    let err = decode::<ElectLeadersResponse>(
        &Bytes::from_static(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe]),
        0,
    )
    .unwrap_err();
    assert!(err.contains("array length -2"), "{err}");
}

#[test]
fn inflated_counts_are_refused() {
    // Metadata v8: throttle, brokers array with i32 count.
    let classic = [0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff];
    let err = decode::<MetadataResponse>(&Bytes::copy_from_slice(&classic), 8).unwrap_err();
    assert!(err.contains("claims 2147483647 elements"), "{err}");

    // ApiVersions v3: error code, empty api_keys, throttle, then one tagged field,
    // supported_features, whose array claims 2^28 entries.
    let tagged = [0, 0, 1, 0, 0, 0, 0, 1, 0, 5, 0x81, 0x80, 0x80, 0x80, 0x01];
    let err = decode::<ApiVersionsResponse>(&Bytes::copy_from_slice(&tagged), 3).unwrap_err();
    assert!(err.contains("claims 268435456 elements"), "{err}");

    // A negative array length other than null.
    let negative = [0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe];
    let err = decode::<MetadataResponse>(&Bytes::copy_from_slice(&negative), 8).unwrap_err();
    assert!(err.contains("array length -2"), "{err}");

    // A partition's replica list claiming more int32s than bytes remain.
    let mut body = encode(&metadata(8), 8).to_vec();
    let needle = [0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3];
    let at = body
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap();
    body[at..at + 4].copy_from_slice(&1_000_000i32.to_be_bytes());
    let err = decode::<MetadataResponse>(&Bytes::from(body), 8).unwrap_err();
    assert!(err.contains("claims 1000000 elements"), "{err}");
}

#[test]
fn versions_outside_the_crate_are_refused() {
    let body = Bytes::from_static(&[0, 0, 0, 0]);
    assert!(decode::<DescribeConfigsResponse>(&body, 0).is_err());
    assert!(decode::<MetadataResponse>(&body, 14).is_err());
    assert!(decode::<ProduceResponse>(&body, 2).is_err());
    assert!(decode::<ProduceResponse>(&body, 14).is_err());
    assert!(decode::<ElectLeadersResponse>(&body, 3).is_err());
    assert!(decode::<AlterPartitionReassignmentsResponse>(&body, 2).is_err());
    assert!(decode::<ListPartitionReassignmentsResponse>(&body, 1).is_err());
    assert!(decode::<ListOffsetsResponse>(&body, 0).is_err());
    assert!(decode::<ListOffsetsResponse>(&body, 11).is_err());
}
