//! The incident book: hysteresis over findings, one track per finding key.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::{EventKind, Finding, FindingKey, Hysteresis, Incident, IncidentEvent, Previous};
use crate::model::kind::FindingKind;
use crate::model::silence::{Silence, SilenceMark};
use crate::model::time::{serde_ms, unix_ms};

/// Where one finding key stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Track {
    /// Seen in the last `rounds` consecutive evaluations, not yet long enough to open.
    Pending {
        /// When its fact began to hold: first observed, or earlier when its evidence says
        /// so (a silence began with its first unanswered request).
        #[serde(with = "serde_ms")]
        first_seen: SystemTime,
        rounds: u32,
        /// The newest observation of it (absent in state files of older versions).
        #[serde(default, with = "crate::model::time::serde_opt_ms")]
        last_seen: Option<SystemTime>,
    },
    Open {
        incident: Box<Incident>,
        /// Absent in the last rounds; resolves when long enough.
        clearing: Option<Clearing>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Clearing {
    #[serde(with = "serde_ms")]
    pub since: SystemTime,
    pub rounds: u32,
}

/// Every incident of every cluster, open or about to open.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IncidentBook {
    pub(super) tracks: BTreeMap<FindingKey, Track>,
    /// The silences in force; not part of the state file (they have their own).
    silences: Vec<Silence>,
}

impl IncidentBook {
    pub fn new() -> Self {
        IncidentBook::default()
    }

    /// The silences `observe` applies from now on.
    pub fn set_silences(&mut self, silences: Vec<Silence>) {
        self.silences = silences;
    }

    fn silence_of(&self, incident: &Incident, now: SystemTime) -> Option<SilenceMark> {
        find_silence(&self.silences, incident, now).map(Silence::mark)
    }

    /// Brings the silence of every open incident of `cluster` up to date; an event for
    /// each that became silenced (receivers drop it; reminders stop) or whose silence
    /// ended (receivers that never heard of it get it as opened).
    fn apply_silences(&mut self, cluster: &str, now: SystemTime) -> Vec<IncidentEvent> {
        let mut events = Vec::new();
        let keys: Vec<FindingKey> = self
            .tracks
            .keys()
            .filter(|k| k.cluster == cluster)
            .cloned()
            .collect();
        for key in keys {
            let mark = match self.tracks.get(&key) {
                Some(Track::Open { incident, .. }) => self.silence_of(incident, now),
                _ => continue,
            };
            let Some(Track::Open { incident, .. }) = self.tracks.get_mut(&key) else {
                continue;
            };
            let before = incident.silenced.as_ref().map(|m| m.id.clone());
            if before == mark.as_ref().map(|m| m.id.clone()) {
                continue;
            }
            let previous = previous_of(incident);
            let change = match (&incident.silenced, &mark) {
                (_, Some(m)) => format!(
                    "silenced until {} ({}: {})",
                    crate::model::time::rfc3339(m.ends_at),
                    m.id,
                    m.comment
                ),
                (Some(old), None) => format!("silence {} ended", old.id),
                (None, None) => continue,
            };
            incident.silenced = mark;
            if incident.silenced.is_none() {
                incident.notified_peak = incident.notified_peak.max(Some(incident.severity));
            }
            incident.updated_at = now;
            events.push(IncidentEvent {
                kind: EventKind::Updated,
                at: now,
                incident: incident.as_ref().clone(),
                previous: Some(previous),
                changes: vec![change],
            });
        }
        events
    }

