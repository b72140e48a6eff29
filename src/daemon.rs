//! The daemon: bind the HTTP listener, run one round loop per cluster, stop cleanly on
//! SIGTERM or SIGINT. Things that take requests start before things that send them.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook_tokio::Signals;
use tokio::sync::watch;

use crate::alerting::Alerting;
use crate::canary::{Canary, CanaryRound};
use crate::config::{ClusterConfig, Config};
use crate::host::HostObserver;
use crate::http::{self, Published};
use crate::probe::ClusterProber;
use crate::remediate::Remediator;
use crate::report::{ClusterReport, Evaluator};
use crate::service::{self, LoopHealth, StatusCounts};
use crate::{preflight, reload, setup};

/// A round may overrun its deadlines by this much before it is abandoned.
const ROUND_SLACK: Duration = Duration::from_secs(5);

/// The longest one round can legitimately take: connect plus the requests of one broker
/// (all brokers are probed at once), plus the min.insync.replicas read, plus slack.
fn round_limit(c: &ClusterConfig) -> Duration {
    let canary = if c.canary.enabled {
        // Layout change and re-reads after leader changes; the writes run apart from the
        // round and never hold it.
        c.canary.produce_timeout * 4 + Duration::from_secs(1)
    } else {
        Duration::ZERO
    };
    c.connect_timeout * 2 + c.request_timeout * 6 + canary + ROUND_SLACK
}

