//! `own-faults --watchdog-faults` (issue 38's proof): faults of the watchdog's own, against
//! the real daemon with local fakes, no lab: `/metrics` while a slow state disk or two
//! AWS_MSK_IAM clusters try to block its runtime (`blocking`), a round loop that dies
//! (`tasks`), forged peer answers (`peers`), and the dead man's switch after the watchdog
//! is stopped (`heartbeat`). One section, `own-faults-watchdog`, with a table per part and
//! the goals `--check` holds it to (`missed_goals`).
//!
//! The slow disk and the dying loop need the debug build's test hooks
//! (`KAFKA_WATCHDOG_TEST_SLOW_FSYNC_MS`, `KAFKA_WATCHDOG_TEST_PANIC_LOOP`), which release
//! builds do not read; every other part runs the release binary an operator runs.

mod blocking;
mod heartbeat;
mod peers;
mod stub;
mod tasks;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use kafka_watchdog_test_support::watchdog as support;
use serde_json::{json, Value};

use crate::lab::recorder::unix_now;
use crate::lab::resolve_bin;
use crate::output::{num, opt_num, Section, Table};

/// The flags of this part of `own-faults`.
#[derive(clap::Args, Clone, Debug)]
pub struct WatchdogFaultsArgs {
    /// Run the watchdog's own faults of issue 38 (no lab needed) instead of the kills and
    /// the flood: /metrics p95 with a slow state disk and with two MSK IAM clusters, a
    /// dying round loop, forged peer answers, the dead man's switch after a SIGKILL or
    /// SIGSTOP of the watchdog.
    #[arg(long)]
    pub watchdog_faults: bool,
    /// The parts to run: blocking, task-kill, peers, heartbeat.
    #[arg(
        long,
        value_enum,
        default_value = "blocking,task-kill,peers,heartbeat",
        value_delimiter = ','
    )]
    pub parts: Vec<Part>,
    /// A debug build of kafka-watchdog, for the parts that need its test hooks (the slow
    /// fsync, the panicking round loop); release builds have none.
    #[arg(long, default_value = "target/debug/kafka-watchdog")]
    pub debug_watchdog_bin: PathBuf,
    /// How long each fsync of the state directory takes in the slow-disk part.
    #[arg(long, default_value_t = 2000)]
    pub slow_fsync_ms: u64,
    /// Seconds /metrics is scraped (every 100 ms) in each blocking scenario.
    #[arg(long, default_value_t = 40)]
    pub scrape_secs: u64,
    /// Seconds the round loop dies at each start (its allowance on /healthz is 30 s).
    #[arg(long, default_value_t = 45)]
    pub panic_secs: u64,
    /// Seconds each forger answers its watchdog's asks.
    #[arg(long, default_value_t = 20)]
    pub forge_secs: u64,
    /// heartbeat.interval_secs of the dead man's switch part (10 at least).
    #[arg(long, default_value_t = 10)]
    pub heartbeat_interval_secs: u64,
    /// The imitated healthchecks.io check's grace time.
    #[arg(long, default_value_t = 5)]
    pub heartbeat_grace_secs: u64,
    /// Stop points per format and signal, spread over the beat interval.
    #[arg(long, default_value_t = 3)]
    pub heartbeat_trials: usize,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Part {
    Blocking,
    TaskKill,
    Peers,
    Heartbeat,
}

/// The two builds the parts run.
#[derive(Debug, Clone)]
pub struct Bins {
    pub release: PathBuf,
    pub debug: PathBuf,
}

/// /metrics p95 must stay under this (a scrape takes milliseconds; a blocked worker costs
/// seconds), and no scrape may take a second.
const P95_GOAL_MS: f64 = 250.0;
const MAX_GOAL_MS: f64 = 1000.0;
/// The supervisor's longest wait before a restart (`model::supervise::BACKOFF`).
const RESTART_GOAL_SECS: f64 = 10.0;
/// Slack over a rule's bound for the alarm (polling, scheduling).
const ALARM_SLACK_SECS: f64 = 1.0;

/// The watchdog started with `yaml` in `dir`, checked by check-config first, ready when a
/// round completed.
pub(crate) fn launch(
    bin: &Path,
    dir: &Path,
    port: u16,
    yaml: &str,
    env: &[(&str, &str)],
    ready_within: Duration,
) -> Result<support::Watchdog> {
    Ok(support::Watchdog::launch(&support::Launch {
        host: support::LOOPBACK,
        bin,
        dir,
        port,
        yaml,
        check_config: true,
        ready_within,
        env,
    })?)
}

