//! One cluster's round loop: probe, canary, liveness and host observation each round, the
//! report evaluated and published, alerting and remediation after it; a round that overruns
//! its limit is cut, and between rounds liveness news re-assesses the verdicts. Rounds come
//! every interval, and earlier (`cadence`) when a peer's registration or a canary
//! partition changed, or a finding waits for the look that confirms it.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use crate::alert::alerting::Alerting;
use crate::alert::remediate::Remediator;
use crate::config::ClusterConfig;
use crate::judge::finding::FindingJudge;
use crate::judge::report::{ClusterReport, Evaluator};
use crate::model::coordinators::CoordinatorObservation;
use crate::model::progress::Stamp;
use crate::model::round::{QuorumObservation, RoundObservation};
use crate::observe::canary::{Canary, CanaryRound};
use crate::observe::cluster_view::ClusterView;
use crate::observe::coordinators::{coordinator_plan, CoordinatorWatch};
use crate::observe::host::HostObserver;
use crate::observe::liveness::{Board, Liveness, LivenessSettings};
use crate::observe::probe::ClusterProber;
use crate::observe::quorum::{QuorumProber, QuorumWatch};
use crate::run::cadence::{Cadence, Why};
use crate::run::setup;
use crate::serve::snapshot::Publisher;

/// A round may overrun its deadlines by this much before it is abandoned.
pub(super) const ROUND_SLACK: Duration = Duration::from_secs(5);

/// The longest one round can legitimately take: connect plus the requests of one broker
/// (all brokers are probed at once), plus the min.insync.replicas read, plus slack.
pub(super) fn round_limit(c: &ClusterConfig) -> Duration {
    let canary = if c.canary.enabled {
        // Layout change and re-reads after leader changes; the writes run apart from the
        // round and never hold it.
        c.canary.produce_timeout * 4 + Duration::from_secs(1)
    } else {
        Duration::ZERO
    };
    c.timing.connect_timeout * 2 + c.timing.request_timeout * 6 + canary + ROUND_SLACK
}

/// Runs rounds of one cluster until `shutdown`, publishing each report.
pub async fn cluster_loop(
    cfg: ClusterConfig,
    instance: String,
    published: Arc<Publisher>,
    alerting: Arc<Alerting>,
    progress: Stamp,
    mut shutdown: watch::Receiver<bool>,
) {
    panic_for_tests();
    let setup::RoundParts {
        prober,
        mut evaluator,
        mut host,
        wire,
    } = match setup::round_parts(&cfg) {
        Ok(parts) => parts,
        Err(e) => {
            // Blind until it can start: its supervisor tries again, /healthz names it after
            // its allowance, and receivers hear of a blind cluster.
            tracing::error!(cluster = %cfg.name, error = %e, "cluster not watched: its round loop cannot start");
            return;
        }
    };
    let look_wire = wire.clone();
    let own = published.live.own_health.clone();
    own.start();
    let (mut watches, mut prober) = Watches::start(&cfg, &instance, &wire, prober, &own);
    let mut canary = canary(&cfg, &instance, wire, &published);
    watches.canary_news = canary.as_ref().map(Canary::news);
    let mut remediator = remediator(&cfg, &published, &alerting);
    if let Some(notice) = cfg.verdict.deprecation(&cfg.name) {
        tracing::warn!("{notice}");
    }
    let limit = round_limit(&cfg);
    let mut between = Between::new(&cfg, &alerting, &published, &look_wire);
    loop {
        if let Some(why) = between.cadence.started(tokio::time::Instant::now()) {
            tracing::debug!(cluster = %cfg.name, ?why, "round started early");
        }
        let round = tokio::time::timeout(limit, async {
            hang_round_for_tests().await;
            one_round(&mut prober, canary.as_mut(), host.as_mut()).await
        });
        tokio::pin!(round);
        let Some(round) = watches
            .until(round, &mut between, &mut evaluator, &mut shutdown)
            .await
        else {
            return;
        };
        match round {
            Ok((obs, view, canary_round)) => {
                let obs = watches.attach(obs, &view);
                between.publish_round(&mut evaluator, obs, view, canary_round, remediator.as_mut());
                // Only a round that published counts as progress (/healthz, the systemd
                // watchdog, the blind cluster's incident): an abandoned one updated nothing
                // that anyone reads, and a loop whose rounds are all abandoned is stuck like
                // a loop that hangs.
                progress.tick();
            }
            Err(_) => tracing::error!(
                cluster = %cfg.name,
                limit_secs = limit.as_secs(),
                "round abandoned: it outlived every deadline; nothing published, and it does not count as progress"
            ),
        }
        stall_for_tests(&mut shutdown).await;
        if !watches
            .until_next_round(&mut between, &mut evaluator, &mut shutdown)
            .await
        {
            return;
        }
    }
}

