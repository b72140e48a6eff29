//! `noise`: what one receiver hears of a fault (issue #31). The watchdog runs with the
//! settings a new user starts from (the timings of `config/lab.yaml`, one generic receiver
//! that hears warnings and worse), and per fault episode the bench counts the messages that
//! receiver gets from the fault to the last `resolved` (event, severity, state, rules and
//! time of each), samples the per-broker verdict on /metrics every second, and checks the
//! episode's goal. Every episode gets a fresh watchdog on a healed, fully replicated lab
//! with every broker healthy and no incident open, so that nothing an earlier episode left
//! in its memory (a recent restart, a flapping history) shapes what it says.

mod count;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kafka_lab::sink::Sink;
use kafka_lab::{broker_address, Lab};
use rdkafka::producer::{BaseRecord, Producer};
use serde::Serialize;
use serde_json::{json, Value};

use kafka_watchdog::model::round::BrokerId;

use super::recorder::{unix_now, Record, Recorder};
use super::routine::{app_producer, Traffic};
use super::{
    broker_states, restore, wait_fully_replicated, webhook_yaml, KafkaEyes, Profile, Watchdog,
};
use crate::output::{num, opt_num, Section, Table};
use count::{
    by_event, critical_page, fraction, incidents_opened, runs_of, severity_sequence, state_changes,
    state_runs, states_in, states_of, times_in, EpisodeRun, Goal, IncidentSeen, Message, Sample,
    CPU_SETTLED_SECS,
};
pub use count::{goals_of, missed_goals};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Episode {
    /// Broker 2 frozen (SIGSTOP) 30 s, then thawed.
    Freeze,
    /// Broker 3 killed (SIGKILL), started again 30 s later.
    Kill,
    /// Broker 2 frozen 2 s / thawed 2 s, for 60 s.
    Flap,
    /// Broker 2 at 5 % of a CPU for 3 min under a 2,000 msg/s acks=all producer.
    Cpu,
    /// Broker 2 stopped 1.2 s every 20 s for 2 min (long GC pauses).
    GcLong,
    /// Broker 2 stopped 0.8 s every 10 s for 2 min (GC pauses below the liveness floor).
    GcShort,
    /// Broker 2 restarted, then its request path stalled 60 s after its first answer.
    RestartStall,
}

pub const ALL_EPISODES: &str = "freeze,kill,flap,cpu,gc-long,gc-short,restart-stall";

impl Episode {
    fn parse(s: &str) -> Option<Self> {
        <Self as clap::ValueEnum>::from_str(s, false).ok()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Episode::Freeze => "freeze",
            Episode::Kill => "kill",
            Episode::Flap => "flap",
            Episode::Cpu => "cpu",
            Episode::GcLong => "gc-long",
            Episode::GcShort => "gc-short",
            Episode::RestartStall => "restart-stall",
        }
    }

    /// The broker the fault is put on.
    pub fn target(self) -> BrokerId {
        match self {
            Episode::Kill => 3,
            _ => 2,
        }
    }

    fn fault(self) -> &'static str {
        match self {
            Episode::Freeze => "broker 2 frozen (SIGSTOP) 30 s, then thawed",
            Episode::Kill => "broker 3 killed (SIGKILL), started 30 s later",
            Episode::Flap => "broker 2 frozen 2 s / thawed 2 s, for 60 s",
            Episode::Cpu => "broker 2 at 5 % CPU for 3 min under 2,000 msg/s acks=all",
            Episode::GcLong => "broker 2 stopped 1.2 s every 20 s for 2 min",
            Episode::GcShort => "broker 2 stopped 0.8 s every 10 s for 2 min",
            Episode::RestartStall => {
                "broker 2 stopped and started, its request path stalled 60 s after its first answer"
            }
        }
    }

    /// The SIGSTOP/SIGCONT schedule of the episodes that are one.
    fn duty_cycle(self) -> Option<DutyCycle> {
        let ms = Duration::from_millis;
        match self {
            Episode::Flap => Some(DutyCycle {
                stop: ms(2000),
                period: ms(4000),
                total: ms(60_000),
            }),
            Episode::GcLong => Some(DutyCycle {
                stop: ms(1200),
                period: ms(20_000),
                total: ms(120_000),
            }),
            Episode::GcShort => Some(DutyCycle {
                stop: ms(800),
                period: ms(10_000),
                total: ms(120_000),
            }),
            _ => None,
        }
    }
}

