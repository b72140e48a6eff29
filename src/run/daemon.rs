//! The daemon: bind the HTTP listener, run one round loop per cluster, stop cleanly on
//! SIGTERM or SIGINT. Things that take requests start before things that send them and
//! stop after them; signals arrive as [`Control`]s. Every long-lived task it starts runs
//! supervised (`model::supervise`), and one of them watches the others' progress
//! (`model::progress`): the systemd watchdog, blind clusters' incidents, the heartbeat.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook_tokio::Signals;
use tokio::sync::watch;

use crate::alert::alerting::Alerting;
use crate::config::{ClusterConfig, Config};
use crate::judge::report::ClusterReport;
use crate::model::progress::{Progress, Watched};
use crate::model::round::{BrokerId, LivenessFact, RoundObservation};
use crate::model::supervise::{self, Task};
use crate::observe::liveness::{Liveness, LivenessSettings};
use crate::observe::quorum::QuorumProber;
use crate::observe::wire::WireOptions;
use crate::run::cluster_loop::{cluster_loop, one_round, round_limit};
use crate::run::service::{self, StatusCounts};
use crate::run::{preflight, reload, setup};
use crate::serve::http;
use crate::serve::snapshot::Publisher;

/// The running cluster loops, each with its own stop switch so a reload can restart one.
struct Loops {
    running: std::collections::BTreeMap<String, Running>,
    progress: Arc<Progress>,
    /// The `heartbeat:` block the heartbeat's task beats with; a reload replaces it.
    heartbeat: watch::Sender<Option<crate::config::HeartbeatConfig>>,
    published: Arc<Publisher>,
    alerting: Arc<Alerting>,
    instance_id: String,
}

/// One cluster's loop: its (supervised) task and its stop switch.
struct Running {
    handle: tokio::task::JoinHandle<()>,
    stop: watch::Sender<bool>,
}

impl Loops {
    /// A loop started for every configured cluster.
    fn start_all(config: &Config, published: &Arc<Publisher>, alerting: &Arc<Alerting>) -> Self {
        let mut loops = Loops {
            running: Default::default(),
            progress: published.progress.clone(),
            heartbeat: watch::Sender::new(config.heartbeat.clone()),
            published: published.clone(),
            alerting: alerting.clone(),
            instance_id: config.instance_id.clone(),
        };
        for c in &config.clusters {
            loops.start(c.clone());
        }
        loops
    }

    fn start(&mut self, cfg: ClusterConfig) {
        let (tx, rx) = watch::channel(false);
        let progress = self.progress.watch(
            Watched::ClusterLoop(cfg.name.clone()),
            service::allowed_silence(cfg.timing.round_interval, round_limit(&cfg)),
            Instant::now(),
        );
        let name = cfg.name.clone();
        // Supervised: a loop that ends (a panic) is started again, or its cluster would be
        // watched by nothing from then on, with /metrics showing its last round.
        let (c, instance, published, alerting, stop) = (
            cfg.clone(),
            self.instance_id.clone(),
            self.published.clone(),
            self.alerting.clone(),
            rx.clone(),
        );
        let handle = supervise::spawn_until(Task::ClusterLoop, &name, rx, move || {
            cluster_loop(
                c.clone(),
                instance.clone(),
                published.clone(),
                alerting.clone(),
                progress.clone(),
                stop.clone(),
            )
        });
        self.running.insert(name, Running { handle, stop: tx });
    }

    async fn stop(&mut self, name: &str) {
        self.progress
            .unwatch(&Watched::ClusterLoop(name.to_string()));
        if let Some(r) = self.running.remove(name) {
            let _ = r.stop.send(true);
            let _ = r.handle.await;
        }
    }

    async fn stop_all(&mut self) {
        let names: Vec<String> = self.running.keys().cloned().collect();
        for r in self.running.values() {
            let _ = r.stop.send(true);
        }
        for name in names {
            self.stop(&name).await;
        }
    }
}

