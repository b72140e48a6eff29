//! What an episode saw, counted, and the goals of issue #31 checked against it: pure
//! functions of the recorded messages and /metrics samples, so that the goals are tested
//! without a lab and `--check` reads them back from report.json.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use kafka_watchdog::model::round::BrokerId;

use super::Episode;
use crate::output::Section;

// ---- what an episode saw ---------------------------------------------------------------

/// One webhook as the receiver got it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Seconds after the fault was in place (negative: before it).
    pub at: f64,
    pub event: String,
    pub kind: String,
    pub severity: String,
    pub state: Option<String>,
    pub rules: Vec<String>,
    pub broker: Option<i64>,
    pub incident: String,
    pub affected_partitions: u64,
}

impl Message {
    pub(super) fn from_body(body: &Value, at: f64) -> Message {
        let s = |k: &str| body[k].as_str().unwrap_or("-").to_string();
        Message {
            at,
            event: s("event"),
            kind: s("kind"),
            severity: s("severity"),
            state: body["state"].as_str().map(str::to_string),
            rules: rules_of(body),
            broker: body["broker_id"].as_i64(),
            incident: s("incident_id"),
            affected_partitions: body["affected_partitions_total"].as_u64().unwrap_or(0),
        }
    }
}

/// The verdict rules a broker notification names: its evidence lines read `rule: detail`
/// (partition incidents' lines name partitions, not rules).
fn rules_of(body: &Value) -> Vec<String> {
    if body["kind"] != "broker" {
        return Vec::new();
    }
    let mut rules: Vec<String> = Vec::new();
    for line in body["evidence"].as_array().into_iter().flatten() {
        let Some((head, _)) = line.as_str().and_then(|l| l.split_once(':')) else {
            continue;
        };
        let is_rule = !head.is_empty() && head.chars().all(|c| c.is_ascii_lowercase() || c == '_');
        if is_rule && !rules.iter().any(|r| r == head) {
            rules.push(head.to_string());
        }
    }
    rules
}

/// One scrape of /metrics: each broker's verdict (`broker_state`) and the state of its open
/// incident (`broker_incident_state`, absent while none is open).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub at: f64,
    pub state: BTreeMap<BrokerId, String>,
    pub incident_state: BTreeMap<BrokerId, String>,
}

/// Broker -> the state whose series of `metric` is 1, in a Prometheus text page.
pub(super) fn states_in(page: &str, metric: &str) -> BTreeMap<BrokerId, String> {
    let mut out = BTreeMap::new();
    for line in page.lines() {
        let Some(rest) = line.strip_prefix(metric).and_then(|r| r.strip_prefix('{')) else {
            continue;
        };
        let Some((labels, value)) = rest.split_once('}') else {
            continue;
        };
        if value.trim().parse::<f64>().ok() != Some(1.0) {
            continue;
        }
        let label = |name: &str| {
            labels.split(',').find_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                (k.trim() == name).then(|| v.trim().trim_matches('"').to_string())
            })
        };
        if let (Some(b), Some(s)) = (label("broker"), label("state")) {
            if let Ok(b) = b.parse() {
                out.insert(b, s);
            }
        }
    }
    out
}

/// An incident /status listed during the episode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IncidentSeen {
    pub kind: String,
    pub broker: Option<i64>,
    pub state: String,
    pub severity: String,
    /// Seconds after the fault.
    pub started: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EpisodeRun {
    pub episode: String,
    pub trial: usize,
    pub target: BrokerId,
    /// Unix seconds at which the fault was in place: t = 0 of every other time.
    pub t0_unix: f64,
    /// Whether the fault was injected at all (a lab that did not settle runs nothing).
    pub injected: bool,
    /// Seconds from t = 0 until the fault was removed.
    pub fault_secs: f64,
    /// SIGSTOP..SIGCONT windows of a duty cycle, seconds after t = 0.
    pub pauses: Vec<(f64, f64)>,
    pub messages: Vec<Message>,
    pub samples: Vec<Sample>,
    pub incidents: Vec<IncidentSeen>,
    /// Non-healthy verdicts /status showed (a broker entering a state), with their rules.
    pub verdicts: Vec<Value>,
    /// Every incident opened was resolved within the bound after the fault was removed.
    pub all_resolved: bool,
    /// Seconds after t = 0 when watching ended.
    pub observed_secs: f64,
    /// restart-stall: seconds from the start command to the broker's first answer.
    pub first_answer_secs: Option<f64>,
    /// cpu: the producer's figures.
    pub load: Option<Value>,
    pub error: Option<String>,
}

