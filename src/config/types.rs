//! The resolved configuration: every default applied, every secret read, every pattern
//! compiled. Code outside this module reads only these types, never the YAML.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use regex::Regex;

use super::{checks, schema};

#[derive(Clone, Debug)]
pub struct Config {
    /// Names this watchdog in canary records and webhook payloads, so that two watchdogs
    /// on one cluster can tell their records apart.
    pub instance_id: String,
    pub http_listen: SocketAddr,
    /// Where people reach the HTTP server (behind a proxy, by a DNS name); links in
    /// webhooks point below it. `None`: made from `http_listen` (`status_url`).
    pub http_external_url: Option<url::Url>,
    /// Where webhooks link for an incident's runbook (`<it>#<alert name>`): a site of the
    /// operator's own. `None`: this watchdog's `/runbooks` (`runbooks_url`).
    pub http_runbooks_url: Option<url::Url>,
    /// `None`: plain HTTP.
    pub http_tls: Option<HttpTlsConfig>,
    /// `None`: `/metrics` and `/status` are open to anyone who reaches the address.
    pub http_auth: Option<HttpAuth>,
    pub log: LogConfig,
    /// Where incident state survives restarts.
    pub state_dir: PathBuf,
    /// Never empty; names are unique.
    pub clusters: Vec<ClusterConfig>,
    /// Names are unique; every name in `WebhookConfig::clusters` is in `clusters`.
    pub webhooks: Vec<WebhookConfig>,
    /// The file's `silences:`; each names only configured clusters.
    pub silences: Vec<crate::model::silence::Silence>,
    /// `peers:`: the other watchdogs watching the same clusters; `None`: this one is alone.
    pub peers: Option<PeersConfig>,
    /// `heartbeat:`: the dead man's switch; `None`: none is called.
    pub heartbeat: Option<HeartbeatConfig>,
    /// What loaded but deserves a look, as `file:line:column: message (expected ...)`:
    /// `check-config` prints them, the daemon logs them at start and at each reload.
    pub warnings: Vec<String>,
}

impl Config {
    pub fn cluster(&self, name: &str) -> Option<&ClusterConfig> {
        self.clusters.iter().find(|c| c.name == name)
    }

    /// The `/status` page as people reach it: below `http.external_url`, else at the
    /// listen address (the host name when it listens on every address).
    pub fn status_url(&self) -> String {
        self.page_url("status")
    }

    /// The runbooks as people reach them (`http.runbooks_url`, else this watchdog's
    /// `/runbooks` page, as `status_url` finds it); links add `#<alert name>`.
    pub fn runbooks_url(&self) -> String {
        match &self.http_runbooks_url {
            Some(u) => u.to_string(),
            None => self.page_url("runbooks"),
        }
    }

    fn page_url(&self, page: &str) -> String {
        if let Some(base) = &self.http_external_url {
            let mut base = base.clone();
            if !base.path().ends_with('/') {
                base.set_path(&format!("{}/", base.path()));
            }
            if let Ok(u) = base.join(page) {
                return u.to_string();
            }
        }
        let scheme = if self.http_tls.is_some() {
            "https"
        } else {
            "http"
        };
        let ip = self.http_listen.ip();
        let host = if ip.is_unspecified() {
            default_instance_id()
        } else if ip.is_ipv6() {
            format!("[{ip}]")
        } else {
            ip.to_string()
        };
        format!("{scheme}://{host}:{}/{page}", self.http_listen.port())
    }
}

/// Other watchdogs watching the same clusters (`alert::peers`): named by URL, by a DNS name
/// whose every address is one, or both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeersConfig {
    pub urls: Vec<url::Url>,
    pub dns: Option<PeerDns>,
    pub poll_interval: Duration,
    /// A peer silent this long is gone; also each instance's wait per place in line.
    pub takeover: Duration,
    /// Certificates (PEM) trusted for HTTPS peers besides the system's.
    pub ca_file: Option<PathBuf>,
    /// Shared by every instance: signs answers and asks (`alert::peers::auth`).
    pub key: Secret,
}

