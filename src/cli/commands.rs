//! The commands that are not the daemon: `check-config`, `check`, `status`, `silence`.
//! Each returns the exit code a script reads (sysexits.h for usage and configuration).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::args::{Output, SilenceCmd};
use super::client::{client, fetch, StatusError, Target};
use super::{silence, status_view};
use crate::config;
use crate::judge::report::Severity;

/// sysexits.h EX_CONFIG: the configuration is wrong, restarting will not help.
pub const EXIT_CONFIG: u8 = 78;
/// A command line that cannot be parsed (sysexits.h EX_USAGE).
pub const EXIT_USAGE: u8 = 64;

/// `check-config`: every problem of the file (and with `startup`, of the machine it is to
/// start on), or OK with what it holds.
pub fn check_config(config: &Path, startup: bool) -> ExitCode {
    match load(config) {
        Ok(cfg) => {
            let problems = crate::run::preflight::check(&cfg, startup);
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
    }
}

/// `check`: one round against every cluster, its tables or JSON, exit by the worst.
pub fn check(config: &Path, output: Output) -> ExitCode {
    let cfg = match load(config) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let _ = crate::run::logging::init(&cfg, true);
    let reports = runtime().block_on(crate::run::daemon::check_once(&cfg));
    let mut worst = if reports.len() < cfg.clusters.len() {
        Severity::Unreachable
    } else {
        Severity::Ok
    };
    for r in &reports {
        if output == Output::Text {
            print!("{}", crate::judge::check::table(r));
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
                .map(crate::serve::status::cluster_status)
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

/// Where the running daemon is (its configuration's http block, or `url`) and a client for
/// it; on a bad configuration or URL, the problem printed for `command` and exit 78.
fn connect(
    config: Option<&Path>,
    url: Option<String>,
    command: &str,
) -> Result<(Target, reqwest::Client), ExitCode> {
    let target = match config {
        // Only the http block and state_dir are read: the operator asking need not be able
        // to read every cluster's secrets.
        Some(path) => {
            let section = config::load_client_section(path).map_err(|e| {
                eprintln!("{e}");
                ExitCode::from(EXIT_CONFIG)
            })?;
            Target::from_config(&section, url)
        }
        None => Target {
            base_url: url.unwrap_or_default(),
            auth: None,
            ca_file: None,
            local_token: None,
        },
    };
    match client(&target) {
        Ok(c) => Ok((target, c)),
        Err(e) => {
            eprintln!("kafka-watchdog {command}: {e}");
            Err(ExitCode::from(EXIT_CONFIG))
        }
    }
}

/// `status`: fetches /status once or every `interval`, and draws it.
pub fn status(
    config: Option<PathBuf>,
    url: Option<String>,
    once: bool,
    interval: f64,
    output: Output,
) -> ExitCode {
    use std::io::{IsTerminal, Write};
    let (target, client) = match connect(config.as_deref(), url, "status") {
        Ok(found) => found,
        Err(code) => return code,
    };
    let terminal = std::io::stdout().is_terminal();
    let color = status_view::use_color(terminal, std::env::var_os("NO_COLOR").as_deref());
    let rt = runtime();
    loop {
        let fetched = rt.block_on(fetch(&client, &target));
        let view = status_view::View {
            now: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            color,
            width: if terminal && !once {
                crate::sys::terminal_columns()
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

/// `silence ...`: one call to the daemon's silences API. Exit 0 done, 1 refused (the
/// sentence says why), 3 the daemon did not answer, 78 bad configuration or URL.
pub fn silence_cmd(cmd: SilenceCmd) -> ExitCode {
    let daemon = match &cmd {
        SilenceCmd::Add { daemon, .. }
        | SilenceCmd::List { daemon, .. }
        | SilenceCmd::Expire { daemon, .. } => daemon,
    };
    let (target, client) = match connect(daemon.config.as_deref(), daemon.url.clone(), "silence") {
        Ok(found) => found,
        Err(code) => return code,
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
                let request = crate::model::silence::Request {
                    cluster: cluster.clone(),
                    broker: *broker,
                    kind: kind.clone(),
                    starts_at: starts_at.clone(),
                    ends_at: until.clone(),
                    duration: duration.clone(),
                    comment: comment.clone(),
                    created_by: by.clone(),
                };
                silence::add(&client, &target, &request)
                    .await
                    .map(|s| silence::render(std::slice::from_ref(&s)))
            }
            SilenceCmd::List { output, .. } => {
                silence::list(&client, &target)
                    .await
                    .map(|doc| match output {
                        Output::Json => json_text(&doc),
                        Output::Text => {
                            silence::render(doc["silences"].as_array().map_or(&[][..], |v| v))
                        }
                    })
            }
            SilenceCmd::Expire { id, .. } => silence::expire(&client, &target, id)
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
                StatusError::Http { .. } => 1,
                _ => Severity::Unreachable.exit_code(),
            })
        }
    }
}

/// Pretty JSON with a final newline.
pub fn json_text(doc: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(doc).unwrap_or_default();
    text.push('\n');
    text
}

/// The configuration at `path`, or its problems printed and the exit code that says so.
pub fn load(path: &std::path::Path) -> Result<config::Config, ExitCode> {
    config::load(path).map_err(|e| {
        eprintln!("{e}");
        ExitCode::from(EXIT_CONFIG)
    })
}

/// The runtime a command runs its calls on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the tokio runtime starts")
}