/// How long the webhook dispatcher and the HTTP server may go without progress: the
/// longest a cluster's round loop may (tied to the round interval, and never under
/// `service::MIN_ALLOWED_SILENCE`), since neither should ever be slower than a round.
fn own_allowance(config: &Config) -> Duration {
    config
        .clusters
        .iter()
        .map(|c| service::allowed_silence(c.timing.round_interval, round_limit(c)))
        .max()
        .unwrap_or(service::MIN_ALLOWED_SILENCE)
}

/// Watches the progress of alerting's webhook dispatcher (the one running now).
fn watch_dispatcher(published: &Publisher, alerting: &Alerting, allowed: Duration) {
    published
        .progress
        .watch_stamp(Watched::Dispatcher, allowed, alerting.delivery_passes());
}

/// What watches the others' progress (`watch_progress`), supervised too.
fn spawn_supervisor(
    published: &Arc<Publisher>,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let (published, ended) = (published.clone(), stop.clone());
    supervise::spawn_until(Task::Supervisor, "", ended, move || {
        watch_progress(published.clone(), stop.clone())
    })
}

/// The dead man's switch, supervised: beats with the newest `heartbeat:` block while the
/// board `/healthz` reads has nothing stuck, until `stop` (the supervisor's).
fn spawn_heartbeat(
    loops: &Loops,
    published: &Publisher,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let (config, progress, instance) = (
        loops.heartbeat.subscribe(),
        published.progress.clone(),
        published.instance_id.clone(),
    );
    let ended = stop.clone();
    supervise::spawn_until(Task::Heartbeat, "", ended, move || {
        crate::alert::heartbeat::run(
            config.clone(),
            progress.clone(),
            instance.clone(),
            stop.clone(),
        )
    })
}

/// The HTTP server, supervised: an accept loop that ends (a panic) is started again on
/// the same listener.
fn spawn_server(
    listener: tokio::net::TcpListener,
    published: &Arc<Publisher>,
    stop: watch::Receiver<bool>,
    options: http::ServeOptions,
) -> tokio::task::JoinHandle<()> {
    let (listener, published, ended) = (Arc::new(listener), published.clone(), stop.clone());
    supervise::spawn_until(Task::HttpServer, "", ended, move || {
        http::serve_with(
            listener.clone(),
            published.clone(),
            stop.clone(),
            options.clone(),
        )
    })
}

