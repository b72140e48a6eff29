//! The tasks of delivery: one dispatcher that routes events into the receivers' spools,
//! and one worker per receiver that empties its spool in order.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::alert::incident::{EventKind, IncidentEvent};
use crate::alert::peers::Turn;
use crate::config::live::{self, Current};
use crate::config::{Secret, WebhookConfig, WebhookFormat};

use super::coalesce::{Coalescer, Tally};
use super::format::{self, Context};
use super::http;
use super::route::{self, Outcome, Reminders, Urgency};
use super::slack_bot::Bot;
use super::spool::Spool;
use super::{lock, Input, Notification, NotifyError, ReceiverStats, Shared};

/// Bytes of a refusing receiver's answer worth a log line.
const LOGGED_BODY_BYTES: usize = 300;

#[derive(Debug, Default)]
struct Counters {
    ok: u64,
    failed: u64,
    dropped: u64,
    last_success: Option<SystemTime>,
    last_failure: Option<String>,
    /// Notifications the spool could not take, kept in memory instead.
    unspooled: u64,
    /// Updates held now for the group interval.
    held: u64,
    merged: u64,
    superseded: u64,
    /// Notifications a peer delivered (`alert::peers`).
    left_to_peers: u64,
    /// An Alertmanager receiver's requests per Alertmanager (`url`, then `urls`): taken,
    /// failed. Empty for the other formats.
    alertmanagers: Vec<(u64, u64)>,
}

/// A notification waiting in a receiver's queue: its spool sequence and, for the full-queue
/// policy, what it is about.
#[derive(Debug, Clone)]
struct Queued {
    seq: u64,
    event: route::QueuedEvent,
    /// The notification itself when the spool could not take it (disk full, read-only,
    /// out of descriptors): kept and sent from memory rather than dropped, since only a
    /// restart would lose it (issue 27 item 1).
    unspooled: Option<Box<Notification>>,
    /// Sets how long a failed head waits while this one waits behind it.
    urgency: Urgency,
}

pub(super) struct Receiver {
    pub cfg: WebhookConfig,
    spool: Arc<Spool>,
    /// Notifications waiting, oldest first; each has its file in the spool.
    queue: Mutex<VecDeque<Queued>>,
    wake: Notify,
    counters: Mutex<Counters>,
    /// Slack's Web API instead of one POST per notification.
    pub slack: Option<Bot>,
    /// The secrets read from files, kept current (`config::live`).
    watched: Watched,
}

/// A receiver's secrets that came from files (`url_file`, `hmac_secret_file`,
/// `routing_key_file`, `slack_bot_token_file`, a header's `value_file`), watched by
/// `config::live` as the Kafka credentials are: each request reads what the file holds
/// now, so a rotated token is used without a reload, and a rewrite that cannot be used
/// (empty, not text, gone) keeps the last good one (said and counted there).
#[derive(Default)]
struct Watched {
    url: Option<Current>,
    hmac_secret: Option<Current>,
    routing_key: Option<Current>,
    slack_token: Option<Current>,
    headers: Vec<(String, Current)>,
}

impl Watched {
    fn of(cfg: &WebhookConfig) -> Watched {
        let watch = |s: &Secret| -> Option<Current> {
            s.file()?;
            // The file was read well while loading; unreadable now, it keeps that value.
            live::secret(s)
                .inspect_err(|why| tracing::warn!(receiver = %cfg.name, problem = %why, "cannot watch a webhook's secret file: the value loaded stays in use"))
                .ok()
        };
        Watched {
            url: watch(&cfg.url),
            hmac_secret: cfg.hmac_secret.as_ref().and_then(watch),
            routing_key: cfg.routing_key.as_ref().and_then(watch),
            slack_token: cfg.slack_bot.as_ref().and_then(|b| watch(&b.token)),
            headers: cfg
                .headers
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), watch(v)?)))
                .collect(),
        }
    }

    /// `cfg` with each watched secret as its file holds it now.
    fn apply(&self, cfg: &WebhookConfig) -> WebhookConfig {
        fn now(s: &mut Secret, c: Option<&Current>) {
            if let Some(c) = c {
                *s = s.with_value(c.text());
            }
        }
        let mut cfg = cfg.clone();
        now(&mut cfg.url, self.url.as_ref());
        if let Some(s) = cfg.hmac_secret.as_mut() {
            now(s, self.hmac_secret.as_ref());
        }
        if let Some(s) = cfg.routing_key.as_mut() {
            now(s, self.routing_key.as_ref());
        }
        if let Some(b) = cfg.slack_bot.as_mut() {
            now(&mut b.token, self.slack_token.as_ref());
        }
        for (k, c) in &self.headers {
            if let Some(s) = cfg.headers.get_mut(k) {
                now(s, Some(c));
            }
        }
        cfg
    }
}

