//! kafka-watchdog-bench: the benchmarks of issue 7. `scale` and `fanout` need nothing but
//! this machine, `fuzz` the nightly toolchain and cargo-fuzz; `detect`, `false-positives`, `routine`, `noise` and `overhead` drive the real kafka-lab cluster
//! and the real kafka-watchdog binary. Every subcommand appends its section to
//! `target/bench/report.json` and regenerates `target/bench/report.md`.

mod fake;
mod fanout;
mod fuzz;
mod lab;
mod output;
mod scale;
mod stats;
mod synth;
mod sys;
mod watchdog_faults;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

use crate::output::Output;

#[derive(Parser)]
#[command(
    name = "kafka-watchdog-bench",
    about = "Benchmarks of kafka-watchdog (issue 7)"
)]
struct Cli {
    /// Where report.json and report.md go (default: the workspace's target/bench).
    #[arg(long, global = true)]
    out: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Verdict engine on synthetic rounds (no network, no lab).
    Scale(ScaleArgs),
    /// Per-broker probe fan-out against local fake listeners (no lab).
    Fanout(FanoutArgs),
    /// Detection latency per fault on the real lab.
    Detect(DetectArgs),
    /// Healthy soak and rolling restarts on the real lab: incidents by state.
    FalsePositives(FalsePositivesArgs),
    /// A day in the life on the real lab (SASL_SSL): routine operations under the watchdog;
    /// zombies, critical notifications, losses and remediations must be 0.
    Routine(RoutineArgs),
    /// The daemon's peak RSS and CPU use while watching the lab.
    Overhead(OverheadArgs),
    /// Notification noise per fault episode on the real lab (issue #31): messages one
    /// receiver gets from the first `opened` to the `resolved`, and the verdict on /metrics.
    Noise(NoiseArgs),
    /// The watchdog's own faults on the real lab (issue #27): SIGKILLs at random points
    /// around incidents (every page delivered, none resolved before it opened), and a
    /// flood of slow and greedy HTTP clients (no failed /healthz, no broker incident);
    /// with `--unwell`, the watchdog starved, paused or losing packets (issue 38): no
    /// page naming a healthy broker.
    OwnFaults(OwnFaultsArgs),
    /// Every fuzz target of fuzz/ for a while (cargo-fuzz, nightly): executions, coverage
    /// and crashes per target (issue 38 item 9).
    Fuzz(FuzzArgs),
    /// scale + fanout with their defaults.
    All,
    /// detect + false-positives + overhead with their defaults (and the given watchdog).
    Lab(LabAllArgs),
    /// Only regenerate report.md from report.json.
    Report,
}

#[derive(Parser, Clone)]
struct ScaleArgs {
    /// Partition counts, comma-separated.
    #[arg(long, default_value = "10000,100000,200000", value_delimiter = ',')]
    partitions: Vec<usize>,
    /// Broker counts, comma-separated.
    #[arg(long, default_value = "50,200,500", value_delimiter = ',')]
    brokers: Vec<usize>,
    /// Measured runs per figure (after one warm-up).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Brokers sending full metadata in the "few" variant (the others send a thin answer).
    /// Default: as many as the daemon asks with its default full_metadata_partition_budget.
    #[arg(long)]
    few_sources: Option<usize>,
    /// Round shapes: all (every broker sends full metadata), few (only --few-sources do).
    #[arg(long, default_value = "all,few", value_delimiter = ',', value_parser = ["all", "few"])]
    variants: Vec<String>,
    /// Memory the owned observations may take (default: half of MemAvailable).
    #[arg(long)]
    max_mem_gib: Option<f64>,
    /// A stage whose warm-up run alone takes longer is reported from that single run.
    #[arg(long, default_value_t = 20.0)]
    max_stage_secs: f64,
    /// Exit non-zero when the largest round's evaluate takes longer than issue #14's goal
    /// (250 ms, set for a 2M-partition x 1,000-broker round), in the daemon's shape (few)
    /// when that ran.
    #[arg(long)]
    check: bool,
    /// Write each evaluated round's full report (verdicts, partition findings, metrics and
    /// status text) to this directory, to compare the outputs of two builds.
    #[arg(long)]
    dump: Option<PathBuf>,
}

