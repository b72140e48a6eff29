//! The command line's words: every command, flag and value, parsed by clap. A contract
//! with operators and scripts: add and deprecate, never rename.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kafka-watchdog",
    version,
    about = "Catches Kafka zombie brokers: alive at process and port level, serving no working partition"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Subcommand)]
pub enum Cmd {
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
pub enum Output {
    Text,
    Json,
}

/// Where the daemon is, for commands that talk to a running one.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("where").required(true).multiple(true).args(["config", "url"])))]
pub struct DaemonArgs {
    /// The daemon's configuration: its http.listen, http.tls and http.auth are used.
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The daemon's base URL (e.g. https://kafka-wd1:9644); wins over http.listen.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
}

#[derive(Subcommand)]
pub enum SilenceCmd {
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

fn parse_interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.2..=3600.0).contains(&v) => Ok(v),
        _ => Err("expected seconds between 0.2 and 3600".into()),
    }
}

/// The manual pages: rendered from the definitions above by clap_mangen, committed in
/// docs/man/ (the .deb installs them), and held to them here like the other generated docs.
#[cfg(test)]
mod man {
    use std::path::Path;

    use clap::CommandFactory;
    use clap_mangen::roff::{bold, roman, Roff};
    use clap_mangen::Man;

    use super::Cli;

    const DIR: &str = "docs/man";

    /// Every page: `kafka-watchdog.1`, then one per command (`kafka-watchdog-run.1`, ...),
    /// as (file name, roff).
    fn pages() -> Vec<(String, String)> {
        fn walk(cmd: clap::Command, out: &mut Vec<(String, String)>) {
            for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                walk(sub.clone(), out);
            }
            let top = cmd.get_name() == "kafka-watchdog";
            let man = Man::new(cmd)
                .source(format!("kafka-watchdog {}", env!("CARGO_PKG_VERSION")))
                .manual("kafka-watchdog");
            let mut page = Vec::new();
            man.render(&mut page).expect("renders");
            if top {
                page.extend(extra().render().into_bytes());
            }
            out.push((man.get_filename(), String::from_utf8(page).expect("UTF-8")));
        }
        let mut cmd = Cli::command().disable_help_subcommand(true);
        cmd.build();
        let mut out = Vec::new();
        walk(cmd, &mut out);
        out.sort();
        out
    }

    /// What the main page says besides the commands: exit codes, files, where to read on.
    fn extra() -> Roff {
        let mut r = Roff::new();
        let item = |r: &mut Roff, term: &str, text: &str| {
            r.control("TP", []).text([bold(term)]).text([roman(text)]);
        };
        r.control("SH", ["EXIT STATUS"]);
        for (code, meaning) in [
            ("0", "OK (check, status --once), or done."),
            ("1", "a warning (check, status --once); refused (silence)."),
            ("2", "critical (check, status --once)."),
            ("3", "a cluster or the daemon could not be reached."),
            ("64", "the command line cannot be parsed (EX_USAGE)."),
            ("78", "the configuration is wrong, or asks what the machine cannot give (EX_CONFIG): restarting will not help."),
        ] {
            item(&mut r, code, meaning);
        }
        r.control("SH", ["FILES"]);
        item(
            &mut r,
            "/etc/kafka-watchdog/config.yaml",
            "the configuration (the unit's, and the .deb's minimal one).",
        );
        item(
            &mut r,
            "/var/lib/kafka-watchdog",
            "state_dir: open incidents, webhook spools, silences, remediation history.",
        );
        item(
            &mut r,
            "/usr/share/doc/kafka-watchdog/",
            "README, install guide, changelog and examples/example.yaml, which shows every key.",
        );
        r.control("SH", ["SEE ALSO"]);
        r.text([roman(
            "The runbook of every alert is served at /runbooks by the daemon. The configuration \
             reference, alerts, webhooks and HTTP pages are in the docs/ folder of the release.",
        )]);
        r
    }

    #[test]
    fn the_committed_man_pages_are_current() {
        let pages = pages();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR);
        if std::env::var("KW_DOCS_WRITE").is_ok_and(|w| w == "1") {
            std::fs::create_dir_all(&dir).unwrap();
        }
        for (name, text) in &pages {
            crate::model::generated::assert_current(
                &format!("{DIR}/{name}"),
                text,
                "KW_DOCS_WRITE=1 cargo test --lib cli::args",
                &[],
            );
        }
        let committed: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        for name in committed {
            assert!(
                pages.iter().any(|(n, _)| *n == name),
                "{DIR}/{name}: no command renders it any more; remove it"
            );
        }
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains(&"kafka-watchdog.1"), "{names:?}");
        assert!(names.contains(&"kafka-watchdog-silence-add.1"), "{names:?}");
    }
}
