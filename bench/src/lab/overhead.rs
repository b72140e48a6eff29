//! `overhead`: what the daemon costs while it watches the 3-broker lab: peak RSS (VmHWM,
//! startup included) and CPU seconds per minute (utime + stime), once per profile. The
//! canary is on, as it is by default. Then, with one broker frozen, how long a scrape of
//! /metrics takes: it reads the last published snapshot and must not wait on the probes of
//! a broker that hangs (issue 14's goal: under 10 ms). With `--all-probes`, every probe is
//! on (issue 26's goal: at most 1 % of one core and 25 MiB): the controllers asked directly
//! and the transaction coordinator probe too.

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
    pub all_probes: bool,
}

pub fn run(opts: &OverheadOptions) -> Result<Section> {
    let mut section = Section::new(
        "overhead",
        json!({
            "secs": opts.duration.as_secs(),
            "profiles": opts.profiles.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
            "all_probes": opts.all_probes,
        }),
    );
    let mut lab = lab_up()?;
    let brokers = lab.brokers();
    let mut scrapes = Table::new(
        "GET /metrics while broker 2 is frozen (SIGSTOP), one scrape every 250 ms",
        &["profile", "scrapes", "failed", "p50_ms", "p95_ms", "max_ms"],
    );
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
        let wd = if opts.all_probes {
            super::detect::transactions_topic_ready(&lab.bootstrap(), &brokers)?;
            let bootstrap: Vec<String> = lab.bootstrap().split(',').map(str::to_string).collect();
            let yaml = format!(
                "{}    coordinators:\n      transactions: true\n",
                super::controllers_yaml(&lab)
            );
            Watchdog::start_with(
                &opts.watchdog_bin,
                "overhead",
                &bootstrap,
                &yaml,
                profile,
                None,
            )?
        } else {
            Watchdog::start(&opts.watchdog_bin, "overhead", &lab, profile, None)?
        };
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
        scrapes.push(scrape_while_frozen(&mut lab, &wd, profile, &brokers)?);
    }
    table.print();
    scrapes.print();
    section.note("peak RSS is VmHWM of the daemon since it started; CPU is utime+stime over the measured window");
    if opts.all_probes {
        section.note("every probe on: the lab's controller asked directly (`controllers:`) and the transaction coordinator probe (`coordinators.transactions: true`, a transaction per broker every second, its partitions in turn), beside the group coordinator probe, log directories and the canary, which are on by default");
    }
    section.note("a scrape is one HTTP GET on loopback, connection included, timed by the bench; it starts 2 s after the freeze and goes on for 15 s, across the rounds that wait on the frozen broker");
    section.tables.push(table);
    section.tables.push(scrapes);
    Ok(section)
}

/// Freezes broker 2, times /metrics scrapes while it hangs, thaws it and waits until every
/// broker is healthy again.
fn scrape_while_frozen(
    lab: &mut kafka_lab::Lab,
    wd: &Watchdog,
    profile: Profile,
    brokers: &[i32],
) -> Result<Vec<serde_json::Value>> {
    const FROZEN: i32 = 2;
    lab.freeze(FROZEN).context("freeze broker 2")?;
    std::thread::sleep(Duration::from_secs(2));
    let (mut ms, mut failed) = (Vec::new(), 0u32);
    let end = Instant::now() + Duration::from_secs(15);
    while Instant::now() < end {
        let t = Instant::now();
        match wd.get("/metrics") {
            Ok((200, _)) => ms.push(t.elapsed().as_secs_f64() * 1000.0),
            _ => failed += 1,
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    lab.thaw(FROZEN).context("thaw broker 2")?;
    if let Err(e) = wd.wait_healthy(brokers, Duration::from_secs(120)) {
        println!("  not every broker healthy again after the thaw: {e:#}");
    }
    let s = crate::stats::summarize(&ms);
    Ok(vec![
        json!(profile.as_str()),
        json!(ms.len()),
        json!(failed),
        opt_num(s.as_ref().map(|s| s.median), 2),
        opt_num(s.as_ref().map(|s| s.p95), 2),
        opt_num(s.as_ref().map(|s| s.max), 2),
    ])
}
