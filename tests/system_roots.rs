//! Webhooks, peers and the heartbeat over HTTPS trust the system's trust roots, as
//! docs/config.md says (issue 38 item 10): before, their clients trusted only the Mozilla
//! roots built into the binary, so a receiver or peer whose certificate an internal CA
//! installed on the host signed was refused. The daemon is given the test CA as its whole system store
//! (`SSL_CERT_FILE`, which the system store reader honours) and no `ca_file`; the
//! receiver here is HTTPS with a certificate that CA signed. No Kafka needed: the cluster
//! is an address where nothing listens, which pages `cluster_unreachable`.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::watchdog::{free_port, Watchdog};
use kafka_watchdog::config::HttpTlsConfig;
use tokio_rustls::rustls::{ServerConnection, StreamOwned};

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/observe/wire/testdata");

/// An HTTPS server on loopback that answers every request 200 with `{}` and keeps each
/// request's first line and body.
struct TlsSink {
    port: u16,
    got: Arc<Mutex<Vec<(String, String)>>>,
}

impl TlsSink {
    fn start() -> TlsSink {
        let config = HttpTlsConfig {
            cert_file: format!("{TESTDATA}/server.pem").into(),
            key_file: format!("{TESTDATA}/server.key").into(),
        }
        .server_config()
        .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let keep = got.clone();
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let (config, keep) = (config.clone(), keep.clone());
                std::thread::spawn(move || {
                    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
                    let tls = ServerConnection::new(config).unwrap();
                    let mut stream = BufReader::new(StreamOwned::new(tls, tcp));
                    while let Some(request) = read_request(&mut stream) {
                        keep.lock().unwrap().push(request);
                        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                        if stream.get_mut().write_all(answer.as_bytes()).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        TlsSink { port, got }
    }

    fn url(&self) -> String {
        format!("https://localhost:{}", self.port)
    }

    fn wait(&self, what: &str, pred: impl Fn(&(String, String)) -> bool) {
        let end = Instant::now() + Duration::from_secs(60);
        while Instant::now() < end {
            if self.got.lock().unwrap().iter().any(&pred) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "no {what} within 60 s; received: {:?}",
            self.got.lock().unwrap()
        );
    }
}

/// One HTTP/1.1 request: its first line and its body (by content-length); `None` when the
/// connection ends or the TLS handshake failed.
fn read_request(r: &mut impl BufRead) -> Option<(String, String)> {
    let mut first = String::new();
    if r.read_line(&mut first).ok()? == 0 {
        return None;
    }
    let mut length = 0;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body).ok()?;
    Some((
        first.trim_end().to_string(),
        String::from_utf8_lossy(&body).into_owned(),
    ))
}

#[test]
fn webhooks_peers_and_the_heartbeat_trust_the_systems_roots() {
    let sink = TlsSink::start();
    let url = sink.url();
    let ca = format!("{TESTDATA}/ca.pem");
    let _w = Watchdog::start_with_env(
        "system-roots",
        kafka_watchdog_test_support::watchdog::LOOPBACK,
        free_port(),
        &[
            ("SSL_CERT_FILE", &ca),
            ("KW_TEST_PEER_KEY", "a-peer-key-of-at-least-32-characters"),
        ],
        move |port, dir| {
            format!(
                "instance_id: roots-a\nhttp:\n  listen: 127.0.0.1:{port}\nstate_dir: {state}\n\
                 clusters:\n  - name: nowhere\n    bootstrap_servers: [127.0.0.1:1]\n    \
                 round_interval_secs: 2\n    connect_timeout_ms: 1000\n    request_timeout_ms: 1000\n    \
                 canary:\n      enabled: false\n    verdict:\n      open_after_secs: 0\n\
                 webhooks:\n  - name: internal\n    url: {url}/hook\n    format: generic\n    min_severity: info\n\
                 peers:\n  urls: [{url}]\n  poll_interval_ms: 500\n  key_env: KW_TEST_PEER_KEY\n\
                 heartbeat:\n  url: {url}/ping/kw\n  interval_secs: 10\n",
                state = dir.join("state").display(),
            )
        },
    );
    sink.wait("webhook over HTTPS", |(line, body)| {
        line.starts_with("POST /hook") && body.contains("cluster_unreachable")
    });
    sink.wait("peer request over HTTPS", |(line, _)| {
        line.starts_with("GET /api/v1/peer")
    });
    sink.wait("heartbeat over HTTPS", |(line, _)| {
        line.starts_with("POST /ping/kw")
    });
}
