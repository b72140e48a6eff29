//! Forged peer answers (issue 38 item 5). Each forger is a small HTTP server in this bench
//! answering `GET /api/v1/peer` the way an attacker on the path, an impostor, or a replica
//! gone wrong would; each is the only peer of a watchdog of its own, all at once. Forgers
//! that do not hold the peer key sign the protocol's way (HMAC-SHA256 over the ask's nonce
//! and the body, as `alert::peers::auth` documents it) with what they have; the one that
//! holds the key signs with the same code, which proves the forgers' signing right: its
//! answers are taken, and only the API's checks stand between its silence and the mute.
//!
//! The replayed and altered answers are a real peer's: a second watchdog holding the key
//! and a silence added through its CLI, asked by the bench with an ask signed with the key.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use kafka_watchdog::alert::peers::auth::{Nonce, PeerKey, HEADER};
use kafka_watchdog_test_support::watchdog::{free_port, Watchdog};
use ring::hmac;
use serde::Serialize;
use serde_json::{json, Value};

use super::stub::{Answer, Request, Stub};
use super::{launch, metric, Bins};

const KEY: &str = "the-peer-key-of-the-own-faults-bench-0123456789";
const OTHER_KEY: &str = "another-key-that-is-not-the-peers-one-9876543210";
/// The comment of every silence a forger makes up; the real peer's says "maintenance".
const MADE_UP: &str = "made up by a forger";

/// The forgeries, each with the refusal reason it must be counted under (None: the answer
/// is taken, as it is signed with the key, and its silence must be refused by the API's
/// checks instead).
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Forgery {
    /// A made-up silence of every cluster, broker and kind until 2036, no signature.
    Unsigned,
    /// The same, signed for the ask, with another key.
    OtherKey,
    /// The real peer's signed answer to an earlier ask, sent again.
    Replayed,
    /// The real peer's answer to this very ask (forwarded to it), a made-up silence
    /// added to its body, its signature kept.
    Altered,
    /// Signed with the key, for the ask, but no peer document.
    KeyedGarbage,
    /// Signed with the key, for the ask: the made-up silence of `unsigned` (a replica gone
    /// wrong, or a stolen key).
    KeyedMadeUpSilence,
}

impl Forgery {
    const ALL: [Forgery; 6] = [
        Forgery::Unsigned,
        Forgery::OtherKey,
        Forgery::Replayed,
        Forgery::Altered,
        Forgery::KeyedGarbage,
        Forgery::KeyedMadeUpSilence,
    ];

    fn name(self) -> &'static str {
        match self {
            Forgery::Unsigned => "unsigned",
            Forgery::OtherKey => "other-key",
            Forgery::Replayed => "replayed",
            Forgery::Altered => "altered",
            Forgery::KeyedGarbage => "keyed-garbage",
            Forgery::KeyedMadeUpSilence => "keyed-made-up-silence",
        }
    }

    /// The `peer_answers_refused_total` reason it must be counted under.
    pub fn reason(self) -> Option<&'static str> {
        match self {
            Forgery::Unsigned => Some("unsigned"),
            Forgery::OtherKey | Forgery::Replayed | Forgery::Altered => Some("bad_signature"),
            Forgery::KeyedGarbage => Some("malformed"),
            Forgery::KeyedMadeUpSilence => None,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Outcome {
    pub forgery: &'static str,
    pub expected_reason: Option<&'static str>,
    /// Asks the forger answered.
    pub answered: usize,
    /// The victim's counters at the end: answers refused by each reason, silences from
    /// peers refused by the API's checks, peers answering (answers taken lately).
    pub refused_unsigned: f64,
    pub refused_bad_signature: f64,
    pub refused_malformed: f64,
    pub silences_refused: f64,
    pub peers_answering: f64,
    /// Silences the victim holds (`GET /api/v1/silences`), "silence taken from a peer" in
    /// its log, and a forged or replayed silence in its state directory.
    pub silences_held: usize,
    pub silences_taken_logged: usize,
    pub in_state_file: bool,
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The issue's forged document: one silence of everything until 2036, by nobody.
fn made_up_answer() -> String {
    json!({
        "instance_id": "intruder",
        "version": "0.0.0",
        "clusters": ["nowhere"],
        "silences": [{
            "id": "s-0123456789ab",
            "cluster": null, "broker": null, "kind": null,
            "starts_at": unix_ms(SystemTime::now()),
            "ends_at": 2_100_000_000_000u64,
            "comment": MADE_UP,
            "created_by": "nobody",
            "origin": "api",
        }],
        "deliveries": [],
    })
    .to_string()
}

/// The nonce of an ask's header (`v1 <ms> <nonce> <mac>`): readable by anyone on the path.
fn nonce_of(ask: &Request) -> String {
    ask.header(HEADER)
        .and_then(|h| h.split_whitespace().nth(2))
        .unwrap_or_default()
        .to_string()
}

/// The answer's header for `body` to the ask with `nonce`, signed with `key`: the protocol
/// of `alert::peers::auth`, written here as an attacker who read it would.
fn sign(key: &str, nonce: &str, body: &str) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key.as_bytes());
    let input = format!("kafka-watchdog peer answer v1\n{nonce}\n{body}");
    let tag = hmac::sign(&key, input.as_bytes());
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("v1 {hex}")
}

