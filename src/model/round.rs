//! What one round saw, as plain data. Probes produce these values; the health and verdict
//! stages read them. Nothing here does I/O, so every later stage can be tested with
//! hand-built observations.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Serialize;

/// A broker id as Kafka knows it (`node.id` / `broker.id`).
pub type BrokerId = i32;

/// A partition's replicas, ISR or offline replicas: inline up to four ids, so the usual
/// replication factors never allocate.
pub type BrokerList = smallvec::SmallVec<[BrokerId; 4]>;

/// A map keyed by broker id for per-partition hot loops. Ids are small trusted integers
/// from Kafka, so a multiply-shift hash replaces SipHash, which cost more than the work
/// around it at 200k partitions a round.
pub type IdMap<V> = std::collections::HashMap<BrokerId, V, std::hash::BuildHasherDefault<IdHasher>>;

pub type IdSet = std::collections::HashSet<BrokerId, std::hash::BuildHasherDefault<IdHasher>>;

#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 =
                (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    fn write_i32(&mut self, i: i32) {
        self.0 = (u64::from(i as u32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Values per broker for loops that look ids up millions of times a round (a tally per
/// replica of 2M partitions, per broker listed by a thousand answers): an id Kafka keeps
/// small indexes a table directly, where even `IdMap`'s hash was a third of the work; other
/// ids go through a map. Kept in the order ids were first seen.
#[derive(Debug, Clone, Default)]
pub struct IdTable<V> {
    /// Per small id: 0 for no slot yet, else its slot in `list` plus one.
    direct: Vec<u32>,
    index: IdMap<usize>,
    list: Vec<(BrokerId, V)>,
}

impl<V> IdTable<V> {
    const DIRECT: usize = 1 << 16;

    #[inline]
    fn slot(&self, id: BrokerId) -> Option<usize> {
        match usize::try_from(id) {
            Ok(i) if i < Self::DIRECT => self
                .direct
                .get(i)
                .filter(|s| **s != 0)
                .map(|s| *s as usize - 1),
            _ => self.index.get(&id).copied(),
        }
    }

    /// The value of `id`, if it has one.
    #[inline]
    pub fn get_mut(&mut self, id: BrokerId) -> Option<&mut V> {
        let slot = self.slot(id)?;
        Some(&mut self.list[slot].1)
    }

    /// Every id with its value, in the order the ids were first seen.
    pub fn into_list(self) -> Vec<(BrokerId, V)> {
        self.list
    }
}

impl<V: Default> IdTable<V> {
    /// The value of `id`, a default one first if it has none.
    #[inline]
    pub fn entry(&mut self, id: BrokerId) -> &mut V {
        let slot = match self.slot(id) {
            Some(s) => s,
            None => self.add(id),
        };
        &mut self.list[slot].1
    }

    #[cold]
    fn add(&mut self, id: BrokerId) -> usize {
        self.list.push((id, V::default()));
        let slot = self.list.len() - 1;
        match usize::try_from(id) {
            Ok(i) if i < Self::DIRECT => {
                if i >= self.direct.len() {
                    self.direct.resize(i + 1, 0);
                }
                self.direct[i] = self.list.len() as u32;
            }
            _ => {
                self.index.insert(id, slot);
            }
        }
        slot
    }
}

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
    /// The broker refused a whole request as not authorized (its ACLs deny the watchdog's
    /// principal, e.g. Describe on the cluster): an answer, and the watchdog's access.
    Authorization,
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
            FailureKind::Authorization => "authorization",
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
    /// The answer covers every topic (asked with a null topic list). False for an answer
    /// about some topics only: a topic it does not list may still exist.
    pub all_topics: bool,
}

impl MetadataView {
    /// Everything but the broker and topic lists, for building a filtered copy cheaply.
    pub fn clone_header(&self) -> MetadataView {
        MetadataView {
            cluster_id: self.cluster_id.clone(),
            controller_id: self.controller_id,
            brokers: Vec::new(),
            topics: BTreeMap::new(),
            has_leader_epochs: self.has_leader_epochs,
            has_offline_replicas: self.has_offline_replicas,
            version: self.version,
            all_topics: false,
        }
    }
}

/// A topic's id (Metadata v10+) as a number; 0 (Kafka's zero UUID) when the answer has none.
/// A topic deleted and created again under the same name gets a new id and starts its leader
/// epochs over, so answers about different ids are about different topics.
pub type TopicId = u128;

/// No topic id: Metadata below v10.
pub const NO_TOPIC_ID: TopicId = 0;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TopicView {
    pub name: String,
    /// `NO_TOPIC_ID` when the broker sent none. Not serialized: a u128 is no JSON number.
    #[serde(skip)]
    pub topic_id: TopicId,
    /// Topic-level Kafka error code (0 = none).
    pub error_code: i16,
    pub is_internal: bool,
    #[serde(serialize_with = "serialize_partitions")]
    pub partitions: Partitions,
}

/// A topic's partitions, in partition order. Shared, not copied: the merged view takes the
/// list of the answer it trusts for a topic (nearly always every answer agrees), and copying
/// millions of partitions a round cost more than deciding anything about them.
pub type Partitions = std::sync::Arc<Vec<PartitionView>>;

pub fn serialize_partitions<S: serde::Serializer>(p: &Partitions, s: S) -> Result<S::Ok, S::Error> {
    p[..].serialize(s)
}

#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub struct PartitionView {
    pub partition: i32,
    /// Partition-level Kafka error code: 5 LEADER_NOT_AVAILABLE for an offline partition,
    /// 9 REPLICA_NOT_AVAILABLE when some replica is offline.
    pub error_code: i16,
    /// `NO_LEADER` (-1) when the partition has no leader.
    pub leader: BrokerId,
    /// -1 when unknown (Metadata below v7).
    pub leader_epoch: i32,
    pub replicas: BrokerList,
    pub isr: BrokerList,
    pub offline_replicas: BrokerList,
}

// By hand: SmallVec's own Clone pushes element by element; ids are Copy, so a slice copy
// is a memcpy, and the merge clones one of these per partition per round.
impl Clone for PartitionView {
    fn clone(&self) -> Self {
        PartitionView {
            partition: self.partition,
            error_code: self.error_code,
            leader: self.leader,
            leader_epoch: self.leader_epoch,
            replicas: BrokerList::from_slice(&self.replicas),
            isr: BrokerList::from_slice(&self.isr),
            offline_replicas: BrokerList::from_slice(&self.offline_replicas),
        }
    }
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

// Host mode's observations: what a look at a broker's own host saw. Plain data like the
// rest of this file; `host` fills it in from /proc, the verdict and outputs read it.

/// What host mode saw of one broker in one round.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostObservation {
    pub broker: BrokerId,
    /// How the process is looked for, in words.
    pub locator: String,
    /// `None`: no process found (`not_found` says why), or the look failed (`error`).
    pub process: Option<ProcessSeen>,
    pub not_found: Option<String>,
    /// The look itself failed (timed out): nothing is known of the process this round.
    pub error: Option<String>,
    /// Something worth knowing about the lookup (several candidates).
    pub locate_note: Option<String>,
    pub ports: Vec<PortSeen>,
    /// Why the TCP tables could not be read, if they could not.
    pub ports_error: Option<String>,
    pub log_dirs: Vec<LogDirSeen>,
    pub log_dir_min_free_ratio: f64,
}

impl HostObservation {
    /// A look at `broker` before anything was seen: no process, ports or log dirs yet.
    pub fn unseen(broker: BrokerId, locator: String, log_dir_min_free_ratio: f64) -> Self {
        HostObservation {
            broker,
            locator,
            process: None,
            not_found: None,
            error: None,
            locate_note: None,
            ports: Vec::new(),
            ports_error: None,
            log_dirs: Vec::new(),
            log_dir_min_free_ratio,
        }
    }

    /// The process was looked for and is not there.
    pub fn process_gone(&self) -> bool {
        self.process.is_none() && self.error.is_none()
    }

    /// Log directories below the configured free-space ratio.
    pub fn low_log_dirs(&self) -> impl Iterator<Item = &LogDirSeen> {
        self.log_dirs.iter().filter(|d| {
            d.free_ratio
                .is_some_and(|r| r < self.log_dir_min_free_ratio)
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessSeen {
    pub pid: u32,
    pub state: ProcessState,
    pub threads: u32,
    /// Threads in uninterruptible wait (D); `None` when the thread list is unreadable.
    pub threads_in_io_wait: Option<u32>,
    /// utime + stime.
    pub cpu_seconds: f64,
    /// Whether CPU time grew since the last round; `None` at the first look at this process.
    pub cpu_advancing: Option<bool>,
    pub open_fds: Option<u64>,
    /// Why the descriptors could not be counted.
    pub open_fds_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortSeen {
    /// As configured: `9092` or `127.0.0.11:9092`.
    pub port: String,
    pub listening: bool,
    /// Whether the listening socket is one of the process's descriptors; `None` when that
    /// cannot be told (descriptors unreadable, no process, or nothing listens).
    pub owned_by_process: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogDirSeen {
    pub path: String,
    pub total_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    pub free_ratio: Option<f64>,
    pub error: Option<String>,
}

/// A process (or thread) state as the kernel reports it in the third field of `stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessState {
    /// R: on a CPU or waiting for one.
    Running,
    /// S: waiting for an event (a JVM's main thread is nearly always here).
    Sleeping,
    /// D: uninterruptible wait, almost always I/O (a hung disk or NFS server).
    DiskSleep,
    /// T: stopped by a job-control signal (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU).
    Stopped,
    /// t: stopped by a debugger (ptrace).
    Traced,
    /// Z: exited, not yet reaped by its parent. Its sockets are closed.
    Zombie,
    /// X: being torn down.
    Dead,
    /// I: an idle kernel thread; never a broker, kept so that no code is "unknown".
    Idle,
    /// Any other code (W, P, K on old or unusual kernels).
    Other,
}

impl ProcessState {
    pub const ALL: [ProcessState; 9] = [
        ProcessState::Running,
        ProcessState::Sleeping,
        ProcessState::DiskSleep,
        ProcessState::Stopped,
        ProcessState::Traced,
        ProcessState::Zombie,
        ProcessState::Dead,
        ProcessState::Idle,
        ProcessState::Other,
    ];

    pub fn from_code(code: char) -> Self {
        match code {
            'R' => ProcessState::Running,
            'S' => ProcessState::Sleeping,
            'D' => ProcessState::DiskSleep,
            'T' => ProcessState::Stopped,
            't' => ProcessState::Traced,
            'Z' => ProcessState::Zombie,
            'X' | 'x' => ProcessState::Dead,
            'I' => ProcessState::Idle,
            _ => ProcessState::Other,
        }
    }

    /// The metric label.
    pub fn as_label(self) -> &'static str {
        match self {
            ProcessState::Running => "running",
            ProcessState::Sleeping => "sleeping",
            ProcessState::DiskSleep => "disk_sleep",
            ProcessState::Stopped => "stopped",
            ProcessState::Traced => "traced",
            ProcessState::Zombie => "zombie",
            ProcessState::Dead => "dead",
            ProcessState::Idle => "idle",
            ProcessState::Other => "other",
        }
    }

    /// In an operator's words, for verdict evidence.
    pub fn words(self) -> &'static str {
        match self {
            ProcessState::Running => "running",
            ProcessState::Sleeping => "running (sleeping)",
            ProcessState::DiskSleep => "in uninterruptible I/O wait (D)",
            ProcessState::Stopped => "stopped by a signal (SIGSTOP or SIGTSTP)",
            ProcessState::Traced => "stopped by a debugger (traced)",
            ProcessState::Zombie => "exited, not yet reaped (zombie)",
            ProcessState::Dead => "dead",
            ProcessState::Idle => "idle",
            ProcessState::Other => "in an unusual state",
        }
    }

    /// Nothing of it runs: a signal or a debugger holds every thread.
    pub fn is_stopped(self) -> bool {
        matches!(self, ProcessState::Stopped | ProcessState::Traced)
    }

    /// It has exited; only its process table entry is left.
    pub fn has_exited(self) -> bool {
        matches!(self, ProcessState::Zombie | ProcessState::Dead)
    }
}

mod serde_secs {
    use serde::Serializer;
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

/// Everything the watchdog asked one broker directly this round.
#[derive(Debug, Clone, Serialize)]
pub struct BrokerProbe {
    pub endpoint: BrokerEndpoint,
    /// TCP connect latency, or why it failed.
    #[serde(with = "serde_result")]
    pub connect: Result<Duration, ProbeFailure>,
    /// ApiVersions latency; None when the connection failed first.
    #[serde(with = "serde_opt_result")]
    pub api_versions: Option<Result<Duration, ProbeFailure>>,
    /// Metadata latency and the broker's answer; None when an earlier step failed.
    #[serde(skip)]
    pub metadata: Option<Result<(MetadataView, Duration), ProbeFailure>>,
    /// DescribeCluster answer; None when not asked or not supported.
    #[serde(skip)]
    pub description: Option<Result<ClusterDescription, ProbeFailure>>,
    /// With TLS, the leaf certificate its listener presented this round.
    #[serde(skip)]
    pub certificate: Option<PeerCertificate>,
    /// Its log directories (DescribeLogDirs); None when not asked or not supported.
    #[serde(skip)]
    pub log_dirs: Option<Result<Vec<LogDirState>, ProbeFailure>>,
    /// Whether its ApiVersions answer announces DescribeQuorum: every KRaft broker does, a
    /// ZooKeeper-mode broker never; `None` when it did not answer ApiVersions.
    #[serde(skip)]
    pub speaks_quorum: Option<bool>,
}

/// One of a broker's log directories as it describes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogDirState {
    pub dir: String,
    /// 0, or 56 KAFKA_STORAGE_ERROR: Kafka took the directory offline.
    pub error_code: i16,
    /// From DescribeLogDirs v4 (Kafka 3.3).
    pub total_bytes: Option<u64>,
    pub usable_bytes: Option<u64>,
}

/// A broker listener's leaf certificate, as the TLS handshake received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCertificate {
    pub not_after: std::time::SystemTime,
    /// Its subject's common name (the whole name when it has none).
    pub subject: String,
    pub issuer: String,
    /// The name the handshake checked it against (`tls.server_name`, else the host).
    pub checked_name: String,
}

impl BrokerProbe {
    /// The connection opened (something listens and completed the handshake).
    pub fn tcp_open(&self) -> bool {
        self.connect.is_ok()
    }

    /// Every request sent this round was answered.
    pub fn answered(&self) -> bool {
        matches!(self.api_versions, Some(Ok(_))) && matches!(self.metadata, Some(Ok(_)))
    }

    /// The first failure of the round, if any.
    pub fn first_failure(&self) -> Option<(&'static str, &ProbeFailure)> {
        if let Err(f) = &self.connect {
            return Some(("connect", f));
        }
        if let Some(Err(f)) = &self.api_versions {
            return Some(("api_versions", f));
        }
        if let Some(Err(f)) = &self.metadata {
            return Some(("metadata", f));
        }
        None
    }

    pub fn metadata_view(&self) -> Option<&MetadataView> {
        match &self.metadata {
            Some(Ok((m, _))) => Some(m),
            _ => None,
        }
    }

    pub fn metadata_latency(&self) -> Option<Duration> {
        match &self.metadata {
            Some(Ok((_, d))) => Some(*d),
            _ => None,
        }
    }
}

/// Per topic, per partition: its eligible leader replicas (KIP-966), only for partitions that
/// have some. Read with DescribeTopicPartitions, for the few partitions that can need them.
pub type EligibleLeaders = BTreeMap<String, BTreeMap<i32, BrokerList>>;

/// One round of observations of one cluster.
#[derive(Debug, Clone)]
pub struct RoundObservation {
    pub cluster: String,
    /// When the round started.
    pub started_at: std::time::SystemTime,
    pub duration: Duration,
    /// Every broker probed this round, by id.
    pub probes: BTreeMap<BrokerId, BrokerProbe>,
    /// Bootstrap addresses that could not be used this round, with why (only when no broker
    /// id is known yet).
    pub bootstrap_failures: Vec<(String, ProbeFailure)>,
    /// Each topic's min.insync.replicas, where known.
    pub min_isr: BTreeMap<String, i32>,
    /// Topics known to have unclean.leader.election.enable=true. On the others (Kafka's
    /// default, and every topic whose setting could not be read) Kafka elects no leader from
    /// outside the ISR, so one that seems to be is an ISR change between rounds.
    pub unclean_allowed: std::collections::BTreeSet<String>,
    /// Eligible leader replicas (KIP-966, Kafka 4.x), where this round read any.
    pub eligible_leaders: EligibleLeaders,
    /// Host mode: what this host shows of the brokers that run on it (empty without).
    pub host: BTreeMap<BrokerId, HostObservation>,
    /// Answering brokers missing from ISRs: how far their logs are, so the verdict can tell
    /// a broker out of every ISR that catches up from one that is stuck.
    pub followers: BTreeMap<BrokerId, FollowerProgress>,
    /// The continuous liveness check's facts about every broker it watches, as of the end
    /// of the round (empty when it is off).
    pub liveness: BTreeMap<BrokerId, LivenessFact>,
    /// The newest look at the KRaft control plane (DescribeQuorum); `None` when nothing
    /// speaks it (ZooKeeper mode) or no look was made.
    pub quorum: Option<std::sync::Arc<QuorumObservation>>,
    /// The newest look at the group coordinators, when they are probed.
    pub coordinators: Option<std::sync::Arc<CoordinatorObservation>>,
    /// Brokers the cluster listed this round that the watchdog does not watch: it watches
    /// at most `observe::probe::MAX_BROKERS` per cluster.
    pub brokers_unwatched: usize,
}

/// One replica's position: its own log end offset and its leader's high watermark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaOffsets {
    pub log_end: i64,
    /// None when the leader did not answer for this partition.
    pub leader_high_watermark: Option<i64>,
}

/// What one round measured of a broker that is out of every ISR.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FollowerProgress {
    /// Per (topic, partition) it replicates, as far as measured.
    pub offsets: BTreeMap<(String, i32), ReplicaOffsets>,
    /// Partitions ("t", 0) an ongoing reassignment is adding it to; None when that could not
    /// be asked (no answer, not authorized, a broker without ListPartitionReassignments).
    /// Kafka does not count a replica being added as under-replicated, and neither does the
    /// health check.
    pub adding_to: Option<Vec<(String, i32)>>,
    /// Partitions the round's metadata had it missing from the ISR of, which a second read
    /// after the reassignment listing shows it back in the ISR of, or no longer a replica
    /// of: the first read caught a change in flight (a reassignment that completed between
    /// the two reads lists nothing). The newer read is the one judged.
    pub settled: Vec<(String, i32)>,
    /// Partitions it is missing from the ISR of whose replication the operator throttles:
    /// the topic's `follower.replication.throttled.replicas` lists this replica, or its
    /// `leader.replication.throttled.replicas` lists the partition's leader (either as `*`).
    /// That is how `kafka-reassign-partitions --throttle` moves data, and Kafka throttles
    /// a replica that falls behind even after it joined the ISR, so one drops out of the
    /// ISR during a throttled move without anything being wrong.
    pub throttled: Vec<(String, i32)>,
    /// Why some or all of it could not be measured.
    pub errors: Vec<String>,
}

// The continuous liveness check's facts (`crate::observe::liveness` measures them; the verdict reads
// them): plain data with wall-clock times, so the verdict compares them with its own `now`.

/// What a fresh connection attempt beside a silent connection found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SideOutcome {
    /// The TCP handshake completed: something holds the port open.
    Accepted,
    /// Nothing listens.
    Refused,
    /// No handshake within the connect timeout: a full accept queue, or a host gone.
    TimedOut,
    /// Anything else (resolution, routing).
    Failed,
}

/// The last fresh connection attempt of the current silence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideConnect {
    #[serde(skip)]
    pub at: SystemTime,
    pub outcome: SideOutcome,
    pub after: Duration,
    pub detail: String,
}

/// A silence past the threshold that ended with an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Spell {
    #[serde(skip)]
    pub started: SystemTime,
    pub length: Duration,
}

