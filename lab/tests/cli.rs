//! The `kafka-lab` command line end to end: a cluster comes up within the bound, faults show
//! in `status`, and `down` leaves no process, rule, user, cgroup or folder behind.

use std::process::Command;
use std::time::{Duration, Instant};

use kafka_lab::Lab;

/// Runs `kafka-lab args`: whether it succeeded, its stdout (what scripts read), and stdout
/// with stderr (for messages). Progress notes go to stderr: on a fresh machine `up` says it
/// is downloading Kafka, which must not change what it prints on stdout.
fn lab(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kafka-lab"))
        .args(args)
        .output()
        .expect("run kafka-lab");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let all = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    (out.status.success(), stdout, all)
}

/// The stdout of a command that must succeed.
fn ok(args: &[&str]) -> String {
    let (success, stdout, all) = lab(args);
    assert!(success, "kafka-lab {}: {all}", args.join(" "));
    stdout
}

#[test]
fn up_faults_status_down_leaves_nothing_behind() {
    let _session = kafka_lab::SessionLock::take().expect("lab session lock");
    ok(&["down"]);
    assert_eq!(Lab::leftovers(), Vec::<String>::new());

    // The bound is for starting the cluster; Kafka's jars are fetched (once per machine)
    // before the clock starts.
    kafka_lab::dist::ensure(kafka_lab::KafkaVersion::V4).expect("Kafka's jars");
    let started = Instant::now();
    let out = ok(&["up"]);
    let took = started.elapsed();
    eprintln!("kafka-lab up: {:.1} s", took.as_secs_f64());
    assert!(took < Duration::from_secs(90), "up took {took:?}");
    assert_eq!(
        out.trim(),
        "127.0.0.11:9092,127.0.0.12:9092,127.0.0.13:9092"
    );
    // Idempotent: a second `up` finds the cluster complete.
    assert_eq!(ok(&["up"]).trim(), out.trim());

    ok(&["freeze", "2"]);
    ok(&["cut-replication", "3"]);
    ok(&["isolate", "1", "--quorum-only"]);
    ok(&["slow", "1", "--cpu-percent", "20"]);
    let status = ok(&["status"]);
    eprintln!("{status}");
    let line = |id: &str| {
        status
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("no status line for node {id}: {status}"))
            .to_string()
    };
    assert!(line("0").contains("controller") && line("0").contains("running"));
    assert!(line("2").contains("frozen"), "{}", line("2"));
    assert!(line("3").contains("cut-replication"), "{}", line("3"));
    assert!(
        line("1").contains("isolated-from-quorum") && line("1").contains("slow(20% cpu)"),
        "{}",
        line("1")
    );
    assert_eq!(kafka_lab::netfault::list().len(), 2);

    let (success, _, text) = lab(&["freeze", "7"]);
    assert!(
        !success && text.contains("node 7 is not part of this lab"),
        "{text}"
    );
    // Controllers take freeze, kill, stop and isolate like brokers (issue 25); a fault of
    // the broker's replication is refused on one.
    let (success, _, text) = lab(&["cut-replication", "0"]);
    assert!(
        !success && text.contains("node 0 is a controller; this fault applies to brokers"),
        "{text}"
    );

    ok(&["heal"]);
    let status = ok(&["status"]);
    assert!(
        !status.contains("frozen") && !status.contains("cut-replication"),
        "{status}"
    );
    assert!(kafka_lab::netfault::list().is_empty());

    ok(&["stop", "3"]);
    assert!(ok(&["status"])
        .lines()
        .any(|l| l.starts_with("3 ") && l.contains("stopped")));
    ok(&["start", "3"]);
    assert!(ok(&["log", "3"]).contains("Kafka Server started"));

    ok(&["down"]);
    assert_eq!(Lab::leftovers(), Vec::<String>::new());
    let (success, _, text) = lab(&["status"]);
    assert!(!success && text.contains("no lab is running"), "{text}");
}
