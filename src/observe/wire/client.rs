//! The requests the watchdog sends to one broker.

use std::time::Duration;

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, ApiKey, ApiVersionsRequest, ApiVersionsResponse,
    DescribeClusterRequest, DescribeConfigsRequest, DescribeLogDirsRequest, DescribeQuorumRequest,
    DescribeTopicPartitionsRequest, ElectLeadersRequest, ListOffsetsRequest,
    ListPartitionReassignmentsRequest, MetadataRequest, OffsetFetchRequest, ProduceRequest,
    TopicName,
};
use kafka_protocol::protocol::{Message, Request, StrBytes, VersionRange};
use tokio::time::Instant;

use super::connection::{open_tcp, Connection, Stream};
use super::convert::{self, TopicConfigs, DESCRIBE_CLUSTER_FENCED};
use super::error::{Phase, WireError};
use super::frame::leading_error_code;
use super::groups;
use super::guard;
use super::log_dirs;
use super::partitions::{self, EligibleLeaderReplicas, OngoingReassignment, PartitionOutcome};
use super::produce::{self, ProduceAnswer};
use super::quorum;
use super::security::SaslSettings;
use super::transactions;
use super::versions::SupportedVersions;
use super::{sasl, security};
use super::{Connected, Timed, WireOptions};
use crate::model::round::{ClusterDescription, MetadataView};
use crate::model::round::{PeerCertificate, QuorumAnswer};

/// Kafka's resource type for topics in config APIs.
const RESOURCE_TOPIC: i8 = 2;
const UNSUPPORTED_VERSION: i16 = 35;

/// One connection to one broker. Requests are sent one at a time (`&mut self`), each with its
/// own deadline. After a timeout or a transport failure the client refuses further requests
/// with [`WireError::Abandoned`]; open a new one to try again.
pub struct BrokerClient {
    address: String,
    conn: Connection,
    versions: SupportedVersions,
    session_lifetime: Option<Duration>,
}

impl std::fmt::Debug for BrokerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerClient")
            .field("address", &self.address)
            .field("api_versions", &self.versions.api_versions_version())
            .field("usable", &self.conn.is_usable())
            .finish()
    }
}

impl BrokerClient {
    /// The TCP socket of its connection (for TCP_INFO: what the kernel resent of it).
    pub fn socket_fd(&self) -> std::os::fd::RawFd {
        self.conn.raw_fd()
    }

    /// TCP connect (bounded by `connect_timeout`), the TLS handshake if configured (bounded
    /// by `connect_timeout` again), ApiVersions negotiation (bounded as a whole by
    /// `request_timeout`, even when it takes two round trips), then SASL if configured (each
    /// of its requests bounded by `request_timeout`).
    pub async fn connect(address: &str, opts: &WireOptions) -> Result<Connected, WireError> {
        Self::open(address, opts).await?.negotiate().await
    }

    /// The first half of [`connect`](Self::connect): only the transport (TCP, then TLS), so
    /// that a caller can record the connect latency even when the broker then fails to
    /// answer ApiVersions.
    pub async fn open(address: &str, opts: &WireOptions) -> Result<Opened, WireError> {
        Self::open_traced(address, opts).await.map_err(|f| f.error)
    }

    /// [`open`](Self::open), saying on failure whether the TCP connection had been accepted.
    pub async fn open_traced(address: &str, opts: &WireOptions) -> Result<Opened, OpenFailure> {
        let started = Instant::now();
        let tcp = open_tcp(address, opts.connect_timeout)
            .await
            .map_err(|error| OpenFailure { error, tcp: None })?;
        let (stream, certificate) = match opts.security.tls() {
            Some(tls) => {
                let tcp_latency = started.elapsed();
                let (stream, leaf) = security::handshake(tcp, tls, address, opts.connect_timeout)
                    .await
                    .map_err(|error| OpenFailure {
                        error,
                        tcp: Some(tcp_latency),
                    })?;
                (Stream::Tls(Box::new(stream)), leaf)
            }
            None => (Stream::Plain(tcp), None),
        };
        Ok(Opened {
            address: address.to_owned(),
            conn: Connection::new(
                stream,
                &opts.client_id,
                opts.max_frame_bytes,
                opts.request_timeout,
            ),
            sasl: opts.security.sasl().cloned(),
            connect_latency: started.elapsed(),
            certificate,
        })
    }