/// The value of the series `name` with all of `labels` on a Prometheus text page.
pub(crate) fn metric(page: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    page.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, value) = l.rsplit_once(' ')?;
        let (n, rest) = series.split_once('{').unwrap_or((series, ""));
        let all = labels
            .iter()
            .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
        (n == name && all).then(|| value.parse().ok())?
    })
}

pub fn run(release_bin: &Path, a: &WatchdogFaultsArgs) -> Result<Section> {
    let bins = Bins {
        release: resolve_bin(release_bin)?,
        debug: resolve_bin(&a.debug_watchdog_bin)?,
    };
    let mut section = Section::new(
        "own-faults-watchdog",
        json!({
            "parts": a.parts,
            "slow_fsync_ms": a.slow_fsync_ms,
            "scrape_secs": a.scrape_secs,
            "panic_secs": a.panic_secs,
            "forge_secs": a.forge_secs,
            "heartbeat_interval_secs": a.heartbeat_interval_secs,
            "heartbeat_grace_secs": a.heartbeat_grace_secs,
            "heartbeat_trials": a.heartbeat_trials,
        }),
    );
    let rt = tokio::runtime::Runtime::new()?;
    let dir = std::env::temp_dir().join(format!(
        "kw-bench-watchdog-faults-{}",
        (unix_now() * 1000.0) as u64
    ));
    let mut raw = json!({});
    if a.parts.contains(&Part::Blocking) {
        println!("own-faults --watchdog-faults: blocking");
        raw["blocking"] = json!([
            blocking::slow_disk(&rt, &bins, &dir, None, a.scrape_secs)?,
            blocking::slow_disk(&rt, &bins, &dir, Some(a.slow_fsync_ms), a.scrape_secs)?,
            blocking::msk_iam(&rt, &bins, &dir, a.scrape_secs)?,
        ]);
    }
    if a.parts.contains(&Part::TaskKill) {
        println!("own-faults --watchdog-faults: a round loop that dies");
        raw["task_kill"] = json!(tasks::run(&rt, &bins, &dir, a.panic_secs)?);
    }
    if a.parts.contains(&Part::Peers) {
        println!("own-faults --watchdog-faults: forged peer answers");
        raw["peers"] = json!(peers::run(&bins, &dir, a.forge_secs)?);
    }
    if a.parts.contains(&Part::Heartbeat) {
        println!("own-faults --watchdog-faults: the dead man's switch");
        let cluster = kafka_watchdog_test_support::fake_cluster::broker(&rt, Vec::new());
        raw["heartbeat"] = json!(heartbeat::run(
            &bins,
            &dir,
            &cluster.address,
            &heartbeat::Settings {
                interval: Duration::from_secs(a.heartbeat_interval_secs),
                grace: Duration::from_secs(a.heartbeat_grace_secs),
                trials: a.heartbeat_trials,
            },
        ));
    }
    section.raw = raw;
    report(&mut section, a);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(section)
}

fn report(section: &mut Section, a: &WatchdogFaultsArgs) {
    let raw = section.raw.clone();
    let rows = |k: &str| raw[k].as_array().cloned().unwrap_or_default();
    if raw["blocking"].is_array() {
        blocking_table(section, &rows("blocking"));
    }
    if raw["task_kill"].is_object() {
        task_table(section, &raw["task_kill"], a);
    }
    if raw["peers"].is_array() {
        peers_table(section, &rows("peers"), a);
    }
    if raw["heartbeat"].is_array() {
        heartbeat_table(section, &rows("heartbeat"), a);
    }
}

fn blocking_table(section: &mut Section, rows: &[Value]) {
    let mut t = Table::new(
        "/metrics scraped every 100 ms (ms; goal: p95 under 250, none over 1000, none failed)",
        &[
            "scenario",
            "binary",
            "seconds",
            "scrapes",
            "failed",
            "p50",
            "p95",
            "max",
            "pages (s after start)",
        ],
    );
    for s in rows {
        let pages: Vec<String> = s["pages_after"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| format!("{:.1}", p.as_f64().unwrap_or(f64::NAN)))
            .collect();
        t.push(vec![
            s["name"].clone(),
            s["binary"].clone(),
            s["secs"].clone(),
            s["scrapes"].clone(),
            s["failed"].clone(),
            num(s["p50_ms"].as_f64().unwrap_or(f64::NAN), 1),
            num(s["p95_ms"].as_f64().unwrap_or(f64::NAN), 1),
            num(s["max_ms"].as_f64().unwrap_or(f64::NAN), 1),
            json!(if s["pages_expected"] == 0 {
                "-".to_string()
            } else {
                pages.join(", ")
            }),
        ]);
    }
    t.print();
    section.tables.push(t);
}

