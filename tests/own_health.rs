//! The watchdog's own sickness is never a broker's fault (issue 38 item 4), on the real lab
//! with the built-in timing: stopped and continued, starved of CPU, or losing a tenth of the
//! packets it sends, the watchdog calls no healthy broker `zombie` or `down`, sends no
//! webhook naming one, and says it is degraded (`kafka_watchdog_self_degraded`, /status
//! `own_health`). A broker stalled while the watchdog was stopped is paged once it runs again.

mod common;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use common::watchdog::{free_port, is_event, Receiver, Watchdog, WatchdogSettings};
use common::{eventually, lab, unique_topic};
use kafka_lab::cage::Cage;
use kafka_watchdog_test_support::watchdog as support;

const WAIT: Duration = Duration::from_secs(120);

fn secs_from_env(name: &str, default: u64) -> Duration {
    Duration::from_secs(
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default),
    )
}

/// The built-in timing (10 s rounds, 3 s requests, liveness every 400 ms past a 1 s floor),
/// its own canary topic, webhooks to `rx`; `bin` in place of the daemon when given.
fn start(name: &str, rx: &Receiver, bin: Option<&std::path::Path>) -> Watchdog {
    let s = WatchdogSettings {
        round_interval_secs: 10,
        request_timeout_ms: 3000,
        canary_yaml: format!("      topic: {}\n", unique_topic("kwc-own-health")),
        extra_cluster_yaml: "    verdict:\n      resolve_after_secs: 5\n".into(),
        extra_top_yaml: rx.yaml(),
    };
    let yaml = |port: u16, dir: &std::path::Path| Watchdog::config_yaml(port, dir, &s);
    match bin {
        Some(bin) => Watchdog::start_bin(name, bin, support::LOOPBACK, free_port(), yaml),
        None => Watchdog::start_yaml(name, yaml),
    }
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

fn all_healthy(w: &Watchdog, brokers: &[i32]) {
    eventually(WAIT, "every broker healthy", || {
        brokers
            .iter()
            .all(|b| w.broker_state(*b).as_deref() == Some("healthy"))
            .then_some(())
    });
}

/// What a watch of the watchdog saw: brokers not healthy (with the state), and the reasons
/// `self_degraded` gave.
#[derive(Debug, Default)]
struct Seen {
    not_healthy: BTreeSet<(i32, String)>,
    degraded: BTreeSet<String>,
}

impl Seen {
    fn zombie_or_down(&self) -> Vec<&(i32, String)> {
        self.not_healthy
            .iter()
            .filter(|(_, s)| s == "zombie" || s == "down")
            .collect()
    }
}

/// Samples /status and /metrics every 250 ms for `d` (a page that does not answer, as
/// while the watchdog is stopped, is skipped).
fn watch(w: &Watchdog, d: Duration) -> Seen {
    let mut seen = Seen::default();
    let end = Instant::now() + d;
    while Instant::now() < end {
        if let Ok(s) = support::Watchdog::status(w) {
            for (b, state) in support::broker_states(&s) {
                if state != "healthy" {
                    seen.not_healthy.insert((b, state));
                }
            }
        }
        seen.degraded.extend(degraded(w));
        std::thread::sleep(Duration::from_millis(250));
    }
    seen
}

/// The reasons `self_degraded` is 1 for now.
fn degraded(w: &Watchdog) -> Vec<String> {
    let Ok((200, body)) = w.get("/metrics") else {
        return Vec::new();
    };
    body.lines()
        .filter(|l| l.starts_with("kafka_watchdog_self_degraded{"))
        .filter(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) == Some(1.0))
        .filter_map(|l| l.split('"').nth(1).map(str::to_string))
        .collect()
}

/// Webhooks that opened or updated an incident about a broker or a controller.
fn pages_naming_nodes(rx: &Receiver) -> Vec<serde_json::Value> {
    rx.received()
        .into_iter()
        .filter(|v| {
            v["event"] != "resolved" && (v["kind"] == "broker" || v["kind"] == "controller")
        })
        .collect()
}

/// Stopped for `KW_PAUSE_SECS` (20 s) and continued: every broker's request waited through
/// the pause. No broker is named, and the watchdog says it was paused.
#[test]
fn a_paused_watchdog_names_no_healthy_broker_and_says_it_was_paused() {
    let lab = lab();
    let brokers = lab.brokers();
    let rx = Receiver::start();
    let w = start("own-paused", &rx, None);
    all_healthy(&w, &brokers);
    let pause = secs_from_env("KW_PAUSE_SECS", 20);
    signal(w.pid(), "-STOP");
    std::thread::sleep(pause);
    signal(w.pid(), "-CONT");
    let seen = watch(&w, Duration::from_secs(20));
    assert!(seen.degraded.contains("paused"), "{seen:?}");
    assert!(seen.zombie_or_down().is_empty(), "{seen:?}");
    assert!(
        w.metric("kafka_watchdog_self_clock_jumps_total", &[])
            .is_some_and(|n| n >= 1.0),
        "a pause is a jump of its clock"
    );
    let pages = pages_naming_nodes(&rx);
    assert!(pages.is_empty(), "{pages:#?}");
    // Once the settle is over it is well again.
    eventually(Duration::from_secs(30), "the watchdog well again", || {
        (w.status()["own_health"]["state"] == "ok").then_some(())
    });
}

