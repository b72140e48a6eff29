//! The incident book: hysteresis over findings, one track per finding key.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::{
    EventKind, Finding, FindingKey, Flap, Hysteresis, Incident, IncidentEvent, Previous, Subject,
};
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
        /// The last look at which an open broker incident explained it (a consequence:
        /// partitions a broker's fault left under-replicated or offline). It opens on its
        /// own only once it has outlived that cause by `resolve_after`.
        #[serde(default, with = "crate::model::time::serde_opt_ms")]
        explained_at: Option<SystemTime>,
    },
    Open {
        incident: Box<Incident>,
        /// Absent in the last rounds; resolves when long enough.
        clearing: Option<Clearing>,
        /// What its receivers were told, and its state changes for flapping (absent in
        /// state files of older versions: taken from the incident as it was saved).
        #[serde(default)]
        told: Option<Told>,
        #[serde(default)]
        changes: StateChanges,
    },
}

/// What the receivers of an open incident were told of it in substance: an update goes
/// out only when a finding goes past this, so a state that swings back and forth, a
/// duration in a sentence or a partition recovering and failing again tells nothing new.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Told {
    #[serde(with = "super::serde_severity")]
    pub severity: crate::config::Severity,
    pub rules: BTreeSet<String>,
    pub partitions_total: usize,
    pub suspects: BTreeSet<crate::model::round::BrokerId>,
    #[serde(default)]
    pub flapping: bool,
    /// The worst broker state told (down and degraded share a severity).
    #[serde(default, with = "super::serde_state")]
    pub state: Option<crate::judge::verdict::BrokerState>,
}

impl Told {
    fn of(incident: &Incident) -> Told {
        Told {
            severity: incident.severity,
            rules: incident.rules.iter().cloned().collect(),
            partitions_total: incident.affected_partitions_total,
            suspects: incident.suspects.iter().copied().collect(),
            flapping: false,
            state: incident.state,
        }
    }
}

/// The times an open incident's look changed (another state, or present <-> absent), within
/// the flapping window, and whether it flaps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct StateChanges {
    /// The last look: the finding's state (or severity) label, or "absent".
    last: Option<String>,
    /// Unix milliseconds of each change still in the window.
    at: VecDeque<u64>,
    /// Since when it has been flapping.
    #[serde(default, with = "crate::model::time::serde_opt_ms")]
    flapping_since: Option<SystemTime>,
    /// The window the changes were counted over, for the words.
    #[serde(default)]
    window_secs: u64,
}

impl StateChanges {
    /// Takes one look; returns the flapping news: `Some(true)` it started flapping,
    /// `Some(false)` it stopped.
    fn look(&mut self, look: &str, flap: Flap, now: SystemTime) -> Option<bool> {
        let ms = unix_ms(now);
        if self.last.as_deref().is_some_and(|l| l != look) {
            self.at.push_back(ms);
        }
        self.last = Some(look.to_string());
        let window = u64::try_from(flap.window.as_millis()).unwrap_or(u64::MAX);
        self.window_secs = flap.window.as_secs();
        while self
            .at
            .front()
            .is_some_and(|t| ms.saturating_sub(*t) > window)
        {
            self.at.pop_front();
        }
        let n = self.count();
        match self.flapping_since {
            None if n >= flap.start => {
                self.flapping_since = Some(now);
                Some(true)
            }
            Some(_) if n <= flap.stop => {
                self.flapping_since = None;
                Some(false)
            }
            _ => None,
        }
    }

    fn count(&self) -> u32 {
        u32::try_from(self.at.len()).unwrap_or(u32::MAX)
    }

    pub fn flapping(&self) -> bool {
        self.flapping_since.is_some()
    }
}

/// The look of a present finding, for [`StateChanges`].
fn look_of(f: &Finding) -> &'static str {
    match f.state {
        Some(s) => s.as_label(),
        None => f.severity.as_str(),
    }
}

const ABSENT: &str = "absent";