/// The cluster's canary, when it is enabled; it reports to the live status.
fn canary(
    cfg: &ClusterConfig,
    instance: &str,
    wire: crate::observe::wire::WireOptions,
    published: &Publisher,
) -> Option<Canary> {
    cfg.canary.enabled.then(|| {
        Canary::new(
            setup::canary_settings(cfg, instance, wire),
            published.live.canary.clone(),
        )
    })
}

/// The continuous looks beside the rounds: liveness, the control plane, the group
/// coordinators, and the canary's news.
struct Watches {
    liveness: Option<Liveness>,
    board: Option<Arc<Board>>,
    /// While a broker is silent its evidence ages: the verdict is made again this often
    /// even without news, so that confirmation by duration sees it hold.
    tick: Duration,
    quorum: Option<QuorumWatch>,
    coordinators: Option<CoordinatorWatch>,
    canary_news: Option<Arc<tokio::sync::Notify>>,
}

/// How one wait beside the looks ended.
enum Step<T> {
    /// What was waited for ended.
    Done(T),
    /// News came first, and was handled.
    News,
    /// The daemon is shutting down.
    Shutdown,
}

impl Watches {
    /// The looks of `cfg`; without continuous looks the control plane is looked at in
    /// each round instead, by the returned prober.
    fn start(
        cfg: &ClusterConfig,
        instance: &str,
        wire: &crate::observe::wire::WireOptions,
        mut prober: ClusterProber,
        own: &crate::observe::own_health::OwnHealth,
    ) -> (Self, ClusterProber) {
        let continuous = !cfg.verdict.keys.liveness_interval.is_zero();
        // The control plane: looked at continuously beside the liveness check (a frozen
        // controller is named within seconds), else once per round.
        let quorum_settings = setup::quorum_settings(cfg, wire.security.clone());
        let quorum = if continuous {
            Some(QuorumWatch::start(
                quorum_settings,
                cfg.verdict.keys.liveness_interval,
            ))
        } else {
            prober = prober.with_quorum(QuorumProber::new(quorum_settings));
            None
        };
        let liveness = continuous.then(|| {
            Liveness::new(LivenessSettings {
                interval: cfg.verdict.keys.liveness_interval,
                floor: cfg.verdict.keys.liveness_floor,
                wire: wire.clone(),
                own: own.clone(),
            })
        });
        let watches = Watches {
            board: liveness.as_ref().map(Liveness::board),
            liveness,
            tick: cfg
                .verdict
                .keys
                .liveness_interval
                .max(Duration::from_millis(200)),
            quorum,
            // The group coordinators: probed on a task of their own (a stuck one is named
            // within seconds); the rounds tell it who leads each shard.
            coordinators: setup::coordinator_settings(cfg, instance, wire.security.clone())
                .map(CoordinatorWatch::start),
            canary_news: None,
        };
        (watches, prober)
    }

