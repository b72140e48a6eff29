//! Incidents, pure: from what each round found wrong to incidents that open, change and
//! resolve with hysteresis, so one bad round (a broker restarting, a GC pause) pages no one
//! and one good round does not close what is still broken. No I/O except the state file;
//! `now` is always a parameter.
//!
//! `findings` turns a round's report into findings keyed by (cluster, subject, kind);
//! `IncidentBook::observe` compares them with what it remembers and returns the events
//! (opened, updated, resolved) that delivery sends on.

mod book;
pub mod metrics;
mod state;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_duration;
#[cfg(test)]
mod tests_quiet;

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::config::{Severity, VerdictConfig};
use crate::judge::verdict::BrokerState;
use crate::model::kind::FindingKind;
use crate::model::round::BrokerId;

pub(crate) use book::incident_id;
pub use book::{find_silence, IncidentBook};

// Findings are judgment (`judge::finding`); the book takes them in by these names too.
pub use crate::judge::finding::{findings, Finding, FindingKey, Subject, MAX_AFFECTED_PARTITIONS};
pub(crate) use state::{disk, ensure_dir, write_atomic, write_in, StateWriter, SLOW_WRITE};
pub use state::{StateError, STATE_FILE};

/// Hysteresis: how long a finding's fact must hold to open an incident, and how long it
/// must be absent to resolve it (`verdict.open_after_secs`, `verdict.resolve_after_secs`:
/// the resolve waits that long after the last bad look, as Prometheus' `keep_firing_for`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hysteresis {
    pub open_after: std::time::Duration,
    pub resolve_after: std::time::Duration,
    pub flap: Flap,
}

/// When an open incident is flapping: its state changed at least `start` times within
/// `window`; it stops flapping once `stop` or fewer changes are left in the window (the
/// two thresholds keep it from flapping in and out of flapping, as Nagios' high and low
/// flap thresholds do). `verdict.flap_window_secs`, `flap_start_changes`,
/// `flap_stop_changes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flap {
    pub window: std::time::Duration,
    pub start: u32,
    pub stop: u32,
}

impl Default for Flap {
    fn default() -> Self {
        Flap::from(&VerdictConfig::default())
    }
}

impl From<&VerdictConfig> for Flap {
    fn from(v: &VerdictConfig) -> Self {
        // The schema's ranges stop at 1000, far inside u32.
        let count = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        let (start, stop) = (
            count(v.keys.flap_start_changes),
            count(v.keys.flap_stop_changes),
        );
        Flap {
            window: v.keys.flap_window,
            start,
            // A stop threshold at or above the start one would end flapping the moment it
            // began; the schema keeps each in range, this keeps them in order.
            stop: stop.min(start.saturating_sub(1)),
        }
    }
}

impl Hysteresis {
    /// The durations the deprecated `open_after_rounds` / `resolve_after_rounds` meant with
    /// rounds `round` apart (see `config::rounds_as_duration`).
    pub fn from_rounds(open: u32, resolve: u32, round: std::time::Duration) -> Self {
        Hysteresis {
            open_after: crate::config::rounds_as_duration(open, round),
            resolve_after: crate::config::rounds_as_duration(resolve, round),
            flap: Flap::default(),
        }
    }
}

impl From<&VerdictConfig> for Hysteresis {
    fn from(v: &VerdictConfig) -> Self {
        Hysteresis {
            open_after: v.open_after,
            resolve_after: v.resolve_after,
            flap: Flap::from(v),
        }
    }
}

impl Default for Hysteresis {
    fn default() -> Self {
        Hysteresis::from(&VerdictConfig::default())
    }
}

/// An incident: a finding that persisted long enough to be told, until it goes away.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Incident {
    /// Unique to this occurrence; a later occurrence of the same problem gets a new one.
    pub id: String,
    /// Stable per (cluster, subject, kind): see `FindingKey::dedup_key`.
    pub dedup_key: String,
    pub cluster: String,
    pub subject: Subject,
    pub kind: FindingKind,
    pub broker: Option<BrokerId>,
    pub broker_address: Option<String>,
    #[serde(with = "serde_state")]
    pub state: Option<BrokerState>,
    #[serde(with = "serde_severity")]
    pub severity: Severity,
    /// The worst severity so far: receivers that were told of it hear of its end.
    #[serde(with = "serde_severity")]
    pub peak_severity: Severity,
    pub summary: String,
    pub evidence: Vec<String>,
    pub rules: Vec<String>,
    pub affected_partitions: Vec<String>,
    pub affected_partitions_total: usize,
    pub suspects: Vec<BrokerId>,
    /// When the finding was first seen (before hysteresis let it open).
    #[serde(with = "crate::model::time::serde_ms")]
    pub started_at: SystemTime,
    /// The last significant change (open, or an update that was sent).
    #[serde(with = "crate::model::time::serde_ms")]
    pub updated_at: SystemTime,
    /// The first round the finding was absent, of the streak that resolved it.
    #[serde(with = "crate::model::time::serde_opt_ms")]
    pub resolved_at: Option<SystemTime>,
    pub unavailable_seconds: Option<f64>,
    /// The silence it is under now: receivers do not hear of it, remediation does not act.
    #[serde(default)]
    pub silenced: Option<crate::model::silence::SilenceMark>,
    /// The worst severity it reached while not silenced: the receivers whose threshold
    /// this reaches have been told of it (and hear of its end). `None`: nobody was.
    #[serde(default, with = "serde_opt_severity")]
    pub notified_peak: Option<Severity>,
    /// Since when its state has been changing back and forth (`Flap`): its receivers were
    /// told once and hear nothing more until it settles or resolves.
    #[serde(default, with = "crate::model::time::serde_opt_ms")]
    pub flapping_since: Option<SystemTime>,
    /// The cluster's static labels (`clusters[].labels`), for receivers to route by.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
}

