//! `noise`: what one receiver hears of a fault (issue #31). The watchdog runs with the
//! settings a new user starts from (the timings of `config/lab.yaml`, one generic receiver
//! that hears warnings and worse), and per fault episode the bench counts the messages that
//! receiver gets from the fault to the last `resolved` (event, severity, state, rules and
//! time of each), samples the per-broker verdict on /metrics every second, and checks the
//! episode's goal. Every episode gets a fresh watchdog on a healed, fully replicated lab
//! with every broker healthy and no incident open, so that nothing an earlier episode left
//! in its memory (a recent restart, a flapping history) shapes what it says.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kafka_lab::sink::Sink;
use kafka_lab::{broker_address, Lab};
use rdkafka::producer::{BaseRecord, Producer};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use kafka_watchdog::model::round::BrokerId;

use super::recorder::{unix_now, Record, Recorder};
use super::routine::{app_producer, Traffic};
use super::{
    broker_states, lab_up, restore, wait_fully_replicated, webhook_yaml, KafkaEyes, Profile,
    Watchdog,
};
use crate::output::{num, opt_num, Section, Table};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Episode {
    /// Broker 2 frozen (SIGSTOP) 30 s, then thawed.
    Freeze,
    /// Broker 3 killed (SIGKILL), started again 30 s later.
    Kill,
    /// Broker 2 frozen 2 s / thawed 2 s, for 60 s.
    Flap,
    /// Broker 2 at 5 % of a CPU for 3 min under a 2,000 msg/s acks=all producer.
    Cpu,
    /// Broker 2 stopped 1.2 s every 20 s for 2 min (long GC pauses).
    GcLong,
    /// Broker 2 stopped 0.8 s every 10 s for 2 min (GC pauses below the liveness floor).
    GcShort,
    /// Broker 2 restarted, then its request path stalled 60 s after its first answer.
    RestartStall,
}

pub const ALL_EPISODES: &str = "freeze,kill,flap,cpu,gc-long,gc-short,restart-stall";

impl Episode {
    fn parse(s: &str) -> Option<Self> {
        <Self as clap::ValueEnum>::from_str(s, false).ok()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Episode::Freeze => "freeze",
            Episode::Kill => "kill",
            Episode::Flap => "flap",
            Episode::Cpu => "cpu",
            Episode::GcLong => "gc-long",
            Episode::GcShort => "gc-short",
            Episode::RestartStall => "restart-stall",
        }
    }

    /// The broker the fault is put on.
    pub fn target(self) -> BrokerId {
        match self {
            Episode::Kill => 3,
            _ => 2,
        }
    }

    fn fault(self) -> &'static str {
        match self {
            Episode::Freeze => "broker 2 frozen (SIGSTOP) 30 s, then thawed",
            Episode::Kill => "broker 3 killed (SIGKILL), started 30 s later",
            Episode::Flap => "broker 2 frozen 2 s / thawed 2 s, for 60 s",
            Episode::Cpu => "broker 2 at 5 % CPU for 3 min under 2,000 msg/s acks=all",
            Episode::GcLong => "broker 2 stopped 1.2 s every 20 s for 2 min",
            Episode::GcShort => "broker 2 stopped 0.8 s every 10 s for 2 min",
            Episode::RestartStall => {
                "broker 2 stopped and started, its request path stalled 60 s after its first answer"
            }
        }
    }

    /// The SIGSTOP/SIGCONT schedule of the episodes that are one.
    fn duty_cycle(self) -> Option<DutyCycle> {
        let ms = Duration::from_millis;
        match self {
            Episode::Flap => Some(DutyCycle {
                stop: ms(2000),
                period: ms(4000),
                total: ms(60_000),
            }),
            Episode::GcLong => Some(DutyCycle {
                stop: ms(1200),
                period: ms(20_000),
                total: ms(120_000),
            }),
            Episode::GcShort => Some(DutyCycle {
                stop: ms(800),
                period: ms(10_000),
                total: ms(120_000),
            }),
            _ => None,
        }
    }
}

/// The cluster settings of `config/lab.yaml` (four spaces in): what a new user trying the
/// watchdog on the lab runs. Everything else is the built-in default.
const LAB_CLUSTER_YAML: &str = "    round_interval_secs: 5\n    connect_timeout_ms: 1000\n    request_timeout_ms: 2000\n    canary:\n      produce_timeout_ms: 3000\n      lost_after_secs: 30\n      reassign_stable_secs: 30\n      reassign_min_interval_secs: 60\n";
const ROUND: Duration = Duration::from_secs(5);
/// The built-in `verdict.resolve_after_secs`.
const RESOLVE_AFTER: Duration = Duration::from_secs(20);
/// How long after the fault is removed the episode waits for its incidents to resolve.
const RESOLVE_BOUND: Duration = Duration::from_secs(20 + 120);
/// After the last incident resolved, this long without a message ends the episode, so a
/// message that follows the resolve (an incident opening again) is still counted.
const QUIET_TAIL: Duration = Duration::from_secs(10);
/// How long the lab and a fresh watchdog get to be healthy with no incident open.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(180);
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
const SINK_POLL: Duration = Duration::from_millis(50);
/// A zombie sample counts as "during the first pause" up to this long after it ended: one
/// sample interval for the scrape plus the liveness check's interval and a margin for the
/// verdict to be published again.
const PAUSE_SLACK_SECS: f64 = 2.5;
/// The cpu episode judges the state from this long after the quota is set (the verdict
/// needs load to show, and a round or two to say it).
const CPU_SETTLED_SECS: f64 = 15.0;
/// restart-stall: how long after the stall the trial waits for the critical page.
const STALL_WATCH: Duration = Duration::from_secs(90);
/// restart-stall: the stall comes this long after the restarted broker's first answer.
const STALL_AFTER_ANSWER: Duration = Duration::from_secs(60);
const LOAD_TOPIC: &str = "bench-noise-load";
const LOAD_RATE: u64 = 2000;

pub struct NoiseOptions {
    pub watchdog_bin: PathBuf,
    pub episodes: Vec<Episode>,
    pub trials: usize,
}

// ---- what an episode saw ---------------------------------------------------------------

/// One webhook as the receiver got it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Seconds after the fault was in place (negative: before it).
    pub at: f64,
    pub event: String,
    pub kind: String,
    pub severity: String,
    pub state: Option<String>,
    pub rules: Vec<String>,
    pub broker: Option<i64>,
    pub incident: String,
    pub affected_partitions: u64,
}

impl Message {
    fn from_body(body: &Value, at: f64) -> Message {
        let s = |k: &str| body[k].as_str().unwrap_or("-").to_string();
        Message {
            at,
            event: s("event"),
            kind: s("kind"),
            severity: s("severity"),
            state: body["state"].as_str().map(str::to_string),
            rules: rules_of(body),
            broker: body["broker_id"].as_i64(),
            incident: s("incident_id"),
            affected_partitions: body["affected_partitions_total"].as_u64().unwrap_or(0),
        }
    }
}

/// The verdict rules a broker notification names: its evidence lines read `rule: detail`
/// (partition incidents' lines name partitions, not rules).
fn rules_of(body: &Value) -> Vec<String> {
    if body["kind"] != "broker" {
        return Vec::new();
    }
    let mut rules: Vec<String> = Vec::new();
    for line in body["evidence"].as_array().into_iter().flatten() {
        let Some((head, _)) = line.as_str().and_then(|l| l.split_once(':')) else {
            continue;
        };
        let is_rule = !head.is_empty() && head.chars().all(|c| c.is_ascii_lowercase() || c == '_');
        if is_rule && !rules.iter().any(|r| r == head) {
            rules.push(head.to_string());
        }
    }
    rules
}

/// One scrape of /metrics: each broker's verdict (`broker_state`) and the state of its open
/// incident (`broker_incident_state`, absent while none is open).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub at: f64,
    pub state: BTreeMap<BrokerId, String>,
    pub incident_state: BTreeMap<BrokerId, String>,
}

