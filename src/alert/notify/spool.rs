//! A directory as a durable queue: one JSON file per entry, named by a sequence number so
//! that name order is queue order, each written atomically and flushed before it counts
//! as queued. An entry leaves the directory only once it is done with.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::alert::incident::{ensure_dir, write_atomic};
use crate::model::time::unix_ms;

#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is corrupt: {detail}")]
    Corrupt { path: PathBuf, detail: String },
}

#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    next: AtomicU64,
    /// Whether `reserve` keeps the number it hands out on disk (see `keeping_sequence`).
    keeps_sequence: bool,
}

const SUFFIX: &str = ".json";

/// Where the last sequence number handed out is kept (see `reserve`): beside the folder,
/// which holds entries only.
fn last_taken(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".last-sequence");
    dir.with_file_name(name)
}

impl Spool {
    /// Opens (creating) `dir` and returns the sequence numbers waiting in it, oldest
    /// first. Temporary files of a write that a crash interrupted are removed: their
    /// entry never counted as queued.
    pub fn open(dir: &Path) -> Result<(Spool, Vec<u64>), SpoolError> {
        let io_err = |source| SpoolError::Io {
            path: dir.to_path_buf(),
            source,
        };
        ensure_dir(dir).map_err(io_err)?;
        let mut seqs = Vec::new();
        for entry in fs::read_dir(dir).map_err(io_err)? {
            let entry = entry.map_err(io_err)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.ends_with(".tmp") {
                let _ = fs::remove_file(entry.path());
                continue;
            }
            if let Some(seq) = name
                .strip_suffix(SUFFIX)
                .and_then(|s| s.parse::<u64>().ok())
            {
                seqs.push(seq);
            }
        }
        seqs.sort_unstable();
        // Sequence numbers keep growing across restarts, even once the directory is
        // empty: they start from the clock (microseconds) unless the files or the last one
        // taken are ahead of it (the clock stepped back since; issue 27 item 3).
        let clock = unix_ms(SystemTime::now()).saturating_mul(1000);
        let taken = fs::read_to_string(last_taken(dir))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok());
        let next = seqs
            .last()
            .into_iter()
            .chain(taken.as_ref())
            .fold(clock, |n, last| n.max(last + 1));
        Ok((
            Spool {
                dir: dir.to_path_buf(),
                next: AtomicU64::new(next),
                keeps_sequence: false,
            },
            seqs,
        ))
    }

    fn path(&self, seq: u64) -> PathBuf {
        self.dir.join(format!("{seq:020}{SUFFIX}"))
    }

    /// Keeps each number `reserve` hands out on disk, so that a restart after the clock
    /// stepped back, with nothing left in the folder, does not hand out numbers already
    /// used. For a receiver's spool, whose numbers receivers order and deduplicate by; the
    /// inbox's numbers only order its own files, and its writes happen on `submit`'s path,
    /// which must not pay two more fsyncs.
    pub fn keeping_sequence(mut self) -> Self {
        self.keeps_sequence = true;
        self
    }

    /// The next sequence number, kept on disk (see `keep_taken`); entries must be written
    /// in the order they were taken.
    pub fn reserve(&self) -> u64 {
        let seq = self.take();
        let _ = self.keep_taken(seq);
        seq
    }

    /// The next sequence number, not yet kept on disk: `keep_taken` must have kept it (or
    /// a later one) before its entry can be removed, so a batch keeps its last number once.
    pub fn take(&self) -> u64 {
        self.next.fetch_add(1, Ordering::SeqCst)
    }

    /// Keeps `seq` on disk as the last number taken (only when `keeping_sequence`).
    /// Failing costs only the guarantee of `keeping_sequence`.
    pub fn keep_taken(&self, seq: u64) -> io::Result<()> {
        if !self.keeps_sequence {
            return Ok(());
        }
        write_atomic(&last_taken(&self.dir), seq.to_string().as_bytes())
    }

    /// An entry's bytes, made before the write so that it can leave the runtime alone.
    pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, SpoolError> {
        serde_json::to_vec(value).map_err(|e| SpoolError::Io {
            path: PathBuf::from("(encoding an entry)"),
            source: io::Error::other(e),
        })
    }

    pub fn write_bytes(&self, seq: u64, bytes: &[u8]) -> Result<(), SpoolError> {
        let path = self.path(seq);
        write_atomic(&path, bytes).map_err(|source| SpoolError::Io { path, source })
    }

    pub fn read<T: DeserializeOwned>(&self, seq: u64) -> Result<T, SpoolError> {
        let path = self.path(seq);
        let bytes = fs::read(&path).map_err(|source| SpoolError::Io {
            path: path.clone(),
            source,
        })?;
        serde_json::from_slice(&bytes).map_err(|e| SpoolError::Corrupt {
            path,
            detail: e.to_string(),
        })
    }

    pub fn remove(&self, seq: u64) -> Result<(), SpoolError> {
        let path = self.path(seq);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(SpoolError::Io { path, source }),
        }
    }

    /// The entries on disk now, oldest first.
    pub fn list(&self) -> Result<Vec<u64>, SpoolError> {
        let io_err = |source| SpoolError::Io {
            path: self.dir.clone(),
            source,
        };
        let mut seqs: Vec<u64> = fs::read_dir(&self.dir)
            .map_err(io_err)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_suffix(SUFFIX).and_then(|s| s.parse().ok())
            })
            .collect();
        seqs.sort_unstable();
        Ok(seqs)
    }
}

