//! The watchdog's own health as measured, encoded at scrape time from its facts (whether it
//! is degraded, and why, is the judge's: `judge::own_health::encode`). Series without
//! labels are plain metrics (`name value`), not families.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::model::metric_kit::{gauge, set, GaugeFamily};
use crate::model::own_health::{OwnHealthFacts, Timer};

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct ScheduleLabels {
    schedule: &'static str,
}

fn plain_gauge(reg: &mut Registry, name: &str, help: &str, v: f64) {
    let g = Gauge::<f64, AtomicU64>::default();
    g.set(v);
    reg.register(name, help, g);
}

fn plain_counter(reg: &mut Registry, name: &str, help: &str, v: u64) {
    let c = Counter::<u64>::default();
    c.inc_by(v);
    reg.register(name, help, c);
}

pub fn encode(reg: &mut Registry, f: &OwnHealthFacts) {
    let late = |t: Timer| {
        f.late
            .iter()
            .find(|(timer, _)| *timer == t)
            .map_or(0.0, |(_, d)| d.as_secs_f64())
    };
    plain_gauge(
        reg,
        "self_event_loop_lag_seconds",
        "The largest lateness of the watchdog's own 100 ms timer in the last 10-20 s: how long its runtime kept ready work waiting (CPU starvation, an overloaded host); seconds when the process was paused",
        late(Timer::Tick),
    );
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
    plain_counter(
        reg,
        "self_clock_jumps",
        "Pauses of the watchdog's process (its timer seconds late) and jumps of its clocks (a suspend, the wall clock stepped) since it started",
        f.clock_jumps,
    );
    let throttled = Counter::<f64, AtomicU64>::default();
    throttled.inc_by(f.cpu_throttled.as_secs_f64());
    reg.register(
        "self_cpu_throttled_seconds",
        "CPU time the watchdog's cgroup (or an ancestor) refused it by its quota since it started (cgroup cpu.stat)",
        throttled,
    );
    plain_counter(
        reg,
        "self_liveness_segments",
        "TCP data segments the watchdog's liveness connections sent since it started (TCP_INFO)",
        f.segments_sent,
    );
    plain_counter(
        reg,
        "self_liveness_segments_retransmitted",
        "TCP segments the watchdog's liveness connections sent again since it started: packets lost on the way",
        f.segments_retransmitted,
    );
}
