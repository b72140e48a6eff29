//! Peers that prove who they are (issue 38 item 5), against the real binary with no lab: a
//! daemon whose one cluster cannot be reached, asking a fake peer (a small HTTP server in
//! this test) or a real one.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::watchdog::{free_port, temp_dir, Watchdog};

const KEY: &str = "a-peer-key-of-at-least-32-characters-0123456789";

/// A daemon watching a cluster nobody serves, with `top` (top-level lines) in its file and
/// the peer key in `<dir>/peer-key`.
fn daemon(name: &str, top: &str) -> Watchdog {
    let top = top.to_string();
    Watchdog::start_yaml(name, move |port, dir| {
        let key = dir.join("peer-key");
        std::fs::write(&key, KEY).unwrap();
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        format!(
            "instance_id: {name}\nhttp:\n  listen: 127.0.0.1:{port}\nstate_dir: {state}\n\
             clusters:\n  - name: nowhere\n    bootstrap_servers: [127.0.0.1:1]\n    \
             round_interval_secs: 2\n    connect_timeout_ms: 1000\n    request_timeout_ms: 1000\n    \
             canary:\n      enabled: false\n{top}",
            state = dir.join("state").display(),
            top = top.replace("{key}", &key.display().to_string()),
        )
    })
}

/// A server answering every request with `body` (and `extra` header lines), keeping the
/// request heads it got.
struct FakePeer {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl FakePeer {
    fn start(body: String, extra: String) -> FakePeer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = heads.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                }
                seen.lock().unwrap().push(head);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        FakePeer { port, heads }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

fn ms(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis()
}

/// The forged answer of the issue: one made-up silence of every cluster, broker and kind
/// until 2036, by nobody.
fn forged_answer() -> String {
    let now = SystemTime::now();
    serde_json::json!({
        "instance_id": "intruder",
        "version": "0.0.0",
        "clusters": ["nowhere"],
        "silences": [{
            "id": "s-0123456789ab",
            "cluster": null,
            "broker": null,
            "kind": null,
            "starts_at": ms(now),
            "ends_at": 2_100_000_000_000u64,
            "comment": "made up",
            "created_by": "nobody",
            "origin": "api",
        }],
        "deliveries": [],
    })
    .to_string()
}

fn silences(w: &Watchdog) -> Vec<serde_json::Value> {
    let (code, body) = w.get("/api/v1/silences").unwrap();
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["silences"].as_array().cloned().unwrap_or_default()
}

/// Waits until `f` holds, or panics with `what` after `within`.
fn wait_for(within: Duration, what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < within, "not within {within:?}: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The peers block naming `urls`, with the key (the daemon writes it at `{key}`).
fn peers_block(urls: &[String]) -> String {
    format!(
        "peers:\n  urls: [{}]\n  poll_interval_ms: 200\n  takeover_secs: 2\n  key_file: {{key}}\n",
        urls.join(", ")
    )
}

#[test]
fn a_forged_peer_is_refused_and_counted_and_its_silence_never_taken() {
    let fake = FakePeer::start(forged_answer(), String::new());
    let w = daemon("forged", &peers_block(&[fake.url()]));
    wait_for(
        Duration::from_secs(10),
        "the fake peer asked 5 times",
        || fake.heads().len() >= 5,
    );
    assert!(silences(&w).is_empty(), "{:?}", silences(&w));
    assert!(
        !w.log().contains("silence taken from a peer"),
        "{}",
        w.log()
    );
    let refused = w
        .metric(
            "kafka_watchdog_peer_answers_refused_total",
            &[("reason", "unsigned")],
        )
        .unwrap_or(0.0);
    assert!(refused >= 5.0, "refused {refused}");
}

/// A fake peer that signs is refused too when its signature is not for this ask with this
/// key, and the ask it receives carries the peer key's proof, never the `http.auth`
/// credential.
#[test]
fn an_answer_signed_with_another_key_is_refused_and_the_credential_never_leaves() {
    let fake = FakePeer::start(
        forged_answer(),
        format!("kafka-watchdog-peer: v1 {}\r\n", "ab".repeat(32)),
    );
    let peers = peers_block(&[fake.url()]);
    let w = Watchdog::start_yaml("other-key", move |port, dir| {
        let (token, key) = (dir.join("http-token"), dir.join("peer-key"));
        std::fs::write(&token, "the-http-bearer-token-of-this-test-0123456789").unwrap();
        std::fs::write(&key, KEY).unwrap();
        for f in [&token, &key] {
            std::fs::set_permissions(f, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .unwrap();
        }
        format!(
            "instance_id: other-key\nhttp:\n  listen: 127.0.0.1:{port}\n  auth:\n    bearer_token_file: {token}\n\
             state_dir: {state}\n\
             clusters:\n  - name: nowhere\n    bootstrap_servers: [127.0.0.1:1]\n    \
             canary:\n      enabled: false\n{peers}",
            token = token.display(),
            state = dir.join("state").display(),
            peers = peers.replace("{key}", &key.display().to_string()),
        )
    });
    wait_for(
        Duration::from_secs(10),
        "the fake peer asked 3 times",
        || fake.heads().len() >= 3,
    );
    for head in fake.heads() {
        let lower = head.to_ascii_lowercase();
        assert!(!lower.contains("authorization:"), "{head}");
        assert!(!lower.contains("the-http-bearer-token"), "{head}");
        assert!(lower.contains("kafka-watchdog-peer: v1 "), "{head}");
    }
    wait_for(Duration::from_secs(5), "a refusal logged", || {
        w.log().contains("answer's signature is wrong")
    });
    let state = std::fs::read_to_string(w.dir.join("state/silences.json")).unwrap_or_default();
    assert!(!state.contains("made up"), "{state}");
}

/// Two real watchdogs with the same key: a silence added on one is taken by the other.
#[test]
fn a_signed_answer_from_a_real_peer_is_taken() {
    let (port_a, port_b) = (free_port(), free_port());
    let urls = [
        format!("http://127.0.0.1:{port_a}"),
        format!("http://127.0.0.1:{port_b}"),
    ];
    let block = peers_block(&urls);
    let start = |name: &str, port: u16| {
        let top = block.clone();
        let name = name.to_string();
        Watchdog::start_at(
            &name.clone(),
            "127.0.0.1".parse().unwrap(),
            port,
            move |port, dir| {
                let key = dir.join("peer-key");
                std::fs::write(&key, KEY).unwrap();
                std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                    .unwrap();
                format!(
                    "instance_id: {name}\nhttp:\n  listen: 127.0.0.1:{port}\nstate_dir: {state}\n\
                 clusters:\n  - name: nowhere\n    bootstrap_servers: [127.0.0.1:1]\n    \
                 canary:\n      enabled: false\n{top}",
                    state = dir.join("state").display(),
                    top = top.replace("{key}", &key.display().to_string()),
                )
            },
        )
    };
    let a = start("wd-a", port_a);
    let b = start("wd-b", port_b);
    // An ask without the key's proof gets nothing but why.
    let (code, body) = a.get("/api/v1/peer").unwrap();
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("signed with the peer key"), "{body}");
    let cfg = a.dir.join("watchdog.yaml");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kafka-watchdog"))
        .args(["silence", "add", "-c", cfg.to_str().unwrap()])
        .args([
            "--duration",
            "1h",
            "--comment",
            "maintenance",
            "--by",
            "alice",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for(Duration::from_secs(10), "wd-b took wd-a's silence", || {
        silences(&b).iter().any(|s| s["comment"] == "maintenance")
    });
    assert!(b.log().contains("silence taken from a peer"), "{}", b.log());
    assert_eq!(
        b.metric("kafka_watchdog_peers_answering", &[]),
        Some(1.0),
        "wd-b hears wd-a"
    );
    for w in [&a, &b] {
        let refused: f64 = ["unsigned", "bad_signature", "malformed"]
            .iter()
            .map(|r| {
                w.metric(
                    "kafka_watchdog_peer_answers_refused_total",
                    &[("reason", r)],
                )
                .unwrap_or(0.0)
            })
            .sum();
        assert_eq!(refused, 0.0);
    }
}

/// `peers:` without a key does not start, and says what would be right.
#[test]
fn peers_without_a_key_do_not_start() {
    let dir = temp_dir("no-peer-key");
    let cfg = dir.join("watchdog.yaml");
    std::fs::write(
        &cfg,
        format!(
            "instance_id: nokey\nhttp:\n  listen: 127.0.0.1:{}\nstate_dir: {}\nclusters:\n  - name: nowhere\n    bootstrap_servers: [127.0.0.1:1]\npeers:\n  urls: [http://127.0.0.1:1]\n",
            free_port(),
            dir.join("state").display()
        ),
    )
    .unwrap();
    for args in [&["check-config", "-c"][..], &["run", "-c"][..]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kafka-watchdog"))
            .args(args)
            .arg(&cfg)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{args:?}: {err}");
        assert!(
            err.contains("watchdog.yaml:8:1: peers has no key")
                && err.contains("peers.key_file (or key_env)"),
            "{args:?}: {err}"
        );
    }
}
