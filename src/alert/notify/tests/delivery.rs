//! The spool, and delivery against a live in-process receiver that fails on cue.

use super::*;

// ---- spool ----

#[test]
fn the_spool_keeps_order_and_sequence_across_reopen() {
    let dir = temp_dir("spool");
    let (s, waiting) = spool::Spool::open(&dir).unwrap();
    assert!(waiting.is_empty());
    let seqs: Vec<u64> = (0..3).map(|_| s.reserve()).collect();
    for (i, seq) in seqs.iter().enumerate() {
        let bytes = spool::Spool::encode(&format!("entry {i}")).unwrap();
        s.write_bytes(*seq, &bytes).unwrap();
    }
    std::fs::write(dir.join(".00000000000000000099.json.tmp"), b"half").unwrap();
    s.remove(seqs[0]).unwrap();
    drop(s);
    let (s, waiting) = spool::Spool::open(&dir).unwrap();
    assert_eq!(waiting, seqs[1..].to_vec());
    assert_eq!(s.read::<String>(seqs[2]).unwrap(), "entry 2");
    assert!(s.reserve() > seqs[2]);
    assert!(
        !dir.join(".00000000000000000099.json.tmp").exists(),
        "torn write removed"
    );
    std::fs::write(dir.join(format!("{:020}.json", seqs[1])), b"{not json").unwrap();
    assert!(matches!(
        s.read::<String>(seqs[1]),
        Err(SpoolError::Corrupt { .. })
    ));
    assert_eq!(spool::dir_name(".."), "%2E%2E");
    assert_eq!(spool::dir_name("slack-ops"), "slack-ops");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- delivery against a live receiver ----

#[derive(Debug, Clone)]
struct Hit {
    status: u16,
    body: Bytes,
    headers: Vec<(String, String)>,
    at: tokio::time::Instant,
}

impl Hit {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

type Script = Arc<dyn Fn(usize) -> (u16, Option<&'static str>) + Send + Sync>;

/// An HTTP receiver that answers request n (from 0) as `script(n)` says.
struct TestReceiver {
    addr: SocketAddr,
    hits: Arc<Mutex<Vec<Hit>>>,
    /// Ticks after every request logged in `hits`, for waits without sleeping.
    logged: Arc<tokio::sync::watch::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl TestReceiver {
    async fn start(addr: SocketAddr, script: Script) -> Self {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let count = Arc::new(AtomicUsize::new(0));
        let log = hits.clone();
        let logged = Arc::new(tokio::sync::watch::Sender::new(()));
        let tick = logged.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (log, count, script) = (log.clone(), count.clone(), script.clone());
                let tick = tick.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req: HttpRequest<Incoming>| {
                        let (log, count, script) = (log.clone(), count.clone(), script.clone());
                        let tick = tick.clone();
                        async move {
                            let headers = req
                                .headers()
                                .iter()
                                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
                                .collect();
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let (status, retry_after) =
                                script(count.fetch_add(1, Ordering::SeqCst));
                            log.lock().unwrap().push(Hit {
                                status,
                                body,
                                headers,
                                at: tokio::time::Instant::now(),
                            });
                            tick.send_replace(());
                            let mut resp = Response::builder().status(status);
                            if let Some(r) = retry_after {
                                resp = resp.header("Retry-After", r);
                            }
                            Ok::<_, Infallible>(
                                resp.body(Full::new(Bytes::from_static(b"{\"why\":\"scripted\"}")))
                                    .unwrap(),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        TestReceiver {
            addr,
            hits,
            logged,
            task,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    fn delivered(&self) -> Vec<Value> {
        self.hits()
            .iter()
            .filter(|h| (200..300).contains(&h.status))
            .map(Hit::json)
            .collect()
    }

    /// What was delivered once `until` holds of it, checked after every request; after
    /// 10 s, whatever was delivered by then.
    async fn delivered_when(&self, until: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        // Subscribed before the first look, so no request in between goes unseen.
        let mut logged = self.logged.subscribe();
        let wait = async {
            loop {
                let got = self.delivered();
                if until(&got) || logged.changed().await.is_err() {
                    return got;
                }
            }
        };
        match tokio::time::timeout(Duration::from_secs(10), wait).await {
            Ok(got) => got,
            Err(_) => self.delivered(),
        }
    }

    async fn wait_delivered(&self, n: usize) -> Vec<Value> {
        self.delivered_when(|got| got.len() >= n).await
    }
}

impl Drop for TestReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn always(status: u16) -> Script {
    Arc::new(move |_| (status, None))
}

fn brokers(bodies: &[Value]) -> Vec<i64> {
    bodies
        .iter()
        .map(|v| v["broker_id"].as_i64().unwrap())
        .collect()
}

fn sequences_grow(bodies: &[Value]) -> bool {
    bodies
        .windows(2)
        .all(|w| w[0]["sequence"].as_u64() < w[1]["sequence"].as_u64())
}

fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

#[tokio::test]
async fn failing_503s_are_retried_until_all_arrive_in_order() {
    let rx = TestReceiver::start(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(|n| (if n < 3 { 503 } else { 200 }, None)),
    )
    .await;
    let dir = temp_dir("503");
    let handle = Notifier::spawn_with(
        &[hook("ops", &rx.url(), WebhookFormat::Generic)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    handle.submit(events(4));
    let got = rx.wait_delivered(4).await;
    assert_eq!(brokers(&got), vec![1, 2, 3, 4]);
    assert!(sequences_grow(&got));
    let hits = rx.hits();
    assert_eq!(hits.len(), 7, "3 refusals of the first, then 4 deliveries");
    assert!(
        hits[..4].iter().all(|h| h.json()["broker_id"] == 1),
        "head of line waits: order before speed"
    );
    let stats = handle.shutdown(Duration::from_secs(1)).await;
    let s = &stats.receivers[0];
    assert_eq!((s.ok, s.failed, s.dropped, s.queue_depth), (4, 3, 0, 0));
    assert!(s.last_success.is_some());
    assert_eq!(s.last_failure.as_deref(), Some("HTTP 503"));
    assert_eq!(
        std::fs::read_dir(dir.join("spool/ops")).unwrap().count(),
        0,
        "spool emptied"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_429_is_retried_after_the_time_it_asks_for() {
    let rx = TestReceiver::start(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(|n| {
            if n == 0 {
                (429, Some("1"))
            } else {
                (200, None)
            }
        }),
    )
    .await;
    let dir = temp_dir("429");
    let handle = Notifier::spawn_with(
        &[hook("slack", &rx.url(), WebhookFormat::Slack)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    handle.submit(events(1));
    let got = rx.wait_delivered(1).await;
    assert_eq!(got.len(), 1);
    let hits = rx.hits();
    let waited = hits[1].at.duration_since(hits[0].at);
    assert!(
        waited >= Duration::from_millis(950),
        "honoured Retry-After: waited {waited:?}"
    );
    assert!(got[0]["text"].is_string(), "a Slack body");
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_receiver_down_then_up_gets_everything_in_order() {
    let addr = free_addr();
    let dir = temp_dir("down-up");
    let handle = Notifier::spawn_with(
        &[hook(
            "ops",
            &format!("http://{addr}/hook"),
            WebhookFormat::Generic,
        )],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    handle.submit(events(3));
    handle.submit(events(5).split_off(3));
    let during = handle
        .stats_when("three failed attempts with all five queued", |s| {
            s.receivers[0].failed >= 3 && s.receivers[0].queue_depth == 5
        })
        .await;
    assert_eq!(during.receivers[0].queue_depth, 5);
    assert!(during.receivers[0].failed >= 3, "{during:?}");
    assert_eq!(during.receivers[0].ok, 0);
    let rx = TestReceiver::start(addr, always(200)).await;
    let got = rx.wait_delivered(5).await;
    assert_eq!(brokers(&got), vec![1, 2, 3, 4, 5]);
    assert!(sequences_grow(&got));
    handle.shutdown(Duration::from_secs(1)).await;
    assert_eq!(rx.hits().len(), 5, "each once");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 27 item 2: the incident book records events as told when it is saved, and the
/// events went to an in-memory inbox after that save, so a crash in between lost them for
/// good. `submit_durably` has them on disk when it returns: here delivery is stopped dead
/// (its tasks aborted, as `kill -9` would leave it) before it could route anything, and a
/// new start on the same folder delivers them.
#[tokio::test]
async fn events_submitted_durably_outlive_a_crash_before_they_are_routed() {
    let addr = free_addr();
    let dir = temp_dir("durable");
    let url = format!("http://{addr}/hook");
    let first = Notifier::spawn_with(
        &[hook("ops", &url, WebhookFormat::Generic)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    {
        let mut tasks = lock(&first.tasks);
        let t = tasks.as_mut().unwrap();
        t.dispatcher.abort();
        for w in &t.workers {
            w.abort();
        }
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    first.submit_durably(events(2)).await;
    drop(first);

    let rx = TestReceiver::start(addr, always(200)).await;
    let second = Notifier::spawn_with(
        &[hook("ops", &url, WebhookFormat::Generic)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    let got = rx.wait_delivered(2).await;
    assert_eq!(brokers(&got), vec![1, 2]);
    second.shutdown(Duration::from_secs(1)).await;
    assert_eq!(
        std::fs::read_dir(dir.join("spool-inbox")).unwrap().count(),
        0,
        "an inbox file is removed once its events are spooled"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Where the inbox cannot be written either, durable submission still queues in memory and
/// delivers: a broken disk costs the crash guarantee, never the page.
#[tokio::test]
async fn events_submitted_durably_with_an_unwritable_inbox_are_still_delivered() {
    let addr = free_addr();
    let dir = temp_dir("durable-unwritable");
    let handle = Notifier::spawn_with(
        &[hook(
            "ops",
            &format!("http://{addr}/hook"),
            WebhookFormat::Generic,
        )],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    let inbox = dir.join("spool-inbox");
    std::fs::remove_dir_all(&inbox).unwrap();
    std::fs::write(&inbox, b"not a folder").unwrap();
    handle.submit_durably(events(3)).await;
    let rx = TestReceiver::start(addr, always(200)).await;
    let got = rx.wait_delivered(3).await;
    assert_eq!(brokers(&got), vec![1, 2, 3]);
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A spool that cannot be written (disk full, read-only, out of descriptors) dropped every
/// notification for good while the incident counted as notified (issue 27 item 1). Now they
/// are kept in memory, sent from there, and counted. The spool folder is replaced by a file
/// here: every write in it fails, even as root.
#[tokio::test]
async fn a_spool_that_cannot_be_written_loses_no_notification() {
    let addr = free_addr();
    let dir = temp_dir("unwritable");
    let handle = Notifier::spawn_with(
        &[hook(
            "ops",
            &format!("http://{addr}/hook"),
            WebhookFormat::Generic,
        )],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    let spool = dir.join("spool").join("ops");
    std::fs::remove_dir_all(&spool).unwrap();
    std::fs::write(&spool, b"not a folder").unwrap();
    handle.submit(events(3));
    let stats = handle
        .stats_when("three kept in memory", |s| s.receivers[0].unspooled == 3)
        .await;
    assert_eq!(stats.receivers[0].dropped, 0, "{stats:?}");
    let rx = TestReceiver::start(addr, always(200)).await;
    let got = rx.wait_delivered(3).await;
    assert_eq!(brokers(&got), vec![1, 2, 3]);
    assert!(sequences_grow(&got));
    let stats = handle.shutdown(Duration::from_secs(1)).await;
    assert_eq!(stats.receivers[0].ok, 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_spool_survives_a_restart() {
    let addr = free_addr();
    let dir = temp_dir("restart");
    let url = format!("http://{addr}/hook");
    let first = Notifier::spawn_with(
        &[hook("ops", &url, WebhookFormat::Generic)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    first.submit(events(3));
    first
        .stats_when("the three queued and tried", |s| {
            s.receivers[0].queue_depth == 3 && s.receivers[0].failed >= 1
        })
        .await;
    let stats = first.shutdown(Duration::from_millis(100)).await;
    assert_eq!(stats.receivers[0].queue_depth, 3, "left in the spool");
    // Submitted after shutdown: kept on disk for the next start (written off the runtime:
    // `submit` returns before).
    first.submit(events(4).split_off(3));
    first
        .stats_when("the fourth written to the inbox", |s| {
            s.unrouted_events == 1
        })
        .await;

    let rx = TestReceiver::start(addr, always(200)).await;
    let second = Notifier::spawn_with(
        &[hook("ops", &url, WebhookFormat::Generic)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    second.submit(events(5).split_off(4));
    let got = rx.wait_delivered(5).await;
    assert_eq!(brokers(&got), vec![1, 2, 3, 4, 5]);
    assert!(sequences_grow(&got));
    second.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 27 item 14: a receiver behind an internal CA needed `tls_verify: false`. With
/// `ca_file` its certificate is trusted: here the receiver is an HTTPS server whose
/// certificate the test CA signed (the watchdog's own server, which answers a POST to
/// /hook with an HTTP error: an answer, so the TLS session was made).
#[tokio::test]
async fn a_receiver_behind_an_internal_ca_is_trusted_with_ca_file() {
    const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/observe/wire/testdata");
    let listener = crate::serve::http::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let tls = crate::config::HttpTlsConfig {
        cert_file: format!("{TESTDATA}/server.pem").into(),
        key_file: format!("{TESTDATA}/server.key").into(),
    };
    let (_stop, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(crate::serve::http::serve_with(
        std::sync::Arc::new(listener),
        crate::serve::snapshot::Publisher::new("rx", Vec::new()),
        stop_rx,
        crate::serve::http::ServeOptions {
            tls: Some(tokio_rustls::TlsAcceptor::from(
                tls.server_config().unwrap(),
            )),
            ..Default::default()
        },
    ));
    let url = format!("https://localhost:{port}/hook");
    for (ca_file, answered) in [(None, false), (Some(format!("{TESTDATA}/ca.pem")), true)] {
        let dir = temp_dir(if answered { "ca-file" } else { "no-ca-file" });
        let mut cfg = hook("internal", &url, WebhookFormat::Generic);
        cfg.ca_file = ca_file.map(Into::into);
        let handle = Notifier::spawn_with(&[cfg], &dir, "wd-1", fast()).unwrap();
        handle.submit(events(1));
        let stats = handle
            .stats_when("an attempt", |s| {
                s.receivers[0].failed + s.receivers[0].dropped >= 1
            })
            .await;
        let r = &stats.receivers[0];
        if answered {
            // The server answered (an HTTP error for a page it does not serve).
            assert_eq!((r.dropped, r.failed), (1, 0), "{r:?}");
            assert!(
                r.last_failure.as_deref().unwrap_or("").starts_with("HTTP "),
                "{r:?}"
            );
        } else {
            assert_eq!(r.dropped, 0, "not trusted: no answer, {r:?}");
            assert!(r.failed >= 1, "{r:?}");
        }
        handle.shutdown(Duration::from_millis(100)).await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Issue 39 item 2: `ca_file` follows its file. The receiver's certificate was renewed
/// under a new CA: while the file holds the old CA the receiver is not trusted; once it
/// holds the new one, the next try (a retry of the same notification) is answered, with
/// no reload.
#[tokio::test]
async fn a_rotated_ca_file_is_trusted_by_the_next_request() {
    const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/observe/wire/testdata");
    let listener = crate::serve::http::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let tls = crate::config::HttpTlsConfig {
        cert_file: format!("{TESTDATA}/renewed-server.pem").into(),
        key_file: format!("{TESTDATA}/renewed-server.key").into(),
    };
    let (_stop, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(crate::serve::http::serve_with(
        std::sync::Arc::new(listener),
        crate::serve::snapshot::Publisher::new("rx", Vec::new()),
        stop_rx,
        crate::serve::http::ServeOptions {
            tls: Some(tokio_rustls::TlsAcceptor::from(
                tls.server_config().unwrap(),
            )),
            ..Default::default()
        },
    ));
    let dir = temp_dir("ca-rotated");
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("ca.crt");
    std::fs::write(
        &ca_file,
        std::fs::read(format!("{TESTDATA}/ca.pem")).unwrap(),
    )
    .unwrap();
    let mut cfg = hook(
        "internal",
        &format!("https://localhost:{port}/hook"),
        WebhookFormat::Generic,
    );
    cfg.ca_file = Some(ca_file.clone());
    let handle = Notifier::spawn_with(&[cfg], &dir, "wd-1", fast()).unwrap();
    handle.submit(events(1));
    let stats = handle
        .stats_when("a failed try", |s| s.receivers[0].failed >= 1)
        .await;
    assert_eq!(
        stats.receivers[0].dropped, 0,
        "the old CA does not trust it"
    );
    std::fs::write(
        &ca_file,
        std::fs::read(format!("{TESTDATA}/renewed-ca.pem")).unwrap(),
    )
    .unwrap();
    crate::config::live::look_all();
    // Answered (an HTTP error for a page it does not serve): the TLS session was made.
    let stats = handle
        .stats_when("an answer", |s| s.receivers[0].dropped >= 1)
        .await;
    let r = &stats.receivers[0];
    assert!(
        r.last_failure.as_deref().unwrap_or("").starts_with("HTTP "),
        "{r:?}"
    );
    handle.shutdown(Duration::from_millis(100)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_400_is_dropped_and_counted_and_the_next_goes_on() {
    let rx = TestReceiver::start(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(|n| (if n == 0 { 400 } else { 202 }, None)),
    )
    .await;
    let dir = temp_dir("400");
    let handle = Notifier::spawn_with(
        &[hook("pd", &rx.url(), WebhookFormat::PagerDuty)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    handle.submit(events(2));
    let got = rx.wait_delivered(1).await;
    assert_eq!(got[0]["payload"]["component"], "broker-2");
    let stats = handle.shutdown(Duration::from_secs(1)).await;
    let s = &stats.receivers[0];
    assert_eq!((s.ok, s.failed, s.dropped, s.queue_depth), (1, 0, 1, 0));
    assert_eq!(
        s.last_failure.as_deref(),
        Some("HTTP 400: {\"why\":\"scripted\"}")
    );
    assert_eq!(
        rx.hits().len(),
        2,
        "a refused notification is not sent again"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_received_signature_verifies_and_configured_headers_are_sent() {
    let rx = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("hmac");
    let mut cfg = hook("signed", &rx.url(), WebhookFormat::Generic);
    cfg.hmac_secret = Some(Secret::new("topsecret"));
    cfg.headers
        .insert("X-Scope-OrgID".into(), Secret::new("kafka"));
    // The signature is the watchdog's to set.
    cfg.headers
        .insert(SIGNATURE_HEADER.into(), Secret::new("forged"));
    let handle = Notifier::spawn_with(&[cfg], &dir, "wd-1", fast()).unwrap();
    handle.submit(events(1));
    rx.wait_delivered(1).await;
    let hit = rx.hits().remove(0);
    let header = |name: &str| {
        hit.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(header("x-scope-orgid"), vec!["kafka".to_string()]);
    assert_eq!(header("content-type"), vec!["application/json".to_string()]);
    let sig = header(SIGNATURE_HEADER);
    assert_eq!(sig.len(), 1);
    assert_eq!(sig[0], signature(b"topsecret", &hit.body));
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn each_receiver_gets_what_its_filters_admit() {
    let rx_all = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let rx_crit = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("filters");
    let all = hook("all", &rx_all.url(), WebhookFormat::Generic);
    let mut crit = hook("crit", &rx_crit.url(), WebhookFormat::Generic);
    crit.min_severity = Severity::Critical;
    crit.clusters = vec!["lab".into()];
    let handle = Notifier::spawn_with(&[all, crit], &dir, "wd-1", fast()).unwrap();
    handle.submit(vec![
        event(
            EventKind::Opened,
            incident("lab", Some(1), Severity::Warning),
        ),
        event(
            EventKind::Opened,
            incident("other", Some(2), Severity::Critical),
        ),
        updated(Severity::Warning, Severity::Warning, Severity::Critical),
        event(
            EventKind::Resolved,
            incident("lab", Some(3), Severity::Warning),
        ),
    ]);
    let got_all = rx_all.wait_delivered(4).await;
    let events_all: Vec<&str> = got_all
        .iter()
        .map(|v| v["event"].as_str().unwrap())
        .collect();
    assert_eq!(events_all, vec!["opened", "opened", "updated", "resolved"]);
    // A last event both admit: routed after the others and sent in order, so once it
    // arrives everything before it has been sent or filtered out.
    handle.submit(vec![event(
        EventKind::Opened,
        incident("lab", Some(9), Severity::Critical),
    )]);
    let got_crit = rx_crit
        .delivered_when(|got| got.iter().any(|v| v["broker_id"] == 9))
        .await;
    assert_eq!(got_crit.len(), 2, "{got_crit:?}");
    assert_eq!(got_crit[1]["broker_id"], 9);
    assert_eq!(
        got_crit[0]["event"], "opened",
        "first heard of when it became critical"
    );
    assert_eq!(got_crit[0]["broker_id"], 2);
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn reminders_repeat_while_open_and_stop_when_resolved() {
    let rx = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("reminders");
    let mut cfg = hook("am", &rx.url(), WebhookFormat::Generic);
    cfg.repeat_interval = Some(Duration::from_millis(60));
    let handle = Notifier::spawn_with(&[cfg], &dir, "wd-1", fast()).unwrap();
    let i = incident("lab", Some(1), Severity::Critical);
    handle.submit(vec![event(EventKind::Opened, i.clone())]);
    let got = rx.wait_delivered(3).await;
    assert_eq!(got[0]["event"], "opened");
    assert!(got[1..].iter().all(|v| v["event"] == "reminder"), "{got:?}");
    assert_eq!(handle.stats().open_incidents, 1);
    handle.submit(vec![event(EventKind::Resolved, i)]);
    let got = rx
        .delivered_when(|got| got.iter().any(|v| v["event"] == "resolved"))
        .await;
    let resolved_at = got.iter().position(|v| v["event"] == "resolved").unwrap();
    assert_eq!(handle.stats().open_incidents, 0);
    // Another incident opened after the resolve: its first reminder is due no earlier than
    // the resolved one's next, and reminders go out in the order they fall due, so once it
    // arrives the resolved incident has had its chance to be reminded of.
    handle.submit(vec![event(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    )]);
    let got = rx
        .delivered_when(|got| {
            got.iter()
                .any(|v| v["event"] == "reminder" && v["broker_id"] == 2)
        })
        .await;
    assert!(
        got.iter()
            .any(|v| v["event"] == "reminder" && v["broker_id"] == 2),
        "the other incident is reminded of: {got:?}"
    );
    assert!(
        got[resolved_at..]
            .iter()
            .all(|v| v["broker_id"] != 1 || v["event"] == "resolved"),
        "no reminder after the resolve: {got:?}"
    );
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_receiver_hears_updates_within_its_group_interval_as_one_message() {
    let rx = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("group");
    let mut cfg = hook("grouped", &rx.url(), WebhookFormat::Generic);
    let group = Duration::from_millis(300);
    cfg.group_interval = Some(group);
    let handle = Notifier::spawn_with(&[cfg], &dir, "wd-1", fast()).unwrap();
    let i = incident("lab", Some(2), Severity::Critical);
    handle.submit(vec![event(EventKind::Opened, i.clone())]);
    rx.wait_delivered(1).await;
    handle.submit(vec![minor_update("rules: +slow_answers", "first")]);
    handle.submit(vec![minor_update("partitions: +orders-2", "second")]);
    handle.submit(vec![minor_update("rules: +slow_answers", "third")]);
    let got = rx.wait_delivered(2).await;
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[1]["event"], "updated");
    assert_eq!(got[1]["evidence"], serde_json::json!(["third"]));
    assert_eq!(
        got[1]["changes"],
        serde_json::json!(["rules: +slow_answers", "partitions: +orders-2"])
    );
    let hits = rx.hits();
    let waited = hits[1].at.duration_since(hits[0].at);
    assert!(
        waited >= group - Duration::from_millis(50),
        "held for the group interval: {waited:?}"
    );
    let stats = handle
        .stats_when("the three updates merged", |s| s.receivers[0].merged == 3)
        .await;
    assert_eq!(
        (stats.receivers[0].held, stats.receivers[0].superseded),
        (0, 0)
    );
    // The resolve does not wait.
    handle.submit(vec![event(EventKind::Resolved, i)]);
    let got = rx.wait_delivered(3).await;
    assert_eq!(got[2]["event"], "resolved");
    handle.shutdown(Duration::from_secs(1)).await;
    assert_eq!(rx.hits().len(), 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_resolve_drops_held_updates_and_held_updates_survive_a_restart() {
    let rx = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("held");
    let mut cfg = hook("grouped", &rx.url(), WebhookFormat::Generic);
    cfg.group_interval = Some(Duration::from_secs(3600));
    let held_file = dir.join("spool/grouped/held.json");
    let handle = Notifier::spawn_with(std::slice::from_ref(&cfg), &dir, "wd-1", fast()).unwrap();
    let i = incident("lab", Some(2), Severity::Critical);
    handle.submit(vec![event(EventKind::Opened, i.clone())]);
    rx.wait_delivered(1).await;
    handle.submit(vec![minor_update("partitions: +orders-2", "x")]);
    handle
        .stats_when("the update held", |s| s.receivers[0].held == 1)
        .await;
    assert!(held_file.exists(), "held updates are kept on disk");
    handle.submit(vec![event(EventKind::Resolved, i)]);
    let got = rx.wait_delivered(2).await;
    assert_eq!(got[1]["event"], "resolved");
    let stats = handle
        .stats_when("the held update superseded", |s| {
            s.receivers[0].superseded == 1
        })
        .await;
    assert_eq!(stats.receivers[0].held, 0);
    assert!(!held_file.exists(), "nothing held, no file");

    // A silence that begins while an update waits: the update does not go under it.
    let k = incident("lab", Some(4), Severity::Critical);
    handle.submit(vec![event(EventKind::Opened, k.clone())]);
    rx.wait_delivered(3).await;
    let mut waiting = event(EventKind::Updated, k.clone());
    waiting.previous = Some(Previous {
        severity: Severity::Critical,
        peak_severity: Severity::Critical,
        told_state: Some(BrokerState::Zombie),
        state: None,
        notified_peak: Some(Severity::Critical),
    });
    waiting.changes = vec!["partitions: +orders-3".into()];
    let mut silenced = waiting.clone();
    silenced.incident.silenced = Some(crate::model::silence::SilenceMark {
        id: "s-1".into(),
        ends_at: t(3600),
        comment: "maintenance".into(),
    });
    silenced.changes = vec!["silenced by s-1".into()];
    handle.submit(vec![waiting]);
    handle
        .stats_when("the update held", |s| s.receivers[0].held == 1)
        .await;
    handle.submit(vec![silenced]);
    handle
        .stats_when("dropped by the silence", |s| {
            s.receivers[0].superseded == 2 && s.receivers[0].held == 0
        })
        .await;
    assert_eq!(rx.hits().len(), 3);

    // Another incident: its update is held when delivery stops, and goes at once after
    // the restart (when its last message went is not known any more).
    let j = incident("lab", Some(3), Severity::Critical);
    handle.submit(vec![event(EventKind::Opened, j.clone())]);
    rx.wait_delivered(4).await;
    let mut u = event(EventKind::Updated, j.clone());
    u.previous = Some(Previous {
        severity: Severity::Critical,
        peak_severity: Severity::Critical,
        told_state: Some(BrokerState::Zombie),
        state: None,
        notified_peak: Some(Severity::Critical),
    });
    u.changes = vec!["suspects: +1".into()];
    handle.submit(vec![u]);
    handle
        .stats_when("the second update held", |s| s.receivers[0].held == 1)
        .await;
    handle.shutdown(Duration::from_secs(1)).await;
    assert!(held_file.exists());
    assert_eq!(rx.hits().len(), 4, "held, not sent");
    let second = Notifier::spawn_with(&[cfg], &dir, "wd-1", fast()).unwrap();
    let got = rx.wait_delivered(5).await;
    assert_eq!(got.len(), 5, "{got:?}");
    assert_eq!(got[4]["event"], "updated");
    assert_eq!(got[4]["broker_id"], 3);
    assert_eq!(got[4]["changes"], serde_json::json!(["suspects: +1"]));
    second
        .stats_when("the held file emptied", |s| s.receivers[0].merged == 1)
        .await;
    second.shutdown(Duration::from_secs(1)).await;
    assert!(!held_file.exists());
    assert_eq!(rx.hits().len(), 5, "once");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_full_inbox_spills_to_disk_and_keeps_order() {
    let addr = free_addr();
    let dir = temp_dir("spill");
    let mut settings = fast();
    settings.inbox_capacity = 2;
    let handle = Notifier::spawn_with(
        &[hook(
            "ops",
            &format!("http://{addr}/hook"),
            WebhookFormat::Generic,
        )],
        &dir,
        "wd-1",
        settings,
    )
    .unwrap();
    for e in events(30) {
        handle.submit(vec![e]);
    }
    let rx = TestReceiver::start(addr, always(200)).await;
    let got = rx.wait_delivered(30).await;
    assert_eq!(brokers(&got), (1..=30).collect::<Vec<i64>>());
    let stats = handle.shutdown(Duration::from_secs(1)).await;
    assert_eq!(stats.unrouted_events, 0);
    assert_eq!(
        std::fs::read_dir(dir.join("spool-inbox")).unwrap().count(),
        0
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn shutdown_flushes_what_it_can() {
    let rx = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("flush");
    let handle = Notifier::spawn_with(
        &[hook("ops", &rx.url(), WebhookFormat::Teams)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    handle.submit(events(10));
    let stats = handle.shutdown(Duration::from_secs(5)).await;
    assert_eq!(stats.receivers[0].ok, 10);
    assert_eq!(stats.receivers[0].queue_depth, 0);
    assert_eq!(rx.delivered().len(), 10);
    assert_eq!(rx.delivered()[0]["type"], "message");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn shutdown_gives_up_at_its_deadline() {
    let rx = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(503)).await;
    let dir = temp_dir("deadline");
    let handle = Notifier::spawn_with(
        &[hook("ops", &rx.url(), WebhookFormat::Generic)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    handle.submit(events(2));
    let started = std::time::Instant::now();
    let stats = handle.shutdown(Duration::from_millis(200)).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(stats.receivers[0].queue_depth, 2);
    assert_eq!(std::fs::read_dir(dir.join("spool/ops")).unwrap().count(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_lab_sink_receives_generic_notifications() {
    let sink = kafka_lab::sink::Sink::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = temp_dir("sink");
    let handle = Notifier::spawn_with(
        &[hook("sink", &sink.url(), WebhookFormat::Generic)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    handle.submit(events(2));
    let got = sink.wait_for(2, Duration::from_secs(10)).await;
    assert_eq!(brokers(&got), vec![1, 2]);
    assert_eq!(got[0]["schema_version"], 1);
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// `peers` hears, `now`, that the watchdog wd-1 (cluster lab) delivered `event` to the
/// receiver "chat" at `at`.
fn heard_wd1_deliver_to_chat(
    peers: &crate::alert::peers::Peers,
    event: &IncidentEvent,
    at: SystemTime,
    now: SystemTime,
) {
    use crate::alert::peers::{Answer, Delivery};
    let theirs = Delivery {
        seq: 1,
        receiver: "chat".into(),
        dedup_key: event.incident.dedup_key.clone(),
        event: event.kind.as_str().into(),
        severity: "critical".into(),
        at,
        started_at: Some(event.incident.started_at),
        open_until: Some(now),
        message: None,
    };
    let answer = Answer {
        instance_id: "wd-1".into(),
        version: "0".into(),
        clusters: vec!["lab".into()],
        silences: vec![],
        deliveries: vec![theirs],
    };
    peers.heard("http://wd-1:9644", &answer, now);
}

/// Issue 28 item 1: with a peer first in line that delivered broker 1's opening, this
/// instance leaves it to that peer, sends broker 2's (which the peer did not deliver) once
/// the peer had its takeover time, and sends both to Alertmanager at once.
#[tokio::test]
async fn a_peer_first_in_line_that_delivered_keeps_this_instance_quiet_for_that_event_only() {
    use crate::alert::peers::Peers;
    let chat = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let am = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("peers");
    let takeover = Duration::from_millis(600);
    let peers = Arc::new(Peers::new("wd-2", takeover, Duration::from_millis(20)));
    let now = SystemTime::now();
    let mut opened = events(2);
    for e in &mut opened {
        e.at = now;
    }
    heard_wd1_deliver_to_chat(&peers, &opened[0], now - Duration::from_millis(300), now);
    let sender = Sender {
        instance_id: "wd-2".into(),
        status_url: None,
        runbooks_url: None,
        peers: Some(peers.clone()),
        ..Sender::from("wd-2")
    };
    let handle = Notifier::spawn_with(
        &[
            hook("chat", &chat.url(), WebhookFormat::Generic),
            hook("am", &am.url(), WebhookFormat::Alertmanager),
        ],
        &dir,
        sender,
        fast(),
    )
    .unwrap();
    handle.submit(opened);
    assert_eq!(
        am.wait_delivered(2).await.len(),
        2,
        "Alertmanager gets every instance's"
    );
    let started = std::time::Instant::now();
    let got = chat.wait_delivered(1).await;
    assert_eq!(brokers(&got), vec![2], "broker 1's went from the peer");
    assert!(
        now + takeover <= SystemTime::now() && started.elapsed() < Duration::from_secs(5),
        "sent once the peer first in line had its takeover time"
    );
    let stats = handle.shutdown(Duration::from_secs(1)).await;
    let s = stats
        .receivers
        .iter()
        .find(|r| r.receiver == "chat")
        .unwrap();
    assert_eq!((s.ok, s.left_to_peers, s.queue_depth), (1, 1, 0));
    assert_eq!(
        peers.deliveries(&[], SystemTime::now()).len(),
        1,
        "its own delivery, for the peers to read"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The backoff belongs to one notification: one a peer delivered while this instance was
/// retrying it leaves the next to start again at the first step. (The count carried over:
/// the next waited as long as the fifth retry of the one before, and its log said so.)
#[tokio::test]
async fn a_notification_a_peer_delivered_during_retries_leaves_the_next_its_own_backoff() {
    use crate::alert::peers::Peers;
    // Broker 1's five tries fail, broker 2's first fails, then everything is taken.
    let rx = TestReceiver::start(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(|n| (if n < 6 { 503 } else { 200 }, None)),
    )
    .await;
    let dir = temp_dir("peer-backoff");
    let peers = Arc::new(Peers::new(
        "wd-2",
        Duration::from_millis(600),
        Duration::from_millis(20),
    ));
    let sender = Sender {
        instance_id: "wd-2".into(),
        status_url: None,
        runbooks_url: None,
        peers: Some(peers.clone()),
        ..Sender::from("wd-2")
    };
    let mut settings = fast();
    // 50, 100, 200, 400, 800 ms: the sixth step is 1.6 s, the first 50 ms.
    settings.backoff = Backoff {
        initial: Duration::from_millis(50),
        page_max: Duration::from_secs(10),
        info_max: Duration::from_secs(10),
        jitter: 0.2,
    };
    let handle = Notifier::spawn_with(
        &[hook("chat", &rx.url(), WebhookFormat::Generic)],
        &dir,
        sender,
        settings,
    )
    .unwrap();
    let opened = events(2);
    handle.submit(opened.clone());
    rx.delivered_when(|_| rx.hits().len() >= 5).await;
    // The first watchdog says it delivered broker 1's opening meanwhile.
    heard_wd1_deliver_to_chat(&peers, &opened[0], opened[0].at, SystemTime::now());
    let got = rx.wait_delivered(1).await;
    assert_eq!(brokers(&got), vec![2], "broker 1's went from the peer");
    let hits = rx.hits();
    let tail: Vec<i64> = hits[5..]
        .iter()
        .map(|h| h.json()["broker_id"].as_i64().unwrap())
        .collect();
    assert_eq!(tail, vec![2, 2], "{hits:?}");
    let gap = hits[6].at - hits[5].at;
    assert!(
        gap < Duration::from_millis(600),
        "broker 2's first retry came {gap:?} after its first try: the first backoff step is 50 ms"
    );
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The queue goes in order, so the head's wait is the wait of everything behind it: a page
/// queued while a resolve at the head waits out information's longer backoff makes that
/// wait a page's (issue 38 item 7). (The wait chosen at the failure held, so the page
/// waited as long as the resolve in front of it.)
#[tokio::test]
async fn a_page_queued_behind_a_failing_resolve_shortens_its_wait() {
    // The resolve's first try fails, everything after is taken.
    let rx = TestReceiver::start(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(|n| (if n < 1 { 503 } else { 200 }, None)),
    )
    .await;
    let dir = temp_dir("urgency");
    let mut settings = fast();
    // Information waits 3 s after a failure, a page 50 ms.
    settings.backoff = Backoff {
        initial: Duration::from_secs(3),
        page_max: Duration::from_millis(50),
        info_max: Duration::from_secs(10),
        jitter: 0.0,
    };
    let handle = Notifier::spawn_with(
        &[hook("ops", &rx.url(), WebhookFormat::Generic)],
        &dir,
        "wd-1",
        settings,
    )
    .unwrap();
    let gone = incident("lab", Some(1), Severity::Critical);
    handle.submit(vec![event(EventKind::Resolved, gone)]);
    handle
        .stats_when("the resolve failed once", |s| s.receivers[0].failed == 1)
        .await;
    let page = incident("lab", Some(2), Severity::Critical);
    handle.submit(vec![event(EventKind::Opened, page)]);
    let got = rx.wait_delivered(2).await;
    let kinds: Vec<&str> = got.iter().map(|v| v["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["resolved", "opened"], "still in order");
    let hits = rx.hits();
    let gap = hits[1].at - hits[0].at;
    assert!(
        gap < Duration::from_secs(1),
        "the resolve was retried {gap:?} after its failure, with a page waiting behind it"
    );
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

fn alertmanagers(name: &str, first: &TestReceiver, more: &[&TestReceiver]) -> WebhookConfig {
    let mut h = hook(name, &first.url(), WebhookFormat::Alertmanager);
    h.more_urls = more
        .iter()
        .map(|r| crate::config::Endpoint {
            url: Secret::new(r.url()),
            target: r.url(),
        })
        .collect();
    h
}

/// Issue 39 item 3: an Alertmanager cluster of two, one of them down. Each alert goes to
/// both, as Prometheus sends them: delivered once one took it, never retried for the one
/// down, whose every failure is counted under its own address.
#[tokio::test]
async fn every_alertmanager_of_a_cluster_gets_every_alert_and_one_down_delivers_still() {
    let down = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(503)).await;
    let up = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("am-one-down");
    let handle =
        Notifier::spawn_with(&[alertmanagers("am", &down, &[&up])], &dir, "wd-1", fast()).unwrap();
    handle.submit(events(3));
    let got = up.wait_delivered(3).await;
    assert_eq!(got.len(), 3, "the Alertmanager that is up gets every alert");
    let stats = handle
        .stats_when("three delivered", |s| s.receivers[0].ok == 3)
        .await;
    let s = &stats.receivers[0];
    assert_eq!((s.ok, s.failed, s.dropped, s.queue_depth), (3, 0, 0, 0));
    assert_eq!(
        down.hits().len(),
        3,
        "each alert tried once on the one down"
    );
    let per: Vec<(String, u64, u64)> = s
        .alertmanagers
        .iter()
        .map(|a| (a.target.clone(), a.ok, a.failed))
        .collect();
    assert_eq!(per, [(down.url(), 0, 3), (up.url(), 3, 0)]);
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Both up: both get every alert, in order. Both down: retried as one receiver is, and
/// each failure of each counted.
#[tokio::test]
async fn two_alertmanagers_up_both_get_everything_and_both_down_is_retried() {
    let a = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let b = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let c = TestReceiver::start(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(|n| (if n < 2 { 503 } else { 200 }, None)),
    )
    .await;
    let d = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(502)).await;
    let dir = temp_dir("am-both");
    let handle = Notifier::spawn_with(
        &[
            alertmanagers("ab", &a, &[&b]),
            alertmanagers("cd", &c, &[&d]),
        ],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    handle.submit(events(2));
    let alertname = |v: &Value| v[0]["labels"]["broker"].as_str().map(str::to_string);
    let (got_a, got_b) = (a.wait_delivered(2).await, b.wait_delivered(2).await);
    assert_eq!(got_a.len(), 2);
    assert_eq!(
        got_a.iter().map(alertname).collect::<Vec<_>>(),
        got_b.iter().map(alertname).collect::<Vec<_>>()
    );
    assert_eq!(c.wait_delivered(2).await.len(), 2);
    let stats = handle
        .stats_when("both delivered", |s| s.receivers.iter().all(|r| r.ok == 2))
        .await;
    let cd = &stats.receivers[1];
    assert_eq!(
        cd.failed, 2,
        "the first alert failed twice on both, then went"
    );
    let per: Vec<(u64, u64)> = cd.alertmanagers.iter().map(|a| (a.ok, a.failed)).collect();
    assert_eq!(per, [(2, 2), (0, 4)]);
    assert!(cd
        .last_failure
        .as_deref()
        .is_some_and(|w| w.contains("503") && w.contains("502")));
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// An Alertmanager that takes the connection and never answers holds back none of the
/// others: they are sent at once, not after its timeout.
#[tokio::test]
async fn a_hung_alertmanager_holds_back_none_of_the_others() {
    let hung = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hung_url = format!("http://{}/api/v2/alerts", hung.local_addr().unwrap());
    let up = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("am-hung");
    let mut h = hook("am", &hung_url, WebhookFormat::Alertmanager);
    h.timeout = Duration::from_secs(30);
    h.more_urls = vec![crate::config::Endpoint {
        url: Secret::new(up.url()),
        target: up.url(),
    }];
    let handle = Notifier::spawn_with(&[h], &dir, "wd-1", fast()).unwrap();
    let started = std::time::Instant::now();
    handle.submit(events(1));
    assert_eq!(up.wait_delivered(1).await.len(), 1);
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "sent beside the hung one, not after it: {:?}",
        started.elapsed()
    );
    drop(hung);
    handle.shutdown(Duration::from_millis(100)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 39 item 2: a header's `value_file` (a bearer token), rewritten while delivery
/// runs, is what the next request carries; a rewrite that cannot be used (empty) keeps the
/// last good token.
#[tokio::test]
async fn a_rotated_token_file_is_carried_by_the_next_request() {
    let rx = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("token-file");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("token");
    std::fs::write(&file, "Bearer one\n").unwrap();
    let mut h = hook("ops", &rx.url(), WebhookFormat::Generic);
    h.headers.insert(
        "Authorization".into(),
        Secret::from_file("Bearer one", file.clone()),
    );
    let handle = Notifier::spawn_with(&[h], &dir.join("state"), "wd-1", fast()).unwrap();
    let token = |hit: &Hit| {
        hit.headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.clone())
    };
    let mut all = events(3).into_iter();
    handle.submit(all.next().into_iter().collect());
    rx.wait_delivered(1).await;
    std::fs::write(&file, "Bearer two\n").unwrap();
    crate::config::live::look_all();
    handle.submit(all.next().into_iter().collect());
    rx.wait_delivered(2).await;
    std::fs::write(&file, "").unwrap();
    crate::config::live::look_all();
    handle.submit(all.next().into_iter().collect());
    rx.wait_delivered(3).await;
    let tokens: Vec<Option<String>> = rx.hits().iter().map(token).collect();
    assert_eq!(
        tokens,
        [
            Some("Bearer one".to_string()),
            Some("Bearer two".to_string()),
            Some("Bearer two".to_string())
        ]
    );
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}