fn task_table(section: &mut Section, k: &Value, a: &WatchdogFaultsArgs) {
    let mut t = Table::new(
        &format!(
            "A round loop that panics at every start for {} s (seconds from the launch)",
            a.panic_secs
        ),
        &[
            "deaths logged",
            "restarts counted",
            "waits before restarts (s)",
            "first death seen",
            "first /healthz 503",
            "503s naming the loop",
            "/healthz 200 again",
            "first round",
        ],
    );
    let waits: Vec<String> = k["restart_waits_ms"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| format!("{}", w.as_u64().unwrap_or(0) as f64 / 1000.0))
        .collect();
    t.push(vec![
        k["deaths_logged"].clone(),
        k["restarts_counted"].clone(),
        json!(waits.join(", ")),
        opt_num(k["first_death_seen"].as_f64(), 1),
        opt_num(k["first_503"].as_f64(), 1),
        json!(format!(
            "{} of {}",
            if k["every_503_names_the_loop"] == true {
                k["healthz_503s"].clone()
            } else {
                json!("not all")
            },
            k["healthz_503s"]
        )),
        opt_num(k["healthz_200_again"].as_f64(), 1),
        opt_num(k["first_round"].as_f64(), 1),
    ]);
    t.print();
    section.tables.push(t);
}

fn peers_table(section: &mut Section, rows: &[Value], a: &WatchdogFaultsArgs) {
    let mut t = Table::new(
        &format!("Forged peer answers, each forger the only peer of a watchdog of its own for {} s (goal: 0 taken)", a.forge_secs),
        &["forgery", "answers sent", "refused: unsigned", "refused: bad_signature", "refused: malformed", "peer silences refused", "peers answering", "silences held", "silences taken (log)", "in state file"],
    );
    for o in rows {
        t.push(vec![
            o["forgery"].clone(),
            o["answered"].clone(),
            o["refused_unsigned"].clone(),
            o["refused_bad_signature"].clone(),
            o["refused_malformed"].clone(),
            o["silences_refused"].clone(),
            o["peers_answering"].clone(),
            o["silences_held"].clone(),
            o["silences_taken_logged"].clone(),
            o["in_state_file"].clone(),
        ]);
    }
    t.print();
    section.tables.push(t);
}

fn heartbeat_table(section: &mut Section, rows: &[Value], a: &WatchdogFaultsArgs) {
    let mut t = Table::new(
        &format!(
            "The dead man's switch: heartbeat every {} s; the receiver's rule: healthchecks down {} s after the last ping (period {} s + grace {} s), alertmanager at the alert's endsAt (3 intervals after the last post) (seconds)",
            a.heartbeat_interval_secs, a.heartbeat_interval_secs + a.heartbeat_grace_secs, a.heartbeat_interval_secs, a.heartbeat_grace_secs
        ),
        &["format", "stop", "aimed at (of the interval)", "beats before", "beat spacing", "last beat before stop", "alarm after stop", "bound after beat", "seen again after SIGCONT", "error"],
    );
    for b in rows {
        t.push(vec![
            b["format"].clone(),
            b["stop"].clone(),
            num(b["aimed_at"].as_f64().unwrap_or(f64::NAN), 2),
            b["beats"].clone(),
            opt_num(b["beat_spacing"].as_f64(), 2),
            opt_num(b["last_beat_before_stop"].as_f64(), 2),
            opt_num(b["fired_after_stop"].as_f64(), 2),
            num(b["bound_after_beat"].as_f64().unwrap_or(f64::NAN), 0),
            opt_num(b["recovered_after_cont"].as_f64(), 2),
            b["error"].clone(),
        ]);
    }
    t.print();
    section.tables.push(t);
}

/// Goals: /metrics p95 under 250 ms, max under 1 s, no failed scrape, every page of the
/// slow disk delivered, the MSK keys from the fake endpoint; the dead loop's every death
/// counted, each restart within the backoff cap, /healthz 503 naming it while it was down
/// and 200 after; no forged silence taken, every unkeyed forgery refused under its
/// reason; every dead man's switch fired within its rule's bound of the last beat, and a
/// resumed watchdog seen again within an interval.
pub fn missed_goals(section: &Section) -> Vec<String> {
    let raw = &section.raw;
    let mut out = Vec::new();
    blocking_goals(raw, &mut out);
    if raw["task_kill"].is_object() {
        task_goals(&raw["task_kill"], &mut out);
    }
    peer_goals(raw, &mut out);
    heartbeat_goals(
        raw,
        section.params["heartbeat_interval_secs"]
            .as_f64()
            .unwrap_or(10.0),
        &mut out,
    );
    out
}

