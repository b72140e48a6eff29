//! What the watchdog said while a lab benchmark ran, by phase: every round's verdicts from
//! /status (broker-rounds by state, and episodes: a broker entering a state), the incidents
//! /status lists, the canary's loss reports, remediation decisions and the webhooks the sink
//! received. Rounds, incidents and decisions are attributed to the phase in which they
//! happened (the round's end, the incident's `started_at`), not to when they were read, so a
//! problem that shows a round after a phase ended is still traced to its cause.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_lab::sink::Sink;
use serde_json::{json, Value};

use kafka_watchdog::model::round::BrokerId;

use super::{broker_states, status_round};

pub const STATES: [&str; 5] = ["healthy", "degraded", "zombie", "down", "unknown"];

/// Seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// An incident as /status listed it, with the phase it started in.
#[derive(Debug, Clone)]
pub struct IncidentSeen {
    pub phase: String,
    pub kind: String,
    pub state: String,
    /// The worst severity seen.
    pub severity: String,
    pub broker: Option<i64>,
    pub started_at: f64,
    pub summary: String,
    pub evidence: String,
}

#[derive(Default)]
pub struct Record {
    /// (phase, start in Unix seconds), in order.
    pub phases: Vec<(String, f64)>,
    /// phase -> state -> broker-rounds.
    pub verdicts: BTreeMap<String, BTreeMap<String, u64>>,
    /// phase -> state -> times a broker entered that state.
    pub episodes: BTreeMap<String, BTreeMap<String, u64>>,
    /// phase -> rounds seen.
    pub rounds: BTreeMap<String, BTreeSet<u64>>,
    last_state: BTreeMap<BrokerId, String>,
    /// Incident id -> what was seen of it.
    pub incidents: BTreeMap<String, IncidentSeen>,
    /// Whether /status has an `incidents` list at all.
    pub incidents_listed: bool,
    /// Each non-healthy episode: phase, time, round, broker, state, rules and their details.
    pub episodes_seen: Vec<Value>,
    /// Each canary record reported lost: phase, round, partition, broker, acks, reason.
    pub losses: Vec<Value>,
    /// Remediation decisions from /status, by (time, broker): phase, outcome, refusals.
    pub remediations: BTreeMap<(u64, i64), Value>,
    /// Webhooks as received: (Unix seconds received, phase then, body).
    pub webhooks: Vec<(f64, String, Value)>,
}

impl Record {
    /// The phase that was running at `t` (Unix seconds); before the first, the first.
    pub fn phase_at(&self, t: f64) -> String {
        self.phases
            .iter()
            .rev()
            .find(|(_, start)| *start <= t)
            .or(self.phases.first())
            .map(|(p, _)| p.clone())
            .unwrap_or_default()
    }

    /// Takes in one /status document; `now` is when it was read.
    fn round(&mut self, status: &Value, round: u64, now: f64) {
        let cluster = &status["clusters"][0];
        let started = cluster["started_at"].as_f64().unwrap_or(now);
        // A round sees what happens while it runs: one that began just before a phase did
        // shows that phase's first effects (a broker already in controlled shutdown).
        let ended = started + cluster["duration_seconds"].as_f64().unwrap_or(0.0);
        let phase = self.phase_at(ended);
        if let Some(list) = status["incidents"].as_array() {
            self.incidents_listed = true;
            for i in list {
                self.incident(i);
            }
        }
        for r in status["remediations"].as_array().into_iter().flatten() {
            let at = r["at"].as_u64().unwrap_or(0);
            let broker = r["broker"].as_i64().unwrap_or(-1);
            let phase = self.phase_at(at as f64 / 1000.0);
            self.remediations.entry((at, broker)).or_insert_with(|| {
                json!({
                    "phase": phase, "at": at as f64 / 1000.0, "broker": broker,
                    "outcome": r["outcome"], "refusals": r["refusals"],
                    "evidence": r["verdict_evidence"],
                })
            });
        }
        for l in cluster["canary"]["lost"].as_array().into_iter().flatten() {
            self.losses.push(json!({
                "phase": phase, "round": round, "at": started,
                "partition": l["partition"], "offset": l["offset"], "broker": l["broker"],
                "acks": l["acks"], "reason": l["reason"],
            }));
        }
        self.rounds.entry(phase.clone()).or_default().insert(round);
        for (broker, state) in broker_states(status) {
            *self
                .verdicts
                .entry(phase.clone())
                .or_default()
                .entry(state.clone())
                .or_insert(0) += 1;
            if self.last_state.get(&broker) != Some(&state) {
                *self
                    .episodes
                    .entry(phase.clone())
                    .or_default()
                    .entry(state.clone())
                    .or_insert(0) += 1;
                if state != "healthy" {
                    self.episodes_seen.push(json!({
                        "phase": phase, "at": started, "round": round, "broker": broker,
                        "state": state, "rules": super::broker_rules(status, broker),
                        "detail": broker_hits(status, broker),
                    }));
                }
                self.last_state.insert(broker, state);
            }
        }
    }

