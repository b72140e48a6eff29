//! Webhook delivery: incident events to Slack, PagerDuty, Alertmanager, Teams, or any
//! receiver that takes the generic JSON body. Delivery never holds up probing: `submit`
//! only queues in memory, and everything slow happens in tasks of its own.
//!
//! The path of an event: `submit` -> the in-memory inbox (spilled to `spool-inbox/` when
//! full) -> the dispatcher, which decides per receiver whether and as what it is sent
//! (`route`) and whether it waits for the receiver's group interval (`coalesce`; held
//! updates are kept in the spool's `held.json`), writes a notification file to that
//! receiver's spool and wakes its worker -> the worker, which sends the spool's files one
//! at a time, oldest first, retrying with backoff until the receiver takes it or refuses
//! it for good. A Slack receiver with a bot token talks to Slack's Web API instead of
//! making one POST (`slack_bot`): one message per incident, edited in place.
//!
//! Delivery is at least once. A notification leaves the spool only after the receiver
//! answered 2xx (or refused it with a 4xx); if the daemon dies between the answer and the
//! removal, the notification is sent again after the restart. Receivers deduplicate on the
//! generic body's `notification_id` (or incident id + event + sequence); PagerDuty and
//! Alertmanager deduplicate by themselves (dedup key, labels).

mod coalesce;
mod format;
mod http;
pub mod metrics;
mod route;
mod slack_bot;
mod spool;
mod worker;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::alert::incident::{Incident, IncidentEvent};
use crate::alert::peers::Peers;
use crate::config::WebhookConfig;
use crate::model::supervise::{self, Task};
use crate::model::time::serde_ms;

pub use coalesce::{is_escalation, Coalescer, Tally};
pub use format::{
    alert_lifetime, alertmanager, generic, human, pagerduty, render, signature, slack, teams,
    Context, Request, GENERIC_SCHEMA_VERSION, ONE_SHOT_ALERT_LIFETIME, PAGERDUTY_SUMMARY_MAX,
    SIGNATURE_HEADER,
};
pub use route::{
    evict, judge, parse_retry_after, retry_wait, route, Asked, Backoff, Evict, Outcome,
    QueuedEvent, Reminders, Urgency, INFO_RETRY_CAP, PAGE_RETRY_CAP,
};
pub use spool::SpoolError;

/// One notification to one receiver: the unit of the spool and of delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    /// Grows with every notification to this receiver, also across restarts.
    pub sequence: u64,
    pub receiver: String,
    /// The event as this receiver gets it (see `route`).
    pub event: IncidentEvent,
    #[serde(with = "serde_ms")]
    pub queued_at: SystemTime,
}

/// Timing and bounds of delivery. The defaults suit production; tests shrink them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeliverySettings {
    pub backoff: Backoff,
    /// The longest `Retry-After` of a rate limit honoured; a longer one is cut to this.
    pub max_retry_after: Duration,
    /// Events held in memory between `submit` and the dispatcher; beyond, they go to disk.
    pub inbox_capacity: usize,
    /// Notifications queued per receiver; beyond, one is dropped (and counted): see
    /// `route::evict` for which.
    pub max_queued: usize,
    /// A notification that could not be delivered for this long is dropped (and counted):
    /// what it says is a day old.
    pub max_age: Duration,
    /// How often reminders are looked for.
    pub reminder_check: Duration,
}

