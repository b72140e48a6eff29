//! Local fake brokers for the fan-out benchmark (the test-support crate's `FakeBroker`, the
//! one the unit tests script): brokers on 127.0.0.1 that answer the requests a probe sends
//! (ApiVersions, Metadata, DescribeCluster, DescribeConfigs) with small valid responses
//! encoded by kafka-protocol, accept and never answer (a frozen JVM), or refuse connections
//! (a closed port).
//!
//! Response bodies do not depend on the request beyond its version (DescribeConfigs aside),
//! so each is encoded once per version and reused: the listeners must not be what a round
//! with 500 brokers waits for.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{Context, Result};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, DescribeClusterResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, MetadataResponse, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_watchdog_test_support::fake_broker::{FakeBroker, Received, Reply};
use serde::Serialize;

/// What the listeners of one fan-out run do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Every listener answers.
    Answer,
    /// Every listener accepts and never answers.
    Hang,
    /// Every port is closed.
    Refuse,
    /// A third of each.
    Mix,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    Answer,
    Hang,
    Refuse,
}

impl Kind {
    pub fn behaviour(self, index: usize) -> Behaviour {
        match self {
            Kind::Answer => Behaviour::Answer,
            Kind::Hang => Behaviour::Hang,
            Kind::Refuse => Behaviour::Refuse,
            Kind::Mix => [Behaviour::Answer, Behaviour::Hang, Behaviour::Refuse][index % 3],
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Answer => "answer",
            Kind::Hang => "hang",
            Kind::Refuse => "refuse",
            Kind::Mix => "mix",
        }
    }
}

/// The versions a Kafka 4.1 broker announces for the APIs a probe uses.
const RANGES: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::DescribeCluster, 0, 2),
];

/// Topics in every Metadata answer: enough to be a real merge, small enough that the fan-out
/// and not the payload is measured.
const TOPICS: usize = 10;
const PARTITIONS_PER_TOPIC: usize = 10;

/// What every answering listener says.
struct Script {
    metadata: MetadataResponse,
    cluster: DescribeClusterResponse,
    api_versions: ApiVersionsResponse,
    /// (api key, version) -> encoded body.
    encoded: Mutex<HashMap<(i16, i16), Bytes>>,
}

impl Script {
    fn new(brokers: &[(i32, SocketAddr)], answering: &[i32]) -> Script {
        let host = |a: &SocketAddr| StrBytes::from_string(a.ip().to_string());
        let md_brokers = brokers
            .iter()
            .map(|(id, a)| {
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(*id))
                    .with_host(host(a))
                    .with_port(i32::from(a.port()))
            })
            .collect();
        // Leaders and replicas among answering brokers, so the view looks like a live cluster.
        let pool: Vec<i32> = if answering.is_empty() {
            brokers.iter().map(|(id, _)| *id).collect()
        } else {
            answering.to_vec()
        };
        let topics = (0..TOPICS)
            .map(|t| {
                let partitions = (0..PARTITIONS_PER_TOPIC)
                    .map(|p| {
                        let replicas: Vec<BrokerId> = (0..3.min(pool.len()))
                            .map(|k| BrokerId(pool[(t * 7 + p + k) % pool.len()]))
                            .collect();
                        MetadataResponsePartition::default()
                            .with_partition_index(p as i32)
                            .with_leader_id(replicas[0])
                            .with_leader_epoch(1)
                            .with_replica_nodes(replicas.clone())
                            .with_isr_nodes(replicas)
                    })
                    .collect();
                MetadataResponseTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_string(format!(
                        "fanout-{t}"
                    )))))
                    .with_partitions(partitions)
            })
            .collect();
        let metadata = MetadataResponse::default()
            .with_cluster_id(Some(StrBytes::from_static_str("fanout-cluster")))
            .with_controller_id(BrokerId(pool[0]))
            .with_brokers(md_brokers)
            .with_topics(topics);
        let cluster = DescribeClusterResponse::default()
            .with_cluster_id(StrBytes::from_static_str("fanout-cluster"))
            .with_controller_id(BrokerId(pool[0]))
            .with_brokers(
                brokers
                    .iter()
                    .map(|(id, a)| {
                        DescribeClusterBroker::default()
                            .with_broker_id(BrokerId(*id))
                            .with_host(host(a))
                            .with_port(i32::from(a.port()))
                    })
                    .collect(),
            );
        let api_versions = ApiVersionsResponse::default().with_api_keys(
            RANGES
                .iter()
                .map(|&(k, min, max)| {
                    ApiVersion::default()
                        .with_api_key(k as i16)
                        .with_min_version(min)
                        .with_max_version(max)
                })
                .collect(),
        );
        Script {
            metadata,
            cluster,
            api_versions,
            encoded: Mutex::new(HashMap::new()),
        }
    }

    fn cached<T: Encodable>(&self, key: ApiKey, version: i16, body: &T) -> Result<Bytes> {
        let k = (key as i16, version);
        if let Some(b) = self.encoded.lock().expect("cache lock").get(&k) {
            return Ok(b.clone());
        }
        let mut buf = BytesMut::new();
        body.encode(&mut buf, version)?;
        let b = buf.freeze();
        self.encoded
            .lock()
            .expect("cache lock")
            .insert(k, b.clone());
        Ok(b)
    }

    /// The complete response frame to one request, or None to hang up.
    fn respond(
        &self,
        api_key: i16,
        version: i16,
        correlation_id: i32,
        body: Bytes,
    ) -> Option<Vec<u8>> {
        let key = ApiKey::try_from(api_key).ok()?;
        let (header_version, payload) = match key {
            ApiKey::ApiVersions => (
                ApiVersionsResponse::header_version(version),
                self.cached(key, version, &self.api_versions).ok()?,
            ),
            ApiKey::Metadata => (
                MetadataResponse::header_version(version),
                self.cached(key, version, &self.metadata).ok()?,
            ),
            ApiKey::DescribeCluster => (
                DescribeClusterResponse::header_version(version),
                self.cached(key, version, &self.cluster).ok()?,
            ),
            ApiKey::DescribeConfigs => {
                let request = DescribeConfigsRequest::decode(&mut body.clone(), version).ok()?;
                let results = request
                    .resources
                    .into_iter()
                    .map(|r| {
                        DescribeConfigsResult::default()
                            .with_resource_type(r.resource_type)
                            .with_resource_name(r.resource_name)
                            .with_configs(vec![DescribeConfigsResourceResult::default()
                                .with_name(StrBytes::from_static_str("min.insync.replicas"))
                                .with_value(Some(StrBytes::from_static_str("2")))])
                    })
                    .collect();
                let mut buf = BytesMut::new();
                DescribeConfigsResponse::default()
                    .with_results(results)
                    .encode(&mut buf, version)
                    .ok()?;
                (
                    DescribeConfigsResponse::header_version(version),
                    buf.freeze(),
                )
            }
            _ => return None,
        };
        let mut out = BytesMut::with_capacity(payload.len() + 16);
        out.put_i32(0);
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut out, header_version)
            .ok()?;
        out.extend_from_slice(&payload);
        let length = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&length.to_be_bytes());
        Some(out.to_vec())
    }
}