    /// Waits for `until`, or for the first news (handled before returning), or shutdown.
    /// The one select the loop waits in, during a round and between rounds.
    async fn step<T>(
        &mut self,
        until: std::pin::Pin<&mut impl std::future::Future<Output = T>>,
        between: &mut Between<'_>,
        evaluator: &mut Evaluator,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Step<T> {
        tokio::select! {
            r = until => Step::Done(r),
            news = next_news(self.board.as_deref(), self.tick, self.quorum.as_mut(), self.coordinators.as_mut(), self.canary_news.as_deref()) => {
                between.on(news, evaluator, self.board.as_deref(), &self.quorum, &self.coordinators).await;
                Step::News
            }
            _ = shutdown.changed() => Step::Shutdown,
        }
    }

    /// Waits for `until`, handling the news that comes meanwhile; `None` on shutdown.
    async fn until<T>(
        &mut self,
        mut until: std::pin::Pin<&mut impl std::future::Future<Output = T>>,
        between: &mut Between<'_>,
        evaluator: &mut Evaluator,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Option<T> {
        loop {
            match self
                .step(until.as_mut(), between, evaluator, shutdown)
                .await
            {
                Step::Done(r) => return Some(r),
                Step::News => {}
                Step::Shutdown => return None,
            }
        }
    }

    /// Waits until the next round is due, handling the news that comes meanwhile; `false`
    /// on shutdown.
    async fn until_next_round(
        &mut self,
        between: &mut Between<'_>,
        evaluator: &mut Evaluator,
        shutdown: &mut watch::Receiver<bool>,
    ) -> bool {
        // Until the next round is due; news may bring it forward, so it is asked again
        // after each.
        loop {
            let due = between.cadence.next_start(tokio::time::Instant::now());
            let next = tokio::time::sleep_until(due);
            tokio::pin!(next);
            match self.step(next.as_mut(), between, evaluator, shutdown).await {
                Step::Done(()) => {
                    let late = tokio::time::Instant::now().saturating_duration_since(due);
                    let own = &between.published.live.own_health;
                    own.late(crate::model::own_health::Timer::Round, late);
                    return true;
                }
                Step::News => {}
                Step::Shutdown => return false,
            }
        }
    }

    /// A finished round's observation with the looks' newest; the looks learn from the
    /// round whom to ask next.
    fn attach(&mut self, mut obs: RoundObservation, view: &ClusterView) -> RoundObservation {
        if let (Some(l), Some(b)) = (self.liveness.as_mut(), self.board.as_deref()) {
            l.track(obs.probes.values().map(|p| &p.endpoint));
            obs.liveness = b.snapshot();
        }
        if let Some(q) = &mut self.quorum {
            obs.quorum = q.latest();
            q.ask_brokers(answering_first(&obs));
        }
        if let Some(c) = &mut self.coordinators {
            obs.coordinators = c.latest();
            c.plan(coordinator_plan(view, |id| {
                obs.probes.get(&id).map(|p| p.endpoint.address())
            }));
        }
        obs
    }
}

/// What arrives while a round runs or while the loop waits for the next one.
enum News {
    /// A liveness fact changed, or the evidence aged a tick: the verdicts are made again.
    Liveness,
    /// The control plane's newest look.
    Quorum(Option<Arc<QuorumObservation>>),
    /// The group coordinators' newest look.
    Coordinators(Option<Arc<CoordinatorObservation>>),
    /// Something only a round can judge: the next one starts early.
    Round(Why),
}

/// The first news from any source. Each source is cancel-safe, so a round that ends first
/// loses none: the same select waits during a round and between rounds.
async fn next_news(
    board: Option<&Board>,
    tick: Duration,
    quorum: Option<&mut QuorumWatch>,
    coordinators: Option<&mut CoordinatorWatch>,
    canary: Option<&tokio::sync::Notify>,
) -> News {
    tokio::select! {
        _ = news(board, tick) => News::Liveness,
        look = quorum_news(quorum) => News::Quorum(look),
        look = coordinator_news(coordinators) => News::Coordinators(look),
        why = round_news(board, canary) => News::Round(why),
    }
}

/// What the loop keeps from one round to the next, and what news does to it.
struct Between<'a> {
    cfg: &'a ClusterConfig,
    alerting: &'a Alerting,
    published: &'a Publisher,
    look_wire: &'a crate::observe::wire::WireOptions,
    cadence: Cadence,
    /// The last round's report, for re-evaluations until the next round.
    last: Option<Arc<ClusterReport>>,
    /// The findings judged from each report, with the events they remember.
    findings: FindingJudge,
    /// The last metadata change a round was asked for (see `metadata_changed`).
    metadata_seen: Option<SystemTime>,
}

impl<'a> Between<'a> {
    /// Nothing kept yet: the first round is due now.
    fn new(
        cfg: &'a ClusterConfig,
        alerting: &'a Alerting,
        published: &'a Publisher,
        look_wire: &'a crate::observe::wire::WireOptions,
    ) -> Self {
        Between {
            cfg,
            alerting,
            published,
            look_wire,
            cadence: Cadence::new(cfg.timing.round_interval, tokio::time::Instant::now()),
            last: None,
            findings: FindingJudge::new(cfg.timing.round_interval),
            metadata_seen: None,
        }
    }

