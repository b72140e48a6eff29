//! The daemon: bind the HTTP listener, run one round loop per cluster, stop cleanly on
//! SIGTERM or SIGINT. Things that take requests start before things that send them and
//! stop after them; signals arrive as [`Control`]s.

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
use crate::http;
use crate::liveness::{Board, Liveness, LivenessSettings};
use crate::probe::ClusterProber;
use crate::remediate::Remediator;
use crate::report::{ClusterReport, Evaluator};
use crate::service::{self, LoopHealth, StatusCounts};
use crate::snapshot::Publisher;
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
    published: Arc<Publisher>,
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
    let live_wire = settings.wire.clone();
    let look_wire = settings.wire.clone();
    let mut prober = ClusterProber::new(settings);
    let mut evaluator = Evaluator::new(
        &cfg.name,
        setup::verdict_settings(&cfg),
        setup::topic_filter(&cfg),
    );
    let mut canary = cfg.canary.enabled.then(|| {
        Canary::new(
            setup::canary_settings(&cfg, &instance, wire),
            published.live.canary.clone(),
        )
    });
    let mut host = cfg.host.clone().map(HostObserver::new);
    let mut remediator = remediator(&cfg, &published, &alerting);
    if let Some(notice) = cfg.verdict.deprecation(&cfg.name) {
        tracing::warn!("{notice}");
    }
    let mut liveness = (!cfg.verdict.liveness_interval.is_zero()).then(|| {
        Liveness::new(LivenessSettings {
            interval: cfg.verdict.liveness_interval,
            floor: cfg.verdict.liveness_floor,
            wire: live_wire,
        })
    });
    let board = liveness.as_ref().map(Liveness::board);
    // While a broker is silent its evidence ages: the verdict is made again this often even
    // without news, so that confirmation by duration sees it hold.
    let tick = cfg
        .verdict
        .liveness_interval
        .max(Duration::from_millis(200));
    // The last round's report, for re-evaluations until the next round.
    let mut last: Option<Arc<ClusterReport>> = None;
    let limit = round_limit(&cfg);
    let mut next = tokio::time::Instant::now();
    loop {
        let round = {
            let round = tokio::time::timeout(limit, async {
                hang_round_for_tests().await;
                one_round(&mut prober, canary.as_mut(), host.as_mut()).await
            });
            tokio::pin!(round);
            loop {
                tokio::select! {
                    r = &mut round => break r,
                    _ = news(board.as_deref(), tick) => {
                        decide_refusals(&mut evaluator, board.as_deref(), last.as_deref(), &look_wire).await;
                        reassess(&cfg, &mut evaluator, board.as_deref(), &mut last, &alerting, &published);
                    }
                    _ = shutdown.changed() => return,
                }
            }
        };
        match round {
            Ok((mut obs, view, canary_round)) => {
                if let (Some(l), Some(b)) = (liveness.as_mut(), board.as_deref()) {
                    l.track(obs.probes.values().map(|p| &p.endpoint));
                    obs.liveness = b.snapshot();
                }
                let now = SystemTime::now();
                let report = evaluator.evaluate_merged(obs, view, canary_round, now);
                log_round(&report);
                alerting.after_round(&cfg, &report, now);
                if let Some(r) = remediator.as_mut() {
                    r.after_round(&report, now);
                }
                let report = Arc::new(report);
                last = Some(report.clone());
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
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(next) => break,
                _ = news(board.as_deref(), tick) => {
                    decide_refusals(&mut evaluator, board.as_deref(), last.as_deref(), &look_wire).await;
                    reassess(&cfg, &mut evaluator, board.as_deref(), &mut last, &alerting, &published);
                }
                _ = shutdown.changed() => return,
            }
        }
    }
}