fn signed(body: String, header: String) -> Answer {
    Answer {
        status: 200,
        headers: vec![(HEADER.to_string(), header)],
        body,
    }
}

/// A GET with one extra header: the status, the value of `HEADER` in the answer, the body.
fn get_signed(port: u16, path: &str, value: &str) -> Result<(u16, Option<String>, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{HEADER}: {value}\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").context("no HTTP answer")?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let header = head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim()
            .eq_ignore_ascii_case(HEADER)
            .then(|| v.trim().to_string())
    });
    Ok((code, header, body.to_string()))
}

/// The real peer's answer to an ask the bench signs with the key.
fn ask_real(port: u16) -> Result<(Option<String>, String)> {
    let key = PeerKey::new(KEY);
    let nonce = Nonce::fresh().context("no random nonce")?;
    let (code, header, body) =
        get_signed(port, "/api/v1/peer", &key.ask(&nonce, SystemTime::now()))?;
    if code != 200 {
        bail!("the real peer answered the bench's ask {code}: {body}");
    }
    Ok((header, body))
}

/// The forger's server for `f`; `real` is the real peer's port.
fn forger(f: Forgery, real: u16, recorded: (Option<String>, String)) -> Result<Stub> {
    Ok(Stub::start(move |ask: &Request| {
        let nonce = nonce_of(ask);
        match f {
            Forgery::Unsigned => Answer::ok(made_up_answer()),
            Forgery::OtherKey => {
                let body = made_up_answer();
                signed(body.clone(), sign(OTHER_KEY, &nonce, &body))
            }
            Forgery::Replayed => {
                let (header, body) = recorded.clone();
                signed(body, header.unwrap_or_default())
            }
            Forgery::Altered => {
                let Ok((code, header, body)) =
                    get_signed(real, "/api/v1/peer", ask.header(HEADER).unwrap_or_default())
                else {
                    return Answer {
                        status: 502,
                        headers: Vec::new(),
                        body: String::new(),
                    };
                };
                let mut doc: Value = serde_json::from_str(&body).unwrap_or_default();
                let made_up: Value = serde_json::from_str(&made_up_answer()).unwrap_or_default();
                if let (Some(s), Some(m)) = (
                    doc["silences"].as_array_mut(),
                    made_up["silences"].as_array(),
                ) {
                    s.extend(m.iter().cloned());
                }
                Answer {
                    status: code,
                    headers: vec![(HEADER.to_string(), header.unwrap_or_default())],
                    body: doc.to_string(),
                }
            }
            Forgery::KeyedGarbage => {
                let body = r#"{"not":"a peer document"}"#.to_string();
                signed(body.clone(), sign(KEY, &nonce, &body))
            }
            Forgery::KeyedMadeUpSilence => {
                let body = made_up_answer();
                signed(body.clone(), sign(KEY, &nonce, &body))
            }
        }
    })?)
}

