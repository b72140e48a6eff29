//! The control plane's verdicts, pure: from a look at the KRaft quorum (DescribeQuorum,
//! each controller asked directly) to a state per controller with its evidence, and the
//! quorum's own problem when the control plane is out. No I/O; `now` is a parameter.
//!
//! What the look can tell, and how it is read:
//! - A controller asked directly that refuses connections is `down`; one that accepts and
//!   never answers (a frozen JVM) is a `zombie`, at once.
//! - The active controller appends a no-op record every 500 ms (KIP-835), so a leader
//!   whose high watermark stands still for `stall` is wedged (its event handler stopped
//!   while its Raft threads keep the leadership: Kafka never elects another): a `zombie`.
//! - A voter the leader has not heard from for `lag`, or that has not caught up for
//!   `caught_up`, is `lagging`: the quorum may still have a majority without it.
//! - The quorum has a problem when no leader answers (past `election_grace` while a
//!   majority of the voters answers, since Kafka then elects another within seconds; at
//!   once otherwise), when its leader's high watermark stands still, or when fewer than a
//!   majority of the voters are caught up.
//! - Brokers that keep applying new metadata records (ApiVersions says how far) prove a
//!   working leader: while they do, a leader that does not answer is the asking's failure,
//!   not the quorum's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

pub use super::rule::{ControllerRule, ControllerState};

use serde::Serialize;

use crate::model::round::{
    ControllerLook, ControllerRole, FailureKind, NodeId, QuorumDescription, QuorumObservation,
};

/// Why a controller rule fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ControllerHit {
    pub rule: ControllerRule,
    pub state: ControllerState,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ControllerVerdict {
    pub controller: NodeId,
    /// Where it was asked, when it is asked directly.
    pub address: String,
    pub state: ControllerState,
    /// It leads the quorum, as this look's description says.
    pub leader: bool,
    /// Every rule that fired, worst first.
    pub hits: Vec<ControllerHit>,
    /// When the fact that decides its state began to hold, when its evidence says so.
    #[serde(skip)]
    pub held_since: Option<SystemTime>,
    /// How long its state must hold before anyone is paged, when longer than usual: a
    /// controller that refuses connections is restarting, as often as not, while the
    /// others keep the quorum (the quorum's own problem pages when they cannot).
    #[serde(skip)]
    pub page_after: Option<Duration>,
}

/// What is wrong with the quorum as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QuorumProblemKind {
    /// No controller answers as the quorum's leader.
    NoLeader,
    /// The leader answers, and its high watermark does not move.
    LeaderNotAdvancing,
    /// Fewer than a majority of the voters are caught up with the leader.
    MajorityNotCaughtUp,
}

impl QuorumProblemKind {
    pub const ALL: [QuorumProblemKind; 3] = [
        QuorumProblemKind::NoLeader,
        QuorumProblemKind::LeaderNotAdvancing,
        QuorumProblemKind::MajorityNotCaughtUp,
    ];

