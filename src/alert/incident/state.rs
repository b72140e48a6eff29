//! The book on disk, so a restart neither forgets an open incident (its resolve would never
//! be sent) nor opens it a second time. One JSON file, replaced atomically.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::book::{IncidentBook, Track};
use super::FindingKey;

/// The file in the state directory.
pub const STATE_FILE: &str = "incidents.json";
const VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot write the incident state {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot read the incident state {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("the incident state {path} is corrupt ({detail}); move it aside to start without the incidents it remembers")]
    Corrupt { path: PathBuf, detail: String },
}

#[derive(Serialize, Deserialize)]
struct StateFile {
    version: u32,
    tracks: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    key: FindingKey,
    track: Track,
}

/// Creates `dir` (owner only) when it does not exist yet.
pub(crate) fn ensure_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Replaces `path` with `bytes` so that a crash leaves either the old or the new content:
/// write a temporary file beside it, flush it to disk, rename it over, flush the directory.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp"));
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        slow_disk_for_tests();
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    slow_disk_for_tests();
    File::open(dir)?.sync_all()
}

/// Debug builds only: `KAFKA_WATCHDOG_TEST_SLOW_FSYNC_MS=N` makes every fsync of the state
/// directory take N ms longer, blocking its thread as a slow or overloaded disk would, so
/// that a test can show what waits for one (tests/blocking.rs). Release builds never read
/// the variable.
fn slow_disk_for_tests() {
    static DELAY: std::sync::OnceLock<Option<std::time::Duration>> = std::sync::OnceLock::new();
    if !cfg!(debug_assertions) {
        return;
    }
    let delay = DELAY.get_or_init(|| {
        std::env::var("KAFKA_WATCHDOG_TEST_SLOW_FSYNC_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(std::time::Duration::from_millis)
    });
    if let Some(d) = delay {
        std::thread::sleep(*d);
    }
}

impl IncidentBook {
    /// Writes the book to `dir/incidents.json` (mode 0600), creating `dir` if needed.
    pub fn save(&self, dir: &Path) -> Result<(), StateError> {
        let path = dir.join(STATE_FILE);
        let file = StateFile {
            version: VERSION,
            tracks: self
                .tracks
                .iter()
                .map(|(key, track)| Entry {
                    key: key.clone(),
                    track: track.clone(),
                })
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| StateError::Write {
            path: path.clone(),
            source: io::Error::other(e),
        })?;
        ensure_dir(dir)
            .and_then(|()| write_atomic(&path, &bytes))
            .map_err(|source| StateError::Write { path, source })
    }

    /// Reads `dir/incidents.json`; a missing file is an empty book (the first start).
    pub fn load(dir: &Path) -> Result<IncidentBook, StateError> {
        let path = dir.join(STATE_FILE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(IncidentBook::new()),
            Err(source) => return Err(StateError::Read { path, source }),
        };
        let file: StateFile = serde_json::from_slice(&bytes).map_err(|e| StateError::Corrupt {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        if file.version != VERSION {
            return Err(StateError::Corrupt {
                path,
                detail: format!(
                    "version {} is not the {VERSION} this watchdog writes",
                    file.version
                ),
            });
        }
        let mut book = IncidentBook::new();
        for mut e in file.tracks {
            // Written before silences existed: everything open was told as it happened.
            if let Track::Open { incident, .. } = &mut e.track {
                if incident.silenced.is_none() && incident.notified_peak.is_none() {
                    incident.notified_peak = Some(incident.peak_severity);
                }
            }
            book.tracks.insert(e.key, e.track);
        }
        Ok(book)
    }
}
