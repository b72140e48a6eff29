//! The dead man's switch (issue 38 item 2): time from the watchdog's own stop (SIGKILL, or
//! SIGSTOP as a VM pause or a hung process would) to the alarm of a receiver that keeps
//! the rules of healthchecks.io (a check is down when no ping came for its period plus its
//! grace, or at once on a `/fail` ping) or of Alertmanager with the always-firing alert
//! (the alert ends at the `endsAt` of its last post; the dead man's switch behind it fires
//! then). Each trial is a watchdog of its own watching a healthy fake cluster, stopped at
//! its own point of the beat interval; all run at once. After a SIGSTOP, SIGCONT once the
//! receiver fired, and the time until it sees the watchdog again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use kafka_watchdog::model::time::parse_rfc3339;
use kafka_watchdog_test_support::watchdog::free_port;
use serde::Serialize;
use serde_json::Value;

use super::stub::{Answer, Request, Stub};
use super::{launch, Bins};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Healthchecks,
    Alertmanager,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Stop {
    Sigkill,
    Sigstop,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub interval: Duration,
    /// The healthchecks.io check's grace time.
    pub grace: Duration,
    pub trials: usize,
}

#[derive(Debug, Serialize)]
pub struct Trial {
    pub format: Format,
    pub stop: Stop,
    /// Where in the interval the stop was aimed (0 to 1, after a beat).
    pub aimed_at: f64,
    /// Beats before the stop, and their mean spacing (s).
    pub beats: usize,
    pub beat_spacing: Option<f64>,
    /// Seconds from the last beat to the stop, and from the stop to the receiver's alarm.
    pub last_beat_before_stop: f64,
    pub fired_after_stop: Option<f64>,
    /// The most the rules allow: healthchecks period + grace; alertmanager 3 intervals
    /// (the alert's endsAt), each counted from the last beat.
    pub bound_after_beat: f64,
    /// SIGSTOP only: seconds from SIGCONT until the receiver sees the watchdog well again.
    pub recovered_after_cont: Option<f64>,
    /// What the receiver got from the stop on: seconds after the stop, and the path.
    pub after_stop: Vec<(f64, String)>,
    pub error: Option<String>,
}

/// The receiver's verdict at `now` from what it received: when it went down, if it did.
fn down_since(format: Format, reqs: &[Request], s: &Settings, now: Instant) -> Option<Instant> {
    match format {
        Format::Healthchecks => {
            let last = reqs.iter().rev().find(|r| r.at <= now)?;
            if last.path.ends_with("/fail") {
                return Some(last.at);
            }
            let due = last.at + s.interval + s.grace;
            (now >= due).then_some(due)
        }
        Format::Alertmanager => {
            let last = reqs.iter().rev().find(|r| r.at <= now)?;
            let ends = alert_ends(&last.body)?;
            // Err while endsAt lies ahead: the alert still fires.
            let past = SystemTime::now().duration_since(ends).ok()?;
            Some(now.checked_sub(past).unwrap_or(now))
        }
    }
}

fn alert_ends(body: &str) -> Option<SystemTime> {
    let v: Value = serde_json::from_str(body).ok()?;
    parse_rfc3339(v[0]["endsAt"].as_str()?).ok()
}

/// One trial: start, two beats, stop at `aimed_at` of the interval after a beat, wait for
/// the alarm; after SIGSTOP, SIGCONT and wait for the watchdog to be seen again.
fn trial(
    bins: &Bins,
    dir: &Path,
    cluster: &str,
    s: &Settings,
    format: Format,
    stop: Stop,
    aimed_at: f64,
) -> Trial {
    let mut t = Trial {
        format,
        stop,
        aimed_at,
        beats: 0,
        beat_spacing: None,
        last_beat_before_stop: f64::NAN,
        fired_after_stop: None,
        bound_after_beat: match format {
            Format::Healthchecks => (s.interval + s.grace).as_secs_f64(),
            Format::Alertmanager => (s.interval * 3).as_secs_f64(),
        },
        recovered_after_cont: None,
        after_stop: Vec::new(),
        error: None,
    };
    if let Err(e) = run_trial(bins, dir, cluster, s, &mut t) {
        t.error = Some(format!("{e:#}"));
    }
    t
}