fn blocking_goals(raw: &Value, out: &mut Vec<String>) {
    for s in raw["blocking"].as_array().into_iter().flatten() {
        let name = &s["name"];
        let p95 = s["p95_ms"].as_f64().unwrap_or(f64::INFINITY);
        let max = s["max_ms"].as_f64().unwrap_or(f64::INFINITY);
        if s["scrapes"].as_u64().unwrap_or(0) == 0 || p95 >= P95_GOAL_MS || max >= MAX_GOAL_MS {
            out.push(format!(
                "{name}: /metrics p95 {p95:.1} ms, max {max:.1} ms ({} scrapes)",
                s["scrapes"]
            ));
        }
        if s["failed"].as_u64() != Some(0) {
            out.push(format!("{name}: {} scrapes failed", s["failed"]));
        }
        let pages = s["pages_after"].as_array().map_or(0, Vec::len) as u64;
        if pages < s["pages_expected"].as_u64().unwrap_or(0) {
            out.push(format!(
                "{name}: {pages} of {} pages arrived",
                s["pages_expected"]
            ));
        }
        if s["keys_from_fake_endpoint"] == false {
            out.push(format!(
                "{name}: the keys did not come from the fake endpoint (AWS_* set?)"
            ));
        }
    }
}

fn task_goals(k: &Value, out: &mut Vec<String>) {
    let deaths = k["deaths_logged"].as_f64().unwrap_or(0.0);
    if deaths == 0.0 || k["restarts_counted"].as_f64() != Some(deaths) {
        out.push(format!(
            "task kill: {deaths} deaths logged, {} restarts counted",
            k["restarts_counted"]
        ));
    }
    let longest = k["restart_waits_ms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_f64)
        .fold(0.0, f64::max)
        / 1000.0;
    if longest > RESTART_GOAL_SECS {
        out.push(format!("task kill: a restart waited {longest} s"));
    }
    if k["first_503"].is_null() || k["every_503_names_the_loop"] != true {
        out.push("task kill: no /healthz 503 naming the dead loop".into());
    }
    if k["healthz_200_again"].is_null() || k["first_round"].is_null() {
        out.push(
            "task kill: the loop never came back (no round, or /healthz not 200 again)".into(),
        );
    }
    if k["healthz_errors"].as_u64() != Some(0) {
        out.push(format!(
            "task kill: {} /healthz asks failed",
            k["healthz_errors"]
        ));
    }
}

fn peer_goals(raw: &Value, out: &mut Vec<String>) {
    for o in raw["peers"].as_array().into_iter().flatten() {
        let f = &o["forgery"];
        if o["silences_held"] != 0 || o["silences_taken_logged"] != 0 || o["in_state_file"] == true
        {
            out.push(format!("peers: {f}: a forged silence was taken"));
        }
        match o["expected_reason"].as_str() {
            Some(reason) => {
                let counted = o[format!("refused_{reason}")].as_f64().unwrap_or(0.0);
                if counted == 0.0 || o["peers_answering"] != 0.0 {
                    out.push(format!(
                        "peers: {f}: {counted} refused as {reason}, {} peers answering",
                        o["peers_answering"]
                    ));
                }
            }
            None if o["silences_refused"].as_f64().unwrap_or(0.0) == 0.0 => {
                out.push(format!(
                    "peers: {f}: its silence was not refused by the API's checks"
                ));
            }
            None => {}
        }
    }
}

fn heartbeat_goals(raw: &Value, interval: f64, out: &mut Vec<String>) {
    let Some(trials) = raw["heartbeat"].as_array() else {
        return;
    };
    if trials.is_empty() {
        out.push("heartbeat: no trial".into());
    }
    for b in trials {
        let what = format!(
            "heartbeat {} {} at {}",
            b["format"], b["stop"], b["aimed_at"]
        );
        if let Some(e) = b["error"].as_str() {
            out.push(format!("{what}: {e}"));
            continue;
        }
        let fired = b["fired_after_stop"].as_f64();
        let since = b["last_beat_before_stop"].as_f64().unwrap_or(0.0);
        let bound = b["bound_after_beat"].as_f64().unwrap_or(0.0);
        match fired {
            None => out.push(format!("{what}: the receiver never fired")),
            Some(f) if since + f > bound + ALARM_SLACK_SECS => out.push(format!(
                "{what}: fired {:.1} s after the last beat, the rule says {bound}",
                since + f
            )),
            Some(_) => {}
        }
        if b["stop"] == "SIGSTOP"
            && b["recovered_after_cont"]
                .as_f64()
                .is_none_or(|r| r > interval + 3.0)
        {
            out.push(format!(
                "{what}: not seen again within an interval of SIGCONT ({})",
                b["recovered_after_cont"]
            ));
        }
    }
}
