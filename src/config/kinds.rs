//! The closed sets a key chooses from (log level and format, security protocol, SASL
//! mechanism, webhook format, heartbeat format, severity), each with its spellings in the file: one table per
//! set, read by the key table and by each value's `as_str`.

use super::spec::name_of;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    /// The spelling `tracing_subscriber::EnvFilter` accepts.
    pub fn as_str(self) -> &'static str {
        name_of(LOG_LEVELS, self)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's and librdkafka's spelling (`security.protocol`).
    pub fn as_str(self) -> &'static str {
        name_of(PROTOCOLS, self)
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
    AwsMskIam,
}

impl SaslMechanism {
    /// Kafka's and librdkafka's spelling (`sasl.mechanism`).
    pub fn as_str(self) -> &'static str {
        name_of(MECHANISMS, self)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WebhookFormat {
    Generic,
    Slack,
    PagerDuty,
    Alertmanager,
    Teams,
}

impl WebhookFormat {
    pub fn as_str(self) -> &'static str {
        name_of(WEBHOOK_FORMATS, self)
    }
}

/// The shape of the heartbeat (`heartbeat.format`): what the receiver of a dead man's
/// switch expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeartbeatFormat {
    /// healthchecks.io (and its clones): a POST to the ping URL, `<url>/fail` when blind.
    Healthchecks,
    /// A plain ping URL (PagerDuty's heartbeat URLs, Better Stack, Uptime Kuma's push
    /// monitors): a GET while all is well, nothing when blind.
    PagerDuty,
    /// Alertmanager's API v2: an always-firing alert whose `endsAt` lies a few intervals
    /// ahead, ended at once when blind (the dead man's switch route notices it stop).
    Alertmanager,
}

impl HeartbeatFormat {
    pub fn as_str(self) -> &'static str {
        name_of(HEARTBEAT_FORMATS, self)
    }
}

/// Ordered from least to most severe, so `severity >= min_severity` is the filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        name_of(SEVERITIES, self)
    }
}

pub(crate) const PROTOCOLS: &[(&str, SecurityProtocol)] = &[
    ("PLAINTEXT", SecurityProtocol::Plaintext),
    ("SSL", SecurityProtocol::Ssl),
    ("SASL_PLAINTEXT", SecurityProtocol::SaslPlaintext),
    ("SASL_SSL", SecurityProtocol::SaslSsl),
];
pub(crate) const MECHANISMS: &[(&str, SaslMechanism)] = &[
    ("PLAIN", SaslMechanism::Plain),
    ("SCRAM-SHA-256", SaslMechanism::ScramSha256),
    ("SCRAM-SHA-512", SaslMechanism::ScramSha512),
    ("OAUTHBEARER", SaslMechanism::OAuthBearer),
    ("AWS_MSK_IAM", SaslMechanism::AwsMskIam),
];
pub(crate) const LOG_LEVELS: &[(&str, LogLevel)] = &[
    ("trace", LogLevel::Trace),
    ("debug", LogLevel::Debug),
    ("info", LogLevel::Info),
    ("warn", LogLevel::Warn),
    ("error", LogLevel::Error),
];
pub(crate) const LOG_FORMATS: &[(&str, LogFormat)] =
    &[("text", LogFormat::Text), ("json", LogFormat::Json)];
pub(crate) const WEBHOOK_FORMATS: &[(&str, WebhookFormat)] = &[
    ("generic", WebhookFormat::Generic),
    ("slack", WebhookFormat::Slack),
    ("pagerduty", WebhookFormat::PagerDuty),
    ("alertmanager", WebhookFormat::Alertmanager),
    ("teams", WebhookFormat::Teams),
];
pub(crate) const HEARTBEAT_FORMATS: &[(&str, HeartbeatFormat)] = &[
    ("healthchecks", HeartbeatFormat::Healthchecks),
    ("pagerduty", HeartbeatFormat::PagerDuty),
    ("alertmanager", HeartbeatFormat::Alertmanager),
];
pub(crate) const SEVERITIES: &[(&str, Severity)] = &[
    ("info", Severity::Info),
    ("warning", Severity::Warning),
    ("critical", Severity::Critical),
];
