use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::*;
use crate::config::{HostBrokerConfig, ProcessLocator};
use crate::judge::verdict::{BrokerVerdict, Registration, Rule, RuleHit};
use crate::model::round::{BrokerEndpoint, BrokerProbe, FailureKind, ProbeFailure};

fn t(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

fn dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("kw-remediate-{name}-{}", std::process::id()))
}

fn remediation(dry_run: bool) -> RemediationConfig {
    RemediationConfig {
        enabled: true,
        dry_run,
        command: vec!["kafka-lab".into(), "restart".into(), "{broker}".into()],
        before_command: None,
        zombie_for: Duration::from_secs(30),
        timeout: Duration::from_secs(60),
        before_timeout: Duration::from_secs(10),
    }
}

fn host(r: Option<RemediationConfig>) -> HostConfig {
    HostConfig {
        log_dir_min_free_ratio: 0.05,
        remediation_cooldown: Duration::from_secs(600),
        remediation_max_per_day: 3,
        brokers: vec![HostBrokerConfig {
            broker_id: 1,
            process: ProcessLocator::PidFile("/run/k.pid".into()),
            log_dirs: Vec::new(),
            ports: Vec::new(),
            remediation: r,
        }],
    }
}

fn probe(id: i32, answers: bool) -> BrokerProbe {
    BrokerProbe {
        endpoint: BrokerEndpoint {
            id,
            host: format!("127.0.0.1{id}"),
            port: 9092,
            rack: None,
        },
        connect: Ok(Duration::from_millis(1)),
        api_versions: Some(if answers {
            Ok(Duration::from_millis(1))
        } else {
            Err(ProbeFailure {
                kind: FailureKind::Timeout,
                detail: "t".into(),
                after: Duration::from_secs(1),
            })
        }),
        metadata: answers.then(|| Ok((Default::default(), Duration::from_millis(2)))),
        description: None,
        certificate: None,
        log_dirs: None,
        speaks_quorum: None,
    }
}

/// Broker 1 a zombie since `since`; the others as given.
fn report(since: SystemTime, others: &[(i32, BrokerState)]) -> ClusterReport {
    let mut r = ClusterReport::empty("lab", t(0));
    let mut all = vec![(1, BrokerState::Zombie)];
    all.extend_from_slice(others);
    for (id, state) in all {
        r.verdicts.push(BrokerVerdict {
            broker: id,
            address: format!("127.0.0.1{id}:9092"),
            state,
            registration: Registration::Registered,
            answered: state == BrokerState::Healthy,
            hits: if state == BrokerState::Zombie {
                vec![RuleHit {
                    rule: Rule::ProcessStopped,
                    state,
                    detail: "process 4711 stopped by a signal".into(),
                }]
            } else {
                Vec::new()
            },
            observed_at: None,
            held_since: None,
            page_after: None,
        });
        r.probes
            .insert(id, probe(id, state == BrokerState::Healthy));
        r.state_since.insert(id, since);
    }
    r
}

struct Fixture {
    r: Remediator,
    sent: Arc<Mutex<Vec<Record>>>,
    /// Each record as it is sent, for the tests that wait for an action's task.
    records: tokio::sync::mpsc::UnboundedReceiver<Record>,
    log: RemediationLog,
}

fn fixture(name: &str, cfg: Option<RemediationConfig>) -> Fixture {
    let sent: Arc<Mutex<Vec<Record>>> = Arc::default();
    let s = sent.clone();
    let (told, records) = tokio::sync::mpsc::unbounded_channel();
    let log = RemediationLog::default();
    let _ = std::fs::remove_dir_all(dir(name));
    let r = Remediator::new(
        "lab",
        host(cfg),
        dir(name),
        log.clone(),
        Arc::new(move |rec: Record| {
            s.lock().unwrap().push(rec.clone());
            let _ = told.send(rec);
        }),
    )
    .unwrap()
    // Each test its own host lock: tests run at once in one process.
    .with_host(
        PathBuf::from("/proc"),
        &format!("kw-test-{name}-{}", std::process::id()),
    );
    Fixture {
        r,
        sent,
        records,
        log,
    }
}