    /// The address this client was opened with.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// What the broker announced, and the versions used as a result.
    pub fn versions(&self) -> &SupportedVersions {
        &self.versions
    }

    /// How long the broker keeps the SASL session; it closes the connection after that
    /// (KIP-368), so a client kept across rounds should be reopened before then.
    pub fn session_lifetime(&self) -> Option<Duration> {
        self.session_lifetime
    }

    /// False once a failure left the connection unusable.
    pub fn is_usable(&self) -> bool {
        self.conn.is_usable()
    }

    /// ApiVersions again on this connection, at the version negotiated: the cheapest
    /// request every broker answers (the continuous liveness check, `liveness`). Returns
    /// how long the answer took.
    pub async fn ping(&mut self) -> Result<Duration, WireError> {
        self.api_versions_again().await.map(|a| a.latency)
    }

    /// The offset of the last metadata record this broker has applied, from ApiVersions:
    /// from v3 on the answer carries `FinalizedFeaturesEpoch`, which a KRaft broker sets to
    /// the offset its metadata image reaches (`KRaftMetadataCache.features`). The active
    /// controller commits a record every 500 ms, so the number grows while the control
    /// plane works and the broker applies it. `None` below v3 or when the broker says -1.
    pub async fn applied_metadata_offset(&mut self) -> Result<Option<i64>, WireError> {
        let version = self.versions.api_versions_version();
        let answer = self.api_versions_again().await?;
        let epoch = answer.value.finalized_features_epoch;
        Ok((version >= 3 && epoch >= 0).then_some(epoch))
    }

    async fn api_versions_again(&mut self) -> Result<Timed<ApiVersionsResponse>, WireError> {
        let version = self.versions.api_versions_version();
        let answer = self
            .conn
            .call(Phase::ApiVersions, &ping_request(), version)
            .await?;
        if answer.value.error_code != 0 {
            return Err(WireError::Kafka {
                phase: Phase::ApiVersions,
                code: answer.value.error_code,
                message: None,
            });
        }
        Ok(answer)
    }

    /// Metadata for no topics: about as cheap as ApiVersions, and it lists the brokers this
    /// one sees registered (in KRaft: and unfenced), so a peer fenced or gone is news on the
    /// liveness connection itself. Brokers below Metadata v1 (where an empty topic list
    /// still means every topic) get ApiVersions, and no list. Returns how long the answer
    /// took and the listed broker ids.
    pub async fn ping_registered(
        &mut self,
    ) -> Result<(Duration, Option<Vec<crate::model::round::BrokerId>>), WireError> {
        match self.versions.for_request::<MetadataRequest>() {
            Some(v) if v >= 1 => {
                let answer = self.metadata(Some(&[])).await?;
                let ids = answer.value.brokers.iter().map(|b| b.id).collect();
                Ok((answer.latency, Some(ids)))
            }
            _ => self.ping().await.map(|l| (l, None)),
        }
    }

    /// This broker's view of the cluster. `None` asks for all topics; `Some` for the named
    /// ones, which the broker may answer with a per-topic error. From Metadata v4 on the
    /// request forbids auto-creation; below that the broker's own setting decides.
    pub async fn metadata(
        &mut self,
        topics: Option<&[String]>,
    ) -> Result<Timed<MetadataView>, WireError> {
        let phase = Phase::Metadata;
        let version = self.version_for::<MetadataRequest>(phase)?;
        let request = metadata_request(topics, version);
        let Timed { value, latency } = self.conn.call(phase, &request, version).await?;
        if value.error_code != 0 {
            return Err(WireError::Kafka {
                phase,
                code: value.error_code,
                message: None,
            });
        }
        let mut view =
            convert::metadata_view(value, version).map_err(|d| WireError::protocol(phase, d))?;
        view.all_topics = topics.is_none();
        Ok(Timed {
            value: view,
            latency,
        })
    }