impl Incident {
    pub fn key(&self) -> FindingKey {
        FindingKey::new(&self.cluster, self.subject, self.kind)
    }

    /// How long it lasted, or has lasted so far.
    pub fn duration(&self, now: SystemTime) -> Duration {
        self.resolved_at
            .unwrap_or(now)
            .duration_since(self.started_at)
            .unwrap_or_default()
    }

    pub fn is_open(&self) -> bool {
        self.resolved_at.is_none()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Opened,
    /// A change in substance since what receivers were told: the severity rose above the
    /// episode's peak, a rule joined at that severity, the partitions affected grew past
    /// what was told, another broker is suspected, it started or stopped flapping, or a
    /// silence began or ended. Never a milder state or a new duration.
    Updated,
    Resolved,
    /// Still open; made by delivery at each receiver's repeat interval.
    Reminder,
    /// Remediation: the command ran (its exit status is in the evidence).
    Acted,
    /// Remediation: a guard refused it; the reasons are in the evidence.
    Refused,
    /// Remediation in dry-run mode: what would have happened.
    DryRun,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Opened => "opened",
            EventKind::Updated => "updated",
            EventKind::Resolved => "resolved",
            EventKind::Reminder => "reminder",
            EventKind::Acted => "acted",
            EventKind::Refused => "refused",
            EventKind::DryRun => "dry_run",
        }
    }

    /// An event that is news once and opens nothing: no reminders, no resolve.
    pub fn is_one_shot(self) -> bool {
        matches!(
            self,
            EventKind::Acted | EventKind::Refused | EventKind::DryRun
        )
    }
}

/// What an incident was before an update.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Previous {
    #[serde(with = "serde_severity")]
    pub severity: Severity,
    /// Receivers whose minimum severity this reached had already been told.
    #[serde(with = "serde_severity")]
    pub peak_severity: Severity,
    #[serde(with = "serde_state")]
    pub state: Option<BrokerState>,
    /// `notified_peak` before the update.
    #[serde(default, with = "serde_opt_severity")]
    pub notified_peak: Option<Severity>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncidentEvent {
    pub kind: EventKind,
    #[serde(with = "crate::model::time::serde_ms")]
    pub at: SystemTime,
    /// The incident as it is after the event.
    pub incident: Incident,
    /// For updates: what it was.
    pub previous: Option<Previous>,
    /// For updates: what changed, in words.
    pub changes: Vec<String>,
}

impl IncidentEvent {
    pub fn reminder(incident: Incident, at: SystemTime) -> Self {
        IncidentEvent {
            kind: EventKind::Reminder,
            at,
            incident,
            previous: None,
            changes: Vec::new(),
        }
    }
}

/// Severity as its configuration spelling.
pub(crate) mod serde_severity {
    use crate::config::Severity;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(s: &Severity, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(s.as_str())
    }

    pub fn parse(s: &str) -> Option<Severity> {
        [Severity::Info, Severity::Warning, Severity::Critical]
            .into_iter()
            .find(|v| v.as_str() == s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Severity, D::Error> {
        let s = String::deserialize(d)?;
        parse(&s).ok_or_else(|| D::Error::custom(format!("unknown severity '{s}'")))
    }
}

/// An optional severity as its configuration spelling.
pub(crate) mod serde_opt_severity {
    use crate::config::Severity;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(s: &Option<Severity>, ser: S) -> Result<S::Ok, S::Error> {
        match s {
            Some(s) => ser.serialize_some(s.as_str()),
            None => ser.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Severity>, D::Error> {
        let Some(s) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        super::serde_severity::parse(&s)
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("unknown severity '{s}'")))
    }
}

/// An optional broker state as its label.
pub(crate) mod serde_state {
    use crate::judge::verdict::BrokerState;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(s: &Option<BrokerState>, ser: S) -> Result<S::Ok, S::Error> {
        match s {
            Some(s) => ser.serialize_some(s.as_label()),
            None => ser.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<BrokerState>, D::Error> {
        let Some(s) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        BrokerState::ALL
            .into_iter()
            .find(|v| v.as_label() == s)
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("unknown broker state '{s}'")))
    }
}
