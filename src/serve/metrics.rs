//! Prometheus metrics, rendered at scrape time from the last completed round of each cluster.
//! A fresh registry per scrape means a broker or topic that disappears takes its series with
//! it: nothing lingers from a broker decommissioned an hour ago.
//!
//! Crate choice: `prometheus-client` (the Prometheus project's own Rust client, maintained,
//! typed label sets, OpenMetrics text) rather than the `prometheus` crate, whose last commit
//! is from April 2025.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::judge::health::Condition;
use crate::judge::report::ClusterReport;
use crate::judge::verdict::{BrokerState, Registration};
use crate::observe::canary::stats::CanaryStats;
use crate::observe::canary::TopicStatus;

type Labels = Vec<(&'static str, String)>;
type GaugeFamily = Family<Labels, Gauge<f64, AtomicU64>>;
type CounterFamily = Family<Labels, Counter<u64>>;
type FloatCounterFamily = Family<Labels, Counter<f64, AtomicU64>>;

/// The content type of what `render` returns.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of what `to_text_004` returns: the Prometheus text format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

fn gauge(reg: &mut Registry, name: &str, help: &str) -> GaugeFamily {
    let f = GaugeFamily::default();
    reg.register(name, help, f.clone());
    f
}

fn counter(reg: &mut Registry, name: &str, help: &str) -> CounterFamily {
    let f = CounterFamily::default();
    reg.register(name, help, f.clone());
    f
}

fn set(f: &GaugeFamily, labels: Labels, v: f64) {
    f.get_or_create(&labels).set(v);
}

fn secs(t: std::time::SystemTime) -> f64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// `silences_active` per cluster (a silence of every cluster counts in each) and
/// `incidents_silenced` by cluster and kind, both at zero when there are none.
fn render_silences(reg: &mut Registry, extras: &Extras) {
    let active = gauge(
        reg,
        "silences_active",
        "Silences in force now, by cluster (a silence of every cluster counts in each)",
    );
    let silenced = gauge(
        reg,
        "incidents_silenced",
        "Open incidents under a silence: shown, not sent, not remediated",
    );
    let now = std::time::SystemTime::now();
    for cluster in &extras.clusters {
        let n = extras
            .silences
            .iter()
            .filter(|s| s.is_active(now) && s.cluster.as_ref().is_none_or(|c| c == cluster))
            .count();
        set(&active, vec![("cluster", cluster.clone())], n as f64);
        for kind in crate::model::kind::FindingKind::ALL {
            let n = extras
                .incidents
                .iter()
                .filter(|i| i.cluster == *cluster && i.kind == kind && i.silenced.is_some())
                .count();
            set(
                &silenced,
                vec![("cluster", cluster.clone()), ("kind", kind.as_str().into())],
                n as f64,
            );
        }
    }
}

fn render_extras(reg: &mut Registry, extras: &Extras) {
    let open = gauge(
        reg,
        "incidents_open",
        "Open incidents by cluster, kind and severity",
    );
    let mut counts: std::collections::BTreeMap<(String, &'static str, &'static str), u64> =
        std::collections::BTreeMap::new();
    // Every kind at zero for every cluster, so "no incident" is a value and not an absence.
    for cluster in &extras.clusters {
        for kind in crate::model::kind::FindingKind::ALL {
            for severity in [
                crate::config::Severity::Warning,
                crate::config::Severity::Critical,
            ] {
                counts.insert((cluster.clone(), kind.as_str(), severity.as_str()), 0);
            }
        }
    }
    for i in &extras.incidents {
        *counts
            .entry((i.cluster.clone(), i.kind.as_str(), i.severity.as_str()))
            .or_insert(0) += 1;
    }
    for ((cluster, kind, severity), n) in counts {
        set(
            &open,
            vec![
                ("cluster", cluster),
                ("kind", kind.into()),
                ("severity", severity.into()),
            ],
            n as f64,
        );
    }
    render_silences(reg, extras);
    if let Some(w) = &extras.webhooks {
        let deliveries = counter(
            reg,
            "webhook_deliveries",
            "Webhook notifications by receiver and outcome (ok, failed and retried, dropped)",
        );
        let depth = gauge(
            reg,
            "webhook_queue_depth",
            "Notifications waiting per receiver",
        );
        let last = gauge(
            reg,
            "webhook_last_success_timestamp_seconds",
            "Unix time of the receiver's last successful delivery",
        );
        for r in &w.receivers {
            for (outcome, n) in r.deliveries() {
                deliveries
                    .get_or_create(&vec![
                        ("receiver", r.receiver.clone()),
                        ("outcome", outcome.into()),
                    ])
                    .inc_by(n);
            }
            set(
                &depth,
                vec![("receiver", r.receiver.clone())],
                r.queue_depth as f64,
            );
            if let Some(t) = r.last_success {
                set(&last, vec![("receiver", r.receiver.clone())], secs(t));
            }
        }
    }
    // Always registered, so dashboards find the family before any broker has remediation.
    let total = counter(
        reg,
        "remediations",
        "Remediation decisions by cluster, broker and outcome (acted, failed, refused, dry_run)",
    );
    for ((cluster, broker, outcome), n) in &extras.remediation_counts {
        total
            .get_or_create(&vec![
                ("cluster", cluster.clone()),
                ("broker", broker.to_string()),
                ("outcome", outcome.as_label().into()),
            ])
            .inc_by(*n);
    }
    if let Some(ok) = extras.reload_success {
        let g = gauge(
            reg,
            "config_reload_success",
            "1 when the last configuration reload (SIGHUP) was applied, 0 when it was refused",
        );
        set(&g, Vec::new(), f64::from(u8::from(ok)));
    }
}

/// Renders every metric of the given reports (one per cluster that completed a round).
/// What the metrics show beside the cluster reports.
#[derive(Default)]
pub struct Extras<'a> {
    /// The configured clusters.
    pub clusters: Vec<String>,
    pub canary_stats: Option<&'a CanaryStats>,
    pub incidents: Vec<crate::alert::incident::Incident>,
    pub webhooks: Option<crate::alert::notify::NotifierStats>,
    pub reload_success: Option<bool>,
    /// `remediations_total` by (cluster, broker, outcome).
    pub remediation_counts: Vec<((String, i32, crate::alert::remediate::Outcome), u64)>,
    /// The latest remediation decisions, for `/status`.
    pub remediations: Vec<crate::alert::remediate::Record>,
    /// Every silence (active, to come, ended within a day).
    pub silences: Vec<crate::model::silence::Silence>,
}