    /// Makes the verdicts again when the news can change them, or asks for a round.
    async fn on(
        &mut self,
        news: News,
        evaluator: &mut Evaluator,
        board: Option<&Board>,
        quorum: &Option<QuorumWatch>,
        coordinators: &Option<CoordinatorWatch>,
    ) {
        let looks = match news {
            News::Liveness => {
                decide_refusals(evaluator, board, self.last.as_deref(), self.look_wire).await;
                Looks {
                    quorum: newest(quorum),
                    coordinators: newest_coordinators(coordinators),
                }
            }
            News::Quorum(look) => {
                if metadata_changed(look.as_deref(), &mut self.metadata_seen) {
                    self.cadence
                        .want(tokio::time::Instant::now(), Why::Metadata);
                }
                if !quorum_matters(look.as_deref(), self.last.as_deref()) {
                    return;
                }
                Looks {
                    quorum: look,
                    coordinators: newest_coordinators(coordinators),
                }
            }
            News::Coordinators(look) => {
                if !coordinators_matter(look.as_deref(), self.last.as_deref()) {
                    return;
                }
                Looks {
                    quorum: newest(quorum),
                    coordinators: look,
                }
            }
            News::Round(why) => {
                self.cadence.want(tokio::time::Instant::now(), why);
                return;
            }
        };
        self.reassess(evaluator, board, looks);
        confirm_soon(&mut self.cadence, self.alerting, self.cfg);
    }

    /// A round's report: evaluated, judged, handed to alerting and remediation, published;
    /// a finding that waits for its confirming look gets one soon.
    fn publish_round(
        &mut self,
        evaluator: &mut Evaluator,
        obs: RoundObservation,
        view: Arc<ClusterView>,
        canary_round: Option<CanaryRound>,
        remediator: Option<&mut Remediator>,
    ) {
        evaluator.set_own_health(self.published.live.own_health.facts());
        let now = SystemTime::now();
        let mut report = evaluator.evaluate_merged(obs, view, canary_round, now);
        report.early_rounds = self.cadence.counts();
        log_round(&report);
        let findings = self.findings.round(&report, now);
        self.alerting.after_round(self.cfg, &report, findings, now);
        if let Some(r) = remediator {
            r.after_round(&report, now);
        }
        let report = Arc::new(report);
        self.last = Some(report.clone());
        self.published.publish(report);
        confirm_soon(&mut self.cadence, self.alerting, self.cfg);
    }

