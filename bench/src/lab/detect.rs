//! `detect`: detection latency per fault on the real lab. Each trial injects a fault at a
//! recorded instant and polls every 100 ms: the watchdog's /status (the broker's state leaves
//! `healthy`; later `zombie`/`down`), the webhook receiver (a notification naming the broker),
//! and Kafka itself through the brokers the fault does not touch (the broker is fenced and
//! drops out of their metadata, an ISR shrinks, a partition it led gets another leader).
//! Between trials the lab is healed, leaders are moved back to their preferred replicas and
//! the watchdog must see every broker healthy again with its incidents resolved.
//!
//! The control-plane faults (issue 25) fault a KRaft controller or a broker's metadata
//! loader. They need their own lab layout (three controllers, or the only one), so trials
//! are grouped by layout and the lab is set up again at most once per switch; their
//! watchdog is told the controllers (`controllers:`), and the trial reads
//! `/status` `quorum` (each controller's state, the quorum's problem) and notifications by
//! their subject (`controller-N`, `cluster` for the quorum).
//!
//! A broker's other role (issue 26), its group coordinator stalled, is read the same way on
//! the default lab (one controller): one broker struck (one that leads a `__consumer_offsets`
//! partition), named by its role's rule (`group_coordinator_stalled`), notifications by
//! subject, misattributions through the heal; Kafka never reacts to it.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use kafka_lab::sink::Sink;
use kafka_lab::{broker_address, Lab, Stall, UpOptions};
use serde::Serialize;
use serde_json::{json, Value};

use kafka_watchdog::model::round::{BrokerId, MetadataView};

use super::{
    bench_topics, broker_rules, broker_states, controller_rules, controller_states,
    controllers_yaml, create_bench_topics, lab_up_with, quorum_problem, restore,
    wait_fully_replicated, KafkaEyes, Profile, Watchdog, RESOLVE_AFTER_ROUNDS, TOPIC_RF2,
    TOPIC_RF3,
};
use crate::output::{opt_num, Section, Table};
use crate::stats::summarize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// SIGSTOP: process and port alive, nothing answers.
    Freeze,
    /// The broker's replica fetchers cannot reach any leader; it stays registered.
    CutReplication,
    /// Cut off from the controller and the other brokers, reachable by clients.
    Isolate,
    /// SIGKILL.
    Kill,
    /// SIGKILL of both replicas of an RF 2 partition: the partition goes offline.
    KillTwo,
    /// Only the request-handler and network threads stopped (`kafka-lab stall`): connects
    /// are accepted and nothing is answered, while the heartbeat keeps it registered and
    /// unfenced: the zombie Kafka never repairs.
    Stall,
    /// Only the replica fetcher threads stopped (`kafka-lab stall --fetchers`, incident 2's
    /// dead fetcher): it answers clients and drops out of the ISRs it follows.
    StallFetchers,
    /// SIGSTOP of the active controller of three: Kafka elects another within seconds; the
    /// frozen one is the zombie.
    ControllerFreeze,
    /// SIGSTOP of the only controller: the quorum is lost, nothing can take over.
    QuorumFreeze,
    /// The active controller's event handler stopped while its Raft threads keep the
    /// leadership (`kafka-lab stall --controller`): Kafka never elects another.
    ControllerStall,
    /// A broker's metadata loader stopped while it heartbeats and fetches the log
    /// (`kafka-lab stall --metadata`), then a topic created that it is to lead: a leadership
    /// change it never learns of.
    MetadataStall,
    /// A broker's group coordinator threads stopped (`kafka-lab stall --group-coordinator`,
    /// Kafka 4) while it answers Metadata, produce and fetch: the groups hashed onto the
    /// `__consumer_offsets` partitions it leads can neither commit nor rebalance, and Kafka
    /// never notices.
    GroupCoordinatorStall,
    /// A broker's transaction coordinator threads stopped (`kafka-lab stall
    /// --txn-coordinator`: its marker sender and transaction log scheduler) while it answers
    /// every request: a committed transaction's markers are never written, so the
    /// transactional producers on the `__transaction_state` partitions it leads wait
    /// forever. The watchdog runs its transaction probe with the lab's settings
    /// (`TXN_PROBE_YAML`), as issue 26's goal says.
    TxnCoordinatorStall,
    /// One of a broker's two log directories filled (`kafka-lab fill`, on a lab set up with
    /// `--log-dirs 2`): Kafka takes the directory offline and the broker stays up, serving
    /// the partitions on its other directory and none of those on the full one.
    LogDirFill,
}

/// What a lab must be set up as for a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    controllers: u32,
    log_dirs: u32,
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} controller(s)", self.controllers)?;
        if self.log_dirs > 1 {
            write!(f, ", {} log directories per broker", self.log_dirs)?;
        }
        Ok(())
    }
}

/// What a coordinator fault stops and how it is read.
struct CoordinatorFault {
    /// The topic whose partitions are its shards.
    topic: &'static str,
    /// Its look on /status.
    status_key: &'static str,
    /// The rule that names it.
    rule: &'static str,
    stall: Stall,
}

/// The transaction probe as the lab runs it (issue 26: "off by default, on in the lab"): a
/// look every 500 ms and 1.5 s of grace for a transaction that does not end.
const TXN_PROBE_YAML: &str =
    "    coordinators:\n      transactions: true\n      transactions_interval_ms: 500\n      txn_stall_grace_ms: 1500\n";

/// Kafka's topic of transaction states.
const TRANSACTIONS_TOPIC: &str = "__transaction_state";

impl Fault {
    fn parse(s: &str) -> Option<Self> {
        <Self as clap::ValueEnum>::from_str(s, false).ok()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Freeze => "freeze",
            Fault::CutReplication => "cut-replication",
            Fault::Isolate => "isolate",
            Fault::Kill => "kill",
            Fault::KillTwo => "kill-two",
            Fault::Stall => "stall",
            Fault::StallFetchers => "stall-fetchers",
            Fault::ControllerFreeze => "controller-freeze",
            Fault::QuorumFreeze => "quorum-freeze",
            Fault::ControllerStall => "controller-stall",
            Fault::MetadataStall => "metadata-stall",
            Fault::GroupCoordinatorStall => "group-coordinator-stall",
            Fault::TxnCoordinatorStall => "txn-coordinator-stall",
            Fault::LogDirFill => "log-dir-fill",
        }
    }

    /// The lab this fault's trials run on.
    fn layout(self) -> Layout {
        Layout {
            controllers: self.controllers(),
            log_dirs: if self == Fault::LogDirFill { 2 } else { 1 },
        }
    }

    /// A coordinator's fault: what it stops and how it is read; `None` for the others.
    fn coordinator(self) -> Option<CoordinatorFault> {
        match self {
            Fault::GroupCoordinatorStall => Some(CoordinatorFault {
                topic: OFFSETS_TOPIC,
                status_key: "group_coordinators",
                rule: "group_coordinator_stalled",
                stall: Stall::GroupCoordinator,
            }),
            Fault::TxnCoordinatorStall => Some(CoordinatorFault {
                topic: TRANSACTIONS_TOPIC,
                status_key: "txn_coordinators",
                rule: "txn_coordinator_stalled",
                stall: Stall::TxnCoordinator,
            }),
            _ => None,
        }
    }

    /// Faults of the control plane: their trials read the quorum, not only brokers. A
    /// stalled group coordinator is read the same way (one node, named by the rule of its
    /// role, notifications by subject, misattributions through the heal).
    fn control_plane(self) -> bool {
        matches!(
            self,
            Fault::ControllerFreeze
                | Fault::QuorumFreeze
                | Fault::ControllerStall
                | Fault::MetadataStall
                | Fault::GroupCoordinatorStall
                | Fault::TxnCoordinatorStall
        )
    }

    /// The dedicated controllers the lab needs for this fault. The broker faults keep the
    /// one-controller lab their earlier figures were measured on; a frozen or stalled active
    /// controller needs others that could take over (and for the stall, that do not); a
    /// quorum lost needs the only one. The metadata stall runs where tests/control_plane.rs
    /// proved it, beside three; the group coordinator stall where tests/coordinators.rs did,
    /// on the default lab.
    fn controllers(self) -> u32 {
        match self {
            Fault::ControllerFreeze | Fault::ControllerStall | Fault::MetadataStall => 3,
            _ => 1,
        }
    }

    /// A follower that stops replicating is named (degraded), not a zombie: its goal is any
    /// non-healthy state.
    fn names_a_follower(self) -> bool {
        matches!(self, Fault::CutReplication | Fault::StallFetchers)
    }

    /// The Kafka reactions this fault must cause; a trial waits for them (and the watchdog's
    /// state change) before its grace period for the rest starts. A cut replication link
    /// leaves the broker registered and leading its own partitions.
    fn kafka_expects(self) -> (bool, bool, bool) {
        // (fenced, ISR shrink, leader change)
        match self {
            Fault::CutReplication | Fault::StallFetchers => (false, true, false),
            // Kafka does nothing about it: that is the fault.
            Fault::Stall => (false, false, false),
            // Kafka's own reaction is the directory taken offline, which `fill` waits for;
            // the broker stays registered and leads on elsewhere.
            Fault::LogDirFill => (false, false, false),
            _ => (true, true, true),
        }
    }
}

pub struct DetectOptions {
    pub watchdog_bin: PathBuf,
    pub trials: usize,
    pub profiles: Vec<Profile>,
    pub faults: Vec<Fault>,
    pub trial_timeout: Duration,
}

/// One trial; every time is seconds after the fault was in place.
#[derive(Debug, Clone, Default, Serialize)]
struct Trial {
    profile: &'static str,
    fault: &'static str,
    trial: usize,
    targets: Vec<BrokerId>,
    /// How long the lab call that injected the fault took (the clock starts at its end).
    inject_secs: f64,
    state_secs: Option<f64>,
    first_state: Option<String>,
    rules: Option<String>,
    critical_secs: Option<f64>,
    critical_state: Option<String>,
    webhook_secs: Option<f64>,
    webhook: Option<String>,
    fenced_secs: Option<f64>,
    isr_shrink_secs: Option<f64>,
    leader_change_secs: Option<f64>,
    new_leader: Option<BrokerId>,
    /// The partitions the targets led at the fault (the bench topics'; for
    /// group-coordinator-stall the `__consumer_offsets` ones, its coordinator shards, which
    /// 'leader changed' and 'ISR shrink' then watch).
    led_at_start: Vec<String>,
    /// Brokers other than the targets that the watchdog called non-healthy or named in a
    /// webhook during the trial, first sighting each ("2 degraded canary_not_enough_replicas
    /// at 2.1 s"): a page about a healthy broker sends the on-call to the wrong machine.
    misattributed: Vec<String>,
    /// Control plane: when the quorum's problem naming the target was first on /status,
    /// and which ("no_leader [0]").
    quorum_problem_secs: Option<f64>,
    quorum_problem: Option<String>,
    /// metadata-stall: the topic created with the stalled broker as its leader, when that
    /// change was asked for (the reference of its goals: the call's start, so connecting
    /// the admin client counts against the watchdog) and when the call returned.
    topic: Option<String>,
    change_secs: Option<f64>,
    change_done_secs: Option<f64>,
    /// metadata-stall: when the broker was first named by `stale_metadata`.
    stale_metadata_secs: Option<f64>,
    /// group-coordinator-stall: when the broker was first `zombie` with
    /// `group_coordinator_stalled` as its first rule.
    coordinator_stalled_secs: Option<f64>,
    /// log-dir-fill: when the broker was first named by `log_dir_failed`.
    log_dir_failed_secs: Option<f64>,
    /// controller-freeze (and -stall, where it should never come): when another controller
    /// first answered DescribeQuorum as the quorum's leader.
    new_quorum_leader_secs: Option<f64>,
    new_quorum_leader: Option<i32>,
    /// Control plane: brokers Kafka fenced during the trial (absent from another broker's
    /// Metadata, which in KRaft lists only registered, unfenced brokers), first sighting
    /// each ("3 at 4.9 s"): a broker named then was named for something Kafka did to it.
    kafka_fenced: Vec<String>,
    error: Option<String>,
}