/// A port refused after the last round: whether the broker stopped cleanly (Kafka's
/// controlled shutdown moves its leaderships away first) or crashed decides whether to page
/// now. The brokers that answer are asked who leads what at once, on connections of their
/// own, apart from the round: with a leader gone the canary's part of a round can take a
/// whole request timeout. Bounded by the probes' own deadlines.
async fn decide_refusals(
    evaluator: &mut Evaluator,
    board: Option<&Board>,
    last: Option<&ClusterReport>,
    wire: &crate::wire::WireOptions,
) {
    let (Some(board), Some(last)) = (board, last) else {
        return;
    };
    let facts = board.snapshot();
    let refused = evaluator.refusals_to_decide(&facts, last.started_at);
    if refused.is_empty() {
        return;
    }
    let now = SystemTime::now();
    // Three answering peers: a majority to merge even when one is behind.
    let peers: Vec<_> = last
        .probes
        .iter()
        .filter(|(id, _)| facts.get(id).is_some_and(|f| f.answering(now)))
        .map(|(_, p)| p.endpoint.clone())
        .take(3)
        .collect();
    let at = SystemTime::now();
    let probes: std::collections::BTreeMap<_, _> = futures::future::join_all(
        peers
            .into_iter()
            .map(|e| crate::probe::probe_broker(e, wire, None)),
    )
    .await
    .into_iter()
    .map(|p| (p.endpoint.id, p))
    .collect();
    evaluator.note_refusals(at, &probes, &refused);
}

/// Returns when a broker's liveness changed, or after `tick` while some broker is silent.
/// Never without liveness.
async fn news(board: Option<&Board>, tick: Duration) {
    let Some(board) = board else {
        return std::future::pending().await;
    };
    let ageing = async {
        loop {
            tokio::time::sleep(tick).await;
            if board.any_silent() {
                return;
            }
        }
    };
    tokio::select! {
        _ = board.changed() => {}
        _ = ageing => {}
    }
}

/// The last round's verdicts made again with the liveness facts of now, published, and
/// handed to the incident book: a silent broker is named within its threshold, not at
/// the next round.
fn reassess(
    cfg: &ClusterConfig,
    evaluator: &mut Evaluator,
    board: Option<&Board>,
    last: &mut Option<Arc<ClusterReport>>,
    alerting: &Alerting,
    published: &Publisher,
) {
    let (Some(board), Some(prev)) = (board, last.as_ref()) else {
        return;
    };
    let now = SystemTime::now();
    let report = evaluator.reassess(prev, board.snapshot(), now);
    let states =
        |r: &ClusterReport| -> Vec<_> { r.verdicts.iter().map(|v| (v.broker, v.state)).collect() };
    let changed = states(&report) != states(prev);
    if changed {
        log_round(&report);
    }
    alerting.after_reassess(cfg, &report, now);
    let report = Arc::new(report);
    *last = Some(report.clone());
    published.publish(report);
}

/// The cluster's remediator, when a broker of it has remediation enabled. A history that
/// cannot be read disables remediation for the cluster: acting without knowing what was
/// done before would ignore the cool-down and the daily limit.
fn remediator(
    cfg: &ClusterConfig,
    published: &Arc<Publisher>,
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
        published.live.remediation.clone(),
        sink,
    ) {
        Ok(r) => {
            let (silences, cluster) = (alerting.clone(), cfg.name.clone());
            let (book, name) = (alerting.clone(), cfg.name.clone());
            Some(
                r.with_silences(Arc::new(move |broker, now| {
                    silences.remediation_silenced(&cluster, broker, now)
                }))
                .with_confirmation(Arc::new(move |broker| book.confirmed_state(&name, broker))),
            )
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
    published: Arc<Publisher>,
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
    published: Arc<Publisher>,
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
        let snapshot = published.current();
        let line = StatusCounts::from_reports(snapshot.clusters.len(), snapshot.reports()).line();
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
            loops.published.reload_done(false);
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
    if !plan.remove_clusters.is_empty() {
        loops.alerting.retain_clusters(&names);
    }
    loops.alerting.set_config_silences(applied.silences.clone());
    // After alerting dropped the removed clusters' incidents: the snapshot reads them.
    loops.published.set_clusters(&names);
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
    // Also shows what the reload changed in alerting (incidents of removed clusters,
    // configured silences).
    loops.published.reload_done(true);
    service::ready();
    applied
}

/// What a signal asks of the daemon. Signals are turned into these at the edge, so the rest
/// matches on meaning rather than on numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// SIGHUP: read the configuration file again.
    Reload,
    /// SIGTERM or SIGINT: drain and stop; a second one while draining stops at once.
    Stop,
}

