//! The whole `/metrics` page of a rich fixture (two reporting clusters and one still
//! waiting, brokers in every verdict state, canary, liveness, host mode, incidents,
//! silences, webhooks, remediation, a refused reload), compared with the committed pages in
//! `tests/golden/`, in OpenMetrics and in the text format 0.0.4. A change of any metric
//! name, HELP text, label, value or family order shows up here as a diff.
//!
//! The series of one family come out of `prometheus-client` in hash order, so both sides
//! are compared with each family's samples sorted; the watchdog's own `process_*` figures
//! and its version change from run to run and are left out.
//!
//! `UPDATE_GOLDEN=1 cargo test --lib metrics_golden` rewrites the files after an intended
//! change.
//!
//! The same page, with every family filled, is the source of docs/metrics.md: name, type,
//! labels and HELP of each family, grouped by what it is about. A test fails when the
//! committed file differs; `KW_DOCS_WRITE=1 cargo test --lib metrics_golden` rewrites it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::alert::incident::{Incident, Subject};
use crate::alert::notify::{NotifierStats, ReceiverStats};
use crate::config::Severity;
use crate::judge::health::{BrokerPartitions, Condition};
use crate::judge::report::ClusterReport;
use crate::judge::verdict::{BrokerState, BrokerVerdict, Registration, Rule};
use crate::model::kind::FindingKind;
use crate::model::round::{
    BrokerEndpoint, BrokerProbe, FailureKind, HostObservation, LivenessFact, LogDirSeen,
    MetadataView, PortSeen, ProbeFailure, ProcessSeen, ProcessState,
};
use crate::observe::canary::stats::CanaryStats;
use crate::observe::canary::{CanaryRound, FailedWrites, LossEvent, PartitionRound, TopicStatus};
use crate::observe::cluster_view::StaleLeader;
use crate::serve::metrics::{render, to_text_004, Extras};