/// The dead man's switch (`heartbeat:`, `alert::heartbeat`): a URL called every
/// `interval` while the watchdog sees its clusters, so that its receiver learns when the
/// watchdog stops or goes blind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatConfig {
    /// A secret: a ping URL carries the check's token.
    pub url: Secret,
    /// Scheme, host and port of `url`, for logs.
    pub target: String,
    pub format: HeartbeatFormat,
    pub interval: Duration,
    pub timeout: Duration,
    /// Certificates (PEM) trusted for the receiver besides the system's.
    pub ca_file: Option<PathBuf>,
}

/// A DNS name each of whose addresses is a peer (a Kubernetes headless service).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerDns {
    pub host: String,
    pub port: u16,
    /// `http` or `https`.
    pub scheme: String,
}

/// HTTPS for the HTTP server. Both files were read and found to go together while
/// loading; the server reads them again when it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpTlsConfig {
    /// PEM: the server certificate, then any intermediates.
    pub cert_file: PathBuf,
    /// PEM: its private key, unencrypted.
    pub key_file: PathBuf,
}

/// The credential `/metrics` and `/status` ask for. `/healthz` and `/readyz` stay open:
/// service managers and load balancers probe them without credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpAuth {
    /// RFC 7617; the username holds no colon.
    Basic { username: String, password: Secret },
    /// RFC 6750; the token is a `b64token`.
    Bearer { token: Secret },
}

impl HttpAuth {
    /// `req` carrying this credential, as a client of the watchdog sends it (the CLI, a
    /// peer).
    pub fn sign(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            HttpAuth::Basic { username, password } => {
                req.basic_auth(username, Some(password.expose()))
            }
            HttpAuth::Bearer { token } => req.bearer_auth(token.expose()),
        }
    }

    /// Whether `secret` is this credential's secret part.
    pub fn holds(&self, secret: &Secret) -> bool {
        match self {
            HttpAuth::Basic { password, .. } => password == secret,
            HttpAuth::Bearer { token } => token == secret,
        }
    }
}

/// Declared with its keys in `schema`.
pub use super::schema::LogConfig;

pub use super::kinds::{
    HeartbeatFormat, LogFormat, LogLevel, SaslMechanism, SecurityProtocol, Severity, WebhookFormat,
};

#[derive(Clone, Debug)]
pub struct ClusterConfig {
    pub name: String,
    /// `host:port` entries as written (IPv6 hosts in brackets); never empty.
    pub bootstrap_servers: Vec<String>,
    /// KRaft controllers to ask directly (DescribeQuorum on their own listener, KIP-919);
    /// empty: the quorum is asked through the brokers only.
    pub controllers: Vec<ControllerAddress>,
    pub security: Security,
    /// The round interval and the deadlines below it, as the key table declares them.
    pub timing: Timing,
    pub topics: TopicFilter,
    pub canary: CanaryConfig,
    /// The probe of every group coordinator shard.
    pub coordinators: CoordinatorsConfig,
    /// When a broker listener's certificate is worth an incident.
    pub certificates: CertificatesConfig,
    pub verdict: VerdictConfig,
    /// Extra librdkafka properties; never one the watchdog sets itself.
    pub librdkafka: BTreeMap<String, String>,
    /// Host mode: brokers of this cluster that run on the watchdog's own host.
    pub host: Option<HostConfig>,
    /// Static labels (`env`, `team`, ...) put on the cluster's webhooks and on
    /// `kafka_watchdog_cluster_labels`, for routing and joins.
    pub labels: BTreeMap<String, String>,
}

/// A controller as `controllers:` names it: `host:port`, or `id@host:port` as Kafka's
/// `controller.quorum.voters` writes it (the id then names it before it answers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerAddress {
    pub id: Option<i32>,
    /// `host:port`, IPv6 hosts in brackets.
    pub address: String,
}