impl Control {
    pub fn from_signal(signal: i32) -> Option<Control> {
        match signal {
            SIGHUP => Some(Control::Reload),
            SIGTERM | SIGINT => Some(Control::Stop),
            _ => None,
        }
    }
}

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drained {
    /// Everything stopped in order.
    Clean,
    /// A second stop asked to exit at once.
    Forced,
    /// It took longer than the limit.
    TimedOut,
}

/// Waits for `work` (the drain), for at most `limit`; another `Stop` ends the wait at once.
/// A `Reload` is not applied (the configuration is on its way out) and does not end it.
async fn drain(
    work: impl std::future::Future<Output = ()>,
    controls: &mut (impl futures::Stream<Item = Control> + Unpin),
    limit: Duration,
) -> Drained {
    tokio::pin!(work);
    let deadline = tokio::time::sleep(limit);
    tokio::pin!(deadline);
    let mut open = true;
    loop {
        tokio::select! {
            _ = &mut work => return Drained::Clean,
            c = controls.next(), if open => match c {
                Some(Control::Stop) => return Drained::Forced,
                Some(Control::Reload) => {
                    tracing::info!("SIGHUP while stopping: not reloading, the drain goes on");
                }
                None => open = false,
            },
            _ = &mut deadline => return Drained::TimedOut,
        }
    }
}

