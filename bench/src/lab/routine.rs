//! `routine`: a day in the life of a cluster, watched by the watchdog with its default
//! settings from start to end (issue 15, "no false zombies, no false losses"). The
//! operations a team runs on a healthy cluster follow each other, each in a phase of its
//! own, spread over `--minutes`:
//!
//! rolling restart; preferred leader elections; a fourth broker added and given replicas of
//! a topic holding data, under a replication throttle; topics created, deleted and
//! recreated with the same names; partitions added; a consumer group whose members come
//! and go; a broker setting changed and reverted; the watchdog's SASL password rotated; the
//! fourth broker emptied by reassignment, stopped and unregistered; a rolling restart of the
//! three KRaft controllers (followers first, the active one last) and a controller
//! leadership change (the active controller stopped cleanly, another elected, the first
//! started again); a quiet tail. A producer writes to the data topic throughout, as
//! applications do.
//!
//! None of it is a fault, so every zombie verdict, critical notification, loss report and
//! remediation decision is a false positive; each is listed with the phase it started in.
//! A controller's restart or a new active controller is information, not an incident: a
//! page of any kind that starts in the controllers' phases, and any controller or quorum
//! incident, is one too (issue 25).
//!
//! The whole routine runs on the SASL_SSL lab: the watchdog authenticates with SCRAM over
//! TLS from the first round, so the credential rotation is the real thing (the broker's
//! credential replaced, the watchdog's password file rewritten, SIGHUP) and is seen by the
//! same process that watched everything before. The benchmark's own administrative requests
//! and clients use the lab's plaintext listener, whose anonymous user is a super user. The
//! lab grows a broker and the watchdog's credential changes, so the routine takes the lab
//! down when it ends; the next test or benchmark brings up a fresh one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kafka_lab::secrets::{Secrets, WATCHDOG_USER};
use kafka_lab::sink::Sink;
use kafka_lab::{broker_address, KafkaVersion, Lab, Security, UpOptions};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use serde_json::{json, Value};

use kafka_watchdog::model::round::FailureKind;
use kafka_watchdog::observe::wire::{
    BrokerClient, SaslMechanism, SaslSettings, Security as WireSecurity, TlsSettings, WireOptions,
};

use super::recorder::{unix_now, Record, Recorder, STATES};
use super::{admin, wait_fully_replicated, KafkaEyes, Profile, Watchdog};
use crate::output::{num, Section, Table};

pub struct RoutineOptions {
    pub watchdog_bin: PathBuf,
    pub minutes: f64,
}

/// The topic that carries data, traffic, and replicas to and from the fourth broker.
const DATA_TOPIC: &str = "routine-data";
/// Topics deleted and recreated with the same names.
const CHURN_TOPICS: [&str; 2] = ["routine-churn-a", "routine-churn-b"];
const GROUP: &str = "routine-group";
const NEW_BROKER: i32 = 4;
/// Data in the topic before the fourth broker gets replicas of it.
const DATA_BYTES: usize = 24 << 20;
const RECORD_BYTES: usize = 1024;
/// The watchdog lets a broker that was down in the last two minutes catch up; a new broker
/// replicating under a throttle should stay out of every ISR for longer than that in the
/// full-length run. Its partitions catch up one by one (the first at about 80 % of the
/// whole, seen at 110 of 135 s), so the whole copy is aimed well beyond two minutes.
const CATCH_UP_TARGET_FULL: f64 = 210.0;

/// The phases, in order, with their share of the time.
/// The rotation comes before the removal: its reload rebuilds the cluster's loop, which
/// would forget the removed broker and hide how long it is still reported.
const PHASES: [(&str, u32); 13] = [
    ("baseline", 1),
    ("rolling-restart", 3),
    ("preferred-election", 1),
    ("add-broker", 4),
    ("topic-churn", 2),
    ("add-partitions", 1),
    ("consumer-group-churn", 2),
    ("broker-config", 1),
    ("sasl-rotation", 1),
    ("remove-broker", 3),
    ("controller-rolling-restart", 2),
    ("controller-leader-change", 1),
    ("quiet", 1),
];

/// The phases in which only the control plane is touched: any page that starts in them
/// is a false one.
const CONTROLLER_PHASES: [&str; 2] = ["controller-rolling-restart", "controller-leader-change"];
/// Dedicated KRaft controllers of the routine's lab: a quorum that survives one restart.
const CONTROLLERS: u32 = 3;
/// How long a restarted controller may take to rejoin the quorum and catch up.
const QUORUM_CATCH_UP: Duration = Duration::from_secs(120);

/// Counts that must be zero; `--check` fails otherwise.
#[derive(Debug, Default)]
pub struct Verdict {
    pub failures: Vec<String>,
}

/// Counts the background producer's outcomes.
#[derive(Default)]
pub(super) struct Traffic {
    pub(super) sent: AtomicU64,
    pub(super) acked: AtomicU64,
    pub(super) failed: AtomicU64,
    pub(super) errors: Mutex<BTreeMap<String, u64>>,
}

#[derive(Clone)]
pub(super) struct Counting(Arc<Traffic>);

impl ClientContext for Counting {}

impl ProducerContext for Counting {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => {
                self.0.acked.fetch_add(1, Ordering::Relaxed);
            }
            Err((e, _)) => {
                self.0.failed.fetch_add(1, Ordering::Relaxed);
                *self
                    .0
                    .errors
                    .lock()
                    .expect("errors lock")
                    .entry(e.to_string())
                    .or_insert(0) += 1;
            }
        }
    }
}

/// An application's producer: acks=all, idempotent, retrying, as the defaults are.
pub(super) fn app_producer(
    bootstrap: &str,
    traffic: Arc<Traffic>,
) -> Result<BaseProducer<Counting>> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "60000")
        .set("log_level", "3")
        .create_with_context(Counting(traffic))
        .context("create the producer")
}

/// Takes the lab down when the routine ends, however it ends: it has a fifth node and the
/// watchdog's password changed, which no other test expects.
struct TakeDown;

