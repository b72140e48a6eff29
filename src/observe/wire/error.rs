//! Failures of a conversation with one broker, typed so that the probe stage can turn each one
//! into a bounded `FailureKind` label without parsing messages.

use std::fmt;
use std::io;
use std::time::Duration;

use kafka_protocol::error::ResponseError;

use crate::model::round::{FailureKind, ProbeFailure};

/// The step of the conversation that failed. Every failure names one, so that a log line says
/// whether a frozen broker stalled the TCP handshake, the negotiation or a later request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    Connect,
    Tls,
    ApiVersions,
    SaslHandshake,
    SaslAuthenticate,
    Metadata,
    DescribeCluster,
    DescribeConfigs,
    Produce,
    ElectLeaders,
    AlterPartitionReassignments,
    ListPartitionReassignments,
    ListOffsets,
    DescribeTopicPartitions,
    DescribeQuorum,
    OffsetFetch,
    DescribeLogDirs,
    InitProducerId,
    AddOffsetsToTxn,
    EndTxn,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Connect => "connect",
            Phase::Tls => "tls",
            Phase::ApiVersions => "api_versions",
            Phase::SaslHandshake => "sasl_handshake",
            Phase::SaslAuthenticate => "sasl_authenticate",
            Phase::Metadata => "metadata",
            Phase::DescribeCluster => "describe_cluster",
            Phase::DescribeConfigs => "describe_configs",
            Phase::Produce => "produce",
            Phase::ElectLeaders => "elect_leaders",
            Phase::AlterPartitionReassignments => "alter_partition_reassignments",
            Phase::ListPartitionReassignments => "list_partition_reassignments",
            Phase::ListOffsets => "list_offsets",
            Phase::DescribeTopicPartitions => "describe_topic_partitions",
            Phase::DescribeQuorum => "describe_quorum",
            Phase::OffsetFetch => "offset_fetch",
            Phase::DescribeLogDirs => "describe_log_dirs",
            Phase::InitProducerId => "init_producer_id",
            Phase::AddOffsetsToTxn => "add_offsets_to_txn",
            Phase::EndTxn => "end_txn",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("cannot resolve {address}: {detail}")]
    Unresolvable { address: String, detail: String },

    #[error("connection to {address} refused")]
    ConnectionRefused { address: String },

    #[error("no answer within {}ms during {phase}", limit.as_millis())]
    Timeout { phase: Phase, limit: Duration },

    #[error("connection closed during {phase}: {detail}")]
    ConnectionClosed { phase: Phase, detail: String },

    /// The connection was given up earlier: after a timeout a late answer could be taken for
    /// the answer to a later request, so nothing more is sent on it.
    #[error("{phase} not sent: connection abandoned after {cause}")]
    Abandoned { phase: Phase, cause: String },

    #[error("protocol error during {phase}: {detail}")]
    Protocol { phase: Phase, detail: String },

    #[error("broker supports no version of {phase} that this client speaks")]
    Unsupported { phase: Phase },

    /// The caller asked for something this client will not send (acks=0, an empty batch).
    /// Nothing went on the wire and the connection stays usable.
    #[error("{phase} not sent: {detail}")]
    InvalidRequest { phase: Phase, detail: String },

    #[error("{phase}: Kafka error {code} {}{}", kafka_error_name(*code), message_suffix(message))]
    Kafka {
        phase: Phase,
        code: i16,
        message: Option<String>,
    },

    #[error("TLS failure during {phase}: {detail}")]
    Tls { phase: Phase, detail: String },

    #[error("authentication failed during {phase}: {detail}")]
    Authentication { phase: Phase, detail: String },

    #[error("I/O error during {phase}: {source}")]
    Io {
        phase: Phase,
        #[source]
        source: io::Error,
    },
}

/// Kafka's "not authorized" error codes: topic, group, cluster, transactional id and
/// delegation token authorization failed.
pub fn is_authorization_code(code: i16) -> bool {
    matches!(code, 29 | 30 | 31 | 53 | 65)
}

fn message_suffix(message: &Option<String>) -> String {
    match message {
        Some(m) if !m.is_empty() => format!(": {m}"),
        _ => String::new(),
    }
}

impl WireError {
    pub fn kind(&self) -> FailureKind {
        match self {
            WireError::Unresolvable { .. } => FailureKind::Unresolvable,
            WireError::ConnectionRefused { .. } => FailureKind::ConnectionRefused,
            WireError::Timeout { .. } => FailureKind::Timeout,
            WireError::ConnectionClosed { .. } | WireError::Abandoned { .. } => {
                FailureKind::ConnectionClosed
            }
            // A refused request is a bug in the caller, not news about the broker; Protocol
            // is the closest label and is what an unencodable request already gives.
            WireError::Protocol { .. }
            | WireError::Unsupported { .. }
            | WireError::InvalidRequest { .. } => FailureKind::Protocol,
            WireError::Kafka { code, .. } if is_authorization_code(*code) => {
                FailureKind::Authorization
            }
            WireError::Kafka { .. } => FailureKind::KafkaError,
            WireError::Tls { .. } => FailureKind::Tls,
            WireError::Authentication { .. } => FailureKind::Authentication,
            WireError::Io { .. } => FailureKind::Io,
        }
    }

