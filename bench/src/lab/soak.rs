//! `false-positives`: a healthy lab watched for `--soak-secs`, then `--restarts` rolling
//! restarts (every broker in turn: controlled shutdown, start, wait until nothing is
//! under-replicated). Every round's verdicts are read from /status and counted by state, per
//! phase, with the episodes (a broker entering a state) and the webhooks received. During
//! the soak anything but `healthy` is a false positive; during restarts `down` for the
//! stopped broker and `degraded` while it catches up are right, and `zombie` never is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use kafka_lab::sink::Sink;
use serde_json::{json, Value};

use super::recorder::{Recorder, STATES};
use super::{lab_up, wait_fully_replicated, KafkaEyes, Profile, Watchdog};
use crate::output::{Section, Table};

pub struct SoakOptions {
    pub watchdog_bin: PathBuf,
    pub soak: Duration,
    pub restarts: usize,
    pub profile: Profile,
}

pub fn run(opts: &SoakOptions) -> Result<Section> {
    let mut section = Section::new(
        "false-positives",
        json!({
            "soak_secs": opts.soak.as_secs(),
            "restarts": opts.restarts,
            "profile": opts.profile.as_str(),
        }),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut lab = lab_up()?;
    let brokers = lab.brokers();
    let sink = Arc::new(rt.block_on(Sink::start("127.0.0.1:0".parse()?))?);
    let wd = Watchdog::start(
        &opts.watchdog_bin,
        "false-positives",
        &lab,
        opts.profile,
        Some(&sink.url()),
    )?;
    // Counting starts once the watchdog has seen the healthy cluster (its canary topic may
    // need a few rounds to be set up).
    if let Err(e) = wd.wait_healthy(&brokers, Duration::from_secs(300)) {
        section.note(format!(
            "the soak started before every broker was healthy: {e:#}"
        ));
    }
    let webhooks_before = sink.received().len();
    let recorder = Recorder::start(
        &rt,
        wd.port,
        Some(sink.clone()),
        webhooks_before,
        "soak",
        &brokers,
    );

    println!("false-positives: soaking for {} s", opts.soak.as_secs());
    std::thread::sleep(opts.soak);

    let mut eyes = KafkaEyes::new();
    let started = Instant::now();
    if opts.restarts > 0 {
        recorder.phase("restarts");
    }
    for r in 0..opts.restarts {
        for &b in &brokers {
            println!("  restart {}: broker {b}", r + 1);
            lab.stop(b)?;
            lab.start(b)?;
            rt.block_on(wait_fully_replicated(
                &mut eyes,
                &lab,
                Duration::from_secs(300),
            ))?;
        }
    }
    if opts.restarts > 0 {
        // The watchdog's incidents close after a few good rounds; they belong to the restarts.
        let tail = opts.profile.round_interval() * (super::RESOLVE_AFTER_ROUNDS + 2);
        std::thread::sleep(tail);
    }
    let restarts_secs = started.elapsed().as_secs_f64();
    let t = recorder.finish(&rt);
    let mut columns = vec!["phase", "rounds"];
    columns.extend(STATES.iter().copied());
    columns.extend(STATES.iter().skip(1).map(|s| match *s {
        "degraded" => "degraded episodes",
        "zombie" => "zombie episodes",
        "down" => "down episodes",
        _ => "unknown episodes",
    }));
    let mut verdicts = Table::new(
        "Verdicts per phase (broker-rounds by state, and episodes)",
        &columns,
    );
    let mut zombies = 0;
    let mut soak_false = 0;
    for ph in ["soak", "restarts"] {
        let Some(v) = t.verdicts.get(ph) else {
            continue;
        };
        let e = t.episodes.get(ph).cloned().unwrap_or_default();
        let mut row = vec![json!(ph), json!(t.rounds.get(ph).map_or(0, BTreeSet::len))];
        for s in STATES {
            row.push(json!(v.get(s).copied().unwrap_or(0)));
        }
        for s in STATES.iter().skip(1) {
            row.push(json!(e.get(*s).copied().unwrap_or(0)));
        }
        zombies += v.get("zombie").copied().unwrap_or(0);
        if ph == "soak" {
            soak_false += STATES
                .iter()
                .skip(1)
                .map(|s| v.get(*s).copied().unwrap_or(0))
                .sum::<u64>();
        }
        verdicts.push(row);
    }
    let mut by_state: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for i in t.incidents.values() {
        *by_state
            .entry((i.phase.clone(), i.kind.clone(), i.state.clone()))
            .or_insert(0) += 1;
    }
    let mut incidents = Table::new(
        "Incidents seen open in /status, by phase, kind and state",
        &["phase", "kind", "state", "count"],
    );
    for ((ph, kind, state), n) in &by_state {
        incidents.push(vec![json!(ph), json!(kind), json!(state), json!(n)]);
        if state == "zombie" {
            zombies += n;
        }
    }
    if by_state.is_empty() {
        incidents.push(vec![
            json!(if t.incidents_listed {
                "none"
            } else {
                "n/a: /status lists no incidents"
            }),
            Value::Null,
            Value::Null,
            json!(0),
        ]);
    }
    let mut hooks: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for (_, _, b) in &t.webhooks {
        let f = |k: &str| b[k].as_str().unwrap_or("-").to_string();
        *hooks
            .entry((f("event"), f("kind"), f("state")))
            .or_insert(0) += 1;
    }
    let mut webhooks = Table::new(
        "Webhooks received (soak and restarts)",
        &["event", "kind", "state", "count"],
    );
    for ((event, kind, state), n) in &hooks {
        webhooks.push(vec![json!(event), json!(kind), json!(state), json!(n)]);
    }
    if hooks.is_empty() {
        webhooks.push(vec![json!("none"), Value::Null, Value::Null, json!(0)]);
    }
    verdicts.print();
    incidents.print();
    webhooks.print();
    section.note(format!(
        "zombie verdicts and incidents: {zombies} ({}); non-healthy verdicts during the healthy soak: {soak_false}",
        if zombies == 0 { "PASS" } else { "FAIL: must be 0" }
    ));
    section.note(format!(
        "{} rolling restart(s) of {} brokers took {restarts_secs:.0} s including the tail; `down` there is the stopped broker",
        opts.restarts,
        brokers.len()
    ));
    section.tables.push(verdicts);
    section.tables.push(incidents);
    section.tables.push(webhooks);
    section.raw = json!({ "episodes": t.episodes_seen });
    Ok(section)
}
