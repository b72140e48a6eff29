//! `fanout`: rounds of the real `ClusterProber` against K local fake brokers that answer,
//! hang or refuse. However many brokers hang, a round must end within the larger of the
//! connect and request timeouts plus a small margin, because every broker is probed at once
//! with deadlines of its own.
//!
//! The listeners run on a runtime of their own (one worker) and the prober on one like the
//! daemon's (two workers), so the prober's timers are not starved by the listeners' work;
//! on a 2-core machine they still share the CPUs, as they would not in production.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{json, Value};

use kafka_watchdog::model::round::{FailureKind, RoundObservation};
use kafka_watchdog::observe::probe::{ClusterProber, ProbeSettings};
use kafka_watchdog::observe::wire::WireOptions;

use crate::fake::{FakeCluster, Kind};
use crate::output::{num, opt_num, Section, Table};
use crate::stats::summarize;
use crate::sys;

pub struct FanoutOptions {
    pub brokers: Vec<usize>,
    pub kinds: Vec<Kind>,
    pub rounds: usize,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub margin: Duration,
    /// Broker counts whose continuous liveness check (issue 14) is measured.
    pub liveness_brokers: Vec<usize>,
    pub liveness_for: Duration,
}

/// How the probes of one round ended.
#[derive(Default)]
struct Outcomes {
    answered: usize,
    timeout: usize,
    refused: usize,
    other: BTreeMap<&'static str, usize>,
}

fn outcomes(obs: &RoundObservation) -> Outcomes {
    let mut o = Outcomes::default();
    for p in obs.probes.values() {
        if p.answered() {
            o.answered += 1;
            continue;
        }
        match p.first_failure().map(|(_, f)| f.kind) {
            Some(FailureKind::Timeout) => o.timeout += 1,
            Some(FailureKind::ConnectionRefused) => o.refused += 1,
            Some(k) => *o.other.entry(k.as_label()).or_insert(0) += 1,
            None => *o.other.entry("incomplete").or_insert(0) += 1,
        }
    }
    o
}

pub fn run(opts: &FanoutOptions) -> Result<Section> {
    let (before, after) = sys::raise_nofile();
    let limit = opts.connect_timeout.max(opts.request_timeout) + opts.margin;
    let mut section = Section::new(
        "fanout",
        json!({
            "brokers": opts.brokers,
            "kinds": opts.kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
            "rounds": opts.rounds,
            "connect_timeout_ms": opts.connect_timeout.as_millis() as u64,
            "request_timeout_ms": opts.request_timeout.as_millis() as u64,
            "margin_ms": opts.margin.as_millis() as u64,
        }),
    );
    if sys::build_profile() == "debug" {
        section.note("DEBUG build: these timings are not representative; use --release");
    }
    section.note(format!(
        "RLIMIT_NOFILE soft limit {before} -> {after}; a round must end within max(connect, request timeout) + margin = {} ms",
        limit.as_millis()
    ));
    section.note(
        "listeners: answer = ApiVersions, Metadata (every listed broker, 10 topics x 10 partitions), \
         DescribeCluster and DescribeConfigs answered; hang = TCP accepted, nothing answered; \
         refuse = closed port; mix = a third of each. The discovery round (bootstrap from an extra \
         answering listener, min.insync.replicas read) is listed apart.",
    );
    let prober_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("prober runtime")?;
    let mut table = Table::new(
        "Probe round duration vs the timeouts (ms)",
        &[
            "brokers",
            "kind",
            "discovery_ms",
            "round_median_ms",
            "round_max_ms",
            "limit_ms",
            "within_limit",
            "answered",
            "timeouts",
            "refused",
            "other",
        ],
    );
    let mut raw = Vec::new();
    let mut all_within = true;
    for &count in &opts.brokers {
        for &kind in &opts.kinds {
            let fake_rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .context("listener runtime")?;
            let cluster = fake_rt.block_on(FakeCluster::start(kind, count))?;
            let settings = ProbeSettings {
                cluster: format!("fanout-{}-{count}", kind.as_str()),
                bootstrap_servers: vec![cluster.bootstrap.clone()],
                wire: WireOptions {
                    connect_timeout: opts.connect_timeout,
                    request_timeout: opts.request_timeout,
                    ..WireOptions::default()
                },
                forget_broker_after: Duration::from_secs(3600),
                topic_config_refresh: Duration::from_secs(300),
                full_metadata_budget: kafka_watchdog::observe::probe::DEFAULT_FULL_METADATA_BUDGET,
                scoped_topics: Vec::new(),
            };
            let mut prober = ClusterProber::new(settings);
            let (discovery_ms, first) = prober_rt.block_on(async {
                let t = Instant::now();
                let obs = prober.round().await;
                (t.elapsed().as_secs_f64() * 1000.0, obs)
            });
            if first.probes.len() != count {
                section.note(format!(
                    "{count} {}: discovery found {} of {count} brokers",
                    kind.as_str(),
                    first.probes.len()
                ));
            }
            let mut times = Vec::new();
            let mut last = first;
            for _ in 0..opts.rounds {
                let (ms, obs) = prober_rt.block_on(async {
                    let t = Instant::now();
                    let obs = prober.round().await;
                    (t.elapsed().as_secs_f64() * 1000.0, obs)
                });
                times.push(ms);
                last = obs;
            }
            fake_rt.shutdown_background();
            let s = summarize(&times);
            let max = s.map(|s| s.max);
            let within = max.is_some_and(|m| m <= limit.as_secs_f64() * 1000.0);
            all_within &= within;
            let o = outcomes(&last);
            let other = o
                .other
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect::<Vec<_>>()
                .join(", ");
            let row = vec![
                json!(count),
                json!(kind.as_str()),
                num(discovery_ms, 1),
                opt_num(s.map(|s| s.median), 1),
                opt_num(max, 1),
                json!(limit.as_millis() as u64),
                json!(within),
                json!(o.answered),
                json!(o.timeout),
                json!(o.refused),
                json!(other),
            ];
            println!(
                "  {count} x {}: rounds {:?} ms (discovery {:.0} ms), answered {}, timeouts {}, refused {}{}",
                kind.as_str(),
                times.iter().map(|t| t.round() as u64).collect::<Vec<_>>(),
                discovery_ms,
                o.answered,
                o.timeout,
                o.refused,
                if other.is_empty() { String::new() } else { format!(", {other}") }
            );
            table.push(row);
            raw.push(json!({
                "brokers": count,
                "kind": kind.as_str(),
                "discovery_ms": discovery_ms,
                "rounds_ms": times,
                "probes_seen": last.probes.len(),
            }));
        }
    }
    table.print();
    section.note(if all_within {
        "every round ended within the limit".to_string()
    } else {
        "SOME ROUNDS EXCEEDED THE LIMIT (within_limit = no)".to_string()
    });
    section.tables.push(table);
    if !opts.liveness_brokers.is_empty() {
        let (table, rows) = liveness(opts)?;
        section.tables.push(table);
        raw.extend(rows);
    }
    section.raw = Value::Array(raw);
    Ok(section)
}