impl Receiver {
    pub fn new(cfg: WebhookConfig, spool: Spool, waiting: Vec<u64>, state_dir: &Path) -> Self {
        let slack = cfg
            .slack_bot
            .as_ref()
            .and_then(|b| Bot::new(&cfg, b, state_dir));
        let counters = Counters {
            alertmanagers: vec![(0, 0); alertmanager_targets(&cfg).len()],
            ..Counters::default()
        };
        let watched = Watched::of(&cfg);
        Receiver {
            cfg,
            spool: Arc::new(spool),
            // Spooled before this start: their files are read when they are sent.
            queue: Mutex::new(
                waiting
                    .into_iter()
                    .map(|seq| Queued {
                        seq,
                        event: None,
                        unspooled: None,
                        // Not read yet: taken for a page, as the full-queue policy does.
                        urgency: Urgency::Page,
                    })
                    .collect(),
            ),
            wake: Notify::new(),
            counters: Mutex::new(counters),
            slack,
            watched,
        }
    }

    pub fn stats(&self) -> ReceiverStats {
        let c = lock(&self.counters);
        ReceiverStats {
            receiver: self.cfg.name.clone(),
            format: self.cfg.format.as_str(),
            target: self.cfg.target.clone(),
            ok: c.ok,
            failed: c.failed,
            dropped: c.dropped,
            unspooled: c.unspooled,
            queue_depth: lock(&self.queue).len() as u64,
            last_success: c.last_success,
            last_failure: c.last_failure.clone(),
            held: c.held,
            merged: c.merged,
            superseded: c.superseded,
            left_to_peers: c.left_to_peers,
            alertmanagers: alertmanager_targets(&self.cfg)
                .into_iter()
                .zip(&c.alertmanagers)
                .map(|(target, (ok, failed))| super::AlertmanagerStats {
                    target,
                    ok: *ok,
                    failed: *failed,
                })
                .collect(),
        }
    }

    fn idle(&self) -> bool {
        lock(&self.queue).is_empty()
    }
}

/// What names each Alertmanager of an alertmanager receiver in metrics and logs: its
/// scheme, host and port, with its place in the list (from 1) when another shares them.
/// Empty for the other formats.
fn alertmanager_targets(cfg: &WebhookConfig) -> Vec<String> {
    if cfg.format != WebhookFormat::Alertmanager {
        return Vec::new();
    }
    let targets: Vec<&str> = std::iter::once(cfg.target.as_str())
        .chain(cfg.more_urls.iter().map(|e| e.target.as_str()))
        .collect();
    targets
        .iter()
        .enumerate()
        .map(|(i, t)| match targets.iter().filter(|o| *o == t).count() {
            1 => t.to_string(),
            _ => format!("{t} ({})", i + 1),
        })
        .collect()
}

/// A receiver's HTTP client, made again (once) when its `ca_file` took new content
/// (`config::live`): a CA rotated in a mounted Secret is trusted from the next request on.
pub(super) type Client = Arc<live::Remade<reqwest::Client>>;

pub(super) fn client(cfg: &WebhookConfig) -> Result<Client, NotifyError> {
    let err = |detail: String| NotifyError::Client {
        receiver: cfg.name.clone(),
        detail,
    };
    let ca = match &cfg.ca_file {
        Some(path) => live::watch(live::Kind::Certificates, &[path])
            .map_err(|why| err(format!("ca_file {why}")))?,
        None => Current::fixed(Vec::new()),
    };
    let built = cfg.clone();
    live::Remade::new(ca, format!("webhook {}'s client", cfg.name), move |ca| {
        build_client(&built, ca.first().map(Vec::as_slice))
    })
    .map(Arc::new)
    .map_err(err)
}

/// The client of `cfg`, trusting the certificates of `ca` (PEM) besides the system's.
fn build_client(cfg: &WebhookConfig, ca: Option<&[u8]>) -> Result<reqwest::Client, String> {
    let mut b = crate::observe::wire::trust_system_roots(reqwest::Client::builder());
    if let Some(pem) = ca {
        let certs =
            reqwest::Certificate::from_pem_bundle(pem).map_err(|e| format!("ca_file: {e}"))?;
        for c in certs {
            b = b.add_root_certificate(c);
        }
    }
    b.timeout(cfg.timeout)
        .connect_timeout(cfg.timeout)
        .user_agent(concat!("kafka-watchdog/", env!("CARGO_PKG_VERSION")))
        // A redirect would turn the POST into a GET; a moved webhook is a configuration
        // error to see, not to follow.
        .redirect(reqwest::redirect::Policy::none())
        .danger_accept_invalid_certs(!cfg.tls_verify)
        .build()
        .map_err(|e| e.to_string())
}

/// Runs the spool's file work off the runtime's threads, in the state directory's pool;
/// `None` only if it panicked.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    crate::alert::incident::disk()
        .finish("webhook spool work", crate::alert::incident::SLOW_WRITE, f)
        .await
        .ok()
}

/// The dispatcher's memory: reminders due, updates held per receiver, and what of the
/// held updates is on disk.
struct Router {
    reminders: Reminders,
    coalescer: Coalescer,
    /// Per receiver, the held updates as its `held.json` has them.
    held_on_disk: Vec<Vec<IncidentEvent>>,
}