/// What the liveness task of one broker knows, as data: times are wall-clock, so the pure
/// verdict compares them with its own `now`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LivenessFact {
    pub address: String,
    /// Silence beyond this is evidence (the floor, or the factor times its slowest recent
    /// answer, whichever is longer).
    pub threshold: Duration,
    /// The slowest of its recent answers.
    pub typical: Option<Duration>,
    pub last_latency: Option<Duration>,
    #[serde(skip)]
    pub last_answer_at: Option<SystemTime>,
    /// When the oldest request still without an answer was sent (or the connection that
    /// would carry it was opened); `None` while it answers.
    #[serde(skip)]
    pub waiting_since: Option<SystemTime>,
    /// Since when new connections are refused; `None` while one is accepted.
    #[serde(skip)]
    pub refused_since: Option<SystemTime>,
    pub refused_detail: String,
    /// The last fresh connection attempt of this silence.
    pub side: Option<SideConnect>,
    /// Some fresh connection of this silence was accepted: a later timed-out connect is
    /// the same process with its accept queue full, not a host gone.
    pub accepted_in_silence: bool,
    /// Silences past the threshold that ended, within the flapping window (`liveness::FLAP_WINDOW`).
    pub spells: Vec<Spell>,
    /// Stalls that ended with an answer, past the threshold or not, and no longer than
    /// `liveness::PAUSE_TOLERANCE_FLOORS` floors, within `liveness::PAUSE_MEMORY`: the broker's own
    /// record of pauses (GC, starvation), which a later silence is measured against.
    #[serde(skip)]
    pub pauses: Vec<Spell>,
    /// The median of its recent answer times (stalls left out).
    #[serde(skip)]
    pub median: Option<Duration>,
    /// While silent: how many times in a row the kernel has sent the oldest unanswered
    /// request again because the broker's host did not acknowledge it (TCP_INFO, read as
    /// the silence passed its threshold). Above 0 the request is lost on the way: a frozen
    /// process's kernel still acknowledges what it is sent.
    pub resent: u8,
}