/// Broker -> the state whose series of `metric` is 1, in a Prometheus text page.
fn states_in(page: &str, metric: &str) -> BTreeMap<BrokerId, String> {
    let mut out = BTreeMap::new();
    for line in page.lines() {
        let Some(rest) = line.strip_prefix(metric).and_then(|r| r.strip_prefix('{')) else {
            continue;
        };
        let Some((labels, value)) = rest.split_once('}') else {
            continue;
        };
        if value.trim().parse::<f64>().ok() != Some(1.0) {
            continue;
        }
        let label = |name: &str| {
            labels.split(',').find_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                (k.trim() == name).then(|| v.trim().trim_matches('"').to_string())
            })
        };
        if let (Some(b), Some(s)) = (label("broker"), label("state")) {
            if let Ok(b) = b.parse() {
                out.insert(b, s);
            }
        }
    }
    out
}

/// An incident /status listed during the episode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IncidentSeen {
    pub kind: String,
    pub broker: Option<i64>,
    pub state: String,
    pub severity: String,
    /// Seconds after the fault.
    pub started: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EpisodeRun {
    pub episode: String,
    pub trial: usize,
    pub target: BrokerId,
    /// Unix seconds at which the fault was in place: t = 0 of every other time.
    pub t0_unix: f64,
    /// Whether the fault was injected at all (a lab that did not settle runs nothing).
    pub injected: bool,
    /// Seconds from t = 0 until the fault was removed.
    pub fault_secs: f64,
    /// SIGSTOP..SIGCONT windows of a duty cycle, seconds after t = 0.
    pub pauses: Vec<(f64, f64)>,
    pub messages: Vec<Message>,
    pub samples: Vec<Sample>,
    pub incidents: Vec<IncidentSeen>,
    /// Non-healthy verdicts /status showed (a broker entering a state), with their rules.
    pub verdicts: Vec<Value>,
    /// Every incident opened was resolved within the bound after the fault was removed.
    pub all_resolved: bool,
    /// Seconds after t = 0 when watching ended.
    pub observed_secs: f64,
    /// restart-stall: seconds from the start command to the broker's first answer.
    pub first_answer_secs: Option<f64>,
    /// cpu: the producer's figures.
    pub load: Option<Value>,
    pub error: Option<String>,
}

fn rel(t: Instant, t0: Instant) -> f64 {
    if t >= t0 {
        (t - t0).as_secs_f64()
    } else {
        -(t0 - t).as_secs_f64()
    }
}

// ---- counting (pure) -------------------------------------------------------------------

