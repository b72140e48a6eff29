//! The watchdog's own process metrics, under the names every Prometheus client library
//! exports (`process_cpu_seconds_total`, `process_resident_memory_bytes`, ...), so that
//! dashboards and rules written for any exporter work on the watchdog too. Read from
//! `/proc/self` at scrape time, off the runtime (`read_own`); parsing is pure and takes the
//! file texts.
//!
//! A file that cannot be read or parsed leaves its metric out rather than failing the
//! scrape: the watchdog's own figures matter less than the Kafka ones beside them.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::model::blocking::Pool;
use crate::observe::host::stat::parse_stat;

/// Reads of the process's own figures under way at once, at most (scrapes at the same
/// moment each read), and how long a scrape waits for one: `/proc/self` answers at once
/// unless the kernel itself is in trouble, and then the page goes without the figures.
const OWN_READS_CAP: usize = 4;
const OWN_READ_DEADLINE: Duration = Duration::from_secs(1);

/// One look at a process, each figure absent when its file said nothing usable.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessFigures {
    pub cpu_seconds: Option<f64>,
    pub resident_memory_bytes: Option<f64>,
    pub virtual_memory_bytes: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
    pub start_time_seconds: Option<f64>,
}

/// `/proc/<pid>/statm`: sizes in pages; the first is the virtual size, the second the
/// resident set. Returns (virtual, resident) in bytes.
pub fn parse_statm(text: &str, page_size: f64) -> Option<(f64, f64)> {
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    let size = fields.next()??;
    let resident = fields.next()??;
    Some((size as f64 * page_size, resident as f64 * page_size))
}

/// The soft limit of "Max open files" in `/proc/<pid>/limits`; `None` when unlimited.
pub fn parse_max_open_files(limits: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line["Max open files".len()..].split_whitespace().next()?;
    soft.parse::<u64>().ok().map(|n| n as f64)
}

/// The boot time (`btime`, Unix seconds) in `/proc/stat`.
pub fn parse_boot_time(proc_stat: &str) -> Option<f64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|n| n as f64)
}

/// The figures from the texts of `stat`, `statm`, `limits` of the process and the
/// system's `/proc/stat`, and the number of entries of its `fd` directory.
pub fn figures(
    stat: Option<&str>,
    statm: Option<&str>,
    limits: Option<&str>,
    proc_stat: Option<&str>,
    open_fds: Option<usize>,
    clock_ticks: f64,
    page_size: f64,
) -> ProcessFigures {
    let stat = stat.and_then(|s| parse_stat(s).ok());
    let memory = statm.and_then(|s| parse_statm(s, page_size));
    let boot = proc_stat.and_then(parse_boot_time);
    ProcessFigures {
        cpu_seconds: stat
            .as_ref()
            .map(|s| (s.utime_ticks + s.stime_ticks) as f64 / clock_ticks),
        resident_memory_bytes: memory.map(|m| m.1),
        virtual_memory_bytes: memory.map(|m| m.0),
        open_fds: open_fds.map(|n| n as f64),
        max_fds: limits.and_then(parse_max_open_files),
        start_time_seconds: match (stat, boot) {
            (Some(s), Some(b)) => Some(b + s.start_ticks as f64 / clock_ticks),
            _ => None,
        },
    }
}

fn page_size() -> f64 {
    crate::sys::page_size().map_or(4096.0, |p| p as f64)
}

/// Reads the figures of the process `pid_dir` names (`/proc/self` in the daemon).
pub fn read(proc_root: &Path, pid_dir: &str) -> ProcessFigures {
    let dir = proc_root.join(pid_dir);
    let text = |p: &Path| std::fs::read_to_string(p).ok();
    let fds = std::fs::read_dir(dir.join("fd")).ok().map(|d| d.count());
    figures(
        text(&dir.join("stat")).as_deref(),
        text(&dir.join("statm")).as_deref(),
        text(&dir.join("limits")).as_deref(),
        text(&proc_root.join("stat")).as_deref(),
        fds,
        crate::observe::host::clock_ticks(),
        page_size(),
    )
}

/// The watchdog's own figures, read off the runtime's workers (`model::blocking`): none
/// when the read did not end within a second or too many are under way.
pub async fn read_own() -> ProcessFigures {
    static POOL: OnceLock<Pool> = OnceLock::new();
    let pool = POOL.get_or_init(|| Pool::new("reads of /proc/self", OWN_READS_CAP));
    pool.run("reading /proc/self", OWN_READ_DEADLINE, || {
        read(Path::new("/proc"), "self")
    })
    .await
    .unwrap_or_else(|e| {
        tracing::warn!(error = %e, "the process figures are left out of this scrape");
        ProcessFigures::default()
    })
}