impl LivenessFact {
    /// How long its oldest outstanding request has waited.
    pub fn silent_for(&self, now: SystemTime) -> Option<Duration> {
        self.waiting_since
            .map(|t| now.duration_since(t).unwrap_or_default())
    }

    /// Silent longer than its threshold.
    pub fn past_threshold(&self, now: SystemTime) -> bool {
        self.silent_for(now).is_some_and(|d| d >= self.threshold)
    }

    /// Its liveness says something by now: it answered, it refused, or it is silent past its
    /// threshold and a fresh connection beside it has been tried. Until then a one-shot
    /// look (`check`) has no liveness fact worth judging.
    pub fn settled(&self, now: SystemTime) -> bool {
        self.last_answer_at.is_some()
            || self.refused_since.is_some()
            || (self.past_threshold(now) && self.side.is_some())
    }

    /// It answered and is neither silent past its threshold nor refusing: a peer that can
    /// vouch for the watchdog's own network.
    pub fn answering(&self, now: SystemTime) -> bool {
        self.last_answer_at.is_some() && self.refused_since.is_none() && !self.past_threshold(now)
    }
}

mod serde_result {
    use super::ProbeFailure;
    use serde::{Serialize, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(
        r: &Result<Duration, ProbeFailure>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Out<'a> {
            ok: bool,
            seconds: Option<f64>,
            failure: Option<&'a ProbeFailure>,
        }
        match r {
            Ok(d) => Out {
                ok: true,
                seconds: Some(d.as_secs_f64()),
                failure: None,
            },
            Err(f) => Out {
                ok: false,
                seconds: None,
                failure: Some(f),
            },
        }
        .serialize(s)
    }
}

