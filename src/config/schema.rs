//! The one place where built-in defaults and allowed ranges live. Readers take a key's
//! name, range and default from these constants, so a message, a default and a check
//! can never disagree about a field.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use std::time::Duration;

use super::keys::{layered, Patterns};
use super::kinds::{
    HeartbeatFormat, LogFormat, LogLevel, SecurityProtocol, Severity, WebhookFormat,
};
pub(crate) use super::spec::{
    name_of, BoolSpec, ChoiceSpec, FloatSpec, IntSpec, ListSpec, TextSpec,
};

const DAY_SECS: u64 = 86_400;
/// Timeouts are bounded by the round interval anyway; this only keeps arithmetic sane.
const MAX_TIMEOUT_MS: u64 = 3_600_000;

// The keys a cluster shares with `defaults:`, each declared once: its constant, field,
// kind (name, range, default) and one-line meaning. See `keys::layered!` for what follows
// from a declaration, and docs/config.md for the reference rendered from them.

layered! {
    /// The timing keys at a cluster's top level, resolved (`ClusterConfig::timing`).
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct Timing;
    layer TimingLayer;
    picked TimingPicked;
    reload Cluster;
    diff Timing;
    keys {
        /// One probe round of every broker per interval.
        ROUND_INTERVAL round_interval: Duration = Secs(IntSpec { key: "round_interval_secs", default: 10, min: 1, max: 3600 }),
        /// Per broker connection; below the round interval.
        CONNECT_TIMEOUT connect_timeout: Duration = Millis(IntSpec { key: "connect_timeout_ms", default: 2000, min: 1, max: MAX_TIMEOUT_MS }),
        /// Per request and broker; below the round interval.
        REQUEST_TIMEOUT request_timeout: Duration = Millis(IntSpec { key: "request_timeout_ms", default: 3000, min: 1, max: MAX_TIMEOUT_MS }),
        /// How often topic configurations (min.insync.replicas) are read again.
        TOPIC_CONFIG_REFRESH topic_config_refresh: Duration = Secs(IntSpec { key: "topic_config_refresh_secs", default: 300, min: 1, max: DAY_SECS }),
        /// A broker gone from the metadata is still probed this long.
        FORGET_BROKER_AFTER forget_broker_after: Duration = Secs(IntSpec { key: "forget_broker_after_secs", default: 3600, min: 1, max: 30 * DAY_SECS }),
        /// Partition entries per round in full Metadata answers, over all brokers; beyond
        /// it only some brokers (at least three, in turn) are asked for every topic, the
        /// others for the canary topic only.
        // 600k: three full answers of 200k partitions, a round of about 60 ms.
        FULL_METADATA_BUDGET full_metadata_budget: u64 = Count(IntSpec { key: "full_metadata_partition_budget", default: 600_000, min: 1, max: 1_000_000_000 }),
    }
}

layered! {
    /// A cluster's `topics:` block, resolved.
    pub(crate) struct Topics;
    layer TopicsLayer;
    picked TopicsPicked;
    reload Cluster;
    keys {
        /// Topics looked at: regexes matched against whole topic names.
        TOPICS_INCLUDE include: Patterns = TopicPatterns(ListSpec { key: "include", default: &[".*"] }),
        /// Topics left out, even when included.
        TOPICS_EXCLUDE exclude: Patterns = TopicPatterns(ListSpec { key: "exclude", default: &[] }),
    }
}