/// Host mode of one cluster: the brokers on this host and the cluster-wide remediation
/// limits.
#[derive(Clone, Debug, PartialEq)]
pub struct HostConfig {
    /// In (0, 1]: a log directory with less free space than this is reported.
    pub log_dir_min_free_ratio: f64,
    pub remediation_cooldown: Duration,
    pub remediation_max_per_day: u32,
    /// Never empty; broker ids are unique.
    pub brokers: Vec<HostBrokerConfig>,
}

impl ClusterConfig {
    /// The timing keys (`round_interval_secs`, ...) that differ, by their names in the
    /// file, in the order `schema` declares them.
    pub fn changed_timing(old: &ClusterConfig, new: &ClusterConfig) -> Vec<&'static str> {
        schema::Timing::changed(&old.timing, &new.timing)
    }
}

impl HostConfig {
    pub fn broker(&self, id: i32) -> Option<&HostBrokerConfig> {
        self.brokers.iter().find(|b| b.broker_id == id)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct HostBrokerConfig {
    pub broker_id: i32,
    pub process: ProcessLocator,
    pub log_dirs: Vec<PathBuf>,
    pub ports: Vec<PortSpec>,
    /// `None`: no remediation block.
    pub remediation: Option<RemediationConfig>,
}

/// How a broker's process is found.
#[derive(Clone, Debug)]
pub enum ProcessLocator {
    /// MainPID of the unit.
    SystemdUnit(String),
    PidFile(PathBuf),
    /// Searched (not anchored) in each `/proc/<pid>/cmdline`, arguments joined by spaces.
    Cmdline {
        regex: Regex,
        source: String,
    },
}

impl ProcessLocator {
    /// In words, for `/status` and evidence.
    pub fn describe(&self) -> String {
        match self {
            ProcessLocator::SystemdUnit(u) => format!("systemd unit {u}"),
            ProcessLocator::PidFile(p) => format!("pid file {}", p.display()),
            ProcessLocator::Cmdline { source, .. } => format!("command line matching '{source}'"),
        }
    }
}

/// Compiled patterns have no equality; the text they came from does.
impl PartialEq for ProcessLocator {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ProcessLocator::SystemdUnit(a), ProcessLocator::SystemdUnit(b)) => a == b,
            (ProcessLocator::PidFile(a), ProcessLocator::PidFile(b)) => a == b,
            (
                ProcessLocator::Cmdline { source: a, .. },
                ProcessLocator::Cmdline { source: b, .. },
            ) => a == b,
            _ => false,
        }
    }
}

/// A port to check, on one address or (without one) on any.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortSpec {
    pub addr: Option<std::net::IpAddr>,
    pub port: u16,
}

impl fmt::Display for PortSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            Some(std::net::IpAddr::V6(a)) => write!(f, "[{a}]:{}", self.port),
            Some(a) => write!(f, "{a}:{}", self.port),
            None => write!(f, "{}", self.port),
        }
    }
}

/// What to run for a broker that has been a zombie for `zombie_for`, under the guards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemediationConfig {
    pub enabled: bool,
    /// Decide and report, never run.
    pub dry_run: bool,
    /// argv: run directly, never through a shell. Never empty.
    pub command: Vec<String>,
    /// Run first; its output is kept in the state folder for the post-mortem.
    pub before_command: Option<Vec<String>>,
    pub zombie_for: Duration,
    pub timeout: Duration,
    pub before_timeout: Duration,
}

/// Invariants: `sasl` is `Some` exactly for the SASL protocols and `tls` exactly for the
/// TLS ones, so a client builder can match on the options alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Security {
    pub protocol: SecurityProtocol,
    pub sasl: Option<SaslConfig>,
    pub tls: Option<TlsConfig>,
}

/// Invariants: `username` and `password` are non-empty exactly for PLAIN and SCRAM,
/// `oauthbearer` is `Some` exactly for OAUTHBEARER and `aws_msk_iam` exactly for
/// AWS_MSK_IAM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslConfig {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: Secret,
    pub oauthbearer: Option<OAuthBearerConfig>,
    pub aws_msk_iam: Option<AwsMskIamConfig>,
}