pub fn render<'a>(reports: impl IntoIterator<Item = &'a ClusterReport>, extras: &Extras) -> String {
    let mut reg = Registry::with_prefix("kafka_watchdog");
    render_extras(&mut reg, extras);
    if let Some(cs) = extras.canary_stats {
        reg.register(
            "canary_produce_seconds",
            "Latency of acknowledged acks=all canary writes, by partition and leader",
            cs.produce_seconds.clone(),
        );
        reg.register(
            "canary_end_to_end_seconds",
            "Time from sending a canary record to reading it back, by partition and leader",
            cs.end_to_end_seconds.clone(),
        );
        reg.register(
            "partition_unavailable_seconds",
            "Lengths of closed windows during which a canary partition could not be written",
            cs.unavailable_seconds.clone(),
        );
        reg.register(
            "canary_broker_unavailable_seconds",
            "Lengths of closed canary unavailability windows, by the broker the failed writes went to (the leader when they were sent)",
            cs.broker_unavailable_seconds.clone(),
        );
        reg.register(
            "canary_unavailable_now",
            "1 while the canary partition is unwritable, on the series of the broker charged with it (the leader the failed writes went to); 0 after",
            cs.unavailable_now.clone(),
        );
        reg.register(
            "canary_charged_failures",
            "Failed or slow (kind slow) acks=all canary writes charged to the broker that had them: not refused to the watchdog, not a NOT_LEADER or NOT_ENOUGH_REPLICAS, not while that broker took acks=1 writes (then its followers held them)",
            cs.charged_failures_total.clone(),
        );
        reg.register(
            "canary_produce",
            "acks=all canary writes by partition, the broker that received them (else the leader they were sent to) and outcome (ok or an error kind)",
            cs.produce_total.clone(),
        );
        reg.register(
            "canary_records_lost",
            "Acknowledged canary records later missing from the log, by the broker that acknowledged them",
            cs.lost_total.clone(),
        );
        reg.register(
            "canary_records_duplicated",
            "Canary records read back more than once",
            cs.duplicated_total.clone(),
        );
    }
    let build = gauge(
        &mut reg,
        "build_info",
        "The running kafka-watchdog's version (always 1)",
    );
    set(
        &build,
        vec![("version", env!("CARGO_PKG_VERSION").into())],
        1.0,
    );

    let reachable = gauge(
        &mut reg,
        "cluster_reachable",
        "1 when at least one broker answered every request in the last round",
    );
    let rounds = counter(&mut reg, "rounds", "Rounds completed per cluster");
    let round_duration = gauge(
        &mut reg,
        "round_duration_seconds",
        "Duration of the last round",
    );
    let last_success = gauge(
        &mut reg,
        "last_successful_round_timestamp_seconds",
        "Unix time at which the last round that reached the cluster ended",
    );
    let partitions = gauge(
        &mut reg,
        "partitions",
        "Partitions in each problem state (offline, under_replicated, under_min_isr, leader_not_in_isr)",
    );
    let observed = gauge(
        &mut reg,
        "partitions_observed",
        "Partitions of the watched topics in the last round",
    );
    let split = gauge(
        &mut reg,
        "split_brain_partitions",
        "Partitions for which a broker still claims a leadership a newer epoch gave away",
    );
    let bootstrap = gauge(
        &mut reg,
        "bootstrap_failures",
        "1 per bootstrap address that failed in the last round while no broker was known, by failure kind",
    );
    let brokers_in = gauge(&mut reg, "brokers", "Brokers in each verdict state");
    let unclean = counter(
        &mut reg,
        "unclean_elections",
        "Partitions that got a leader from outside their previous ISR",
    );
    let up = gauge(
        &mut reg,
        "broker_up",
        "1 when the broker answered every direct request this round, else 0",
    );
    let state = gauge(
        &mut reg,
        "broker_state",
        "1 for the broker's current verdict state, 0 for the others",
    );
    let state_seconds = gauge(
        &mut reg,
        "broker_state_seconds",
        "Seconds the broker has been in its current verdict state",
    );
    let registered = gauge(
        &mut reg,
        "broker_registered",
        "1 when the other brokers count it as registered and unfenced (the verdict's registration), else 0",
    );
    let latency = gauge(
        &mut reg,
        "broker_request_seconds",
        "Latency of the last direct request of each kind (connect, api_versions, metadata)",
    );
    let failures = counter(
        &mut reg,
        "broker_request_failures",
        "Direct requests that failed, by request and failure kind",
    );
    let led = gauge(
        &mut reg,
        "broker_partitions_led",
        "Partitions the broker leads",
    );
    let replicas = gauge(
        &mut reg,
        "broker_replicas",
        "Partitions the broker is a replica of",
    );
    let out_of_isr = gauge(
        &mut reg,
        "broker_replicas_out_of_isr",
        "Partitions the broker replicates but is missing from the ISR of",
    );
    let offline_replicas = gauge(
        &mut reg,
        "broker_offline_partitions",
        "Offline partitions the broker is a replica of",
    );
    let stale = gauge(
        &mut reg,
        "broker_stale_leaderships",
        "Partitions the broker claims to lead although a newer leader epoch names another broker",
    );
    let disagree = gauge(
        &mut reg,
        "broker_metadata_disagreements",
        "Partitions for which the broker's metadata names another leader than the newest view",
    );

    let canary_ready = gauge(
        &mut reg,
        "canary_topic_ready",
        "1 when the canary topic exists and the canary can write to it, else 0",
    );
    let canary_available = gauge(
        &mut reg,
        "canary_partition_available",
        "1 when the newest canary write to the partition that ended was acknowledged, else 0",
    );
    let canary_overdue = gauge(
        &mut reg,
        "canary_records_overdue",
        "Acknowledged canary records neither read back nor lost after lost_after",
    );
    let unavailable_for = gauge(
        &mut reg,
        "partition_unavailable_for_seconds",
        "How long the canary partition has been unwritable (0 when it works)",
    );
    let last_window = gauge(
        &mut reg,
        "partition_last_unavailable_seconds",
        "Length of the canary partition's last closed unavailability window",
    );
    let canary_led = gauge(
        &mut reg,
        "canary_partitions_led",
        "Canary partitions the broker leads (0: the canary cannot vouch for it)",
    );
    let liveness_silence = gauge(
        &mut reg,
        "broker_liveness_silence_seconds",
        "How long the broker's oldest liveness request had waited for an answer when the verdicts were last made (0 while it answers)",
    );
    let liveness_latency = gauge(
        &mut reg,
        "broker_liveness_latency_seconds",
        "How long the broker's last answer to the continuous liveness check took",
    );
    let liveness_threshold = gauge(
        &mut reg,
        "broker_liveness_threshold_seconds",
        "Silence beyond this is evidence against the broker (its floor, or 4x its slowest recent answer)",
    );
    let host = HostFamilies::register(&mut reg);
    for r in reports {
        for (id, f) in &r.liveness {
            let b = || vec![("cluster", r.cluster.clone()), ("broker", id.to_string())];
            let silent = f.silent_for(r.evaluated_at).unwrap_or_default();
            set(&liveness_silence, b(), silent.as_secs_f64());
            if let Some(l) = f.last_latency {
                set(&liveness_latency, b(), l.as_secs_f64());
            }
            set(&liveness_threshold, b(), f.threshold.as_secs_f64());
        }
        host.record(r);
        let c = || r.cluster.clone();
        set(
            &reachable,
            vec![("cluster", c())],
            f64::from(u8::from(r.reachable)),
        );
        rounds
            .get_or_create(&vec![("cluster", c())])
            .inc_by(r.round);
        for (address, failure) in &r.bootstrap_failures {
            set(
                &bootstrap,
                vec![
                    ("cluster", c()),
                    ("address", address.clone()),
                    ("kind", failure.kind.as_label().into()),
                ],
                1.0,
            );
        }
        set(
            &round_duration,
            vec![("cluster", c())],
            r.duration.as_secs_f64(),
        );
        if let Some(t) = r.last_success {
            set(&last_success, vec![("cluster", c())], secs(t));
        }
        for cond in Condition::ALL {
            set(
                &partitions,
                vec![("cluster", c()), ("state", cond.as_label().into())],
                r.health.count(cond) as f64,
            );
        }
        set(
            &observed,
            vec![("cluster", c())],
            r.health.partitions as f64,
        );
        unclean
            .get_or_create(&vec![("cluster", c())])
            .inc_by(r.unclean_elections_total);
        let split_partitions: std::collections::BTreeSet<(&str, i32)> = r
            .stale_leaders
            .iter()
            .map(|s| (s.topic.as_str(), s.partition))
            .collect();
        set(
            &split,
            vec![("cluster", c())],
            split_partitions.len() as f64,
        );
        for s in BrokerState::ALL {
            let n = r.verdicts.iter().filter(|v| v.state == s).count();
            set(
                &brokers_in,
                vec![("cluster", c()), ("state", s.as_label().into())],
                n as f64,
            );
        }
        for v in &r.verdicts {
            let b = || vec![("cluster", c()), ("broker", v.broker.to_string())];
            let probe = r.probes.get(&v.broker);
            set(
                &up,
                b(),
                f64::from(u8::from(probe.is_some_and(|p| p.answered()))),
            );
            for s in BrokerState::ALL {
                let mut l = b();
                l.push(("state", s.as_label().into()));
                set(&state, l, f64::from(u8::from(v.state == s)));
            }
            if let Some(since) = r.state_since.get(&v.broker) {
                let end = r.started_at + r.duration;
                set(
                    &state_seconds,
                    b(),
                    end.duration_since(*since).unwrap_or_default().as_secs_f64(),
                );
            }
            set(
                &registered,
                b(),
                f64::from(u8::from(v.registration == Registration::Registered)),
            );
            if let Some(p) = probe {
                let kinds = [
                    ("connect", p.connect.as_ref().ok().copied()),
                    (
                        "api_versions",
                        p.api_versions
                            .as_ref()
                            .and_then(|r| r.as_ref().ok().copied()),
                    ),
                    ("metadata", p.metadata_latency()),
                ];
                for (request, d) in kinds {
                    if let Some(d) = d {
                        let mut l = b();
                        l.push(("request", request.into()));
                        set(&latency, l, d.as_secs_f64());
                    }
                }
            }
            let stats = r.health.brokers.get(&v.broker).cloned().unwrap_or_default();
            set(&led, b(), f64::from(stats.leader_of));
            set(&replicas, b(), f64::from(stats.replica_of));
            set(&out_of_isr, b(), f64::from(stats.missing_from_isr));
            set(&offline_replicas, b(), f64::from(stats.replica_of_offline));
            let n_stale = r
                .stale_leaders
                .iter()
                .filter(|s| s.broker == v.broker)
                .count();
            set(&stale, b(), n_stale as f64);
            set(
                &disagree,
                b(),
                f64::from(r.disagreements.get(&v.broker).copied().unwrap_or(0)),
            );
        }
        if let Some(canary) = &r.canary {
            set(
                &canary_ready,
                vec![("cluster", c())],
                f64::from(u8::from(canary.status == TopicStatus::Ready)),
            );
            for p in &canary.partitions {
                let part = || vec![("cluster", c()), ("partition", p.partition.to_string())];
                let mut l = part();
                l.push(("broker", p.leader.to_string()));
                set(
                    &canary_available,
                    l,
                    f64::from(u8::from(p.produce_seconds.is_some())),
                );
                set(&canary_overdue, part(), p.overdue as f64);
                set(
                    &unavailable_for,
                    part(),
                    p.unavailable_seconds.unwrap_or(0.0),
                );
                set(
                    &last_window,
                    part(),
                    r.canary_last_window
                        .get(&p.partition)
                        .copied()
                        .unwrap_or(0.0),
                );
            }
            for v in &r.verdicts {
                let n = canary
                    .partitions
                    .iter()
                    .filter(|p| p.leader == v.broker)
                    .count();
                set(
                    &canary_led,
                    vec![("cluster", c()), ("broker", v.broker.to_string())],
                    n as f64,
                );
            }
        }
        for ((broker, request, kind), n) in &r.failures_total {
            failures
                .get_or_create(&vec![
                    ("cluster", c()),
                    ("broker", broker.to_string()),
                    ("request", (*request).into()),
                    ("kind", kind.as_label().into()),
                ])
                .inc_by(*n);
        }
    }
    finish(&reg)
}

