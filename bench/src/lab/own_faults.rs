//! The watchdog's own faults (issue #27's proof): the daemon killed with SIGKILL at random
//! points around incidents, and a flood of slow and greedy HTTP clients. Pages must
//! outlive crashes (every incident opened is delivered, none resolved before it opened),
//! and the HTTP surface must neither stall the probes nor make the watchdog blame a broker.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kafka_lab::sink::Sink;
use kafka_watchdog_test_support::watchdog as support;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use super::recorder::unix_now;
use super::{resolve_bin, restore, webhook_yaml};
use crate::output::{num, Section, Table};

pub struct OwnFaultsOptions {
    pub watchdog_bin: PathBuf,
    /// SIGKILLs in all: two per freeze episode (one around the opening, one around the
    /// resolve).
    pub kills: usize,
    pub flood_secs: u64,
}

/// The broker whose freezes make the incidents.
const VICTIM: i32 = 2;
/// Slow clients and greedy /metrics clients of the flood, each from an address of its own.
const FLOODERS: u8 = 64;

/// A small deterministic generator: the seed is in the report, so a run can be repeated.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [0, max) seconds, to 10 ms.
    fn secs(&mut self, max: f64) -> Duration {
        Duration::from_millis(self.next() % ((max * 1000.0) as u64).max(1) / 10 * 10)
    }
}

#[derive(Debug, Serialize)]
struct Episode {
    episode: usize,
    /// Seconds from the freeze to the first SIGKILL, and from the thaw to the second.
    kill_after_fault: f64,
    kill_after_thaw: f64,
    /// The broker incident's id, and when its `opened` and `resolved` arrived (seconds from
    /// the freeze), as the receiver got them.
    incident: Option<String>,
    opened_after: Option<f64>,
    resolved_after: Option<f64>,
    opened_deliveries: usize,
    resolved_deliveries: usize,
    resolved_before_opened: bool,
}

#[derive(Debug, Serialize)]
struct Flood {
    secs: u64,
    metrics_requests: u64,
    healthz_probes: u64,
    healthz_failures: u64,
    healthz_max_ms: f64,
    broker_incidents_opened: usize,
}

/// The watchdog on `state` (kept across its restarts), its config and log in `run`.
fn launch(
    bin: &Path,
    dir: &Path,
    run: &str,
    bootstrap: &str,
    hook: &str,
) -> Result<support::Watchdog> {
    let port = support::free_port()?;
    let yaml = format!(
        "instance_id: bench\nhttp:\n  listen: 127.0.0.1:{port}\nlog:\n  level: info\nstate_dir: {}\nclusters:\n  - name: lab\n    bootstrap_servers: [{bootstrap}]\n{hook}",
        dir.join("state").display()
    );
    Ok(support::Watchdog::launch(&support::Launch {
        host: support::LOOPBACK,
        bin,
        dir: &dir.join(run),
        port,
        yaml: &yaml,
        check_config: false,
        ready_within: Duration::from_secs(60),
        env: &[],
    })?)
}

