//! Continuous per-broker liveness, apart from the metadata round (issue 14). Every broker has
//! a task of its own with a persistent connection that sends a cheap request every
//! `liveness_interval_ms`: ApiVersions, or Metadata for no topics, whose broker list says
//! when a peer was fenced or left (about [`LISTERS`] of those per interval in all). An
//! outstanding request is evidence while it ages: the moment its silence passes the
//! broker's own threshold (a floor for ordinary GC pauses, or a multiple of its own recent
//! answer times when that is longer) the cluster loop is told, and a fresh connection beside
//! the silent one tells "accepted but silent" (a frozen process: the kernel still completes
//! handshakes) from "refused" (nothing listens) and, once it had accepted, from "accept
//! queue full" (the same frozen process, its listen backlog used up).
//!
//! The tasks only measure. What the measurements mean is decided by the pure verdict
//! (`verdict::apply_liveness`) from [`LivenessFact`]s: plain data with wall-clock times.

pub mod metrics;

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::model::own_health::Timer;
use crate::model::round::{BrokerEndpoint, BrokerId, FailureKind};
pub use crate::model::round::{LivenessFact, SideConnect, SideOutcome, Spell};
use crate::model::supervise::Task;
use crate::observe::own_health::OwnHealth;
use crate::observe::wire::{BrokerClient, WireError, WireOptions};

/// Answer times kept per broker for its threshold: about 13 s at the default interval.
const LATENCY_WINDOW: usize = 32;
/// The threshold is this many times the slowest recent answer, when that is above the floor:
/// a broker that always answers in 300 ms is not suspect at 400 ms.
pub const THRESHOLD_FACTOR: u32 = 4;
/// While a broker stays silent, a fresh connection is tried again this often: enough to see
/// it refuse (killed while frozen) without filling its listen backlog quickly.
const SIDE_CONNECT_EVERY: Duration = Duration::from_secs(5);
/// How long a silence keeps the verdicts being made again between rounds (see `any_silent`).
pub const AGEING_FOR: Duration = Duration::from_secs(60);
/// Silences past the threshold remembered for the flapping evidence.
pub const FLAP_WINDOW: Duration = Duration::from_secs(120);
/// An answer this late (and [`THRESHOLD_FACTOR`] times its slowest ordinary one) is a stall:
/// a pause of the process, not an answer time. Below it, noise.
pub const PAUSE_MIN: Duration = Duration::from_millis(250);
/// Stalls remembered as the broker's pause record. Long enough that a broker pausing every
/// few minutes keeps its tolerance between pauses.
pub const PAUSE_MEMORY: Duration = Duration::from_secs(600);
/// A stall longer than this many floors is a freeze, not a pause: it teaches no tolerance.
/// Twice the floor (2 s by default) holds the pauses of a broker in GC trouble; a broker
/// silent longer is one Kafka is about to fence (the lab fences at 3 s), and the next freeze
/// of a broker that froze once must be paged at the threshold as the first was (`detect`
/// freezes each broker again every third trial: a 3 s limit let a 2.9 s freeze teach 3.4 s).
pub const PAUSE_TOLERANCE_FLOORS: u32 = 2;
/// Registered-broker lists asked for per interval, across the cluster: every broker's
/// request is a list in a small cluster; in one of 1,000 brokers, each asks once every 333
/// requests, so the lists (1,000 entries each) do not grow the check's cost with the square.
pub const LISTERS: usize = 3;

/// How the liveness tasks of one cluster work.
#[derive(Debug, Clone)]
pub struct LivenessSettings {
    /// `liveness_interval_ms`: a request every this long while the broker answers.
    pub interval: Duration,
    /// `liveness_floor_ms`: no broker is silent "past its threshold" before this.
    pub floor: Duration,
    pub wire: WireOptions,
    /// The watchdog's own health: how late each request is sent, and what the kernel
    /// resends of each connection.
    pub own: OwnHealth,
}