/// The thread name of the runtime the liveness tasks run on, to count its CPU apart from
/// the fake listeners' in the same process.
const LIVENESS_THREAD: &str = "kw-liveness";

/// CPU seconds of this process's threads named `name`, from /proc/self/task.
fn threads_cpu_seconds(name: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    tasks
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
        .filter_map(|t| {
            let tid: u32 = t.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
            sys::stat_cpu_seconds(&stat)
        })
        .sum()
}

/// The continuous liveness check of N answering brokers at the default interval: the CPU
/// its tasks cost, as a share of one core (goal: 5 % for 1,000 brokers, 1 % for 3).
fn liveness(opts: &FanoutOptions) -> Result<(Table, Vec<Value>)> {
    use kafka_watchdog::observe::liveness::{Liveness, LivenessSettings};
    let mut table = Table::new(
        "Continuous liveness at the default interval: CPU of its runtime",
        &[
            "brokers",
            "seconds",
            "cpu_seconds",
            "core_percent",
            "answering",
            "goal_percent",
        ],
    );
    let mut raw = Vec::new();
    for &count in &opts.liveness_brokers {
        let fake_rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .context("listener runtime")?;
        let cluster = fake_rt.block_on(FakeCluster::start(Kind::Answer, count))?;
        let wire = WireOptions {
            connect_timeout: opts.connect_timeout,
            request_timeout: opts.request_timeout,
            ..WireOptions::default()
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(LIVENESS_THREAD)
            .enable_all()
            .build()
            .context("liveness runtime")?;
        let mut prober = ClusterProber::new(ProbeSettings {
            cluster: format!("liveness-{count}"),
            bootstrap_servers: vec![cluster.bootstrap.clone()],
            wire: wire.clone(),
            forget_broker_after: Duration::from_secs(3600),
            topic_config_refresh: Duration::from_secs(300),
            full_metadata_budget: kafka_watchdog::observe::probe::DEFAULT_FULL_METADATA_BUDGET,
            scoped_topics: Vec::new(),
        });
        let endpoints: Vec<_> = rt
            .block_on(prober.round())
            .probes
            .into_values()
            .map(|p| p.endpoint)
            .collect();
        let (cpu, answering) = rt.block_on(async {
            let mut live = Liveness::new(LivenessSettings {
                interval: Duration::from_millis(
                    kafka_watchdog::config::DEFAULT_LIVENESS_INTERVAL_MS,
                ),
                floor: Duration::from_secs(1),
                wire,
                own: Default::default(),
            });
            live.track(&endpoints);
            // Connections opened, then the steady state only.
            tokio::time::sleep(Duration::from_secs(3)).await;
            let before = threads_cpu_seconds(LIVENESS_THREAD);
            tokio::time::sleep(opts.liveness_for).await;
            let cpu = threads_cpu_seconds(LIVENESS_THREAD) - before;
            let now = std::time::SystemTime::now();
            let answering = live
                .board()
                .snapshot()
                .values()
                .filter(|f| f.answering(now))
                .count();
            (cpu, answering)
        });
        rt.shutdown_background();
        fake_rt.shutdown_background();
        let percent = cpu / opts.liveness_for.as_secs_f64() * 100.0;
        let goal = if count <= 3 { 1.0 } else { 5.0 };
        println!(
            "  liveness of {count} brokers: {cpu:.2} CPU-s in {} s = {percent:.2} % of one core ({answering} answering)",
            opts.liveness_for.as_secs()
        );
        table.push(vec![
            json!(count),
            json!(opts.liveness_for.as_secs()),
            num(cpu, 3),
            num(percent, 2),
            json!(answering),
            num(goal, 0),
        ]);
        raw.push(json!({
            "liveness_brokers": count,
            "cpu_seconds": cpu,
            "core_percent": percent,
            "answering": answering,
        }));
    }
    table.print();
    Ok((table, raw))
}