    /// The registered brokers, fenced ones included when the broker speaks DescribeCluster v2
    /// (Kafka 4.0+). `None` when the broker has no DescribeCluster at all (before Kafka 2.8).
    pub async fn describe_cluster(
        &mut self,
    ) -> Result<Option<Timed<ClusterDescription>>, WireError> {
        let phase = Phase::DescribeCluster;
        let Some(version) = self.versions.for_request::<DescribeClusterRequest>() else {
            return Ok(None);
        };
        let request = DescribeClusterRequest::default()
            .with_include_fenced_brokers(version >= DESCRIBE_CLUSTER_FENCED);
        let answer = self.conn.call(phase, &request, version).await?;
        cluster_answer(phase, answer, version).map(Some)
    }

    /// The metadata log's quorum as its leader describes it (DescribeQuorum, API 55): from
    /// a broker, which forwards it to the active controller, or from a controller, which
    /// describes it when it leads and says it does not otherwise. A whole-answer Kafka
    /// error is a [`WireError::Kafka`]; a broker without the API (ZooKeeper mode, Kafka
    /// before 2.8) gives [`WireError::Unsupported`].
    pub async fn describe_quorum(&mut self) -> Result<Timed<QuorumAnswer>, WireError> {
        let phase = Phase::DescribeQuorum;
        let version = self.version_for::<DescribeQuorumRequest>(phase)?;
        let Timed { value, latency } = self.conn.call(phase, &quorum::request(), version).await?;
        match quorum::answer(value, version).map_err(|d| WireError::protocol(phase, d))? {
            Ok(answer) => Ok(Timed {
                value: answer,
                latency,
            }),
            Err(code) => Err(WireError::Kafka {
                phase,
                code,
                message: None,
            }),
        }
    }

    /// The controllers of the cluster, asked of a controller (DescribeCluster v1+ with the
    /// controller endpoint type, KIP-919, Kafka 3.7+). `None` when this node has no
    /// DescribeCluster v1; a broker refuses the controller endpoint type with a Kafka
    /// error.
    pub async fn describe_controllers(
        &mut self,
    ) -> Result<Option<Timed<ClusterDescription>>, WireError> {
        let phase = Phase::DescribeCluster;
        let Some(version) = self
            .versions
            .for_request::<DescribeClusterRequest>()
            .filter(|v| *v >= 1)
        else {
            return Ok(None);
        };
        let request =
            DescribeClusterRequest::default().with_endpoint_type(quorum::CONTROLLER_ENDPOINTS);
        let answer = self.conn.call(phase, &request, version).await?;
        cluster_answer(phase, answer, version).map(Some)
    }

    /// The given config keys of each topic (all keys when `keys` is empty), or the Kafka error
    /// code the broker gave for a topic. Sensitive values, which brokers withhold, are absent.
    pub async fn describe_topic_configs(
        &mut self,
        topics: &[String],
        keys: &[&str],
    ) -> Result<Timed<TopicConfigs>, WireError> {
        let phase = Phase::DescribeConfigs;
        let version = self.version_for::<DescribeConfigsRequest>(phase)?;
        let keys: Option<Vec<StrBytes>> = (!keys.is_empty()).then(|| {
            keys.iter()
                .map(|k| StrBytes::from_string((*k).to_owned()))
                .collect()
        });
        let resources = topics
            .iter()
            .map(|t| {
                DescribeConfigsResource::default()
                    .with_resource_type(RESOURCE_TOPIC)
                    .with_resource_name(StrBytes::from_string(t.clone()))
                    .with_configuration_keys(keys.clone())
            })
            .collect();
        let request = DescribeConfigsRequest::default().with_resources(resources);
        let Timed { value, latency } = self.conn.call(phase, &request, version).await?;
        Ok(Timed {
            value: convert::topic_configs(value),
            latency,
        })
    }

