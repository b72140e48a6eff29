//! Coalescing, pure: per receiver, updates of an incident that come within the receiver's
//! group interval of the last message about it wait, and go as one message with the latest
//! state and every change they carried. News that matters goes at once: an escalation, an
//! open, a resolve (which makes a held update pointless: it is dropped and counted).
//!
//! Time is a parameter (`tokio::time::Instant`), so the tests run on paused time.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::alert::incident::{EventKind, IncidentEvent};

/// An update that rises above the severity the receiver last heard of: it goes at once.
/// The incident book makes an update's severity the episode's peak, so a rise over
/// `previous` is a rise over everything told before.
pub fn is_escalation(ev: &IncidentEvent) -> bool {
    ev.kind == EventKind::Updated
        && ev
            .previous
            .is_some_and(|p| ev.incident.severity > p.severity)
}

/// An update told in a worse state than the last message (a zombie broker now down): its
/// Alertmanager alert changes name (`Incident::alert_name`), so it goes at once, like an
/// escalation. Held and then superseded by the resolve, it would leave the receiver with
/// the alert under the old name, firing until it expires.
pub fn renames(ev: &IncidentEvent) -> bool {
    ev.kind == EventKind::Updated
        && ev.previous.is_some_and(|p| {
            let before =
                crate::alert::incident::alert_name(ev.incident.kind, p.told_state.or(p.state));
            before != ev.incident.alert_name()
        })
}

/// Updates waiting for one (receiver, incident).
#[derive(Debug, Clone)]
struct Held {
    /// The updates merged: the latest incident, every change in order, and the state
    /// before the first of them (what the receiver last heard).
    event: IncidentEvent,
    due: Instant,
    /// How many updates it stands for.
    count: u64,
}

/// What became of held updates, per receiver, since the last `take_tally`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Held, then sent inside a later message.
    pub merged: u64,
    /// Held, then dropped because the incident resolved.
    pub superseded: u64,
}

#[derive(Debug, Default)]
pub struct Coalescer {
    /// (receiver index, incident id) -> when the receiver was last sent a message of it.
    last: BTreeMap<(usize, String), Instant>,
    held: BTreeMap<(usize, String), Held>,
    tally: BTreeMap<usize, Tally>,
}

/// `into`'s changes followed by those of `from` it does not have yet.
fn merge_changes(into: &mut Vec<String>, from: Vec<String>) {
    for c in from {
        if !into.contains(&c) {
            into.push(c);
        }
    }
}

impl Coalescer {
    /// Decides about `ev` as routed to receiver `r` (whose group interval is `group`):
    /// `Some` is the message to send now, `None` means it is held.
    pub fn offer(
        &mut self,
        r: usize,
        group: Option<Duration>,
        ev: IncidentEvent,
        now: Instant,
    ) -> Option<IncidentEvent> {
        if ev.kind.is_one_shot() {
            return Some(ev);
        }
        let key = (r, ev.incident.id.clone());
        match ev.kind {
            EventKind::Updated if !is_escalation(&ev) && !renames(&ev) => {
                if let Some(h) = self.held.get_mut(&key) {
                    merge_changes(&mut h.event.changes, ev.changes);
                    h.event.incident = ev.incident;
                    h.event.at = ev.at;
                    h.count += 1;
                    return None;
                }
                let due = group.zip(self.last.get(&key)).map(|(g, last)| *last + g);
                match due {
                    Some(due) if now < due => {
                        self.held.insert(
                            key,
                            Held {
                                event: ev,
                                due,
                                count: 1,
                            },
                        );
                        None
                    }
                    _ => Some(ev),
                }
            }
            EventKind::Resolved => {
                if let Some(h) = self.held.remove(&key) {
                    self.tally.entry(r).or_default().superseded += h.count;
                }
                Some(ev)
            }
            // A reminder while updates wait: the updates go instead, they are news and
            // carry the same latest state.
            EventKind::Reminder => match self.held.remove(&key) {
                Some(h) => {
                    self.tally.entry(r).or_default().merged += h.count;
                    let mut out = h.event;
                    out.incident = ev.incident;
                    Some(out)
                }
                None => Some(ev),
            },
            // An escalation, a renaming update or an open goes now, and takes what waited
            // with it.
            _ => match self.held.remove(&key) {
                Some(h) => {
                    self.tally.entry(r).or_default().merged += h.count;
                    let mut out = ev;
                    let mut changes = h.event.changes;
                    merge_changes(&mut changes, std::mem::take(&mut out.changes));
                    out.changes = changes;
                    if out.kind == EventKind::Updated {
                        out.previous = h.event.previous;
                    }
                    Some(out)
                }
                None => Some(ev),
            },
        }
    }

