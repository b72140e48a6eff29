//! Host mode and guarded remediation on the real lab (issue 9). The watchdog runs on the
//! brokers' host, so it sees broker 1's process as an operator would: a frozen broker's
//! process stopped with its port still listening, a killed one gone, a full log directory;
//! and, when configured, restarts a frozen broker under its guards, refuses while another
//! broker is down, and only reports in a dry run.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::watchdog::{is_event, Receiver, Watchdog, WatchdogSettings};
use common::{eventually, lab, unique_topic, LabGuard, SmallFs};
use kafka_lab::{lab_dir, Lab};

const WAIT: Duration = Duration::from_secs(90);

/// The lab's CLI, built with this workspace next to the watchdog under test.
fn kafka_lab_bin() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_kafka-watchdog"))
        .parent()
        .expect("target dir")
        .join("kafka-lab");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --workspace` first",
        bin.display()
    );
    bin
}

/// Broker 1's process by its command line (the lab writes no pid file), its two
/// listeners, and its data directory.
fn broker1_host(extra_broker_yaml: &str, extra_host_yaml: &str) -> String {
    let node = lab_dir().join("n1");
    let cmdline = format!(
        "kafka\\.Kafka {}",
        regex_escape(&node.join("server.properties").display().to_string())
    );
    format!(
        "    host:\n{extra_host_yaml}      brokers:\n        - id: 1\n          process:\n            cmdline_regex: '{cmdline}'\n          ports: [\"127.0.0.11:9092\", \"127.0.0.11:9091\"]\n          log_dirs: [{data}]\n{extra_broker_yaml}",
        data = node.join("data").display(),
    )
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect()
}

fn start(name: &str, host_yaml: String, rx: Option<&Receiver>) -> Watchdog {
    let canary_topic = unique_topic(&format!("kwc-{name}"));
    Watchdog::start(
        name,
        &WatchdogSettings {
            canary_yaml: format!("      topic: {canary_topic}\n"),
            extra_cluster_yaml: format!(
                "    verdict:\n      open_after_secs: 0\n      resolve_after_secs: 2\n{host_yaml}"
            ),
            extra_top_yaml: rx.map(Receiver::yaml).unwrap_or_default(),
            ..WatchdogSettings::default()
        },
    )
}

fn host_of(w: &Watchdog, id: i32) -> serde_json::Value {
    w.broker(id).map(|b| b["host"].clone()).unwrap_or_default()
}

fn hit(w: &Watchdog, id: i32, rule: &str) -> Option<String> {
    w.broker(id)?["hits"]
        .as_array()?
        .iter()
        .find(|h| h["rule"] == rule)
        .and_then(|h| h["detail"].as_str().map(str::to_string))
}

/// The state letter of a process from /proc, e.g. 'T' for stopped.
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// The lab as the kafka-lab CLI left it (a remediation command changed its pids).
fn reopen(lab: &mut LabGuard) {
    lab.lab = Lab::open().expect("lab state");
}

#[test]
fn frozen_then_killed_broker_process_state_and_ports_in_the_verdict() {
    let mut lab = lab();
    let pid = lab.running_pid(1).expect("broker 1 runs");
    let w = start("host-freeze", broker1_host("", ""), None);
    let seen = eventually(WAIT, "host mode finds broker 1's process", || {
        let h = host_of(&w, 1);
        (h["process"]["pid"] == pid).then_some(h)
    });
    eprintln!("host: {seen:#}");
    assert_eq!(seen["ports"][0]["listening"], true, "{seen:#}");
    assert_eq!(seen["ports"][0]["owned_by_process"], true, "{seen:#}");
    assert!(seen["process"]["threads"].as_u64().unwrap() > 20, "a JVM");
    assert!(seen["process"]["open_fds"].as_u64().unwrap() > 20);
    eventually(WAIT, "broker 1 healthy", || {
        (w.broker_state(1).as_deref() == Some("healthy")).then_some(())
    });
    let p = pid.to_string();
    let b1 = [("cluster", "lab"), ("broker", "1")];
    assert_eq!(w.metric("kafka_watchdog_host_process_up", &b1), Some(1.0));
    assert_eq!(
        w.metric(
            "kafka_watchdog_host_port_listening",
            &[("broker", "1"), ("port", "127.0.0.11:9092")]
        ),
        Some(1.0)
    );
    assert!(w
        .metric("kafka_watchdog_host_process_cpu_seconds_total", &b1)
        .is_some_and(|c| c > 1.0));

    lab.freeze(1).unwrap();
    let frozen_at = Instant::now();
    let detail = eventually(WAIT, "process_stopped in broker 1's verdict", || {
        hit(&w, 1, "process_stopped")
    });
    let stopped_after = frozen_at.elapsed();
    eprintln!(
        "freeze: process_stopped after {:.1} s: {detail}",
        stopped_after.as_secs_f64()
    );
    assert!(
        detail.starts_with(&format!("process {p} stopped by a signal")),
        "{detail}"
    );
    assert!(
        detail.contains("port 127.0.0.11:9092 listening (its socket)"),
        "{detail}"
    );
    assert!(detail.contains("no request answered"), "{detail}");
    assert_eq!(w.broker_state(1).as_deref(), Some("zombie"));
    assert_eq!(
        w.metric(
            "kafka_watchdog_host_process_state",
            &[("broker", "1"), ("state", "stopped")]
        ),
        Some(1.0)
    );
    // A few rounds later the silence has a length and the CPU has stopped moving.
    let later = eventually(WAIT, "CPU not advancing, silence measured", || {
        hit(&w, 1, "process_stopped").filter(|d| {
            d.contains("CPU time not advancing") && d.contains("no request answered for")
        })
    });
    eprintln!("freeze, later: {later}");

    lab.thaw(1).unwrap();
    lab.kill(1).unwrap();
    let killed_at = Instant::now();
    let gone = eventually(WAIT, "process_gone in broker 1's verdict", || {
        hit(&w, 1, "process_gone")
    });
    eprintln!(
        "kill: process_gone after {:.1} s: {gone}",
        killed_at.elapsed().as_secs_f64()
    );
    assert!(gone.starts_with("no process found"), "{gone}");
    assert!(
        gone.contains("port 127.0.0.11:9092 not listening"),
        "{gone}"
    );
    assert_eq!(w.broker_state(1).as_deref(), Some("down"));
    assert_eq!(w.metric("kafka_watchdog_host_process_up", &b1), Some(0.0));
    assert_eq!(
        w.metric(
            "kafka_watchdog_host_port_listening",
            &[("broker", "1"), ("port", "127.0.0.11:9092")]
        ),
        Some(0.0)
    );
    drop(w);
    lab.start(1).unwrap();
}

#[test]
fn a_filled_log_directory_is_reported_as_low_free_space() {
    let _lab = lab();
    let fs = SmallFs::mount("/tmp/kw-fill", "16m");
    // The second log directory is a file system of its own too: the machine's disk may be
    // below any ratio the test picks (CI saw 8.3 % free on a shared disk).
    let fine = SmallFs::mount("/tmp/kw-fine", "16m");
    let host = format!(
        "    host:\n      log_dir_min_free_ratio: 0.1\n      brokers:\n        - id: 1\n          process:\n            pid_file: {pidfile}\n          log_dirs: [/tmp/kw-fill, {data}]\n",
        pidfile = fs.0.join("broker-1.pid").display(),
        data = fine.0.display(),
    );
    // The lab writes no pid file; this test writes one, as a service manager would.
    std::fs::write(
        fs.0.join("broker-1.pid"),
        format!("{}\n", _lab.running_pid(1).unwrap()),
    )
    .unwrap();
    let w = start("host-fill", host, None);
    eventually(WAIT, "free space of /tmp/kw-fill", || {
        let ratio = w.metric(
            "kafka_watchdog_host_log_dir_free_ratio",
            &[("broker", "1"), ("path", "/tmp/kw-fill")],
        )?;
        (ratio > 0.9).then_some(())
    });
    assert_eq!(hit(&w, 1, "log_dir_low_space"), None);
    fs.fill();
    let filled_at = Instant::now();
    let detail = eventually(WAIT, "log_dir_low_space for broker 1", || {
        hit(&w, 1, "log_dir_low_space")
    });
    eprintln!(
        "fill: reported after {:.1} s: {detail}",
        filled_at.elapsed().as_secs_f64()
    );
    assert!(
        detail.starts_with("low free space, below 10.0%: log dir /tmp/kw-fill: "),
        "{detail}"
    );
    assert!(detail.contains("of 16.0 MiB"), "{detail}");
    assert!(
        !detail.contains(&fine.0.display().to_string()),
        "the other log directory is fine"
    );
    assert_eq!(w.broker_state(1).as_deref(), Some("degraded"));
    let free = w
        .metric(
            "kafka_watchdog_host_log_dir_free_bytes",
            &[("broker", "1"), ("path", "/tmp/kw-fill")],
        )
        .unwrap();
    assert!(free < 1_677_722.0, "under 10% of 16 MiB: {free}");
    // Space freed: the finding goes.
    let _ = std::fs::remove_file(fs.0.join("fill"));
    eventually(WAIT, "broker 1 healthy again", || {
        (w.broker_state(1).as_deref() == Some("healthy")).then_some(())
    });
}

fn remediation_yaml(dry_run: bool) -> String {
    let kl = kafka_lab_bin();
    // A restart as an operator's script would do it; `$0` is the lab's CLI. The before
    // command keeps the frozen process's /proc status (jcmd cannot attach to a stopped JVM).
    format!(
        "          remediation:\n            enabled: true\n            dry_run: {dry_run}\n            zombie_for_secs: 6\n            timeout_secs: 150\n            command: [/bin/sh, -c, '\"$0\" kill {{broker}} && \"$0\" start {{broker}}', {kl}]\n            before_command: [/bin/cat, '/proc/{{pid}}/status']\n",
        kl = kl.display()
    )
}

const HOST_LIMITS: &str =
    "      remediation_cooldown_secs: 600\n      remediation_max_per_day: 5\n";

#[test]
fn remediation_restarts_a_frozen_broker_after_the_configured_time() {
    let mut lab = lab();
    let old_pid = lab.running_pid(1).unwrap();
    let rx = Receiver::start();
    let w = start(
        "remediate-act",
        broker1_host(&remediation_yaml(false), HOST_LIMITS),
        Some(&rx),
    );
    eventually(WAIT, "broker 1 healthy", || {
        (w.broker_state(1).as_deref() == Some("healthy")).then_some(())
    });
    assert_eq!(
        w.metric(
            "kafka_watchdog_remediations_total",
            &[("broker", "1"), ("outcome", "acted")]
        ),
        Some(0.0),
        "zero before the first"
    );
    lab.freeze(1).unwrap();
    let frozen_at = Instant::now();
    let acted = rx.wait(
        "remediation acted for broker 1",
        Duration::from_secs(180),
        |v| is_event(v, "acted", "remediation", Some(1)),
    );
    eprintln!(
        "remediation: acted {:.1} s after the freeze: {acted:#}",
        frozen_at.elapsed().as_secs_f64()
    );
    let evidence: Vec<&str> = acted["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e.as_str())
        .collect();
    assert!(
        evidence
            .iter()
            .any(|e| e.starts_with("status: exit status 0")),
        "{evidence:?}"
    );
    assert!(
        evidence
            .iter()
            .any(|e| e.starts_with("before command: exit status 0, output kept in ")),
        "{evidence:?}"
    );
    assert!(
        evidence.iter().any(|e| e.contains("process_stopped")),
        "{evidence:?}"
    );
    assert!(
        acted["summary"].as_str().unwrap().contains("zombie for "),
        "{acted:#}"
    );
    // The kept output is the frozen process's status: "State: T (stopped)".
    let kept = evidence
        .iter()
        .find_map(|e| e.split("output kept in ").nth(1))
        .unwrap();
    let dump = std::fs::read_to_string(kept).unwrap();
    assert!(dump.contains("T (stopped)"), "{dump}");

    reopen(&mut lab);
    let new_pid = lab.running_pid(1).expect("broker 1 runs again");
    assert_ne!(new_pid, old_pid, "restarted");
    assert_ne!(proc_state(new_pid), Some('T'));
    eventually(WAIT, "broker 1 healthy after the restart", || {
        (w.broker_state(1).as_deref() == Some("healthy")).then_some(())
    });
    eprintln!(
        "remediation: broker 1 healthy {:.1} s after the freeze",
        frozen_at.elapsed().as_secs_f64()
    );
    assert_eq!(
        w.metric(
            "kafka_watchdog_remediations_total",
            &[("broker", "1"), ("outcome", "acted")]
        ),
        Some(1.0)
    );
    let status = w.status();
    let rec = &status["remediations"][0];
    assert_eq!(rec["outcome"], "acted", "{status:#}");
    // With host mode on and a remediation made, every host and remediation metric the
    // dashboard and the alert rules use is exposed.
    common::watchdog::dashboard_metrics_exist(&w, common::watchdog::host_mode_metric);
    drop(w);
}

#[test]
fn remediation_is_refused_while_another_broker_is_down() {
    let mut lab = lab();
    let rx = Receiver::start();
    let w = start(
        "remediate-refuse",
        broker1_host(&remediation_yaml(false), HOST_LIMITS),
        Some(&rx),
    );
    eventually(WAIT, "broker 1 healthy", || {
        (w.broker_state(1).as_deref() == Some("healthy")).then_some(())
    });
    lab.kill(2).unwrap();
    eventually(WAIT, "broker 2 down", || {
        (w.broker_state(2).as_deref() == Some("down")).then_some(())
    });
    let pid = lab.running_pid(1).unwrap();
    lab.freeze(1).unwrap();
    let frozen_at = Instant::now();
    let refused = rx.wait("remediation refused for broker 1", WAIT, |v| {
        is_event(v, "refused", "remediation", Some(1))
    });
    eprintln!(
        "refused {:.1} s after the freeze: {}",
        frozen_at.elapsed().as_secs_f64(),
        refused["summary"]
    );
    let summary = refused["summary"].as_str().unwrap();
    assert!(summary.contains("refused: "), "{summary}");
    assert!(summary.contains("broker 2 is down"), "{summary}");
    assert!(
        refused["evidence"].as_array().unwrap().iter().any(|e| e
            .as_str()
            .unwrap()
            .starts_with("guard: the rest of the cluster is not healthy")),
        "{refused:#}"
    );
    // Nothing ran: broker 1 is the same process, still stopped.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(proc_state(pid), Some('T'));
    assert!(!rx
        .received()
        .iter()
        .any(|v| is_event(v, "acted", "remediation", Some(1))));
    assert!(w
        .metric(
            "kafka_watchdog_remediations_total",
            &[("broker", "1"), ("outcome", "refused")]
        )
        .is_some_and(|n| n >= 1.0));
    drop(w);
    lab.thaw(1).unwrap();
}

#[test]
fn remediation_dry_run_only_reports() {
    let mut lab = lab();
    let rx = Receiver::start();
    let w = start(
        "remediate-dry",
        broker1_host(&remediation_yaml(true), HOST_LIMITS),
        Some(&rx),
    );
    eventually(WAIT, "broker 1 healthy", || {
        (w.broker_state(1).as_deref() == Some("healthy")).then_some(())
    });
    let pid = lab.running_pid(1).unwrap();
    lab.freeze(1).unwrap();
    let dry = rx.wait("remediation dry run for broker 1", WAIT, |v| {
        is_event(v, "dry_run", "remediation", Some(1))
    });
    let summary = dry["summary"].as_str().unwrap();
    eprintln!("dry run: {summary}");
    assert!(
        summary.starts_with("dry run: remediation of broker 1"),
        "{summary}"
    );
    assert!(summary.contains("would run `/bin/sh -c"), "{summary}");
    std::thread::sleep(Duration::from_secs(8));
    assert_eq!(proc_state(pid), Some('T'), "still frozen: nothing ran");
    let events: Vec<_> = rx
        .received()
        .into_iter()
        .filter(|v| v["kind"] == "remediation")
        .collect();
    assert_eq!(events.len(), 1, "reported once: {events:#?}");
    assert_eq!(
        w.metric(
            "kafka_watchdog_remediations_total",
            &[("broker", "1"), ("outcome", "dry_run")]
        ),
        Some(1.0)
    );
    drop(w);
    lab.thaw(1).unwrap();
}
