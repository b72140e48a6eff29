//! `scale`: the pure pipeline (merge, classify, judge via `newest_view` and `Evaluator::evaluate_merged`, then the
//! metrics and status renderers) on synthetic rounds of up to 200k partitions and 500
//! brokers, single-threaded, as the daemon runs it once per round and cluster.
//!
//! Two shapes of round are measured. "all": every answering broker sends the full Metadata
//! answer; that is brokers x partitions entries to merge (100M for 200k x 500), what the
//! watchdog would ask without its budget. "few": only some brokers send every topic and the
//! rest a Metadata answer without them, the shape the daemon uses once partitions x brokers
//! exceed `full_metadata_partition_budget` (by default as many as the daemon would ask).
//!
//! Stage timings (merge, classify, judge) pass the same view by reference for every source,
//! so they fit in memory at any size; the end-to-end `evaluate` needs one owned copy per
//! source and is skipped when that would not fit in the memory budget (the table says so).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use anyhow::Result;
use serde_json::{json, Value};

use kafka_watchdog::judge::health::{classify, Condition};
use kafka_watchdog::judge::report::{ClusterReport, Evaluator};
use kafka_watchdog::judge::verdict::{judge, BrokerState, VerdictSettings};
use kafka_watchdog::model::round::{BrokerId, MetadataView};
use kafka_watchdog::observe::cluster_view::merge;

use crate::output::{num, opt_num, Section, Table};
use crate::stats::median;
use crate::synth::{self, Answer};
use crate::sys;

pub struct ScaleOptions {
    pub partitions: Vec<usize>,
    pub brokers: Vec<usize>,
    pub runs: usize,
    /// None: as many as the daemon asks for every topic with its default budget.
    pub few_sources: Option<usize>,
    /// Which shapes to run: "all" (every broker sends full metadata) and/or "few".
    pub variants: Vec<String>,
    /// Memory the owned observations may take, in GiB; None: half of MemAvailable.
    pub max_mem_gib: Option<f64>,
    /// A stage whose single warm-up run takes longer than this is not repeated.
    pub max_stage_secs: f64,
    /// Where to write each evaluated round's report in full (every verdict and partition
    /// finding, a digest of the merged view, the metrics and status text), so that two builds'
    /// outputs can be compared; None: not written.
    pub dump: Option<std::path::PathBuf>,
}

/// Issue #14's goal: a round of this many partitions and brokers evaluates within this.
pub const GOAL_PARTITIONS: u64 = 2_000_000;
pub const GOAL_BROKERS: u64 = 1_000;
pub const GOAL_EVALUATE_MS: f64 = 250.0;

