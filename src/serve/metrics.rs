//! Prometheus metrics, rendered at scrape time from the last completed round of each cluster.
//! A fresh registry per scrape means a broker or topic that disappears takes its series with
//! it: nothing lingers from a broker decommissioned an hour ago.
//!
//! This file only composes: each module encodes its own families in its `metrics.rs`
//! (`report`, `quorum`, `canary`, `liveness`, `host`, `incident`, `silence`, `notify`, `remediate`;
//! `self_metrics` for the watchdog's own), with label sets from `metric_kit`. `render`
//! fixes their order on the page; `tests/golden/` holds the page it must keep giving.
//!
//! Crate choice: `prometheus-client` (the Prometheus project's own Rust client, maintained,
//! typed label sets, OpenMetrics text) rather than the `prometheus` crate, whose last commit
//! is from April 2025.

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::registry::Registry;

use crate::judge::report::ClusterReport;
use crate::observe::canary::stats::CanaryStats;

/// The content type of what `render` returns.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of what `to_text_004` returns: the Prometheus text format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What the metrics show beside the cluster reports.
#[derive(Default)]
pub struct Extras<'a> {
    /// The configuration's `instance_id`.
    pub instance_id: String,
    /// `metrics.cluster_label`; empty: `cluster`.
    pub cluster_label: String,
    /// The configured clusters.
    pub clusters: Vec<String>,
    /// Each cluster's static labels (`clusters[].labels`).
    pub cluster_labels:
        std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
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
    /// The watchdog's own tasks started again after they ended: (task, scope, restarts).
    pub task_restarts: Vec<(&'static str, String, u64)>,
    /// The watchdog's own health as measured, and judged when the page was asked for.
    pub own_health: Option<OwnHealth>,
    /// The watchdog's own process figures (`process_*`), read for this page; none leaves
    /// them out.
    pub process: Option<crate::observe::self_metrics::ProcessFigures>,
    /// Credential files that took new content or could not: (kind, outcome, changes).
    pub credential_reloads: Vec<(&'static str, &'static str, u64)>,
}

/// The watchdog's own health for the pages: its facts and their judgment at one moment.
#[derive(Debug, Clone)]
pub struct OwnHealth {
    pub facts: crate::model::own_health::OwnHealthFacts,
    pub judgment: crate::judge::own_health::OwnJudgment,
    pub at: std::time::SystemTime,
}