/// The cluster settings of `config/lab.yaml` (four spaces in): what a new user trying the
/// watchdog on the lab runs. Everything else is the built-in default.
const LAB_CLUSTER_YAML: &str = "    round_interval_secs: 5\n    connect_timeout_ms: 1000\n    request_timeout_ms: 2000\n    canary:\n      produce_timeout_ms: 3000\n      lost_after_secs: 30\n      reassign_stable_secs: 30\n      reassign_min_interval_secs: 60\n";
const ROUND: Duration = Duration::from_secs(5);
/// The built-in `verdict.resolve_after_secs`.
const RESOLVE_AFTER: Duration = Duration::from_secs(20);
/// How long after the fault is removed the episode waits for its incidents to resolve.
const RESOLVE_BOUND: Duration = Duration::from_secs(20 + 120);
/// After the last incident resolved, this long without a message ends the episode, so a
/// message that follows the resolve (an incident opening again) is still counted.
const QUIET_TAIL: Duration = Duration::from_secs(10);
/// How long the lab and a fresh watchdog get to be healthy with no incident open.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(180);
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
const SINK_POLL: Duration = Duration::from_millis(50);
/// restart-stall: how long after the stall the trial waits for the critical page.
const STALL_WATCH: Duration = Duration::from_secs(90);
/// restart-stall: the stall comes this long after the restarted broker's first answer.
const STALL_AFTER_ANSWER: Duration = Duration::from_secs(60);
const LOAD_TOPIC: &str = "bench-noise-load";
const LOAD_RATE: u64 = 2000;

pub struct NoiseOptions {
    pub watchdog_bin: PathBuf,
    pub episodes: Vec<Episode>,
    pub trials: usize,
}

fn rel(t: Instant, t0: Instant) -> f64 {
    if t >= t0 {
        (t - t0).as_secs_f64()
    } else {
        -(t0 - t).as_secs_f64()
    }
}

// ---- the duty cycle --------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct DutyCycle {
    stop: Duration,
    period: Duration,
    total: Duration,
}

impl DutyCycle {
    /// The pauses as (start, end) offsets from the first stop.
    fn plan(self) -> Vec<(Duration, Duration)> {
        let mut out = Vec::new();
        let mut start = Duration::ZERO;
        while start < self.total {
            out.push((start, start + self.stop));
            start += self.period;
        }
        out
    }
}

