//! Guarded remediation: when a broker on this host has been a zombie for a configured
//! time, run the operator's command for it (a restart, after a thread dump), but only when
//! every guard passes at that moment (`guards`). Off by default; a dry run decides and
//! reports without running anything. Every action and every refusal is a record: logged,
//! counted (`remediations_total`), shown in `/status`, and sent as a one-shot incident event
//! (kind `remediation`: `acted`, `refused`, `dry_run`).
//!
//! Commands run in tasks of their own (`run`), so the round loop never waits for them. The
//! times of past actions are kept in `<state_dir>/remediation/<cluster>.json`, so the
//! cool-down and the daily limit hold across restarts of the watchdog, which is when a
//! crash-looping watchdog would otherwise restart brokers again and again.

pub mod guards;
pub mod metrics;
pub mod run;

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::alert::incident::EventKind;
use crate::config::{HostConfig, RemediationConfig};
use crate::judge::report::ClusterReport;
use crate::judge::verdict::BrokerState;
use crate::model::round::BrokerId;
use crate::model::time::{from_unix_ms, unix_ms};

/// Records kept for `/status`, newest last.
const RECENT_RECORDS: usize = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The command ran and succeeded.
    Acted,
    /// The command ran and failed (exit status, timeout, could not start).
    Failed,
    Refused,
    DryRun,
}

impl Outcome {
    pub const ALL: [Outcome; 4] = [
        Outcome::Acted,
        Outcome::Failed,
        Outcome::Refused,
        Outcome::DryRun,
    ];

    /// The metric label.
    pub fn as_label(self) -> &'static str {
        match self {
            Outcome::Acted => "acted",
            Outcome::Failed => "failed",
            Outcome::Refused => "refused",
            Outcome::DryRun => "dry_run",
        }
    }

    /// The incident event: a command that ran is `acted` whether it worked or not (the
    /// evidence says which).
    pub fn event_kind(self) -> EventKind {
        match self {
            Outcome::Acted | Outcome::Failed => EventKind::Acted,
            Outcome::Refused => EventKind::Refused,
            Outcome::DryRun => EventKind::DryRun,
        }
    }
}

/// A voter the quorum's leader saw caught up this recently counts toward the majority a
/// restart must leave (Kafka's own fetch timeout for voters is 2 s).
const QUORUM_CAUGHT_UP_WITHIN: Duration = Duration::from_secs(10);

/// One remediation decision and, for an action, how it went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    pub cluster: String,
    pub broker: BrokerId,
    pub address: String,
    pub outcome: Outcome,
    #[serde(with = "crate::model::time::serde_ms")]
    pub at: SystemTime,
    /// How long it had been a zombie when the decision was taken.
    pub zombie_for_secs: u64,
    /// The command as run (placeholders replaced), or as it would have run.
    pub command: Vec<String>,
    /// Every guard that failed, in words (for a dry run: what would have refused).
    pub refusals: Vec<String>,
    /// How the command ended.
    pub status: Option<String>,
    pub stderr_tail: Option<String>,
    /// Where the before command's output is kept, and how it ended.
    pub before_output: Option<String>,
    pub before_status: Option<String>,
    /// The broker's verdict evidence at the moment of deciding.
    pub verdict_evidence: Vec<String>,
}

impl Record {
    /// One line, in an operator's words.
    pub fn summary(&self) -> String {
        let who = format!("broker {} ({})", self.broker, self.address);
        let cmd = self.command.join(" ");
        let zombie = format!("zombie for {} s", self.zombie_for_secs);
        match self.outcome {
            Outcome::Acted => format!(
                "remediation of {who} ({zombie}): ran `{cmd}`: {}",
                self.status.as_deref().unwrap_or("done")
            ),
            Outcome::Failed => format!(
                "remediation of {who} ({zombie}) FAILED: `{cmd}`: {}",
                self.status.as_deref().unwrap_or("failed")
            ),
            Outcome::Refused => format!(
                "remediation of {who} ({zombie}) refused: {}",
                self.refusals.join("; ")
            ),
            Outcome::DryRun if self.refusals.is_empty() => {
                format!("dry run: remediation of {who} ({zombie}) would run `{cmd}`")
            }
            Outcome::DryRun => format!(
                "dry run: remediation of {who} ({zombie}) would be refused: {}",
                self.refusals.join("; ")
            ),
        }
    }