impl OwnHealth {
    pub fn judged(
        facts: crate::model::own_health::OwnHealthFacts,
        at: std::time::SystemTime,
    ) -> Self {
        OwnHealth {
            judgment: crate::judge::own_health::judge(&facts, at),
            facts,
            at,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct TaskLabels {
    task: &'static str,
}

/// `cluster_labels{cluster, <its static labels>} 1` for each cluster that has any: joined
/// in PromQL (`* on (cluster) group_left(env, team) kafka_watchdog_cluster_labels`) they
/// put the labels on any of the cluster's series, without multiplying every family's
/// label sets by them.
fn encode_cluster_labels(
    reg: &mut Registry,
    labels: &std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
) {
    let family = prometheus_client::metrics::family::Family::<
        Vec<(String, String)>,
        prometheus_client::metrics::gauge::Gauge,
    >::default();
    reg.register(
        "cluster_labels",
        "1 per cluster with static labels (clusters[].labels), carrying them: join on cluster to label its series",
        family.clone(),
    );
    for (cluster, ls) in labels.iter().filter(|(_, ls)| !ls.is_empty()) {
        let mut set = vec![("cluster".to_string(), cluster.clone())];
        set.extend(ls.iter().map(|(k, v)| (k.clone(), v.clone())));
        family.get_or_create(&set).set(1);
    }
}

/// `task_restarts_total{task}`: every supervised task at 0 until one restarts, so "none"
/// is a value that rules and dashboards find; which cluster, broker or receiver is in the
/// journal's line.
fn encode_task_restarts(reg: &mut Registry, restarts: &[(&'static str, String, u64)]) {
    let family: crate::model::metric_kit::CounterFamily<TaskLabels> =
        crate::model::metric_kit::counter(
            reg,
            "task_restarts",
            "The watchdog's own tasks (cluster_loop, liveness, quorum_watch, coordinator_watch, webhook_worker, webhook_dispatcher, canary_reader, canary_writer, peers, http_server, heartbeat, supervisor, own_health) started again after they ended unexpectedly (a panic), and remediation actions that panicked (their hold released, never run again); the journal names the cluster, broker or receiver, and has the panic",
        );
    for task in crate::model::supervise::Task::ALL.map(|t| t.as_str()) {
        let n: u64 = restarts
            .iter()
            .filter(|(t, _, _)| *t == task)
            .map(|(_, _, n)| n)
            .sum();
        family.get_or_create(&TaskLabels { task }).inc_by(n);
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct CredentialLabels {
    kind: &'static str,
    outcome: &'static str,
}

/// `credential_reloads_total{kind, outcome}`: every kind and outcome from 0, so a rule
/// can alert on `increase(...{outcome="failed"}[15m]) > 0`; which file is in the journal.
fn encode_credential_reloads(reg: &mut Registry, reloads: &[(&'static str, &'static str, u64)]) {
    let family: crate::model::metric_kit::CounterFamily<CredentialLabels> =
        crate::model::metric_kit::counter(
            reg,
            "credential_reloads",
            "Credential files (kind: secret, certificates, certificate_and_key) whose content changed on disk: applied (the next connection uses it) or failed (unreadable or unusable; the last good content stays in use)",
        );
    for (kind, outcome, n) in reloads {
        family
            .get_or_create(&CredentialLabels { kind, outcome })
            .inc_by(*n);
    }
}

/// Renders every metric of the given reports (one per cluster that completed a round) and
/// of `extras`. Each module encodes its own families; this only decides their order on the
/// page, which is the order dashboards and the golden page (`tests/golden/`) know.
pub fn render<'a>(reports: impl IntoIterator<Item = &'a ClusterReport>, extras: &Extras) -> String {
    let mut reg = Registry::with_prefix("kafka_watchdog");
    crate::alert::incident::metrics::encode(&mut reg, &extras.clusters, &extras.incidents);
    crate::alert::silence::metrics::encode(
        &mut reg,
        &extras.clusters,
        &extras.silences,
        &extras.incidents,
        std::time::SystemTime::now(),
    );
    if let Some(w) = &extras.webhooks {
        crate::alert::notify::metrics::encode(&mut reg, w);
    }
    crate::alert::remediate::metrics::encode(&mut reg, &extras.remediation_counts);
    if let Some(ok) = extras.reload_success {
        crate::observe::self_metrics::encode_reload_success(&mut reg, ok);
    }
    if let Some(cs) = extras.canary_stats {
        crate::observe::canary::metrics::encode(&mut reg, cs);
    }
    crate::observe::self_metrics::encode_build_info(&mut reg, &extras.instance_id);
    encode_cluster_labels(&mut reg, &extras.cluster_labels);
    encode_task_restarts(&mut reg, &extras.task_restarts);
    if let Some(own) = &extras.own_health {
        crate::observe::own_health::metrics::encode(&mut reg, &own.facts);
        crate::judge::own_health::encode(&mut reg, &own.judgment);
    }
    encode_credential_reloads(&mut reg, &extras.credential_reloads);

    let round = crate::judge::report::metrics::Families::register(&mut reg);
    let canary = crate::observe::canary::metrics::RoundFamilies::register(&mut reg);
    let liveness = crate::observe::liveness::metrics::Families::register(&mut reg);
    let host = crate::observe::host::metrics::Families::register(&mut reg);
    let quorum = crate::judge::quorum::metrics::Families::register(&mut reg);
    let coordinators = crate::judge::coordinators::metrics::Families::register(&mut reg);
    let certificates = crate::judge::certificates::metrics::Families::register(&mut reg);
    let log_dirs = crate::judge::verdict::log_dir_metrics::Families::register(&mut reg);
    let mut brokers = Vec::new();
    let mut controllers = Vec::new();
    for r in reports {
        round.record(r);
        if let Some(c) = &r.canary {
            let brokers = r.verdicts.iter().map(|v| v.broker);
            canary.record(&r.cluster, c, &r.canary_last_window, brokers);
        }
        liveness.record(&r.cluster, &r.liveness, r.evaluated_at);
        host.record(&r.cluster, &r.host);
        let ids: Vec<i32> = r.verdicts.iter().map(|v| v.broker).collect();
        quorum.record(&r.cluster, r.quorum.as_ref(), &r.view.behind, &ids);
        coordinators.record(&r.cluster, r.coordinators.as_deref(), &ids);
        certificates.record(&r.cluster, r.certificates.as_ref());
        log_dirs.record(&r.cluster, &r.probes);
        brokers.extend(r.verdicts.iter().map(|v| (r.cluster.clone(), v.broker)));
        if let Some(q) = &r.quorum {
            controllers.extend(
                q.controllers
                    .iter()
                    .map(|c| (r.cluster.clone(), c.controller)),
            );
        }
    }
    crate::alert::incident::metrics::encode_broker_states(&mut reg, brokers, &extras.incidents);
    crate::alert::incident::metrics::encode_controller_states(
        &mut reg,
        controllers,
        &extras.incidents,
    );
    let page = finish(&reg, extras.process.as_ref());
    match extras.cluster_label.as_str() {
        "" | crate::model::metric_kit::CLUSTER_LABEL => page,
        to => rename_label(&page, crate::model::metric_kit::CLUSTER_LABEL, to),
    }
}

/// `page` with every label named `from` named `to` (`metrics.cluster_label`, issue 39 item
/// 4). Each sample's label set is read as the exposition format writes it (names, `=`,
/// quoted values with `\\`, `\"` and `\n` escapes), so a value that happens to hold
/// `cluster="` is left alone; comment lines carry no labels.
pub fn rename_label(page: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(page.len() + page.len() / 16);
    for line in page.split_inclusive('\n') {
        match line.find('{').filter(|_| !line.starts_with('#')) {
            Some(open) => {
                out.push_str(&line[..=open]);
                rename_in_labels(&line[open + 1..], from, to, &mut out);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// Copies `rest` (what follows a sample's `{`) to `out`, renaming label `from`.
fn rename_in_labels(rest: &str, from: &str, to: &str, out: &mut String) {
    // `rest[..copied]` is in `out`; a name runs from `copied` to its `=`.
    let mut copied = 0;
    let (mut in_value, mut escaped) = (false, false);
    for (i, c) in rest.char_indices() {
        if in_value {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_value = false,
                _ => {}
            }
            continue;
        }
        match c {
            '=' => {
                let name = &rest[copied..i];
                out.push_str(if name == from { to } else { name });
                copied = i;
            }
            '"' => in_value = true,
            ',' => {
                out.push_str(&rest[copied..=i]);
                copied = i + 1;
            }
            '}' => break,
            _ => {}
        }
    }
    out.push_str(&rest[copied..]);
}

/// Encodes the watchdog's registry and, beside it, the standard `process_*` metrics of its
/// own process, which carry no `kafka_watchdog_` prefix.
fn finish(
    reg: &Registry,
    process: Option<&crate::observe::self_metrics::ProcessFigures>,
) -> String {
    let mut own = Registry::default();
    if let Some(figures) = process {
        crate::observe::self_metrics::encode(&mut own, figures);
    }
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
        stats.write("lab", 0, 1, "ok", Some(0.01));
        render(
            [&r],
            &Extras {
                clusters: vec!["lab".into()],
                canary_stats: Some(&stats),
                process: Some(crate::observe::self_metrics::read(
                    std::path::Path::new("/proc"),
                    "self",
                )),
                ..Extras::default()
            },
        )
    }

    /// Issue 28 item 3: a cluster's static labels on one series to join on.
    #[test]
    fn a_clusters_static_labels_are_one_series_to_join_on() {
        let mut labels = std::collections::BTreeMap::new();
        labels.insert(
            "lab".to_string(),
            [("env".to_string(), "prod".to_string())].into(),
        );
        labels.insert("other".to_string(), Default::default());
        let page = render(
            std::iter::empty(),
            &Extras {
                clusters: vec!["lab".into(), "other".into()],
                cluster_labels: labels,
                ..Extras::default()
            },
        );
        assert!(
            page.contains("kafka_watchdog_cluster_labels{cluster=\"lab\",env=\"prod\"} 1\n"),
            "{page}"
        );
        assert!(!page.contains("cluster_labels{cluster=\"other\""), "{page}");
    }

    /// Issue 39 item 5: each broker's current rules are series of their own, and a rule
    /// that stops holding takes its series with it at the next round.
    #[test]
    fn a_brokers_rules_are_series_while_they_hold() {
        use crate::judge::verdict::{BrokerState, BrokerVerdict, Registration, Rule, RuleHit};
        let mut r = ClusterReport::empty("lab", std::time::SystemTime::UNIX_EPOCH);
        r.verdicts = vec![BrokerVerdict {
            broker: 2,
            address: "k2:9092".into(),
            state: BrokerState::Zombie,
            registration: Registration::Registered,
            answered: false,
            hits: vec![RuleHit {
                rule: Rule::NoAnswer,
                state: BrokerState::Zombie,
                detail: "timeout".into(),
            }],
            observed_at: None,
            held_since: None,
            page_after: None,
        }];
        let series = r#"kafka_watchdog_broker_rule{cluster="lab",broker="2",rule="no_answer",state="zombie"}"#;
        let page = render([&r], &Extras::default());
        assert_eq!(sample(&page, series), Some("1.0"), "{page}");
        r.verdicts[0].hits.clear();
        r.verdicts[0].state = BrokerState::Healthy;
        let page = render([&r], &Extras::default());
        assert!(!page.contains("kafka_watchdog_broker_rule{"), "{page}");
    }

    /// Issue 39 item 4: with `metrics.cluster_label`, every series names the cluster by
    /// it, and nothing else changes (a value holding `cluster="` included).
    #[test]
    fn the_cluster_label_is_named_as_configured() {
        let page = full_page();
        let renamed = render(
            std::iter::once(&{
                let mut r = ClusterReport::empty("lab", std::time::SystemTime::UNIX_EPOCH);
                r.round = 3;
                r
            }),
            &Extras {
                clusters: vec!["lab".into()],
                cluster_label: "kafka_cluster".into(),
                ..Extras::default()
            },
        );
        assert!(
            renamed.contains("kafka_watchdog_rounds_total{kafka_cluster=\"lab\"} 3\n"),
            "{renamed}"
        );
        assert!(!renamed.contains("{cluster="), "{renamed}");
        assert!(!renamed.contains(",cluster="), "{renamed}");
        assert!(
            page.contains("{cluster=\"lab\"}"),
            "the default keeps cluster"
        );
        let tricky = "# HELP a cluster=\"x\"\na{cluster=\"c\",topic=\"t,cluster=\\\"q\\\"\",cluster_id=\"7\"} 1\nb 2\nc{} 3\n";
        assert_eq!(
            rename_label(tricky, "cluster", "kc"),
            "# HELP a cluster=\"x\"\na{kc=\"c\",topic=\"t,cluster=\\\"q\\\"\",cluster_id=\"7\"} 1\nb 2\nc{} 3\n"
        );
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