/// Runs `f` once to warm up and then `runs` times; returns the timings in ms of the measured
/// runs (only the warm-up when it alone exceeded `max_secs`) and the last result.
fn timed<T>(runs: usize, max_secs: f64, mut f: impl FnMut() -> T) -> (Vec<f64>, T) {
    let t = Instant::now();
    let mut last = f();
    let warm = t.elapsed().as_secs_f64();
    if warm > max_secs {
        return (vec![warm * 1000.0], last);
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        drop(last);
        let t = Instant::now();
        last = f();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    (times, last)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn rss_kib() -> u64 {
    sys::status_kib("self", "VmRSS").unwrap_or(0)
}

struct Variant {
    label: &'static str,
    /// None: every broker; Some(None): as many as the daemon asks with its default budget.
    full_sources: Option<Option<usize>>,
}

pub fn run(opts: &ScaleOptions) -> Result<Section> {
    let mut section = Section::new(
        "scale",
        json!({
            "partitions": opts.partitions,
            "brokers": opts.brokers,
            "runs": opts.runs,
            "few_sources": opts.few_sources,
            "variants": opts.variants,
            "partitions_per_topic": synth::PARTITIONS_PER_TOPIC,
            "replication_factor": 3,
        }),
    );
    if sys::build_profile() == "debug" {
        section.note("DEBUG build: these timings are not representative; use --release");
    }
    let budget_kib = opts.max_mem_gib.map_or_else(
        || sys::meminfo_kib("MemAvailable").unwrap_or(0) / 2,
        |g| (g * 1024.0 * 1024.0) as u64,
    );
    let can_reset_peak = sys::reset_peak_rss();
    if !can_reset_peak {
        section.note("cannot reset VmHWM (/proc/self/clear_refs): peak memory is since start");
    }
    section.note(format!(
        "single thread; median of {} runs after one warm-up; memory budget for owned observations {:.1} GiB",
        opts.runs,
        mib(budget_kib) / 1024.0
    ));
    section.note(
        "stage columns (merge/classify/judge) pass one shared view per source by reference; \
         `evaluate` is the round loop's own merge and Evaluator::evaluate_merged on an owned observation (one decoded copy \
         per source, as the daemon holds it); rest = evaluate minus the three stages",
    );
    let mut table = Table::new(
        "Verdict engine per round (ms), memory (MiB)",
        &[
            "partitions",
            "brokers",
            "sources",
            "evaluate_ms",
            "merge_ms",
            "classify_ms",
            "judge_ms",
            "rest_ms",
            "metrics_ms",
            "status_ms",
            "drop_ms",
            "view_mib",
            "observation_mib",
            "eval_peak_mib",
            "metrics_kib",
            "status_kib",
            "verdicts",
            "note",
        ],
    );
    let mut raw = Vec::new();
    let variants = [
        Variant {
            label: "all",
            full_sources: None,
        },
        Variant {
            label: "few",
            full_sources: Some(opts.few_sources),
        },
    ];
    let variants: Vec<&Variant> = variants
        .iter()
        .filter(|v| opts.variants.iter().any(|w| w == v.label))
        .collect();
    for &partitions in &opts.partitions {
        for &brokers in &opts.brokers {
            sys::trim_heap();
            let before = rss_kib();
            let views = synth::views(partitions, brokers);
            // The full and the stale view are about the same size.
            let view_kib = rss_kib().saturating_sub(before) / 2;
            for v in &variants {
                let row = measure(opts, &views, partitions, brokers, v, view_kib, budget_kib)?;
                println!(
                    "  {partitions} partitions x {brokers} brokers, {}: evaluate {} ms (merge {} classify {} judge {}), metrics {} ms, status {} ms",
                    row["sources"].as_str().unwrap_or(""),
                    show(&row["evaluate_ms"]),
                    show(&row["merge_ms"]),
                    show(&row["classify_ms"]),
                    show(&row["judge_ms"]),
                    show(&row["metrics_ms"]),
                    show(&row["status_ms"]),
                );
                table.push(
                    table
                        .columns
                        .iter()
                        .map(|c| row.get(c).cloned().unwrap_or(Value::Null))
                        .collect(),
                );
                raw.push(row);
            }
            drop(views);
        }
    }
    table.print();
    // The goal is checked on the daemon's shape when it ran (see `missed_goals`).
    let few_ran = raw.iter().any(|r| r["variant"] == "few");
    for (label, shape) in [
        ("all", "every broker sending full metadata"),
        ("few", "only the few full sources"),
    ] {
        let largest = raw
            .iter()
            .filter(|r| r["variant"] == label)
            .max_by_key(|r| (r["partitions"].as_u64(), r["brokers"].as_u64()));
        if let Some(w) = largest {
            section.note(largest_note(w, shape, label == "few" || !few_ran));
        }
    }
    section.tables.push(table);
    section.raw = Value::Array(raw);
    Ok(section)
}

/// The figure the issue asks about (one round of the largest size, against issue #14's goal)
/// and the stage that costs most in it.
fn largest_note(w: &Value, shape: &str, checked: bool) -> String {
    let evaluated = w["evaluate_ms"].as_f64();
    let ms = evaluated.or_else(|| stage_sum(w)).unwrap_or(f64::NAN);
    let slowest = ["merge_ms", "classify_ms", "judge_ms", "rest_ms"]
        .iter()
        .filter_map(|k| Some((*k, w[*k].as_f64()?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(k, v)| format!("; slowest part: {} {v:.0} ms", k.trim_end_matches("_ms")))
        .unwrap_or_default();
    let verdict = match evaluated {
        _ if !checked => "checked on the daemon's shape (few), not this one",
        Some(e) if e <= GOAL_EVALUATE_MS => "met",
        Some(_) => "missed",
        None => "not measured: evaluate skipped",
    };
    let size = if (w["partitions"].as_u64(), w["brokers"].as_u64())
        < (Some(GOAL_PARTITIONS), Some(GOAL_BROKERS))
    {
        " (this round is smaller than that)"
    } else {
        ""
    };
    format!(
        "largest round ({} partitions x {} brokers, {shape}): {ms:.0} ms per round ({}){slowest}; \
         issue #14's goal: evaluate <= {GOAL_EVALUATE_MS:.0} ms for a {GOAL_PARTITIONS} x {GOAL_BROKERS} round{size}: {verdict}",
        w["partitions"],
        w["brokers"],
        if evaluated.is_some() {
            "evaluate"
        } else {
            "sum of stages, evaluate skipped"
        },
    )
}

/// Every goal a run missed, in words; empty when every goal was met. The goal is checked on
/// the largest round measured in the daemon's shape, "few" (as many full answers as the
/// daemon asks for, every broker while the round fits its budget), or in "all" when only
/// that ran: every broker sending every topic is more than the daemon ever asks for at the
/// sizes the goal is about. A largest round whose evaluate did not run counts as missed.
pub fn missed_goals(section: &Section) -> Vec<String> {
    let rows = section
        .raw
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let shape = if rows.iter().any(|r| r["variant"] == "few") {
        "few"
    } else {
        "all"
    };
    let rows: Vec<&Value> = rows.iter().filter(|r| r["variant"] == shape).collect();
    let size = |r: &Value| (r["partitions"].as_u64(), r["brokers"].as_u64());
    let Some(largest) = rows.iter().max_by_key(|r| size(r)) else {
        return vec!["no round measured".into()];
    };
    let (partitions, brokers) = (&largest["partitions"], &largest["brokers"]);
    match largest["evaluate_ms"].as_f64() {
        Some(ms) if ms <= GOAL_EVALUATE_MS => Vec::new(),
        Some(ms) => vec![format!(
            "{partitions} partitions x {brokers} brokers ({shape}): evaluate {ms:.1} ms, goal <= {GOAL_EVALUATE_MS:.0} ms"
        )],
        None => vec![format!(
            "{partitions} partitions x {brokers} brokers ({shape}): evaluate not measured (skipped for memory), goal <= {GOAL_EVALUATE_MS:.0} ms"
        )],
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Null => "n/a".into(),
        other => other.to_string(),
    }
}

fn stage_sum(row: &Value) -> Option<f64> {
    Some(row["merge_ms"].as_f64()? + row["classify_ms"].as_f64()? + row["judge_ms"].as_f64()?)
}

fn measure(
    opts: &ScaleOptions,
    views: &synth::Views,
    partitions: usize,
    brokers: usize,
    variant: &Variant,
    view_kib: u64,
    budget_kib: u64,
) -> Result<Value> {
    let full_sources = variant.full_sources.map(|n| {
        n.unwrap_or_else(|| {
            kafka_watchdog::observe::probe::full_sources(
                partitions as u64,
                brokers,
                kafka_watchdog::observe::probe::DEFAULT_FULL_METADATA_BUDGET,
            )
        })
    });
    let (full_n, thin_n) = synth::source_counts(brokers, full_sources);
    let mut row = serde_json::Map::new();
    row.insert("partitions".into(), json!(partitions));
    row.insert("brokers".into(), json!(brokers));
    row.insert("variant".into(), json!(variant.label));
    row.insert(
        "sources".into(),
        json!(format!("{full_n} full + {thin_n} thin")),
    );
    row.insert("view_mib".into(), num(mib(view_kib), 1));
    let settings = VerdictSettings::default();
    let now = SystemTime::now();

    // Stages, on shared views.
    let answers: Vec<(BrokerId, &MetadataView)> = (1..=brokers as i32)
        .filter_map(|id| {
            let view = match synth::answer_of(id, full_sources) {
                Answer::Full => &views.full,
                Answer::Stale => &views.stale,
                Answer::Thin => &views.thin,
                Answer::None => return None,
            };
            Some((id, view))
        })
        .collect();
    let (merge_ms, view) = timed(opts.runs, opts.max_stage_secs, || merge(&answers));
    let min_isr: BTreeMap<String, i32> = views
        .full
        .topics
        .keys()
        .map(|t| (t.clone(), synth::MIN_ISR))
        .collect();
    let (classify_ms, health) = timed(opts.runs, opts.max_stage_secs, || {
        classify(&view, &min_isr, |_| true)
    });
    // judge reads the probes' broker lists, latencies and descriptions, never the topics,
    // so a round of thin answers gives it exactly the work of a full one.
    let thin_obs = synth::observation(brokers, views, |_| Some(views.thin.clone()));
    let memory = BTreeMap::new();
    let (judge_ms, _) = timed(opts.runs, opts.max_stage_secs, || {
        judge(&thin_obs, &view, &health, None, &memory, &settings, now)
    });
    drop((thin_obs, health, view));
    for (k, v) in [
        ("merge_ms", &merge_ms),
        ("classify_ms", &classify_ms),
        ("judge_ms", &judge_ms),
    ] {
        row.insert(k.into(), opt_num(median(v), 2));
        row.insert(format!("{k}_runs"), json!(v));
    }

    // End to end, on an owned observation.
    let need_kib = full_n as u64 * view_kib;
    // The observation, one clone handed to evaluate, and the merge's own candidates.
    if need_kib * 3 > budget_kib {
        row.insert(
            "note".into(),
            json!(format!(
                "evaluate skipped: {full_n} owned full views need ~{:.1} GiB (x3 with the clone and the merge), budget {:.1} GiB",
                mib(need_kib) / 1024.0,
                mib(budget_kib) / 1024.0
            )),
        );
        row.insert("observation_mib".into(), num(mib(need_kib), 0));
        return Ok(Value::Object(row));
    }
    sys::trim_heap();
    let before = rss_kib();
    let obs = synth::round(brokers, views, full_sources);
    row.insert(
        "observation_mib".into(),
        num(mib(rss_kib().saturating_sub(before)), 1),
    );
    let filter: kafka_watchdog::judge::report::TopicFilterFn = Arc::new(|_| true);
    let mut evaluator = Evaluator::new("bench", settings, filter);
    let mut eval_ms = Vec::new();
    let mut drop_ms = Vec::new();
    let mut peak_kib = 0;
    let mut report: Option<ClusterReport> = None;
    for i in 0..=opts.runs {
        let input = synth::decoded_round(&obs);
        if let Some(old) = report.take() {
            let t = Instant::now();
            drop(old);
            drop_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        // Memory is measured on the warm-up round only: it needs the heap trimmed first, and
        // a trimmed heap makes a round pay page faults that a daemon reusing its heap round
        // after round does not.
        if i == 0 {
            sys::trim_heap();
            sys::reset_peak_rss();
        }
        let base = rss_kib();
        let t = Instant::now();
        // The view is merged inside the measure, as the round loop does before it judges.
        let view = std::sync::Arc::new(kafka_watchdog::judge::report::newest_view(&input));
        let r = evaluator.evaluate_merged(input, view, None, now);
        let elapsed = t.elapsed().as_secs_f64() * 1000.0;
        if i == 0 {
            let hwm = sys::status_kib("self", "VmHWM").unwrap_or(0);
            peak_kib = hwm.saturating_sub(base);
        } else {
            eval_ms.push(elapsed);
        }
        report = Some(r);
        if i == 0 && elapsed / 1000.0 > opts.max_stage_secs {
            eval_ms.push(elapsed);
            break;
        }
    }
    let report = report.expect("at least one round ran");
    row.insert("evaluate_ms".into(), opt_num(median(&eval_ms), 2));
    row.insert("evaluate_ms_runs".into(), json!(eval_ms));
    // What evaluate does beyond the three stages (its own bookkeeping across rounds, the
    // report's assembly, dropping the merged view), from the medians.
    let rest = median(&eval_ms).zip(stage_sum(&Value::Object(row.clone())));
    row.insert("rest_ms".into(), opt_num(rest.map(|(e, s)| e - s), 2));
    row.insert("drop_ms".into(), opt_num(median(&drop_ms), 2));
    row.insert("eval_peak_mib".into(), num(mib(peak_kib), 1));
    let extras = kafka_watchdog::serve::metrics::Extras::default();
    let (metrics_ms, text) = timed(opts.runs, opts.max_stage_secs, || {
        kafka_watchdog::serve::metrics::render([&report], &extras)
    });
    row.insert("metrics_ms".into(), opt_num(median(&metrics_ms), 2));
    row.insert("metrics_kib".into(), num(text.len() as f64 / 1024.0, 0));
    let (status_ms, json_text) = timed(opts.runs, opts.max_stage_secs, || {
        kafka_watchdog::serve::status::render("bench", [&report], &extras)
    });
    row.insert("status_ms".into(), opt_num(median(&status_ms), 2));
    row.insert("status_kib".into(), num(json_text.len() as f64 / 1024.0, 0));
    row.insert("verdicts".into(), json!(verdict_summary(&report)));
    row.insert(
        "health".into(),
        json!({
            "observed": report.health.partitions,
            "offline": report.health.count(Condition::Offline),
            "under_min_isr": report.health.count(Condition::UnderMinIsr),
            "under_replicated": report.health.count(Condition::UnderReplicated),
            "split_brain_claims": report.stale_leaders.len(),
        }),
    );
    if let Some(dir) = &opts.dump {
        let name = format!("{}-{partitions}x{brokers}", variant.label);
        dump(dir, &name, &report, &text, &json_text)?;
    }
    Ok(Value::Object(row))
}

/// Writes one round's report in full under `dir`: `<name>.report.txt` (every verdict, every
/// partition finding and per-broker tally, the split-brain claims, disagreements and unclean
/// elections, and a digest of the merged view), `<name>.metrics.txt` and `<name>.status.json`.
fn dump(
    dir: &std::path::Path,
    name: &str,
    r: &ClusterReport,
    metrics: &str,
    status: &str,
) -> Result<()> {
    use std::fmt::Write as _;
    use std::hash::{Hash, Hasher};
    std::fs::create_dir_all(dir)?;
    let mut out = String::new();
    let mut digest = std::collections::hash_map::DefaultHasher::new();
    let mut partitions = 0usize;
    for (topic, t) in &r.view.topics {
        topic.hash(&mut digest);
        (t.is_internal, t.topic_id).hash(&mut digest);
        for p in t.partitions.iter() {
            partitions += 1;
            format!("{p:?}").hash(&mut digest);
        }
    }
    writeln!(
        out,
        "view: {} topics, {partitions} partitions, {} brokers, digest {:016x}, cluster_id {:?}, has_leader_epochs {}",
        r.view.topics.len(),
        r.view.brokers.len(),
        digest.finish(),
        r.cluster_id,
        r.view.has_leader_epochs
    )?;
    writeln!(
        out,
        "reachable {} registered {:?}",
        r.reachable, r.registered
    )?;
    for v in &r.verdicts {
        writeln!(out, "{v:?}")?;
    }
    writeln!(
        out,
        "health: {} partitions, counts {:?}",
        r.health.partitions, r.health.counts
    )?;
    for (id, b) in &r.health.brokers {
        writeln!(out, "broker {id}: {b:?}")?;
    }
    for p in &r.health.problems {
        writeln!(out, "{p:?}")?;
    }
    for s in &r.stale_leaders {
        writeln!(out, "{s:?}")?;
    }
    writeln!(out, "disagreements {:?}", r.disagreements)?;
    for u in &r.unclean_elections {
        writeln!(out, "{u:?}")?;
    }
    std::fs::write(dir.join(format!("{name}.report.txt")), out)?;
    std::fs::write(dir.join(format!("{name}.metrics.txt")), metrics)?;
    std::fs::write(dir.join(format!("{name}.status.json")), status)?;
    Ok(())
}

/// "45 healthy, 2 zombie, ..." so a reader can see the round exercised every rule kind.
fn verdict_summary(r: &ClusterReport) -> String {
    BrokerState::ALL
        .iter()
        .filter_map(|s| {
            let n = r.verdicts.iter().filter(|v| v.state == *s).count();
            (n > 0).then(|| format!("{n} {}", s.as_label()))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(rows: Vec<Value>) -> Section {
        let mut s = Section::new("scale", json!({}));
        s.raw = Value::Array(rows);
        s
    }

    fn row(variant: &str, partitions: u64, evaluate_ms: Option<f64>) -> Value {
        json!({"variant": variant, "partitions": partitions, "brokers": 1000, "evaluate_ms": evaluate_ms})
    }

    #[test]
    fn the_goal_is_checked_on_the_largest_round_of_the_daemons_shape() {
        // A smaller round over the goal, and an "all" round skipped for memory, do not count.
        let met = section(vec![
            row("few", 200_000, Some(300.0)),
            row("few", 2_000_000, Some(249.0)),
            row("all", 2_000_000, None),
        ]);
        assert_eq!(missed_goals(&met), Vec::<String>::new());
        let missed = missed_goals(&section(vec![row("few", 2_000_000, Some(251.0))]));
        assert_eq!(missed.len(), 1, "{missed:?}");
        assert!(missed[0].contains("evaluate 251.0 ms"), "{missed:?}");
        let skipped = missed_goals(&section(vec![row("few", 2_000_000, None)]));
        assert!(skipped[0].contains("not measured"), "{skipped:?}");
        // Only "all" ran: it is what there is to check.
        assert_eq!(
            missed_goals(&section(vec![row("all", 100_000, Some(300.0))])).len(),
            1
        );
        assert_eq!(missed_goals(&section(Vec::new())).len(), 1);
    }
}