impl Default for ScaleArgs {
    fn default() -> Self {
        ScaleArgs::parse_from(["scale"])
    }
}

#[derive(Parser, Clone)]
struct FanoutArgs {
    /// Listener counts, comma-separated.
    #[arg(long, default_value = "50,200,500", value_delimiter = ',')]
    brokers: Vec<usize>,
    /// Listener behaviours: answer, hang, refuse, mix.
    #[arg(
        long,
        value_enum,
        default_value = "answer,hang,refuse,mix",
        value_delimiter = ','
    )]
    kinds: Vec<fake::Kind>,
    /// Measured rounds per combination (after the discovery round).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The watchdog's defaults.
    #[arg(long, default_value_t = 2000)]
    connect_timeout_ms: u64,
    #[arg(long, default_value_t = 3000)]
    request_timeout_ms: u64,
    /// Allowed excess of a round over the larger timeout.
    #[arg(long, default_value_t = 500)]
    margin_ms: u64,
    /// Brokers whose continuous liveness check is measured (answering listeners), comma-
    /// separated; empty: none.
    #[arg(long, default_value = "3,1000", value_delimiter = ',')]
    liveness_brokers: Vec<usize>,
    /// Seconds the liveness check's CPU is measured for, per broker count.
    #[arg(long, default_value_t = 20)]
    liveness_secs: u64,
}

impl Default for FanoutArgs {
    fn default() -> Self {
        FanoutArgs::parse_from(["fanout"])
    }
}

#[derive(Args, Clone)]
struct WatchdogArg {
    /// The kafka-watchdog binary to run (build it with `cargo build --release`).
    #[arg(long, default_value = "target/release/kafka-watchdog")]
    watchdog_bin: PathBuf,
}

#[derive(Parser, Clone)]
struct DetectArgs {
    #[command(flatten)]
    watchdog: WatchdogArg,
    /// Trials per fault and profile; p95 needs at least 10 to mean anything.
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// Exit non-zero when a detection goal is missed (p95 of state and webhook latency per
    /// fault, and no broker or controller named that was not faulted).
    #[arg(long)]
    check: bool,
    /// default (round 10 s, request timeout 3 s), aggressive (round 2 s, request timeout 1 s).
    #[arg(
        long,
        value_enum,
        default_value = "default,aggressive",
        value_delimiter = ','
    )]
    profiles: Vec<lab::Profile>,
    /// freeze, cut-replication, isolate, kill, kill-two, stall, stall-fetchers on the lab
    /// with one controller; the control plane's quorum-freeze there too, controller-freeze,
    /// controller-stall and metadata-stall on a lab of three controllers (the lab is set
    /// up again, at most once a run, when the layout changes); group-coordinator-stall (a
    /// broker leading a __consumer_offsets partition) on the one-controller lab.
    #[arg(
        long,
        value_enum,
        default_value = "freeze,cut-replication,isolate,kill,kill-two,stall,stall-fetchers,quorum-freeze,controller-freeze,controller-stall,metadata-stall,group-coordinator-stall",
        value_delimiter = ','
    )]
    faults: Vec<lab::detect::Fault>,
    /// Give up on a trial's remaining events after this long.
    #[arg(long, default_value_t = 120)]
    trial_timeout_secs: u64,
}

#[derive(Parser, Clone)]
struct FalsePositivesArgs {
    #[command(flatten)]
    watchdog: WatchdogArg,
    #[arg(long, default_value_t = 300)]
    soak_secs: u64,
    /// Rolling restarts: every broker stopped (controlled shutdown) and started, in turn.
    #[arg(long, default_value_t = 1)]
    restarts: usize,
    #[arg(long, value_enum, default_value = "default")]
    profile: lab::Profile,
}