mod serde_opt_result {
    use super::ProbeFailure;
    use serde::Serializer;
    use std::time::Duration;

    pub fn serialize<S: Serializer>(
        r: &Option<Result<Duration, ProbeFailure>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match r {
            None => s.serialize_none(),
            Some(r) => super::serde_result::serialize(r, s),
        }
    }
}

// The KRaft control plane, as one look saw it (`observe::quorum` fills it in): the
// metadata log's Raft quorum as its leader describes it (DescribeQuorum, API 55), each
// controller asked directly, and whether the log's high watermark keeps moving. The
// active controller appends a no-op record every 500 ms on an idle cluster
// (`metadata.max.idle.interval.ms`, KIP-835), so a high watermark that stops under a
// stable leader is a frozen or wedged controller, never a quiet one.

/// A KRaft node id: a controller's or a broker's (`node.id`).
pub type NodeId = BrokerId;

/// One replica of the metadata log, as the quorum's leader describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplicaProgress {
    pub id: NodeId,
    /// -1 when the leader does not know it yet.
    pub log_end_offset: i64,
    /// How long before the answer the leader last had a fetch from it, on the leader's own
    /// clock (its own entry carries the answer's time), so no clock of the watchdog's is
    /// compared with Kafka's. `None`: DescribeQuorum below v1, or never fetched.
    pub last_fetch_ago: Option<Duration>,
    /// How long before the answer it was last caught up with the leader's log end.
    pub last_caught_up_ago: Option<Duration>,
}