    /// Takes one round's findings of `cluster` and returns what changed. Findings of
    /// other clusters are ignored, and so are the incidents of other clusters.
    ///
    /// While the cluster is unreachable (a `ClusterUnreachable` finding is present), the
    /// findings computed from probes (brokers, partitions) are held exactly as they are:
    /// every verdict is `unknown` then and no partition is seen, which says nothing about
    /// whether the problems went away.
    pub fn observe(
        &mut self,
        cluster: &str,
        findings: Vec<Finding>,
        hysteresis: Hysteresis,
        now: SystemTime,
    ) -> Vec<IncidentEvent> {
        let (open_after, resolve_after) = (hysteresis.open_after, hysteresis.resolve_after);
        let mut present: BTreeMap<FindingKey, Finding> = BTreeMap::new();
        for f in findings {
            if f.key.cluster != cluster {
                continue;
            }
            // Two findings with one key (a caller's mistake): the more severe one counts.
            match present.get(&f.key) {
                Some(old) if old.severity >= f.severity => {}
                _ => {
                    present.insert(f.key.clone(), f);
                }
            }
        }
        let unreachable = present
            .keys()
            .any(|k| k.kind == FindingKind::ClusterUnreachable);
        let held = |k: &FindingKey| unreachable && k.kind.from_probes();
        let seen: BTreeSet<FindingKey> = present.keys().cloned().collect();

        let mut events = self.apply_silences(cluster, now);
        for (key, finding) in present {
            if held(&key) {
                continue;
            }
            // A fact held from when its evidence says until its newest observation. A
            // round's fact is observed when the round is evaluated; its re-evaluations
            // between rounds carry that same time and confirm nothing.
            let at = finding.observed_at.unwrap_or(now);
            let began = finding.holds_since.map_or(at, |s| s.min(at));
            let (first_seen, rounds, last_seen) = match self.tracks.get_mut(&key) {
                Some(Track::Open { incident, clearing }) => {
                    *clearing = None;
                    events.extend(refresh(incident, finding, now));
                    continue;
                }
                Some(Track::Pending {
                    first_seen,
                    rounds,
                    last_seen,
                }) => (
                    (*first_seen).min(began),
                    *rounds + 1,
                    last_seen.map_or(at, |l| l.max(at)),
                ),
                None => (began, 1, at),
            };
            let held = last_seen.duration_since(first_seen).unwrap_or_default();
            let needed = finding.hold_for.map_or(open_after, |h| h.max(open_after));
            let track = if held >= needed {
                let mut incident = open(&finding, first_seen, now);
                incident.silenced = self.silence_of(&incident, now);
                if incident.silenced.is_some() {
                    incident.notified_peak = None;
                }
                events.push(opened(&incident, now));
                Track::Open {
                    incident: Box::new(incident),
                    clearing: None,
                }
            } else {
                Track::Pending {
                    first_seen,
                    rounds,
                    last_seen: Some(last_seen),
                }
            };
            self.tracks.insert(key, track);
        }

        let absent: Vec<FindingKey> = self
            .tracks
            .keys()
            .filter(|k| k.cluster == cluster && !held(k) && !seen.contains(*k))
            .cloned()
            .collect();
        for key in absent {
            let Some(track) = self.tracks.get_mut(&key) else {
                continue;
            };
            match track {
                Track::Pending { .. } => {
                    // Rounds must be consecutive: one clean round starts the count anew.
                    self.tracks.remove(&key);
                }
                Track::Open { incident, clearing } => {
                    let c = clearing.get_or_insert(Clearing {
                        since: now,
                        rounds: 0,
                    });
                    c.rounds += 1;
                    if now.duration_since(c.since).unwrap_or_default() >= resolve_after {
                        let mut incident = incident.as_ref().clone();
                        incident.resolved_at = Some(c.since);
                        events.push(IncidentEvent {
                            kind: EventKind::Resolved,
                            at: now,
                            incident,
                            previous: None,
                            changes: Vec::new(),
                        });
                        self.tracks.remove(&key);
                    }
                }
            }
        }
        events
    }

    /// Nothing open, pending or clearing: saving it again would write the same empty book.
    pub fn is_idle(&self) -> bool {
        self.tracks.is_empty()
    }

