//! What the HTTP server shows, published by the daemon: one immutable [`Snapshot`] per
//! change (a round, a re-evaluation, a reload, a silence added or expired), swapped whole.
//! A scrape or a `/status` takes the current `Arc` once and renders from it, so the reports,
//! incidents and silences on one page are of one moment, and no page waits on the daemon,
//! the incident book or a broker.
//!
//! Three figures move between snapshots on their own and are read at each scrape, each
//! through its own typed handle in [`LiveCounters`] or [`Publisher::webhooks`]: the canary's
//! cumulative histograms and counters (every write adds to them), webhook delivery (every
//! attempt), and remediation (a command ends when it ends). Copying them into the snapshot
//! would show a delivery or a restart only at the next round; they are counters that only
//! grow, so reading them later than the snapshot never contradicts it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::alert::alerting::Alerting;
use crate::alert::incident::Incident;
use crate::alert::notify::NotifierStats;
use crate::alert::remediate::RemediationLog;
use crate::judge::report::ClusterReport;
use crate::model::silence::Silence;
use crate::observe::canary::stats::CanaryStats;
use crate::serve::metrics::Extras;

/// Everything `/metrics`, `/status` and `/readyz` need at one moment, but the live counters.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The configured clusters; readiness waits for a first report of each.
    pub clusters: Vec<String>,
    /// The latest report of each cluster that completed a round.
    pub reports: BTreeMap<String, Arc<ClusterReport>>,
    /// Open incidents, as the book held them when the snapshot was made.
    pub incidents: Vec<Incident>,
    /// Every silence (active, to come, ended within a day).
    pub silences: Vec<Silence>,
    /// Whether the last configuration reload was applied (true before any reload).
    pub reload_success: bool,
    /// Each cluster's static labels (`clusters[].labels`), for `cluster_labels`.
    pub cluster_labels: BTreeMap<String, BTreeMap<String, String>>,
}

impl Snapshot {
    fn new(clusters: Vec<String>) -> Self {
        Snapshot {
            clusters,
            reports: BTreeMap::new(),
            incidents: Vec::new(),
            silences: Vec::new(),
            reload_success: true,
            cluster_labels: BTreeMap::new(),
        }
    }

    /// The reports, in cluster order.
    pub fn reports(&self) -> impl Iterator<Item = &ClusterReport> {
        self.reports.values().map(|r| r.as_ref())
    }

    /// Clusters that have not completed a round yet.
    pub fn waiting_for(&self) -> Vec<String> {
        self.clusters
            .iter()
            .filter(|c| !self.reports.contains_key(*c))
            .cloned()
            .collect()
    }
}

/// The counters that grow between snapshots, shared with what adds to them.
#[derive(Clone, Default)]
pub struct LiveCounters {
    /// The canary's cumulative metrics, of every cluster; each cluster's canary adds to it.
    pub canary: CanaryStats,
    /// Remediation counters and recent decisions, of every cluster; each remediator adds.
    pub remediation: RemediationLog,
    /// The watchdog's own health, measured by its own tasks, the liveness tasks and the
    /// round loops (issue 38 item 4).
    pub own_health: crate::observe::own_health::OwnHealth,
}

/// Makes snapshots and holds the current one. The daemon publishes into it; the HTTP
/// server only reads it (and, after changing a silence, asks for a new one).
pub struct Publisher {
    pub instance_id: String,
    /// `metrics.cluster_label`: the name the page gives the cluster label (a restart
    /// setting, so fixed for the process).
    cluster_label: OnceLock<String>,
    current: RwLock<Arc<Snapshot>>,
    /// Held while a snapshot is made: two cluster loops publishing at once must not make
    /// their snapshots from the same predecessor (one report would be lost), and one made
    /// later reads the incident book later. Readers never wait for it.
    building: Mutex<()>,
    /// Incidents, silences and webhook delivery, once alerting has started.
    alerting: OnceLock<Arc<Alerting>>,
    pub live: LiveCounters,
    /// Whether the round loops, the webhook dispatcher and the HTTP server make progress:
    /// `/healthz` reads it.
    pub progress: Arc<crate::model::progress::Progress>,
}