fn run_trial(bins: &Bins, dir: &Path, cluster: &str, s: &Settings, t: &mut Trial) -> Result<()> {
    let rx = Stub::start(|_: &Request| Answer::ok("OK"))?;
    let port = free_port()?;
    let name = format!("{:?}-{:?}-{:.2}", t.format, t.stop, t.aimed_at).to_lowercase();
    let run = dir.join(format!("heartbeat-{name}"));
    let format = match t.format {
        Format::Healthchecks => "healthchecks",
        Format::Alertmanager => "alertmanager",
    };
    let yaml = format!(
        "instance_id: {name}\nhttp:\n  listen: 127.0.0.1:{port}\nlog:\n  level: info\n\
         state_dir: {}\nclusters:\n  - name: fake\n    bootstrap_servers: [{cluster}]\n    \
         round_interval_secs: 2\n    connect_timeout_ms: 1000\n    request_timeout_ms: 1500\n    canary:\n      enabled: false\n\
         heartbeat:\n  url: {}/ping/{name}\n  format: {format}\n  interval_secs: {}\n",
        run.join("state").display(),
        rx.url(),
        s.interval.as_secs()
    );
    let w = launch(
        &bins.release,
        &run,
        port,
        &yaml,
        &[],
        Duration::from_secs(30),
    )?;
    let within = Instant::now() + s.interval * 4;
    while rx.requests().len() < 2 {
        anyhow::ensure!(
            Instant::now() < within,
            "fewer than two beats within four intervals"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let last = rx.requests().last().context("a beat")?.at;
    std::thread::sleep(
        (last + s.interval.mul_f64(t.aimed_at)).saturating_duration_since(Instant::now()),
    );
    let pid = w.pid() as i32;
    let signal = match t.stop {
        Stop::Sigkill => libc::SIGKILL,
        Stop::Sigstop => libc::SIGSTOP,
    };
    let stopped_at = Instant::now();
    anyhow::ensure!(send(pid, signal), "cannot signal the watchdog");
    let before: Vec<Request> = rx
        .requests()
        .into_iter()
        .filter(|r| r.at <= stopped_at)
        .collect();
    t.beats = before.len();
    if let (Some(a), Some(b)) = (before.first(), before.last()) {
        t.beat_spacing =
            (before.len() > 1).then(|| (b.at - a.at).as_secs_f64() / (before.len() - 1) as f64);
        t.last_beat_before_stop = (stopped_at - b.at).as_secs_f64();
    }
    let give_up = stopped_at + s.interval * 5;
    let fired = loop {
        let now = Instant::now();
        if let Some(at) = down_since(t.format, &rx.requests(), s, now) {
            break Some(at.max(stopped_at));
        }
        if now > give_up {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    t.fired_after_stop = fired.map(|f| (f - stopped_at).as_secs_f64());
    if t.stop == Stop::Sigstop {
        // Before the signal: the watchdog may beat before this thread runs again.
        let cont = Instant::now();
        send(pid, libc::SIGCONT);
        let give_up = cont + s.interval * 3;
        while Instant::now() < give_up {
            let reqs = rx.requests();
            let fresh = reqs.iter().rev().find(|r| r.at >= cont);
            if fresh.is_some() && down_since(t.format, &reqs, s, Instant::now()).is_none() {
                t.recovered_after_cont = fresh.map(|r| (r.at - cont).as_secs_f64());
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    drop(w);
    t.after_stop = rx
        .requests()
        .iter()
        .filter(|r| r.at >= stopped_at)
        .map(|r| ((r.at - stopped_at).as_secs_f64(), r.path.clone()))
        .collect();
    Ok(())
}

/// Sends `signal` to our own child `pid`; false when it could not be sent.
fn send(pid: i32, signal: i32) -> bool {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe { libc::kill(pid, signal) == 0 }
}

/// Every trial at once: each format and stop, `trials` stop points spread over the interval.
pub fn run(bins: &Bins, dir: &Path, cluster: &str, s: &Settings) -> Vec<Trial> {
    let mut handles = Vec::new();
    for format in [Format::Healthchecks, Format::Alertmanager] {
        for stop in [Stop::Sigkill, Stop::Sigstop] {
            for i in 0..s.trials {
                let aimed_at = (i as f64 + 0.5) / s.trials as f64;
                let (bins, dir, cluster, s): (Bins, PathBuf, String, Settings) = (
                    bins.clone(),
                    dir.to_path_buf(),
                    cluster.to_string(),
                    s.clone(),
                );
                handles.push(std::thread::spawn(move || {
                    trial(&bins, &dir, &cluster, &s, format, stop, aimed_at)
                }));
            }
        }
    }
    let trials: Vec<Trial> = handles.into_iter().filter_map(|h| h.join().ok()).collect();
    for t in &trials {
        println!("  heartbeat: {t:?}");
    }
    trials
}