#[derive(Parser, Clone)]
struct RoutineArgs {
    #[command(flatten)]
    watchdog: WatchdogArg,
    /// Length of the whole routine; the phases share it (shorter runs are for debugging:
    /// the broker added under a throttle then catches up faster than the watchdog's
    /// two-minute allowance).
    #[arg(long, default_value_t = 20.0)]
    minutes: f64,
    /// Exit non-zero when any zombie verdict, critical notification, loss report or
    /// remediation decision occurred, or a phase could not be carried out.
    #[arg(long)]
    check: bool,
}

#[derive(Parser, Clone)]
struct NoiseArgs {
    #[command(flatten)]
    watchdog: WatchdogArg,
    /// freeze, kill, flap, cpu, gc-long, gc-short, restart-stall.
    #[arg(
        long,
        value_enum,
        default_value = lab::noise::ALL_EPISODES,
        value_delimiter = ','
    )]
    episodes: Vec<lab::noise::Episode>,
    /// Trials of restart-stall (its goal is a p95 over them); the other episodes run once.
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// Exit non-zero when a goal of issue #31 is missed.
    #[arg(long)]
    check: bool,
}

#[derive(Parser, Clone)]
struct OwnFaultsArgs {
    #[command(flatten)]
    watchdog: WatchdogArg,
    /// SIGKILLs in all, two per freeze episode.
    #[arg(long, default_value_t = 20)]
    kills: usize,
    /// Seconds of HTTP flood.
    #[arg(long, default_value_t = 60)]
    flood_secs: u64,
    /// Instead of the kills and the flood, the watchdog itself made unwell (issue 38 item
    /// 4): starved of CPU, stopped and continued, losing packets; each on a healthy
    /// cluster, then with a broker frozen and one stalled during it.
    #[arg(long, value_enum, value_delimiter = ',', num_args = 1..)]
    unwell: Vec<lab::unwell::Sickness>,
    /// `--unwell starve`: seconds held to `--starve-percent` of one CPU.
    #[arg(long, default_value_t = 120)]
    starve_secs: u64,
    #[arg(long, default_value_t = 10)]
    starve_percent: u32,
    /// `--unwell pause`: seconds stopped (SIGSTOP) before SIGCONT.
    #[arg(long, default_value_t = 30)]
    pause_secs: u64,
    /// `--unwell loss`: seconds during which `--loss-percent` of its TCP packets are dropped.
    #[arg(long, default_value_t = 120)]
    loss_secs: u64,
    #[arg(long, default_value_t = 10)]
    loss_percent: u32,
    /// Exit non-zero when a goal is missed.
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    watchdog_faults: watchdog_faults::WatchdogFaultsArgs,
}

#[derive(Parser, Clone)]
struct FuzzArgs {
    /// Seconds per target.
    #[arg(long, default_value_t = 120)]
    secs: u64,
    /// Targets, comma-separated (default: every one of kafka_watchdog::fuzz::TARGETS).
    #[arg(long, value_delimiter = ',')]
    targets: Vec<String>,
    /// cargo-fuzz's target directory, under the workspace.
    #[arg(long, default_value = "target/fuzz")]
    target_dir: PathBuf,
    /// Exit non-zero when a target crashed.
    #[arg(long)]
    check: bool,
}

#[derive(Parser, Clone)]
struct OverheadArgs {
    #[command(flatten)]
    watchdog: WatchdogArg,
    #[arg(long, default_value_t = 60)]
    secs: u64,
    #[arg(
        long,
        value_enum,
        default_value = "default,aggressive",
        value_delimiter = ','
    )]
    profiles: Vec<lab::Profile>,
    /// Every probe on (issue 26): the controllers asked directly (`controllers:`) and the
    /// transaction coordinator probe (`coordinators.transactions`, default settings) beside
    /// the defaults (group coordinators, log directories, the canary).
    #[arg(long)]
    all_probes: bool,
}

