//! Several watchdogs as one (issue 28 item 1): the Helm chart runs two replicas, and each
//! judges the cluster on its own, so each would page. With `peers:` configured, each asks
//! the others (`sync`, through their HTTP API, `/api/v1/peer`) for two things:
//!
//! - their runtime silences, merged into its own (a silence is known by its id, and an
//!   expiry only ever moves its end earlier, so the merge is the earliest end per id: the
//!   same on every instance whatever the order, and an expired silence stays expired);
//! - what they delivered lately, per receiver: incident, event, severity and time, and the
//!   stretch of time the sender saw that incident open (its start, and how long it is
//!   known to have lasted).
//!
//! Receivers that deduplicate (Alertmanager by labels, PagerDuty by dedup key) get every
//! instance's notifications, as their own clustering expects. For the others (Slack, Teams,
//! generic) the instances take turns without a protocol of their own: they are ordered by
//! `instance_id`, and each sends only when every instance before it that watches the same
//! cluster and has answered lately has had `takeover` per place in line to deliver the
//! same event and has not. So in steady state the first sends and the rest find its
//! delivery; when it dies the next sends after at most `takeover`; when the instances
//! cannot see each other, each is first in its own line and every one sends: duplicates,
//! never silence.
//!
//! A peer's delivery stands for one of this instance's events only when it is of an
//! episode this instance itself saw (issue 38 item 5): the peer's incident and this one's
//! were open at a common moment, judged from what each knows for sure (from its start to
//! its event here; from its start to the peer's last word that it was still open, there).
//! Closeness in time alone is not enough: two instances that saw different episodes of
//! the same incident within two minutes each took the other's delivery for their own, and
//! the episode only one of them saw reached no receiver. A delivery is thus dropped only
//! for one that reached the receiver about the same stretch of trouble: every event
//! reaches every receiver at least once (`tests_interleavings` checks it over random
//! interleavings of two instances).
//!
//! The judgment of turns is pure ([`turn`]), with `now` a parameter.

pub mod auth;
pub mod sync;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::alert::incident::IncidentEvent;
use crate::config::WebhookFormat;
use crate::model::silence::{Invalid, Silence};
use crate::model::time::{serde_ms, serde_opt_ms};

/// The path of the peers' document on the HTTP server.
pub const PEER_PATH: &str = "/api/v1/peer";
/// Own deliveries kept for the peers to read: long enough for any peer's wait, bounded so
/// the document stays small.
const KEEP_DELIVERIES: Duration = Duration::from_secs(600);
const MAX_DELIVERIES: usize = 2000;
/// Two instances see the same change at slightly different times (each its own look): a
/// peer's delivery of the same event within this of ours is the same event.
const MIN_MATCH_WINDOW: Duration = Duration::from_secs(120);
/// Peers kept at most (and so `peer_last_answer_age_seconds{peer}` series): far more than
/// any fleet of watchdogs on the same clusters, few enough that a DNS name resolving to
/// many addresses, or a peer changing its instance_id, cannot grow them without bound.
pub const MAX_PEERS: usize = 64;
/// A peer not heard this long is forgotten: its deliveries are past use (they are kept
/// this long by their sender) and its series leaves the metrics.
const FORGET_AFTER: Duration = KEEP_DELIVERIES;

/// Whether the receiver's own service merges the instances' notifications.
pub fn deduplicates(format: WebhookFormat) -> bool {
    matches!(
        format,
        WebhookFormat::Alertmanager | WebhookFormat::PagerDuty
    )
}

/// One notification a receiver took, as the peers see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// Grows per instance; with the instance id it names the delivery.
    pub seq: u64,
    pub receiver: String,
    /// Stable across instances: cluster, subject and kind of the incident.
    pub dedup_key: String,
    pub event: String,
    pub severity: String,
    /// When the incident changed (the event's time), not when it was sent.
    #[serde(with = "serde_ms")]
    pub at: SystemTime,
    /// When the sender's incident began (its `started_at`). Missing (an older peer): the
    /// delivery stands for none of this instance's events.
    #[serde(default, with = "serde_opt_ms")]
    pub started_at: Option<SystemTime>,
    /// The last time the sender knows its incident was open: when it answered, while it
    /// still is; else its latest delivery about it. Set when answering; missing, `at`.
    #[serde(
        default,
        with = "serde_opt_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub open_until: Option<SystemTime>,
    /// The message the receiver shows the incident in, when it keeps one to edit (Slack
    /// with a bot token): a peer that takes over sending edits it instead of posting
    /// another, so the first message does not stay red after the resolve (issue 38
    /// item 6). Absent from peers of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<SlackMessage>,
}

