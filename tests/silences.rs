//! Silences against the real binary, with no lab: a daemon whose one cluster cannot be
//! reached opens a critical `cluster_unreachable` incident every time it starts, which is
//! all a silence needs to be seen keeping a receiver quiet, and letting go.

mod common;

use std::process::{Command, Output};
use std::time::Duration;

use common::watchdog::{is_event, Receiver, Watchdog};

fn silence(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kafka-watchdog"))
        .arg("silence")
        .args(args)
        .output()
        .expect("run kafka-watchdog silence")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A daemon watching a cluster nobody serves, sending every incident to `sink`, with
/// `silences_yaml` (top-level lines) in its file.
fn daemon(name: &str, sink: &Receiver, silences_yaml: &str) -> Watchdog {
    let hooks = sink.yaml();
    let extra = silences_yaml.to_string();
    Watchdog::start_yaml(name, move |port, dir| {
        format!(
            "instance_id: silence-test\nhttp:\n  listen: 127.0.0.1:{port}\nstate_dir: {state}\n\
             clusters:\n  - name: nowhere\n    bootstrap_servers: [127.0.0.1:1]\n    \
             round_interval_secs: 2\n    connect_timeout_ms: 1000\n    request_timeout_ms: 1000\n    \
             verdict:\n      open_after_secs: 0\n      resolve_after_secs: 0\n    \
             canary:\n      enabled: false\n    labels: {{env: test, team: kafka}}\n{hooks}{extra}",
            state = dir.join("state").display(),
        )
    })
}

#[test]
fn a_silenced_incident_is_shown_but_not_sent_until_the_silence_ends() {
    let sink = Receiver::start();
    let w = daemon("silence-cli", &sink, "");
    let cfg = w.dir.join("watchdog.yaml");
    let cfg = cfg.to_str().unwrap();
    // Silence first, before the first round could open anything... or right after: either
    // way what the receiver hears is decided by the silence from now on.
    let out = silence(&[
        "add",
        "-c",
        cfg,
        "--cluster",
        "nowhere",
        "--duration",
        "1h",
        "--comment",
        "decommissioning the nowhere cluster",
        "--by",
        "alice",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let line = text(&out.stdout);
    assert!(
        line.contains("active  cluster nowhere")
            && line.contains("by alice (api): decommissioning"),
        "{line}"
    );
    let id = line.split_whitespace().next().unwrap().to_string();
    assert!(id.starts_with("s-"), "{line}");
    let before = sink.received().len();
    // Without the configuration the command cannot read the daemon's local token, and
    // without http.auth the daemon asks for it (issue 27 item 6): loopback is no
    // credential. Nothing changes.
    let url = format!("http://127.0.0.1:{}", w.port);
    let out = silence(&[
        "add",
        "--url",
        &url,
        "--duration",
        "1h",
        "--comment",
        "from a proxy",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("local token"),
        "{}",
        text(&out.stderr)
    );

    // The incident is there, with its silence, in /status and the metrics.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let status = w.status();
        let silenced = status["incidents"].as_array().and_then(|a| {
            a.iter()
                .find(|i| i["kind"] == "cluster_unreachable")
                .map(|i| i["silenced"]["id"].clone())
        });
        if silenced == Some(serde_json::json!(id)) {
            assert_eq!(status["silences"][0]["id"], id.as_str(), "{status:#}");
            assert_eq!(status["silences"][0]["active"], true);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no silenced incident: {status:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        w.metric("kafka_watchdog_silences_active", &[("cluster", "nowhere")]),
        Some(1.0)
    );
    assert_eq!(
        w.metric(
            "kafka_watchdog_incidents_silenced",
            &[("cluster", "nowhere"), ("kind", "cluster_unreachable")]
        ),
        Some(1.0)
    );
    // Rounds go on; a silenced incident (opened before the silence or under it) sends
    // nothing new.
    std::thread::sleep(Duration::from_secs(3));
    let during: Vec<serde_json::Value> = sink.received()[before..].to_vec();
    assert!(
        during
            .iter()
            .all(|v| v["event"] != "opened" && v["event"] != "updated"),
        "sent while silenced: {during:#?}"
    );

    let out = silence(&["list", "-c", cfg]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains(&id), "{}", text(&out.stdout));

    // Ended: the incident, still open, reaches the receiver.
    let out = silence(&["expire", "-c", cfg, &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let told = sink.wait(
        "cluster_unreachable after the silence",
        Duration::from_secs(20),
        |v| {
            (is_event(v, "opened", "cluster_unreachable", None)
                || is_event(v, "updated", "cluster_unreachable", None))
                && v["changes"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c.as_str().unwrap_or("").contains("ended")))
        },
    );
    // The cluster's static labels ride on its webhooks and on /metrics (issue 28 item 3).
    assert_eq!(
        told["labels"],
        serde_json::json!({"env": "test", "team": "kafka"}),
        "{told:#}"
    );
    assert_eq!(
        w.metric(
            "kafka_watchdog_cluster_labels",
            &[("cluster", "nowhere"), ("env", "test"), ("team", "kafka")]
        ),
        Some(1.0)
    );
    // Expiring it again finds it ended; an unknown id is refused with exit 1.
    let out = silence(&["expire", "-c", cfg, "s-000000000000"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no silence"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn silences_are_checked_and_come_from_the_file_too() {
    let sink = Receiver::start();
    let w = daemon(
        "silence-config",
        &sink,
        "silences:\n  - cluster: nowhere\n    kind: cluster_unreachable\n    ends_at: '2999-01-01T00:00:00Z'\n    comment: known dead test cluster\n",
    );
    let cfg = w.dir.join("watchdog.yaml");
    let cfg = cfg.to_str().unwrap();
    // The file's silence holds from the first round: the receiver never hears of it.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let status = w.status();
        let found = status["incidents"].as_array().and_then(|a| {
            a.iter()
                .find(|i| i["kind"] == "cluster_unreachable")
                .cloned()
        });
        if let Some(i) = found {
            assert_eq!(i["silenced"]["comment"], "known dead test cluster", "{i:#}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{status:#}");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        sink.received()
            .iter()
            .all(|v| v["kind"] != "cluster_unreachable"),
        "{:#?}",
        sink.received()
    );
    // A file silence cannot be expired from outside.
    let listed = text(&silence(&["list", "-c", cfg]).stdout);
    let id = listed.split_whitespace().next().unwrap().to_string();
    let out = silence(&["expire", "-c", cfg, &id]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("configuration file"),
        "{}",
        text(&out.stderr)
    );
    // Requests are checked, with a sentence.
    for (args, says) in [
        (
            vec![
                "--cluster",
                "elsewhere",
                "--duration",
                "1h",
                "--comment",
                "x",
            ],
            "not watched",
        ),
        (
            vec!["--duration", "31d", "--comment", "x"],
            "at most 30 days",
        ),
        (
            vec!["--kind", "zombies", "--duration", "1h", "--comment", "x"],
            "one of: broker",
        ),
        (
            vec!["--duration", "1h", "--comment", " "],
            "comment is required",
        ),
    ] {
        let mut all = vec!["add", "-c", cfg];
        all.extend(args.iter());
        let out = silence(&all);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            text(&out.stderr).contains(says),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    // No daemon there: exit 3.
    let out = silence(&["list", "--url", "http://127.0.0.1:1"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
}
