//! docs/config.md, the configuration reference, rendered from the declarations in `schema`.
//!
//! The keys a cluster shares with `defaults:` come whole from their `layered!` declarations
//! (name, type, default, range, meaning). The other keys are read by hand-written readers
//! (text, choices, secrets, nested lists); their rows take name, range and default from
//! the same `schema` constants the readers use, and the meaning from the table below. A
//! test compares the keys every reader asks for with the rows, so a key cannot be added
//! without its line here.
//!
//! `KW_CONFIG_DOCS_WRITE=1 cargo test --lib config::docs` (or `KW_DOCS_WRITE=1`, which
//! rewrites every generated doc) writes the file; without it the test fails when the
//! committed file differs.

use super::keys::{DocRow, Reload};
use super::schema::{self as s, SecretKeys};

/// One line of the reference, with the full path of its key(s).
#[derive(Debug, Clone)]
pub(crate) struct Line {
    /// Alternatives (a secret's inline, `_env` and `_file` keys) share a line.
    pub keys: Vec<String>,
    pub ty: String,
    pub default: String,
    pub range: String,
    pub reload: Reload,
    pub meaning: String,
}

struct Section {
    title: &'static str,
    note: &'static str,
    lines: Vec<Line>,
}

/// Rows of a declared block under `prefix`.
fn under(prefix: &str, rows: Vec<DocRow>) -> Vec<Line> {
    rows.into_iter()
        .map(|r| Line {
            keys: vec![format!("{prefix}{}", r.key)],
            ty: r.ty.into(),
            default: r.default,
            range: r.range,
            reload: r.reload,
            meaning: r.meaning,
        })
        .collect()
}

fn plain(key: &str, ty: &str, default: &str, range: &str, reload: Reload, meaning: &str) -> Line {
    Line {
        keys: vec![key.into()],
        ty: ty.into(),
        default: default.into(),
        range: range.into(),
        reload,
        meaning: meaning.into(),
    }
}