fn outcomes(d: &[Decision]) -> Vec<&'static str> {
    d.iter()
        .map(|d| match d {
            Decision::Act { .. } => "act",
            Decision::Report(r) => r.outcome.as_label(),
        })
        .collect()
}

const HEALTHY: &[(i32, BrokerState)] = &[(2, BrokerState::Healthy), (3, BrokerState::Healthy)];

#[test]
fn acts_once_after_the_zombie_time_and_remembers_it() {
    let mut f = fixture("acts", Some(remediation(false)));
    let r = report(t(100), HEALTHY);
    assert!(f.r.decide(&r, t(129)).is_empty(), "29 s: not yet");
    let d = f.r.decide(&r, t(130));
    assert_eq!(outcomes(&d), ["act"]);
    let Decision::Act { record, .. } = &d[0] else {
        unreachable!()
    };
    assert_eq!(record.command, ["kafka-lab", "restart", "1"]);
    assert_eq!(record.zombie_for_secs, 30);
    assert_eq!(
        record.verdict_evidence,
        ["process_stopped: process 4711 stopped by a signal"]
    );
    assert!(f.r.decide(&r, t(131)).is_empty(), "once per episode");
    // The history is on disk: a restarted watchdog keeps the cool-down.
    assert_eq!(load_history(&dir("acts"), "lab").unwrap(), vec![t(130)]);
    let mut again = fixture("acts-2", Some(remediation(false)));
    save_history(&dir("acts-2"), "lab", &[t(130)]).unwrap();
    again.r = Remediator::new(
        "lab",
        host(Some(remediation(false))),
        dir("acts-2"),
        RemediationLog::default(),
        Arc::new(|_| {}),
    )
    .unwrap();
    let d = again.r.decide(&report(t(200), HEALTHY), t(240));
    assert_eq!(outcomes(&d), ["refused"]);
    let Decision::Report(rec) = &d[0] else {
        unreachable!()
    };
    assert_eq!(
        rec.refusals,
        ["another remediation ran in this cluster 110 s ago (cool-down 600 s)"]
    );
    let _ = std::fs::remove_dir_all(dir("acts"));
    let _ = std::fs::remove_dir_all(dir("acts-2"));
}

/// Issue 27 item 8: an attempt the history cannot record would count toward neither the
/// cool-down nor the daily limit after a restart of the watchdog; it is not made.
#[test]
fn no_command_runs_when_the_history_cannot_be_saved() {
    let mut f = fixture("unsaved", Some(remediation(false)));
    // The history's folder is a file: every save fails, even as root.
    std::fs::write(dir("unsaved"), b"not a folder").unwrap();
    let r = report(t(100), HEALTHY);
    let d = f.r.decide(&r, t(130));
    assert_eq!(outcomes(&d), ["refused"]);
    let Decision::Report(rec) = &d[0] else {
        unreachable!()
    };
    assert!(
        rec.refusals[0].contains("history cannot be saved"),
        "{rec:?}"
    );
    assert!(f.r.decide(&r, t(131)).is_empty(), "told once");
    // Writable again: it acts.
    std::fs::remove_file(dir("unsaved")).unwrap();
    assert_eq!(outcomes(&f.r.decide(&r, t(132))), ["act"]);
    assert_eq!(load_history(&dir("unsaved"), "lab").unwrap(), vec![t(132)]);
    let _ = std::fs::remove_dir_all(dir("unsaved"));
}

#[test]
fn a_new_zombie_episode_may_act_again_after_the_cool_down() {
    let mut f = fixture("episodes", Some(remediation(false)));
    assert_eq!(
        outcomes(&f.r.decide(&report(t(0), HEALTHY), t(30))),
        ["act"]
    );
    // Healthy for a while: the episode ends.
    let mut healthy = report(t(0), HEALTHY);
    healthy.verdicts[0].state = BrokerState::Healthy;
    assert!(f.r.decide(&healthy, t(40)).is_empty());
    // A zombie again, past the cool-down.
    assert_eq!(
        outcomes(&f.r.decide(&report(t(1000), HEALTHY), t(1030))),
        ["act"]
    );
    let _ = std::fs::remove_dir_all(dir("episodes"));
}