/// Runs rounds of one cluster until `shutdown`, publishing each report.
pub async fn cluster_loop(
    cfg: ClusterConfig,
    instance: String,
    published: Arc<Published>,
    alerting: Arc<Alerting>,
    health: Arc<Mutex<LoopHealth>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let settings = match setup::probe_settings(&cfg) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(cluster = %cfg.name, error = %e, "cluster not watched");
            // A loop that ended on purpose must not hold back the systemd watchdog.
            lock(&health).unwatch(&cfg.name);
            return;
        }
    };
    let wire = settings.wire.clone();
    let mut prober = ClusterProber::new(settings);
    let mut evaluator = Evaluator::new(
        &cfg.name,
        setup::verdict_settings(&cfg),
        setup::topic_filter(&cfg),
    );
    let mut canary = cfg.canary.enabled.then(|| {
        Canary::new(
            setup::canary_settings(&cfg, &instance, wire),
            published.canary_stats.clone(),
        )
    });
    let mut host = cfg.host.clone().map(HostObserver::new);
    let mut remediator = remediator(&cfg, &published, &alerting);
    let limit = round_limit(&cfg);
    let mut next = tokio::time::Instant::now();
    loop {
        let round = tokio::select! {
            r = tokio::time::timeout(limit, async {
                hang_round_for_tests().await;
                one_round(&mut prober, canary.as_mut(), host.as_mut()).await
            }) => r,
            _ = shutdown.changed() => return,
        };
        match round {
            Ok((obs, view, canary_round)) => {
                let now = SystemTime::now();
                let report = evaluator.evaluate_merged(obs, view, canary_round, now);
                log_round(&report);
                alerting.after_round(&cfg, &report, now);
                if let Some(r) = remediator.as_mut() {
                    r.after_round(&report, now);
                }
                published.publish(report);
                // Only a round that published counts as progress for the systemd watchdog:
                // an abandoned one updated nothing that anyone reads, and a loop whose rounds
                // are all abandoned must be restarted like a loop that hangs.
                lock(&health).round_completed(&cfg.name, Instant::now());
            }
            Err(_) => tracing::error!(
                cluster = %cfg.name,
                limit_secs = limit.as_secs(),
                "round abandoned: it outlived every deadline; nothing published, and it does not count as progress for the systemd watchdog"
            ),
        }
        stall_for_tests(&mut shutdown).await;
        // Rounds start on a fixed cadence; a round that overran starts the next one at once.
        next += cfg.round_interval;
        let now = tokio::time::Instant::now();
        if next < now {
            next = now;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// The cluster's remediator, when a broker of it has remediation enabled. A history that
/// cannot be read disables remediation for the cluster: acting without knowing what was
/// done before would ignore the cool-down and the daily limit.
fn remediator(
    cfg: &ClusterConfig,
    published: &Arc<Published>,
    alerting: &Arc<Alerting>,
) -> Option<Remediator> {
    let host = cfg.host.clone()?;
    if !host
        .brokers
        .iter()
        .any(|b| b.remediation.as_ref().is_some_and(|r| r.enabled))
    {
        return None;
    }
    let sink_alerting = alerting.clone();
    let sink: crate::remediate::Sink = Arc::new(move |r| sink_alerting.remediation(r));
    match Remediator::new(
        &cfg.name,
        host,
        alerting.state_dir().join("remediation"),
        published.remediation.clone(),
        sink,
    ) {
        Ok(r) => {
            let (silences, cluster) = (alerting.clone(), cfg.name.clone());
            Some(r.with_silences(Arc::new(move |broker, now| {
                silences.remediation_silenced(&cluster, broker, now)
            })))
        }
        Err(e) => {
            tracing::error!(cluster = %cfg.name, error = %e, "remediation disabled for this cluster");
            None
        }
    }
}

/// Debug builds only: `KAFKA_WATCHDOG_TEST_STALL=1` makes every round loop hang after its
/// round, so a test can show that a stuck loop stops the systemd watchdog pings. Release
/// builds never read the variable.
async fn stall_for_tests(shutdown: &mut watch::Receiver<bool>) {
    if cfg!(debug_assertions) && std::env::var_os("KAFKA_WATCHDOG_TEST_STALL").is_some() {
        let _ = shutdown.changed().await;
    }
}

/// Debug builds only: `KAFKA_WATCHDOG_TEST_HANG_ROUND=1` makes every round hang until its
/// time limit abandons it, so a test can show that abandoned rounds are not progress.
/// Release builds never read the variable.
async fn hang_round_for_tests() {
    if cfg!(debug_assertions) && std::env::var_os("KAFKA_WATCHDOG_TEST_HANG_ROUND").is_some() {
        std::future::pending::<()>().await;
    }
}

/// Direct probes (and, in host mode, the look at the local brokers' processes at the same
/// moment), merged once into the round's view, then the canary brought up to date with it
/// (its writes run continuously, apart from the round).
async fn one_round(
    prober: &mut ClusterProber,
    canary: Option<&mut Canary>,
    host: Option<&mut HostObserver>,
) -> (
    crate::observe::RoundObservation,
    Arc<crate::cluster_view::ClusterView>,
    Option<CanaryRound>,
) {
    let obs = match host {
        Some(h) => {
            let (mut obs, seen) = futures::join!(prober.round(), h.observe());
            obs.host = seen;
            obs
        }
        None => prober.round().await,
    };
    let view = Arc::new(crate::report::newest_view(&obs));
    let canary_round = match canary {
        Some(c) => {
            let canary_view = crate::canary::view_from(&obs, &view, &c.topic());
            Some(c.round(&canary_view).await)
        }
        None => None,
    };
    (obs, view, canary_round)
}

fn log_round(r: &ClusterReport) {
    use crate::canary::TopicStatus;
    if let Some(c) = &r.canary {
        let (state, detail) = match &c.status {
            TopicStatus::Ready => ("ready", None),
            TopicStatus::Missing(d) => ("missing", Some(d)),
            TopicStatus::NotPermitted(d) => ("not_permitted", Some(d)),
            TopicStatus::Broken(d) => ("broken", Some(d)),
        };
        if let Some(detail) = detail {
            tracing::warn!(cluster = %r.cluster, topic = %c.topic, state, %detail, "canary not running; the other checks go on");
        }
    }
    for (address, f) in &r.bootstrap_failures {
        tracing::warn!(
            cluster = %r.cluster,
            address = %address,
            kind = f.kind.as_label(),
            detail = %f.detail,
            "bootstrap server failed and no broker is known yet"
        );
    }
    for v in &r.verdicts {
        if v.state != crate::verdict::BrokerState::Healthy {
            let evidence: Vec<String> = v
                .hits
                .iter()
                .map(|h| format!("{}: {}", h.rule, h.detail))
                .collect();
            tracing::warn!(
                cluster = %r.cluster,
                broker = v.broker,
                state = v.state.as_label(),
                evidence = %evidence.join("; "),
                "broker not healthy"
            );
        }
    }
    tracing::debug!(
        cluster = %r.cluster,
        round = r.round,
        duration_ms = r.duration.as_millis() as u64,
        partitions = r.health.partitions,
        "round complete"
    );
}

/// The running cluster loops, each with its own stop switch so a reload can restart one.
struct Loops {
    running: std::collections::BTreeMap<String, (tokio::task::JoinHandle<()>, watch::Sender<bool>)>,
    health: Arc<Mutex<LoopHealth>>,
    published: Arc<Published>,
    alerting: Arc<Alerting>,
    instance_id: String,
}

impl Loops {
    fn start(&mut self, cfg: ClusterConfig) {
        let (tx, rx) = watch::channel(false);
        lock(&self.health).watch(
            &cfg.name,
            cfg.round_interval,
            round_limit(&cfg),
            Instant::now(),
        );
        let name = cfg.name.clone();
        let handle = tokio::spawn(cluster_loop(
            cfg,
            self.instance_id.clone(),
            self.published.clone(),
            self.alerting.clone(),
            self.health.clone(),
            rx,
        ));
        self.running.insert(name, (handle, tx));
    }

    async fn stop(&mut self, name: &str) {
        lock(&self.health).unwatch(name);
        if let Some((handle, tx)) = self.running.remove(name) {
            let _ = tx.send(true);
            let _ = handle.await;
        }
    }

    async fn stop_all(&mut self) {
        let names: Vec<String> = self.running.keys().cloned().collect();
        for (_, (_, tx)) in self.running.iter() {
            let _ = tx.send(true);
        }
        for name in names {
            self.stop(&name).await;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sends WATCHDOG=1 while every cluster loop makes progress, and STATUS= when the summary
/// changes. Without a systemd watchdog it only keeps STATUS= current.
async fn supervise(
    health: Arc<Mutex<LoopHealth>>,
    published: Arc<Published>,
    mut shutdown: watch::Receiver<bool>,
) {
    let interval = service::watchdog_interval()
        .map(|wd| wd / 2)
        .unwrap_or(Duration::from_secs(5));
    let mut last_status = String::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => return,
        }
        let now = Instant::now();
        if service::watchdog_interval().is_some() {
            let h = lock(&health);
            if h.should_ping(now) {
                service::watchdog_ping();
            } else {
                let stalled: Vec<String> = h
                    .stalled(now)
                    .iter()
                    .map(|(c, d)| format!("{c} ({} s)", d.as_secs()))
                    .collect();
                tracing::error!(stalled = %stalled.join(", "), "a round loop makes no progress: withholding the systemd watchdog ping");
            }
        }
        let reports = published.snapshot();
        let expected = published
            .expected
            .read()
            .map(|e| e.len())
            .unwrap_or_default();
        let line = StatusCounts::from_reports(expected, reports.iter().map(|r| r.as_ref())).line();
        if line != last_status {
            service::status(&line);
            last_status = line;
        }
    }
}

/// Applies a new configuration file: validated first; a bad file keeps the running
/// configuration. Returns the configuration now running.
async fn reload(
    path: &std::path::Path,
    running: Config,
    loops: &mut Loops,
    log_level: &dyn Fn(crate::config::LogLevel),
) -> Config {
    service::reloading();
    let new = match crate::config::load(path) {
        Ok(c) => c,
        Err(e) => {
            for line in e.to_string().lines() {
                tracing::error!(problem = %line, "reload refused: the running configuration stays");
            }
            loops
                .published
                .reload_success
                .store(false, std::sync::atomic::Ordering::Relaxed);
            service::ready();
            return running;
        }
    };
    let plan = reload::plan(&running, &new);
    for line in &plan.not_applied {
        tracing::warn!(setting = %line, "not applied by a reload");
    }
    for name in plan.remove_clusters.iter().chain(&plan.restart_clusters) {
        loops.stop(name).await;
    }
    let applied = reload::applied(&running, new);
    for name in plan.restart_clusters.iter().chain(&plan.add_clusters) {
        if let Some(c) = applied.cluster(name) {
            loops.start(c.clone());
        }
    }
    let names: Vec<String> = applied.clusters.iter().map(|c| c.name.clone()).collect();
    loops.published.retain_clusters(&names);
    if !plan.remove_clusters.is_empty() {
        loops.alerting.retain_clusters(&names);
    }
    loops.alerting.set_config_silences(applied.silences.clone());
    if plan.webhooks_changed {
        if let Err(e) = loops.alerting.reconfigure(&applied).await {
            tracing::error!(error = %e, "webhooks not reconfigured; the previous receivers stay");
        }
    }
    if let Some(level) = plan.log_level {
        log_level(level);
    }
    tracing::info!(
        changed = plan.changed.len(),
        restarted = ?plan.restart_clusters,
        added = ?plan.add_clusters,
        removed = ?plan.remove_clusters,
        "configuration reloaded"
    );
    loops
        .published
        .reload_success
        .store(true, std::sync::atomic::Ordering::Relaxed);
    service::ready();
    applied
}

/// Runs the daemon until SIGTERM or SIGINT; SIGHUP reloads `path`. A second stop signal
/// exits at once. `log_level` changes the log level of the running process.
pub async fn run(
    config: Config,
    path: std::path::PathBuf,
    log_level: Box<dyn Fn(crate::config::LogLevel) + Send + Sync>,
) -> anyhow::Result<()> {
    let names: Vec<String> = config.clusters.iter().map(|c| c.name.clone()).collect();
    let published = Published::new(&config.instance_id, names);
    // Failures the configuration causes on this machine are typed (preflight::StartupError),
    // so main exits 78 and systemd stops restarting: another try would meet the same port
    // holder or the same file.
    let listener =
        http::bind(config.http_listen).await.map_err(|e| {
            match preflight::listen_error(config.http_listen, &e) {
                Some(startup) => anyhow::Error::new(startup),
                None => anyhow::anyhow!("cannot listen on {}: {e}", config.http_listen),
            }
        })?;
    if let Some(e) = preflight::state_dir_shape(&config.state_dir) {
        return Err(e.into());
    }
    let alerting = Arc::new(Alerting::start(&config).map_err(|e| match e {
        crate::alerting::AlertingError::StateDir { path, error } => {
            anyhow::Error::new(preflight::StartupError::StateDir {
                path: path.into(),
                why: format!("not usable: {error} (expected a directory this user can create and write; under systemd, StateDirectory=kafka-watchdog provides /var/lib/kafka-watchdog)"),
            })
        }
        other => other.into(),
    })?);
    let _ = published.alerting.set(alerting.clone());
    let (stop_tx, stop_rx) = watch::channel(false);
    let http_options = http::ServeOptions::from_config(&config)
        .map_err(|e| anyhow::anyhow!("cannot serve HTTPS: http.tls.{e}"))?;
    let server = tokio::spawn(http::serve_with(
        listener,
        published.clone(),
        stop_rx.clone(),
        http_options,
    ));
    let health = Arc::new(Mutex::new(LoopHealth::new()));
    let mut loops = Loops {
        running: Default::default(),
        health: health.clone(),
        published: published.clone(),
        alerting: alerting.clone(),
        instance_id: config.instance_id.clone(),
    };
    for c in &config.clusters {
        loops.start(c.clone());
    }
    let supervisor = tokio::spawn(supervise(health, published.clone(), stop_rx.clone()));
    // Ready once serving: reporting an unhealthy Kafka is the job, not a reason to wait.
    service::ready();
    tracing::info!(listen = %config.http_listen, clusters = config.clusters.len(), "kafka-watchdog serving");

    let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    let mut running = config;
    while let Some(sig) = signals.next().await {
        if sig == SIGHUP {
            tracing::info!(file = %path.display(), "SIGHUP: reloading the configuration");
            running = reload(&path, running, &mut loops, log_level.as_ref()).await;
            continue;
        }
        tracing::info!(signal = sig, "shutting down");
        break;
    }
    service::stopping();
    let _ = stop_tx.send(true);
    let drained = async {
        loops.stop_all().await;
        let _ = supervisor.await;
        let _ = server.await;
        // Whatever is not delivered by then stays in the spool for the next start.
        alerting.shutdown(Duration::from_secs(5)).await;
    };
    let started = Instant::now();
    tokio::select! {
        _ = drained => tracing::info!(ms = started.elapsed().as_millis() as u64, "stopped"),
        _ = signals.next() => tracing::warn!("second signal: exiting at once"),
        _ = tokio::time::sleep(Duration::from_secs(10)) => tracing::warn!("shutdown took over 10 s: exiting"),
    }
    Ok(())
}

/// One round of every cluster, at once, for the `check` command.
pub async fn check_once(config: &Config) -> Vec<ClusterReport> {
    let rounds = config.clusters.iter().map(|c| async move {
        let mut evaluator =
            Evaluator::new(&c.name, setup::verdict_settings(c), setup::topic_filter(c));
        let settings = match setup::probe_settings(c) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(cluster = %c.name, error = %e, "cannot check cluster");
                return None;
            }
        };
        let mut prober = ClusterProber::new(settings);
        let mut host = c.host.clone().map(HostObserver::new);
        // Direct probes (and host mode) only: a single canary write proves little, and a
        // check run from cron should not create topics.
        let (obs, view, _) =
            tokio::time::timeout(round_limit(c), one_round(&mut prober, None, host.as_mut()))
                .await
                .ok()?;
        Some(evaluator.evaluate_merged(obs, view, None, SystemTime::now()))
    });
    futures::future::join_all(rounds)
        .await
        .into_iter()
        .flatten()
        .collect()
}
