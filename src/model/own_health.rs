//! The watchdog's own health as data (issue 38 item 4): what `observe::own_health` measured
//! of the process itself (timers firing late, its clocks jumping, CPU its cgroup refused it,
//! packets it had to send again), and what the pure `judge::own_health` reads to decide
//! whether its timing evidence against brokers is sound. Times are wall-clock, converted from
//! the monotonic clock when the facts are taken, as the liveness facts are, so the two
//! compare with one `now`.

use std::time::{Duration, SystemTime};

/// How often the watchdog's own timer fires: its lateness is the event loop's lag.
pub const TICK: Duration = Duration::from_millis(100);
/// A timer this late means the watchdog's measurements of silence are off by as much: a
/// quarter of the default liveness floor (1 s), far above a healthy runtime's few ms.
pub const LAG_LIMIT: Duration = Duration::from_millis(250);
/// A timer this late is a pause of the process (SIGSTOP, a VM paused, a freeze of the
/// host), not a lag.
pub const PAUSE_MIN: Duration = Duration::from_secs(2);
/// The clocks moving against each other by this much between two ticks is a jump: a
/// suspend (CLOCK_BOOTTIME against CLOCK_MONOTONIC) or the wall clock stepped.
pub const JUMP_MIN: Duration = Duration::from_secs(1);
/// Episodes are remembered this long: as long as the liveness check remembers the stalls
/// (`observe::liveness::FLAP_WINDOW`) an episode may have caused.
pub const MEMORY: Duration = Duration::from_secs(120);

/// A way the watchdog itself can be unwell. Its word is the `reason` label of
/// `self_degraded`, a bounded set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sickness {
    /// Its timers fire late (CPU starvation, an overloaded host, a blocked runtime).
    EventLoopLag,
    /// A timer fired seconds late: the process did not run at all meanwhile (stopped and
    /// continued, its VM paused).
    Paused,
    /// Its clocks jumped against each other: the host was suspended, or the wall clock
    /// was stepped.
    ClockJump,
    /// Its cgroup refused it CPU (cgroup v2 `cpu.stat` throttled time) for a good part of
    /// the last second.
    CpuThrottled,
    /// Its own connections to brokers on more than one host send segments again: packets
    /// are lost on its own side of the network.
    PacketLoss,
}

impl Sickness {
    pub const ALL: [Sickness; 5] = [
        Sickness::EventLoopLag,
        Sickness::Paused,
        Sickness::ClockJump,
        Sickness::CpuThrottled,
        Sickness::PacketLoss,
    ];

    pub fn as_label(self) -> &'static str {
        match self {
            Sickness::EventLoopLag => "event_loop_lag",
            Sickness::Paused => "paused",
            Sickness::ClockJump => "clock_jump",
            Sickness::CpuThrottled => "cpu_throttled",
            Sickness::PacketLoss => "packet_loss",
        }
    }
}

/// One spell of one sickness.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Episode {
    pub kind: Sickness,
    #[serde(skip)]
    pub started: SystemTime,
    /// `None` while it lasts.
    #[serde(skip)]
    pub ended: Option<SystemTime>,
    /// What was measured, in words ("its 100 ms timer fired 30.2 s late").
    pub detail: String,
}

/// Which of the watchdog's own schedules a lateness was measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Timer {
    /// The own-health tick, every [`TICK`]: the event loop's lag.
    Tick,
    /// A broker's liveness request, every `liveness_interval_ms`.
    Liveness,
    /// A cluster's round, at its interval.
    Round,
}

impl Timer {
    pub const ALL: [Timer; 3] = [Timer::Tick, Timer::Liveness, Timer::Round];

    pub fn as_label(self) -> &'static str {
        match self {
            Timer::Tick => "tick",
            Timer::Liveness => "liveness",
            Timer::Round => "round",
        }
    }
}

/// What the watchdog measured of itself, as of when the facts were taken.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OwnHealthFacts {
    /// When its own timer last fired; `None` before it first did (nothing is measured then,
    /// and nothing is doubted).
    pub last_tick: Option<SystemTime>,
    /// Episodes within [`MEMORY`], oldest first.
    pub episodes: Vec<Episode>,
    /// Per schedule, the latest lateness within the last 10 s.
    pub late: Vec<(Timer, Duration)>,
    /// Pauses and clock jumps since the watchdog started.
    pub clock_jumps: u64,
    /// CPU time its cgroup (or an ancestor) refused it since the watchdog started.
    pub cpu_throttled: Duration,
    /// Segments its liveness connections sent, and sent again, since it started.
    pub segments_sent: u64,
    pub segments_retransmitted: u64,
}
