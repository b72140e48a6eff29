//! What a reload changes: a pure comparison of the running configuration with a newly
//! validated one. The daemon validates first (a file that does not load changes nothing),
//! then applies the plan: it restarts the loops of changed clusters, starts added ones,
//! stops removed ones, rebuilds the notifiers if the webhooks changed, and names in its log
//! every setting it could not apply.
//!
//! Settings are named as in the YAML file (`clusters.orders-eu.round_interval_secs`), so
//! an operator can find them. Values are never shown except for the settings that need a
//! restart, none of which is a secret.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::{
    ClusterConfig, Config, HttpAuth, HttpTlsConfig, LogFormat, LogLevel, WebhookConfig,
};

/// What applying a new configuration takes. Cluster lists follow the file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadPlan {
    /// In both files with different settings: stop the loop, start one with the new config.
    pub restart_clusters: Vec<String>,
    pub add_clusters: Vec<String>,
    pub remove_clusters: Vec<String>,
    /// Some receiver was added, removed or changed (a rotated secret counts): rebuild the
    /// notifiers from the new `webhooks`.
    pub webhooks_changed: bool,
    /// The new log level, when it changed; applied through the log filter's reload handle.
    pub log_level: Option<LogLevel>,
    /// Every setting that differs, by its name in the file.
    pub changed: Vec<String>,
    /// Settings that differ but keep their running value until the process restarts, each
    /// as `http.listen: restart needed (running X, file has Y)`.
    pub not_applied: Vec<String>,
}

impl ReloadPlan {
    /// The file says what the process already runs.
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty()
    }
}

/// Compares the running configuration with a new, validated one.
pub fn plan(old: &Config, new: &Config) -> ReloadPlan {
    // Destructured so that a field added to `Config` fails to compile here until someone
    // decides whether it can change at runtime.
    let Config {
        instance_id,
        http_listen,
        http_external_url,
        http_runbooks_url,
        http_tls,
        http_auth,
        log,
        state_dir,
        clusters,
        webhooks,
        silences,
        peers,
        heartbeat,
        // Said when the file is loaded (the reload logs them); nothing to apply.
        warnings: _,
    } = new;
    let mut p = ReloadPlan::default();
    let needs_restart = |p: &mut ReloadPlan, key: &str, running: String, file: String| {
        p.changed.push(key.to_string());
        p.not_applied.push(format!(
            "{key}: restart needed (running {running}, file has {file})"
        ));
    };
    // Shown in /status and written into canary records and incident state from the start:
    // one process, one identity.
    if *instance_id != old.instance_id {
        needs_restart(
            &mut p,
            "instance_id",
            old.instance_id.clone(),
            instance_id.clone(),
        );
    }
    // The listener is bound once, before anything else starts.
    if *http_listen != old.http_listen {
        needs_restart(
            &mut p,
            "http.listen",
            old.http_listen.to_string(),
            http_listen.to_string(),
        );
    }
    // Read by webhook delivery, which a reload re-spawns whenever the receivers change;
    // a restart keeps it simple and certain.
    let show = |u: &Option<url::Url>| u.as_ref().map_or("none".to_string(), |u| u.to_string());
    for (key, running, file) in [
        (
            "http.external_url",
            &old.http_external_url,
            http_external_url,
        ),
        (
            "http.runbooks_url",
            &old.http_runbooks_url,
            http_runbooks_url,
        ),
    ] {
        if running != file {
            needs_restart(&mut p, key, show(running), show(file));
        }
    }
    // The server, its TLS acceptor and its credential check are built once, with the
    // listener. A certificate renewed at the same path needs nothing: the acceptor serves
    // what the credential watcher (config::live) last read well.
    if *http_tls != old.http_tls {
        needs_restart(
            &mut p,
            "http.tls",
            tls_summary(old.http_tls.as_ref()),
            tls_summary(http_tls.as_ref()),
        );
    }
    if *http_auth != old.http_auth {
        let running = auth_summary(old.http_auth.as_ref());
        let mut file = auth_summary(http_auth.as_ref());
        // Only the secret differs: say so without showing either value.
        if file == running {
            file.push_str(" with another secret");
        }
        needs_restart(&mut p, "http.auth", running, file);
    }
    // The process may run without the permission to open another directory (systemd's
    // StateDirectory= grants exactly one), and open incidents live in the old one.
    if *state_dir != old.state_dir {
        needs_restart(
            &mut p,
            "state_dir",
            old.state_dir.display().to_string(),
            state_dir.display().to_string(),
        );
    }
    // The log subscriber's format is fixed when it is installed.
    if log.format != old.log.format {
        needs_restart(
            &mut p,
            "log.format",
            format_name(old.log.format).into(),
            format_name(log.format).into(),
        );
    }
    if log.level != old.log.level {
        p.changed.push("log.level".into());
        p.log_level = Some(log.level);
    }

    plan_clusters(&mut p, &old.clusters, clusters);
    plan_webhooks(&mut p, &old.webhooks, webhooks);
    p.webhooks_changed = p.changed.iter().any(|k| k.starts_with("webhooks."));
    // Applied at once: the next round of each cluster sees the new list.
    if *silences != old.silences {
        p.changed.push("silences".into());
    }
    // The heartbeat's task takes the new block at its next beat.
    if *heartbeat != old.heartbeat {
        p.changed.push("heartbeat".into());
    }
    // The peers' task and the delivery order it feeds start once, with alerting.
    for (key, running, file) in peer_settings(old.peers.as_ref())
        .into_iter()
        .zip(peer_settings(peers.as_ref()))
        .map(|((key, running), (_, file))| (key, running, file))
    {
        if running != file {
            needs_restart(&mut p, &format!("peers.{key}"), running, file);
        }
    }
    p
}