    /// The held updates whose interval has passed at `now`, as (receiver, message).
    pub fn due(&mut self, now: Instant) -> Vec<(usize, IncidentEvent)> {
        let ready: Vec<(usize, String)> = self
            .held
            .iter()
            .filter(|(_, h)| h.due <= now)
            .map(|(k, _)| k.clone())
            .collect();
        let mut out = Vec::new();
        for key in ready {
            if let Some(h) = self.held.remove(&key) {
                self.tally.entry(key.0).or_default().merged += h.count;
                out.push((key.0, h.event));
            }
        }
        out
    }

    /// Receiver `r` was sent a message of `ev`'s incident at `now`.
    pub fn sent(&mut self, r: usize, ev: &IncidentEvent, now: Instant) {
        // A resolved incident has no later update to wait for; a one-shot event is
        // news of its own, not a message about an incident's state.
        if ev.kind == EventKind::Resolved || ev.kind.is_one_shot() {
            return;
        }
        self.last.insert((r, ev.incident.id.clone()), now);
    }

    /// The incident resolved: nothing more is said of it. Updates still held for a receiver
    /// that does not hear the resolve (`send_resolved: false`) are dropped too.
    pub fn forget(&mut self, incident_id: &str) {
        self.last.retain(|(_, id), _| id != incident_id);
        let gone: Vec<(usize, String)> = self
            .held
            .keys()
            .filter(|(_, id)| id == incident_id)
            .cloned()
            .collect();
        for key in gone {
            if let Some(h) = self.held.remove(&key) {
                self.tally.entry(key.0).or_default().superseded += h.count;
            }
        }
    }

    /// Drops what receiver `r` holds of an incident it is not to hear of now (a silence
    /// began): the update would go out under the silence.
    pub fn drop_held(&mut self, r: usize, incident_id: &str) {
        if let Some(h) = self.held.remove(&(r, incident_id.to_string())) {
            self.tally.entry(r).or_default().superseded += h.count;
        }
    }

    /// Updates held before a restart: they go at the first look (`due`), since when the
    /// last message went is not known any more.
    pub fn restore(&mut self, r: usize, events: Vec<IncidentEvent>, now: Instant) {
        for ev in events {
            let key = (r, ev.incident.id.clone());
            match self.held.get_mut(&key) {
                Some(h) => {
                    merge_changes(&mut h.event.changes, ev.changes);
                    h.event.incident = ev.incident;
                    h.count += 1;
                }
                None => {
                    self.held.insert(
                        key,
                        Held {
                            event: ev,
                            due: now,
                            count: 1,
                        },
                    );
                }
            }
        }
    }

    /// What receiver `r` holds now, as it is kept on disk.
    pub fn held_events(&self, r: usize) -> Vec<IncidentEvent> {
        self.held
            .iter()
            .filter(|((i, _), _)| *i == r)
            .map(|(_, h)| h.event.clone())
            .collect()
    }

    /// Updates receiver `r` holds now (each merged update counts).
    pub fn held_count(&self, r: usize) -> u64 {
        self.held
            .iter()
            .filter(|((i, _), _)| *i == r)
            .map(|(_, h)| h.count)
            .sum()
    }

    pub fn take_tally(&mut self, r: usize) -> Tally {
        self.tally.remove(&r).unwrap_or_default()
    }
}
