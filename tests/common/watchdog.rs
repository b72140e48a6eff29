//! Runs the real `kafka-watchdog` binary against the lab (with the launcher the benchmarks
//! use too, in the test-support crate) and reads its HTTP surface.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use kafka_watchdog_test_support::watchdog as support;

/// A plain HTTP/1.0 GET of 127.0.0.1:`port`: status code and body.
pub fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    support::http_get(port, path)
}

static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

/// A port for this test's watchdog, distinct per test and per test binary run.
pub fn free_port() -> u16 {
    let base = 19_700 + (std::process::id() % 200) as u16 * 10;
    base + NEXT_PORT.fetch_add(1, Ordering::SeqCst) % 10
}

/// Settings of the watchdog under test, fast enough for tests.
pub struct WatchdogSettings {
    pub round_interval_secs: u64,
    pub request_timeout_ms: u64,
    /// Lines inside the cluster's `canary:` block, each indented by six spaces.
    pub canary_yaml: String,
    /// Lines at cluster level, each indented by four spaces.
    pub extra_cluster_yaml: String,
    /// Lines at the top level.
    pub extra_top_yaml: String,
}

impl Default for WatchdogSettings {
    fn default() -> Self {
        WatchdogSettings {
            round_interval_secs: 2,
            request_timeout_ms: 1500,
            canary_yaml: String::new(),
            extra_cluster_yaml: String::new(),
            extra_top_yaml: String::new(),
        }
    }
}

/// The daemon under test: the shared launcher's process, with the tests' config and
/// assertions (every read panics with what it got).
pub struct Watchdog(support::Watchdog);

impl std::ops::Deref for Watchdog {
    type Target = support::Watchdog;
    fn deref(&self) -> &support::Watchdog {
        &self.0
    }
}

pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "kw-test-{name}-{}-{}",
        std::process::id(),
        NEXT_PORT.load(Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

impl Watchdog {
    pub fn config_yaml(port: u16, dir: &std::path::Path, s: &WatchdogSettings) -> String {
        format!(
            "instance_id: test\nhttp:\n  listen: 127.0.0.1:{port}\nlog:\n  level: debug\nstate_dir: {state}\n{top}\
             clusters:\n  - name: lab\n    bootstrap_servers: [127.0.0.11:9092, 127.0.0.12:9092, 127.0.0.13:9092]\n    \
             round_interval_secs: {round}\n    connect_timeout_ms: 1000\n    request_timeout_ms: {req}\n    \
             canary:\n      produce_timeout_ms: {req}\n{canary}{extra}",
            state = dir.join("state").display(),
            top = s.extra_top_yaml,
            round = s.round_interval_secs,
            req = s.request_timeout_ms,
            canary = s.canary_yaml,
            extra = s.extra_cluster_yaml,
        )
    }

    /// Starts the daemon and waits until it has completed a round.
    pub fn start(name: &str, s: &WatchdogSettings) -> Watchdog {
        Self::start_yaml(name, |port, dir| Self::config_yaml(port, dir, s))
    }

    /// Starts the daemon with a config of the caller's (given the HTTP port and a folder).
    pub fn start_yaml(name: &str, yaml: impl FnOnce(u16, &std::path::Path) -> String) -> Watchdog {
        Self::start_at(name, support::LOOPBACK, free_port(), yaml)
    }

    /// [`start_yaml`](Self::start_yaml) on an address and port the caller chose (the
    /// config must listen there).
    pub fn start_at(
        name: &str,
        host: std::net::IpAddr,
        port: u16,
        yaml: impl FnOnce(u16, &std::path::Path) -> String,
    ) -> Watchdog {
        Self::start_with_env(name, host, port, &[], yaml)
    }

    /// [`start_at`](Self::start_at) with environment variables for the daemon besides the
    /// inherited ones.
    pub fn start_with_env(
        name: &str,
        host: std::net::IpAddr,
        port: u16,
        env: &[(&str, &str)],
        yaml: impl FnOnce(u16, &std::path::Path) -> String,
    ) -> Watchdog {
        let bin = std::path::Path::new(env!("CARGO_BIN_EXE_kafka-watchdog"));
        Self::launch(name, bin, host, port, env, yaml)
    }

    /// [`start_at`](Self::start_at) with another program in place of the daemon (a
    /// launcher that execs it, as `kafka_lab::cage::Cage::launcher` writes).
    pub fn start_bin(
        name: &str,
        bin: &std::path::Path,
        host: std::net::IpAddr,
        port: u16,
        yaml: impl FnOnce(u16, &std::path::Path) -> String,
    ) -> Watchdog {
        Self::launch(name, bin, host, port, &[], yaml)
    }

    fn launch(
        name: &str,
        bin: &std::path::Path,
        host: std::net::IpAddr,
        port: u16,
        env: &[(&str, &str)],
        yaml: impl FnOnce(u16, &std::path::Path) -> String,
    ) -> Watchdog {
        let dir = temp_dir(name);
        let yaml = yaml(port, &dir);
        let launched = support::Watchdog::launch(&support::Launch {
            host,
            bin,
            dir: &dir,
            port,
            yaml: &yaml,
            check_config: false,
            ready_within: Duration::from_secs(30),
            env,
        });
        Watchdog(launched.unwrap_or_else(|e| panic!("{e}")))
    }

    pub fn status(&self) -> serde_json::Value {
        self.0.status().unwrap_or_else(|e| panic!("/status: {e}"))
    }

    /// The verdict of one broker in cluster `lab`.
    pub fn broker(&self, id: i32) -> Option<serde_json::Value> {
        support::broker(&self.status(), id).cloned()
    }

    pub fn broker_state(&self, id: i32) -> Option<String> {
        self.broker(id)
            .and_then(|b| b["state"].as_str().map(str::to_string))
    }

    /// Parses /metrics with a Prometheus text parser.
    pub fn metrics(&self) -> prometheus_parse::Scrape {
        let (code, body) = self.get("/metrics").expect("GET /metrics");
        assert_eq!(code, 200);
        let lines = body.lines().map(|l| Ok(l.to_string()));
        prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text exposition")
    }

    /// The value of one sample whose labels include every pair of `labels`.
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        metric_value(&self.metrics(), name, labels)
    }

    /// Waits until `n` more rounds of the first cluster have completed (instead of a fixed
    /// sleep of "a few rounds"): as soon as they have, and never less.
    pub fn wait_rounds(&self, n: u32, within: Duration) {
        let done = || {
            self.metric("kafka_watchdog_rounds_total", &[])
                .unwrap_or(0.0)
        };
        let from = done();
        super::eventually(within, &format!("{n} more rounds"), || {
            (done() >= from + f64::from(n)).then_some(())
        });
    }

    /// Waits until every one of the lab's three canary partitions has a timed write: what
    /// the canary sees (a follower that stopped replicating holds its writes) counts only
    /// once it writes.
    pub fn wait_canary_writing(&self, within: Duration) {
        super::eventually(within, "canary round trips", || {
            let c = self.canary();
            let ps = c["partitions"].as_array()?.clone();
            (ps.len() == 3 && ps.iter().all(|p| p["produce_seconds"].is_number())).then_some(())
        });
    }
}

/// The sum of every sample of `name` whose labels include every pair of `labels`.
pub fn metric_sum(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| {
            s.metric == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(k).is_some_and(|x| x == *v))
        })
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum()
}

pub fn metric_value(
    scrape: &prometheus_parse::Scrape,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(k).is_some_and(|x| x == *v))
        })
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => f64::NAN,
        })
}

impl Watchdog {
    /// The canary section of cluster `lab` in /status.
    pub fn canary(&self) -> serde_json::Value {
        self.status()["clusters"][0]["canary"].clone()
    }

    /// The canary partition `p` this round.
    pub fn canary_partition(&self, p: i64) -> Option<serde_json::Value> {
        self.canary()["partitions"]
            .as_array()?
            .iter()
            .find(|x| x["partition"] == p)
            .cloned()
    }

