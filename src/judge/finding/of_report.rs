//! What is wrong this round, as findings. Each partition counts once, under its worst
//! condition (offline, then under min ISR, then under-replicated), so incident 2's
//! partitions raise one critical incident and not a second, weaker one beside it.

use std::collections::{BTreeMap, BTreeSet};

use crate::judge::certificates::{CertificatesReport, Urgency};
use crate::judge::health::{Condition, PartitionProblem};
use crate::judge::quorum::{ControllerState, QuorumReport};
use crate::judge::report::ClusterReport;
use crate::judge::verdict::{BrokerState, BrokerVerdict, Rule, ACCESS_RULES};
use crate::model::round::{BrokerId, FailureKind, ProbeFailure};

use super::{Finding, FindingKey, Subject};
use crate::model::kind::FindingKind;

/// How long a login the brokers refuse is held before it pages: a rotated password reaches
/// Kafka first and the watchdog's mounted file up to a minute or so later (the kubelet's
/// sync period), and the probes log in anew every round. The credential watcher takes the
/// new file in within 5 s of its change.
pub const ROTATION_GRACE: std::time::Duration = std::time::Duration::from_secs(120);

/// Partitions listed by name in one finding; the total is always given.
pub const MAX_AFFECTED_PARTITIONS: usize = 100;
/// Evidence lines of one partition finding; a line says how many were left out.
const MAX_EVIDENCE_LINES: usize = 20;
/// Partitions named in a one-line summary.
const SUMMARY_SAMPLE: usize = 5;

/// Every finding of one round of one cluster, then `extra` (what the canary found).
pub fn findings(report: &ClusterReport, extra: Vec<Finding>) -> Vec<Finding> {
    let mut out = Vec::new();
    if !report.reachable {
        out.push(unreachable(report));
    }
    if report.brokers_unwatched > 0 {
        out.push(unwatched(report));
    }
    for v in &report.verdicts {
        // The watchdog's own access problems are incidents of their own kind; the broker
        // incident stays for what else was found about it.
        if v.hits.iter().any(|h| ACCESS_RULES.contains(&h.rule)) {
            out.push(access(report, v));
        }
        // Nor is the watchdog's own sickness (`watchdog_unwell`) the broker's: its own
        // health is on /metrics and /status, and a broker held unknown by it pages nobody.
        let the_brokers = |h: &&crate::judge::verdict::RuleHit| {
            !ACCESS_RULES.contains(&h.rule) && h.rule != Rule::WatchdogUnwell
        };
        if v.state != BrokerState::Healthy && v.hits.iter().any(|h| the_brokers(&h)) {
            let mut f = broker(report, v);
            // A liveness fact is observed when evaluated and began when its silence did.
            f.observed_at = v.observed_at;
            f.holds_since = v.held_since;
            f.hold_for = v.page_after;
            out.push(f);
        }
    }
    let mut by_kind: BTreeMap<FindingKind, Vec<&PartitionProblem>> = BTreeMap::new();
    for p in &report.health.problems {
        let has = |c| p.conditions.contains(&c);
        let kind = if has(Condition::Offline) {
            FindingKind::OfflinePartitions
        } else if has(Condition::UnderMinIsr) {
            FindingKind::UnderMinIsr
        } else if has(Condition::UnderReplicated) {
            FindingKind::UnderReplicated
        } else {
            // Leader outside the ISR without a missing replica: the broker verdicts carry
            // it; there is no partition incident of its own.
            continue;
        };
        by_kind.entry(kind).or_default().push(p);
    }
    for (kind, problems) in by_kind {
        let mut f = partitions(&report.cluster, kind, &problems);
        // Replicas of a broker that shut down cleanly are missing while it restarts and
        // catches up: held like the broker. Offline and under-min-ISR partitions page as
        // always; those are writes failing, restart or not.
        if kind == FindingKind::UnderReplicated {
            f.hold_for = held_with(report, &f.suspects);
        }
        out.push(f);
    }
    if !report.stale_leaders.is_empty() {
        out.push(split_brain(report));
    }
    if let Some(q) = &report.quorum {
        out.extend(control_plane(report, q));
    }
    if let Some(c) = &report.certificates {
        out.extend(certificates(report, c));
    }
    out.extend(extra);
    out
}

/// A controller's state in the broker states' words, which incidents and webhooks carry:
/// a lagging voter is degraded.
fn as_broker_state(s: ControllerState) -> BrokerState {
    match s {
        ControllerState::Healthy => BrokerState::Healthy,
        ControllerState::Unknown => BrokerState::Unknown,
        ControllerState::Lagging => BrokerState::Degraded,
        ControllerState::Zombie => BrokerState::Zombie,
        ControllerState::Down => BrokerState::Down,
    }
}

