//! What the lab benchmarks share: the watchdog profiles, the real kafka-watchdog process with
//! a generated config, its HTTP surface, Kafka's own view read over the wire module, and
//! bringing the lab back to a healthy state between trials.

pub mod admin;
pub mod detect;
pub mod noise;
pub mod overhead;
pub mod own_faults;
pub mod recorder;
pub mod routine;
pub mod soak;
pub mod unwell;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kafka_lab::{Lab, UpOptions};
use kafka_watchdog_test_support::watchdog as support;
use serde::Serialize;
use serde_json::Value;

use kafka_watchdog::model::round::{BrokerId, MetadataView};
use kafka_watchdog::observe::wire::{
    BrokerClient, OngoingReassignment, PartitionOutcome, WireOptions,
};

/// The watchdog settings a lab benchmark runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// The built-in defaults: a round every 10 s, connect 2 s, request 3 s.
    Default,
    /// A round every 2 s, connect and request 1 s, a liveness request every 250 ms.
    // The floor stays 1 s, above GC pauses; the shorter interval is what makes a silence
    // cross it between 1 and 1.25 s after the fault, where 500 ms makes it 1 to 1.5 s.
    Aggressive,
}

impl Profile {
    pub fn parse(s: &str) -> Option<Self> {
        <Self as clap::ValueEnum>::from_str(s, false).ok()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::Aggressive => "aggressive",
        }
    }

    pub fn round_interval(self) -> Duration {
        match self {
            Profile::Default => Duration::from_secs(10),
            Profile::Aggressive => Duration::from_secs(2),
        }
    }

    /// Cluster-level YAML lines (four spaces in). The default profile writes nothing, so it
    /// follows whatever the built-in defaults are.
    fn cluster_yaml(self) -> &'static str {
        match self {
            Profile::Default => "",
            Profile::Aggressive => {
                "    round_interval_secs: 2\n    connect_timeout_ms: 1000\n    request_timeout_ms: 1000\n    canary:\n      produce_timeout_ms: 1000\n    verdict:\n      resolve_after_secs: 4\n      liveness_interval_ms: 250\n"
            }
        }
    }
}

/// Rounds the bench waits for a resolve: the built-in `resolve_after_secs` (20 s) is two
/// default rounds; the aggressive profile sets 4 s, two of its rounds.
pub const RESOLVE_AFTER_ROUNDS: u32 = 3;

/// The bench topics: RF 3 (min ISR 2), each broker the preferred leader of one partition; and
/// RF 2, so that killing both replicas of a partition leaves it without a leader.
pub const TOPIC_RF3: &str = "bench-detect-rf3";
pub const TOPIC_RF2: &str = "bench-detect-rf2";

/// The binary as given, else relative to the workspace root (the bench may run from anywhere).
pub fn resolve_bin(bin: &Path) -> Result<PathBuf> {
    if bin.exists() {
        return Ok(bin.to_path_buf());
    }
    if bin.is_relative() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(bin);
        if root.exists() {
            return Ok(root);
        }
    }
    bail!(
        "{} not found; build it first (cargo build --release) or pass --watchdog-bin",
        bin.display()
    )
}

/// A running kafka-watchdog (the test-support crate's launcher, the one the integration
/// tests use), with the benchmark's config; killed when dropped.
pub struct Watchdog(support::Watchdog);

impl std::ops::Deref for Watchdog {
    type Target = support::Watchdog;
    fn deref(&self) -> &support::Watchdog {
        &self.0
    }
}

impl Watchdog {
    /// Writes a config for the lab with `profile` (and a generic webhook to `webhook_url`),
    /// validates it with `check-config`, starts `run` and waits for `/readyz`.
    pub fn start(
        bin: &Path,
        name: &str,
        lab: &Lab,
        profile: Profile,
        webhook_url: Option<&str>,
    ) -> Result<Watchdog> {
        let bootstrap: Vec<String> = lab.bootstrap().split(',').map(str::to_string).collect();
        Watchdog::start_with(bin, name, &bootstrap, "", profile, webhook_url)
    }

