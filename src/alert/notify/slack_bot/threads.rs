//! Which Slack message stands for which incident, on disk: `chat.update` needs the
//! channel id and `ts` that `chat.postMessage` answered, and a restart must go on editing
//! the same message. One small JSON file per receiver, replaced atomically.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::alert::incident::write_atomic;

/// Entries are removed once an incident's resolve is delivered; incidents whose resolve
/// never reaches this receiver (`send_resolved: false`, a silence) would stay, so beyond
/// this many the oldest messages are forgotten.
pub const MAX_THREADS: usize = 5_000;
const VERSION: u32 = 1;

/// The message of one incident.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    /// The channel id Slack answered with (edits need the id, not a `#name`).
    pub channel: String,
    /// The message's timestamp: its id, and its thread's.
    pub ts: String,
    /// The incident's dedup key, so a remediation of its broker finds the thread.
    pub dedup_key: String,
}

#[derive(Serialize, Deserialize)]
struct File {
    version: u32,
    /// Incident id -> its message.
    threads: BTreeMap<String, Thread>,
}

#[derive(Debug)]
pub struct Threads {
    path: PathBuf,
    map: BTreeMap<String, Thread>,
}

/// `ts` is `<seconds>.<microseconds>`: older messages sort first.
fn age_key(ts: &str) -> (u64, u64) {
    let (s, us) = ts.split_once('.').unwrap_or((ts, "0"));
    (s.parse().unwrap_or(0), us.parse().unwrap_or(0))
}

impl Threads {
    /// Reads `path`; a missing file is an empty store. A file that cannot be read is
    /// logged and set aside: its incidents get new messages, nothing else is lost.
    pub fn load(path: &Path) -> Threads {
        let map = match std::fs::read(path) {
            Ok(bytes) => match serde_json::from_slice::<File>(&bytes) {
                Ok(f) if f.version == VERSION => f.threads,
                Ok(f) => {
                    tracing::error!(path = %path.display(), version = f.version, "Slack message file of another version: its incidents get new messages");
                    BTreeMap::new()
                }
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "Slack message file is corrupt: its incidents get new messages");
                    BTreeMap::new()
                }
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => {
                tracing::error!(path = %path.display(), error = %e, "cannot read the Slack message file: its incidents get new messages");
                BTreeMap::new()
            }
        };
        Threads {
            path: path.to_path_buf(),
            map,
        }
    }

    pub fn get(&self, incident_id: &str) -> Option<&Thread> {
        self.map.get(incident_id)
    }

    /// The message of the incident with this dedup key, if one is kept.
    pub fn by_dedup_key(&self, dedup_key: &str) -> Option<&Thread> {
        self.map.values().find(|t| t.dedup_key == dedup_key)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Remembers the message of an incident, forgetting the oldest beyond `MAX_THREADS`.
    pub fn keep(&mut self, incident_id: &str, thread: Thread) {
        self.map.insert(incident_id.to_string(), thread);
        while self.map.len() > MAX_THREADS {
            let oldest = self
                .map
                .iter()
                .min_by_key(|(_, t)| age_key(&t.ts))
                .map(|(id, _)| id.clone());
            match oldest {
                Some(id) => self.map.remove(&id),
                None => break,
            };
        }
    }

    /// Forgets an incident's message; false when it was not kept (nothing to save).
    pub fn forget(&mut self, incident_id: &str) -> bool {
        self.map.remove(incident_id).is_some()
    }

    /// The file's content, for `save`.
    pub fn bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(&File {
            version: VERSION,
            threads: self.map.clone(),
        })
        .unwrap_or_default()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Writes the file (blocking: call off the runtime's threads), creating its folder.
pub fn save(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        crate::alert::incident::ensure_dir(dir)?;
    }
    write_atomic(path, bytes)
}
