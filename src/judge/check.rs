//! The `check` command's table: one cluster, its brokers, its partitions, readable in a
//! terminal or a Nagios plugin output.

use std::fmt::Write as _;

use crate::judge::health::Condition;
use crate::judge::report::ClusterReport;

pub fn table(r: &ClusterReport) -> String {
    let mut out = String::new();
    let sev = r.severity();
    let _ = writeln!(
        out,
        "{} cluster {} ({}): {} brokers probed, {} partitions, round took {:.2} s",
        sev.as_label(),
        r.cluster,
        r.cluster_id.as_deref().unwrap_or("id unknown"),
        r.probes.len(),
        r.health.partitions,
        r.duration.as_secs_f64()
    );
    for (address, f) in &r.bootstrap_failures {
        let _ = writeln!(
            out,
            "  bootstrap {address}: {} ({})",
            f.kind.as_label(),
            f.detail
        );
    }
    let _ = writeln!(
        out,
        "  {:<7} {:<22} {:<9} {:>6} {:>6} {:>6} {:>9}  EVIDENCE",
        "BROKER", "ADDRESS", "STATE", "LEADS", "REPL", "OUTISR", "METADATA"
    );
    for v in &r.verdicts {
        let stats = r.health.brokers.get(&v.broker).cloned().unwrap_or_default();
        let md = r
            .probes
            .get(&v.broker)
            .and_then(|p| p.metadata_latency())
            .map(|d| format!("{:.0}ms", d.as_secs_f64() * 1000.0))
            .unwrap_or_else(|| "-".into());
        let evidence = evidence_cell(v.hits.iter().map(|h| (&h.rule, &h.detail)));
        let _ = writeln!(
            out,
            "  {:<7} {:<22} {:<9} {:>6} {:>6} {:>6} {:>9}  {}",
            v.broker,
            address_cell(&v.address),
            v.state.as_label(),
            stats.leader_of,
            stats.replica_of,
            stats.missing_from_isr,
            md,
            evidence
        );
    }
    if let Some(q) = &r.quorum {
        control_plane(&mut out, q);
    }
    if let Some(c) = &r.certificates {
        certificates(&mut out, c, r.evaluated_at);
    }
    let _ = writeln!(
        out,
        "  partitions: offline {}, under_min_isr {}, under_replicated {}, leader_not_in_isr {}",
        r.health.count(Condition::Offline),
        r.health.count(Condition::UnderMinIsr),
        r.health.count(Condition::UnderReplicated),
        r.health.count(Condition::LeaderNotInIsr)
    );
    for p in r.health.problems.iter().take(20) {
        let conds: Vec<&str> = p.conditions.iter().map(|c| c.as_label()).collect();
        let _ = writeln!(
            out,
            "    {}-{}: {} leader {} epoch {} replicas {:?} isr {:?} -> look at {:?}",
            p.topic,
            p.partition,
            conds.join(","),
            p.leader,
            p.leader_epoch,
            p.replicas,
            p.isr,
            p.suspects
        );
    }
    if r.health.problems.len() > 20 {
        let _ = writeln!(out, "    ... {} more", r.health.problems.len() - 20);
    }
    for s in &r.stale_leaders {
        let _ = writeln!(
            out,
            "  split brain: broker {} claims {}-{} at epoch {}, newest is broker {} at epoch {}",
            s.broker, s.topic, s.partition, s.claimed_epoch, s.current_leader, s.current_epoch
        );
    }
    out
}

/// One line for the brokers' certificates: the soonest to expire, the issuers, and each
/// one within its warning.
fn certificates(
    out: &mut String,
    c: &crate::judge::certificates::CertificatesReport,
    now: std::time::SystemTime,
) {
    use crate::judge::certificates::{expiry_words, Urgency};
    if let Some(soonest) = c.brokers.iter().min_by_key(|b| b.certificate.not_after) {
        let _ = writeln!(
            out,
            "  certificates: {} broker(s), {} issuer(s) ({}); the soonest, broker {}'s, expires {}",
            c.brokers.len(),
            c.issuers.len(),
            c.issuers.join(", "),
            soonest.broker,
            expiry_words(&soonest.certificate, now)
        );
    }
    for b in c.brokers.iter().filter(|b| b.urgency != Urgency::Fine) {
        let _ = writeln!(
            out,
            "    broker {} ({}): CN={} expires {}",
            b.broker,
            b.address,
            b.certificate.subject,
            expiry_words(&b.certificate, now)
        );
    }
}