    /// The eligible leader replicas (KIP-966, Kafka 4.x) of the partitions of `topics` that
    /// have any. They are in DescribeTopicPartitions only, not in Metadata. `None` when the
    /// broker has no DescribeTopicPartitions (ZooKeeper mode, Kafka before 3.8). The broker
    /// pages its answer; at most `max_pages` requests are sent, each bounded by the request
    /// timeout, and the latency is their sum.
    pub async fn eligible_leader_replicas(
        &mut self,
        topics: &[String],
        max_pages: usize,
    ) -> Result<Option<Timed<Vec<EligibleLeaderReplicas>>>, WireError> {
        let phase = Phase::DescribeTopicPartitions;
        let Some(version) = self
            .versions
            .for_request::<DescribeTopicPartitionsRequest>()
        else {
            return Ok(None);
        };
        let mut found = Vec::new();
        let mut latency = Duration::ZERO;
        let mut cursor = None;
        for _ in 0..max_pages.max(1) {
            let request = partitions::describe_partitions_request(topics, cursor);
            let answer = self.conn.call(phase, &request, version).await?;
            latency += answer.latency;
            let (page, next) = partitions::eligible_leader_replicas(answer.value);
            found.extend(page);
            cursor = next;
            if cursor.is_none() {
                break;
            }
        }
        Ok(Some(Timed {
            value: found,
            latency,
        }))
    }

