//! `own-faults --unwell` (issue 38 item 4's proof): the watchdog itself made unwell on the
//! real lab, with its built-in settings and one generic receiver. Each sickness runs twice on
//! a fresh watchdog: once on a healthy cluster (every webhook naming a broker or controller
//! is one naming a healthy node: the goal is 0), then again with broker 2 frozen (SIGSTOP:
//! Kafka fences it within seconds) and broker 3 stalled (`kafka-lab stall`: never fenced,
//! only the watchdog's own timing can name it) a third of the way into the sickness, timing
//! their pages against the sickness's end. Sicknesses: held to a share of one CPU by a
//! cgroup quota, stopped (SIGSTOP) and continued, and a share of the TCP packets it sends
//! dropped (`kafka_lab::cage`). /status and /metrics are sampled every 250 ms throughout.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kafka_lab::cage::Cage;
use kafka_lab::sink::Sink;
use kafka_lab::Lab;
use kafka_watchdog_test_support::watchdog as support;
use serde::Serialize;
use serde_json::{json, Value};

use super::recorder::unix_now;
use super::{resolve_bin, restore, webhook_yaml};
use crate::output::{num, Section, Table};

/// A way the watchdog is made unwell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Sickness {
    /// Held to `--starve-percent` of one CPU for `--starve-secs`.
    Starve,
    /// SIGSTOP for `--pause-secs`, then SIGCONT.
    Pause,
    /// `--loss-percent` of the TCP packets it sends dropped for `--loss-secs`.
    Loss,
}

impl Sickness {
    fn as_str(self) -> &'static str {
        match self {
            Sickness::Starve => "starve",
            Sickness::Pause => "pause",
            Sickness::Loss => "loss",
        }
    }
}

pub struct UnwellOptions {
    pub watchdog_bin: PathBuf,
    pub sicknesses: Vec<Sickness>,
    pub starve_secs: u64,
    pub starve_percent: u32,
    pub pause_secs: u64,
    pub loss_secs: u64,
    pub loss_percent: u32,
}

impl UnwellOptions {
    fn duration(&self, s: Sickness) -> Duration {
        Duration::from_secs(match s {
            Sickness::Starve => self.starve_secs,
            Sickness::Pause => self.pause_secs,
            Sickness::Loss => self.loss_secs,
        })
    }

    fn words(&self, s: Sickness) -> String {
        match s {
            Sickness::Starve => format!(
                "held to {} % of a CPU for {} s",
                self.starve_percent, self.starve_secs
            ),
            Sickness::Pause => format!("stopped for {} s", self.pause_secs),
            Sickness::Loss => format!(
                "{} % of its packets dropped for {} s",
                self.loss_percent, self.loss_secs
            ),
        }
    }
}

/// The broker frozen (SIGSTOP) and the one stalled in the faults phase; the one left is
/// healthy.
const FROZEN: i32 = 2;
const STALLED: i32 = 3;
/// After the sickness, how long the bench keeps watching.
const AFTER: Duration = Duration::from_secs(30);
/// The name of the watchdog's cgroups.
const CAGE: &str = "bench-watchdog";

/// One phase of one sickness, as measured.
#[derive(Debug, Serialize)]
struct Phase {
    sickness: &'static str,
    /// `healthy` (no broker fault) or `faults` (broker 2 frozen, broker 3 stalled).
    phase: &'static str,
    /// Webhooks (opened or updated) naming a broker or controller that had no fault.
    pages_naming_healthy: usize,
    /// Each of them: event, kind, node, severity, state, summary, evidence.
    healthy_pages: Vec<String>,
    /// Samples of /status in which a broker without a fault was `zombie` or `down`.
    healthy_zombie_or_down_samples: usize,
    /// Other webhooks opened meanwhile, as `kind/severity`.
    other_opened: Vec<String>,
    /// Samples during the sickness in which `self_degraded` had a reason at 1.
    degraded_share: f64,
    reasons: Vec<String>,
    max_event_loop_lag_s: f64,
    cpu_throttled_s: f64,
    segments_retransmitted: u64,
    /// Faults phase: seconds from the sickness's end to the first page naming each faulty
    /// broker (negative: paged during it), and its state then.
    frozen_paged_after_end: Option<f64>,
    stalled_paged_after_end: Option<f64>,
    frozen_state: Option<String>,
    stalled_state: Option<String>,
}