/// The quorum as its leader describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuorumDescription {
    pub leader: NodeId,
    pub epoch: i32,
    pub high_watermark: i64,
    /// The voters (controllers), the leader among them.
    pub voters: Vec<ReplicaProgress>,
    /// Replicas that fetch without voting: the brokers.
    pub observers: Vec<ReplicaProgress>,
    /// Controller endpoints (`host:port`) by node id, where the answer has them (v2).
    pub endpoints: BTreeMap<NodeId, String>,
    /// The negotiated DescribeQuorum version: fetch times need v1 (Kafka 3.3+).
    pub version: i16,
}

impl QuorumDescription {
    pub fn voter(&self, id: NodeId) -> Option<&ReplicaProgress> {
        self.voters.iter().find(|v| v.id == id)
    }

    pub fn observer(&self, id: NodeId) -> Option<&ReplicaProgress> {
        self.observers.iter().find(|v| v.id == id)
    }
}

/// One answer to DescribeQuorum: only the leader describes the quorum; a controller that
/// does not lead says so (NOT_LEADER_OR_FOLLOWER), which still proves it answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "role")]
pub enum QuorumAnswer {
    Leader(QuorumDescription),
    NotLeader { error_code: i16 },
}

/// What one controller, asked directly on its own listener, did in one look.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControllerLook {
    /// As configured (`controllers:`) or learned.
    pub address: String,
    /// Its node id, when known: configured as `id@host:port`, learned from DescribeCluster
    /// on a controller (KIP-919, Kafka 3.7+) or from the quorum's endpoints (v2), or it
    /// answered as the leader.
    pub id: Option<NodeId>,
    /// How it answered, or why it did not.
    pub outcome: Result<ControllerRole, ProbeFailure>,
    /// The TCP connection was accepted this look (also when nothing answered after).
    pub accepted: bool,
    /// Since when it has not answered: the start of the first look of the current streak
    /// of failures; `None` while it answers.
    #[serde(skip)]
    pub failing_since: Option<SystemTime>,
    /// It accepted a connection in the current streak of failures (a frozen process keeps
    /// accepting until its queue is full, then connects time out: still the same process).
    pub accepted_in_streak: bool,
    /// It has accepted a connection or answered at least once since the watchdog started
    /// looking. A controller never reached is most likely behind a network policy (Strimzi
    /// lets only the cluster's own pods reach the controller port), not down.
    pub ever_reached: bool,
}

