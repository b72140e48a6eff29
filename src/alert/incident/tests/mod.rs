use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;
use crate::config::Severity;
use crate::judge::health::{Condition, PartitionProblem};
use crate::judge::report::ClusterReport;
use crate::judge::verdict::{BrokerState, BrokerVerdict, Registration, RuleHit};
use crate::model::round::{BrokerEndpoint, BrokerProbe, FailureKind, ProbeFailure};
use crate::observe::cluster_view::StaleLeader;

fn t(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

fn report(cluster: &str) -> ClusterReport {
    ClusterReport {
        round: 1,
        duration: Duration::from_millis(20),
        cluster_id: Some("id".into()),
        reachable: true,
        last_success: Some(t(0)),
        ..ClusterReport::empty(cluster, t(0))
    }
}

fn verdict(
    id: i32,
    state: BrokerState,
    hits: &[(&'static str, BrokerState, &str)],
) -> BrokerVerdict {
    BrokerVerdict {
        broker: id,
        address: format!("127.0.0.1{id}:9092"),
        state,
        registration: Registration::Registered,
        answered: state == BrokerState::Healthy,
        hits: hits
            .iter()
            .map(|(rule, state, detail)| RuleHit {
                rule: crate::judge::verdict::Rule::named(rule)
                    .unwrap_or_else(|| panic!("no rule {rule}")),
                state: *state,
                detail: detail.to_string(),
            })
            .collect(),
        observed_at: None,
        held_since: None,
        page_after: None,
    }
}

fn zombie_verdict(id: i32) -> BrokerVerdict {
    verdict(
        id,
        BrokerState::Zombie,
        &[(
            "no_answer",
            BrokerState::Zombie,
            &format!("TCP connect to 127.0.0.1{id}:9092 succeeded in 1 ms but api_versions failed: timeout after 2.0 s (no answer)"),
        )],
    )
}

fn problem(
    topic: &str,
    partition: i32,
    conditions: &[Condition],
    leader: i32,
    replicas: &[i32],
    isr: &[i32],
    min_isr: Option<i32>,
) -> PartitionProblem {
    let isr_set: BTreeSet<i32> = isr.iter().copied().collect();
    let suspects = if leader < 0 {
        replicas.to_vec()
    } else {
        replicas
            .iter()
            .copied()
            .filter(|r| !isr_set.contains(r))
            .collect()
    };
    PartitionProblem {
        topic: topic.into(),
        partition,
        conditions: conditions.to_vec(),
        leader,
        leader_epoch: 3,
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        min_isr,
        suspects,
        adding: Vec::new(),
    }
}

fn with_problems(mut r: ClusterReport, problems: Vec<PartitionProblem>) -> ClusterReport {
    for p in &problems {
        for c in &p.conditions {
            *r.health.counts.entry(*c).or_insert(0) += 1;
        }
    }
    r.health.problems = problems;
    r
}

fn kinds(fs: &[Finding]) -> Vec<(FindingKind, Subject)> {
    fs.iter().map(|f| (f.key.kind, f.key.subject)).collect()
}

fn unreachable_report(cluster: &str) -> ClusterReport {
    let mut r = report(cluster);
    r.reachable = false;
    for id in 1..=2 {
        r.probes.insert(
            id,
            BrokerProbe {
                endpoint: BrokerEndpoint {
                    id,
                    host: format!("127.0.0.1{id}"),
                    port: 9092,
                    rack: None,
                },
                connect: Err(timeout()),
                api_versions: None,
                metadata: None,
                description: None,
                certificate: None,
                log_dirs: None,
                speaks_quorum: None,
            },
        );
        r.verdicts.push(verdict(
            id,
            BrokerState::Unknown,
            &[(
                "cluster_invisible",
                BrokerState::Unknown,
                "no broker answered",
            )],
        ));
    }
    r
}

fn timeout() -> ProbeFailure {
    ProbeFailure {
        kind: FailureKind::Timeout,
        detail: "connect timed out".into(),
        after: Duration::from_secs(2),
    }
}

fn event_kinds(es: &[IncidentEvent]) -> Vec<EventKind> {
    es.iter().map(|e| e.kind).collect()
}

/// Round counts as the tests were written, with the rounds 10 s apart they use.
fn h(open: u32, resolve: u32) -> Hysteresis {
    Hysteresis::from_rounds(open, resolve, Duration::from_secs(10))
}

fn zombie(cluster: &str, id: i32) -> Finding {
    let mut r = report(cluster);
    r.verdicts = vec![zombie_verdict(id)];
    findings(&r, Vec::new()).remove(0)
}

mod book;
mod findings;
mod state_file;