layered! {
    /// A cluster's `canary:` block, resolved.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct CanaryConfig;
    layer CanaryLayer;
    picked CanaryPicked;
    reload Cluster;
    keys {
        /// Write to and read back from every broker's canary partition.
        CANARY_ENABLED enabled: bool = Flag(BoolSpec { key: "enabled", default: true }),
        /// The canary's topic: one partition per broker, led by that broker.
        CANARY_TOPIC topic: String = TopicName(TextSpec { key: "topic", default: "__kafka_watchdog_canary" }),
        /// Create, extend and reassign the canary topic.
        CANARY_MANAGE_TOPIC manage_topic: bool = Flag(BoolSpec { key: "manage_topic", default: true }),
        /// Unset: min(3, number of brokers), decided by the canary module.
        // Kafka stores a replication factor in an INT16.
        CANARY_REPLICATION_FACTOR replication_factor: Option<u16> = OptionalCount(IntSpec { key: "replication_factor", default: 0, min: 1, max: i16::MAX as u64 }),
        /// Unset: replication factor - 1, at least 1.
        CANARY_MIN_INSYNC_REPLICAS min_insync_replicas: Option<u16> = OptionalCount(IntSpec { key: "min_insync_replicas", default: 0, min: 1, max: i16::MAX as u64 }),
        /// Per canary write; below the cluster's round interval when the canary is enabled.
        CANARY_PRODUCE_TIMEOUT produce_timeout: Duration = Millis(IntSpec { key: "produce_timeout_ms", default: 5000, min: 1, max: MAX_TIMEOUT_MS }),
        /// One write to every canary partition this often, independent of the round.
        // 100 ms at least: each write is a produce request to the cluster.
        CANARY_INTERVAL interval: Duration = Millis(IntSpec { key: "interval_ms", default: 1000, min: 100, max: 60_000 }),
        /// A record acknowledged but not read back within this is lost.
        CANARY_LOST_AFTER lost_after: Duration = Secs(IntSpec { key: "lost_after_secs", default: 60, min: 1, max: DAY_SECS }),
        /// Write with acks=1 as well, to catch a stale leader.
        CANARY_ACKS1_PROBE acks1_probe: bool = Flag(BoolSpec { key: "acks1_probe", default: true }),
        /// The broker set must be stable this long before the canary topic is reassigned.
        CANARY_REASSIGN_STABLE reassign_stable: Duration = Secs(IntSpec { key: "reassign_stable_secs", default: 300, min: 0, max: 7 * DAY_SECS }),
        /// No second reassignment of the canary topic this soon after one (one whose
        /// request failed as a whole is tried again after 5 minutes, or this, if shorter).
        CANARY_REASSIGN_MIN_INTERVAL reassign_min_interval: Duration = Secs(IntSpec { key: "reassign_min_interval_secs", default: 3600, min: 0, max: 30 * DAY_SECS }),
        /// Run preferred leader elections for the canary topic.
        CANARY_ELECT_PREFERRED_LEADERS elect_preferred_leaders: bool = Flag(BoolSpec { key: "elect_preferred_leaders", default: false }),
    }
}

layered! {
    /// A cluster's `coordinators:` block, resolved: the probe of every group coordinator
    /// shard (issue 26).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct CoordinatorsConfig;
    layer CoordinatorsLayer;
    picked CoordinatorsPicked;
    reload Cluster;
    keys {
        /// Probe the group coordinator of every __consumer_offsets partition (OffsetFetch
        /// for one synthetic group each, `kafka-watchdog-probe-<instance_id>-<partition>-<n>`).
        COORDINATORS_GROUPS groups: bool = Flag(BoolSpec { key: "groups", default: true }),
        /// One probe of every coordinator this often.
        // Two unanswered probes in a row name a stuck coordinator: at 500 ms apart and a
        // 1 s deadline that is within 2.5 s of the fault (issue 26's goal: 3 s).
        COORDINATORS_INTERVAL interval: Duration = Millis(IntSpec { key: "interval_ms", default: 500, min: 100, max: 60_000 }),
        /// Each probe's deadline, and that of the ApiVersions sent beside it.
        COORDINATORS_TIMEOUT timeout: Duration = Millis(IntSpec { key: "timeout_ms", default: 1000, min: 100, max: 60_000 }),
        /// A coordinator error (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
        /// NOT_COORDINATOR) for a shard the broker leads is evidence once it lasts this long.
        // Loading a shard after a leadership change takes seconds; a minute is a coordinator
        // that does not come up.
        COORDINATORS_ERROR_GRACE error_grace: Duration = Secs(IntSpec { key: "error_grace_secs", default: 60, min: 0, max: DAY_SECS }),
        /// Probe the transaction coordinators of the __transaction_state partitions: empty
        /// transactions (InitProducerId, AddOffsetsToTxn, EndTxn) of a synthetic
        /// transactional id per partition, `kafka-watchdog-txn-<instance_id>-<partition>-<n>`.
        /// Off by default: it writes to __transaction_state and allocates a producer id per
        /// synthetic id (about 50), and needs the ACLs docs/install.md lists.
        COORDINATORS_TRANSACTIONS transactions: bool = Flag(BoolSpec { key: "transactions", default: false }),
        /// Each broker gets one probe transaction this often, its partitions in turn (two
        /// looks each; a partition in error every look).
        COORDINATORS_TRANSACTIONS_INTERVAL transactions_interval: Duration = Millis(IntSpec { key: "transactions_interval_ms", default: 1000, min: 200, max: 600_000 }),
        /// A shard whose probe transaction has not ended (the next InitProducerId answers
        /// CONCURRENT_TRANSACTIONS: its commit markers are not written) for this long names
        /// its coordinator stalled.
        // Markers take milliseconds; a coordinator that moved loads its shard and finishes
        // what was pending within seconds (COORDINATOR_LOAD_IN_PROGRESS meanwhile).
        COORDINATORS_TXN_STALL_GRACE txn_stall_grace: Duration = Millis(IntSpec { key: "txn_stall_grace_ms", default: 5000, min: 0, max: 3_600_000 }),
    }
}