impl Router {
    /// Takes over the updates an earlier run held: they go at the first look.
    async fn restore(shared: &Arc<Shared>) -> Router {
        let s = shared.clone();
        let on_disk: Vec<Vec<IncidentEvent>> = blocking(move || {
            s.receivers
                .iter()
                .map(|r| {
                    r.spool.read_held().unwrap_or_else(|e| {
                        tracing::error!(receiver = %r.cfg.name, error = %e, "unreadable held updates dropped");
                        Vec::new()
                    })
                })
                .collect()
        })
        .await
        .unwrap_or_default();
        let mut coalescer = Coalescer::default();
        let now = Instant::now();
        for (idx, held) in on_disk.iter().enumerate() {
            coalescer.restore(idx, held.clone(), now);
        }
        Router {
            reminders: Reminders::default(),
            coalescer,
            held_on_disk: on_disk,
        }
    }

    /// Offers `ev` to receiver `idx`'s coalescing; what goes now is added to `out`.
    fn offer(
        &mut self,
        shared: &Shared,
        idx: usize,
        ev: IncidentEvent,
        now: Instant,
        out: &mut Vec<(usize, IncidentEvent)>,
    ) {
        let group = shared.receivers[idx].cfg.group_interval;
        if let Some(ev) = self.coalescer.offer(idx, group, ev, now) {
            self.sent(idx, ev, now, out);
        }
    }

    fn sent(
        &mut self,
        idx: usize,
        ev: IncidentEvent,
        now: Instant,
        out: &mut Vec<(usize, IncidentEvent)>,
    ) {
        // A resolved incident has no reminders left to count toward; a one-shot event
        // has none at all.
        if ev.kind != EventKind::Resolved && !ev.kind.is_one_shot() {
            self.reminders.sent(idx, &ev.incident.id, now);
        }
        self.coalescer.sent(idx, &ev, now);
        out.push((idx, ev));
    }

    /// Reminders due and held updates whose interval has passed.
    fn tick(&mut self, shared: &Shared) -> Vec<(usize, IncidentEvent)> {
        let now = Instant::now();
        let receivers: Vec<&WebhookConfig> = shared.receivers.iter().map(|r| &r.cfg).collect();
        let idle: Vec<bool> = shared.receivers.iter().map(|r| r.idle()).collect();
        let due = self
            .reminders
            .due(&receivers, &idle, now, SystemTime::now());
        let mut out = Vec::new();
        for (idx, ev) in due {
            self.offer(shared, idx, ev, now, &mut out);
        }
        for (idx, ev) in self.coalescer.due(now) {
            self.sent(idx, ev, now, &mut out);
        }
        out
    }

    /// The coalescing counts since the last call, and what each receiver holds now.
    fn tally(&mut self, receivers: usize) -> Vec<(Tally, u64)> {
        (0..receivers)
            .map(|idx| {
                (
                    self.coalescer.take_tally(idx),
                    self.coalescer.held_count(idx),
                )
            })
            .collect()
    }
}

/// Adds the coalescing counts to the receivers' stats; true when any changed.
fn count(shared: &Shared, tallies: Vec<(Tally, u64)>) -> bool {
    let mut changed = false;
    for (r, (t, held)) in shared.receivers.iter().zip(tallies) {
        let mut c = lock(&r.counters);
        changed |= t != Tally::default() || c.held != held;
        c.merged += t.merged;
        c.superseded += t.superseded;
        c.held = held;
    }
    changed
}

/// Routes events to receivers until `stop`, then routes what is left and returns.
pub(super) async fn dispatch(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut router = Router::restore(&shared).await;
    let mut tick = tokio::time::interval(shared.settings.reminder_check);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stopping = false;
    loop {
        shared.passes.tick();
        let (items, file) = next_items(&shared).await;
        if !items.is_empty() || file.is_some() {
            route_all(&shared, &mut router, items).await;
            // Only now, with its events in the receivers' spools, is an inbox file done
            // with: removed before, a crash in between lost them (issue 27 item 2).
            if let Some(seq) = file {
                let s = shared.clone();
                let removed = blocking(move || s.inbox_spool.remove(seq)).await;
                if let Some(Err(e)) = removed {
                    tracing::error!(error = %e, "cannot remove a webhook inbox file: its events may be sent again after a restart");
                }
            }
            continue;
        }
        if stopping || *stop.borrow() {
            return;
        }
        tokio::select! {
            _ = shared.wake.notified() => {}
            _ = tick.tick() => {
                let out = router.tick(&shared);
                enqueue(&shared, &mut router, out).await;
            }
            // An error: every handle is gone, nothing more can come.
            changed = stop.changed() => stopping = changed.is_err() || *stop.borrow(),
        }
    }
}