/// What a controller's answer said of its place in the quorum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ControllerRole {
    Leader,
    Follower,
}

/// One look at the quorum: the controllers asked directly, a broker asked (it forwards to
/// the active controller), the leader's description, and the high watermark's progress
/// across looks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuorumObservation {
    /// When the look started.
    #[serde(skip)]
    pub at: SystemTime,
    pub controllers: Vec<ControllerLook>,
    /// The broker asked (address) and how that went; `None` when no broker was asked.
    #[serde(serialize_with = "serialize_via")]
    pub via_broker: Option<(String, Result<(), ProbeFailure>)>,
    /// The leader's description, from this look's answers; `None` when no leader answered.
    pub description: Option<QuorumDescription>,
    /// The last leader any look saw, and when: when nothing answers now, this is the
    /// controller that led when it stopped.
    #[serde(skip)]
    pub last_leader: Option<(NodeId, i32, SystemTime)>,
    /// Since when the high watermark has not moved under the current leader and epoch;
    /// `None` while it moves (or before two looks at one leader compared it).
    #[serde(skip)]
    pub high_watermark_still_since: Option<SystemTime>,
    /// When the quorum last had a leader that answered with a moving high watermark (or
    /// the first look at a leader): how long the control plane has been out.
    #[serde(skip)]
    pub last_progress_at: Option<SystemTime>,
    /// The last look at which the high watermark had grown by more than the active
    /// controller's no-op records (one per 500 ms) could make it grow since the look
    /// before: the cluster's metadata changed, and brokers should have applied it.
    #[serde(skip)]
    pub metadata_changed_at: Option<SystemTime>,
    /// What the brokers asked say they have applied of the metadata log (ApiVersions);
    /// `None` when none of them says (before any answer, or a release that does not).
    pub metadata_applied: Option<AppliedMetadata>,
}