/// The threshold of a broker whose slowest recent answer took `slowest`.
pub fn threshold(floor: Duration, slowest: Option<Duration>) -> Duration {
    slowest
        .map(|s| s.saturating_mul(THRESHOLD_FACTOR))
        .unwrap_or_default()
        .max(floor)
}

/// The state machine of one broker's liveness, fed with monotonic instants. Pure: the task
/// tells it what happened and when.
#[derive(Debug, Clone)]
pub struct Tracker {
    floor: Duration,
    latencies: VecDeque<Duration>,
    last_answer: Option<(Instant, Duration)>,
    waiting_since: Option<Instant>,
    refused_since: Option<(Instant, String)>,
    side: Option<(Instant, SideOutcome, Duration, String)>,
    accepted_in_silence: bool,
    spells: VecDeque<(Instant, Duration)>,
    /// Stalls that ended with an answer, within [`PAUSE_MEMORY`], none longer than
    /// [`PAUSE_TOLERANCE_FLOORS`] floors.
    pauses: VecDeque<(Instant, Duration)>,
    /// Every recent answer time, stalls included: what "late" is measured against, so a
    /// broker that always answers in 400 ms is slow, not stalling.
    answers: VecDeque<Duration>,
    /// While silent: how many times in a row the kernel resent the oldest request.
    resent: u8,
}

impl Tracker {
    pub fn new(floor: Duration) -> Self {
        Tracker {
            floor,
            latencies: VecDeque::with_capacity(LATENCY_WINDOW),
            last_answer: None,
            waiting_since: None,
            refused_since: None,
            side: None,
            accepted_in_silence: false,
            spells: VecDeque::new(),
            pauses: VecDeque::new(),
            answers: VecDeque::with_capacity(LATENCY_WINDOW),
            resent: 0,
        }
    }

    /// What the kernel says of the silent connection: `c` from TCP_INFO. Data it sent and
    /// resends unacknowledged is lost on the way; acknowledged data is with the broker.
    pub fn counted(&mut self, c: crate::sys::TcpCounters) {
        if self.waiting_since.is_some() {
            self.resent = if c.unacked > 0 { c.retransmits_now } else { 0 };
        }
    }

    /// How late an answer must be to count as a stall: [`PAUSE_MIN`], and
    /// [`THRESHOLD_FACTOR`] times its median answer. `None` until a few answers tell what
    /// its usual is.
    fn pause_floor(&self) -> Option<Duration> {
        if self.answers.len() < 4 {
            return None;
        }
        let mut a: Vec<Duration> = self.answers.iter().copied().collect();
        a.sort_unstable();
        Some(
            a[a.len() / 2]
                .saturating_mul(THRESHOLD_FACTOR)
                .max(PAUSE_MIN),
        )
    }

    pub fn threshold(&self) -> Duration {
        threshold(self.floor, self.latencies.iter().max().copied())
    }

    /// A request (or a connection attempt) left at `at`; the silence, if any, started with
    /// the first of them.
    pub fn sent(&mut self, at: Instant) {
        self.waiting_since.get_or_insert(at);
    }

    /// When the current silence passes the threshold.
    pub fn crossing(&self) -> Option<Instant> {
        self.waiting_since.map(|w| w + self.threshold())
    }

    pub fn past_threshold(&self, now: Instant) -> bool {
        self.crossing().is_some_and(|c| now >= c)
    }