    /// Writes `records` as one batch to one partition *of this broker*, whatever the cluster
    /// thinks of its leadership: a broker that is no longer leader but still acknowledges
    /// writes is what this exposes. The partition's error code comes back in the answer, not
    /// as an `Err`.
    ///
    /// `acks` is 1 (the leader's own log) or -1 (all in-sync replicas); `timeout` is how long
    /// the broker may wait for those replicas, so the answer is awaited for `timeout` plus the
    /// request timeout. acks=0 is refused: the broker sends no answer to it, so it could tell
    /// nothing about the broker.
    pub async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        acks: i16,
        timeout: Duration,
        records: &[(Option<Vec<u8>>, Vec<u8>)],
    ) -> Result<Timed<ProduceAnswer>, WireError> {
        let phase = Phase::Produce;
        if acks == 0 {
            return Err(WireError::InvalidRequest {
                phase,
                detail: "acks=0 gets no answer from the broker; use acks=1 or acks=-1".to_owned(),
            });
        }
        let version = self
            .versions
            .for_request_within::<ProduceRequest>(produce::PRODUCE_BY_NAME)
            .ok_or(WireError::Unsupported { phase })?;
        let batch = produce::encode_batch(records, produce::now_ms())
            .map_err(|detail| WireError::InvalidRequest { phase, detail })?;
        let (timeout_ms, limit) = self.broker_wait(timeout);
        let request = produce::request(topic, partition, acks, timeout_ms, batch);
        let Timed { value, latency } = self
            .conn
            .call_within(phase, &request, version, limit)
            .await?;
        let answer = produce::answer(value, topic, partition, version)
            .map_err(|d| WireError::protocol(phase, d))?;
        Ok(Timed {
            value: answer,
            latency,
        })
    }

    /// Asks for a preferred (`preferred`) or unclean leader election on the given partitions.
    /// KRaft brokers forward it to the active controller. Unclean elections need ElectLeaders
    /// v1 (Kafka 2.4+); a broker with only v0 gives [`WireError::Unsupported`]. A request-level
    /// error (v1+) is a [`WireError::Kafka`]; per-partition errors, ELECTION_NOT_NEEDED (84)
    /// included, come back in the answer.
    pub async fn elect_leaders(
        &mut self,
        preferred: bool,
        partitions: &[(String, i32)],
        timeout: Duration,
    ) -> Result<Timed<Vec<PartitionOutcome>>, WireError> {
        let phase = Phase::ElectLeaders;
        let version = if preferred {
            self.version_for::<ElectLeadersRequest>(phase)?
        } else {
            self.versions
                .for_request_within::<ElectLeadersRequest>(partitions::ELECT_WITH_TYPE)
                .ok_or(WireError::Unsupported { phase })?
        };
        let (timeout_ms, limit) = self.broker_wait(timeout);
        let request = partitions::elect_leaders_request(preferred, partitions, timeout_ms);
        let Timed { value, latency } = self
            .conn
            .call_within(phase, &request, version, limit)
            .await?;
        if version >= partitions::ELECT_TOP_LEVEL_ERROR && value.error_code != 0 {
            return Err(WireError::Kafka {
                phase,
                code: value.error_code,
                message: None,
            });
        }
        Ok(Timed {
            value: partitions::election_outcomes(value),
            latency,
        })
    }

    /// Starts reassignments to the given replica lists, or cancels the ongoing one where the
    /// list is `None`. A KRaft broker forwards it to the active controller; a ZooKeeper-mode
    /// broker that is not the controller answers NOT_CONTROLLER (41), a [`WireError::Kafka`]
    /// like every request-level error. Per-partition errors come back in the answer.
    pub async fn alter_partition_reassignments(
        &mut self,
        moves: &[(String, i32, Option<Vec<i32>>)],
        timeout: Duration,
    ) -> Result<Timed<Vec<PartitionOutcome>>, WireError> {
        let phase = Phase::AlterPartitionReassignments;
        let version = self.version_for::<AlterPartitionReassignmentsRequest>(phase)?;
        let (timeout_ms, limit) = self.broker_wait(timeout);
        let request = partitions::alter_reassignments_request(moves, timeout_ms);
        let Timed { value, latency } = self
            .conn
            .call_within(phase, &request, version, limit)
            .await?;
        if value.error_code != 0 {
            return Err(WireError::Kafka {
                phase,
                code: value.error_code,
                message: value.error_message.map(|m| m.to_string()),
            });
        }
        Ok(Timed {
            value: partitions::reassignment_outcomes(value),
            latency,
        })
    }

    /// The ongoing reassignments of the given partitions, or of all partitions for `None`.
    /// Partitions that are not being reassigned are absent from the answer. Routed and failing
    /// like [`alter_partition_reassignments`](Self::alter_partition_reassignments).
    pub async fn list_partition_reassignments(
        &mut self,
        topics: Option<&[(String, Vec<i32>)]>,
        timeout: Duration,
    ) -> Result<Timed<Vec<OngoingReassignment>>, WireError> {
        let phase = Phase::ListPartitionReassignments;
        let version = self.version_for::<ListPartitionReassignmentsRequest>(phase)?;
        let (timeout_ms, limit) = self.broker_wait(timeout);
        let request = partitions::list_reassignments_request(topics, timeout_ms);
        let Timed { value, latency } = self
            .conn
            .call_within(phase, &request, version, limit)
            .await?;
        if value.error_code != 0 {
            return Err(WireError::Kafka {
                phase,
                code: value.error_code,
                message: value.error_message.map(|m| m.to_string()),
            });
        }
        Ok(Timed {
            value: partitions::ongoing_reassignments(value),
            latency,
        })
    }

    /// The latest offset of many partitions in one request, per partition with its error
    /// code: the high watermarks of the partitions it leads, or with `own_replicas` the log
    /// end offsets of every replica it holds, follower or leader (Kafka's debugging replica id;
    /// it needs only Describe on the topics, as a consumer's ListOffsets does).
    pub async fn latest_offsets(
        &mut self,
        partitions: &[(String, i32)],
        own_replicas: bool,
    ) -> Result<Timed<Vec<partitions::LatestOffset>>, WireError> {
        let phase = Phase::ListOffsets;
        let version = self
            .versions
            .for_request_within::<ListOffsetsRequest>(partitions::LIST_OFFSETS_SINGLE)
            .ok_or(WireError::Unsupported { phase })?;
        let (timeout_ms, _) = self.broker_wait(self.conn.request_timeout());
        let request = partitions::latest_offsets_request(partitions, own_replicas, timeout_ms);
        let Timed { value, latency } = self.conn.call(phase, &request, version).await?;
        Ok(Timed {
            value: partitions::latest_offsets(value),
            latency,
        })
    }

    /// The committed offsets of consumer groups (OffsetFetch), answered by each group's
    /// coordinator: each group's error code, `None` for a group the answer left out. From
    /// v8 (Kafka 3.0) every group in one request; before that only the first of `groups`
    /// is asked ([`BrokerClient::groups_per_offset_fetch`]). Bounded by `limit`, not the
    /// request timeout: the coordinator probe keeps its own deadline.
    pub async fn fetch_group_offsets(
        &mut self,
        groups: &[String],
        limit: Duration,
    ) -> Result<Timed<Vec<(String, Option<i16>)>>, WireError> {
        let phase = Phase::OffsetFetch;
        let version = self
            .versions
            .for_request::<OffsetFetchRequest>()
            .filter(|v| *v >= groups::ALL_TOPICS)
            .ok_or(WireError::Unsupported { phase })?;
        let request = groups::request(groups, version);
        let Timed { value, latency } = self
            .conn
            .call_within(phase, &request, version, limit)
            .await?;
        Ok(Timed {
            value: groups::answer(value, groups, version),
            latency,
        })
    }

    /// One empty transaction for the transactional id `id` (InitProducerId, AddOffsetsToTxn
    /// of `group`, or of a group named `id`; EndTxn commit: see [`transactions`]), all
    /// within `limit`. The first error code a step answered, which ends the cycle, or
    /// `None` when the commit was accepted.
    pub async fn run_empty_transaction(
        &mut self,
        id: &str,
        group: Option<&str>,
        limit: Duration,
    ) -> Result<Timed<Option<i16>>, WireError> {
        let started = Instant::now();
        let deadline = started + limit;
        let left = || deadline.saturating_duration_since(Instant::now());
        let version = |phase: Phase, key: ApiKey, allowed: VersionRange| {
            self.versions
                .pick_within(key, allowed)
                .ok_or(WireError::Unsupported { phase })
        };
        let init_v = version(
            Phase::InitProducerId,
            ApiKey::InitProducerId,
            transactions::INIT_PRODUCER_ID,
        )?;
        let add_v = version(
            Phase::AddOffsetsToTxn,
            ApiKey::AddOffsetsToTxn,
            transactions::ADD_OFFSETS_TO_TXN,
        )?;
        let end_v = version(Phase::EndTxn, ApiKey::EndTxn, transactions::END_TXN)?;
        let done = |code: Option<i16>| Timed {
            value: code,
            latency: started.elapsed(),
        };
        let init = self
            .conn
            .call_within(
                Phase::InitProducerId,
                &transactions::init_producer_id(id),
                init_v,
                left(),
            )
            .await?
            .value;
        if init.error_code != 0 {
            return Ok(done(Some(init.error_code)));
        }
        let producer = (init.producer_id.0, init.producer_epoch);
        let added = self
            .conn
            .call_within(
                Phase::AddOffsetsToTxn,
                &transactions::add_offsets(id, group.unwrap_or(id), producer),
                add_v,
                left(),
            )
            .await?
            .value;
        if added.error_code != 0 {
            return Ok(done(Some(added.error_code)));
        }
        let ended = self
            .conn
            .call_within(
                Phase::EndTxn,
                &transactions::commit(id, producer),
                end_v,
                left(),
            )
            .await?
            .value;
        Ok(done((ended.error_code != 0).then_some(ended.error_code)))
    }

    /// The broker's log directories (DescribeLogDirs for no topic): each one's error code
    /// and, from v4, its total and usable bytes. `None` when the broker has no version of
    /// it this client speaks; a whole-answer error is a [`WireError::Kafka`].
    pub async fn describe_log_dirs(
        &mut self,
    ) -> Result<Option<Timed<Vec<crate::model::round::LogDirState>>>, WireError> {
        let phase = Phase::DescribeLogDirs;
        let Some(version) = self.versions.for_request::<DescribeLogDirsRequest>() else {
            return Ok(None);
        };
        let Timed { value, latency } = self.conn.call(phase, &log_dirs::request(), version).await?;
        match log_dirs::answer(value, version) {
            Ok(dirs) => Ok(Some(Timed {
                value: dirs,
                latency,
            })),
            Err(code) => Err(WireError::Kafka {
                phase,
                code,
                message: None,
            }),
        }
    }

    /// How many groups one OffsetFetch may ask about: all of them from v8, else one.
    pub fn groups_per_offset_fetch(&self) -> usize {
        match self.versions.for_request::<OffsetFetchRequest>() {
            Some(v) if v >= groups::BATCHED => usize::MAX,
            _ => 1,
        }
    }

    fn version_for<R: Request>(&self, phase: Phase) -> Result<i16, WireError> {
        self.versions
            .for_request::<R>()
            .ok_or(WireError::Unsupported { phase })
    }

    /// A broker-side wait as the request's `timeout_ms`, and the client-side deadline for the
    /// answer: the broker may use all of that wait before it starts answering, so the request
    /// timeout comes on top. Waits beyond what `timeout_ms` holds (about 24 days) are capped.
    fn broker_wait(&self, timeout: Duration) -> (i32, Duration) {
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        let capped = Duration::from_millis(ms.unsigned_abs().into());
        (ms, capped.saturating_add(self.conn.request_timeout()))
    }
}

