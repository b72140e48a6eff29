//! What one round saw, as plain data. Probes produce these values; the health and verdict
//! stages read them. Nothing here does I/O, so every later stage can be tested with
//! hand-built observations.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

/// A broker id as Kafka knows it (`node.id` / `broker.id`).
pub type BrokerId = i32;

/// Kafka's "no broker" value, used for a partition without a leader.
pub const NO_LEADER: BrokerId = -1;

/// Where a broker says it can be reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrokerEndpoint {
    pub id: BrokerId,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

impl BrokerEndpoint {
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// Why a request to a broker did not produce an answer. The variants are the bounded label
/// values used in metrics (`as_label`); the detail string is for logs and `/status` only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// No answer within the deadline (a frozen broker: TCP accepted, nothing answered).
    Timeout,
    /// The port is closed: nothing listens (the process is gone or shut down).
    ConnectionRefused,
    /// The connection was reset or closed mid-request.
    ConnectionClosed,
    /// The host name did not resolve.
    Unresolvable,
    /// TLS handshake or certificate failure.
    Tls,
    /// SASL authentication failed.
    Authentication,
    /// The broker answered with something we could not decode, or an unsupported version.
    Protocol,
    /// The broker answered with a Kafka error code for the whole request.
    KafkaError,
    /// Any other I/O failure.
    Io,
}

impl FailureKind {
    pub fn as_label(self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::ConnectionRefused => "connection_refused",
            FailureKind::ConnectionClosed => "connection_closed",
            FailureKind::Unresolvable => "unresolvable",
            FailureKind::Tls => "tls",
            FailureKind::Authentication => "authentication",
            FailureKind::Protocol => "protocol",
            FailureKind::KafkaError => "kafka_error",
            FailureKind::Io => "io",
        }
    }
}

/// A failed request: what kind of failure, a human detail, and how long we waited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbeFailure {
    pub kind: FailureKind,
    pub detail: String,
    #[serde(with = "serde_secs")]
    pub after: Duration,
}

/// One broker's answer to Metadata: its own belief about the cluster. Two brokers may
/// disagree (a stale or isolated broker keeps an old leader and epoch).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MetadataView {
    pub cluster_id: Option<String>,
    /// The broker the answering broker names as controller. In KRaft this is a random live
    /// broker, not the active controller, so it is evidence of nothing but liveness.
    pub controller_id: Option<BrokerId>,
    /// Registered, unfenced brokers as this broker sees them.
    pub brokers: Vec<BrokerEndpoint>,
    pub topics: BTreeMap<String, TopicView>,
    /// Metadata v7+: `leader_epoch` is meaningful. Below that it is always -1.
    pub has_leader_epochs: bool,
    /// Metadata v5+: `offline_replicas` is meaningful. Below that it is always empty.
    pub has_offline_replicas: bool,
    /// The negotiated Metadata version.
    pub version: i16,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TopicView {
    pub name: String,
    /// Topic-level Kafka error code (0 = none).
    pub error_code: i16,
    pub is_internal: bool,
    pub partitions: Vec<PartitionView>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PartitionView {
    pub partition: i32,
    /// Partition-level Kafka error code: 5 LEADER_NOT_AVAILABLE for an offline partition,
    /// 9 REPLICA_NOT_AVAILABLE when some replica is offline.
    pub error_code: i16,
    /// `NO_LEADER` (-1) when the partition has no leader.
    pub leader: BrokerId,
    /// -1 when unknown (Metadata below v7).
    pub leader_epoch: i32,
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    pub offline_replicas: Vec<BrokerId>,
}

/// A broker's registration as the cluster sees it through DescribeCluster (v2 on Kafka 4.0+
/// also lists fenced brokers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RegisteredBroker {
    pub endpoint: BrokerEndpoint,
    pub fenced: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterDescription {
    pub cluster_id: String,
    pub controller_id: BrokerId,
    pub brokers: Vec<RegisteredBroker>,
    /// True when the answer came from DescribeCluster v2 with fenced brokers included, so a
    /// broker missing from `brokers` is really not registered.
    pub includes_fenced: bool,
}

mod serde_secs {
    use serde::Serializer;
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}