    /// The evidence lines of its incident event.
    pub fn evidence(&self) -> Vec<String> {
        let mut out = Vec::new();
        out.extend(self.refusals.iter().map(|r| format!("guard: {r}")));
        if let Some(s) = &self.before_status {
            out.push(format!(
                "before command: {s}{}",
                self.before_output
                    .as_ref()
                    .map(|p| format!(", output kept in {p}"))
                    .unwrap_or_default()
            ));
        }
        out.push(format!("command: {}", self.command.join(" ")));
        if let Some(s) = &self.status {
            out.push(format!("status: {s}"));
        }
        if let Some(t) = self.stderr_tail.as_ref().filter(|t| !t.is_empty()) {
            out.push(format!("stderr (tail): {t}"));
        }
        out.extend(
            self.verdict_evidence
                .iter()
                .map(|e| format!("verdict: {e}")),
        );
        out
    }
}

#[derive(Default)]
struct LogInner {
    counts: BTreeMap<(String, BrokerId, Outcome), u64>,
    recent: VecDeque<Record>,
}

/// Counters and recent records of every cluster, for `/metrics` and `/status`.
#[derive(Clone, Default)]
pub struct RemediationLog(Arc<Mutex<LogInner>>);

impl RemediationLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, LogInner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Zero-valued counters for a broker with remediation configured, so the first event
    /// is an increase a rate() sees.
    pub fn register(&self, cluster: &str, broker: BrokerId) {
        let mut l = self.lock();
        for o in Outcome::ALL {
            l.counts
                .entry((cluster.to_string(), broker, o))
                .or_insert(0);
        }
    }

    pub fn record(&self, r: &Record) {
        let mut l = self.lock();
        *l.counts
            .entry((r.cluster.clone(), r.broker, r.outcome))
            .or_insert(0) += 1;
        l.recent.push_back(r.clone());
        while l.recent.len() > RECENT_RECORDS {
            l.recent.pop_front();
        }
    }

    pub fn counts(&self) -> Vec<((String, BrokerId, Outcome), u64)> {
        self.lock()
            .counts
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }

    pub fn recent(&self) -> Vec<Record> {
        self.lock().recent.iter().cloned().collect()
    }

    /// Forgets the clusters no longer configured (after a reload).
    pub fn retain_clusters(&self, names: &[String]) {
        let mut l = self.lock();
        l.counts.retain(|(c, _, _), _| names.contains(c));
        l.recent.retain(|r| names.contains(&r.cluster));
    }
}

/// Where records go besides the log: the incident events (alerting).
pub type Sink = Arc<dyn Fn(Record) + Send + Sync>;

/// Where one broker stands in its current zombie episode.
#[derive(Debug, Clone, PartialEq)]
struct Episode {
    /// When its current zombie state began.
    since: SystemTime,
    /// Acted, or reported as a dry run: nothing more until it leaves the zombie state.
    done: bool,
    /// The refusals last reported, so a refusal is told again only when its reasons change.
    refused: Vec<String>,
}

impl Episode {
    /// An episode that began at `since`, with nothing done or told yet.
    fn new(since: SystemTime) -> Self {
        Episode {
            since,
            done: false,
            refused: Vec::new(),
        }
    }

    /// The refusal's report, only when its reasons differ from the ones last told.
    fn refusal(&mut self, record: Record) -> Option<Decision> {
        if self.refused == record.refusals {
            return None;
        }
        self.refused = record.refusals.clone();
        Some(Decision::Report(record))
    }
}

