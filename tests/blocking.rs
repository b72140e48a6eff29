//! Nothing blocks the runtime (issue 38 item 3): the daemon runs on two worker threads, and
//! a worker stuck in a blocking call serves nothing else meanwhile: no round, no liveness
//! look, no `/metrics`. Two ways that happened, each against the real binary and local
//! fakes (no lab, no network): two AWS_MSK_IAM clusters whose canaries wait for their tokens
//! at the same moment, and a state directory whose every fsync takes seconds while several
//! clusters open incidents.

mod common;

use std::time::{Duration, Instant};

use common::watchdog::{free_port, is_event, temp_dir, Receiver};
use kafka_watchdog_test_support::fake_aws::FakeAws;
use kafka_watchdog_test_support::fake_broker::FakeBroker;
use kafka_watchdog_test_support::fake_cluster::{
    broker as fake_broker, msk_iam_clusters, refused_port,
};
use kafka_watchdog_test_support::scrape::Scraper;
use kafka_watchdog_test_support::watchdog::{self as support, LOOPBACK};

/// What the tests hold `/metrics` to: far above a scrape's few milliseconds, far below the
/// seconds a blocked worker costs.
const PROMPT: Duration = Duration::from_secs(1);

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
    let clusters = msk_iam_clusters(&brokers);
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
        .map(|_| fake_broker(&rt, vec![(2, refused_port().unwrap())]))
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