    /// The last round's verdicts made again with the liveness facts of now (and the newest
    /// look at the control plane), published, and handed to the incident book: a silent
    /// broker or a frozen controller is named within its threshold, not at the next round.
    fn reassess(&mut self, evaluator: &mut Evaluator, board: Option<&Board>, looks: Looks) {
        let (Some(board), Some(prev)) = (board, self.last.as_ref()) else {
            return;
        };
        let now = SystemTime::now();
        let Looks {
            quorum: look,
            coordinators,
        } = looks;
        let look = look.or_else(|| prev.quorum.as_ref().map(|q| q.look.clone()));
        let coordinators = coordinators.or_else(|| prev.coordinators.clone());
        let facts = board.snapshot();
        evaluator.set_own_health(self.published.live.own_health.facts());
        let report = evaluator.reassess_with(prev, facts, look, coordinators, now);
        let states = |r: &ClusterReport| -> Vec<_> {
            r.verdicts.iter().map(|v| (v.broker, v.state)).collect()
        };
        let changed = states(&report) != states(prev)
            || control_plane_states(&report) != control_plane_states(prev);
        if changed {
            log_round(&report);
        }
        if let Some(findings) = self.findings.reassessed(&report) {
            self.alerting
                .after_reassess(self.cfg, &report, findings, now);
        }
        let report = Arc::new(report);
        self.last = Some(report.clone());
        self.published.publish(report);
    }
}

/// The brokers' addresses, those that answered this round first: the quorum watch asks
/// the first two (a broker forwards DescribeQuorum to the active controller).
fn answering_first(obs: &crate::model::round::RoundObservation) -> Vec<String> {
    let mut all: Vec<_> = obs.probes.values().collect();
    all.sort_by_key(|p| !p.answered());
    all.iter().map(|p| p.endpoint.address()).collect()
}

/// A finding that waits for a second look gets one when it can confirm it, not at the next
/// interval: the page follows the first sight by about `open_after_secs`.
fn confirm_soon(cadence: &mut Cadence, alerting: &Alerting, cfg: &ClusterConfig) {
    if let Some(due) = alerting.confirmation_due(cfg) {
        let wait = due.duration_since(SystemTime::now()).unwrap_or_default();
        cadence.want(tokio::time::Instant::now() + wait, Why::Confirmation);
    }
}

/// Returns when something happened that only a round can judge: a broker's list of
/// registered brokers changed (a peer fenced, stopped or back), or a canary partition's
/// writes changed how they end. Never when neither is watched.
async fn round_news(board: Option<&Board>, canary: Option<&tokio::sync::Notify>) -> Why {
    let registration = async {
        match board {
            Some(b) => b.registration_changed().await,
            None => std::future::pending().await,
        }
    };
    let canary = async {
        match canary {
            Some(n) => n.notified().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = registration => Why::Registration,
        _ = canary => Why::Canary,
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
    wire: &crate::observe::wire::WireOptions,
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
            .map(|e| crate::observe::probe::probe_broker(e, wire, None)),
    )
    .await
    .into_iter()
    .map(|p| (p.endpoint.id, p))
    .collect();
    evaluator.note_refusals(at, &probes, &refused);
}

/// Returns when a broker's liveness changed, or after `tick` while some broker is silent.
/// Never without liveness.
pub(super) async fn news(board: Option<&Board>, tick: Duration) {
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

/// The newest look at the control plane, when it is watched.
fn newest(quorum: &Option<QuorumWatch>) -> Option<Arc<QuorumObservation>> {
    quorum.as_ref().and_then(QuorumWatch::latest)
}

/// The newest look at the group coordinators, when they are probed.
fn newest_coordinators(c: &Option<CoordinatorWatch>) -> Option<Arc<CoordinatorObservation>> {
    c.as_ref().and_then(CoordinatorWatch::latest)
}

/// Returns the next look at the group coordinators; never when they are not probed.
async fn coordinator_news(c: Option<&mut CoordinatorWatch>) -> Option<Arc<CoordinatorObservation>> {
    match c {
        Some(c) => {
            c.changed().await;
            c.latest()
        }
        None => std::future::pending().await,
    }
}

/// Whether a look at the coordinators is worth judging now: some coordinator did not
/// answer or answered an error, or the last judgment holds coordinator evidence that may
/// have cleared. Healthy looks, twice a second, judge nothing.
fn coordinators_matter(
    look: Option<&CoordinatorObservation>,
    last: Option<&ClusterReport>,
) -> bool {
    let (Some(look), Some(last)) = (look, last) else {
        return false;
    };
    !crate::judge::coordinators::troubled(look).is_empty()
        || last.verdicts.iter().any(|v| {
            v.hits
                .iter()
                .any(|h| crate::judge::coordinators::RULES.contains(&h.rule))
        })
}

/// Returns the next look at the control plane; never when it is not watched.
async fn quorum_news(quorum: Option<&mut QuorumWatch>) -> Option<Arc<QuorumObservation>> {
    match quorum {
        Some(q) => {
            q.changed().await;
            q.latest()
        }
        None => std::future::pending().await,
    }
}

/// Whether a look saw a metadata change not seen before: a round then looks at what the
/// brokers applied of it (`stale_metadata`) at once, not at the next interval.
fn metadata_changed(look: Option<&QuorumObservation>, seen: &mut Option<SystemTime>) -> bool {
    let Some(at) = look.and_then(|l| l.metadata_changed_at) else {
        return false;
    };
    if seen.is_some_and(|s| s >= at) {
        return false;
    }
    *seen = Some(at);
    true
}

/// Whether a look is worth judging now rather than at the next round: something in it or
/// in the last judgment is not plainly healthy (a controller failing, no leader, a high
/// watermark that did not move since the look before, a controller not healthy, a problem
/// ageing towards its page). A healthy quorum's looks, twice a second, judge nothing.
fn quorum_matters(look: Option<&QuorumObservation>, last: Option<&ClusterReport>) -> bool {
    let Some(look) = look else {
        return false;
    };
    let Some(last) = last else {
        return false;
    };
    let judged = last.quorum.as_ref();
    let unsettled = judged.is_none_or(|q| {
        q.problem.is_some()
            || q.settling
            // Controllers never reached are not watched: unknown for as long as that lasts,
            // which is no news twice a second.
            || (q.controllers_not_watched.is_none()
                && q.controllers
                    .iter()
                    .any(|c| c.state != crate::judge::quorum::ControllerState::Healthy))
            || q.leader != look.description.as_ref().map(|d| d.leader)
    });
    unsettled
        || look.description.is_none()
        // Two no-op intervals without a move: a look between two no-ops is not news.
        || look
            .high_watermark_still_since
            .is_some_and(|t| look.at.duration_since(t).unwrap_or_default() >= Duration::from_secs(1))
        || (look.controllers.iter().any(|c| c.outcome.is_err())
            && !look.controllers_never_reached())
}

/// The newest looks taken beside the rounds, each `None` when not taken (the last round's
/// is then used).
struct Looks {
    quorum: Option<Arc<QuorumObservation>>,
    coordinators: Option<Arc<CoordinatorObservation>>,
}

/// The controllers' states and the quorum's problem.
type ControlPlaneStates = (
    Vec<(i32, crate::judge::quorum::ControllerState)>,
    Option<crate::judge::quorum::QuorumProblemKind>,
);

/// The controllers' states and the quorum's problem, to log a change.
fn control_plane_states(r: &ClusterReport) -> Option<ControlPlaneStates> {
    r.quorum.as_ref().map(|q| {
        (
            q.controllers
                .iter()
                .map(|c| (c.controller, c.state))
                .collect(),
            q.problem.as_ref().map(|p| p.kind),
        )
    })
}

/// The cluster's remediator, when a broker of it has remediation enabled. A history that
/// cannot be read disables remediation for the cluster: acting without knowing what was
/// done before would ignore the cool-down and the daily limit.
pub(super) fn remediator(
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
    let sink: crate::alert::remediate::Sink = Arc::new(move |r| sink_alerting.remediation(r));
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
pub(super) async fn stall_for_tests(shutdown: &mut watch::Receiver<bool>) {
    if cfg!(debug_assertions) && std::env::var_os("KAFKA_WATCHDOG_TEST_STALL").is_some() {
        let _ = shutdown.changed().await;
    }
}

/// Debug builds only: `KAFKA_WATCHDOG_TEST_PANIC_LOOP=<seconds>` makes every round loop
/// panic as it starts until the first loop started that many seconds ago, so a test can
/// show a dying loop restarted, counted and named by /healthz. Release builds never read
/// the variable.
fn panic_for_tests() {
    static FIRST: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    if !cfg!(debug_assertions) {
        return;
    }
    let Some(secs) = std::env::var("KAFKA_WATCHDOG_TEST_PANIC_LOOP")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return;
    };
    let first = *FIRST.get_or_init(std::time::Instant::now);
    if first.elapsed() < Duration::from_secs(secs) {
        panic!("KAFKA_WATCHDOG_TEST_PANIC_LOOP: the round loop panics, as asked");
    }
}

/// Debug builds only: `KAFKA_WATCHDOG_TEST_HANG_ROUND=1` makes every round hang until its
/// time limit abandons it, so a test can show that abandoned rounds are not progress.
/// Release builds never read the variable.
pub(super) async fn hang_round_for_tests() {
    if cfg!(debug_assertions) && std::env::var_os("KAFKA_WATCHDOG_TEST_HANG_ROUND").is_some() {
        std::future::pending::<()>().await;
    }
}

/// Direct probes (and, in host mode, the look at the local brokers' processes at the same
/// moment), merged once into the round's view, then the canary brought up to date with it
/// (its writes run continuously, apart from the round).
pub(super) async fn one_round(
    prober: &mut ClusterProber,
    canary: Option<&mut Canary>,
    host: Option<&mut HostObserver>,
) -> (
    crate::model::round::RoundObservation,
    Arc<crate::observe::cluster_view::ClusterView>,
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
    let view = Arc::new(crate::judge::report::newest_view(&obs));
    let canary_round = match canary {
        Some(c) => {
            let canary_view = crate::observe::canary::view_from(&obs, &view, &c.topic());
            Some(c.round(&canary_view).await)
        }
        None => None,
    };
    (obs, view, canary_round)
}

pub(super) fn log_round(r: &ClusterReport) {
    use crate::observe::canary::TopicStatus;
    if let Some(c) = &r.canary {
        let (state, detail) = match &c.status {
            TopicStatus::Ready => ("ready", None),
            TopicStatus::Missing(d) => ("missing", Some(d)),
            TopicStatus::NotPermitted(d) => ("not_permitted", Some(d)),
            TopicStatus::Broken(d) => ("broken", Some(d)),
            TopicStatus::NotOurs(d) => ("not_ours", Some(d)),
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
        if v.state != crate::judge::verdict::BrokerState::Healthy {
            let evidence =
                crate::judge::check::evidence_cell(v.hits.iter().map(|h| (&h.rule, &h.detail)));
            tracing::warn!(
                cluster = %r.cluster,
                broker = v.broker,
                state = v.state.as_label(),
                evidence = %evidence,
                "broker not healthy"
            );
        }
    }
    if let Some(q) = &r.quorum {
        for c in &q.controllers {
            if c.state != crate::judge::quorum::ControllerState::Healthy {
                let evidence =
                    crate::judge::check::evidence_cell(c.hits.iter().map(|h| (&h.rule, &h.detail)));
                tracing::warn!(
                    cluster = %r.cluster,
                    controller = c.controller,
                    state = c.state.as_label(),
                    evidence = %evidence,
                    "controller not healthy"
                );
            }
        }
        if let Some(p) = &q.problem {
            tracing::warn!(
                cluster = %r.cluster,
                problem = p.kind.as_label(),
                detail = %p.detail,
                "the control plane is out"
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