/// Runs the daemon until SIGTERM or SIGINT; SIGHUP reloads `path`. A second stop signal
/// exits at once. `log_level` changes the log level of the running process.
///
/// Everything that can fail is done before anything starts (bind, state directory, the
/// HTTPS certificate, signal handlers), so a failed start leaves nothing running and
/// nothing written. Then: alerting, the HTTP server, the cluster loops, the supervisor;
/// things that take requests start before things that send them, and stop after them.
pub async fn run(
    config: Config,
    path: std::path::PathBuf,
    log_level: Box<dyn Fn(crate::config::LogLevel) + Send + Sync>,
) -> anyhow::Result<()> {
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
    // Certificates are read again here (the configuration check read them too): a file
    // replaced since is found now, before alerting has started.
    let http_options = http::ServeOptions::from_config(&config)
        .map_err(|e| anyhow::anyhow!("cannot serve HTTPS: http.tls.{e}"))?;
    let mut controls = Signals::new([SIGTERM, SIGINT, SIGHUP])?
        .filter_map(|s| std::future::ready(Control::from_signal(s)));

    // Start, in order. Nothing below fails; the last fallible step (alerting) starts first.
    let names: Vec<String> = config.clusters.iter().map(|c| c.name.clone()).collect();
    let published = Publisher::new(&config.instance_id, names);
    let alerting = Arc::new(Alerting::start(&config).map_err(|e| match e {
        crate::alerting::AlertingError::StateDir { path, error } => {
            anyhow::Error::new(preflight::StartupError::StateDir {
                path: path.into(),
                why: format!("not usable: {error} (expected a directory this user can create and write; under systemd, StateDirectory=kafka-watchdog provides /var/lib/kafka-watchdog)"),
            })
        }
        other => other.into(),
    })?);
    published.attach_alerting(alerting.clone());
    let (server_stop, server_stop_rx) = watch::channel(false);
    let server = tokio::spawn(http::serve_with(
        listener,
        published.clone(),
        server_stop_rx,
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
    let (supervisor_stop, supervisor_stop_rx) = watch::channel(false);
    let supervisor = tokio::spawn(supervise(health, published.clone(), supervisor_stop_rx));
    // Ready once serving: reporting an unhealthy Kafka is the job, not a reason to wait.
    service::ready();
    tracing::info!(listen = %config.http_listen, clusters = config.clusters.len(), "kafka-watchdog serving");

    let mut running = config;
    while let Some(control) = controls.next().await {
        match control {
            Control::Reload => {
                tracing::info!(file = %path.display(), "SIGHUP: reloading the configuration");
                running = reload(&path, running, &mut loops, log_level.as_ref()).await;
            }
            Control::Stop => {
                tracing::info!("shutting down");
                break;
            }
        }
    }

    // Stop, in the reverse order.
    service::stopping();
    let stopped = async {
        let _ = supervisor_stop.send(true);
        let _ = supervisor.await;
        // The loops' last events reach alerting, and their last reports the HTTP server,
        // which both still run.
        loops.stop_all().await;
        let _ = server_stop.send(true);
        let _ = server.await;
        // Whatever is not delivered by then stays in the spool for the next start.
        alerting.shutdown(Duration::from_secs(5)).await;
    };
    let started = Instant::now();
    match drain(stopped, &mut controls, Duration::from_secs(10)).await {
        Drained::Clean => tracing::info!(ms = started.elapsed().as_millis() as u64, "stopped"),
        Drained::Forced => tracing::warn!("second stop signal: exiting at once"),
        Drained::TimedOut => tracing::warn!("shutdown took over 10 s: exiting"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_controls() {
        assert_eq!(Control::from_signal(SIGHUP), Some(Control::Reload));
        assert_eq!(Control::from_signal(SIGTERM), Some(Control::Stop));
        assert_eq!(Control::from_signal(SIGINT), Some(Control::Stop));
        assert_eq!(Control::from_signal(signal_hook::consts::SIGUSR1), None);
    }

    /// A drain that ends after `after`.
    async fn drain_taking(after: Duration, controls: Vec<Control>) -> (Drained, Duration) {
        let started = tokio::time::Instant::now();
        let mut controls = futures::stream::iter(controls).chain(futures::stream::pending());
        let ended = drain(
            tokio::time::sleep(after),
            &mut controls,
            Duration::from_secs(10),
        )
        .await;
        (ended, started.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn a_reload_asked_while_draining_does_not_cut_the_drain_short() {
        let (ended, took) = drain_taking(Duration::from_secs(3), vec![Control::Reload]).await;
        assert_eq!(ended, Drained::Clean);
        assert_eq!(took, Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_stop_ends_the_drain_at_once() {
        let (ended, took) =
            drain_taking(Duration::from_secs(3), vec![Control::Reload, Control::Stop]).await;
        assert_eq!(ended, Drained::Forced);
        assert_eq!(took, Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_that_outlives_its_limit_is_cut() {
        let (ended, took) = drain_taking(Duration::from_secs(60), vec![]).await;
        assert_eq!(ended, Drained::TimedOut);
        assert_eq!(took, Duration::from_secs(10));
    }

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("kw-daemon-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A certificate that was fine when the configuration was read and is not by the time
    /// the server starts (replaced, truncated): found after the configuration, at start.
    #[tokio::test]
    async fn a_start_that_fails_has_started_nothing() {
        let dir = temp_dir("failed-start");
        let state = dir.join("state");
        let yaml = format!(
            "http:\n  listen: 127.0.0.1:0\nstate_dir: {}\nclusters:\n  - name: lab\n    bootstrap_servers: [127.0.0.1:1]\nwebhooks:\n  - name: ops\n    url: http://127.0.0.1:1/hook\n",
            state.display()
        );
        let mut config = crate::config::parse(&yaml, "test.yaml").unwrap();
        std::fs::write(dir.join("cert.pem"), "not a certificate").unwrap();
        config.http_tls = Some(crate::config::HttpTlsConfig {
            cert_file: dir.join("cert.pem"),
            key_file: dir.join("cert.pem"),
        });
        let err = run(config, dir.join("test.yaml"), Box::new(|_| {}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("cannot serve HTTPS"), "{err}");
        // Alerting is what writes there (its spools); it must not have been started, or have
        // been stopped again.
        let left: Vec<_> = std::fs::read_dir(&state)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(
            left.is_empty(),
            "the failed start left {left:?} in the state directory"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