/// A zombie sample counts as "during the first pause" up to this long after it ended: one
/// sample interval for the scrape plus the liveness check's interval and a margin for the
/// verdict to be published again.
const PAUSE_SLACK_SECS: f64 = 2.5;

/// The cpu episode judges the state from this long after the quota is set (the verdict
/// needs load to show, and a round or two to say it).
pub(super) const CPU_SETTLED_SECS: f64 = 15.0;

// ---- counting (pure) -------------------------------------------------------------------

/// "opened 1, updated 3, resolved 1", in the order the events first came.
pub(super) fn by_event(msgs: &[Message]) -> String {
    let mut order: Vec<(&str, usize)> = Vec::new();
    for m in msgs {
        match order.iter_mut().find(|(e, _)| *e == m.event) {
            Some((_, n)) => *n += 1,
            None => order.push((&m.event, 1)),
        }
    }
    order
        .iter()
        .map(|(e, n)| format!("{e} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs of equal values, "a x3 > b > a".
pub(super) fn runs_of<'a>(values: impl Iterator<Item = &'a str>) -> String {
    let mut runs: Vec<(&str, usize)> = Vec::new();
    for v in values {
        match runs.last_mut() {
            Some((last, n)) if *last == v => *n += 1,
            _ => runs.push((v, 1)),
        }
    }
    runs.iter()
        .map(|(v, n)| {
            if *n > 1 {
                format!("{v} x{n}")
            } else {
                v.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" > ")
}

pub(super) fn severity_sequence(msgs: &[Message]) -> String {
    runs_of(msgs.iter().map(|m| m.severity.as_str()))
}

/// Distinct incidents the receiver was told opened.
pub(super) fn incidents_opened(msgs: &[Message]) -> usize {
    msgs.iter()
        .filter(|m| m.event == "opened")
        .map(|m| m.incident.as_str())
        .collect::<BTreeSet<_>>()
        .len()
}

fn events(msgs: &[Message]) -> Vec<&str> {
    msgs.iter().map(|m| m.event.as_str()).collect()
}

/// `broker`'s verdict in each sample that has it: (seconds, state).
pub(super) fn states_of(samples: &[Sample], broker: BrokerId) -> impl Iterator<Item = (f64, &str)> {
    samples
        .iter()
        .filter_map(move |s| s.state.get(&broker).map(|st| (s.at, st.as_str())))
}

/// How often `broker`'s verdict on /metrics changed between consecutive samples.
pub(super) fn state_changes(samples: &[Sample], broker: BrokerId) -> usize {
    let states: Vec<&str> = states_of(samples, broker).map(|(_, s)| s).collect();
    states.windows(2).filter(|w| w[0] != w[1]).count()
}

/// The share of samples in [from, to] in which `broker` is `state`; `None` without samples.
pub(super) fn fraction(
    samples: &[Sample],
    broker: BrokerId,
    state: &str,
    from: f64,
    to: f64,
) -> Option<f64> {
    let inside: Vec<&str> = states_of(samples, broker)
        .filter(|(t, _)| *t >= from && *t <= to)
        .map(|(_, s)| s)
        .collect();
    if inside.is_empty() {
        return None;
    }
    Some(inside.iter().filter(|s| **s == state).count() as f64 / inside.len() as f64)
}

/// Seconds of the samples in which `broker` is one of `states`.
pub(super) fn times_in(samples: &[Sample], broker: BrokerId, states: &[&str]) -> Vec<f64> {
    states_of(samples, broker)
        .filter(|(_, s)| states.contains(s))
        .map(|(t, _)| t)
        .collect()
}

fn span(times: &[f64]) -> String {
    match (times.first(), times.last()) {
        (Some(a), Some(b)) => format!("{} sample(s), {a:.1}..{b:.1} s", times.len()),
        _ => "none".into(),
    }
}

/// The first critical notification naming `broker` at or after the fault: seconds.
pub(super) fn critical_page(run: &EpisodeRun) -> Option<f64> {
    run.messages
        .iter()
        .find(|m| {
            m.at >= 0.0 && m.severity == "critical" && m.broker == Some(i64::from(run.target))
        })
        .map(|m| m.at)
}

// ---- goals (pure) ----------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Goal {
    pub episode: String,
    pub goal: String,
    pub seen: String,
    pub met: bool,
}

fn goal(episode: &str, goal: &str, met: bool, seen: impl Into<String>) -> Goal {
    Goal {
        episode: episode.into(),
        goal: goal.into(),
        seen: seen.into(),
        met,
    }
}

fn messages_seen(r: &EpisodeRun) -> String {
    let n = r.messages.len();
    if n == 0 {
        return "0 messages".into();
    }
    format!(
        "{n} message(s): {}",
        runs_of(events(&r.messages).into_iter())
    )
}

/// Every goal of every episode run, met or missed, in the order the episodes ran.
pub fn goals_of(runs: &[EpisodeRun]) -> Vec<Goal> {
    let mut names: Vec<&str> = Vec::new();
    for r in runs {
        if !names.contains(&r.episode.as_str()) {
            names.push(&r.episode);
        }
    }
    let mut out = Vec::new();
    for name in names {
        let Some(e) = Episode::parse(name) else {
            continue;
        };
        let of: Vec<&EpisodeRun> = runs.iter().filter(|r| r.episode == name).collect();
        for r in &of {
            if let Some(err) = &r.error {
                let what = if of.len() > 1 {
                    format!("trial {} ran to its end", r.trial)
                } else {
                    "the episode ran to its end".to_string()
                };
                out.push(goal(name, &what, false, err.clone()));
            }
        }
        let ran: Vec<&EpisodeRun> = of.into_iter().filter(|r| r.injected).collect();
        if e == Episode::RestartStall {
            out.extend(restart_stall_goals(&ran));
        } else {
            for r in ran {
                out.extend(episode_goals(e, r));
            }
        }
    }
    out
}

/// The goals of issue #31 that one run of an episode must meet.
fn episode_goals(e: Episode, r: &EpisodeRun) -> Vec<Goal> {
    let name = e.as_str();
    let n = r.messages.len();
    let ev = events(&r.messages);
    let opened_then_resolved = ev.first() == Some(&"opened") && ev.last() == Some(&"resolved");
    let target = r.target;
    match e {
        Episode::Freeze => vec![goal(
            name,
            "exactly 2 messages (opened, resolved)",
            ev == ["opened", "resolved"],
            messages_seen(r),
        )],
        Episode::Kill => kill_goals(r),
        Episode::Flap => vec![goal(
            name,
            "<= 3 messages (opened, flapping, resolved)",
            n <= 3 && opened_then_resolved,
            messages_seen(r),
        )],
        Episode::Cpu => {
            let degraded = fraction(
                &r.samples,
                target,
                "degraded",
                CPU_SETTLED_SECS,
                r.fault_secs,
            );
            let changes = state_changes(&r.samples, target);
            vec![
                goal(name, "<= 3 messages", n <= 3, messages_seen(r)),
                goal(
                    name,
                    "broker 2 degraded in >= 90% of /metrics samples from 15 s after the fault",
                    degraded.is_some_and(|f| f >= 0.9),
                    degraded.map_or("no sample".into(), |f| format!("{:.0}%", f * 100.0)),
                ),
                goal(
                    name,
                    "<= 2 state changes of broker 2 on /metrics",
                    changes <= 2,
                    format!("{changes}: {}", state_runs(r)),
                ),
            ]
        }
        Episode::GcLong => {
            let zombie = times_in(&r.samples, target, &["zombie"]);
            let first = r.pauses.first().copied();
            let in_first =
                |t: &f64| first.is_some_and(|(a, b)| *t >= a && *t <= b + PAUSE_SLACK_SECS);
            let opened = incidents_opened(&r.messages);
            vec![
                goal(
                    name,
                    "one incident, <= 3 messages",
                    opened == 1 && n <= 3,
                    format!("{opened} incident(s), {}", messages_seen(r)),
                ),
                goal(
                    name,
                    "zombie on /metrics at most during the first pause",
                    zombie.iter().all(in_first),
                    format!(
                        "zombie: {}; first pause {}",
                        span(&zombie),
                        first.map_or("none".into(), |(a, b)| format!("{a:.1}..{b:.1} s"))
                    ),
                ),
            ]
        }
        Episode::GcShort => {
            let critical = r
                .messages
                .iter()
                .filter(|m| m.severity == "critical")
                .count();
            let degraded = times_in(&r.samples, target, &["degraded"]);
            let worse = times_in(&r.samples, target, &["zombie", "down"]);
            vec![
                goal(
                    name,
                    "0 critical messages",
                    critical == 0,
                    format!("{critical}"),
                ),
                goal(
                    name,
                    "degraded on /metrics at some point",
                    !degraded.is_empty(),
                    span(&degraded),
                ),
                goal(
                    name,
                    "never zombie or down on /metrics",
                    worse.is_empty(),
                    span(&worse),
                ),
            ]
        }
        Episode::RestartStall => restart_stall_goals(&[r]),
    }
}

fn kill_goals(r: &EpisodeRun) -> Vec<Goal> {
    let name = Episode::Kill.as_str();
    let ev = events(&r.messages);
    let target = Some(i64::from(r.target));
    let listed: u64 = r
        .messages
        .iter()
        .filter(|m| m.kind == "broker" && m.broker == target)
        .map(|m| m.affected_partitions)
        .max()
        .unwrap_or(0);
    let ur_messages = r
        .messages
        .iter()
        .filter(|m| m.kind == "under_replicated")
        .count();
    let ur_incidents = r
        .incidents
        .iter()
        .filter(|i| i.kind == "under_replicated")
        .count();
    vec![
        goal(
            name,
            "2 messages (opened, resolved)",
            ev == ["opened", "resolved"],
            messages_seen(r),
        ),
        goal(
            name,
            "under-replicated partitions listed inside the broker incident",
            listed > 0,
            format!("broker 3 incident lists {listed} partition(s)"),
        ),
        goal(
            name,
            "no separate under_replicated incident",
            ur_messages == 0 && ur_incidents == 0,
            format!("{ur_incidents} in /status, {ur_messages} message(s)"),
        ),
    ]
}

/// restart-stall's goals over its trials: zombie and a critical page every time, and the
/// page's p95 after the stall within 1.5 s (a trial without a page counts as never).
fn restart_stall_goals(runs: &[&EpisodeRun]) -> Vec<Goal> {
    let name = Episode::RestartStall.as_str();
    if runs.is_empty() {
        return Vec::new();
    }
    let n = runs.len();
    let zombie = runs
        .iter()
        .filter(|r| {
            times_in(&r.samples, r.target, &["zombie"])
                .iter()
                .any(|t| *t >= 0.0)
        })
        .count();
    let pages: Vec<Option<f64>> = runs.iter().map(|r| critical_page(r)).collect();
    let paged = pages.iter().flatten().count();
    let latencies: Vec<f64> = pages.iter().map(|p| p.unwrap_or(f64::INFINITY)).collect();
    let p95 = crate::stats::summarize(&latencies).map_or(f64::INFINITY, |s| s.p95);
    let after_stall: BTreeSet<String> = runs
        .iter()
        .flat_map(|r| {
            states_of(&r.samples, r.target)
                .filter(|(t, _)| *t >= 0.0)
                .map(|(_, s)| s.to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    vec![
        goal(
            name,
            "broker 2 zombie on /metrics after the stall, every trial",
            zombie == n,
            format!(
                "{zombie}/{n} trial(s); states after the stall: {}",
                after_stall.into_iter().collect::<Vec<_>>().join(", ")
            ),
        ),
        goal(
            name,
            "a critical webhook naming broker 2, every trial",
            paged == n,
            format!("{paged}/{n} trial(s)"),
        ),
        goal(
            name,
            "stall to critical webhook p95 <= 1.5 s",
            p95 <= 1.5,
            if p95.is_finite() {
                format!("p95 {p95:.2} s over {n} trial(s)")
            } else {
                format!("p95 never ({paged}/{n} trial(s) paged)")
            },
        ),
    ]
}

/// Every goal missed, in words (empty when all were met), from a recorded section.
pub fn missed_goals(section: &Section) -> Vec<String> {
    let Ok(runs) = serde_json::from_value::<Vec<EpisodeRun>>(section.raw.clone()) else {
        return vec!["no episode recorded".into()];
    };
    if runs.is_empty() {
        return vec!["no episode recorded".into()];
    }
    goals_of(&runs)
        .into_iter()
        .filter(|g| !g.met)
        .map(|g| format!("{}: {} (seen: {})", g.episode, g.goal, g.seen))
        .collect()
}

pub(super) fn state_runs(r: &EpisodeRun) -> String {
    runs_of(states_of(&r.samples, r.target).map(|(_, s)| s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(at: f64, event: &str, kind: &str, severity: &str, incident: &str) -> Message {
        Message {
            at,
            event: event.into(),
            kind: kind.into(),
            severity: severity.into(),
            broker: (kind == "broker").then_some(2),
            incident: incident.into(),
            ..Message::default()
        }
    }

    fn samples(broker: BrokerId, states: &[(f64, &str)]) -> Vec<Sample> {
        states
            .iter()
            .map(|(at, s)| Sample {
                at: *at,
                state: BTreeMap::from([(broker, s.to_string())]),
                incident_state: BTreeMap::new(),
            })
            .collect()
    }

    fn run(e: Episode, messages: Vec<Message>, samples: Vec<Sample>) -> EpisodeRun {
        EpisodeRun {
            episode: e.as_str().into(),
            trial: 1,
            target: e.target(),
            injected: true,
            fault_secs: 180.0,
            messages,
            samples,
            ..EpisodeRun::default()
        }
    }

    fn met(goals: &[Goal]) -> Vec<bool> {
        goals.iter().map(|g| g.met).collect()
    }

    #[test]
    fn metric_states_are_the_series_at_one() {
        let page = "# TYPE kafka_watchdog_broker_state gauge\n\
            kafka_watchdog_broker_state{cluster=\"lab\",broker=\"1\",state=\"healthy\"} 1.0\n\
            kafka_watchdog_broker_state{cluster=\"lab\",broker=\"2\",state=\"healthy\"} 0.0\n\
            kafka_watchdog_broker_state{cluster=\"lab\",broker=\"2\",state=\"zombie\"} 1\n\
            kafka_watchdog_broker_state_seconds{cluster=\"lab\",broker=\"2\"} 1\n\
            kafka_watchdog_broker_incident_state{cluster=\"lab\",broker=\"2\",state=\"zombie\"} 1.0\n";
        let states = states_in(page, "kafka_watchdog_broker_state");
        assert_eq!(
            states,
            BTreeMap::from([(1, "healthy".to_string()), (2, "zombie".to_string())])
        );
        let incident = states_in(page, "kafka_watchdog_broker_incident_state");
        assert_eq!(incident, BTreeMap::from([(2, "zombie".to_string())]));
    }

    #[test]
    fn a_message_keeps_its_rules_and_partitions() {
        let body = json!({
            "event": "opened", "kind": "broker", "severity": "critical", "state": "zombie",
            "broker_id": 2, "incident_id": "kw-1", "affected_partitions_total": 4,
            "evidence": ["no_answer: silent for 2 s", "liveness_flapping: 3 spells",
                         "no_answer: again", "a line: with no rule"],
        });
        let m = Message::from_body(&body, 1.5);
        assert_eq!(m.rules, vec!["no_answer", "liveness_flapping"]);
        assert_eq!((m.broker, m.affected_partitions), (Some(2), 4));
        assert_eq!(m.state.as_deref(), Some("zombie"));
        let partitions = json!({"event": "opened", "kind": "under_replicated",
                                "evidence": ["t-0: isr [1, 3]"]});
        assert!(Message::from_body(&partitions, 0.0).rules.is_empty());
    }

    #[test]
    fn counting_by_event_severity_incident_and_state() {
        let msgs = vec![
            msg(1.0, "opened", "broker", "critical", "a"),
            msg(2.0, "updated", "broker", "critical", "a"),
            msg(3.0, "updated", "broker", "warning", "a"),
            msg(4.0, "opened", "under_replicated", "warning", "b"),
            msg(30.0, "resolved", "broker", "warning", "a"),
        ];
        assert_eq!(by_event(&msgs), "opened 2, updated 2, resolved 1");
        assert_eq!(severity_sequence(&msgs), "critical x2 > warning x3");
        assert_eq!(incidents_opened(&msgs), 2);
        let s = samples(
            2,
            &[
                (-1.0, "healthy"),
                (0.5, "zombie"),
                (1.5, "zombie"),
                (2.5, "healthy"),
                (3.5, "zombie"),
            ],
        );
        assert_eq!(state_changes(&s, 2), 3);
        assert_eq!(state_changes(&s, 1), 0, "another broker has no samples");
        assert_eq!(fraction(&s, 2, "zombie", 0.0, 2.0), Some(1.0));
        assert_eq!(fraction(&s, 2, "zombie", 0.0, 3.5), Some(0.75));
        assert_eq!(fraction(&s, 2, "zombie", 10.0, 20.0), None);
    }

    #[test]
    fn freeze_wants_exactly_opened_then_resolved() {
        let two = vec![
            msg(2.0, "opened", "broker", "critical", "a"),
            msg(50.0, "resolved", "broker", "critical", "a"),
        ];
        let g = episode_goals(Episode::Freeze, &run(Episode::Freeze, two.clone(), vec![]));
        assert_eq!(met(&g), [true]);
        let mut three = two;
        three.insert(1, msg(10.0, "updated", "broker", "critical", "a"));
        let g = episode_goals(Episode::Freeze, &run(Episode::Freeze, three, vec![]));
        assert_eq!(met(&g), [false]);
        assert_eq!(g[0].seen, "3 message(s): opened > updated > resolved");
        let g = episode_goals(Episode::Freeze, &run(Episode::Freeze, vec![], vec![]));
        assert_eq!(
            met(&g),
            [false],
            "a fault nobody is told of is not quiet, it is missed"
        );
    }

    #[test]
    fn kill_wants_its_partitions_inside_the_broker_incident() {
        let mut opened = msg(1.0, "opened", "broker", "warning", "a");
        opened.broker = Some(3);
        let mut resolved = msg(60.0, "resolved", "broker", "warning", "a");
        resolved.broker = Some(3);
        let mut r = run(
            Episode::Kill,
            vec![opened.clone(), resolved.clone()],
            vec![],
        );
        assert_eq!(met(&episode_goals(Episode::Kill, &r)), [true, false, true]);
        r.messages[0].affected_partitions = 5;
        assert_eq!(met(&episode_goals(Episode::Kill, &r)), [true, true, true]);
        r.incidents.push(IncidentSeen {
            kind: "under_replicated".into(),
            ..IncidentSeen::default()
        });
        assert_eq!(met(&episode_goals(Episode::Kill, &r)), [true, true, false]);
    }

    #[test]
    fn flap_allows_three_messages_from_opened_to_resolved() {
        let ok = vec![
            msg(1.0, "opened", "broker", "critical", "a"),
            msg(9.0, "updated", "broker", "warning", "a"),
            msg(80.0, "resolved", "broker", "warning", "a"),
        ];
        assert_eq!(
            met(&episode_goals(
                Episode::Flap,
                &run(Episode::Flap, ok.clone(), vec![])
            )),
            [true]
        );
        let mut noisy = ok;
        noisy.insert(1, msg(5.0, "resolved", "broker", "critical", "a"));
        assert_eq!(
            met(&episode_goals(
                Episode::Flap,
                &run(Episode::Flap, noisy, vec![])
            )),
            [false]
        );
    }

    #[test]
    fn cpu_wants_degraded_nearly_throughout_and_few_changes() {
        let mut states: Vec<(f64, &str)> = vec![(-1.0, "healthy")];
        states
            .extend((0..180).map(|t| (f64::from(t), if t < 10 { "healthy" } else { "degraded" })));
        states.push((200.0, "healthy"));
        let r = run(Episode::Cpu, vec![], samples(2, &states));
        assert_eq!(met(&episode_goals(Episode::Cpu, &r)), [true, true, true]);
        // Healthy every tenth sample: 90 % is not reached, and it changes state often.
        let mut states: Vec<(f64, &str)> = vec![(-1.0, "healthy")];
        states.extend((0..180).map(|t| {
            (
                f64::from(t),
                if t % 8 == 0 { "healthy" } else { "degraded" },
            )
        }));
        let r = run(Episode::Cpu, vec![], samples(2, &states));
        assert_eq!(met(&episode_goals(Episode::Cpu, &r)), [true, false, false]);
    }

    #[test]
    fn gc_long_allows_a_zombie_only_in_the_first_pause() {
        let msgs = vec![
            msg(1.0, "opened", "broker", "critical", "a"),
            msg(150.0, "resolved", "broker", "critical", "a"),
        ];
        let mut r = run(
            Episode::GcLong,
            msgs,
            samples(2, &[(0.5, "healthy"), (1.5, "zombie"), (3.0, "degraded")]),
        );
        r.pauses = vec![(0.0, 1.2), (20.0, 21.2)];
        assert_eq!(met(&episode_goals(Episode::GcLong, &r)), [true, true]);
        r.samples.extend(samples(2, &[(21.0, "zombie")]));
        assert_eq!(met(&episode_goals(Episode::GcLong, &r)), [true, false]);
        r.messages
            .insert(1, msg(40.0, "opened", "broker", "critical", "b"));
        assert_eq!(met(&episode_goals(Episode::GcLong, &r)), [false, false]);
    }

    #[test]
    fn gc_short_wants_degraded_and_nothing_critical() {
        let r = run(
            Episode::GcShort,
            vec![msg(1.0, "opened", "broker", "warning", "a")],
            samples(2, &[(0.5, "degraded"), (1.5, "healthy")]),
        );
        assert_eq!(
            met(&episode_goals(Episode::GcShort, &r)),
            [true, true, true]
        );
        let r = run(
            Episode::GcShort,
            vec![msg(1.0, "opened", "broker", "critical", "a")],
            samples(2, &[(0.5, "zombie"), (1.5, "healthy")]),
        );
        assert_eq!(
            met(&episode_goals(Episode::GcShort, &r)),
            [false, false, false]
        );
    }

    #[test]
    fn restart_stall_pages_are_judged_by_their_p95_over_trials() {
        let trial = |page: Option<f64>, state: &str| {
            let mut msgs = vec![msg(-80.0, "opened", "broker", "warning", "r")];
            if let Some(at) = page {
                msgs.push(msg(at, "updated", "broker", "critical", "r"));
            }
            run(
                Episode::RestartStall,
                msgs,
                samples(2, &[(-1.0, "healthy"), (1.0, state)]),
            )
        };
        let good: Vec<EpisodeRun> = (0..10).map(|_| trial(Some(1.2), "zombie")).collect();
        assert_eq!(met(&goals_of(&good)), [true, true, true]);
        // One trial of ten without a page: the nearest-rank p95 is that trial's "never".
        let mut one_missing = good.clone();
        one_missing[3] = trial(None, "down");
        let g = goals_of(&one_missing);
        assert_eq!(met(&g), [false, false, false]);
        assert_eq!(g[2].seen, "p95 never (9/10 trial(s) paged)");
        // A page before the stall (the restart's) does not count.
        let early = vec![trial(Some(-5.0), "zombie")];
        assert_eq!(met(&goals_of(&early)), [true, false, false]);
    }

    #[test]
    fn an_episode_that_did_not_run_misses_its_goal_and_says_why() {
        let r = EpisodeRun {
            episode: "gc-short".into(),
            trial: 1,
            target: 2,
            error: Some("did not settle before the episode: broker 1 down".into()),
            ..EpisodeRun::default()
        };
        let g = goals_of(&[r]);
        assert_eq!(met(&g), [false], "no vacuous 0 critical messages: {g:?}");
        let mut s = Section::new("noise", json!({}));
        s.raw = json!([]);
        assert_eq!(missed_goals(&s), ["no episode recorded"]);
    }
}