/// The furthest any asked broker has applied the metadata log, and since when. A KRaft
/// broker applies a record the active controller committed, and the active controller
/// commits one every 500 ms even on an idle cluster: while this grows, the quorum has a
/// working leader, whatever a DescribeQuorum forwarded through a broker says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AppliedMetadata {
    /// The highest offset a broker reported.
    pub offset: i64,
    /// The look that first saw this offset: how long the log has stood still since.
    #[serde(skip)]
    pub since: SystemTime,
}

impl QuorumObservation {
    /// Controllers are configured and not one of them has been reached since the watchdog
    /// started: the control plane is watched through the brokers only.
    pub fn controllers_never_reached(&self) -> bool {
        !self.controllers.is_empty() && self.controllers.iter().all(|c| !c.ever_reached)
    }

    /// A look that found nothing yet.
    pub fn empty(at: SystemTime) -> Self {
        QuorumObservation {
            at,
            controllers: Vec::new(),
            via_broker: None,
            description: None,
            last_leader: None,
            high_watermark_still_since: None,
            last_progress_at: None,
            metadata_changed_at: None,
            metadata_applied: None,
        }
    }

    /// The controller looked at directly with this id.
    pub fn controller(&self, id: NodeId) -> Option<&ControllerLook> {
        self.controllers.iter().find(|c| c.id == Some(id))
    }
}