fn t(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

fn failure(kind: FailureKind, detail: &str) -> ProbeFailure {
    ProbeFailure {
        kind,
        detail: detail.into(),
        after: Duration::from_secs(2),
    }
}

fn endpoint(id: i32) -> BrokerEndpoint {
    BrokerEndpoint {
        id,
        host: format!("127.0.0.1{id}"),
        port: 9092,
        rack: None,
    }
}

fn answered(id: i32) -> BrokerProbe {
    BrokerProbe {
        endpoint: endpoint(id),
        connect: Ok(Duration::from_millis(id as u64)),
        api_versions: Some(Ok(Duration::from_millis(2))),
        metadata: Some(Ok((MetadataView::default(), Duration::from_millis(7)))),
        description: None,
        certificate: None,
        // Two directories, the second taken offline by Kafka.
        log_dirs: Some(Ok(vec![
            crate::model::round::LogDirState {
                dir: "/var/lib/kafka/a".into(),
                error_code: 0,
                total_bytes: Some(100 << 30),
                usable_bytes: Some(40 << 30),
            },
            crate::model::round::LogDirState {
                dir: "/var/lib/kafka/b".into(),
                error_code: 56,
                total_bytes: None,
                usable_bytes: None,
            },
        ])),
        speaks_quorum: Some(true),
    }
}

fn verdict(broker: i32, state: BrokerState, registration: Registration) -> BrokerVerdict {
    BrokerVerdict {
        broker,
        address: format!("127.0.0.1{broker}:9092"),
        state,
        registration,
        answered: state == BrokerState::Healthy,
        hits: Vec::new(),
        observed_at: None,
        held_since: None,
        page_after: None,
    }
}

fn liveness(threshold_ms: u64, latency_ms: Option<u64>, waiting: Option<u64>) -> LivenessFact {
    LivenessFact {
        address: "127.0.0.11:9092".into(),
        threshold: Duration::from_millis(threshold_ms),
        typical: latency_ms.map(Duration::from_millis),
        last_latency: latency_ms.map(Duration::from_millis),
        last_answer_at: None,
        waiting_since: waiting.map(t),
        refused_since: None,
        refused_detail: String::new(),
        side: None,
        accepted_in_silence: false,
        spells: Vec::new(),
        pauses: Vec::new(),
        median: None,
        resent: 0,
    }
}

fn host(broker: i32, process: Option<ProcessSeen>, error: Option<&str>) -> HostObservation {
    HostObservation {
        broker,
        locator: "pid file k.pid".into(),
        process,
        not_found: None,
        error: error.map(Into::into),
        locate_note: None,
        ports: vec![
            PortSeen {
                port: format!("127.0.0.1{broker}:9092"),
                listening: true,
                owned_by_process: Some(true),
            },
            PortSeen {
                port: "9093".into(),
                listening: false,
                owned_by_process: None,
            },
        ],
        ports_error: None,
        log_dirs: vec![
            LogDirSeen {
                path: format!("/kw/data{broker}"),
                total_bytes: Some(1000),
                free_bytes: Some(250),
                free_ratio: Some(0.25),
                error: None,
            },
            LogDirSeen {
                path: "/kw/unreadable".into(),
                total_bytes: None,
                free_bytes: None,
                free_ratio: None,
                error: Some("denied".into()),
            },
        ],
        log_dir_min_free_ratio: 0.05,
    }
}

fn process(state: ProcessState, open_fds: Option<u64>) -> ProcessSeen {
    ProcessSeen {
        pid: 4711,
        state,
        threads: 74,
        threads_in_io_wait: Some(2),
        cpu_seconds: 28.5,
        cpu_advancing: Some(true),
        open_fds,
        open_fds_error: None,
    }
}

fn partition(
    p: i32,
    leader: i32,
    ok: bool,
    overdue: u64,
    unavailable: Option<f64>,
) -> PartitionRound {
    PartitionRound {
        partition: p,
        leader,
        leader_epoch: 4,
        replicas: vec![1, 2, 3],
        isr: vec![1, 2],
        produce: None,
        produce_seconds: ok.then_some(0.004),
        produce_error: None,
        end_to_end_seconds: vec![0.01],
        unavailable_seconds: unavailable,
        unavailable_broker: unavailable.map(|_| leader),
        writes: 3,
        failed_writes: if ok {
            Vec::new()
        } else {
            vec![FailedWrites {
                broker: leader,
                kind: "timeout",
                count: 3,
                received: true,
                leader_appended: false,
                first_sent_at: t(0),
                last_sent_at: t(1),
            }]
        },
        overdue,
        charged_to: None,
    }
}

/// Cluster `lab`: five brokers, one per verdict state, with everything a round can carry.
fn lab() -> ClusterReport {
    let mut r = ClusterReport::empty("lab", t(0));
    r.round = 7;
    r.early_rounds = crate::judge::report::EarlyRounds {
        registration: 1,
        canary: 2,
        confirmation: 3,
        metadata: 4,
    };
    r.duration = Duration::from_millis(1250);
    r.cluster_id = Some("lab-id".into());
    r.reachable = true;
    r.last_success = Some(t(1));
    r.evaluated_at = t(2);
    let states = [
        (1, BrokerState::Healthy, Registration::Registered),
        (2, BrokerState::Unknown, Registration::Unknown),
        (3, BrokerState::Degraded, Registration::Fenced),
        (4, BrokerState::Zombie, Registration::Registered),
        (5, BrokerState::Down, Registration::Absent),
    ];
    r.verdicts = states
        .iter()
        .map(|&(b, s, reg)| verdict(b, s, reg))
        .collect();
    // Who and why (`broker_rule`): the zombie's rules, and a milder one beside them.
    r.verdicts[3].hits = [
        (Rule::NoAnswer, BrokerState::Zombie),
        (Rule::Slow, BrokerState::Degraded),
    ]
    .into_iter()
    .map(|(rule, state)| crate::judge::verdict::RuleHit {
        rule,
        state,
        detail: "as seen".into(),
    })
    .collect();
    r.probes.insert(1, answered(1));
    r.probes.insert(2, answered(2));
    r.probes.insert(
        3,
        BrokerProbe {
            api_versions: Some(Ok(Duration::from_millis(3))),
            metadata: Some(Err(failure(FailureKind::Timeout, "metadata"))),
            ..answered(3)
        },
    );
    r.probes.insert(
        4,
        BrokerProbe {
            api_versions: Some(Err(failure(FailureKind::Timeout, "api_versions"))),
            metadata: None,
            ..answered(4)
        },
    );
    r.probes.insert(
        5,
        BrokerProbe {
            connect: Err(failure(FailureKind::ConnectionRefused, "refused")),
            api_versions: None,
            metadata: None,
            ..answered(5)
        },
    );
    r.registered = [1, 4].into_iter().collect();
    r.health.partitions = 12;
    r.health.counts.insert(Condition::Offline, 1);
    r.health.counts.insert(Condition::UnderReplicated, 3);
    for b in 1..=5 {
        r.health.brokers.insert(
            b,
            BrokerPartitions {
                leader_of: 5 - b as u32,
                replica_of: 6,
                missing_from_isr: u32::from(b >= 4),
                replica_of_offline: u32::from(b == 5),
                causes_under_min_isr: 0,
            },
        );
    }
    r.stale_leaders = vec![
        StaleLeader {
            topic: "orders".into(),
            partition: 0,
            broker: 4,
            claimed_epoch: 3,
            current_leader: 1,
            current_epoch: 4,
        },
        StaleLeader {
            topic: "orders".into(),
            partition: 0,
            broker: 3,
            claimed_epoch: 2,
            current_leader: 1,
            current_epoch: 4,
        },
        StaleLeader {
            topic: "orders".into(),
            partition: 1,
            broker: 4,
            claimed_epoch: 3,
            current_leader: 2,
            current_epoch: 5,
        },
    ];
    r.disagreements.insert(4, 2);
    r.failures_total
        .insert((3, "metadata", FailureKind::Timeout), 4);
    r.failures_total
        .insert((4, "api_versions", FailureKind::Timeout), 9);
    r.failures_total
        .insert((5, "connect", FailureKind::ConnectionRefused), 11);
    r.unclean_elections_total = 2;
    for b in 1..=5 {
        r.state_since
            .insert(b, t(0) - Duration::from_secs(60 * b as u64));
    }
    r.canary = Some(CanaryRound {
        topic: "__kafka_watchdog_canary".into(),
        status: TopicStatus::Ready,
        partitions: vec![
            partition(0, 1, true, 0, None),
            partition(1, 2, true, 1, None),
            partition(2, 4, false, 3, Some(42.5)),
        ],
        layout: Vec::new(),
        not_leading: vec![3, 5],
        lost: Vec::new(),
        duplicated: Vec::new(),
        windows_closed: Vec::new(),
        acks1: Vec::new(),
    });
    r.canary_last_window.insert(0, 0.0);
    r.canary_last_window.insert(1, 12.0);
    r.host.insert(
        1,
        host(1, Some(process(ProcessState::Running, Some(321))), None),
    );
    r.host.insert(
        4,
        host(4, Some(process(ProcessState::DiskSleep, None)), None),
    );
    r.host.insert(5, host(5, None, None));
    r.host.insert(3, host(3, None, Some("cannot read /proc")));
    r.liveness.insert(1, liveness(2000, Some(3), None));
    r.liveness.insert(2, liveness(2000, None, None));
    r.liveness.insert(4, liveness(4500, Some(800), Some(0)));
    r.quorum = Some(quorum());
    r.coordinators = Some(std::sync::Arc::new(coordinators()));
    // Broker 1 presents a certificate 1.5 days from its expiry, broker 2 one from another CA.
    let cert = |days: u64, issuer: &str| crate::model::round::PeerCertificate {
        not_after: t(days * 86_400 + 43_200),
        subject: "broker".into(),
        issuer: issuer.into(),
        checked_name: "127.0.0.11".into(),
    };
    let seen = [
        (1, (cert(1, "lab CA"), "127.0.0.11:9093".to_string(), t(0))),
        (
            2,
            (cert(300, "old CA"), "127.0.0.12:9093".to_string(), t(0)),
        ),
    ]
    .into();
    r.certificates = crate::judge::certificates::judge_certificates(
        &seen,
        &[1, 2].into(),
        &Default::default(),
        t(10),
    );
    let mut view = crate::observe::cluster_view::ClusterView::default();
    view.behind.insert(
        4,
        crate::observe::cluster_view::Behind {
            partitions: 2,
            own: 1,
            shown: vec!["t-0 (leader 4 at epoch 3; it knows epoch 2)".into()],
            topics: ["t".to_string()].into(),
        },
    );
    r.view = std::sync::Arc::new(view);
    r
}

/// The group coordinators: broker 1 answers for its shards, broker 2's coordinator left two
/// probes unanswered while it answered ApiVersions, broker 4 loads a shard.
fn coordinators() -> crate::model::coordinators::CoordinatorObservation {
    use crate::model::coordinators::{
        CoordinatorLook, CoordinatorObservation, ShardError, ShardProbe,
    };
    let look = |broker: i32, shards: Vec<i32>, last: ShardProbe| CoordinatorLook {
        broker,
        address: format!("127.0.0.1{broker}:9092"),
        shards,
        last,
        control_latency: Some(Duration::from_millis(2)),
        unanswered_in_a_row: 0,
        unanswered_since: None,
        errors: Vec::new(),
    };
    let answered = ShardProbe::Answered {
        latency: Duration::from_millis(4),
    };
    let mut stuck = look(2, vec![1, 4], ShardProbe::Unanswered);
    stuck.unanswered_in_a_row = 2;
    stuck.unanswered_since = Some(t(8));
    let mut unended = look(2, vec![2], answered.clone());
    unended.errors = vec![ShardError {
        shard: 2,
        code: 51,
        since: t(4),
    }];
    let mut loading = look(4, vec![2], answered.clone());
    loading.errors = vec![ShardError {
        shard: 2,
        code: 14,
        since: t(9),
    }];
    CoordinatorObservation {
        at: t(10),
        offsets_partitions: 5,
        brokers: [
            (1, look(1, vec![0, 3], answered.clone())),
            (2, stuck),
            (4, loading),
        ]
        .into(),
        timeout: Duration::from_secs(1),
        blind: None,
        transactions: Some(crate::model::coordinators::TxnCoordinators {
            at: t(10),
            partitions: 3,
            brokers: [(1, look(1, vec![0, 1], answered)), (2, unended)].into(),
            blind: None,
        }),
    }
}

/// The lab's control plane: controller 100 leads with a high watermark still for 3 s (a
/// wedged event handler), controller 0 accepts and answers nothing, 101 answers as a
/// follower; broker 4 fetches the metadata log.
fn quorum() -> crate::judge::quorum::QuorumReport {
    use crate::model::round::{
        ControllerLook, ControllerRole, QuorumDescription, QuorumObservation, ReplicaProgress,
    };
    let progress = |id, ms| ReplicaProgress {
        id,
        log_end_offset: 900,
        last_fetch_ago: Some(Duration::from_millis(ms)),
        last_caught_up_ago: Some(Duration::from_millis(ms)),
    };
    let look = |id: i32, outcome| ControllerLook {
        address: format!("127.0.0.{}:9093", 10 + id),
        id: Some(id),
        accepted: true,
        failing_since: None,
        accepted_in_streak: false,
        ever_reached: true,
        outcome,
    };
    let mut frozen = look(
        0,
        Err(failure(FailureKind::Timeout, "no answer within 1000ms")),
    );
    frozen.failing_since = Some(t(0));
    frozen.accepted_in_streak = true;
    let observation = std::sync::Arc::new(QuorumObservation {
        at: t(2),
        controllers: vec![
            frozen,
            look(100, Ok(ControllerRole::Leader)),
            look(101, Ok(ControllerRole::Follower)),
        ],
        via_broker: Some(("127.0.0.11:9092".into(), Ok(()))),
        description: Some(QuorumDescription {
            leader: 100,
            epoch: 6,
            high_watermark: 900,
            voters: vec![progress(0, 4000), progress(100, 0), progress(101, 200)],
            observers: vec![progress(1, 300), progress(4, 250)],
            endpoints: Default::default(),
            version: 2,
        }),
        last_leader: Some((100, 6, t(2))),
        high_watermark_still_since: Some(t(0)),
        last_progress_at: Some(t(0)),
        metadata_changed_at: None,
        metadata_applied: None,
    });
    crate::judge::quorum::judge_quorum(
        &observation,
        &mut Default::default(),
        &Default::default(),
        t(3),
    )
}

/// Cluster `orders`: unreachable, known only by its failed bootstrap addresses, its canary
/// topic missing.
fn orders() -> ClusterReport {
    let mut r = ClusterReport::empty("orders", t(0));
    r.round = 2;
    r.duration = Duration::from_secs(3);
    r.evaluated_at = t(3);
    r.bootstrap_failures = vec![
        (
            "kafka-a:9092".into(),
            failure(FailureKind::Unresolvable, "no such host"),
        ),
        (
            "kafka-b:9092".into(),
            failure(FailureKind::Timeout, "connect"),
        ),
    ];
    r.canary = Some(CanaryRound {
        topic: "__kafka_watchdog_canary".into(),
        status: TopicStatus::Missing("not created".into()),
        partitions: Vec::new(),
        layout: Vec::new(),
        not_leading: Vec::new(),
        lost: Vec::new(),
        duplicated: Vec::new(),
        windows_closed: Vec::new(),
        acks1: Vec::new(),
    });
    r
}

fn incident(cluster: &str, broker: Option<i32>, kind: FindingKind, severity: Severity) -> Incident {
    let subject = broker.map_or(Subject::Cluster, Subject::Broker);
    Incident {
        id: format!("kw-{cluster}-{subject}-{kind}"),
        dedup_key: format!("kafka-watchdog/{cluster}/{subject}/{kind}"),
        cluster: cluster.into(),
        subject,
        kind,
        broker,
        broker_address: broker.map(|b| format!("127.0.0.1{b}:9092")),
        state: broker.map(|_| BrokerState::Zombie),
        severity,
        peak_severity: severity,
        told_state: None,
        summary: "golden".into(),
        evidence: Vec::new(),
        rules: Vec::new(),
        affected_partitions: Vec::new(),
        affected_partitions_total: 0,
        suspects: broker.into_iter().collect(),
        started_at: t(0),
        updated_at: t(0),
        resolved_at: None,
        unavailable_seconds: None,
        silenced: None,
        notified_peak: Some(severity),
        flapping_since: None,
        labels: Default::default(),
    }
}

fn silence(
    id: &str,
    cluster: Option<&str>,
    starts: SystemTime,
    ends: SystemTime,
) -> crate::model::silence::Silence {
    crate::model::silence::Silence {
        id: id.into(),
        cluster: cluster.map(Into::into),
        broker: None,
        kind: None,
        starts_at: starts,
        ends_at: ends,
        comment: "golden".into(),
        created_by: "test".into(),
        origin: crate::model::silence::Origin::Api,
        weekly: None,
    }
}

fn canary_stats() -> CanaryStats {
    let s = CanaryStats::default();
    s.prime("lab", [(0, 1), (1, 2), (2, 4)].into_iter());
    s.write("lab", 0, 1, "ok", Some(0.004));
    s.write("lab", 0, 1, "ok", Some(0.02));
    s.write("lab", 2, 4, "timeout", None);
    s.end_to_end("lab", 0, 1, 0.03);
    s.end_to_end("lab", 1, 2, 1.5);
    s.lost(
        "lab",
        &LossEvent {
            partition: 1,
            offset: 17,
            seq: 3,
            acks: crate::observe::canary::record::Acks::All,
            broker: 2,
            reason: crate::observe::canary::ledger::LossReason::Truncated.as_label(),
        },
    );
    s.duplicated("lab", 0, 1);
    s.charged_failure("lab", 4, "timeout");
    s.window_open("lab", 2, Some(4), true);
    s.window_closed(
        "lab",
        &crate::observe::canary::window::Window {
            partition: 1,
            broker: Some(2),
            start: t(0),
            end: t(12),
            failed_writes: 4,
        },
    );
    s
}

fn remediation() -> crate::alert::remediate::Record {
    crate::alert::remediate::Record {
        cluster: "lab".into(),
        broker: 4,
        address: "127.0.0.14:9092".into(),
        outcome: crate::alert::remediate::Outcome::Refused,
        at: t(4),
        zombie_for_secs: 300,
        command: vec!["systemctl".into(), "restart".into(), "kafka".into()],
        refusals: vec!["the daily limit (1) is reached".into()],
        status: None,
        stderr_tail: None,
        before_output: None,
        before_status: None,
        verdict_evidence: vec!["no_answer: golden".into()],
    }
}

fn extras(stats: &CanaryStats) -> Extras<'_> {
    let far = UNIX_EPOCH + Duration::from_secs(4_102_444_800); // 2100
    let mut silenced = incident("lab", Some(4), FindingKind::Broker, Severity::Critical);
    silenced.silenced = Some(crate::model::silence::SilenceMark {
        id: "s-lab".into(),
        ends_at: far,
        comment: "golden".into(),
    });
    // The frozen active controller of the lab's quorum look, its incident open.
    let mut controller = incident("lab", None, FindingKind::Controller, Severity::Critical);
    controller.subject = Subject::Controller(0);
    controller.state = Some(BrokerState::Zombie);
    Extras {
        cluster_label: String::new(),
        cluster_labels: [(
            "orders".to_string(),
            [("env", "prod"), ("team", "payments")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )]
        .into_iter()
        .collect(),
        instance_id: "watchdog-eu-1".into(),
        clusters: vec!["lab".into(), "orders".into(), "idle".into()],
        canary_stats: Some(stats),
        incidents: vec![
            silenced,
            controller,
            incident("lab", None, FindingKind::UnderReplicated, Severity::Warning),
            incident(
                "lab",
                None,
                FindingKind::OfflinePartitions,
                Severity::Critical,
            ),
            incident(
                "orders",
                None,
                FindingKind::ClusterUnreachable,
                Severity::Critical,
            ),
        ],
        webhooks: Some(NotifierStats {
            receivers: vec![
                ReceiverStats {
                    receiver: "pager".into(),
                    format: "generic",
                    target: "https://pager.example:443".into(),
                    ok: 5,
                    failed: 2,
                    dropped: 1,
                    unspooled: 1,
                    queue_depth: 3,
                    last_success: Some(t(5)),
                    last_failure: Some("HTTP 503".into()),
                    held: 2,
                    merged: 7,
                    superseded: 1,
                    left_to_peers: 4,
                    alertmanagers: Vec::new(),
                },
                ReceiverStats {
                    receiver: "am".into(),
                    format: "alertmanager",
                    target: "http://am-0.example:9093".into(),
                    ok: 9,
                    alertmanagers: vec![
                        crate::alert::notify::AlertmanagerStats {
                            target: "http://am-0.example:9093".into(),
                            ok: 9,
                            failed: 0,
                        },
                        crate::alert::notify::AlertmanagerStats {
                            target: "http://am-1.example:9093".into(),
                            ok: 6,
                            failed: 3,
                        },
                    ],
                    ..ReceiverStats::default()
                },
                ReceiverStats {
                    receiver: "chat".into(),
                    format: "slack",
                    target: "https://chat.example:443".into(),
                    ..ReceiverStats::default()
                },
            ],
            unrouted_events: 0,
            open_incidents: 4,
            peers: Some(crate::alert::peers::PeersStats {
                peers: vec![("wd-2".into(), "http://wd-2:9644".into(), 0.4)],
                answering: 1,
                unreachable: vec!["http://wd-3:9644".into()],
                silences_refused: 1,
                answers_refused: vec![("unsigned", 2), ("bad_signature", 1), ("malformed", 0)],
            }),
        }),
        reload_success: Some(false),
        remediation_counts: vec![
            (
                ("lab".into(), 4, crate::alert::remediate::Outcome::Acted),
                1,
            ),
            (
                ("lab".into(), 4, crate::alert::remediate::Outcome::Refused),
                3,
            ),
            (
                ("lab".into(), 2, crate::alert::remediate::Outcome::DryRun),
                0,
            ),
        ],
        remediations: vec![remediation()],
        silences: vec![
            silence("s-lab", Some("lab"), t(0), far),
            silence("s-all", None, t(0), far),
            silence("s-old", Some("orders"), t(0), t(10)),
            silence(
                "s-later",
                Some("orders"),
                far,
                far + Duration::from_secs(60),
            ),
        ],
        task_restarts: vec![("liveness", "127.0.0.12:9092".into(), 1)],
        own_health: Some(own_health()),
        // Differ from run to run: the page is compared without them (`canonical`).
        process: Some(crate::observe::self_metrics::read(
            std::path::Path::new("/proc"),
            "self",
        )),
        credential_reloads: vec![
            ("secret", "applied", 2),
            ("secret", "failed", 0),
            ("certificates", "applied", 0),
            ("certificates", "failed", 1),
            ("certificate_and_key", "applied", 0),
            ("certificate_and_key", "failed", 0),
        ],
    }
}

/// The watchdog paused 30 s and just running again, its cgroup throttling it, a few of
/// its liveness segments sent again.
fn own_health() -> crate::serve::metrics::OwnHealth {
    use crate::model::own_health::{Episode, OwnHealthFacts, Sickness, Timer};
    let facts = OwnHealthFacts {
        last_tick: Some(t(100)),
        episodes: vec![
            Episode {
                kind: Sickness::Paused,
                started: t(68),
                ended: Some(t(98)),
                detail: "its 100 ms timer fired 30.0 s late: the process did not run meanwhile (stopped and continued, its VM paused, or starved)".into(),
            },
            Episode {
                kind: Sickness::CpuThrottled,
                started: t(90),
                ended: None,
                detail: "its CPU cgroup refused it CPU for 600 ms of 1000 ms".into(),
            },
        ],
        late: vec![
            (Timer::Tick, Duration::from_secs(30)),
            (Timer::Liveness, Duration::from_millis(420)),
            (Timer::Round, Duration::from_millis(35)),
        ],
        clock_jumps: 1,
        cpu_throttled: Duration::from_millis(4_200),
        segments_sent: 5_120,
        segments_retransmitted: 3,
    };
    crate::serve::metrics::OwnHealth::judged(facts, t(100))
}

fn page(stats: &CanaryStats) -> String {
    render([lab(), orders()].iter(), &extras(stats))
}

/// The page with each family's samples sorted, without the `process_*` families and with
/// the version replaced: what does not depend on the fixture left out.
fn canonical(text: &str) -> String {
    let mut out = String::new();
    let mut samples: Vec<&str> = Vec::new();
    let mut own_process = false;
    let flush = |out: &mut String, samples: &mut Vec<&str>| {
        samples.sort_unstable();
        for s in samples.drain(..) {
            out.push_str(s);
            out.push('\n');
        }
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            flush(&mut out, &mut samples);
            own_process = rest.starts_with("process_");
        }
        if own_process {
            continue;
        }
        if line.starts_with('#') {
            flush(&mut out, &mut samples);
            out.push_str(line);
            out.push('\n');
        } else {
            samples.push(line);
        }
    }
    flush(&mut out, &mut samples);
    out.replace(
        &format!("version=\"{}\"", env!("CARGO_PKG_VERSION")),
        "version=\"VERSION\"",
    )
}

