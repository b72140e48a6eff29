//! The watchdog's configuration: YAML schema, loading, validation.
//!
//! An operator fixing a file wants every mistake at once, each with its line and column
//! and what would have been right. Deserializing with serde stops at the first error and
//! loses positions, so loading goes in two steps instead:
//!
//! 1. `yaml`: the text becomes a tree of nodes that remember where they were written.
//!    Aliases are expanded under a node budget (alias bombs are refused).
//! 2. `build`: typed readers (`read`) walk that tree; each wrong value is recorded as a
//!    `Problem` and reading goes on. `schema` is the single table of key names, ranges and
//!    built-in defaults: most keys are declared there once, in `layered!` blocks (`keys`),
//!    from which their reading, merge over `defaults:` (`layer`), default, resolved field,
//!    reload comparison and line in docs/config.md (`docs`) follow. `checks` holds the
//!    value rules; `types` the resolved result; `cluster` a cluster's own keys; `http` the
//!    `http:` block (listen address, HTTPS, credentials); `host` a cluster's `host:` block
//!    (host mode and remediation).
//!
//! Inner order: a module uses only modules of its own rung or an earlier one
//! (tests/layers.rs checks it). The ground first, then the key table, then the builders.
//!
//! | rung | modules | what |
//! |---|---|---|
//! | 1 | report, spec | problems and where they were written; what a key may hold (name, default, range) |
//! | 2 | yaml, kinds | the positioned YAML tree; the closed sets keys choose from, with their spellings |
//! | 3 | read | typed readers that record problems and go on |
//! | 4 | checks | rules for single values |
//! | 5 | keys | how a layered key is declared (`layered!`) |
//! | 6 | schema | the key table: each key's name, type, default and range, written once |
//! | 7 | types | the resolved configuration: the table's generated blocks, and the rest |
//! | 8 | docs | the reference rendered from the table |
//! | 9 | ctx | what a builder carries through one file |
//! | 10 | live, secret | credential files kept current (read again, checked, published); values read from the file, the environment or a file of their own |
//! | 11 | layer, sasl, host, http, peers, heartbeat, silences, webhook | builders of one block each |
//! | 12 | security | `security:` (protocol, SASL, TLS) |
//! | 13 | cluster | one cluster |
//! | 14 | build | the whole file |
//!
//! Dependencies, and why each:
//! - `saphyr-parser`: a pure-Rust YAML 1.2 event parser whose events carry line and
//!   column. It is the maintained successor of yaml-rust, and at the event level it leaves
//!   alias expansion to us, which is where the budget lives. `serde_norway` (the tests'
//!   YAML reader, a dev-dependency) is not used here: its `Value` has no positions.
//! - `regex`: topic filters, compiled once here, and its messages for invalid patterns.
//! - `url`: webhook URLs are checked by the same parser the HTTP client (reqwest) uses,
//!   so a URL that loads is a URL that sends.
//! - `thiserror`: `ConfigError`.
//! - `tokio-rustls` (rustls with ring, already the wire client's TLS): the HTTP server's
//!   certificate and key are parsed while loading, by the code the server starts with.

mod build;
mod checks;
mod cluster;
mod ctx;
mod docs;
pub use docs::reference;
mod heartbeat;
#[cfg(test)]
pub(crate) use docs::restart_settings;
pub use layer::rounds_as_duration;
mod host;
mod http;
mod keys;
mod kinds;
mod layer;
pub mod live;
mod peers;
mod read;
mod report;
mod sasl;
mod schema;
mod secret;
mod security;
mod silences;
mod spec;
mod types;
mod webhook;
mod yaml;

#[cfg(test)]
mod tests;

use std::io::Read;
use std::path::{Path, PathBuf};

pub use http::HttpTlsError;
pub use report::Problem;
pub use types::{
    AwsMskIamConfig, CanaryConfig, CertificatesConfig, ClientCert, ClusterConfig, Config,
    ControllerAddress, CoordinatorsConfig, Endpoint, HeartbeatConfig, HeartbeatFormat,
    HostBrokerConfig, HostConfig, HttpAuth, HttpTlsConfig, LogConfig, LogFormat, LogLevel,
    OAuthBearerConfig, PeerDns, PeersConfig, PortSpec, ProcessLocator, RemediationConfig,
    SaslConfig, SaslMechanism, Secret, Security, SecurityProtocol, Severity, SlackBot, Timing,
    TlsConfig, TopicFilter, VerdictConfig, VerdictKeys, WebhookConfig, WebhookFormat,
};

/// The shortest peer key loading takes, and so the shortest a rotated `peers.key_file`
/// may hold (`alert::peers::auth::LiveKey`).
pub use schema::PEERS_KEY_MIN_CHARS;

/// See `full_metadata_partition_budget`: declared here, where the key is, and read by the
/// probe (which comes after the configuration and is imported by it nowhere).
pub const DEFAULT_FULL_METADATA_BUDGET: u64 = schema::FULL_METADATA_BUDGET.0.default;

/// The default `verdict.liveness_interval_ms`, for the benches that measure it.
pub const DEFAULT_LIVENESS_INTERVAL_MS: u64 = schema::VERDICT_LIVENESS_INTERVAL.0.default;

/// More lines than anyone reads; the count line still gives the total.
const MAX_SHOWN_PROBLEMS: usize = 200;
/// Far above any real configuration; a wrong path (a log, a device) fails fast instead of
/// being read whole.
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read at all.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file was read and is wrong; `problems` is never empty and is in file order.
    #[error("{}", render(problems))]
    Invalid { problems: Vec<Problem> },
}