/// A Slack message, as `chat.update` names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlackMessage {
    /// The channel id Slack answered with.
    pub channel: String,
    pub ts: String,
}

impl Delivery {
    fn of(seq: u64, receiver: &str, e: &IncidentEvent) -> Delivery {
        Delivery {
            seq,
            receiver: receiver.to_string(),
            dedup_key: e.incident.dedup_key.clone(),
            event: e.kind.as_str().to_string(),
            severity: e.incident.severity.as_str().to_string(),
            at: e.at,
            started_at: Some(e.incident.started_at),
            open_until: None,
            message: None,
        }
    }

    /// From the incident's start to the last time its sender knows it was open.
    fn known_open(&self) -> Option<(SystemTime, SystemTime)> {
        let start = self.started_at?;
        Some((start, self.open_until.unwrap_or(self.at).max(self.at)))
    }

    /// Whether this peer delivery stands for `mine`: the same receiver, incident, event
    /// and severity, close in time, and of an episode this instance saw too (both open
    /// at a common moment).
    fn same_event(&self, mine: &Delivery, window: Duration) -> bool {
        let overlap = match (self.known_open(), mine.known_open()) {
            (Some((a0, a1)), Some((b0, b1))) => a0 <= b1 && b0 <= a1,
            _ => false,
        };
        self.receiver == mine.receiver
            && self.dedup_key == mine.dedup_key
            && self.event == mine.event
            && self.severity == mine.severity
            && apart(self.at, mine.at) <= window
            && overlap
    }
}

/// How far apart two times are, whichever is first.
fn apart(a: SystemTime, b: SystemTime) -> Duration {
    a.duration_since(b).unwrap_or_else(|e| e.duration())
}

/// What an instance tells its peers: `GET /api/v1/peer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub instance_id: String,
    pub version: String,
    /// The clusters it watches: only instances on the same cluster share a turn.
    pub clusters: Vec<String>,
    /// Its runtime silences, expired ones included (so an expiry reaches every instance).
    pub silences: Vec<Silence>,
    pub deliveries: Vec<Delivery>,
}

/// Why bytes are not a peer document.
#[derive(Debug, thiserror::Error)]
#[error("not a peer document: {0}")]
pub struct Malformed(String);

/// Longest instance_id, as the configuration allows one.
const MAX_INSTANCE_ID_CHARS: usize = 128;
/// More clusters than any one watchdog watches.
const MAX_CLUSTERS: usize = 10_000;

/// A peer's answer from its body: JSON of the shape `Answer`, within the bounds this
/// instance keeps itself (ids, silences, deliveries). Pure, so it can be fuzzed.
pub fn parse_answer(body: &[u8]) -> Result<Answer, Malformed> {
    let a: Answer = serde_json::from_slice(body).map_err(|e| Malformed(e.to_string()))?;
    let bad = |m: &str| Err(Malformed(m.to_string()));
    let id_ok = |id: &str| {
        !id.is_empty()
            && id.chars().count() <= MAX_INSTANCE_ID_CHARS
            && !id.chars().any(char::is_control)
    };
    if !id_ok(&a.instance_id) || a.version.chars().count() > MAX_INSTANCE_ID_CHARS {
        return bad("instance_id or version out of shape");
    }
    if a.clusters.len() > MAX_CLUSTERS
        || a.silences.len() > crate::model::silence::MAX_SILENCES
        || a.deliveries.len() > MAX_DELIVERIES
    {
        return bad("more clusters, silences or deliveries than a watchdog keeps");
    }
    Ok(a)
}

/// A peer as last heard.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    pub url: String,
    pub clusters: Vec<String>,
    pub deliveries: Vec<Delivery>,
    pub seen_at: SystemTime,
}

/// What a receiver's worker does with the notification at the head of its queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turn {
    Send,
    /// A peer delivered the same event: this one is dropped as done.
    Delivered {
        by: String,
        seq: u64,
    },
    /// Instances before this one may still deliver it: look again after this long.
    Wait(Duration),
}

