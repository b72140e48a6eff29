//! The book on disk, so a restart neither forgets an open incident (its resolve would never
//! be sent) nor opens it a second time. One JSON file, replaced atomically.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::blocking::Pool;

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

/// The state directory's reads and writes once the daemon runs, at most this many at once:
/// they wait for a place without holding a thread, so a hung disk holds this many threads
/// and no more, whatever waits on it.
const DISK_CAP: usize = 4;
/// A write of the state directory that takes longer than this is said in the log.
pub(crate) const SLOW_WRITE: Duration = Duration::from_secs(5);

/// Where the state directory's reads and writes run once the daemon runs: off the
/// runtime's workers (`model::blocking`). One pool for the process, as the disk is one.
pub(crate) fn disk() -> &'static Pool {
    static DISK: OnceLock<Pool> = OnceLock::new();
    DISK.get_or_init(|| Pool::new("state directory writes", DISK_CAP))
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

/// Replaces `dir/name` with `bytes` (see `write_atomic`), creating `dir` if needed.
pub(crate) fn write_in(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    ensure_dir(dir).and_then(|()| write_atomic(&dir.join(name), bytes))
}

/// A state file rewritten whole at each change, written off the runtime. Its owner queues
/// each change under its own lock, so in the order the changes happened, with what must be
/// on disk before it (for the incident book, the events it records as told). One writer at
/// a time takes everything queued, hands the `first` of it on and then writes the newest
/// content: a disk slower than the changes costs writes, never order, and holds neither
/// the owner's lock nor a runtime worker (issue 38 item 3).
pub(crate) struct StateWriter<T> {
    dir: PathBuf,
    name: &'static str,
    queued: std::sync::Mutex<Queued<T>>,
    turn: tokio::sync::Mutex<()>,
}

struct Queued<T> {
    first: Vec<T>,
    bytes: Option<Vec<u8>>,
    /// A writer is on its way that has not taken what is queued yet.
    writer_coming: bool,
}

/// What one writer did.
pub(crate) struct Written {
    pub path: PathBuf,
    pub result: io::Result<()>,
    /// Something was handed on first.
    pub had_first: bool,
}

impl<T: Send + 'static> StateWriter<T> {
    pub(crate) fn new(dir: &Path, name: &'static str) -> Self {
        StateWriter {
            dir: dir.to_path_buf(),
            name,
            queued: std::sync::Mutex::new(Queued {
                first: Vec::new(),
                bytes: None,
                writer_coming: false,
            }),
            turn: tokio::sync::Mutex::new(()),
        }
    }

    /// Queues a change: `first` to go before `bytes`, the file's new content. True when
    /// the caller is to start a writer (`write`): none is on its way to take this.
    pub(crate) fn queue(&self, first: Vec<T>, bytes: Vec<u8>) -> bool {
        let mut q = self.queued.lock().unwrap_or_else(|p| p.into_inner());
        q.first.extend(first);
        q.bytes = Some(bytes);
        !std::mem::replace(&mut q.writer_coming, true)
    }

    /// Once no other writer runs: takes what is queued, awaits `before` with its `first`,
    /// then writes the newest content. `None` when an earlier writer took it all.
    pub(crate) async fn write<F>(&self, before: impl FnOnce(Vec<T>) -> F) -> Option<Written>
    where
        F: std::future::Future<Output = ()>,
    {
        let _turn = self.turn.lock().await;
        let (first, bytes) = {
            let mut q = self.queued.lock().unwrap_or_else(|p| p.into_inner());
            q.writer_coming = false;
            (std::mem::take(&mut q.first), q.bytes.take()?)
        };
        let had_first = !first.is_empty();
        before(first).await;
        let (dir, name) = (self.dir.clone(), self.name);
        let result = disk()
            .finish(&format!("writing {name}"), SLOW_WRITE, move || {
                write_in(&dir, name, &bytes)
            })
            .await
            .unwrap_or_else(|e| Err(io::Error::other(e.to_string())));
        Some(Written {
            path: self.dir.join(self.name),
            result,
            had_first,
        })
    }
}

/// Debug builds only: `KAFKA_WATCHDOG_TEST_SLOW_FSYNC_MS=N` makes every fsync of the state
/// directory take N ms longer, blocking its thread as a slow or overloaded disk would, so
/// that a test can show what waits for one (tests/blocking.rs). Release builds never read
/// the variable.
fn slow_disk_for_tests() {
    static DELAY: OnceLock<Option<Duration>> = OnceLock::new();
    if !cfg!(debug_assertions) {
        return;
    }
    let delay = DELAY.get_or_init(|| {
        std::env::var("KAFKA_WATCHDOG_TEST_SLOW_FSYNC_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_millis)
    });
    if let Some(d) = delay {
        std::thread::sleep(*d);
    }
}

impl IncidentBook {
    /// Writes the book to `dir/incidents.json` (mode 0600), creating `dir` if needed.
    pub fn save(&self, dir: &Path) -> Result<(), StateError> {
        let path = dir.join(STATE_FILE);
        let bytes = self.encode().map_err(|source| StateError::Write {
            path: path.clone(),
            source,
        })?;
        write_in(dir, STATE_FILE, &bytes).map_err(|source| StateError::Write { path, source })
    }

    /// The book as its file holds it.
    pub fn encode(&self) -> io::Result<Vec<u8>> {
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
        serde_json::to_vec_pretty(&file).map_err(io::Error::other)
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
