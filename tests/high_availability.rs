//! Two watchdogs on one cluster (issue 9): each has its own instance id, both canaries work
//! on the same canary topic, neither judges the other's records lost, and their webhooks for
//! the same fault carry the same deduplication key, so Alertmanager or PagerDuty merges them.

mod common;

use std::time::Duration;

use common::watchdog::{
    free_port, is_event, metric_sum, metric_value, Receiver, Watchdog, WatchdogSettings,
};
use common::{eventually, lab, unique_topic};

const WAIT: Duration = Duration::from_secs(120);

fn start(instance: &str, canary_topic: &str, rx: &Receiver) -> Watchdog {
    let s = WatchdogSettings {
        canary_yaml: format!("      topic: {canary_topic}\n      lost_after_secs: 10\n"),
        extra_cluster_yaml: "    verdict:\n      open_after_secs: 2\n      resolve_after_secs: 2\n"
            .into(),
        extra_top_yaml: rx.yaml(),
        ..WatchdogSettings::default()
    };
    Watchdog::start_yaml(&format!("ha-{instance}"), |port, dir| {
        Watchdog::config_yaml(port, dir, &s)
            .replace("instance_id: test", &format!("instance_id: {instance}"))
    })
}

#[test]
fn two_instances_share_the_canary_topic_and_the_deduplication_keys() {
    let mut lab = lab();
    let topic = unique_topic("kwc-ha");
    let rx = Receiver::start();
    let a = start("dc-a", &topic, &rx);
    let b = start("dc-b", &topic, &rx);
    // Both canaries round-trip on every partition, reading each other's records as well.
    for w in [&a, &b] {
        eventually(WAIT, "canary round trips on every broker", || {
            let scrape = w.metrics();
            (1..=3)
                .all(|id| {
                    metric_value(
                        &scrape,
                        "kafka_watchdog_canary_end_to_end_seconds_count",
                        &[("broker", &id.to_string())],
                    )
                    .is_some_and(|n| n >= 3.0)
                })
                .then_some(())
        });
    }
    // Longer than lost_after (10 s): a record judged by the wrong instance would be lost by now.
    std::thread::sleep(Duration::from_secs(25));
    for (name, w) in [("dc-a", &a), ("dc-b", &b)] {
        let scrape = w.metrics();
        assert_eq!(
            metric_sum(&scrape, "kafka_watchdog_canary_records_lost_total", &[]),
            0.0,
            "{name} judged no record lost"
        );
        assert_eq!(
            metric_sum(
                &scrape,
                "kafka_watchdog_canary_records_duplicated_total",
                &[]
            ),
            0.0,
            "{name} saw no duplicate"
        );
        let c = w.canary();
        assert!(c["lost"].as_array().unwrap().is_empty(), "{name}: {c:#}");
    }
    assert!(
        rx.received().is_empty(),
        "a healthy cluster watched twice raises nothing: {:#?}",
        rx.received()
    );

    // One fault, seen by both: two notifications, one deduplication key.
    lab.freeze(2).unwrap();
    let from = |instance: &'static str| {
        move |v: &serde_json::Value| {
            is_event(v, "opened", "broker", Some(2))
                && v["state"] == "zombie"
                && v["instance_id"] == instance
        }
    };
    let va = rx.wait("dc-a opened broker 2 zombie", WAIT, from("dc-a"));
    let vb = rx.wait("dc-b opened broker 2 zombie", WAIT, from("dc-b"));
    assert_eq!(va["dedup_key"], vb["dedup_key"], "{va:#}\n{vb:#}");
    assert_eq!(va["dedup_key"], "kafka-watchdog/lab/broker-2/broker");
    assert_ne!(va["notification_id"], vb["notification_id"]);
    lab.thaw(2).unwrap();
    for instance in ["dc-a", "dc-b"] {
        rx.wait(&format!("{instance} resolved broker 2"), WAIT, |v| {
            is_event(v, "resolved", "broker", Some(2)) && v["instance_id"] == instance
        });
    }
    drop((a, b));
    let _ = kafka_lab::client::delete_topic(&lab.bootstrap(), &topic);
}