fn render(problems: &[Problem]) -> String {
    let mut out = String::new();
    for p in problems.iter().take(MAX_SHOWN_PROBLEMS) {
        out.push_str(&p.to_string());
        out.push('\n');
    }
    let file = problems
        .first()
        .map_or("configuration", |p| p.file.as_str());
    let n = problems.len();
    out.push_str(&format!(
        "{file}: {n} problem{}",
        if n == 1 { "" } else { "s" }
    ));
    if n > MAX_SHOWN_PROBLEMS {
        out.push_str(&format!(" (first {MAX_SHOWN_PROBLEMS} shown)"));
    }
    out
}

/// Reads and validates the file at `path`. Relative paths inside it (state_dir, secret
/// and certificate files) are taken from the file's directory. Secrets are read now, from
/// the process environment and from files.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    load_inner(path, &|name| std::env::var(name).ok())
}

fn load_inner(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
    let (text, origin, base) = read_file(path)?;
    parse_inner(&text, &origin, base, env)
}

/// What `status` and `silence` need of a daemon's file to reach it: where it listens, its
/// HTTPS certificate, its credential, and its state directory (for the local token).
/// Nothing else is read: an operator who may not read the brokers' passwords can still ask
/// the daemon, and a file whose clusters are being edited still names it.
#[derive(Debug, Clone)]
pub struct ClientSection {
    pub http_listen: std::net::SocketAddr,
    pub http_tls: Option<HttpTlsConfig>,
    pub http_auth: Option<HttpAuth>,
    pub state_dir: PathBuf,
}

/// The `http:` block and `state_dir` of the file at `path`, checked as the daemon checks
/// them; problems elsewhere in the file are not looked for.
pub fn load_client_section(path: &Path) -> Result<ClientSection, ConfigError> {
    let env = |name: &str| std::env::var(name).ok();
    let (text, origin, base) = read_file(path)?;
    parse_with(&text, &origin, base, &env, build::client_section).map(|(c, _)| c)
}

/// The file's text, its name for messages, and the folder relative paths start from.
fn read_file(path: &Path) -> Result<(String, String, Option<&Path>), ConfigError> {
    let io = |source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(io)?;
    let origin = path.display().to_string();
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ConfigError::Invalid {
            problems: vec![Problem {
                file: origin,
                line: 1,
                column: 1,
                message: format!("the file is larger than {MAX_FILE_BYTES} bytes"),
                expected: Some("a configuration file of a few kilobytes".into()),
            }],
        });
    }
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            // The prefix is valid UTF-8 by construction; lossy only to avoid a panic path.
            let prefix = String::from_utf8_lossy(valid);
            let line = prefix.matches('\n').count() + 1;
            let column = prefix.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            return Err(ConfigError::Invalid {
                problems: vec![Problem {
                    file: origin,
                    line,
                    column,
                    message: "the file is not UTF-8 text".into(),
                    expected: Some("a YAML text file".into()),
                }],
            });
        }
    };
    let base = path.parent().filter(|p| !p.as_os_str().is_empty());
    Ok((text, origin, base))
}

/// Validates `text` as if it were the file `origin`. Relative paths are left relative to
/// the working directory. Secrets come from the process environment and from files.
pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
    parse_inner(text, origin, None, &|name| std::env::var(name).ok())
}

/// As `parse`, with environment variables looked up through `env` instead of the process
/// environment: for tests, which cannot safely change the environment of a threaded test
/// runner.
pub fn parse_with_env(
    text: &str,
    origin: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    parse_inner(text, origin, None, env)
}

fn parse_inner(
    text: &str,
    origin: &str,
    base_dir: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    parse_with(text, origin, base_dir, env, build::config).map(|(mut c, warnings)| {
        c.warnings = warnings;
        c
    })
}

/// Reads `text` with `build`, and what it loads with the warnings, or every problem.
fn parse_with<T>(
    text: &str,
    origin: &str,
    base_dir: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    build: impl FnOnce(&mut ctx::Ctx, Option<&yaml::Node>) -> Option<T>,
) -> Result<(T, Vec<String>), ConfigError> {
    let mut rep = report::Report::new(origin);
    // A byte-order mark is invisible in editors; the parser would take it as content.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let built = match yaml::parse(text, &mut rep) {
        Ok(root) => {
            let mut cx = ctx::Ctx { rep, env, base_dir };
            let built = build(&mut cx, root.as_ref());
            rep = cx.rep;
            built
        }
        Err(()) => None,
    };
    let mut problems = rep.problems;
    match built {
        Some(c) if problems.is_empty() => {
            Ok((c, rep.warnings.iter().map(ToString::to_string).collect()))
        }
        _ => {
            if problems.is_empty() {
                // Every path that withholds a config records why; this keeps the promise
                // of a non-empty list should one ever fail to.
                problems.push(Problem {
                    file: origin.to_string(),
                    line: 1,
                    column: 1,
                    message: "the configuration is not valid".into(),
                    expected: None,
                });
            }
            problems.sort_by_key(|p| (p.line, p.column));
            // Alias copies repeat the positions and messages of their anchor.
            let mut seen = std::collections::HashSet::new();
            problems.retain(|p| seen.insert(p.clone()));
            Err(ConfigError::Invalid { problems })
        }
    }
}