layered! {
    /// A cluster's `certificates:` block, resolved: when a broker listener's TLS
    /// certificate is worth an incident (issue 26).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct CertificatesConfig;
    layer CertificatesLayer;
    picked CertificatesPicked;
    reload Cluster;
    keys {
        /// A broker certificate that expires within this many days is a warning incident.
        CERTIFICATES_WARNING warning_days: u64 = Count(IntSpec { key: "warning_days", default: 14, min: 0, max: 3650 }),
        /// Within this many days (or expired) it is a critical one.
        CERTIFICATES_CRITICAL critical_days: u64 = Count(IntSpec { key: "critical_days", default: 2, min: 0, max: 3650 }),
    }
}

layered! {
    /// The confirmation keys of a cluster's `verdict:` block as written. They are not
    /// resolved one by one: `VerdictConfig`'s two durations are made from them (the `_secs`
    /// key, else the deprecated round count with the round interval).
    #[derive(Clone, Debug, PartialEq)]
    pub(crate) struct Confirmation;
    layer ConfirmationLayer;
    picked ConfirmationPicked;
    reload Cluster;
    keys {
        /// Deprecated: write open_after_secs. Rounds in a row before an incident opens.
        VERDICT_OPEN_AFTER open_after_rounds: u64 = Count(IntSpec { key: "open_after_rounds", default: 2, min: 1, max: 1000 }),
        /// Deprecated: write resolve_after_secs. Clean rounds in a row before it resolves.
        VERDICT_RESOLVE_AFTER resolve_after_rounds: u64 = Count(IntSpec { key: "resolve_after_rounds", default: 3, min: 1, max: 1000 }),
        /// A finding's fact must hold this long before an incident opens.
        // A round's fact is first held at the second round that sees it; the liveness
        // facts carry their own start.
        VERDICT_OPEN_AFTER_SECS open_after_secs: Duration = Secs(IntSpec { key: "open_after_secs", default: 1, min: 0, max: DAY_SECS }),
        /// A finding must be absent this long before its incident resolves.
        // The third clean round at the default round interval, as `resolve_after_rounds: 3` was.
        VERDICT_RESOLVE_AFTER_SECS resolve_after_secs: Duration = Secs(IntSpec { key: "resolve_after_secs", default: 20, min: 0, max: DAY_SECS }),
    }
}

