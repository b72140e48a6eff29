//! The watchdog's own health, measured continuously and cheaply (issue 38 item 4): a timer
//! every [`TICK`] whose lateness is the event loop's lag (and, seconds late, a pause of the
//! whole process), the clocks compared at each tick (CLOCK_BOOTTIME running ahead of
//! CLOCK_MONOTONIC is a suspend; the wall clock moving against the monotonic one is a
//! step), its CPU cgroup's throttled time once a second, the lateness of the liveness
//! requests and rounds against their schedule, and the retransmissions of its own liveness
//! connections (TCP_INFO, read by the liveness tasks).
//!
//! This module only measures and keeps episodes ([`Episode`]); what they mean for the
//! verdicts is decided by the pure `judge::own_health` from [`OwnHealthFacts`].
//!
//! Packet loss is told from a broker's by where it shows: segments sent again on the
//! connections to brokers on two or more hosts within [`LOSS_WINDOW`] are the watchdog's own
//! side of the network (a frozen broker's kernel still acknowledges what it is sent, and a
//! broker's own bad link shows on its connection alone). Once seen on two hosts, the loss
//! lasts while any connection still shows it: brokers that freeze meanwhile leave their
//! connections quiet, and the one connection left must not make the watchdog's own loss
//! its broker's. With every broker on one host the two cannot be told apart, and no own
//! loss is claimed.

pub mod metrics;
pub mod read;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use crate::model::own_health::{Episode, OwnHealthFacts, Sickness, Timer};
use crate::model::own_health::{JUMP_MIN, LAG_LIMIT, MEMORY, PAUSE_MIN, TICK};
use crate::model::supervise::{self, Task};
use crate::sys::TcpCounters;

/// How often the CPU cgroup's throttled time is read.
const CPU_EVERY: Duration = Duration::from_secs(1);
/// Throttled for this share of the last [`CPU_EVERY`] or more: starved of CPU.
const THROTTLED_SHARE: f64 = 0.25;
/// Retransmissions are counted over this window.
pub const LOSS_WINDOW: Duration = Duration::from_secs(10);
/// Segments sent again, in the window, that make packet loss: at least this many...
const LOSS_MIN_SEGMENTS: u64 = 3;
/// ...and at least this share of the segments sent.
const LOSS_MIN_SHARE: f64 = 0.02;
/// Lateness is reported as the largest of the current and the previous bucket this long.
const LATE_BUCKET: Duration = Duration::from_secs(10);

/// The largest lateness of one schedule, in two buckets of [`LATE_BUCKET`].
#[derive(Debug, Clone, Copy)]
struct Lateness {
    started: Instant,
    current: Duration,
    previous: Duration,
}

impl Lateness {
    fn note(&mut self, now: Instant, late: Duration) {
        if now.saturating_duration_since(self.started) >= LATE_BUCKET {
            // A bucket older than two is no part of "recent".
            self.previous = if now.saturating_duration_since(self.started) < LATE_BUCKET * 2 {
                self.current
            } else {
                Duration::ZERO
            };
            self.current = Duration::ZERO;
            self.started = now;
        }
        self.current = self.current.max(late);
    }

    fn recent(&self, now: Instant) -> Duration {
        match now.saturating_duration_since(self.started) {
            d if d < LATE_BUCKET => self.current.max(self.previous),
            d if d < LATE_BUCKET * 2 => self.current,
            _ => Duration::ZERO,
        }
    }
}

#[derive(Debug, Clone)]
struct Spell {
    kind: Sickness,
    started: Instant,
    ended: Option<Instant>,
    /// What the worst measurement was, to keep the worst words.
    worst: f64,
    detail: String,
}

/// One liveness connection's retransmissions and data segments in one note.
#[derive(Debug, Clone)]
struct Sent {
    at: Instant,
    host: String,
    retransmitted: u64,
    sent: u64,
}

