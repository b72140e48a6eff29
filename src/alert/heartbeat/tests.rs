use super::*;
use crate::config::Secret;
use crate::model::progress::Watched;
use std::sync::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn cfg(format: HeartbeatFormat, url: &str, interval: Duration) -> HeartbeatConfig {
    HeartbeatConfig {
        url: Secret::new(url),
        target: "http://receiver".into(),
        format,
        interval,
        timeout: Duration::from_secs(2),
        ca_file: None,
    }
}

fn t(s: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
}

fn seeing() -> Sight {
    Sight {
        watched: 3,
        stuck: Vec::new(),
    }
}

fn blind() -> Sight {
    Sight {
        watched: 3,
        stuck: vec!["the round loop of cluster orders: no progress for 45 s (allowed 30 s)".into()],
    }
}

#[test]
fn each_format_beats_in_the_shape_its_receiver_expects() {
    let min = Duration::from_secs(60);
    let hc = cfg(
        HeartbeatFormat::Healthchecks,
        "https://hc.example/ping/abc/",
        min,
    );
    let b = beat(&hc, "wd-1", &seeing(), t(0), t(100)).unwrap();
    assert_eq!(b.method, reqwest::Method::POST);
    assert_eq!(b.url, "https://hc.example/ping/abc/");
    let b = beat(&hc, "wd-1", &blind(), t(0), t(100)).unwrap();
    assert_eq!(
        b.url, "https://hc.example/ping/abc/fail",
        "healthchecks.io's failure signal"
    );
    assert!(b
        .body
        .unwrap()
        .1
        .contains("the round loop of cluster orders"));

    let pd = cfg(
        HeartbeatFormat::PagerDuty,
        "https://ping.example/hb/xyz",
        min,
    );
    let b = beat(&pd, "wd-1", &seeing(), t(0), t(100)).unwrap();
    assert_eq!(
        (b.method, b.url.as_str(), b.body),
        (reqwest::Method::GET, "https://ping.example/hb/xyz", None)
    );
    assert_eq!(
        beat(&pd, "wd-1", &blind(), t(0), t(100)),
        None,
        "silence is the alarm"
    );

    let am = cfg(
        HeartbeatFormat::Alertmanager,
        "http://am:9093/api/v2/alerts",
        min,
    );
    let b = beat(&am, "wd-1", &seeing(), t(0), t(100)).unwrap();
    let (content_type, body) = b.body.unwrap();
    assert_eq!(content_type, "application/json");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v[0]["labels"]["alertname"], ALERT_NAME);
    assert_eq!(v[0]["labels"]["watchdog_instance"], "wd-1");
    assert_eq!(v[0]["startsAt"], crate::model::time::rfc3339(t(0)));
    assert_eq!(
        v[0]["endsAt"],
        crate::model::time::rfc3339(t(280)),
        "three intervals ahead"
    );
    let b = beat(&am, "wd-1", &blind(), t(0), t(100)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&b.body.unwrap().1).unwrap();
    assert_eq!(
        v[0]["endsAt"],
        crate::model::time::rfc3339(t(100)),
        "ended at once"
    );
}

/// What a local receiver got: "METHOD PATH" and the body.
type Got = Arc<Mutex<Vec<(String, String)>>>;

/// Which request a test waits for.
type Pred = Box<dyn Fn(&(String, String)) -> bool + Send>;

/// A receiver that answers 200 to every request and keeps it.
async fn receiver() -> (String, Got) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/ping/check-1", listener.local_addr().unwrap());
    let got: Got = Arc::default();
    let keep = got.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let mut raw = Vec::new();
            let mut buf = [0u8; 4096];
            // Headers, then as much body as Content-Length says.
            let (head, body) = loop {
                let n = s.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    break (String::new(), String::new());
                }
                raw.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&raw).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if body.len() >= len {
                        break (head.to_string(), body.to_string());
                    }
                }
            };
            let line: Vec<&str> = head.split_whitespace().take(2).collect();
            keep.lock().unwrap().push((line.join(" "), body));
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nOK")
                .await;
        }
    });
    (url, got)
}