    pub fn to_failure(&self, after: Duration) -> ProbeFailure {
        ProbeFailure {
            kind: self.kind(),
            detail: self.to_string(),
            after,
        }
    }

    /// The step that failed; `None` before the first byte could be sent (resolution, refusal).
    pub fn phase(&self) -> Option<Phase> {
        match self {
            WireError::Unresolvable { .. } | WireError::ConnectionRefused { .. } => None,
            WireError::Timeout { phase, .. }
            | WireError::ConnectionClosed { phase, .. }
            | WireError::Abandoned { phase, .. }
            | WireError::Protocol { phase, .. }
            | WireError::Unsupported { phase }
            | WireError::InvalidRequest { phase, .. }
            | WireError::Kafka { phase, .. }
            | WireError::Tls { phase, .. }
            | WireError::Authentication { phase, .. }
            | WireError::Io { phase, .. } => Some(*phase),
        }
    }

    /// The Kafka error code when the broker answered with one for the whole request.
    pub fn kafka_code(&self) -> Option<i16> {
        match self {
            WireError::Kafka { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub(crate) fn protocol(phase: Phase, detail: impl Into<String>) -> Self {
        WireError::Protocol {
            phase,
            detail: detail.into(),
        }
    }

    /// An I/O error on an established connection. A peer that went away is told apart from a
    /// local failure, because only the first says something about the broker.
    pub(crate) fn from_io(phase: Phase, source: io::Error) -> Self {
        // After the handshake TLS can still fail, e.g. when the broker rejects the client
        // certificate with TLS 1.3, which surfaces on the first read.
        if let Some(tls) = super::security::rustls_error(&source) {
            return WireError::Tls {
                phase,
                detail: tls.to_string(),
            };
        }
        match source.kind() {
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::NotConnected => WireError::ConnectionClosed {
                phase,
                detail: if source.kind() == io::ErrorKind::UnexpectedEof {
                    "end of stream".to_owned()
                } else {
                    source.to_string()
                },
            },
            _ => WireError::Io { phase, source },
        }
    }
}

/// Kafka's own name for an error code (`REQUEST_TIMED_OUT`, `UNSUPPORTED_VERSION`, ...), so
/// that an operator can search for it in broker logs and documentation.
pub fn kafka_error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".to_owned(),
        Some(ResponseError::Unknown(_)) => "UNKNOWN_CODE".to_owned(),
        // The crate names its variants after Kafka's constants in camel case; Kafka's own
        // spelling is the same words in upper snake case.
        Some(known) => screaming_snake(&known.to_string()),
    }
}

fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kafka_spelling() {
        assert_eq!(kafka_error_name(7), "REQUEST_TIMED_OUT");
        assert_eq!(kafka_error_name(35), "UNSUPPORTED_VERSION");
        assert_eq!(kafka_error_name(58), "SASL_AUTHENTICATION_FAILED");
        assert_eq!(kafka_error_name(29), "TOPIC_AUTHORIZATION_FAILED");
        assert_eq!(kafka_error_name(30), "GROUP_AUTHORIZATION_FAILED");
        assert_eq!(kafka_error_name(31), "CLUSTER_AUTHORIZATION_FAILED");
        assert_eq!(kafka_error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(kafka_error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(kafka_error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(kafka_error_name(0), "NONE");
        assert_eq!(kafka_error_name(9999), "UNKNOWN_CODE");
        // The codes the partition requests hand back for the caller to classify.
        assert_eq!(kafka_error_name(19), "NOT_ENOUGH_REPLICAS");
        assert_eq!(kafka_error_name(20), "NOT_ENOUGH_REPLICAS_AFTER_APPEND");
        assert_eq!(kafka_error_name(41), "NOT_CONTROLLER");
        assert_eq!(kafka_error_name(74), "FENCED_LEADER_EPOCH");
        assert_eq!(kafka_error_name(75), "UNKNOWN_LEADER_EPOCH");
        assert_eq!(kafka_error_name(84), "ELECTION_NOT_NEEDED");
        assert_eq!(kafka_error_name(85), "NO_REASSIGNMENT_IN_PROGRESS");
    }

    #[test]
    fn failure_carries_kind_detail_and_wait() {
        let e = WireError::Kafka {
            phase: Phase::DescribeCluster,
            code: 31,
            message: Some("denied".into()),
        };
        let f = e.to_failure(Duration::from_millis(12));
        // Refused as not authorized: the watchdog's access, not a broker that failed.
        assert_eq!(f.kind, FailureKind::Authorization);
        assert_eq!(
            f.detail,
            "describe_cluster: Kafka error 31 CLUSTER_AUTHORIZATION_FAILED: denied"
        );
        assert_eq!(f.after, Duration::from_millis(12));
        let other = WireError::Kafka {
            phase: Phase::Metadata,
            code: -1,
            message: None,
        };
        assert_eq!(other.kind(), FailureKind::KafkaError);

        let t = WireError::Timeout {
            phase: Phase::ApiVersions,
            limit: Duration::from_millis(300),
        };
        assert_eq!(t.kind(), FailureKind::Timeout);
        assert_eq!(t.to_string(), "no answer within 300ms during api_versions");
    }
}