/// The control plane's lines: the quorum's leader, its problem, a row per controller.
fn control_plane(out: &mut String, q: &crate::judge::quorum::QuorumReport) {
    let leader = match (q.leader, q.epoch, q.high_watermark) {
        (Some(l), Some(e), Some(hw)) => format!(
            "leader {l} at epoch {e}, high watermark {hw}{}",
            q.high_watermark_still_for
                .map(|d| format!(" (still for {:.1} s)", d.as_secs_f64()))
                .unwrap_or_default()
        ),
        _ => "no leader answers".to_string(),
    };
    let _ = writeln!(out, "  quorum: {leader}");
    if let Some(p) = &q.problem {
        let _ = writeln!(out, "  quorum problem {}: {}", p.kind.as_label(), p.detail);
    }
    if q.controllers.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  {:<10} {:<22} {:<9} {:<7} EVIDENCE",
        "CONTROLLER", "ADDRESS", "STATE", "ROLE"
    );
    for c in &q.controllers {
        let evidence = evidence_cell(c.hits.iter().map(|h| (&h.rule, &h.detail)));
        let _ = writeln!(
            out,
            "  {:<10} {:<22} {:<9} {:<7} {}",
            c.controller,
            address_cell(&c.address),
            c.state.as_label(),
            if c.leader { "leader" } else { "-" },
            evidence
        );
    }
}

/// A node's evidence in one line: every rule that fired with its detail, or "-" (the
/// EVIDENCE cell of `check`, and the daemon's log lines).
pub fn evidence_cell<R: std::fmt::Display, D: std::fmt::Display>(
    hits: impl Iterator<Item = (R, D)>,
) -> String {
    let lines: Vec<String> = hits.map(|(r, d)| format!("{r}: {d}")).collect();
    if lines.is_empty() {
        "-".into()
    } else {
        lines.join("; ")
    }
}

fn address_cell(address: &str) -> &str {
    if address.is_empty() {
        "?"
    } else {
        address
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::model::round::{
        ControllerLook, ControllerRole, QuorumDescription, QuorumObservation, ReplicaProgress,
    };

    #[test]
    fn the_table_names_the_quorums_problem_and_each_controller() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let look = Arc::new(QuorumObservation {
            controllers: vec![ControllerLook {
                address: "c100:9093".into(),
                id: Some(100),
                outcome: Ok(ControllerRole::Leader),
                accepted: true,
                failing_since: None,
                accepted_in_streak: false,
                ever_reached: true,
            }],
            description: Some(QuorumDescription {
                leader: 100,
                epoch: 2,
                high_watermark: 64,
                voters: vec![ReplicaProgress {
                    id: 100,
                    log_end_offset: 64,
                    last_fetch_ago: Some(Duration::ZERO),
                    last_caught_up_ago: Some(Duration::ZERO),
                }],
                observers: Vec::new(),
                endpoints: Default::default(),
                version: 2,
            }),
            high_watermark_still_since: Some(at),
            ..QuorumObservation::empty(at)
        });
        let mut r = ClusterReport::empty("lab", at);
        r.reachable = true;
        r.quorum = Some(crate::judge::quorum::judge_quorum(
            &look,
            &mut Default::default(),
            &Default::default(),
            at + Duration::from_secs(3),
        ));
        let t = table(&r);
        assert!(t.starts_with("CRITICAL cluster lab"), "{t}");
        assert!(
            t.contains("quorum: leader 100 at epoch 2, high watermark 64 (still for 3.0 s)"),
            "{t}"
        );
        assert!(t.contains("quorum problem leader_not_advancing"), "{t}");
        assert!(
            t.contains("100        c100:9093              zombie    leader  controller_wedged:"),
            "{t}"
        );
    }

    #[test]
    fn the_table_says_which_certificate_expires_first_and_each_one_near_its_end() {
        use crate::model::round::PeerCertificate;
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let cert = |days: u64| PeerCertificate {
            not_after: at + Duration::from_secs(days * 86_400),
            subject: "kafka-2".into(),
            issuer: "lab CA".into(),
            checked_name: "127.0.0.12".into(),
        };
        let seen = [
            (1, (cert(300), "127.0.0.11:9093".to_string(), at)),
            (2, (cert(1), "127.0.0.12:9093".to_string(), at)),
        ]
        .into();
        let mut r = ClusterReport::empty("lab", at);
        r.reachable = true;
        r.certificates = crate::judge::certificates::judge_certificates(
            &seen,
            &[1, 2].into(),
            &Default::default(),
            at,
        );
        let t = table(&r);
        assert!(
            t.contains("certificates: 2 broker(s), 1 issuer(s) (lab CA); the soonest, broker 2's, expires in 1.0 days"),
            "{t}"
        );
        assert!(
            t.contains("    broker 2 (127.0.0.12:9093): CN=kafka-2 expires in 1.0 days"),
            "{t}"
        );
        assert!(!t.contains("    broker 1 ("), "{t}");
    }
}