#[test]
fn refusals_are_told_when_their_reasons_change_and_it_acts_once_they_clear() {
    let mut f = fixture("refusals", Some(remediation(false)));
    let down = report(t(0), &[(2, BrokerState::Down), (3, BrokerState::Healthy)]);
    let d = f.r.decide(&down, t(30));
    assert_eq!(outcomes(&d), ["refused"]);
    let Decision::Report(rec) = &d[0] else {
        unreachable!()
    };
    assert_eq!(
        rec.refusals,
        [
            "the watchdog's view is incomplete: only 1 of 3 known broker(s) answered (the fault may be its own network)",
            "the rest of the cluster is not healthy: broker 2 is down"
        ]
    );
    assert!(rec
        .summary()
        .contains("refused: the watchdog's view is incomplete"));
    assert!(
        f.r.decide(&down, t(32)).is_empty(),
        "same reasons: told once"
    );
    let degraded = report(
        t(0),
        &[(2, BrokerState::Degraded), (3, BrokerState::Healthy)],
    );
    assert_eq!(
        outcomes(&f.r.decide(&degraded, t(34))),
        ["refused"],
        "new reasons"
    );
    assert_eq!(
        outcomes(&f.r.decide(&report(t(0), HEALTHY), t(36))),
        ["act"]
    );
    let _ = std::fs::remove_dir_all(dir("refusals"));
}

#[test]
fn dry_run_reports_once_and_never_acts() {
    let mut f = fixture("dry", Some(remediation(true)));
    let d = f.r.decide(&report(t(0), HEALTHY), t(30));
    assert_eq!(outcomes(&d), ["dry_run"]);
    let Decision::Report(rec) = &d[0] else {
        unreachable!()
    };
    assert!(rec.refusals.is_empty());
    assert_eq!(
        rec.summary(),
        "dry run: remediation of broker 1 (127.0.0.11:9092) (zombie for 30 s) would run `kafka-lab restart 1`"
    );
    assert!(f.r.decide(&report(t(0), HEALTHY), t(40)).is_empty());
    assert!(
        load_history(&dir("dry"), "lab").unwrap().is_empty(),
        "no action counted"
    );
    // A dry run that would be refused says why.
    let mut g = fixture("dry-2", Some(remediation(true)));
    let d = g.r.decide(
        &report(t(0), &[(2, BrokerState::Down), (3, BrokerState::Healthy)]),
        t(30),
    );
    let Decision::Report(rec) = &d[0] else {
        unreachable!()
    };
    assert_eq!(rec.outcome, Outcome::DryRun);
    assert!(
        rec.summary().contains("would be refused: "),
        "{}",
        rec.summary()
    );
}

#[test]
fn disabled_or_absent_remediation_does_nothing() {
    let mut off = remediation(false);
    off.enabled = false;
    for cfg in [None, Some(off)] {
        let mut f = fixture("off", cfg);
        assert!(f.r.decide(&report(t(0), HEALTHY), t(1000)).is_empty());
        assert!(
            f.log.counts().is_empty(),
            "no series for a broker without remediation"
        );
    }
}

#[test]
fn the_last_in_sync_replica_guard_reads_the_rounds_merged_view() {
    use crate::model::round::{MetadataView, PartitionView, TopicView};
    let mut f = fixture("isr", Some(remediation(false)));
    let mut r = report(t(0), HEALTHY);
    let mut md = MetadataView {
        has_leader_epochs: true,
        ..MetadataView::default()
    };
    md.topics.insert(
        "orders".into(),
        TopicView {
            name: "orders".into(),
            partitions: vec![PartitionView {
                partition: 4,
                leader: 1,
                leader_epoch: 3,
                replicas: [1, 2].into_iter().collect(),
                isr: [1].into_iter().collect(),
                ..PartitionView::default()
            }]
            .into(),
            ..TopicView::default()
        },
    );
    if let Some(p) = r.probes.get_mut(&2) {
        p.metadata = Some(Ok((md.clone(), Duration::from_millis(1))));
    }
    // The report carries the round's merged view; remediation reads that one.
    r.view = std::sync::Arc::new(crate::observe::cluster_view::merge(&[(2, &md)]));
    let d = f.r.decide(&r, t(30));
    let Decision::Report(rec) = &d[0] else {
        panic!("{d:?}")
    };
    assert_eq!(
        rec.refusals,
        ["it is the last in-sync replica of 1 partition(s): orders-4"]
    );
    let _ = std::fs::remove_dir_all(dir("isr"));
}