/// The next items in submission order: memory first (it only holds items older than
/// anything on disk), then the disk inbox, one file at a time, with the sequence number of
/// the file, which the caller removes once the items are routed.
async fn next_items(shared: &Arc<Shared>) -> (Vec<Input>, Option<u64>) {
    {
        let mut inbox = lock(&shared.inbox);
        if !inbox.items.is_empty() {
            return (inbox.items.drain(..).collect(), None);
        }
        if !inbox.spilling {
            return (Vec::new(), None);
        }
    }
    let s = shared.clone();
    blocking(move || {
        let spool = &s.inbox_spool;
        let listed = match spool.list() {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the webhook inbox spill");
                return (Vec::new(), None);
            }
        };
        let Some(seq) = listed.first().copied() else {
            // Empty, with no file on its way: back to memory, decided under the lock that
            // `submit` decides under.
            let mut inbox = lock(&s.inbox);
            if inbox.writing.is_empty() && spool.list().map(|l| l.is_empty()).unwrap_or(true) {
                inbox.spilling = false;
                inbox.spilled = 0;
                let later: Vec<Input> = inbox.after_disk.drain(..).collect();
                return (later, None);
            }
            return (Vec::new(), None);
        };
        // An older file is still being written: this one waits for it (its writer wakes
        // the dispatcher), or it would overtake it.
        if lock(&s.inbox).writing.first().is_some_and(|w| *w <= seq) {
            return (Vec::new(), None);
        }
        let items: Vec<Input> = match spool.read(seq) {
            Ok(items) => items,
            Err(e) => {
                tracing::error!(error = %e, "unreadable webhook inbox file dropped");
                Vec::new()
            }
        };
        let mut inbox = lock(&s.inbox);
        inbox.spilled = inbox.spilled.saturating_sub(items.len() as u64);
        (items, Some(seq))
    })
    .await
    .unwrap_or_default()
}

async fn route_all(shared: &Arc<Shared>, router: &mut Router, items: Vec<Input>) {
    let mut out = Vec::new();
    let now = Instant::now();
    for item in items {
        match item {
            Input::Restore(incidents) => router.reminders.restore(incidents),
            Input::Event(ev) => {
                router.reminders.record(&ev);
                for (idx, r) in shared.receivers.iter().enumerate() {
                    match route::route(&r.cfg, &ev) {
                        Some(kind) => {
                            let mut as_sent = ev.as_ref().clone();
                            as_sent.kind = kind;
                            router.offer(shared, idx, as_sent, now, &mut out);
                        }
                        None if ev.incident.silenced.is_some() => {
                            router.coalescer.drop_held(idx, &ev.incident.id);
                        }
                        None => {}
                    }
                }
                if ev.kind == EventKind::Resolved {
                    router.coalescer.forget(&ev.incident.id);
                }
            }
        }
    }
    *lock(&shared.open_incidents) = router.reminders.open_count() as u64;
    enqueue(shared, router, out).await;
}

/// What a receiver's `held.json` says while its batch is spooled: what it holds now,
/// and what it held before that goes out in this batch, so that a crash between the two
/// writes sends it again rather than losing it. An update dropped for a resolve is gone
/// from it before the resolve is spooled, so that no restart sends it after the resolve.
fn held_while_spooling(
    before: &[IncidentEvent],
    after: &[IncidentEvent],
    out: &[(usize, IncidentEvent)],
    idx: usize,
) -> Vec<IncidentEvent> {
    let mut during = after.to_vec();
    for b in before {
        let id = &b.incident.id;
        let still_held = after.iter().any(|a| &a.incident.id == id);
        let going = out
            .iter()
            .any(|(i, o)| *i == idx && &o.incident.id == id && o.kind != EventKind::Resolved);
        if !still_held && going {
            during.push(b.clone());
        }
    }
    during
}

/// Writes each notification to its receiver's spool, then queues it and wakes the worker;
/// keeps each receiver's held updates on disk in step (see `held_while_spooling`).
async fn enqueue(shared: &Arc<Shared>, router: &mut Router, out: Vec<(usize, IncidentEvent)>) {
    let tallies = router.tally(shared.receivers.len());
    let mut held_writes = Vec::new();
    for idx in 0..shared.receivers.len() {
        let before = &router.held_on_disk[idx];
        let after = router.coalescer.held_events(idx);
        if *before == after {
            continue;
        }
        let during = held_while_spooling(before, &after, &out, idx);
        held_writes.push((idx, during, after.clone()));
        router.held_on_disk[idx] = after;
    }
    if !out.is_empty() || !held_writes.is_empty() {
        write_all(shared, out, held_writes).await;
    }
    // Counted after the files are written, so what reads the counts finds the disk in step.
    if count(shared, tallies) {
        shared.progress.send_replace(());
    }
}

type HeldWrite = (usize, Vec<IncidentEvent>, Vec<IncidentEvent>);

