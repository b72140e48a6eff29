//! A round's report made findings: kinds, subjects, severities in an operator's words; the alert rules and runbooks agree with them.

use super::*;
use crate::judge::finding::ROTATION_GRACE;

#[test]
fn a_healthy_round_finds_nothing() {
    let mut r = report("lab");
    r.verdicts = vec![
        verdict(1, BrokerState::Healthy, &[]),
        verdict(2, BrokerState::Healthy, &[]),
    ];
    assert!(findings(&r, Vec::new()).is_empty());
}

/// A clean restart's broker and the replicas it is missing while it is away are held for the
/// restart grace; an offline partition is not (writes fail, restart or not), nor are
/// replicas missing on a broker that is not held.
#[test]
fn a_clean_stop_holds_its_broker_and_its_under_replication_but_not_offline_partitions() {
    let hold = Some(Duration::from_secs(120));
    let mut r = report("lab");
    let mut stopped = verdict(
        2,
        BrokerState::Down,
        &[(
            crate::judge::verdict::Rule::ShutDownCleanly.name(),
            BrokerState::Down,
            "refused",
        )],
    );
    stopped.page_after = hold;
    r.verdicts = vec![verdict(1, BrokerState::Healthy, &[]), stopped];
    let under = problem(
        "t",
        0,
        &[Condition::UnderReplicated],
        1,
        &[1, 2],
        &[1],
        Some(1),
    );
    let offline = problem("u", 0, &[Condition::Offline], -1, &[2], &[], Some(1));
    let fs = findings(
        &with_problems(r.clone(), vec![under.clone(), offline]),
        Vec::new(),
    );
    let hold_of = |k: FindingKind| fs.iter().find(|f| f.key.kind == k).map(|f| f.hold_for);
    assert_eq!(hold_of(FindingKind::Broker), Some(hold));
    assert_eq!(hold_of(FindingKind::UnderReplicated), Some(hold));
    assert_eq!(hold_of(FindingKind::OfflinePartitions), Some(None));
    // Broker 3 is missing too, and nothing holds it.
    let both = problem(
        "t",
        1,
        &[Condition::UnderReplicated],
        1,
        &[1, 2, 3],
        &[1],
        Some(1),
    );
    let fs = findings(&with_problems(r, vec![under, both]), Vec::new());
    let f = fs
        .iter()
        .find(|f| f.key.kind == FindingKind::UnderReplicated)
        .unwrap();
    assert_eq!(f.hold_for, None);
}

#[test]
fn a_zombie_is_a_critical_broker_finding_in_an_operators_words() {
    let mut r = report("lab");
    r.verdicts = vec![verdict(1, BrokerState::Healthy, &[]), zombie_verdict(2)];
    let fs = findings(&r, Vec::new());
    assert_eq!(kinds(&fs), vec![(FindingKind::Broker, Subject::Broker(2))]);
    let f = &fs[0];
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.state, Some(BrokerState::Zombie));
    assert_eq!(
        f.summary,
        "broker 2 (127.0.0.12:9092) is a zombie: TCP connect succeeded in 1 ms but api_versions failed: timeout after 2.0 s (no answer)"
    );
    assert_eq!(f.evidence.len(), 1);
    assert!(f.evidence[0].starts_with("no_answer: TCP connect to 127.0.0.12:9092"));
    assert_eq!(f.rules, vec!["no_answer".to_string()]);
    assert_eq!(f.suspects, vec![2]);
    assert_eq!(f.broker_address.as_deref(), Some("127.0.0.12:9092"));
    assert_eq!(f.key.dedup_key(), "kafka-watchdog/lab/broker-2/broker");
}

#[test]
fn several_rule_hits_are_all_evidence_and_the_summary_counts_the_rest() {
    let mut r = report("lab");
    r.verdicts = vec![verdict(
        3,
        BrokerState::Zombie,
        &[
            (
                "stale_leader",
                BrokerState::Zombie,
                "still claims leadership of 1 partition(s)",
            ),
            (
                "metadata_disagreement",
                BrokerState::Degraded,
                "its metadata names\na different leader",
            ),
        ],
    )];
    let f = &findings(&r, Vec::new())[0];
    assert!(f.summary.ends_with("(+1 more finding)"), "{}", f.summary);
    assert_eq!(
        f.evidence[1],
        "metadata_disagreement: its metadata names a different leader"
    );
    assert_eq!(
        f.rules,
        vec![
            "metadata_disagreement".to_string(),
            "stale_leader".to_string()
        ]
    );
}