/// What the sampler saw.
#[derive(Default)]
struct Samples {
    /// When each webhook the sink holds was first seen (Unix seconds), by its index: the
    /// sink is looked at every 250 ms.
    arrivals: Vec<f64>,
    healthy_bad: usize,
    during: usize,
    during_degraded: usize,
    reasons: BTreeSet<String>,
    max_lag: f64,
}

/// Reads a metric's value off the text page.
fn value(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn degraded_reasons(body: &str) -> Vec<String> {
    body.lines()
        .filter(|l| l.starts_with("kafka_watchdog_self_degraded{"))
        .filter(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) == Some(1.0))
        .filter_map(|l| l.split('"').nth(1).map(str::to_string))
        .collect()
}

/// Samples every 250 ms until `until`; `during` is when the sickness lasts; `faulty`, the
/// brokers whose bad state is expected.
fn sample(
    w: &support::Watchdog,
    sink: &Sink,
    until: Instant,
    during: (Instant, Instant),
    faulty: &[i32],
    s: &mut Samples,
) {
    while Instant::now() < until {
        let now = Instant::now();
        if let Ok(status) = w.status() {
            let bad = super::broker_states(&status)
                .into_iter()
                .any(|(b, st)| !faulty.contains(&b) && (st == "zombie" || st == "down"));
            s.healthy_bad += usize::from(bad);
        }
        if let Ok((200, body)) = w.get("/metrics") {
            let reasons = degraded_reasons(&body);
            if now >= during.0 && now <= during.1 + Duration::from_secs(1) {
                s.during += 1;
                s.during_degraded += usize::from(!reasons.is_empty());
            }
            s.reasons.extend(reasons);
            s.max_lag = s
                .max_lag
                .max(value(&body, "kafka_watchdog_self_event_loop_lag_seconds").unwrap_or(0.0));
        }
        let now = unix_now();
        let n = sink.received().len();
        s.arrivals.resize(n.max(s.arrivals.len()), now);
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The watchdog's sickness, begun and ended.
struct Unwell<'a> {
    kind: Sickness,
    opts: &'a UnwellOptions,
    pid: u32,
    cage: &'a Cage,
}

impl Unwell<'_> {
    fn begin(&self) -> Result<()> {
        match self.kind {
            Sickness::Starve => {
                kafka_lab::cpu::limit_process(CAGE, self.pid, self.opts.starve_percent)?
            }
            Sickness::Pause => signal(self.pid, libc::SIGSTOP)?,
            Sickness::Loss => self.cage.lose(self.opts.loss_percent)?,
        }
        Ok(())
    }

    fn end(&self) -> Result<()> {
        match self.kind {
            Sickness::Starve => kafka_lab::cpu::release(CAGE)?,
            Sickness::Pause => signal(self.pid, libc::SIGCONT)?,
            Sickness::Loss => self.cage.stop_losing()?,
        }
        Ok(())
    }
}

fn signal(pid: u32, sig: i32) -> Result<()> {
    kafka_lab::sys::signal(pid, sig).map_err(Into::into)
}

/// The first webhook from the `from`th on that opened or updated `broker`'s incident, with
/// when the sink had it.
fn first_page(sink: &Sink, arrivals: &[f64], from: usize, broker: i32) -> Option<(Value, f64)> {
    sink.received()
        .into_iter()
        .zip(arrivals.iter().copied())
        .skip(from)
        .find(|(v, _)| {
            v["kind"] == "broker" && v["broker_id"] == broker && v["event"] != "resolved"
        })
}