layered! {
    /// The other keys of a cluster's `verdict:` block, resolved (`VerdictConfig::keys`):
    /// read from the same mapping as `Confirmation`, after it.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct VerdictKeys;
    layer VerdictLayer;
    picked VerdictPicked;
    reload Cluster;
    keys {
        /// The continuous liveness check: ApiVersions to every broker this often; 0 turns it off.
        // A frozen broker is named between the floor and the floor plus one interval after
        // its fault: 400 ms keeps that page under 1.5 s (500 ms reached 1.50 s, issue 31).
        VERDICT_LIVENESS_INTERVAL liveness_interval: Duration = Millis(IntSpec { key: "liveness_interval_ms", default: 400, min: 0, max: 60_000 }),
        /// Silence below this is never evidence (above ordinary GC pauses).
        VERDICT_LIVENESS_FLOOR liveness_floor: Duration = Millis(IntSpec { key: "liveness_floor_ms", default: 1000, min: 100, max: 600_000 }),
        /// A broker this many times slower than the median of its peers is degraded.
        VERDICT_LATENCY_FACTOR latency_degraded_factor: f64 = Number(FloatSpec { key: "latency_degraded_factor", default: 5.0, above: 1.0, max: 1000.0 }),
        /// A broker down this recently that answers before it has registered is registering.
        VERDICT_RESTART_GRACE restart_grace: Duration = Secs(IntSpec { key: "restart_grace_secs", default: 120, min: 0, max: DAY_SECS }),
        /// A broker out of every ISR whose logs have not grown this long is a zombie.
        // Above the pauses of a throttled follower (a replication quota lets it fetch in bursts).
        VERDICT_CATCH_UP_WINDOW catch_up_window: Duration = Secs(IntSpec { key: "catch_up_window_secs", default: 60, min: 10, max: DAY_SECS }),
        /// A log directory a broker describes with less free space than this share is
        /// `log_dir_filling` (DescribeLogDirs v4, Kafka 3.3+).
        VERDICT_LOG_DIR_MIN_FREE_RATIO log_dir_min_free_ratio: f64 = Number(FloatSpec { key: "log_dir_min_free_ratio", default: 0.05, above: 0.0, max: 1.0 }),
        /// ...and so is one that will be full within this at its pace of the last 30 min
        /// (10 min of history at least); 0: no forecast.
        VERDICT_LOG_DIR_FULL_WITHIN log_dir_full_within: Duration = Secs(IntSpec { key: "log_dir_full_within_secs", default: 21_600, min: 0, max: 30 * DAY_SECS }),
        /// An open incident's state changes are counted over this window for flapping.
        VERDICT_FLAP_WINDOW flap_window: Duration = Secs(IntSpec { key: "flap_window_secs", default: 120, min: 10, max: DAY_SECS }),
        /// This many state changes within the window make an open incident flapping: its
        /// receivers hear it once and nothing more until it stops flapping or resolves.
        // Six changes are three bad spells in a row: more than a restart goes through.
        VERDICT_FLAP_START flap_start_changes: u64 = Count(IntSpec { key: "flap_start_changes", default: 6, min: 2, max: 1000 }),
        /// It stops flapping once this many changes or fewer are left in the window
        /// (below flap_start_changes).
        VERDICT_FLAP_STOP flap_stop_changes: u64 = Count(IntSpec { key: "flap_stop_changes", default: 2, min: 0, max: 999 }),
    }
}

// Host mode (`clusters[].host`): what the watchdog observes of the brokers on its own host,
// and the guarded remediation it may run for them.
pub(crate) const HOST_KEY: &str = "host";
/// `clusters[].labels`: static labels of a cluster, on its metrics and webhooks.
pub(crate) const LABELS_KEY: &str = "labels";
/// At most this many static labels per cluster.
pub(crate) const LABELS_MAX: usize = 16;
/// A label value is 1 to this many characters.
pub(crate) const LABEL_VALUE_MAX_CHARS: usize = 256;
pub(crate) const HOST_BROKERS_KEY: &str = "brokers";

layered! {
    /// The cluster-wide limits of a `host:` block (read from that block alone: host mode
    /// has no `defaults:`).
    #[derive(Clone, Debug, PartialEq)]
    pub(crate) struct HostLimits;
    layer HostLimitsLayer;
    picked HostLimitsPicked;
    reload Cluster;
    keys {
        /// A log directory with less free space than this is reported.
        HOST_LOG_DIR_MIN_FREE_RATIO log_dir_min_free_ratio: f64 = Number(FloatSpec { key: "log_dir_min_free_ratio", default: 0.05, above: 0.0, max: 1.0 }),
        /// No second remediation in this cluster this soon after one.
        HOST_REMEDIATION_COOLDOWN remediation_cooldown: Duration = Secs(IntSpec { key: "remediation_cooldown_secs", default: 1800, min: 0, max: 7 * DAY_SECS }),
        /// Remediations of this cluster in any 24 hours.
        HOST_REMEDIATION_MAX_PER_DAY remediation_max_per_day: u64 = Count(IntSpec { key: "remediation_max_per_day", default: 3, min: 1, max: 1000 }),
    }
}
pub(crate) const HOST_BROKER_ID: IntSpec = IntSpec {
    key: "id",
    default: 0,
    min: 0,
    max: i32::MAX as u64,
};
/// Exactly one of these finds a broker's process.
pub(crate) const HOST_PROCESS_SYSTEMD_UNIT: &str = "systemd_unit";
pub(crate) const HOST_PROCESS_PID_FILE: &str = "pid_file";
pub(crate) const HOST_PROCESS_CMDLINE_REGEX: &str = "cmdline_regex";
pub(crate) const HOST_LOG_DIRS_KEY: &str = "log_dirs";
pub(crate) const HOST_PORTS_KEY: &str = "ports";
pub(crate) const REMEDIATION_KEY: &str = "remediation";

