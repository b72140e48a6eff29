//! The decisions of delivery, pure: which receiver hears of which event, when a reminder
//! is due, how long to wait before a retry, and which answers are worth a retry.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::alert::incident::{EventKind, Incident, IncidentEvent};
use crate::config::WebhookConfig;

/// What `cfg`'s receiver gets for `ev`, if anything, judged from the event alone (no
/// memory of what was sent), so it holds across restarts:
///
/// - it hears of an incident once its severity reaches `min_severity`. An update that
///   lifts an incident over the threshold is the first it hears, so it arrives as
///   `opened`;
/// - from then on (the worst severity it was told at reached the threshold) it gets every
///   update, reminder and, with `send_resolved`, the resolve: a receiver that was paged
///   is told the end, even if the incident calmed down below its threshold first;
/// - nothing while the incident is silenced (but the resolve of what it was told). When
///   the silence ends and the incident is still open, a receiver that never heard of it
///   gets it as `opened`.
pub fn route(cfg: &WebhookConfig, ev: &IncidentEvent) -> Option<EventKind> {
    if !cfg.covers(&ev.incident.cluster) {
        return None;
    }
    let min = cfg.min_severity;
    let i = &ev.incident;
    let told = |peak: Option<crate::config::Severity>| peak.is_some_and(|p| p >= min);
    if i.silenced.is_some() && ev.kind != EventKind::Resolved {
        return None;
    }
    match ev.kind {
        EventKind::Opened => (i.severity >= min).then_some(EventKind::Opened),
        EventKind::Updated => {
            let told_before = ev.previous.is_some_and(|p| told(p.notified_peak));
            if told_before {
                Some(EventKind::Updated)
            } else if i.severity >= min {
                Some(EventKind::Opened)
            } else {
                None
            }
        }
        EventKind::Reminder => told(i.notified_peak).then_some(EventKind::Reminder),
        EventKind::Resolved => {
            (cfg.send_resolved && told(i.notified_peak)).then_some(EventKind::Resolved)
        }
        EventKind::Acted | EventKind::Refused | EventKind::DryRun => {
            (i.severity >= min).then_some(ev.kind)
        }
    }
}

/// The longest wait between two attempts while a page waits in a receiver's queue: a
/// receiver that comes back gets its backlog within this, so an outage costs its own length
/// and not minutes more (issue 38 item 7). A receiver that is down gets three tries a
/// minute, which costs it nothing.
pub const PAGE_RETRY_CAP: Duration = Duration::from_secs(20);
/// The longest wait while only information waits (resolves, reminders, `info` incidents):
/// no one is paged by it, and a receiver that stays down hears less from the watchdog.
pub const INFO_RETRY_CAP: Duration = Duration::from_secs(300);

/// How urgent the notifications waiting for a receiver are: the most urgent of them sets
/// the wait, since they go in order behind the one at the head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Urgency {
    /// Tells of the end or the persistence of an incident, or of an `info` one.
    Info,
    /// Someone should act: an incident opened or changed at `warning` or above, or what
    /// remediation did.
    Page,
}

impl Urgency {
    pub fn of(ev: &IncidentEvent) -> Urgency {
        let idle = matches!(ev.kind, EventKind::Resolved | EventKind::Reminder);
        if idle || ev.incident.severity == crate::config::Severity::Info {
            Urgency::Info
        } else {
            Urgency::Page
        }
    }
}

/// Retry timing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub initial: Duration,
    /// The cap while a page waits (`PAGE_RETRY_CAP`).
    pub page_max: Duration,
    /// The cap while only information waits (`INFO_RETRY_CAP`).
    pub info_max: Duration,
    /// 0.2: each wait is drawn from ±20% around the nominal one (never above the cap), so
    /// that many watchdogs whose receiver came back do not all retry in the same instant.
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_secs(1),
            page_max: PAGE_RETRY_CAP,
            info_max: INFO_RETRY_CAP,
            jitter: 0.2,
        }
    }
}

impl Backoff {
    pub fn cap(&self, urgency: Urgency) -> Duration {
        match urgency {
            Urgency::Page => self.page_max,
            Urgency::Info => self.info_max,
        }
    }

    /// The own wait before retry number `attempt + 1`: doubling from `initial`, at most
    /// the cap for `urgency`; `unit` is a random number in [-1, 1].
    pub fn wait(&self, attempt: u32, urgency: Urgency, unit: f64) -> Duration {
        let cap = self.cap(urgency);
        let nominal = self
            .initial
            .checked_mul(1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX))
            .unwrap_or(cap)
            .min(cap);
        let factor = 1.0 + self.jitter * unit.clamp(-1.0, 1.0);
        nominal.mul_f64(factor.max(0.0)).min(cap)
    }
}

/// A wait a receiver asked for in `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asked {
    pub wait: Duration,
    /// Asked with 429 (or Slack's `ratelimited`): the receiver limits how often it is
    /// called, and calling sooner is only refused again.
    pub rate_limited: bool,
}

/// The wait before the next attempt after a failed one, `attempt` failed tries in, with
/// `urgency` the most urgent notification waiting. The receiver's `Retry-After` lengthens
/// it: without limit (but `max_retry_after`, applied by `judge`) for a rate limit, up to
/// the cap for any other answer (a 503's guess at its maintenance must not hold back a page
/// for longer). It never shortens it: `Retry-After: 0`, a date in the past or a receiver
/// that answers it at once must not turn retries into a loop without a pause (issue 27
/// item 4).
pub fn retry_wait(
    backoff: &Backoff,
    attempt: u32,
    urgency: Urgency,
    asked: Option<Asked>,
    unit: f64,
) -> Duration {
    let own = backoff.wait(attempt, urgency, unit);
    match asked {
        Some(a) if a.rate_limited => a.wait.max(own),
        Some(a) => a.wait.min(backoff.cap(urgency)).max(own),
        None => own,
    }
}

