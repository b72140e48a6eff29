//! Silences as rules: planned quiet for a cluster, a broker or a kind of incident (a rolling
//! upgrade, a broker taken out for repair), what someone asks for and how it is checked.
//! Plain data and pure checks, so the configuration's `silences:` are read into the same
//! type the HTTP API and the `silence` command make; the runtime store is
//! `alert::silence`, the matching against incidents `alert::incident`.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::model::kind::FindingKind;
use crate::model::round::BrokerId;
/// Silences read their times with it; callers (the API, the CLI, the fuzz targets) have
/// always found it here.
pub use crate::model::time::parse_rfc3339;
use crate::model::time::{rfc3339, serde_ms, unix_ms};

/// Longest silence: a forgotten one must not hide a cluster for good.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 86_400);
/// Bounded so the API cannot be used to fill the disk.
pub const MAX_SILENCES: usize = 1000;
/// Longest comment kept.
pub const MAX_COMMENT_CHARS: usize = 1000;
/// Longest `created_by` kept.
pub const MAX_AUTHOR_CHARS: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The configuration file's `silences:`; changes with the file.
    Config,
    /// Added through the HTTP API or the `silence` command.
    Api,
}

/// What to keep quiet, until when, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Silence {
    pub id: String,
    /// `None`: every cluster.
    pub cluster: Option<String>,
    /// `None`: every broker. A broker silence also covers cluster-wide incidents whose
    /// suspects are that broker alone (its partitions under-replicated while it is down).
    pub broker: Option<BrokerId>,
    /// `None`: every kind.
    pub kind: Option<FindingKind>,
    #[serde(with = "serde_ms")]
    pub starts_at: SystemTime,
    #[serde(with = "serde_ms")]
    pub ends_at: SystemTime,
    pub comment: String,
    /// Who asked (the API's caller, or `config`).
    pub created_by: String,
    pub origin: Origin,
}

impl Silence {
    pub fn is_active(&self, now: SystemTime) -> bool {
        self.starts_at <= now && now < self.ends_at
    }

    /// Whether it covers an incident of `kind` in `cluster` about `broker` (or, for a
    /// cluster-wide one, suspecting `suspects`).
    pub fn covers_parts(
        &self,
        cluster: &str,
        kind: FindingKind,
        broker: Option<BrokerId>,
        suspects: &[BrokerId],
    ) -> bool {
        if self.cluster.as_ref().is_some_and(|c| c != cluster) {
            return false;
        }
        if self.kind.is_some_and(|k| k != kind) {
            return false;
        }
        match self.broker {
            None => true,
            Some(b) => match broker {
                Some(ib) => ib == b,
                None => !suspects.is_empty() && suspects.iter().all(|s| *s == b),
            },
        }
    }

    /// One line for people: `broker 2 of orders until 2026-12-01T14:00:00.000Z (upgrade)`.
    pub fn describe(&self) -> String {
        let mut what = Vec::new();
        if let Some(k) = self.kind {
            what.push(format!("{} incidents", k.as_str()));
        }
        if let Some(b) = self.broker {
            what.push(format!("broker {b}"));
        }
        let cluster = match &self.cluster {
            Some(c) => format!("cluster {c}"),
            None => "every cluster".into(),
        };
        let what = if what.is_empty() {
            cluster
        } else {
            format!("{} of {cluster}", what.join(", "))
        };
        format!(
            "silence {}: {what} until {} ({})",
            self.id,
            rfc3339(self.ends_at),
            self.comment
        )
    }