/// The config of a watchdog watching a cluster nobody serves, with `urls` as its peers and
/// the key in `<dir>/peer-key`.
fn yaml(name: &str, port: u16, dir: &Path, urls: &str) -> Result<String> {
    std::fs::create_dir_all(dir)?;
    let key = dir.join("peer-key");
    std::fs::write(&key, KEY)?;
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    Ok(format!(
        "instance_id: {name}\nhttp:\n  listen: 127.0.0.1:{port}\nlog:\n  level: info\n\
         state_dir: {state}\nclusters:\n  - name: nowhere\n    bootstrap_servers: [127.0.0.1:1]\n    \
         round_interval_secs: 2\n    connect_timeout_ms: 1000\n    request_timeout_ms: 1000\n    \
         canary:\n      enabled: false\n\
         peers:\n  urls: [{urls}]\n  poll_interval_ms: 200\n  takeover_secs: 2\n  key_file: {key}\n",
        state = dir.join("state").display(),
        key = key.display(),
    ))
}

/// The real peer, with a silence of its own (added through the CLI, as an operator would).
fn real_peer(bins: &Bins, dir: &Path) -> Result<Watchdog> {
    let port = free_port()?;
    let run = dir.join("peer-real");
    let w = launch(
        &bins.release,
        &run,
        port,
        &yaml("real-peer", port, &run, "http://127.0.0.1:1")?,
        &[],
        Duration::from_secs(30),
    )?;
    let out = std::process::Command::new(&bins.release)
        .args(["silence", "add", "-c"])
        .arg(run.join("watchdog.yaml"))
        .args([
            "--duration",
            "1h",
            "--comment",
            "maintenance",
            "--by",
            "alice",
        ])
        .output()?;
    if !out.status.success() {
        bail!(
            "silence add on the real peer: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(w)
}

/// Every forgery against a watchdog of its own for `secs`, all at once.
pub fn run(bins: &Bins, dir: &Path, secs: u64) -> Result<Vec<Outcome>> {
    let real = real_peer(bins, dir)?;
    let recorded = ask_real(real.port)?;
    if !recorded.1.contains("maintenance") {
        bail!("the real peer's answer holds no silence: {}", recorded.1);
    }
    let mut runs = Vec::new();
    for f in Forgery::ALL {
        let stub = forger(f, real.port, recorded.clone())?;
        let port = free_port()?;
        let run = dir.join(format!("peer-{}", f.name()));
        let w = launch(
            &bins.release,
            &run,
            port,
            &yaml(&format!("victim-{}", f.name()), port, &run, &stub.url())?,
            &[],
            Duration::from_secs(30),
        )?;
        runs.push((f, stub, w));
    }
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(secs).saturating_sub(started.elapsed()));
    let outcomes = runs
        .iter()
        .map(|(f, stub, w)| outcome(*f, stub, w))
        .collect::<Result<Vec<_>>>()?;
    for o in &outcomes {
        println!("  peers: {o:?}");
    }
    drop(runs);
    drop(real);
    Ok(outcomes)
}

fn outcome(f: Forgery, stub: &Stub, w: &Watchdog) -> Result<Outcome> {
    let (_, page) = w.get("/metrics")?;
    let refused = |r: &str| {
        metric(
            &page,
            "kafka_watchdog_peer_answers_refused_total",
            &[("reason", r)],
        )
        .unwrap_or(0.0)
    };
    let (code, body) = w.get("/api/v1/silences")?;
    if code != 200 {
        bail!("GET /api/v1/silences of victim-{}: {code} {body}", f.name());
    }
    let held: Value = serde_json::from_str(&body)?;
    let state = std::fs::read_to_string(w.dir.join("state/silences.json")).unwrap_or_default();
    Ok(Outcome {
        forgery: f.name(),
        expected_reason: f.reason(),
        answered: stub.requests().len(),
        refused_unsigned: refused("unsigned"),
        refused_bad_signature: refused("bad_signature"),
        refused_malformed: refused("malformed"),
        silences_refused: metric(&page, "kafka_watchdog_peer_silences_refused_total", &[])
            .unwrap_or(0.0),
        peers_answering: metric(&page, "kafka_watchdog_peers_answering", &[]).unwrap_or(0.0),
        silences_held: held["silences"].as_array().map_or(0, Vec::len),
        silences_taken_logged: w.log().matches("silence taken from a peer").count(),
        in_state_file: state.contains(MADE_UP) || state.contains("maintenance"),
    })
}