    /// When a broker finding of `cluster` seen but not yet held for `open_after` will have
    /// been: the time a look at it then opens its incident (or finds it gone). `None` when
    /// nothing waits, or when what waits has been seen over `open_after` already and holds
    /// out for a longer hold of its own (a clean stop's grace), which the rounds will reach.
    ///
    /// Only a broker's verdict is worth an early look: partition and canary findings (a
    /// replica behind for a moment, a write failing during an ordinary election) keep the
    /// rounds' pace, as they did, so a second look one second later pages no blip.
    pub fn confirmation_due(
        &self,
        cluster: &str,
        open_after: std::time::Duration,
    ) -> Option<SystemTime> {
        self.tracks
            .iter()
            .filter(|(k, _)| k.cluster == cluster && k.kind == FindingKind::Broker)
            .filter_map(|(_, t)| match t {
                Track::Pending {
                    first_seen,
                    last_seen,
                    ..
                } => {
                    let due = *first_seen + open_after;
                    last_seen.is_none_or(|l| l < due).then_some(due)
                }
                Track::Open { .. } => None,
            })
            .min()
    }

    /// The open incidents of every cluster, in key order.
    pub fn open_incidents(&self) -> Vec<Incident> {
        self.tracks
            .values()
            .filter_map(|t| match t {
                Track::Open { incident, .. } => Some(incident.as_ref().clone()),
                Track::Pending { .. } => None,
            })
            .collect()
    }

    pub fn open_incidents_of(&self, cluster: &str) -> Vec<Incident> {
        self.open_incidents()
            .into_iter()
            .filter(|i| i.cluster == cluster)
            .collect()
    }

    /// Drops everything about clusters that are no longer watched. Their open incidents
    /// resolve now, so that pages opened for them do not stay open forever.
    pub fn retain_clusters(&mut self, clusters: &[String], now: SystemTime) -> Vec<IncidentEvent> {
        let gone: Vec<FindingKey> = self
            .tracks
            .keys()
            .filter(|k| !clusters.contains(&k.cluster))
            .cloned()
            .collect();
        let mut events = Vec::new();
        for key in gone {
            if let Some(Track::Open { mut incident, .. }) = self.tracks.remove(&key) {
                incident.resolved_at = Some(now);
                incident
                    .evidence
                    .push("the cluster is no longer watched by this watchdog".into());
                events.push(IncidentEvent {
                    kind: EventKind::Resolved,
                    at: now,
                    incident: *incident,
                    previous: None,
                    changes: Vec::new(),
                });
            }
        }
        events
    }
}

/// `kw-` and 20 hex digits of a hash of the dedup key and the start time.
pub(crate) fn incident_id(key: &FindingKey, started_at: SystemTime) -> String {
    let material = format!("{}\n{}", key.dedup_key(), unix_ms(started_at));
    let digest = ring::digest::digest(&ring::digest::SHA256, material.as_bytes());
    let hex: String = digest.as_ref()[..10]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("kw-{hex}")
}

fn open(f: &Finding, started_at: SystemTime, now: SystemTime) -> Incident {
    Incident {
        id: incident_id(&f.key, started_at),
        dedup_key: f.key.dedup_key(),
        cluster: f.key.cluster.clone(),
        subject: f.key.subject,
        kind: f.key.kind,
        broker: f.key.subject.broker(),
        broker_address: f.broker_address.clone(),
        state: f.state,
        severity: f.severity,
        peak_severity: f.severity,
        summary: f.summary.clone(),
        evidence: f.evidence.clone(),
        rules: f.rules.clone(),
        affected_partitions: f.affected_partitions.clone(),
        affected_partitions_total: f.affected_partitions_total,
        suspects: f.suspects.clone(),
        started_at,
        updated_at: now,
        resolved_at: None,
        unavailable_seconds: f.unavailable_seconds,
        silenced: None,
        notified_peak: Some(f.severity),
    }
}

fn previous_of(incident: &Incident) -> Previous {
    Previous {
        severity: incident.severity,
        peak_severity: incident.peak_severity,
        state: incident.state,
        notified_peak: incident.notified_peak,
    }
}

fn opened(incident: &Incident, now: SystemTime) -> IncidentEvent {
    IncidentEvent {
        kind: EventKind::Opened,
        at: now,
        incident: incident.clone(),
        previous: None,
        changes: Vec::new(),
    }
}

