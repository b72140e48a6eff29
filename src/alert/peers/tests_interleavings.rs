//! Issue 38 item 5: every event reaches every receiver at least once, over random
//! interleavings of two instances' views.
//!
//! Each seed makes a history of one incident (broker 2 of `lab`): episodes of trouble, each
//! seen by each instance or not, a few seconds early or late, sometimes with a severity
//! change, and episodes only one instance sees. The two instances then run second by
//! second, their steps in a random order each second: each makes its events, asks the
//! other (an ask fails when the seed cuts them apart), and its worker looks at the head of
//! its queue as the notifier does: `Peers::turn`, then sends (the receiver sometimes
//! fails, and it is tried again), drops it as a peer's, or waits. After the history, they
//! run until both queues are empty.
//!
//! The property is stated without the code's rule: an event of one instance reached the
//! receiver when a message of the same event and severity arrived from an instance whose
//! episode was open at some moment this one's was (the receiver heard of that stretch of
//! trouble). The seeds are plain numbers, so a failure names the one to replay.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use super::*;
use crate::alert::incident::{EventKind, Incident, Subject};
use crate::config::Severity;
use crate::model::kind::FindingKind;

const TAKEOVER: Duration = Duration::from_secs(10);
const HISTORY_SECS: u64 = 600;
const SEEDS: u64 = 150;

fn t(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
}

/// xorshift64*: enough randomness for interleavings, the same on every machine.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// One instance's episode: when it saw the trouble begin, its events, when it resolved.
#[derive(Debug, Clone)]
struct Episode {
    start: u64,
    end: u64,
    /// (second, kind, severity), opened first and resolved last.
    events: Vec<(u64, EventKind, Severity)>,
}

/// Trouble as it was: (start, end) stretches with gaps between them.
fn truth(rng: &mut Rng) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut at = rng.below(30);
    while at < HISTORY_SECS - 100 {
        let len = 3 + rng.below(60);
        out.push((at, at + len));
        at += len + 5 + rng.below(90);
    }
    out
}