/// Updates a receiver holds for its group interval, beside its spool: its name is not a
/// sequence number, so the queue never lists it.
const HELD_FILE: &str = "held.json";

impl Spool {
    /// The held updates kept by an earlier run (none when there is no file).
    pub fn read_held<T: DeserializeOwned>(&self) -> Result<Vec<T>, SpoolError> {
        let path = self.dir.join(HELD_FILE);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| SpoolError::Corrupt {
                path,
                detail: e.to_string(),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(source) => Err(SpoolError::Io { path, source }),
        }
    }

    /// Replaces the held updates on disk; none removes the file.
    pub fn write_held<T: Serialize>(&self, held: &[T]) -> Result<(), SpoolError> {
        let path = self.dir.join(HELD_FILE);
        if held.is_empty() {
            return match fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    Err(SpoolError::Io { path, source: e })
                }
                _ => Ok(()),
            };
        }
        let bytes = serde_json::to_vec(held).map_err(|e| SpoolError::Io {
            path: path.clone(),
            source: io::Error::other(e),
        })?;
        write_atomic(&path, &bytes).map_err(|source| SpoolError::Io { path, source })
    }
}

/// The spool directory name of a receiver. Receiver names are `[A-Za-z0-9_.-]`, so only
/// `.` and `..` need care ('%' cannot occur in a name, so nothing collides with them).
pub fn dir_name(receiver: &str) -> String {
    match receiver {
        "." => "%2E".into(),
        ".." => "%2E%2E".into(),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A receiver orders and deduplicates by sequence; after a restart with an empty folder
    /// the numbers came from the clock alone, so a clock stepped back handed out numbers
    /// already used (issue 27 item 3). The last one taken is kept and honoured.
    #[test]
    fn sequences_keep_growing_across_a_restart_after_the_clock_stepped_back() {
        let dir = std::env::temp_dir().join(format!("kw-spool-seq-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let _ = fs::remove_file(last_taken(&dir));
        // Numbers taken before the clock stepped back an hour: ahead of the clock now.
        let ahead = unix_ms(SystemTime::now()).saturating_mul(1000) + 3_600_000_000;
        {
            let (spool, waiting) = Spool::open(&dir).unwrap();
            let spool = spool.keeping_sequence();
            assert!(waiting.is_empty());
            spool.next.store(ahead, Ordering::SeqCst);
            assert_eq!(spool.reserve(), ahead);
            assert_eq!(spool.reserve(), ahead + 1);
        }
        // Nothing waits in the folder; the next start still goes on from there.
        let (spool, waiting) = Spool::open(&dir).unwrap();
        assert!(
            waiting.is_empty(),
            "the kept number is no entry: {waiting:?}"
        );
        assert_eq!(spool.reserve(), ahead + 2);
        assert_eq!(spool.list().unwrap(), Vec::<u64>::new());
        let _ = fs::remove_dir_all(&dir);
        let _ = fs::remove_file(last_taken(&dir));
    }
}