/// Peers of the three instances of the fleet test: each listens on its own loopback
/// address, from which its requests to the others leave, so one iptables rule can cut
/// them from each other and from nothing else.
const FLEET: [(&str, [u8; 4]); 3] = [
    ("wd-a", [127, 0, 0, 41]),
    ("wd-b", [127, 0, 0, 42]),
    ("wd-c", [127, 0, 0, 43]),
];
const TAKEOVER_SECS: u64 = 3;
/// The test's own iptables chain: the instances' traffic to each other, dropped.
const PARTITION_CHAIN: &str = "KW-TEST-PEERS";

/// Runs iptables; whether it succeeded (its complaints are the caller's to judge).
fn ipt(args: &[&str]) -> bool {
    std::process::Command::new("iptables")
        .args(["-w", "5"])
        .args(args)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Cuts the instances from each other until dropped.
struct Partition;

impl Partition {
    fn start() -> Partition {
        let _ = ipt(&["-N", PARTITION_CHAIN]);
        assert!(ipt(&[
            "-A",
            PARTITION_CHAIN,
            "-s",
            "127.0.0.40/29",
            "-d",
            "127.0.0.40/29",
            "-p",
            "tcp",
            "-j",
            "DROP"
        ]));
        assert!(ipt(&["-I", "OUTPUT", "1", "-j", PARTITION_CHAIN]));
        Partition
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        while ipt(&["-D", "OUTPUT", "-j", PARTITION_CHAIN]) {}
        let _ = ipt(&["-F", PARTITION_CHAIN]);
        let _ = ipt(&["-X", PARTITION_CHAIN]);
    }
}

fn fleet_member(index: usize, ports: &[u16; 3], generic: &Receiver, slack: &Receiver) -> Watchdog {
    let (name, ip) = FLEET[index];
    let host = std::net::IpAddr::from(ip);
    let peers: Vec<String> = FLEET
        .iter()
        .zip(ports)
        .map(|((_, ip), port)| format!("http://{}:{port}", std::net::IpAddr::from(*ip)))
        .collect();
    let hooks = format!(
        "webhooks:\n  - name: chat\n    url: {}\n    format: slack\n    min_severity: info\n    repeat_interval_secs: 0\n    group_interval_secs: 0\n  - name: sink\n    url: {}\n    format: generic\n    min_severity: info\n    repeat_interval_secs: 0\n    group_interval_secs: 0\n",
        slack.url(),
        generic.url()
    );
    let s = WatchdogSettings {
        canary_yaml: "      enabled: false\n".into(),
        extra_cluster_yaml: "    verdict:\n      open_after_secs: 2\n      resolve_after_secs: 2\n"
            .into(),
        extra_top_yaml: format!(
            "{hooks}peers:\n  urls: [{}]\n  poll_interval_ms: 500\n  takeover_secs: {TAKEOVER_SECS}\n  key_file: {{peer_key}}\n",
            peers.join(", ")
        ),
        ..WatchdogSettings::default()
    };
    Watchdog::start_at(&format!("fleet-{name}"), host, ports[index], |port, dir| {
        // The key every member shares (issue 38 item 5).
        let key = dir.join("peer-key");
        std::fs::write(&key, "the-fleet's-peer-key-of-at-least-32-characters").unwrap();
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        Watchdog::config_yaml(port, dir, &s)
            .replace("{peer_key}", &key.display().to_string())
            .replace("instance_id: test", &format!("instance_id: {name}"))
            .replace(
                &format!("listen: 127.0.0.1:{port}"),
                &format!("listen: {host}:{port}"),
            )
    })
}

fn answering(w: &Watchdog) -> f64 {
    w.metric("kafka_watchdog_peers_answering", &[])
        .unwrap_or(-1.0)
}

/// Bodies from `instance` of `event` about broker 2.
fn generic_from(rx: &Receiver, event: &str, instance: Option<&str>) -> Vec<serde_json::Value> {
    rx.received()
        .into_iter()
        .filter(|v| {
            is_event(v, event, "broker", Some(2)) && instance.is_none_or(|i| v["instance_id"] == i)
        })
        .collect()
}

/// Slack messages of `event` ("opened", "resolved after") about broker 2.
fn slack_of(rx: &Receiver, event: &str) -> usize {
    rx.received()
        .iter()
        .filter(|v| {
            v["text"]
                .as_str()
                .is_some_and(|t| t.contains(&format!("broker: {event}")) && t.contains("broker 2"))
        })
        .count()
}

/// Broker 2's `event` reaches each receiver once, from `sender`: it waits for the generic
/// body, then for every other instance's turn to pass (two takeovers), then counts.
/// `event` is (the generic body's event, the Slack headline's word).
fn delivered_once(generic: &Receiver, slack: &Receiver, event: (&str, &str), sender: &str) {
    let (generic_event, slack_event) = event;
    let got = generic.wait(&format!("{generic_event} broker 2"), WAIT, |v| {
        is_event(v, generic_event, "broker", Some(2))
    });
    assert_eq!(got["instance_id"], sender, "{got:#}");
    std::thread::sleep(Duration::from_secs(2 * TAKEOVER_SECS + 3));
    let all = generic_from(generic, generic_event, None);
    assert_eq!(all.len(), 1, "{:#?}", generic.received());
    assert_eq!(slack_of(slack, slack_event), 1, "{:#?}", slack.received());
}

/// A change to silences through one instance's API, the loopback way (its local token):
/// the status line and the JSON answer.
fn silences_api(w: &Watchdog, method: &str, path: &str, body: &str) -> (String, serde_json::Value) {
    use std::io::{Read, Write};
    let token = std::fs::read_to_string(w.dir.join("state").join("api-token")).expect("token");
    let mut s = std::net::TcpStream::connect((w.host, w.port)).expect("connect");
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        w.host,
        token.trim(),
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, json) = raw.split_once("\r\n\r\n").unwrap_or_default();
    let status = head.lines().next().unwrap_or_default().to_string();
    (status, serde_json::from_str(json).unwrap_or_default())
}