/// What one instance saw of `truth`: each stretch or not, a few seconds off, plus
/// stretches only it saw; overlapping ones are one episode.
fn seen(rng: &mut Rng, truth: &[(u64, u64)]) -> Vec<Episode> {
    let mut spans: Vec<(u64, u64)> = Vec::new();
    for (s, e) in truth {
        if rng.chance(80) {
            spans.push((s + rng.below(8), e + rng.below(8)));
        }
    }
    for _ in 0..rng.below(3) {
        let s = rng.below(HISTORY_SECS - 100);
        spans.push((s, s + 3 + rng.below(40)));
    }
    spans.sort();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (s, e) in spans {
        match merged.last_mut() {
            // An instance's own episodes are apart by at least a second.
            Some(last) if s <= last.1 + 1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
        .into_iter()
        .map(|(start, end)| {
            let opened = start + rng.below(3);
            let end = end.max(opened + 1);
            let first = if rng.chance(50) {
                Severity::Critical
            } else {
                Severity::Warning
            };
            let mut events = vec![(opened, EventKind::Opened, first)];
            let mut last = first;
            if end > opened + 2 && rng.chance(40) {
                last = if first == Severity::Critical {
                    Severity::Warning
                } else {
                    Severity::Critical
                };
                events.push((
                    opened + 1 + rng.below(end - opened - 1),
                    EventKind::Updated,
                    last,
                ));
            }
            events.push((end, EventKind::Resolved, last));
            Episode { start, end, events }
        })
        .collect()
}

fn event(kind: EventKind, severity: Severity, at: u64, started: u64) -> IncidentEvent {
    IncidentEvent {
        kind,
        at: t(at),
        incident: Incident {
            id: format!("kw-{started}"),
            dedup_key: "lab/broker-2/broker".into(),
            cluster: "lab".into(),
            subject: Subject::Broker(2),
            kind: FindingKind::Broker,
            broker: Some(2),
            broker_address: None,
            state: None,
            severity,
            peak_severity: severity,
            summary: String::new(),
            evidence: Vec::new(),
            rules: Vec::new(),
            affected_partitions: Vec::new(),
            affected_partitions_total: 0,
            suspects: vec![2],
            started_at: t(started),
            updated_at: t(at),
            resolved_at: None,
            unavailable_seconds: None,
            silenced: None,
            notified_peak: None,
            flapping_since: None,
            labels: Default::default(),
        },
        previous: None,
        changes: Vec::new(),
    }
}

/// One instance in the run.
struct Instance {
    peers: Peers,
    episodes: Vec<Episode>,
    /// (episode index, event) waiting at the receiver's worker.
    queue: VecDeque<(usize, IncidentEvent)>,
}

impl Instance {
    fn new(id: &str, episodes: Vec<Episode>) -> Instance {
        Instance {
            peers: Peers::new(id, TAKEOVER, Duration::from_secs(1)),
            episodes,
            queue: VecDeque::new(),
        }
    }

    /// Its events of second `now` join the queue.
    fn make_events(&mut self, now: u64) {
        for (i, ep) in self.episodes.iter().enumerate() {
            for (at, kind, sev) in &ep.events {
                if *at == now {
                    self.queue.push_back((i, event(*kind, *sev, *at, ep.start)));
                }
            }
        }
    }

    /// Its answer at `now`: what it delivered, and which episodes are open (opened and
    /// not yet resolved, as its incident book would say).
    fn answer(&self, id: &str, now: u64) -> Answer {
        let open: Vec<(String, SystemTime)> = self
            .episodes
            .iter()
            .filter(|e| e.events[0].0 <= now && now < e.end)
            .map(|e| ("lab/broker-2/broker".to_string(), t(e.start)))
            .collect();
        Answer {
            instance_id: id.into(),
            version: "x".into(),
            clusters: vec!["lab".into()],
            silences: vec![],
            deliveries: self.peers.deliveries(&open, t(now)),
        }
    }
}

/// A message the receiver took: from which instance's which episode, what it said.
#[derive(Debug, Clone)]
struct Received {
    from: usize,
    episode: usize,
    kind: EventKind,
    severity: Severity,
}

/// The worker of instance `i` looks at the head of its queue once at `now`.
fn work(inst: &mut Instance, i: usize, now: u64, receiver_fails: bool, log: &mut Vec<Received>) {
    let Some((ep, e)) = inst.queue.front().cloned() else {
        return;
    };
    match inst.peers.turn("slack", &e, t(now)) {
        Turn::Send if receiver_fails => {}
        Turn::Send => {
            log.push(Received {
                from: i,
                episode: ep,
                kind: e.kind,
                severity: e.incident.severity,
            });
            inst.peers.delivered("slack", &e, None, t(now));
            inst.queue.pop_front();
        }
        Turn::Delivered { .. } => {
            inst.queue.pop_front();
        }
        Turn::Wait(_) => {}
    }
}

/// Runs one seed; the events that reached no receiver, described.
fn run(seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    let truth = truth(&mut rng);
    let ids = ["wd-0", "wd-1"];
    let mut inst = [
        Instance::new(ids[0], seen(&mut rng, &truth)),
        Instance::new(ids[1], seen(&mut rng, &truth)),
    ];
    // How often asks fail (cut apart), and how often the receiver does.
    let cut = [0, 0, 20, 60, 100][rng.below(5) as usize];
    let flaky = [0, 10, 40][rng.below(3) as usize];
    let mut log = Vec::new();
    let mut now = 0;
    while now < HISTORY_SECS || inst.iter().any(|x| !x.queue.is_empty()) {
        assert!(now < HISTORY_SECS * 4, "seed {seed}: a queue never emptied");
        let mut steps: Vec<u64> = (0..6).collect();
        for i in (1..steps.len()).rev() {
            steps.swap(i, rng.below(i as u64 + 1) as usize);
        }
        for step in steps {
            let (me, other) = ((step % 2) as usize, 1 - (step % 2) as usize);
            match step / 2 {
                0 => inst[me].make_events(now),
                1 if !rng.chance(cut) => {
                    let a = inst[other].answer(ids[other], now);
                    inst[me].peers.heard("http://peer:9644", &a, t(now));
                }
                1 => {}
                _ => {
                    let fails = rng.chance(flaky);
                    work(&mut inst[me], me, now, fails, &mut log);
                }
            }
        }
        now += 1;
    }
    let mut missed = Vec::new();
    for (i, x) in inst.iter().enumerate() {
        for ep in &x.episodes {
            for (at, kind, sev) in &ep.events {
                let reached = log.iter().any(|r| {
                    let theirs = &inst[r.from].episodes[r.episode];
                    r.kind == *kind
                        && r.severity == *sev
                        && theirs.start <= ep.end
                        && ep.start <= theirs.end
                });
                if !reached {
                    missed.push(format!(
                        "seed {seed}: {} {} {} at {at} (episode {}..{}) reached no receiver; \
                         wd-0 saw {:?}, wd-1 saw {:?}, received {log:?}",
                        ids[i],
                        kind.as_str(),
                        sev.as_str(),
                        ep.start,
                        ep.end,
                        inst[0].episodes,
                        inst[1].episodes,
                    ));
                }
            }
        }
    }
    missed
}

#[test]
fn every_event_reaches_the_receiver_at_least_once_over_interleavings_of_two_instances() {
    let mut missed = Vec::new();
    for seed in 0..SEEDS {
        missed.extend(run(seed));
    }
    assert!(
        missed.is_empty(),
        "{} events lost, the first: {}",
        missed.len(),
        missed[0]
    );
}

/// The run is not idle: in steady state the instances share the work, and a peer's
/// delivery keeps the other quiet (what the turns are for).
#[test]
fn the_interleavings_exercise_both_sending_and_leaving_it_to_the_peer() {
    let mut rng = Rng::new(7);
    let truth = truth(&mut rng);
    let eps = seen(&mut rng, &truth);
    let mut inst = [
        Instance::new("wd-0", eps.clone()),
        Instance::new("wd-1", eps),
    ];
    let (mut log, mut now) = (Vec::new(), 0);
    while now < HISTORY_SECS || inst.iter().any(|x| !x.queue.is_empty()) {
        for i in 0..2 {
            inst[i].make_events(now);
            let a = inst[1 - i].answer(["wd-0", "wd-1"][1 - i], now);
            inst[i].peers.heard("http://peer:9644", &a, t(now));
        }
        for (i, x) in inst.iter_mut().enumerate() {
            work(x, i, now, false, &mut log);
        }
        now += 1;
    }
    let events: usize = inst[0].episodes.iter().map(|e| e.events.len()).sum();
    assert!(events > 3, "a history with events");
    assert_eq!(
        log.len(),
        events,
        "each event once, the same views on both: {log:?}"
    );
    assert!(
        log.iter().all(|r| r.from == 0),
        "the first in line sent them all"
    );
}