    /// An answer arrived at `at` after `latency`. Returns whether that ended a silence past
    /// the threshold or a refusal (news for the verdict).
    pub fn answered(&mut self, at: Instant, latency: Duration) -> bool {
        let threshold = self.threshold();
        let mut news = self.refused_since.take().is_some();
        // The stall is measured from the oldest request still waiting: the answer that ends
        // it may be to a request sent in the middle of the pause.
        let mut stall = latency;
        if let Some(w) = self.waiting_since.take() {
            let silence = at.saturating_duration_since(w);
            stall = stall.max(silence);
            if silence >= threshold {
                self.spells.push_back((w, silence));
                news = true;
            }
        }
        let paused = self.pause_floor().is_some_and(|f| stall >= f);
        if paused && stall <= self.floor.saturating_mul(PAUSE_TOLERANCE_FLOORS) {
            self.pauses.push_back((at - stall, stall));
        }
        while self
            .spells
            .front()
            .is_some_and(|(s, _)| at.saturating_duration_since(*s) > FLAP_WINDOW)
        {
            self.spells.pop_front();
        }
        while self
            .pauses
            .front()
            .is_some_and(|(s, _)| at.saturating_duration_since(*s) > PAUSE_MEMORY)
        {
            self.pauses.pop_front();
        }
        if !news {
            if self.answers.len() == LATENCY_WINDOW {
                self.answers.pop_front();
            }
            self.answers.push_back(latency);
        }
        // A stall is not an answer time: it would raise the threshold of the very broker
        // that just froze, and hide its next pause inside the tolerance.
        if !news && !paused {
            if self.latencies.len() == LATENCY_WINDOW {
                self.latencies.pop_front();
            }
            self.latencies.push_back(latency);
        }
        self.side = None;
        self.accepted_in_silence = false;
        self.resent = 0;
        self.last_answer = Some((at, latency));
        news
    }

    /// A connection attempt was refused at `at`. Returns whether that is news.
    pub fn refused(&mut self, at: Instant, detail: String) -> bool {
        self.waiting_since.get_or_insert(at);
        if self.refused_since.is_some() {
            return false;
        }
        self.refused_since = Some((at, detail));
        true
    }

    /// A fresh connection attempt beside the silent one ended. Returns whether that is news.
    pub fn side_result(
        &mut self,
        at: Instant,
        outcome: SideOutcome,
        after: Duration,
        detail: String,
    ) -> bool {
        if self.waiting_since.is_none() {
            // It answered meanwhile: the attempt says nothing any more.
            return false;
        }
        let news = self.side.as_ref().is_none_or(|s| s.1 != outcome);
        match outcome {
            SideOutcome::Accepted => {
                self.accepted_in_silence = true;
                self.refused_since = None;
            }
            SideOutcome::Refused => {
                self.refused_since.get_or_insert((at, detail.clone()));
            }
            SideOutcome::TimedOut | SideOutcome::Failed => {}
        }
        self.side = Some((at, outcome, after, detail));
        news
    }

    /// When the next fresh connection attempt is due, while silent past the threshold.
    pub fn side_due(&self) -> Option<Instant> {
        let crossing = self.crossing()?;
        Some(match &self.side {
            Some((at, ..)) => (*at + SIDE_CONNECT_EVERY).max(crossing),
            None => crossing,
        })
    }

    /// The tracker as data, with instants turned into wall-clock times.
    pub fn fact(&self, address: &str, now: Instant, wall: SystemTime) -> LivenessFact {
        let to_wall = |i: Instant| wall - now.saturating_duration_since(i);
        LivenessFact {
            address: address.to_string(),
            threshold: self.threshold(),
            typical: self.latencies.iter().max().copied(),
            last_latency: self.last_answer.map(|(_, l)| l),
            last_answer_at: self.last_answer.map(|(t, _)| to_wall(t)),
            waiting_since: self.waiting_since.map(to_wall),
            refused_since: self.refused_since.as_ref().map(|(t, _)| to_wall(*t)),
            refused_detail: self
                .refused_since
                .as_ref()
                .map(|(_, d)| d.clone())
                .unwrap_or_default(),
            side: self
                .side
                .as_ref()
                .map(|(at, outcome, after, detail)| SideConnect {
                    at: to_wall(*at),
                    outcome: *outcome,
                    after: *after,
                    detail: detail.clone(),
                }),
            accepted_in_silence: self.accepted_in_silence,
            spells: self
                .spells
                .iter()
                .map(|(s, l)| Spell {
                    started: to_wall(*s),
                    length: *l,
                })
                .collect(),
            pauses: self
                .pauses
                .iter()
                .map(|(s, l)| Spell {
                    started: to_wall(*s),
                    length: *l,
                })
                .collect(),
            // A median of the first answer or two (a cold JVM path right after the watchdog
            // starts) made a healthy broker `slow` on the lab: a median needs a few answers.
            median: (self.latencies.len() >= 8).then(|| {
                let mut l: Vec<Duration> = self.latencies.iter().copied().collect();
                l.sort_unstable();
                l[l.len() / 2]
            }),
            resent: self.resent,
        }
    }
}