/// Whose turn it is to send `mine` (this instance's notification to `mine.receiver`).
///
/// - A peer that delivered the same event (and whose delivery no earlier notification of
///   this instance was matched to: `used`) has done it, answered lately or not.
/// - Otherwise the instances before this one in `instance_id` order that answered within
///   `takeover` and watch `cluster` are its place in line; with none, it sends now;
///   else it sends once the event is `place x takeover` old, giving each a takeover's time.
pub fn turn(
    me: &str,
    views: &BTreeMap<String, View>,
    used: &BTreeSet<(String, u64)>,
    cluster: &str,
    mine: &Delivery,
    now: SystemTime,
    takeover: Duration,
) -> Turn {
    let window = MIN_MATCH_WINDOW.max(takeover * 2);
    // The closest unused match: two episodes of one incident within the window each
    // take their own delivery.
    let matched = views
        .iter()
        .flat_map(|(id, v)| v.deliveries.iter().map(move |d| (id, d)))
        .filter(|(id, d)| !used.contains(&((*id).clone(), d.seq)) && d.same_event(mine, window))
        .min_by_key(|(_, d)| apart(d.at, mine.at));
    if let Some((id, d)) = matched {
        return Turn::Delivered {
            by: id.clone(),
            seq: d.seq,
        };
    }
    let place = views
        .iter()
        .filter(|(id, v)| {
            id.as_str() < me
                && v.clusters.iter().any(|c| c == cluster)
                && now.duration_since(v.seen_at).unwrap_or_default() <= takeover
        })
        .count() as u32;
    if place == 0 {
        return Turn::Send;
    }
    let due = mine.at + takeover * place;
    match due.duration_since(now) {
        Ok(left) if !left.is_zero() => Turn::Wait(left),
        _ => Turn::Send,
    }
}

/// The peers' state this instance keeps: what each said last, and its own deliveries.
#[derive(Debug)]
pub struct Peers {
    pub instance_id: String,
    pub takeover: Duration,
    pub poll_interval: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    views: BTreeMap<String, View>,
    delivered: VecDeque<Delivery>,
    next_seq: u64,
    /// Peers' deliveries already matched to one of ours.
    used: BTreeSet<(String, u64)>,
    /// Peer URLs whose last look failed (refused, timed out, not a watchdog).
    unreachable: Vec<String>,
    /// Peers' silences refused (`Silence::check`), counted and said once per id.
    silences_refused: u64,
    /// Peers' answers refused, by reason.
    answers_refused: BTreeMap<auth::Refusal, u64>,
    refused_silence_ids: BTreeSet<String>,
}

/// For `/status` and the metrics.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PeersStats {
    /// (instance id, url, seconds since it last answered)
    pub peers: Vec<(String, String, f64)>,
    /// Those that answered within the takeover time.
    pub answering: u64,
    /// Peer URLs whose last look failed.
    pub unreachable: Vec<String>,
    /// Silences peers passed on that failed the checks of the silences API.
    pub silences_refused: u64,
    /// Answers refused, by reason (every reason, zero included).
    pub answers_refused: Vec<(&'static str, u64)>,
}