#[tokio::test]
async fn an_action_runs_in_a_task_and_reports_its_exit_status() {
    let mut cfg = remediation(false);
    cfg.command = vec![
        "/bin/sh".into(),
        "-c".into(),
        "echo restarting {broker} >&2; exit 0".into(),
    ];
    cfg.before_command = Some(vec!["/bin/echo".into(), "dump of {pid}".into()]);
    let mut f = fixture("task", Some(cfg));
    // Broker 1's process as the round saw it, and as it is looked up again right before
    // the command: pid 4711 in a pid file, alive in a /proc of the test's own.
    let proc_root = dir("task-proc");
    std::fs::create_dir_all(proc_root.join("4711")).unwrap();
    std::fs::write(proc_root.join("4711").join("stat"), "4711 (java) T").unwrap();
    let pid_file = dir("task-pid");
    std::fs::write(&pid_file, "4711\n").unwrap();
    f.r.host.brokers[0].process = ProcessLocator::PidFile(pid_file.clone());
    f.r.proc_root = proc_root.clone();
    let mut r = report(t(0), HEALTHY);
    r.host.insert(
        1,
        crate::observe::host::HostObservation {
            process: Some(crate::observe::host::ProcessSeen {
                pid: 4711,
                state: crate::observe::host::ProcessState::Stopped,
                threads: 1,
                threads_in_io_wait: None,
                cpu_seconds: 0.0,
                cpu_advancing: None,
                open_fds: None,
                open_fds_error: None,
            }),
            ..crate::observe::host::HostObservation::unseen(1, String::new(), 0.05)
        },
    );
    f.r.after_round(&r, t(30));
    let rec = tokio::time::timeout(Duration::from_secs(10), f.records.recv())
        .await
        .expect("no record within 10 s")
        .expect("the remediator is gone");
    assert_eq!(f.sent.lock().unwrap().len(), 1);
    assert_eq!(rec.outcome, Outcome::Acted);
    assert!(rec
        .status
        .as_deref()
        .unwrap()
        .starts_with("exit status 0 after"));
    assert_eq!(rec.stderr_tail.as_deref(), Some("restarting 1"));
    let kept = std::fs::read_to_string(rec.before_output.as_deref().unwrap()).unwrap();
    assert_eq!(kept, "dump of 4711\n");
    assert_eq!(rec.before_status.as_deref(), Some("exit status 0"));
    let counts = f.log.counts();
    assert!(counts.contains(&(("lab".into(), 1, Outcome::Acted), 1)));
    assert!(counts.contains(&(("lab".into(), 1, Outcome::Refused), 0)));
    let ev = rec.evidence();
    assert!(
        ev.iter().any(|l| l == "stderr (tail): restarting 1"),
        "{ev:?}"
    );
    // Issue 27 item 8: a process restarted between the decision and the command (by an
    // operator, by systemd) is not restarted again. A new episode after the cool-down,
    // and the pid file names another process by the time the command would run.
    f.r.history.clear();
    let _ = save_history(&dir("task"), "lab", &[]);
    std::fs::create_dir_all(proc_root.join("5000")).unwrap();
    std::fs::write(proc_root.join("5000").join("stat"), "5000 (java) S").unwrap();
    std::fs::write(&pid_file, "5000\n").unwrap();
    f.r.after_round(&report(t(1000), HEALTHY), t(1000));
    f.r.after_round(&r, t(1100));
    let rec = tokio::time::timeout(Duration::from_secs(10), f.records.recv())
        .await
        .expect("no record within 10 s")
        .expect("the remediator is gone");
    assert_eq!(rec.outcome, Outcome::Refused, "{rec:?}");
    assert!(
        rec.refusals[0].contains("pid 4711, now 5000"),
        "{:?}",
        rec.refusals
    );
    assert!(rec.status.is_none(), "nothing ran: {rec:?}");
    let _ = std::fs::remove_dir_all(dir("task"));
    let _ = std::fs::remove_dir_all(proc_root);
    let _ = std::fs::remove_file(pid_file);
}