/// Why [`BrokerClient::open_traced`] failed, and how long the TCP connect took when it was
/// accepted first: a broker that accepts and then never answers the TLS handshake is silent
/// like a plaintext one that never answers ApiVersions, not unreachable.
#[derive(Debug)]
pub struct OpenFailure {
    pub error: WireError,
    pub tcp: Option<Duration>,
}

/// A connection whose transport is up but which has not negotiated versions yet.
pub struct Opened {
    address: String,
    conn: Connection,
    sasl: Option<SaslSettings>,
    /// Resolution, TCP handshake and, with TLS, the TLS handshake.
    pub connect_latency: Duration,
    /// With TLS, the leaf certificate the broker presented.
    pub certificate: Option<PeerCertificate>,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened")
            .field("address", &self.address)
            .field("connect_latency", &self.connect_latency)
            .finish_non_exhaustive()
    }
}

impl Opened {
    /// The second half of [`BrokerClient::connect`]: ApiVersions, then SASL if configured.
    pub async fn negotiate(self) -> Result<Connected, WireError> {
        let Opened {
            address,
            mut conn,
            sasl,
            connect_latency,
            certificate,
        } = self;
        let (versions, api_versions_latency) = negotiate(&mut conn).await?;
        let (session_lifetime, sasl_latency) = match &sasl {
            Some(sasl) => {
                let started = Instant::now();
                let lifetime =
                    sasl::authenticate(&mut conn, &versions, sasl, security::host_of(&address))
                        .await?;
                (lifetime, Some(started.elapsed()))
            }
            None => (None, None),
        };
        tracing::debug!(
            address,
            api_versions = versions.api_versions_version(),
            connect_ms = connect_latency.as_millis() as u64,
            "connected to broker"
        );
        Ok(Connected {
            client: BrokerClient {
                address,
                conn,
                versions,
                session_lifetime,
            },
            connect_latency,
            api_versions_latency,
            sasl_latency,
            certificate,
        })
    }
}