/// What changed that a receiver should hear of. Partitions and suspects count only when
/// new ones join: an incident shrinking as replicas catch up is recovery in progress, and
/// a message per recovered partition would drown the one that matters (the resolve).
pub(super) fn changes(old: &Incident, new: &Finding) -> Vec<String> {
    let mut out = Vec::new();
    if old.severity != new.severity {
        out.push(format!(
            "severity {} -> {}",
            old.severity.as_str(),
            new.severity.as_str()
        ));
    }
    if old.state != new.state {
        let label =
            |s: Option<crate::judge::verdict::BrokerState>| s.map_or("none", |s| s.as_label());
        out.push(format!(
            "state {} -> {}",
            label(old.state),
            label(new.state)
        ));
    }
    let before: BTreeSet<&str> = old.rules.iter().map(String::as_str).collect();
    let after: BTreeSet<&str> = new.rules.iter().map(String::as_str).collect();
    let added: Vec<&str> = after.difference(&before).copied().collect();
    let removed: Vec<&str> = before.difference(&after).copied().collect();
    if !added.is_empty() {
        out.push(format!("now also: {}", added.join(", ")));
    }
    if !removed.is_empty() {
        out.push(format!("no longer: {}", removed.join(", ")));
    }
    let listed: BTreeSet<&str> = old.affected_partitions.iter().map(String::as_str).collect();
    let complete = |total: usize| total <= super::MAX_AFFECTED_PARTITIONS;
    let new_names: Vec<&str> =
        if complete(old.affected_partitions_total) && complete(new.affected_partitions_total) {
            new.affected_partitions
                .iter()
                .map(String::as_str)
                .filter(|p| !listed.contains(p))
                .collect()
        } else {
            Vec::new()
        };
    if !new_names.is_empty() || new.affected_partitions_total > old.affected_partitions_total {
        out.push(format!(
            "{} partition(s) affected, was {}",
            new.affected_partitions_total, old.affected_partitions_total
        ));
    }
    let new_suspects: Vec<String> = new
        .suspects
        .iter()
        .filter(|b| !old.suspects.contains(b))
        .map(|b| b.to_string())
        .collect();
    if !new_suspects.is_empty() {
        out.push(format!(
            "now also suspects broker(s) {}",
            new_suspects.join(", ")
        ));
    }
    out
}

/// Brings an open incident up to date with this round's finding; an event when the
/// change is significant.
fn refresh(incident: &mut Incident, f: Finding, now: SystemTime) -> Option<IncidentEvent> {
    let changes = changes(incident, &f);
    let previous = previous_of(incident);
    incident.severity = f.severity;
    incident.peak_severity = incident.peak_severity.max(f.severity);
    if incident.silenced.is_none() {
        incident.notified_peak = incident.notified_peak.max(Some(f.severity));
    }
    incident.state = f.state;
    if f.broker_address.is_some() {
        incident.broker_address = f.broker_address;
    }
    incident.summary = f.summary;
    incident.evidence = f.evidence;
    incident.rules = f.rules;
    incident.affected_partitions = f.affected_partitions;
    incident.affected_partitions_total = f.affected_partitions_total;
    incident.suspects = f.suspects;
    if f.unavailable_seconds.is_some() {
        incident.unavailable_seconds = f.unavailable_seconds;
    }
    if changes.is_empty() {
        return None;
    }
    incident.updated_at = now;
    Some(IncidentEvent {
        kind: EventKind::Updated,
        at: now,
        incident: incident.clone(),
        previous: Some(previous),
        changes,
    })
}

// Matching needs the incident, which the model (where the silence rule lives) does not
// know; so this part of `Silence` is here.
impl Silence {
    /// Whether it covers `incident` (activity aside).
    pub fn covers(&self, incident: &Incident) -> bool {
        self.covers_parts(
            &incident.cluster,
            incident.kind,
            incident.broker,
            &incident.suspects,
        )
    }
}

/// The first active silence covering `incident`, ending last first (the one that keeps it
/// quiet longest is the one worth naming).
pub fn find_silence<'a>(
    silences: &'a [Silence],
    incident: &Incident,
    now: SystemTime,
) -> Option<&'a Silence> {
    silences
        .iter()
        .filter(|s| s.is_active(now) && s.covers(incident))
        .max_by_key(|s| s.ends_at)
}