/// Issue 38 item 2: the watchdog beats while its loops make progress, and once a cluster's
/// round loop is stuck its receiver is told (healthchecks.io's `/fail`, naming the loop);
/// once the loop turns again the beats are plain again. Before, nothing outside the
/// watchdog heard of it going blind or stopping.
#[tokio::test]
async fn beats_while_seeing_and_says_fail_when_a_round_loop_is_stuck() {
    let (url, got) = receiver().await;
    let progress = Arc::new(Progress::new());
    progress.watch(
        Watched::ClusterLoop("orders".into()),
        Duration::from_secs(30),
        Instant::now(),
    );
    let mut c = cfg(
        HeartbeatFormat::Healthchecks,
        &url,
        Duration::from_millis(200),
    );
    c.timeout = Duration::from_millis(150);
    let (config, config_rx) = watch::channel(Some(c));
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(run(config_rx, progress.clone(), "wd-1".into(), stop_rx));
    let wait_for = |what: &'static str, pred: Pred| {
        let got = got.clone();
        async move {
            tokio::time::timeout(Duration::from_secs(5), async {
                loop {
                    if let Some(hit) = got.lock().unwrap().iter().find(|g| pred(g)).cloned() {
                        return hit;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await
            .unwrap_or_else(|_| panic!("no beat {what}: {:?}", got.lock().unwrap()))
        }
    };
    let first = wait_for("while seeing", Box::new(|(l, _)| l == "POST /ping/check-1")).await;
    assert!(first.1.contains("1 loops make progress"), "{first:?}");
    // The loop last progressed 100 s ago: it is stuck now.
    if let Some(long_ago) = Instant::now().checked_sub(Duration::from_secs(100)) {
        progress.watch(
            Watched::ClusterLoop("orders".into()),
            Duration::from_secs(30),
            long_ago,
        );
        let fail = wait_for(
            "saying fail",
            Box::new(|(l, _)| l == "POST /ping/check-1/fail"),
        )
        .await;
        assert!(
            fail.1
                .contains("the round loop of cluster orders: no progress for 100 s"),
            "{fail:?}"
        );
        got.lock().unwrap().clear();
        // It turns again: plain beats again.
        let again = progress.watch(
            Watched::ClusterLoop("orders".into()),
            Duration::from_secs(30),
            long_ago,
        );
        again.tick();
        wait_for(
            "once it turns again",
            Box::new(|(l, _)| l == "POST /ping/check-1"),
        )
        .await;
    }
    // A reload that removes the block stops the beats.
    config.send_replace(None);
    tokio::time::sleep(Duration::from_millis(100)).await;
    got.lock().unwrap().clear();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        got.lock().unwrap().is_empty(),
        "no beat without a heartbeat block"
    );
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(1), task)
        .await
        .expect("stops")
        .unwrap();
}

/// Issue 39 item 2: a ping URL read from `url_file` (it carries the check's token) follows
/// the file: the next beat goes to the URL it holds now, with no reload.
#[tokio::test]
async fn a_rotated_url_file_is_used_by_the_next_beat() {
    let (url, got) = receiver().await;
    let dir = std::env::temp_dir().join(format!("kw-heartbeat-url-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("url");
    std::fs::write(&file, format!("{url}\n")).unwrap();
    let mut c = cfg(HeartbeatFormat::PagerDuty, &url, Duration::from_millis(200));
    c.url = Secret::from_file(url.clone(), file.clone());
    c.timeout = Duration::from_millis(150);
    let (_config, config_rx) = watch::channel(Some(c));
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(run(
        config_rx,
        Arc::new(Progress::new()),
        "wd-1".into(),
        stop_rx,
    ));
    let beat_at = |line: &'static str| {
        let got = got.clone();
        async move {
            tokio::time::timeout(Duration::from_secs(5), async {
                while !got.lock().unwrap().iter().any(|(l, _)| l == line) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await
            .unwrap_or_else(|_| panic!("no beat at {line}: {:?}", got.lock().unwrap()))
        }
    };
    beat_at("GET /ping/check-1").await;
    std::fs::write(&file, url.replace("check-1", "check-2")).unwrap();
    crate::config::live::look_all();
    beat_at("GET /ping/check-2").await;
    stop.send(true).unwrap();
    let _ = task.await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 39 item 2: `ca_file` follows its file. The receiver's certificate was renewed
/// under a new CA: while the file holds the old CA a beat does not reach it; once it holds
/// the new one, the next beat does (the watchdog's own HTTPS server stands in for the
/// receiver and answers 404: an answer, so the TLS session was made).
#[tokio::test]
async fn a_rotated_ca_file_is_trusted_by_the_next_beat() {
    const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/observe/wire/testdata");
    let listener = crate::serve::http::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let tls = crate::config::HttpTlsConfig {
        cert_file: format!("{TESTDATA}/renewed-server.pem").into(),
        key_file: format!("{TESTDATA}/renewed-server.key").into(),
    };
    let (_stop, stop_rx) = watch::channel(false);
    tokio::spawn(crate::serve::http::serve_with(
        Arc::new(listener),
        crate::serve::snapshot::Publisher::new("rx", Vec::new()),
        stop_rx,
        crate::serve::http::ServeOptions {
            tls: Some(tokio_rustls::TlsAcceptor::from(
                tls.server_config().unwrap(),
            )),
            ..Default::default()
        },
    ));
    let dir = std::env::temp_dir().join(format!("kw-heartbeat-ca-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.crt");
    std::fs::write(&ca, std::fs::read(format!("{TESTDATA}/ca.pem")).unwrap()).unwrap();
    let url = format!("https://localhost:{port}/ping/check-1");
    let mut c = cfg(HeartbeatFormat::PagerDuty, &url, Duration::from_secs(1));
    c.ca_file = Some(ca.clone());
    let client = client(&c).unwrap();
    let one = || beat(&c, "wd-1", &seeing(), t(0), t(0)).unwrap();
    let before = send(&client.get(), one()).await;
    assert!(
        before.as_ref().is_err_and(|e| !e.starts_with("answered")),
        "{before:?}"
    );
    std::fs::write(
        &ca,
        std::fs::read(format!("{TESTDATA}/renewed-ca.pem")).unwrap(),
    )
    .unwrap();
    crate::config::live::look_all();
    let after = send(&client.get(), one()).await;
    assert_eq!(after, Err("answered 404 Not Found".to_string()));
    let _ = std::fs::remove_dir_all(&dir);
}
