//! kafka-watchdog's command line: a thin main in phases (config, then the chosen command).

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kafka_watchdog::config;
use kafka_watchdog::judge::check;
use kafka_watchdog::judge::report::Severity;
use kafka_watchdog::run::{daemon, silence_cmd};
use kafka_watchdog::serve::status_view;

/// sysexits.h EX_CONFIG: the configuration is wrong, restarting will not help.
const EXIT_CONFIG: u8 = 78;
/// A command line that cannot be parsed (sysexits.h EX_USAGE).
const EXIT_USAGE: u8 = 64;

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
        /// json: one document, each cluster as /status shows it, and the severity.
        #[arg(long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// Validate the configuration; exit 0, or 78 with every problem listed.
    ///
    /// Also checks that state_dir is (or can become) a directory. With --startup (the
    /// unit's ExecStartPre=), also what only holds before a start: the http.listen address is
    /// free and an existing state_dir is writable by this user.
    CheckConfig {
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
        /// Also bind http.listen for a moment and write into state_dir: not while the daemon
        /// runs (a reload's check), where its own port would count as busy.
        #[arg(long)]
        startup: bool,
    },
    /// Live view of a running daemon: clusters, brokers, open incidents; --once for scripts.
    ///
    /// Reads the daemon's /status and redraws it every --interval seconds until Ctrl-C.
    /// With --once: one page, exit 0 OK, 1 warning, 2 critical, 3 a cluster unreachable or
    /// the daemon not answering; 78 bad configuration or URL.
    #[command(group(clap::ArgGroup::new("where").required(true).multiple(true).args(["config", "url"])))]
    Status {
        /// The daemon's configuration: its http.listen, http.tls and http.auth are used.
        #[arg(short, long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The daemon's base URL (e.g. https://kafka-wd1:9644); wins over http.listen.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// Print one page and exit with its severity.
        #[arg(long)]
        once: bool,
        /// json (with --once): the daemon's /status document as it answered.
        #[arg(long, value_enum, default_value_t = Output::Text, requires = "once")]
        output: Output,
        /// Seconds between refreshes.
        #[arg(long, value_name = "SECS", default_value_t = 2.0, value_parser = parse_interval)]
        interval: f64,
    },
    /// Silences of a running daemon: add, list, expire (planned maintenance).
    ///
    /// A silenced incident still shows in /status and the metrics, but sends no webhook and
    /// no remediation acts on it. Exit 0 done, 1 refused, 3 no answer, 78 bad configuration.
    #[command(subcommand)]
    Silence(SilenceCmd),
}

/// What a command prints for a script: the tables people read, or JSON.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Output {
    Text,
    Json,
}

/// Where the daemon is, for commands that talk to a running one.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("where").required(true).multiple(true).args(["config", "url"])))]
struct DaemonArgs {
    /// The daemon's configuration: its http.listen, http.tls and http.auth are used.
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The daemon's base URL (e.g. https://kafka-wd1:9644); wins over http.listen.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
}

#[derive(Subcommand)]
enum SilenceCmd {
    /// Silence a cluster, a broker or a kind of incident until a time or for a while.
    Add {
        #[command(flatten)]
        daemon: DaemonArgs,
        /// The cluster (default: every cluster).
        #[arg(long)]
        cluster: Option<String>,
        /// One broker (its incidents, and partition incidents that suspect it alone).
        #[arg(long)]
        broker: Option<i32>,
        /// One incident kind (broker, under_replicated, offline_partitions, ...).
        #[arg(long)]
        kind: Option<String>,
        /// How long: 90m, 2h, 1d, 1h30m.
        #[arg(long, conflicts_with = "until", required_unless_present = "until")]
        duration: Option<String>,
        /// Until when (RFC 3339, e.g. 2026-12-01T18:00:00Z).
        #[arg(long)]
        until: Option<String>,
        /// From when (RFC 3339); default now.
        #[arg(long)]
        starts_at: Option<String>,
        /// Why: shown beside every silenced incident.
        #[arg(long)]
        comment: String,
        /// Who asks (default: the HTTP user, or "api").
        #[arg(long)]
        by: Option<String>,
    },
    /// List the silences (active, to come, ended within a day).
    List {
        #[command(flatten)]
        daemon: DaemonArgs,
        /// json: the daemon's answer as it came.
        #[arg(long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// End a silence now.
    Expire {
        #[command(flatten)]
        daemon: DaemonArgs,
        /// Its id (s-...), as `silence list` shows it.
        id: String,
    },
}

/// `silence ...`: one call to the daemon's silences API. Exit 0 done, 1 refused (the
/// sentence says why), 3 the daemon did not answer, 78 bad configuration or URL.
fn silence(cmd: SilenceCmd) -> ExitCode {
    let daemon = match &cmd {
        SilenceCmd::Add { daemon, .. }
        | SilenceCmd::List { daemon, .. }
        | SilenceCmd::Expire { daemon, .. } => daemon,
    };
    let target = match &daemon.config {
        Some(path) => match load(path) {
            Ok(cfg) => status_view::Target::from_config(&cfg, daemon.url.clone()),
            Err(code) => return code,
        },
        None => status_view::Target {
            base_url: daemon.url.clone().unwrap_or_default(),
            auth: None,
            ca_file: None,
            local_token: None,
        },
    };
    let client = match status_view::client(&target) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kafka-watchdog silence: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let rt = runtime();
    let answer = rt.block_on(async {
        match &cmd {
            SilenceCmd::Add {
                cluster,
                broker,
                kind,
                duration,
                until,
                starts_at,
                comment,
                by,
                ..
            } => {
                let request = kafka_watchdog::model::silence::Request {
                    cluster: cluster.clone(),
                    broker: *broker,
                    kind: kind.clone(),
                    starts_at: starts_at.clone(),
                    ends_at: until.clone(),
                    duration: duration.clone(),
                    comment: comment.clone(),
                    created_by: by.clone(),
                };
                silence_cmd::add(&client, &target, &request)
                    .await
                    .map(|s| silence_cmd::render(std::slice::from_ref(&s)))
            }
            SilenceCmd::List { output, .. } => {
                silence_cmd::list(&client, &target)
                    .await
                    .map(|doc| match output {
                        Output::Json => json_text(&doc),
                        Output::Text => {
                            silence_cmd::render(doc["silences"].as_array().map_or(&[][..], |v| v))
                        }
                    })
            }
            SilenceCmd::Expire { id, .. } => silence_cmd::expire(&client, &target, id)
                .await
                .map(|_| format!("silence {id} expired\n")),
        }
    });
    match answer {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kafka-watchdog silence: {e}");
            ExitCode::from(match e {
                e if e.is_usage() => EXIT_CONFIG,
                status_view::StatusError::Http { .. } => 1,
                _ => Severity::Unreachable.exit_code(),
            })
        }
    }
}