/// What the round decided for one broker.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Run now; `record` is filled in when the command ends.
    Act {
        config: RemediationConfig,
        pid: Option<u32>,
        record: Record,
        /// How its process is found, to look again right before the command runs.
        process: crate::config::ProcessLocator,
        /// Held until the command ends.
        lock: Arc<HostLock>,
    },
    /// A refusal or a dry run: reported as is.
    Report(Record),
}

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a remediation history: {source}")]
    Corrupt {
        path: String,
        source: serde_json::Error,
    },
}

/// The remediations of one cluster, round after round.
pub struct Remediator {
    cluster: String,
    host: HostConfig,
    dir: PathBuf,
    episodes: BTreeMap<BrokerId, Episode>,
    /// When commands ran in this cluster (the last day or cool-down, whichever is longer).
    history: Vec<SystemTime>,
    running: Arc<AtomicBool>,
    log: RemediationLog,
    sink: Sink,
    silenced: Option<SilenceCheck>,
    confirmed: Option<ConfirmedCheck>,
    /// Where processes are looked up again right before a command runs.
    proc_root: PathBuf,
    /// The name of the host-wide lock (see `HostLock`).
    host_lock: String,
    /// Tests only: the next action's task panics as it starts.
    #[cfg(test)]
    panic_in_action: bool,
}

/// Held while a remediation command runs: an abstract Unix socket of a fixed name, which
/// one process of the host (of its network namespace) can bind at a time and which the
/// kernel releases when that process dies, however it dies. Two watchdogs in host mode on
/// one host (a second instance, an upgrade's overlap) never restart brokers at once
/// (issue 27 item 8). No file: a sandboxed unit may have nowhere shared to write one.
pub struct HostLock(#[allow(dead_code)] std::os::unix::net::UnixListener);

impl std::fmt::Debug for HostLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostLock")
    }
}

/// Decisions compare by what they decide; the lock they hold is the same kind of thing.
impl PartialEq for HostLock {
    fn eq(&self, _: &HostLock) -> bool {
        true
    }
}

impl HostLock {
    /// The lock, or why not (another process holds it).
    pub fn take(name: &str) -> std::io::Result<HostLock> {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
        std::os::unix::net::UnixListener::bind_addr(&addr).map(HostLock)
    }
}

/// The host-wide lock's name in production.
pub const HOST_LOCK: &str = "kafka-watchdog-remediation";

/// Names the silence covering a broker now, if any.
pub type SilenceCheck = Arc<dyn Fn(BrokerId, SystemTime) -> Option<String> + Send + Sync>;

/// The broker's state as its open incident holds it (None: no open incident), the one state
/// that webhooks and the alert rules also read.
pub type ConfirmedCheck = Arc<dyn Fn(BrokerId) -> Option<BrokerState> + Send + Sync>;

/// Takes the host's lock and writes the attempt into the history before any command
/// runs, or says why not. The cool-down and the daily limit count attempts, including
/// one that crashes the watchdog mid-way; an attempt that cannot be written down is not
/// made: after a restart it would count toward neither (issue 27 item 8).
fn take_attempt(
    host_lock: &str,
    dir: &Path,
    cluster: &str,
    history: &mut Vec<SystemTime>,
    now: SystemTime,
) -> Result<HostLock, Vec<String>> {
    let lock = HostLock::take(host_lock).map_err(|e| {
        vec![format!(
            "another kafka-watchdog on this host is running a remediation (its lock, @{host_lock}, is held: {e})"
        )]
    })?;
    history.push(now);
    if let Err(e) = save_history(dir, cluster, history) {
        history.pop();
        tracing::error!(cluster = %cluster, error = %e, "cannot save the remediation history: no command runs");
        return Err(vec![format!(
            "the remediation history cannot be saved ({e}): no command runs that a restart of the watchdog would not count"
        )]);
    }
    Ok(lock)
}

/// When the broker's current zombie state began; none when it is not a zombie.
fn zombie_since(
    report: &ClusterReport,
    verdict: Option<&crate::judge::verdict::BrokerVerdict>,
    broker: BrokerId,
) -> Option<SystemTime> {
    match (verdict, report.state_since.get(&broker)) {
        (Some(v), Some(since)) if v.state == BrokerState::Zombie => Some(*since),
        _ => None,
    }
}

