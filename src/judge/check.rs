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
        let evidence = if v.hits.is_empty() {
            "-".to_string()
        } else {
            v.hits
                .iter()
                .map(|h| format!("{}: {}", h.rule, h.detail))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let _ = writeln!(
            out,
            "  {:<7} {:<22} {:<9} {:>6} {:>6} {:>6} {:>9}  {}",
            v.broker,
            if v.address.is_empty() {
                "?"
            } else {
                &v.address
            },
            v.state.as_label(),
            stats.leader_of,
            stats.replica_of,
            stats.missing_from_isr,
            md,
            evidence
        );
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
