//! Silences at runtime: a silenced incident still opens, shows in `/status` and in the
//! metrics, but no receiver hears of it and no remediation acts on it; when the silence ends
//! and the incident is still open, receivers hear of it then.
//!
//! Silences come from the configuration (`silences:`, fixed) and from the HTTP API or the
//! `silence` command (kept in `<state_dir>/silences.json`, so they survive restarts). The
//! rule itself is `model::silence`.

pub mod metrics;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::model::silence::{Invalid, Origin, Silence, MAX_SILENCES};

/// File in the state directory holding the silences added at runtime.
pub const STATE_FILE: &str = "silences.json";
/// Expired silences stay listed this long, so `silence list` shows what just ended.
const KEEP_EXPIRED: Duration = Duration::from_secs(86_400);

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot read silences from {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("silences file {path} is corrupt: {detail}")]
    Corrupt { path: PathBuf, detail: String },
    #[error("cannot save silences to {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What a merge of a peer's silences did.
#[derive(Debug, Default, PartialEq)]
pub struct Merged {
    /// Ids of the silences added or ended earlier here.
    pub changed: Vec<String>,
    /// Ids of the silences refused, and why.
    pub refused: Vec<(String, Invalid)>,
}

/// Every silence: the configuration's and those added at runtime.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Silences {
    config: Vec<Silence>,
    api: Vec<Silence>,
}

impl Silences {
    /// The runtime silences kept in `dir`; a missing file is none.
    pub fn load(dir: &Path) -> Result<Silences, StoreError> {
        let path = dir.join(STATE_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Silences::default()),
            Err(source) => return Err(StoreError::Read { path, source }),
        };
        let api: Vec<Silence> =
            serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
                path: path.clone(),
                detail: e.to_string(),
            })?;
        Ok(Silences {
            config: Vec::new(),
            api: api
                .into_iter()
                .filter(|s| s.origin == Origin::Api)
                .collect(),
        })
    }

    pub fn save(&self, dir: &Path) -> Result<(), StoreError> {
        crate::alert::incident::write_in(dir, STATE_FILE, &self.encode()).map_err(|source| {
            StoreError::Write {
                path: dir.join(STATE_FILE),
                source,
            }
        })
    }

    /// The runtime silences as their file holds them.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(&self.api).unwrap_or_default()
    }

    /// Replaces the configuration's silences (at start and on reload).
    pub fn set_config(&mut self, silences: Vec<Silence>) {
        self.config = silences;
    }

    pub fn add(&mut self, s: Silence, now: SystemTime) -> Result<(), Invalid> {
        self.prune(now);
        if self.api.len() >= MAX_SILENCES {
            return Err(Invalid(format!(
                "{MAX_SILENCES} silences exist already; expire some first"
            )));
        }
        self.api.retain(|o| o.id != s.id);
        self.api.push(s);
        Ok(())
    }

    /// Ends a runtime silence now; `Ok(false)` when there is none with that id. A
    /// configuration silence ends only by editing the file.
    pub fn expire(&mut self, id: &str, now: SystemTime) -> Result<bool, Invalid> {
        if self.config.iter().any(|s| s.id == id) {
            return Err(Invalid(format!(
                "silence {id} comes from the configuration file: remove it there and reload"
            )));
        }
        let Some(s) = self.api.iter_mut().find(|s| s.id == id) else {
            return Ok(false);
        };
        if s.ends_at > now {
            s.ends_at = now.max(s.starts_at);
        }
        Ok(true)
    }

    /// Takes in a peer's runtime silences (`alert::peers`): one not known is added, one
    /// known ends at the earlier of the two ends (an expiry only moves an end earlier, so
    /// every instance settles on the same silences whatever order it hears them in). Each
    /// passes `Silence::check` first, as one asked of the API would: a peer's silence over
    /// the 30-day cap, for a cluster not watched here, without a comment, is refused.
    pub fn merge(
        &mut self,
        remote: Vec<Silence>,
        known_clusters: &[String],
        now: SystemTime,
    ) -> Merged {
        self.prune(now);
        let mut out = Merged::default();
        for r in remote {
            if r.origin != Origin::Api
                || now
                    .duration_since(r.ends_at)
                    .is_ok_and(|ago| ago >= KEEP_EXPIRED)
            {
                continue;
            }
            if let Err(why) = r.check(known_clusters) {
                out.refused.push((r.id, why));
                continue;
            }
            let room = self.api.len() < MAX_SILENCES;
            match self.api.iter_mut().find(|s| s.id == r.id) {
                Some(s) if r.ends_at < s.ends_at => {
                    s.ends_at = r.ends_at.max(s.starts_at);
                    out.changed.push(r.id);
                }
                Some(_) => {}
                None if room => {
                    out.changed.push(r.id.clone());
                    self.api.push(r);
                }
                None => {}
            }
        }
        out
    }

    /// The runtime silences, expired ones too: what the peers merge.
    pub fn runtime(&self) -> Vec<Silence> {
        self.api.clone()
    }

    /// Drops runtime silences that ended more than a day ago.
    pub fn prune(&mut self, now: SystemTime) {
        self.api.retain(|s| {
            now.duration_since(s.ends_at)
                .map_or(true, |ago| ago < KEEP_EXPIRED)
        });
    }

    /// Every silence, configuration's first, in start order.
    pub fn all(&self) -> Vec<Silence> {
        let mut out: Vec<Silence> = self.config.iter().chain(&self.api).cloned().collect();
        out.sort_by_key(|s| (s.origin as u8, s.starts_at));
        out
    }

    /// Those active now.
    pub fn active(&self, now: SystemTime) -> Vec<Silence> {
        self.config
            .iter()
            .chain(&self.api)
            .filter(|s| s.is_active(now))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests;