/// The control plane's findings: one per controller that is lagging, a zombie or down
/// (one nobody can judge is on /status, not paged: the quorum's finding covers a quorum
/// nobody describes), and the quorum's problem. Both are observed when the look was made.
fn control_plane(report: &ClusterReport, q: &QuorumReport) -> Vec<Finding> {
    let mut out = Vec::new();
    for c in &q.controllers {
        if matches!(c.state, ControllerState::Healthy | ControllerState::Unknown) {
            continue;
        }
        let key = FindingKey::new(
            &report.cluster,
            Subject::Controller(c.controller),
            FindingKind::Controller,
        );
        let who = if c.address.is_empty() {
            format!("controller {}", c.controller)
        } else {
            format!("controller {} ({})", c.controller, c.address)
        };
        let first = c
            .hits
            .first()
            .map(|h| one_line(&h.detail))
            .unwrap_or_default();
        let role = if c.leader {
            " (the active controller)"
        } else {
            ""
        };
        let mut f = Finding::new(
            key,
            format!("{who}{role} is {}: {first}", c.state.as_label()),
        );
        let state = as_broker_state(c.state);
        f.severity = FindingKind::Controller.severity(Some(state));
        f.state = Some(state);
        f.broker_address = (!c.address.is_empty()).then(|| c.address.clone());
        f.evidence = c
            .hits
            .iter()
            .map(|h| format!("{}: {}", h.rule, one_line(&h.detail)))
            .collect();
        let mut rules: Vec<String> = c.hits.iter().map(|h| h.rule.to_string()).collect();
        rules.sort();
        rules.dedup();
        f.rules = rules;
        let mut lead: Vec<String> = c
            .hits
            .iter()
            .filter(|h| h.state == c.state)
            .map(|h| h.rule.to_string())
            .collect();
        lead.sort();
        lead.dedup();
        f.lead_rules = lead;
        f.suspects = vec![c.controller];
        f.observed_at = Some(q.observed_at);
        f.holds_since = c.held_since;
        f.hold_for = c.page_after;
        out.push(f);
    }
    if let Some(p) = &q.problem {
        let key = FindingKey::new(&report.cluster, Subject::Cluster, FindingKind::Quorum);
        let mut f = Finding::new(
            key,
            format!(
                "the control plane is out ({}): {}",
                p.kind.as_label().replace('_', " "),
                one_line(&p.detail)
            ),
        );
        f.evidence = vec![format!("{}: {}", p.kind.as_label(), one_line(&p.detail))];
        f.rules = vec![p.kind.as_label().to_string()];
        f.lead_rules = f.rules.clone();
        f.suspects = p.suspects.clone();
        f.observed_at = Some(q.observed_at);
        f.holds_since = Some(p.since);
        out.push(f);
    }
    out
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn state_phrase(state: BrokerState) -> &'static str {
    match state {
        BrokerState::Zombie => "is a zombie",
        BrokerState::Down => "is down",
        BrokerState::Degraded => "is degraded",
        BrokerState::Unknown => "cannot be judged",
        BrokerState::Healthy => "is healthy",
    }
}

fn tp(topic: &str, partition: i32) -> String {
    format!("{topic}-{partition}")
}