/// Clusters added, removed, or changed (their loops restart).
fn plan_clusters(p: &mut ReloadPlan, old: &[ClusterConfig], clusters: &[ClusterConfig]) {
    let before: BTreeMap<&str, &ClusterConfig> = old.iter().map(|c| (c.name.as_str(), c)).collect();
    let after: BTreeSet<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
    for c in clusters {
        match before.get(c.name.as_str()) {
            None => {
                p.changed.push(format!("clusters.{}", c.name));
                p.add_clusters.push(c.name.clone());
            }
            Some(o) => {
                let diff = cluster_diff(o, c);
                if !diff.is_empty() {
                    p.changed
                        .extend(diff.iter().map(|k| format!("clusters.{}.{k}", c.name)));
                    p.restart_clusters.push(c.name.clone());
                }
            }
        }
    }
    for c in old {
        if !after.contains(c.name.as_str()) {
            p.changed.push(format!("clusters.{}", c.name));
            p.remove_clusters.push(c.name.clone());
        }
    }
}

/// Receivers added, removed or changed (delivery is set up again).
fn plan_webhooks(p: &mut ReloadPlan, old: &[WebhookConfig], webhooks: &[WebhookConfig]) {
    let before: BTreeMap<&str, &WebhookConfig> = old.iter().map(|w| (w.name.as_str(), w)).collect();
    let after: BTreeSet<&str> = webhooks.iter().map(|w| w.name.as_str()).collect();
    for w in webhooks {
        let same = before
            .get(w.name.as_str())
            .is_some_and(|o| same_webhook(o, w));
        if !same {
            p.changed.push(format!("webhooks.{}", w.name));
        }
    }
    for w in old {
        if !after.contains(w.name.as_str()) {
            p.changed.push(format!("webhooks.{}", w.name));
        }
    }
}

/// The configuration to run after a reload: the new one, with the settings that need a
/// restart kept at their running values, so that what the process reports is what it does.
pub fn applied(old: &Config, mut new: Config) -> Config {
    new.instance_id.clone_from(&old.instance_id);
    new.http_listen = old.http_listen;
    // Webhook links are made from it: a reload that rebuilt the notifiers would otherwise
    // apply the one setting it has just said needs a restart.
    new.http_external_url.clone_from(&old.http_external_url);
    new.http_runbooks_url.clone_from(&old.http_runbooks_url);
    new.http_tls.clone_from(&old.http_tls);
    new.http_auth.clone_from(&old.http_auth);
    new.state_dir.clone_from(&old.state_dir);
    new.log.format = old.log.format;
    new.peers.clone_from(&old.peers);
    new
}