#[test]
fn broker_severity_follows_the_state() {
    for (state, sev) in [
        (BrokerState::Zombie, Severity::Critical),
        (BrokerState::Down, Severity::Critical),
        (BrokerState::Degraded, Severity::Warning),
        (BrokerState::Unknown, Severity::Warning),
    ] {
        let mut r = report("lab");
        r.verdicts = vec![verdict(1, state, &[("zookeeper_controller", state, "y")])];
        let fs = findings(&r, Vec::new());
        assert_eq!(fs[0].severity, sev, "{state:?}");
        assert_eq!(fs[0].state, Some(state));
    }
}

#[test]
fn every_kind_has_its_severity() {
    use FindingKind::*;
    let expected = [
        (OfflinePartitions, Severity::Critical),
        (UnderMinIsr, Severity::Critical),
        (SplitBrain, Severity::Critical),
        (AcknowledgedLoss, Severity::Critical),
        (Acks1Loss, Severity::Warning),
        (ClusterUnreachable, Severity::Critical),
        (UnderReplicated, Severity::Warning),
        (CanaryUnavailable, Severity::Warning),
        (WatchdogAccess, Severity::Warning),
        (Quorum, Severity::Critical),
    ];
    for (kind, sev) in expected {
        assert_eq!(kind.severity(None), sev, "{kind}");
    }
    let names: BTreeSet<&str> = FindingKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(names.len(), FindingKind::ALL.len());
    let alerts: BTreeSet<&str> = FindingKind::ALL
        .iter()
        .map(|k| k.legacy_alert_name())
        .collect();
    assert_eq!(alerts.len(), FindingKind::ALL.len());
    assert!(alerts.iter().all(|a| a.starts_with("KafkaWatchdog")));
}

/// One severity per fault, everywhere (issue 28 item 2): each alert rule that stands for an
/// incident kind (and a broker or controller state) carries the severity that kind's
/// webhooks carry. A crash was `warning` in webhooks and `critical` in `KafkaBrokerDown`.
#[test]
fn the_alert_rules_say_the_severity_the_webhooks_say() {
    use FindingKind::*;
    let text = include_str!("../../../../dashboards/alerts.yaml");
    let doc: serde_norway::Value = serde_norway::from_str(text).expect("alerts.yaml parses");
    let mut rules = BTreeMap::new();
    for group in doc["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            let name = rule["alert"].as_str().expect("alert").to_string();
            let severity = rule["labels"]["severity"].as_str().expect("severity");
            rules.insert(name, severity.to_string());
        }
    }
    let node = |kind: FindingKind, state| kind.severity(Some(state));
    let same_fault = [
        ("KafkaBrokerZombie", node(Broker, BrokerState::Zombie)),
        ("KafkaBrokerDown", node(Broker, BrokerState::Down)),
        ("KafkaBrokerProcessDown", node(Broker, BrokerState::Down)),
        (
            "KafkaControllerZombie",
            node(Controller, BrokerState::Zombie),
        ),
        ("KafkaControllerDown", node(Controller, BrokerState::Down)),
        ("KafkaQuorumUnavailable", Quorum.severity(None)),
        ("KafkaSplitBrain", SplitBrain.severity(None)),
        ("KafkaOfflinePartitions", OfflinePartitions.severity(None)),
        ("KafkaUnderMinIsrPartitions", UnderMinIsr.severity(None)),
        (
            "KafkaAcknowledgedWriteLoss",
            AcknowledgedLoss.severity(None),
        ),
        ("KafkaWatchdogAcks1Loss", Acks1Loss.severity(None)),
        (
            "KafkaWatchdogCanaryUnavailable",
            CanaryUnavailable.severity(None),
        ),
        (
            "KafkaWatchdogClusterUnreachable",
            ClusterUnreachable.severity(None),
        ),
        ("KafkaBrokerDegraded", node(Broker, BrokerState::Degraded)),
        (
            "KafkaWatchdogUnderReplicated",
            UnderReplicated.severity(None),
        ),
        (
            "KafkaWatchdogUncleanElection",
            UncleanElection.severity(None),
        ),
        ("KafkaWatchdogAccess", WatchdogAccess.severity(None)),
    ];
    // One alertname, two rules: the certificate's incident is warning weeks ahead and
    // critical days ahead, as the webhooks say.
    let certificate: Vec<&str> = doc["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap())
        .filter(|r| r["alert"].as_str() == Some("KafkaWatchdogCertificate"))
        .filter_map(|r| r["labels"]["severity"].as_str())
        .collect();
    assert_eq!(certificate, vec!["warning", "critical"]);
    for (alert, severity) in same_fault {
        assert_eq!(
            rules.get(alert).map(String::as_str),
            Some(severity.as_str()),
            "{alert}: the rule's severity against the webhooks'"
        );
    }
}