/// Held to `KW_STARVE_PERCENT` (2) % of a CPU for `KW_STARVE_SECS` (60 s): its timers run
/// late, its cgroup throttles it. No broker is named, and it says it is unwell.
#[test]
fn a_watchdog_starved_of_cpu_names_no_healthy_broker_and_says_so() {
    let lab = lab();
    let brokers = lab.brokers();
    let rx = Receiver::start();
    let w = start("own-starved", &rx, None);
    all_healthy(&w, &brokers);
    let percent = secs_from_env("KW_STARVE_PERCENT", 2).as_secs() as u32;
    struct Fed;
    impl Drop for Fed {
        fn drop(&mut self) {
            let _ = kafka_lab::cpu::release("watchdog-test");
        }
    }
    kafka_lab::cpu::limit_process("watchdog-test", w.pid(), percent).unwrap();
    let fed = Fed;
    let seen = watch(&w, secs_from_env("KW_STARVE_SECS", 60));
    drop(fed);
    let after = watch(&w, Duration::from_secs(15));
    assert!(
        seen.degraded.contains("cpu_throttled") || seen.degraded.contains("event_loop_lag"),
        "{seen:?}"
    );
    assert!(seen.zombie_or_down().is_empty(), "{seen:?}");
    assert!(after.zombie_or_down().is_empty(), "{after:?}");
    assert!(
        w.metric("kafka_watchdog_self_cpu_throttled_seconds_total", &[])
            .is_some_and(|s| s > 0.0),
        "its cgroup's throttled time is read"
    );
    let pages = pages_naming_nodes(&rx);
    assert!(pages.is_empty(), "{pages:#?}");
}

/// Broker 2's request handlers stalled (never fenced: its heartbeats go on) while the
/// watchdog is stopped: nothing but the watchdog's own timing can name it, and that is
/// doubted during the pause. It is paged once the watchdog runs again, within its
/// threshold and a margin; the healthy brokers are not.
#[test]
fn a_broker_stalled_while_the_watchdog_is_paused_is_paged_after_it_resumes() {
    let mut lab = lab();
    let brokers = lab.brokers();
    let rx = Receiver::start();
    let w = start("own-paused-stall", &rx, None);
    all_healthy(&w, &brokers);
    signal(w.pid(), "-STOP");
    lab.stall(2, false).unwrap();
    std::thread::sleep(secs_from_env("KW_PAUSE_SECS", 20));
    signal(w.pid(), "-CONT");
    let resumed = Instant::now();
    let page = rx.wait("broker 2 opened", Duration::from_secs(60), |v| {
        is_event(v, "opened", "broker", Some(2))
    });
    let after = resumed.elapsed();
    assert_eq!(page["state"], "zombie", "{page:#}");
    eprintln!(
        "stalled during the pause: paged {:.1} s after the watchdog resumed",
        after.as_secs_f64()
    );
    assert!(after < Duration::from_secs(15), "{after:?}");
    let others: Vec<_> = pages_naming_nodes(&rx)
        .into_iter()
        .filter(|v| v["kind"] != "broker" || v["broker_id"] != 2)
        .collect();
    assert!(others.is_empty(), "{others:#?}");
}

/// A tenth of the TCP packets the watchdog sends dropped for `KW_LOSS_SECS` (60 s): its
/// requests are resent, some after seconds. No broker is named, and it says it loses
/// packets.
#[test]
fn a_watchdog_losing_a_tenth_of_its_packets_names_no_healthy_broker() {
    let lab = lab();
    let brokers = lab.brokers();
    let rx = Receiver::start();
    let cage = Cage::new("watchdog-test").unwrap();
    let dir = std::env::temp_dir().join(format!("kw-own-health-{}", std::process::id()));
    let launcher = cage
        .launcher(
            std::path::Path::new(env!("CARGO_BIN_EXE_kafka-watchdog")),
            &dir,
        )
        .unwrap();
    let w = start("own-lossy", &rx, Some(&launcher));
    all_healthy(&w, &brokers);
    cage.lose(10).unwrap();
    let seen = watch(&w, secs_from_env("KW_LOSS_SECS", 60));
    cage.stop_losing().unwrap();
    let after = watch(&w, Duration::from_secs(15));
    assert!(seen.zombie_or_down().is_empty(), "{seen:?}");
    assert!(after.zombie_or_down().is_empty(), "{after:?}");
    let resent = w
        .metric(
            "kafka_watchdog_self_liveness_segments_retransmitted_total",
            &[],
        )
        .unwrap_or_default();
    assert!(resent > 0.0, "the rule dropped its packets");
    assert!(seen.degraded.contains("packet_loss"), "{seen:?}");
    let pages = pages_naming_nodes(&rx);
    assert!(pages.is_empty(), "{pages:#?}");
}