/// Each `peers:` key as the reload names it, with its value in words.
fn peer_settings(p: Option<&crate::config::PeersConfig>) -> [(&'static str, String); 7] {
    let none = || "none".to_string();
    let urls = p.map_or_else(none, |p| {
        let all: Vec<String> = p.urls.iter().map(ToString::to_string).collect();
        if all.is_empty() {
            none()
        } else {
            all.join(", ")
        }
    });
    let dns = p.and_then(|p| p.dns.as_ref());
    [
        ("urls", urls),
        (
            "dns",
            dns.map_or_else(none, |d| format!("{}:{}", d.host, d.port)),
        ),
        ("dns_scheme", dns.map_or_else(none, |d| d.scheme.clone())),
        (
            "poll_interval_ms",
            p.map_or_else(none, |p| p.poll_interval.as_millis().to_string()),
        ),
        (
            "takeover_secs",
            p.map_or_else(none, |p| p.takeover.as_secs().to_string()),
        ),
        (
            "ca_file",
            p.and_then(|p| p.ca_file.as_ref())
                .map_or_else(none, |f| f.display().to_string()),
        ),
        // Named by a digest's first bytes: which key, never the key.
        ("key", p.map_or_else(none, |p| key_print(p.key.expose()))),
    ]
}

fn key_print(key: &str) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
    let hex: String = d.as_ref()[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("a key with SHA-256 {hex}...")
}

fn tls_summary(tls: Option<&HttpTlsConfig>) -> String {
    match tls {
        None => "plain HTTP".into(),
        Some(t) => format!(
            "certificate {}, key {}",
            t.cert_file.display(),
            t.key_file.display()
        ),
    }
}

/// The scheme and user name, never the secret: these lines go to the log.
fn auth_summary(auth: Option<&HttpAuth>) -> String {
    match auth {
        None => "no authentication".into(),
        Some(HttpAuth::Basic { username, .. }) => format!("basic for user {username}"),
        Some(HttpAuth::Bearer { .. }) => "a bearer token".into(),
    }
}

fn format_name(f: LogFormat) -> &'static str {
    match f {
        LogFormat::Text => "text",
        LogFormat::Json => "json",
    }
}

/// The keys of a cluster that differ. Any difference restarts the cluster's loop, which
/// builds its probes, canary and evaluator from scratch; the list is for the log.
fn cluster_diff(old: &ClusterConfig, new: &ClusterConfig) -> Vec<&'static str> {
    // Destructured for the same reason as `Config` in `plan`.
    let ClusterConfig {
        name: _,
        bootstrap_servers,
        controllers,
        security,
        // The timing keys, declared in the configuration schema, compare there.
        timing: _,
        topics,
        canary,
        coordinators,
        certificates,
        verdict,
        librdkafka,
        host,
        labels,
    } = new;
    let mut d = Vec::new();
    let mut check = |differs: bool, key: &'static str| {
        if differs {
            d.push(key);
        }
    };
    check(
        *bootstrap_servers != old.bootstrap_servers,
        "bootstrap_servers",
    );
    check(*controllers != old.controllers, "controllers");
    // Secrets compare by value: a rotated password file restarts the cluster's clients.
    check(*security != old.security, "security");
    for key in crate::config::ClusterConfig::changed_timing(old, new) {
        check(true, key);
    }
    // Compiled patterns have no equality; the text they came from does.
    check(
        topics.include_patterns() != old.topics.include_patterns()
            || topics.exclude_patterns() != old.topics.exclude_patterns(),
        "topics",
    );
    check(*canary != old.canary, "canary");
    check(*coordinators != old.coordinators, "coordinators");
    check(*certificates != old.certificates, "certificates");
    check(*verdict != old.verdict, "verdict");
    check(*librdkafka != old.librdkafka, "librdkafka");
    check(*host != old.host, "host");
    check(*labels != old.labels, "labels");
    d
}