/// Encodes the watchdog's registry and, beside it, the standard `process_*` metrics of its
/// own process, which carry no `kafka_watchdog_` prefix.
fn finish(reg: &Registry) -> String {
    let mut own = Registry::default();
    crate::observe::self_metrics::register(
        &mut own,
        &crate::observe::self_metrics::read(std::path::Path::new("/proc"), "self"),
    );
    let mut out = String::new();
    encode_registry(&mut out, reg)
        .and_then(|()| encode_registry(&mut out, &own))
        .and_then(|()| encode_eof(&mut out))
        .expect("writing to a String cannot fail");
    out
}

/// Whether a scraper's `Accept` header prefers OpenMetrics to the Prometheus text format.
/// Prometheus itself sends both with q-values; a client that names no OpenMetrics type
/// (curl, older scrapers, `promtool check metrics` fed from curl) gets the text format.
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    let (mut openmetrics, mut text) = (0.0_f64, 0.0_f64);
    for range in accept.unwrap_or("").split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .and_then(|(_, v)| v.trim().parse::<f64>().ok())
            .unwrap_or(1.0);
        match media.as_str() {
            "application/openmetrics-text" => openmetrics = openmetrics.max(q),
            "text/plain" | "text/*" | "*/*" => text = text.max(q),
            _ => {}
        }
    }
    openmetrics > 0.0 && openmetrics >= text
}

