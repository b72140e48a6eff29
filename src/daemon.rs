//! The daemon: bind the HTTP listener, run one round loop per cluster, stop cleanly on
//! SIGTERM or SIGINT. Things that take requests start before things that send them.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook_tokio::Signals;
use tokio::sync::watch;

use crate::alerting::Alerting;
use crate::canary::{Canary, CanaryRound};
use crate::config::{ClusterConfig, Config};
use crate::http::{self, Published};
use crate::probe::ClusterProber;
use crate::report::{ClusterReport, Evaluator};
use crate::setup;

/// A round may overrun its deadlines by this much before it is abandoned.
const ROUND_SLACK: Duration = Duration::from_secs(5);

/// The longest one round can legitimately take: connect plus the requests of one broker
/// (all brokers are probed at once), plus the min.insync.replicas read, plus slack.
fn round_limit(c: &ClusterConfig) -> Duration {
    let canary = if c.canary.enabled {
        // Layout change, re-reads, produce, and the wait for read-back.
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
    mut shutdown: watch::Receiver<bool>,
) {
    let settings = match setup::probe_settings(&cfg) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(cluster = %cfg.name, error = %e, "cluster not watched");
            return;
        }
    };
    let wire = settings.wire.clone();
    let mut prober = ClusterProber::new(settings);
    let mut evaluator = Evaluator::new(
        &cfg.name,
        setup::verdict_settings(&cfg),
        setup::topic_filter(&cfg),
        published.canary_stats.clone(),
    );
    let mut canary = cfg
        .canary
        .enabled
        .then(|| Canary::new(setup::canary_settings(&cfg, &instance, wire)));
    let limit = round_limit(&cfg);
    let mut next = tokio::time::Instant::now();
    loop {
        let round = tokio::select! {
            r = tokio::time::timeout(limit, one_round(&mut prober, canary.as_mut())) => r,
            _ = shutdown.changed() => return,
        };
        match round {
            Ok((obs, canary_round)) => {
                let now = SystemTime::now();
                let report = evaluator.evaluate(obs, canary_round, now);
                log_round(&report);
                alerting.after_round(&cfg, &report, now);
                published.publish(report);
            }
            Err(_) => tracing::error!(
                cluster = %cfg.name,
                limit_secs = limit.as_secs(),
                "round abandoned: it outlived every deadline"
            ),
        }
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

/// Direct probes, then the canary with what they saw.
async fn one_round(
    prober: &mut ClusterProber,
    canary: Option<&mut Canary>,
) -> (crate::observe::RoundObservation, Option<CanaryRound>) {
    let obs = prober.round().await;
    let canary_round = match canary {
        Some(c) => {
            let view = crate::canary::view_from(&obs, &c.topic());
            Some(c.round(&view).await)
        }
        None => None,
    };
    (obs, canary_round)
}

fn log_round(r: &ClusterReport) {
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

/// Runs the daemon until SIGTERM or SIGINT. A second signal exits at once.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let names: Vec<String> = config.clusters.iter().map(|c| c.name.clone()).collect();
    let published = Published::new(&config.instance_id, names);
    let listener = http::bind(config.http_listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.http_listen))?;
    let alerting = Arc::new(Alerting::start(&config)?);
    let _ = published.alerting.set(alerting.clone());
    tracing::info!(listen = %config.http_listen, clusters = config.clusters.len(), "kafka-watchdog serving");
    let (stop_tx, stop_rx) = watch::channel(false);
    let server = tokio::spawn(http::serve(listener, published.clone(), stop_rx.clone()));
    let loops: Vec<_> = config
        .clusters
        .iter()
        .cloned()
        .map(|c| {
            tokio::spawn(cluster_loop(
                c,
                config.instance_id.clone(),
                published.clone(),
                alerting.clone(),
                stop_rx.clone(),
            ))
        })
        .collect();

    let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    while let Some(sig) = signals.next().await {
        if sig == SIGHUP {
            tracing::warn!(
                "SIGHUP received: reloading is not supported yet; restart to apply a new config"
            );
            continue;
        }
        tracing::info!(signal = sig, "shutting down");
        break;
    }
    let _ = stop_tx.send(true);
    let drained = async {
        for l in loops {
            let _ = l.await;
        }
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
        let mut evaluator = Evaluator::new(
            &c.name,
            setup::verdict_settings(c),
            setup::topic_filter(c),
            Default::default(),
        );
        let settings = match setup::probe_settings(c) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(cluster = %c.name, error = %e, "cannot check cluster");
                return None;
            }
        };
        let mut prober = ClusterProber::new(settings);
        // Direct probes only: a single canary write proves little, and a check run from
        // cron should not create topics.
        let obs = tokio::time::timeout(round_limit(c), prober.round())
            .await
            .ok()?;
        Some(evaluator.evaluate(obs, None, SystemTime::now()))
    });
    futures::future::join_all(rounds)
        .await
        .into_iter()
        .flatten()
        .collect()
}