/// Sends WATCHDOG=1 while every watched loop makes progress (the round loops, the webhook
/// dispatcher, the HTTP server: the board `/healthz` reads), tells alerting which clusters
/// it is blind for, and sends STATUS= when the summary changes. Without a systemd watchdog
/// it does the last two.
async fn watch_progress(published: Arc<Publisher>, mut shutdown: watch::Receiver<bool>) {
    let interval = service::watchdog_interval()
        .map(|wd| wd / 2)
        .unwrap_or(Duration::from_secs(5));
    let mut last_status = String::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => return,
        }
        let looks = published.progress.looks(Instant::now());
        tell_blind_clusters(&published, &looks);
        let stuck: Vec<_> = looks.into_iter().filter(|l| l.stuck()).collect();
        if service::watchdog_interval().is_some() {
            if stuck.is_empty() {
                service::watchdog_ping();
            } else {
                let stalled: Vec<String> = stuck
                    .iter()
                    .map(|l| format!("{} ({} s)", l.what, l.silent.as_secs()))
                    .collect();
                tracing::error!(stalled = %stalled.join(", "), "a loop makes no progress: withholding the systemd watchdog ping");
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

/// Tells alerting, for every watched round loop, whether the watchdog sees its cluster:
/// a loop over its allowance opens (or keeps) the cluster's `watchdog_blind` incident, one
/// that completes rounds resolves it (issue 38 item 2). No round report reaches alerting
/// from a loop that is stuck or dying, so this is the only one who can say it.
fn tell_blind_clusters(published: &Publisher, looks: &[crate::model::progress::Look]) {
    let Some(alerting) = published.alerting() else {
        return;
    };
    let labels = published.current().cluster_labels.clone();
    let now = SystemTime::now();
    let mut changed = false;
    for l in looks {
        let Watched::ClusterLoop(cluster) = &l.what else {
            continue;
        };
        let blind = l
            .stuck()
            .then(|| crate::judge::finding::blind(cluster, now - l.silent, l.allowed));
        let none = BTreeMap::new();
        changed |=
            alerting.watchdog_sight(cluster, labels.get(cluster).unwrap_or(&none), blind, now);
    }
    // No round of the cluster publishes meanwhile: /metrics and /status read it now.
    if changed {
        published.refresh();
    }
}

/// Whether the configuration file's content changed since it was last looked at: a
/// Kubernetes ConfigMap mounted as a folder is swapped in place with no signal to anyone, and
/// an operator who edits the file expects it applied as SIGHUP would (issue 28). Its
/// content is compared, not its time (a ConfigMap's swap keeps the link's), every few
/// seconds; an unreadable file is no change (the reload would refuse it anyway).
struct FileWatch {
    path: std::path::PathBuf,
    seen: Option<u64>,
    next: Instant,
}

impl FileWatch {
    const EVERY: Duration = Duration::from_secs(5);

    fn new(path: &std::path::Path) -> Self {
        let mut w = FileWatch {
            path: path.to_path_buf(),
            seen: None,
            next: Instant::now(),
        };
        w.seen = w.digest();
        w
    }

    fn digest(&self) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        let bytes = std::fs::read(&self.path).ok()?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        bytes.hash(&mut h);
        Some(h.finish())
    }

    /// The content now is the one applied (a SIGHUP reloads it): no second reload for it.
    fn mark_seen(&mut self) {
        self.seen = self.digest();
    }

    /// True once per change of content (looked at no more often than every `EVERY`).
    fn changed(&mut self) -> bool {
        let now = Instant::now();
        if now < self.next {
            return false;
        }
        self.next = now + Self::EVERY;
        match self.digest() {
            Some(d) if Some(d) != self.seen => {
                self.seen = Some(d);
                true
            }
            _ => false,
        }
    }
}

/// Each cluster's static labels, for `/metrics`.
fn cluster_labels(
    config: &Config,
) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>> {
    config
        .clusters
        .iter()
        .map(|c| (c.name.clone(), c.labels.clone()))
        .collect()
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
    for w in &new.warnings {
        tracing::warn!(warning = %w, "configuration");
    }
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
    loops.heartbeat.send_if_modified(|h| {
        let changed = *h != applied.heartbeat;
        h.clone_from(&applied.heartbeat);
        changed
    });
    // After alerting dropped the removed clusters' incidents: the snapshot reads them.
    loops.published.set_clusters(&names);
    loops.published.set_cluster_labels(cluster_labels(&applied));
    if plan.webhooks_changed {
        if let Err(e) = loops.alerting.reconfigure(&applied).await {
            tracing::error!(error = %e, "webhooks not reconfigured; the previous receivers stay");
        }
        // A new dispatcher: its progress is watched from now.
        watch_dispatcher(&loops.published, &loops.alerting, own_allowance(&applied));
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

/// Starts asking the other watchdogs (`peers:`), when configured: their silences go
/// into this one's, their deliveries into its turns.
fn spawn_peers(
    alerting: &Arc<Alerting>,
    published: &Arc<Publisher>,
    peers: Option<(
        crate::alert::peers::sync::Setup,
        crate::alert::peers::sync::Client,
    )>,
    stop: watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<()>> {
    let (state, (setup, client)) = (alerting.peers()?, peers?);
    let merging = alerting.clone();
    // A peer's silence is checked against the clusters watched now (a reload may change
    // them), as the silences API checks one.
    let published = published.clone();
    let ended = stop.clone();
    Some(supervise::spawn_until(Task::Peers, "", ended, move || {
        let merging = merging.clone();
        let published = published.clone();
        crate::alert::peers::sync::run(
            state.clone(),
            setup.clone(),
            client.clone(),
            move |peer, silences| {
                merging.merge_peer_silences(peer, silences, &published.current().clusters)
            },
            stop.clone(),
        )
    }))
}

/// How this watchdog asks its peers and the client it asks with, when `peers:` is
/// configured; fails when the client cannot be built (its CA file unreadable).
fn peer_client(
    config: &Config,
) -> anyhow::Result<
    Option<(
        crate::alert::peers::sync::Setup,
        crate::alert::peers::sync::Client,
    )>,
> {
    match config.peers.clone() {
        Some(p) => {
            let setup = peer_setup(config, p);
            let client = crate::alert::peers::sync::client(&setup)?;
            Ok(Some((setup, client)))
        }
        None => Ok(None),
    }
}

/// How this watchdog asks its peers: with the peer key (never its `http.auth`
/// credential), from its listen address.
fn peer_setup(
    config: &Config,
    peers: crate::config::PeersConfig,
) -> crate::alert::peers::sync::Setup {
    crate::alert::peers::sync::Setup {
        config: peers,
        listen: config.http_listen,
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
    for w in &config.warnings {
        tracing::warn!(warning = %w, "configuration");
    }
    let (listener, mut http_options) = preflight_serving(&config).await?;
    let mut controls = Signals::new([SIGTERM, SIGINT, SIGHUP])?
        .filter_map(|s| std::future::ready(Control::from_signal(s)));

    // The peers' client reads its CA file now, while failing still leaves nothing behind.
    let peers = peer_client(&config)?;

    // Start, in order. Nothing below fails; the last fallible step (alerting) starts first.
    let names: Vec<String> = config.clusters.iter().map(|c| c.name.clone()).collect();
    let published = Publisher::new(&config.instance_id, names);
    published.set_cluster_label(&config.cluster_label);
    published.set_cluster_labels(cluster_labels(&config));
    let alerting = start_alerting(&config)?;
    published.attach_alerting(alerting.clone());
    let (peers_stop, peers_stop_rx) = watch::channel(false);
    let peer_task = spawn_peers(&alerting, &published, peers, peers_stop_rx);
    if config.http_auth.is_none() {
        http_options.local_token = local_token(&config.state_dir);
    }
    let own = own_allowance(&config);
    http_options.progress = Some(published.progress.watch(
        Watched::HttpServer,
        own,
        Instant::now(),
    ));
    watch_dispatcher(&published, &alerting, own);
    let (server_stop, server_stop_rx) = watch::channel(false);
    let server = spawn_server(listener, &published, server_stop_rx, http_options);
    // Before the loops, which register their credential files with it.
    crate::config::live::start_watcher();
    let (supervisor_stop, supervisor_stop_rx) = watch::channel(false);
    let mut loops = Loops::start_all(&config, &published, &alerting);
    let heartbeat = spawn_heartbeat(&loops, &published, supervisor_stop_rx.clone());
    let supervisor = spawn_supervisor(&published, supervisor_stop_rx);
    // Ready once serving: reporting an unhealthy Kafka is the job, not a reason to wait.
    service::ready();
    tracing::info!(listen = %config.http_listen, clusters = config.clusters.len(), "kafka-watchdog serving");

    follow_controls(config, &path, &mut controls, &mut loops, log_level.as_ref()).await;

    // Stop, in the reverse order.
    service::stopping();
    let stopped = async {
        let _ = supervisor_stop.send(true);
        let _ = supervisor.await;
        let _ = heartbeat.await;
        // The loops' last events reach alerting, and their last reports the HTTP server,
        // which both still run.
        loops.stop_all().await;
        let _ = server_stop.send(true);
        let _ = server.await;
        let _ = peers_stop.send(true);
        if let Some(t) = peer_task {
            let _ = t.await;
        }
        // Whatever is not delivered by then stays in the spool for the next start.
        alerting.shutdown(Duration::from_secs(5)).await;
    };
    drain_and_log(stopped, &mut controls).await;
    Ok(())
}

/// Waits for the stop sequence `stopped` for at most 10 s (see `drain`), and says how it
/// ended.
async fn drain_and_log(
    stopped: impl std::future::Future<Output = ()>,
    controls: &mut (impl futures::Stream<Item = Control> + Unpin),
) {
    let started = Instant::now();
    match drain(stopped, controls, Duration::from_secs(10)).await {
        Drained::Clean => tracing::info!(ms = started.elapsed().as_millis() as u64, "stopped"),
        Drained::Forced => tracing::warn!("second stop signal: exiting at once"),
        Drained::TimedOut => tracing::warn!("shutdown took over 10 s: exiting"),
    }
}

/// What serving needs from this machine, checked before anything starts: the listen
/// address bound, the state directory's shape, the HTTPS certificates read. Failures the
/// configuration causes on this machine are typed (preflight::StartupError), so main exits
/// 78 and systemd stops restarting: another try would meet the same port holder or file.
async fn preflight_serving(
    config: &Config,
) -> anyhow::Result<(tokio::net::TcpListener, http::ServeOptions)> {
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
    let http_options = http::ServeOptions::from_config(config)
        .map_err(|e| anyhow::anyhow!("cannot serve HTTPS: http.tls.{e}"))?;
    Ok((listener, http_options))
}

/// Alerting, started on the state directory; one it cannot use is a startup error.
fn start_alerting(config: &Config) -> anyhow::Result<Arc<Alerting>> {
    let alerting = Alerting::start(config).map_err(|e| match e {
        crate::alert::alerting::AlertingError::StateDir { path, error } => {
            anyhow::Error::new(preflight::StartupError::StateDir {
                path: path.into(),
                why: format!("not usable: {error} (expected a directory this user can create and write; under systemd, StateDirectory=kafka-watchdog provides /var/lib/kafka-watchdog)"),
            })
        }
        crate::alert::alerting::AlertingError::InUse { path, holder } => {
            anyhow::Error::new(preflight::StartupError::StateDir {
                path: path.into(),
                why: format!("in use by another kafka-watchdog ({holder}) (expected a state_dir of its own for each instance)"),
            })
        }
        other => other.into(),
    })?;
    Ok(Arc::new(alerting))
}

/// The token local operators' commands change silences with, written to the state
/// directory (which exists once alerting started); without it, they cannot until
/// `http.auth` is configured.
fn local_token(state_dir: &std::path::Path) -> Option<crate::config::Secret> {
    match http::create_local_token(state_dir) {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::error!(
                error = %e,
                file = %state_dir.join(http::LOCAL_TOKEN_FILE).display(),
                "cannot write the local token: silences cannot be changed over HTTP until http.auth is configured"
            );
            None
        }
    }
}

/// Runs until a stop: reloads on SIGHUP and when the file changes.
async fn follow_controls(
    mut running: Config,
    path: &std::path::Path,
    controls: &mut (impl futures::Stream<Item = Control> + Unpin),
    loops: &mut Loops,
    log_level: &(dyn Fn(crate::config::LogLevel) + Send + Sync),
) {
    // How often the configuration file is looked at (`FileWatch` reads it every 5 s).
    let mut look = tokio::time::interval(Duration::from_secs(1));
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut file = FileWatch::new(path);
    loop {
        let control = tokio::select! {
            c = controls.next() => c,
            _ = look.tick() => {
                if file.changed() {
                    tracing::info!(file = %path.display(), "the configuration file changed: reloading it");
                    running = reload(path, running, loops, log_level).await;
                }
                continue;
            }
        };
        match control {
            Some(Control::Reload) => {
                tracing::info!(file = %path.display(), "SIGHUP: reloading the configuration");
                file.mark_seen();
                running = reload(path, running, loops, log_level).await;
            }
            Some(Control::Stop) => {
                tracing::info!("shutting down");
                return;
            }
            None => return,
        }
    }
}

/// One round of every cluster, at once, for the `check` command.
pub async fn check_once(config: &Config) -> Vec<ClusterReport> {
    let rounds = config.clusters.iter().map(|c| async move {
        let setup::RoundParts {
            mut prober,
            mut evaluator,
            mut host,
            wire,
        } = match setup::round_parts(c) {
            Ok(parts) => parts,
            Err(e) => {
                tracing::error!(cluster = %c.name, error = %e, "cannot check cluster");
                return None;
            }
        };
        prober = prober.with_quorum(QuorumProber::new(setup::quorum_settings(
            c,
            wire.security.clone(),
        )));
        // Direct probes (and host mode) only: a single canary write proves little, and a
        // check run from cron should not create topics.
        let (mut obs, view, _) =
            tokio::time::timeout(round_limit(c), one_round(&mut prober, None, host.as_mut()))
                .await
                .ok()?;
        // A broker that did not answer is judged on the daemon's evidence of silence too.
        if !c.verdict.keys.liveness_interval.is_zero() && obs.probes.values().any(|p| !p.answered())
        {
            obs.liveness = liveness_look(c, wire, &obs).await;
        }
        Some(evaluator.evaluate_merged(obs, view, None, SystemTime::now()))
    });
    futures::future::join_all(rounds)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// For `check`: the continuous liveness check, run just until every broker has answered it,
/// refused it, or been silent past its threshold with a fresh connection tried beside it,
/// so that `check` tells "accepted but silent" from a full accept queue as the daemon does.
async fn liveness_look(
    c: &ClusterConfig,
    wire: WireOptions,
    obs: &RoundObservation,
) -> BTreeMap<BrokerId, LivenessFact> {
    let settings = LivenessSettings {
        interval: c.verdict.keys.liveness_interval,
        floor: c.verdict.keys.liveness_floor,
        wire,
        // A one-shot look measures nothing of the watchdog's own health.
        own: Default::default(),
    };
    // The floor (a fresh tracker knows no answer times), a connect for the request and one
    // beside it, and two intervals of slack.
    let limit = settings.floor + settings.wire.connect_timeout * 2 + settings.interval * 2;
    let tick = settings.interval;
    let mut liveness = Liveness::new(settings);
    liveness.track(obs.probes.values().map(|p| &p.endpoint));
    let board = liveness.board();
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let facts = board.snapshot();
        let now = SystemTime::now();
        if tokio::time::Instant::now() >= deadline || facts.values().all(|f| f.settled(now)) {
            return facts;
        }
        // Woken by the same news the daemon's loop waits on: a fact changed, or its
        // evidence aged an interval.
        tokio::select! {
            _ = crate::run::cluster_loop::news(Some(&board), tick) => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_changed_configuration_file_is_seen_once_and_an_unchanged_one_never() {
        let path = std::env::temp_dir().join(format!("kw-filewatch-{}.yaml", std::process::id()));
        std::fs::write(&path, "clusters: []\n").unwrap();
        let mut w = FileWatch::new(&path);
        assert!(!w.changed(), "nothing changed");
        std::fs::write(&path, "clusters: [] # edited\n").unwrap();
        assert!(!w.changed(), "not looked at again before its interval");
        w.next = Instant::now();
        assert!(w.changed());
        w.next = Instant::now();
        assert!(!w.changed(), "once per change");
        // Applied by a SIGHUP: not reloaded a second time.
        std::fs::write(&path, "clusters: [] # again\n").unwrap();
        w.mark_seen();
        w.next = Instant::now();
        assert!(!w.changed());
        // Gone for a moment (a ConfigMap's swap): no change, and none when it is back.
        std::fs::remove_file(&path).unwrap();
        w.next = Instant::now();
        assert!(!w.changed());
        std::fs::write(&path, "clusters: [] # again\n").unwrap();
        w.next = Instant::now();
        assert!(!w.changed());
        let _ = std::fs::remove_file(&path);
    }

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