async fn write_all(
    shared: &Arc<Shared>,
    out: Vec<(usize, IncidentEvent)>,
    held_writes: Vec<HeldWrite>,
) {
    let during: Vec<(usize, Vec<IncidentEvent>)> = held_writes
        .iter()
        .map(|(idx, during, _)| (*idx, during.clone()))
        .collect();
    write_held(shared, during).await;
    spool_all(shared, out).await;
    let after: Vec<(usize, Vec<IncidentEvent>)> = held_writes
        .into_iter()
        .filter(|(_, during, after)| during != after)
        .map(|(idx, _, after)| (idx, after))
        .collect();
    write_held(shared, after).await;
}

/// Keeps each receiver's held updates on disk, off the runtime.
async fn write_held(shared: &Arc<Shared>, writes: Vec<(usize, Vec<IncidentEvent>)>) {
    if writes.is_empty() {
        return;
    }
    let s = shared.clone();
    blocking(move || {
        for (idx, held) in &writes {
            let r = &s.receivers[*idx];
            if let Err(e) = r.spool.write_held(held) {
                // In memory they are still held and go when due; only a restart would
                // forget them.
                tracing::error!(receiver = %r.cfg.name, error = %e, "cannot keep held updates on disk");
            }
        }
    })
    .await;
}

/// Spools a batch of notifications and queues them for their workers. Each entry is a file
/// of its own and each receiver's last sequence number another: they are written at once
/// (the state directory's pool runs several), then queued in order, so a page waits for
/// its own writes and not for every other's before it (issue 38 item 3).
async fn spool_all(shared: &Arc<Shared>, out: Vec<(usize, IncidentEvent)>) {
    let s = shared.clone();
    let Some(batch) = blocking(move || number(&s, out)).await else {
        return;
    };
    let mut last: Vec<Option<u64>> = vec![None; shared.receivers.len()];
    for (idx, n) in &batch {
        last[*idx] = Some(n.sequence);
    }
    let kept = last.iter().enumerate().filter_map(|(idx, seq)| {
        let (r, seq) = (shared.receivers[idx].clone(), (*seq)?);
        Some(async move {
            if blocking(move || r.spool.keep_taken(seq)).await.is_none() {
                tracing::error!("keeping a webhook spool's last sequence number failed");
            }
        })
    });
    let written = batch.into_iter().map(|(idx, n)| {
        let r = shared.receivers[idx].clone();
        async move {
            let bytes = Spool::encode(&n);
            let spool = r.spool.clone();
            let seq = n.sequence;
            let written = match bytes {
                Ok(b) => blocking(move || spool.write_bytes(seq, &b))
                    .await
                    .unwrap_or_else(|| {
                        Err(super::SpoolError::Io {
                            path: "spool".into(),
                            source: std::io::Error::other("the write panicked"),
                        })
                    }),
                Err(e) => Err(e),
            };
            (r, n, written)
        }
    });
    let (_, written) = futures::join!(
        futures::future::join_all(kept),
        futures::future::join_all(written)
    );
    for (r, n, written) in written {
        queue_spooled(&r, n, written);
    }
}

/// Makes room for each event of `out` (see `make_room`) and numbers it: the batch's
/// notifications, in order.
fn number(s: &Shared, out: Vec<(usize, IncidentEvent)>) -> Vec<(usize, Notification)> {
    out.into_iter()
        .filter(|(idx, event)| make_room(&s.receivers[*idx], s.settings.max_queued, event))
        .map(|(idx, event)| {
            let r = &s.receivers[idx];
            let n = Notification {
                sequence: r.spool.take(),
                receiver: r.cfg.name.clone(),
                event,
                queued_at: SystemTime::now(),
            };
            (idx, n)
        })
        .collect()
}

/// Queues a notification for its receiver's worker once its file is written, or, when it
/// could not be, kept in memory and sent from there.
fn queue_spooled(r: &Receiver, n: Notification, written: Result<(), super::SpoolError>) {
    let seq = n.sequence;
    let about = Some((n.event.incident.id.clone(), n.event.kind));
    let urgency = Urgency::of(&n.event);
    let unspooled = match written {
        Ok(()) => None,
        Err(e) => {
            tracing::error!(receiver = %r.cfg.name, error = %e, "cannot spool a notification: kept in memory and sent from there; a restart before it is delivered would lose it");
            lock(&r.counters).unspooled += 1;
            Some(Box::new(n))
        }
    };
    lock(&r.queue).push_back(Queued {
        seq,
        event: about,
        unspooled,
        urgency,
    });
    r.wake.notify_one();
}

/// Makes room in a full queue for `event` (see `route::evict`); false when `event` itself
/// is the one given up. Either way one notification is dropped, counted and logged.
fn make_room(r: &Receiver, max: usize, event: &IncidentEvent) -> bool {
    let mut q = lock(&r.queue);
    if q.len() < max {
        return true;
    }
    let queued: Vec<route::QueuedEvent> = q.iter().map(|x| x.event.clone()).collect();
    let choice = route::evict(&queued, (&event.incident.id, event.kind));
    let (incident, kind) = match choice {
        route::Evict::Incoming => (event.incident.id.clone(), event.kind.as_str()),
        route::Evict::Queued(i) => {
            let gone = q.remove(i).expect("evict picks an index of the queue");
            if let Err(e) = r.spool.remove(gone.seq) {
                tracing::error!(receiver = %r.cfg.name, error = %e, "cannot remove a dropped notification from the spool");
            }
            gone.event
                .map_or(("(spooled before this start)".into(), "?"), |(id, k)| {
                    (id, k.as_str())
                })
        }
    };
    drop(q);
    tracing::error!(
        receiver = %r.cfg.name,
        queued = max,
        incident = %incident,
        event = kind,
        "webhook queue full: notification dropped"
    );
    lock(&r.counters).dropped += 1;
    choice != route::Evict::Incoming
}

