//! Fuzz: the bodies of the fuzz targets in `fuzz/` (cargo-fuzz, nightly), one function per
//! parser of outside input, each calling the watchdog's own code as the daemon calls it on
//! what a broker, a peer, Slack, an OAuth endpoint, an HTTP client or a file handed it.
//! Every input must end in a value or a refusal: never a panic, a hang or an allocation out
//! of proportion with the input.
//!
//! They are plain functions so that a stable `cargo test` replays every committed input
//! (`fuzz/corpus/<target>/`, seeds and regressions alike) through them; the fuzz targets
//! are one line each around them (`wire_decode` also bounds each input's heap use). The
//! last stage of the pipeline: it may use every other.

mod alerting;
mod http;
mod kafka;
#[cfg(test)]
mod seeds;
mod text;

pub use alerting::{peer_answer, silences, slack_answer};
pub use http::http_request;
pub use kafka::{describe_log_dirs, describe_quorum, oauth_token, wire_decode};
pub use text::{config_load, time};

/// A target's body: any bytes, never a panic.
pub type Target = fn(&[u8]);

/// Every target, by the name of its file in `fuzz/fuzz_targets/` and its corpus folder.
pub const TARGETS: &[(&str, Target)] = &[
    ("config_load", config_load),
    ("wire_decode", wire_decode),
    ("describe_quorum", describe_quorum),
    ("describe_log_dirs", describe_log_dirs),
    ("oauth_token", oauth_token),
    ("peer_answer", peer_answer),
    ("slack_answer", slack_answer),
    ("silences", silences),
    ("time", time),
    ("http_request", http_request),
];

/// Where a target's seeds are, relative to the repository: its corpus folder (the first:
/// cargo-fuzz writes what it finds there when asked), and for `config_load` the shipped
/// configurations, read where they are so that the seeds are always today's examples.
pub fn seed_dirs(target: &str) -> Vec<String> {
    let mut dirs = vec![format!("fuzz/corpus/{target}")];
    if target == "config_load" {
        dirs.push("config".to_string());
    }
    dirs
}

/// A fixed "now" (2027-01-15T08:00:00Z): the same input always takes the same path.
const NOW_UNIX_SECS: u64 = 1_800_000_000;

fn now() -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_secs(NOW_UNIX_SECS)
}

/// The fuzzer's bytes read as a few small fields and length-prefixed chunks; past the end
/// every field reads as zero, so any input is some sequence of them.
struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte(), self.byte()])
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    /// A chunk: a big-endian u16 length, then that many bytes (fewer at the end).
    fn chunk(&mut self) -> &'a [u8] {
        let n = usize::from(self.u16());
        self.take(n)
    }

    fn rest(self) -> &'a [u8] {
        self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn fuzz_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
    }

    fn files(dir: &Path) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        out.sort();
        out
    }

    /// Issue 38 item 9: CI replays every committed input of every target (seconds), so a
    /// crash the fuzzer found once, kept as a regression input, can never come back; and
    /// the table, the fuzz crate and the corpus folders name the same targets.
    #[test]
    fn every_target_replays_its_corpus_and_is_a_fuzz_target() {
        let dir = fuzz_dir();
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let mut crashed = Vec::new();
        for (name, run) in TARGETS {
            let source = std::fs::read_to_string(dir.join(format!("fuzz_targets/{name}.rs")))
                .unwrap_or_else(|e| panic!("fuzz/fuzz_targets/{name}.rs: {e}"));
            assert!(
                source.contains(&format!("kafka_watchdog::fuzz::{name}(")),
                "fuzz/fuzz_targets/{name}.rs does not call kafka_watchdog::fuzz::{name}"
            );
            assert!(
                manifest.contains(&format!("name = \"{name}\"")),
                "fuzz/Cargo.toml has no [[bin]] {name}"
            );
            let root = dir.parent().unwrap();
            let inputs: Vec<PathBuf> = seed_dirs(name)
                .iter()
                .flat_map(|d| files(&root.join(d)))
                .collect();
            assert!(!inputs.is_empty(), "fuzz/corpus/{name}/ holds no seed");
            for path in inputs {
                let bytes = std::fs::read(&path).unwrap();
                if std::panic::catch_unwind(|| run(&bytes)).is_err() {
                    crashed.push(path.display().to_string());
                }
            }
        }
        assert!(crashed.is_empty(), "inputs that panic: {crashed:#?}");
        for target in files(&dir.join("fuzz_targets")) {
            let stem = target.file_stem().unwrap().to_string_lossy().to_string();
            assert!(
                TARGETS.iter().any(|(n, _)| *n == stem),
                "fuzz/fuzz_targets/{stem}.rs is not in fuzz::TARGETS, so CI does not replay it"
            );
        }
    }

    #[test]
    fn input_reads_zeros_past_its_end() {
        let mut i = Input::new(&[1, 2, 3, 0, 5, 9]);
        assert_eq!(i.byte(), 1);
        assert_eq!(i.u16(), 0x0203);
        assert_eq!(i.chunk(), &[9][..]);
        assert!(i.is_empty());
        assert_eq!((i.byte(), i.u16(), i.chunk()), (0, 0, &[][..]));
    }
}
