//! The watchdog's own health as measured, encoded at scrape time from its facts (whether it
//! is degraded, and why, is the judge's: `judge::own_health::encode`).

use prometheus_client::registry::Registry;

use crate::model::metric_kit::{counter, gauge, set, CounterFamily, GaugeFamily, NoLabels};
use crate::model::own_health::{OwnHealthFacts, Timer};

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct ScheduleLabels {
    schedule: &'static str,
}

pub fn encode(reg: &mut Registry, f: &OwnHealthFacts) {
    let late = |t: Timer| {
        f.late
            .iter()
            .find(|(timer, _)| *timer == t)
            .map_or(0.0, |(_, d)| d.as_secs_f64())
    };
    let lag: GaugeFamily<NoLabels> = gauge(
        reg,
        "self_event_loop_lag_seconds",
        "The largest lateness of the watchdog's own 100 ms timer in the last 10-20 s: how long its runtime kept ready work waiting (CPU starvation, an overloaded host); seconds when the process was paused",
    );
    set(&lag, NoLabels {}, late(Timer::Tick));
    let schedules: GaugeFamily<ScheduleLabels> = gauge(
        reg,
        "self_schedule_lateness_seconds",
        "The largest lateness, in the last 10-20 s, of the watchdog's liveness requests and rounds against their schedule",
    );
    for t in [Timer::Liveness, Timer::Round] {
        set(
            &schedules,
            ScheduleLabels {
                schedule: t.as_label(),
            },
            late(t),
        );
    }
    let jumps: CounterFamily<NoLabels> = counter(
        reg,
        "self_clock_jumps",
        "Pauses of the watchdog's process (its timer seconds late) and jumps of its clocks (a suspend, the wall clock stepped) since it started",
    );
    jumps.get_or_create(&NoLabels {}).inc_by(f.clock_jumps);
    let throttled = crate::model::metric_kit::float_counter(
        reg,
        "self_cpu_throttled_seconds",
        "CPU time the watchdog's cgroup (or an ancestor) refused it by its quota since it started (cgroup cpu.stat)",
    );
    throttled
        .get_or_create(&NoLabels {})
        .inc_by(f.cpu_throttled.as_secs_f64());
    let sent: CounterFamily<NoLabels> = counter(
        reg,
        "self_liveness_segments",
        "TCP data segments the watchdog's liveness connections sent since it started (TCP_INFO)",
    );
    sent.get_or_create(&NoLabels {}).inc_by(f.segments_sent);
    let again: CounterFamily<NoLabels> = counter(
        reg,
        "self_liveness_segments_retransmitted",
        "TCP segments the watchdog's liveness connections sent again since it started: packets lost on the way",
    );
    again
        .get_or_create(&NoLabels {})
        .inc_by(f.segments_retransmitted);
}