    /// The rules every silence kept at runtime obeys, whoever made it: the API and the
    /// `silence` command (through `Request::check`), the file, and a peer that passes one
    /// on (`alert::silence::Silences::merge`), so a silence a peer hands over can do no
    /// more than one asked of this watchdog's own API (issue 38 item 5). A peer's copy may
    /// have been expired before it started, so an end at its start is accepted here; a
    /// request must end after its start (`Request::check`).
    pub fn check(&self, known_clusters: &[String]) -> Result<(), Invalid> {
        let bad = |m: String| Err(Invalid(m));
        if let Some(c) = &self.cluster {
            if !known_clusters.contains(c) {
                return bad(format!(
                    "cluster '{c}' is not watched (known: {})",
                    known_clusters.join(", ")
                ));
            }
        }
        let comment = self.comment.trim();
        if comment.is_empty() {
            return bad("a comment is required: say why, so the next person knows".into());
        }
        if comment.chars().count() > MAX_COMMENT_CHARS {
            return bad(format!(
                "the comment is longer than {MAX_COMMENT_CHARS} characters"
            ));
        }
        let author = self.created_by.trim();
        if author.is_empty() || author.chars().count() > MAX_AUTHOR_CHARS {
            return bad(format!(
                "created_by must name someone in at most {MAX_AUTHOR_CHARS} characters"
            ));
        }
        if !is_silence_id(&self.id) {
            return bad(format!(
                "'{}' is not a silence id (s- and 12 hex digits)",
                self.id.chars().take(40).collect::<String>()
            ));
        }
        let Ok(length) = self.ends_at.duration_since(self.starts_at) else {
            return bad(format!(
                "the silence would end at {}, before its start",
                rfc3339(self.ends_at)
            ));
        };
        if self.origin == Origin::Api && length > MAX_DURATION {
            return bad(format!(
                "a silence lasts at most {} days",
                MAX_DURATION.as_secs() / 86_400
            ));
        }
        Ok(())
    }

    pub fn mark(&self) -> SilenceMark {
        SilenceMark {
            id: self.id.clone(),
            ends_at: self.ends_at,
            comment: self.comment.clone(),
        }
    }
}

/// The silence an incident is under, as the incident carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SilenceMark {
    pub id: String,
    #[serde(with = "serde_ms")]
    pub ends_at: SystemTime,
    pub comment: String,
}

/// A silence as the API and `/status` show it: times in RFC 3339, and whether it is in
/// force now.
pub fn to_json(s: &Silence, now: SystemTime) -> serde_json::Value {
    serde_json::json!({
        "id": s.id,
        "cluster": s.cluster,
        "broker": s.broker,
        "kind": s.kind.map(|k| k.as_str()),
        "starts_at": rfc3339(s.starts_at),
        "ends_at": rfc3339(s.ends_at),
        "active": s.is_active(now),
        "comment": s.comment,
        "created_by": s.created_by,
        "origin": match s.origin {
            Origin::Config => "config",
            Origin::Api => "api",
        },
    })
}

