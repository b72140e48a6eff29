//! kafka-watchdog's command line: a thin main. The words are in `cli::args`, the commands
//! other than the daemon in `cli::commands`.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use kafka_watchdog::cli::args::{Cli, Cmd};
use kafka_watchdog::cli::commands::{self, load, runtime, EXIT_CONFIG, EXIT_USAGE};
use kafka_watchdog::run::{daemon, logging};

fn main() -> ExitCode {
    // A usage error exits 64 (EX_USAGE), not clap's 2: for `check` and `status --once`, 2
    // means critical to Nagios and to scripts, and a typo must not page as one.
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { 0 });
        }
    };
    match cli.command {
        Cmd::CheckConfig { config, startup } => commands::check_config(&config, startup),
        Cmd::Check { config, output } => commands::check(&config, output),
        Cmd::Status {
            config,
            url,
            once,
            interval,
            output,
        } => commands::status(config, url, once, interval, output),
        Cmd::Silence(cmd) => commands::silence_cmd(cmd),
        Cmd::Run { config } => {
            let cfg = match load(&config) {
                Ok(c) => c,
                Err(code) => return code,
            };
            let set_level = logging::init(&cfg, false);
            match runtime().block_on(daemon::run(cfg, config, set_level)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "kafka-watchdog stopped");
                    eprintln!("kafka-watchdog: {e:#}");
                    if e.is::<kafka_watchdog::run::preflight::StartupError>() {
                        ExitCode::from(EXIT_CONFIG)
                    } else {
                        ExitCode::FAILURE
                    }
                }
            }
        }
    }
}