/// "opened 1, updated 3, resolved 1", in the order the events first came.
fn by_event(msgs: &[Message]) -> String {
    let mut order: Vec<(&str, usize)> = Vec::new();
    for m in msgs {
        match order.iter_mut().find(|(e, _)| *e == m.event) {
            Some((_, n)) => *n += 1,
            None => order.push((&m.event, 1)),
        }
    }
    order
        .iter()
        .map(|(e, n)| format!("{e} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs of equal values, "a x3 > b > a".
fn runs_of<'a>(values: impl Iterator<Item = &'a str>) -> String {
    let mut runs: Vec<(&str, usize)> = Vec::new();
    for v in values {
        match runs.last_mut() {
            Some((last, n)) if *last == v => *n += 1,
            _ => runs.push((v, 1)),
        }
    }
    runs.iter()
        .map(|(v, n)| {
            if *n > 1 {
                format!("{v} x{n}")
            } else {
                v.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" > ")
}

fn severity_sequence(msgs: &[Message]) -> String {
    runs_of(msgs.iter().map(|m| m.severity.as_str()))
}

/// Distinct incidents the receiver was told opened.
fn incidents_opened(msgs: &[Message]) -> usize {
    msgs.iter()
        .filter(|m| m.event == "opened")
        .map(|m| m.incident.as_str())
        .collect::<BTreeSet<_>>()
        .len()
}

fn events(msgs: &[Message]) -> Vec<&str> {
    msgs.iter().map(|m| m.event.as_str()).collect()
}

/// `broker`'s verdict in each sample that has it: (seconds, state).
fn states_of(samples: &[Sample], broker: BrokerId) -> impl Iterator<Item = (f64, &str)> {
    samples
        .iter()
        .filter_map(move |s| s.state.get(&broker).map(|st| (s.at, st.as_str())))
}

/// How often `broker`'s verdict on /metrics changed between consecutive samples.
fn state_changes(samples: &[Sample], broker: BrokerId) -> usize {
    let states: Vec<&str> = states_of(samples, broker).map(|(_, s)| s).collect();
    states.windows(2).filter(|w| w[0] != w[1]).count()
}

/// The share of samples in [from, to] in which `broker` is `state`; `None` without samples.
fn fraction(samples: &[Sample], broker: BrokerId, state: &str, from: f64, to: f64) -> Option<f64> {
    let inside: Vec<&str> = states_of(samples, broker)
        .filter(|(t, _)| *t >= from && *t <= to)
        .map(|(_, s)| s)
        .collect();
    if inside.is_empty() {
        return None;
    }
    Some(inside.iter().filter(|s| **s == state).count() as f64 / inside.len() as f64)
}

/// Seconds of the samples in which `broker` is one of `states`.
fn times_in(samples: &[Sample], broker: BrokerId, states: &[&str]) -> Vec<f64> {
    states_of(samples, broker)
        .filter(|(_, s)| states.contains(s))
        .map(|(t, _)| t)
        .collect()
}

fn span(times: &[f64]) -> String {
    match (times.first(), times.last()) {
        (Some(a), Some(b)) => format!("{} sample(s), {a:.1}..{b:.1} s", times.len()),
        _ => "none".into(),
    }
}

/// The first critical notification naming `broker` at or after the fault: seconds.
fn critical_page(run: &EpisodeRun) -> Option<f64> {
    run.messages
        .iter()
        .find(|m| {
            m.at >= 0.0 && m.severity == "critical" && m.broker == Some(i64::from(run.target))
        })
        .map(|m| m.at)
}

// ---- goals (pure) ----------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Goal {
    pub episode: String,
    pub goal: String,
    pub seen: String,
    pub met: bool,
}

fn goal(episode: &str, goal: &str, met: bool, seen: impl Into<String>) -> Goal {
    Goal {
        episode: episode.into(),
        goal: goal.into(),
        seen: seen.into(),
        met,
    }
}

fn messages_seen(r: &EpisodeRun) -> String {
    format!(
        "{} message(s): {}",
        r.messages.len(),
        events(&r.messages).join(", ")
    )
}

/// Every goal of every episode run, met or missed, in the order the episodes ran.
pub fn goals_of(runs: &[EpisodeRun]) -> Vec<Goal> {
    let mut names: Vec<&str> = Vec::new();
    for r in runs {
        if !names.contains(&r.episode.as_str()) {
            names.push(&r.episode);
        }
    }
    let mut out = Vec::new();
    for name in names {
        let Some(e) = Episode::parse(name) else {
            continue;
        };
        let of: Vec<&EpisodeRun> = runs.iter().filter(|r| r.episode == name).collect();
        for r in &of {
            if let Some(err) = &r.error {
                let what = if of.len() > 1 {
                    format!("trial {} ran to its end", r.trial)
                } else {
                    "the episode ran to its end".to_string()
                };
                out.push(goal(name, &what, false, err.clone()));
            }
        }
        let ran: Vec<&EpisodeRun> = of.into_iter().filter(|r| r.injected).collect();
        if e == Episode::RestartStall {
            out.extend(restart_stall_goals(&ran));
        } else {
            for r in ran {
                out.extend(episode_goals(e, r));
            }
        }
    }
    out
}

/// The goals of issue #31 that one run of an episode must meet.
fn episode_goals(e: Episode, r: &EpisodeRun) -> Vec<Goal> {
    let name = e.as_str();
    let n = r.messages.len();
    let ev = events(&r.messages);
    let opened_then_resolved = ev.first() == Some(&"opened") && ev.last() == Some(&"resolved");
    let target = r.target;
    match e {
        Episode::Freeze => vec![goal(
            name,
            "exactly 2 messages (opened, resolved)",
            ev == ["opened", "resolved"],
            messages_seen(r),
        )],
        Episode::Kill => kill_goals(r),
        Episode::Flap => vec![goal(
            name,
            "<= 3 messages (opened, flapping, resolved)",
            n <= 3 && opened_then_resolved,
            messages_seen(r),
        )],
        Episode::Cpu => {
            let degraded = fraction(
                &r.samples,
                target,
                "degraded",
                CPU_SETTLED_SECS,
                r.fault_secs,
            );
            let changes = state_changes(&r.samples, target);
            vec![
                goal(name, "<= 3 messages", n <= 3, messages_seen(r)),
                goal(
                    name,
                    "broker 2 degraded in >= 90% of /metrics samples from 15 s after the fault",
                    degraded.is_some_and(|f| f >= 0.9),
                    degraded.map_or("no sample".into(), |f| format!("{:.0}%", f * 100.0)),
                ),
                goal(
                    name,
                    "<= 2 state changes of broker 2 on /metrics",
                    changes <= 2,
                    format!("{changes}: {}", state_runs(r)),
                ),
            ]
        }
        Episode::GcLong => {
            let zombie = times_in(&r.samples, target, &["zombie"]);
            let first = r.pauses.first().copied();
            let in_first =
                |t: &f64| first.is_some_and(|(a, b)| *t >= a && *t <= b + PAUSE_SLACK_SECS);
            let opened = incidents_opened(&r.messages);
            vec![
                goal(
                    name,
                    "one incident, <= 3 messages",
                    opened == 1 && n <= 3,
                    format!("{opened} incident(s), {}", messages_seen(r)),
                ),
                goal(
                    name,
                    "zombie on /metrics at most during the first pause",
                    zombie.iter().all(in_first),
                    format!(
                        "zombie: {}; first pause {}",
                        span(&zombie),
                        first.map_or("none".into(), |(a, b)| format!("{a:.1}..{b:.1} s"))
                    ),
                ),
            ]
        }
        Episode::GcShort => {
            let critical = r
                .messages
                .iter()
                .filter(|m| m.severity == "critical")
                .count();
            let degraded = times_in(&r.samples, target, &["degraded"]);
            let worse = times_in(&r.samples, target, &["zombie", "down"]);
            vec![
                goal(
                    name,
                    "0 critical messages",
                    critical == 0,
                    format!("{critical}"),
                ),
                goal(
                    name,
                    "degraded on /metrics at some point",
                    !degraded.is_empty(),
                    span(&degraded),
                ),
                goal(
                    name,
                    "never zombie or down on /metrics",
                    worse.is_empty(),
                    span(&worse),
                ),
            ]
        }
        Episode::RestartStall => restart_stall_goals(&[r]),
    }
}

fn kill_goals(r: &EpisodeRun) -> Vec<Goal> {
    let name = Episode::Kill.as_str();
    let ev = events(&r.messages);
    let target = Some(i64::from(r.target));
    let listed: u64 = r
        .messages
        .iter()
        .filter(|m| m.kind == "broker" && m.broker == target)
        .map(|m| m.affected_partitions)
        .max()
        .unwrap_or(0);
    let ur_messages = r
        .messages
        .iter()
        .filter(|m| m.kind == "under_replicated")
        .count();
    let ur_incidents = r
        .incidents
        .iter()
        .filter(|i| i.kind == "under_replicated")
        .count();
    vec![
        goal(
            name,
            "2 messages (opened, resolved)",
            ev == ["opened", "resolved"],
            messages_seen(r),
        ),
        goal(
            name,
            "under-replicated partitions listed inside the broker incident",
            listed > 0,
            format!("broker 3 incident lists {listed} partition(s)"),
        ),
        goal(
            name,
            "no separate under_replicated incident",
            ur_messages == 0 && ur_incidents == 0,
            format!("{ur_incidents} in /status, {ur_messages} message(s)"),
        ),
    ]
}

/// restart-stall's goals over its trials: zombie and a critical page every time, and the
/// page's p95 after the stall within 1.5 s (a trial without a page counts as never).
fn restart_stall_goals(runs: &[&EpisodeRun]) -> Vec<Goal> {
    let name = Episode::RestartStall.as_str();
    if runs.is_empty() {
        return Vec::new();
    }
    let n = runs.len();
    let zombie = runs
        .iter()
        .filter(|r| {
            times_in(&r.samples, r.target, &["zombie"])
                .iter()
                .any(|t| *t >= 0.0)
        })
        .count();
    let pages: Vec<Option<f64>> = runs.iter().map(|r| critical_page(r)).collect();
    let paged = pages.iter().flatten().count();
    let latencies: Vec<f64> = pages.iter().map(|p| p.unwrap_or(f64::INFINITY)).collect();
    let p95 = crate::stats::summarize(&latencies).map_or(f64::INFINITY, |s| s.p95);
    let after_stall: BTreeSet<String> = runs
        .iter()
        .flat_map(|r| {
            states_of(&r.samples, r.target)
                .filter(|(t, _)| *t >= 0.0)
                .map(|(_, s)| s.to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    vec![
        goal(
            name,
            "broker 2 zombie on /metrics after the stall, every trial",
            zombie == n,
            format!(
                "{zombie}/{n} trial(s); states after the stall: {}",
                after_stall.into_iter().collect::<Vec<_>>().join(", ")
            ),
        ),
        goal(
            name,
            "a critical webhook naming broker 2, every trial",
            paged == n,
            format!("{paged}/{n} trial(s)"),
        ),
        goal(
            name,
            "stall to critical webhook p95 <= 1.5 s",
            p95 <= 1.5,
            if p95.is_finite() {
                format!("p95 {p95:.2} s over {n} trial(s)")
            } else {
                format!("p95 never ({paged}/{n} trial(s) paged)")
            },
        ),
    ]
}

/// Every goal missed, in words (empty when all were met), from a recorded section.
pub fn missed_goals(section: &Section) -> Vec<String> {
    let Ok(runs) = serde_json::from_value::<Vec<EpisodeRun>>(section.raw.clone()) else {
        return vec!["no episode recorded".into()];
    };
    if runs.is_empty() {
        return vec!["no episode recorded".into()];
    }
    goals_of(&runs)
        .into_iter()
        .filter(|g| !g.met)
        .map(|g| format!("{}: {} (seen: {})", g.episode, g.goal, g.seen))
        .collect()
}

fn state_runs(r: &EpisodeRun) -> String {
    runs_of(states_of(&r.samples, r.target).map(|(_, s)| s))
}

// ---- the duty cycle --------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct DutyCycle {
    stop: Duration,
    period: Duration,
    total: Duration,
}

impl DutyCycle {
    /// The pauses as (start, end) offsets from the first stop.
    fn plan(self) -> Vec<(Duration, Duration)> {
        let mut out = Vec::new();
        let mut start = Duration::ZERO;
        while start < self.total {
            out.push((start, start + self.stop));
            start += self.period;
        }
        out
    }
}

fn signal(pid: u32, sig: i32) -> Result<()> {
    let pid = i32::try_from(pid).context("pid out of range")?;
    // SAFETY: a signal to the lab broker's JVM, whose pid the lab reported.
    if unsafe { libc::kill(pid, sig) } != 0 {
        bail!("signal {sig} to {pid}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// Resumes the process however the cycle ends (an error, a panic).
struct ContOnDrop(u32);

impl Drop for ContOnDrop {
    fn drop(&mut self) {
        let _ = signal(self.0, libc::SIGCONT);
    }
}

/// Stops and resumes `pid` on the plan, sleeping to deadlines counted from `t0` so that
/// pauses neither drift nor stretch with the time a signal takes (the lab's `freeze` takes
/// its lock and reads its state file first); returns the pauses as they happened.
fn run_duty_cycle(pid: u32, cycle: DutyCycle, t0: Instant) -> Result<Vec<(f64, f64)>> {
    let _cont = ContOnDrop(pid);
    let mut done = Vec::new();
    for (start, end) in cycle.plan() {
        sleep_until(t0 + start);
        signal(pid, libc::SIGSTOP)?;
        let stopped = t0.elapsed().as_secs_f64();
        sleep_until(t0 + end);
        signal(pid, libc::SIGCONT)?;
        done.push((stopped, t0.elapsed().as_secs_f64()));
    }
    sleep_until(t0 + cycle.total);
    Ok(done)
}

// ---- watching ---------------------------------------------------------------------------

/// Broker -> state, as one /metrics family says it.
type States = BTreeMap<BrokerId, String>;

#[derive(Default)]
struct WatchLog {
    hooks: Vec<(Instant, Value)>,
    /// When each scrape answered: `broker_state`, `broker_incident_state`.
    samples: Vec<(Instant, States, States)>,
}

/// What the receiver heard and what /metrics said, as it happened: the sink read every
/// 50 ms (so webhook times are good to that), /metrics every second.
struct Watch {
    log: Arc<Mutex<WatchLog>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Watch {
    fn start(rt: &tokio::runtime::Runtime, port: u16, sink: Arc<Sink>) -> Watch {
        let log: Arc<Mutex<WatchLog>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let skip = sink.received().len();
        let hooks = {
            let (log, stop) = (log.clone(), stop.clone());
            rt.spawn(async move {
                let mut seen = skip;
                loop {
                    let stopping = stop.load(Ordering::SeqCst);
                    let got = sink.received();
                    if got.len() > seen {
                        let now = Instant::now();
                        let mut l = log.lock().expect("watch lock");
                        l.hooks.extend(got[seen..].iter().map(|b| (now, b.clone())));
                        seen = got.len();
                    }
                    if stopping {
                        break;
                    }
                    tokio::time::sleep(SINK_POLL).await;
                }
            })
        };
        let metrics = {
            let (log, stop) = (log.clone(), stop.clone());
            rt.spawn(async move {
                let mut tick = tokio::time::interval(SAMPLE_EVERY);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                while !stop.load(Ordering::SeqCst) {
                    tick.tick().await;
                    if let Ok((200, page)) = super::http_get(port, "/metrics").await {
                        let state = states_in(&page, "kafka_watchdog_broker_state");
                        let incident = states_in(&page, "kafka_watchdog_broker_incident_state");
                        let mut l = log.lock().expect("watch lock");
                        l.samples.push((Instant::now(), state, incident));
                    }
                }
            })
        };
        Watch {
            log,
            stop,
            tasks: vec![hooks, metrics],
        }
    }

    fn hooks(&self) -> Vec<(Instant, Value)> {
        self.log.lock().expect("watch lock").hooks.clone()
    }

    fn samples_since(&self, t0: Instant) -> Vec<(Instant, States)> {
        let l = self.log.lock().expect("watch lock");
        l.samples
            .iter()
            .filter(|(t, _, _)| *t >= t0)
            .map(|(t, s, _)| (*t, s.clone()))
            .collect()
    }

    fn finish(self, rt: &tokio::runtime::Runtime) -> WatchLog {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.tasks {
            let _ = rt.block_on(t);
        }
        std::mem::take(&mut *self.log.lock().expect("watch lock"))
    }
}

/// Incident ids of the `opened` and `resolved` messages heard.
fn opened_and_resolved(hooks: &[(Instant, Value)]) -> (BTreeSet<String>, BTreeSet<String>) {
    let ids = |event: &str| -> BTreeSet<String> {
        hooks
            .iter()
            .filter(|(_, b)| b["event"] == event)
            .filter_map(|(_, b)| b["incident_id"].as_str().map(str::to_string))
            .collect()
    };
    (ids("opened"), ids("resolved"))
}

/// Watches after the fault was removed at `healed` until every incident opened has
/// resolved and `QUIET_TAIL` passed without a message (or, when nothing opened, until the
/// resolve delay and the tail passed), at most `RESOLVE_BOUND`. Whether all resolved.
fn watch_until_resolved(watch: &Watch, healed: Instant) -> bool {
    loop {
        let hooks = watch.hooks();
        let (opened, resolved) = opened_and_resolved(&hooks);
        let settled = opened.is_subset(&resolved);
        let quiet = hooks.last().is_none_or(|(t, _)| t.elapsed() >= QUIET_TAIL);
        let waited = healed.elapsed();
        let enough = if opened.is_empty() {
            waited >= RESOLVE_AFTER + QUIET_TAIL
        } else {
            quiet
        };
        if settled && enough {
            return true;
        }
        if waited > RESOLVE_BOUND {
            return settled;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

// ---- the lab ---------------------------------------------------------------------------

struct Ctx<'a> {
    rt: &'a tokio::runtime::Runtime,
    lab: &'a mut Lab,
    sink: &'a Arc<Sink>,
    opts: &'a NoiseOptions,
}

/// Heals the lab, waits for full replication and preferred leaders, starts a fresh watchdog
/// and waits until it calls every broker healthy with no incident open, for a whole round.
fn settle(cx: &mut Ctx, name: &str) -> Result<Watchdog> {
    restore(cx.lab)?;
    let mut eyes = KafkaEyes::new();
    cx.rt.block_on(wait_fully_replicated(
        &mut eyes,
        cx.lab,
        Duration::from_secs(180),
    ))?;
    elect_preferred(cx.rt, &mut eyes);
    let bootstrap: Vec<String> = cx.lab.bootstrap().split(',').map(str::to_string).collect();
    let wd = Watchdog::start_config(
        &cx.opts.watchdog_bin,
        name,
        &bootstrap,
        LAB_CLUSTER_YAML,
        Profile::Default,
        &webhook_yaml(&cx.sink.url(), "warning"),
    )?;
    wait_quiet(&wd, &cx.lab.brokers(), SETTLE_TIMEOUT)?;
    Ok(wd)
}

/// Preferred leaders on every partition (best effort): the lab runs without automatic
/// rebalancing, and a kill or restart leaves leaderships where the failover put them.
fn elect_preferred(rt: &tokio::runtime::Runtime, eyes: &mut KafkaEyes) {
    let address = broker_address(1);
    let _ = rt.block_on(async {
        let md = eyes.metadata(&address, None).await?;
        let all: Vec<(String, i32)> = md
            .topics
            .values()
            .flat_map(|t| t.partitions.iter().map(|p| (t.name.clone(), p.partition)))
            .collect();
        eyes.elect(&address, &all).await
    });
}

/// Whether /status calls every broker healthy and lists no open incident.
fn quiet(status: &Value, brokers: &[BrokerId]) -> bool {
    let states = broker_states(status);
    let healthy = brokers
        .iter()
        .all(|b| states.get(b).map(String::as_str) == Some("healthy"));
    let open = status["incidents"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|i| i["resolved_at"].is_null());
    healthy && !open
}

/// Waits until the watchdog has been quiet (see [`quiet`]) for a round.
fn wait_quiet(wd: &Watchdog, brokers: &[BrokerId], timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut since: Option<Instant> = None;
    let mut last = String::from("no /status");
    loop {
        match wd.status_blocking() {
            Ok(s) if quiet(&s, brokers) => {
                let t = *since.get_or_insert_with(Instant::now);
                if t.elapsed() >= ROUND {
                    return Ok(());
                }
            }
            Ok(s) => {
                since = None;
                let open = s["incidents"].as_array().map_or(0, |a| {
                    a.iter().filter(|i| i["resolved_at"].is_null()).count()
                });
                last = format!("{:?}, {open} incident(s) open", broker_states(&s));
            }
            Err(e) => {
                since = None;
                last = format!("{e:#}");
            }
        }
        if Instant::now() > deadline {
            bail!(
                "not every broker healthy with no incident open within {} s: {last}",
                timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// When the fault was in place and when it was removed, and what it did.
struct Injected {
    t0: Instant,
    healed: Instant,
    pauses: Vec<(f64, f64)>,
    first_answer_secs: Option<f64>,
    load: Option<Value>,
}

impl Injected {
    fn at(t0: Instant) -> Injected {
        Injected {
            t0,
            healed: Instant::now(),
            pauses: Vec::new(),
            first_answer_secs: None,
            load: None,
        }
    }
}

fn freeze(cx: &mut Ctx) -> Result<Injected> {
    cx.lab.freeze(2)?;
    let mut f = Injected::at(Instant::now());
    std::thread::sleep(Duration::from_secs(30));
    f.healed = Instant::now();
    cx.lab.thaw(2)?;
    Ok(f)
}

fn kill(cx: &mut Ctx) -> Result<Injected> {
    cx.lab.kill(3)?;
    let mut f = Injected::at(Instant::now());
    std::thread::sleep(Duration::from_secs(30));
    f.healed = Instant::now();
    cx.lab.start(3)?;
    Ok(f)
}

fn duty(cx: &mut Ctx, cycle: DutyCycle) -> Result<Injected> {
    let pid = cx.lab.running_pid(2).context("broker 2 is not running")?;
    let t0 = Instant::now();
    let pauses = run_duty_cycle(pid, cycle, t0)?;
    Ok(Injected {
        pauses,
        ..Injected::at(t0)
    })
}

fn cpu(cx: &mut Ctx) -> Result<Injected> {
    let load = Load::start(&cx.lab.bootstrap(), LOAD_RATE)?;
    // The producer's connections and leaders are settled before the quota comes.
    std::thread::sleep(Duration::from_secs(10));
    let slowed = cx.lab.slow(2, 5);
    let mut f = Injected::at(Instant::now());
    if slowed.is_ok() {
        std::thread::sleep(Duration::from_secs(180));
    }
    f.healed = Instant::now();
    let healed = cx.lab.heal(Some(2));
    f.load = Some(load.stop());
    slowed?;
    healed?;
    Ok(f)
}

/// Stops and starts broker 2, finds its first answer by asking it for metadata every
/// 100 ms, and stalls its request path `STALL_AFTER_ANSWER` later; heals it once the
/// critical page and the zombie verdict came, or `STALL_WATCH` passed.
fn restart_stall(cx: &mut Ctx, watch: &Watch) -> Result<Injected> {
    cx.lab.stop(2)?;
    let started = Instant::now();
    let answer = cx.rt.spawn(first_answer(broker_address(2)));
    let start = cx.lab.start(2);
    let answered = cx.rt.block_on(answer).ok().flatten();
    start?;
    let answered = answered.context("broker 2 did not answer within 3 min of its start")?;
    sleep_until(answered + STALL_AFTER_ANSWER);
    cx.lab.stall(2, false)?;
    let mut f = Injected::at(Instant::now());
    f.first_answer_secs = Some((answered - started).as_secs_f64());
    let end = f.t0 + STALL_WATCH;
    while Instant::now() < end && !paged_as_zombie(watch, f.t0) {
        std::thread::sleep(Duration::from_millis(100));
    }
    // A few samples more, to see what the verdict settles on.
    std::thread::sleep(Duration::from_secs(3));
    f.healed = Instant::now();
    cx.lab.heal(Some(2))?;
    Ok(f)
}

/// Polls a broker's Metadata until it answers; the moment it did.
async fn first_answer(address: String) -> Option<Instant> {
    let mut eyes = KafkaEyes::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    while Instant::now() < deadline {
        if eyes.metadata(&address, Some(&[])).await.is_ok() {
            return Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// A critical webhook naming broker 2 and a zombie sample of it, both after `t0`.
fn paged_as_zombie(watch: &Watch, t0: Instant) -> bool {
    let paged = watch.hooks().iter().any(|(t, b)| {
        *t >= t0 && b["severity"] == "critical" && b["broker_id"].as_i64() == Some(2)
    });
    paged
        && watch
            .samples_since(t0)
            .iter()
            .any(|(_, s)| s.get(&2).map(String::as_str) == Some("zombie"))
}

/// The application load of the cpu episode: `rate` acks=all records a second (256 bytes,
/// idempotent, as a default application producer) to the load topic, on its own thread.
struct Load {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<u64>>,
    traffic: Arc<Traffic>,
    started: Instant,
}

impl Load {
    fn start(bootstrap: &str, rate: u64) -> Result<Load> {
        let traffic = Arc::new(Traffic::default());
        let producer = app_producer(bootstrap, traffic.clone())?;
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let thread = {
            let (stop, traffic) = (stop.clone(), traffic.clone());
            std::thread::spawn(move || -> Result<u64> {
                let payload = [b'n'; 256];
                let queue_full = AtomicU64::new(0);
                let mut due_sent = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    // Paced by the clock, not by acknowledgements: a slow broker does not
                    // slow the application down, it fills the producer's queue.
                    let due = (started.elapsed().as_secs_f64() * rate as f64) as u64;
                    while due_sent < due {
                        let rec = BaseRecord::<(), [u8]>::to(LOAD_TOPIC).payload(&payload[..]);
                        match producer.send(rec) {
                            Ok(()) => traffic.sent.fetch_add(1, Ordering::Relaxed),
                            Err(_) => queue_full.fetch_add(1, Ordering::Relaxed),
                        };
                        due_sent += 1;
                    }
                    producer.poll(Duration::from_millis(5));
                }
                let _ = producer.flush(Duration::from_secs(15));
                Ok(queue_full.load(Ordering::Relaxed))
            })
        };
        Ok(Load {
            stop,
            thread,
            traffic,
            started,
        })
    }

    /// Stops the producer; its figures.
    fn stop(self) -> Value {
        self.stop.store(true, Ordering::SeqCst);
        let secs = self.started.elapsed().as_secs_f64();
        let refused = match self.thread.join() {
            Ok(Ok(n)) => json!(n),
            Ok(Err(e)) => json!(format!("{e:#}")),
            Err(_) => json!("the producer thread panicked"),
        };
        let t = &self.traffic;
        json!({
            "rate_per_sec": LOAD_RATE,
            "secs": (secs * 10.0).round() / 10.0,
            "sent": t.sent.load(Ordering::Relaxed),
            "acked": t.acked.load(Ordering::Relaxed),
            "failed": t.failed.load(Ordering::Relaxed),
            "queue_full": refused,
            "errors": *t.errors.lock().expect("errors lock"),
        })
    }
}

fn create_load_topic(lab: &Lab) -> Result<()> {
    let brokers = lab.brokers();
    let n = brokers.len();
    // Each broker the preferred leader of one partition, RF 3: broker 2 leads one and
    // follows the others, as a loaded broker in a real cluster does.
    let layout: Vec<Vec<BrokerId>> = (0..n)
        .map(|k| (0..3.min(n)).map(|i| brokers[(k + i) % n]).collect())
        .collect();
    kafka_lab::client::create_topic(
        &lab.bootstrap(),
        LOAD_TOPIC,
        &layout,
        &[("min.insync.replicas", "2")],
    )
    .context("create the load topic")
}

// ---- one episode -----------------------------------------------------------------------

fn inject(cx: &mut Ctx, e: Episode, watch: &Watch) -> Result<Injected> {
    match e {
        Episode::Freeze => freeze(cx),
        Episode::Kill => kill(cx),
        Episode::Flap | Episode::GcLong | Episode::GcShort => {
            duty(cx, e.duty_cycle().expect("a duty-cycle episode"))
        }
        Episode::Cpu => cpu(cx),
        Episode::RestartStall => restart_stall(cx, watch),
    }
}

/// One run of an episode, with a watchdog of its own; whatever fails is in `error`, and the
/// lab is restored before the next.
fn run_episode(cx: &mut Ctx, e: Episode, trial: usize) -> EpisodeRun {
    let mut run = EpisodeRun {
        episode: e.as_str().into(),
        trial,
        target: e.target(),
        ..EpisodeRun::default()
    };
    let wd = match settle(cx, &format!("noise-{}-{trial}", e.as_str())) {
        Ok(wd) => wd,
        Err(err) => {
            run.error = Some(format!("did not settle before the episode: {err:#}"));
            return run;
        }
    };
    let brokers = cx.lab.brokers();
    let recorder = Recorder::start(cx.rt, wd.port, None, 0, e.as_str(), &brokers);
    let watch = Watch::start(cx.rt, wd.port, cx.sink.clone());
    let begun = Instant::now();
    let t0_unix = unix_now();
    let injected = inject(cx, e, &watch);
    let (t0, healed) = match &injected {
        Ok(f) => (f.t0, f.healed),
        Err(_) => (begun, Instant::now()),
    };
    run.t0_unix = t0_unix + rel(t0, begun);
    match injected {
        Ok(f) => {
            run.injected = true;
            run.fault_secs = rel(f.healed, f.t0);
            run.pauses = f.pauses;
            run.first_answer_secs = f.first_answer_secs;
            run.load = f.load;
        }
        Err(err) => {
            run.error = Some(format!("the fault: {err:#}"));
            if let Err(err) = restore(cx.lab) {
                println!("  restore after the failed fault: {err:#}");
            }
        }
    }
    run.all_resolved = watch_until_resolved(&watch, healed);
    run.observed_secs = rel(Instant::now(), t0);
    let record = recorder.finish(cx.rt);
    let log = watch.finish(cx.rt);
    fill(&mut run, &log, &record, t0);
    drop(wd);
    run
}

/// Moves what was watched into the run, times relative to `t0`.
fn fill(run: &mut EpisodeRun, log: &WatchLog, record: &Record, t0: Instant) {
    run.messages = log
        .hooks
        .iter()
        .map(|(t, b)| Message::from_body(b, rel(*t, t0)))
        .collect();
    run.samples = log
        .samples
        .iter()
        .map(|(t, s, i)| Sample {
            at: rel(*t, t0),
            state: s.clone(),
            incident_state: i.clone(),
        })
        .collect();
    let mut incidents: Vec<IncidentSeen> = record
        .incidents
        .values()
        .map(|i| IncidentSeen {
            kind: i.kind.clone(),
            broker: i.broker,
            state: i.state.clone(),
            severity: i.severity.clone(),
            started: i.started_at - run.t0_unix,
        })
        .collect();
    incidents.sort_by(|a, b| a.started.total_cmp(&b.started));
    run.incidents = incidents;
    run.verdicts = record
        .episodes_seen
        .iter()
        .map(|v| {
            let mut v = v.clone();
            if let Some(at) = v["at"].as_f64() {
                v["at"] = num(at - run.t0_unix, 1);
            }
            v
        })
        .collect();
}

// ---- the run -----------------------------------------------------------------------------

pub fn run(opts: &NoiseOptions) -> Result<Section> {
    let mut section = Section::new(
        "noise",
        json!({
            "episodes": opts.episodes.iter().map(|e| e.as_str()).collect::<Vec<_>>(),
            "trials": opts.trials,
            "watchdog": opts.watchdog_bin.display().to_string(),
            "settings": "config/lab.yaml timings (round 5 s, connect 1 s, request 2 s), one generic receiver, min_severity warning",
        }),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut lab = lab_up()?;
    section.note(format!(
        "Kafka {}, {} brokers",
        lab.version().maven_version(),
        lab.brokers().len()
    ));
    if opts.episodes.contains(&Episode::Cpu) {
        create_load_topic(&lab)?;
    }
    let sink = Arc::new(rt.block_on(Sink::start("127.0.0.1:0".parse()?))?);
    let mut runs: Vec<EpisodeRun> = Vec::new();
    for &e in &opts.episodes {
        let trials = if e == Episode::RestartStall {
            opts.trials.max(1)
        } else {
            1
        };
        for trial in 1..=trials {
            println!(
                "noise: {} (trial {trial}/{trials}): {}",
                e.as_str(),
                e.fault()
            );
            let mut cx = Ctx {
                rt: &rt,
                lab: &mut lab,
                sink: &sink,
                opts,
            };
            let r = run_episode(&mut cx, e, trial);
            println!("  {}", one_line(&r));
            runs.push(r);
        }
    }
    if opts.episodes.contains(&Episode::Cpu) {
        let _ = kafka_lab::client::delete_topic(&lab.bootstrap(), LOAD_TOPIC);
    }
    if let Err(e) = restore(&mut lab) {
        section.note(format!(
            "the lab did not heal after the last episode: {e:#}"
        ));
    }
    report(&mut section, &runs);
    section.raw = serde_json::to_value(&runs)?;
    Ok(section)
}

fn one_line(r: &EpisodeRun) -> String {
    format!(
        "{} message(s) [{}], severities [{}], broker {} on /metrics: {}{}",
        r.messages.len(),
        by_event(&r.messages),
        severity_sequence(&r.messages),
        r.target,
        state_runs(r),
        r.error
            .as_ref()
            .map(|e| format!("; error: {e}"))
            .unwrap_or_default()
    )
}

// ---- the report --------------------------------------------------------------------------

fn report(section: &mut Section, runs: &[EpisodeRun]) {
    let goals = goals_of(runs);
    let mut episodes = Table::new(
        "Episodes: what one receiver (min_severity warning) got, and the faulted broker's verdict on /metrics (sampled every second)",
        &[
            "episode",
            "trial",
            "fault",
            "messages",
            "by event",
            "severity sequence",
            "incidents opened",
            "state changes",
            "degraded (share of samples while faulted)",
            "states on /metrics",
            "all resolved",
            "goals",
        ],
    );
    for r in runs {
        let e = Episode::parse(&r.episode);
        let from = if e == Some(Episode::Cpu) {
            CPU_SETTLED_SECS
        } else {
            0.0
        };
        let degraded = fraction(&r.samples, r.target, "degraded", from, r.fault_secs);
        let mine: Vec<&Goal> = goals.iter().filter(|g| g.episode == r.episode).collect();
        let met = mine.iter().filter(|g| g.met).count();
        episodes.push(vec![
            json!(r.episode),
            json!(r.trial),
            json!(e.map_or("?", Episode::fault)),
            json!(r.messages.len()),
            json!(by_event(&r.messages)),
            json!(severity_sequence(&r.messages)),
            json!(incidents_opened(&r.messages)),
            json!(state_changes(&r.samples, r.target)),
            opt_num(degraded, 2),
            json!(state_runs(r)),
            json!(r.all_resolved),
            json!(format!("{met}/{} met", mine.len())),
        ]);
    }
    let mut goal_table = Table::new("Goals (issue #31)", &["episode", "goal", "seen", "met"]);
    for g in &goals {
        goal_table.push(vec![
            json!(g.episode),
            json!(g.goal),
            json!(g.seen),
            json!(if g.met { "met" } else { "MISSED" }),
        ]);
    }
    let mut messages = Table::new(
        "Every message (at: seconds after the fault was in place)",
        &[
            "episode",
            "trial",
            "at",
            "event",
            "kind",
            "broker",
            "state",
            "severity",
            "rules",
            "partitions",
        ],
    );
    for r in runs {
        for m in &r.messages {
            messages.push(vec![
                json!(r.episode),
                json!(r.trial),
                num(m.at, 2),
                json!(m.event),
                json!(m.kind),
                json!(m.broker),
                json!(m.state),
                json!(m.severity),
                json!(m.rules.join(",")),
                json!(m.affected_partitions),
            ]);
        }
    }
    episodes.print();
    goal_table.print();
    section.tables.push(episodes);
    section.tables.push(goal_table);
    if let Some(t) = restart_stall_table(runs) {
        t.print();
        section.tables.push(t);
    }
    section.tables.push(messages);
    section.tables.push(verdict_table(runs));
    for r in runs.iter().filter(|r| r.load.is_some()) {
        section.note(format!(
            "{} load: {}",
            r.episode,
            r.load.as_ref().map(Value::to_string).unwrap_or_default()
        ));
    }
    for r in runs.iter().filter(|r| r.error.is_some()) {
        section.note(format!(
            "{} trial {}: {}",
            r.episode,
            r.trial,
            r.error.as_deref().unwrap_or("")
        ));
    }
    section.note(
        "messages are counted from the fault until every incident opened resolved and 10 s \
         passed without another (at most 140 s after the fault was removed); restart-stall \
         counts from the restart, so its messages before t = 0 are the restart's",
    );
    section.note(
        "the receiver keeps the built-in repeat_interval_secs (3600): no reminder falls in \
         an episode (config/lab.yaml's receiver reminds every 60 s)",
    );
}

fn restart_stall_table(runs: &[EpisodeRun]) -> Option<Table> {
    let trials: Vec<&EpisodeRun> = runs
        .iter()
        .filter(|r| r.episode == Episode::RestartStall.as_str())
        .collect();
    if trials.is_empty() {
        return None;
    }
    let mut t = Table::new(
        "restart-stall trials (seconds; the stall is t = 0)",
        &[
            "trial",
            "first answer after start",
            "broker 2 on /metrics after the stall",
            "first zombie sample",
            "critical webhook",
            "first message after the stall",
            "error",
        ],
    );
    for r in trials {
        let after: Vec<Sample> = r.samples.iter().filter(|s| s.at >= 0.0).cloned().collect();
        let zombie = times_in(&after, r.target, &["zombie"]).first().copied();
        let first = r.messages.iter().find(|m| m.at >= 0.0).map(|m| {
            format!(
                "{:.2} s {} {} {} ({})",
                m.at,
                m.event,
                m.state.as_deref().unwrap_or("-"),
                m.severity,
                m.rules.join(",")
            )
        });
        t.push(vec![
            json!(r.trial),
            opt_num(r.first_answer_secs, 1),
            json!(runs_of(states_of(&after, r.target).map(|(_, s)| s))),
            opt_num(zombie, 1),
            opt_num(critical_page(r), 2),
            json!(first),
            json!(r.error),
        ]);
    }
    Some(t)
}

/// The faulted broker's non-healthy verdicts in /status, with their rules.
fn verdict_table(runs: &[EpisodeRun]) -> Table {
    let mut t = Table::new(
        "Non-healthy verdicts in /status (a broker entering a state; at: seconds after the fault)",
        &["episode", "trial", "at", "broker", "state", "rules"],
    );
    for r in runs {
        for v in &r.verdicts {
            t.push(vec![
                json!(r.episode),
                json!(r.trial),
                v["at"].clone(),
                v["broker"].clone(),
                v["state"].clone(),
                v["rules"].clone(),
            ]);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(at: f64, event: &str, kind: &str, severity: &str, incident: &str) -> Message {
        Message {
            at,
            event: event.into(),
            kind: kind.into(),
            severity: severity.into(),
            broker: (kind == "broker").then_some(2),
            incident: incident.into(),
            ..Message::default()
        }
    }

    fn samples(broker: BrokerId, states: &[(f64, &str)]) -> Vec<Sample> {
        states
            .iter()
            .map(|(at, s)| Sample {
                at: *at,
                state: BTreeMap::from([(broker, s.to_string())]),
                incident_state: BTreeMap::new(),
            })
            .collect()
    }

    fn run(e: Episode, messages: Vec<Message>, samples: Vec<Sample>) -> EpisodeRun {
        EpisodeRun {
            episode: e.as_str().into(),
            trial: 1,
            target: e.target(),
            injected: true,
            fault_secs: 180.0,
            messages,
            samples,
            ..EpisodeRun::default()
        }
    }

    fn met(goals: &[Goal]) -> Vec<bool> {
        goals.iter().map(|g| g.met).collect()
    }

    #[test]
    fn metric_states_are_the_series_at_one() {
        let page = "# TYPE kafka_watchdog_broker_state gauge\n\
            kafka_watchdog_broker_state{cluster=\"lab\",broker=\"1\",state=\"healthy\"} 1.0\n\
            kafka_watchdog_broker_state{cluster=\"lab\",broker=\"2\",state=\"healthy\"} 0.0\n\
            kafka_watchdog_broker_state{cluster=\"lab\",broker=\"2\",state=\"zombie\"} 1\n\
            kafka_watchdog_broker_state_seconds{cluster=\"lab\",broker=\"2\"} 1\n\
            kafka_watchdog_broker_incident_state{cluster=\"lab\",broker=\"2\",state=\"zombie\"} 1.0\n";
        let states = states_in(page, "kafka_watchdog_broker_state");
        assert_eq!(
            states,
            BTreeMap::from([(1, "healthy".to_string()), (2, "zombie".to_string())])
        );
        let incident = states_in(page, "kafka_watchdog_broker_incident_state");
        assert_eq!(incident, BTreeMap::from([(2, "zombie".to_string())]));
    }

    #[test]
    fn a_message_keeps_its_rules_and_partitions() {
        let body = json!({
            "event": "opened", "kind": "broker", "severity": "critical", "state": "zombie",
            "broker_id": 2, "incident_id": "kw-1", "affected_partitions_total": 4,
            "evidence": ["no_answer: silent for 2 s", "liveness_flapping: 3 spells",
                         "no_answer: again", "a line: with no rule"],
        });
        let m = Message::from_body(&body, 1.5);
        assert_eq!(m.rules, vec!["no_answer", "liveness_flapping"]);
        assert_eq!((m.broker, m.affected_partitions), (Some(2), 4));
        assert_eq!(m.state.as_deref(), Some("zombie"));
        let partitions = json!({"event": "opened", "kind": "under_replicated",
                                "evidence": ["t-0: isr [1, 3]"]});
        assert!(Message::from_body(&partitions, 0.0).rules.is_empty());
    }

    #[test]
    fn counting_by_event_severity_incident_and_state() {
        let msgs = vec![
            msg(1.0, "opened", "broker", "critical", "a"),
            msg(2.0, "updated", "broker", "critical", "a"),
            msg(3.0, "updated", "broker", "warning", "a"),
            msg(4.0, "opened", "under_replicated", "warning", "b"),
            msg(30.0, "resolved", "broker", "warning", "a"),
        ];
        assert_eq!(by_event(&msgs), "opened 2, updated 2, resolved 1");
        assert_eq!(severity_sequence(&msgs), "critical x2 > warning x3");
        assert_eq!(incidents_opened(&msgs), 2);
        let s = samples(
            2,
            &[
                (-1.0, "healthy"),
                (0.5, "zombie"),
                (1.5, "zombie"),
                (2.5, "healthy"),
                (3.5, "zombie"),
            ],
        );
        assert_eq!(state_changes(&s, 2), 3);
        assert_eq!(state_changes(&s, 1), 0, "another broker has no samples");
        assert_eq!(fraction(&s, 2, "zombie", 0.0, 2.0), Some(1.0));
        assert_eq!(fraction(&s, 2, "zombie", 0.0, 3.5), Some(0.75));
        assert_eq!(fraction(&s, 2, "zombie", 10.0, 20.0), None);
    }

    #[test]
    fn freeze_wants_exactly_opened_then_resolved() {
        let two = vec![
            msg(2.0, "opened", "broker", "critical", "a"),
            msg(50.0, "resolved", "broker", "critical", "a"),
        ];
        let g = episode_goals(Episode::Freeze, &run(Episode::Freeze, two.clone(), vec![]));
        assert_eq!(met(&g), [true]);
        let mut three = two;
        three.insert(1, msg(10.0, "updated", "broker", "critical", "a"));
        let g = episode_goals(Episode::Freeze, &run(Episode::Freeze, three, vec![]));
        assert_eq!(met(&g), [false]);
        assert_eq!(g[0].seen, "3 message(s): opened, updated, resolved");
        let g = episode_goals(Episode::Freeze, &run(Episode::Freeze, vec![], vec![]));
        assert_eq!(
            met(&g),
            [false],
            "a fault nobody is told of is not quiet, it is missed"
        );
    }

    #[test]
    fn kill_wants_its_partitions_inside_the_broker_incident() {
        let mut opened = msg(1.0, "opened", "broker", "warning", "a");
        opened.broker = Some(3);
        let mut resolved = msg(60.0, "resolved", "broker", "warning", "a");
        resolved.broker = Some(3);
        let mut r = run(
            Episode::Kill,
            vec![opened.clone(), resolved.clone()],
            vec![],
        );
        assert_eq!(met(&episode_goals(Episode::Kill, &r)), [true, false, true]);
        r.messages[0].affected_partitions = 5;
        assert_eq!(met(&episode_goals(Episode::Kill, &r)), [true, true, true]);
        r.incidents.push(IncidentSeen {
            kind: "under_replicated".into(),
            ..IncidentSeen::default()
        });
        assert_eq!(met(&episode_goals(Episode::Kill, &r)), [true, true, false]);
    }

    #[test]
    fn flap_allows_three_messages_from_opened_to_resolved() {
        let ok = vec![
            msg(1.0, "opened", "broker", "critical", "a"),
            msg(9.0, "updated", "broker", "warning", "a"),
            msg(80.0, "resolved", "broker", "warning", "a"),
        ];
        assert_eq!(
            met(&episode_goals(
                Episode::Flap,
                &run(Episode::Flap, ok.clone(), vec![])
            )),
            [true]
        );
        let mut noisy = ok;
        noisy.insert(1, msg(5.0, "resolved", "broker", "critical", "a"));
        assert_eq!(
            met(&episode_goals(
                Episode::Flap,
                &run(Episode::Flap, noisy, vec![])
            )),
            [false]
        );
    }

    #[test]
    fn cpu_wants_degraded_nearly_throughout_and_few_changes() {
        let mut states: Vec<(f64, &str)> = vec![(-1.0, "healthy")];
        states
            .extend((0..180).map(|t| (f64::from(t), if t < 10 { "healthy" } else { "degraded" })));
        states.push((200.0, "healthy"));
        let r = run(Episode::Cpu, vec![], samples(2, &states));
        assert_eq!(met(&episode_goals(Episode::Cpu, &r)), [true, true, true]);
        // Healthy every tenth sample: 90 % is not reached, and it changes state often.
        let mut states: Vec<(f64, &str)> = vec![(-1.0, "healthy")];
        states.extend((0..180).map(|t| {
            (
                f64::from(t),
                if t % 8 == 0 { "healthy" } else { "degraded" },
            )
        }));
        let r = run(Episode::Cpu, vec![], samples(2, &states));
        assert_eq!(met(&episode_goals(Episode::Cpu, &r)), [true, false, false]);
    }

    #[test]
    fn gc_long_allows_a_zombie_only_in_the_first_pause() {
        let msgs = vec![
            msg(1.0, "opened", "broker", "critical", "a"),
            msg(150.0, "resolved", "broker", "critical", "a"),
        ];
        let mut r = run(
            Episode::GcLong,
            msgs,
            samples(2, &[(0.5, "healthy"), (1.5, "zombie"), (3.0, "degraded")]),
        );
        r.pauses = vec![(0.0, 1.2), (20.0, 21.2)];
        assert_eq!(met(&episode_goals(Episode::GcLong, &r)), [true, true]);
        r.samples.extend(samples(2, &[(21.0, "zombie")]));
        assert_eq!(met(&episode_goals(Episode::GcLong, &r)), [true, false]);
        r.messages
            .insert(1, msg(40.0, "opened", "broker", "critical", "b"));
        assert_eq!(met(&episode_goals(Episode::GcLong, &r)), [false, false]);
    }

    #[test]
    fn gc_short_wants_degraded_and_nothing_critical() {
        let r = run(
            Episode::GcShort,
            vec![msg(1.0, "opened", "broker", "warning", "a")],
            samples(2, &[(0.5, "degraded"), (1.5, "healthy")]),
        );
        assert_eq!(
            met(&episode_goals(Episode::GcShort, &r)),
            [true, true, true]
        );
        let r = run(
            Episode::GcShort,
            vec![msg(1.0, "opened", "broker", "critical", "a")],
            samples(2, &[(0.5, "zombie"), (1.5, "healthy")]),
        );
        assert_eq!(
            met(&episode_goals(Episode::GcShort, &r)),
            [false, false, false]
        );
    }

    #[test]
    fn restart_stall_pages_are_judged_by_their_p95_over_trials() {
        let trial = |page: Option<f64>, state: &str| {
            let mut msgs = vec![msg(-80.0, "opened", "broker", "warning", "r")];
            if let Some(at) = page {
                msgs.push(msg(at, "updated", "broker", "critical", "r"));
            }
            run(
                Episode::RestartStall,
                msgs,
                samples(2, &[(-1.0, "healthy"), (1.0, state)]),
            )
        };
        let good: Vec<EpisodeRun> = (0..10).map(|_| trial(Some(1.2), "zombie")).collect();
        assert_eq!(met(&goals_of(&good)), [true, true, true]);
        // One trial of ten without a page: the nearest-rank p95 is that trial's "never".
        let mut one_missing = good.clone();
        one_missing[3] = trial(None, "down");
        let g = goals_of(&one_missing);
        assert_eq!(met(&g), [false, false, false]);
        assert_eq!(g[2].seen, "p95 never (9/10 trial(s) paged)");
        // A page before the stall (the restart's) does not count.
        let early = vec![trial(Some(-5.0), "zombie")];
        assert_eq!(met(&goals_of(&early)), [true, false, false]);
    }

    #[test]
    fn an_episode_that_did_not_run_misses_its_goal_and_says_why() {
        let r = EpisodeRun {
            episode: "gc-short".into(),
            trial: 1,
            target: 2,
            error: Some("did not settle before the episode: broker 1 down".into()),
            ..EpisodeRun::default()
        };
        let g = goals_of(&[r]);
        assert_eq!(met(&g), [false], "no vacuous 0 critical messages: {g:?}");
        let mut s = Section::new("noise", json!({}));
        s.raw = json!([]);
        assert_eq!(missed_goals(&s), ["no episode recorded"]);
    }

    #[test]
    fn duty_cycles_pause_on_schedule() {
        let gc = Episode::GcLong.duty_cycle().unwrap().plan();
        assert_eq!(gc.len(), 6);
        assert_eq!(
            gc[1],
            (Duration::from_secs(20), Duration::from_millis(21_200))
        );
        assert_eq!(Episode::GcShort.duty_cycle().unwrap().plan().len(), 12);
        let flap = Episode::Flap.duty_cycle().unwrap().plan();
        assert_eq!(flap.len(), 15);
        assert_eq!(flap[14].1, Duration::from_secs(58));
        assert!(Episode::Freeze.duty_cycle().is_none());
        for name in ALL_EPISODES.split(',') {
            assert_eq!(Episode::parse(name).map(Episode::as_str), Some(name));
        }
    }
}