/// A set of fake brokers, all on 127.0.0.1; they stop when dropped or when the runtime
/// driving them does.
pub struct FakeCluster {
    /// An extra answering broker, not listed in Metadata, to bootstrap from.
    pub bootstrap: String,
    _brokers: Vec<FakeBroker>,
}

impl FakeCluster {
    /// Starts `count` brokers of `kind` (ids 1..=count) on the current runtime.
    pub async fn start(kind: Kind, count: usize) -> Result<FakeCluster> {
        // Answering brokers list every broker's address, known only once all are bound.
        let script: Arc<OnceLock<Script>> = Arc::default();
        let answering_broker = || {
            let script = script.clone();
            FakeBroker::start_unrecorded(move |r: &Received| {
                script
                    .get()
                    .and_then(|s| s.respond(r.api_key, r.version, r.correlation_id, r.body.clone()))
                    .map_or(Reply::Close, Reply::Raw)
            })
        };
        let mut brokers = Vec::with_capacity(count + 1);
        let mut listed = Vec::with_capacity(count);
        let mut answering = Vec::new();
        for i in 0..count {
            let id = (i + 1) as i32;
            let address = match kind.behaviour(i) {
                Behaviour::Answer => {
                    answering.push(id);
                    let b = answering_broker().await;
                    let a = b.address.clone();
                    brokers.push(b);
                    a
                }
                Behaviour::Hang => {
                    // Reads on and never answers: TCP is alive, nothing answers.
                    let b = FakeBroker::start_unrecorded(|_: &Received| Reply::Hang).await;
                    let a = b.address.clone();
                    brokers.push(b);
                    a
                }
                Behaviour::Refuse => {
                    // A port that was just bound and released is closed: connections are
                    // refused.
                    let l =
                        std::net::TcpListener::bind("127.0.0.1:0").context("bind a fake broker")?;
                    l.local_addr()?.to_string()
                }
            };
            listed.push((id, address.parse::<SocketAddr>()?));
        }
        let _ = script.set(Script::new(&listed, &answering));
        let boot = answering_broker().await;
        let bootstrap = boot.address.clone();
        brokers.push(boot);
        Ok(FakeCluster {
            bootstrap,
            _brokers: brokers,
        })
    }
}