/// What someone asks to silence, before it is checked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub cluster: Option<String>,
    pub broker: Option<BrokerId>,
    pub kind: Option<String>,
    /// RFC 3339; default now.
    pub starts_at: Option<String>,
    /// RFC 3339; this or `duration`.
    pub ends_at: Option<String>,
    /// `90m`, `2h`, `1d`, `3600s`; this or `ends_at`.
    pub duration: Option<String>,
    pub comment: String,
    pub created_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl Request {
    /// A silence, or what is wrong with the request in one sentence.
    pub fn check(
        &self,
        known_clusters: &[String],
        now: SystemTime,
        origin: Origin,
    ) -> Result<Silence, Invalid> {
        let kind = self.checked_kind()?;
        let (starts_at, ends_at) = self.window(now, origin)?;
        let mut s = Silence {
            id: String::new(),
            cluster: self.cluster.clone(),
            broker: self.broker,
            kind,
            starts_at,
            ends_at,
            comment: self.comment.trim().to_string(),
            created_by: self.author(origin),
            origin,
        };
        s.id = silence_id(&s);
        s.check(known_clusters)?;
        Ok(s)
    }

    /// The kind of finding silenced, by its name; none silences every kind.
    fn checked_kind(&self) -> Result<Option<FindingKind>, Invalid> {
        let Some(k) = &self.kind else {
            return Ok(None);
        };
        match FindingKind::ALL.iter().find(|f| f.as_str() == k) {
            Some(f) => Ok(Some(*f)),
            None => {
                let names: Vec<&str> = FindingKind::ALL.iter().map(|f| f.as_str()).collect();
                Err(Invalid(format!(
                    "kind '{k}' is unknown (one of: {})",
                    names.join(", ")
                )))
            }
        }
    }

    /// When the silence starts and ends, checked to end after it starts (and, from the API,
    /// after now); how long it may last is `Silence::check`'s.
    fn window(&self, now: SystemTime, origin: Origin) -> Result<(SystemTime, SystemTime), Invalid> {
        let bad = |m: String| Err(Invalid(m));
        // A file's silence is the same silence on every load: it starts when it says (or
        // has always been), ends at a written time, and one that ended is merely over.
        let fixed = origin == Origin::Config;
        let starts_at = match &self.starts_at {
            None if fixed => SystemTime::UNIX_EPOCH,
            None => now,
            Some(t) => parse_rfc3339(t).map_err(|e| Invalid(format!("starts_at: {e}")))?,
        };
        let ends_at = self.end(starts_at, fixed)?;
        let floor = if fixed { starts_at } else { starts_at.max(now) };
        if ends_at <= floor {
            return bad(format!(
                "the silence would end at {}, which is not after its start{}",
                rfc3339(ends_at),
                if fixed { "" } else { " and now" }
            ));
        }
        Ok((starts_at, ends_at))
    }

    /// The end: `ends_at`, or `duration` after `starts_at` (not in the file); exactly one.
    fn end(&self, starts_at: SystemTime, fixed: bool) -> Result<SystemTime, Invalid> {
        let bad = |m: &str| Err(Invalid(m.into()));
        match (&self.ends_at, &self.duration) {
            (Some(_), Some(_)) => bad("give ends_at or duration, not both"),
            (None, Some(_)) if fixed => {
                bad("a silence in the file needs ends_at (RFC 3339), not a duration")
            }
            (None, None) => bad("an end is required: ends_at (RFC 3339) or duration (e.g. 2h)"),
            (Some(t), None) => parse_rfc3339(t).map_err(|e| Invalid(format!("ends_at: {e}"))),
            (None, Some(d)) => {
                let d = parse_duration(d).map_err(|e| Invalid(format!("duration: {e}")))?;
                // A duration past what a clock can hold (18446744073709551615s) panicked.
                starts_at.checked_add(d).ok_or_else(|| {
                    Invalid(format!(
                        "duration: too long (a silence lasts at most {} days)",
                        MAX_DURATION.as_secs() / 86_400
                    ))
                })
            }
        }
    }

    /// Who made it, trimmed and cut to 100 characters; the origin when not said.
    fn author(&self, origin: Origin) -> String {
        self.created_by
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .unwrap_or(match origin {
                Origin::Config => "config",
                Origin::Api => "api",
            })
            .chars()
            .take(MAX_AUTHOR_CHARS)
            .collect()
    }
}

/// `s-` and 12 hex digits of a hash of what it silences and when: stable for a config
/// silence across reloads, distinct for two API silences made at different times.
pub(crate) fn silence_id(s: &Silence) -> String {
    let material = format!(
        "{:?}\n{:?}\n{:?}\n{}\n{}\n{}",
        s.cluster,
        s.broker,
        s.kind.map(|k| k.as_str()),
        unix_ms(s.starts_at),
        unix_ms(s.ends_at),
        s.comment
    );
    let digest = ring::digest::digest(&ring::digest::SHA256, material.as_bytes());
    let hex: String = digest.as_ref()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("s-{hex}")
}

/// Whether `id` has the shape `silence_id` gives: `s-` and 12 lower-case hex digits.
fn is_silence_id(id: &str) -> bool {
    id.strip_prefix("s-").is_some_and(|h| {
        h.len() == 12
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// `90s`, `15m`, `2h`, `1d`, or a combination (`1h30m`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let wrong = || format!("'{t}' is not a duration (e.g. 90m, 2h, 1d, 1h30m)");
    if t.is_empty() {
        return Err(wrong());
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in t.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(wrong()),
        };
        let n: u64 = digits.parse().map_err(|_| wrong())?;
        digits.clear();
        total = n
            .checked_mul(unit)
            .and_then(|x| total.checked_add(x))
            .ok_or_else(wrong)?;
    }
    if !digits.is_empty() || total == 0 {
        return Err(wrong());
    }
    Ok(Duration::from_secs(total))
}