#[derive(Args, Clone)]
struct LabAllArgs {
    #[command(flatten)]
    watchdog: WatchdogArg,
    #[arg(long, default_value_t = 5)]
    trials: usize,
}

fn default_out() -> PathBuf {
    // The workspace root is the bench crate's parent, wherever cargo was started from.
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(|p| p.join("target").join("bench"))
        .unwrap_or_else(|| PathBuf::from("target/bench"))
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let out = Output::new(cli.out.unwrap_or_else(default_out));
    println!("kafka-watchdog-bench ({} build)", sys::build_profile());
    match cli.command {
        Command::Scale(a) => run_scale(&out, &a),
        Command::Fanout(a) => run_fanout(&out, &a),
        Command::Detect(a) => run_detect(&out, &a),
        Command::FalsePositives(a) => run_false_positives(&out, &a),
        Command::Routine(a) => run_routine(&out, &a),
        Command::Overhead(a) => run_overhead(&out, &a),
        Command::Noise(a) => run_noise(&out, &a),
        Command::OwnFaults(a) => run_own_faults(&out, &a),
        Command::Fuzz(a) => run_fuzz(&out, &a),
        Command::All => {
            run_scale(&out, &ScaleArgs::default())?;
            run_fanout(&out, &FanoutArgs::default())
        }
        Command::Lab(a) => {
            let detect = DetectArgs {
                watchdog: a.watchdog.clone(),
                trials: a.trials,
                ..DetectArgs::parse_from(["detect"])
            };
            run_detect(&out, &detect)?;
            let fp = FalsePositivesArgs {
                watchdog: a.watchdog.clone(),
                ..FalsePositivesArgs::parse_from(["false-positives"])
            };
            run_false_positives(&out, &fp)?;
            let oh = OverheadArgs {
                watchdog: a.watchdog,
                ..OverheadArgs::parse_from(["overhead"])
            };
            run_overhead(&out, &oh)
        }
        Command::Report => out.regenerate(),
    }
}

fn run_scale(out: &Output, a: &ScaleArgs) -> Result<()> {
    let section = scale::run(&scale::ScaleOptions {
        partitions: a.partitions.clone(),
        brokers: a.brokers.clone(),
        runs: a.runs,
        few_sources: a.few_sources,
        variants: a.variants.clone(),
        max_mem_gib: a.max_mem_gib,
        max_stage_secs: a.max_stage_secs,
        dump: a.dump.clone(),
    })?;
    let missed = scale::missed_goals(&section);
    out.append(section)?;
    goals("scale", "scale", &missed, a.check)
}

/// Prints whether the goals of `bench` were met; with `check`, a missed one is an error.
fn goals(bench: &str, what: &str, missed: &[String], check: bool) -> Result<()> {
    if missed.is_empty() {
        println!("{bench}: every goal met");
        return Ok(());
    }
    println!("{bench}: goals missed:");
    for m in missed {
        println!("  {m}");
    }
    if check {
        anyhow::bail!("{} {what} goal(s) missed", missed.len());
    }
    Ok(())
}

fn run_fanout(out: &Output, a: &FanoutArgs) -> Result<()> {
    let section = fanout::run(&fanout::FanoutOptions {
        brokers: a.brokers.clone(),
        kinds: a.kinds.clone(),
        rounds: a.rounds,
        connect_timeout: std::time::Duration::from_millis(a.connect_timeout_ms),
        request_timeout: std::time::Duration::from_millis(a.request_timeout_ms),
        margin: std::time::Duration::from_millis(a.margin_ms),
        liveness_brokers: a.liveness_brokers.clone(),
        liveness_for: std::time::Duration::from_secs(a.liveness_secs),
    })?;
    out.append(section)
}