/// The broker's episode, begun afresh when its zombie state began at another time than
/// the one it holds.
fn episode_since(
    episodes: &mut BTreeMap<BrokerId, Episode>,
    broker: BrokerId,
    since: SystemTime,
) -> &mut Episode {
    episodes
        .entry(broker)
        .and_modify(|e| {
            if e.since != since {
                *e = Episode::new(since);
            }
        })
        .or_insert(Episode::new(since))
}

/// The broker's process id as this round's look at the host found it.
fn pid_of(report: &ClusterReport, broker: BrokerId) -> Option<u32> {
    report
        .host
        .get(&broker)
        .and_then(|h| h.process.as_ref())
        .map(|p| p.pid)
}

/// The action for `b`: its command to run, holding the host-wide lock until it ends.
fn act(
    cfg: &RemediationConfig,
    b: &crate::config::HostBrokerConfig,
    lock: HostLock,
    pid: Option<u32>,
    record: Record,
) -> Decision {
    Decision::Act {
        config: cfg.clone(),
        process: b.process.clone(),
        lock: Arc::new(lock),
        pid,
        record: Record {
            outcome: Outcome::Acted,
            ..record
        },
    }
}

fn history_path(dir: &Path, cluster: &str) -> PathBuf {
    dir.join(format!("{cluster}.json"))
}

/// Reads the action times of a cluster; a missing file is an empty history.
pub fn load_history(dir: &Path, cluster: &str) -> Result<Vec<SystemTime>, HistoryError> {
    let path = history_path(dir, cluster);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(HistoryError::Read {
                path: path.display().to_string(),
                source,
            })
        }
    };
    let ms: Vec<u64> = serde_json::from_str(&text).map_err(|source| HistoryError::Corrupt {
        path: path.display().to_string(),
        source,
    })?;
    Ok(ms.into_iter().map(from_unix_ms).collect())
}

pub fn save_history(dir: &Path, cluster: &str, history: &[SystemTime]) -> Result<(), HistoryError> {
    let path = history_path(dir, cluster);
    let write = |source| HistoryError::Write {
        path: path.display().to_string(),
        source,
    };
    crate::alert::incident::ensure_dir(dir).map_err(write)?;
    let ms: Vec<u64> = history.iter().map(|t| unix_ms(*t)).collect();
    let body = serde_json::to_vec(&ms).unwrap_or_default();
    crate::alert::incident::write_atomic(&path, &body).map_err(write)
}

impl Remediator {
    /// `dir` is `<state_dir>/remediation`. A history that cannot be read refuses nothing
    /// by itself, so it is an error the caller must decide on (the daemon refuses to
    /// remediate that cluster rather than forget its limits).
    pub fn new(
        cluster: &str,
        host: HostConfig,
        dir: PathBuf,
        log: RemediationLog,
        sink: Sink,
    ) -> Result<Self, HistoryError> {
        let history = load_history(&dir, cluster)?;
        for b in &host.brokers {
            if b.remediation.as_ref().is_some_and(|r| r.enabled) {
                log.register(cluster, b.broker_id);
            }
        }
        Ok(Remediator {
            cluster: cluster.to_string(),
            host,
            dir,
            episodes: BTreeMap::new(),
            history,
            running: Arc::new(AtomicBool::new(false)),
            log,
            sink,
            silenced: None,
            confirmed: None,
            proc_root: PathBuf::from("/proc"),
            host_lock: HOST_LOCK.to_string(),
            #[cfg(test)]
            panic_in_action: false,
        })
    }

    /// Another `/proc` (tests) and another name for the host-wide lock (tests that run at
    /// once in one process).
    pub fn with_host(mut self, proc_root: PathBuf, host_lock: &str) -> Self {
        self.proc_root = proc_root;
        self.host_lock = host_lock.to_string();
        self
    }

