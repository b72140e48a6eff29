use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;

/// Environment for tests: a fixed map, so no test touches the process environment.
fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

fn no_env(_: &str) -> Option<String> {
    None
}

fn ok(text: &str) -> Config {
    match parse_with_env(text, "t.yaml", &no_env) {
        Ok(c) => c,
        Err(e) => panic!("expected a valid config, got:\n{e}"),
    }
}

fn problems_env(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Vec<Problem> {
    match parse_with_env(text, "t.yaml", env) {
        Ok(_) => panic!("expected problems, the config loaded:\n{text}"),
        Err(ConfigError::Invalid { problems }) => {
            assert!(!problems.is_empty());
            problems
        }
        Err(e) => panic!("unexpected error {e}"),
    }
}

fn problems(text: &str) -> Vec<Problem> {
    problems_env(text, &no_env)
}

/// The single problem of `text`, as `LINE:COL: MESSAGE (expected ...)`.
fn one(text: &str) -> String {
    let p = problems(text);
    assert_eq!(p.len(), 1, "expected one problem, got {p:#?}");
    short(&p[0])
}

fn short(p: &Problem) -> String {
    let full = p.to_string();
    full.strip_prefix(&format!("{}:", p.file))
        .unwrap_or(&full)
        .to_string()
}

/// A directory of its own for one test, removed when the test ends.
struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir() -> TempDir {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "kafka-watchdog-config-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    TempDir(dir)
}

const MINIMAL: &str = "clusters:\n  - name: lab\n    bootstrap_servers: [\"127.0.0.11:9092\"]\n";

/// MINIMAL with a top-level block `key:` holding `block`'s lines.
fn minimal_with(key: &str, block: &str) -> String {
    let mut s = format!("{MINIMAL}{key}:\n");
    for line in block.lines() {
        s.push_str("  ");
        s.push_str(line);
        s.push('\n');
    }
    s
}

/// A cluster block with `extra` lines added at the cluster's indentation.
fn cluster_with(extra: &str) -> String {
    let mut s = MINIMAL.to_string();
    for line in extra.lines() {
        s.push_str("    ");
        s.push_str(line);
        s.push('\n');
    }
    s
}

/// A shipped example configuration.
fn example_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config")
        .join(name)
}

mod defaults;
mod examples;
mod heartbeat;
mod host;
mod hostile;
mod http;
mod librdkafka;
mod peers;
mod problems;
mod security;
mod silences;
mod webhooks;