impl Drop for TakeDown {
    fn drop(&mut self) {
        println!("routine: taking the lab down (it grew a broker and its credentials changed)");
        if let Err(e) = Lab::down() {
            eprintln!("routine: kafka-lab down failed: {e}");
        }
    }
}

struct Ctx {
    lab: Lab,
    rt: tokio::runtime::Runtime,
    eyes: KafkaEyes,
    wd: Watchdog,
    password_file: PathBuf,
    secure_bootstrap: String,
    ca_pem: Vec<u8>,
    password: String,
    /// Seconds of one share of the time.
    unit: f64,
    /// Original replica lists of the data topic, before broker 4 got some.
    data_layout: Vec<(i32, Vec<i32>)>,
}

impl Ctx {
    fn admin_address(&self) -> String {
        broker_address(1)
    }

    fn slot(&self, phase: &str) -> Duration {
        let w = PHASES.iter().find(|(p, _)| *p == phase).map_or(1, |p| p.1);
        Duration::from_secs_f64(self.unit * f64::from(w))
    }

    /// Every partition of every topic, from broker 1's metadata: (topic, partition, replicas).
    fn all_partitions(&mut self) -> Result<Vec<(String, i32, Vec<i32>)>> {
        let addr = self.admin_address();
        let md = self.rt.block_on(self.eyes.metadata(&addr, None))?;
        Ok(md
            .topics
            .values()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.name.clone(), p.partition, p.replicas.to_vec()))
            })
            .collect())
    }

    /// Waits until no reassignment is going on.
    fn wait_reassigned(&mut self, timeout: Duration) -> Result<()> {
        let addr = self.admin_address();
        let deadline = Instant::now() + timeout;
        loop {
            match self.rt.block_on(self.eyes.ongoing_reassignments(&addr)) {
                Ok(list) if list.is_empty() => return Ok(()),
                Ok(list) if Instant::now() > deadline => bail!(
                    "{} reassignments still going on after {} s",
                    list.len(),
                    timeout.as_secs()
                ),
                Err(e) if Instant::now() > deadline => return Err(e),
                _ => {}
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    fn fully_replicated(&mut self) -> Result<()> {
        self.rt.block_on(wait_fully_replicated(
            &mut self.eyes,
            &self.lab,
            Duration::from_secs(300),
        ))
    }

    fn reassign(&mut self, moves: &[(String, i32, Vec<i32>)]) -> Result<()> {
        let addr = self.admin_address();
        let outcomes = self.rt.block_on(self.eyes.reassign(&addr, moves))?;
        let failed: Vec<String> = outcomes
            .iter()
            .filter(|(_, _, code, _)| *code != 0)
            .map(|(t, p, code, m)| format!("{t}-{p}: {code} {}", m.clone().unwrap_or_default()))
            .collect();
        if !failed.is_empty() {
            bail!("reassignment refused: {}", failed.join("; "));
        }
        Ok(())
    }

    /// Preferred elections; returns how many partitions changed leader.
    fn elect_all(&mut self, partitions: &[(String, i32)]) -> Result<usize> {
        let addr = self.admin_address();
        let outcomes = self.rt.block_on(self.eyes.elect(&addr, partitions))?;
        // 84 ELECTION_NOT_NEEDED: led by its preferred leader already.
        let failed: Vec<String> = outcomes
            .iter()
            .filter(|(_, _, code, _)| *code != 0 && *code != 84)
            .map(|(t, p, code, m)| format!("{t}-{p}: {code} {}", m.clone().unwrap_or_default()))
            .collect();
        if !failed.is_empty() {
            bail!("elections failed: {}", failed.join("; "));
        }
        Ok(outcomes.iter().filter(|o| o.2 == 0).count())
    }
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect()
}

/// The cluster's YAML beyond the defaults: SCRAM over TLS, and host mode for the lab's
/// three brokers (their processes are on this machine) with remediation in dry-run, so that
/// a remediation the watchdog would have taken is counted without restarting anything.
fn cluster_yaml(password_file: &Path, ca: &Path, lab_dir: &Path) -> String {
    let mut y = format!(
        "    security:\n      protocol: SASL_SSL\n      sasl:\n        mechanism: SCRAM-SHA-512\n        username: {WATCHDOG_USER}\n        password_file: {}\n      tls:\n        ca_file: {}\n    host:\n      brokers:\n",
        password_file.display(),
        ca.display()
    );
    for id in 1..=3 {
        let config = lab_dir.join(format!("n{id}")).join("server.properties");
        y.push_str(&format!(
            "        - id: {id}\n          process:\n            cmdline_regex: '{}'\n          remediation:\n            enabled: true\n            dry_run: true\n            command: [\"true\"]\n",
            regex_escape(&config.display().to_string())
        ));
    }
    y
}

fn random_password() -> Result<String> {
    let mut b = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b)
        .map_err(|_| anyhow::anyhow!("no random bytes"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

fn write_secret(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).with_context(|| format!("write {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

/// Round-robin replica lists over `brokers`, `rf` each.
fn layout(brokers: &[i32], partitions: usize, rf: usize) -> Vec<Vec<i32>> {
    let n = brokers.len();
    (0..partitions)
        .map(|k| (0..rf.min(n)).map(|i| brokers[(k + i) % n]).collect())
        .collect()
}

/// Writes `n` records of `bytes` each and waits until every one is acknowledged.
fn produce_some(bootstrap: &str, topic: &str, n: usize, bytes: usize) -> Result<()> {
    let traffic = Arc::new(Traffic::default());
    let p = app_producer(bootstrap, traffic.clone())?;
    let payload = vec![b'x'; bytes];
    for _ in 0..n {
        let mut rec = BaseRecord::<(), [u8]>::to(topic).payload(&payload[..]);
        loop {
            match p.send(rec) {
                Ok(()) => break,
                Err((_, r)) => {
                    rec = r;
                    p.poll(Duration::from_millis(20));
                }
            }
        }
    }
    let _ = p.flush(Duration::from_secs(120));
    let (acked, failed) = (
        traffic.acked.load(Ordering::Relaxed),
        traffic.failed.load(Ordering::Relaxed),
    );
    if failed > 0 || acked < n as u64 {
        bail!("{n} records to {topic}: {acked} acknowledged, {failed} failed");
    }
    Ok(())
}

// ---- the phases -------------------------------------------------------------------------

fn rolling_restart(c: &mut Ctx) -> Result<String> {
    for b in [1, 2, 3] {
        println!("  restart broker {b}");
        c.lab.stop(b)?;
        c.lab.start(b)?;
        c.fully_replicated()?;
    }
    Ok("brokers 1, 2, 3 in turn: controlled shutdown, start, wait until nothing is under-replicated".into())
}

/// Waits until the quorum has a leader and every voter has reached the high watermark the
/// leader reports; returns the leader's id.
fn quorum_caught_up(c: &Ctx, timeout: Duration) -> Result<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        let last = match c.lab.quorum() {
            Ok(q) => {
                let behind: Vec<i32> = q
                    .voters
                    .iter()
                    .filter(|(_, end)| *end < q.high_watermark)
                    .map(|(id, _)| *id)
                    .collect();
                if behind.is_empty() {
                    return Ok(q.leader);
                }
                format!(
                    "voters {behind:?} behind the high watermark {} of leader {}",
                    q.high_watermark, q.leader
                )
            }
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            bail!(
                "the quorum did not settle in {} s: {last}",
                timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Waits until a controller other than `old` leads the quorum; returns its id.
fn new_leader(c: &Ctx, old: i32, timeout: Duration) -> Result<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        match c.lab.active_controller() {
            Ok(id) if id != old => return Ok(id),
            Ok(_) if Instant::now() > deadline => {
                bail!("controller {old} still leads after {} s", timeout.as_secs())
            }
            Err(e) if Instant::now() > deadline => return Err(e.into()),
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Each controller stopped cleanly and started again, followers first and the active one
/// last (as operators roll a quorum: one election, at the end), each back and caught up
/// before the next.
fn controller_rolling_restart(c: &mut Ctx) -> Result<String> {
    let active = quorum_caught_up(c, QUORUM_CATCH_UP)?;
    let mut order: Vec<i32> = c
        .lab
        .controllers()
        .into_iter()
        .filter(|id| *id != active)
        .collect();
    order.push(active);
    let mut steps = Vec::new();
    for id in &order {
        println!("  restart controller {id}");
        let t = Instant::now();
        c.lab.stop(*id)?;
        c.lab.start(*id)?;
        let leader = quorum_caught_up(c, QUORUM_CATCH_UP)?;
        steps.push(format!(
            "{id} ({:.0} s, leader {leader})",
            t.elapsed().as_secs_f64()
        ));
    }
    Ok(format!(
        "controllers in turn, the active one ({active}) last: stop, start, wait until every voter has caught up: {}",
        steps.join(", ")
    ))
}

/// The active controller stopped cleanly (it resigns), another elected, the first started
/// again and caught up: a leadership change of the control plane.
fn controller_leader_change(c: &mut Ctx) -> Result<String> {
    let active = quorum_caught_up(c, QUORUM_CATCH_UP)?;
    let t = Instant::now();
    c.lab.stop(active)?;
    let elected = new_leader(c, active, QUORUM_CATCH_UP)?;
    let took = t.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(5));
    c.lab.start(active)?;
    let leader = quorum_caught_up(c, QUORUM_CATCH_UP)?;
    Ok(format!(
        "active controller {active} stopped cleanly, {elected} leads {took:.0} s later; {active} started again and caught up (leader {leader})"
    ))
}

fn preferred_election(c: &mut Ctx) -> Result<String> {
    let all: Vec<(String, i32)> = c
        .all_partitions()?
        .into_iter()
        .map(|(t, p, _)| (t, p))
        .collect();
    let moved = c.elect_all(&all)?;
    Ok(format!(
        "preferred leader election on all {} partitions: {moved} changed leader",
        all.len()
    ))
}

fn add_broker(c: &mut Ctx) -> Result<String> {
    let started = Instant::now();
    c.lab.start(NEW_BROKER)?;
    let joined = started.elapsed().as_secs_f64();
    // Long enough in the full run to outlast the watchdog's two-minute catch-up allowance.
    let target = (CATCH_UP_TARGET_FULL * c.unit / 60.0).clamp(20.0, CATCH_UP_TARGET_FULL);
    let rate = (DATA_BYTES as f64 / target) as u64;
    let addr = c.admin_address();
    let mut moves = Vec::new();
    let mut leader_throttled = Vec::new();
    let mut follower_throttled = Vec::new();
    for (p, replicas) in &c.data_layout {
        let mut new = replicas.clone();
        if let Some(last) = new.last_mut() {
            *last = NEW_BROKER;
        }
        leader_throttled.extend(replicas.iter().map(|b| format!("{p}:{b}")));
        follower_throttled.push(format!("{p}:{NEW_BROKER}"));
        moves.push((DATA_TOPIC.to_string(), *p, new));
    }
    // As kafka-reassign-partitions --throttle does: a rate on every broker, and the
    // replicas it applies to on the topic. A broker takes its own settings only.
    let rate_s = rate.to_string();
    for b in [1, 2, 3, NEW_BROKER] {
        c.rt.block_on(admin::alter_configs(
            &broker_address(b),
            admin::RESOURCE_BROKER,
            &b.to_string(),
            &[
                ("leader.replication.throttled.rate", Some(rate_s.clone())),
                ("follower.replication.throttled.rate", Some(rate_s.clone())),
            ],
        ))?;
    }
    c.rt.block_on(admin::alter_configs(
        &addr,
        admin::RESOURCE_TOPIC,
        DATA_TOPIC,
        &[
            (
                "leader.replication.throttled.replicas",
                Some(leader_throttled.join(",")),
            ),
            (
                "follower.replication.throttled.replicas",
                Some(follower_throttled.join(",")),
            ),
        ],
    ))?;
    let reassign_started = Instant::now();
    let moved = c
        .reassign(&moves)
        .and_then(|()| c.wait_reassigned(Duration::from_secs_f64(target * 4.0 + 120.0)));
    let copied = reassign_started.elapsed().as_secs_f64();
    // The throttle goes in any case: left behind, it would slow every later move.
    for b in [1, 2, 3, NEW_BROKER] {
        c.rt.block_on(admin::alter_configs(
            &broker_address(b),
            admin::RESOURCE_BROKER,
            &b.to_string(),
            &[
                ("leader.replication.throttled.rate", None),
                ("follower.replication.throttled.rate", None),
            ],
        ))?;
    }
    c.rt.block_on(admin::alter_configs(
        &addr,
        admin::RESOURCE_TOPIC,
        DATA_TOPIC,
        &[
            ("leader.replication.throttled.replicas", None),
            ("follower.replication.throttled.replicas", None),
        ],
    ))?;
    moved?;
    Ok(format!(
        "broker 4 started (registered after {joined:.0} s); {DATA_TOPIC} ({} MiB) given a replica on it per partition under a {} KiB/s throttle: copied in {copied:.0} s; throttle removed",
        DATA_BYTES >> 20,
        rate / 1024
    ))
}

/// Waits until no broker's metadata lists `topic` (Metadata v4+ never creates it).
fn wait_topic_gone(c: &mut Ctx, topic: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let ask = [topic.to_string()];
    loop {
        let mut listed = false;
        for b in [1, 2, 3] {
            if let Ok(md) =
                c.rt.block_on(c.eyes.metadata(&broker_address(b), Some(&ask)))
            {
                listed |= md
                    .topics
                    .get(topic)
                    .is_some_and(|t| t.error_code == 0 && !t.partitions.is_empty());
            }
        }
        if !listed {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{topic} still listed 60 s after its deletion");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn topic_churn(c: &mut Ctx) -> Result<String> {
    let bs = c.lab.bootstrap();
    let brokers = [1, 2, 3];
    let mut done = Vec::new();
    // Created, written, deleted, then recreated with the same names at once (another
    // partition count) and once more after two rounds.
    for (i, t) in CHURN_TOPICS.iter().enumerate() {
        kafka_lab::client::create_topic(
            &bs,
            t,
            &layout(&brokers, 3 - i, 3),
            &[("min.insync.replicas", "2")],
        )?;
        produce_some(&bs, t, 200, 200)?;
    }
    done.push("created and written".to_string());
    std::thread::sleep(Duration::from_secs(15));
    for t in CHURN_TOPICS {
        kafka_lab::client::delete_topic(&bs, t)?;
    }
    for t in CHURN_TOPICS {
        wait_topic_gone(c, t)?;
    }
    for (i, t) in CHURN_TOPICS.iter().enumerate() {
        kafka_lab::client::create_topic(
            &bs,
            t,
            &layout(&[2, 3, 1], 2 + i, 3),
            &[("min.insync.replicas", "2")],
        )?;
        produce_some(&bs, t, 200, 200)?;
    }
    done.push("deleted and recreated at once".to_string());
    std::thread::sleep(Profile::Default.round_interval() * 2);
    let t = CHURN_TOPICS[0];
    kafka_lab::client::delete_topic(&bs, t)?;
    wait_topic_gone(c, t)?;
    std::thread::sleep(Profile::Default.round_interval() * 2);
    kafka_lab::client::create_topic(
        &bs,
        t,
        &layout(&brokers, 3, 3),
        &[("min.insync.replicas", "2")],
    )?;
    produce_some(&bs, t, 200, 200)?;
    done.push(format!("{t} deleted and recreated two rounds later"));
    Ok(format!("{}: {}", CHURN_TOPICS.join(", "), done.join("; ")))
}

fn add_partitions(c: &mut Ctx) -> Result<String> {
    let addr = c.admin_address();
    let bs = c.lab.bootstrap();
    let data = kafka_lab::client::partitions(&bs, DATA_TOPIC)?.len() as i32;
    let churn = kafka_lab::client::partitions(&bs, CHURN_TOPICS[1])?.len() as i32;
    c.rt.block_on(admin::create_partitions(&addr, DATA_TOPIC, data + 2))?;
    c.rt.block_on(admin::create_partitions(&addr, CHURN_TOPICS[1], churn + 1))?;
    Ok(format!(
        "{DATA_TOPIC} {data} -> {} partitions (placed by Kafka, broker 4 included), {} {churn} -> {}",
        data + 2,
        CHURN_TOPICS[1],
        churn + 1
    ))
}

fn consumer_group_churn(c: &mut Ctx) -> Result<String> {
    let bs = c.lab.bootstrap();
    let span = c.slot("consumer-group-churn").mul_f64(0.8);
    // Members join every span/8 and stay span/3: up to three at once, eight in all.
    let members = 8u32;
    let consumed = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for m in 0..members {
        let (bs, consumed) = (bs.clone(), consumed.clone());
        let life = span / 3;
        threads.push(std::thread::spawn(move || -> Result<()> {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &bs)
                .set("group.id", GROUP)
                .set("client.id", format!("routine-member-{m}"))
                .set("auto.offset.reset", "earliest")
                .set("log_level", "3")
                .create()?;
            consumer.subscribe(&[DATA_TOPIC])?;
            let end = Instant::now() + life;
            while Instant::now() < end {
                if let Some(Ok(_)) = consumer.poll(Duration::from_millis(200)) {
                    consumed.fetch_add(1, Ordering::Relaxed);
                }
            }
            consumer.unsubscribe();
            Ok(())
        }));
        std::thread::sleep(span / members);
    }
    let mut failed = Vec::new();
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failed.push(format!("{e:#}")),
            Err(_) => failed.push("a member panicked".into()),
        }
    }
    if !failed.is_empty() {
        bail!("consumer members failed: {}", failed.join("; "));
    }
    Ok(format!(
        "group {GROUP}: {members} members joined and left over {:.0} s (up to 3 at once), {} records consumed",
        span.as_secs_f64(),
        consumed.load(Ordering::Relaxed)
    ))
}

fn broker_config(c: &mut Ctx) -> Result<String> {
    let addr = broker_address(2);
    c.rt.block_on(admin::alter_configs(
        &addr,
        admin::RESOURCE_BROKER,
        "2",
        &[("num.io.threads", Some("4".into()))],
    ))?;
    std::thread::sleep(c.slot("broker-config").mul_f64(0.5));
    c.rt.block_on(admin::alter_configs(
        &addr,
        admin::RESOURCE_BROKER,
        "2",
        &[("num.io.threads", None)],
    ))?;
    Ok("broker 2: num.io.threads 8 -> 4 (dynamic), back to the default half a phase later".into())
}

fn remove_broker(c: &mut Ctx) -> Result<String> {
    let mut moves = Vec::new();
    for (t, p, replicas) in c.all_partitions()? {
        if !replicas.contains(&NEW_BROKER) {
            continue;
        }
        let Some(spare) = [1, 2, 3].into_iter().find(|b| !replicas.contains(b)) else {
            bail!("{t}-{p} has no broker to move to: {replicas:?}");
        };
        let new: Vec<i32> = replicas
            .iter()
            .map(|b| if *b == NEW_BROKER { spare } else { *b })
            .collect();
        moves.push((t, p, new));
    }
    let n = moves.len();
    c.reassign(&moves)?;
    c.wait_reassigned(Duration::from_secs(300))?;
    let moved: Vec<(String, i32)> = moves.into_iter().map(|(t, p, _)| (t, p)).collect();
    let elected = c.elect_all(&moved)?;
    c.fully_replicated()?;
    c.lab.stop(NEW_BROKER)?;
    let addr = c.admin_address();
    c.rt.block_on(admin::unregister_broker(&addr, NEW_BROKER))?;
    Ok(format!(
        "{n} partitions with a replica on broker 4 (every topic, the canary's included) reassigned to brokers 1-3, {elected} preferred leaders elected; broker 4 stopped and unregistered"
    ))
}

/// Whether `password` authenticates the watchdog's user, on a new connection.
fn authenticates(c: &Ctx, password: &str) -> Result<bool> {
    let first = c
        .secure_bootstrap
        .split(',')
        .next()
        .context("no SASL_SSL address")?;
    let opts = WireOptions {
        connect_timeout: Duration::from_secs(3),
        request_timeout: Duration::from_secs(5),
        client_id: "kafka-watchdog-bench".into(),
        security: WireSecurity::SaslSsl(
            TlsSettings {
                ca_pem: Some(c.ca_pem.clone().into()),
                ..TlsSettings::default()
            },
            SaslSettings::user_password(SaslMechanism::ScramSha512, WATCHDOG_USER, password),
        ),
        ..WireOptions::default()
    };
    match c.rt.block_on(BrokerClient::connect(first, &opts)) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == FailureKind::Authentication => Ok(false),
        Err(e) => Err(e.into()),
    }
}

fn sasl_rotation(c: &mut Ctx) -> Result<String> {
    let old = c.password.clone();
    let new = random_password()?;
    let addr = c.admin_address();
    // The broker side first, then the watchdog's file and SIGHUP: connections the watchdog
    // holds stay authenticated meanwhile; only a connection opened in between would fail.
    let started = Instant::now();
    kafka_lab::scram::set_password(&addr, WATCHDOG_USER, &new)?;
    write_secret(&c.password_file, &new)?;
    // SAFETY: a signal to the watchdog child this process started.
    if unsafe { libc::kill(c.wd.pid() as i32, libc::SIGHUP) } != 0 {
        bail!(
            "SIGHUP to the watchdog: {}",
            std::io::Error::last_os_error()
        );
    }
    let gap = started.elapsed().as_secs_f64();
    c.password = new.clone();
    // The reload is applied when /status says so.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(s) = c.wd.status_blocking() {
            if s["config_reload_success"] == json!(true) {
                break;
            }
        }
        if Instant::now() > deadline {
            bail!("the watchdog did not report a successful reload within 60 s");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let old_works = authenticates(c, &old)?;
    let new_works = authenticates(c, &new)?;
    if old_works || !new_works {
        bail!("after the rotation the old password authenticates: {old_works}, the new one: {new_works}");
    }
    Ok(format!(
        "SCRAM-SHA-512 credential of user {WATCHDOG_USER} replaced (AlterUserScramCredentials), password file rewritten and SIGHUP {:.1} s later; reload applied; the old password is refused, the new one accepted",
        gap
    ))
}

// ---- the run ----------------------------------------------------------------------------

struct PhaseRun {
    name: &'static str,
    start: f64,
    end: f64,
    op_secs: f64,
    detail: String,
    failed: bool,
    traffic: (u64, u64, u64),
}

pub fn run(opts: &RoutineOptions) -> Result<(Section, Verdict)> {
    if opts.minutes <= 0.0 {
        bail!("--minutes must be above 0");
    }
    let mut section = Section::new(
        "routine",
        json!({ "minutes": opts.minutes, "profile": "default", "lab": "Kafka 4.1, SASL_SSL (SCRAM-SHA-512), 3 controllers, 3 brokers + 1 added and removed" }),
    );
    let total_weight: u32 = PHASES.iter().map(|p| p.1).sum();
    let unit = opts.minutes * 60.0 / f64::from(total_weight);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let lab = super::lab_up_with(&UpOptions {
        version: KafkaVersion::V4,
        security: Security::SaslSsl,
        brokers: 3,
        controllers: CONTROLLERS,
        ..UpOptions::default()
    })?;
    let _down = TakeDown;
    let lab_dir = kafka_lab::lab_dir();
    let secrets = Secrets::load(&lab_dir).context("the SASL lab's secrets")?;
    let secure_bootstrap = lab.secure_bootstrap().context("no SASL_SSL listener")?;
    let bs = lab.bootstrap();

    // The data topic, filled before the watchdog starts: RF 3, each broker the preferred
    // leader of one partition.
    let data_layout = layout(&lab.brokers(), 3, 3);
    kafka_lab::client::create_topic(
        &bs,
        DATA_TOPIC,
        &data_layout,
        &[("min.insync.replicas", "2")],
    )?;
    produce_some(&bs, DATA_TOPIC, DATA_BYTES / RECORD_BYTES, RECORD_BYTES)
        .context("fill the data topic")?;
    let traffic = Arc::new(Traffic::default());

    let secret_dir = std::env::temp_dir().join(format!(
        "kw-bench-routine-secret-{}",
        (unix_now() * 1000.0) as u64
    ));
    std::fs::create_dir_all(&secret_dir)?;
    let password_file = secret_dir.join("watchdog.password");
    write_secret(&password_file, &secrets.watchdog_password)?;
    let sink = Arc::new(rt.block_on(Sink::start("127.0.0.1:0".parse()?))?);
    let bootstrap: Vec<String> = secure_bootstrap.split(',').map(str::to_string).collect();
    let wd = Watchdog::start_with(
        &opts.watchdog_bin,
        "routine",
        &bootstrap,
        &cluster_yaml(&password_file, &secrets.ca(), &lab_dir),
        Profile::Default,
        Some(&sink.url()),
    )?;
    let brokers = lab.brokers();
    if let Err(e) = wd.wait_healthy(&brokers, Duration::from_secs(300)) {
        section.note(format!(
            "the routine started before every broker was healthy: {e:#}"
        ));
    }
    let ca_pem = std::fs::read(secrets.ca())?;
    let skip = sink.received().len();
    let recorder = Recorder::start(
        &rt,
        wd.port,
        Some(sink.clone()),
        skip,
        PHASES[0].0,
        &brokers,
    );
    let routine_start = unix_now();

    // The application's traffic, all along.
    let stop_traffic = Arc::new(AtomicBool::new(false));
    let traffic_thread = {
        let (bs, traffic, stop) = (bs.clone(), traffic.clone(), stop_traffic.clone());
        std::thread::spawn(move || -> Result<()> {
            let p = app_producer(&bs, traffic.clone())?;
            let payload = [b't'; 200];
            while !stop.load(Ordering::SeqCst) {
                let rec = BaseRecord::<(), [u8]>::to(DATA_TOPIC).payload(&payload[..]);
                if p.send(rec).is_ok() {
                    traffic.sent.fetch_add(1, Ordering::Relaxed);
                }
                p.poll(Duration::from_millis(100));
            }
            let _ = p.flush(Duration::from_secs(60));
            Ok(())
        })
    };

    let mut c = Ctx {
        lab,
        rt,
        eyes: KafkaEyes::new(),
        wd,
        password_file,
        secure_bootstrap,
        ca_pem,
        password: secrets.watchdog_password.clone(),
        unit,
        data_layout: data_layout
            .iter()
            .enumerate()
            .map(|(p, r)| (p as i32, r.clone()))
            .collect(),
    };
    let snapshot = |t: &Traffic| {
        (
            t.sent.load(Ordering::Relaxed),
            t.acked.load(Ordering::Relaxed),
            t.failed.load(Ordering::Relaxed),
        )
    };
    let mut runs: Vec<PhaseRun> = Vec::new();
    for (i, (name, _)) in PHASES.iter().enumerate() {
        if i > 0 {
            recorder.phase(name);
        }
        let start = unix_now();
        let before = snapshot(&traffic);
        println!(
            "routine: phase {name} at {:.0} s (planned {:.0} s)",
            start - routine_start,
            c.slot(name).as_secs_f64()
        );
        let op: Result<String> = match *name {
            "baseline" => Ok("healthy cluster with background traffic".into()),
            "rolling-restart" => rolling_restart(&mut c),
            "preferred-election" => preferred_election(&mut c),
            "add-broker" => add_broker(&mut c),
            "topic-churn" => topic_churn(&mut c),
            "add-partitions" => add_partitions(&mut c),
            "consumer-group-churn" => consumer_group_churn(&mut c),
            "broker-config" => broker_config(&mut c),
            "remove-broker" => remove_broker(&mut c),
            "sasl-rotation" => sasl_rotation(&mut c),
            "controller-rolling-restart" => controller_rolling_restart(&mut c),
            "controller-leader-change" => controller_leader_change(&mut c),
            "quiet" => Ok("nothing: incidents of earlier phases resolve".into()),
            other => bail!("unknown phase {other}"),
        };
        let op_secs = unix_now() - start;
        let (detail, failed) = match op {
            Ok(d) => (d, false),
            Err(e) => (format!("FAILED: {e:#}"), true),
        };
        println!("  {detail}");
        // The phase keeps its share of the time: what the operation set off shows up in
        // the rounds that follow it.
        let planned = c.slot(name).as_secs_f64();
        if op_secs < planned {
            std::thread::sleep(Duration::from_secs_f64(planned - op_secs));
        }
        let after = snapshot(&traffic);
        runs.push(PhaseRun {
            name,
            start,
            end: unix_now(),
            op_secs,
            detail,
            failed,
            traffic: (after.0 - before.0, after.1 - before.1, after.2 - before.2),
        });
    }
    stop_traffic.store(true, Ordering::SeqCst);
    let traffic_result = traffic_thread.join();
    // Incidents resolve a few rounds after their cause; the quiet phase's last rounds count.
    let rec = recorder.finish(&c.rt);
    let metrics =
        c.rt.block_on(super::http_get(c.wd.port, "/metrics"))
            .map(|(_, body)| body)
            .unwrap_or_default();
    if let Ok(Err(e)) | Err(e) = traffic_result.map_err(|_| anyhow::anyhow!("panicked")) {
        section.note(format!("the background producer stopped: {e:#}"));
    }
    let verdict = report(&mut section, &rec, &runs, routine_start, &metrics, &traffic);
    section.note(format!(
        "watchdog files (config, log) in {}",
        c.wd.dir.display()
    ));
    Ok((section, verdict))
}

/// Sum of a counter's samples in a Prometheus text page.
fn metric_sum(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n).collect::<String>() + "..."
    }
}

fn report(
    section: &mut Section,
    rec: &Record,
    runs: &[PhaseRun],
    t0: f64,
    metrics: &str,
    traffic: &Traffic,
) -> Verdict {
    let at = |t: f64| num(t - t0, 0);
    // Webhooks are attributed to the phase their incident started in, when /status listed
    // it; one-shot events and unlisted incidents to when they arrived.
    let hook_phase = |received_phase: &str, body: &Value| -> String {
        body["incident_id"]
            .as_str()
            .and_then(|id| rec.incidents.get(id))
            .map_or_else(|| received_phase.to_string(), |i| i.phase.clone())
    };
    let critical: Vec<(String, &Value)> = rec
        .webhooks
        .iter()
        .filter(|(_, _, b)| b["severity"] == "critical")
        .map(|(_, p, b)| (hook_phase(p, b), b))
        .collect();
    let lost_metric = metric_sum(metrics, "kafka_watchdog_canary_records_lost_total");
    let remediations_metric = metric_sum(metrics, "kafka_watchdog_remediations_total");
    let loss_incidents = rec
        .incidents
        .values()
        // acks1_loss: acks=1 losses have their own (warning) kind in newer watchdogs; a loss
        // report either way.
        .filter(|i| i.kind == "acknowledged_loss" || i.kind == "acks1_loss")
        .count();
    let remediation_hooks = rec
        .webhooks
        .iter()
        .filter(|(_, _, b)| b["kind"] == "remediation")
        .count();

    let mut phases = Table::new(
        "Phases (times in seconds from the start; broker-rounds by state; counts by the phase a problem started in)",
        &[
            "phase", "started (UTC)", "at", "lasted", "operation", "rounds", "degraded", "zombie",
            "down", "unknown", "incidents", "critical webhooks", "lost records", "remediations",
            "traffic sent/acked/failed",
        ],
    );
    let mut zombie_rounds = 0;
    for r in runs {
        let v = rec.verdicts.get(r.name).cloned().unwrap_or_default();
        let get = |s: &str| v.get(s).copied().unwrap_or(0);
        zombie_rounds += get("zombie");
        let incidents = rec.incidents.values().filter(|i| i.phase == r.name).count();
        let crit = critical.iter().filter(|(p, _)| p == r.name).count();
        let lost = rec.losses.iter().filter(|l| l["phase"] == r.name).count();
        let rem = rec
            .remediations
            .values()
            .filter(|x| x["phase"] == r.name)
            .count();
        phases.push(vec![
            json!(r.name),
            json!(crate::sys::utc(r.start as u64)),
            at(r.start),
            num(r.end - r.start, 0),
            num(r.op_secs, 0),
            json!(rec.rounds.get(r.name).map_or(0, |s| s.len())),
            json!(get("degraded")),
            json!(get("zombie")),
            json!(get("down")),
            json!(get("unknown")),
            json!(incidents),
            json!(crit),
            json!(lost),
            json!(rem),
            json!(format!("{}/{}/{}", r.traffic.0, r.traffic.1, r.traffic.2)),
        ]);
    }
    let mut done = Table::new("What each phase did", &["phase", "what was done"]);
    for r in runs {
        done.push(vec![json!(r.name), json!(r.detail)]);
    }

    let mut episodes = Table::new(
        "Non-healthy verdicts (a broker entering a state) with the phase the round ended in; at: when the round started",
        &["phase", "at", "round", "broker", "state", "rules", "detail"],
    );
    for e in &rec.episodes_seen {
        episodes.push(vec![
            e["phase"].clone(),
            at(e["at"].as_f64().unwrap_or(t0)),
            e["round"].clone(),
            e["broker"].clone(),
            e["state"].clone(),
            e["rules"].clone(),
            json!(clip(e["detail"].as_str().unwrap_or(""), 240)),
        ]);
    }
    if rec.episodes_seen.is_empty() {
        episodes.push(none_row(7));
    }

    let mut incidents = Table::new(
        "Incidents listed by /status (worst severity and state seen), with the phase they started in",
        &["phase", "at", "kind", "broker", "state", "severity", "summary", "evidence"],
    );
    let mut by_start: Vec<_> = rec.incidents.values().collect();
    by_start.sort_by(|a, b| a.started_at.total_cmp(&b.started_at));
    let mut zombie_incidents = 0;
    for i in &by_start {
        if i.state == "zombie" {
            zombie_incidents += 1;
        }
        incidents.push(vec![
            json!(i.phase),
            at(i.started_at),
            json!(i.kind),
            json!(i.broker),
            json!(i.state),
            json!(i.severity),
            json!(clip(&i.summary, 200)),
            json!(clip(&i.evidence, 240)),
        ]);
    }
    if by_start.is_empty() {
        incidents.push(none_row(8));
    }

    let mut hooks = Table::new(
        "Webhooks received, with the phase their incident started in (else when received)",
        &[
            "phase",
            "received at",
            "event",
            "kind",
            "broker",
            "state",
            "severity",
            "summary",
        ],
    );
    for (t, p, b) in &rec.webhooks {
        hooks.push(vec![
            json!(hook_phase(p, b)),
            at(*t),
            b["event"].clone(),
            b["kind"].clone(),
            b["broker_id"].clone(),
            b["state"].clone(),
            b["severity"].clone(),
            json!(clip(b["summary"].as_str().unwrap_or(""), 200)),
        ]);
    }
    if rec.webhooks.is_empty() {
        hooks.push(none_row(8));
    }

    let mut losses = Table::new(
        "Canary records reported lost",
        &[
            "phase",
            "at",
            "partition",
            "offset",
            "broker",
            "acks",
            "reason",
        ],
    );
    for l in &rec.losses {
        losses.push(vec![
            l["phase"].clone(),
            at(l["at"].as_f64().unwrap_or(t0)),
            l["partition"].clone(),
            l["offset"].clone(),
            l["broker"].clone(),
            l["acks"].clone(),
            l["reason"].clone(),
        ]);
    }
    let mut remediations = Table::new(
        "Remediation decisions (host mode, dry run)",
        &["phase", "at", "broker", "outcome", "refusals"],
    );
    for r in rec.remediations.values() {
        remediations.push(vec![
            r["phase"].clone(),
            at(r["at"].as_f64().unwrap_or(t0)),
            r["broker"].clone(),
            r["outcome"].clone(),
            json!(clip(&r["refusals"].to_string(), 200)),
        ]);
    }

    let lost_records = (rec.losses.len() as f64).max(lost_metric) as u64;
    let remediation_count = (rec.remediations.len() as f64)
        .max(remediations_metric)
        .max(remediation_hooks as f64) as u64;
    let mut verdict = Verdict::default();
    let mut must_be_zero = |what: &str, n: u64| {
        if n > 0 {
            verdict.failures.push(format!("{what}: {n}"));
        }
    };
    must_be_zero("zombie broker-rounds", zombie_rounds);
    must_be_zero("zombie incidents", zombie_incidents);
    must_be_zero("critical notifications", critical.len() as u64);
    // A critical incident is notified unless the run ended first; it counts either way.
    let critical_incidents = rec
        .incidents
        .values()
        .filter(|i| i.severity == "critical")
        .count();
    must_be_zero("critical incidents", critical_incidents as u64);
    must_be_zero("lost canary records", lost_records);
    must_be_zero("loss incidents", loss_incidents as u64);
    must_be_zero("remediation decisions", remediation_count);
    // Issue 25: restarting controllers or changing the active one pages nobody, whatever
    // the kind or severity; and no routine raises the control plane's own incidents.
    let control_plane_pages = rec
        .webhooks
        .iter()
        .filter(|(_, p, b)| {
            b["event"] == "opened" && CONTROLLER_PHASES.contains(&hook_phase(p, b).as_str())
        })
        .count();
    must_be_zero(
        "pages opened in the controllers' phases",
        control_plane_pages as u64,
    );
    let control_plane_incidents = rec
        .incidents
        .values()
        .filter(|i| i.kind == "controller" || i.kind == "quorum")
        .count();
    must_be_zero(
        "controller or quorum incidents",
        control_plane_incidents as u64,
    );
    for r in runs.iter().filter(|r| r.failed) {
        verdict
            .failures
            .push(format!("phase {} did not complete: {}", r.name, r.detail));
    }
    let mut summary = Table::new(
        "False positives of a day in the life (each must be 0)",
        &["count", "value"],
    );
    summary.push(vec![
        json!("zombie verdicts (broker-rounds)"),
        json!(zombie_rounds),
    ]);
    summary.push(vec![json!("zombie incidents"), json!(zombie_incidents)]);
    summary.push(vec![json!("critical notifications"), json!(critical.len())]);
    summary.push(vec![json!("critical incidents"), json!(critical_incidents)]);
    summary.push(vec![
        json!("lost canary records (rounds seen / metric)"),
        json!(format!("{} / {}", rec.losses.len(), lost_metric)),
    ]);
    summary.push(vec![
        json!("loss incidents (acknowledged_loss, acks1_loss)"),
        json!(loss_incidents),
    ]);
    summary.push(vec![
        json!("remediation decisions (/status / metric / webhooks)"),
        json!(format!(
            "{} / {} / {}",
            rec.remediations.len(),
            remediations_metric,
            remediation_hooks
        )),
    ]);
    summary.push(vec![
        json!("pages opened in the controllers' phases (any kind or severity)"),
        json!(control_plane_pages),
    ]);
    summary.push(vec![
        json!("controller or quorum incidents"),
        json!(control_plane_incidents),
    ]);
    let non_healthy: u64 = rec
        .verdicts
        .values()
        .flat_map(|m| {
            STATES
                .iter()
                .skip(1)
                .map(move |s| m.get(*s).copied().unwrap_or(0))
        })
        .sum();
    summary.push(vec![
        json!("non-healthy broker-rounds (not failures; listed below)"),
        json!(non_healthy),
    ]);

    for t in [&summary, &phases, &done, &episodes, &incidents, &hooks] {
        t.print();
    }
    section.note(if verdict.failures.is_empty() {
        "PASS: no zombie verdict, critical notification, loss report or remediation decision; no page from the controllers' restarts or leadership change"
            .to_string()
    } else {
        format!("FAIL: {}", verdict.failures.join("; "))
    });
    let errors = traffic.errors.lock().expect("errors lock");
    if !errors.is_empty() {
        section.note(format!(
            "background producer errors (acks=all, idempotent): {}",
            errors
                .iter()
                .map(|(e, n)| format!("{n} x {e}"))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    section
        .tables
        .extend([summary, phases, done, episodes, incidents, hooks]);
    if !rec.losses.is_empty() {
        section.tables.push(losses);
    }
    if !rec.remediations.is_empty() {
        section.tables.push(remediations);
    }
    section.raw = json!({
        "phases": runs.iter().map(|r| json!({
            "phase": r.name, "start": r.start, "end": r.end, "operation_secs": r.op_secs,
            "detail": r.detail, "failed": r.failed,
        })).collect::<Vec<_>>(),
        "episodes": rec.episodes_seen,
        "webhooks": rec.webhooks.iter().map(|(t, p, b)| json!({"received": t, "phase": hook_phase(p, b), "body": b})).collect::<Vec<_>>(),
        "losses": rec.losses,
        "remediations": rec.remediations.values().collect::<Vec<_>>(),
    });
    verdict
}

/// The single row of a table with nothing to list: "none", then empty cells.
fn none_row(columns: usize) -> Vec<Value> {
    std::iter::once(json!("none"))
        .chain(std::iter::repeat_n(Value::Null, columns.saturating_sub(1)))
        .collect()
}