fn run_detect(out: &Output, a: &DetectArgs) -> Result<()> {
    let section = lab::detect::run(&lab::detect::DetectOptions {
        watchdog_bin: a.watchdog.watchdog_bin.clone(),
        trials: a.trials,
        profiles: a.profiles.clone(),
        faults: a.faults.clone(),
        trial_timeout: std::time::Duration::from_secs(a.trial_timeout_secs),
    })?;
    let missed = lab::detect::missed_goals(&section);
    out.append(section)?;
    goals("detect", "detection", &missed, a.check)
}

fn run_false_positives(out: &Output, a: &FalsePositivesArgs) -> Result<()> {
    let section = lab::soak::run(&lab::soak::SoakOptions {
        watchdog_bin: a.watchdog.watchdog_bin.clone(),
        soak: std::time::Duration::from_secs(a.soak_secs),
        restarts: a.restarts,
        profile: a.profile,
    })?;
    out.append(section)
}

fn run_routine(out: &Output, a: &RoutineArgs) -> Result<()> {
    let (section, verdict) = lab::routine::run(&lab::routine::RoutineOptions {
        watchdog_bin: a.watchdog.watchdog_bin.clone(),
        minutes: a.minutes,
    })?;
    out.append(section)?;
    if a.check && !verdict.failures.is_empty() {
        anyhow::bail!("routine --check failed: {}", verdict.failures.join("; "));
    }
    Ok(())
}

fn run_overhead(out: &Output, a: &OverheadArgs) -> Result<()> {
    let section = lab::overhead::run(&lab::overhead::OverheadOptions {
        watchdog_bin: a.watchdog.watchdog_bin.clone(),
        duration: std::time::Duration::from_secs(a.secs),
        profiles: a.profiles.clone(),
        all_probes: a.all_probes,
    })?;
    out.append(section)
}

fn run_own_faults(out: &Output, a: &OwnFaultsArgs) -> Result<()> {
    if a.watchdog_faults.watchdog_faults {
        let section = watchdog_faults::run(&a.watchdog.watchdog_bin, &a.watchdog_faults)?;
        let missed = watchdog_faults::missed_goals(&section);
        out.append(section)?;
        return goals(
            "own-faults --watchdog-faults",
            "own-faults",
            &missed,
            a.check,
        );
    }
    if !a.unwell.is_empty() {
        let section = lab::unwell::run(&lab::unwell::UnwellOptions {
            watchdog_bin: a.watchdog.watchdog_bin.clone(),
            sicknesses: a.unwell.clone(),
            starve_secs: a.starve_secs,
            starve_percent: a.starve_percent,
            pause_secs: a.pause_secs,
            loss_secs: a.loss_secs,
            loss_percent: a.loss_percent,
        })?;
        let missed = lab::unwell::missed_goals(&section);
        out.append(section)?;
        return goals("own-faults --unwell", "own-faults", &missed, a.check);
    }
    let section = lab::own_faults::run(&lab::own_faults::OwnFaultsOptions {
        watchdog_bin: a.watchdog.watchdog_bin.clone(),
        kills: a.kills,
        flood_secs: a.flood_secs,
    })?;
    let missed = lab::own_faults::missed_goals(&section);
    out.append(section)?;
    goals("own-faults", "own-faults", &missed, a.check)
}

fn run_fuzz(out: &Output, a: &FuzzArgs) -> Result<()> {
    let section = fuzz::run(&fuzz::FuzzOptions {
        secs: a.secs,
        targets: a.targets.clone(),
        target_dir: a.target_dir.clone(),
    })?;
    let crashed = fuzz::crashed(&section);
    out.append(section)?;
    goals("fuzz", "fuzz", &crashed, a.check)
}

fn run_noise(out: &Output, a: &NoiseArgs) -> Result<()> {
    let section = lab::noise::run(&lab::noise::NoiseOptions {
        watchdog_bin: a.watchdog.watchdog_bin.clone(),
        episodes: a.episodes.clone(),
        trials: a.trials,
    })?;
    let missed = lab::noise::missed_goals(&section);
    out.append(section)?;
    goals("noise", "noise", &missed, a.check)
}
