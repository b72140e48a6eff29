//! A task killed (issue 38 item 1): the round loop of the one cluster panics each time it
//! starts, for `panic_secs` from its first start (the debug build's
//! `KAFKA_WATCHDOG_TEST_PANIC_LOOP`; a tokio task cannot be killed from outside the
//! process). Read from outside, every 100 ms: `kafka_watchdog_task_restarts_total` and
//! `kafka_watchdog_rounds_total` on `/metrics`, `/healthz`'s code and body; the deaths and
//! the supervisor's waits from the log.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use kafka_watchdog_test_support::fake_cluster::broker;
use kafka_watchdog_test_support::watchdog::{free_port, http_get};
use serde::Serialize;

use super::{launch, metric, Bins};

/// What the panic hook says each time the loop dies.
const DEATH: &str = "KAFKA_WATCHDOG_TEST_PANIC_LOOP: the round loop panics, as asked";
/// What `/healthz` names a stuck round loop by.
const STUCK: &str = "the round loop of cluster fake: no progress for";

#[derive(Debug, Serialize)]
pub struct TaskKill {
    pub panic_secs: u64,
    pub round_interval_secs: u64,
    /// Deaths the log shows, and restarts the counter shows at the end.
    pub deaths_logged: usize,
    pub restarts_counted: f64,
    /// The supervisor's waits before each restart, from the log (ms), in order.
    pub restart_waits_ms: Vec<u64>,
    /// Seconds from the launch: the first death seen on the counter, the first 503 and
    /// the first 200 after it on /healthz, the first round completed.
    pub first_death_seen: Option<f64>,
    pub first_503: Option<f64>,
    pub healthz_200_again: Option<f64>,
    pub first_round: Option<f64>,
    /// Every 503 in the run named the stuck loop; 503s seen.
    pub healthz_503s: usize,
    pub every_503_names_the_loop: bool,
    /// /healthz answers that were neither 200 nor 503, or no answer.
    pub healthz_errors: usize,
}

/// The cluster's loop dies for `panic_secs`; rounds every 2 s, so its allowance is the
/// 30 s floor.
pub fn run(
    rt: &tokio::runtime::Runtime,
    bins: &Bins,
    dir: &Path,
    panic_secs: u64,
) -> Result<TaskKill> {
    let b = broker(rt, Vec::new());
    let run = dir.join("task-kill");
    let port = free_port()?;
    let yaml = format!(
        "instance_id: bench\nhttp:\n  listen: 127.0.0.1:{port}\nlog:\n  level: info\n\
         state_dir: {}\nclusters:\n  - name: fake\n    bootstrap_servers: [{}]\n    \
         round_interval_secs: 2\n    connect_timeout_ms: 1000\n    request_timeout_ms: 1500\n    \
         canary:\n      enabled: false\n",
        run.join("state").display(),
        b.address
    );
    let secs = panic_secs.to_string();
    let env = [("KAFKA_WATCHDOG_TEST_PANIC_LOOP", secs.as_str())];
    // Read from before the launch: the launch waits for the first round, after the deaths.
    let until = Duration::from_secs(panic_secs + 20);
    let poller = std::thread::spawn(move || poll(port, until));
    let w = launch(
        &bins.debug,
        &run,
        port,
        &yaml,
        &env,
        until + Duration::from_secs(10),
    );
    let mut k = poller.join().unwrap_or_else(|_| empty(panic_secs));
    k.panic_secs = panic_secs;
    let w = w?;
    let log = w.log();
    // The panic as the runtime prints it, one line of its own; the supervisor's line
    // about the same death quotes it.
    k.deaths_logged = log.lines().filter(|l| l.trim() == DEATH).count();
    k.restart_waits_ms = log
        .lines()
        .filter(|l| l.contains("starting it again") && l.contains("cluster_loop"))
        .filter_map(|l| field(l, "restart_in_ms"))
        .collect();
    k.restarts_counted = get_metric(
        port,
        "kafka_watchdog_task_restarts_total",
        &[("task", "cluster_loop")],
    );
    println!("  task-kill: {k:?}");
    drop(w);
    Ok(k)
}

fn empty(panic_secs: u64) -> TaskKill {
    TaskKill {
        panic_secs,
        round_interval_secs: 2,
        deaths_logged: 0,
        restarts_counted: 0.0,
        restart_waits_ms: Vec::new(),
        first_death_seen: None,
        first_503: None,
        healthz_200_again: None,
        first_round: None,
        healthz_503s: 0,
        every_503_names_the_loop: true,
        healthz_errors: 0,
    }
}

fn get_metric(port: u16, name: &str, labels: &[(&str, &str)]) -> f64 {
    http_get(port, "/metrics")
        .ok()
        .and_then(|(_, body)| metric(&body, name, labels))
        .unwrap_or(0.0)
}

/// `name=value` or `"name":value` of a log line, as a number.
fn field(line: &str, name: &str) -> Option<u64> {
    let at = line.find(name)? + name.len();
    let rest = line[at..].trim_start_matches(['=', '"', ':', ' ']);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// /metrics and /healthz every 100 ms for `until` from now (once the daemon answers).
fn poll(port: u16, until: Duration) -> TaskKill {
    let mut k = empty(0);
    let start = Instant::now();
    let mut answering = false;
    while start.elapsed() < until {
        let t = start.elapsed().as_secs_f64();
        if let Ok((_, body)) = http_get(port, "/metrics") {
            answering = true;
            let restarts = metric(
                &body,
                "kafka_watchdog_task_restarts_total",
                &[("task", "cluster_loop")],
            );
            if restarts.unwrap_or(0.0) > 0.0 {
                k.first_death_seen.get_or_insert(t);
            }
            if metric(&body, "kafka_watchdog_rounds_total", &[("cluster", "fake")]).unwrap_or(0.0)
                > 0.0
            {
                k.first_round.get_or_insert(t);
            }
        }
        match http_get(port, "/healthz") {
            Ok((503, body)) => {
                k.first_503.get_or_insert(t);
                k.healthz_503s += 1;
                k.every_503_names_the_loop &= body.contains(STUCK);
            }
            Ok((200, _)) if k.first_503.is_some() => {
                k.healthz_200_again.get_or_insert(t);
            }
            Ok((200, _)) => {}
            _ if answering => k.healthz_errors += 1,
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    k
}