impl Peers {
    pub fn new(instance_id: &str, takeover: Duration, poll_interval: Duration) -> Peers {
        Peers {
            instance_id: instance_id.to_string(),
            takeover,
            poll_interval,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whose turn it is to send `event` to `receiver`; a match with a peer's delivery is
    /// taken (the next notification cannot match it again).
    pub fn turn(&self, receiver: &str, event: &IncidentEvent, now: SystemTime) -> Turn {
        let mut s = self.lock();
        let mine = Delivery::of(0, receiver, event);
        let t = turn(
            &self.instance_id,
            &s.views,
            &s.used,
            &event.incident.cluster,
            &mine,
            now,
            self.takeover,
        );
        if let Turn::Delivered { by, seq } = &t {
            s.used.insert((by.clone(), *seq));
        }
        t
    }

    /// `event` reached `receiver` from this instance, shown in `message` (if it keeps one).
    pub fn delivered(
        &self,
        receiver: &str,
        event: &IncidentEvent,
        message: Option<SlackMessage>,
        now: SystemTime,
    ) {
        let mut s = self.lock();
        s.next_seq += 1;
        let d = Delivery {
            message,
            ..Delivery::of(s.next_seq, receiver, event)
        };
        s.delivered.push_back(d);
        while s.delivered.len() > MAX_DELIVERIES
            || s.delivered
                .front()
                .is_some_and(|d| now.duration_since(d.at).unwrap_or_default() > KEEP_DELIVERIES)
        {
            s.delivered.pop_front();
        }
    }

    /// The message of peer `by`'s delivery `seq` (from `Turn::Delivered`), if it told one.
    pub fn message(&self, by: &str, seq: u64) -> Option<SlackMessage> {
        let s = self.lock();
        let view = s.views.get(by)?;
        let d = view.deliveries.iter().find(|d| d.seq == seq)?;
        d.message.clone()
    }

    /// Own deliveries, for the peers, each with how long its incident is known to have
    /// been open: until `now` for those of the `open` episodes (dedup key, start), else
    /// until the latest delivery of that episode.
    pub fn deliveries(&self, open: &[(String, SystemTime)], now: SystemTime) -> Vec<Delivery> {
        let s = self.lock();
        let mut last: BTreeMap<(&str, SystemTime), SystemTime> = BTreeMap::new();
        for d in &s.delivered {
            if let Some(start) = d.started_at {
                let e = last.entry((d.dedup_key.as_str(), start)).or_insert(d.at);
                *e = (*e).max(d.at);
            }
        }
        s.delivered
            .iter()
            .map(|d| {
                let mut d = d.clone();
                d.open_until = d.started_at.and_then(|start| {
                    if open.iter().any(|(k, s)| *k == d.dedup_key && *s == start) {
                        Some(now)
                    } else {
                        last.get(&(d.dedup_key.as_str(), start)).copied()
                    }
                });
                d
            })
            .collect()
    }

    /// A peer answered. One URL is one instance at a time (a pod restarted with another
    /// id replaces its old view); views not heard for `FORGET_AFTER` are forgotten, and
    /// beyond `MAX_PEERS` the least lately heard goes.
    pub fn heard(&self, url: &str, answer: &Answer, now: SystemTime) {
        let mut s = self.lock();
        s.views
            .retain(|id, v| *id == answer.instance_id || v.url != url);
        s.views.insert(
            answer.instance_id.clone(),
            View {
                url: url.to_string(),
                clusters: answer.clusters.clone(),
                deliveries: answer.deliveries.clone(),
                seen_at: now,
            },
        );
        forget(&mut s.views, now);
        // A match is remembered as long as the delivery it used can still be shown.
        let State { views, used, .. } = &mut *s;
        used.retain(|(id, seq)| {
            views
                .get(id)
                .is_some_and(|v| v.deliveries.iter().any(|d| d.seq == *seq))
        });
    }

    /// `peer` passed on silences that fail the checks of the silences API: each is said
    /// and counted the first time (a peer repeats its silences at every look).
    pub fn silences_refused(&self, peer: &str, refused: Vec<(String, Invalid)>) {
        let mut s = self.lock();
        for (id, why) in refused {
            if s.refused_silence_ids.len() >= crate::model::silence::MAX_SILENCES {
                s.refused_silence_ids.clear();
            }
            if s.refused_silence_ids.insert(id.clone()) {
                s.silences_refused += 1;
                tracing::warn!(silence = %id, peer = %peer, why = %why, "silence from a peer refused: it fails the checks of the silences API");
            }
        }
    }

    /// A peer's answer was refused (`auth::Refusal`).
    pub fn answer_refused(&self, why: auth::Refusal) {
        *self.lock().answers_refused.entry(why).or_default() += 1;
    }

    /// The peer URLs whose last look failed (the asking task says so after each look).
    pub fn set_unreachable(&self, urls: Vec<String>) {
        self.lock().unreachable = urls;
    }

    pub fn stats(&self, now: SystemTime) -> PeersStats {
        let mut s = self.lock();
        forget(&mut s.views, now);
        let peers: Vec<(String, String, f64)> = s
            .views
            .iter()
            .map(|(id, v)| {
                (
                    id.clone(),
                    v.url.clone(),
                    now.duration_since(v.seen_at)
                        .unwrap_or_default()
                        .as_secs_f64(),
                )
            })
            .collect();
        let answering = peers
            .iter()
            .filter(|p| p.2 <= self.takeover.as_secs_f64())
            .count() as u64;
        PeersStats {
            peers,
            answering,
            unreachable: s.unreachable.clone(),
            silences_refused: s.silences_refused,
            answers_refused: auth::Refusal::ALL
                .iter()
                .map(|r| (r.as_str(), s.answers_refused.get(r).copied().unwrap_or(0)))
                .collect(),
        }
    }
}

/// Drops the views not heard for `FORGET_AFTER`, then the least lately heard beyond
/// `MAX_PEERS`.
fn forget(views: &mut BTreeMap<String, View>, now: SystemTime) {
    views.retain(|_, v| now.duration_since(v.seen_at).unwrap_or_default() <= FORGET_AFTER);
    while views.len() > MAX_PEERS {
        let oldest = views
            .iter()
            .min_by_key(|(_, v)| v.seen_at)
            .map(|(id, _)| id.clone());
        match oldest {
            Some(id) => views.remove(&id),
            None => break,
        };
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_interleavings;
