//! `fuzz`: every fuzz target of `fuzz/` (cargo-fuzz: libFuzzer with AddressSanitizer, debug
//! assertions and overflow checks, on the nightly toolchain) run for a while, one after the
//! other: executions, coverage, corpus, peak memory and crashes per target. A crash leaves
//! its input in `fuzz/artifacts/<target>/`; the goal is none.
//!
//! The committed seeds (`fuzz/corpus/<target>/`, and `config/` for `config_load`) are
//! only read; what a run finds goes to `<target dir>/corpus/<target>/`, so the next run
//! starts from there.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use kafka_watchdog::fuzz::seed_dirs;

use crate::output::{num, Section, Table};

pub struct FuzzOptions {
    /// Seconds per target.
    pub secs: u64,
    /// Empty: every target.
    pub targets: Vec<String>,
    /// cargo-fuzz's target directory.
    pub target_dir: PathBuf,
}

/// libFuzzer's limits: any single allocation above 256 MB is a crash (wire_decode also
/// bounds each input's peak heap use by its size); 1 GiB of RSS leaves room for
/// AddressSanitizer's quarantine and a grown corpus; an input taking 10 s is a hang.
const LIBFUZZER_FLAGS: &[&str] = &[
    "-rss_limit_mb=1024",
    "-malloc_limit_mb=256",
    "-timeout=10",
    "-print_final_stats=1",
];

/// What one run of one target printed.
#[derive(Debug, Default)]
struct Stats {
    execs: Option<u64>,
    execs_per_sec: Option<u64>,
    new_units: Option<u64>,
    peak_rss_mb: Option<u64>,
    cov: Option<u64>,
    features: Option<u64>,
    corpus: Option<u64>,
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

pub fn run(o: &FuzzOptions) -> Result<Section> {
    let root = workspace();
    let targets = if o.targets.is_empty() {
        kafka_watchdog::fuzz::TARGETS
            .iter()
            .map(|(n, _)| n.to_string())
            .collect()
    } else {
        o.targets.clone()
    };
    for t in &targets {
        if !kafka_watchdog::fuzz::TARGETS.iter().any(|(n, _)| n == t) {
            bail!("no fuzz target {t}");
        }
    }
    let target_dir = root.join(&o.target_dir);
    let mut section = Section::new(
        "fuzz",
        json!({"secs_per_target": o.secs, "targets": targets.join(",")}),
    );
    println!("fuzz: building the targets (cargo +nightly fuzz build)");
    let build = Command::new("cargo")
        .args(["+nightly", "fuzz", "build", "--fuzz-dir", "fuzz", "--target-dir"])
        .arg(&target_dir)
        .current_dir(&root)
        .status()
        .context("run cargo +nightly fuzz build (cargo install cargo-fuzz; rustup toolchain install nightly)")?;
    if !build.success() {
        bail!("cargo +nightly fuzz build failed: {build}");
    }
    let mut table = Table::new(
        "Fuzz targets: executions, coverage, corpus and crashes",
        &[
            "target",
            "seconds",
            "execs",
            "execs_per_sec",
            "cov",
            "features",
            "corpus",
            "new_inputs",
            "peak_rss_mb",
            "crashes",
        ],
    );
    let mut raw = Vec::new();
    for t in &targets {
        let (row, detail) = run_target(&root, &target_dir, t, o.secs)?;
        table.push(row);
        raw.push(detail);
    }
    table.print();
    section.tables.push(table);
    section.note(format!(
        "cargo-fuzz {} on {}: libFuzzer, AddressSanitizer, debug assertions and overflow checks; libFuzzer flags {} -max_total_time=<seconds>",
        version(&["fuzz", "--version"]),
        version(&["+nightly", "--version"]).replace("cargo ", "cargo nightly "),
        LIBFUZZER_FLAGS.join(" ")
    ));
    section.note(
        "each target starts from its committed seeds (fuzz/corpus/<target>/, config/*.yaml for config_load) and the corpus earlier runs grew in the target directory; corpus = inputs at the end, new_inputs = added by this run; cov/features = libFuzzer's edge coverage and feature counts at the end",
    );
    let crashed: Vec<&str> = raw
        .iter()
        .filter(|r| r["crashes"].as_u64() != Some(0))
        .filter_map(|r| r["target"].as_str())
        .collect();
    section.note(if crashed.is_empty() {
        "no target crashed".to_string()
    } else {
        format!(
            "crashed: {} (inputs in fuzz/artifacts/<target>/)",
            crashed.join(", ")
        )
    });
    section.raw = Value::Array(raw);
    Ok(section)
}

/// Targets that crashed, for `--check`.
pub fn crashed(section: &Section) -> Vec<String> {
    section
        .raw
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["crashes"].as_u64() != Some(0))
        .map(|r| {
            format!(
                "{} crashed ({})",
                r["target"].as_str().unwrap_or("?"),
                r["exit"]
            )
        })
        .collect()
}

