//! Nothing blocks the runtime (issue 38 item 3): the daemon runs on two worker threads, and
//! a worker stuck in a blocking call serves nothing else meanwhile: no round, no liveness
//! look, no `/metrics`. Two ways that happened, each against the real binary and local
//! fakes (no lab, no network): two AWS_MSK_IAM clusters whose canaries wait for their tokens
//! at the same moment, and a state directory whose every fsync takes seconds while several
//! clusters open incidents.

mod common;

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::watchdog::{free_port, is_event, temp_dir, Receiver};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListPartitionReassignmentsResponse, MetadataResponse,
    SaslAuthenticateResponse, SaslHandshakeResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_watchdog_test_support::fake_aws::FakeAws;
use kafka_watchdog_test_support::fake_broker::{
    answer, answer_api_versions, ranges_with, FakeBroker, Received, Reply,
};
use kafka_watchdog_test_support::watchdog::{self as support, LOOPBACK};

/// What the tests hold `/metrics` to: far above a scrape's few milliseconds, far below the
/// seconds a blocked worker costs.
const PROMPT: Duration = Duration::from_secs(1);

/// One broker of a fake cluster, as far as the probes and the canary's clients go:
/// ApiVersions, SASL (AWS_MSK_IAM or OAUTHBEARER, whatever it is sent), Metadata naming
/// itself as broker 1 and `others` (id, port), with topic `t` of one partition per other
/// broker, led by it, replicas on it and broker 1; no reassignment; any other request
/// closes the connection.
fn fake_broker(rt: &tokio::runtime::Runtime, others: Vec<(i32, u16)>) -> FakeBroker {
    let own_port: Arc<OnceLock<u16>> = Arc::default();
    let port = own_port.clone();
    let ranges = ranges_with(&[(ApiKey::DescribeCluster, 1, 0)]);
    let b = rt.block_on(FakeBroker::start(
        move |r: &Received| match ApiKey::try_from(r.api_key) {
            Ok(ApiKey::ApiVersions) => answer_api_versions(r, &ranges),
            Ok(ApiKey::SaslHandshake) => answer(
                r,
                &SaslHandshakeResponse::default().with_mechanisms(vec![
                    StrBytes::from_static_str("AWS_MSK_IAM"),
                    StrBytes::from_static_str("OAUTHBEARER"),
                ]),
            ),
            Ok(ApiKey::SaslAuthenticate) => answer(
                r,
                &SaslAuthenticateResponse::default()
                    .with_auth_bytes(r#"{"version":"2020_10_22","request-id":"t"}"#.into())
                    .with_session_lifetime_ms(3_600_000),
            ),
            Ok(ApiKey::Metadata) => {
                let own = *port.get().expect("the port is known before any request");
                let brokers = std::iter::once((1, own))
                    .chain(others.iter().copied())
                    .map(|(id, port)| {
                        MetadataResponseBroker::default()
                            .with_node_id(BrokerId(id))
                            .with_host(StrBytes::from_static_str("127.0.0.1"))
                            .with_port(i32::from(port))
                    })
                    .collect();
                let partitions: Vec<MetadataResponsePartition> = others
                    .iter()
                    .enumerate()
                    .map(|(i, (id, _))| {
                        MetadataResponsePartition::default()
                            .with_partition_index(i as i32)
                            .with_leader_id(BrokerId(*id))
                            .with_replica_nodes(vec![BrokerId(*id), BrokerId(1)])
                            .with_isr_nodes(vec![BrokerId(*id), BrokerId(1)])
                    })
                    .collect();
                let topics = if partitions.is_empty() {
                    Vec::new()
                } else {
                    vec![MetadataResponseTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                        .with_partitions(partitions)]
                };
                answer(
                    r,
                    &MetadataResponse::default()
                        .with_cluster_id(Some(StrBytes::from_static_str("fake")))
                        .with_controller_id(BrokerId(1))
                        .with_brokers(brokers)
                        .with_topics(topics),
                )
            }
            Ok(ApiKey::ListPartitionReassignments) => {
                answer(r, &ListPartitionReassignmentsResponse::default())
            }
            _ => Reply::Close,
        },
    ));
    let port = b.address.rsplit(':').next().unwrap().parse().unwrap();
    own_port.set(port).unwrap();
    b
}

/// A loopback port nothing listens on: a broker there refuses every connection.
fn refused_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET /metrics every 100 ms from a thread of its own, timing each answer, from the first
/// one on (before it, the daemon is starting).
struct Scraper {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Scrapes>,
}

#[derive(Debug, Default)]
struct Scrapes {
    took: Vec<Duration>,
    /// Requests that failed (no answer within the client's 5 s, a refused connection
    /// after the first answer), with when they were sent, from the first answer.
    failed: Vec<(Duration, String)>,
}

impl Scrapes {
    fn max(&self) -> Duration {
        self.took.iter().max().copied().unwrap_or_default()
    }

    fn p95(&self) -> Duration {
        let mut t = self.took.clone();
        t.sort();
        t.get(t.len().saturating_sub(1) * 95 / 100)
            .copied()
            .unwrap_or_default()
    }

    fn summary(&self) -> String {
        format!(
            "{} scrapes, p95 {:?}, max {:?}, {} failed {:?}",
            self.took.len(),
            self.p95(),
            self.max(),
            self.failed.len(),
            self.failed.iter().take(5).collect::<Vec<_>>()
        )
    }
}

impl Scraper {
    fn start(host: IpAddr, port: u16) -> Scraper {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut s = Scrapes::default();
            let mut first: Option<Instant> = None;
            while !stopping.load(Ordering::SeqCst) {
                let sent = Instant::now();
                match support::http_get_at(host, port, "/metrics") {
                    Ok((200, _)) => {
                        first.get_or_insert(sent);
                        s.took.push(sent.elapsed());
                    }
                    answer => {
                        if let Some(f) = first {
                            s.failed.push((sent - f, format!("{answer:?}")));
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            s
        });
        Scraper { stop, thread }
    }

    fn stop(self) -> Scrapes {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

fn launch(
    dir: &std::path::Path,
    port: u16,
    yaml: &str,
    env: &[(&str, &str)],
) -> Result<support::Watchdog, support::LaunchError> {
    support::Watchdog::launch(&support::Launch {
        host: LOOPBACK,
        bin: std::path::Path::new(env!("CARGO_BIN_EXE_kafka-watchdog")),
        dir,
        port,
        yaml,
        check_config: true,
        ready_within: Duration::from_secs(40),
        env,
    })
}

/// Two MSK clusters with the canary on, their credentials from an instance metadata
/// endpoint that answers half a second late (its client waits a second) with keys that live
/// 20 s: within the five minutes
/// before expiry in which every use asks the chain again, as happens at the end of every
/// credential's life. Each canary asked for its token blocking a runtime worker while the
/// chain's lookup waited for a worker of its own; the two canaries, starting together,
/// took both workers, and the daemon froze for good: no round, no `/metrics`.
#[test]
fn two_msk_iam_clusters_with_the_canary_keep_metrics_answering() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let aws = rt.block_on(FakeAws::start("unused", "unused")).unwrap();
    aws.set_slow(Duration::from_millis(500), Duration::from_secs(20));
    let brokers: Vec<FakeBroker> = (0..2).map(|_| fake_broker(&rt, Vec::new())).collect();
    let dir = temp_dir("msk-canaries");
    let port = free_port();
    let clusters: String = brokers
        .iter()
        .enumerate()
        .map(|(i, b)| {
            format!(
                "  - name: msk{i}\n    bootstrap_servers: [{}]\n    round_interval_secs: 2\n    \
                 connect_timeout_ms: 1000\n    request_timeout_ms: 1500\n    \
                 canary:\n      produce_timeout_ms: 1500\n    \
                 security:\n      protocol: SASL_PLAINTEXT\n      sasl:\n        \
                 mechanism: AWS_MSK_IAM\n        region: eu-west-1\n",
                b.address
            )
        })
        .collect();
    let yaml = format!(
        "instance_id: test\nhttp:\n  listen: 127.0.0.1:{port}\nlog:\n  level: debug\n\
         state_dir: {}\nclusters:\n{clusters}",
        dir.join("state").display()
    );
    let imds = aws.imds_endpoint();
    let (no_config, no_credentials) = (dir.join("no-config"), dir.join("no-credentials"));
    let env = [
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.as_str()),
        ("AWS_CONFIG_FILE", no_config.to_str().unwrap()),
        (
            "AWS_SHARED_CREDENTIALS_FILE",
            no_credentials.to_str().unwrap(),
        ),
    ];
    let scraper = Scraper::start(LOOPBACK, port);
    let launched = launch(&dir, port, &yaml, &env);
    if launched.is_ok() {
        // Past the first token renewal (at 80% of the keys' 20 s).
        std::thread::sleep(Duration::from_secs(25));
    }
    let scrapes = scraper.stop();
    eprintln!("/metrics: {}", scrapes.summary());
    let w = launched.unwrap_or_else(|e| panic!("{e}\n/metrics: {}", scrapes.summary()));
    assert!(
        aws.calls()
            .iter()
            .any(|c| c.contains("kw-node-role -> 200")),
        "the keys came from elsewhere than the fake endpoint (AWS_* in the environment?): {:?}",
        aws.calls()
    );
    assert!(
        scrapes.failed.is_empty() && scrapes.max() < PROMPT,
        "/metrics: {}\n{}",
        scrapes.summary(),
        w.log()
    );
    drop(w);
    drop(brokers);
    drop(aws);
}

/// Three clusters, each with broker 2 refusing connections, while every fsync in the state
/// directory takes 1.5 s (`KAFKA_WATCHDOG_TEST_SLOW_FSYNC_MS`). The incident book and the
/// webhook inbox were written on the runtime's workers with their locks held, four fsyncs a
/// batch: the clusters' loops took both workers, `/metrics` (which reads the inbox's counts)
/// waited for the disk, and the liveness looks starved until brokers that answered were
/// called silent. Now `/metrics` stays prompt, and each cluster's page arrives within its
/// confirmation plus the writes on its own way out, whatever else is written meanwhile.
#[test]
fn a_slow_state_disk_leaves_metrics_fast_and_pages_on_time() {
    const FSYNC: Duration = Duration::from_millis(1500);
    const CLUSTERS: usize = 3;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let brokers: Vec<FakeBroker> = (0..CLUSTERS)
        .map(|_| fake_broker(&rt, vec![(2, refused_port())]))
        .collect();
    let rx = Receiver::start();
    let dir = temp_dir("slow-disk");
    let port = free_port();
    let clusters: String = brokers
        .iter()
        .enumerate()
        .map(|(i, b)| {
            format!(
                "  - name: c{i}\n    bootstrap_servers: [{}]\n    round_interval_secs: 2\n    \
                 connect_timeout_ms: 1000\n    request_timeout_ms: 1500\n    \
                 canary:\n      enabled: false\n    \
                 verdict:\n      open_after_secs: 2\n      resolve_after_secs: 2\n",
                b.address
            )
        })
        .collect();
    let yaml = format!(
        "instance_id: test\nhttp:\n  listen: 127.0.0.1:{port}\nlog:\n  level: debug\n\
         state_dir: {}\n{}clusters:\n{clusters}",
        dir.join("state").display(),
        rx.yaml()
    );
    let fsync_ms = FSYNC.as_millis().to_string();
    let env = [("KAFKA_WATCHDOG_TEST_SLOW_FSYNC_MS", fsync_ms.as_str())];
    let scraper = Scraper::start(LOOPBACK, port);
    let started = Instant::now();
    let launched = launch(&dir, port, &yaml, &env);
    // Each page: confirmed within a round or two of the start (2 s rounds, open_after 2 s),
    // then written to the inbox and to the receiver's spool, two fsyncs each (the file, then
    // its directory). The bound allows six and 5 s of slack: the book's writes and the
    // other clusters' pages go at the same time and must not stand in its way.
    let on_time = Duration::from_secs(8) + FSYNC * 6 + Duration::from_secs(5);
    // When each cluster's page was first seen (looked for every 100 ms).
    let mut arrived: Vec<(String, Duration)> = Vec::new();
    if launched.is_ok() {
        while arrived.len() < CLUSTERS && started.elapsed() < on_time * 2 {
            for v in rx.received() {
                let cluster = v["cluster"].as_str().unwrap_or_default().to_string();
                if is_event(&v, "opened", "broker", Some(2))
                    && !arrived.iter().any(|(c, _)| *c == cluster)
                {
                    arrived.push((cluster, started.elapsed()));
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_secs(5));
    }
    let scrapes = scraper.stop();
    eprintln!("/metrics: {}", scrapes.summary());
    eprintln!("pages (since the start): {arrived:?}");
    let w = launched.unwrap_or_else(|e| panic!("{e}\n/metrics: {}", scrapes.summary()));
    assert!(
        scrapes.failed.is_empty() && scrapes.max() < PROMPT,
        "/metrics: {}",
        scrapes.summary()
    );
    assert_eq!(arrived.len(), CLUSTERS, "pages: {arrived:?}\n{}", w.log());
    for (cluster, at) in &arrived {
        assert!(
            *at <= on_time,
            "{cluster}'s page came {at:?} after the start, more than {on_time:?}"
        );
    }
    drop(w);
}