/// Issue 38 item 1: an action's task that panicked left the cluster's running flag set
/// for good, so remediation refused every later decision ("still running") and nothing
/// said why. The flag is released however the task ends, the panic is counted, and a
/// `failed` record tells the receivers that the action's outcome is unknown.
#[tokio::test]
async fn an_action_that_panics_releases_remediation_and_says_so() {
    let mut f = fixture("panics", Some(remediation(false)));
    f.r.panic_in_action = true;
    f.r.after_round(&report(t(0), HEALTHY), t(30));
    let rec = tokio::time::timeout(Duration::from_secs(10), f.records.recv())
        .await
        .expect("a record of the action that died")
        .expect("the remediator is gone");
    assert_eq!(rec.outcome, Outcome::Failed, "{rec:?}");
    assert!(
        rec.status
            .as_deref()
            .unwrap_or("")
            .contains("whether the command ran is unknown"),
        "{rec:?}"
    );
    assert!(
        !f.r.running.load(Ordering::SeqCst),
        "the cluster's remediation is released"
    );
    let _ = std::fs::remove_dir_all(dir("panics"));
}

/// Issue 27 item 8: two watchdogs on one host never run remediations at once: the second
/// finds the host-wide lock held and refuses, saying so.
#[test]
fn a_remediation_waits_while_another_instance_on_the_host_holds_the_lock() {
    let mut f = fixture("locked", Some(remediation(false)));
    let name = format!("kw-test-locked-{}", std::process::id());
    let other = HostLock::take(&name).expect("the lock is free");
    let r = report(t(100), HEALTHY);
    let d = f.r.decide(&r, t(130));
    assert_eq!(outcomes(&d), ["refused"]);
    let Decision::Report(rec) = &d[0] else {
        unreachable!()
    };
    assert!(
        rec.refusals[0].contains("another kafka-watchdog on this host"),
        "{rec:?}"
    );
    assert!(
        load_history(&dir("locked"), "lab").unwrap().is_empty(),
        "nothing counted"
    );
    drop(other);
    assert_eq!(outcomes(&f.r.decide(&r, t(131))), ["act"]);
    let _ = std::fs::remove_dir_all(dir("locked"));
}

#[test]
fn outcomes_map_to_event_kinds() {
    let kinds: BTreeMap<&str, &str> = Outcome::ALL
        .iter()
        .map(|o| (o.as_label(), o.event_kind().as_str()))
        .collect();
    assert_eq!(kinds["acted"], "acted");
    assert_eq!(kinds["failed"], "acted");
    assert_eq!(kinds["refused"], "refused");
    assert_eq!(kinds["dry_run"], "dry_run");
}

fn record(outcome: Outcome) -> Record {
    Record {
        cluster: "lab".into(),
        broker: 1,
        address: "127.0.0.11:9092".into(),
        outcome,
        at: t(30),
        zombie_for_secs: 30,
        command: vec!["kafka-lab".into(), "restart".into(), "1".into()],
        refusals: if outcome == Outcome::Refused {
            vec!["the rest of the cluster is not healthy: broker 2 is down".into()]
        } else {
            Vec::new()
        },
        status: (outcome == Outcome::Acted).then(|| "exit status 0 after 3.1 s".into()),
        stderr_tail: None,
        before_output: None,
        before_status: None,
        verdict_evidence: vec!["process_stopped: process 4711 stopped".into()],
    }
}

