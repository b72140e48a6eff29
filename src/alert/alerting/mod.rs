//! From reports to incidents and webhooks: each round's findings (the report's own and the
//! canary's) go into the incident book, whose events go to the notifier. The book is saved
//! after every change so a restart neither loses an open incident nor announces it twice.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::alert::incident::{
    self, Finding, FindingKey, Hysteresis, Incident, IncidentBook, IncidentEvent, StateError,
    StateWriter, Subject,
};
use crate::alert::notify::{Notifier, NotifierHandle, NotifierStats, NotifyError, Sender};
use crate::alert::peers::{Answer, Peers};
use crate::alert::silence::Silences;
use crate::config::{ClusterConfig, Config};
use crate::judge::report::ClusterReport;
use crate::model::kind::FindingKind;
use crate::model::round::BrokerId;
use crate::model::silence::{Origin, Silence};

#[derive(Debug, thiserror::Error)]
pub enum AlertingError {
    // The I/O error is part of the sentence, not a chained source: the chain would print
    // it twice.
    #[error(
        "state directory {path} is not usable: {error} (expected a directory this user can create and write; under systemd, StateDirectory=kafka-watchdog provides /var/lib/kafka-watchdog)"
    )]
    StateDir { path: String, error: std::io::Error },
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Notify(#[from] NotifyError),
    #[error(transparent)]
    Silences(crate::alert::silence::StoreError),
}

pub struct Alerting {
    book: Mutex<IncidentBook>,
    silences: Mutex<Silences>,
    notifier: Shared<NotifierHandle>,
    state_dir: PathBuf,
    /// `peers:` configured: the other watchdogs' silences and deliveries as last heard.
    peers: Option<Arc<Peers>>,
    /// The book on its way to disk, after the events it records as told (`save_book`).
    book_file: Arc<StateWriter<IncidentEvent>>,
    silences_file: Arc<StateWriter<()>>,
}

type Shared<T> = Arc<std::sync::RwLock<T>>;

/// Names a point where the crash tests (`tests/own_faults.rs`) kill the daemon: when the
/// environment variable `KAFKA_WATCHDOG_CRASH_AT` holds `name`, the process aborts there,
/// as a power cut or `kill -9` would stop it. Only with the `crash-points` feature (the lab
/// tests'): a release has no such switch, and whoever sets a production daemon's
/// environment cannot make it abort.
#[cfg(feature = "crash-points")]
fn crash_point(name: &str) {
    if std::env::var_os("KAFKA_WATCHDOG_CRASH_AT").is_some_and(|v| v == name) {
        tracing::error!(
            point = name,
            "KAFKA_WATCHDOG_CRASH_AT: aborting here, as asked"
        );
        std::process::abort();
    }
}

#[cfg(not(feature = "crash-points"))]
fn crash_point(_name: &str) {}