struct Entry {
    address: String,
    tracker: Tracker,
    /// The brokers it listed as registered in its newest answer, when it says.
    registered: Option<Vec<BrokerId>>,
}

/// The trackers of one cluster's brokers, shared by their tasks and the cluster loop.
#[derive(Default)]
pub struct Board {
    brokers: Mutex<BTreeMap<BrokerId, Entry>>,
    /// Woken when a broker's liveness changed in a way the verdict must hear at once.
    changed: Notify,
    /// Woken when a broker's list of registered brokers changed: a peer was fenced, shut
    /// down or came back. Only a metadata round can tell which and what it means.
    registration: Notify,
    /// The newest list whose change was announced: the same change seen by the next peer
    /// asked is no news again.
    announced: Mutex<Option<Vec<BrokerId>>>,
    /// Each task asks for the registered list every this many requests (ApiVersions
    /// between): about [`LISTERS`] lists per interval, whatever the cluster's size.
    list_every: std::sync::atomic::AtomicUsize,
}

impl Board {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<BrokerId, Entry>> {
        self.brokers.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update(&self, id: BrokerId, f: impl FnOnce(&mut Tracker) -> bool) -> bool {
        let news = self.lock().get_mut(&id).map(|e| f(&mut e.tracker)) == Some(true);
        if news {
            self.changed.notify_one();
        }
        news
    }

    fn read<T>(&self, id: BrokerId, f: impl FnOnce(&Tracker) -> T) -> Option<T> {
        self.lock().get(&id).map(|e| f(&e.tracker))
    }

    /// Every broker's liveness now.
    pub fn snapshot(&self) -> BTreeMap<BrokerId, LivenessFact> {
        let (now, wall) = (Instant::now(), SystemTime::now());
        self.lock()
            .iter()
            .map(|(id, e)| (*id, e.tracker.fact(&e.address, now, wall)))
            .collect()
    }

    /// Some broker has been silent or refusing for a while: its evidence ages, so the
    /// verdict is worth computing again soon even without news. Not for long: after
    /// [`AGEING_FOR`] the rounds carry it (a broker down for an hour, or one that left the
    /// cluster and is still watched until it is forgotten, costs nothing between rounds).
    pub fn any_silent(&self) -> bool {
        self.lock().values().any(|e| {
            e.tracker
                .waiting_since
                .is_some_and(|w| (e.tracker.floor / 2..=AGEING_FOR).contains(&w.elapsed()))
        })
    }

    /// Waits for news.
    pub async fn changed(&self) {
        self.changed.notified().await
    }

    /// Waits for a change of some broker's registered list.
    pub async fn registration_changed(&self) {
        self.registration.notified().await
    }

    /// `id` listed `registered` in its newest answer. Returns whether that is news: it
    /// differs from its own list before (its first answer is no news), and from the change
    /// announced last (a peer telling the same change later, or a broker that lists other
    /// brokers all along, as a stale isolated one does, is none).
    fn listed(&self, id: BrokerId, mut registered: Vec<BrokerId>) -> bool {
        registered.sort_unstable();
        let changed = match self.lock().get_mut(&id) {
            Some(e) => {
                let changed = e.registered.as_ref().is_some_and(|r| *r != registered);
                e.registered = Some(registered.clone());
                changed
            }
            None => false,
        };
        if !changed {
            return false;
        }
        let mut announced = self.announced.lock().unwrap_or_else(|p| p.into_inner());
        if announced.as_ref() == Some(&registered) {
            return false;
        }
        *announced = Some(registered);
        self.registration.notify_one();
        true
    }