    /// Names of the rules that fired for broker `id`.
    pub fn rules(&self, id: i32) -> Vec<String> {
        support::broker_rules(&self.status(), id)
    }
}

/// A local webhook receiver (the lab's sink) on a runtime of its own, for sync tests.
pub struct Receiver {
    sink: kafka_lab::sink::Sink,
    _rt: tokio::runtime::Runtime,
}

impl Receiver {
    pub fn start() -> Receiver {
        Self::start_on(0)
    }

    /// A receiver on a given port (0: any), e.g. one a watchdog has been sending to while
    /// nothing listened.
    pub fn start_on(port: u16) -> Receiver {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let sink = rt
            .block_on(kafka_lab::sink::Sink::start(addr))
            .expect("sink");
        Receiver { sink, _rt: rt }
    }

    pub fn url(&self) -> String {
        self.sink.url()
    }

    pub fn received(&self) -> Vec<serde_json::Value> {
        self.sink.received()
    }

    /// Waits for a notification that satisfies `pred`; panics with everything received.
    pub fn wait(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let end = Instant::now() + timeout;
        loop {
            if let Some(v) = self.received().into_iter().find(|v| pred(v)) {
                return v;
            }
            assert!(
                Instant::now() < end,
                "no webhook {what} within {timeout:?}; received:\n{:#}",
                serde_json::Value::Array(self.received())
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The webhook YAML block sending generic JSON here, for `extra_top_yaml`. Every
    /// update goes at once (`group_interval_secs: 0`): these tests time detection, and
    /// coalescing has tests of its own (tests/slack.rs, the notify unit tests).
    pub fn yaml(&self) -> String {
        format!(
            "webhooks:\n  - name: test-sink\n    url: {}\n    format: generic\n    min_severity: info\n    repeat_interval_secs: 0\n    group_interval_secs: 0\n",
            self.url()
        )
    }
}

/// `event` and `kind` (and, when given, `broker_id`) of a generic webhook body match.
pub fn is_event(v: &serde_json::Value, event: &str, kind: &str, broker: Option<i64>) -> bool {
    v["event"] == event
        && v["kind"] == kind
        && broker.is_none_or(|b| v["broker_id"].as_i64() == Some(b))
}

/// Metrics that exist only with host mode (a cluster's `host:` block) or remediation.
pub fn host_mode_metric(name: &str) -> bool {
    name.starts_with("kafka_watchdog_host_") || name.starts_with("kafka_watchdog_remediations")
}

/// The families only a watchdog with `peers:` has (the other watchdogs it asks).
pub fn peers_metric(name: &str) -> bool {
    name.starts_with("kafka_watchdog_peer")
}

/// The families only a cluster with TLS listeners has (its brokers' certificates).
pub fn tls_metric(name: &str) -> bool {
    name.starts_with("kafka_watchdog_broker_certificate_")
        || name.starts_with("kafka_watchdog_cluster_certificate_")
}

/// Every metric the Grafana dashboard and the alert rules use, among those `which` selects,
/// exists in this daemon's real /metrics.
pub fn dashboard_metrics_exist(w: &Watchdog, which: impl Fn(&str) -> bool) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut used = std::collections::BTreeSet::new();
    for file in ["dashboards/kafka-watchdog.json", "dashboards/alerts.yaml"] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("kafka_watchdog_") {
            let name: String = rest[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[i + name.len()..];
            if which(&name) {
                used.insert(name);
            }
        }
    }
    assert!(!used.is_empty(), "no metric name read from the dashboard");
    // A family shows on /metrics once it has a sample: the group coordinators' latency,
    // for one, after the first answer, which waits for __consumer_offsets to be created on
    // a fresh cluster. So this waits a bounded time for each family to appear.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, text) = w.get("/metrics").unwrap();
        let families: std::collections::BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        let missing: Vec<&String> = used
            .iter()
            .filter(|name| {
                let base = ["_bucket", "_count", "_sum", "_total"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .unwrap_or(name);
                !families.contains(name.as_str()) && !families.contains(base)
            })
            .collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "used by the dashboard or rules but not exposed after 60 s: {missing:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// A watchdog with the default timing (10 s rounds, 3 s requests), its own canary topic,
/// incidents resolving 5 s after their fault, webhooks to `rx`, and `extra_cluster_yaml`
/// (indented for the cluster's mapping) beside that: what the other roles' and the control
/// plane's checks run.
pub fn start_default_timing(name: &str, rx: &Receiver, extra_cluster_yaml: &str) -> Watchdog {
    let canary_topic = super::unique_topic(&format!("kwc-{name}"));
    Watchdog::start(
        name,
        &WatchdogSettings {
            round_interval_secs: 10,
            request_timeout_ms: 3000,
            canary_yaml: format!("      topic: {canary_topic}\n"),
            extra_cluster_yaml: format!(
                "{extra_cluster_yaml}    verdict:\n      resolve_after_secs: 5\n"
            ),
            extra_top_yaml: rx.yaml(),
        },
    )
}

/// A watchdog for the incident checks: its own canary topic (plus `canary_yaml`), webhooks
/// to `rx`, confirmation after 2 s (one 2 s round, as `open_after_rounds: 2` meant).
pub fn start_incidents(name: &str, rx: &Receiver, canary_yaml: &str) -> Watchdog {
    let canary_topic = super::unique_topic(&format!("kwc-{name}"));
    Watchdog::start(
        name,
        &WatchdogSettings {
            canary_yaml: format!("      topic: {canary_topic}\n{canary_yaml}"),
            extra_cluster_yaml:
                "    verdict:\n      open_after_secs: 2\n      resolve_after_secs: 2\n".into(),
            extra_top_yaml: rx.yaml(),
            ..WatchdogSettings::default()
        },
    )
}

/// Whether the array `field` of a webhook body holds a string containing `needle`.
pub fn has(v: &serde_json::Value, field: &str, needle: &str) -> bool {
    v[field].as_array().is_some_and(|a| {
        a.iter()
            .any(|x| x.as_str().is_some_and(|s| s.contains(needle)))
    })
}

/// The numbers in the array `field` of a webhook body.
pub fn ids(v: &serde_json::Value, field: &str) -> Vec<i64> {
    v[field]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_i64()).collect())
        .unwrap_or_default()
}

/// The words a partition finding's summary uses for its kind (`impact:` lines quote it).
fn partition_words(kind: &str) -> &'static str {
    match kind {
        "offline_partitions" => "offline",
        "under_min_isr" => "under min.insync.replicas",
        _ => "under-replicated",
    }
}

/// An `opened` or `updated` webhook that reports partitions of `kind` (offline_partitions,
/// under_min_isr, under_replicated) including `partition`: an incident of their own, or the
/// impact of the broker incident that explains them (issue 31: partitions whose missing
/// replicas are all on brokers with an open incident are that broker's incident).
pub fn reports_partitions(v: &serde_json::Value, kind: &str, partition: &str) -> bool {
    let news = v["event"] == "opened" || v["event"] == "updated";
    let as_impact = v["kind"] == "broker"
        && v["evidence"].as_array().is_some_and(|a| {
            a.iter().any(|e| {
                e.as_str()
                    .is_some_and(|e| e.starts_with("impact: ") && e.contains(partition_words(kind)))
            })
        });
    news && has(v, "affected_partitions", partition) && (v["kind"] == kind || as_impact)
}

/// The `resolved` webhook of what reported `kind`: its own incident, or a broker incident
/// carrying it as impact.
pub fn resolves_partitions(v: &serde_json::Value, kind: &str) -> bool {
    v["event"] == "resolved"
        && (v["kind"] == kind
            || (v["kind"] == "broker"
                && v["evidence"].as_array().is_some_and(|a| {
                    a.iter().any(|e| {
                        e.as_str().is_some_and(|e| {
                            e.starts_with("impact: ") && e.contains(partition_words(kind))
                        })
                    })
                })))
}