fn silence_of(w: &Watchdog, id: &str) -> Option<serde_json::Value> {
    let (_, body) = w.get("/api/v1/silences").ok()?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["silences"]
        .as_array()?
        .iter()
        .find(|s| s["id"] == id)
        .cloned()
}

/// Issue 28 item 1, on the lab with three instances: one event is one Slack message; a
/// silence added on one holds on the others within 5 s; the sender killed during an open
/// incident, another delivers its resolve; cut apart, each delivers (duplicates, none lost).
#[test]
fn three_peers_page_once_share_silences_hand_over_and_each_page_when_cut_apart() {
    let mut lab = lab();
    let generic = Receiver::start();
    let slack = Receiver::start();
    let ports = [free_port(), free_port(), free_port()];
    let mut fleet: Vec<Option<Watchdog>> = (0..3)
        .map(|i| Some(fleet_member(i, &ports, &generic, &slack)))
        .collect();
    for w in fleet.iter().flatten() {
        eventually(WAIT, "every instance hears the two others", || {
            (answering(w) == 2.0).then_some(())
        });
    }
    // The peers' families the alert rules read exist where peers: is configured.
    common::watchdog::dashboard_metrics_exist(
        fleet[0].as_ref().unwrap(),
        common::watchdog::peers_metric,
    );

    // A silence added on wd-a holds on wd-b and wd-c within 5 s; expired on wd-c, it
    // ends on wd-a and wd-b too.
    let a = fleet[0].as_ref().unwrap();
    let (status, added) = silences_api(
        a,
        "POST",
        "/api/v1/silences",
        r#"{"cluster": "lab", "broker": 3, "duration": "1h", "comment": "fleet test"}"#,
    );
    assert!(status.contains(" 201"), "{status} {added:#}");
    let id = added["id"].as_str().unwrap().to_string();
    let since = std::time::Instant::now();
    for w in fleet[1..].iter().flatten() {
        eventually(
            Duration::from_secs(5),
            "the silence reaches the peer",
            || silence_of(w, &id).filter(|s| s["active"] == true),
        );
    }
    println!(
        "silence on every peer {:.1} s after it was added",
        since.elapsed().as_secs_f64()
    );
    assert!(since.elapsed() <= Duration::from_secs(5));
    let c = fleet[2].as_ref().unwrap();
    let (status, expired) = silences_api(c, "DELETE", &format!("/api/v1/silences/{id}"), "");
    assert!(status.contains(" 200"), "{status} {expired:#}");
    for w in fleet[..2].iter().flatten() {
        eventually(
            Duration::from_secs(5),
            "the expiry reaches the peer",
            || silence_of(w, &id).filter(|s| s["active"] == false),
        );
    }
    // A silence outlives an instance's restart on an empty state directory (a pod on an
    // emptyDir): wd-c, started anew, takes it from its peers at its first look.
    let (status, kept) = silences_api(
        fleet[1].as_ref().unwrap(),
        "POST",
        "/api/v1/silences",
        r#"{"cluster": "lab", "broker": 3, "duration": "1h", "comment": "fleet test, kept"}"#,
    );
    assert!(status.contains(" 201"), "{status} {kept:#}");
    let kept = kept["id"].as_str().unwrap().to_string();
    eventually(Duration::from_secs(5), "the silence reaches wd-c", || {
        silence_of(fleet[2].as_ref().unwrap(), &kept)
    });
    // Started anew: `Watchdog::start_at` gives it an empty folder, state directory included.
    fleet[2] = None;
    fleet[2] = Some(fleet_member(2, &ports, &generic, &slack));
    let restarted = fleet[2].as_ref().unwrap();
    eventually(
        Duration::from_secs(5),
        "wd-c, restarted, holds the silence again",
        || silence_of(restarted, &kept).filter(|s| s["active"] == true),
    );
    eventually(WAIT, "wd-c hears the two others again", || {
        (answering(restarted) == 2.0).then_some(())
    });

    // One fault: one Slack message and one generic body, from wd-a, the first in line.
    lab.freeze(2).unwrap();
    delivered_once(&generic, &slack, ("opened", "opened"), "wd-a");
    for w in fleet[1..].iter().flatten() {
        let left = metric_sum(
            &w.metrics(),
            "kafka_watchdog_webhook_deliveries_total",
            &[("outcome", "peer")],
        );
        assert!(
            left >= 2.0,
            "each other instance left both receivers' opened to wd-a: {left}"
        );
    }

    // The sender dies with the incident open: the next in line delivers the resolve.
    fleet[0] = None;
    lab.thaw(2).unwrap();
    delivered_once(&generic, &slack, ("resolved", "resolved after"), "wd-b");

    // Cut apart: each instance is first in its own line and delivers.
    let cut = Partition::start();
    for w in fleet.iter().flatten() {
        eventually(WAIT, "the instances lose each other", || {
            (answering(w) == 0.0).then_some(())
        });
    }
    lab.freeze(2).unwrap();
    for instance in ["wd-b", "wd-c"] {
        generic.wait(
            &format!("{instance} opened broker 2 while cut off"),
            WAIT,
            |v| is_event(v, "opened", "broker", Some(2)) && v["instance_id"] == instance,
        );
    }
    lab.thaw(2).unwrap();
    for instance in ["wd-b", "wd-c"] {
        generic.wait(
            &format!("{instance} resolved broker 2 while cut off"),
            WAIT,
            |v| is_event(v, "resolved", "broker", Some(2)) && v["instance_id"] == instance,
        );
    }
    drop(cut);
    assert_eq!(
        slack_of(&slack, "opened"),
        3,
        "one before the cut, two (duplicates) during it"
    );
    drop(fleet);
}
