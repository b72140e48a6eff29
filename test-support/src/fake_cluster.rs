//! A fake Kafka cluster as far as the watchdog's probes and the canary's clients go, for
//! the tests and benchmarks that need the real daemon watching something without a lab
//! (tests/blocking.rs, the `own-faults --watchdog-faults` bench): one [`FakeBroker`]
//! answering ApiVersions, SASL (AWS_MSK_IAM or OAUTHBEARER, whatever it is sent), Metadata
//! and ListPartitionReassignments, and a port that refuses connections for a broker that
//! is down.

use std::sync::{Arc, OnceLock};

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListPartitionReassignmentsResponse, MetadataResponse,
    SaslAuthenticateResponse, SaslHandshakeResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::fake_broker::{answer, answer_api_versions, ranges_with, FakeBroker, Received, Reply};

/// Broker 1 of a fake cluster: Metadata names it and `others` (id, port), with topic `t`
/// of one partition per other broker, led by it, replicas on it and broker 1; SASL
/// handshakes and authentications succeed (an AWS_MSK_IAM answer, a session of an hour);
/// no reassignment; any other request closes the connection.
pub fn broker(rt: &tokio::runtime::Runtime, others: Vec<(i32, u16)>) -> FakeBroker {
    let own_port: Arc<OnceLock<u16>> = Arc::default();
    let port = own_port.clone();
    let ranges = ranges_with(&[(ApiKey::DescribeCluster, 1, 0)]);
    let b = rt.block_on(FakeBroker::start(
        move |r: &Received| match ApiKey::try_from(r.api_key) {
            Ok(ApiKey::ApiVersions) => answer_api_versions(r, &ranges),
            Ok(ApiKey::SaslHandshake) => answer(
                r,
                &SaslHandshakeResponse::default().with_mechanisms(vec![
                    StrBytes::from_static_str("AWS_MSK_IAM"),
                    StrBytes::from_static_str("OAUTHBEARER"),
                ]),
            ),
            Ok(ApiKey::SaslAuthenticate) => answer(
                r,
                &SaslAuthenticateResponse::default()
                    .with_auth_bytes(r#"{"version":"2020_10_22","request-id":"t"}"#.into())
                    .with_session_lifetime_ms(3_600_000),
            ),
            Ok(ApiKey::Metadata) => {
                let own = *port.get().expect("the port is known before any request");
                answer(r, &metadata(own, &others))
            }
            Ok(ApiKey::ListPartitionReassignments) => {
                answer(r, &ListPartitionReassignmentsResponse::default())
            }
            _ => Reply::Close,
        },
    ));
    let port = b
        .address
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a fake broker's address ends in its port");
    own_port.set(port).expect("set once");
    b
}

fn metadata(own: u16, others: &[(i32, u16)]) -> MetadataResponse {
    let brokers = std::iter::once((1, own))
        .chain(others.iter().copied())
        .map(|(id, port)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(id))
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(i32::from(port))
        })
        .collect();
    let partitions: Vec<MetadataResponsePartition> = others
        .iter()
        .enumerate()
        .map(|(i, (id, _))| {
            MetadataResponsePartition::default()
                .with_partition_index(i as i32)
                .with_leader_id(BrokerId(*id))
                .with_replica_nodes(vec![BrokerId(*id), BrokerId(1)])
                .with_isr_nodes(vec![BrokerId(*id), BrokerId(1)])
        })
        .collect();
    let topics = if partitions.is_empty() {
        Vec::new()
    } else {
        vec![MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
            .with_partitions(partitions)]
    };
    MetadataResponse::default()
        .with_cluster_id(Some(StrBytes::from_static_str("fake")))
        .with_controller_id(BrokerId(1))
        .with_brokers(brokers)
        .with_topics(topics)
}

/// A loopback port nothing listens on: a broker there refuses every connection.
pub fn refused_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The `clusters:` entries of one AWS_MSK_IAM cluster per broker, `msk0`, `msk1`, ..., with
/// the canary on and short deadlines: what tests/blocking.rs and the bench's MSK IAM part
/// watch to show that token fetches block no runtime worker.
pub fn msk_iam_clusters(brokers: &[FakeBroker]) -> String {
    brokers
        .iter()
        .enumerate()
        .map(|(i, b)| {
            format!(
                "  - name: msk{i}\n    bootstrap_servers: [{}]\n    round_interval_secs: 2\n    \
                 connect_timeout_ms: 1000\n    request_timeout_ms: 1500\n    \
                 canary:\n      produce_timeout_ms: 1500\n    \
                 security:\n      protocol: SASL_PLAINTEXT\n      sasl:\n        \
                 mechanism: AWS_MSK_IAM\n        region: eu-west-1\n",
                b.address
            )
        })
        .collect()
}