    /// Acts only on a zombie whose incident is open: a verdict the incident book has not
    /// confirmed (or has already resolved) restarts nothing, so remediation, webhooks and the
    /// alert rules never disagree about a broker. `zombie_for_secs` still counts from the
    /// verdict's start.
    pub fn with_confirmation(mut self, check: ConfirmedCheck) -> Self {
        self.confirmed = Some(check);
        self
    }

    /// Refuses to act on a broker a silence covers.
    pub fn with_silences(mut self, check: SilenceCheck) -> Self {
        self.silenced = Some(check);
        self
    }

    /// Decides for every broker with remediation enabled, from this round's report.
    /// Updates the episodes and, for an action, the history; runs nothing.
    pub fn decide(&mut self, report: &ClusterReport, now: SystemTime) -> Vec<Decision> {
        let mut out = Vec::new();
        self.forget_old_actions(now);
        let answered = report.probes.values().filter(|p| p.answered()).count();
        let known = report.verdicts.len().max(report.probes.len());
        for b in &self.host.brokers {
            let Some(cfg) = b.remediation.as_ref().filter(|r| r.enabled) else {
                continue;
            };
            let verdict = report.verdict(b.broker_id);
            let Some(since) = zombie_since(report, verdict, b.broker_id) else {
                self.episodes.remove(&b.broker_id);
                continue;
            };
            if let Some(confirmed) = &self.confirmed {
                if confirmed(b.broker_id) != Some(BrokerState::Zombie) {
                    continue;
                }
            }
            let done = episode_since(&mut self.episodes, b.broker_id, since).done;
            if done || !guards::zombie_long_enough(since, now, cfg.zombie_for) {
                continue;
            }
            let situation = self.situation(report, b.broker_id, answered, known, now);
            let refusals: Vec<String> = guards::check(&situation)
                .iter()
                .map(ToString::to_string)
                .collect();
            let pid = pid_of(report, b.broker_id);
            let record = self.record(cfg, b.broker_id, verdict, pid, since, &refusals, now);
            let Some(episode) = self.episodes.get_mut(&b.broker_id) else {
                continue;
            };
            let decision = if cfg.dry_run {
                episode.done = true;
                Some(Decision::Report(Record {
                    outcome: Outcome::DryRun,
                    ..record
                }))
            } else if !refusals.is_empty() {
                episode.refusal(record)
            } else {
                let attempt = take_attempt(
                    &self.host_lock,
                    &self.dir,
                    &self.cluster,
                    &mut self.history,
                    now,
                );
                match attempt {
                    Ok(lock) => {
                        episode.done = true;
                        Some(act(cfg, b, lock, pid, record))
                    }
                    Err(refusals) => episode.refusal(Record { refusals, ..record }),
                }
            };
            out.extend(decision);
        }
        self.episodes
            .retain(|id, _| self.host.brokers.iter().any(|b| b.broker_id == *id));
        out
    }

    /// Forgets the actions no guard looks back to: older than a day, or than the cool-down
    /// when that is longer.
    fn forget_old_actions(&mut self, now: SystemTime) {
        let keep = now.checked_sub(Duration::from_secs(86_400).max(self.host.remediation_cooldown));
        self.history.retain(|t| keep.is_none_or(|k| *t >= k));
    }