fn same_webhook(old: &WebhookConfig, new: &WebhookConfig) -> bool {
    let WebhookConfig {
        name,
        url,
        target,
        format,
        min_severity,
        clusters,
        repeat_interval,
        send_resolved,
        timeout,
        tls_verify,
        ca_file,
        headers,
        hmac_secret,
        routing_key,
        group_interval,
        slack_bot,
    } = new;
    *name == old.name
        && *url == old.url
        && *target == old.target
        && *format == old.format
        && *min_severity == old.min_severity
        && *clusters == old.clusters
        && *repeat_interval == old.repeat_interval
        && *send_resolved == old.send_resolved
        && *timeout == old.timeout
        && *tls_verify == old.tls_verify
        && *ca_file == old.ca_file
        && *headers == old.headers
        && *hmac_secret == old.hmac_secret
        && *routing_key == old.routing_key
        && *group_interval == old.group_interval
        && *slack_bot == old.slack_bot
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "
instance_id: wd-1
http:
  listen: 127.0.0.1:9644
log:
  level: info
  format: text
state_dir: /var/lib/kafka-watchdog
clusters:
  - name: orders
    bootstrap_servers: [k1:9092, k2:9092]
  - name: payments
    bootstrap_servers: [p1:9093]
    security:
      protocol: SASL_PLAINTEXT
      sasl:
        mechanism: SCRAM-SHA-512
        username: watchdog
        password_env: KW_PAYMENTS_PASSWORD
webhooks:
  - name: sink
    url: http://127.0.0.1:9645/
    format: generic
";

    fn load(text: &str, password: &str) -> Config {
        let env = |k: &str| (k == "KW_PAYMENTS_PASSWORD").then(|| password.to_string());
        match crate::config::parse_with_env(text, "t.yaml", &env) {
            Ok(c) => c,
            Err(e) => panic!("test config does not load:\n{e}\n{text}"),
        }
    }

    fn base() -> Config {
        load(BASE, "s3cret")
    }

    /// BASE with one substring replaced; the replaced text must be there.
    fn edited(from: &str, to: &str) -> Config {
        assert!(BASE.contains(from), "{from:?} not in BASE");
        load(&BASE.replacen(from, to, 1), "s3cret")
    }

    #[test]
    fn the_same_file_changes_nothing() {
        let p = plan(&base(), &base());
        assert!(p.is_empty());
        assert_eq!(p, ReloadPlan::default());
    }

    #[test]
    fn cluster_order_alone_is_no_change() {
        let swapped = "
clusters:
  - name: payments
    bootstrap_servers: [p1:9093]
    security:
      protocol: SASL_PLAINTEXT
      sasl:
        mechanism: SCRAM-SHA-512
        username: watchdog
        password_env: KW_PAYMENTS_PASSWORD
  - name: orders
    bootstrap_servers: [k1:9092, k2:9092]
webhooks:";
        let start = BASE.find("clusters:").unwrap();
        let end = BASE.find("webhooks:").unwrap() + "webhooks:".len();
        let text = format!("{}{}{}", &BASE[..start], swapped.trim_start(), &BASE[end..]);
        assert!(plan(&base(), &load(&text, "s3cret")).is_empty());
    }

    #[test]
    fn a_changed_cluster_setting_restarts_only_that_cluster() {
        let new = edited(
            "bootstrap_servers: [k1:9092, k2:9092]",
            "bootstrap_servers: [k1:9092, k2:9092]\n    round_interval_secs: 20\n    topics:\n      exclude: [\"__.*\"]",
        );
        let p = plan(&base(), &new);
        assert_eq!(p.restart_clusters, ["orders"]);
        assert_eq!(
            p.changed,
            [
                "clusters.orders.round_interval_secs",
                "clusters.orders.topics"
            ]
        );
        assert!(p.add_clusters.is_empty() && p.remove_clusters.is_empty());
        assert!(!p.webhooks_changed);
        assert!(p.not_applied.is_empty());
    }

    #[test]
    fn nested_blocks_and_librdkafka_properties_count() {
        let new = edited(
            "bootstrap_servers: [p1:9093]",
            "bootstrap_servers: [p1:9093]\n    canary:\n      lost_after_secs: 120\n    verdict:\n      open_after_rounds: 4\n    librdkafka:\n      socket.keepalive.enable: true",
        );
        let p = plan(&base(), &new);
        assert_eq!(p.restart_clusters, ["payments"]);
        assert_eq!(
            p.changed,
            [
                "clusters.payments.canary",
                "clusters.payments.verdict",
                "clusters.payments.librdkafka"
            ]
        );
    }

    #[test]
    fn a_rotated_secret_restarts_the_cluster_and_is_not_shown() {
        let p = plan(&base(), &load(BASE, "rotated"));
        assert_eq!(p.restart_clusters, ["payments"]);
        assert_eq!(p.changed, ["clusters.payments.security"]);
        assert!(!format!("{p:?}").contains("rotated"));
    }

    #[test]
    fn clusters_added_and_removed() {
        let new = edited(
            "  - name: orders\n    bootstrap_servers: [k1:9092, k2:9092]\n",
            "  - name: billing\n    bootstrap_servers: [b1:9092]\n",
        );
        let p = plan(&base(), &new);
        assert_eq!(p.add_clusters, ["billing"]);
        assert_eq!(p.remove_clusters, ["orders"]);
        assert!(p.restart_clusters.is_empty());
        assert_eq!(p.changed, ["clusters.billing", "clusters.orders"]);
    }

    #[test]
    fn webhook_changes_are_flagged() {
        let p = plan(
            &base(),
            &edited(
                "format: generic",
                "format: generic\n    send_resolved: false",
            ),
        );
        assert!(p.webhooks_changed);
        assert_eq!(p.changed, ["webhooks.sink"]);
        assert!(p.restart_clusters.is_empty());

        let p = plan(&base(), &edited("name: sink", "name: sink2"));
        assert!(p.webhooks_changed);
        assert_eq!(p.changed, ["webhooks.sink2", "webhooks.sink"]);
    }

    #[test]
    fn http_tls_and_auth_need_a_restart_and_show_no_secret() {
        let testdata = concat!(env!("CARGO_MANIFEST_DIR"), "/src/observe/wire/testdata");
        let with_http = |auth: &str| {
            let text = BASE.replace(
                "  listen: 127.0.0.1:9644\n",
                &format!(
                    "  listen: 127.0.0.1:9644\n  tls: {{cert_file: {testdata}/server.pem, key_file: {testdata}/server.key}}\n  auth: {auth}\n"
                ),
            );
            let env = |k: &str| match k {
                "KW_PAYMENTS_PASSWORD" => Some("s3cret".to_string()),
                "KW_HTTP_TOKEN" => Some("t0ken-one".to_string()),
                "KW_HTTP_TOKEN_2" => Some("t0ken-two".to_string()),
                _ => None,
            };
            crate::config::parse_with_env(&text, "t.yaml", &env).unwrap()
        };
        let old = base();
        let new = with_http("{bearer_token_env: KW_HTTP_TOKEN}");
        let p = plan(&old, &new);
        assert_eq!(
            p.not_applied,
            [
                format!(
                    "http.tls: restart needed (running plain HTTP, file has certificate {testdata}/server.pem, key {testdata}/server.key)"
                ),
                "http.auth: restart needed (running no authentication, file has a bearer token)"
                    .to_string(),
            ]
        );
        let running = applied(&old, new);
        assert_eq!(running.http_tls, None);
        assert_eq!(running.http_auth, None);

        let rotated = plan(
            &with_http("{bearer_token_env: KW_HTTP_TOKEN}"),
            &with_http("{bearer_token_env: KW_HTTP_TOKEN_2}"),
        );
        assert_eq!(
            rotated.not_applied,
            ["http.auth: restart needed (running a bearer token, file has a bearer token with another secret)"]
        );
        let shown = format!("{rotated:?}");
        assert!(!shown.contains("t0ken"), "{shown}");
    }

    #[test]
    fn process_wide_settings_are_named_and_kept() {
        let text = BASE
            .replace("instance_id: wd-1", "instance_id: wd-2")
            .replace("listen: 127.0.0.1:9644", "listen: 0.0.0.0:9700")
            .replace("format: text", "format: json")
            .replace("level: info", "level: debug")
            .replace("/var/lib/kafka-watchdog", "/srv/kw");
        let new = load(&text, "s3cret");
        let old = base();
        let p = plan(&old, &new);
        assert_eq!(
            p.not_applied,
            [
                "instance_id: restart needed (running wd-1, file has wd-2)",
                "http.listen: restart needed (running 127.0.0.1:9644, file has 0.0.0.0:9700)",
                "state_dir: restart needed (running /var/lib/kafka-watchdog, file has /srv/kw)",
                "log.format: restart needed (running text, file has json)",
            ]
        );
        assert_eq!(p.log_level, Some(LogLevel::Debug));
        assert!(p.changed.contains(&"log.level".to_string()));
        assert!(p.restart_clusters.is_empty() && !p.webhooks_changed);

        let running = applied(&old, new);
        assert_eq!(running.instance_id, "wd-1");
        assert_eq!(running.http_listen, old.http_listen);
        assert_eq!(running.state_dir, old.state_dir);
        assert_eq!(running.log.format, LogFormat::Text);
        assert_eq!(running.log.level, LogLevel::Debug);
        // The next reload of the same file names the same pending restarts, and nothing else.
        let again = plan(&running, &load(&text, "s3cret"));
        assert_eq!(again.not_applied, p.not_applied);
        assert_eq!(again.changed.len(), 4);
    }

    /// The settings a reload does not apply are the ones the configuration reference
    /// declares `restart`, and the running configuration keeps each of them.
    #[test]
    fn the_settings_kept_until_restart_are_the_declared_ones() {
        let testdata = concat!(env!("CARGO_MANIFEST_DIR"), "/src/observe/wire/testdata");
        let text = BASE
            .replace("instance_id: wd-1", "instance_id: wd-2")
            .replace(
                "  listen: 127.0.0.1:9644\n",
                &format!(
                    "  listen: 0.0.0.0:9700\n  external_url: https://wd.example/\n  runbooks_url: https://wiki.example/runbooks\n  tls: {{cert_file: {testdata}/server.pem, key_file: {testdata}/server.key}}\n  auth: {{bearer_token_env: KW_HTTP_TOKEN}}\n"
                ),
            )
            .replace("format: text", "format: json")
            .replace("level: info", "level: debug")
            .replace("/var/lib/kafka-watchdog", "/srv/kw")
            + &format!("peers:\n  urls: [http://wd-3:9644]\n  dns: wd.example:9644\n  dns_scheme: https\n  poll_interval_ms: 500\n  takeover_secs: 5\n  ca_file: {testdata}/ca.pem\n  key_env: KW_PEER_KEY\n");
        let env = |k: &str| match k {
            "KW_PAYMENTS_PASSWORD" => Some("s3cret".to_string()),
            "KW_HTTP_TOKEN" => Some("t0ken".to_string()),
            "KW_PEER_KEY" => Some("k".repeat(32)),
            _ => None,
        };
        let new = crate::config::parse_with_env(&text, "t.yaml", &env).unwrap();
        let old = base();
        let p = plan(&old, &new);
        let named: BTreeSet<String> = p
            .not_applied
            .iter()
            .filter_map(|l| l.split(':').next())
            .map(str::to_string)
            .collect();
        assert_eq!(named, crate::config::restart_settings());
        let running = applied(&old, new);
        assert_eq!(
            plan(&old, &running).not_applied,
            Vec::<String>::new(),
            "a setting said to need a restart was applied anyway"
        );
    }
}