fn secs_since(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64()
}

/// Targets of trial `i`: brokers in turn, or the two replicas of one RF 2 partition. A
/// controller fault's target is the node the lab has at the time (`control_target`).
fn targets(fault: Fault, brokers: &[BrokerId], i: usize) -> Vec<BrokerId> {
    let n = brokers.len();
    match fault {
        Fault::KillTwo => vec![brokers[i % n], brokers[(i + 1) % n]],
        _ => vec![brokers[i % n]],
    }
}

/// The node a control-plane fault of trial `i` strikes: the active controller (`active`,
/// as the quorum's leader says) for a frozen or stalled one, since a follower's fault is
/// another story; the only controller for a quorum lost; brokers in turn for a metadata
/// stall; for a group coordinator stall, in turn the brokers that lead a
/// `__consumer_offsets` partition (`offsets_leaders`, its partitions' leaders now: the lab's
/// topic has 3 partitions and after a restart a broker may lead none, a coordinator with
/// nothing to coordinate).
fn control_target(
    fault: Fault,
    controllers: &[i32],
    active: Option<i32>,
    brokers: &[BrokerId],
    offsets_leaders: &[BrokerId],
    i: usize,
) -> Result<i32, String> {
    match fault {
        Fault::ControllerFreeze | Fault::ControllerStall => match active {
            Some(a) if controllers.contains(&a) => Ok(a),
            Some(a) => Err(format!(
                "the quorum's leader {a} is none of the controllers {controllers:?}"
            )),
            None => Err("the quorum has no leader".into()),
        },
        Fault::QuorumFreeze => match controllers {
            [only] => Ok(*only),
            _ => Err(format!(
                "a quorum lost needs the only controller; the lab has {controllers:?}"
            )),
        },
        Fault::MetadataStall if !brokers.is_empty() => Ok(brokers[i % brokers.len()]),
        Fault::GroupCoordinatorStall | Fault::TxnCoordinatorStall => {
            let leading: Vec<BrokerId> = brokers
                .iter()
                .copied()
                .filter(|b| offsets_leaders.contains(b))
                .collect();
            if leading.is_empty() {
                Err(format!(
                    "no broker leads a coordinator shard (leaders {offsets_leaders:?})"
                ))
            } else {
                Ok(leading[i % leading.len()])
            }
        }
        _ => Err(format!("{} strikes no control-plane node", fault.as_str())),
    }
}

/// The lab layouts (dedicated controllers) `faults` need, each once, the one the lab has
/// now first: setting the lab up again takes minutes and a run switches at most once.
fn layout_order(faults: &[Fault], current: Option<Layout>) -> Vec<Layout> {
    let mut layouts: Vec<Layout> = Vec::new();
    for f in faults {
        if !layouts.contains(&f.layout()) {
            layouts.push(f.layout());
        }
    }
    if let Some(pos) = current.and_then(|c| layouts.iter().position(|l| *l == c)) {
        let now = layouts.remove(pos);
        layouts.insert(0, now);
    }
    layouts
}

/// The subject of a notification, from its dedup key (`kafka-watchdog/<cluster>/<subject>/
/// <kind>`): `broker-2`, `controller-100`, `cluster`.
fn subject(body: &Value) -> &str {
    body["dedup_key"]
        .as_str()
        .and_then(|k| k.split('/').nth(2))
        .unwrap_or_default()
}