/// Every alert rule links to its runbook (issue 28 item 3) at the `## <alertname>` heading
/// of docs/runbooks.md (GitHub's anchor, and /runbooks' id, of a heading of letters and
/// digits is the heading in lower case), and every `##` heading of docs/runbooks.md names
/// an alert some rule has, so a renamed or removed rule leaves no runbook behind. The
/// runbooks' own links to sections must land on one, too.
///
/// Issue 39: the links led to a repository that does not exist. They now lead to the
/// /runbooks page of the watchdog whose series fired the alert (its `instance` label), or,
/// for the alerts that have no instance because a watchdog is gone, of any watchdog still
/// scraped. scripts/release and the chart replace everything before the `#` with a base
/// URL of one's own (docs/alerts.md), matching the line as `runbook_url_line` does here.
#[test]
fn every_alert_rule_has_a_runbook_section() {
    const OF_THE_INSTANCE: &str = "http://{{ $labels.instance }}/runbooks#";
    const OF_ANY_WATCHDOG: &str = "{{ with query \"kafka_watchdog_build_info\" }}http://{{ . | sortByLabel \"instance\" | first | label \"instance\" }}{{ end }}/runbooks#";
    const WITHOUT_INSTANCE: [&str; 2] = ["KafkaWatchdogDown", "KafkaWatchdogInstanceDown"];
    let text = include_str!("../../../../dashboards/alerts.yaml");
    let doc: serde_norway::Value = serde_norway::from_str(text).expect("alerts.yaml parses");
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("runbook_url:"))
        .collect();
    for line in &lines {
        assert!(
            runbook_url_line(line),
            "not in the form the substitution expects: {line}"
        );
    }
    let runbooks = include_str!("../../../../docs/runbooks.md");
    let headings: Vec<&str> = runbooks
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(str::trim)
        .collect();
    let sections: BTreeSet<&str> = headings.iter().copied().collect();
    assert_eq!(sections.len(), headings.len(), "a runbook section twice");
    for section in &sections {
        assert!(
            section.chars().all(|c| c.is_ascii_alphanumeric()),
            "docs/runbooks.md: `## {section}`: a section heading is an alert name and nothing else"
        );
    }
    let mut alerts = BTreeSet::new();
    let mut count = 0;
    for group in doc["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            let alert = rule["alert"].as_str().expect("alert");
            let url = rule["annotations"]["runbook_url"]
                .as_str()
                .unwrap_or_else(|| panic!("{alert}: no runbook_url annotation"));
            let base = if WITHOUT_INSTANCE.contains(&alert) {
                OF_ANY_WATCHDOG
            } else {
                OF_THE_INSTANCE
            };
            assert_eq!(
                url,
                format!("{base}{}", alert.to_lowercase()),
                "{alert}: runbook_url"
            );
            assert!(
                sections.contains(alert),
                "{alert}: docs/runbooks.md has no `## {alert}` section"
            );
            alerts.insert(alert);
            count += 1;
        }
    }
    assert_eq!(lines.len(), count, "one runbook_url line per rule");
    for section in &sections {
        assert!(
            alerts.contains(section),
            "docs/runbooks.md: `## {section}` names no alert rule of dashboards/alerts.yaml"
        );
    }
    let anchors: BTreeSet<String> = sections.iter().map(|s| s.to_lowercase()).collect();
    for link in runbooks.split("](#").skip(1) {
        let anchor = link.split(')').next().unwrap_or_default();
        assert!(
            anchors.contains(anchor),
            "docs/runbooks.md: a link to #{anchor}, which no section has"
        );
    }
}