fn brokers_list(ids: &BTreeSet<BrokerId>) -> String {
    ids.iter()
        .map(|b| b.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn sample(names: &[String], total: usize) -> String {
    let shown: Vec<&str> = names
        .iter()
        .take(SUMMARY_SAMPLE)
        .map(String::as_str)
        .collect();
    let more = total.saturating_sub(shown.len());
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

fn broker(report: &ClusterReport, v: &BrokerVerdict) -> Finding {
    let key = FindingKey::new(
        &report.cluster,
        Subject::Broker(v.broker),
        FindingKind::Broker,
    );
    let who = if v.address.is_empty() {
        format!("broker {}", v.broker)
    } else {
        format!("broker {} ({})", v.broker, v.address)
    };
    let why = match v.hits.iter().find(|h| !ACCESS_RULES.contains(&h.rule)) {
        Some(h) => {
            // The address is already in the sentence's subject.
            let detail = if v.address.is_empty() {
                h.detail.clone()
            } else {
                h.detail
                    .replace(&format!(" to {}", v.address), "")
                    .replace(&format!(" at {}", v.address), "")
            };
            let more = match v.hits.len() - 1 {
                0 => String::new(),
                n => format!(" (+{n} more finding{})", if n == 1 { "" } else { "s" }),
            };
            format!(": {}{more}", one_line(&detail))
        }
        None => String::new(),
    };
    let mut rules: Vec<String> = v.hits.iter().map(|h| h.rule.to_string()).collect();
    rules.sort();
    rules.dedup();
    let touched: Vec<String> = report
        .health
        .problems
        .iter()
        .filter(|p| p.suspects.contains(&v.broker))
        .map(|p| tp(&p.topic, p.partition))
        .chain(
            report
                .stale_leaders
                .iter()
                .filter(|s| s.broker == v.broker)
                .map(|s| tp(&s.topic, s.partition)),
        )
        .collect();
    let mut f =
        Finding::new(key, format!("{who} {}{why}", state_phrase(v.state))).with_partitions(touched);
    f.severity = FindingKind::Broker.severity(Some(v.state));
    f.state = Some(v.state);
    f.broker_address = (!v.address.is_empty()).then(|| v.address.clone());
    f.evidence = v
        .hits
        .iter()
        .map(|h| format!("{}: {}", h.rule, one_line(&h.detail)))
        .collect();
    f.rules = rules;
    f.lead_rules = v
        .hits
        .iter()
        .filter(|h| h.state == v.state)
        .map(|h| h.rule.to_string())
        .collect();
    f.lead_rules.sort();
    f.lead_rules.dedup();
    f.suspects = vec![v.broker];
    f
}

/// "the watchdog cannot get in to broker 2 (...)": what to fix is on the watchdog's side
/// (or the broker's certificate), and nothing is said about the broker's health.
fn access(report: &ClusterReport, v: &BrokerVerdict) -> Finding {
    let key = FindingKey::new(
        &report.cluster,
        Subject::Broker(v.broker),
        FindingKind::WatchdogAccess,
    );
    let hits: Vec<_> = v
        .hits
        .iter()
        .filter(|h| ACCESS_RULES.contains(&h.rule))
        .collect();
    let who = if v.address.is_empty() {
        format!("broker {}", v.broker)
    } else {
        format!("broker {} ({})", v.broker, v.address)
    };
    let first = report.probes.get(&v.broker).and_then(|p| p.first_failure());
    let failed = first
        .map(|(step, e)| format!(": {}", failure(step, e)))
        .unwrap_or_default();
    let summary = if first.is_some_and(|(_, e)| e.kind == FailureKind::Authorization) {
        format!(
            "{who} refuses the watchdog's requests as not authorized, so the watchdog cannot judge it{failed}; grant the watchdog's principal the rights it needs (docs/install.md, least privilege)"
        )
    } else if hits.iter().any(|h| h.rule == Rule::AuthFailed) {
        format!(
            "the watchdog cannot get in to {who}, so it cannot judge it{failed}; check the watchdog's credentials and certificates, and the broker's certificate"
        )
    } else {
        format!(
            "the watchdog cannot understand {who}, so it cannot judge it{failed}; a compatibility problem between the watchdog and the broker's version"
        )
    };
    let mut f = Finding::new(key, summary);
    f.severity = FindingKind::WatchdogAccess.severity(None);
    if first.is_some_and(|(_, e)| e.kind == FailureKind::Authentication) {
        f.hold_for = Some(ROTATION_GRACE);
    }
    f.state = Some(BrokerState::Unknown);
    f.broker_address = (!v.address.is_empty()).then(|| v.address.clone());
    f.evidence = hits
        .iter()
        .map(|h| format!("{}: {}", h.rule, one_line(&h.detail)))
        .collect();
    f.rules = hits.iter().map(|h| h.rule.to_string()).collect();
    f.suspects = vec![v.broker];
    f
}

/// One finding per broker whose listener certificate is within `warning_days` of its
/// expiry (warning) or `critical_days` (critical); it is about the certificate, not the
/// broker's health.
fn certificates(report: &ClusterReport, c: &CertificatesReport) -> Vec<Finding> {
    let now = report.evaluated_at;
    c.brokers
        .iter()
        .filter(|b| b.urgency != Urgency::Fine)
        .map(|b| {
            let key = FindingKey::new(
                &report.cluster,
                Subject::Broker(b.broker),
                FindingKind::Certificate,
            );
            let cert = &b.certificate;
            let expired = cert.not_after <= now;
            let summary = format!(
                "broker {} ({}): its TLS certificate (CN={}, issued by {}) {} {}: {}",
                b.broker,
                b.address,
                cert.subject,
                cert.issuer,
                if expired { "expired" } else { "expires" },
                crate::judge::certificates::expiry_words(cert, now),
                if expired {
                    "new client connections to it fail; renew it and reload the listener's keystore"
                } else {
                    "from then on every new client connection to it fails; renew it and reload the listener's keystore"
                }
            );
            let mut f = Finding::new(key, summary);
            f.severity = match b.urgency {
                Urgency::ExpiringSoon => crate::config::Severity::Critical,
                _ => crate::config::Severity::Warning,
            };
            f.broker_address = Some(b.address.clone());
            let rule = match b.urgency {
                Urgency::ExpiringSoon => "certificate_expiring_soon",
                _ => "certificate_expiring",
            };
            f.evidence = vec![format!(
                "{rule}: not after {}, subject {}, issuer {}, checked against {}",
                crate::model::time::rfc3339(cert.not_after),
                cert.subject,
                cert.issuer,
                cert.checked_name
            )];
            f.rules = vec![rule.to_string()];
            f.lead_rules = f.rules.clone();
            f.suspects = vec![b.broker];
            f.observed_at = Some(b.seen_at);
            f
        })
        .collect()
}

fn ids(list: &[BrokerId]) -> String {
    format!(
        "[{}]",
        list.iter()
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn partition_line(p: &PartitionProblem) -> String {
    let leader = if p.leader < 0 {
        "no leader".to_string()
    } else {
        format!("leader {} (epoch {})", p.leader, p.leader_epoch)
    };
    let min = p
        .min_isr
        .map(|m| format!(", min.insync.replicas {m}"))
        .unwrap_or_default();
    format!(
        "{}: {leader}, replicas {}, ISR {}{min}",
        tp(&p.topic, p.partition),
        ids(&p.replicas),
        ids(&p.isr)
    )
}

/// The longest hold of `suspects`' verdicts, when every one of them is held.
fn held_with(report: &ClusterReport, suspects: &[BrokerId]) -> Option<std::time::Duration> {
    if suspects.is_empty() {
        return None;
    }
    suspects
        .iter()
        .map(|b| {
            report
                .verdicts
                .iter()
                .find(|v| v.broker == *b)
                .and_then(|v| v.page_after)
        })
        .try_fold(std::time::Duration::ZERO, |longest, hold| {
            hold.map(|h| longest.max(h))
        })
}

fn partitions(cluster: &str, kind: FindingKind, problems: &[&PartitionProblem]) -> Finding {
    let names: Vec<String> = problems.iter().map(|p| tp(&p.topic, p.partition)).collect();
    let suspects: BTreeSet<BrokerId> = problems
        .iter()
        .flat_map(|p| p.suspects.iter().copied())
        .filter(|b| *b >= 0)
        .collect();
    let n = problems.len();
    let plural = if n == 1 { "" } else { "s" };
    let mut sorted = names.clone();
    sorted.sort();
    let listed = sample(&sorted, n);
    let summary = match kind {
        FindingKind::OfflinePartitions => format!(
            "{n} partition{plural} offline (no leader, nothing can be written or read): {listed}; replicas on broker(s) {}",
            brokers_list(&suspects)
        ),
        FindingKind::UnderMinIsr => format!(
            "{n} partition{plural} under min.insync.replicas (acks=all writes fail): {listed}; missing from the ISR: broker(s) {}",
            brokers_list(&suspects)
        ),
        _ => format!(
            "{n} partition{plural} under-replicated: {listed}; missing from the ISR: broker(s) {}",
            brokers_list(&suspects)
        ),
    };
    let mut evidence: Vec<String> = problems
        .iter()
        .take(MAX_EVIDENCE_LINES)
        .map(|p| partition_line(p))
        .collect();
    if n > MAX_EVIDENCE_LINES {
        evidence.push(format!(
            "... and {} more partitions",
            n - MAX_EVIDENCE_LINES
        ));
    }
    let mut f = Finding::new(FindingKey::new(cluster, Subject::Cluster, kind), summary)
        .with_partitions(names);
    f.evidence = evidence;
    f.suspects = suspects.into_iter().collect();
    f
}

fn split_brain(report: &ClusterReport) -> Finding {
    let stale = &report.stale_leaders;
    let mut names: Vec<String> = stale.iter().map(|s| tp(&s.topic, s.partition)).collect();
    names.sort();
    names.dedup();
    let claimants: BTreeSet<BrokerId> = stale.iter().map(|s| s.broker).collect();
    let n = names.len();
    let summary = format!(
        "{n} partition{} with two leaders (split brain): broker(s) {} still claim leadership a newer leader epoch gave away: {}",
        if n == 1 { "" } else { "s" },
        brokers_list(&claimants),
        sample(&names, n)
    );
    let mut evidence: Vec<String> = stale
        .iter()
        .take(MAX_EVIDENCE_LINES)
        .map(|s| {
            let current = if s.current_leader < 0 {
                "no leader".to_string()
            } else {
                format!("broker {}", s.current_leader)
            };
            format!(
                "{}: broker {} claims it at epoch {}, the newest answer names {current} at epoch {}",
                tp(&s.topic, s.partition),
                s.broker,
                s.claimed_epoch,
                s.current_epoch
            )
        })
        .collect();
    if stale.len() > MAX_EVIDENCE_LINES {
        evidence.push(format!(
            "... and {} more claims",
            stale.len() - MAX_EVIDENCE_LINES
        ));
    }
    let mut f = Finding::new(
        FindingKey::new(&report.cluster, Subject::Cluster, FindingKind::SplitBrain),
        summary,
    )
    .with_partitions(names);
    f.evidence = evidence;
    f.suspects = claimants.into_iter().collect();
    f
}

fn failure(step: &str, e: &ProbeFailure) -> String {
    format!(
        "{step} failed: {} after {:.1} s ({})",
        e.kind.as_label(),
        e.after.as_secs_f64(),
        one_line(&e.detail)
    )
}

/// Every broker and bootstrap server that failed failed on the watchdog's own access
/// (`verdict::access_rule`), and at least one did.
/// The cluster listed more brokers than the watchdog watches: a metadata answer that is
/// broken or hostile, or a cluster larger than the cap. The watchdog's own limit, so of
/// the `watchdog_access` kind: what it cannot see, said.
fn unwatched(report: &ClusterReport) -> Finding {
    let cap = crate::observe::probe::MAX_BROKERS;
    let mut f = Finding::new(
        FindingKey::new(&report.cluster, Subject::Cluster, FindingKind::WatchdogAccess),
        format!(
            "cluster {} lists {} more broker(s) than the {cap} the watchdog watches per cluster: those are not probed (a metadata answer that is broken or hostile, or a cluster larger than the watchdog is built for)",
            report.cluster, report.brokers_unwatched
        ),
    );
    f.severity = FindingKind::WatchdogAccess.severity(None);
    f.evidence = vec![format!(
        "brokers watched: {}; listed beyond the cap this round: {}",
        report.probes.len(),
        report.brokers_unwatched
    )];
    f
}

fn every_failure_is_access(report: &ClusterReport) -> bool {
    every_failure(report, |k| crate::judge::verdict::access_rule(k).is_some())
}

/// Every broker and bootstrap server that failed failed so, and at least one did.
fn every_failure(report: &ClusterReport, so: impl Fn(FailureKind) -> bool) -> bool {
    let mut kinds = report
        .probes
        .values()
        .filter_map(|p| p.first_failure().map(|(_, e)| e.kind))
        .chain(report.bootstrap_failures.iter().map(|(_, e)| e.kind))
        .peekable();
    kinds.peek().is_some() && kinds.all(so)
}

fn unreachable(report: &ClusterReport) -> Finding {
    let mut evidence: Vec<String> = report
        .probes
        .iter()
        .map(|(id, p)| match p.first_failure() {
            Some((step, e)) => format!(
                "broker {id} ({}): {}",
                p.endpoint.address(),
                failure(step, e)
            ),
            None => format!(
                "broker {id} ({}): answered only in part",
                p.endpoint.address()
            ),
        })
        .collect();
    evidence.extend(
        report
            .bootstrap_failures
            .iter()
            .map(|(addr, e)| format!("bootstrap {addr}: {}", failure("connect", e))),
    );
    let last = match report.last_success {
        Some(t) => format!("last reached {}", crate::model::time::rfc3339(t)),
        None => "never reached since the watchdog started".to_string(),
    };
    let asked = if report.probes.is_empty() {
        format!(
            "none of its {} bootstrap server(s) answered",
            report.bootstrap_failures.len()
        )
    } else {
        format!("none of its {} broker(s) answered", report.probes.len())
    };
    let mut f = Finding::new(
        FindingKey::new(
            &report.cluster,
            Subject::Cluster,
            FindingKind::ClusterUnreachable,
        ),
        format!(
            "cluster {} is unreachable: {asked} ({last}); {}",
            report.cluster,
            if every_failure_is_access(report) {
                "every one refused the watchdog's credentials or certificates, or said what it cannot decode: check the watchdog's access (its password, certificates, security protocol)"
            } else {
                "the fault may be the watchdog's own network"
            }
        ),
    );
    f.evidence = evidence;
    if every_failure(report, |k| k == FailureKind::Authentication) {
        f.hold_for = Some(ROTATION_GRACE);
    }
    f
}