fn choice<T: PartialEq + Copy>(
    key: &str,
    table: &[(&'static str, T)],
    default: Option<T>,
    reload: Reload,
    meaning: &str,
) -> Line {
    let names: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
    plain(
        key,
        "choice",
        &default.map_or("required".into(), |d| s::name_of(table, d).to_string()),
        &names.join(", "),
        reload,
        meaning,
    )
}

fn secret(prefix: &str, keys: &SecretKeys, need: &str, reload: Reload, meaning: &str) -> Line {
    let mut names = Vec::new();
    if keys.inline_allowed {
        names.push(format!("{prefix}{}", keys.inline));
    }
    names.push(format!("{prefix}{}", keys.env));
    names.push(format!("{prefix}{}", keys.file));
    Line {
        keys: names,
        ty: "secret".into(),
        default: need.into(),
        range: keys.choices(),
        reload,
        meaning: meaning.into(),
    }
}

#[rustfmt::skip]
fn sections() -> Vec<Section> {
    use Reload::*;
    let c = "clusters[].";
    let http_listen = s::HTTP_LISTEN_DEFAULT.to_string();
    let mut top = vec![
        plain("instance_id", "text", "the host name", &format!("1 to {} printable characters", s::INSTANCE_ID_MAX_CHARS), Restart, "Names this watchdog in canary records and webhook payloads."),
        plain("state_dir", "path", s::STATE_DIR_DEFAULT, "a directory path", Restart, "Where incident state survives restarts."),
        plain("http.listen", "address", &http_listen, "an IP address and port", Restart, "Where /metrics, /status, /runbooks, /healthz and /readyz are served."),
        plain("http.external_url", "URL", "made from http.listen", "an absolute http(s) URL", Restart, "Where people reach the watchdog; webhooks link below it."),
        plain("http.runbooks_url", "URL", "/runbooks below http.external_url", "an absolute http(s) URL without #", Restart, "Where webhooks link for an incident's runbook, as URL#<alert name> (docs/alerts.md)."),
        plain(&format!("http.tls.{}", s::HTTP_TLS_CERT_FILE), "path", "none (plain HTTP)", "a PEM file", Restart, "HTTPS: the server certificate, then any intermediates."),
        plain(&format!("http.tls.{}", s::HTTP_TLS_KEY_FILE), "path", "none (plain HTTP)", "a PEM file", Restart, "HTTPS: its private key, unencrypted."),
        secret("http.auth.basic.", &s::HTTP_BASIC_USERNAME, "required in basic", Restart, "HTTP Basic user for /metrics and /status."),
        secret("http.auth.basic.", &s::HTTP_BASIC_PASSWORD, "required in basic", Restart, "HTTP Basic password."),
        secret("http.auth.", &s::HTTP_BEARER_TOKEN, "none", Restart, "A bearer token for /metrics and /status, instead of basic."),
    ];
    top.extend(under("log.", s::LogConfig::doc_rows()));
    top.push(plain("defaults", "mapping", "none", "the cluster keys marked below", Cluster, "Settings every cluster inherits, key by key."));

    let mut cluster = vec![
        plain(&format!("{c}name"), "text", "required", s::NAME_EXPECTED, Cluster, "The cluster's name: the `cluster` label of metrics and webhooks."),
        plain(&format!("{c}bootstrap_servers"), "list", "required", "host:port addresses (a comma-separated text too)", Cluster, "Where the watchdog first asks for the brokers."),
        plain(&format!("{c}{}", s::CONTROLLERS_KEY), "list", "none (the quorum is asked through the brokers)", "host:port or id@host:port addresses (a comma-separated text too)", Cluster, "KRaft controllers asked directly, on their own listener with the cluster's `security` (KIP-919, Kafka 3.7+): each gets a verdict of its own; more are learned from them. Without it the quorum is described through the brokers, which forward to the active controller."),
    ];
    cluster.extend(under(c, s::Timing::doc_rows()));
    cluster.extend(under(&format!("{c}topics."), s::Topics::doc_rows()));
    cluster.extend(under(&format!("{c}canary."), s::CanaryConfig::doc_rows()));
    cluster.extend(under(
        &format!("{c}coordinators."),
        s::CoordinatorsConfig::doc_rows(),
    ));
    cluster.extend(under(
        &format!("{c}certificates."),
        s::CertificatesConfig::doc_rows(),
    ));
    cluster.extend(under(&format!("{c}verdict."), s::Confirmation::doc_rows()));
    cluster.extend(under(&format!("{c}verdict."), s::VerdictKeys::doc_rows()));
    cluster.push(plain(&format!("{c}labels"), "mapping", "none", &format!("up to {} label names (Prometheus syntax, none the watchdog sets itself) to values of 1 to {} characters", s::LABELS_MAX, s::LABEL_VALUE_MAX_CHARS), Cluster, "Static labels of the cluster (env, team, ...): on its webhooks (generic `labels`, Alertmanager labels, PagerDuty custom details) and on kafka_watchdog_cluster_labels, for routing and joins."));
    cluster.push(plain(&format!("{c}librdkafka"), "mapping", "none", "librdkafka properties, except those the watchdog sets", Cluster, "Extra properties for the canary's librdkafka clients."));

    let sec = "clusters[].security.";
    let sasl = "clusters[].security.sasl.";
    let tls = "clusters[].security.tls.";
    let mut security = vec![
        choice(&format!("{sec}protocol"), s::PROTOCOLS, Some(s::PROTOCOL_DEFAULT), Cluster, "How the watchdog connects to the brokers."),
        choice(&format!("{sasl}mechanism"), s::MECHANISMS, None, Cluster, "SASL mechanism (SASL protocols)."),
        secret(sasl, &s::SASL_USERNAME, "required for PLAIN, SCRAM", Cluster, "SASL user."),
        secret(sasl, &s::SASL_PASSWORD, "required for PLAIN, SCRAM", Cluster, "SASL password."),
        secret(sasl, &s::OAUTH_CLIENT_ID, "required for OAUTHBEARER", Cluster, "OAuth client id."),
        secret(sasl, &s::OAUTH_CLIENT_SECRET, "required for OAUTHBEARER", Cluster, "OAuth client secret."),
        plain(&format!("{sasl}token_endpoint_url"), "URL", "required for OAUTHBEARER", "an https URL", Cluster, "The OIDC token endpoint (client credentials grant)."),
        plain(&format!("{sasl}scope"), "text", "none", "an OAuth scope", Cluster, "Sent only when set."),
        plain(&format!("{sasl}token_endpoint_ca_file"), "path", "built-in Mozilla roots", "a PEM file", Cluster, "CA certificates for the token endpoint."),
        plain(&format!("{sasl}extensions"), "mapping", "none", "names of letters (not auth) to visible ASCII text", Cluster, "OAUTHBEARER: SASL extensions sent with every token (Confluent Cloud's logicalCluster, identityPoolId)."),
        plain(&format!("{sasl}region"), "text", "AWS_REGION, AWS_DEFAULT_REGION", "an AWS region", Cluster, "AWS_MSK_IAM: the region requests are signed for."),
        plain(&format!("{sasl}profile"), "text", "AWS_PROFILE, then default", "a profile name", Cluster, "AWS_MSK_IAM: profile of the shared config and credentials files (the AWS SDK's default chain finds the credentials)."),
        plain(&format!("{tls}ca_file"), "path", "the system's trust roots", "a PEM file", Cluster, "CA certificates for the brokers (TLS protocols)."),
        plain(&format!("{tls}cert_file"), "path", "none", "a PEM file, with key_file", Cluster, "Client certificate."),
        plain(&format!("{tls}key_file"), "path", "none", "a PEM file, with cert_file", Cluster, "Its private key."),
        plain(&format!("{tls}server_name"), "text", "the broker's host", "a DNS name or an IP address", Cluster, "Name for SNI and certificate verification."),
    ];
    security.extend(under(tls, s::TlsVerify::doc_rows()));

    let h = "clusters[].host.";
    let b = "clusters[].host.brokers[].";
    let r = "clusters[].host.brokers[].remediation.";
    let mut host = under(h, s::HostLimits::doc_rows());
    host.extend(vec![
        plain(&format!("{h}{}", s::HOST_BROKERS_KEY), "list", "required in host", "at least one broker", Cluster, "The brokers of this cluster that run on this host."),
        plain(&format!("{b}{}", s::HOST_BROKER_ID.key), "integer", "required", &format!("{} to {}", s::HOST_BROKER_ID.min, s::HOST_BROKER_ID.max), Cluster, "The broker's node.id / broker.id."),
        plain(&format!("{b}process.{}", s::HOST_PROCESS_SYSTEMD_UNIT), "text", "one of the three", "a unit name", Cluster, "Find the process as the unit's MainPID."),
        plain(&format!("{b}process.{}", s::HOST_PROCESS_PID_FILE), "path", "one of the three", "a file holding a pid", Cluster, "Find the process by its pid file."),
        plain(&format!("{b}process.{}", s::HOST_PROCESS_CMDLINE_REGEX), "regex", "one of the three", "a regular expression", Cluster, "Find the process by its command line (the oldest match)."),
        plain(&format!("{b}{}", s::HOST_LOG_DIRS_KEY), "list", "none", "directory paths", Cluster, "Log directories whose free space is checked."),
        plain(&format!("{b}{}", s::HOST_PORTS_KEY), "list", "none", "port, or address:port", Cluster, "Ports checked for a listener."),
    ]);
    host.extend(under(r, s::RemediationSwitches::doc_rows()));
    host.extend(vec![
        plain(&format!("{r}{}", s::REMEDIATION_COMMAND_KEY), "argv", "required in remediation", &s::REMEDIATION_PLACEHOLDERS.join(", "), Cluster, "The command, run directly (never through a shell)."),
        plain(&format!("{r}{}", s::REMEDIATION_BEFORE_COMMAND_KEY), "argv", "none", &s::REMEDIATION_PLACEHOLDERS.join(", "), Cluster, "Run first; its output is kept for the post-mortem."),
    ]);
    host.extend(under(r, s::RemediationTimes::doc_rows()));

    let w = "webhooks[].";
    let mut webhooks = vec![
        plain(&format!("{w}name"), "text", "required", s::NAME_EXPECTED, Live, "The receiver's name, in logs and metrics."),
        secret(w, &s::WEBHOOK_URL, &format!("required; with a Slack bot token {}", s::SLACK_API_DEFAULT), Live, "Where to send (a secret: Slack and Teams URLs carry a token); with a Slack bot token, the Web API's base."),
    ];
    webhooks.extend(under(w, s::WebhookKind::doc_rows()));
    webhooks.extend(vec![
        plain(&format!("{w}clusters"), "list", "every cluster", "configured cluster names", Live, "Only incidents of these clusters."),
    ]);
    webhooks.extend(under(w, s::WebhookDelivery::doc_rows()));
    webhooks.extend(vec![
        plain(&format!("{w}ca_file"), "path", "none", "a readable file of PEM certificates", Live, "Certificates trusted for the receiver besides the system's (an internal CA), instead of tls_verify: false."),
        plain(&format!("{w}headers"), "mapping", "none", "HTTP header names to values; a value may be a mapping with value_env or value_file", Live, "Extra request headers; one that carries a credential reads it from the environment (value_env) or a file (value_file), like every other secret."),
        secret(w, &s::WEBHOOK_HMAC_SECRET, "none (generic only)", Live, "Signs the generic body."),
        secret(w, &s::WEBHOOK_ROUTING_KEY, "required for pagerduty", Live, "PagerDuty routing key."),
        secret(w, &s::WEBHOOK_SLACK_BOT_TOKEN, "none (slack only)", Live, "A Slack bot token (scope chat:write): an incident is one message, posted with chat.postMessage and edited with chat.update, its changes replies in its thread. Without it, slack is an incoming webhook."),
        plain(&format!("{w}{}", s::WEBHOOK_SLACK_CHANNEL), "text", "required with a Slack bot token", &format!("a channel id or #name, at most {} characters", s::SLACK_CHANNEL_MAX_CHARS), Live, "Where the Slack bot posts (the bot must be a member)."),
    ]);

    let si = "silences[].";
    let silences = vec![
        plain(&format!("{si}cluster"), "text", "every cluster", "a configured cluster's name", Live, "The cluster silenced."),
        plain(&format!("{si}broker"), "integer", "every broker", "a broker id", Live, "The broker silenced."),
        plain(&format!("{si}kind"), "text", "every kind", "an incident kind, e.g. broker", Live, "The incident kind silenced."),
        plain(&format!("{si}starts_at"), "time", "always", "RFC 3339", Live, "Start of the silence."),
        plain(&format!("{si}ends_at"), "time", "required", "RFC 3339", Live, "End of the silence."),
        plain(&format!("{si}comment"), "text", "required", "any text", Live, "Why, for the next person."),
    ];

    let pe = "peers.";
    let peers = vec![
        plain(&format!("{pe}{}", s::PEERS_URLS), "list", "none", "http(s) base URLs of other watchdogs (this one's own may be listed too)", Restart, "The other watchdogs watching the same clusters: each is asked for its silences and what it delivered."),
        plain(&format!("{pe}{}", s::PEERS_DNS), "text", "none", "host:port", Restart, "A DNS name whose every address is a watchdog (the Helm chart's headless service), resolved at every look."),
        plain(&format!("{pe}{}", s::PEERS_DNS_SCHEME), "text", s::PEERS_DNS_SCHEME_DEFAULT, "http or https", Restart, "How the addresses of peers.dns are reached."),
        plain(&format!("{pe}{}", s::PEERS_POLL_INTERVAL.key), "integer", &s::PEERS_POLL_INTERVAL.default.to_string(), &format!("{} to {}", s::PEERS_POLL_INTERVAL.min, s::PEERS_POLL_INTERVAL.max), Restart, "How often each peer is asked."),
        plain(&format!("{pe}{}", s::PEERS_TAKEOVER.key), "integer", &s::PEERS_TAKEOVER.default.to_string(), &format!("{} to {}, at least three looks", s::PEERS_TAKEOVER.min, s::PEERS_TAKEOVER.max), Restart, "A peer silent this long is gone, and the next in line (by instance_id) sends; each instance waits this long per place in line for those before it to deliver."),
        plain(&format!("{pe}{}", s::PEERS_CA_FILE), "path", "the system's trust roots", "a PEM file", Restart, "CA certificates for HTTPS peers."),
        secret(pe, &s::PEERS_KEY, "required", Restart, "A key every instance shares, at least 32 characters, other than the http.auth credential: each answer and each ask between peers is signed with it (HMAC-SHA256), and an answer without a good signature is refused."),
    ];

    let hb = "heartbeat.";
    let heartbeat = vec![
        secret(hb, &s::HEARTBEAT_URL, "required in heartbeat", Live, "Where to send each beat (a secret: a ping URL carries its check's token); for alertmanager, Alertmanager's .../api/v2/alerts."),
        choice(&format!("{hb}{}", s::HEARTBEAT_FORMAT), s::HEARTBEAT_FORMATS, Some(s::HEARTBEAT_FORMAT_DEFAULT), Live, "healthchecks: a POST to the URL, to the URL with /fail appended when blind; pagerduty: a GET to the URL (any ping URL), nothing when blind; alertmanager: an always-firing KafkaWatchdogHeartbeat alert whose endsAt lies three intervals ahead, ended at once when blind."),
        plain(&format!("{hb}{}", s::HEARTBEAT_INTERVAL.key), "integer", &s::HEARTBEAT_INTERVAL.default.to_string(), &format!("{} to {}", s::HEARTBEAT_INTERVAL.min, s::HEARTBEAT_INTERVAL.max), Live, "One beat this often while every round loop completes rounds (and the webhook dispatcher and the HTTP server make progress: what /healthz answers)."),
        plain(&format!("{hb}{}", s::HEARTBEAT_TIMEOUT.key), "integer", &s::HEARTBEAT_TIMEOUT.default.to_string(), &format!("{} to {}, shorter than the interval", s::HEARTBEAT_TIMEOUT.min, s::HEARTBEAT_TIMEOUT.max), Live, "Each beat's request ends within this."),
        plain(&format!("{hb}{}", s::HEARTBEAT_CA_FILE), "path", "the system's trust roots", "a PEM file", Live, "CA certificates for an HTTPS receiver."),
    ];

    vec![
        Section { title: "Top level", note: "", lines: top },
        Section {
            title: "Clusters",
            note: "Every key from `round_interval_secs` to `librdkafka` may also be set under `defaults:`; a cluster's own value wins, then `defaults:`, then the default shown. The `topics`, `canary` and `verdict` blocks merge key by key.",
            lines: cluster,
        },
        Section { title: "Cluster security", note: "", lines: security },
        Section { title: "Host mode", note: "Only in a cluster, not in `defaults:`.", lines: host },
        Section { title: "Webhooks", note: "", lines: webhooks },
        Section { title: "Silences", note: "", lines: silences },
        Section {
            title: "Peers",
            note: "Several watchdogs on the same clusters (the Helm chart's replicas, docs/high-availability.md): silences added on one hold on all, and a receiver that does not deduplicate (slack, teams, generic) hears each event from one of them. Peers prove who they are with the peer key (`key_file` or `key_env`), the same on every instance; the `http.auth` credential is never sent to a peer. Alertmanager and PagerDuty receivers get every instance's notifications and deduplicate them themselves.",
            lines: peers,
        },
        Section {
            title: "Heartbeat",
            note: "A dead man's switch for the watchdog itself (docs/webhooks.md): its receiver (healthchecks.io, a heartbeat or push monitor, Alertmanager's Watchdog route) alerts when the beats stop, which they do when the watchdog stops, cannot reach it, or goes blind (a round loop completing no rounds).",
            lines: heartbeat,
        },
    ]
}

/// Every line of the reference.
#[cfg(test)]
pub(crate) fn lines() -> Vec<Line> {
    sections().into_iter().flat_map(|s| s.lines).collect()
}

/// The settings a reload keeps at their running value, as the reload plan names them: the
/// first two parts of each key declared `restart` (`http.tls`, not `http.tls.cert_file`).
/// The reload tests hold the reload plan to it.
#[cfg(test)]
pub(crate) fn restart_settings() -> std::collections::BTreeSet<String> {
    lines()
        .into_iter()
        .filter(|l| l.reload == Reload::Restart)
        .flat_map(|l| {
            // A secret is one setting however it is given (`peers.key`).
            let secret = l.ty == "secret";
            l.keys.into_iter().map(move |k| {
                let k = k.splitn(3, '.').take(2).collect::<Vec<_>>().join(".");
                match secret {
                    true => k
                        .trim_end_matches("_env")
                        .trim_end_matches("_file")
                        .to_string(),
                    false => k,
                }
            })
        })
        .collect()
}

fn cell(t: &str) -> String {
    t.replace('|', "\\|")
}

/// docs/config.md.
pub fn reference() -> String {
    let mut out = String::from(
        "# Configuration reference\n\n\
         <!-- Generated from the key declarations (src/config/schema.rs, src/config/docs.rs): \
         `KW_CONFIG_DOCS_WRITE=1 cargo test --lib config::docs` rewrites it; do not edit. -->\n\n\
         `config/example.yaml` shows every key in context. Unknown keys are errors. Reload \
         (SIGHUP, `systemctl reload`): `live` is applied at once; `cluster` is applied by \
         restarting that cluster's probes, canary and evaluator; `restart` keeps its running \
         value until the process restarts (the reload names it in the log).\n",
    );
    for sec in sections() {
        out.push_str(&format!("\n## {}\n\n", sec.title));
        if !sec.note.is_empty() {
            out.push_str(&format!("{}\n\n", sec.note));
        }
        out.push_str("| key | type | default | accepted | reload | meaning |\n");
        out.push_str("|---|---|---|---|---|---|\n");
        for l in sec.lines {
            let keys: Vec<String> = l.keys.iter().map(|k| format!("`{k}`")).collect();
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                cell(&keys.join(" / ")),
                cell(&l.ty),
                cell(&l.default),
                cell(&l.range),
                l.reload.as_str(),
                cell(&l.meaning)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_reference_is_current() {
        // KW_DOCS_WRITE rewrites every generated doc at once; the older name still works.
        crate::model::generated::assert_current(
            "docs/config.md",
            &reference(),
            "KW_CONFIG_DOCS_WRITE=1 cargo test --lib config::docs",
            &["KW_CONFIG_DOCS_WRITE"],
        );
    }

    /// A file that opens every block the readers know, so that each asks for all its keys.
    /// Whether it loads does not matter: keys are asked for before values are judged.
    const EVERY_BLOCK: &str = "
instance_id: wd
http:
  listen: 127.0.0.1:9644
  external_url: https://wd.example/
  runbooks_url: https://wiki.example/runbooks
  tls: {cert_file: a.pem, key_file: a.key}
  auth:
    basic: {username: u, password_env: P}
    bearer_token_env: T
log: {level: info, format: text}
state_dir: /tmp/x
defaults:
  canary: {}
  verdict: {}
  topics: {}
clusters:
  - name: a
    bootstrap_servers: [k:9092]
    security:
      protocol: SASL_SSL
      sasl: {mechanism: PLAIN, username: u, password_env: P}
      tls: {ca_file: ca.pem}
    topics: {include: ['.*']}
    canary: {enabled: true}
    coordinators: {groups: true}
    certificates: {warning_days: 14}
    verdict: {open_after_secs: 1}
    librdkafka: {socket.keepalive.enable: true}
    host:
      brokers:
        - id: 1
          process: {systemd_unit: kafka.service}
          remediation: {enabled: false, command: [true]}
webhooks:
  - name: w
    url: http://127.0.0.1:1/
silences:
  - ends_at: 2030-01-01T00:00:00Z
    comment: c
peers:
  urls: [http://a:9644]
  dns: b:9644
  dns_scheme: http
  poll_interval_ms: 1000
  takeover_secs: 10
  ca_file: ca.pem
  key_file: peer-key
heartbeat:
  url_env: HB
  format: healthchecks
  interval_secs: 60
  timeout_ms: 5000
  ca_file: ca.pem
";

    /// `clusters[3].canary` and `defaults.canary` are both `clusters[].canary` here.
    fn normal(path: &str) -> String {
        let mut out = String::new();
        let mut skipping = false;
        for ch in path.chars() {
            match ch {
                '[' => {
                    skipping = true;
                    out.push('[');
                }
                ']' => {
                    skipping = false;
                    out.push(']');
                }
                _ if skipping => {}
                _ => out.push(ch),
            }
        }
        match out.strip_prefix("defaults.") {
            Some(rest) => format!("clusters[].{rest}"),
            None => out,
        }
    }

    #[test]
    fn every_key_a_reader_knows_has_a_line_and_every_line_a_reader() {
        crate::config::read::ASKED.with(|a| a.borrow_mut().clear());
        let _ = crate::config::parse_with_env(EVERY_BLOCK, "t.yaml", &|_| Some("x".into()));
        let asked: std::collections::BTreeSet<String> =
            crate::config::read::ASKED.with(|a| a.borrow().iter().map(|p| normal(p)).collect());
        let documented: Vec<String> = lines().into_iter().flat_map(|l| l.keys).collect();
        let missing: Vec<&String> = asked
            .iter()
            .filter(|k| {
                !documented.iter().any(|d| {
                    d == *k || d.starts_with(&format!("{k}.")) || d.starts_with(&format!("{k}[]."))
                })
            })
            .collect();
        assert!(
            missing.is_empty(),
            "keys without a line in the reference: {missing:?}"
        );
        let unknown: Vec<&String> = documented.iter().filter(|d| !asked.contains(*d)).collect();
        assert!(
            unknown.is_empty(),
            "lines for keys no reader knows: {unknown:?}"
        );
    }
}