// A remediation block's scalar keys, in two groups because the file (and "expected one
// of") lists them around `command` and `before_command`.
layered! {
    /// Whether a broker's remediation acts.
    #[derive(Clone, Debug, PartialEq)]
    pub(crate) struct RemediationSwitches;
    layer RemediationSwitchesLayer;
    picked RemediationSwitchesPicked;
    reload Cluster;
    keys {
        /// Run the command for a broker that stays a zombie.
        REMEDIATION_ENABLED enabled: bool = Flag(BoolSpec { key: "enabled", default: false }),
        /// Decide and report, never run.
        REMEDIATION_DRY_RUN dry_run: bool = Flag(BoolSpec { key: "dry_run", default: false }),
    }
}

layered! {
    /// When a broker's remediation acts, and how long its commands may take.
    #[derive(Clone, Debug, PartialEq)]
    pub(crate) struct RemediationTimes;
    layer RemediationTimesLayer;
    picked RemediationTimesPicked;
    reload Cluster;
    keys {
        /// A zombie this long before the command runs.
        REMEDIATION_ZOMBIE_FOR zombie_for: Duration = Secs(IntSpec { key: "zombie_for_secs", default: 120, min: 1, max: DAY_SECS }),
        /// The command is killed after this.
        REMEDIATION_TIMEOUT timeout: Duration = Secs(IntSpec { key: "timeout_secs", default: 300, min: 1, max: 3600 }),
        /// before_command is killed after this.
        REMEDIATION_BEFORE_TIMEOUT before_timeout: Duration = Secs(IntSpec { key: "before_timeout_secs", default: 60, min: 1, max: 3600 }),
    }
}
pub(crate) const REMEDIATION_COMMAND_KEY: &str = "command";
pub(crate) const REMEDIATION_BEFORE_COMMAND_KEY: &str = "before_command";
/// Words replaced in command arguments when a command runs.
pub(crate) const REMEDIATION_PLACEHOLDERS: &[&str] = &["{pid}", "{broker}", "{cluster}"];

// Top level.
/// The top-level `metrics:` block and its one key.
pub(crate) const METRICS_KEY: &str = "metrics";
pub(crate) const METRICS_CLUSTER_LABEL: &str = "cluster_label";
pub(crate) const METRICS_CLUSTER_LABEL_EXPECTED: &str =
    "a Prometheus label name (letters, digits, _), e.g. kafka_cluster";
pub(crate) const INSTANCE_ID_FALLBACK: &str = "kafka-watchdog";
pub(crate) const INSTANCE_ID_MAX_CHARS: usize = 128;
pub(crate) const HTTP_LISTEN_DEFAULT: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9644));
pub(crate) const HTTP_TLS_CERT_FILE: &str = "cert_file";
pub(crate) const HTTP_TLS_KEY_FILE: &str = "key_file";
pub(crate) const STATE_DIR_DEFAULT: &str = "/var/lib/kafka-watchdog";

// The `peers:` block (config::peers).
pub(crate) const PEERS_URLS: &str = "urls";
pub(crate) const PEERS_DNS: &str = "dns";
pub(crate) const PEERS_DNS_SCHEME: &str = "dns_scheme";
/// How the addresses of `peers.dns` are reached when `dns_scheme` is not written.
pub(crate) const PEERS_DNS_SCHEME_DEFAULT: &str = "http";
pub(crate) const PEERS_CA_FILE: &str = "ca_file";
/// The key every instance shares: it signs each answer and each ask (`alert::peers::auth`),
/// so an answer is taken only from a peer that holds it, and the `http.auth` credential
/// never leaves for a peer.
pub(crate) const PEERS_KEY: SecretKeys = SecretKeys {
    what: "peer key",
    inline: "key",
    inline_allowed: false,
    env: "key_env",
    file: "key_file",
};
/// Shorter keys can be guessed offline from one signed answer.
pub const PEERS_KEY_MIN_CHARS: usize = 32;
/// Each peer is asked this often for its silences and what it delivered.
pub(crate) const PEERS_POLL_INTERVAL: IntSpec = IntSpec {
    key: "poll_interval_ms",
    default: 1000,
    min: 100,
    max: 60_000,
};
/// A peer that has not answered this long is gone: the next in line sends. Also how long
/// each instance in line waits for those before it to deliver.
pub(crate) const PEERS_TAKEOVER: IntSpec = IntSpec {
    key: "takeover_secs",
    default: 10,
    min: 1,
    max: 600,
};