/// Rewrites OpenMetrics text (as `render` writes it) in the Prometheus text format 0.0.4:
/// a counter's HELP and TYPE name its samples (`x_total`, not `x`), types 0.0.4 lacks
/// become theirs, and what 0.0.4 has no syntax for (`# UNIT`, `# EOF`, exemplars,
/// `_created` samples) is left out. Without this, 0.0.4 parsers see `x_total` samples of
/// a family with no HELP or TYPE.
pub fn to_text_004(openmetrics: &str) -> String {
    let mut types = std::collections::HashMap::new();
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some((name, kind)) = rest.split_once(' ') {
                types.insert(name.to_string(), kind.trim().to_string());
            }
        }
    }
    let renamed = |name: &str| -> String {
        match types.get(name).map(String::as_str) {
            Some("counter") if !name.ends_with("_total") => format!("{name}_total"),
            Some("info") if !name.ends_with("_info") => format!("{name}_info"),
            _ => name.to_string(),
        }
    };
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            out.push_str(&format!("# HELP {} {}\n", renamed(name), help));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let kind = match kind.trim() {
                "counter" => "counter",
                "gauge" | "info" | "stateset" => "gauge",
                "histogram" | "gaugehistogram" => "histogram",
                "summary" => "summary",
                _ => "untyped",
            };
            out.push_str(&format!("# TYPE {} {kind}\n", renamed(name)));
        } else if line.starts_with('#') {
            continue;
        } else {
            let sample = line.split_once(" # {").map_or(line, |(s, _)| s);
            let name_end = sample.find(['{', ' ']).unwrap_or(sample.len());
            let created = sample[..name_end]
                .strip_suffix("_created")
                .is_some_and(|base| types.get(base).is_some_and(|t| t == "counter"));
            if !created {
                out.push_str(sample);
                out.push('\n');
            }
        }
    }
    out
}

