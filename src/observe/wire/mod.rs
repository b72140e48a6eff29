//! A Kafka protocol client for exactly one broker, over a connection of its own.
//!
//! librdkafka picks whichever broker it likes for a request, so it cannot ask a given broker
//! what *it* believes, nor tell that one broker stopped answering. This module can: it opens
//! its own connection to the chosen address, negotiates versions, and sends Metadata,
//! DescribeCluster and DescribeConfigs with a deadline on every request, so a broker that
//! accepts TCP but never answers (a frozen JVM) shows up as a timeout instead of a hang.
//! It also writes straight to one broker (Produce), so that a stale leader that still
//! acknowledges writes is caught by name; asks one broker for the offsets of the replicas it
//! holds (ListOffsets), to tell a follower that catches up from one that is stuck; and drives
//! leader elections and partition reassignments.
//! TLS (rustls with the ring provider) and SASL PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512 /
//! OAUTHBEARER (OIDC client credentials) / AWS_MSK_IAM are supported through
//! [`WireOptions::security`].

mod certificate;
mod client;
mod compat;
mod connection;
mod convert;
mod error;
mod frame;
mod fuzzing;
mod groups;
mod guard;
mod log_dirs;
mod msk_iam;
mod oauth;
mod partitions;
mod produce;
mod quorum;
mod sasl;
mod scram;
mod security;
mod transactions;
mod versions;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_guard;
#[cfg(test)]
mod tests_partitions;
#[cfg(test)]
mod tests_security;

use std::time::Duration;

pub use certificate::remaining as certificate_remaining;
pub use client::{BrokerClient, OpenFailure, Opened};
pub use compat::{column_text, markdown_table, signals, Signal};
pub use convert::TopicConfigs;
pub use error::{kafka_error_name, Phase, WireError};
#[doc(hidden)]
pub use fuzzing::{
    decode_response_for_fuzzing, describe_log_dirs_for_fuzzing, describe_quorum_for_fuzzing,
    oauth_answer_for_fuzzing,
};
pub use kafka_protocol::protocol::VersionRange;
pub use msk_iam::{AwsIamSettings, AwsIdentity};
pub use oauth::{Token, TokenSource};
pub use partitions::{EligibleLeaderReplicas, LatestOffset, OngoingReassignment, PartitionOutcome};
pub use produce::ProduceAnswer;
pub use security::{trust_system_roots, SaslMechanism, SaslSettings, Security, TlsSettings};
pub use versions::SupportedVersions;

#[derive(Debug, Clone)]
pub struct WireOptions {
    /// Bounds name resolution plus the TCP handshake, and then the TLS handshake.
    pub connect_timeout: Duration,
    /// Bounds each request from the first byte sent to the last byte of its answer. The
    /// ApiVersions negotiation counts as one request even when it needs a second round trip.
    pub request_timeout: Duration,
    /// Sent in every request header; brokers log it and quotas may match on it.
    pub client_id: String,
    /// Answers announcing a larger frame are refused before anything is allocated for them.
    pub max_frame_bytes: usize,
    /// Plaintext, TLS, SASL or both, as Kafka's `security.protocol`.
    pub security: Security,
}

impl Default for WireOptions {
    fn default() -> Self {
        WireOptions {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            client_id: "kafka-watchdog".to_owned(),
            max_frame_bytes: 100 * 1024 * 1024,
            security: Security::Plaintext,
        }
    }
}

/// A freshly opened client and what opening it cost.
#[derive(Debug)]
pub struct Connected {
    pub client: BrokerClient,
    /// Resolution, TCP handshake and, with TLS, the TLS handshake.
    pub connect_latency: Duration,
    pub api_versions_latency: Duration,
    /// The SASL exchange, when the connection authenticates.
    pub sasl_latency: Option<Duration>,
    /// With TLS, the leaf certificate the broker presented.
    pub certificate: Option<crate::model::round::PeerCertificate>,
}

/// An answer and the time from sending the request to receiving the whole answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Timed<T> {
    pub value: T,
    pub latency: Duration,
}