fn run_target(root: &Path, target_dir: &Path, t: &str, secs: u64) -> Result<(Vec<Value>, Value)> {
    let work = target_dir.join("corpus").join(t);
    let artifacts = root.join("fuzz/artifacts").join(t);
    std::fs::create_dir_all(&work)?;
    std::fs::create_dir_all(&artifacts)?;
    let before = count_files(&artifacts);
    let log_path = target_dir.join(format!("fuzz-{t}.log"));
    let log = std::fs::File::create(&log_path)?;
    println!("fuzz: {t} for {secs} s (log: {})", log_path.display());
    let started = Instant::now();
    // stdin from /dev/null: config_load reads any file an input names, and a path such
    // as /dev/stdin must not wait for a terminal.
    let status = Command::new("cargo")
        .args([
            "+nightly",
            "fuzz",
            "run",
            "--fuzz-dir",
            "fuzz",
            "--target-dir",
        ])
        .arg(target_dir)
        .arg(t)
        .arg(&work)
        .args(seed_dirs(t).iter().map(|d| root.join(d)))
        .arg("--")
        .arg(format!("-max_total_time={secs}"))
        .args(LIBFUZZER_FLAGS)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .status()?;
    let seconds = started.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let s = parse(&text);
    let crashes = if status.success() {
        0
    } else {
        (count_files(&artifacts) - before).max(1)
    };
    let n = |v: Option<u64>| v.map_or(Value::Null, |v| json!(v));
    let row = vec![
        json!(t),
        num(seconds, 0),
        n(s.execs),
        n(s.execs_per_sec),
        n(s.cov),
        n(s.features),
        n(s.corpus),
        n(s.new_units),
        n(s.peak_rss_mb),
        json!(crashes),
    ];
    let detail = json!({
        "target": t,
        "seconds": seconds,
        "exit": status.code(),
        "execs": s.execs,
        "execs_per_sec": s.execs_per_sec,
        "cov": s.cov,
        "features": s.features,
        "corpus": s.corpus,
        "new_inputs": s.new_units,
        "peak_rss_mb": s.peak_rss_mb,
        "crashes": crashes,
        "log_tail": text.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>(),
    });
    Ok((row, detail))
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.filter_map(|e| e.ok()).count())
}

fn version(args: &[&str]) -> String {
    Command::new("cargo")
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "?".into())
}

/// libFuzzer's final statistics (`stat::name: value`) and its last status line
/// (`#N DONE cov: C ft: F corp: X/...`).
fn parse(log: &str) -> Stats {
    let stat = |name: &str| {
        log.lines()
            .rev()
            .find_map(|l| l.strip_prefix(&format!("stat::{name}:")))
            .and_then(|v| v.trim().parse().ok())
    };
    let last = log
        .lines()
        .rev()
        .find(|l| l.starts_with('#') && l.contains(" cov: "))
        .unwrap_or("");
    let after = |key: &str| {
        let rest = last.split(&format!(" {key}: ")).nth(1)?;
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    Stats {
        execs: stat("number_of_executed_units"),
        execs_per_sec: stat("average_exec_per_sec"),
        new_units: stat("new_units_added"),
        peak_rss_mb: stat("peak_rss_mb"),
        cov: after("cov"),
        features: after("ft"),
        corpus: after("corp"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_final_statistics_are_read() {
        let log = "INFO: Seed: 1\n#2\tINITED cov: 10 ft: 11 corp: 1/1b exec/s: 0 rss: 30Mb\n\
                   #53110\tDONE   cov: 1404 ft: 5911 corp: 512/88Kb lim: 4096 exec/s: 885 rss: 412Mb\n\
                   Done 53110 runs in 61 second(s)\nstat::number_of_executed_units: 53110\n\
                   stat::average_exec_per_sec:     885\nstat::new_units_added:          371\n\
                   stat::slowest_unit_time_sec:    0\nstat::peak_rss_mb:              412\n";
        let s = parse(log);
        assert_eq!(
            (s.execs, s.execs_per_sec, s.new_units, s.peak_rss_mb),
            (Some(53110), Some(885), Some(371), Some(412))
        );
        assert_eq!(
            (s.cov, s.features, s.corpus),
            (Some(1404), Some(5911), Some(512))
        );
        assert_eq!(parse("").execs, None);
    }
}