fn ensure_writable(dir: &Path) -> Result<(), AlertingError> {
    let err = |error| AlertingError::StateDir {
        path: dir.display().to_string(),
        error,
    };
    std::fs::create_dir_all(dir).map_err(err)?;
    let probe = dir.join(".write-test");
    std::fs::write(&probe, b"").map_err(err)?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

impl Alerting {
    /// Loads the incident book and starts webhook delivery. Call inside the runtime.
    pub fn start(config: &Config) -> Result<Alerting, AlertingError> {
        ensure_writable(&config.state_dir)?;
        let book = match IncidentBook::load(&config.state_dir) {
            Ok(b) => b,
            Err(StateError::Corrupt { .. }) => {
                // A corrupt file must not keep the watchdog from watching; keep it aside for
                // a person to look at and start with an empty book.
                let file = config.state_dir.join("incidents.json");
                let aside = config.state_dir.join(format!(
                    "incidents.json.corrupt-{}",
                    crate::model::time::unix_ms(SystemTime::now())
                ));
                let _ = std::fs::rename(&file, &aside);
                tracing::error!(kept = %aside.display(), "incident state file is corrupt; starting with no open incidents");
                IncidentBook::new()
            }
            Err(e) => return Err(e.into()),
        };
        let mut silences = match Silences::load(&config.state_dir) {
            Ok(s) => s,
            Err(e @ crate::alert::silence::StoreError::Corrupt { .. }) => {
                // Losing runtime silences pages for what someone meant to keep quiet; the
                // file is kept aside for a person, and the error says it loudly.
                let file = config.state_dir.join(crate::alert::silence::STATE_FILE);
                let aside = config.state_dir.join(format!(
                    "{}.corrupt-{}",
                    crate::alert::silence::STATE_FILE,
                    crate::model::time::unix_ms(SystemTime::now())
                ));
                let _ = std::fs::rename(&file, &aside);
                tracing::error!(error = %e, kept = %aside.display(), "silences file is corrupt; starting without the silences added at runtime");
                Silences::default()
            }
            Err(e) => return Err(AlertingError::Silences(e)),
        };
        silences.set_config(config.silences.clone());
        let peers = config
            .peers
            .as_ref()
            .map(|p| Arc::new(Peers::new(&config.instance_id, p.takeover, p.poll_interval)));
        let notifier = Notifier::spawn(
            &config.webhooks,
            &config.state_dir,
            sender(config, peers.clone()),
        )?;
        notifier.restore_open(book.open_incidents());
        Ok(Alerting {
            book: Mutex::new(book),
            silences: Mutex::new(silences),
            notifier: Arc::new(std::sync::RwLock::new(notifier)),
            state_dir: config.state_dir.clone(),
            peers,
            book_file: Arc::new(StateWriter::new(&config.state_dir, incident::STATE_FILE)),
            silences_file: Arc::new(StateWriter::new(
                &config.state_dir,
                crate::alert::silence::STATE_FILE,
            )),
        })
    }

    /// Turns one round's findings (`judge::finding::FindingJudge`) into incident events
    /// and hands them to delivery.
    pub fn after_round(
        &self,
        cluster: &ClusterConfig,
        report: &ClusterReport,
        findings: Vec<Finding>,
        now: SystemTime,
    ) {
        self.observe(cluster, report, findings, now, true);
    }

    /// The same for a re-evaluation of the last round with newer liveness facts.
    pub fn after_reassess(
        &self,
        cluster: &ClusterConfig,
        report: &ClusterReport,
        findings: Vec<Finding>,
        now: SystemTime,
    ) {
        // Every liveness interval while a broker is silent: the file is written when
        // something happened, not at each look.
        self.observe(cluster, report, findings, now, false);
    }

    fn observe(
        &self,
        cluster: &ClusterConfig,
        report: &ClusterReport,
        mut findings: Vec<Finding>,
        now: SystemTime,
        save_when_busy: bool,
    ) {
        for f in &mut findings {
            f.labels.clone_from(&cluster.labels);
        }
        let active = self.lock_silences().active(now);
        let mut book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        book.set_silences(active);
        let events = book.observe(
            &report.cluster,
            findings,
            Hysteresis::from(&cluster.verdict),
            now,
        );
        self.tell(&book, events, save_when_busy);
    }

    /// Logs and delivers `events` of `book`, and saves the book when they changed it (or,
    /// with `save_when_busy`, when it holds anything).
    fn tell(&self, book: &IncidentBook, events: Vec<IncidentEvent>, save_when_busy: bool) {
        for e in &events {
            tracing::warn!(
                cluster = %e.incident.cluster,
                event = e.kind.as_str(),
                kind = e.incident.kind.as_str(),
                severity = e.incident.severity.as_str(),
                summary = %e.incident.summary,
                "incident"
            );
        }
        let told = !events.is_empty();
        if told || (save_when_busy && !book.is_idle()) {
            self.queue_book(book, events);
        }
    }

    /// Queues the book's content after `events`, under the book's lock (so in the order of
    /// the changes), for a writer off the runtime (`save_book`), which it starts when none
    /// is coming. Nothing here waits for the disk: a slow one delays the files, never a
    /// round, a look or a page's way into the inbox behind another cluster's.
    fn queue_book(&self, book: &IncidentBook, events: Vec<IncidentEvent>) {
        let bytes = match book.encode() {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "cannot save incident state");
                self.notifier().submit(events);
                return;
            }
        };
        if self.book_file.queue(events, bytes) {
            tokio::spawn(save_book(self.book_file.clone(), self.notifier.clone()));
        }
    }

    /// Whether the watchdog sees `cluster` (issue 38 item 2): `blind` (see
    /// `judge::finding::blind`) while its round loop completes no rounds, `None` while it
    /// does. No round report reaches alerting from a loop that is stuck or dying, so the
    /// daemon's watch on its loops says it here: receivers get a `watchdog_blind` incident,
    /// never silence, and it resolves when rounds complete again. True when that opened or
    /// resolved something.
    pub fn watchdog_sight(
        &self,
        cluster: &str,
        labels: &std::collections::BTreeMap<String, String>,
        blind: Option<Finding>,
        now: SystemTime,
    ) -> bool {
        let blind = blind.map(|mut f| {
            f.labels.clone_from(labels);
            f
        });
        let active = self.lock_silences().active(now);
        let mut book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        book.set_silences(active);
        let events = book.observe_blind(cluster, blind, now);
        let told = !events.is_empty();
        self.tell(&book, events, false);
        told
    }

    fn lock_silences(&self) -> std::sync::MutexGuard<'_, Silences> {
        self.silences.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every silence, active or not (expired ones for a day).
    pub fn silences(&self) -> Vec<Silence> {
        self.lock_silences().all()
    }

    /// Checks and keeps a silence asked for at runtime; it takes effect at each cluster's
    /// next round. Returns once it is on disk (or could not be written).
    pub async fn add_silence(
        &self,
        request: &crate::model::silence::Request,
        clusters: &[String],
        now: SystemTime,
    ) -> Result<Silence, crate::model::silence::Invalid> {
        let silence = request.check(clusters, now, Origin::Api)?;
        {
            let mut store = self.lock_silences();
            store.add(silence.clone(), now)?;
            self.silences_file.queue(Vec::new(), store.encode());
        }
        save_silences(&self.silences_file).await;
        tracing::info!(silence = %silence.describe(), by = %silence.created_by, "silence added");
        Ok(silence)
    }

    /// Ends a runtime silence now; `Ok(false)` when there is none with that id. Returns
    /// once that is on disk (or could not be written).
    pub async fn expire_silence(
        &self,
        id: &str,
        now: SystemTime,
    ) -> Result<bool, crate::model::silence::Invalid> {
        let found = {
            let mut store = self.lock_silences();
            let found = store.expire(id, now)?;
            if found {
                self.silences_file.queue(Vec::new(), store.encode());
            }
            found
        };
        if found {
            save_silences(&self.silences_file).await;
            tracing::info!(silence = %id, "silence expired");
        }
        Ok(found)
    }

    /// A peer's runtime silences (`alert::peers`): merged into this instance's, and kept
    /// on disk when that changed anything (by a writer of its own: this returns at once).
    /// Each is checked as the API checks one, against `clusters` (those watched here); the
    /// refused ones are returned, with why.
    pub fn merge_peer_silences(
        &self,
        peer: &str,
        remote: Vec<Silence>,
        clusters: &[String],
    ) -> Vec<(String, crate::model::silence::Invalid)> {
        let now = SystemTime::now();
        let mut store = self.lock_silences();
        let merged = store.merge(remote, clusters, now);
        if merged.changed.is_empty() {
            return merged.refused;
        }
        if self.silences_file.queue(Vec::new(), store.encode()) {
            let file = self.silences_file.clone();
            tokio::spawn(async move { save_silences(&file).await });
        }
        drop(store);
        for id in merged.changed {
            tracing::info!(silence = %id, peer = %peer, "silence taken from a peer");
        }
        merged.refused
    }

    /// The other watchdogs, when `peers:` is configured.
    pub fn peers(&self) -> Option<Arc<Peers>> {
        self.peers.clone()
    }

    /// What this instance tells its peers (`GET /api/v1/peer`).
    pub fn peer_answer(&self, instance_id: &str, clusters: Vec<String>) -> Answer {
        Answer {
            instance_id: instance_id.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            clusters,
            silences: self.lock_silences().runtime(),
            deliveries: self
                .peers
                .as_ref()
                .map(|p| {
                    let open = self
                        .book
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .open_episodes();
                    p.deliveries(&open, SystemTime::now())
                })
                .unwrap_or_default(),
        }
    }

    /// The configuration's silences changed (a reload).
    pub fn set_config_silences(&self, silences: Vec<Silence>) {
        self.lock_silences().set_config(silences);
    }

    /// The active silence that keeps remediation of `broker` from acting, described.
    pub fn remediation_silenced(
        &self,
        cluster: &str,
        broker: BrokerId,
        now: SystemTime,
    ) -> Option<String> {
        self.lock_silences()
            .active(now)
            .into_iter()
            .find(|s| s.covers_parts(cluster, FindingKind::Broker, Some(broker), &[broker]))
            .map(|s| s.describe())
    }

    /// When a finding of `cluster` that waits for confirmation can be confirmed by another
    /// look (see `IncidentBook::confirmation_due`).
    pub fn confirmation_due(&self, cluster: &ClusterConfig) -> Option<SystemTime> {
        self.book
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .confirmation_due(&cluster.name, cluster.verdict.open_after)
    }

    /// The state of `broker`'s open incident, if it has one: the verdict as confirmed
    /// (held for `open_after_secs`, kept until resolved).
    pub fn confirmed_state(
        &self,
        cluster: &str,
        broker: BrokerId,
    ) -> Option<crate::judge::verdict::BrokerState> {
        self.book
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .open_incidents_of(cluster)
            .into_iter()
            .find(|i| i.kind == FindingKind::Broker && i.broker == Some(broker))
            .and_then(|i| i.state)
    }

    /// Where the incident book lives; remediation keeps its history and thread dumps
    /// below it.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// A remediation decision as a one-shot incident event (kind `remediation`): it goes
    /// to the receivers like any event, and opens nothing in the book.
    pub fn remediation(&self, r: crate::alert::remediate::Record) {
        self.notifier().submit(vec![remediation_event(&r)]);
    }

    /// The webhook dispatcher's progress (see `NotifierHandle::passes`); a reconfigure
    /// starts a new dispatcher with a stamp of its own.
    pub fn delivery_passes(&self) -> crate::model::progress::Stamp {
        self.notifier().passes()
    }

    fn notifier(&self) -> NotifierHandle {
        self.notifier
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the receivers after a reload: the old delivery drains briefly, what it could
    /// not send stays in the spool, which the new one (same state folder) picks up.
    pub async fn reconfigure(&self, config: &Config) -> Result<(), AlertingError> {
        let old = self.notifier();
        old.shutdown(Duration::from_secs(2)).await;
        // Opening the spools reads the state directory: off the runtime.
        let (webhooks, dir) = (config.webhooks.clone(), config.state_dir.clone());
        let sender = sender(config, self.peers.clone());
        let new = incident::disk()
            .finish(
                "opening the webhook spools",
                incident::SLOW_WRITE,
                move || Notifier::spawn(&webhooks, &dir, sender),
            )
            .await
            .map_err(|e| {
                NotifyError::Spool(crate::alert::notify::SpoolError::Io {
                    path: config.state_dir.join("spool"),
                    source: std::io::Error::other(e.to_string()),
                })
            })??;
        new.restore_open(self.open_incidents());
        *self.notifier.write().unwrap_or_else(|p| p.into_inner()) = new;
        Ok(())
    }

    /// Resolves the incidents of clusters no longer configured (after a reload).
    pub fn retain_clusters(&self, names: &[String]) {
        let mut book = self.book.lock().unwrap_or_else(|p| p.into_inner());
        let events = book.retain_clusters(names, SystemTime::now());
        self.queue_book(&book, events);
    }

    pub fn open_incidents(&self) -> Vec<Incident> {
        self.book
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .open_incidents()
    }

    pub fn stats(&self) -> NotifierStats {
        self.notifier().stats()
    }

    /// Writes what the book queued last (its events into the inbox, then the book), then
    /// flushes what delivery can, all within `deadline`; the rest stays spooled on disk.
    pub async fn shutdown(&self, deadline: Duration) -> NotifierStats {
        let end = tokio::time::Instant::now() + deadline;
        let saved = save_book(self.book_file.clone(), self.notifier.clone());
        if tokio::time::timeout_at(end, saved).await.is_err() {
            tracing::error!("the incident book was not written before the shutdown's deadline: the next start may open or resolve again what this run told");
        }
        let left = end.saturating_duration_since(tokio::time::Instant::now());
        self.notifier().shutdown(left).await
    }
}