    /// [`start`](Self::start) with other bootstrap servers and more cluster-level YAML
    /// (four spaces in: security, host mode...).
    pub fn start_with(
        bin: &Path,
        name: &str,
        bootstrap: &[String],
        cluster_yaml: &str,
        profile: Profile,
        webhook_url: Option<&str>,
    ) -> Result<Watchdog> {
        let webhooks = webhook_url.map(|url| webhook_yaml(url, "info"));
        Watchdog::start_config(
            bin,
            name,
            bootstrap,
            cluster_yaml,
            profile,
            webhooks.as_deref().unwrap_or(""),
        )
    }

    /// [`start_with`](Self::start_with) with the top-level `webhooks:` YAML given whole
    /// (empty: none), for a receiver configured otherwise than the benchmarks' default.
    pub fn start_config(
        bin: &Path,
        name: &str,
        bootstrap: &[String],
        cluster_yaml: &str,
        profile: Profile,
        webhooks_yaml: &str,
    ) -> Result<Watchdog> {
        let bin = resolve_bin(bin)?;
        let port = support::free_port().context("find a free port")?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let dir = std::env::temp_dir().join(format!("kw-bench-{name}-{stamp}"));
        let mut yaml = format!(
            "instance_id: bench\nhttp:\n  listen: 127.0.0.1:{port}\nlog:\n  level: info\nstate_dir: {}\nclusters:\n  - name: lab\n    bootstrap_servers: [{}]\n{}{cluster_yaml}",
            dir.join("state").display(),
            bootstrap.join(", "),
            profile.cluster_yaml(),
        );
        yaml.push_str(webhooks_yaml);
        let w = support::Watchdog::launch(&support::Launch {
            host: support::LOOPBACK,
            bin: &bin,
            dir: &dir,
            port,
            yaml: &yaml,
            check_config: true,
            ready_within: Duration::from_secs(60),
            env: &[],
        })?;
        println!(
            "  watchdog ({} profile) ready on 127.0.0.1:{port}, files in {}",
            profile.as_str(),
            w.dir.display()
        );
        Ok(Watchdog(w))
    }

    pub fn status_blocking(&self) -> Result<Value> {
        Ok(self.0.status()?)
    }

    pub async fn status(&self) -> Result<Value> {
        Ok(self.0.status_async().await?)
    }