/// Waits for the first webhook matching `pred` among those received from the `from`th on;
/// with when it was seen.
fn wait_for(
    sink: &Sink,
    from: usize,
    within: Duration,
    pred: impl Fn(&Value) -> bool,
) -> Option<(Value, Instant)> {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if let Some(v) = sink.received().into_iter().skip(from).find(|v| pred(v)) {
            return Some((v, Instant::now()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

fn is_victim(v: &Value, event: &str) -> bool {
    v["event"] == event && v["kind"] == "broker" && v["broker_id"] == VICTIM
}

pub fn run(opts: &OwnFaultsOptions) -> Result<Section> {
    let bin = resolve_bin(&opts.watchdog_bin)?;
    let seed = (unix_now() * 1000.0) as u64 | 1;
    let mut section = Section::new(
        "own-faults",
        json!({
            "kills": opts.kills,
            "flood_secs": opts.flood_secs,
            "seed": seed,
            "settings": "built-in defaults, one generic receiver (min_severity info)",
        }),
    );
    let (rt, mut lab) = super::runtime_and_lab(&mut section)?;
    let sink = rt.block_on(Sink::start("127.0.0.1:0".parse()?))?;
    let hook = webhook_yaml(&sink.url(), "info");
    let stamp = (unix_now() * 1000.0) as u64;
    let dir = std::env::temp_dir().join(format!("kw-bench-own-faults-{stamp}"));
    let bootstrap = lab.bootstrap().replace(',', ", ");
    let mut rng = Rng(seed);
    let mut episodes = Vec::new();
    let mut runs = 0;
    let mut next_run = || {
        runs += 1;
        format!("run-{runs}")
    };
    for k in 1..=opts.kills.div_ceil(2) {
        let w = launch(&bin, &dir, &next_run(), &bootstrap, &hook)?;
        let from = sink.received().len();
        let fault_at = Instant::now();
        lab.freeze(VICTIM)?;
        let kill1 = rng.secs(6.0);
        std::thread::sleep(kill1);
        drop(w); // SIGKILL
        let w = launch(&bin, &dir, &next_run(), &bootstrap, &hook)?;
        let opened = wait_for(&sink, from, Duration::from_secs(90), |v| {
            is_victim(v, "opened")
        });
        let incident = opened
            .as_ref()
            .and_then(|(v, _)| v["incident_id"].as_str())
            .map(str::to_string);
        lab.thaw(VICTIM)?;
        let thaw_at = Instant::now();
        let kill2 = rng.secs(25.0);
        std::thread::sleep(kill2.saturating_sub(thaw_at.elapsed()));
        drop(w); // SIGKILL
        let w = launch(&bin, &dir, &next_run(), &bootstrap, &hook)?;
        let resolved = wait_for(&sink, from, Duration::from_secs(120), |v| {
            is_victim(v, "resolved") && incident.as_deref().is_none_or(|id| v["incident_id"] == id)
        });
        drop(w);
        let got: Vec<Value> = sink
            .received()
            .into_iter()
            .skip(from)
            .filter(|v| incident.as_deref().is_some_and(|id| v["incident_id"] == id))
            .collect();
        let first = |e: &str| got.iter().position(|v| v["event"] == e);
        let at = |v: &Option<(Value, Instant)>| {
            v.as_ref()
                .map(|(_, t)| t.duration_since(fault_at).as_secs_f64())
        };
        let e = Episode {
            episode: k,
            kill_after_fault: kill1.as_secs_f64(),
            kill_after_thaw: kill2.as_secs_f64(),
            incident: incident.clone(),
            opened_after: at(&opened),
            resolved_after: at(&resolved),
            opened_deliveries: got.iter().filter(|v| v["event"] == "opened").count(),
            resolved_deliveries: got.iter().filter(|v| v["event"] == "resolved").count(),
            resolved_before_opened: matches!((first("resolved"), first("opened")), (Some(r), Some(o)) if r < o),
        };
        println!("  own-faults: {e:?}");
        episodes.push(e);
        restore(&mut lab).context("heal the lab between episodes")?;
    }
    let w = launch(&bin, &dir, &next_run(), &bootstrap, &hook)?;
    w.status().ok();
    let flood = rt.block_on(flood(&w, &sink, opts.flood_secs))?;
    println!("  own-faults: {flood:?}");
    drop(w);
    if let Err(e) = restore(&mut lab) {
        section.note(format!("the lab did not heal: {e:#}"));
    }
    report(&mut section, &episodes, &flood);
    section.raw = json!({ "episodes": episodes, "flood": flood });
    let _ = std::fs::remove_dir_all(&dir);
    Ok(section)
}

/// 64 slow clients (a header byte a second) and 64 greedy ones (GET /metrics in a loop),
/// each from a loopback address of its own, for `secs`; meanwhile /healthz every 500 ms
/// from 127.0.0.1.
async fn flood(w: &support::Watchdog, sink: &Sink, secs: u64) -> Result<Flood> {
    let port = w.port;
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let from = sink.received().len();
    let stop = Arc::new(AtomicBool::new(false));
    let requests = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for i in 1..=FLOODERS {
        let slow_stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let stop = slow_stop;
            while !stop.load(Ordering::Relaxed) {
                let s = tokio::net::TcpSocket::new_v4().ok()?;
                s.bind(([127, 0, 1, i], 0).into()).ok()?;
                let Ok(mut c) = s.connect(addr).await else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                let _ = c.write_all(b"GET /metrics HTTP/1.1\r\n").await;
                for _ in 0..60 {
                    if stop.load(Ordering::Relaxed) || c.write_all(b"X-Slow: 1\r\n").await.is_err()
                    {
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            Some(())
        }));
        let (stop, requests) = (stop.clone(), requests.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let s = tokio::net::TcpSocket::new_v4().ok()?;
                s.bind(([127, 0, 2, i], 0).into()).ok()?;
                if let Ok(mut c) = s.connect(addr).await {
                    let _ = c
                        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                        .await;
                    let mut buf = Vec::new();
                    let _ = tokio::time::timeout(
                        Duration::from_secs(5),
                        tokio::io::AsyncReadExt::read_to_end(&mut c, &mut buf),
                    )
                    .await;
                    requests.fetch_add(1, Ordering::Relaxed);
                } else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            Some(())
        }));
    }
    let (mut probes, mut failures, mut max_ms) = (0u64, 0u64, 0f64);
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        let t = Instant::now();
        let ok = matches!(
            tokio::time::timeout(Duration::from_secs(2), super::http_get(port, "/healthz")).await,
            Ok(Ok((200, _)))
        );
        probes += 1;
        if ok {
            max_ms = max_ms.max(t.elapsed().as_secs_f64() * 1000.0);
        } else {
            failures += 1;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.abort();
    }
    // A page the flood caused would open within the detection time: wait for it.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let opened = sink
        .received()
        .iter()
        .skip(from)
        .filter(|v| v["event"] == "opened" && v["kind"] == "broker")
        .count();
    Ok(Flood {
        secs,
        metrics_requests: requests.load(Ordering::Relaxed),
        healthz_probes: probes,
        healthz_failures: failures,
        healthz_max_ms: max_ms,
        broker_incidents_opened: opened,
    })
}

fn report(section: &mut Section, episodes: &[Episode], flood: &Flood) {
    let mut t = Table::new(
        "Freeze episodes, the watchdog SIGKILLed twice in each (seconds from the freeze; the second kill counted from the thaw)",
        &[
            "episode",
            "kill after fault",
            "kill after thaw",
            "opened after",
            "resolved after",
            "opened deliveries",
            "resolved deliveries",
            "resolved before opened",
        ],
    );
    for e in episodes {
        t.push(vec![
            json!(e.episode),
            num(e.kill_after_fault, 2),
            num(e.kill_after_thaw, 2),
            e.opened_after.map_or(Value::Null, |x| num(x, 1)),
            e.resolved_after.map_or(Value::Null, |x| num(x, 1)),
            json!(e.opened_deliveries),
            json!(e.resolved_deliveries),
            json!(e.resolved_before_opened),
        ]);
    }
    t.print();
    section.tables.push(t);
    let mut f = Table::new(
        &format!("HTTP flood: {FLOODERS} slow clients and {FLOODERS} greedy /metrics clients, each from its own address"),
        &["seconds", "/metrics answered", "/healthz probes", "/healthz failures", "/healthz max ms", "broker incidents opened"],
    );
    f.push(vec![
        json!(flood.secs),
        json!(flood.metrics_requests),
        json!(flood.healthz_probes),
        json!(flood.healthz_failures),
        num(flood.healthz_max_ms, 1),
        json!(flood.broker_incidents_opened),
    ]);
    f.print();
    section.tables.push(f);
}

/// Goals: every episode's opening and resolve delivered, none resolved before it opened;
/// the flood fails no /healthz probe and opens no broker incident.
pub fn missed_goals(section: &Section) -> Vec<String> {
    let mut out = Vec::new();
    let raw = &section.raw;
    for e in raw["episodes"].as_array().into_iter().flatten() {
        let k = &e["episode"];
        if e["opened_deliveries"].as_u64().unwrap_or(0) == 0 {
            out.push(format!("episode {k}: no opened delivered"));
        }
        if e["resolved_deliveries"].as_u64().unwrap_or(0) == 0 {
            out.push(format!("episode {k}: no resolved delivered"));
        }
        if e["resolved_before_opened"] == true {
            out.push(format!("episode {k}: resolved before opened"));
        }
    }
    let f = &raw["flood"];
    if f["healthz_failures"].as_u64().unwrap_or(1) > 0 {
        out.push(format!(
            "flood: {} /healthz probes failed",
            f["healthz_failures"]
        ));
    }
    if f["broker_incidents_opened"].as_u64().unwrap_or(1) > 0 {
        out.push(format!(
            "flood: {} broker incidents opened",
            f["broker_incidents_opened"]
        ));
    }
    out
}