    pub fn as_label(self) -> &'static str {
        match self {
            QuorumProblemKind::NoLeader => "no_leader",
            QuorumProblemKind::LeaderNotAdvancing => "leader_not_advancing",
            QuorumProblemKind::MajorityNotCaughtUp => "majority_not_caught_up",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuorumProblem {
    pub kind: QuorumProblemKind,
    pub detail: String,
    /// The controllers at fault.
    pub suspects: Vec<NodeId>,
    /// Since when it holds.
    #[serde(skip)]
    pub since: SystemTime,
}

/// The control plane's part of a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuorumReport {
    /// When the look was made.
    #[serde(skip)]
    pub observed_at: SystemTime,
    pub leader: Option<NodeId>,
    pub epoch: Option<i32>,
    pub high_watermark: Option<i64>,
    /// How long the high watermark has stood still under this leader, when it has.
    #[serde(skip)]
    pub high_watermark_still_for: Option<Duration>,
    /// /status writes each with what was asked of it (`ControllerStatus`), under the same
    /// key: written here too, the key would appear twice in one object.
    #[serde(skip)]
    pub controllers: Vec<ControllerVerdict>,
    pub problem: Option<QuorumProblem>,
    /// Why the controllers are not watched directly, when `controllers:` is configured and
    /// none of them has been reached since the watchdog started (a network policy in the
    /// way); `None` when they are, or none is configured.
    pub controllers_not_watched: Option<String>,
    /// The control plane is out now, or came back within `settle`: metadata could not
    /// change, and the controller may fence and register brokers again in one batch as it
    /// recovers. Broker rules that read registration or metadata staleness hold off.
    pub settling: bool,
    /// The look itself, for /status.
    #[serde(skip)]
    pub look: std::sync::Arc<QuorumObservation>,
}

impl QuorumReport {
    pub fn controller(&self, id: NodeId) -> Option<&ControllerVerdict> {
        self.controllers.iter().find(|c| c.controller == id)
    }
}

/// Thresholds of the control plane's rules.
#[derive(Debug, Clone)]
pub struct QuorumSettings {
    /// A leader's high watermark still this long is wedged: four no-op intervals.
    pub stall: Duration,
    /// A voter the leader has not had a fetch from for this long is lagging (followers
    /// fetch continuously, each fetch waiting at most 500 ms for news).
    pub lag: Duration,
    /// A voter not caught up with the leader for this long is lagging.
    pub caught_up: Duration,
    /// While a majority of the voters answers, Kafka elects a new leader within a few
    /// seconds (fetch timeout 2 s, election timeout 1 s by default): only after this long
    /// without one is that the quorum's problem.
    pub election_grace: Duration,
    /// A controller that refuses connections pages after this long (a restart); the
    /// quorum's problem pages at once if the others cannot hold the quorum.
    pub restart_grace: Duration,
    /// Broker rules that read registration or metadata staleness hold off this long after
    /// the control plane came back.
    pub settle: Duration,
    /// When no leader answers, the brokers' applied metadata must have stood still this
    /// long too before that is the quorum's problem: two no-op intervals, so that the
    /// last record a frozen leader committed costs nothing (the look that fails takes a
    /// request deadline). Asked through brokers only, `stall` instead: a DescribeQuorum
    /// forwarded through a broker can fail while the quorum works.
    pub applied_still: Duration,
}

impl Default for QuorumSettings {
    fn default() -> Self {
        QuorumSettings {
            stall: Duration::from_secs(2),
            lag: Duration::from_secs(3),
            caught_up: Duration::from_secs(6),
            election_grace: Duration::from_secs(6),
            restart_grace: Duration::from_secs(120),
            settle: Duration::from_secs(30),
            applied_still: Duration::from_secs(1),
        }
    }
}

/// What the control plane's verdicts remember between looks.
#[derive(Debug, Clone, Default)]
pub struct QuorumMemory {
    /// When the control plane last moved under the brokers' feet (a look with a problem, a
    /// new leader or epoch, a controller newly zombie or down): `settling` holds until
    /// `settle` after.
    pub last_problem_at: Option<SystemTime>,
    /// Ids seen as voters, so a controller that stops answering keeps its verdict.
    pub voters: BTreeSet<NodeId>,
    /// The leader and epoch of the last look that had one.
    pub last_leader: Option<(NodeId, i32)>,
    /// Controllers zombie or down at the last look.
    pub unhealthy: BTreeSet<NodeId>,
}

/// Judges one look at the quorum.
pub fn judge_quorum(
    look: &std::sync::Arc<QuorumObservation>,
    memory: &mut QuorumMemory,
    s: &QuorumSettings,
    now: SystemTime,
) -> QuorumReport {
    let d = look.description.as_ref();
    if let Some(d) = d {
        memory.voters.extend(d.voters.iter().map(|v| v.id));
    }
    memory
        .voters
        .extend(look.controllers.iter().filter_map(|c| c.id));
    let still_for = look
        .high_watermark_still_since
        .map(|t| now.duration_since(t).unwrap_or_default());
    // A still high watermark is the leader's fault unless too few voters are caught up to
    // commit anything (then they are at fault, `problem` says).
    let wedged = d.filter(|d| still_for.is_some_and(|f| f >= s.stall) && majority_caught_up(d, s));
    let mut controllers: Vec<ControllerVerdict> = memory
        .voters
        .iter()
        .map(|id| controller(*id, look, d, wedged.is_some(), still_for, s, now))
        .collect();
    controllers.sort_by_key(|c| c.controller);
    let problem = problem(look, d, &controllers, still_for, s, now);
    // A failover moves the brokers too: the new leader fences those whose heartbeats were
    // lost in the election and registers them again, in one batch, while the quorum itself
    // never had a problem (seen on the lab: two brokers fenced 5-8 s after the active
    // controller of three froze). So a new leader or epoch, and a controller newly zombie or
    // down, settle the brokers' rules as a problem does.
    let leader = d.map(|d| (d.leader, d.epoch));
    let new_leader =
        leader.is_some() && memory.last_leader.is_some() && leader != memory.last_leader;
    if leader.is_some() {
        memory.last_leader = leader;
    }
    let unhealthy: BTreeSet<NodeId> = controllers
        .iter()
        .filter(|c| matches!(c.state, ControllerState::Zombie | ControllerState::Down))
        .map(|c| c.controller)
        .collect();
    let newly_unhealthy = unhealthy.difference(&memory.unhealthy).next().is_some();
    memory.unhealthy = unhealthy;
    if problem.is_some() || new_leader || newly_unhealthy {
        memory.last_problem_at = Some(now);
    }
    let settling = memory
        .last_problem_at
        .and_then(|t| now.duration_since(t).ok())
        .is_some_and(|ago| ago < s.settle);
    QuorumReport {
        observed_at: look.at,
        leader: d.map(|d| d.leader),
        epoch: d.map(|d| d.epoch),
        high_watermark: d.map(|d| d.high_watermark),
        high_watermark_still_for: still_for,
        controllers,
        problem,
        controllers_not_watched: not_watched(look, now),
        settling,
        look: look.clone(),
    }
}

/// The watchdog's own sickness held out of the control plane's verdicts (issue 38 item
/// 4): a controller asked directly that did not answer, or could not be connected to, while
/// the watchdog was unwell or within the settle after, is `unknown`; so the quorum's "no
/// leader answers" is no problem then. What failed since before the watchdog fell ill
/// stays as it was.
pub fn hold_while_unwell(
    report: &mut QuorumReport,
    own: &crate::judge::own_health::OwnJudgment,
    now: SystemTime,
) {
    if !own.holds_looks(now) {
        return;
    }
    let before = |since: Option<SystemTime>| {
        since
            .zip(own.doubt.first())
            .is_some_and(|(s, (doubt, _))| s < *doubt)
    };
    for c in &mut report.controllers {
        let timing = |h: &ControllerHit| {
            matches!(
                h.rule,
                ControllerRule::NoAnswer | ControllerRule::Unreachable
            )
        };
        if !c.hits.iter().any(timing) || before(c.held_since) {
            continue;
        }
        let said: Vec<String> = c
            .hits
            .iter()
            .filter(|h| timing(h))
            .map(|h| format!("{}: {}", h.rule, h.detail))
            .collect();
        c.hits.retain(|h| !timing(h));
        c.hits.push(ControllerHit {
            rule: ControllerRule::WatchdogUnwell,
            state: ControllerState::Unknown,
            detail: format!(
                "{}; not held against it: the watchdog itself was unwell when it asked: {}",
                said.join("; "),
                own.words(now)
            ),
        });
        c.hits.sort_by_key(|h| std::cmp::Reverse(h.state));
        c.state = c.hits.first().map_or(ControllerState::Healthy, |h| h.state);
        c.page_after = None;
    }
    if report
        .problem
        .as_ref()
        .is_some_and(|p| p.kind == QuorumProblemKind::NoLeader && !before(Some(p.since)))
    {
        report.problem = None;
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The verdict of one controller.
fn controller(
    id: NodeId,
    look: &QuorumObservation,
    d: Option<&QuorumDescription>,
    wedged: bool,
    still_for: Option<Duration>,
    s: &QuorumSettings,
    now: SystemTime,
) -> ControllerVerdict {
    let direct: Option<&ControllerLook> = look.controller(id);
    let leader = d.is_some_and(|d| d.leader == id);
    let mut hits = Vec::new();
    let mut held_since = None;
    let mut page_after = None;
    let never_reached = look.controllers_never_reached();
    if let Some((hit, c)) =
        direct.and_then(|c| failed_answer(c, never_reached, now).map(|h| (h, c)))
    {
        held_since = c.failing_since;
        if hit.state == ControllerState::Down {
            page_after = Some(s.restart_grace);
        }
        hits.push(hit);
    }
    if leader && wedged {
        let f = still_for.unwrap_or_default();
        let d = d.expect("a leader comes from a description");
        hits.push(ControllerHit {
            rule: ControllerRule::Wedged,
            state: ControllerState::Zombie,
            detail: format!(
                "leads the quorum at epoch {} but its high watermark has stood at {} for {} (the active controller writes a record every 500 ms): its event handler applies nothing, while its Raft threads keep the leadership",
                d.epoch,
                d.high_watermark,
                secs(f)
            ),
        });
        held_since = look.high_watermark_still_since;
    }
    // The leader's word on a follower voter.
    if let Some(d) = d.filter(|_| !leader) {
        hits.extend(leaders_word(id, d, s));
    }
    if hits.is_empty() && direct.is_none() && d.and_then(|d| d.voter(id)).is_none() {
        hits.push(ControllerHit {
            rule: ControllerRule::NotDescribed,
            state: ControllerState::Unknown,
            detail: "not asked directly, and no leader describes it".into(),
        });
    }
    hits.sort_by_key(|h| std::cmp::Reverse(h.state));
    debug_assert!(hits.iter().all(|h| h.rule.allows(h.state)), "{hits:?}");
    ControllerVerdict {
        controller: id,
        address: direct.map(|c| c.address.clone()).unwrap_or_default(),
        state: hits.first().map_or(ControllerState::Healthy, |h| h.state),
        leader,
        hits,
        held_since,
        page_after,
    }
}

/// What a controller asked directly did instead of answering, if it did not: it refuses
/// connections (down), accepts them and answers nothing (a zombie), cannot be connected to
/// (down), or cannot be asked (nothing said of its health). While no configured controller
/// has ever been reached (`never_reached`), none of that is said: the path is closed.
fn failed_answer(
    c: &ControllerLook,
    never_reached: bool,
    now: SystemTime,
) -> Option<ControllerHit> {
    let f = c.outcome.as_ref().err()?;
    let silent = c
        .failing_since
        .and_then(|t| now.duration_since(t).ok())
        .unwrap_or_default();
    let (rule, state, what) = match f.kind {
        _ if never_reached => (
            ControllerRule::NeverReached,
            ControllerState::Unknown,
            "has not been reached since the watchdog started",
        ),
        FailureKind::ConnectionRefused | FailureKind::Unresolvable => (
            ControllerRule::PortClosed,
            ControllerState::Down,
            "refuses connections",
        ),
        FailureKind::Timeout | FailureKind::ConnectionClosed | FailureKind::Io
            if c.accepted_in_streak =>
        {
            (
                ControllerRule::NoAnswer,
                ControllerState::Zombie,
                "accepts connections and answers nothing",
            )
        }
        FailureKind::Timeout => (
            ControllerRule::Unreachable,
            ControllerState::Down,
            "cannot be connected to",
        ),
        // Its answers cannot be read, or the watchdog is refused: nothing is said of its
        // health.
        _ => (
            ControllerRule::NotAsked,
            ControllerState::Unknown,
            "cannot be asked",
        ),
    };
    Some(ControllerHit {
        rule,
        state,
        detail: format!(
            "{what} at {} for {} ({})",
            c.address,
            secs(silent),
            f.detail
        ),
    })
}

/// What the quorum's leader says of follower voter `id`: no fetch from it for `s.lag`, or
/// not caught up for `s.caught_up`.
fn leaders_word(id: NodeId, d: &QuorumDescription, s: &QuorumSettings) -> Option<ControllerHit> {
    let v = d.voter(id)?;
    let hw = d.high_watermark;
    if let Some(f) = v.last_fetch_ago.filter(|f| *f >= s.lag) {
        return Some(ControllerHit {
            rule: ControllerRule::NotFetching,
            state: ControllerState::Lagging,
            detail: format!(
                "the leader has had no fetch from it for {} (log end offset {} of {hw})",
                secs(f),
                v.log_end_offset
            ),
        });
    }
    let c = v.last_caught_up_ago.filter(|c| *c >= s.caught_up)?;
    Some(ControllerHit {
        rule: ControllerRule::Behind,
        state: ControllerState::Lagging,
        detail: format!(
            "not caught up with the leader for {} (log end offset {} of {hw})",
            secs(c),
            v.log_end_offset
        ),
    })
}

/// The quorum's problem, if it has one.
fn problem(
    look: &QuorumObservation,
    d: Option<&QuorumDescription>,
    controllers: &[ControllerVerdict],
    still_for: Option<Duration>,
    s: &QuorumSettings,
    now: SystemTime,
) -> Option<QuorumProblem> {
    let voters = controllers.len().max(d.map_or(0, |d| d.voters.len()));
    let majority = voters / 2 + 1;
    let Some(d) = d else {
        return no_leader(look, controllers, majority, s, now);
    };
    let still = still_for.filter(|f| *f >= s.stall)?;
    // The high watermark stands still: the leader wedged, or too few voters caught up to
    // commit anything.
    let caught_up = caught_up(d, s);
    let since = look.high_watermark_still_since.unwrap_or(look.at);
    if !majority_caught_up(d, s) {
        let behind: Vec<NodeId> = d
            .voters
            .iter()
            .map(|v| v.id)
            .filter(|id| !caught_up.contains(id))
            .collect();
        return Some(QuorumProblem {
            kind: QuorumProblemKind::MajorityNotCaughtUp,
            detail: format!(
                "{} of {} voters caught up with leader {} (a majority is {majority}): its high watermark has stood at {} for {}; behind: {}",
                caught_up.len(),
                d.voters.len(),
                d.leader,
                d.high_watermark,
                secs(still),
                ids(&behind)
            ),
            suspects: behind,
            since,
        });
    }
    Some(QuorumProblem {
        kind: QuorumProblemKind::LeaderNotAdvancing,
        detail: format!(
            "controller {} leads at epoch {} and its high watermark has stood at {} for {} (an active controller writes a record every 500 ms): nothing it is asked is applied, and Kafka elects no other",
            d.leader,
            d.epoch,
            d.high_watermark,
            secs(still)
        ),
        suspects: vec![d.leader],
        since,
    })
}

/// Nothing answered as the quorum's leader: a problem once Kafka has had its election
/// time (at once when the configured controllers cannot make a majority), naming the last
/// leader and every voter that does not answer. None while the brokers still apply new
/// records or the watchdog is refused: then it is the asking that fails.
fn no_leader(
    look: &QuorumObservation,
    controllers: &[ControllerVerdict],
    majority: usize,
    s: &QuorumSettings,
    now: SystemTime,
) -> Option<QuorumProblem> {
    if still_applying(look, s, now) || refused_the_watchdog(look) {
        return None;
    }
    let direct = asked_directly(look);
    // Controllers asked directly that answer still vote: with a majority of them, Kafka
    // elects another leader within seconds.
    let answering: Vec<NodeId> = look
        .controllers
        .iter()
        .filter(|c| c.outcome.is_ok())
        .filter_map(|c| c.id)
        .collect();
    let since = look
        .last_leader
        .map(|l| l.2)
        .or_else(|| {
            look.controllers
                .iter()
                .filter_map(|c| c.failing_since)
                .min()
        })
        .unwrap_or(look.at);
    let out_for = now.duration_since(since).unwrap_or_default();
    // Asked through brokers only, nothing says how many voters are alive: Kafka is given
    // its election time, as when a majority answers. A follower controller's restart makes
    // one (the routine bench, Kafka 4.1: a voter of three stopped, the leader lost its
    // epoch and another was elected 4.5 s later, no record committed meanwhile). With
    // `controllers:` configured, a quorum that cannot elect is named at once.
    let can_elect = !direct || answering.len() >= majority;
    if can_elect && out_for < s.election_grace {
        return None;
    }
    // At fault: the last leader, then every voter that does not answer.
    let mut suspects: Vec<NodeId> = look.last_leader.map(|l| l.0).into_iter().collect();
    for c in controllers {
        if !answering.contains(&c.controller) && !suspects.contains(&c.controller) {
            suspects.push(c.controller);
        }
    }
    let last = match look.last_leader {
        Some((id, epoch, _)) => format!(
            "; controller {id} led at epoch {epoch}, {} ago",
            secs(out_for)
        ),
        None => String::new(),
    };
    let asked = match (&look.via_broker, direct) {
        (Some((address, Err(f))), _) => {
            format!(" (through broker {address}: {})", f.detail)
        }
        (_, true) => format!(
            " ({} of {} controller(s) asked answer, as followers)",
            answering.len(),
            look.controllers.len()
        ),
        _ => String::new(),
    };
    Some(QuorumProblem {
        kind: QuorumProblemKind::NoLeader,
        detail: format!(
            "no controller answers as the quorum's leader{asked}{last}: nothing can change the cluster's metadata (no election, no ISR change, no fencing, no topic)"
        ),
        suspects,
        since,
    })
}

/// The brokers asked keep applying new metadata records, which only a working leader
/// commits: when nothing answers as leader, it is the asking that fails, not the quorum
/// (the routine bench, Kafka 4.1: DescribeQuorum through two brokers timed out, then
/// answered UNKNOWN_SERVER_ERROR, for 22 s while a follower controller restarted).
fn still_applying(look: &QuorumObservation, s: &QuorumSettings, now: SystemTime) -> bool {
    let Some(applied) = look.metadata_applied else {
        return false;
    };
    let needed = if asked_directly(look) {
        s.applied_still
    } else {
        s.stall
    };
    now.duration_since(applied.since).unwrap_or_default() < needed
}

/// Asked through brokers only, the broker refused the watchdog itself (ACLs without
/// Describe on the cluster, credentials, TLS, a version it cannot speak): that is the
/// watchdog's access, on /status with the failure, and says nothing about the quorum.
fn refused_the_watchdog(look: &QuorumObservation) -> bool {
    !asked_directly(look)
        && matches!(
            &look.via_broker,
            Some((_, Err(f))) if matches!(
                f.kind,
                FailureKind::Authorization
                    | FailureKind::Authentication
                    | FailureKind::Tls
                    | FailureKind::Protocol
            )
        )
}

/// Controllers are asked directly and the way to them is open: one of them has been
/// reached since the watchdog started. Otherwise the quorum is read through the brokers
/// only, whatever `controllers:` says.
fn asked_directly(look: &QuorumObservation) -> bool {
    !look.controllers.is_empty() && !look.controllers_never_reached()
}

/// Why the configured controllers are not watched, when none has been reached since the
/// watchdog started: /status says it, beside each controller's `controller_never_reached`.
fn not_watched(look: &QuorumObservation, now: SystemTime) -> Option<String> {
    if !look.controllers_never_reached() {
        return None;
    }
    let since = look
        .controllers
        .iter()
        .filter_map(|c| c.failing_since)
        .min();
    let first = look.controllers[0].outcome.as_ref().err();
    Some(format!(
        "none of the {} configured controller(s) has accepted a connection in {} since the watchdog started{}: the control plane is judged through the brokers only (no controller named down or frozen, no voter lag); a network policy in the way? Strimzi lets only the cluster's own pods and its operator reach the controller port (docs/install-strimzi.md)",
        look.controllers.len(),
        secs(since.and_then(|t| now.duration_since(t).ok()).unwrap_or_default()),
        first.map(|f| format!(" ({})", f.detail)).unwrap_or_default(),
    ))
}

/// The voters caught up with the leader (the leader itself always is).
fn caught_up(d: &QuorumDescription, s: &QuorumSettings) -> Vec<NodeId> {
    d.voters
        .iter()
        .filter(|v| v.id == d.leader || v.last_caught_up_ago.is_some_and(|c| c < s.caught_up))
        .map(|v| v.id)
        .collect()
}

/// A majority of the voters is caught up, or the answer (v0) cannot say.
fn majority_caught_up(d: &QuorumDescription, s: &QuorumSettings) -> bool {
    d.version < 1 || caught_up(d, s).len() > d.voters.len() / 2
}

fn ids(ids: &[NodeId]) -> String {
    ids.iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Roles the controllers asked directly gave, for /status.
pub fn roles(look: &QuorumObservation) -> BTreeMap<NodeId, ControllerRole> {
    look.controllers
        .iter()
        .filter_map(|c| Some((c.id?, *c.outcome.as_ref().ok()?)))
        .collect()
}

pub mod metrics;

#[cfg(test)]
mod tests;