    /// Whether the `n`th request of `id`'s task asks for the registered list.
    fn lists_now(&self, id: BrokerId, n: usize) -> bool {
        let every = self
            .list_every
            .load(std::sync::atomic::Ordering::Relaxed)
            .max(1);
        (n + id.unsigned_abs() as usize) % every == 0
    }
}

/// The liveness tasks of one cluster. Dropping it stops them.
pub struct Liveness {
    settings: LivenessSettings,
    board: Arc<Board>,
    tasks: BTreeMap<BrokerId, (String, JoinHandle<()>)>,
}

impl Liveness {
    pub fn new(settings: LivenessSettings) -> Self {
        Liveness {
            settings,
            board: Arc::new(Board::default()),
            tasks: BTreeMap::new(),
        }
    }

    pub fn board(&self) -> Arc<Board> {
        self.board.clone()
    }

    /// Watches exactly `brokers` from now on: a task for each new one (or one whose address
    /// changed), none any more for a broker no longer known.
    pub fn track<'a>(&mut self, brokers: impl IntoIterator<Item = &'a BrokerEndpoint>) {
        let wanted: BTreeMap<BrokerId, String> =
            brokers.into_iter().map(|b| (b.id, b.address())).collect();
        self.tasks.retain(|id, (address, task)| {
            let keep = wanted.get(id) == Some(address);
            if !keep {
                task.abort();
            }
            keep
        });
        self.board
            .lock()
            .retain(|id, e| wanted.get(id) == Some(&e.address));
        self.board.list_every.store(
            (wanted.len() / LISTERS).max(1),
            std::sync::atomic::Ordering::Relaxed,
        );
        for (id, address) in wanted {
            if self.tasks.contains_key(&id) {
                continue;
            }
            self.board.lock().insert(
                id,
                Entry {
                    address: address.clone(),
                    tracker: Tracker::new(self.settings.floor),
                    registered: None,
                },
            );
            // Supervised: a task that ends (a panic) is started again, so its broker is
            // never left watched by nothing.
            let (settings, board, at) =
                (self.settings.clone(), self.board.clone(), address.clone());
            let task = crate::model::supervise::spawn(Task::Liveness, address.clone(), move || {
                watch_broker(id, at.clone(), settings.clone(), board.clone())
            });
            self.tasks.insert(id, (address, task));
        }
    }
}

impl Drop for Liveness {
    fn drop(&mut self) {
        for (_, task) in self.tasks.values() {
            task.abort();
        }
    }
}

type SideFuture = Pin<Box<dyn Future<Output = (SideOutcome, Duration, String)> + Send>>;

/// A TCP handshake only: whether something completes it says what the port does, without
/// asking the process anything.
fn side_connect(address: String, limit: Duration) -> SideFuture {
    Box::pin(async move {
        let started = Instant::now();
        let r = tokio::time::timeout(limit, tokio::net::TcpStream::connect(&address)).await;
        let after = started.elapsed();
        match r {
            Ok(Ok(_)) => (SideOutcome::Accepted, after, "accepted".into()),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                (SideOutcome::Refused, after, e.to_string())
            }
            Ok(Err(e)) => (SideOutcome::Failed, after, e.to_string()),
            Err(_) => (
                SideOutcome::TimedOut,
                after,
                format!("no TCP handshake within {} ms", limit.as_millis()),
            ),
        }
    })
}