/// Writes what the book queued (`Alerting::queue_book`), once no other writer runs: its
/// events into the webhook inbox, durably, then the book. The events reach the disk before
/// the book that records them as told: a crash between the two then sends them again (at
/// least once), where the other order lost them for good (issue 27 item 2).
async fn save_book(file: Arc<StateWriter<IncidentEvent>>, notifier: Shared<NotifierHandle>) {
    let written = file
        .write(|events| async move {
            let handle = notifier.read().unwrap_or_else(|p| p.into_inner()).clone();
            handle.submit_durably(events).await;
        })
        .await;
    let Some(w) = written else {
        return;
    };
    if let Err(e) = w.result {
        let e = StateError::Write {
            path: w.path,
            source: e,
        };
        tracing::error!(error = %e, "cannot save incident state");
    }
    if w.had_first {
        crash_point("incident_saved");
    }
}

/// Writes the silences queued, once no other writer runs; returns when they are on disk.
async fn save_silences(file: &StateWriter<()>) {
    let Some(w) = file.write(|_| async {}).await else {
        return;
    };
    if let Err(source) = w.result {
        let e = crate::alert::silence::StoreError::Write {
            path: w.path,
            source,
        };
        tracing::error!(error = %e, "cannot save silences; they hold until a restart");
    }
}