/// Webhooks from the `from`th on: (those naming a healthy node, described; other kinds
/// opened).
fn pages(sink: &Sink, from: usize, faulty: &[i32]) -> (Vec<String>, Vec<String>) {
    let got: Vec<Value> = sink.received().into_iter().skip(from).collect();
    let healthy = got
        .iter()
        .filter(|v| v["event"] != "resolved")
        .filter(|v| match v["kind"].as_str() {
            Some("broker") => !v["broker_id"]
                .as_i64()
                .is_some_and(|b| faulty.contains(&(b as i32))),
            Some("controller") => true,
            _ => false,
        })
        .map(|v| {
            let field = |k: &str| match &v[k] {
                Value::String(s) => s.clone(),
                Value::Null => "-".into(),
                other => other.to_string(),
            };
            let evidence: String = field("evidence").chars().take(400).collect();
            format!(
                "{} {} {} {}/{}: {}; evidence {evidence}",
                field("event"),
                field("kind"),
                field("broker_id"),
                field("severity"),
                field("state"),
                field("summary")
            )
        })
        .collect();
    let other = got
        .iter()
        .filter(|v| v["event"] == "opened" && v["kind"] != "broker" && v["kind"] != "controller")
        .map(|v| {
            format!(
                "{}/{}",
                v["kind"].as_str().unwrap_or("?"),
                v["severity"].as_str().unwrap_or("?")
            )
        })
        .collect();
    (healthy, other)
}

struct Run<'a> {
    opts: &'a UnwellOptions,
    bin: PathBuf,
    dir: PathBuf,
    sink: &'a Sink,
    hook: String,
    bootstrap: String,
}