fn webhook(format: &str, min: &str) -> crate::config::WebhookConfig {
    let text = format!(
        "clusters:\n  - name: lab\n    bootstrap_servers: [a:1]\nwebhooks:\n  - name: w\n    url: http://127.0.0.1:1/\n    format: {format}\n    min_severity: {min}\n{}",
        if format == "pagerduty" { "    routing_key_env: RK\n" } else { "" }
    );
    crate::config::parse_with_env(&text, "t.yaml", &|_| Some("key".into()))
        .unwrap()
        .webhooks
        .remove(0)
}

#[test]
fn remediation_events_reach_receivers_once_with_their_reason() {
    use crate::alert::incident::EventKind;
    use crate::alert::notify::{route, Context, Notification, Reminders};
    let refused = crate::alert::alerting::remediation_event(&record(Outcome::Refused));
    assert_eq!(refused.kind, EventKind::Refused);
    assert_eq!(
        refused.incident.dedup_key,
        "kafka-watchdog/lab/broker-1/remediation"
    );
    assert_eq!(
        route(&webhook("generic", "warning"), &refused),
        Some(EventKind::Refused)
    );
    assert_eq!(route(&webhook("generic", "critical"), &refused), None);
    let acted = crate::alert::alerting::remediation_event(&record(Outcome::Acted));
    assert_eq!(
        route(&webhook("generic", "critical"), &acted),
        Some(EventKind::Acted)
    );
    // Told once: no reminders of a one-shot event.
    let mut reminders = Reminders::default();
    reminders.record(&acted);
    assert_eq!(reminders.open_count(), 0);

    let n = Notification {
        sequence: 1,
        receiver: "w".into(),
        event: refused.clone(),
        queued_at: t(30),
    };
    let ctx = Context {
        instance_id: "test",
        now: t(31),
        status_url: None,
        runbooks_url: None,
    };
    let body = crate::alert::notify::generic(&n, &ctx);
    assert_eq!(body["event"], "refused");
    assert_eq!(body["kind"], "remediation");
    assert_eq!(body["broker_id"], 1);
    assert!(body["evidence"][0]
        .as_str()
        .unwrap()
        .contains("guard: the rest of the cluster is not healthy: broker 2 is down"));
    // PagerDuty: logged on the broker's own alert, not a new one nobody resolves.
    let pd = crate::alert::notify::pagerduty("rk", &n, &ctx);
    assert_eq!(pd["dedup_key"], "kafka-watchdog/lab/broker-1/broker");
    assert_eq!(pd["event_action"], "trigger");
    // Alertmanager: fires briefly, ends by itself.
    let am = crate::alert::notify::alertmanager(None, &n, &ctx);
    assert_eq!(am[0]["labels"]["alertname"], "KafkaWatchdogRemediation");
    assert_eq!(
        am[0]["endsAt"],
        crate::model::time::rfc3339(t(31) + crate::alert::notify::ONE_SHOT_ALERT_LIFETIME)
    );
    let slack = crate::alert::notify::slack(&n, &ctx);
    assert!(slack["text"]
        .as_str()
        .unwrap()
        .contains("remediation: refused"));
}

#[test]
fn a_zombie_whose_incident_is_not_open_is_not_restarted() {
    let mut f = fixture("confirmed", Some(remediation(false)));
    let open: Arc<Mutex<Option<BrokerState>>> = Arc::default();
    let book = open.clone();
    f.r =
        f.r.with_confirmation(Arc::new(move |_| *book.lock().unwrap()));
    let r = report(t(100), HEALTHY);
    assert!(
        f.r.decide(&r, t(200)).is_empty(),
        "a zombie verdict with no open incident (not confirmed, or already resolved) acts on nothing"
    );
    *open.lock().unwrap() = Some(BrokerState::Degraded);
    assert!(
        f.r.decide(&r, t(201)).is_empty(),
        "its incident says degraded: the book and the verdict disagree, nothing runs"
    );
    *open.lock().unwrap() = Some(BrokerState::Zombie);
    let d = f.r.decide(&r, t(202));
    assert_eq!(outcomes(&d), ["act"]);
    let Decision::Act { record, .. } = &d[0] else {
        unreachable!()
    };
    assert_eq!(
        record.zombie_for_secs, 102,
        "counted from the verdict's start"
    );
    let _ = std::fs::remove_dir_all(dir("confirmed"));
}