fn suspects(body: &Value) -> Vec<i64> {
    body["suspects"]
        .as_array()
        .map(|s| s.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default()
}

/// The nodes other than `targets` a notification names, by its subject (`broker-N`,
/// `controller-N`) or among its suspects: each is a misattribution. A cluster-level
/// incident that suspects nobody names no node.
fn others_named(body: &Value, targets: &[i32]) -> Vec<String> {
    let is_target = |n: i64| targets.iter().any(|t| i64::from(*t) == n);
    let mut others = Vec::new();
    let subject = subject(body);
    let node = subject
        .strip_prefix("broker-")
        .or_else(|| subject.strip_prefix("controller-"))
        .and_then(|n| n.parse::<i64>().ok());
    if node.is_some_and(|n| !is_target(n)) {
        others.push(subject.to_string());
    }
    for n in suspects(body) {
        if !is_target(n) {
            others.push(format!("suspect {n}"));
        }
    }
    others
}

/// Whether a notification is the page a control-plane fault's goal waits for: the
/// controller's own incident (or the quorum's, which suspects it) for a frozen or stalled
/// controller, and for the only controller too (one fault, one page: the quorum it took
/// down is inside the controller's incident, whichever opens first); the broker's own
/// incident for a metadata stall; for a group coordinator stall, the broker's own incident
/// with `group_coordinator_stalled` in its evidence (a page about it for another reason is
/// not the one the fault must cause).
fn names_control_target(fault: Fault, body: &Value, target: i32) -> bool {
    let quorum_suspects_it =
        body["kind"] == "quorum" && suspects(body).contains(&i64::from(target));
    match fault {
        Fault::ControllerFreeze | Fault::ControllerStall | Fault::QuorumFreeze => {
            subject(body) == format!("controller-{target}") || quorum_suspects_it
        }
        Fault::MetadataStall => subject(body) == format!("broker-{target}"),
        Fault::GroupCoordinatorStall | Fault::TxnCoordinatorStall => {
            let rule = fault.coordinator().map_or("", |c| c.rule);
            subject(body) == format!("broker-{target}")
                && body["evidence"].as_array().is_some_and(|e| {
                    e.iter()
                        .any(|x| x.as_str().is_some_and(|s| s.contains(rule)))
                })
        }
        _ => false,
    }
}

fn inject(lab: &mut Lab, fault: Fault, targets: &[BrokerId]) -> Result<()> {
    for &t in targets {
        match fault {
            Fault::Freeze => lab.freeze(t)?,
            Fault::CutReplication => lab.cut_replication(t)?,
            Fault::Isolate => lab.isolate(t, true)?,
            Fault::Kill | Fault::KillTwo => lab.kill(t)?,
            Fault::Stall => lab.stall(t, false)?,
            Fault::StallFetchers => lab.stall(t, true)?,
            Fault::ControllerFreeze | Fault::QuorumFreeze => lab.freeze(t)?,
            Fault::ControllerStall => lab.stall_threads(t, Stall::Controller)?,
            Fault::MetadataStall => lab.stall_threads(t, Stall::Metadata)?,
            Fault::GroupCoordinatorStall | Fault::TxnCoordinatorStall => {
                let stall = fault.coordinator().map(|c| c.stall);
                lab.stall_threads(t, stall.expect("a coordinator fault"))?
            }
            Fault::LogDirFill => {
                lab.fill(t)?;
            }
        }
    }
    Ok(())
}

fn heal(lab: &mut Lab, fault: Fault, targets: &[BrokerId]) -> Result<()> {
    for &t in targets {
        match fault {
            Fault::Freeze
            | Fault::CutReplication
            | Fault::Isolate
            | Fault::Stall
            | Fault::StallFetchers
            | Fault::ControllerFreeze
            | Fault::QuorumFreeze
            | Fault::ControllerStall
            | Fault::MetadataStall
            | Fault::GroupCoordinatorStall
            | Fault::TxnCoordinatorStall
            | Fault::LogDirFill => lab.heal(Some(t))?,
            Fault::Kill | Fault::KillTwo => lab.start(t)?,
        }
    }
    Ok(())
}

fn bench_topic_names() -> Vec<String> {
    vec![TOPIC_RF3.to_string(), TOPIC_RF2.to_string()]
}

/// (topic-partition, leader, replicas, isr) of the bench topics in one broker's answer.
fn bench_partitions(md: &MetadataView) -> Vec<(String, BrokerId, Vec<BrokerId>, Vec<BrokerId>)> {
    topic_partitions(md, &[TOPIC_RF3, TOPIC_RF2])
}

/// The group coordinators' topic: a broker coordinates the groups of the partitions it leads.
const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// (topic-partition, leader, replicas, isr) of the topics `names` in one broker's answer.
fn topic_partitions(
    md: &MetadataView,
    names: &[&str],
) -> Vec<(String, BrokerId, Vec<BrokerId>, Vec<BrokerId>)> {
    md.topics
        .iter()
        .filter(|(name, _)| names.contains(&name.as_str()))
        .flat_map(|(name, t)| {
            t.partitions.iter().map(move |p| {
                (
                    format!("{name}-{}", p.partition),
                    p.leader,
                    p.replicas.to_vec(),
                    p.isr.to_vec(),
                )
            })
        })
        .collect()
}

/// (partition, leader) of `__consumer_offsets`, as the lab's brokers say now (leader -1:
/// none).
fn offsets_leaders(bootstrap: &str) -> Result<Vec<(i32, BrokerId)>, String> {
    shard_leaders(bootstrap, OFFSETS_TOPIC)
}

/// (partition, leader) of a coordinator's topic.
fn shard_leaders(bootstrap: &str, topic: &str) -> Result<Vec<(i32, BrokerId)>, String> {
    kafka_lab::client::partitions(bootstrap, topic)
        .map(|ps| ps.iter().map(|p| (p.partition, p.leader)).collect())
        .map_err(|e| format!("{topic}: {e}"))
}

/// A transactional producer starts once, so that `__transaction_state` exists (Kafka
/// creates it at the first FindCoordinator for a transactional id), and every partition has
/// a leader among `brokers`.
pub(crate) fn transactions_topic_ready(bootstrap: &str, brokers: &[BrokerId]) -> Result<()> {
    use rdkafka::producer::{BaseProducer, Producer};
    use rdkafka::ClientConfig;
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", "bench-detect-transactions-init")
        .create()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Err(e) = producer.init_transactions(Duration::from_secs(10)) {
        if Instant::now() > deadline {
            anyhow::bail!("no transactional producer ready in 60 s: {e}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let leaders = shard_leaders(bootstrap, TRANSACTIONS_TOPIC);
        match &leaders {
            Ok(ps) if !ps.is_empty() && ps.iter().all(|(_, l)| brokers.contains(l)) => {
                return Ok(())
            }
            _ if Instant::now() > deadline => {
                anyhow::bail!("{TRANSACTIONS_TOPIC} not led in 60 s: {leaders:?}")
            }
            _ => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// A group commits once, so that `__consumer_offsets` exists (Kafka creates it at a group's
/// first use), and every one of its partitions has a leader among `brokers`: before it, no
/// broker coordinates anything and the watchdog has no coordinator to probe.
fn offsets_topic_ready(bootstrap: &str, brokers: &[BrokerId]) -> Result<()> {
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "bench-detect-offsets-init")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC_RF3, 0, Offset::Offset(0))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Err(e) = consumer.commit(&tpl, CommitMode::Sync) {
        if Instant::now() > deadline {
            anyhow::bail!("no offset committed in 60 s: {e}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let leaders = offsets_leaders(bootstrap);
        match &leaders {
            Ok(ps) if !ps.is_empty() && ps.iter().all(|(_, l)| brokers.contains(l)) => {
                return Ok(())
            }
            _ if Instant::now() > deadline => {
                anyhow::bail!("{OFFSETS_TOPIC} not led in 60 s: {leaders:?}")
            }
            _ => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// Waits until the watchdog's coordinator look has `broker` leading shards and answering:
/// a stall it has not yet seen coordinate would be measured from the watchdog's discovery.
fn wait_coordinator_seen(
    wd: &Watchdog,
    status_key: &str,
    broker: BrokerId,
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let last = match wd.status_blocking() {
            Ok(s) => {
                let look = s["clusters"][0][status_key]["brokers"]
                    .as_array()
                    .and_then(|ls| ls.iter().find(|l| l["broker"] == broker).cloned());
                match look {
                    Some(l)
                        if l["probe"] == "answered"
                            && l["shards"].as_array().is_some_and(|s| !s.is_empty()) =>
                    {
                        return Ok(())
                    }
                    Some(l) => format!("its look {l}"),
                    None => "no look at it".into(),
                }
            }
            Err(e) => format!("no /status: {e}"),
        };
        if Instant::now() > deadline {
            anyhow::bail!(
                "the watchdog does not see broker {broker} coordinate after {} s: {last}",
                timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

pub fn run(opts: &DetectOptions) -> Result<Section> {
    let mut section = Section::new(
        "detect",
        json!({
            "trials": opts.trials,
            "profiles": opts.profiles.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
            "faults": opts.faults.iter().map(|f| f.as_str()).collect::<Vec<_>>(),
            "trial_timeout_secs": opts.trial_timeout.as_secs(),
            "poll_ms": 100,
        }),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let sink = rt.block_on(Sink::start("127.0.0.1:0".parse()?))?;
    let mut eyes = KafkaEyes::new();
    let mut trials: Vec<Trial> = Vec::new();
    let current = Lab::open().ok().map(|l| Layout {
        controllers: l.controllers().len() as u32,
        log_dirs: l.log_dirs(),
    });
    for layout in layout_order(&opts.faults, current) {
        println!("detect: the lab with {layout}");
        let up = lab_up_with(&UpOptions {
            controllers: layout.controllers,
            log_dirs: layout.log_dirs,
            ..UpOptions::default()
        })
        .and_then(|lab| create_bench_topics(&lab).map(|()| lab));
        // The other layout's trials are still worth having.
        let mut lab = match up {
            Ok(lab) => lab,
            Err(e) => {
                section.note(format!(
                    "the lab with {layout} did not come up: {e:#}; its faults were not run"
                ));
                continue;
            }
        };
        let brokers = lab.brokers();
        for &profile in &opts.profiles {
            for &fault in opts.faults.iter().filter(|f| f.layout() == layout) {
                println!(
                    "detect: {} profile, fault {}",
                    profile.as_str(),
                    fault.as_str()
                );
                let mut ctx = Ctx {
                    rt: &rt,
                    lab: &mut lab,
                    eyes: &mut eyes,
                    sink: &sink,
                    brokers: &brokers,
                    opts,
                };
                // One fault's failure (the watchdog does not start, the lab does not heal)
                // must not throw away an hour of other trials.
                if let Err(e) = run_fault(&mut ctx, profile, fault, &mut trials, &mut section) {
                    section.note(format!(
                        "{} {}: stopped early: {e:#}",
                        profile.as_str(),
                        fault.as_str()
                    ));
                    let _ = restore(&mut lab);
                }
            }
        }
        for (topic, _, _) in bench_topics(&brokers) {
            let _ = kafka_lab::client::delete_topic(&lab.bootstrap(), topic);
        }
    }
    report(&mut section, &trials, opts);
    section.raw = serde_json::to_value(&trials)?;
    Ok(section)
}

/// What every trial uses.
struct Ctx<'a> {
    rt: &'a tokio::runtime::Runtime,
    lab: &'a mut Lab,
    eyes: &'a mut KafkaEyes,
    sink: &'a Sink,
    brokers: &'a [BrokerId],
    opts: &'a DetectOptions,
}

/// Every trial of one fault under one profile, with a watchdog of its own (so that nothing a
/// previous fault left in its memory, such as a recent restart, shapes the verdicts).
fn run_fault(
    cx: &mut Ctx,
    profile: Profile,
    fault: Fault,
    trials: &mut Vec<Trial>,
    section: &mut Section,
) -> Result<()> {
    let name = format!("detect-{}-{}", profile.as_str(), fault.as_str());
    if fault.coordinator().is_some() {
        offsets_topic_ready(&cx.lab.bootstrap(), cx.brokers)?;
    }
    if fault == Fault::TxnCoordinatorStall {
        transactions_topic_ready(&cx.lab.bootstrap(), cx.brokers)?;
    }
    let wd = if fault.control_plane() {
        let bootstrap: Vec<String> = cx.lab.bootstrap().split(',').map(str::to_string).collect();
        let mut cluster_yaml = controllers_yaml(cx.lab);
        if fault == Fault::TxnCoordinatorStall {
            cluster_yaml.push_str(TXN_PROBE_YAML);
        }
        Watchdog::start_with(
            &cx.opts.watchdog_bin,
            &name,
            &bootstrap,
            &cluster_yaml,
            profile,
            Some(&cx.sink.url()),
        )?
    } else {
        Watchdog::start(
            &cx.opts.watchdog_bin,
            &name,
            cx.lab,
            profile,
            Some(&cx.sink.url()),
        )?
    };
    let control_plane = fault.control_plane();
    let mut opened = BTreeSet::new();
    // A control-plane trial's last trial and where its notifications ended: what the heal
    // and the settling after it send is checked too (a controller that recovers may fence
    // and register brokers again, which must stay one episode, not pages about them).
    let mut recovering: Option<(usize, usize)> = None;
    for i in 0..cx.opts.trials {
        // A trial after an unsettled lab is still worth running; the note says so.
        if let Err(e) = settle(cx, &wd, profile, control_plane, &opened) {
            section.note(format!(
                "{} {} trial {}: the lab did not settle before it: {e:#}",
                profile.as_str(),
                fault.as_str(),
                i + 1
            ));
        }
        if let Some((k, from)) = recovering.take() {
            recovery_misattributions(&mut trials[k], cx.sink, from);
        }
        let mut trial = Trial {
            profile: profile.as_str(),
            fault: fault.as_str(),
            trial: i + 1,
            ..Trial::default()
        };
        let outcome = if control_plane {
            let active = if matches!(fault, Fault::ControllerFreeze | Fault::ControllerStall) {
                // Asked at each trial: the last one's freeze made another controller active.
                cx.lab.active_controller().ok()
            } else {
                None
            };
            // Asked at each trial too: the coordinator shards follow their leaders.
            let offsets = if let Some(c) = fault.coordinator() {
                shard_leaders(&cx.lab.bootstrap(), c.topic)
            } else {
                Ok(Vec::new())
            };
            let leaders: Vec<BrokerId> = offsets.iter().flatten().map(|(_, l)| *l).collect();
            let target = offsets.clone().and_then(|_| {
                control_target(
                    fault,
                    &cx.lab.controllers(),
                    active,
                    cx.brokers,
                    &leaders,
                    i,
                )
            });
            match target {
                Ok(target) => {
                    trial.targets = vec![target];
                    trial.led_at_start = offsets
                        .iter()
                        .flatten()
                        .filter(|(_, l)| *l == target)
                        .map(|(p, _)| {
                            let topic = fault.coordinator().map_or(OFFSETS_TOPIC, |c| c.topic);
                            format!("{topic}-{p}")
                        })
                        .collect();
                    run_control_trial(cx, &wd, fault, profile, &mut trial).map(|(opened, seen)| {
                        recovering = Some((trials.len(), seen));
                        opened
                    })
                }
                Err(e) => Err(anyhow::anyhow!("no target: {e}")),
            }
        } else {
            trial.targets = targets(fault, cx.brokers, i);
            run_trial(cx, &wd, fault, profile, &mut trial)
        };
        if let Err(e) = &outcome {
            trial.error = Some(format!("{e:#}"));
        }
        opened = outcome.unwrap_or_default();
        println!("  trial {}: {}", i + 1, serde_json::to_string(&trial)?);
        let targets = trial.targets.clone();
        let topic = trial.topic.clone();
        trials.push(trial);
        if let Err(e) = heal(cx.lab, fault, &targets) {
            println!("  heal failed ({e:#}); restoring the whole lab");
            restore(cx.lab)?;
        }
        // Deleted once the broker applies metadata again, so that it learns of the topic
        // and of its deletion like the others.
        if let Some(topic) = topic {
            if let Err(e) = kafka_lab::client::delete_topic(&cx.lab.bootstrap(), &topic) {
                println!("  could not delete {topic}: {e}");
            }
        }
    }
    if let Err(e) = settle(cx, &wd, profile, control_plane, &opened) {
        section.note(format!(
            "{} {}: the lab did not settle after the last trial: {e:#}",
            profile.as_str(),
            fault.as_str()
        ));
    }
    if let Some((k, from)) = recovering.take() {
        recovery_misattributions(&mut trials[k], cx.sink, from);
    }
    Ok(())
}

/// Notifications since `from` (the end of a control-plane trial, through its heal and the
/// settling after it) that name another node than the trial's target.
fn recovery_misattributions(trial: &mut Trial, sink: &Sink, from: usize) {
    for body in sink.received().iter().skip(from) {
        if body["event"] != "opened" && body["event"] != "updated" {
            continue;
        }
        for other in others_named(body, &trial.targets) {
            let tag = format!("{other} webhook after the heal ");
            if !trial.misattributed.iter().any(|m| m.starts_with(&tag)) {
                let line = format!(
                    "{tag}{} {} {}",
                    body["event"].as_str().unwrap_or("?"),
                    body["kind"].as_str().unwrap_or("?"),
                    body["state"].as_str().unwrap_or("-")
                );
                println!("  trial {}: misattributed {line}", trial.trial);
                trial.misattributed.push(line);
            }
        }
    }
}

/// Runs one trial; returns the incident ids of the webhooks it saw opened.
fn run_trial(
    cx: &mut Ctx,
    wd: &Watchdog,
    fault: Fault,
    profile: Profile,
    trial: &mut Trial,
) -> Result<BTreeSet<String>> {
    let Ctx {
        rt,
        lab,
        eyes,
        sink,
        brokers,
        opts,
    } = cx;
    let targets = trial.targets.clone();
    let observers: Vec<String> = brokers
        .iter()
        .filter(|b| !targets.contains(b))
        .map(|b| broker_address(*b))
        .collect();
    let topics = bench_topic_names();
    let led: Vec<String> = rt.block_on(async {
        let md = eyes.metadata(&observers[0], Some(&topics)).await?;
        Ok::<_, anyhow::Error>(
            bench_partitions(&md)
                .into_iter()
                .filter(|(_, leader, _, _)| targets.contains(leader))
                .map(|(tp, _, _, _)| tp)
                .collect(),
        )
    })?;
    trial.led_at_start = led.clone();
    let webhooks_before = sink.received().len();

    let started = Instant::now();
    inject(lab, fault, &targets)?;
    let t0 = Instant::now();
    trial.inject_secs = (t0 - started).as_secs_f64();

    let (want_fenced, want_isr, want_leader) = fault.kafka_expects();
    // After the required events, the webhook and the zombie/down state get this much longer:
    // an incident opens after two bad rounds.
    let grace = profile.round_interval() * 3 + Duration::from_secs(10);
    let mut opened = BTreeSet::new();
    rt.block_on(async {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut required_done_at: Option<Instant> = None;
        loop {
            tick.tick().await;
            let now = secs_since(t0);
            if let Ok(status) = wd.status().await {
                let states = broker_states(&status);
                for (b, s) in &states {
                    if targets.contains(b) || s.as_str() == "healthy" {
                        continue;
                    }
                    let tag = format!("{b} state ");
                    if !trial.misattributed.iter().any(|m| m.starts_with(&tag)) {
                        trial.misattributed.push(format!(
                            "{tag}{s} ({}) at {now:.1} s",
                            broker_rules(&status, *b)
                        ));
                    }
                }
                let bad: Vec<(&BrokerId, &String)> = targets
                    .iter()
                    .filter_map(|t| states.get(t).map(|s| (t, s)))
                    .filter(|(_, s)| s.as_str() != "healthy")
                    .collect();
                if trial.state_secs.is_none() && !bad.is_empty() {
                    trial.state_secs = Some(now);
                    trial.first_state = Some(bad[0].1.clone());
                    trial.rules = Some(broker_rules(&status, *bad[0].0));
                }
                if trial.log_dir_failed_secs.is_none()
                    && bad
                        .iter()
                        .any(|(b, _)| broker_rules(&status, **b).contains("log_dir_failed"))
                {
                    trial.log_dir_failed_secs = Some(now);
                }
                let critical = targets.iter().all(|t| {
                    matches!(
                        states.get(t).map(String::as_str),
                        Some("zombie") | Some("down")
                    )
                });
                if trial.critical_secs.is_none() && critical {
                    trial.critical_secs = Some(now);
                    trial.critical_state = states.get(&targets[0]).cloned();
                }
            }
            for body in sink.received().iter().skip(webhooks_before) {
                let named = body["broker_id"].as_i64();
                let names_target =
                    named.is_some_and(|b| targets.iter().any(|t| i64::from(*t) == b));
                if let (Some(b), false) = (named, names_target) {
                    let tag = format!("{b} webhook ");
                    if body["event"] == "opened"
                        && !trial.misattributed.iter().any(|m| m.starts_with(&tag))
                    {
                        trial.misattributed.push(format!(
                            "{tag}{} {} at {now:.1} s",
                            body["kind"].as_str().unwrap_or("?"),
                            body["state"].as_str().unwrap_or("-")
                        ));
                    }
                }
                if !names_target {
                    continue;
                }
                if body["event"] == "opened" {
                    if let Some(id) = body["incident_id"].as_str() {
                        opened.insert(id.to_string());
                    }
                }
                if trial.webhook_secs.is_none() {
                    trial.webhook_secs = Some(now);
                    trial.webhook = Some(format!(
                        "{} {} {}",
                        body["event"].as_str().unwrap_or("?"),
                        body["kind"].as_str().unwrap_or("?"),
                        body["state"].as_str().unwrap_or("-")
                    ));
                }
            }
            for address in &observers {
                let Ok(md) = eyes.metadata(address, Some(&topics)).await else {
                    continue;
                };
                let registered: Vec<BrokerId> = md.brokers.iter().map(|b| b.id).collect();
                if trial.fenced_secs.is_none() && targets.iter().all(|t| !registered.contains(t)) {
                    trial.fenced_secs = Some(now);
                }
                for (tp, leader, replicas, isr) in bench_partitions(&md) {
                    let shrunk = targets
                        .iter()
                        .any(|t| replicas.contains(t) && !isr.contains(t));
                    if trial.isr_shrink_secs.is_none() && shrunk {
                        trial.isr_shrink_secs = Some(now);
                    }
                    if trial.leader_change_secs.is_none()
                        && led.contains(&tp)
                        && !targets.contains(&leader)
                    {
                        trial.leader_change_secs = Some(now);
                        trial.new_leader = Some(leader);
                    }
                }
            }
            // A filled log directory degrades its broker; its rule is the one to wait for.
            let named = if fault == Fault::LogDirFill {
                trial.log_dir_failed_secs.is_some()
            } else {
                trial.state_secs.is_some()
            };
            let required = named
                && (!want_fenced || trial.fenced_secs.is_some())
                && (!want_isr || trial.isr_shrink_secs.is_some())
                && (!want_leader || led.is_empty() || trial.leader_change_secs.is_some());
            let everything = required
                && trial.webhook_secs.is_some()
                && (trial.critical_secs.is_some()
                    || fault.names_a_follower()
                    || fault == Fault::LogDirFill);
            if everything {
                break;
            }
            if required && required_done_at.is_none() {
                required_done_at = Some(Instant::now());
            }
            if required_done_at.is_some_and(|t| t.elapsed() > grace)
                || t0.elapsed() > opts.trial_timeout
            {
                break;
            }
        }
    });
    Ok(opened)
}

/// After its named event and page, a control-plane trial still watches this long after
/// its reference (the fault, or the leadership change): that no broker or other controller
/// is blamed while the control plane is out is half of what it proves.
const CONTROL_WATCH: Duration = Duration::from_secs(10);

/// How long a surviving controller may take to answer DescribeQuorum, as Kafka's own eyes
/// on the election: it answers at once, and one that does not is not the leader yet.
const QUORUM_ASK_TIMEOUT: Duration = Duration::from_millis(300);

/// Notes a misattribution the first time `tag` is seen in a trial.
fn misattribute(trial: &mut Trial, tag: String, rest: impl FnOnce() -> String) {
    if !trial.misattributed.iter().any(|m| m.starts_with(&tag)) {
        trial.misattributed.push(format!("{tag}{}", rest()));
    }
}

/// One control-plane trial: the fault, then every 100 ms the watchdog's /status (the
/// target's state, the quorum's problem, every other node's state), the notifications, and
/// for a controller fault Kafka's election as the surviving controllers answer it. A
/// metadata stall makes its leadership change 2 s into the fault (a topic whose only
/// partition the stalled broker is to lead, created through the others), measured from
/// there. A group coordinator stall starts once the watchdog sees the broker coordinate,
/// and watches its coordinator shards (`led_at_start`) through the other brokers' eyes: a
/// new leader or an ISR shrink would be Kafka reacting. Returns the incidents opened and
/// how many notifications the trial read.
fn run_control_trial(
    cx: &mut Ctx,
    wd: &Watchdog,
    fault: Fault,
    profile: Profile,
    trial: &mut Trial,
) -> Result<(BTreeSet<String>, usize)> {
    let Ctx {
        rt,
        lab,
        eyes,
        sink,
        brokers,
        opts,
    } = cx;
    let target = trial.targets[0];
    let target_is_broker = brokers.contains(&target);
    // Kafka's election is read from the controllers that can win it, directly (a broker
    // forwards DescribeQuorum to the frozen leader and waits).
    let survivors: Vec<(i32, String)> = lab
        .controllers()
        .into_iter()
        .zip(lab.controller_addresses())
        .filter(|(c, _)| *c != target)
        .collect();
    let watch_election = matches!(fault, Fault::ControllerFreeze | Fault::ControllerStall);
    let others: Vec<BrokerId> = brokers.iter().copied().filter(|b| *b != target).collect();
    let change = (fault == Fault::MetadataStall).then(|| {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let topic = format!("bench-detect-led-by-{target}-{stamp}");
        trial.topic = Some(topic.clone());
        // Through the other brokers: the stalled one would not learn of it anyway.
        let bootstrap = others
            .iter()
            .map(|b| broker_address(*b))
            .collect::<Vec<_>>()
            .join(",");
        let assignment = vec![std::iter::once(target)
            .chain(others.iter().copied())
            .collect()];
        (topic, bootstrap, assignment)
    });
    let coordinator = fault.coordinator();
    if let Some(c) = &coordinator {
        wait_coordinator_seen(wd, c.status_key, target, Duration::from_secs(60))?;
    }
    // What Kafka's eyes ask the other brokers: only the broker list, or with it the
    // coordinator shards.
    let shard_topic = coordinator.as_ref().map_or(OFFSETS_TOPIC, |c| c.topic);
    let kafka_topics: Vec<String> = if coordinator.is_some() {
        vec![shard_topic.to_string()]
    } else {
        Vec::new()
    };
    let webhooks_before = sink.received().len();

    let started = Instant::now();
    inject(lab, fault, &trial.targets)?;
    let t0 = Instant::now();
    trial.inject_secs = (t0 - started).as_secs_f64();

    let grace = profile.round_interval() * 3 + Duration::from_secs(10);
    let mut opened = BTreeSet::new();
    let mut seen = webhooks_before;
    rt.block_on(async {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut required_done_at: Option<Instant> = None;
        let mut change = change;
        let mut creating: Option<tokio::task::JoinHandle<Result<(), kafka_lab::LabError>>> = None;
        loop {
            tick.tick().await;
            let now = secs_since(t0);
            if now >= 2.0 {
                if let Some((topic, bootstrap, assignment)) = change.take() {
                    trial.change_secs = Some(secs_since(t0));
                    creating = Some(tokio::task::spawn_blocking(move || {
                        kafka_lab::client::create_topic(&bootstrap, &topic, &assignment, &[])
                    }));
                }
            }
            if creating.as_ref().is_some_and(|h| h.is_finished()) {
                match creating.take().expect("checked").await {
                    Ok(Ok(())) => trial.change_done_secs = Some(now),
                    Ok(Err(e)) => trial.error = Some(format!("the leadership change: {e}")),
                    Err(e) => trial.error = Some(format!("the leadership change: {e}")),
                }
            }
            if let Ok(status) = wd.status().await {
                for (b, s) in broker_states(&status) {
                    if b != target && s != "healthy" {
                        misattribute(trial, format!("broker-{b} state "), || {
                            format!("{s} ({}) at {now:.1} s", broker_rules(&status, b))
                        });
                    }
                }
                let controllers = controller_states(&status);
                for (c, s) in &controllers {
                    if *c != target && s != "healthy" {
                        misattribute(trial, format!("controller-{c} state "), || {
                            format!("{s} ({}) at {now:.1} s", controller_rules(&status, *c))
                        });
                    }
                }
                let (state, rules) = if target_is_broker {
                    (
                        broker_states(&status).get(&target).cloned(),
                        broker_rules(&status, target),
                    )
                } else {
                    (
                        controllers.get(&target).cloned(),
                        controller_rules(&status, target),
                    )
                };
                if let Some(state) = state.filter(|s| s != "healthy") {
                    if trial.coordinator_stalled_secs.is_none()
                        && target_is_broker
                        && state == "zombie"
                        && coordinator
                            .as_ref()
                            .is_some_and(|c| rules.split(',').next() == Some(c.rule))
                    {
                        trial.coordinator_stalled_secs = Some(now);
                    }
                    if trial.state_secs.is_none() {
                        trial.state_secs = Some(now);
                        trial.first_state = Some(state.clone());
                        trial.rules = Some(rules.clone());
                    }
                    if trial.critical_secs.is_none() && (state == "zombie" || state == "down") {
                        trial.critical_secs = Some(now);
                        trial.critical_state = Some(state);
                    }
                }
                if trial.stale_metadata_secs.is_none()
                    && target_is_broker
                    && rules.split(',').any(|r| r == "stale_metadata")
                {
                    trial.stale_metadata_secs = Some(now);
                }
                if let Some(p) = quorum_problem(&status) {
                    let kind = p["kind"].as_str().unwrap_or("?");
                    let named: Vec<i64> = p["suspects"]
                        .as_array()
                        .map(|s| s.iter().filter_map(Value::as_i64).collect())
                        .unwrap_or_default();
                    for n in named.iter().filter(|n| **n != i64::from(target)) {
                        misattribute(trial, format!("suspect {n} of the quorum "), || {
                            format!("{kind} at {now:.1} s")
                        });
                    }
                    if trial.quorum_problem_secs.is_none() && named.contains(&i64::from(target)) {
                        trial.quorum_problem_secs = Some(now);
                        trial.quorum_problem = Some(format!("{kind} {named:?}"));
                    }
                }
            }
            let received = sink.received();
            for body in received.iter().skip(webhooks_before) {
                if body["event"] != "opened" && body["event"] != "updated" {
                    continue;
                }
                if body["event"] == "opened" {
                    // Every incident the trial opened must resolve before the next one.
                    if let Some(id) = body["incident_id"].as_str() {
                        opened.insert(id.to_string());
                    }
                }
                for other in others_named(body, &trial.targets) {
                    misattribute(trial, format!("{other} webhook "), || {
                        format!(
                            "{} {} {} at {now:.1} s",
                            body["event"].as_str().unwrap_or("?"),
                            body["kind"].as_str().unwrap_or("?"),
                            body["state"].as_str().unwrap_or("-")
                        )
                    });
                }
                if trial.webhook_secs.is_none() && names_control_target(fault, body, target) {
                    trial.webhook_secs = Some(now);
                    trial.webhook = Some(format!(
                        "{} {} {} {}",
                        body["event"].as_str().unwrap_or("?"),
                        subject(body),
                        body["kind"].as_str().unwrap_or("?"),
                        body["state"].as_str().unwrap_or("-")
                    ));
                }
            }
            seen = received.len();
            // A stalled broker's own answer is stale: the others say whom Kafka fenced.
            for b in others.iter() {
                let Ok(md) = eyes
                    .metadata(&broker_address(*b), Some(&kafka_topics))
                    .await
                else {
                    continue;
                };
                let registered: Vec<BrokerId> = md.brokers.iter().map(|x| x.id).collect();
                for x in brokers.iter().filter(|x| !registered.contains(x)) {
                    let tag = format!("{x} ");
                    if !trial.kafka_fenced.iter().any(|f| f.starts_with(&tag)) {
                        trial.kafka_fenced.push(format!("{tag}at {now:.1} s"));
                    }
                }
                for (tp, leader, replicas, isr) in topic_partitions(&md, &[shard_topic]) {
                    if trial.leader_change_secs.is_none()
                        && trial.led_at_start.contains(&tp)
                        && leader != target
                    {
                        trial.leader_change_secs = Some(now);
                        trial.new_leader = Some(leader);
                    }
                    if trial.isr_shrink_secs.is_none()
                        && replicas.contains(&target)
                        && !isr.contains(&target)
                    {
                        trial.isr_shrink_secs = Some(now);
                    }
                }
            }
            if watch_election && trial.new_quorum_leader_secs.is_none() {
                for (c, address) in &survivors {
                    // Only the leader answers; a follower refuses (NOT_LEADER_OR_FOLLOWER).
                    let answer = kafka_lab::quorum::describe(address, QUORUM_ASK_TIMEOUT);
                    if answer.is_ok_and(|q| q.leader == *c) {
                        trial.new_quorum_leader_secs = Some(now);
                        trial.new_quorum_leader = Some(*c);
                        break;
                    }
                }
            }
            let named = match fault {
                Fault::QuorumFreeze => trial.quorum_problem_secs,
                Fault::MetadataStall => trial.stale_metadata_secs,
                Fault::GroupCoordinatorStall | Fault::TxnCoordinatorStall => {
                    trial.coordinator_stalled_secs
                }
                _ => trial.critical_secs,
            };
            let required = named.is_some()
                && (fault != Fault::ControllerFreeze || trial.new_quorum_leader_secs.is_some())
                && (fault != Fault::MetadataStall || trial.change_done_secs.is_some());
            let reference = trial.change_secs.unwrap_or(0.0);
            let everything = required
                && trial.webhook_secs.is_some()
                && trial.critical_secs.is_some()
                && now >= reference + CONTROL_WATCH.as_secs_f64();
            if everything {
                break;
            }
            if required && required_done_at.is_none() {
                required_done_at = Some(Instant::now());
            }
            // A leadership change that could not be made leaves nothing to wait for.
            if required_done_at.is_some_and(|t| t.elapsed() > grace.max(CONTROL_WATCH))
                || t0.elapsed() > opts.trial_timeout
                || (trial.error.is_some() && creating.is_none())
            {
                break;
            }
        }
        // A leadership change still being made when the trial gave up is waited for: the
        // topic must exist before it is deleted.
        if let Some(h) = creating {
            let _ = h.await;
        }
    });
    Ok((opened, seen))
}

/// Heals everything, waits for full replication, puts leaders back on their preferred
/// replicas, and waits until the watchdog sees every broker (and, after a control-plane
/// fault, every controller, with the quorum's problem gone) healthy with the incidents of
/// the last trial resolved.
fn settle(
    cx: &mut Ctx,
    wd: &Watchdog,
    profile: Profile,
    control_plane: bool,
    opened: &BTreeSet<String>,
) -> Result<()> {
    let Ctx {
        rt,
        lab,
        eyes,
        sink,
        ..
    } = cx;
    restore(lab)?;
    let brokers = lab.brokers();
    let partitions: Vec<(String, i32)> = bench_topics(&brokers)
        .into_iter()
        .flat_map(|(t, a, _)| (0..a.len() as i32).map(move |p| (t.to_string(), p)))
        .collect();
    let address = broker_address(brokers[0]);
    rt.block_on(async {
        wait_fully_replicated(eyes, lab, Duration::from_secs(180)).await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let _ = eyes.elect_preferred(&address, &partitions).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let preferred = match eyes.metadata(&address, Some(&bench_topic_names())).await {
                Ok(md) => bench_partitions(&md)
                    .iter()
                    .all(|(_, leader, replicas, _)| replicas.first() == Some(leader)),
                Err(_) => false,
            };
            if preferred || Instant::now() > deadline {
                if !preferred {
                    println!("  leaders not back on their preferred replicas; going on");
                }
                return Ok::<_, anyhow::Error>(());
            }
        }
    })?;
    if control_plane {
        wd.wait_control_plane_healthy(&lab.controllers(), Duration::from_secs(120))?;
    }
    wd.wait_healthy(&brokers, Duration::from_secs(300))?;
    let rounds = profile.round_interval() * (RESOLVE_AFTER_ROUNDS + 1);
    if opened.is_empty() {
        std::thread::sleep(rounds);
        return Ok(());
    }
    let deadline = Instant::now() + rounds.max(Duration::from_secs(120));
    while Instant::now() < deadline {
        let resolved: BTreeSet<String> = sink
            .received()
            .iter()
            .filter(|b| b["event"] == "resolved")
            .filter_map(|b| b["incident_id"].as_str().map(str::to_string))
            .collect();
        if opened.is_subset(&resolved) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    println!("  incidents {opened:?} not resolved in time; going on");
    Ok(())
}

/// The lab's `replica.lag.time.max.ms`: a follower that stopped fetching leaves the ISR after it.
const LAB_REPLICA_LAG: f64 = 5.0;

/// Issue 14's goals for one fault under one profile, issue 25's for the control plane and
/// issue 26's for a stalled group coordinator (set for the default settings; the aggressive
/// profile is held to them too, its control plane and coordinator looks being the same):
/// (reference event, the p95 bound for the state, the p95 bound for the webhook), in seconds
/// after the reference.
fn goal(profile: Profile, fault: Fault) -> (&'static str, f64, f64) {
    let aggressive = profile == Profile::Aggressive;
    match fault {
        Fault::ControllerFreeze | Fault::QuorumFreeze => ("fault", 2.0, 3.0),
        Fault::ControllerStall | Fault::GroupCoordinatorStall => ("fault", 3.0, 4.0),
        // Issue 26: the transaction coordinator's goal holds for the lab's probe settings.
        Fault::TxnCoordinatorStall => ("fault", 5.0, 6.0),
        // Issue 26: named within one round (DescribeLogDirs is asked once per round), the
        // page a second after.
        Fault::LogDirFill => {
            let round = profile.round_interval().as_secs_f64();
            ("fault", round, round + 1.0)
        }
        Fault::MetadataStall => ("leadership change", 3.0, 4.0),
        Fault::Freeze | Fault::Stall | Fault::Kill | Fault::KillTwo => {
            ("fault", 2.0, if aggressive { 1.5 } else { 3.0 })
        }
        Fault::Isolate => ("new leader elected", 3.0, 4.0),
        Fault::CutReplication | Fault::StallFetchers => {
            ("fault", LAB_REPLICA_LAG + 3.0, LAB_REPLICA_LAG + 4.0)
        }
    }
}

/// Every goal a run missed, in words; empty when every goal was met. A trial that never
/// reached a state or webhook counts as missing it, and a fault the run was asked for
/// (`params`) without a single trial recorded (the lab did not come up, the fault stopped
/// before its first trial) misses its goals.
pub fn missed_goals(section: &Section) -> Vec<String> {
    let Ok(trials) = serde_json::from_value::<Vec<TrialOutcome>>(section.raw.clone()) else {
        return vec!["no trials recorded".into()];
    };
    let mut missed = Vec::new();
    let names = |key: &str| -> Vec<String> {
        section.params[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    if section.params["trials"].as_u64().unwrap_or(0) > 0 {
        for p in names("profiles") {
            for f in names("faults") {
                if !trials.iter().any(|t| t.profile == p && t.fault == f) {
                    missed.push(format!("{f} ({p}): no trial recorded (see the notes)"));
                }
            }
        }
    }
    let mut groups: std::collections::BTreeMap<(String, String), Vec<&TrialOutcome>> =
        Default::default();
    for t in &trials {
        groups
            .entry((t.profile.clone(), t.fault.clone()))
            .or_default()
            .push(t);
    }
    for ((p, f), ts) in groups {
        let (Some(profile), Some(fault)) = (Profile::parse(&p), Fault::parse(&f)) else {
            continue;
        };
        let (reference, state_goal, webhook_goal) = goal(profile, fault);
        let after_reference = |x: Option<f64>, t: &TrialOutcome| -> f64 {
            let base = match fault {
                Fault::Isolate => Some(t.leader_change_secs.unwrap_or(0.0)),
                // No change made, nothing measured: the trial missed.
                Fault::MetadataStall => t.change_secs,
                _ => Some(0.0),
            };
            delta(x, base).unwrap_or(f64::INFINITY)
        };
        let state: Vec<f64> = ts
            .iter()
            .map(|t| after_reference(named_at(fault, t), t))
            .collect();
        let webhook: Vec<f64> = ts
            .iter()
            .map(|t| after_reference(t.webhook_secs, t))
            .collect();
        for (what, xs, bound) in [
            ("state", state, state_goal),
            ("webhook", webhook, webhook_goal),
        ] {
            let p95 = crate::stats::summarize(&xs).map_or(f64::INFINITY, |s| s.p95);
            if p95 > bound {
                missed.push(format!(
                    "{f} ({p}): {what} p95 {p95:.1} s after the {reference}, goal <= {bound:.1} s"
                ));
            }
        }
        let wrong: usize = ts.iter().map(|t| t.misattributed.len()).sum();
        if wrong > 0 {
            missed.push(format!("{f} ({p}): {wrong} misattribution(s), goal 0"));
        }
    }
    missed
}

/// When a trial named what its fault's state goal is about: any state for a follower; the
/// quorum's problem for a quorum lost; `stale_metadata` for a broker that stopped applying
/// metadata; `zombie` by `group_coordinator_stalled` for a stalled group coordinator;
/// `zombie`/`down` otherwise.
fn named_at(fault: Fault, t: &TrialOutcome) -> Option<f64> {
    match fault {
        _ if fault.names_a_follower() => t.state_secs,
        Fault::QuorumFreeze => t.quorum_problem_secs,
        Fault::MetadataStall => t.stale_metadata_secs,
        Fault::GroupCoordinatorStall | Fault::TxnCoordinatorStall => t.coordinator_stalled_secs,
        Fault::LogDirFill => t.log_dir_failed_secs,
        _ => t.critical_secs,
    }
}

/// The part of a recorded trial the goals read.
#[derive(Debug, serde::Deserialize)]
struct TrialOutcome {
    profile: String,
    fault: String,
    critical_secs: Option<f64>,
    state_secs: Option<f64>,
    webhook_secs: Option<f64>,
    leader_change_secs: Option<f64>,
    #[serde(default)]
    quorum_problem_secs: Option<f64>,
    #[serde(default)]
    stale_metadata_secs: Option<f64>,
    #[serde(default)]
    coordinator_stalled_secs: Option<f64>,
    #[serde(default)]
    log_dir_failed_secs: Option<f64>,
    #[serde(default)]
    change_secs: Option<f64>,
    #[serde(default)]
    misattributed: Vec<String>,
}

fn stat_row(
    profile: &str,
    fault: &str,
    what: &str,
    xs: &[Option<f64>],
    trials: usize,
) -> Vec<Value> {
    let seen: Vec<f64> = xs.iter().flatten().copied().collect();
    let s = summarize(&seen);
    vec![
        json!(profile),
        json!(fault),
        json!(what),
        json!(format!("{}/{trials}", seen.len())),
        opt_num(s.map(|s| s.min), 1),
        opt_num(s.map(|s| s.median), 1),
        opt_num(s.map(|s| s.p95), 1),
        opt_num(s.map(|s| s.max), 1),
    ]
}

fn delta(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? - b?)
}

fn report(section: &mut Section, trials: &[Trial], opts: &DetectOptions) {
    let mut latency = Table::new(
        "Detection latency (seconds after the fault was in place)",
        &[
            "profile", "fault", "event", "seen", "min", "median", "p95", "max",
        ],
    );
    let mut versus = Table::new(
        "The watchdog vs Kafka (seconds; positive: the watchdog named the broker first)",
        &[
            "profile",
            "fault",
            "state before fenced (median, min..max)",
            "state before ISR shrink",
            "state before new leader",
            "webhook before fenced",
        ],
    );
    let mut per_trial = Table::new(
        "Every trial (seconds)",
        &[
            "profile",
            "fault",
            "trial",
            "targets",
            "first state",
            "rules",
            "state",
            "zombie/down",
            "webhook",
            "fenced",
            "ISR shrink",
            "leader",
            "misattributed",
            "error",
        ],
    );
    let mut control_trial = Table::new(
        "Every control-plane trial (seconds after the fault)",
        &[
            "profile",
            "fault",
            "trial",
            "target",
            "first state",
            "rules",
            "state",
            "zombie/down",
            "quorum problem",
            "change made",
            "stale_metadata",
            "group_coordinator_stalled",
            "webhook",
            "page",
            "Kafka: new quorum leader",
            "Kafka: coordinator shards",
            "Kafka: brokers fenced",
            "misattributed",
            "error",
        ],
    );
    for profile in &opts.profiles {
        for fault in &opts.faults {
            let ts: Vec<&Trial> = trials
                .iter()
                .filter(|t| t.profile == profile.as_str() && t.fault == fault.as_str())
                .collect();
            if ts.is_empty() {
                continue;
            }
            let n = ts.len();
            let (p, f) = (profile.as_str(), fault.as_str());
            let col =
                |get: fn(&Trial) -> Option<f64>| ts.iter().map(|t| get(t)).collect::<Vec<_>>();
            let wrong = ts.iter().filter(|t| !t.misattributed.is_empty()).count();
            if fault.control_plane() {
                for (what, xs) in control_rows(*fault, &ts) {
                    latency.push(stat_row(p, f, what, &xs, n));
                }
                if wrong > 0 {
                    section.note(format!(
                        "{f} ({p} profile): {wrong} of {n} trial(s) named another node than \
                         the one faulted"
                    ));
                }
                control_notes(section, *fault, p, &ts);
                for t in ts {
                    control_trial.push(control_trial_row(t));
                }
                continue;
            }
            let mut rows = vec![
                ("watchdog: state changed", col(|t| t.state_secs)),
                ("watchdog: zombie/down", col(|t| t.critical_secs)),
            ];
            if *fault == Fault::LogDirFill {
                rows.push(("watchdog: log_dir_failed", col(|t| t.log_dir_failed_secs)));
            }
            rows.extend([
                ("webhook received", col(|t| t.webhook_secs)),
                ("Kafka: broker fenced", col(|t| t.fenced_secs)),
                ("Kafka: ISR shrank", col(|t| t.isr_shrink_secs)),
                ("Kafka: leader changed", col(|t| t.leader_change_secs)),
            ]);
            for (what, xs) in rows {
                latency.push(stat_row(p, f, what, &xs, n));
            }
            if wrong > 0 {
                section.note(format!(
                    "{f} ({p} profile): {wrong} of {n} trial(s) named a broker that was not faulted"
                ));
            }
            let span = |xs: Vec<Option<f64>>| -> Value {
                let v: Vec<f64> = xs.into_iter().flatten().collect();
                match summarize(&v) {
                    Some(s) => json!(format!("{:+.1} ({:+.1}..{:+.1})", s.median, s.min, s.max)),
                    None => Value::Null,
                }
            };
            let fenced = ts
                .iter()
                .map(|t| delta(t.fenced_secs, t.state_secs))
                .collect::<Vec<_>>();
            versus.push(vec![
                json!(p),
                json!(f),
                span(fenced.clone()),
                span(
                    ts.iter()
                        .map(|t| delta(t.isr_shrink_secs, t.state_secs))
                        .collect(),
                ),
                span(
                    ts.iter()
                        .map(|t| delta(t.leader_change_secs, t.state_secs))
                        .collect(),
                ),
                span(
                    ts.iter()
                        .map(|t| delta(t.fenced_secs, t.webhook_secs))
                        .collect(),
                ),
            ]);
            let fenced: Vec<f64> = fenced.into_iter().flatten().collect();
            if let Some(s) = summarize(&fenced) {
                section.note(format!(
                    "{f} ({p} profile): named {:.1} s {} Kafka fenced it (median of {})",
                    s.median.abs(),
                    if s.median >= 0.0 { "before" } else { "after" },
                    s.n
                ));
            }
            for t in ts {
                let o = |x: Option<f64>| opt_num(x, 1);
                per_trial.push(vec![
                    json!(p),
                    json!(f),
                    json!(t.trial),
                    json!(t
                        .targets
                        .iter()
                        .map(|b| b.to_string())
                        .collect::<Vec<_>>()
                        .join("+")),
                    json!(t.first_state),
                    json!(t.rules),
                    o(t.state_secs),
                    o(t.critical_secs),
                    o(t.webhook_secs),
                    o(t.fenced_secs),
                    o(t.isr_shrink_secs),
                    o(t.leader_change_secs),
                    json!(t.misattributed.join("; ")),
                    json!(t.error),
                ]);
            }
        }
    }
    section.note(
        "cut-replication leaves the broker registered and leading its own partitions: Kafka \
         neither fences it nor moves its leaderships, so those columns stay n/a",
    );
    section.note(
        "stall stops only the broker's request-handler and network threads: it stays \
         registered and leads on, so Kafka neither fences it, shrinks an ISR nor elects \
         (n/a); stall-fetchers stops only its replica fetchers: the ISRs it follows shrink",
    );
    section.note(
        "kill-two kills both replicas of one RF 2 partition: 'leader changed' is the first \
         partition they led that got another leader or none (that RF 2 partition goes offline)",
    );
    if opts
        .faults
        .iter()
        .any(|f| f.control_plane() && f.coordinator().is_none())
    {
        section.note(
            "control plane: controller-freeze freezes the active controller of three and \
             quorum-freeze the only one; controller-stall stops the active controller's event \
             handler; metadata-stall stops a broker's metadata loader and 2 s later creates a \
             topic it is to lead (times after 'change made', the start of that call, for its \
             goals). Misattributions: another broker or controller not healthy on /status, \
             suspected by the quorum's problem, or named (subject or suspect) by a notification \
             from the fault through the heal and the settling after it",
        );
    }
    if opts.faults.contains(&Fault::GroupCoordinatorStall) {
        section.note(
            "group-coordinator-stall stops the group coordinator threads of a broker that leads \
             a __consumer_offsets partition (those brokers in turn) on the default lab, once \
             the watchdog sees it coordinate; named: `zombie` with group_coordinator_stalled \
             as its first rule; the page: the broker's incident with that rule in its evidence. \
             Kafka's side is its coordinator shards through the other brokers' Metadata (a new \
             leader, an ISR shrink) and its fencing. Misattributions: another broker or the \
             controller not healthy on /status, or named by a notification, from the fault \
             through the heal and the settling after it",
        );
    }
    if opts.faults.contains(&Fault::LogDirFill) {
        section.note(
            "log-dir-fill fills the second log directory of a broker (brokers in turn) on a lab \
             set up with `--log-dirs 2` (`kafka-lab fill`, which returns once Kafka logged the \
             directory offline); named: the broker's `log_dir_failed` (degraded: it serves the \
             partitions on its other directory); the heal removes the filler and restarts the \
             broker. Kafka keeps the broker registered: no fencing, ISR shrink or election is \
             expected of it",
        );
    }
    if opts.faults.contains(&Fault::TxnCoordinatorStall) {
        section.note(
            "txn-coordinator-stall stops the transaction coordinator threads (marker sender, \
             transaction log scheduler) of a broker that leads a __transaction_state partition \
             (those brokers in turn) on the default lab, once the watchdog sees it coordinate; \
             the watchdog runs its transaction probe with the lab's settings (a look every \
             500 ms, txn_stall_grace_ms 1500); named: `zombie` with txn_coordinator_stalled as \
             its first rule; the page: the broker's incident with that rule in its evidence; \
             Kafka's side and misattributions as for group-coordinator-stall",
        );
    }
    latency.print();
    versus.print();
    section.tables.push(latency);
    section.tables.push(versus);
    section.tables.push(per_trial);
    if !control_trial.rows.is_empty() {
        control_trial.print();
        section.tables.push(control_trial);
    }
}

/// The latency rows of a control-plane fault: what the watchdog named when, the page, and
/// Kafka's election where there is one (for a stalled group coordinator, its shards moved
/// or an ISR shrunk: never, expected).
fn control_rows(fault: Fault, ts: &[&Trial]) -> Vec<(&'static str, Vec<Option<f64>>)> {
    let col = |get: fn(&Trial) -> Option<f64>| ts.iter().map(|t| get(t)).collect::<Vec<_>>();
    let mut rows = vec![
        ("watchdog: state changed", col(|t| t.state_secs)),
        ("watchdog: zombie/down", col(|t| t.critical_secs)),
    ];
    // A stalled coordinator is no quorum's business.
    if fault.coordinator().is_none() {
        rows.push(("watchdog: quorum problem", col(|t| t.quorum_problem_secs)));
    }
    match fault {
        Fault::MetadataStall => {
            rows.push(("leadership change made", col(|t| t.change_secs)));
            rows.push(("watchdog: stale_metadata", col(|t| t.stale_metadata_secs)));
            rows.push((
                "stale_metadata after the change",
                col(|t| delta(t.stale_metadata_secs, t.change_secs)),
            ));
            rows.push(("webhook received", col(|t| t.webhook_secs)));
            rows.push((
                "webhook after the change",
                col(|t| delta(t.webhook_secs, t.change_secs)),
            ));
        }
        Fault::GroupCoordinatorStall | Fault::TxnCoordinatorStall => {
            rows.push((
                if fault == Fault::TxnCoordinatorStall {
                    "watchdog: txn_coordinator_stalled"
                } else {
                    "watchdog: group_coordinator_stalled"
                },
                col(|t| t.coordinator_stalled_secs),
            ));
            rows.push(("webhook received", col(|t| t.webhook_secs)));
            // Expected never: Kafka does not notice a stalled coordinator.
            rows.push((
                "Kafka: coordinator shard moved",
                col(|t| t.leader_change_secs),
            ));
            rows.push(("Kafka: ISR shrank", col(|t| t.isr_shrink_secs)));
        }
        _ => rows.push(("webhook received", col(|t| t.webhook_secs))),
    }
    if matches!(fault, Fault::ControllerFreeze | Fault::ControllerStall) {
        rows.push((
            "Kafka: new quorum leader",
            col(|t| t.new_quorum_leader_secs),
        ));
    }
    rows
}

fn control_notes(section: &mut Section, fault: Fault, p: &str, ts: &[&Trial]) {
    let f = fault.as_str();
    let fenced = ts.iter().filter(|t| !t.kafka_fenced.is_empty()).count();
    if fenced > 0 {
        section.note(format!(
            "{f} ({p} profile): Kafka fenced brokers in {fenced} of {} trial(s) (see 'Kafka: \
             brokers fenced'): brokers named then are counted as misattributions all the same",
            ts.len()
        ));
    }
    match fault {
        Fault::ControllerFreeze => {
            let ahead: Vec<f64> = ts
                .iter()
                .filter_map(|t| delta(t.new_quorum_leader_secs, t.critical_secs))
                .collect();
            if let Some(s) = summarize(&ahead) {
                section.note(format!(
                    "{f} ({p} profile): named {:.1} s {} Kafka elected another controller \
                     (median of {})",
                    s.median.abs(),
                    if s.median >= 0.0 { "before" } else { "after" },
                    s.n
                ));
            }
        }
        Fault::ControllerStall => {
            let elected = ts
                .iter()
                .filter(|t| t.new_quorum_leader_secs.is_some())
                .count();
            section.note(format!(
                "{f} ({p} profile): Kafka elected another controller in {elected} of {} \
                 trial(s) (the stalled one keeps its leadership: expected 0)",
                ts.len()
            ));
        }
        Fault::GroupCoordinatorStall | Fault::TxnCoordinatorStall => {
            let topic = fault.coordinator().map_or(OFFSETS_TOPIC, |c| c.topic);
            let count = |f: fn(&Trial) -> bool| ts.iter().filter(|t| f(t)).count();
            let moved = count(|t| t.leader_change_secs.is_some());
            let shrunk = count(|t| t.isr_shrink_secs.is_some());
            let fenced = count(|t| {
                t.targets.first().is_some_and(|b| {
                    t.kafka_fenced
                        .iter()
                        .any(|f| f.starts_with(&format!("{b} ")))
                })
            });
            section.note(format!(
                "{f} ({p} profile): Kafka moved a coordinator shard off the stalled broker in \
                 {moved} of {n} trial(s), shrank an ISR of {topic} in {shrunk} and \
                 fenced it in {fenced} (it stays registered and leads and replicates on: \
                 expected 0; Kafka never reacts, so there is no 'Kafka reacted' time)",
                n = ts.len()
            ));
        }
        _ => {}
    }
}

/// group-coordinator-stall: the shards it led at the fault and what Kafka did to them
/// ("__consumer_offsets-0,2: new leader 3 at 4.1 s"; "kept" when nothing); other faults:
/// nothing.
fn coordinator_shards_cell(t: &Trial) -> Option<String> {
    let topic = Fault::parse(t.fault)?.coordinator()?.topic;
    let prefix = format!("{topic}-");
    let shards: Vec<&str> = t
        .led_at_start
        .iter()
        .map(|tp| tp.strip_prefix(&prefix).unwrap_or(tp))
        .collect();
    let mut what = Vec::new();
    if let (Some(at), Some(l)) = (t.leader_change_secs, t.new_leader) {
        what.push(format!("new leader {l} at {at:.1} s"));
    }
    if let Some(at) = t.isr_shrink_secs {
        what.push(format!("ISR shrank at {at:.1} s"));
    }
    if what.is_empty() {
        what.push("kept".into());
    }
    Some(format!("{topic}-{}: {}", shards.join(","), what.join(", ")))
}

fn control_trial_row(t: &Trial) -> Vec<Value> {
    let o = |x: Option<f64>| opt_num(x, 1);
    vec![
        json!(t.profile),
        json!(t.fault),
        json!(t.trial),
        json!(t.targets.first()),
        json!(t.first_state),
        json!(t.rules),
        o(t.state_secs),
        o(t.critical_secs),
        json!(t
            .quorum_problem
            .as_ref()
            .map(|q| format!("{q} at {}", o(t.quorum_problem_secs)))),
        o(t.change_secs),
        o(t.stale_metadata_secs),
        o(t.coordinator_stalled_secs),
        o(t.webhook_secs),
        json!(t.webhook),
        json!(t
            .new_quorum_leader
            .map(|c| format!("{c} at {}", o(t.new_quorum_leader_secs)))),
        json!(coordinator_shards_cell(t)),
        json!(t.kafka_fenced.join("; ")),
        json!(t.misattributed.join("; ")),
        json!(t.error),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(fault: &str, critical: Option<f64>, webhook: Option<f64>) -> Value {
        json!({"profile": "default", "fault": fault, "critical_secs": critical,
               "state_secs": critical, "webhook_secs": webhook,
               "leader_change_secs": 1.0, "misattributed": []})
    }

    #[test]
    fn goals_are_p95_per_fault_and_count_misattributions() {
        let mut s = Section::new("detect", json!({}));
        s.raw = json!((0..10)
            .map(|_| trial("freeze", Some(1.5), Some(2.5)))
            .collect::<Vec<_>>());
        assert_eq!(missed_goals(&s), Vec::<String>::new());
        // One trial of ten that never paged: the p95 (nearest rank) is that trial.
        let mut ts: Vec<Value> = (0..9)
            .map(|_| trial("freeze", Some(1.5), Some(2.5)))
            .collect();
        ts.push(trial("freeze", Some(1.5), None));
        s.raw = json!(ts);
        assert_eq!(missed_goals(&s).len(), 1, "{:?}", missed_goals(&s));
        // Isolation is measured from the new leader's election (1.0 s here).
        let mut t = trial("isolate", Some(3.9), Some(4.9));
        t["misattributed"] = json!(["2 state degraded (canary_not_enough_replicas) at 2.1 s"]);
        s.raw = json!([t]);
        let missed = missed_goals(&s);
        assert_eq!(missed.len(), 1, "{missed:?}");
        assert!(missed[0].contains("misattribution"), "{missed:?}");
    }

    /// A fault asked for that never ran (its lab did not come up) is not a goal met.
    #[test]
    fn a_fault_without_trials_misses_its_goals() {
        let params = json!({"trials": 3, "profiles": ["default"],
                            "faults": ["freeze", "group-coordinator-stall"]});
        let mut s = Section::new("detect", params);
        s.raw = json!([]);
        assert_eq!(missed_goals(&s).len(), 2, "{:?}", missed_goals(&s));
        s.raw = json!((0..3)
            .map(|_| trial("freeze", Some(1.5), Some(2.5)))
            .collect::<Vec<_>>());
        assert_eq!(
            missed_goals(&s),
            vec!["group-coordinator-stall (default): no trial recorded (see the notes)"]
        );
    }

    /// Issue 14's two faults Kafka does not repair: a request-handler stall is a zombie
    /// within the freeze's goals; a fetcher stall names the follower (any state) within the
    /// replica lag + 3 s, as a cut replication does.
    #[test]
    fn stalls_have_the_goals_of_a_freeze_and_of_a_cut_replication() {
        let mut s = Section::new("detect", json!({}));
        s.raw = json!((0..10)
            .map(|_| trial("stall", Some(2.5), Some(2.5)))
            .collect::<Vec<_>>());
        let missed = missed_goals(&s);
        assert_eq!(missed.len(), 1, "{missed:?}");
        assert!(
            missed[0].starts_with("stall (default): state p95 2.5 s"),
            "{missed:?}"
        );
        let mut t = trial("stall-fetchers", None, Some(8.5));
        t["state_secs"] = json!(7.5);
        s.raw = json!([t]);
        assert_eq!(missed_goals(&s), Vec::<String>::new());
        assert_eq!(Fault::parse("stall-fetchers"), Some(Fault::StallFetchers));
    }

    fn control(fault: &str, critical: Option<f64>, webhook: Option<f64>) -> Value {
        json!({"profile": "default", "fault": fault, "critical_secs": critical,
               "state_secs": critical, "webhook_secs": webhook,
               "leader_change_secs": null, "misattributed": []})
    }

    /// Issue 25's goals: a frozen active controller zombie <= 2 s / page <= 3 s; a wedged
    /// one <= 3 s / 4 s; the only controller frozen is judged by the quorum's problem, not
    /// the controller's own state; a metadata stall by `stale_metadata` after the change.
    #[test]
    fn control_plane_goals() {
        let mut s = Section::new("detect", json!({}));
        s.raw = json!((0..10)
            .map(|_| control("controller-freeze", Some(1.9), Some(2.9)))
            .chain((0..10).map(|_| control("controller-stall", Some(2.9), Some(3.9))))
            .collect::<Vec<_>>());
        assert_eq!(missed_goals(&s), Vec::<String>::new());
        s.raw = json!((0..10)
            .map(|_| control("controller-stall", Some(3.1), Some(3.9)))
            .collect::<Vec<_>>());
        let missed = missed_goals(&s);
        assert_eq!(missed.len(), 1, "{missed:?}");
        assert!(
            missed[0].starts_with("controller-stall (default): state p95 3.1 s after the fault"),
            "{missed:?}"
        );

        // The only controller: a zombie controller alone is not the quorum incident.
        let mut t = control("quorum-freeze", Some(1.0), Some(2.0));
        s.raw = json!([t.clone()]);
        assert_eq!(missed_goals(&s).len(), 1, "{:?}", missed_goals(&s));
        t["quorum_problem_secs"] = json!(1.5);
        s.raw = json!([t]);
        assert_eq!(missed_goals(&s), Vec::<String>::new());

        // The metadata stall is measured from the change (made 2.2 s into the fault).
        let mut t = control("metadata-stall", Some(4.8), Some(6.0));
        t["change_secs"] = json!(2.2);
        t["stale_metadata_secs"] = json!(4.8);
        s.raw = json!([t.clone()]);
        assert_eq!(missed_goals(&s), Vec::<String>::new());
        t["webhook_secs"] = json!(6.3);
        t["misattributed"] = json!(["broker-3 state degraded (canary_slow) at 3.0 s"]);
        s.raw = json!([t.clone()]);
        let missed = missed_goals(&s);
        assert_eq!(missed.len(), 2, "{missed:?}");
        assert!(
            missed[0].contains("webhook p95 4.1 s after the leadership change, goal <= 4.0 s"),
            "{missed:?}"
        );
        assert!(missed[1].contains("1 misattribution"), "{missed:?}");
        // No change made: nothing measured, the goals missed.
        t["change_secs"] = Value::Null;
        t["misattributed"] = json!([]);
        s.raw = json!([t]);
        assert_eq!(missed_goals(&s).len(), 2, "{:?}", missed_goals(&s));
    }

    /// Issue 26's goals: a stalled group coordinator `zombie` by group_coordinator_stalled
    /// <= 3 s and paged <= 4 s after the stall (p95), 0 misattributions. A zombie for another
    /// rule is not it.
    #[test]
    fn group_coordinator_stall_goals() {
        let gc = |named: Option<f64>, webhook: Option<f64>| {
            let mut t = control("group-coordinator-stall", named, webhook);
            t["coordinator_stalled_secs"] = json!(named);
            t
        };
        let mut s = Section::new("detect", json!({}));
        s.raw = json!((0..10)
            .map(|_| gc(Some(2.9), Some(3.9)))
            .collect::<Vec<_>>());
        assert_eq!(missed_goals(&s), Vec::<String>::new());

        // Zombie in time, but never by the coordinator's rule: the state goal is missed.
        let mut t = gc(None, Some(2.0));
        t["critical_secs"] = json!(1.0);
        s.raw = json!([t]);
        let missed = missed_goals(&s);
        assert_eq!(missed.len(), 1, "{missed:?}");
        assert!(
            missed[0].starts_with("group-coordinator-stall (default): state p95 inf"),
            "{missed:?}"
        );

        let mut t = gc(Some(3.1), Some(4.2));
        t["misattributed"] = json!(["broker-3 webhook opened broker critical at 2.0 s"]);
        s.raw = json!([t]);
        let missed = missed_goals(&s);
        assert_eq!(missed.len(), 3, "{missed:?}");
        assert!(missed[0].contains("state p95 3.1 s after the fault, goal <= 3.0 s"));
        assert!(missed[1].contains("webhook p95 4.2 s after the fault, goal <= 4.0 s"));
        assert!(missed[2].contains("1 misattribution"), "{missed:?}");
        assert_eq!(Fault::GroupCoordinatorStall.controllers(), 1);
        assert!(Fault::GroupCoordinatorStall.control_plane());
    }

    /// Issue 26's goal for a stalled transaction coordinator (the lab's probe settings):
    /// `zombie` by txn_coordinator_stalled <= 5 s, its page <= 6 s.
    #[test]
    fn txn_coordinator_stall_goals() {
        let tc = |named: Option<f64>, webhook: Option<f64>| {
            let mut t = control("txn-coordinator-stall", named, webhook);
            t["coordinator_stalled_secs"] = json!(named);
            t
        };
        let mut s = Section::new("detect", json!({}));
        s.raw = json!((0..10)
            .map(|_| tc(Some(4.9), Some(5.9)))
            .collect::<Vec<_>>());
        assert_eq!(missed_goals(&s), Vec::<String>::new());
        s.raw = json!([tc(Some(5.2), Some(6.3))]);
        let missed = missed_goals(&s);
        assert_eq!(missed.len(), 2, "{missed:?}");
        assert!(missed[0].contains("state p95 5.2 s after the fault, goal <= 5.0 s"));
        assert!(missed[1].contains("webhook p95 6.3 s after the fault, goal <= 6.0 s"));
        let c = Fault::TxnCoordinatorStall.coordinator().unwrap();
        assert_eq!(
            (c.topic, c.rule),
            ("__transaction_state", "txn_coordinator_stalled")
        );
        assert_eq!(Fault::TxnCoordinatorStall.controllers(), 1);
        assert_eq!(
            Fault::parse("txn-coordinator-stall"),
            Some(Fault::TxnCoordinatorStall)
        );
    }

    #[test]
    fn control_plane_targets() {
        let controllers = [0, 100, 101];
        for fault in [Fault::ControllerFreeze, Fault::ControllerStall] {
            assert_eq!(
                control_target(fault, &controllers, Some(101), &[1, 2, 3], &[], 0),
                Ok(101)
            );
            assert!(control_target(fault, &controllers, None, &[1, 2, 3], &[], 0).is_err());
            // A leader that is none of the lab's controllers (a stale answer): no trial.
            assert!(control_target(fault, &controllers, Some(2), &[1, 2, 3], &[], 0).is_err());
        }
        assert_eq!(
            control_target(Fault::QuorumFreeze, &[0], Some(0), &[1, 2, 3], &[], 4),
            Ok(0)
        );
        assert!(control_target(Fault::QuorumFreeze, &controllers, Some(0), &[], &[], 0).is_err());
        let brokers = [1, 2, 3];
        let picked: Vec<i32> = (0..4)
            .map(|i| control_target(Fault::MetadataStall, &controllers, None, &brokers, &[], i))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(picked, vec![1, 2, 3, 1]);
        assert!(control_target(Fault::Freeze, &controllers, Some(0), &brokers, &[], 0).is_err());

        // A stalled group coordinator: in turn the brokers that lead a __consumer_offsets
        // partition (three partitions, one broker leading two: broker 2 leads none).
        let gc = |leaders: &[i32], i| {
            control_target(
                Fault::GroupCoordinatorStall,
                &[0],
                Some(0),
                &brokers,
                leaders,
                i,
            )
        };
        let picked: Vec<i32> = (0..4)
            .map(|i| gc(&[3, 1, 3], i))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(picked, vec![1, 3, 1, 3]);
        assert_eq!(gc(&[2, 2, 2], 5), Ok(2));
        // No leader yet (-1), or only nodes that are not brokers: no trial.
        assert!(gc(&[-1, -1, -1], 0).is_err());
        assert!(gc(&[], 0).is_err());
        assert!(gc(&[0], 0).is_err());
    }

    /// Each layout once, the lab's current one first, so a run switches at most once.
    #[test]
    fn layouts_are_grouped_current_first() {
        let l = |controllers, log_dirs| Layout {
            controllers,
            log_dirs,
        };
        let order = |faults: &[Fault], current: Option<Layout>| {
            layout_order(faults, current)
                .into_iter()
                .map(|l| (l.controllers, l.log_dirs))
                .collect::<Vec<_>>()
        };
        let all = [
            Fault::Freeze,
            Fault::ControllerFreeze,
            Fault::QuorumFreeze,
            Fault::MetadataStall,
        ];
        assert_eq!(order(&all, None), vec![(1, 1), (3, 1)]);
        assert_eq!(order(&all, Some(l(1, 1))), vec![(1, 1), (3, 1)]);
        assert_eq!(order(&all, Some(l(3, 1))), vec![(3, 1), (1, 1)]);
        assert_eq!(order(&[Fault::Kill], Some(l(3, 1))), vec![(1, 1)]);
        assert_eq!(
            order(
                &[Fault::ControllerStall, Fault::MetadataStall],
                Some(l(1, 1))
            ),
            vec![(3, 1)]
        );
        // The coordinator stall runs on the default lab, as tests/coordinators.rs does.
        assert_eq!(
            order(
                &[Fault::MetadataStall, Fault::GroupCoordinatorStall],
                Some(l(3, 1))
            ),
            vec![(3, 1), (1, 1)]
        );
        // A filled log directory needs brokers with two, as tests/log_dirs.rs has.
        assert_eq!(
            order(&[Fault::Kill, Fault::LogDirFill], Some(l(1, 2))),
            vec![(1, 2), (1, 1)]
        );
        assert_eq!(
            l(1, 2).to_string(),
            "1 controller(s), 2 log directories per broker"
        );
    }

    /// Issue 26: a filled log directory named by log_dir_failed within one round (10 s by
    /// default), its page a second later.
    #[test]
    fn log_dir_fill_goals() {
        assert_eq!(
            goal(Profile::Default, Fault::LogDirFill),
            ("fault", 10.0, 11.0)
        );
        assert_eq!(Fault::parse("log-dir-fill"), Some(Fault::LogDirFill));
    }

    #[test]
    fn notifications_name_the_target_or_others() {
        let page = |key: &str, kind: &str, suspects: Value| {
            json!({"event": "opened", "dedup_key": format!("kafka-watchdog/lab/{key}/{kind}"),
                   "kind": kind, "suspects": suspects})
        };
        let controller = page("controller-100", "controller", json!([100]));
        let quorum = page("cluster", "quorum", json!([0]));
        let broker = page("broker-2", "broker", Value::Null);
        let offline = page("cluster", "offline_partitions", json!([]));

        assert!(names_control_target(
            Fault::ControllerFreeze,
            &controller,
            100
        ));
        assert!(!names_control_target(
            Fault::ControllerFreeze,
            &controller,
            101
        ));
        assert!(names_control_target(
            Fault::ControllerStall,
            &page("cluster", "quorum", json!([100])),
            100
        ));
        // The only controller's page is its own incident with the quorum inside, or the
        // quorum's naming it: either is the one page of the fault.
        assert!(names_control_target(Fault::QuorumFreeze, &quorum, 0));
        assert!(names_control_target(
            Fault::QuorumFreeze,
            &page("controller-0", "controller", json!([0])),
            0
        ));
        assert!(!names_control_target(
            Fault::QuorumFreeze,
            &page("controller-100", "controller", json!([100])),
            0
        ));
        assert!(names_control_target(Fault::MetadataStall, &broker, 2));
        assert!(!names_control_target(Fault::MetadataStall, &broker, 3));

        assert!(others_named(&controller, &[100]).is_empty());
        assert_eq!(
            others_named(&controller, &[101]),
            vec!["controller-100", "suspect 100"]
        );
        assert!(others_named(&quorum, &[0]).is_empty());
        assert_eq!(others_named(&broker, &[0]), vec!["broker-2"]);
        // A cluster incident that suspects nobody names no node.
        assert!(others_named(&offline, &[2]).is_empty());
        assert_eq!(
            others_named(&page("cluster", "quorum", json!([0, 100])), &[100]),
            vec!["suspect 0"]
        );
        assert_eq!(Fault::parse("metadata-stall"), Some(Fault::MetadataStall));

        // A stalled group coordinator's page is the broker's incident with the rule in its
        // evidence; the same broker paged for something else is not it.
        let mut gc = page("broker-2", "broker", Value::Null);
        gc["evidence"] = json!(["group_coordinator_stalled: OffsetFetch unanswered twice \
                                 (__consumer_offsets 0, 2)"]);
        assert!(names_control_target(Fault::GroupCoordinatorStall, &gc, 2));
        assert!(!names_control_target(Fault::GroupCoordinatorStall, &gc, 3));
        let mut other = page("broker-2", "broker", Value::Null);
        other["evidence"] = json!(["no_answer: TCP connect succeeded and then nothing"]);
        assert!(!names_control_target(
            Fault::GroupCoordinatorStall,
            &other,
            2
        ));
        assert!(!names_control_target(
            Fault::GroupCoordinatorStall,
            &broker,
            2
        ));
        assert_eq!(
            Fault::parse("group-coordinator-stall"),
            Some(Fault::GroupCoordinatorStall)
        );
        assert_eq!(
            Fault::GroupCoordinatorStall.as_str(),
            "group-coordinator-stall"
        );
    }

    #[test]
    fn kill_two_targets_are_the_replicas_of_one_rf2_partition() {
        let brokers = [1, 2, 3];
        let topics = bench_topics(&brokers);
        let (name, rf2, _) = &topics[1];
        assert_eq!(*name, TOPIC_RF2);
        for i in 0..6 {
            let t = targets(Fault::KillTwo, &brokers, i);
            assert_eq!(&t, &rf2[i % 3], "trial {i}");
        }
        assert_eq!(targets(Fault::Freeze, &brokers, 4), vec![2]);
        let (_, rf3, _) = &topics[0];
        assert_eq!(rf3, &vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]]);
    }
}