/// OAuth 2.0 client credentials grant (RFC 6749 4.4) against an OIDC token endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthBearerConfig {
    pub token_endpoint_url: String,
    pub client_id: String,
    pub client_secret: Secret,
    pub scope: Option<String>,
    /// Extra CA certificates (PEM) for the token endpoint's TLS; the built-in Mozilla roots otherwise.
    pub ca_file: Option<PathBuf>,
    /// SASL extensions sent with every token (RFC 7628 kvpairs), in the file's order.
    pub extensions: Vec<(String, String)>,
}

/// Amazon MSK IAM access control. Credentials are not part of the configuration: the AWS
/// SDK's default chain finds them (environment, profile, web identity, container
/// credentials, instance metadata) and they are renewed before they expire, so rotated
/// credentials are picked up without a reload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsMskIamConfig {
    pub region: String,
    /// Profile of the shared config and credentials files; `None`: AWS_PROFILE, then `default`.
    pub profile: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsConfig {
    /// `None`: the system's trust roots.
    pub ca_file: Option<PathBuf>,
    pub client_cert: Option<ClientCert>,
    /// Overrides the name used for SNI and certificate verification.
    pub server_name: Option<String>,
    pub insecure_skip_verify: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCert {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

/// Which topics the watchdog looks at. Patterns match whole topic names.
#[derive(Clone)]
pub struct TopicFilter {
    pub(crate) include: Vec<Regex>,
    pub(crate) exclude: Vec<Regex>,
    pub(crate) include_src: Vec<String>,
    pub(crate) exclude_src: Vec<String>,
}

impl TopicFilter {
    /// A filter from patterns written as in the configuration (whole-name matches). The
    /// error is the same sentence a configuration file would get.
    pub fn new(include: &[&str], exclude: &[&str]) -> Result<Self, String> {
        let compile = |list: &[&str]| -> Result<Vec<Regex>, String> {
            list.iter()
                .map(|p| checks::pattern(p).map_err(|(m, _)| m))
                .collect()
        };
        Ok(TopicFilter {
            include: compile(include)?,
            exclude: compile(exclude)?,
            include_src: include.iter().map(|p| p.to_string()).collect(),
            exclude_src: exclude.iter().map(|p| p.to_string()).collect(),
        })
    }

    pub fn matches(&self, topic: &str) -> bool {
        self.include.iter().any(|r| r.is_match(topic))
            && !self.exclude.iter().any(|r| r.is_match(topic))
    }

    /// The patterns as written in the configuration.
    pub fn include_patterns(&self) -> &[String] {
        &self.include_src
    }

    pub fn exclude_patterns(&self) -> &[String] {
        &self.exclude_src
    }
}

/// Every topic, as a cluster without `topics:` gets.
impl Default for TopicFilter {
    fn default() -> Self {
        // The built-in patterns are constants known to compile; an empty filter would be
        // the (visible) result if that ever stopped being true.
        TopicFilter::new(
            schema::TOPICS_INCLUDE.0.default,
            schema::TOPICS_EXCLUDE.0.default,
        )
        .unwrap_or(TopicFilter {
            include: Vec::new(),
            exclude: Vec::new(),
            include_src: Vec::new(),
            exclude_src: Vec::new(),
        })
    }
}

impl fmt::Debug for TopicFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TopicFilter")
            .field("include", &self.include_src)
            .field("exclude", &self.exclude_src)
            .finish()
    }
}

/// Declared with its keys in `schema`.
pub use super::schema::{
    CanaryConfig, CertificatesConfig, CoordinatorsConfig, Timing, VerdictKeys,
};

/// A cluster's `verdict:` block resolved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VerdictConfig {
    /// A finding's fact must hold this long before an incident opens.
    pub open_after: Duration,
    /// A finding must be absent this long before its incident resolves.
    pub resolve_after: Duration,
    /// The deprecated `open_after_rounds` / `resolve_after_rounds` as written, when one
    /// decided a duration above (converted with the round interval).
    pub deprecated_rounds: Option<(Option<u32>, Option<u32>)>,
    /// The block's other keys, each as the key table declares it.
    pub keys: VerdictKeys,
}