/// The kind of incident that explains a finding of `kind`, when one can: the finding is
/// then folded into that incident while it is open, instead of a page of its own.
/// Partition findings are a broker's fault (canary partitions that cannot be written while
/// their leader is the broker at fault too; the window's length stays on /status and in
/// `canary_unavailable_seconds`). A quorum out because of the controllers it suspects (the
/// only controller frozen) is that controller's fault: one fault, one page (issue 31).
fn cause_of(kind: FindingKind) -> Option<FindingKind> {
    match kind {
        FindingKind::UnderReplicated
        | FindingKind::UnderMinIsr
        | FindingKind::OfflinePartitions
        | FindingKind::CanaryUnavailable => Some(FindingKind::Broker),
        FindingKind::Quorum => Some(FindingKind::Controller),
        _ => None,
    }
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
    ///
    /// Partitions whose missing replicas are all on brokers with an open incident are that
    /// broker's impact: listed in its incident (which takes their severity), not incidents
    /// of their own, until they outlive it by `resolve_after`.
    pub fn observe(
        &mut self,
        cluster: &str,
        findings: Vec<Finding>,
        hysteresis: Hysteresis,
        now: SystemTime,
    ) -> Vec<IncidentEvent> {
        let mut present = present_of(cluster, findings);
        let unreachable = present
            .keys()
            .any(|k| k.kind == FindingKind::ClusterUnreachable);
        let held = |k: &FindingKey| unreachable && k.kind.from_probes();
        let seen: BTreeSet<FindingKey> = present.keys().cloned().collect();
        let explained = self.fold_consequences(&mut present, hysteresis.open_after, now);

        let mut events = self.apply_silences(cluster, now);
        for (key, finding) in present {
            if !held(&key) {
                let explained_now = explained.contains(&key);
                self.seen(key, finding, explained_now, hysteresis, now, &mut events);
            }
        }
        // The watchdog's own blindness is not a round's to judge (`observe_blind`).
        let absent: Vec<FindingKey> = self
            .tracks
            .keys()
            .filter(|k| k.cluster == cluster && !held(k) && !seen.contains(*k))
            .filter(|k| k.kind != FindingKind::WatchdogBlind)
            .cloned()
            .collect();
        for key in absent {
            self.missed(key, hysteresis, now, &mut events);
        }
        events
    }

    /// A finding present this look: its open incident refreshed, or its pending count
    /// moved on, and opened once it has held `open_after` (unless another incident
    /// explains it, or did within its resolve hold).
    fn seen(
        &mut self,
        key: FindingKey,
        finding: Finding,
        explained_now: bool,
        hysteresis: Hysteresis,
        now: SystemTime,
        events: &mut Vec<IncidentEvent>,
    ) {
        if let Some(Track::Open {
            incident,
            clearing,
            told,
            changes,
        }) = self.tracks.get_mut(&key)
        {
            *clearing = None;
            let told = told.get_or_insert_with(|| Told::of(incident));
            let flapping = changes.look(look_of(&finding), hysteresis.flap, now);
            events.extend(refresh(incident, told, changes, flapping, finding, now));
            return;
        }
        let step = pending_step(self.tracks.get(&key), &finding, hysteresis.open_after, now);
        let explained_at = if explained_now {
            Some(now)
        } else {
            step.explained_at
        };
        // A consequence that outlived its cause waits the cause's resolve hold first: a
        // replica still catching up when its broker's incident resolves is recovery.
        let outlived = explained_at
            .is_none_or(|t| now.duration_since(t).unwrap_or_default() >= hysteresis.resolve_after);
        let track = if step.opens && !explained_now && outlived {
            let mut incident = open(&finding, step.first_seen, now);
            incident.silenced = self.silence_of(&incident, now);
            if incident.silenced.is_some() {
                incident.notified_peak = None;
            }
            events.push(opened(&incident, now));
            let mut changes = StateChanges::default();
            changes.look(look_of(&finding), hysteresis.flap, now);
            Track::Open {
                told: Some(Told::of(&incident)),
                incident: Box::new(incident),
                clearing: None,
                changes,
            }
        } else {
            Track::Pending {
                first_seen: step.first_seen,
                rounds: step.rounds,
                last_seen: Some(step.last_seen),
                explained_at,
            }
        };
        self.tracks.insert(key, track);
    }

    /// A tracked finding absent this look: a pending one starts over; an open one clears,
    /// and resolves once it has been absent `resolve_after` (going away and coming back
    /// counts for flapping).
    fn missed(
        &mut self,
        key: FindingKey,
        hysteresis: Hysteresis,
        now: SystemTime,
        events: &mut Vec<IncidentEvent>,
    ) {
        let Some(track) = self.tracks.get_mut(&key) else {
            return;
        };
        match track {
            Track::Pending { .. } => {
                // Rounds must be consecutive: one clean round starts the count anew.
                self.tracks.remove(&key);
            }
            Track::Open {
                incident,
                clearing,
                told,
                changes,
            } => {
                let c = clearing.get_or_insert(Clearing {
                    since: now,
                    rounds: 0,
                });
                c.rounds += 1;
                let since = c.since;
                if now.duration_since(since).unwrap_or_default() >= hysteresis.resolve_after {
                    let mut incident = incident.as_ref().clone();
                    incident.resolved_at = Some(since);
                    events.push(IncidentEvent {
                        kind: EventKind::Resolved,
                        at: now,
                        incident,
                        previous: None,
                        changes: Vec::new(),
                    });
                    self.tracks.remove(&key);
                    return;
                }
                // Going away and coming back is a change too. That it stopped flapping
                // while it clears is said by its resolve, not by a message of its own.
                let started = changes.look(ABSENT, hysteresis.flap, now) == Some(true);
                incident.flapping_since = changes.flapping_since;
                if started {
                    let told = told.get_or_insert_with(|| Told::of(incident));
                    events.extend(announce_flapping(incident, told, changes, now));
                }
            }
        }
    }

    /// Nodes of `present`'s cluster whose incident of kind `cause` (a broker's or a
    /// controller's) is open, or opens with this look.
    fn open_causes(
        &self,
        present: &BTreeMap<FindingKey, Finding>,
        cause: FindingKind,
        open_after: std::time::Duration,
        now: SystemTime,
    ) -> BTreeSet<crate::model::round::BrokerId> {
        let Some(cluster) = present.keys().next().map(|k| k.cluster.clone()) else {
            return BTreeSet::new();
        };
        let mut out: BTreeSet<_> = self
            .tracks
            .iter()
            .filter(|(k, t)| {
                k.cluster == cluster && k.kind == cause && matches!(t, Track::Open { .. })
            })
            .filter_map(|(k, _)| k.subject.node())
            .collect();
        for (k, f) in present {
            if k.kind == cause && pending_step(self.tracks.get(k), f, open_after, now).opens {
                out.extend(k.subject.node());
            }
        }
        out
    }

    /// Folds the consequences that open broker incidents explain into those brokers'
    /// findings (severity, partitions, rules, an evidence line) and returns their keys.
    /// A consequence already open on its own stays so until it resolves.
    fn fold_consequences(
        &self,
        present: &mut BTreeMap<FindingKey, Finding>,
        open_after: std::time::Duration,
        now: SystemTime,
    ) -> BTreeSet<FindingKey> {
        let brokers = self.open_causes(present, FindingKind::Broker, open_after, now);
        let controllers = self.open_causes(present, FindingKind::Controller, open_after, now);
        // Brokers whose own finding is present but not yet open: in a controlled shutdown
        // (leaving every ISR, then held for the restart grace), or degraded for less than
        // `open_after`. Replicas missing only there are not paged before their cause would
        // be: a rolling restart moves the missing replica from one broker to the next, and
        // each broker's part is held while the partitions' finding stays the same one (the
        // routine bench paged it 5 s into a restart). Only under-replicated partitions:
        // offline and under-min-ISR ones are writes failing, and page as always.
        let pending_brokers: BTreeSet<crate::model::round::BrokerId> = present
            .keys()
            .filter(|k| k.kind == FindingKind::Broker)
            .filter_map(|k| k.subject.broker())
            .chain(brokers.iter().copied())
            .collect();
        // The causes each explained consequence is folded into.
        let explained: Vec<(FindingKey, Vec<FindingKey>)> = present
            .iter()
            .filter(|(k, _)| !matches!(self.tracks.get(*k), Some(Track::Open { .. })))
            .filter_map(|(k, f)| {
                let key = |subject, kind| FindingKey::new(&k.cluster, subject, kind);
                let named = |open: &BTreeSet<_>| {
                    !f.suspects.is_empty() && f.suspects.iter().all(|n| open.contains(n))
                };
                let causes: Vec<FindingKey> = match cause_of(k.kind)? {
                    FindingKind::Controller if named(&controllers) => f
                        .suspects
                        .iter()
                        .map(|n| key(Subject::Controller(*n), FindingKind::Controller))
                        .collect(),
                    FindingKind::Broker
                        if named(&brokers)
                            || (k.kind == FindingKind::UnderReplicated
                                && named(&pending_brokers)) =>
                    {
                        f.suspects
                            .iter()
                            .map(|n| key(Subject::Broker(*n), FindingKind::Broker))
                            .collect()
                    }
                    // Partitions no broker incident explains while a controller's incident
                    // is open: the failover's fencing moved them (one episode, issue 25).
                    FindingKind::Broker => controllers
                        .first()
                        .map(|c| key(Subject::Controller(*c), FindingKind::Controller))
                        .into_iter()
                        .collect(),
                    _ => Vec::new(),
                };
                (!causes.is_empty()).then(|| (k.clone(), causes))
            })
            .collect();
        for (key, causes) in &explained {
            let Some(consequence) = present.get(key).cloned() else {
                continue;
            };
            for cause in causes {
                if let Some(f) = present.get_mut(cause) {
                    add_impact(f, &consequence);
                }
            }
        }
        explained.into_iter().map(|(k, _)| k).collect()
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

    /// Each open incident's dedup key and start: which episodes are open now, for the
    /// peers (`alert::peers`), without copying the incidents.
    pub fn open_episodes(&self) -> Vec<(String, SystemTime)> {
        self.tracks
            .values()
            .filter_map(|t| match t {
                Track::Open { incident, .. } => {
                    Some((incident.dedup_key.clone(), incident.started_at))
                }
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

    /// The watchdog's own sight of `cluster` (issue 38 item 2): `blind` is the finding
    /// while its round loop completes no rounds, `None` once it does again. It opens and
    /// resolves at once (the loop's allowance was the wait). No round's `observe` touches
    /// it, and while it is open no round reaches the cluster's other incidents: they stay
    /// as they were.
    pub fn observe_blind(
        &mut self,
        cluster: &str,
        blind: Option<Finding>,
        now: SystemTime,
    ) -> Vec<IncidentEvent> {
        let key = FindingKey::new(cluster, Subject::Cluster, FindingKind::WatchdogBlind);
        let at_once = Hysteresis {
            open_after: std::time::Duration::ZERO,
            resolve_after: std::time::Duration::ZERO,
            flap: Flap::default(),
        };
        let mut events = Vec::new();
        match blind {
            Some(f) => self.seen(key, f, false, at_once, now, &mut events),
            None => self.missed(key, at_once, now, &mut events),
        }
        events
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
        labels: f.labels.clone(),
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
        flapping_since: None,
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

/// Where a finding not open yet stands after this look.
struct Step {
    first_seen: SystemTime,
    rounds: u32,
    last_seen: SystemTime,
    explained_at: Option<SystemTime>,
    /// It has held long enough to open.
    opens: bool,
}

/// The findings of `cluster`, one per key: two with one key (a caller's mistake) count as
/// the more severe.
fn present_of(cluster: &str, findings: Vec<Finding>) -> BTreeMap<FindingKey, Finding> {
    let mut present: BTreeMap<FindingKey, Finding> = BTreeMap::new();
    for f in findings {
        if f.key.cluster != cluster {
            continue;
        }
        match present.get(&f.key) {
            Some(old) if old.severity >= f.severity => {}
            _ => {
                present.insert(f.key.clone(), f);
            }
        }
    }
    present
}

/// A fact held from when its evidence says until its newest observation. A round's fact is
/// observed when the round is evaluated; its re-evaluations between rounds carry that same
/// time and confirm nothing.
fn pending_step(
    track: Option<&Track>,
    f: &Finding,
    open_after: std::time::Duration,
    now: SystemTime,
) -> Step {
    let at = f.observed_at.unwrap_or(now);
    let began = f.holds_since.map_or(at, |s| s.min(at));
    let (first_seen, rounds, last_seen, explained_at) = match track {
        Some(Track::Pending {
            first_seen,
            rounds,
            last_seen,
            explained_at,
        }) => (
            (*first_seen).min(began),
            *rounds + 1,
            last_seen.map_or(at, |l| l.max(at)),
            *explained_at,
        ),
        Some(Track::Open { .. }) => {
            return Step {
                first_seen: began,
                rounds: 1,
                last_seen: at,
                explained_at: None,
                opens: true,
            }
        }
        None => (began, 1, at, None),
    };
    let held = last_seen.duration_since(first_seen).unwrap_or_default();
    let needed = f.hold_for.map_or(open_after, |h| h.max(open_after));
    Step {
        first_seen,
        rounds,
        last_seen,
        explained_at,
        opens: held >= needed,
    }
}

/// A broker finding takes a consequence it explains: its severity (offline partitions make
/// a down broker's incident critical), its partitions, its kind among the rules and its
/// summary as evidence. Partitions a broker left under-replicated are what its fault means,
/// no news; partitions it left offline or under min.insync.replicas are writes failing, news
/// when they join (a critical rule: it escalates a warning, and a zombie's receivers hear
/// that data is now unavailable).
fn add_impact(f: &mut Finding, c: &Finding) {
    f.severity = f.severity.max(c.severity);
    let kind = c.key.kind.as_str().to_string();
    if c.severity >= crate::config::Severity::Critical && !f.lead_rules.contains(&kind) {
        if f.lead_rules.is_empty() {
            f.lead_rules = f.rules.clone();
        }
        f.lead_rules.push(kind.clone());
    }
    if !f.rules.contains(&kind) {
        f.rules.push(kind);
        f.rules.sort();
    }
    f.evidence.push(format!("impact: {}", c.summary));
    let mut names = f.affected_partitions.clone();
    names.extend(c.affected_partitions.iter().cloned());
    names.sort();
    names.dedup();
    let total = f
        .affected_partitions_total
        .max(c.affected_partitions_total)
        .max(names.len());
    names.truncate(super::MAX_AFFECTED_PARTITIONS);
    f.affected_partitions = names;
    f.affected_partitions_total = total;
}

/// What a finding says beyond what receivers were told, in words; empty when nothing.
fn news(
    told: &Told,
    f: &Finding,
    old_state: Option<crate::judge::verdict::BrokerState>,
) -> Vec<String> {
    let mut out = Vec::new();
    if f.severity > told.severity {
        out.push(format!(
            "severity {} -> {}",
            told.severity.as_str(),
            f.severity.as_str()
        ));
        if old_state != f.state {
            let label =
                |s: Option<crate::judge::verdict::BrokerState>| s.map_or("none", |s| s.as_label());
            out.push(format!("state {} -> {}", label(old_state), label(f.state)));
        }
    }
    // A rule joining at the incident's severity is news; a milder one beside it (a broker
    // that answers again between freezes, one catching up after it was down) is the same
    // incident calming down.
    if f.severity >= told.severity && f.state >= told.state {
        let lead = if f.lead_rules.is_empty() {
            &f.rules
        } else {
            &f.lead_rules
        };
        // A broker coming back (its port open again, not answering yet) is recovery under
        // way, told by the resolve, not news of the fault.
        let added: Vec<&str> = lead
            .iter()
            .map(String::as_str)
            .filter(|r| {
                !told.rules.contains(*r) && *r != crate::judge::verdict::Rule::Restarting.name()
            })
            .collect();
        if !added.is_empty() {
            out.push(format!("now also: {}", added.join(", ")));
        }
    }
    // A broker's partitions are its impact: news only when they raise its severity.
    let partition_incident = f.key.subject == Subject::Cluster;
    if partition_incident && f.affected_partitions_total > told.partitions_total {
        out.push(format!(
            "{} partition(s) affected, was {}",
            f.affected_partitions_total, told.partitions_total
        ));
    }
    let new_suspects: Vec<String> = f
        .suspects
        .iter()
        .filter(|b| !told.suspects.contains(b))
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

fn flapping_words(changes: &StateChanges, flap: bool) -> String {
    if flap {
        format!(
            "flapping: {} state changes in {} s; no more updates until it settles or resolves",
            changes.count(),
            changes.window_secs
        )
    } else {
        "no longer flapping: its state has settled".to_string()
    }
}

/// Brings an open incident up to date with this look's finding; an event when it says
/// something its receivers were not told. The incident keeps the worst severity of its
/// episode; its current state is the verdict's, on /status and /metrics.
fn refresh(
    incident: &mut Incident,
    told: &mut Told,
    changes: &StateChanges,
    flapping: Option<bool>,
    f: Finding,
    now: SystemTime,
) -> Option<IncidentEvent> {
    let mut said = news(told, &f, incident.state);
    let previous = Previous {
        severity: told.severity,
        ..previous_of(incident)
    };
    if let Some(start) = flapping {
        said.push(flapping_words(changes, start));
    } else if changes.flapping() {
        // Flapping: one message said so; the swings it announced are not news.
        said.clear();
    }
    incident.flapping_since = changes.flapping_since;
    incident.severity = incident.severity.max(f.severity);
    incident.peak_severity = incident.peak_severity.max(f.severity);
    if incident.silenced.is_none() {
        incident.notified_peak = incident.notified_peak.max(Some(incident.severity));
    }
    incident.state = f.state;
    if f.broker_address.is_some() {
        incident.broker_address = f.broker_address.clone();
    }
    incident.labels.clone_from(&f.labels);
    incident.summary = f.summary.clone();
    incident.evidence = f.evidence.clone();
    incident.rules = f.rules.clone();
    incident.affected_partitions = f.affected_partitions.clone();
    incident.affected_partitions_total = f.affected_partitions_total;
    let mut suspects: BTreeSet<_> = incident.suspects.iter().copied().collect();
    suspects.extend(f.suspects.iter().copied());
    incident.suspects = suspects.into_iter().collect();
    if f.unavailable_seconds.is_some() {
        incident.unavailable_seconds = f.unavailable_seconds;
    }
    if said.is_empty() {
        return None;
    }
    told.severity = told.severity.max(f.severity);
    let lead = if f.lead_rules.is_empty() {
        &f.rules
    } else {
        &f.lead_rules
    };
    told.rules.extend(lead.iter().cloned());
    told.partitions_total = told.partitions_total.max(f.affected_partitions_total);
    told.suspects.extend(f.suspects.iter().copied());
    told.flapping = changes.flapping();
    told.state = told.state.max(f.state);
    incident.updated_at = now;
    Some(IncidentEvent {
        kind: EventKind::Updated,
        at: now,
        incident: incident.clone(),
        previous: Some(previous),
        changes: said,
    })
}

/// The flapping news of an incident that is clearing (absent at this look).
fn announce_flapping(
    incident: &mut Incident,
    told: &mut Told,
    changes: &StateChanges,
    now: SystemTime,
) -> Option<IncidentEvent> {
    if told.flapping {
        return None;
    }
    told.flapping = true;
    incident.updated_at = now;
    Some(IncidentEvent {
        kind: EventKind::Updated,
        at: now,
        incident: incident.clone(),
        previous: Some(previous_of(incident)),
        changes: vec![flapping_words(changes, true)],
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