// The `heartbeat:` block (config::heartbeat).
/// A secret like a webhook's: a ping URL carries the check's token.
pub(crate) const HEARTBEAT_URL: SecretKeys = SecretKeys {
    what: "heartbeat URL",
    inline: "url",
    inline_allowed: true,
    env: "url_env",
    file: "url_file",
};
pub(crate) const HEARTBEAT_FORMAT: &str = "format";
pub(crate) const HEARTBEAT_FORMAT_DEFAULT: HeartbeatFormat = HeartbeatFormat::Healthchecks;
pub(crate) const HEARTBEAT_CA_FILE: &str = "ca_file";
/// One beat this often while the watchdog sees its clusters.
pub(crate) const HEARTBEAT_INTERVAL: IntSpec = IntSpec {
    key: "interval_secs",
    default: 60,
    min: 10,
    max: 3600,
};
/// Each beat's request must end within this (and within the interval).
pub(crate) const HEARTBEAT_TIMEOUT: IntSpec = IntSpec {
    key: "timeout_ms",
    default: 5000,
    min: 100,
    max: 60_000,
};

layered! {
    /// The `log:` block.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct LogConfig;
    layer LogLayer;
    picked LogPicked;
    reload Live;
    keys {
        /// Log level; RUST_LOG overrides it.
        LOG_LEVEL level: LogLevel = Choice<LogLevel>(ChoiceSpec { key: "level", default: LogLevel::Info, options: LOG_LEVELS }),
        /// json for journald and log shippers.
        // The log subscriber's format is fixed when it is installed.
        @reload Restart
        LOG_FORMAT format: LogFormat = Choice<LogFormat>(ChoiceSpec { key: "format", default: LogFormat::Text, options: LOG_FORMATS }),
    }
}

// Security.
pub(crate) const PROTOCOL_DEFAULT: SecurityProtocol = SecurityProtocol::Plaintext;
layered! {
    /// Whether a cluster's TLS verifies the brokers' certificates.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) struct TlsVerify;
    layer TlsVerifyLayer;
    picked TlsVerifyPicked;
    reload Cluster;
    keys {
        /// Turns certificate verification off; true loads with a warning.
        TLS_INSECURE_SKIP_VERIFY insecure_skip_verify: bool = Flag(BoolSpec { key: "insecure_skip_verify", default: false }),
    }
}

// Webhooks.
layered! {
    /// What a webhook sends, and from which severity on.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) struct WebhookKind;
    layer WebhookKindLayer;
    picked WebhookKindPicked;
    reload Live;
    keys {
        /// The body's format.
        WEBHOOK_FORMAT format: WebhookFormat = Choice<WebhookFormat>(ChoiceSpec { key: "format", default: WebhookFormat::Generic, options: WEBHOOK_FORMATS }),
        /// Incidents below this are not sent.
        WEBHOOK_MIN_SEVERITY min_severity: Severity = Choice<Severity>(ChoiceSpec { key: "min_severity", default: Severity::Warning, options: SEVERITIES }),
    }
}

layered! {
    /// A webhook's delivery settings.
    #[derive(Clone, Debug, PartialEq)]
    pub(crate) struct WebhookDelivery;
    layer WebhookDeliveryLayer;
    picked WebhookDeliveryPicked;
    reload Live;
    keys {
        /// Remind this often while an incident is open; 0: never (pagerduty: 0 unless set).
        WEBHOOK_REPEAT_INTERVAL repeat_interval: Duration = Secs(IntSpec { key: "repeat_interval_secs", default: 3600, min: 0, max: 30 * DAY_SECS }),
        /// Updates this soon after the last message about an incident wait and go as one, with the latest state; escalations, opens and resolves go at once; 0: every update at once.
        // Alertmanager waits 5 m between updates of a group; an incident is one alert, and
        // a zombie's verdict settles within a few rounds, so half a minute folds the settling.
        WEBHOOK_GROUP_INTERVAL group_interval: Duration = Secs(IntSpec { key: "group_interval_secs", default: 30, min: 0, max: 3600 }),
        /// Send when an incident resolves.
        WEBHOOK_SEND_RESOLVED send_resolved: bool = Flag(BoolSpec { key: "send_resolved", default: true }),
        /// Per request.
        WEBHOOK_TIMEOUT timeout: Duration = Millis(IntSpec { key: "timeout_ms", default: 5000, min: 1, max: 120_000 }),
        /// Verify the receiver's certificate; false loads with a warning (ca_file trusts an internal CA).
        WEBHOOK_TLS_VERIFY tls_verify: bool = Flag(BoolSpec { key: "tls_verify", default: true }),
    }
}