    /// What the guards weigh for `broker` this round.
    fn situation<'a>(
        &'a self,
        report: &'a ClusterReport,
        broker: BrokerId,
        answered: usize,
        known: usize,
        now: SystemTime,
    ) -> guards::Situation<'a> {
        let view = &report.view;
        guards::Situation {
            broker,
            verdicts: &report.verdicts,
            answered,
            known,
            sole_in_sync_of: guards::sole_in_sync_of(view, broker),
            would_fall_below_min_isr: guards::would_fall_below_min_isr(
                view,
                &report.min_isr,
                broker,
            ),
            quorum_without: guards::quorum_without(
                report
                    .quorum
                    .as_ref()
                    .and_then(|q| q.look.description.as_ref()),
                broker,
                QUORUM_CAUGHT_UP_WITHIN,
            ),
            history: &self.history,
            running: self.running.load(Ordering::SeqCst),
            cooldown: self.host.remediation_cooldown,
            max_per_day: self.host.remediation_max_per_day,
            now,
            silenced: self.silenced.as_ref().and_then(|c| c(broker, now)),
        }
    }

    /// The decision's record, as refused by `refusals` (the caller makes it an action or a
    /// dry run), with the command as it would run and the verdict's evidence.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        cfg: &crate::config::RemediationConfig,
        broker: BrokerId,
        verdict: Option<&crate::judge::verdict::BrokerVerdict>,
        pid: Option<u32>,
        since: SystemTime,
        refusals: &[String],
        now: SystemTime,
    ) -> Record {
        let values = run::Values {
            pid,
            broker,
            cluster: &self.cluster,
        };
        let command = run::expand(&cfg.command, &values).unwrap_or_else(|_| cfg.command.clone());
        Record {
            cluster: self.cluster.clone(),
            broker,
            address: verdict.map(|v| v.address.clone()).unwrap_or_default(),
            outcome: Outcome::Refused,
            at: now,
            zombie_for_secs: now.duration_since(since).unwrap_or_default().as_secs(),
            command,
            refusals: refusals.to_vec(),
            status: None,
            stderr_tail: None,
            before_output: None,
            before_status: None,
            verdict_evidence: verdict
                .map(|v| {
                    v.hits
                        .iter()
                        .map(|h| format!("{}: {}", h.rule, h.detail))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Decides and carries out: reports go out at once, actions start in a task of their
    /// own and report when their command ends.
    pub fn after_round(&mut self, report: &ClusterReport, now: SystemTime) {
        for d in self.decide(report, now) {
            match d {
                Decision::Report(r) => {
                    tracing::warn!(
                        cluster = %r.cluster,
                        broker = r.broker,
                        outcome = r.outcome.as_label(),
                        "{}",
                        r.summary()
                    );
                    self.log.record(&r);
                    (self.sink)(r);
                }
                Decision::Act {
                    config,
                    pid,
                    record,
                    process,
                    lock,
                } => self.act(config, pid, record, process, lock),
            }
        }
    }

    /// Carries out an action in a task of its own, which holds the cluster's remediation
    /// (`running`) until it ends, however it ends, and reports when its command ends.
    fn act(
        &mut self,
        config: RemediationConfig,
        pid: Option<u32>,
        record: Record,
        process: crate::config::ProcessLocator,
        lock: Arc<HostLock>,
    ) {
        self.running.store(true, Ordering::SeqCst);
        let hold = ActionHold {
            running: self.running.clone(),
            unreported: Some((record.clone(), self.log.clone(), self.sink.clone())),
        };
        let (dir, proc_root) = (self.dir.clone(), self.proc_root.clone());
        #[cfg(test)]
        let panics = std::mem::take(&mut self.panic_in_action);
        let task = async move {
            let hold = hold;
            #[cfg(test)]
            if panics {
                panic!("test: the remediation action panics");
            }
            let r = match looked_again(&process, &proc_root, pid).await {
                Ok(()) => carry_out(config, pid, record, &dir).await,
                Err(why) => Record {
                    outcome: Outcome::Refused,
                    refusals: vec![why],
                    ..record
                },
            };
            drop(lock);
            let (log, sink) = hold.reported();
            if r.outcome == Outcome::Acted {
                tracing::warn!(cluster = %r.cluster, broker = r.broker, stderr = %r.stderr_tail.as_deref().unwrap_or(""), "{}", r.summary());
            } else {
                tracing::error!(cluster = %r.cluster, broker = r.broker, stderr = %r.stderr_tail.as_deref().unwrap_or(""), "{}", r.summary());
            }
            log.record(&r);
            sink(r);
        };
        crate::model::supervise::spawn_once(
            crate::model::supervise::Task::Remediation,
            self.cluster.clone(),
            task,
        );
    }
}

/// Held by an action's task: it releases the cluster's remediation however the task ends
/// (issue 38 item 1: a panic left `running` set for good, and remediation refused every
/// later decision as "still running", silently), and an action that ended before it
/// reported is reported as failed, its outcome unknown.
struct ActionHold {
    running: Arc<AtomicBool>,
    /// The decision's record and where to report it, until the action reports itself.
    unreported: Option<(Record, RemediationLog, Sink)>,
}

impl ActionHold {
    /// The action reports itself: where to, and the cluster's remediation released.
    fn reported(mut self) -> (RemediationLog, Sink) {
        let (_, log, sink) = self
            .unreported
            .take()
            .expect("an action's hold is reported once");
        (log, sink)
    }
}

impl Drop for ActionHold {
    fn drop(&mut self) {
        self.running.store(false, Ordering::SeqCst);
        let Some((record, log, sink)) = self.unreported.take() else {
            return;
        };
        let r = Record {
            outcome: Outcome::Failed,
            status: Some(
                "the remediation task ended before it reported (a panic, or the watchdog stopping): whether the command ran is unknown; the watchdog's log has the panic".into(),
            ),
            ..record
        };
        tracing::error!(cluster = %r.cluster, broker = r.broker, "{}", r.summary());
        log.record(&r);
        sink(r);
    }
}

/// The broker's process looked up again right before acting: the decision was taken on a
/// round's look, and a process restarted since (by an operator, by systemd) must not be
/// restarted again, nor a pid reused by another process signalled.
async fn looked_again(
    process: &crate::config::ProcessLocator,
    proc_root: &Path,
    decided: Option<u32>,
) -> Result<(), String> {
    // A pool of its own: a look that blocks costs this check, never the host observer's.
    let pool = crate::observe::host::read_pool();
    let now =
        crate::observe::host::locate::locate(process, proc_root, Duration::from_secs(5), &pool)
            .await
            .pid;
    if now == decided {
        return Ok(());
    }
    let show = |p: Option<u32>| p.map_or("none".to_string(), |p| p.to_string());
    Err(format!(
        "the broker's process changed since the decision (pid {}, now {}): it was restarted or is gone already; nothing was run",
        show(decided),
        show(now)
    ))
}

/// Runs the before command (output kept) and the command, and fills in the record.
async fn carry_out(cfg: RemediationConfig, pid: Option<u32>, mut r: Record, dir: &Path) -> Record {
    let values = run::Values {
        pid,
        broker: r.broker,
        cluster: &r.cluster.clone(),
    };
    if let Some(before) = &cfg.before_command {
        match run::expand(before, &values) {
            Ok(argv) => {
                let path = dir.join(format!(
                    "{}-broker-{}-{}-before.txt",
                    r.cluster,
                    r.broker,
                    unix_ms(r.at)
                ));
                let _ = crate::alert::incident::ensure_dir(dir);
                tracing::info!(cluster = %r.cluster, broker = r.broker, command = %argv.join(" "), "remediation: before command");
                let ran = run::run(&argv, cfg.before_timeout, run::Output::File(&path)).await;
                r.before_status = Some(ran.status);
                r.before_output = Some(path.display().to_string());
            }
            // The thread dump is for the post-mortem; missing it must not keep a zombie
            // broker from being restarted.
            Err(e) => r.before_status = Some(format!("not run: {e}")),
        }
    }
    let argv = match run::expand(&cfg.command, &values) {
        Ok(a) => a,
        Err(e) => {
            r.outcome = Outcome::Failed;
            r.status = Some(format!("not run: {e}"));
            return r;
        }
    };
    tracing::warn!(cluster = %r.cluster, broker = r.broker, command = %argv.join(" "), "remediation: running the command");
    let ran = run::run(&argv, cfg.timeout, run::Output::Discard).await;
    r.command = argv;
    r.outcome = if ran.success {
        Outcome::Acted
    } else {
        Outcome::Failed
    };
    r.status = Some(format!(
        "{} after {:.1} s",
        ran.status,
        ran.duration.as_secs_f64()
    ));
    r.stderr_tail = Some(ran.stderr_tail);
    r
}

#[cfg(test)]
mod tests;