/// Registers the figures in `reg`, which must have no prefix: the names are the standard
/// ones, not `kafka_watchdog_*`.
pub fn encode(reg: &mut Registry, f: &ProcessFigures) {
    if let Some(v) = f.cpu_seconds {
        let c = Counter::<f64, AtomicU64>::default();
        c.inc_by(v);
        reg.register(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            c,
        );
    }
    let gauges = [
        (
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            f.resident_memory_bytes,
        ),
        (
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            f.virtual_memory_bytes,
        ),
        (
            "process_open_fds",
            "Number of open file descriptors",
            f.open_fds,
        ),
        (
            "process_max_fds",
            "Maximum number of open file descriptors",
            f.max_fds,
        ),
        (
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            f.start_time_seconds,
        ),
    ];
    for (name, help, value) in gauges {
        if let Some(v) = value {
            let g = Gauge::<f64, AtomicU64>::default();
            g.set(v);
            reg.register(name, help, g);
        }
    }
}

/// `build_info`: the running watchdog's version and its `instance_id`, in the
/// `kafka_watchdog_` registry. The instance id is what stays when a pod restarts with a new
/// address (the scrape's `instance` label changes then): what tells "this watchdog is gone"
/// from "it came back elsewhere".
pub fn encode_build_info(reg: &mut Registry, instance_id: &str) {
    #[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
    struct Version {
        version: &'static str,
        instance_id: String,
    }
    let build: crate::model::metric_kit::GaugeFamily<Version> = crate::model::metric_kit::gauge(
        reg,
        "build_info",
        "The running kafka-watchdog's version and instance_id (always 1)",
    );
    let version = Version {
        version: env!("CARGO_PKG_VERSION"),
        instance_id: instance_id.to_string(),
    };
    crate::model::metric_kit::set(&build, version, 1.0);
}

/// `config_reload_success`: whether the last reload (SIGHUP) was applied.
pub fn encode_reload_success(reg: &mut Registry, applied: bool) {
    use crate::model::metric_kit::{flag, gauge, set, GaugeFamily, NoLabels};
    let g: GaugeFamily<NoLabels> = gauge(
        reg,
        "config_reload_success",
        "1 when the last configuration reload (SIGHUP) was applied, 0 when it was refused",
    );
    set(&g, NoLabels {}, flag(applied));
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "4242 (kafka-watchdog) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 7 0 123400 1073741824 2500 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0";
    const LIMITS: &str =
        "Limit                     Soft Limit           Hard Limit           Units     \n\
        Max cpu time              unlimited            unlimited            seconds   \n\
        Max open files            1024                 524288               files     \n";

    #[test]
    fn figures_from_fixture_texts() {
        let f = figures(
            Some(STAT),
            Some("262144 2500 400 6 0 900 0\n"),
            Some(LIMITS),
            Some("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"),
            Some(12),
            100.0,
            4096.0,
        );
        assert_eq!(
            f,
            ProcessFigures {
                cpu_seconds: Some(3.0),
                resident_memory_bytes: Some(2500.0 * 4096.0),
                virtual_memory_bytes: Some(262_144.0 * 4096.0),
                open_fds: Some(12.0),
                max_fds: Some(1024.0),
                start_time_seconds: Some(1_700_000_000.0 + 1234.0),
            }
        );
    }

    #[test]
    fn unreadable_or_odd_files_leave_their_figures_out() {
        let f = figures(
            Some("garbage"),
            Some("x y"),
            Some("Max open files            unlimited            unlimited            files\n"),
            None,
            None,
            100.0,
            4096.0,
        );
        assert_eq!(f, ProcessFigures::default());
    }

    #[test]
    fn its_own_process_has_every_figure() {
        let f = read(Path::new("/proc"), "self");
        assert!(f.cpu_seconds.is_some_and(|v| v >= 0.0), "{f:?}");
        assert!(f.resident_memory_bytes.is_some_and(|v| v > 0.0), "{f:?}");
        assert!(f.open_fds.is_some_and(|v| v >= 3.0), "{f:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // Started before now, and not before the test binary could have been built.
        let start = f.start_time_seconds.unwrap();
        assert!(
            start <= now + 1.0 && start > now - 86_400.0,
            "{start} vs {now}"
        );
    }
}