/// A value that can be read from the file, the environment or a file of its own.
/// `inline` is `None` where writing the value into the configuration is refused.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SecretKeys {
    pub what: &'static str,
    pub inline: &'static str,
    pub inline_allowed: bool,
    pub env: &'static str,
    pub file: &'static str,
}

impl SecretKeys {
    pub(crate) fn choices(&self) -> String {
        if self.inline_allowed {
            format!(
                "exactly one of {}, {}, {}",
                self.inline, self.env, self.file
            )
        } else {
            format!("{} or {}", self.env, self.file)
        }
    }
}

pub(crate) const SASL_USERNAME: SecretKeys = SecretKeys {
    what: "username",
    inline: "username",
    inline_allowed: true,
    env: "username_env",
    file: "username_file",
};
pub(crate) const SASL_PASSWORD: SecretKeys = SecretKeys {
    what: "password",
    inline: "password",
    inline_allowed: false,
    env: "password_env",
    file: "password_file",
};
pub(crate) const OAUTH_CLIENT_ID: SecretKeys = SecretKeys {
    what: "client id",
    inline: "client_id",
    inline_allowed: true,
    env: "client_id_env",
    file: "client_id_file",
};
pub(crate) const OAUTH_CLIENT_SECRET: SecretKeys = SecretKeys {
    what: "client secret",
    inline: "client_secret",
    inline_allowed: false,
    env: "client_secret_env",
    file: "client_secret_file",
};
/// A webhook header's value given as a mapping (a header that carries a credential).
pub(crate) const WEBHOOK_HEADER_VALUE: SecretKeys = SecretKeys {
    what: "header value",
    inline: "value",
    inline_allowed: true,
    env: "value_env",
    file: "value_file",
};
/// Alertmanager only: every Alertmanager of a cluster, instead of `url`.
pub(crate) const WEBHOOK_URLS: &str = "urls";
pub(crate) const WEBHOOK_URL: SecretKeys = SecretKeys {
    what: "URL",
    inline: "url",
    inline_allowed: true,
    env: "url_env",
    file: "url_file",
};
pub(crate) const WEBHOOK_HMAC_SECRET: SecretKeys = SecretKeys {
    what: "HMAC secret",
    inline: "hmac_secret",
    inline_allowed: false,
    env: "hmac_secret_env",
    file: "hmac_secret_file",
};
pub(crate) const WEBHOOK_ROUTING_KEY: SecretKeys = SecretKeys {
    what: "routing key",
    inline: "routing_key",
    inline_allowed: false,
    env: "routing_key_env",
    file: "routing_key_file",
};

/// A Slack bot token (`xoxb-...`, scope `chat:write`): Slack's Web API instead of an
/// incoming webhook, so that an incident is one message edited in place.
pub(crate) const WEBHOOK_SLACK_BOT_TOKEN: SecretKeys = SecretKeys {
    what: "Slack bot token",
    inline: "slack_bot_token",
    inline_allowed: false,
    env: "slack_bot_token_env",
    file: "slack_bot_token_file",
};
/// Where a Slack bot posts: a channel id (`C0123ABCD`) or name (`#kafka-ops`).
pub(crate) const WEBHOOK_SLACK_CHANNEL: &str = "slack_channel";

pub(crate) const HTTP_BASIC_USERNAME: SecretKeys = SASL_USERNAME;
pub(crate) const HTTP_BASIC_PASSWORD: SecretKeys = SASL_PASSWORD;
pub(crate) const HTTP_BEARER_TOKEN: SecretKeys = SecretKeys {
    what: "bearer token",
    inline: "bearer_token",
    inline_allowed: false,
    env: "bearer_token_env",
    file: "bearer_token_file",
};

/// Secret files are small; reading stops here so a wrong path (a log, a device) cannot
/// make loading slow or large.
pub(crate) const SECRET_FILE_MAX_BYTES: u64 = 64 * 1024;