fn check(name: &str, got: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    if got != want {
        let first = got
            .lines()
            .zip(want.lines())
            .position(|(g, w)| g != w)
            .unwrap_or(got.lines().count().min(want.lines().count()));
        panic!(
            "{name} differs from the golden file at line {}:\n  got:  {:?}\n  want: {:?}",
            first + 1,
            got.lines().nth(first),
            want.lines().nth(first)
        );
    }
}

#[test]
fn metrics_page_matches_the_golden_files() {
    let stats = canary_stats();
    let om = page(&stats);
    assert!(om.ends_with("# EOF\n"));
    check("metrics.openmetrics.txt", &canonical(&om));
    check("metrics.text004.txt", &canonical(&to_text_004(&om)));
}

/// `/status` of the same fixture: the document the snapshot behind the HTTP server must
/// keep giving.
#[test]
fn status_document_matches_the_golden_file() {
    let stats = canary_stats();
    let doc = crate::serve::status::render("wd-golden", [lab(), orders()].iter(), &extras(&stats));
    let doc = doc.replace(
        &format!("\"version\": \"{}\"", env!("CARGO_PKG_VERSION")),
        "\"version\": \"VERSION\"",
    );
    check("status.json", &doc);
    if let Err(key) = no_duplicate_keys(&doc) {
        panic!("/status has the key {key:?} twice in one object (a flattened struct and its wrapper both wrote it): JSON readers keep one of the two at random");
    }
}

