//! kafka-watchdog's command line: a thin main in phases (config, then the chosen command).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kafka_watchdog::{check, config, daemon, report::Severity};

/// sysexits.h EX_CONFIG: the configuration is wrong, restarting will not help.
const EXIT_CONFIG: u8 = 78;

#[derive(Parser)]
#[command(
    name = "kafka-watchdog",
    version,
    about = "Catches Kafka zombie brokers: alive at process and port level, serving no working partition"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the daemon.
    Run {
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
    },
    /// One round against every cluster; exit 0 OK, 1 warning, 2 critical, 3 unreachable.
    Check {
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
    },
    /// Validate the configuration; exit 0, or 78 with every problem listed.
    CheckConfig {
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
    },
}

fn load(path: &std::path::Path) -> Result<config::Config, ExitCode> {
    config::load(path).map_err(|e| {
        eprintln!("{e}");
        ExitCode::from(EXIT_CONFIG)
    })
}

type SetLevel = Box<dyn Fn(config::LogLevel) + Send + Sync>;

/// Starts logging; the returned function changes the level later (on reload). RUST_LOG,
/// when set, wins over the configuration, then and on reload.
fn init_logging(cfg: &config::Config, stderr_only: bool) -> SetLevel {
    use tracing_subscriber::EnvFilter;
    let from_env = std::env::var_os("RUST_LOG").is_some();
    let filter_for = move |level: config::LogLevel| {
        if from_env {
            EnvFilter::from_default_env()
        } else {
            EnvFilter::new(format!("kafka_watchdog={}", level.as_str()))
        }
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter_for(cfg.log.level))
        .with_writer(std::io::stderr)
        .with_ansi(!stderr_only && std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match cfg.log.format {
        config::LogFormat::Json => {
            let b = builder.json().with_filter_reloading();
            let handle = b.reload_handle();
            b.init();
            Box::new(move |l| {
                let _ = handle.reload(filter_for(l));
            })
        }
        config::LogFormat::Text => {
            let b = builder.with_filter_reloading();
            let handle = b.reload_handle();
            b.init();
            Box::new(move |l| {
                let _ = handle.reload(filter_for(l));
            })
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the tokio runtime starts")
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::CheckConfig { config } => match load(&config) {
            Ok(cfg) => {
                println!(
                    "{}: OK ({} cluster(s), {} webhook(s))",
                    config.display(),
                    cfg.clusters.len(),
                    cfg.webhooks.len()
                );
                ExitCode::SUCCESS
            }
            Err(code) => code,
        },
        Cmd::Check { config } => {
            let cfg = match load(&config) {
                Ok(c) => c,
                Err(code) => return code,
            };
            let _ = init_logging(&cfg, true);
            let reports = runtime().block_on(daemon::check_once(&cfg));
            let mut worst = if reports.len() < cfg.clusters.len() {
                Severity::Unreachable
            } else {
                Severity::Ok
            };
            for r in &reports {
                print!("{}", check::table(r));
                worst = worst.max(r.severity());
            }
            ExitCode::from(worst.exit_code())
        }
        Cmd::Run { config } => {
            let cfg = match load(&config) {
                Ok(c) => c,
                Err(code) => return code,
            };
            let set_level = init_logging(&cfg, false);
            match runtime().block_on(daemon::run(cfg, config, set_level)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "kafka-watchdog stopped");
                    eprintln!("kafka-watchdog: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