/// Sends one receiver's spool, oldest first, until `stop` and an empty queue.
pub(super) async fn work(
    r: Arc<Receiver>,
    shared: Arc<Shared>,
    client: Client,
    mut stop: watch::Receiver<bool>,
) {
    let settings = shared.settings;
    let random = ring::rand::SystemRandom::new();
    // The failed tries of the notification at the head (`seq`): a new head starts again
    // at the first backoff step, however the last one left (sent, refused, or sent by a
    // peer).
    let mut tries: Option<(u64, u32)> = None;
    let mut stopping = false;
    loop {
        let head = lock(&r.queue).front().map(|q| (q.seq, q.unspooled.clone()));
        let Some((seq, unspooled)) = head else {
            if stopping || *stop.borrow() {
                return;
            }
            stopping = wait_for_work(&r, &mut stop).await;
            continue;
        };
        let attempt = match tries {
            Some((s, n)) if s == seq => n,
            _ => 0,
        };
        let Some(n) = head_notification(&r, &shared, seq, unspooled).await else {
            continue;
        };
        // Another watchdog on the same cluster may be the one to send it (`alert::peers`).
        let peers = shared
            .sender
            .peers
            .as_ref()
            .filter(|_| !crate::alert::peers::deduplicates(r.cfg.format));
        if let Some(peers) = peers {
            match peer_turn(peers, &r, &n, seq, &shared, &mut stop, stopping).await {
                Next::Send => {}
                Next::Look => continue,
                Next::Stop => return,
            }
        }
        match deliver(&r, &shared, &client.get(), &n).await {
            Outcome::Delivered => delivered(&r, &shared, peers, &n, seq, attempt).await,
            Outcome::Drop { why } => refused(&r, &shared, &n, seq, why).await,
            Outcome::Retry { after, why } => {
                let failed_at = Instant::now();
                let unit = jitter_unit(&random);
                let wait_for =
                    |urgency| route::retry_wait(&settings.backoff, attempt, urgency, after, unit);
                let wait = wait_for(urgency(&r, &n));
                let attempt = attempt.saturating_add(1);
                tries = Some((seq, attempt));
                failed(&r, &shared, why, attempt, wait);
                pause(&r, &n, failed_at, wait_for).await;
            }
        }
    }
}

/// The most urgent of what waits for the receiver: the head (read) and those behind it.
fn urgency(r: &Receiver, head: &Notification) -> Urgency {
    let queue = lock(&r.queue);
    let behind = queue.iter().skip(1).map(|q| q.urgency);
    behind.fold(Urgency::of(&head.event), Ord::max)
}

/// Waits before the head's next attempt. A page queued meanwhile behind information makes
/// the wait a page's: it cannot go before the head, so the head's wait is its wait.
async fn pause(
    r: &Receiver,
    head: &Notification,
    failed_at: Instant,
    wait_for: impl Fn(Urgency) -> Duration,
) {
    loop {
        let due = failed_at + wait_for(urgency(r, head));
        tokio::select! {
            _ = tokio::time::sleep_until(due) => return,
            _ = r.wake.notified() => {}
        }
    }
}

/// Waits, with the queue empty, for a notification or for `stop`; true when stopping.
async fn wait_for_work(r: &Receiver, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = r.wake.notified() => false,
        changed = stop.changed() => changed.is_err() || *stop.borrow(),
    }
}

/// Sends one notification the receiver's way: Slack's Web API, or one POST of its format.
async fn deliver(
    r: &Receiver,
    shared: &Shared,
    client: &reqwest::Client,
    n: &Notification,
) -> Outcome {
    let max_retry_after = shared.settings.max_retry_after;
    let ctx = Context {
        instance_id: &shared.sender.instance_id,
        now: SystemTime::now(),
        status_url: shared.sender.status_url.as_deref(),
        runbooks_url: shared.sender.runbooks_url.as_deref(),
        cluster_label: &shared.sender.cluster_label,
    };
    let cfg = r.watched.apply(&r.cfg);
    match &r.slack {
        Some(bot) => bot.deliver(client, &cfg, n, &ctx, max_retry_after).await,
        None => {
            let request = format::render(&cfg, n, &ctx);
            if cfg.format == WebhookFormat::Alertmanager {
                return to_every_alertmanager(r, client, &cfg, request, max_retry_after).await;
            }
            send(client, &cfg, cfg.url.expose(), request, max_retry_after).await
        }
    }
}