fn serialize_via<S: serde::Serializer>(
    v: &Option<(String, Result<(), ProbeFailure>)>,
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Out<'a> {
        address: &'a str,
        ok: bool,
        failure: Option<&'a ProbeFailure>,
    }
    match v {
        None => s.serialize_none(),
        Some((address, r)) => Out {
            address,
            ok: r.is_ok(),
            failure: r.as_ref().err(),
        }
        .serialize(s),
    }
}

// ---- the group coordinator probe (`observe::coordinators`): per broker, the
// `__consumer_offsets` partitions (coordinator shards) it leads, whether its coordinator
// answered the probe's OffsetFetch for their synthetic groups, and how its other
// connection answered meanwhile ----

/// Kafka's coordinator error codes the probe keeps per shard.
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const NOT_COORDINATOR: i16 = 16;

/// How one probe of a broker's shards ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardProbe {
    /// Every group answered (errors, if any, are per shard).
    Answered { latency: Duration },
    /// No answer within the probe's deadline.
    Unanswered,
    /// The connection or the request failed otherwise (refused, closed, unsupported).
    Failed { kind: FailureKind, detail: String },
    /// The probe has not reached it yet.
    NotYet,
}

/// A shard whose group the coordinator answered with an error, and since when that error
/// has been its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardError {
    pub shard: i32,
    pub code: i16,
    pub since: SystemTime,
}

/// One broker as a group coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorLook {
    pub broker: BrokerId,
    pub address: String,
    /// The `__consumer_offsets` partitions the newest view says it leads.
    pub shards: Vec<i32>,
    pub last: ShardProbe,
    /// How fast its other connection answered ApiVersions while the probe waited; `None`
    /// when it did not answer within the deadline either.
    pub control_latency: Option<Duration>,
    /// Probes in a row that went unanswered while the other connection answered quickly:
    /// its coordinator is stuck while the broker works.
    pub unanswered_in_a_row: u32,
    /// When the first of those probes was sent.
    pub unanswered_since: Option<SystemTime>,
    /// Shards whose group got a coordinator error, with the error's start.
    pub errors: Vec<ShardError>,
}

/// One look at every broker's coordinator shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorObservation {
    pub at: SystemTime,
    /// `__consumer_offsets` partitions (Kafka's `offsets.topic.num.partitions`); 0 while
    /// the topic does not exist (no group has been used yet).
    pub offsets_partitions: u32,
    pub brokers: BTreeMap<BrokerId, CoordinatorLook>,
    /// The probe's deadline per request.
    pub timeout: Duration,
    /// Why nothing could be probed, when nothing could.
    pub blind: Option<String>,
    /// The transaction coordinator probe's newest look, when that probe is on.
    pub transactions: Option<TxnCoordinators>,
}

/// Kafka's answer to InitProducerId while the id's last transaction is still ending (its
/// markers not yet written).
pub const CONCURRENT_TRANSACTIONS: i16 = 51;

/// One look at every broker's transaction coordinator shards: per `__transaction_state`
/// partition, one empty transaction of a synthetic transactional id placed there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnCoordinators {
    pub at: SystemTime,
    /// `__transaction_state` partitions; 0 while no transactional producer has used the
    /// cluster (the first one creates the topic).
    pub partitions: u32,
    pub brokers: BTreeMap<BrokerId, CoordinatorLook>,
    pub blind: Option<String>,
}