/// Host mode's series: the broker's process, ports and log directories as this host sees
/// them. Only brokers configured in host mode have them.
struct HostFamilies {
    up: GaugeFamily,
    state: GaugeFamily,
    cpu: FloatCounterFamily,
    threads: GaugeFamily,
    threads_io_wait: GaugeFamily,
    fds: GaugeFamily,
    listening: GaugeFamily,
    free_bytes: GaugeFamily,
    free_ratio: GaugeFamily,
}

impl HostFamilies {
    fn register(reg: &mut Registry) -> Self {
        let cpu = FloatCounterFamily::default();
        reg.register(
            "host_process_cpu_seconds",
            "CPU time (user + system) of the broker's process, host mode",
            cpu.clone(),
        );
        HostFamilies {
            up: gauge(
                reg,
                "host_process_up",
                "1 when host mode finds the broker's process and it has not exited, else 0",
            ),
            state: gauge(
                reg,
                "host_process_state",
                "1 for the process's current state (running, sleeping, disk_sleep, stopped, traced, zombie, dead, idle, other), 0 for the others",
            ),
            cpu,
            threads: gauge(reg, "host_process_threads", "Threads of the broker's process"),
            threads_io_wait: gauge(
                reg,
                "host_process_threads_io_wait",
                "Threads of the broker's process in uninterruptible wait (D state)",
            ),
            fds: gauge(
                reg,
                "host_process_open_fds",
                "Open file descriptors of the broker's process (absent when they cannot be read)",
            ),
            listening: gauge(
                reg,
                "host_port_listening",
                "1 when something listens on the configured port (address:port or port), else 0",
            ),
            free_bytes: gauge(
                reg,
                "host_log_dir_free_bytes",
                "Bytes the broker can still write in the log directory's file system",
            ),
            free_ratio: gauge(
                reg,
                "host_log_dir_free_ratio",
                "Free fraction (0 to 1) of the log directory's file system",
            ),
        }
    }