/// Alertmanager: the alerts go to every Alertmanager of the cluster at once, each request
/// within its own timeout, as Prometheus sends them; they are delivered once one of them
/// took them (Alertmanagers share alerts by gossip and deduplicate them), so one that is
/// down holds back none of the others and is not retried while another takes them (a
/// firing alert's reminder reaches it later). Each request is counted per Alertmanager, and
/// each one refused or failed while another took it is said under its address.
async fn to_every_alertmanager(
    r: &Receiver,
    client: &reqwest::Client,
    cfg: &WebhookConfig,
    request: format::Request,
    max_retry_after: Duration,
) -> Outcome {
    let urls =
        std::iter::once(cfg.url.expose()).chain(cfg.more_urls.iter().map(|e| e.url.expose()));
    let sent = futures::future::join_all(
        urls.map(|url| send(client, cfg, url, request.clone(), max_retry_after)),
    )
    .await;
    let targets = alertmanager_targets(cfg);
    let delivered = sent.iter().any(|o| matches!(o, Outcome::Delivered));
    {
        let mut c = lock(&r.counters);
        for (counts, o) in c.alertmanagers.iter_mut().zip(&sent) {
            match o {
                Outcome::Delivered => counts.0 += 1,
                _ => counts.1 += 1,
            }
        }
    }
    let mut whys = Vec::new();
    // The shortest wait any of them asked for: the next try goes to them all.
    let mut after: Option<route::Asked> = None;
    let mut retry = false;
    for (target, o) in targets.iter().zip(sent) {
        let why = match o {
            Outcome::Delivered => continue,
            Outcome::Drop { why } => why,
            Outcome::Retry { after: a, why } => {
                retry = true;
                after = match (after, a) {
                    (Some(x), Some(y)) => Some(if y.wait < x.wait { y } else { x }),
                    (x, y) => x.or(y),
                };
                why
            }
        };
        if delivered {
            tracing::warn!(receiver = %cfg.name, alertmanager = %target, why = %why, "an Alertmanager of the cluster did not take the alerts; another did");
        }
        whys.push(format!("{target}: {why}"));
    }
    let why = whys.join("; ");
    match (delivered, retry) {
        (true, _) => Outcome::Delivered,
        (false, true) => Outcome::Retry { after, why },
        (false, false) => Outcome::Drop { why },
    }
}

/// Settles a delivered notification: told to the peers, removed, counted.
async fn delivered(
    r: &Arc<Receiver>,
    shared: &Shared,
    peers: Option<&Arc<crate::alert::peers::Peers>>,
    n: &Notification,
    seq: u64,
    attempt: u32,
) {
    if let Some(peers) = peers {
        let message = r
            .slack
            .as_ref()
            .and_then(|b| b.message(&n.event.incident.id));
        peers.delivered(&r.cfg.name, &n.event, message, SystemTime::now());
    }
    finish(r, seq).await;
    let mut c = lock(&r.counters);
    c.ok += 1;
    c.last_success = Some(SystemTime::now());
    drop(c);
    shared.progress.send_replace(());
    if attempt > 0 {
        tracing::info!(receiver = %r.cfg.name, target = %r.cfg.target, attempts = attempt + 1, "webhook delivered after retries");
    }
}

/// Settles a notification the receiver refused for good: said, removed, counted as dropped.
async fn refused(r: &Arc<Receiver>, shared: &Shared, n: &Notification, seq: u64, why: String) {
    tracing::error!(
        receiver = %r.cfg.name,
        target = %r.cfg.target,
        incident = %n.event.incident.id,
        event = n.event.kind.as_str(),
        why = %why,
        "webhook refused the notification: dropped"
    );
    finish(r, seq).await;
    let mut c = lock(&r.counters);
    c.dropped += 1;
    c.last_failure = Some(why);
    drop(c);
    shared.progress.send_replace(());
}

/// Says and counts a failed attempt; the notification stays at the head for the retry.
fn failed(r: &Receiver, shared: &Shared, why: String, attempt: u32, wait: Duration) {
    tracing::warn!(
        receiver = %r.cfg.name,
        target = %r.cfg.target,
        why = %why,
        attempt,
        retry_in_ms = wait.as_millis() as u64,
        "webhook delivery failed; will retry"
    );
    {
        let mut c = lock(&r.counters);
        c.failed += 1;
        c.last_failure = Some(why);
    }
    shared.progress.send_replace(());
}