/// Who sends, with the peers that share its turns.
fn sender(config: &Config, peers: Option<Arc<Peers>>) -> Sender {
    Sender {
        peers,
        ..Sender::from(config)
    }
}

/// The incident event of a remediation record.
pub fn remediation_event(r: &crate::alert::remediate::Record) -> incident::IncidentEvent {
    use crate::alert::remediate::Outcome;
    let key = FindingKey::new(
        &r.cluster,
        Subject::Broker(r.broker),
        FindingKind::Remediation,
    );
    // A broker restarted (or a restart that failed) is worth a page; a refusal or a dry
    // run is a warning: the zombie incident itself already pages.
    let severity = match r.outcome {
        Outcome::Acted | Outcome::Failed => crate::config::Severity::Critical,
        Outcome::Refused | Outcome::DryRun => crate::config::Severity::Warning,
    };
    incident::IncidentEvent {
        kind: r.outcome.event_kind(),
        at: r.at,
        incident: Incident {
            id: incident::incident_id(&key, r.at),
            dedup_key: key.dedup_key(),
            cluster: r.cluster.clone(),
            subject: key.subject,
            kind: FindingKind::Remediation,
            broker: Some(r.broker),
            broker_address: (!r.address.is_empty()).then(|| r.address.clone()),
            state: Some(crate::judge::verdict::BrokerState::Zombie),
            severity,
            peak_severity: severity,
            summary: r.summary(),
            evidence: r.evidence(),
            rules: vec![format!("remediation_{}", r.outcome.as_label())],
            affected_partitions: Vec::new(),
            affected_partitions_total: 0,
            suspects: vec![r.broker],
            started_at: r.at,
            updated_at: r.at,
            resolved_at: None,
            unavailable_seconds: None,
            silenced: None,
            notified_peak: Some(severity),
            flapping_since: None,
            labels: Default::default(),
        },
        previous: None,
        changes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // The canary's judgment (`judge::finding::canary`), followed here through the book.
    use crate::config::Severity;
    use crate::judge::finding::canary::{canary_findings, CanaryMemory};
    use crate::observe::canary::record::Acks;
    use crate::observe::canary::{
        CanaryRound, LossEvent, PartitionRound, ProduceFailure, TopicStatus,
    };
    use std::time::UNIX_EPOCH;

    fn t(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000 + s)
    }

    fn round(lost: Vec<LossEvent>) -> CanaryRound {
        CanaryRound::with_losses("canary", lost)
    }

    fn loss(seq: u64, acks: Acks, broker: BrokerId, reason: &'static str) -> LossEvent {
        on(0, seq, acks, broker, reason)
    }

    fn on(
        partition: i32,
        seq: u64,
        acks: Acks,
        broker: BrokerId,
        reason: &'static str,
    ) -> LossEvent {
        LossEvent {
            partition,
            offset: 100 + seq as i64,
            seq,
            acks,
            broker,
            reason,
        }
    }

    /// Runs the canary findings of `rounds` (10 s apart) through the incident book with the
    /// default hysteresis; returns every event.
    fn run(rounds: Vec<Vec<LossEvent>>) -> Vec<incident::IncidentEvent> {
        let mut memory = CanaryMemory::default();
        let mut book = IncidentBook::new();
        let mut events = Vec::new();
        for (i, lost) in rounds.into_iter().enumerate() {
            let now = t(10 * i as u64);
            let found = canary_findings(
                "lab",
                &round(lost),
                &mut memory,
                Duration::from_secs(10),
                now,
            );
            events.extend(book.observe("lab", found, Hysteresis::default(), now));
        }
        events
    }

    /// Issue 38 item 2: a round loop that completes no rounds sends no round report, so
    /// receivers heard nothing while the cluster went unwatched. The daemon's watch on its
    /// loops opens a critical `watchdog_blind` incident dated from the last round, the
    /// cluster's other incidents stay as they were, a round never resolves it, and it
    /// resolves at once when the loop completes rounds again.
    #[test]
    fn a_blind_cluster_is_an_incident_until_its_rounds_complete_again() {
        let mut book = IncidentBook::new();
        let zombie = || {
            let mut f = Finding::new(
                FindingKey::new("lab", Subject::Broker(2), FindingKind::Broker),
                "broker 2 is a zombie",
            );
            f.severity = Severity::Critical;
            f
        };
        book.observe("lab", vec![zombie()], Hysteresis::default(), t(0));
        let opened = book.observe("lab", vec![zombie()], Hysteresis::default(), t(10));
        assert_eq!(opened.len(), 1, "{opened:?}");
        let allowed = Duration::from_secs(30);
        let blind = || crate::judge::finding::blind("lab", t(10), allowed);
        let events = book.observe_blind("lab", Some(blind()), t(41));
        assert_eq!(events.len(), 1, "{events:?}");
        let i = &events[0].incident;
        assert_eq!(events[0].kind, incident::EventKind::Opened);
        assert_eq!(i.kind, FindingKind::WatchdogBlind);
        assert_eq!(i.severity, Severity::Critical);
        assert_eq!(i.started_at, t(10));
        assert_eq!(i.dedup_key, "kafka-watchdog/lab/cluster/watchdog_blind");
        assert!(
            i.summary.starts_with(&format!(
                "the watchdog is blind for cluster lab since {}: ",
                crate::model::time::rfc3339(t(10))
            )),
            "{}",
            i.summary
        );
        assert!(book.observe_blind("lab", Some(blind()), t(46)).is_empty());
        // A round (the loop's first after it came back) does not resolve it, nor the
        // broker's incident.
        let events = book.observe("lab", vec![zombie()], Hysteresis::default(), t(50));
        assert!(events.is_empty(), "{events:?}");
        let events = book.observe_blind("lab", None, t(52));
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].kind, incident::EventKind::Resolved);
        assert_eq!(events[0].incident.kind, FindingKind::WatchdogBlind);
        assert_eq!(events[0].incident.resolved_at, Some(t(52)));
        assert_eq!(book.open_incidents().len(), 1, "the broker's stays open");
        assert!(book.observe_blind("lab", None, t(57)).is_empty());
    }

    #[test]
    fn an_acks1_record_truncated_at_an_ordinary_leader_change_pages_no_one() {
        // The old leader acknowledged one acks=1 record just before it handed leadership
        // over; the new leader never had it. That is what acks=1 means.
        let mut rounds = vec![vec![loss(7, Acks::One, 1, "overwritten")]];
        rounds.extend((0..70).map(|_| Vec::new()));
        let events = run(rounds);
        assert!(events.is_empty(), "{events:#?}");
    }

    fn opened(events: &[incident::IncidentEvent]) -> Vec<(FindingKind, Severity, Vec<BrokerId>)> {
        events
            .iter()
            .filter(|e| e.kind == incident::EventKind::Opened)
            .map(|e| {
                (
                    e.incident.kind,
                    e.incident.severity,
                    e.incident.suspects.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn one_acks1_record_per_partition_or_broker_at_a_leader_change_is_not_a_finding() {
        // Two brokers hand over their partitions in one round, one of them leading two:
        // each loses the last acks=1 record of each partition.
        let mut rounds = vec![vec![
            on(0, 3, Acks::One, 1, "overwritten"),
            on(1, 3, Acks::One, 1, "skipped"),
            on(2, 4, Acks::One, 2, "truncated"),
        ]];
        rounds.extend((0..5).map(|_| Vec::new()));
        let events = run(rounds);
        assert!(events.is_empty(), "{events:#?}");
    }

    #[test]
    fn a_leader_losing_acks1_records_round_after_round_is_named_as_a_warning() {
        // Incident 3: the isolated leader acknowledges the probe's record every round; each
        // expires as a stale leader's acknowledgement.
        let mut rounds: Vec<Vec<LossEvent>> = (1..=4)
            .map(|seq| vec![loss(seq, Acks::One, 1, "stale_leader")])
            .collect();
        rounds.extend((0..70).map(|_| Vec::new()));
        let events = run(rounds);
        assert_eq!(
            opened(&events),
            vec![(FindingKind::Acks1Loss, Severity::Warning, vec![1])]
        );
        let open = &events[0].incident;
        assert!(
            open.evidence.iter().all(|e| e.contains("(acks=1)")),
            "{open:#?}"
        );
        assert!(open.summary.contains("broker 1"), "{}", open.summary);
        assert!(
            open.summary.contains("newer leader epoch"),
            "{}",
            open.summary
        );
        let resolved = events
            .iter()
            .find(|e| e.kind == incident::EventKind::Resolved)
            .expect("resolves once the losses stop");
        // Last loss at 30 s; gone from the finding after ACKS1_LOSS_ROUNDS rounds, then
        // resolved after the hysteresis: a minute, not ten.
        assert!(resolved.at <= t(100), "{:?}", resolved.at);
    }

    #[test]
    fn acks1_records_found_lost_at_once_after_a_heal_are_named() {
        // The isolated leader's records found overwritten in one round once it rejoined.
        let mut rounds = vec![(10..15)
            .map(|seq| loss(seq, Acks::One, 1, "overwritten"))
            .collect::<Vec<_>>()];
        rounds.extend((0..10).map(|_| Vec::new()));
        assert_eq!(
            opened(&run(rounds)),
            vec![(FindingKind::Acks1Loss, Severity::Warning, vec![1])]
        );
    }

    #[test]
    fn an_acks_all_loss_is_still_a_critical_acknowledged_loss() {
        let mut rounds = vec![vec![
            loss(5, Acks::All, 2, "truncated"),
            loss(6, Acks::One, 3, "overwritten"),
        ]];
        rounds.extend((0..3).map(|_| Vec::new()));
        let events = run(rounds);
        assert_eq!(
            opened(&events),
            vec![(FindingKind::AcknowledgedLoss, Severity::Critical, vec![2])]
        );
        assert!(events[0].incident.evidence[0].contains("(acks=all)"));
    }

    fn charged_round(charged_to: Option<Vec<BrokerId>>, received: Option<BrokerId>) -> CanaryRound {
        CanaryRound {
            topic: "c".into(),
            status: TopicStatus::Ready,
            partitions: vec![PartitionRound {
                partition: 0,
                leader: 2,
                leader_epoch: 3,
                replicas: vec![1, 2, 3],
                isr: vec![2, 3],
                produce: None,
                produce_seconds: None,
                produce_error: Some(ProduceFailure {
                    kind: "timeout",
                    detail: "test".into(),
                    broker: received,
                }),
                end_to_end_seconds: Vec::new(),
                unavailable_seconds: Some(3.5),
                unavailable_broker: received,
                overdue: 0,
                writes: 1,
                failed_writes: Vec::new(),
                charged_to,
            }],
            layout: Vec::new(),
            not_leading: Vec::new(),
            lost: Vec::new(),
            duplicated: Vec::new(),
            windows_closed: Vec::new(),
            acks1: Vec::new(),
        }
    }

    fn unavailable(r: &CanaryRound) -> Finding {
        canary_findings(
            "lab",
            r,
            &mut CanaryMemory::default(),
            Duration::from_secs(10),
            SystemTime::now(),
        )
        .into_iter()
        .find(|f| f.key.kind == FindingKind::CanaryUnavailable)
        .expect("a canary_unavailable finding")
    }

    #[test]
    fn an_unwritable_canary_partition_names_whom_the_write_is_charged_to() {
        // Written on the client's stale metadata to the old leader 1, which timed out:
        // broker 1, not the view's new leader 2 (issue 14: "broker 2" was named).
        let f = unavailable(&charged_round(Some(vec![1]), Some(1)));
        assert_eq!(f.suspects, vec![1]);
        assert!(
            f.evidence[0].contains("timeout at broker 1, where the client's metadata sent it"),
            "{:?}",
            f.evidence
        );
        // A failure of the client's own names nobody.
        assert!(unavailable(&charged_round(Some(vec![]), None))
            .suspects
            .is_empty());
        // A follower decided to be the cause of an acks=all timeout is named, not the leader.
        assert_eq!(
            unavailable(&charged_round(Some(vec![3]), Some(2))).suspects,
            vec![3]
        );
        // Not decided (no verdict ran): the leader, as before.
        assert_eq!(unavailable(&charged_round(None, Some(2))).suspects, vec![2]);
    }
}
