//! `overhead`: what the daemon costs while it watches the 3-broker lab: peak RSS (VmHWM,
//! startup included) and CPU seconds per minute (utime + stime), once per profile. The
//! canary is on, as it is by default.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;

use super::{lab_up, status_round, Profile, Watchdog};
use crate::output::{num, opt_num, Section, Table};
use crate::sys;

pub struct OverheadOptions {
    pub watchdog_bin: PathBuf,
    pub duration: Duration,
    pub profiles: Vec<Profile>,
}

pub fn run(opts: &OverheadOptions) -> Result<Section> {
    let mut section = Section::new(
        "overhead",
        json!({
            "secs": opts.duration.as_secs(),
            "profiles": opts.profiles.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
        }),
    );
    let lab = lab_up()?;
    let brokers = lab.brokers();
    let mut table = Table::new(
        "kafka-watchdog watching the 3-broker lab",
        &[
            "profile",
            "round_s",
            "measured_s",
            "rounds",
            "cpu_s_per_min",
            "cpu_pct_of_one_core",
            "peak_rss_mib",
            "rss_end_mib",
        ],
    );
    for &profile in &opts.profiles {
        println!(
            "overhead: {} profile for {} s",
            profile.as_str(),
            opts.duration.as_secs()
        );
        let wd = Watchdog::start(&opts.watchdog_bin, "overhead", &lab, profile, None)?;
        if let Err(e) = wd.wait_healthy(&brokers, Duration::from_secs(300)) {
            section.note(format!(
                "{}: measured although not every broker was healthy: {e:#}",
                profile.as_str()
            ));
        }
        let pid = wd.pid();
        let round0 = wd.status_blocking().ok().as_ref().and_then(status_round);
        let cpu0 = sys::cpu_seconds(pid).context("read the watchdog's /proc/<pid>/stat")?;
        let t0 = Instant::now();
        std::thread::sleep(opts.duration);
        let cpu1 = sys::cpu_seconds(pid).context("read the watchdog's /proc/<pid>/stat")?;
        let elapsed = t0.elapsed().as_secs_f64();
        let pid_s = pid.to_string();
        let hwm = sys::status_kib(&pid_s, "VmHWM");
        let rss = sys::status_kib(&pid_s, "VmRSS");
        let round1 = wd.status_blocking().ok().as_ref().and_then(status_round);
        let per_min = (cpu1 - cpu0) / elapsed * 60.0;
        table.push(vec![
            json!(profile.as_str()),
            json!(profile.round_interval().as_secs()),
            num(elapsed, 0),
            json!(match (round0, round1) {
                (Some(a), Some(b)) => Some(b - a),
                _ => None,
            }),
            num(per_min, 2),
            num(per_min / 60.0 * 100.0, 2),
            opt_num(hwm.map(|k| k as f64 / 1024.0), 1),
            opt_num(rss.map(|k| k as f64 / 1024.0), 1),
        ]);
    }
    table.print();
    section.note("peak RSS is VmHWM of the daemon since it started; CPU is utime+stime over the measured window");
    section.tables.push(table);
    Ok(section)
}