    /// Waits until every given broker is `healthy` in /status.
    pub fn wait_healthy(&self, brokers: &[BrokerId], timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(s) = self.status_blocking() {
                let states = broker_states(&s);
                if brokers
                    .iter()
                    .all(|b| states.get(b).map(String::as_str) == Some("healthy"))
                {
                    return Ok(());
                }
                if Instant::now() > deadline {
                    bail!(
                        "brokers not all healthy after {} s: {states:?}",
                        timeout.as_secs()
                    );
                }
            } else if Instant::now() > deadline {
                bail!("no /status within {} s", timeout.as_secs());
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Watchdog {
    /// Waits until every given controller is `healthy` in /status and the quorum has a
    /// leader and no problem: a controller thawed or resumed rejoins as a follower and must
    /// catch up before the next fault means what it says.
    pub fn wait_control_plane_healthy(&self, controllers: &[i32], timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.status_blocking() {
                Ok(s) => {
                    let states = controller_states(&s);
                    let healthy = controllers
                        .iter()
                        .all(|c| states.get(c).map(String::as_str) == Some("healthy"));
                    let quorum = &s["clusters"][0]["quorum"];
                    if healthy && quorum["leader"].is_i64() && quorum_problem(&s).is_none() {
                        return Ok(());
                    }
                    format!("controllers {states:?}, problem {}", quorum["problem"])
                }
                Err(e) => format!("no /status: {e}"),
            };
            if Instant::now() > deadline {
                bail!(
                    "the control plane not healthy after {} s: {last}",
                    timeout.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// One generic receiver at `url` that hears of incidents from `min_severity` up.
pub fn webhook_yaml(url: &str, min_severity: &str) -> String {
    format!(
        "webhooks:\n  - name: bench-sink\n    url: {url}\n    format: generic\n    min_severity: {min_severity}\n"
    )
}

pub use support::{broker_states, controller_states, status_round};

/// Rules that fired for a KRaft controller, "rule,rule".
pub fn controller_rules(status: &Value, controller: i32) -> String {
    support::controller_rules(status, controller).join(",")
}

/// The quorum's problem on /status (`{kind, detail, suspects}`), when it has one.
pub fn quorum_problem(status: &Value) -> Option<&Value> {
    let p = &status["clusters"][0]["quorum"]["problem"];
    (!p.is_null()).then_some(p)
}

/// Cluster-level YAML (four spaces in) naming the lab's controllers by id, as an operator
/// configures them (`id@host:port`): the watchdog then asks each one directly, so a frozen
/// controller is told from one that is merely not the leader.
pub fn controllers_yaml(lab: &Lab) -> String {
    let controllers: Vec<String> = lab
        .controllers()
        .iter()
        .zip(lab.controller_addresses())
        .map(|(id, address)| format!("'{id}@{address}'"))
        .collect();
    format!("    controllers: [{}]\n", controllers.join(", "))
}

/// Rules that fired for a broker, "rule,rule".
pub fn broker_rules(status: &Value, broker: BrokerId) -> String {
    support::broker_rules(status, broker).join(",")
}

pub async fn http_get(port: u16, path: &str) -> Result<(u16, String)> {
    Ok(support::http_get_async(port, path).await?)
}

/// Brings the lab up (idempotent) and back to health: no faults, every broker running and
/// registered.
/// A runtime for a lab benchmark's async parts and the lab, up; its release and size go
/// into the section's notes.
pub fn runtime_and_lab(
    section: &mut crate::output::Section,
) -> Result<(tokio::runtime::Runtime, Lab)> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let lab = lab_up()?;
    section.note(format!(
        "Kafka {}, {} brokers",
        lab.version().maven_version(),
        lab.brokers().len()
    ));
    Ok((rt, lab))
}

pub fn lab_up() -> Result<Lab> {
    lab_up_with(&UpOptions::default())
}

/// [`lab_up`] with other options; a lab set up otherwise (another Kafka release or
/// security) is taken down first, as the test harness does.
pub fn lab_up_with(opts: &UpOptions) -> Result<Lab> {
    // Held until the benchmark exits, so no test run injects faults into its lab meanwhile.
    static SESSION: std::sync::OnceLock<kafka_lab::SessionLock> = std::sync::OnceLock::new();
    if SESSION.get().is_none() {
        let _ = SESSION.set(kafka_lab::SessionLock::take().context("lab session lock")?);
    }
    if let Ok(existing) = Lab::open() {
        if !existing.is_set_up_as(opts) {
            println!(
                "  taking down the lab set up otherwise (another release, security or quorum)"
            );
            Lab::down().context("kafka-lab down")?;
        }
    }
    let mut lab = Lab::up(opts).context("kafka-lab up")?;
    restore(&mut lab)?;
    Ok(lab)
}

pub fn restore(lab: &mut Lab) -> Result<()> {
    lab.heal(None)?;
    for id in lab.controllers().into_iter().chain(lab.brokers()) {
        if lab.running_pid(id).is_none() {
            lab.start(id)?;
        }
    }
    lab.wait_ready(Duration::from_secs(150))?;
    Ok(())
}

/// The bench topics' replica assignments.
pub fn bench_topics(brokers: &[BrokerId]) -> Vec<(&'static str, Vec<Vec<BrokerId>>, &'static str)> {
    let n = brokers.len();
    let rotate = |k: usize, len: usize| -> Vec<BrokerId> {
        (0..len).map(|i| brokers[(k + i) % n]).collect()
    };
    vec![
        (
            TOPIC_RF3,
            (0..n).map(|k| rotate(k, 3.min(n))).collect(),
            "2",
        ),
        (
            TOPIC_RF2,
            (0..n).map(|k| rotate(k, 2.min(n))).collect(),
            "1",
        ),
    ]
}

pub fn create_bench_topics(lab: &Lab) -> Result<()> {
    let bs = lab.bootstrap();
    for (topic, assignment, min_isr) in bench_topics(&lab.brokers()) {
        kafka_lab::client::create_topic(
            &bs,
            topic,
            &assignment,
            &[("min.insync.replicas", min_isr)],
        )
        .with_context(|| format!("create {topic}"))?;
    }
    Ok(())
}

/// Kafka's own view, read from chosen brokers over the watchdog's wire client with short
/// deadlines; connections are kept between polls and reopened after a failure.
pub struct KafkaEyes {
    opts: WireOptions,
    clients: BTreeMap<String, BrokerClient>,
}

impl KafkaEyes {
    pub fn new() -> KafkaEyes {
        KafkaEyes {
            opts: WireOptions {
                connect_timeout: Duration::from_millis(1000),
                request_timeout: Duration::from_millis(1000),
                client_id: "kafka-watchdog-bench".into(),
                ..WireOptions::default()
            },
            clients: BTreeMap::new(),
        }
    }

    /// A usable client of `address`, opened when there is none (or the last one failed).
    async fn client(&mut self, address: &str) -> Result<&mut BrokerClient> {
        if !self
            .clients
            .get(address)
            .is_some_and(BrokerClient::is_usable)
        {
            let c = BrokerClient::connect(address, &self.opts).await?;
            self.clients.insert(address.to_string(), c.client);
        }
        Ok(self.clients.get_mut(address).expect("just inserted"))
    }

    /// `address`'s Metadata for `topics` (all topics when None).
    pub async fn metadata(
        &mut self,
        address: &str,
        topics: Option<&[String]>,
    ) -> Result<MetadataView> {
        let client = self.client(address).await?;
        match client.metadata(topics).await {
            Ok(t) => Ok(t.value),
            Err(e) => {
                self.clients.remove(address);
                Err(e.into())
            }
        }
    }

    /// Partitions whose ISR is smaller than their replica set, over every topic `address` knows.
    pub async fn under_replicated(&mut self, address: &str) -> Result<usize> {
        let md = self.metadata(address, None).await?;
        Ok(md
            .topics
            .values()
            .flat_map(|t| t.partitions.iter())
            .filter(|p| p.isr.len() < p.replicas.len() || p.leader < 0)
            .count())
    }

    /// Asks for preferred leaders on the bench topics, so every trial starts from the same
    /// layout (the lab runs with auto leader rebalancing off). Best effort.
    pub async fn elect_preferred(
        &mut self,
        address: &str,
        partitions: &[(String, i32)],
    ) -> Result<()> {
        self.elect(address, partitions).await.map(|_| ())
    }

    /// Preferred leader elections, with each partition's outcome (ELECTION_NOT_NEEDED, 84,
    /// for a partition already led by its preferred leader).
    pub async fn elect(
        &mut self,
        address: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<PartitionOutcome>> {
        let client = self.client(address).await?;
        let r = client
            .elect_leaders(true, partitions, Duration::from_secs(5))
            .await;
        if r.is_err() {
            self.clients.remove(address);
        }
        r.map(|t| t.value).map_err(Into::into)
    }

    /// Starts reassignments of partitions to new replica lists (preferred leader first).
    pub async fn reassign(
        &mut self,
        address: &str,
        moves: &[(String, i32, Vec<i32>)],
    ) -> Result<Vec<PartitionOutcome>> {
        let moves: Vec<(String, i32, Option<Vec<i32>>)> = moves
            .iter()
            .map(|(t, p, r)| (t.clone(), *p, Some(r.clone())))
            .collect();
        let client = self.client(address).await?;
        let r = client
            .alter_partition_reassignments(&moves, Duration::from_secs(10))
            .await;
        if r.is_err() {
            self.clients.remove(address);
        }
        r.map(|t| t.value).map_err(Into::into)
    }

    /// Every reassignment still going on in the cluster.
    pub async fn ongoing_reassignments(
        &mut self,
        address: &str,
    ) -> Result<Vec<OngoingReassignment>> {
        let client = self.client(address).await?;
        let r = client
            .list_partition_reassignments(None, Duration::from_secs(10))
            .await;
        if r.is_err() {
            self.clients.remove(address);
        }
        r.map(|t| t.value).map_err(Into::into)
    }
}

/// Waits until nothing in the cluster is under-replicated, as a careful operator does
/// before the next step of a rolling restart.
pub async fn wait_fully_replicated(
    eyes: &mut KafkaEyes,
    lab: &Lab,
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let addresses: Vec<String> = lab
        .brokers()
        .iter()
        .map(|b| kafka_lab::broker_address(*b))
        .collect();
    loop {
        // Every broker that answers must agree: a restarted broker's cache may lag.
        let mut answered = 0;
        let mut clean = true;
        for a in &addresses {
            if let Ok(n) = eyes.under_replicated(a).await {
                answered += 1;
                clean &= n == 0;
            }
        }
        if answered > 0 && clean {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "partitions still under-replicated after {} s",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