impl VerdictConfig {
    /// The sentence to log when the deprecated round counts were used.
    pub fn deprecation(&self, cluster: &str) -> Option<String> {
        let (open, resolve) = self.deprecated_rounds?;
        let mut used = Vec::new();
        if let Some(n) = open {
            used.push(format!(
                "open_after_rounds: {n} is now open_after_secs: {}",
                self.open_after.as_secs_f64()
            ));
        }
        if let Some(n) = resolve {
            used.push(format!(
                "resolve_after_rounds: {n} is now resolve_after_secs: {}",
                self.resolve_after.as_secs_f64()
            ));
        }
        Some(format!(
            "cluster '{cluster}': verdict.{} (deprecated: verdicts are re-evaluated between rounds, so confirmation is a duration; write the _secs keys instead)",
            used.join(", ")
        ))
    }
}

#[derive(Clone, Debug)]
pub struct WebhookConfig {
    pub name: String,
    /// May carry a token (Slack, Teams), so it is a secret even when written inline.
    pub url: Secret,
    /// Scheme, host and port of `url`: what logs and `/status` may show.
    pub target: String,
    pub format: WebhookFormat,
    pub min_severity: Severity,
    /// Empty: every cluster.
    pub clusters: Vec<String>,
    /// `None`: an open incident is sent once.
    pub repeat_interval: Option<Duration>,
    pub send_resolved: bool,
    pub timeout: Duration,
    pub tls_verify: bool,
    /// Certificates (PEM) trusted for the receiver besides the system's: an internal CA,
    /// so nobody needs `tls_verify: false`.
    pub ca_file: Option<std::path::PathBuf>,
    pub headers: BTreeMap<String, String>,
    /// Only for the generic format.
    pub hmac_secret: Option<Secret>,
    /// `Some` exactly for the PagerDuty format.
    pub routing_key: Option<Secret>,
    /// Non-escalating updates of an incident within this of the last message about it are
    /// held and sent as one; `None`: every update at once.
    pub group_interval: Option<Duration>,
    /// Slack's Web API with a bot token (`url` is then the API's base); `None` for an
    /// incoming webhook and every other format.
    pub slack_bot: Option<SlackBot>,
}

/// A Slack receiver that posts an incident's first message with `chat.postMessage` and
/// edits it with `chat.update` as the incident changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlackBot {
    /// `xoxb-...`, with the `chat:write` scope.
    pub token: Secret,
    /// Where new messages go: a channel id or `#name`. Edits go to the channel id Slack
    /// answered with, which is kept per incident.
    pub channel: String,
}

impl WebhookConfig {
    pub fn covers(&self, cluster: &str) -> bool {
        self.clusters.is_empty() || self.clusters.iter().any(|c| c == cluster)
    }
}

/// A credential. It prints as `***` in Debug and Display, so a config dumped into a log
/// or a panic message leaks nothing; `expose` is the one door to the value as loaded.
/// One read from a file (`*_file`) remembers it: users that keep the value current watch
/// that file ([`super::live`]), and another file is another secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    value: String,
    file: Option<PathBuf>,
}

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret {
            value: value.into(),
            file: None,
        }
    }

    pub(crate) fn from_file(value: impl Into<String>, file: PathBuf) -> Self {
        Secret {
            value: value.into(),
            file: Some(file),
        }
    }

    pub fn expose(&self) -> &str {
        &self.value
    }

    /// The file it was read from, if it was.
    pub fn file(&self) -> Option<&std::path::Path> {
        self.file.as_deref()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The host name identifies a watchdog well enough when nobody chose a name; it is read
/// from the kernel so no extra dependency is needed for one call.
pub(crate) fn default_instance_id() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|h| h.trim().to_string())
        .find(|h| checks::instance_id(h, schema::INSTANCE_ID_MAX_CHARS).is_ok())
        .unwrap_or_else(|| schema::INSTANCE_ID_FALLBACK.to_string())
}