    fn incident(&mut self, i: &Value) {
        let f = |k: &str| i[k].as_str().unwrap_or("-").to_string();
        let started_at = i["started_at"].as_f64().map_or(0.0, |ms| ms / 1000.0);
        let phase = self.phase_at(started_at);
        let severity = f("severity");
        let seen = self
            .incidents
            .entry(f("id"))
            .or_insert_with(|| IncidentSeen {
                phase,
                kind: f("kind"),
                state: f("state"),
                severity: severity.clone(),
                broker: i["broker"].as_i64(),
                started_at,
                summary: f("summary"),
                evidence: i["evidence"]
                    .as_array()
                    .map(|e| {
                        e.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                    .unwrap_or_default(),
            });
        if severity_rank(&severity) > severity_rank(&seen.severity) {
            seen.severity = severity;
        }
        // A broker incident keeps the worst state it reached.
        let state = f("state");
        if state_rank(&state) > state_rank(&seen.state) {
            seen.state = state;
        }
    }
}

fn severity_rank(s: &str) -> u8 {
    match s {
        "critical" => 3,
        "warning" => 2,
        "info" => 1,
        _ => 0,
    }
}

fn state_rank(s: &str) -> u8 {
    match s {
        "zombie" => 4,
        "down" => 3,
        "degraded" => 2,
        "unknown" => 1,
        _ => 0,
    }
}

/// "rule: detail" of every rule that fired for a broker, joined.
fn broker_hits(status: &Value, broker: BrokerId) -> String {
    status["clusters"][0]["brokers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|b| b["broker"] == broker)
        .and_then(|b| b["hits"].as_array())
        .map(|hits| {
            hits.iter()
                .map(|h| {
                    format!(
                        "{}: {}",
                        h["rule"].as_str().unwrap_or("-"),
                        h["detail"].as_str().unwrap_or("")
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default()
}

/// Polls the watchdog's /status every 500 ms and the sink, until stopped.
pub struct Recorder {
    pub record: Arc<Mutex<Record>>,
    stop: Arc<AtomicBool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Recorder {
    /// Starts recording in `phase`. `healthy` brokers are taken as healthy already, so their
    /// first sighting is no episode; webhooks before the `skip_webhooks`-th are ignored.
    pub fn start(
        rt: &tokio::runtime::Runtime,
        port: u16,
        sink: Option<Arc<Sink>>,
        skip_webhooks: usize,
        phase: &str,
        healthy: &[BrokerId],
    ) -> Recorder {
        let mut record = Record::default();
        record.phases.push((phase.to_string(), unix_now()));
        for b in healthy {
            record.last_state.insert(*b, "healthy".into());
        }
        let record = Arc::new(Mutex::new(record));
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let (record, stop) = (record.clone(), stop.clone());
            rt.spawn(async move {
                let mut last_round = 0;
                let mut webhooks_seen = skip_webhooks;
                loop {
                    // One last pass after the stop, for what arrived meanwhile.
                    let stopping = stop.load(Ordering::SeqCst);
                    if let Some(sink) = &sink {
                        let got = sink.received();
                        if got.len() > webhooks_seen {
                            let now = unix_now();
                            let mut r = record.lock().expect("record lock");
                            let phase = r.phase_at(now);
                            for body in &got[webhooks_seen..] {
                                r.webhooks.push((now, phase.clone(), body.clone()));
                            }
                            webhooks_seen = got.len();
                        }
                    }
                    if let Ok((200, body)) = super::http_get(port, "/status").await {
                        if let Ok(status) = serde_json::from_str::<Value>(&body) {
                            if let Some(round) = status_round(&status) {
                                if round != last_round {
                                    last_round = round;
                                    record.lock().expect("record lock").round(
                                        &status,
                                        round,
                                        unix_now(),
                                    );
                                }
                            }
                        }
                    }
                    if stopping {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            })
        };
        Recorder {
            record,
            stop,
            task: Some(task),
        }
    }

    /// Starts a new phase now.
    pub fn phase(&self, name: &str) {
        self.record
            .lock()
            .expect("record lock")
            .phases
            .push((name.to_string(), unix_now()));
    }

    /// Stops polling after one last look, and hands over what was recorded.
    pub fn finish(mut self, rt: &tokio::runtime::Runtime) -> Record {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(task) = self.task.take() {
            let _ = rt.block_on(task);
        }
        std::mem::take(&mut *self.record.lock().expect("record lock"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(round: u64, started: f64, states: &[(i64, &str)], incidents: Value) -> Value {
        json!({
            "clusters": [{
                "round": round,
                "started_at": started,
                "duration_seconds": 4.0,
                "brokers": states.iter().map(|(b, s)| json!({
                    "broker": b, "state": s,
                    "hits": if *s == "healthy" { json!([]) } else {
                        json!([{"rule": "no_answer", "detail": "timeout"}])
                    },
                })).collect::<Vec<_>>(),
                "canary": {"lost": []},
            }],
            "incidents": incidents,
            "remediations": [],
        })
    }

    #[test]
    fn rounds_and_incidents_count_in_the_phase_they_happened_in() {
        let mut r = Record::default();
        r.phases.push(("a".into(), 100.0));
        r.phases.push(("b".into(), 200.0));
        r.last_state.insert(1, "healthy".into());
        // Read during b, but the round ran during a.
        r.round(&status(1, 150.0, &[(1, "zombie")], json!([])), 1, 210.0);
        // Began in a, ended in b: b's operation is the likelier cause.
        r.round(&status(9, 197.0, &[(2, "degraded")], json!([])), 9, 210.0);
        assert_eq!(r.verdicts["b"]["degraded"], 1);
        assert_eq!(r.episodes_seen[1]["phase"], "b");
        let incident = json!([{
            "id": "i1", "kind": "broker", "state": "degraded", "severity": "warning",
            "broker": 1, "started_at": 150_000.0, "summary": "s", "evidence": ["e"],
        }]);
        r.round(
            &status(2, 205.0, &[(1, "zombie")], incident.clone()),
            2,
            215.0,
        );
        let mut worse = incident;
        worse[0]["severity"] = json!("critical");
        worse[0]["state"] = json!("zombie");
        r.round(&status(3, 215.0, &[(1, "healthy")], worse), 3, 220.0);
        assert_eq!(r.verdicts["a"]["zombie"], 1);
        assert_eq!(r.verdicts["b"]["zombie"], 1);
        assert_eq!(r.episodes["a"]["zombie"], 1);
        assert!(
            !r.episodes["b"].contains_key("zombie"),
            "still the same episode"
        );
        assert_eq!(r.episodes_seen.len(), 2);
        assert_eq!(r.episodes_seen[0]["detail"], "no_answer: timeout");
        let i = &r.incidents["i1"];
        assert_eq!((i.phase.as_str(), i.severity.as_str()), ("a", "critical"));
        assert_eq!(i.state, "zombie");
        assert_eq!(r.phase_at(50.0), "a", "before the first phase: the first");
    }
}