#[derive(Debug, Default)]
struct State {
    last_tick: Option<Instant>,
    late: BTreeMap<Timer, Lateness>,
    spells: VecDeque<Spell>,
    /// CLOCK_BOOTTIME - CLOCK_MONOTONIC at the last tick.
    suspended: Option<Duration>,
    /// The wall clock and the monotonic one at the last tick.
    clocks: Option<(Instant, SystemTime)>,
    /// Each cgroup file's throttled time at the last read, and when.
    throttled: Option<(Instant, BTreeMap<std::path::PathBuf, Duration>)>,
    clock_jumps: u64,
    cpu_throttled: Duration,
    tcp: BTreeMap<String, TcpCounters>,
    sent: VecDeque<Sent>,
    segments_sent: u64,
    segments_retransmitted: u64,
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn millis(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

/// The host of `host:port` (`[v6]:port` too).
fn host_of(address: &str) -> &str {
    address
        .rsplit_once(':')
        .map_or(address, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']')
}

impl State {
    /// `kind` holds now, since `started` at the latest: the open spell of it goes on (with
    /// these words when they are worse), or one begins.
    fn holds(&mut self, kind: Sickness, started: Instant, worst: f64, detail: String) {
        if let Some(s) = self
            .spells
            .iter_mut()
            .rev()
            .find(|s| s.kind == kind && s.ended.is_none())
        {
            s.started = s.started.min(started);
            if worst >= s.worst {
                s.worst = worst;
                s.detail = detail;
            }
            return;
        }
        self.spells.push_back(Spell {
            kind,
            started,
            ended: None,
            worst,
            detail,
        });
    }

    /// `kind` no longer holds at `at`.
    fn ends(&mut self, kind: Sickness, at: Instant) {
        for s in self.spells.iter_mut().filter(|s| s.kind == kind) {
            s.ended.get_or_insert(at);
        }
    }

    /// A spell that began and ended before it was seen (a pause, a jump).
    fn was(&mut self, kind: Sickness, started: Instant, ended: Instant, detail: String) {
        self.clock_jumps += 1;
        self.spells.push_back(Spell {
            kind,
            started,
            ended: Some(ended),
            worst: 0.0,
            detail,
        });
    }

    fn late(&mut self, timer: Timer, now: Instant, late: Duration) {
        self.late
            .entry(timer)
            .or_insert(Lateness {
                started: now,
                current: Duration::ZERO,
                previous: Duration::ZERO,
            })
            .note(now, late);
        if late >= LAG_LIMIT && late < PAUSE_MIN {
            let word = match timer {
                Timer::Tick => format!("its {} timer", millis(TICK)),
                Timer::Liveness => "a liveness request".to_string(),
                Timer::Round => "a round".to_string(),
            };
            self.holds(
                Sickness::EventLoopLag,
                now - late,
                late.as_secs_f64(),
                format!("{word} ran {} late", millis(late)),
            );
        }
    }

    /// The tick fired at `now`, `late` after it was due, with the clocks as they read.
    fn ticked(
        &mut self,
        now: Instant,
        wall: SystemTime,
        late: Duration,
        suspended: Option<Duration>,
    ) {
        self.last_tick = Some(now);
        self.late(Timer::Tick, now, late);
        if late >= PAUSE_MIN {
            self.was(
                Sickness::Paused,
                now - late,
                now,
                format!(
                    "its {} timer fired {} late: the process did not run meanwhile (stopped and continued, its VM paused, or starved)",
                    millis(TICK),
                    secs(late)
                ),
            );
        }
        if late < LAG_LIMIT {
            self.ends(Sickness::EventLoopLag, now);
        }
        if let (Some(before), Some(after)) = (self.suspended, suspended) {
            if after >= before + JUMP_MIN {
                self.was(
                    Sickness::ClockJump,
                    now,
                    now,
                    format!(
                        "the host was suspended for {} (CLOCK_BOOTTIME ran ahead of CLOCK_MONOTONIC)",
                        secs(after - before)
                    ),
                );
            }
        }
        self.suspended = suspended.or(self.suspended);
        if let Some((i, w)) = self.clocks {
            let expected = w + now.saturating_duration_since(i);
            let (by, way) = match wall.duration_since(expected) {
                Ok(ahead) => (ahead, "forward"),
                Err(e) => (e.duration(), "back"),
            };
            if by >= JUMP_MIN {
                self.was(
                    Sickness::ClockJump,
                    now,
                    now,
                    format!("the wall clock was stepped {way} by {}", secs(by)),
                );
            }
        }
        self.clocks = Some((now, wall));
        self.forget(now);
    }

    /// The CPU cgroups' throttled times as read at `now`.
    fn cpu(&mut self, now: Instant, read: Vec<(std::path::PathBuf, Duration)>) {
        let read: BTreeMap<_, _> = read.into_iter().collect();
        let before = self.throttled.replace((now, read.clone()));
        let Some((then, before)) = before else {
            return;
        };
        // The most any one of them refused: a quota on the cgroup or on an ancestor stops
        // the watchdog alike, and the two overlap.
        let refused = read
            .iter()
            .filter_map(|(f, t)| before.get(f).map(|b| t.saturating_sub(*b)))
            .max()
            .unwrap_or_default();
        self.cpu_throttled += refused;
        let elapsed = now.saturating_duration_since(then);
        if elapsed.is_zero() {
            return;
        }
        let share = refused.as_secs_f64() / elapsed.as_secs_f64();
        if share >= THROTTLED_SHARE {
            self.holds(
                Sickness::CpuThrottled,
                then,
                share,
                format!(
                    "its CPU cgroup refused it CPU for {} of {}",
                    millis(refused),
                    millis(elapsed)
                ),
            );
        } else {
            self.ends(Sickness::CpuThrottled, now);
        }
    }

    /// A liveness connection to `address` counted `c` at `now`.
    fn tcp(&mut self, address: &str, now: Instant, c: TcpCounters) {
        let before = self.tcp.insert(address.to_string(), c).unwrap_or_default();
        // Counters lower than before are a new connection's, counted from zero.
        let fresh =
            c.total_retrans < before.total_retrans || c.data_segs_out < before.data_segs_out;
        let base = if fresh {
            TcpCounters::default()
        } else {
            before
        };
        let retransmitted = u64::from(c.total_retrans - base.total_retrans);
        let sent = u64::from(c.data_segs_out - base.data_segs_out);
        self.segments_sent += sent;
        self.segments_retransmitted += retransmitted;
        if sent > 0 || retransmitted > 0 {
            self.sent.push_back(Sent {
                at: now,
                host: host_of(address).to_string(),
                retransmitted,
                sent,
            });
        }
        self.judge_loss(now);
    }

    /// Whether the window's retransmissions are the watchdog's own side of the network.
    fn judge_loss(&mut self, now: Instant) {
        while self
            .sent
            .front()
            .is_some_and(|s| now.saturating_duration_since(s.at) > LOSS_WINDOW)
        {
            self.sent.pop_front();
        }
        let retransmitted: u64 = self.sent.iter().map(|s| s.retransmitted).sum();
        let sent: u64 = self.sent.iter().map(|s| s.sent).sum();
        let lossy: BTreeSet<&str> = self
            .sent
            .iter()
            .filter(|s| s.retransmitted > 0)
            .map(|s| s.host.as_str())
            .collect();
        let share = retransmitted as f64 / sent.max(1) as f64;
        // Seen on two hosts it is the watchdog's side; then it lasts while any connection
        // still loses packets: brokers that freeze or stall meanwhile leave their
        // connections quiet (one request waiting), not the loss gone, and the one busy
        // connection left resends a segment every few seconds.
        let ongoing = self
            .spells
            .iter()
            .any(|s| s.kind == Sickness::PacketLoss && s.ended.is_none());
        let (segments, hosts) = if ongoing {
            (1, 1)
        } else {
            (LOSS_MIN_SEGMENTS, 2)
        };
        if retransmitted >= segments && share >= LOSS_MIN_SHARE && lossy.len() >= hosts {
            let first = self
                .sent
                .iter()
                .find(|s| s.retransmitted > 0)
                .map_or(now, |s| s.at);
            let detail = format!(
                "its liveness connections to {} broker hosts sent {retransmitted} of {sent} segments again in the last {} ({:.1} %)",
                lossy.len(),
                secs(LOSS_WINDOW),
                share * 100.0
            );
            self.holds(Sickness::PacketLoss, first, share, detail);
        } else {
            self.ends(Sickness::PacketLoss, now);
        }
    }

    /// Spells that ended longer than [`MEMORY`] ago are forgotten.
    fn forget(&mut self, now: Instant) {
        self.spells.retain(|s| {
            s.ended
                .is_none_or(|e| now.saturating_duration_since(e) <= MEMORY)
        });
        self.judge_loss(now);
    }

    fn facts(&self, now: Instant, wall: SystemTime) -> OwnHealthFacts {
        let to_wall = |i: Instant| {
            wall.checked_sub(now.saturating_duration_since(i))
                .unwrap_or(SystemTime::UNIX_EPOCH)
        };
        OwnHealthFacts {
            last_tick: self.last_tick.map(to_wall),
            episodes: self
                .spells
                .iter()
                .map(|s| Episode {
                    kind: s.kind,
                    started: to_wall(s.started),
                    ended: s.ended.map(to_wall),
                    detail: s.detail.clone(),
                })
                .collect(),
            late: self.late.iter().map(|(t, l)| (*t, l.recent(now))).collect(),
            clock_jumps: self.clock_jumps,
            cpu_throttled: self.cpu_throttled,
            segments_sent: self.segments_sent,
            segments_retransmitted: self.segments_retransmitted,
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    state: Mutex<State>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Makes the tick panic once, to show it comes back.
    #[cfg(test)]
    panic_tick: std::sync::atomic::AtomicBool,
}

/// The watchdog's own health, shared by what measures it (its own tasks, the liveness
/// tasks, the round loops) and what shows it. Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct OwnHealth {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl OwnHealth {
    /// Starts the tick and the CPU reads on the current runtime, unless they run already.
    /// Each round loop calls it; the first starts them (again, when a runtime that ran them
    /// ended, as between tests).
    pub fn start(&self) {
        let mut tasks = lock(&self.inner.tasks);
        if !tasks.is_empty() && tasks.iter().all(|t| !t.is_finished()) {
            return;
        }
        for t in tasks.drain(..) {
            t.abort();
        }
        // Supervised: a dead tick would read as a timer silent past its schedule, the
        // watchdog unwell for good, every broker's timing evidence held.
        let weak = Arc::downgrade(&self.inner);
        let w = weak.clone();
        tasks.push(supervise::spawn(Task::OwnHealth, "tick", move || {
            tick(w.clone())
        }));
        tasks.push(supervise::spawn(Task::OwnHealth, "cpu", move || {
            sample_cpu(weak.clone())
        }));
    }

    /// What it measured, as of now.
    pub fn facts(&self) -> OwnHealthFacts {
        lock(&self.inner.state).facts(Instant::now(), SystemTime::now())
    }

    /// A schedule (a liveness request, a round) ran `late` after it was due.
    pub fn late(&self, timer: Timer, late: Duration) {
        lock(&self.inner.state).late(timer, Instant::now(), late);
    }

    /// The liveness connection to `address` counts `c` now.
    pub fn tcp(&self, address: &str, c: TcpCounters) {
        lock(&self.inner.state).tcp(address, Instant::now(), c);
    }
}

/// What a task does once its health is dropped: wait for the abort that the drop sends
/// (`Inner`'s `Drop`), rather than end and be started again by its supervisor.
async fn gone() {
    std::future::pending().await
}

impl Drop for Inner {
    fn drop(&mut self) {
        for t in lock(&self.tasks).drain(..) {
            t.abort();
        }
    }
}

/// The tick: every [`TICK`], how late it fired and how the clocks read. After a pause the
/// schedule starts again from the wake, so a pause is counted once.
async fn tick(health: Weak<Inner>) {
    let mut due = Instant::now() + TICK;
    loop {
        tokio::time::sleep_until(due).await;
        let now = Instant::now();
        let late = now.saturating_duration_since(due);
        let suspended = crate::sys::suspended_since_boot();
        let Some(inner) = health.upgrade() else {
            return gone().await;
        };
        #[cfg(test)]
        if inner
            .panic_tick
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            panic!("the own health tick panics, as the test asked");
        }
        lock(&inner.state).ticked(now, SystemTime::now(), late, suspended);
        drop(inner);
        due += TICK;
        if due <= now {
            due = now + TICK;
        }
    }
}

/// The CPU cgroups' throttled time, every [`CPU_EVERY`], read off the runtime's workers
/// (`model::blocking`): one read at a time, given up after [`CPU_EVERY`], so a hung cgroup
/// file system costs one blocking thread and a missing sample, never a worker.
async fn sample_cpu(health: Weak<Inner>) {
    let pool = crate::model::blocking::Pool::new("reads of the CPU cgroup", 1);
    let mut every = tokio::time::interval(CPU_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let read = pool.run("reading cpu.stat", CPU_EVERY, read::own_cpu_refused);
        let Ok(read) = read.await else {
            continue;
        };
        let Some(inner) = health.upgrade() else {
            return gone().await;
        };
        lock(&inner.state).cpu(Instant::now(), read);
    }
}

#[cfg(test)]
mod tests;