impl Default for DeliverySettings {
    fn default() -> Self {
        DeliverySettings {
            backoff: Backoff::default(),
            max_retry_after: Duration::from_secs(900),
            inbox_capacity: 1024,
            max_queued: 10_000,
            max_age: Duration::from_secs(24 * 3600),
            reminder_check: Duration::from_secs(1),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("webhook spool: {0}")]
    Spool(#[from] SpoolError),
    #[error("webhook '{receiver}': cannot build its HTTP client: {detail}")]
    Client { receiver: String, detail: String },
}

/// Counters of one receiver, for metrics.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReceiverStats {
    pub receiver: String,
    pub format: &'static str,
    /// Scheme, host and port: safe to show.
    pub target: String,
    /// `deliveries_total{outcome="ok"}`: notifications the receiver took.
    pub ok: u64,
    /// `deliveries_total{outcome="failed"}`: attempts that failed and will be retried.
    pub failed: u64,
    /// `deliveries_total{outcome="dropped"}`: notifications given up (4xx, corrupt spool
    /// file, queue full).
    pub dropped: u64,
    /// Notifications waiting (on disk, but those `unspooled` kept in memory).
    pub queue_depth: u64,
    /// `webhook_unspooled_total`: notifications the spool could not take (disk full,
    /// read-only, no descriptors), kept in memory and sent from there.
    pub unspooled: u64,
    pub last_success: Option<SystemTime>,
    /// Why the last attempt failed, for logs and `/status` (never a metric label).
    pub last_failure: Option<String>,
    /// `webhook_updates_held`: updates waiting now for the group interval.
    pub held: u64,
    /// `webhook_coalesced_updates_total{outcome="merged"}`: held updates that went inside
    /// a later message.
    pub merged: u64,
    /// `webhook_coalesced_updates_total{outcome="superseded"}`: held updates dropped
    /// because their incident resolved.
    pub superseded: u64,
    /// `deliveries_total{outcome="peer"}`: notifications another watchdog on the same
    /// cluster delivered, so this one did not (`alert::peers`).
    pub left_to_peers: u64,
}

impl ReceiverStats {
    /// `(outcome, count)` for `deliveries_total`.
    pub fn deliveries(&self) -> [(&'static str, u64); 4] {
        [
            ("ok", self.ok),
            ("failed", self.failed),
            ("dropped", self.dropped),
            ("peer", self.left_to_peers),
        ]
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct NotifierStats {
    pub receivers: Vec<ReceiverStats>,
    /// Events submitted and not yet routed to receivers (memory and disk).
    pub unrouted_events: u64,
    /// Open incidents reminders are kept for.
    pub open_incidents: u64,
    /// With `peers:` configured: the other watchdogs as last heard.
    pub peers: Option<crate::alert::peers::PeersStats>,
}

/// What goes through the inbox.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Input {
    Event(Box<IncidentEvent>),
    /// Open incidents known after a restart, for reminders.
    Restore(Vec<Incident>),
}

#[derive(Debug, Default)]
struct Inbox {
    items: VecDeque<Input>,
    /// Items are going to the disk inbox, until it is empty again: order is kept by
    /// never putting a newer item in memory while older ones wait on disk.
    spilling: bool,
    /// Items waiting on disk (approximately: for stats).
    spilled: u64,
    /// Items that could not be written to disk while older ones wait there: routed after
    /// the disk inbox is empty, so order holds.
    after_disk: VecDeque<Input>,
    /// Inbox files being written (off the runtime, without this lock): the dispatcher reads
    /// only files older than all of them, so that none overtakes an older one still on its
    /// way to the disk.
    writing: std::collections::BTreeSet<u64>,
    closed: bool,
}

/// Who sends: named in every body, and where its status page is read.
#[derive(Debug, Clone)]
pub struct Sender {
    pub instance_id: String,
    /// `/status` as people reach it; bodies that can link to it do.
    pub status_url: Option<String>,
    /// The runbooks page as people reach it; bodies link to `<it>#<the incident's alert>`.
    pub runbooks_url: Option<String>,
    /// Other watchdogs on the same clusters: a receiver that does not deduplicate hears an
    /// event from the first of them in line (`alert::peers`).
    pub peers: Option<Arc<Peers>>,
}

impl From<&str> for Sender {
    fn from(instance_id: &str) -> Self {
        Sender {
            instance_id: instance_id.to_string(),
            status_url: None,
            runbooks_url: None,
            peers: None,
        }
    }
}

impl From<&crate::config::Config> for Sender {
    fn from(c: &crate::config::Config) -> Self {
        Sender {
            instance_id: c.instance_id.clone(),
            status_url: Some(c.status_url()),
            runbooks_url: Some(c.runbooks_url()),
            peers: None,
        }
    }
}

struct Shared {
    sender: Sender,
    settings: DeliverySettings,
    inbox: Mutex<Inbox>,
    inbox_spool: spool::Spool,
    wake: Notify,
    receivers: Vec<Arc<worker::Receiver>>,
    open_incidents: Mutex<u64>,
    /// Ticks after every delivery attempt's outcome: what waits for delivery to move (the
    /// tests) waits on it instead of sleeping.
    progress: watch::Sender<()>,
    /// Stamped by each pass of the dispatcher (at least every `reminder_check`): whether
    /// routing makes progress (`/healthz`, the systemd watchdog).
    passes: crate::model::progress::Stamp,
}

/// Spawns the delivery tasks.
pub struct Notifier;

impl Notifier {
    /// Starts delivery to `webhooks`, with spools under `state_dir/spool/<receiver>/`.
    /// Notifications left in the spools by an earlier run are sent first. Call inside a
    /// Tokio runtime.
    pub fn spawn(
        webhooks: &[WebhookConfig],
        state_dir: &Path,
        sender: impl Into<Sender>,
    ) -> Result<NotifierHandle, NotifyError> {
        Notifier::spawn_with(webhooks, state_dir, sender, DeliverySettings::default())
    }

    pub fn spawn_with(
        webhooks: &[WebhookConfig],
        state_dir: &Path,
        sender: impl Into<Sender>,
        settings: DeliverySettings,
    ) -> Result<NotifierHandle, NotifyError> {
        let spool_root: PathBuf = state_dir.join("spool");
        let mut receivers = Vec::new();
        let mut clients = Vec::new();
        for cfg in webhooks {
            let (spool, waiting) =
                spool::Spool::open(&spool_root.join(spool::dir_name(&cfg.name)))?;
            clients.push(worker::client(cfg)?);
            receivers.push(Arc::new(worker::Receiver::new(
                cfg.clone(),
                spool.keeping_sequence(),
                waiting,
                state_dir,
            )));
        }
        warn_orphans(&spool_root, webhooks);
        let (inbox_spool, spilled) = spool::Spool::open(&state_dir.join("spool-inbox"))?;
        let shared = Arc::new(Shared {
            sender: sender.into(),
            settings,
            inbox: Mutex::new(Inbox {
                spilling: !spilled.is_empty(),
                spilled: spilled.len() as u64,
                ..Inbox::default()
            }),
            inbox_spool,
            wake: Notify::new(),
            receivers,
            open_incidents: Mutex::new(0),
            progress: watch::Sender::new(()),
            passes: crate::model::progress::Stamp::new(std::time::Instant::now()),
        });
        let (dispatch_stop, dispatch_rx) = watch::channel(false);
        let (work_stop, work_rx) = watch::channel(false);
        // Supervised: a dispatcher or worker that ends before delivery is shut down (a
        // panic) is started again, or events would pile up unrouted or a receiver hear
        // nothing more. What a worker was sending is still in its spool and goes again.
        let s = shared.clone();
        let dispatcher = supervise::spawn_until(
            Task::WebhookDispatcher,
            "",
            dispatch_rx.clone(),
            move || worker::dispatch(s.clone(), dispatch_rx.clone()),
        );
        let workers = shared
            .receivers
            .iter()
            .zip(clients)
            .map(|(r, client)| {
                let (name, r, s, stop) = (
                    r.cfg.name.clone(),
                    r.clone(),
                    shared.clone(),
                    work_rx.clone(),
                );
                supervise::spawn_until(Task::WebhookWorker, name, work_rx.clone(), move || {
                    worker::work(r.clone(), s.clone(), client.clone(), stop.clone())
                })
            })
            .collect();
        Ok(NotifierHandle {
            shared,
            tasks: Arc::new(Mutex::new(Some(Tasks {
                dispatcher,
                workers,
                dispatch_stop,
                work_stop,
            }))),
        })
    }
}

/// Spools of receivers no longer configured are left alone (the receiver may come back
/// under its name), but said out loud: their notifications will not be sent.
fn warn_orphans(spool_root: &Path, webhooks: &[WebhookConfig]) {
    let Ok(entries) = std::fs::read_dir(spool_root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if webhooks.iter().any(|w| spool::dir_name(&w.name) == name) {
            continue;
        }
        let waiting = std::fs::read_dir(e.path()).map(|d| d.count()).unwrap_or(0);
        if waiting > 0 {
            tracing::warn!(
                dir = %e.path().display(),
                notifications = waiting,
                "spool of a webhook that is no longer configured: its notifications are not sent"
            );
        }
    }
}

struct Tasks {
    dispatcher: JoinHandle<()>,
    workers: Vec<JoinHandle<()>>,
    dispatch_stop: watch::Sender<bool>,
    work_stop: watch::Sender<bool>,
}

/// The daemon's side of delivery. Cheap to clone; every clone feeds the same tasks.
#[derive(Clone)]
pub struct NotifierHandle {
    shared: Arc<Shared>,
    tasks: Arc<Mutex<Option<Tasks>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Writes one file of the disk inbox off the runtime, then records how it went.
async fn write_inbox(shared: Arc<Shared>, seq: u64, items: Vec<Input>) {
    let written = match spool::Spool::encode(&items) {
        Ok(bytes) => {
            let s = shared.clone();
            crate::alert::incident::disk()
                .finish(
                    "writing the webhook inbox",
                    crate::alert::incident::SLOW_WRITE,
                    move || s.inbox_spool.write_bytes(seq, &bytes),
                )
                .await
                .unwrap_or_else(|e| {
                    Err(SpoolError::Io {
                        path: "spool-inbox".into(),
                        source: std::io::Error::other(e.to_string()),
                    })
                })
        }
        Err(e) => Err(e),
    };
    inbox_written(&shared, seq, items, written);
}

/// The inbox file `seq` is written (its items wait on disk), or could not be: they are
/// kept in memory behind those waiting on disk, however many (losing a page is worse than
/// the memory, issue 27 items 1 and 2), or, when none waits there and none is on its way,
/// in memory as before the inbox spilled. Either way the dispatcher may read on.
fn inbox_written(shared: &Shared, seq: u64, items: Vec<Input>, written: Result<(), SpoolError>) {
    let mut inbox = lock(&shared.inbox);
    inbox.writing.remove(&seq);
    match written {
        Ok(()) => inbox.spilled += items.len() as u64,
        Err(e) => {
            tracing::error!(
                error = %e,
                events = items.len(),
                "cannot write to the webhook inbox on disk: kept in memory; a crash before they are spooled would lose them"
            );
            if inbox.spilled == 0 && inbox.writing.is_empty() {
                inbox.spilling = false;
                let earlier: Vec<Input> = inbox.after_disk.drain(..).collect();
                inbox.items.extend(earlier);
                inbox.items.extend(items);
            } else {
                inbox.after_disk.extend(items);
            }
        }
    }
    drop(inbox);
    shared.wake.notify_one();
    shared.progress.send_replace(());
}

impl NotifierHandle {
    /// Queues events for delivery and returns at once: no network, and disk only when the
    /// in-memory inbox is full (or delivery was shut down), so nothing is lost.
    pub fn submit(&self, events: Vec<IncidentEvent>) {
        self.put(
            events
                .into_iter()
                .map(|e| Input::Event(Box::new(e)))
                .collect(),
        );
    }

    /// Queues events for delivery on disk before it returns: the incident book records
    /// them as told once it is saved, so they must outlive a crash right after that save
    /// (issue 27 item 2). Each batch is one file of the disk inbox (one fsync); the
    /// dispatcher removes it only once its events are in the receivers' spools, and a
    /// restart sends what is left. When the file cannot be written (disk full, read-only)
    /// the events are queued in memory instead and the failure is logged: sent unless the
    /// process dies first. The write runs off the runtime, and no lock is held meanwhile:
    /// a slow disk makes this wait, and nothing else (issue 38 item 3).
    pub async fn submit_durably(&self, events: Vec<IncidentEvent>) {
        if events.is_empty() {
            return;
        }
        let items = events
            .into_iter()
            .map(|e| Input::Event(Box::new(e)))
            .collect();
        if let Some((seq, items)) = self.queue(items, true) {
            write_inbox(self.shared.clone(), seq, items).await;
        }
    }

    /// Tells delivery which incidents are open after a restart (from the incident book),
    /// so that their reminders continue. Sends nothing by itself.
    pub fn restore_open(&self, incidents: Vec<Incident>) {
        self.put(vec![Input::Restore(incidents)]);
    }

    /// Queues `items` without waiting: in memory, or, when they must go to disk, with the
    /// write started on its own (done here only outside a runtime).
    fn put(&self, items: Vec<Input>) {
        let Some((seq, items)) = self.queue(items, false) else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(write_inbox(self.shared.clone(), seq, items));
            }
            Err(_) => {
                let written = spool::Spool::encode(&items)
                    .and_then(|b| self.shared.inbox_spool.write_bytes(seq, &b));
                inbox_written(&self.shared, seq, items, written);
            }
        }
    }

    /// Decides, under the lock, where `items` go: into memory (`None`), or to the disk
    /// inbox: when `durable`, when older items wait there (order), when the memory inbox
    /// is full, or once delivery was shut down (the next start sends them). For the disk,
    /// the file's number is taken and marked as being written, and the inbox as spilling,
    /// so that nothing newer goes to memory meanwhile; the caller writes the file.
    fn queue(&self, items: Vec<Input>, durable: bool) -> Option<(u64, Vec<Input>)> {
        if items.is_empty() {
            return None;
        }
        let mut inbox = lock(&self.shared.inbox);
        let fits = inbox.items.len() + items.len() <= self.shared.settings.inbox_capacity;
        if !durable && !inbox.spilling && !inbox.closed && fits {
            inbox.items.extend(items);
            drop(inbox);
            self.shared.wake.notify_one();
            return None;
        }
        let seq = self.shared.inbox_spool.reserve();
        inbox.writing.insert(seq);
        inbox.spilling = true;
        Some((seq, items))
    }

    /// The dispatcher's progress, for the daemon's board (`model::progress`).
    pub fn passes(&self) -> crate::model::progress::Stamp {
        self.shared.passes.clone()
    }

    pub fn stats(&self) -> NotifierStats {
        let inbox = lock(&self.shared.inbox);
        let unrouted = inbox.items.len() as u64 + inbox.spilled;
        drop(inbox);
        NotifierStats {
            receivers: self.shared.receivers.iter().map(|r| r.stats()).collect(),
            unrouted_events: unrouted,
            open_incidents: *lock(&self.shared.open_incidents),
            peers: self
                .shared
                .sender
                .peers
                .as_ref()
                .map(|p| p.stats(SystemTime::now())),
        }
    }

    /// The stats as soon as `until` holds of them, checked after every delivery attempt;
    /// panics naming `what` after 10 s.
    #[cfg(test)]
    pub(crate) async fn stats_when(
        &self,
        what: &str,
        until: impl Fn(&NotifierStats) -> bool,
    ) -> NotifierStats {
        // Subscribed before the first look, so no attempt between the look and the wait
        // goes unseen.
        let mut progress = self.shared.progress.subscribe();
        let wait = async {
            loop {
                let stats = self.stats();
                if until(&stats) || progress.changed().await.is_err() {
                    return stats;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .unwrap_or_else(|_| panic!("{what}: not within 10 s: {:?}", self.stats()))
    }

    /// Stops delivery: routes what was submitted, then keeps sending until every queue is
    /// empty or `deadline` passed. Whatever is left stays in the spools for the next
    /// start, and held updates in `held.json`, sent at once by the next start. Events submitted afterwards go to the disk inbox, for the next start too.
    pub async fn shutdown(&self, deadline: Duration) -> NotifierStats {
        let end = tokio::time::Instant::now() + deadline;
        lock(&self.shared.inbox).closed = true;
        let Some(tasks) = lock(&self.tasks).take() else {
            return self.stats();
        };
        let _ = tasks.dispatch_stop.send(true);
        let mut dispatcher = tasks.dispatcher;
        if tokio::time::timeout_at(end, &mut dispatcher).await.is_err() {
            dispatcher.abort();
        }
        let _ = tasks.work_stop.send(true);
        for mut w in tasks.workers {
            if tokio::time::timeout_at(end, &mut w).await.is_err() {
                // Mid-request or waiting to retry: its notification is still on disk.
                w.abort();
            }
        }
        let stats = self.stats();
        let left: u64 = stats.receivers.iter().map(|r| r.queue_depth).sum();
        if left > 0 {
            tracing::warn!(
                notifications = left,
                "webhook delivery stopped with notifications left in the spool; they are sent at the next start"
            );
        }
        stats
    }
}