/// Awaits `fut` (a request or connection to the broker) while its silence ages: at the
/// threshold, and again every few seconds, a fresh connection is tried beside it, and the
/// kernel is asked what it resent of the connection `fd` the request is on.
async fn watched<F: Future>(
    fut: F,
    id: BrokerId,
    address: &str,
    fd: Option<std::os::fd::RawFd>,
    s: &LivenessSettings,
    board: &Board,
) -> F::Output {
    let count = |board: &Board| {
        if let Some(c) = fd.and_then(|fd| crate::sys::tcp_info(fd).ok()) {
            board.update(id, |t| {
                t.counted(c);
                false
            });
        }
    };
    tokio::pin!(fut);
    let mut side: Option<SideFuture> = None;
    loop {
        let due = if side.is_none() {
            board.read(id, Tracker::side_due).flatten()
        } else {
            None
        };
        tokio::select! {
            out = &mut fut => return out,
            _ = sleep_opt(due) => {
                // Past the threshold: news even before the fresh connection says more.
                count(board);
                board.changed.notify_one();
                side = Some(side_connect(address.to_string(), s.wire.connect_timeout));
            }
            (outcome, after, detail) = async { side.as_mut().expect("guarded").await }, if side.is_some() => {
                side = None;
                let at = Instant::now();
                count(board);
                board.update(id, |t| t.side_result(at, outcome, after, detail));
            }
        }
    }
}

/// One liveness request: Metadata for no topics when `list` (the registered brokers come
/// with the answer), else ApiVersions.
async fn ping(
    c: &mut BrokerClient,
    list: bool,
) -> Result<(Duration, Option<Vec<BrokerId>>), WireError> {
    if list {
        c.ping_registered().await
    } else {
        c.ping().await.map(|l| (l, None))
    }
}

async fn sleep_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn refused(e: &WireError) -> bool {
    e.kind() == FailureKind::ConnectionRefused
}

/// One broker's task: connect, then a request every interval on that connection, for as
/// long as the broker is known. When it is this task's turn the request is Metadata for no
/// topics, and its broker list is news when it changes: a peer fenced (KRaft lists only
/// unfenced brokers) or gone is seen between rounds.
async fn watch_broker(id: BrokerId, address: String, s: LivenessSettings, board: Arc<Board>) {
    let mut client: Option<BrokerClient> = None;
    let mut next = Instant::now();
    // One immediate reconnect after a connection that had answered, never a busy loop.
    let mut may_retry_at_once = false;
    let mut requests: usize = 0;
    loop {
        requests = requests.wrapping_add(1);
        let sent = Instant::now();
        board.update(id, |t| {
            t.sent(sent);
            false
        });
        let reconnect_now = match client.as_mut() {
            None => {
                match watched(
                    BrokerClient::connect(&address, &s.wire),
                    id,
                    &address,
                    None,
                    &s,
                    &board,
                )
                .await
                {
                    Ok(c) => {
                        let latency = c.api_versions_latency;
                        client = Some(c.client);
                        board.update(id, |t| t.answered(Instant::now(), latency));
                    }
                    Err(e) if refused(&e) => {
                        board.update(id, |t| t.refused(Instant::now(), e.to_string()));
                    }
                    Err(e) => tracing::debug!(broker = id, error = %e, "liveness: cannot connect"),
                }
                false
            }
            Some(c) => match {
                let fd = c.socket_fd();
                watched(
                    ping(c, board.lists_now(id, requests)),
                    id,
                    &address,
                    Some(fd),
                    &s,
                    &board,
                )
            }
            .await
            {
                Ok((latency, registered)) => {
                    board.update(id, |t| t.answered(Instant::now(), latency));
                    if let Ok(counters) = crate::sys::tcp_info(c.socket_fd()) {
                        s.own.tcp(&address, counters);
                    }
                    if let Some(r) = registered {
                        board.listed(id, r);
                    }
                    may_retry_at_once = true;
                    false
                }
                Err(e) => {
                    tracing::debug!(broker = id, error = %e, "liveness: request failed; reconnecting");
                    client = None;
                    // A reset or closed connection is the news of a process that went away;
                    // the next attempt at once tells refused from restarted.
                    std::mem::take(&mut may_retry_at_once)
                        && e.kind() == FailureKind::ConnectionClosed
                }
            },
        };
        if reconnect_now {
            continue;
        }
        next += s.interval;
        let now = Instant::now();
        if next < now {
            next = now;
        }
        tokio::time::sleep_until(next).await;
        s.own.late(
            Timer::Liveness,
            Instant::now().saturating_duration_since(next),
        );
    }
}

#[cfg(test)]
mod tests;