/// A queued notification as the full-queue policy sees it: its incident and event; `None`
/// for one spooled before this start (its file not read), which counts as a page.
pub type QueuedEvent = Option<(String, EventKind)>;

/// What a full queue gives up for `incoming` (issue 27 item 4): never the head (it may be
/// on its way) and never the newest page. In order:
/// 1. an older update or reminder of the incoming event's incident: the newer one tells the
///    receiver everything it said;
/// 2. the oldest resolve or reminder queued: information, not a page;
/// 3. the incoming event itself when it is a resolve or a reminder;
/// 4. the oldest queued notification after the head: a page that has waited longest is
///    the one the receiver least needs when a newer one is behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evict {
    /// The queued notification at this index.
    Queued(usize),
    Incoming,
}

pub fn evict(queued: &[QueuedEvent], incoming: (&str, EventKind)) -> Evict {
    let (incident, kind) = incoming;
    let idle = |k: EventKind| matches!(k, EventKind::Resolved | EventKind::Reminder);
    let rest = || queued.iter().enumerate().skip(1);
    let superseded = rest().find(|(_, q)| {
        q.as_ref().is_some_and(|(id, k)| {
            id == incident && matches!(k, EventKind::Updated | EventKind::Reminder)
        })
    });
    if let Some((i, _)) = superseded {
        return Evict::Queued(i);
    }
    if let Some((i, _)) = rest().find(|(_, q)| q.as_ref().is_some_and(|(_, k)| idle(*k))) {
        return Evict::Queued(i);
    }
    if idle(kind) || queued.len() < 2 {
        return Evict::Incoming;
    }
    Evict::Queued(1)
}

/// What to do after one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Delivered,
    /// Network error, timeout, 5xx, 408, 429: the receiver may take it later.
    Retry {
        after: Option<Asked>,
        why: String,
    },
    /// Any other answer: sending it again would be refused again.
    Drop {
        why: String,
    },
}

/// Judges an HTTP status. `retry_after` is the header's value, if any.
pub fn judge(status: u16, retry_after: Option<&str>, now: SystemTime, cap: Duration) -> Outcome {
    match status {
        200..=299 => Outcome::Delivered,
        408 | 429 | 500..=599 => Outcome::Retry {
            after: retry_after
                .and_then(|v| parse_retry_after(v, now))
                .map(|d| Asked {
                    wait: d.min(cap),
                    rate_limited: status == 429,
                }),
            why: format!("HTTP {status}"),
        },
        _ => Outcome::Drop {
            why: format!("HTTP {status}"),
        },
    }
}

/// `Retry-After` as delay seconds or an HTTP date.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or_default())
}

/// Reminders of open incidents, at each receiver's repeat interval.
#[derive(Debug, Default)]
pub struct Reminders {
    /// Open incidents by id, as the last event told them.
    open: BTreeMap<String, Incident>,
    /// (receiver index, incident id) -> when it last got a notification of the incident.
    last: BTreeMap<(usize, String), Instant>,
}

impl Reminders {
    /// Keeps the open set in step with the events.
    pub fn record(&mut self, ev: &IncidentEvent) {
        // A remediation event is told once; there is nothing open to remind of.
        if ev.kind.is_one_shot() {
            return;
        }
        let id = &ev.incident.id;
        if ev.kind == EventKind::Resolved {
            self.open.remove(id);
            self.last.retain(|(_, i), _| i != id);
        } else {
            self.open.insert(id.clone(), ev.incident.clone());
        }
    }

    /// Open incidents from before a restart: their reminders count from now.
    pub fn restore(&mut self, incidents: Vec<Incident>) {
        for i in incidents {
            if i.is_open() {
                self.open.entry(i.id.clone()).or_insert(i);
            }
        }
    }

    pub fn sent(&mut self, receiver: usize, incident_id: &str, at: Instant) {
        self.last.insert((receiver, incident_id.to_string()), at);
    }

    pub fn open_count(&self) -> usize {
        self.open.len()
    }

    /// The reminders due at `now`, as (receiver index, event). `idle[r]` tells whether
    /// receiver r has nothing queued: one still working off a backlog (down, or slow)
    /// gets no reminders, which would only pile up behind the news.
    pub fn due(
        &mut self,
        receivers: &[&WebhookConfig],
        idle: &[bool],
        now: Instant,
        wall: SystemTime,
    ) -> Vec<(usize, IncidentEvent)> {
        let mut out = Vec::new();
        for (r, cfg) in receivers.iter().enumerate() {
            let Some(every) = cfg.repeat_interval else {
                continue;
            };
            for (id, incident) in &self.open {
                let ev = IncidentEvent::reminder(incident.clone(), wall);
                if route(cfg, &ev).is_none() {
                    continue;
                }
                let last = self.last.entry((r, id.clone())).or_insert(now);
                if now.duration_since(*last) < every {
                    continue;
                }
                *last = now;
                if idle.get(r).copied().unwrap_or(true) {
                    out.push((r, ev));
                }
            }
        }
        out
    }
}