/// Whether any object of the JSON text `doc` names a key twice; `Err(the key)` when one
/// does. serde_json keeps the last silently, so this reads the text itself.
fn no_duplicate_keys(doc: &str) -> Result<(), String> {
    use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
    struct Checked;
    struct Check;
    impl<'de> Visitor<'de> for Check {
        type Value = Checked;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
            let mut seen = std::collections::BTreeSet::new();
            while let Some(key) = map.next_key::<String>()? {
                if !seen.insert(key.clone()) {
                    return Err(serde::de::Error::custom(key));
                }
                map.next_value::<Checked>()?;
            }
            Ok(Checked)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
            while seq.next_element::<Checked>()?.is_some() {}
            Ok(Checked)
        }
        fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_unit<E>(self) -> Result<Checked, E> {
            Ok(Checked)
        }
    }
    impl<'de> Deserialize<'de> for Checked {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Checked, D::Error> {
            d.deserialize_any(Check)
        }
    }
    serde_json::from_str::<Checked>(doc)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn a_key_written_twice_is_found() {
    assert!(no_duplicate_keys(r#"{"a": [{"b": 1, "c": {"d": null}}], "e": "x"}"#).is_ok());
    let e = no_duplicate_keys(r#"{"a": [{"b": 1, "b": 2}]}"#).unwrap_err();
    assert!(e.starts_with('b'), "{e}");
}

/// Two renders of one input give one page once sorted: the comparison above does not
/// depend on the order the library happens to write series in.
#[test]
fn the_canonical_page_is_stable() {
    let stats = canary_stats();
    assert_eq!(canonical(&page(&stats)), canonical(&page(&stats)));
}

/// One family of the page, as docs/metrics.md lists it.
struct Family {
    name: String,
    kind: String,
    help: String,
    labels: Vec<String>,
}

/// The label names of a sample line (`name{a="x",b="y"} 1`), values skipped with their
/// escapes, so a comma or a brace inside a value does not split it.
fn label_names(sample: &str) -> Vec<String> {
    let Some(open) = sample.find('{') else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let mut chars = sample[open + 1..].chars();
    let mut name = String::new();
    while let Some(c) = chars.next() {
        match c {
            '=' => {
                names.push(std::mem::take(&mut name));
                // The quoted value: up to the first quote not escaped.
                chars.next();
                let mut escaped = false;
                for v in chars.by_ref() {
                    match (escaped, v) {
                        (false, '\\') => escaped = true,
                        (false, '"') => break,
                        _ => escaped = false,
                    }
                }
            }
            ',' => {}
            '}' => break,
            c => name.push(c),
        }
    }
    names
}

/// The families of an OpenMetrics page in page order, with the label names their samples
/// carry (`le` of histogram buckets left out).
fn families(page: &str) -> Vec<Family> {
    let mut out: Vec<Family> = Vec::new();
    for line in page.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            out.push(Family {
                name: name.to_string(),
                kind: String::new(),
                help: help.to_string(),
                labels: Vec::new(),
            });
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let (Some(f), Some((_, kind))) = (out.last_mut(), rest.split_once(' ')) {
                f.kind = kind.to_string();
            }
        } else if !line.starts_with('#') {
            if let Some(f) = out.last_mut() {
                for l in label_names(line) {
                    if l != "le" && !f.labels.contains(&l) {
                        f.labels.push(l);
                    }
                }
            }
        }
    }
    out
}

/// The sections of docs/metrics.md, in order, and which names (after `kafka_watchdog_`)
/// each takes: the first section whose prefix fits, so `broker_certificate` lands under
/// certificates before `broker` takes it. A family no prefix fits goes to the last, "Other".
const SECTIONS: &[(&str, &[&str])] = &[
    (
        "The watchdog and its rounds",
        &[
            "build_info",
            "cluster_labels",
            "cluster_reachable",
            "rounds",
            "early_rounds",
            "round_",
            "last_successful_round",
            "bootstrap_failures",
            "brokers_unwatched",
            "config_reload",
            "task_restarts",
            "credential_reloads",
        ],
    ),
    (
        "Certificates",
        &["broker_certificate", "cluster_certificate"],
    ),
    ("Brokers", &["broker"]),
    (
        "Partitions",
        &["partitions", "split_brain", "unclean_elections"],
    ),
    ("The canary", &["canary_", "partition_"]),
    ("The control plane (KRaft)", &["quorum_", "controller_"]),
    ("Coordinators", &["group_coordinator_", "txn_coordinator_"]),
    ("Host mode", &["host_"]),
    (
        "Incidents, silences and remediation",
        &["incidents_", "silences_", "remediations"],
    ),
    ("Webhooks and peers", &["webhook_", "peer"]),
    ("The watchdog's own health", &["self_"]),
];

/// docs/metrics.md from the golden fixture's page and the standard process figures, all
/// present.
fn metrics_reference() -> String {
    let mut own = prometheus_client::registry::Registry::default();
    crate::observe::self_metrics::encode(
        &mut own,
        &crate::observe::self_metrics::ProcessFigures {
            cpu_seconds: Some(1.0),
            resident_memory_bytes: Some(1.0),
            virtual_memory_bytes: Some(1.0),
            open_fds: Some(1.0),
            max_fds: Some(1.0),
            start_time_seconds: Some(1.0),
        },
    );
    let mut process = String::new();
    prometheus_client::encoding::text::encode_registry(&mut process, &own).unwrap();
    let stats = canary_stats();
    let mut all = families(&canonical(&page(&stats)));
    all.extend(families(&process));

    let mut sections: Vec<(&str, Vec<&Family>)> = SECTIONS
        .iter()
        .map(|(title, _)| (*title, Vec::new()))
        .collect();
    sections.push(("Other", Vec::new()));
    sections.push(("The watchdog's own process", Vec::new()));
    let own_process = sections.len() - 1;
    for f in &all {
        let i = match f.name.strip_prefix("kafka_watchdog_") {
            None => own_process,
            Some(short) => SECTIONS
                .iter()
                .position(|(_, prefixes)| prefixes.iter().any(|p| short.starts_with(p)))
                .unwrap_or(own_process - 1),
        };
        sections[i].1.push(f);
    }

    let mut out = String::from(
        "# Metrics reference\n\n\
         <!-- Generated from the metrics page of src/serve/metrics_golden.rs, which fills every \
         family: `KW_DOCS_WRITE=1 cargo test --lib metrics_golden` rewrites it; do not edit. -->\n\n\
         `/metrics` ([http.md](http.md)) serves these families. All names start with \
         `kafka_watchdog_` but the watchdog's own `process_*`, which carry the names every \
         Prometheus client library uses. Labels are bounded (`cluster`, `broker`, `state`, \
         `request`, `kind`, ...), never an error message. A counter's samples end in \
         `_total`; a histogram's are `_bucket`, `_sum` and `_count`. The process figures are \
         read from `/proc/self` at each scrape; one whose file cannot be read is left out (all \
         of them when the read takes over a second), and `process_max_fds` is absent when the \
         limit is unlimited. The Prometheus alert rules \
         built on these are in [alerts.md](alerts.md).\n",
    );
    for (title, fs) in sections.iter().filter(|(_, fs)| !fs.is_empty()) {
        out.push_str(&format!(
            "\n## {title}\n\n| metric | type | labels | meaning |\n|---|---|---|---|\n"
        ));
        for f in fs {
            let name = if f.kind == "counter" && !f.name.ends_with("_total") {
                format!("{}_total", f.name)
            } else {
                f.name.clone()
            };
            let labels = if f.name == "kafka_watchdog_cluster_labels" {
                "cluster, and the cluster's own (`clusters[].labels`)".to_string()
            } else if f.labels.is_empty() {
                "-".to_string()
            } else {
                f.labels.join(", ")
            };
            out.push_str(&format!(
                "| `{name}` | {} | {labels} | {} |\n",
                f.kind,
                f.help.replace('|', "\\|")
            ));
        }
    }
    out
}

#[test]
fn the_committed_metrics_reference_is_current() {
    crate::model::generated::assert_current(
        "docs/metrics.md",
        &metrics_reference(),
        "KW_DOCS_WRITE=1 cargo test --lib metrics_golden",
        &[],
    );
}

#[test]
fn label_names_skip_values_with_commas_braces_and_escaped_quotes() {
    assert_eq!(
        label_names(r#"x{a="1,2",b="}",c="say \"hi\", then"} 1"#),
        ["a", "b", "c"]
    );
    assert!(label_names("x 1").is_empty());
}