/// librdkafka properties the watchdog derives from its own keys. Setting them in the
/// escape hatch would silently fight those keys, so they are refused with a pointer to
/// the key that owns them.
pub(crate) const LIBRDKAFKA_RESERVED: &[(&str, &str)] = &[
    ("bootstrap.servers", "bootstrap_servers"),
    ("metadata.broker.list", "bootstrap_servers"),
    ("security.protocol", "security.protocol"),
    ("sasl.mechanism", "security.sasl.mechanism"),
    ("sasl.mechanisms", "security.sasl.mechanism"),
    ("sasl.username", "security.sasl.username"),
    (
        "sasl.password",
        "security.sasl.password_env or security.sasl.password_file",
    ),
    (
        "sasl.oauthbearer.method",
        "security.sasl.mechanism OAUTHBEARER",
    ),
    (
        "sasl.oauthbearer.token.endpoint.url",
        "security.sasl.token_endpoint_url",
    ),
    ("sasl.oauthbearer.client.id", "security.sasl.client_id"),
    (
        "sasl.oauthbearer.client.secret",
        "security.sasl.client_secret_env or security.sasl.client_secret_file",
    ),
    ("sasl.oauthbearer.scope", "security.sasl.scope"),
    ("ssl.ca.location", "security.tls.ca_file"),
    ("ssl.certificate.location", "security.tls.cert_file"),
    ("ssl.key.location", "security.tls.key_file"),
    (
        "enable.ssl.certificate.verification",
        "security.tls.insecure_skip_verify",
    ),
];

/// librdkafka properties that carry a credential, or name a file of one (a private key, a
/// keystore, an assertion): a secret written there would bypass the watchdog's secret
/// keys (from a file or the environment, never inline, never logged). Refused with what to
/// write instead.
pub(crate) const LIBRDKAFKA_CREDENTIALS: &[(&str, &str)] = &[
    ("ssl.key.password", "security.tls.key_file with the key unencrypted: the watchdog takes no key passphrase (openssl pkey -in encrypted.pem -out key.pem decrypts one)"),
    ("ssl.key.pem", LIBRDKAFKA_KEY_PEM),
    ("ssl_key", LIBRDKAFKA_KEY_PEM),
    ("ssl.keystore.location", LIBRDKAFKA_KEYSTORE),
    ("ssl.keystore.password", LIBRDKAFKA_KEYSTORE),
    ("sasl.oauthbearer.client.credentials.client.secret", "security.sasl.client_secret_env or security.sasl.client_secret_file"),
    ("sasl.oauthbearer.assertion.private.key.passphrase", LIBRDKAFKA_ASSERTION),
    ("sasl.oauthbearer.assertion.private.key.pem", LIBRDKAFKA_ASSERTION),
    ("sasl.oauthbearer.assertion.private.key.file", LIBRDKAFKA_ASSERTION),
    ("sasl.oauthbearer.assertion.file", LIBRDKAFKA_ASSERTION),
    ("sasl.oauthbearer.config", LIBRDKAFKA_OAUTH),
];
const LIBRDKAFKA_KEY_PEM: &str = "security.tls.key_file and security.tls.cert_file: PEM files";
const LIBRDKAFKA_KEYSTORE: &str = "security.tls.cert_file and security.tls.key_file: PEM files (openssl pkcs12 -in keystore.p12 -nodes prints both)";
const LIBRDKAFKA_ASSERTION: &str = "security.sasl.client_secret_env or security.sasl.client_secret_file: the watchdog gets OAUTHBEARER tokens with the client credentials grant";

/// Every other `sasl.oauthbearer.*` property: the canary's librdkafka clients get their
/// tokens from the watchdog (canary::auth), so none of them would do anything.
pub(crate) const LIBRDKAFKA_OAUTH_PREFIX: &str = "sasl.oauthbearer.";
pub(crate) const LIBRDKAFKA_OAUTH: &str = "security.sasl with mechanism OAUTHBEARER (token_endpoint_url, client_id, client_secret_env or client_secret_file, scope, extensions): the watchdog hands the canary its tokens itself";

/// Keys a cluster has that `defaults:` cannot carry, for a precise message there.
pub(crate) const CLUSTER_ONLY_KEYS: &[&str] = &[
    "name",
    "bootstrap_servers",
    CONTROLLERS_KEY,
    "security",
    "host",
];

/// A cluster's KRaft controllers, asked directly (optional).
pub(crate) const CONTROLLERS_KEY: &str = "controllers";
pub(crate) const CONTROLLERS_EXPECTED: &str =
    "a list of controller addresses, host:port or id@host:port (as controller.quorum.voters)";

pub(crate) use super::checks::{
    NAME_EXPECTED, REGEX_SIZE_LIMIT, SLACK_API_DEFAULT, SLACK_CHANNEL_MAX_CHARS,
};
pub(crate) use super::kinds::{
    HEARTBEAT_FORMATS, LOG_FORMATS, LOG_LEVELS, MECHANISMS, PROTOCOLS, SEVERITIES, WEBHOOK_FORMATS,
};