/// A `runbook_url:` line as scripts/release (sed) and the chart (regexReplaceAll) find it:
/// `runbook_url: ` then a quoted URL on one line that ends in `#<anchor>`.
fn runbook_url_line(line: &str) -> bool {
    let re = regex::Regex::new(r#"^\s*runbook_url: (["']).*#[a-z0-9]+(["'])$"#).unwrap();
    re.captures(line).is_some_and(|c| c[1] == c[2])
}

#[test]
fn incident_one_raises_an_offline_and_an_under_replicated_finding() {
    use Condition::*;
    let r = with_problems(
        report("lab"),
        vec![
            problem("t", 0, &[UnderReplicated], 110, &[110, 50], &[110], Some(1)),
            problem(
                "t",
                1,
                &[Offline, UnderMinIsr, UnderReplicated],
                -1,
                &[50, 82],
                &[],
                Some(1),
            ),
        ],
    );
    let fs = findings(&r, Vec::new());
    assert_eq!(
        kinds(&fs),
        vec![
            (FindingKind::OfflinePartitions, Subject::Cluster),
            (FindingKind::UnderReplicated, Subject::Cluster)
        ]
    );
    let offline = &fs[0];
    assert_eq!(offline.severity, Severity::Critical);
    assert_eq!(offline.affected_partitions, vec!["t-1".to_string()]);
    assert_eq!(offline.suspects, vec![50, 82]);
    assert!(
        offline.summary.starts_with("1 partition offline"),
        "{}",
        offline.summary
    );
    assert_eq!(
        offline.evidence,
        vec!["t-1: no leader, replicas [50, 82], ISR [], min.insync.replicas 1"]
    );
    let under = &fs[1];
    assert_eq!(under.severity, Severity::Warning);
    assert_eq!(under.affected_partitions, vec!["t-0".to_string()]);
    assert_eq!(under.suspects, vec![50]);
}

#[test]
fn incident_two_is_one_under_min_isr_finding_naming_the_follower() {
    use Condition::*;
    let problems = (0..25)
        .map(|p| {
            problem(
                "test",
                p,
                &[UnderMinIsr, UnderReplicated],
                192,
                &[192, 193],
                &[192],
                Some(2),
            )
        })
        .collect();
    let r = with_problems(report("lab"), problems);
    let fs = findings(&r, Vec::new());
    assert_eq!(
        kinds(&fs),
        vec![(FindingKind::UnderMinIsr, Subject::Cluster)]
    );
    let f = &fs[0];
    assert_eq!(f.affected_partitions_total, 25);
    assert_eq!(f.suspects, vec![193]);
    assert!(f.summary.contains("acks=all writes fail"), "{}", f.summary);
    assert!(f.summary.contains("and 20 more"), "{}", f.summary);
    assert_eq!(f.evidence.len(), 21, "20 lines and a count");
    assert_eq!(f.evidence[20], "... and 5 more partitions");
}

#[test]
fn affected_partitions_are_capped_with_the_total() {
    let problems = (0..250)
        .map(|p| {
            problem(
                "big",
                p,
                &[Condition::UnderReplicated],
                1,
                &[1, 2],
                &[1],
                None,
            )
        })
        .collect();
    let r = with_problems(report("lab"), problems);
    let f = &findings(&r, Vec::new())[0];
    assert_eq!(f.affected_partitions.len(), MAX_AFFECTED_PARTITIONS);
    assert_eq!(f.affected_partitions_total, 250);
    let mut sorted = f.affected_partitions.clone();
    sorted.sort();
    assert_eq!(sorted, f.affected_partitions);
}

#[test]
fn a_broker_finding_lists_the_partitions_it_is_suspected_for() {
    let mut r = with_problems(
        report("lab"),
        vec![
            problem(
                "t",
                0,
                &[Condition::UnderReplicated],
                1,
                &[1, 2],
                &[1],
                None,
            ),
            problem(
                "t",
                1,
                &[Condition::UnderReplicated],
                1,
                &[1, 3],
                &[1],
                None,
            ),
        ],
    );
    r.verdicts = vec![verdict(
        2,
        BrokerState::Degraded,
        &[("out_of_some_isrs", BrokerState::Degraded, "missing")],
    )];
    let fs = findings(&r, Vec::new());
    let b = fs
        .iter()
        .find(|f| f.key.kind == FindingKind::Broker)
        .unwrap();
    assert_eq!(b.affected_partitions, vec!["t-0".to_string()]);
}

#[test]
fn split_brain_names_the_claimants() {
    let mut r = report("lab");
    r.stale_leaders = vec![StaleLeader {
        topic: "orders".into(),
        partition: 0,
        broker: 3,
        claimed_epoch: 4,
        current_leader: 1,
        current_epoch: 5,
    }];
    let fs = findings(&r, Vec::new());
    assert_eq!(
        kinds(&fs),
        vec![(FindingKind::SplitBrain, Subject::Cluster)]
    );
    let f = &fs[0];
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.suspects, vec![3]);
    assert_eq!(f.affected_partitions, vec!["orders-0".to_string()]);
    assert_eq!(
        f.evidence,
        vec![
            "orders-0: broker 3 claims it at epoch 4, the newest answer names broker 1 at epoch 5"
        ]
    );
}