fn metadata_request(topics: Option<&[String]>, version: i16) -> MetadataRequest {
    let topics = match topics {
        // v0 has no null list: there an empty list means all topics.
        None if version == 0 => Some(Vec::new()),
        None => None,
        Some(names) => Some(
            names
                .iter()
                .map(|n| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(n.clone()))))
                })
                .collect(),
        ),
    };
    MetadataRequest::default()
        .with_topics(topics)
        // A probe must never create a topic. Below v4 the field does not exist (the broker's
        // own setting decides) and the crate refuses to encode anything but its default.
        .with_allow_auto_topic_creation(version < 4)
}

/// ApiVersions as this client sends it: from v3 on a broker refuses an empty software name.
fn ping_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("kafka-watchdog"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")))
}

/// Sends ApiVersions at the highest version this client speaks. A broker that does not know
/// that version answers UNSUPPORTED_VERSION with a v0 body carrying its own range; the
/// request is then repeated once at the highest version both sides speak.
async fn negotiate(
    conn: &mut Connection,
) -> Result<(SupportedVersions, std::time::Duration), WireError> {
    let phase = Phase::ApiVersions;
    let started = Instant::now();
    let deadline = started + conn.request_timeout();
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("kafka-watchdog"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
    let ours = ApiVersionsRequest::VERSIONS;
    let mut version = ours.max;
    loop {
        let body = conn
            .round_trip(phase, &request, version, deadline, conn.request_timeout())
            .await?;
        if leading_error_code(&body) == Some(UNSUPPORTED_VERSION) {
            let fallback: ApiVersionsResponse = guard::decode(&body, 0).map_err(|d| {
                WireError::protocol(
                    phase,
                    format!("undecodable UNSUPPORTED_VERSION answer: {d}"),
                )
            })?;
            let theirs = api_versions_range(&fallback.api_keys);
            let common = theirs.intersect(&ours);
            if common.is_empty() || common.max >= version {
                // A broker that rejects a version it claims to speak would loop forever.
                return Err(WireError::protocol(
                    phase,
                    format!("broker rejected ApiVersions v{version} and announces v{theirs}"),
                ));
            }
            version = common.max;
            continue;
        }
        let response: ApiVersionsResponse = guard::decode(&body, version).map_err(|d| {
            WireError::protocol(phase, format!("undecodable v{version} answer: {d}"))
        })?;
        if response.error_code != 0 {
            return Err(WireError::Kafka {
                phase,
                code: response.error_code,
                message: None,
            });
        }
        let latency: Duration = started.elapsed();
        return Ok((
            SupportedVersions::from_response(&response, version),
            latency,
        ));
    }
}

/// The broker's ApiVersions range; v0 when it does not say, as every broker speaks v0.
fn api_versions_range(keys: &[ApiVersion]) -> VersionRange {
    keys.iter()
        .find(|k| k.api_key == ApiVersionsRequest::KEY)
        .map(|k| VersionRange {
            min: k.min_version,
            max: k.max_version,
        })
        .unwrap_or(VersionRange { min: 0, max: 0 })
}

/// A DescribeCluster answer: the whole request's Kafka error, or the brokers (or
/// controllers) it lists.
fn cluster_answer(
    phase: Phase,
    answer: Timed<kafka_protocol::messages::DescribeClusterResponse>,
    version: i16,
) -> Result<Timed<ClusterDescription>, WireError> {
    let Timed { value, latency } = answer;
    if value.error_code != 0 {
        return Err(WireError::Kafka {
            phase,
            code: value.error_code,
            message: value.error_message.map(|m| m.to_string()),
        });
    }
    let description =
        convert::cluster_description(value, version).map_err(|d| WireError::protocol(phase, d))?;
    Ok(Timed {
        value: description,
        latency,
    })
}