fn parse_interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.2..=3600.0).contains(&v) => Ok(v),
        _ => Err("expected seconds between 0.2 and 3600".into()),
    }
}

/// Pretty JSON with a final newline.
fn json_text(doc: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(doc).unwrap_or_default();
    text.push('\n');
    text
}

/// `status`: fetches /status once or every `interval`, and draws it.
fn status(
    config: Option<PathBuf>,
    url: Option<String>,
    once: bool,
    interval: f64,
    output: Output,
) -> ExitCode {
    use std::io::{IsTerminal, Write};
    let target = match &config {
        Some(path) => match load(path) {
            Ok(cfg) => status_view::Target::from_config(&cfg, url),
            Err(code) => return code,
        },
        None => status_view::Target {
            base_url: url.unwrap_or_default(),
            auth: None,
            ca_file: None,
            local_token: None,
        },
    };
    let client = match status_view::client(&target) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kafka-watchdog status: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let terminal = std::io::stdout().is_terminal();
    let color = status_view::use_color(terminal, std::env::var_os("NO_COLOR").as_deref());
    let rt = runtime();
    loop {
        let fetched = rt.block_on(status_view::fetch(&client, &target));
        let view = status_view::View {
            now: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            color,
            width: if terminal && !once {
                status_view::terminal_width()
            } else {
                None
            },
        };
        let (page, code) = match &fetched {
            Ok(doc) => (
                status_view::render(doc, &target.base_url, &view),
                status_view::worst(doc).exit_code(),
            ),
            Err(e) => (
                status_view::render_error(e, &view),
                if e.is_usage() {
                    EXIT_CONFIG
                } else {
                    Severity::Unreachable.exit_code()
                },
            ),
        };
        if once {
            match fetched {
                Ok(doc) if output == Output::Json => print!("{}", json_text(&doc)),
                Ok(_) => print!("{page}"),
                Err(e) => eprintln!("kafka-watchdog status: {e}"),
            }
            return ExitCode::from(code);
        }
        let page = format!(
            "{page}\n{} - every {interval} s, Ctrl-C leaves\n",
            httpdate::fmt_http_date(std::time::SystemTime::now())
        );
        let mut out = std::io::stdout().lock();
        // Off a terminal, pages follow each other: escape codes would only litter a file.
        let written = if terminal {
            write!(out, "{}", status_view::frame(&page))
        } else {
            writeln!(out, "{page}")
        };
        if written.and_then(|()| out.flush()).is_err() {
            // The reader is gone (a closed pipe): nothing left to show.
            return ExitCode::from(code);
        }
        drop(out);
        std::thread::sleep(std::time::Duration::from_secs_f64(interval));
    }
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
        Cmd::CheckConfig { config, startup } => match load(&config) {
            Ok(cfg) => {
                let problems = kafka_watchdog::run::preflight::check(&cfg, startup);
                if !problems.is_empty() {
                    for p in &problems {
                        eprintln!("{}: {p}", config.display());
                    }
                    return ExitCode::from(EXIT_CONFIG);
                }
                for w in &cfg.warnings {
                    eprintln!("warning: {w}");
                }
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
        Cmd::Check { config, output } => {
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
                if output == Output::Text {
                    print!("{}", check::table(r));
                }
                worst = worst.max(r.severity());
            }
            if output == Output::Json {
                let seen: Vec<&str> = reports.iter().map(|r| r.cluster.as_str()).collect();
                let doc = serde_json::json!({
                    "severity": worst,
                    "exit_code": worst.exit_code(),
                    "clusters": reports
                        .iter()
                        .map(kafka_watchdog::serve::status::cluster_status)
                        .collect::<Vec<_>>(),
                    "unreachable": cfg
                        .clusters
                        .iter()
                        .map(|c| c.name.as_str())
                        .filter(|n| !seen.contains(n))
                        .collect::<Vec<_>>(),
                });
                print!("{}", json_text(&doc));
            }
            ExitCode::from(worst.exit_code())
        }
        Cmd::Status {
            config,
            url,
            once,
            interval,
            output,
        } => status(config, url, once, interval, output),
        Cmd::Silence(cmd) => silence(cmd),
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