/// Broker 2 refused the watchdog's login; `also` are the other rules that fired on it.
fn refused_login_report(also: &[(&'static str, BrokerState, &str)]) -> ClusterReport {
    let mut r = report("lab");
    let endpoint = BrokerEndpoint {
        id: 2,
        host: "127.0.0.12".into(),
        port: 9092,
        rack: None,
    };
    r.probes.insert(
        2,
        BrokerProbe {
            endpoint,
            connect: Ok(Duration::from_millis(1)),
            api_versions: Some(Err(ProbeFailure {
                kind: FailureKind::Authentication,
                detail:
                    "authentication failed during sasl_authenticate: SASL_AUTHENTICATION_FAILED"
                        .into(),
                after: Duration::from_millis(30),
            })),
            metadata: None,
            description: None,
            certificate: None,
            log_dirs: None,
            speaks_quorum: None,
        },
    );
    let mut hits = vec![(
        "auth_failed",
        BrokerState::Unknown,
        "the watchdog cannot get in to 127.0.0.12:9092: api_versions failed: authentication (...)",
    )];
    hits.extend_from_slice(also);
    let state = hits.iter().map(|h| h.1).max().unwrap();
    r.verdicts.push(verdict(1, BrokerState::Healthy, &[]));
    r.verdicts.push(verdict(2, state, &hits));
    r
}

#[test]
fn a_request_refused_as_not_authorized_asks_for_rights_not_credentials() {
    let mut r = refused_login_report(&[]);
    let p = r.probes.get_mut(&2).unwrap();
    p.api_versions = Some(Ok(Duration::from_millis(1)));
    p.metadata = Some(Err(ProbeFailure {
        kind: FailureKind::Authorization,
        detail: "metadata: Kafka error 31 CLUSTER_AUTHORIZATION_FAILED".into(),
        after: Duration::from_millis(3),
    }));
    let fs = findings(&r, Vec::new());
    assert_eq!(
        kinds(&fs),
        vec![(FindingKind::WatchdogAccess, Subject::Broker(2))]
    );
    assert!(
        fs[0].summary.contains("not authorized") && fs[0].summary.contains("grant"),
        "{}",
        fs[0].summary
    );
    assert!(!fs[0].summary.contains("credentials"), "{}", fs[0].summary);
}

#[test]
fn a_refused_login_is_a_watchdog_access_incident_not_a_broker_one() {
    let fs = findings(&refused_login_report(&[]), Vec::new());
    assert_eq!(
        kinds(&fs),
        vec![(FindingKind::WatchdogAccess, Subject::Broker(2))]
    );
    let f = &fs[0];
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(
        f.key.dedup_key(),
        "kafka-watchdog/lab/broker-2/watchdog_access"
    );
    assert!(
        f.summary.starts_with("the watchdog cannot get in to broker 2 (127.0.0.12:9092), so it cannot judge it: api_versions failed: authentication"),
        "{}",
        f.summary
    );
    assert_eq!(f.rules, vec!["auth_failed"]);
    // What else is known about the broker stays a broker finding, worded by that rule.
    let fs = findings(
        &refused_login_report(&[(
            "out_of_some_isrs",
            BrokerState::Degraded,
            "missing from the ISR of 1 of the 3 partition(s) it replicates",
        )]),
        Vec::new(),
    );
    assert_eq!(
        kinds(&fs),
        vec![
            (FindingKind::WatchdogAccess, Subject::Broker(2)),
            (FindingKind::Broker, Subject::Broker(2))
        ]
    );
    assert!(
        fs[1].summary.contains("is degraded: missing from the ISR"),
        "{}",
        fs[1].summary
    );
}

#[test]
fn a_cluster_refusing_the_watchdogs_password_everywhere_says_so() {
    let mut r = unreachable_report("lab");
    for p in r.probes.values_mut() {
        p.connect = Ok(Duration::from_millis(1));
        p.api_versions = Some(Err(ProbeFailure {
            kind: FailureKind::Authentication,
            detail: "authentication failed during sasl_authenticate: SASL_AUTHENTICATION_FAILED"
                .into(),
            after: Duration::from_millis(20),
        }));
    }
    let fs = findings(&r, Vec::new());
    let f = fs
        .iter()
        .find(|f| f.key.kind == FindingKind::ClusterUnreachable)
        .unwrap();
    assert!(
        f.summary.contains("check the watchdog's access"),
        "{}",
        f.summary
    );
    assert!(!f.summary.contains("own network"), "{}", f.summary);
    // A timeout anywhere keeps the network in the picture.
    let f = &findings(&unreachable_report("lab"), Vec::new())[0];
    assert!(f.summary.contains("own network"), "{}", f.summary);
}

/// Issue 39 item 2: a rotated password reaches Kafka before the watchdog's file (Strimzi
/// changes the broker's credential, the kubelet updates the mounted Secret up to a minute
/// or so later), and the probes log in anew every round: a refused login pages only once it
/// has outlasted that. Before, the cluster was paged unreachable (critical) within seconds
/// of every rotation. What is not a refused login (a timeout, a missing right, an untrusted
/// certificate) is held no longer than before.
#[test]
fn a_refused_login_pages_only_once_it_has_outlasted_a_credential_rotation() {
    let refused = |kind: FailureKind| ProbeFailure {
        kind,
        detail: "refused".into(),
        after: Duration::from_millis(20),
    };
    let mut r = unreachable_report("lab");
    for p in r.probes.values_mut() {
        p.connect = Ok(Duration::from_millis(1));
        p.api_versions = Some(Err(refused(FailureKind::Authentication)));
    }
    let fs = findings(&r, Vec::new());
    let unreachable = fs
        .iter()
        .find(|f| f.key.kind == FindingKind::ClusterUnreachable)
        .unwrap();
    assert_eq!(unreachable.hold_for, Some(ROTATION_GRACE));
    let access = findings(&refused_login_report(&[]), Vec::new());
    assert_eq!(access[0].key.kind, FindingKind::WatchdogAccess);
    assert_eq!(access[0].hold_for, Some(ROTATION_GRACE));
    assert!(ROTATION_GRACE >= Duration::from_secs(90));

    // An untrusted certificate on one broker: not a login refused everywhere.
    let first = *r.probes.keys().next().unwrap();
    r.probes.get_mut(&first).unwrap().api_versions = Some(Err(refused(FailureKind::Tls)));
    let fs = findings(&r, Vec::new());
    assert_eq!(fs[0].key.kind, FindingKind::ClusterUnreachable);
    assert_eq!(fs[0].hold_for, None);
    let fs = findings(&unreachable_report("lab"), Vec::new());
    assert_eq!(fs[0].hold_for, None, "a timeout");
    let mut missing_right = refused_login_report(&[]);
    let p = missing_right.probes.get_mut(&2).unwrap();
    p.api_versions = Some(Ok(Duration::from_millis(1)));
    p.metadata = Some(Err(refused(FailureKind::Authorization)));
    assert_eq!(findings(&missing_right, Vec::new())[0].hold_for, None);
}

#[test]
fn an_unreachable_cluster_is_one_critical_finding_with_every_failure() {
    let r = unreachable_report("lab");
    let fs = findings(&r, Vec::new());
    assert_eq!(fs[0].key.kind, FindingKind::ClusterUnreachable);
    assert_eq!(fs[0].severity, Severity::Critical);
    assert!(
        fs[0].summary.contains("none of its 2 broker(s) answered"),
        "{}",
        fs[0].summary
    );
    assert!(
        fs[0]
            .summary
            .contains("last reached 2023-11-14T22:13:20.000Z"),
        "{}",
        fs[0].summary
    );
    assert_eq!(
        fs[0].evidence[0],
        "broker 1 (127.0.0.11:9092): connect failed: timeout after 2.0 s (connect timed out)"
    );
    // The unknown verdicts are findings too; the book holds them while unreachable.
    assert_eq!(
        fs.iter()
            .filter(|f| f.state == Some(BrokerState::Unknown))
            .count(),
        2
    );
}

#[test]
fn a_cluster_never_reached_names_its_bootstrap_servers() {
    let mut r = report("lab");
    r.reachable = false;
    r.last_success = None;
    r.bootstrap_failures = vec![("kafka:9092".into(), timeout())];
    let f = &findings(&r, Vec::new())[0];
    assert!(
        f.summary
            .contains("none of its 1 bootstrap server(s) answered"),
        "{}",
        f.summary
    );
    assert!(f.summary.contains("never reached"), "{}", f.summary);
    assert_eq!(
        f.evidence,
        vec!["bootstrap kafka:9092: connect failed: timeout after 2.0 s (connect timed out)"]
    );
}

#[test]
fn extra_findings_come_last() {
    let r = report("lab");
    let canary = Finding::new(
        FindingKey::new("lab", Subject::Cluster, FindingKind::AcknowledgedLoss),
        "3 acknowledged canary records are missing",
    )
    .with_partitions(vec![
        "__kw_canary-1".into(),
        "__kw_canary-0".into(),
        "__kw_canary-0".into(),
    ]);
    let fs = findings(&r, vec![canary]);
    assert_eq!(fs.len(), 1);
    assert_eq!(fs[0].severity, Severity::Critical);
    assert_eq!(
        fs[0].affected_partitions,
        vec!["__kw_canary-0".to_string(), "__kw_canary-1".to_string()]
    );
    assert_eq!(fs[0].affected_partitions_total, 2);
}

/// The only controller frozen: a critical controller finding naming it (its silence's start
/// carried, so it pages as soon as it has held), and a critical quorum finding naming it as
/// the controller at fault; nothing about any broker. The incident book opens both.
#[test]
fn a_frozen_controller_and_its_quorum_are_findings_of_their_own() {
    use crate::judge::quorum::{judge_quorum, QuorumMemory, QuorumSettings};
    use crate::model::round::{ControllerLook, QuorumObservation};
    let look = std::sync::Arc::new(QuorumObservation {
        at: t(11),
        controllers: vec![ControllerLook {
            address: "127.0.0.10:9093".into(),
            id: Some(0),
            outcome: Err(timeout()),
            accepted: true,
            failing_since: Some(t(10)),
            accepted_in_streak: true,
            ever_reached: true,
        }],
        via_broker: None,
        description: None,
        last_leader: Some((0, 3, t(10))),
        high_watermark_still_since: None,
        last_progress_at: Some(t(10)),
        metadata_changed_at: None,
        metadata_applied: None,
    });
    let mut r = report("lab");
    r.verdicts = vec![verdict(1, BrokerState::Healthy, &[])];
    r.quorum = Some(judge_quorum(
        &look,
        &mut QuorumMemory::default(),
        &QuorumSettings::default(),
        t(11),
    ));
    let fs = findings(&r, Vec::new());
    assert_eq!(
        kinds(&fs),
        [
            (FindingKind::Controller, Subject::Controller(0)),
            (FindingKind::Quorum, Subject::Cluster),
        ]
    );
    let c = &fs[0];
    assert_eq!(c.severity, Severity::Critical);
    assert_eq!(c.state, Some(BrokerState::Zombie));
    assert!(
        c.summary.starts_with(
            "controller 0 (127.0.0.10:9093) is zombie: accepts connections and answers nothing"
        ),
        "{}",
        c.summary
    );
    assert_eq!(c.holds_since, Some(t(10)));
    assert_eq!(c.observed_at, Some(t(11)));
    assert_eq!(
        c.key.dedup_key(),
        "kafka-watchdog/lab/controller-0/controller"
    );
    let q = &fs[1];
    assert_eq!(
        (q.severity, q.suspects.clone()),
        (Severity::Critical, vec![0])
    );
    assert!(
        q.summary
            .starts_with("the control plane is out (no leader)"),
        "{}",
        q.summary
    );
    assert_eq!(q.key.dedup_key(), "kafka-watchdog/lab/cluster/quorum");
    // Held since the silence began: the incident opens at this very look, one for the one
    // fault: the quorum it took down is the controller's impact (issue 31).
    let mut book = IncidentBook::new();
    let opened = book.observe(
        "lab",
        fs,
        Hysteresis {
            open_after: Duration::from_secs(1),
            resolve_after: Duration::from_secs(20),
            flap: Flap::default(),
        },
        t(11),
    );
    assert_eq!(event_kinds(&opened), [EventKind::Opened]);
    assert_eq!(opened[0].incident.kind, FindingKind::Controller);
    assert!(opened[0].incident.rules.contains(&"quorum".to_string()));
}

#[test]
fn a_certificate_near_its_expiry_is_a_finding_on_its_broker_graded_by_days_left() {
    use crate::judge::certificates::{judge_certificates, CertificateRules};
    use crate::model::round::PeerCertificate;
    let mut r = report("lab");
    let cert = |days: u64, issuer: &str| PeerCertificate {
        not_after: t(0) + Duration::from_secs(days * 86_400),
        subject: "broker".into(),
        issuer: issuer.into(),
        checked_name: "127.0.0.1x".into(),
    };
    let seen: BTreeMap<_, _> = [
        (
            1,
            (cert(300, "lab CA"), "127.0.0.11:9093".to_string(), t(0)),
        ),
        (2, (cert(1, "lab CA"), "127.0.0.12:9093".to_string(), t(0))),
        (3, (cert(10, "lab CA"), "127.0.0.13:9093".to_string(), t(0))),
    ]
    .into();
    let present: BTreeSet<i32> = [1, 2, 3].into();
    r.certificates = judge_certificates(&seen, &present, &CertificateRules::default(), t(0));
    let fs: Vec<Finding> = findings(&r, Vec::new())
        .into_iter()
        .filter(|f| f.key.kind == FindingKind::Certificate)
        .collect();
    assert_eq!(fs.len(), 2, "{fs:#?}");
    let by = |b: i32| {
        fs.iter()
            .find(|f| f.key.subject == Subject::Broker(b))
            .unwrap()
    };
    assert_eq!(by(2).severity, Severity::Critical);
    assert_eq!(by(2).rules, vec!["certificate_expiring_soon".to_string()]);
    assert!(
        by(2).summary.contains("expires in 1.0 days"),
        "{}",
        by(2).summary
    );
    assert_eq!(by(3).severity, Severity::Warning);
    assert_eq!(by(3).suspects, vec![3]);
    assert_eq!(
        by(3).key.dedup_key(),
        "kafka-watchdog/lab/broker-3/certificate"
    );
}

/// Issue 38 item 4: a broker held `unknown` by the watchdog's own sickness is nobody's
/// page; what else is known of it still is.
#[test]
fn a_broker_held_by_the_watchdogs_own_sickness_is_no_finding() {
    let held = (
        "watchdog_unwell",
        BrokerState::Unknown,
        "no_answer: ...; not held against the broker: the watchdog itself was unwell",
    );
    let mut r = report("lab");
    r.verdicts.push(verdict(2, BrokerState::Unknown, &[held]));
    assert!(findings(&r, Vec::new()).is_empty());
    let slow = ("slow", BrokerState::Degraded, "answers in 300 ms");
    r.verdicts[0] = verdict(2, BrokerState::Degraded, &[slow, held]);
    let fs = findings(&r, Vec::new());
    assert_eq!(kinds(&fs), vec![(FindingKind::Broker, Subject::Broker(2))]);
}