/// The notification at the head of the queue, read from the spool (or memory), when it is
/// still to be sent: an unreadable one, or one older than `max_age`, is dropped here, said
/// and counted.
async fn head_notification(
    r: &Arc<Receiver>,
    shared: &Shared,
    seq: u64,
    unspooled: Option<Box<Notification>>,
) -> Option<Notification> {
    let spool = r.spool.clone();
    let read = match unspooled {
        Some(n) => Some(Ok(*n)),
        None => blocking(move || spool.read::<Notification>(seq)).await,
    };
    let n = match read {
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            tracing::error!(receiver = %r.cfg.name, error = %e, "unreadable spooled notification dropped");
            finish(r, seq).await;
            lock(&r.counters).dropped += 1;
            shared.progress.send_replace(());
            return None;
        }
        // The blocking task was cancelled (the runtime is stopping): looked at again.
        None => return None,
    };
    let age = SystemTime::now()
        .duration_since(n.queued_at)
        .unwrap_or_default();
    if age > shared.settings.max_age {
        tracing::error!(
            receiver = %r.cfg.name,
            target = %r.cfg.target,
            incident = %n.event.incident.id,
            event = n.event.kind.as_str(),
            age_secs = age.as_secs(),
            "webhook notification undelivered for longer than its maximum age: dropped"
        );
        finish(r, seq).await;
        lock(&r.counters).dropped += 1;
        shared.progress.send_replace(());
        return None;
    }
    Some(n)
}

/// What the worker does after asking whose turn it is.
enum Next {
    Send,
    /// Look at the head of the queue again (a peer delivered it, or it waited).
    Look,
    /// Stopping while the turn is a peer's: left in the spool for the next start, which
    /// finds the peer's delivery or sends it.
    Stop,
}

/// Asks the peers whether this notification is this instance's to send: a peer delivered
/// it (done here, counted), or one ahead in line may still (wait a look), or send.
async fn peer_turn(
    peers: &crate::alert::peers::Peers,
    r: &Arc<Receiver>,
    n: &Notification,
    seq: u64,
    shared: &Shared,
    stop: &mut watch::Receiver<bool>,
    stopping: bool,
) -> Next {
    match peers.turn(&r.cfg.name, &n.event, SystemTime::now()) {
        Turn::Send => Next::Send,
        Turn::Delivered { by, seq: theirs } => {
            tracing::debug!(receiver = %r.cfg.name, incident = %n.event.incident.id, event = n.event.kind.as_str(), peer = %by, "a peer delivered it");
            if let Some(bot) = &r.slack {
                bot.adopt(&n.event, peers.message(&by, theirs)).await;
            }
            finish(r, seq).await;
            lock(&r.counters).left_to_peers += 1;
            shared.progress.send_replace(());
            Next::Look
        }
        Turn::Wait(_) if stopping || *stop.borrow() => Next::Stop,
        Turn::Wait(wait) => {
            // Looked at again when the peers may have answered, or when it is due.
            tokio::select! {
                _ = tokio::time::sleep(wait.min(peers.poll_interval)) => Next::Look,
                changed = stop.changed() => {
                    if changed.is_err() || *stop.borrow() { Next::Stop } else { Next::Look }
                }
            }
        }
    }
}

/// Removes a finished notification from disk, then from the queue.
async fn finish(r: &Arc<Receiver>, seq: u64) {
    let spool = r.spool.clone();
    if let Some(Err(e)) = blocking(move || spool.remove(seq)).await {
        // It would be sent again after a restart: at least once, never lost.
        tracing::error!(receiver = %r.cfg.name, error = %e, "cannot remove a delivered notification from the spool");
    }
    let mut q = lock(&r.queue);
    if q.front().map(|x| x.seq) == Some(seq) {
        q.pop_front();
    }
}

fn jitter_unit(random: &ring::rand::SystemRandom) -> f64 {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 4];
    if random.fill(&mut b).is_err() {
        return 0.0;
    }
    f64::from(u32::from_le_bytes(b)) / f64::from(u32::MAX) * 2.0 - 1.0
}

fn headers(cfg: &WebhookConfig, request: &format::Request) -> HeaderMap {
    let mut map = HeaderMap::new();
    let pairs = cfg
        .headers
        .iter()
        .map(|(k, v)| (k, v.expose()))
        .chain(request.headers.iter().map(|(k, v)| (k, v.as_str())));
    for (k, v) in pairs {
        // The configuration checked names and values; a pair that still fails is skipped
        // rather than failing the notification.
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            map.insert(name, value);
        }
    }
    map
}

async fn send(
    client: &reqwest::Client,
    cfg: &WebhookConfig,
    url: &str,
    request: format::Request,
    max_retry_after: Duration,
) -> Outcome {
    let headers = headers(cfg, &request);
    let answered = match http::send(client.post(url).headers(headers).body(request.body)).await {
        Ok(a) => a,
        Err(why) => return Outcome::Retry { after: None, why },
    };
    let (status, retry_after) = (answered.status, answered.retry_after.clone());
    let outcome = route::judge(
        status,
        retry_after.as_deref(),
        SystemTime::now(),
        max_retry_after,
    );
    match outcome {
        Outcome::Drop { why } => {
            let body = answered.body().await.unwrap_or_default();
            let text = String::from_utf8_lossy(&body[..body.len().min(LOGGED_BODY_BYTES)]);
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            Outcome::Drop {
                why: if text.is_empty() {
                    why
                } else {
                    format!("{why}: {text}")
                },
            }
        }
        other => other,
    }
}