fn signal(pid: u32, sig: i32) -> Result<()> {
    let pid = i32::try_from(pid).context("pid out of range")?;
    // SAFETY: a signal to the lab broker's JVM, whose pid the lab reported.
    if unsafe { libc::kill(pid, sig) } != 0 {
        bail!("signal {sig} to {pid}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// Resumes the process however the cycle ends (an error, a panic).
struct ContOnDrop(u32);

impl Drop for ContOnDrop {
    fn drop(&mut self) {
        let _ = signal(self.0, libc::SIGCONT);
    }
}

/// Stops and resumes `pid` on the plan, sleeping to deadlines counted from `t0` so that
/// pauses neither drift nor stretch with the time a signal takes (the lab's `freeze` takes
/// its lock and reads its state file first); returns the pauses as they happened.
fn run_duty_cycle(pid: u32, cycle: DutyCycle, t0: Instant) -> Result<Vec<(f64, f64)>> {
    let _cont = ContOnDrop(pid);
    let mut done = Vec::new();
    for (start, end) in cycle.plan() {
        sleep_until(t0 + start);
        signal(pid, libc::SIGSTOP)?;
        let stopped = t0.elapsed().as_secs_f64();
        sleep_until(t0 + end);
        signal(pid, libc::SIGCONT)?;
        done.push((stopped, t0.elapsed().as_secs_f64()));
    }
    sleep_until(t0 + cycle.total);
    Ok(done)
}

// ---- watching ---------------------------------------------------------------------------

/// Broker -> state, as one /metrics family says it.
type States = BTreeMap<BrokerId, String>;

#[derive(Default)]
struct WatchLog {
    hooks: Vec<(Instant, Value)>,
    /// When each scrape answered: `broker_state`, `broker_incident_state`.
    samples: Vec<(Instant, States, States)>,
}

/// What the receiver heard and what /metrics said, as it happened: the sink read every
/// 50 ms (so webhook times are good to that), /metrics every second.
struct Watch {
    log: Arc<Mutex<WatchLog>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Watch {
    fn start(rt: &tokio::runtime::Runtime, port: u16, sink: Arc<Sink>) -> Watch {
        let log: Arc<Mutex<WatchLog>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let skip = sink.received().len();
        let hooks = {
            let (log, stop) = (log.clone(), stop.clone());
            rt.spawn(async move {
                let mut seen = skip;
                loop {
                    let stopping = stop.load(Ordering::SeqCst);
                    let got = sink.received();
                    if got.len() > seen {
                        let now = Instant::now();
                        let mut l = log.lock().expect("watch lock");
                        l.hooks.extend(got[seen..].iter().map(|b| (now, b.clone())));
                        seen = got.len();
                    }
                    if stopping {
                        break;
                    }
                    tokio::time::sleep(SINK_POLL).await;
                }
            })
        };
        let metrics = {
            let (log, stop) = (log.clone(), stop.clone());
            rt.spawn(async move {
                let mut tick = tokio::time::interval(SAMPLE_EVERY);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                while !stop.load(Ordering::SeqCst) {
                    tick.tick().await;
                    if let Ok((200, page)) = super::http_get(port, "/metrics").await {
                        let state = states_in(&page, "kafka_watchdog_broker_state");
                        let incident = states_in(&page, "kafka_watchdog_broker_incident_state");
                        let mut l = log.lock().expect("watch lock");
                        l.samples.push((Instant::now(), state, incident));
                    }
                }
            })
        };
        Watch {
            log,
            stop,
            tasks: vec![hooks, metrics],
        }
    }

    fn hooks(&self) -> Vec<(Instant, Value)> {
        self.log.lock().expect("watch lock").hooks.clone()
    }

    fn samples_since(&self, t0: Instant) -> Vec<(Instant, States)> {
        let l = self.log.lock().expect("watch lock");
        l.samples
            .iter()
            .filter(|(t, _, _)| *t >= t0)
            .map(|(t, s, _)| (*t, s.clone()))
            .collect()
    }

    fn finish(self, rt: &tokio::runtime::Runtime) -> WatchLog {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.tasks {
            let _ = rt.block_on(t);
        }
        std::mem::take(&mut *self.log.lock().expect("watch lock"))
    }
}

/// Incident ids of the `opened` and `resolved` messages heard.
fn opened_and_resolved(hooks: &[(Instant, Value)]) -> (BTreeSet<String>, BTreeSet<String>) {
    let ids = |event: &str| -> BTreeSet<String> {
        hooks
            .iter()
            .filter(|(_, b)| b["event"] == event)
            .filter_map(|(_, b)| b["incident_id"].as_str().map(str::to_string))
            .collect()
    };
    (ids("opened"), ids("resolved"))
}

/// Watches after the fault was removed at `healed` until every incident opened has
/// resolved and `QUIET_TAIL` passed without a message (or, when nothing opened, until the
/// resolve delay and the tail passed), at most `RESOLVE_BOUND`. Whether all resolved.
fn watch_until_resolved(watch: &Watch, healed: Instant) -> bool {
    loop {
        let hooks = watch.hooks();
        let (opened, resolved) = opened_and_resolved(&hooks);
        let settled = opened.is_subset(&resolved);
        let quiet = hooks.last().is_none_or(|(t, _)| t.elapsed() >= QUIET_TAIL);
        let waited = healed.elapsed();
        let enough = if opened.is_empty() {
            waited >= RESOLVE_AFTER + QUIET_TAIL
        } else {
            quiet
        };
        if settled && enough {
            return true;
        }
        if waited > RESOLVE_BOUND {
            return settled;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

// ---- the lab ---------------------------------------------------------------------------

struct Ctx<'a> {
    rt: &'a tokio::runtime::Runtime,
    lab: &'a mut Lab,
    sink: &'a Arc<Sink>,
    opts: &'a NoiseOptions,
}

/// Heals the lab, waits for full replication and preferred leaders, starts a fresh watchdog
/// and waits until it calls every broker healthy with no incident open, for a whole round.
fn settle(cx: &mut Ctx, name: &str) -> Result<Watchdog> {
    restore(cx.lab)?;
    let mut eyes = KafkaEyes::new();
    cx.rt.block_on(wait_fully_replicated(
        &mut eyes,
        cx.lab,
        Duration::from_secs(180),
    ))?;
    elect_preferred(cx.rt, &mut eyes);
    let bootstrap: Vec<String> = cx.lab.bootstrap().split(',').map(str::to_string).collect();
    let wd = Watchdog::start_config(
        &cx.opts.watchdog_bin,
        name,
        &bootstrap,
        LAB_CLUSTER_YAML,
        Profile::Default,
        &webhook_yaml(&cx.sink.url(), "warning"),
    )?;
    wait_quiet(&wd, &cx.lab.brokers(), SETTLE_TIMEOUT)?;
    Ok(wd)
}

/// Preferred leaders on every partition (best effort): the lab runs without automatic
/// rebalancing, and a kill or restart leaves leaderships where the failover put them.
fn elect_preferred(rt: &tokio::runtime::Runtime, eyes: &mut KafkaEyes) {
    let address = broker_address(1);
    let _ = rt.block_on(async {
        let md = eyes.metadata(&address, None).await?;
        let all: Vec<(String, i32)> = md
            .topics
            .values()
            .flat_map(|t| t.partitions.iter().map(|p| (t.name.clone(), p.partition)))
            .collect();
        eyes.elect(&address, &all).await
    });
}

/// Whether /status calls every broker healthy and lists no open incident.
fn quiet(status: &Value, brokers: &[BrokerId]) -> bool {
    let states = broker_states(status);
    let healthy = brokers
        .iter()
        .all(|b| states.get(b).map(String::as_str) == Some("healthy"));
    let open = status["incidents"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|i| i["resolved_at"].is_null());
    healthy && !open
}

/// Waits until the watchdog has been quiet (see [`quiet`]) for a round.
fn wait_quiet(wd: &Watchdog, brokers: &[BrokerId], timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut since: Option<Instant> = None;
    let mut last = String::from("no /status");
    loop {
        match wd.status_blocking() {
            Ok(s) if quiet(&s, brokers) => {
                let t = *since.get_or_insert_with(Instant::now);
                if t.elapsed() >= ROUND {
                    return Ok(());
                }
            }
            Ok(s) => {
                since = None;
                let open = s["incidents"].as_array().map_or(0, |a| {
                    a.iter().filter(|i| i["resolved_at"].is_null()).count()
                });
                last = format!("{:?}, {open} incident(s) open", broker_states(&s));
            }
            Err(e) => {
                since = None;
                last = format!("{e:#}");
            }
        }
        if Instant::now() > deadline {
            bail!(
                "not every broker healthy with no incident open within {} s: {last}",
                timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// When the fault was in place and when it was removed, and what it did.
struct Injected {
    t0: Instant,
    healed: Instant,
    pauses: Vec<(f64, f64)>,
    first_answer_secs: Option<f64>,
    load: Option<Value>,
}

impl Injected {
    fn at(t0: Instant) -> Injected {
        Injected {
            t0,
            healed: Instant::now(),
            pauses: Vec::new(),
            first_answer_secs: None,
            load: None,
        }
    }
}

fn freeze(cx: &mut Ctx) -> Result<Injected> {
    cx.lab.freeze(2)?;
    let mut f = Injected::at(Instant::now());
    std::thread::sleep(Duration::from_secs(30));
    f.healed = Instant::now();
    cx.lab.thaw(2)?;
    Ok(f)
}

fn kill(cx: &mut Ctx) -> Result<Injected> {
    cx.lab.kill(3)?;
    let mut f = Injected::at(Instant::now());
    std::thread::sleep(Duration::from_secs(30));
    f.healed = Instant::now();
    cx.lab.start(3)?;
    Ok(f)
}

fn duty(cx: &mut Ctx, cycle: DutyCycle) -> Result<Injected> {
    let pid = cx.lab.running_pid(2).context("broker 2 is not running")?;
    let t0 = Instant::now();
    let pauses = run_duty_cycle(pid, cycle, t0)?;
    Ok(Injected {
        pauses,
        ..Injected::at(t0)
    })
}

fn cpu(cx: &mut Ctx) -> Result<Injected> {
    let load = Load::start(&cx.lab.bootstrap(), LOAD_RATE)?;
    // The producer's connections and leaders are settled before the quota comes.
    std::thread::sleep(Duration::from_secs(10));
    let slowed = cx.lab.slow(2, 5);
    let mut f = Injected::at(Instant::now());
    if slowed.is_ok() {
        std::thread::sleep(Duration::from_secs(180));
    }
    f.healed = Instant::now();
    let healed = cx.lab.heal(Some(2));
    f.load = Some(load.stop());
    slowed?;
    healed?;
    Ok(f)
}

/// Stops and starts broker 2, finds its first answer by asking it for metadata every
/// 100 ms, and stalls its request path `STALL_AFTER_ANSWER` later; heals it once the
/// critical page and the zombie verdict came, or `STALL_WATCH` passed.
fn restart_stall(cx: &mut Ctx, watch: &Watch) -> Result<Injected> {
    cx.lab.stop(2)?;
    let started = Instant::now();
    let answer = cx.rt.spawn(first_answer(broker_address(2)));
    let start = cx.lab.start(2);
    let answered = cx.rt.block_on(answer).ok().flatten();
    start?;
    let answered = answered.context("broker 2 did not answer within 3 min of its start")?;
    sleep_until(answered + STALL_AFTER_ANSWER);
    cx.lab.stall(2, false)?;
    let mut f = Injected::at(Instant::now());
    f.first_answer_secs = Some((answered - started).as_secs_f64());
    let end = f.t0 + STALL_WATCH;
    while Instant::now() < end && !paged_as_zombie(watch, f.t0) {
        std::thread::sleep(Duration::from_millis(100));
    }
    // A few samples more, to see what the verdict settles on.
    std::thread::sleep(Duration::from_secs(3));
    f.healed = Instant::now();
    cx.lab.heal(Some(2))?;
    Ok(f)
}

/// Polls a broker's Metadata until it answers; the moment it did.
async fn first_answer(address: String) -> Option<Instant> {
    let mut eyes = KafkaEyes::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    while Instant::now() < deadline {
        if eyes.metadata(&address, Some(&[])).await.is_ok() {
            return Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// A critical webhook naming broker 2 and a zombie sample of it, both after `t0`.
fn paged_as_zombie(watch: &Watch, t0: Instant) -> bool {
    let paged = watch.hooks().iter().any(|(t, b)| {
        *t >= t0 && b["severity"] == "critical" && b["broker_id"].as_i64() == Some(2)
    });
    paged
        && watch
            .samples_since(t0)
            .iter()
            .any(|(_, s)| s.get(&2).map(String::as_str) == Some("zombie"))
}

/// The application load of the cpu episode: `rate` acks=all records a second (256 bytes,
/// idempotent, as a default application producer) to the load topic, on its own thread.
struct Load {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Result<u64>>,
    traffic: Arc<Traffic>,
    started: Instant,
}

impl Load {
    fn start(bootstrap: &str, rate: u64) -> Result<Load> {
        let traffic = Arc::new(Traffic::default());
        let producer = app_producer(bootstrap, traffic.clone())?;
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let thread = {
            let (stop, traffic) = (stop.clone(), traffic.clone());
            std::thread::spawn(move || -> Result<u64> {
                let payload = [b'n'; 256];
                let queue_full = AtomicU64::new(0);
                let mut due_sent = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    // Paced by the clock, not by acknowledgements: a slow broker does not
                    // slow the application down, it fills the producer's queue.
                    let due = (started.elapsed().as_secs_f64() * rate as f64) as u64;
                    while due_sent < due {
                        let rec = BaseRecord::<(), [u8]>::to(LOAD_TOPIC).payload(&payload[..]);
                        match producer.send(rec) {
                            Ok(()) => traffic.sent.fetch_add(1, Ordering::Relaxed),
                            Err(_) => queue_full.fetch_add(1, Ordering::Relaxed),
                        };
                        due_sent += 1;
                    }
                    producer.poll(Duration::from_millis(5));
                }
                let _ = producer.flush(Duration::from_secs(15));
                Ok(queue_full.load(Ordering::Relaxed))
            })
        };
        Ok(Load {
            stop,
            thread,
            traffic,
            started,
        })
    }

    /// Stops the producer; its figures.
    fn stop(self) -> Value {
        self.stop.store(true, Ordering::SeqCst);
        let secs = self.started.elapsed().as_secs_f64();
        let refused = match self.thread.join() {
            Ok(Ok(n)) => json!(n),
            Ok(Err(e)) => json!(format!("{e:#}")),
            Err(_) => json!("the producer thread panicked"),
        };
        let t = &self.traffic;
        json!({
            "rate_per_sec": LOAD_RATE,
            "secs": (secs * 10.0).round() / 10.0,
            "sent": t.sent.load(Ordering::Relaxed),
            "acked": t.acked.load(Ordering::Relaxed),
            "failed": t.failed.load(Ordering::Relaxed),
            "queue_full": refused,
            "errors": *t.errors.lock().expect("errors lock"),
        })
    }
}

fn create_load_topic(lab: &Lab) -> Result<()> {
    let brokers = lab.brokers();
    let n = brokers.len();
    // Each broker the preferred leader of one partition, RF 3: broker 2 leads one and
    // follows the others, as a loaded broker in a real cluster does.
    let layout: Vec<Vec<BrokerId>> = (0..n)
        .map(|k| (0..3.min(n)).map(|i| brokers[(k + i) % n]).collect())
        .collect();
    kafka_lab::client::create_topic(
        &lab.bootstrap(),
        LOAD_TOPIC,
        &layout,
        &[("min.insync.replicas", "2")],
    )
    .context("create the load topic")
}

// ---- one episode -----------------------------------------------------------------------

fn inject(cx: &mut Ctx, e: Episode, watch: &Watch) -> Result<Injected> {
    match e {
        Episode::Freeze => freeze(cx),
        Episode::Kill => kill(cx),
        Episode::Flap | Episode::GcLong | Episode::GcShort => {
            duty(cx, e.duty_cycle().expect("a duty-cycle episode"))
        }
        Episode::Cpu => cpu(cx),
        Episode::RestartStall => restart_stall(cx, watch),
    }
}

/// One run of an episode, with a watchdog of its own; whatever fails is in `error`, and the
/// lab is restored before the next.
fn run_episode(cx: &mut Ctx, e: Episode, trial: usize) -> EpisodeRun {
    let mut run = EpisodeRun {
        episode: e.as_str().into(),
        trial,
        target: e.target(),
        ..EpisodeRun::default()
    };
    let wd = match settle(cx, &format!("noise-{}-{trial}", e.as_str())) {
        Ok(wd) => wd,
        Err(err) => {
            run.error = Some(format!("did not settle before the episode: {err:#}"));
            return run;
        }
    };
    let brokers = cx.lab.brokers();
    let recorder = Recorder::start(cx.rt, wd.port, None, 0, e.as_str(), &brokers);
    let watch = Watch::start(cx.rt, wd.port, cx.sink.clone());
    let begun = Instant::now();
    let t0_unix = unix_now();
    let injected = inject(cx, e, &watch);
    let (t0, healed) = match &injected {
        Ok(f) => (f.t0, f.healed),
        Err(_) => (begun, Instant::now()),
    };
    run.t0_unix = t0_unix + rel(t0, begun);
    match injected {
        Ok(f) => {
            run.injected = true;
            run.fault_secs = rel(f.healed, f.t0);
            run.pauses = f.pauses;
            run.first_answer_secs = f.first_answer_secs;
            run.load = f.load;
        }
        Err(err) => {
            run.error = Some(format!("the fault: {err:#}"));
            if let Err(err) = restore(cx.lab) {
                println!("  restore after the failed fault: {err:#}");
            }
        }
    }
    run.all_resolved = watch_until_resolved(&watch, healed);
    run.observed_secs = rel(Instant::now(), t0);
    let record = recorder.finish(cx.rt);
    let log = watch.finish(cx.rt);
    fill(&mut run, &log, &record, t0);
    drop(wd);
    run
}

/// Moves what was watched into the run, times relative to `t0`.
fn fill(run: &mut EpisodeRun, log: &WatchLog, record: &Record, t0: Instant) {
    run.messages = log
        .hooks
        .iter()
        .map(|(t, b)| Message::from_body(b, rel(*t, t0)))
        .collect();
    run.samples = log
        .samples
        .iter()
        .map(|(t, s, i)| Sample {
            at: rel(*t, t0),
            state: s.clone(),
            incident_state: i.clone(),
        })
        .collect();
    let mut incidents: Vec<IncidentSeen> = record
        .incidents
        .values()
        .map(|i| IncidentSeen {
            kind: i.kind.clone(),
            broker: i.broker,
            state: i.state.clone(),
            severity: i.severity.clone(),
            started: i.started_at - run.t0_unix,
        })
        .collect();
    incidents.sort_by(|a, b| a.started.total_cmp(&b.started));
    run.incidents = incidents;
    run.verdicts = record
        .episodes_seen
        .iter()
        .map(|v| {
            let mut v = v.clone();
            if let Some(at) = v["at"].as_f64() {
                v["at"] = num(at - run.t0_unix, 1);
            }
            v
        })
        .collect();
}

// ---- the run -----------------------------------------------------------------------------

pub fn run(opts: &NoiseOptions) -> Result<Section> {
    let mut section = Section::new(
        "noise",
        json!({
            "episodes": opts.episodes.iter().map(|e| e.as_str()).collect::<Vec<_>>(),
            "trials": opts.trials,
            "watchdog": opts.watchdog_bin.display().to_string(),
            "settings": "config/lab.yaml timings (round 5 s, connect 1 s, request 2 s), one generic receiver, min_severity warning",
        }),
    );
    let (rt, mut lab) = super::runtime_and_lab(&mut section)?;
    if opts.episodes.contains(&Episode::Cpu) {
        create_load_topic(&lab)?;
    }
    let sink = Arc::new(rt.block_on(Sink::start("127.0.0.1:0".parse()?))?);
    let mut runs: Vec<EpisodeRun> = Vec::new();
    for &e in &opts.episodes {
        let trials = if e == Episode::RestartStall {
            opts.trials.max(1)
        } else {
            1
        };
        for trial in 1..=trials {
            println!(
                "noise: {} (trial {trial}/{trials}): {}",
                e.as_str(),
                e.fault()
            );
            let mut cx = Ctx {
                rt: &rt,
                lab: &mut lab,
                sink: &sink,
                opts,
            };
            let r = run_episode(&mut cx, e, trial);
            println!("  {}", one_line(&r));
            runs.push(r);
        }
    }
    if opts.episodes.contains(&Episode::Cpu) {
        let _ = kafka_lab::client::delete_topic(&lab.bootstrap(), LOAD_TOPIC);
    }
    if let Err(e) = restore(&mut lab) {
        section.note(format!(
            "the lab did not heal after the last episode: {e:#}"
        ));
    }
    report(&mut section, &runs);
    section.raw = serde_json::to_value(&runs)?;
    Ok(section)
}

fn one_line(r: &EpisodeRun) -> String {
    format!(
        "{} message(s) [{}], severities [{}], broker {} on /metrics: {}{}",
        r.messages.len(),
        by_event(&r.messages),
        severity_sequence(&r.messages),
        r.target,
        state_runs(r),
        r.error
            .as_ref()
            .map(|e| format!("; error: {e}"))
            .unwrap_or_default()
    )
}

// ---- the report --------------------------------------------------------------------------

fn report(section: &mut Section, runs: &[EpisodeRun]) {
    let goals = goals_of(runs);
    let mut episodes = Table::new(
        "Episodes: what one receiver (min_severity warning) got, and the faulted broker's verdict on /metrics (sampled every second)",
        &[
            "episode",
            "trial",
            "fault",
            "messages",
            "by event",
            "severity sequence",
            "incidents opened",
            "state changes",
            "degraded (share of samples while faulted)",
            "states on /metrics",
            "all resolved",
            "goals",
        ],
    );
    for r in runs {
        let e = Episode::parse(&r.episode);
        let from = if e == Some(Episode::Cpu) {
            CPU_SETTLED_SECS
        } else {
            0.0
        };
        let degraded = fraction(&r.samples, r.target, "degraded", from, r.fault_secs);
        let mine: Vec<&Goal> = goals.iter().filter(|g| g.episode == r.episode).collect();
        let met = mine.iter().filter(|g| g.met).count();
        episodes.push(vec![
            json!(r.episode),
            json!(r.trial),
            json!(e.map_or("?", Episode::fault)),
            json!(r.messages.len()),
            json!(by_event(&r.messages)),
            json!(severity_sequence(&r.messages)),
            json!(incidents_opened(&r.messages)),
            json!(state_changes(&r.samples, r.target)),
            opt_num(degraded, 2),
            json!(state_runs(r)),
            json!(r.all_resolved),
            json!(format!("{met}/{} met", mine.len())),
        ]);
    }
    let mut goal_table = Table::new("Goals (issue #31)", &["episode", "goal", "seen", "met"]);
    for g in &goals {
        goal_table.push(vec![
            json!(g.episode),
            json!(g.goal),
            json!(g.seen),
            json!(if g.met { "met" } else { "MISSED" }),
        ]);
    }
    let mut messages = Table::new(
        "Every message (at: seconds after the fault was in place)",
        &[
            "episode",
            "trial",
            "at",
            "event",
            "kind",
            "broker",
            "state",
            "severity",
            "rules",
            "partitions",
        ],
    );
    for r in runs {
        for m in &r.messages {
            messages.push(vec![
                json!(r.episode),
                json!(r.trial),
                num(m.at, 2),
                json!(m.event),
                json!(m.kind),
                json!(m.broker),
                json!(m.state),
                json!(m.severity),
                json!(m.rules.join(",")),
                json!(m.affected_partitions),
            ]);
        }
    }
    episodes.print();
    goal_table.print();
    section.tables.push(episodes);
    section.tables.push(goal_table);
    if let Some(t) = restart_stall_table(runs) {
        t.print();
        section.tables.push(t);
    }
    section.tables.push(messages);
    section.tables.push(verdict_table(runs));
    for r in runs.iter().filter(|r| r.load.is_some()) {
        section.note(format!(
            "{} load: {}",
            r.episode,
            r.load.as_ref().map(Value::to_string).unwrap_or_default()
        ));
    }
    for r in runs.iter().filter(|r| r.error.is_some()) {
        section.note(format!(
            "{} trial {}: {}",
            r.episode,
            r.trial,
            r.error.as_deref().unwrap_or("")
        ));
    }
    section.note(
        "messages are counted from the fault until every incident opened resolved and 10 s \
         passed without another (at most 140 s after the fault was removed); restart-stall \
         counts from the restart, so its messages before t = 0 are the restart's",
    );
    section.note(
        "the receiver keeps the built-in repeat_interval_secs (3600): no reminder falls in \
         an episode (config/lab.yaml's receiver reminds every 60 s)",
    );
}

fn restart_stall_table(runs: &[EpisodeRun]) -> Option<Table> {
    let trials: Vec<&EpisodeRun> = runs
        .iter()
        .filter(|r| r.episode == Episode::RestartStall.as_str())
        .collect();
    if trials.is_empty() {
        return None;
    }
    let mut t = Table::new(
        "restart-stall trials (seconds; the stall is t = 0)",
        &[
            "trial",
            "first answer after start",
            "broker 2 on /metrics after the stall",
            "first zombie sample",
            "critical webhook",
            "first message after the stall",
            "error",
        ],
    );
    for r in trials {
        let after: Vec<Sample> = r.samples.iter().filter(|s| s.at >= 0.0).cloned().collect();
        let zombie = times_in(&after, r.target, &["zombie"]).first().copied();
        let first = r.messages.iter().find(|m| m.at >= 0.0).map(|m| {
            format!(
                "{:.2} s {} {} {} ({})",
                m.at,
                m.event,
                m.state.as_deref().unwrap_or("-"),
                m.severity,
                m.rules.join(",")
            )
        });
        t.push(vec![
            json!(r.trial),
            opt_num(r.first_answer_secs, 1),
            json!(runs_of(states_of(&after, r.target).map(|(_, s)| s))),
            opt_num(zombie, 1),
            opt_num(critical_page(r), 2),
            json!(first),
            json!(r.error),
        ]);
    }
    Some(t)
}

/// The faulted broker's non-healthy verdicts in /status, with their rules.
fn verdict_table(runs: &[EpisodeRun]) -> Table {
    let mut t = Table::new(
        "Non-healthy verdicts in /status, read once a round (a broker entering a state; at: seconds after the fault)",
        &["episode", "trial", "at", "broker", "state", "rules"],
    );
    for r in runs {
        for v in &r.verdicts {
            t.push(vec![
                json!(r.episode),
                json!(r.trial),
                v["at"].clone(),
                v["broker"].clone(),
                v["state"].clone(),
                v["rules"].clone(),
            ]);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duty_cycles_pause_on_schedule() {
        let gc = Episode::GcLong.duty_cycle().unwrap().plan();
        assert_eq!(gc.len(), 6);
        assert_eq!(
            gc[1],
            (Duration::from_secs(20), Duration::from_millis(21_200))
        );
        assert_eq!(Episode::GcShort.duty_cycle().unwrap().plan().len(), 12);
        let flap = Episode::Flap.duty_cycle().unwrap().plan();
        assert_eq!(flap.len(), 15);
        assert_eq!(flap[14].1, Duration::from_secs(58));
        assert!(Episode::Freeze.duty_cycle().is_none());
        for name in ALL_EPISODES.split(',') {
            assert_eq!(Episode::parse(name).map(Episode::as_str), Some(name));
        }
    }
}
