//! `/metrics` while something tries to block the daemon's two runtime workers (issue 38
//! item 3): every fsync of the state directory taking seconds while three clusters open
//! incidents (the debug build's `KAFKA_WATCHDOG_TEST_SLOW_FSYNC_MS`), and two AWS_MSK_IAM
//! clusters with the canary on whose tokens come from a slow instance metadata endpoint
//! with short-lived keys. The same three-cluster shape on a normal disk is the baseline.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kafka_lab::sink::Sink;
use kafka_watchdog_test_support::fake_aws::FakeAws;
use kafka_watchdog_test_support::fake_broker::FakeBroker;
use kafka_watchdog_test_support::fake_cluster::{broker, refused_port};
use kafka_watchdog_test_support::scrape::{Scraper, Scrapes};
use kafka_watchdog_test_support::watchdog::LOOPBACK;
use serde::Serialize;

use super::{launch, Bins};
use crate::lab::webhook_yaml;

/// One scenario's scrapes, and for the incident scenarios when each cluster's page came.
#[derive(Debug, Serialize)]
pub struct Scenario {
    pub name: &'static str,
    pub binary: &'static str,
    pub secs: u64,
    pub scrapes: usize,
    pub failed: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub max_ms: f64,
    /// Seconds from the launch to each cluster's `opened` page (incident scenarios).
    pub pages_after: Vec<f64>,
    /// Clusters expected to page, and by when (s after the launch): the confirmation (a
    /// round or two of 2 s, open_after 2 s: 8 s), six fsyncs on each page's way out (the
    /// book's, the inbox's and the spool's writes, file and directory each), 5 s of slack.
    pub pages_expected: usize,
    pub pages_bound: Option<f64>,
    /// The MSK scenario: the keys came from the fake metadata endpoint (not from AWS_*
    /// variables of the bench's environment).
    pub keys_from_fake_endpoint: Option<bool>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn scenario(name: &'static str, binary: &'static str, secs: u64, s: &Scrapes) -> Scenario {
    Scenario {
        name,
        binary,
        secs,
        scrapes: s.took.len(),
        failed: s.failed.len(),
        p50_ms: ms(s.quantile(0.5)),
        p95_ms: ms(s.p95()),
        max_ms: ms(s.max()),
        pages_after: Vec::new(),
        pages_expected: 0,
        pages_bound: None,
        keys_from_fake_endpoint: None,
    }
}

const CLUSTERS: usize = 3;

/// Three clusters of a fake broker 1 and a broker 2 that refuses connections, each opening
/// a broker incident within seconds; `fsync_ms` (debug build) slows every fsync of the
/// state directory, where the incident book and the webhook spool are written.
pub fn slow_disk(
    rt: &tokio::runtime::Runtime,
    bins: &Bins,
    dir: &Path,
    fsync_ms: Option<u64>,
    secs: u64,
) -> Result<Scenario> {
    let brokers: Vec<FakeBroker> = (0..CLUSTERS)
        .map(|_| Ok(broker(rt, vec![(2, refused_port()?)])))
        .collect::<std::io::Result<_>>()?;
    let sink = rt.block_on(Sink::start("127.0.0.1:0".parse()?))?;
    let clusters = kafka_watchdog_test_support::fake_cluster::msk_iam_clusters(&brokers);
    let name = if fsync_ms.is_some() {
        "slow-disk"
    } else {
        "baseline"
    };
    let run = dir.join(name);
    let port = kafka_watchdog_test_support::watchdog::free_port()?;
    let yaml = format!(
        "instance_id: bench\nhttp:\n  listen: 127.0.0.1:{port}\nlog:\n  level: info\n\
         state_dir: {}\n{}clusters:\n{clusters}",
        run.join("state").display(),
        webhook_yaml(&sink.url(), "warning")
    );
    let fsync = fsync_ms.map(|m| m.to_string()).unwrap_or_default();
    let env: Vec<(&str, &str)> = fsync_ms
        .map(|_| ("KAFKA_WATCHDOG_TEST_SLOW_FSYNC_MS", fsync.as_str()))
        .into_iter()
        .collect();
    let scraper = Scraper::start(LOOPBACK, port);
    let started = Instant::now();
    let w = launch(
        &bins.debug,
        &run,
        port,
        &yaml,
        &env,
        Duration::from_secs(60),
    );
    let mut pages: Vec<(String, f64)> = Vec::new();
    while w.is_ok() && started.elapsed() < Duration::from_secs(secs) {
        for v in sink.received() {
            let cluster = v["cluster"].as_str().unwrap_or_default().to_string();
            if v["event"] == "opened"
                && v["kind"] == "broker"
                && v["broker_id"] == 2
                && !pages.iter().any(|(c, _)| *c == cluster)
            {
                pages.push((cluster, started.elapsed().as_secs_f64()));
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let scrapes = scraper.stop();
    let w = w?;
    println!("  {name}: /metrics {}; pages {pages:?}", scrapes.summary());
    drop(w);
    let mut s = scenario(name, "debug", secs, &scrapes);
    s.pages_after = pages.into_iter().map(|(_, t)| t).collect();
    s.pages_expected = CLUSTERS;
    s.pages_bound = Some(8.0 + 6.0 * fsync_ms.unwrap_or(0) as f64 / 1000.0 + 5.0);
    Ok(s)
}

/// Two AWS_MSK_IAM clusters with the canary on; the credentials come from an instance
/// metadata endpoint that answers half a second late with keys that live 20 s, so every
/// token is asked for within the keys' last five minutes (the chain asked again at each
/// use) and renewed during the run, both canaries at once.
pub fn msk_iam(
    rt: &tokio::runtime::Runtime,
    bins: &Bins,
    dir: &Path,
    secs: u64,
) -> Result<Scenario> {
    let aws = rt.block_on(FakeAws::start("unused", "unused"))?;
    aws.set_slow(Duration::from_millis(500), Duration::from_secs(20));
    let brokers: Vec<FakeBroker> = (0..2).map(|_| broker(rt, Vec::new())).collect();
    let run = dir.join("msk-iam");
    let port = kafka_watchdog_test_support::watchdog::free_port()?;
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
        "instance_id: bench\nhttp:\n  listen: 127.0.0.1:{port}\nlog:\n  level: info\n\
         state_dir: {}\nclusters:\n{clusters}",
        run.join("state").display()
    );
    let imds = aws.imds_endpoint();
    let (no_config, no_credentials) = (run.join("no-config"), run.join("no-credentials"));
    let (no_config, no_credentials) = (
        no_config.to_str().context("path")?.to_string(),
        no_credentials.to_str().context("path")?.to_string(),
    );
    let env = [
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.as_str()),
        ("AWS_CONFIG_FILE", no_config.as_str()),
        ("AWS_SHARED_CREDENTIALS_FILE", no_credentials.as_str()),
    ];
    let scraper = Scraper::start(LOOPBACK, port);
    let started = Instant::now();
    let w = launch(
        &bins.release,
        &run,
        port,
        &yaml,
        &env,
        Duration::from_secs(60),
    );
    if w.is_ok() {
        std::thread::sleep(Duration::from_secs(secs).saturating_sub(started.elapsed()));
    }
    let scrapes = scraper.stop();
    let w = w?;
    println!("  msk-iam: /metrics {}", scrapes.summary());
    drop(w);
    let mut s = scenario("msk-iam", "release", secs, &scrapes);
    s.keys_from_fake_endpoint = Some(
        aws.calls()
            .iter()
            .any(|c| c.contains("kw-node-role -> 200")),
    );
    Ok(s)
}