impl Publisher {
    pub fn new(instance_id: &str, clusters: Vec<String>) -> Arc<Self> {
        Arc::new(Publisher {
            instance_id: instance_id.to_string(),
            cluster_label: OnceLock::new(),
            current: RwLock::new(Arc::new(Snapshot::new(clusters))),
            building: Mutex::new(()),
            alerting: OnceLock::new(),
            live: LiveCounters::default(),
            progress: Arc::default(),
        })
    }

    /// Names the cluster label on the page (`metrics.cluster_label`); only the first call
    /// counts, as the setting needs a restart.
    pub fn set_cluster_label(&self, name: &str) {
        let _ = self.cluster_label.set(name.to_string());
    }

    /// The snapshot of now. It never changes; a later one replaces it.
    pub fn current(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Alerting has started: its incidents (restored from the state folder) and silences
    /// are shown from now on. Only the first call counts.
    pub fn attach_alerting(&self, alerting: Arc<Alerting>) {
        let _ = self.alerting.set(alerting);
        self.update(|_| {});
    }

    pub fn alerting(&self) -> Option<&Arc<Alerting>> {
        self.alerting.get()
    }

    /// A cluster's new report (a round, or its verdicts made again), with the incidents it
    /// opened or closed: alerting has seen it already.
    pub fn publish(&self, report: Arc<ClusterReport>) {
        self.update(|s| {
            s.reports.insert(report.cluster.clone(), report);
        });
    }

    /// The clusters configured now (after a reload): the others' reports and remediation
    /// counters go.
    pub fn set_clusters(&self, names: &[String]) {
        self.live.remediation.retain_clusters(names);
        self.update(|s| {
            s.clusters = names.to_vec();
            s.reports.retain(|k, _| names.contains(k));
        });
    }

    /// The clusters' static labels, from the configuration (at start and after a reload).
    pub fn set_cluster_labels(&self, labels: BTreeMap<String, BTreeMap<String, String>>) {
        self.update(|s| s.cluster_labels = labels);
    }

    /// A reload ended: applied (`true`) or refused. Also picks up what the reload changed
    /// in alerting (clusters' incidents dropped, configured silences).
    pub fn reload_done(&self, applied: bool) {
        self.update(|s| s.reload_success = applied);
    }

    /// Reads incidents and silences again (a silence was added or expired).
    pub fn refresh(&self) {
        self.update(|_| {});
    }

    /// Webhook delivery as it stands now, once alerting has started.
    pub fn webhooks(&self) -> Option<NotifierStats> {
        self.alerting.get().map(|a| a.stats())
    }

    /// What the outputs show beside the reports of `snapshot`: its incidents and silences,
    /// and the live counters read now.
    pub fn extras<'a>(&'a self, snapshot: &Snapshot) -> Extras<'a> {
        Extras {
            instance_id: self.instance_id.clone(),
            cluster_label: self.cluster_label.get().cloned().unwrap_or_default(),
            clusters: snapshot.clusters.clone(),
            cluster_labels: snapshot.cluster_labels.clone(),
            canary_stats: Some(&self.live.canary),
            incidents: snapshot.incidents.clone(),
            webhooks: self.webhooks(),
            reload_success: Some(snapshot.reload_success),
            remediation_counts: self.live.remediation.counts(),
            remediations: self.live.remediation.recent(),
            silences: snapshot.silences.clone(),
            task_restarts: crate::model::task_restarts::snapshot(),
            own_health: Some(crate::serve::metrics::OwnHealth::judged(
                self.live.own_health.facts(),
                std::time::SystemTime::now(),
            )),
            // Read by the metrics page itself, off the runtime.
            process: None,
            credential_reloads: crate::config::live::reload_counts(),
        }
    }

    /// Makes the next snapshot from the current one with `change`, reading alerting's
    /// state now, and swaps it in.
    fn update(&self, change: impl FnOnce(&mut Snapshot)) {
        let _building = self.building.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.current();
        let mut next = Snapshot {
            clusters: current.clusters.clone(),
            reports: current.reports.clone(),
            incidents: Vec::new(),
            silences: Vec::new(),
            reload_success: current.reload_success,
            cluster_labels: current.cluster_labels.clone(),
        };
        change(&mut next);
        if let Some(a) = self.alerting.get() {
            next.incidents = a.open_incidents();
            next.silences = a.silences();
        }
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn report(cluster: &str, round: u64) -> Arc<ClusterReport> {
        let mut r = ClusterReport::empty(cluster, SystemTime::UNIX_EPOCH);
        r.round = round;
        Arc::new(r)
    }

    fn rounds(s: &Snapshot) -> Vec<(String, u64)> {
        s.reports().map(|r| (r.cluster.clone(), r.round)).collect()
    }

    /// A page takes one snapshot; rounds published while it renders do not change it.
    #[test]
    fn a_reader_keeps_its_snapshot_while_rounds_are_published() {
        let p = Publisher::new("wd", vec!["a".into(), "b".into()]);
        let before = p.current();
        p.publish(report("a", 1));
        let first = p.current();
        p.publish(report("a", 2));
        p.publish(report("b", 1));
        assert!(before.reports.is_empty());
        assert_eq!(rounds(&first), [("a".to_string(), 1)]);
        assert_eq!(
            rounds(&p.current()),
            [("a".to_string(), 2), ("b".to_string(), 1)]
        );
        assert!(!Arc::ptr_eq(&first, &p.current()), "replaced, not changed");
    }

    #[test]
    fn readiness_waits_for_every_configured_cluster() {
        let p = Publisher::new("wd", vec!["a".into(), "b".into()]);
        assert_eq!(p.current().waiting_for(), ["a", "b"]);
        p.publish(report("a", 1));
        assert_eq!(p.current().waiting_for(), ["b"]);
        // A reload removed b and added c.
        p.set_clusters(&["a".to_string(), "c".to_string()]);
        assert_eq!(p.current().waiting_for(), ["c"]);
        p.publish(report("b", 1));
        p.set_clusters(&["a".to_string()]);
        assert_eq!(rounds(&p.current()), [("a".to_string(), 1)]);
        assert!(p.current().waiting_for().is_empty());
    }

    #[test]
    fn the_reload_outcome_is_part_of_the_snapshot() {
        let p = Publisher::new("wd", vec!["a".into()]);
        let before = p.current();
        assert!(before.reload_success);
        p.reload_done(false);
        assert!(before.reload_success, "a taken snapshot keeps its value");
        let now = p.current();
        assert!(!now.reload_success);
        assert_eq!(p.extras(&now).reload_success, Some(false));
        p.reload_done(true);
        assert!(p.current().reload_success);
    }

    /// Cluster loops publish concurrently; each snapshot is made from the one before it, so
    /// no loop's report is lost to another's swap.
    #[test]
    fn concurrent_publishers_lose_no_report() {
        let clusters: Vec<String> = (0..4).map(|i| format!("c{i}")).collect();
        let p = Publisher::new("wd", clusters.clone());
        std::thread::scope(|scope| {
            for c in &clusters {
                let p = &p;
                scope.spawn(move || {
                    for round in 1..=200 {
                        p.publish(report(c, round));
                    }
                });
            }
            // A reader meanwhile sees whole snapshots only: rounds never go backwards.
            let p = &p;
            scope.spawn(move || {
                let mut last = BTreeMap::new();
                for _ in 0..500 {
                    for r in p.current().reports() {
                        let seen = last.entry(r.cluster.clone()).or_insert(0);
                        assert!(r.round >= *seen, "{} went back", r.cluster);
                        *seen = r.round;
                    }
                    std::thread::yield_now();
                }
            });
        });
        let end = p.current();
        assert_eq!(
            rounds(&end),
            clusters
                .iter()
                .map(|c| (c.clone(), 200))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn extras_read_the_live_counters_now() {
        let p = Publisher::new("wd", vec!["a".into()]);
        let snapshot = p.current();
        p.live.remediation.register("a", 3);
        let extras = p.extras(&snapshot);
        assert!(
            !extras.remediation_counts.is_empty(),
            "a counter registered after the snapshot is on the page"
        );
        assert!(extras.webhooks.is_none(), "no alerting yet");
        assert_eq!(extras.clusters, ["a"]);
    }
}