    fn record(&self, r: &ClusterReport) {
        for (broker, h) in &r.host {
            let b = || {
                vec![
                    ("cluster", r.cluster.clone()),
                    ("broker", broker.to_string()),
                ]
            };
            // A failed look says nothing; its series are left out rather than zeroed.
            if h.error.is_some() {
                continue;
            }
            let alive = h.process.as_ref().filter(|p| !p.state.has_exited());
            set(&self.up, b(), f64::from(u8::from(alive.is_some())));
            for s in crate::model::round::ProcessState::ALL {
                let mut l = b();
                l.push(("state", s.as_label().into()));
                let now = h.process.as_ref().is_some_and(|p| p.state == s);
                set(&self.state, l, f64::from(u8::from(now)));
            }
            if let Some(p) = &h.process {
                self.cpu.get_or_create(&b()).inc_by(p.cpu_seconds);
                set(&self.threads, b(), f64::from(p.threads));
                if let Some(d) = p.threads_in_io_wait {
                    set(&self.threads_io_wait, b(), f64::from(d));
                }
                if let Some(n) = p.open_fds {
                    set(&self.fds, b(), n as f64);
                }
            }
            for port in &h.ports {
                let mut l = b();
                l.push(("port", port.port.clone()));
                set(&self.listening, l, f64::from(u8::from(port.listening)));
            }
            for d in &h.log_dirs {
                let mut l = b();
                l.push(("path", d.path.clone()));
                if let Some(free) = d.free_bytes {
                    set(&self.free_bytes, l.clone(), free as f64);
                }
                if let Some(ratio) = d.free_ratio {
                    set(&self.free_ratio, l, ratio);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::host::{HostObservation, LogDirSeen, PortSeen, ProcessSeen, ProcessState};

    fn sample<'a>(text: &'a str, series: &str) -> Option<&'a str> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
    }

    #[test]
    fn host_mode_series() {
        let mut r = ClusterReport::empty("lab", std::time::SystemTime::UNIX_EPOCH);
        let obs = |process: Option<ProcessSeen>| HostObservation {
            broker: 1,
            locator: "pid file k.pid".into(),
            process,
            not_found: None,
            error: None,
            locate_note: None,
            ports: vec![PortSeen {
                port: "127.0.0.11:9092".into(),
                listening: true,
                owned_by_process: Some(true),
            }],
            ports_error: None,
            log_dirs: vec![LogDirSeen {
                path: "/kw/data".into(),
                total_bytes: Some(1000),
                free_bytes: Some(250),
                free_ratio: Some(0.25),
                error: None,
            }],
            log_dir_min_free_ratio: 0.05,
        };
        r.host.insert(
            1,
            obs(Some(ProcessSeen {
                pid: 4711,
                state: ProcessState::Stopped,
                threads: 74,
                threads_in_io_wait: Some(2),
                cpu_seconds: 28.5,
                cpu_advancing: Some(false),
                open_fds: None,
                open_fds_error: Some("denied".into()),
            })),
        );
        r.host.insert(2, obs(None));
        let text = render([&r], &Extras::default());
        let b1 = r#"{cluster="lab",broker="1""#;
        assert_eq!(
            sample(&text, &format!("kafka_watchdog_host_process_up{b1}}}")),
            Some("1.0")
        );
        assert_eq!(
            sample(
                &text,
                &format!(r#"kafka_watchdog_host_process_state{b1},state="stopped"}}"#)
            ),
            Some("1.0")
        );
        assert_eq!(
            sample(
                &text,
                &format!(r#"kafka_watchdog_host_process_state{b1},state="running"}}"#)
            ),
            Some("0.0")
        );
        assert_eq!(
            sample(
                &text,
                &format!("kafka_watchdog_host_process_cpu_seconds_total{b1}}}")
            ),
            Some("28.5")
        );
        assert_eq!(
            sample(&text, &format!("kafka_watchdog_host_process_threads{b1}}}")),
            Some("74.0")
        );
        assert_eq!(
            sample(
                &text,
                &format!("kafka_watchdog_host_process_threads_io_wait{b1}}}")
            ),
            Some("2.0")
        );
        assert!(
            !text.contains("kafka_watchdog_host_process_open_fds{"),
            "unreadable descriptors leave no series"
        );
        assert_eq!(
            sample(
                &text,
                &format!(r#"kafka_watchdog_host_port_listening{b1},port="127.0.0.11:9092"}}"#)
            ),
            Some("1.0")
        );
        assert_eq!(
            sample(
                &text,
                &format!(r#"kafka_watchdog_host_log_dir_free_bytes{b1},path="/kw/data"}}"#)
            ),
            Some("250.0")
        );
        assert_eq!(
            sample(
                &text,
                &format!(r#"kafka_watchdog_host_log_dir_free_ratio{b1},path="/kw/data"}}"#)
            ),
            Some("0.25")
        );
        let b2 = r#"{cluster="lab",broker="2""#;
        assert_eq!(
            sample(&text, &format!("kafka_watchdog_host_process_up{b2}}}")),
            Some("0.0")
        );
        assert!(!text.contains(&format!("kafka_watchdog_host_process_threads{b2}")));
    }

    /// Every sample name of a 0.0.4 page, with the family (HELP and TYPE) it belongs to.
    fn families_of_samples(text: &str) -> Vec<(String, Option<String>, Option<String>)> {
        let mut help = std::collections::HashMap::new();
        let mut kind = std::collections::HashMap::new();
        for l in text.lines() {
            if let Some(r) = l.strip_prefix("# HELP ") {
                help.insert(r.split(' ').next().unwrap().to_string(), ());
            }
            if let Some(r) = l.strip_prefix("# TYPE ") {
                let (n, k) = r.split_once(' ').unwrap();
                kind.insert(n.to_string(), k.to_string());
            }
        }
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let name = &l[..l.find(['{', ' ']).unwrap()];
                // A histogram's samples belong to the family without the suffix.
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| {
                        name.strip_suffix(suffix)
                            .filter(|base| kind.get(*base).is_some_and(|k| k == "histogram"))
                    })
                    .unwrap_or(name);
                (
                    name.to_string(),
                    help.get(family).map(|_| family.to_string()),
                    kind.get(family).cloned(),
                )
            })
            .collect()
    }

    fn full_page() -> String {
        let mut r = ClusterReport::empty("lab", std::time::SystemTime::UNIX_EPOCH);
        r.round = 3;
        r.failures_total.insert(
            (1, "metadata", crate::model::round::FailureKind::Timeout),
            2,
        );
        let stats = CanaryStats::default();
        stats
            .produce_total
            .get_or_create(&vec![("cluster", "lab".into()), ("outcome", "ok".into())])
            .inc();
        stats
            .produce_seconds
            .get_or_create(&vec![("cluster", "lab".into())])
            .observe(0.01);
        render(
            [&r],
            &Extras {
                clusters: vec!["lab".into()],
                canary_stats: Some(&stats),
                ..Extras::default()
            },
        )
    }

    #[test]
    fn text_004_gives_every_sample_a_family_with_help_and_type() {
        let om = full_page();
        let text = to_text_004(&om);
        assert!(
            !text.contains("# EOF") && !text.contains("# UNIT"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE kafka_watchdog_rounds_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# HELP kafka_watchdog_rounds_total "),
            "{text}"
        );
        assert!(
            text.contains("kafka_watchdog_rounds_total{cluster=\"lab\"} 3\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE kafka_watchdog_canary_produce_seconds histogram\n"));
        let samples = families_of_samples(&text);
        assert!(samples.len() > 50, "{text}");
        for (name, help, kind) in samples {
            assert!(
                help.is_some() && kind.is_some(),
                "{name} has no HELP/TYPE in:\n{text}"
            );
            if kind.as_deref() == Some("counter") {
                assert!(name.ends_with("_total"), "{name}");
            }
        }
        // The OpenMetrics page itself keeps its shape: counters named without `_total`.
        assert!(om.contains("# TYPE kafka_watchdog_rounds counter\n") && om.ends_with("# EOF\n"));
    }

    #[test]
    fn text_004_leaves_out_what_it_has_no_syntax_for() {
        let om = "# HELP a_seconds A.\n# TYPE a_seconds counter\n# UNIT a_seconds seconds\n\
                  a_seconds_total 1.5 # {trace=\"x\"} 1.0\na_seconds_created 17.0\n\
                  # HELP s Odd.\n# TYPE s unknown\ns 2\n# EOF\n";
        assert_eq!(
            to_text_004(om),
            "# HELP a_seconds_total A.\n# TYPE a_seconds_total counter\na_seconds_total 1.5\n\
             # HELP s Odd.\n# TYPE s untyped\ns 2\n"
        );
    }

    #[test]
    fn the_own_process_metrics_are_on_the_page() {
        let page = full_page();
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
        ] {
            let v: f64 = sample(&page, name)
                .unwrap_or_else(|| panic!("{name} missing from\n{page}"))
                .parse()
                .unwrap();
            assert!(v >= 0.0, "{name} {v}");
        }
        assert!(page.contains("# TYPE process_cpu_seconds counter\n"));
        assert!(
            sample(&page, "process_resident_memory_bytes")
                .unwrap()
                .parse::<f64>()
                .unwrap()
                > 1e6
        );
    }

    #[test]
    fn accept_headers_choose_the_format() {
        // What Prometheus 2.x sends: OpenMetrics first.
        let prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert!(wants_openmetrics(Some(prometheus)));
        assert!(wants_openmetrics(Some("application/openmetrics-text")));
        // With PromQL's `scrape_protocols: [PrometheusText0.0.4]`, or curl, or nothing.
        assert!(!wants_openmetrics(Some(
            "text/plain;version=0.0.4;q=1.0,*/*;q=0.1"
        )));
        assert!(!wants_openmetrics(Some("text/plain;version=0.0.4")));
        assert!(!wants_openmetrics(Some("*/*")));
        assert!(!wants_openmetrics(None));
        assert!(!wants_openmetrics(Some(
            "application/openmetrics-text;q=0, text/plain"
        )));
        assert!(!wants_openmetrics(Some(
            "text/plain;q=0.9, application/openmetrics-text;q=0.5"
        )));
    }
}