impl Run<'_> {
    fn launch(&self, cage: &Cage, name: &str) -> Result<support::Watchdog> {
        let port = support::free_port()?;
        let dir = self.dir.join(name);
        let launcher = cage.launcher(&self.bin, &dir)?;
        let yaml = format!(
            "instance_id: bench\nhttp:\n  listen: 127.0.0.1:{port}\nlog:\n  level: info\nstate_dir: {}\n{}clusters:\n  - name: lab\n    bootstrap_servers: [{}]\n",
            dir.join("state").display(),
            self.hook,
            self.bootstrap
        );
        Ok(support::Watchdog::launch(&support::Launch {
            host: support::LOOPBACK,
            bin: &launcher,
            dir: &dir,
            port,
            yaml: &yaml,
            check_config: false,
            ready_within: Duration::from_secs(60),
            env: &[],
        })?)
    }

    fn wait_healthy(&self, w: &support::Watchdog, brokers: &[i32]) -> Result<()> {
        let end = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(s) = w.status() {
                let states = super::broker_states(&s);
                if brokers
                    .iter()
                    .all(|b| states.get(b).is_some_and(|s| s == "healthy"))
                {
                    return Ok(());
                }
            }
            anyhow::ensure!(
                Instant::now() < end,
                "the brokers were not healthy in 120 s"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// One phase: the sickness on the watchdog `w`; with `faults`, broker 2 frozen and
    /// broker 3 stalled a third of the way in.
    fn phase(
        &self,
        lab: &mut Lab,
        w: &support::Watchdog,
        unwell: &Unwell,
        faults: bool,
    ) -> Result<Phase> {
        let from = self.sink.received().len();
        let mut s = Samples {
            arrivals: vec![0.0; from],
            ..Samples::default()
        };
        let figures = |w: &support::Watchdog| -> (f64, u64) {
            let body = w.get("/metrics").map(|(_, b)| b).unwrap_or_default();
            (
                value(&body, "kafka_watchdog_self_cpu_throttled_seconds_total").unwrap_or(0.0),
                value(
                    &body,
                    "kafka_watchdog_self_liveness_segments_retransmitted_total",
                )
                .unwrap_or(0.0) as u64,
            )
        };
        let (throttled0, resent0) = figures(w);
        let lasts = self.opts.duration(unwell.kind);
        let begun = Instant::now();
        unwell.begin()?;
        let ends = begun + lasts;
        let faulty: Vec<i32> = if faults {
            vec![FROZEN, STALLED]
        } else {
            Vec::new()
        };
        if faults {
            sample(
                w,
                self.sink,
                begun + lasts / 3,
                (begun, ends),
                &faulty,
                &mut s,
            );
            lab.freeze(FROZEN)?;
            lab.stall(STALLED, false)?;
        }
        sample(w, self.sink, ends, (begun, ends), &faulty, &mut s);
        unwell.end()?;
        let ended = Instant::now();
        let ended_unix = unix_now();
        sample(w, self.sink, ended + AFTER, (begun, ended), &faulty, &mut s);
        let (throttled1, resent1) = figures(w);
        let (healthy, other) = pages(self.sink, from, &faulty);
        let paged = |b: i32| first_page(self.sink, &s.arrivals, from, b);
        let (frozen, stalled) = if faults {
            (paged(FROZEN), paged(STALLED))
        } else {
            (None, None)
        };
        Ok(Phase {
            sickness: unwell.kind.as_str(),
            phase: if faults { "faults" } else { "healthy" },
            pages_naming_healthy: healthy.len(),
            healthy_pages: healthy,
            healthy_zombie_or_down_samples: s.healthy_bad,
            other_opened: other,
            degraded_share: s.during_degraded as f64 / s.during.max(1) as f64,
            reasons: s.reasons.into_iter().collect(),
            max_event_loop_lag_s: s.max_lag,
            cpu_throttled_s: throttled1 - throttled0,
            segments_retransmitted: resent1.saturating_sub(resent0),
            frozen_paged_after_end: frozen.as_ref().map(|(_, at)| at - ended_unix),
            stalled_paged_after_end: stalled.as_ref().map(|(_, at)| at - ended_unix),
            frozen_state: frozen.and_then(|(v, _)| v["state"].as_str().map(str::to_string)),
            stalled_state: stalled.and_then(|(v, _)| v["state"].as_str().map(str::to_string)),
        })
    }
}

pub fn run(opts: &UnwellOptions) -> Result<Section> {
    let bin = resolve_bin(&opts.watchdog_bin)?;
    let mut section = Section::new(
        "own-faults-unwell",
        json!({
            "sicknesses": opts.sicknesses.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            "starve": format!("{} % of a CPU for {} s", opts.starve_percent, opts.starve_secs),
            "pause_secs": opts.pause_secs,
            "loss": format!("{} % for {} s", opts.loss_percent, opts.loss_secs),
            "settings": "built-in defaults, one generic receiver (min_severity info)",
        }),
    );
    let (rt, mut lab) = super::runtime_and_lab(&mut section)?;
    let sink = rt.block_on(Sink::start("127.0.0.1:0".parse()?))?;
    let stamp = (unix_now() * 1000.0) as u64;
    let run = Run {
        opts,
        bin,
        dir: std::env::temp_dir().join(format!("kw-bench-unwell-{stamp}")),
        sink: &sink,
        hook: webhook_yaml(&sink.url(), "info"),
        bootstrap: lab.bootstrap().replace(',', ", "),
    };
    let brokers = lab.brokers();
    let mut phases = Vec::new();
    for &kind in &opts.sicknesses {
        let cage = Cage::new(CAGE)?;
        for faults in [false, true] {
            restore(&mut lab).context("heal the lab")?;
            let name = format!(
                "{}-{}",
                kind.as_str(),
                if faults { "faults" } else { "healthy" }
            );
            let w = run.launch(&cage, &name)?;
            run.wait_healthy(&w, &brokers)?;
            let unwell = Unwell {
                kind,
                opts,
                pid: w.pid(),
                cage: &cage,
            };
            let phase = run.phase(&mut lab, &w, &unwell, faults);
            // Whatever happened, the watchdog runs free again before it goes.
            let _ = unwell.end();
            let phase = phase?;
            println!("  own-faults --unwell: {phase:?}");
            phases.push(phase);
            drop(w);
        }
    }
    if let Err(e) = restore(&mut lab) {
        section.note(format!("the lab did not heal: {e:#}"));
    }
    report(&mut section, opts, &phases);
    section.raw = json!({ "phases": phases });
    let _ = std::fs::remove_dir_all(&run.dir);
    Ok(section)
}

fn opt(x: Option<f64>) -> Value {
    x.map_or(Value::Null, |x| num(x, 1))
}

fn report(section: &mut Section, opts: &UnwellOptions, phases: &[Phase]) {
    let mut t = Table::new(
        "The watchdog unwell: pages naming a healthy broker, and what it said of itself",
        &[
            "sickness",
            "phase",
            "pages naming a healthy node",
            "samples with a healthy broker zombie/down",
            "other incidents opened",
            "degraded (share of samples during)",
            "reasons",
            "max event loop lag s",
            "CPU refused s",
            "segments resent",
        ],
    );
    for p in phases {
        let kind = opts
            .sicknesses
            .iter()
            .find(|s| s.as_str() == p.sickness)
            .map(|s| opts.words(*s))
            .unwrap_or_default();
        t.push(vec![
            json!(kind),
            json!(p.phase),
            json!(p.pages_naming_healthy),
            json!(p.healthy_zombie_or_down_samples),
            json!(p.other_opened.join(", ")),
            num(p.degraded_share, 2),
            json!(p.reasons.join(", ")),
            num(p.max_event_loop_lag_s, 2),
            num(p.cpu_throttled_s, 1),
            json!(p.segments_retransmitted),
        ]);
    }
    t.print();
    section.tables.push(t);
    let mut f = Table::new(
        "A broker really frozen during the sickness (seconds from the sickness's end to its page; negative: paged during it)",
        &[
            "sickness",
            "broker 2 frozen (SIGSTOP, fenced by Kafka): paged after end",
            "its state",
            "broker 3 stalled (never fenced): paged after end",
            "its state",
        ],
    );
    for p in phases.iter().filter(|p| p.phase == "faults") {
        f.push(vec![
            json!(p.sickness),
            opt(p.frozen_paged_after_end),
            json!(p.frozen_state),
            opt(p.stalled_paged_after_end),
            json!(p.stalled_state),
        ]);
    }
    f.print();
    section.tables.push(f);
    section.note(format!(
        "each sickness on a fresh watchdog started inside a cgroup of its own (`kafka_lab::cage`, so that a packet rule can match its sockets), twice: on a healthy cluster, then with broker {FROZEN} frozen and broker {STALLED} stalled a third of the way in; /status and /metrics sampled every 250 ms from the sickness's start to {} s after its end",
        AFTER.as_secs()
    ));
    section.note("a page is a webhook `opened` or `updated`; a healthy node is a broker without a fault in that phase, or any controller".to_string());
    for p in phases {
        for page in &p.healthy_pages {
            section.note(format!(
                "{} ({}), a page naming a healthy node: {page}",
                p.sickness, p.phase
            ));
        }
    }
}

/// Goals: no page naming a healthy node and no healthy broker `zombie` or `down` in any
/// phase; the frozen and the stalled broker paged `zombie` or `down`, within 15 s of the
/// sickness's end at the latest.
pub fn missed_goals(section: &Section) -> Vec<String> {
    let mut out = Vec::new();
    for p in section.raw["phases"].as_array().into_iter().flatten() {
        let at = format!("{} ({})", p["sickness"], p["phase"]);
        if p["pages_naming_healthy"].as_u64() != Some(0) {
            out.push(format!(
                "{at}: {} pages naming a healthy node",
                p["pages_naming_healthy"]
            ));
        }
        if p["healthy_zombie_or_down_samples"].as_u64() != Some(0) {
            out.push(format!(
                "{at}: a healthy broker zombie or down in {} samples",
                p["healthy_zombie_or_down_samples"]
            ));
        }
        if p["phase"] != "faults" {
            continue;
        }
        for (who, key, state) in [
            ("frozen broker", "frozen_paged_after_end", "frozen_state"),
            ("stalled broker", "stalled_paged_after_end", "stalled_state"),
        ] {
            match p[key].as_f64() {
                None => out.push(format!("{at}: the {who} was never paged")),
                Some(after) if after > 15.0 => out.push(format!(
                    "{at}: the {who} was paged {after:.1} s after the end"
                )),
                Some(_) => {}
            }
            if !matches!(p[state].as_str(), Some("zombie" | "down")) {
                out.push(format!("{at}: the {who} was paged {}", p[state]));
            }
        }
    }
    out
}
