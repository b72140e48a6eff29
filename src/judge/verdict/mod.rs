//! Verdicts, pure: from one round's observations (and the little the past says) to a state
//! per broker with the rules that fired. No I/O; `now` is a parameter. Rules are small
//! functions applied in order of severity; a broker's state is the worst rule that fired.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::judge::health::{BrokerPartitions, Health};
use crate::model::round::HostObservation;
use crate::model::round::{
    BrokerEndpoint, BrokerId, BrokerProbe, FailureKind, RoundObservation, NO_LEADER,
};
use crate::observe::cluster_view::ClusterView;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BrokerState {
    Healthy,
    /// The watchdog cannot see the cluster at all; it does not guess.
    Unknown,
    Degraded,
    Zombie,
    Down,
}

impl BrokerState {
    pub const ALL: [BrokerState; 5] = [
        BrokerState::Healthy,
        BrokerState::Unknown,
        BrokerState::Degraded,
        BrokerState::Zombie,
        BrokerState::Down,
    ];

    pub fn as_label(self) -> &'static str {
        match self {
            BrokerState::Healthy => "healthy",
            BrokerState::Unknown => "unknown",
            BrokerState::Degraded => "degraded",
            BrokerState::Zombie => "zombie",
            BrokerState::Down => "down",
        }
    }
}

/// Whether the rest of the cluster counts a broker as a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Registration {
    Registered,
    /// Registered but fenced by the controller (KRaft, seen through DescribeCluster v2).
    Fenced,
    /// Not in the broker list of the other brokers.
    Absent,
    /// No other broker answered, so nobody can say.
    Unknown,
}

/// Why a rule fired, for people and for webhooks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleHit {
    pub rule: &'static str,
    pub state: BrokerState,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrokerVerdict {
    pub broker: BrokerId,
    pub address: String,
    pub state: BrokerState,
    pub registration: Registration,
    /// It answered every direct request this round.
    pub answered: bool,
    /// Every rule that fired, worst first.
    pub hits: Vec<RuleHit>,
    /// When the evidence that decides its state was observed, when that was not the round
    /// (the continuous liveness check); `None`: at the round's start.
    #[serde(skip)]
    pub observed_at: Option<SystemTime>,
    /// When the fact that decides its state began to hold, when its evidence says so (a
    /// silence began with its first unanswered request); `None`: when first observed.
    #[serde(skip)]
    pub held_since: Option<SystemTime>,
    /// How long its state must hold before anyone is paged, when longer than usual: a broker
    /// that shut down cleanly is expected back within `restart_grace_secs`.
    #[serde(skip)]
    pub page_after: Option<Duration>,
}

/// Thresholds of the rules.
#[derive(Debug, Clone)]
pub struct VerdictSettings {
    /// A broker whose Metadata latency exceeds this factor times the median of its peers...
    pub latency_degraded_factor: f64,
    /// ...and exceeds this floor is slow (milliseconds of noise are not a finding).
    pub latency_floor: Duration,
    /// A broker that was down this recently and answers before it is registered again is
    /// registering, not a zombie (`verdict.restart_grace_secs`).
    pub restart_grace: Duration,
    /// A broker out of every ISR whose logs have not grown for this long (and that no
    /// reassignment is adding) has stopped replicating: a zombie. Until then it may be
    /// catching up (`verdict.catch_up_window_secs`).
    pub catch_up_window: Duration,
}

impl Default for VerdictSettings {
    fn default() -> Self {
        VerdictSettings {
            latency_degraded_factor: 5.0,
            latency_floor: Duration::from_millis(250),
            restart_grace: Duration::from_secs(120),
            catch_up_window: Duration::from_secs(60),
        }
    }
}

/// What the verdict needs to remember between rounds.
#[derive(Debug, Clone, Default)]
pub struct BrokerMemory {
    /// The last time the broker's port was closed or it was judged down.
    pub last_down_at: Option<SystemTime>,
    /// The state of the last round and since when the broker has been in it.
    pub state: Option<(BrokerState, SystemTime)>,
    /// The last round in which it answered every direct request.
    pub last_answered_at: Option<SystemTime>,
    /// Since when it has accepted TCP connections without answering; kept while connects
    /// then time out (its accept queue is full), so a frozen broker stays one episode.
    pub accepting_silently_since: Option<SystemTime>,
    /// While it is out of every ISR: what its logs looked like, and when they last grew.
    pub catch_up: Option<catch_up::CatchUpMemory>,
    /// When it was last seen shutting down cleanly; cleared once it is healthy again.
    pub stopped_cleanly_at: Option<SystemTime>,
    /// Asked right after its port refused: when, and how many partitions the cluster still
    /// named it leader or in-sync replica of (0: a controlled shutdown had moved it out).
    pub held_when_refused: Option<(SystemTime, u32)>,
}

/// Everything known about one broker this round, gathered once so rules stay one-liners.
#[derive(Debug, Clone)]
pub struct BrokerFacts<'a> {
    pub id: BrokerId,
    pub probe: &'a BrokerProbe,
    pub registration: Registration,
    pub partitions: BrokerPartitions,
    pub stale_leader_of: Vec<String>,
    pub disagreements: u32,
    pub peer_median_latency: Option<Duration>,
    pub recently_down: bool,
    /// Nothing in the cluster answered this round.
    pub cluster_invisible: bool,
    /// Partitions of every topic (the filter's or not) the merged view names it leader or
    /// in-sync replica of.
    pub holds_in_cluster: u32,
    /// Some other broker's answer reported fencing (DescribeCluster v2, Kafka 4.0+). Without
    /// one, a broker the others do not list may be fenced or unregistered: nobody says which.
    pub fencing_reported: bool,
    pub canary: CanaryFacts,
    /// Host mode's look at its process, when it runs on the watchdog's host.
    pub host: Option<&'a HostObservation>,
    /// How long since it last answered; `None` while it answers or when it never did.
    pub silent_for: Option<Duration>,
    /// How long it has accepted TCP connections without answering, counted from the first
    /// such round and kept while connects then time out; `None` outside such an episode.
    pub accepting_silently_for: Option<Duration>,
    /// Whether it is catching up, when it is out of every ISR.
    pub catch_up: catch_up::CatchUpFacts,
    /// Partitions ("t-0 (leader 1)") whose ISR it is missing from, where the evidence
    /// points at it rather than at the leader (see `cause`).
    pub lagging: Vec<String>,
    /// Partitions it leads ("t-0 (followers 2, 3)") whose followers dropped out of the ISR
    /// because of it, by the same evidence.
    pub followers_lost: Vec<String>,
}

/// What this round's canary says about one broker.
#[derive(Debug, Clone, Default)]
pub struct CanaryFacts {
    /// Canary partitions it leads.
    pub led: u32,
    /// Canary writes it received for partitions it leads that failed for a reason that
    /// points at the leader ("partition 3: timeout").
    pub failed: Vec<String>,
    /// Canary writes it received as leader (because the client's metadata still named it,
    /// or because it led the partition when they were sent, since the last round) for
    /// partitions the newest view gives to another broker, that it did not refuse as
    /// NOT_LEADER (a refusal is right and charges nobody).
    pub failed_elsewhere: Vec<String>,
    /// Canary acks=all writes that failed for lack of replication (NOT_ENOUGH_REPLICAS, or
    /// a timeout while the leader took acks=1 writes) where the evidence points at it.
    pub blamed: Vec<String>,
}

type Rule = fn(&BrokerFacts, &VerdictSettings) -> Option<RuleHit>;

/// The rules, most severe first. Each returns a hit or nothing.
const RULES: &[Rule] = &[
    port_closed,
    process_gone,
    process_exited,
    process_stopped,
    unreachable,
    // Before cluster_invisible: when the watchdog's password is wrong everywhere, that is
    // the first thing to say.
    auth_failed,
    protocol_error,
    cluster_invisible,
    process_alive_no_answer,
    no_answer,
    fenced_but_serving,
    stale_leader,
    out_of_every_isr,
    canary_writes_fail,
    out_of_some_isrs,
    followers_cannot_replicate,
    canary_not_enough_replicas,
    metadata_disagreement,
    slow,
    port_not_listening,
    log_dir_low_space,
    log_dir_unreadable,
];

fn hit(rule: &'static str, state: BrokerState, detail: String) -> Option<RuleHit> {
    Some(RuleHit {
        rule,
        state,
        detail,
    })
}

fn closed(kind: FailureKind) -> bool {
    matches!(
        kind,
        FailureKind::ConnectionRefused | FailureKind::Unresolvable
    )
}

/// Failures that are the watchdog's own access or compatibility problem, not news about the
/// broker: its credentials or certificates were refused (or the broker's certificate is not
/// one it trusts), or it cannot decode what the broker said. The broker may be perfectly
/// healthy for its own clients, so these never make a zombie.
pub fn access_rule(kind: FailureKind) -> Option<&'static str> {
    match kind {
        FailureKind::Authentication | FailureKind::Tls => Some("auth_failed"),
        FailureKind::Protocol => Some("protocol_error"),
        _ => None,
    }
}

/// The rules whose hits are the watchdog's own access problems (see `access_rule`).
pub const ACCESS_RULES: [&str; 2] = ["auth_failed", "protocol_error"];

/// The step and failure that kept the watchdog from an answer, when it is an access problem.
fn access_failure<'a>(
    f: &'a BrokerFacts,
) -> Option<(
    &'static str,
    &'static str,
    &'a crate::model::round::ProbeFailure,
)> {
    if f.probe.answered() {
        return None;
    }
    let (step, e) = f.probe.first_failure()?;
    access_rule(e.kind).map(|rule| (rule, step, e))
}

fn auth_failed(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    access_hit(
        f,
        "auth_failed",
        "cannot get in to",
        "check the watchdog's credentials and certificates, and this broker's certificate. This is the watchdog's access, not a verdict on the broker",
    )
}

fn protocol_error(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    access_hit(
        f,
        "protocol_error",
        "cannot understand",
        "a compatibility problem between the watchdog and this broker's version, not a verdict on the broker",
    )
}

/// The hit of access rule `rule` when the broker's first failure is of its kind.
fn access_hit(f: &BrokerFacts, rule: &'static str, cannot: &str, advice: &str) -> Option<RuleHit> {
    let (found, step, e) = access_failure(f)?;
    if found != rule {
        return None;
    }
    hit(
        rule,
        BrokerState::Unknown,
        format!(
            "the watchdog {cannot} {}: {step} failed: {} ({}); {advice}",
            f.probe.endpoint.address(),
            e.kind.as_label(),
            e.detail
        ),
    )
}

/// The rule of a broker whose port refuses connections: `shut_down_cleanly` when it was
/// leader and in-sync replica of nothing as its port closed (Kafka's controlled shutdown moves
/// leadership away and takes it out of the ISRs before the listener stops; a crash or a kill
/// leaves both until the controller notices), `port_closed` otherwise.
pub fn refusal_rule(leads: u32, cluster_invisible: bool) -> &'static str {
    if leads == 0 && !cluster_invisible {
        SHUT_DOWN_CLEANLY
    } else {
        "port_closed"
    }
}

pub const SHUT_DOWN_CLEANLY: &str = "shut_down_cleanly";

fn port_closed(f: &BrokerFacts, s: &VerdictSettings) -> Option<RuleHit> {
    let Err(e) = &f.probe.connect else {
        return None;
    };
    if !closed(e.kind) {
        return None;
    }
    let rule = refusal_rule(f.holds_in_cluster, f.cluster_invisible);
    if rule == SHUT_DOWN_CLEANLY {
        return hit(
            rule,
            BrokerState::Down,
            format!(
                "{} at {}, and it leads no partition and is in no ISR: a controlled shutdown (a restart, a maintenance stop); paged only if it is not back within {} s ({})",
                e.kind.as_label().replace('_', " "),
                f.probe.endpoint.address(),
                s.restart_grace.as_secs(),
                e.detail
            ),
        );
    }
    hit(
        "port_closed",
        BrokerState::Down,
        format!(
            "{} at {}: {}",
            e.kind.as_label().replace('_', " "),
            f.probe.endpoint.address(),
            e.detail
        ),
    )
}

fn unreachable(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let Err(e) = &f.probe.connect else {
        return None;
    };
    // A refused certificate is an answer: the port is reached (`auth_failed` says it).
    if closed(e.kind)
        || f.cluster_invisible
        || access_rule(e.kind).is_some()
        || accept_queue_full(f)
    {
        return None;
    }
    if process_alive(f) {
        // Host mode sees the process: the host is not gone, whatever the cluster says.
        return hit(
            "unreachable",
            BrokerState::Degraded,
            format!(
                "no TCP connection to {} ({}), yet its process is alive on this host",
                f.probe.endpoint.address(),
                e.detail
            ),
        );
    }
    if f.registration == Registration::Registered {
        // The cluster still sees it heartbeating: the fault may be on the watchdog's path.
        hit(
            "unreachable",
            BrokerState::Degraded,
            format!(
                "no TCP connection to {} ({}), yet the cluster lists it as registered",
                f.probe.endpoint.address(),
                e.detail
            ),
        )
    } else if f.registration == Registration::Unknown {
        // The other brokers are split on it: a tie convicts nobody.
        hit(
            "unreachable",
            BrokerState::Degraded,
            format!(
                "no TCP connection to {} ({}); the other brokers disagree on whether it is registered",
                f.probe.endpoint.address(),
                e.detail
            ),
        )
    } else {
        hit(
            "unreachable",
            BrokerState::Down,
            format!(
                "no TCP connection to {} ({}) and the cluster does not list it",
                f.probe.endpoint.address(),
                e.detail
            ),
        )
    }
}

fn cluster_invisible(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let refused = f.probe.connect.as_ref().is_err_and(|e| closed(e.kind));
    if !f.cluster_invisible || refused {
        return None;
    }
    hit(
        "cluster_invisible",
        BrokerState::Unknown,
        "no broker of the cluster answered this round; the fault may be the watchdog's own network"
            .into(),
    )
}

/// The connect timed out after the broker had accepted connections without answering: the
/// same frozen process, whose listen backlog is now full (the kernel completes handshakes
/// for a stopped process until then). A host that is gone also times out, but it was not
/// accepting silently the round before; a port that refuses ends the episode.
fn accept_queue_full(f: &BrokerFacts) -> bool {
    let timed_out = f
        .probe
        .connect
        .as_ref()
        .is_err_and(|e| e.kind == FailureKind::Timeout);
    timed_out && f.accepting_silently_for.is_some()
}

/// Host mode shows its process there and not exited: whatever the network says, the host
/// is not gone.
fn process_alive(f: &BrokerFacts) -> bool {
    f.host
        .and_then(|h| h.process.as_ref())
        .is_some_and(|p| !p.state.has_exited())
}

fn no_answer(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    if f.cluster_invisible || f.probe.answered() {
        return None;
    }
    if accept_queue_full(f) {
        let e = f.probe.connect.as_ref().err()?;
        let secs = f.accepting_silently_for.unwrap_or_default().as_secs();
        return hit(
            "no_answer",
            BrokerState::Zombie,
            format!(
                "TCP connect to {} timed out after {:.1} s: its accept queue is full, after it accepted connections without answering for {secs} s ({})",
                f.probe.endpoint.address(),
                e.after.as_secs_f64(),
                e.detail
            ),
        );
    }
    if !f.probe.tcp_open() {
        return None;
    }
    let (step, e) = f.probe.first_failure()?;
    if access_rule(e.kind).is_some() {
        return None;
    }
    let connect_ms = f
        .probe
        .connect
        .as_ref()
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0);
    hit(
        "no_answer",
        BrokerState::Zombie,
        format!(
            "TCP connect to {} succeeded in {connect_ms:.0} ms but {step} failed: {} after {:.1} s ({})",
            f.probe.endpoint.address(),
            e.kind.as_label(),
            e.after.as_secs_f64(),
            e.detail
        ),
    )
}

fn fenced_but_serving(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    if !f.probe.answered() {
        return None;
    }
    let why = match f.registration {
        Registration::Fenced if f.fencing_reported => "the controller has fenced it",
        Registration::Absent if f.fencing_reported => {
            "the other brokers do not list it as registered"
        }
        // Kafka before 4.0 reports no fencing: a broker that DescribeCluster v0-1 or Metadata
        // leaves out may be fenced or unregistered. Say what cannot be seen, not a guess.
        Registration::Fenced | Registration::Absent => {
            "the other brokers do not list it as registered (their Kafka reports no fencing \
             before 4.0: fenced or unregistered cannot be told apart)"
        }
        _ => return None,
    };
    // A broker that was down moments ago answers before it has registered and caught up:
    // that is a restart, not a zombie.
    if f.recently_down {
        return hit(
            "fenced_but_serving",
            BrokerState::Degraded,
            format!("answers clients but {why} (restarted recently: registering)"),
        );
    }
    hit(
        "fenced_but_serving",
        BrokerState::Zombie,
        format!("answers clients but {why}: it serves no partition"),
    )
}

fn stale_leader(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    if f.stale_leader_of.is_empty() {
        return None;
    }
    let n = f.stale_leader_of.len();
    let sample: Vec<&str> = f
        .stale_leader_of
        .iter()
        .take(5)
        .map(String::as_str)
        .collect();
    hit(
        "stale_leader",
        BrokerState::Zombie,
        format!(
            "still claims leadership of {n} partition(s) that a newer leader epoch gave to another broker (split brain): {}{}",
            sample.join(", "),
            if n > sample.len() { ", ..." } else { "" }
        ),
    )
}

fn out_of_every_isr(f: &BrokerFacts, s: &VerdictSettings) -> Option<RuleHit> {
    let p = &f.partitions;
    if !f.probe.answered()
        || p.replica_of == 0
        || p.leader_of > 0
        || p.missing_from_isr < p.replica_of
    {
        return None;
    }
    // Catching up (a broker added by a reassignment, restarted between rounds, back from a
    // long outage) and stuck (a dead fetcher) look the same in one round; only its logs over
    // rounds tell them apart. Until they have been still for the window: degraded.
    let c = &f.catch_up;
    let base = format!(
        "alive and answering, but missing from the ISR of all {} partition(s) it replicates and leads none",
        p.replica_of
    );
    let behind = match c.behind {
        Some(b) => format!(", {b} offset(s) behind its leaders"),
        None => String::new(),
    };
    let window = s.catch_up_window.as_secs();
    let (state, why) = if let Some(n) = c.adding.filter(|n| *n > 0) {
        (
            BrokerState::Degraded,
            format!(
                "catching up: an ongoing reassignment is adding it to {n} partition(s){behind}"
            ),
        )
    } else if c.measured == 0 {
        (
            BrokerState::Degraded,
            format!(
                "whether it catches up cannot be measured ({})",
                if c.errors.is_empty() {
                    "not measured this round".to_string()
                } else {
                    c.errors.join("; ")
                }
            ),
        )
    } else if let Some(g) = c.grew.filter(|g| *g > 0) {
        (
            BrokerState::Degraded,
            format!("catching up: its logs grew by {g} offset(s) since the last round{behind}"),
        )
    } else if c.behind.is_none() {
        // Its logs can only grow while a leader serves them.
        (
            BrokerState::Degraded,
            format!(
                "its logs have not grown for {} s, but no leader of its partitions answered: it has nothing to fetch from",
                c.stalled_for.as_secs()
            ),
        )
    } else if c.stalled_for < s.catch_up_window {
        (
            BrokerState::Degraded,
            format!(
                "watching whether it catches up: its logs have not grown for {} s of {window} s{behind}",
                c.stalled_for.as_secs()
            ),
        )
    } else {
        (
            BrokerState::Zombie,
            format!(
                "its logs have not grown for {} s{behind}: it does not replicate",
                c.stalled_for.as_secs()
            ),
        )
    };
    hit("out_of_every_isr", state, format!("{base}; {why}"))
}

fn canary_writes_fail(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let c = &f.canary;
    if c.failed.is_empty() {
        if c.failed_elsewhere.is_empty() {
            return None;
        }
        return hit(
            "canary_writes_fail",
            BrokerState::Degraded,
            format!(
                "canary writes sent to it as the partition's leader failed, and the newest view names another leader: {}",
                c.failed_elsewhere.join(", ")
            ),
        );
    }
    let all = c.failed.len() as u32 >= c.led && f.probe.answered();
    let state = if all {
        BrokerState::Zombie
    } else {
        BrokerState::Degraded
    };
    let detail = if all {
        format!(
            "answers requests, but every canary write to the {} partition(s) it leads failed: {}",
            c.led,
            c.failed.join(", ")
        )
    } else {
        format!(
            "canary writes failed on {} of the {} partition(s) it leads: {}",
            c.failed.len(),
            c.led,
            c.failed.join(", ")
        )
    };
    hit("canary_writes_fail", state, detail)
}

fn canary_not_enough_replicas(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    if f.canary.blamed.is_empty() {
        return None;
    }
    hit(
        "canary_not_enough_replicas",
        BrokerState::Degraded,
        format!(
            "canary acks=all writes fail for lack of in-sync replicas (NOT_ENOUGH_REPLICAS, or a timeout while the leader takes acks=1 writes) and the evidence points at this broker: {}",
            f.canary.blamed.join(", ")
        ),
    )
}

/// "t-0 (leader 1), t-1 (leader 1), ..." with at most five named.
fn sample_list(items: &[String]) -> String {
    let shown: Vec<&str> = items.iter().take(5).map(String::as_str).collect();
    format!(
        "{}{}",
        shown.join(", "),
        if items.len() > shown.len() {
            ", ..."
        } else {
            ""
        }
    )
}

fn out_of_some_isrs(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let p = &f.partitions;
    // Missing from an ISR whose leader is the suspect says nothing against this broker.
    if p.missing_from_isr == 0 || f.lagging.is_empty() || !f.probe.tcp_open() {
        return None;
    }
    let min = if p.causes_under_min_isr > 0 {
        format!(
            ", {} of them now under min.insync.replicas",
            p.causes_under_min_isr
        )
    } else {
        String::new()
    };
    hit(
        "out_of_some_isrs",
        BrokerState::Degraded,
        format!(
            "missing from the ISR of {} of the {} partition(s) it replicates{min}: {}",
            p.missing_from_isr,
            p.replica_of,
            sample_list(&f.lagging)
        ),
    )
}

fn followers_cannot_replicate(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    if f.followers_lost.is_empty() {
        return None;
    }
    hit(
        "followers_cannot_replicate",
        BrokerState::Degraded,
        format!(
            "the followers of {} partition(s) it leads dropped out of the ISR, and the evidence points at this leader, not at them: {}",
            f.followers_lost.len(),
            sample_list(&f.followers_lost)
        ),
    )
}

fn metadata_disagreement(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    (f.disagreements > 0 && f.stale_leader_of.is_empty())
        .then(|| {
            hit(
                "metadata_disagreement",
                BrokerState::Degraded,
                format!(
                    "its metadata names a different leader than the newest view for {} partition(s): its cache is behind",
                    f.disagreements
                ),
            )
        })
        .flatten()
}

fn slow(f: &BrokerFacts, s: &VerdictSettings) -> Option<RuleHit> {
    let own = f.probe.metadata_latency()?;
    let median = f.peer_median_latency?;
    let limit = median
        .mul_f64(s.latency_degraded_factor)
        .max(s.latency_floor);
    (own > limit)
        .then(|| {
            hit(
                "slow",
                BrokerState::Degraded,
                format!(
                    "Metadata took {:.0} ms, peers' median {:.0} ms",
                    own.as_secs_f64() * 1000.0,
                    median.as_secs_f64() * 1000.0
                ),
            )
        })
        .flatten()
}

// Host mode. Each rule says what the host shows in one sentence with what the protocol
// said, so the evidence reads like an operator's notes: "process 4711 stopped by a signal,
// port 9092 listening, no request answered for 12 s".

/// "no request answered for 12 s", or nothing while it answers.
fn silence(f: &BrokerFacts) -> String {
    if f.probe.answered() {
        return "it answers requests".into();
    }
    match f.silent_for {
        Some(d) => format!("no request answered for {} s", d.as_secs()),
        None => "no request answered this round".into(),
    }
}

/// The process in words: pid, state, CPU, threads, descriptors.
fn process_words(h: &HostObservation) -> String {
    let Some(p) = &h.process else {
        return match &h.not_found {
            Some(why) => format!("no process found ({why})"),
            None => "no process found".into(),
        };
    };
    let mut parts = vec![format!("process {} {}", p.pid, p.state.words())];
    match p.cpu_advancing {
        Some(true) => parts.push("CPU time advancing".into()),
        Some(false) => parts.push(format!("CPU time not advancing ({:.1} s)", p.cpu_seconds)),
        None => {}
    }
    let mut threads = format!("{} threads", p.threads);
    if let Some(d) = p.threads_in_io_wait.filter(|d| *d > 0) {
        threads.push_str(&format!(", {d} in uninterruptible I/O wait (D)"));
    }
    parts.push(threads);
    match (&p.open_fds, &p.open_fds_error) {
        (Some(n), _) => parts.push(format!("{n} open fds")),
        (None, Some(_)) => parts.push("open fds: cannot read (permission)".into()),
        (None, None) => {}
    }
    parts.join(", ")
}

/// The configured ports in words: "port 127.0.0.11:9092 listening (its socket)".
fn ports_words(h: &HostObservation) -> Option<String> {
    if let Some(e) = &h.ports_error {
        return Some(format!("ports: {e}"));
    }
    if h.ports.is_empty() {
        return None;
    }
    let words: Vec<String> = h
        .ports
        .iter()
        .map(|p| {
            let whose = match p.owned_by_process {
                Some(true) => " (its socket)",
                Some(false) => " (by another process)",
                None => "",
            };
            if p.listening {
                format!("port {} listening{whose}", p.port)
            } else {
                format!("port {} not listening", p.port)
            }
        })
        .collect();
    Some(words.join(", "))
}

/// Process, ports and silence in one sentence.
fn host_sentence(h: &HostObservation, f: &BrokerFacts) -> String {
    let mut parts = vec![process_words(h)];
    parts.extend(ports_words(h));
    parts.push(silence(f));
    parts.join("; ")
}

fn process_gone(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let h = f.host?;
    if !h.process_gone() {
        return None;
    }
    if f.probe.answered() {
        // Something answers at its address: the lookup is more likely wrong than Kafka.
        return hit(
            "process_gone",
            BrokerState::Degraded,
            format!(
                "{}; yet the broker answers at {}: check the host.brokers process setting",
                process_words(h),
                f.probe.endpoint.address()
            ),
        );
    }
    hit("process_gone", BrokerState::Down, host_sentence(h, f))
}

fn process_exited(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let h = f.host?;
    let p = h.process.as_ref()?;
    p.state
        .has_exited()
        .then(|| hit("process_exited", BrokerState::Down, host_sentence(h, f)))
        .flatten()
}

fn process_stopped(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let h = f.host?;
    let p = h.process.as_ref()?;
    // A stopped process serves nothing whatever its port says: the kernel still completes
    // TCP handshakes for it, which is why a port check calls it alive.
    p.state
        .is_stopped()
        .then(|| hit("process_stopped", BrokerState::Zombie, host_sentence(h, f)))
        .flatten()
}

fn process_alive_no_answer(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let h = f.host?;
    let p = h.process.as_ref()?;
    if p.state.is_stopped()
        || p.state.has_exited()
        || f.cluster_invisible
        || !f.probe.tcp_open()
        || f.probe.answered()
        || access_failure(f).is_some()
    {
        return None;
    }
    hit(
        "process_alive_no_answer",
        BrokerState::Zombie,
        host_sentence(h, f),
    )
}

fn port_not_listening(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let h = f.host?;
    let p = h.process.as_ref()?;
    if p.state.has_exited() {
        return None;
    }
    let bad: Vec<String> = h
        .ports
        .iter()
        .filter_map(|port| match (port.listening, port.owned_by_process) {
            (false, _) => Some(format!("nothing listens on {}", port.port)),
            (true, Some(false)) => Some(format!("{} is held by another process", port.port)),
            _ => None,
        })
        .collect();
    if bad.is_empty() {
        return None;
    }
    hit(
        "port_not_listening",
        BrokerState::Degraded,
        format!(
            "process {} is {}, but {}",
            p.pid,
            p.state.words(),
            bad.join(", ")
        ),
    )
}

fn log_dir_low_space(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let h = f.host?;
    let low: Vec<String> = h
        .low_log_dirs()
        .map(|d| {
            format!(
                "log dir {}: {} free of {} ({:.1}%)",
                d.path,
                crate::model::words::human_bytes(d.free_bytes.unwrap_or(0)),
                crate::model::words::human_bytes(d.total_bytes.unwrap_or(0)),
                d.free_ratio.unwrap_or(0.0) * 100.0
            )
        })
        .collect();
    if low.is_empty() {
        return None;
    }
    hit(
        "log_dir_low_space",
        BrokerState::Degraded,
        format!(
            "low free space, below {:.1}%: {}",
            h.log_dir_min_free_ratio * 100.0,
            low.join("; ")
        ),
    )
}

fn log_dir_unreadable(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let h = f.host?;
    let bad: Vec<String> = h
        .log_dirs
        .iter()
        .filter_map(|d| d.error.as_ref().map(|e| format!("{} ({e})", d.path)))
        .collect();
    if bad.is_empty() {
        return None;
    }
    hit(
        "log_dir_unreadable",
        BrokerState::Degraded,
        format!("free space cannot be read: {}", bad.join("; ")),
    )
}

/// How one answer speaks about the brokers it lists and does not list.
#[derive(Clone, Copy, PartialEq)]
enum AnswerKind {
    /// DescribeCluster v2 with fenced brokers (Kafka 4.0+): the controller's own records of
    /// registration and fencing, as this broker replayed them. Unlisted = absent.
    DescribedAll = 0,
    /// DescribeCluster without fenced brokers: unlisted may be fenced.
    DescribedUnfenced = 1,
    /// Metadata: unlisted = absent (KRaft also leaves fenced brokers out).
    Listed = 2,
}

fn answer_kind(probe: &BrokerProbe) -> Option<AnswerKind> {
    match (&probe.description, probe.metadata_view()) {
        (Some(Ok(d)), _) if d.includes_fenced => Some(AnswerKind::DescribedAll),
        (Some(Ok(_)), _) => Some(AnswerKind::DescribedUnfenced),
        (_, Some(_)) => Some(AnswerKind::Listed),
        _ => None,
    }
}

/// What the other brokers' answers say about one broker, by kind of answer.
#[derive(Clone, Copy, Default)]
struct Votes {
    registered: [u32; 3],
    fenced: [u32; 3],
    unlisted: [u32; 3],
}

impl Votes {
    /// The one definition of a broker's registration (verdicts, `/status`
    /// `listed_as_registered` and `broker_registered` all read it).
    ///
    /// "The controller's view" is what the watchdog can actually get from brokers: the
    /// registration and fencing records the active controller wrote, as each broker replays
    /// them and reports them in DescribeCluster v2 with fenced brokers. Controllers are not
    /// asked directly (their listener is usually closed to clients, and in KRaft the
    /// `controller_id` of Metadata and DescribeCluster names a random live broker, not the
    /// active controller). So the answers of that kind decide whenever any other broker gave
    /// one; only without any do Metadata lists and older DescribeCluster answers count.
    ///
    /// Either way a side needs a strict majority of those answers: one broker whose cache is
    /// behind must not make another guilty, so a tie (1:1 with three brokers) is `Unknown`.
    fn decide(&self) -> Registration {
        let all = AnswerKind::DescribedAll as usize;
        let (registered, fenced, absent) =
            if self.registered[all] + self.fenced[all] + self.unlisted[all] > 0 {
                (self.registered[all], self.fenced[all], self.unlisted[all])
            } else {
                let (unfenced, listed) = (
                    AnswerKind::DescribedUnfenced as usize,
                    AnswerKind::Listed as usize,
                );
                (
                    self.registered[unfenced] + self.registered[listed],
                    self.fenced[unfenced] + self.unlisted[unfenced],
                    self.unlisted[listed],
                )
            };
        let total = registered + fenced + absent;
        if total == 0 {
            Registration::Unknown
        } else if registered * 2 > total {
            Registration::Registered
        } else if (fenced + absent) * 2 > total {
            if fenced >= absent {
                Registration::Fenced
            } else {
                Registration::Absent
            }
        } else {
            Registration::Unknown
        }
    }
}

/// How the other brokers see each probed broker (see `Votes::decide`); a broker's own
/// answer does not count.
///
/// Every answer lists every broker, so the input is brokers^2 entries; they are counted in
/// one pass into dense tables, and what an answer does not list is derived from how many
/// answers of each kind there were.
pub fn registrations(obs: &RoundObservation) -> BTreeMap<BrokerId, Registration> {
    #[derive(Clone, Copy, Default)]
    struct Tally {
        votes: Votes,
        /// Listed (registered or fenced) by answers of each kind.
        listed: [u32; 3],
        /// The kind of this broker's own answer, which does not count.
        own: Option<usize>,
        /// The last answer that listed it, so a duplicated entry counts once.
        stamp: usize,
    }
    let index: crate::model::round::IdMap<usize> = obs
        .probes
        .keys()
        .enumerate()
        .map(|(i, id)| (*id, i))
        .collect();
    let mut tallies = vec![Tally::default(); index.len()];
    let mut answers_of_kind = [0u32; 3];
    for (n, (source, probe)) in obs.probes.iter().enumerate() {
        let Some(kind) = answer_kind(probe) else {
            continue;
        };
        let kind = kind as usize;
        tallies[n].own = Some(kind);
        answers_of_kind[kind] += 1;
        let mut count = |id: BrokerId, fenced: bool| {
            let Some(&i) = index.get(&id) else { return };
            if id == *source || tallies[i].stamp == n + 1 {
                return;
            }
            let t = &mut tallies[i];
            t.stamp = n + 1;
            t.listed[kind] += 1;
            if fenced {
                t.votes.fenced[kind] += 1;
            } else {
                t.votes.registered[kind] += 1;
            }
        };
        match (&probe.description, probe.metadata_view()) {
            (Some(Ok(d)), _) => d
                .brokers
                .iter()
                .for_each(|b| count(b.endpoint.id, b.fenced)),
            (_, Some(m)) => m.brokers.iter().for_each(|b| count(b.id, false)),
            _ => {}
        }
    }
    obs.probes
        .keys()
        .zip(&tallies)
        .map(|(id, t)| {
            let mut votes = t.votes;
            // Answers of each kind from the other brokers that did not list this one.
            for (k, unlisted) in votes.unlisted.iter_mut().enumerate() {
                let others = answers_of_kind[k] - u32::from(t.own == Some(k));
                *unlisted = others - t.listed[k];
            }
            (*id, votes.decide())
        })
        .collect()
}

/// What this round's answers say about a broker that was not probed, decided by the same
/// rule as `registrations`. One pass over the answers per broker: only for the few that
/// are not probed.
fn unprobed_votes(obs: &RoundObservation, id: BrokerId) -> Votes {
    let mut votes = Votes::default();
    for probe in obs.probes.values() {
        let Some(kind) = answer_kind(probe) else {
            continue;
        };
        let k = kind as usize;
        let listed = match (&probe.description, probe.metadata_view()) {
            (Some(Ok(d)), _) => d
                .brokers
                .iter()
                .find(|b| b.endpoint.id == id)
                .map(|b| b.fenced),
            (_, Some(m)) => m.brokers.iter().any(|b| b.id == id).then_some(false),
            _ => None,
        };
        match listed {
            Some(true) => votes.fenced[k] += 1,
            Some(false) => votes.registered[k] += 1,
            None => votes.unlisted[k] += 1,
        }
    }
    votes
}

/// The median Metadata latency of the other brokers, for each broker, from one sorted list.
fn peer_medians(obs: &RoundObservation) -> BTreeMap<BrokerId, Duration> {
    let mut all: Vec<Duration> = obs
        .probes
        .values()
        .filter_map(BrokerProbe::metadata_latency)
        .collect();
    all.sort_unstable();
    let m = all.len();
    obs.probes
        .iter()
        .filter_map(|(id, p)| {
            let median = match p.metadata_latency() {
                // The median of the list without this broker's own value.
                Some(own) => {
                    if m < 2 {
                        return None;
                    }
                    let pos = all.partition_point(|d| *d < own);
                    let k = (m - 1) / 2;
                    if k < pos {
                        all[k]
                    } else {
                        all[k + 1]
                    }
                }
                None => *all.get(m / 2)?,
            };
            Some((*id, median))
        })
        .collect()
}

/// The decided cause of every broken replication link of the round: the health problems'
/// links, the canary partitions' links and the canary's acks=all timeouts on leaders that
/// still take acks=1 writes, decided together (see `cause`).
pub struct Causes {
    /// Per broker, the links where it is the suspect follower ("t-0 (leader 1)").
    pub lagging: BTreeMap<BrokerId, Vec<String>>,
    /// Per broker, the partitions it leads whose followers it lost ("t-0 (followers 2)").
    pub followers_lost: BTreeMap<BrokerId, Vec<String>>,
    /// Per (topic, partition, follower) link, its suspects.
    links: BTreeMap<(String, i32, BrokerId), Vec<BrokerId>>,
    pub canary: BTreeMap<BrokerId, CanaryFacts>,
    /// Per canary partition whose write failed, the brokers it is charged to.
    pub canary_charged: BTreeMap<i32, Vec<BrokerId>>,
}

/// Whether the canary's acks=all write to this partition timed out at a leader that still
/// took the direct acks=1 write: it appends, and waits on followers.
fn leader_appends(
    round: &crate::observe::canary::CanaryRound,
    p: &crate::observe::canary::PartitionRound,
) -> bool {
    p.produce_error
        .as_ref()
        .is_some_and(|e| e.kind == "timeout" && e.broker == Some(p.leader))
        && round
            .acks1
            .iter()
            .any(|a| a.partition == p.partition && a.broker == p.leader && a.offset.is_some())
}

/// Decides the causes of the round. `sick` is `cause::sickness` of the round.
pub fn causes(
    health: &Health,
    canary: Option<&crate::observe::canary::CanaryRound>,
    sick: &cause::Sickness,
) -> Causes {
    let mut links: Vec<cause::Link> = Vec::new();
    let mut seen: std::collections::BTreeSet<(String, i32)> = Default::default();
    for p in &health.problems {
        seen.insert((p.topic.clone(), p.partition));
        links.extend(cause::links_of(
            &p.topic,
            p.partition,
            p.leader,
            &p.settled_replicas(),
            &p.isr,
        ));
    }
    let mut waits: Vec<(i32, BrokerId, Vec<BrokerId>)> = Vec::new();
    if let Some(round) = canary {
        for p in &round.partitions {
            if !seen.contains(&(round.topic.clone(), p.partition)) {
                let settled: Vec<BrokerId> = p
                    .replicas
                    .iter()
                    .copied()
                    .filter(|r| !health.reassigning.adds(&round.topic, p.partition, *r))
                    .collect();
                links.extend(cause::links_of(
                    &round.topic,
                    p.partition,
                    p.leader,
                    &settled,
                    &p.isr,
                ));
            }
            if leader_appends(round, p) {
                // A write that timed out while a replica was being dropped from the ISR
                // waited on that replica, not on the followers still in sync: with the
                // continuous canary such a timeout often arrives after the shrink (the lab's
                // cut-replication tests saw the healthy follower blamed).
                let dropped: Vec<BrokerId> = p
                    .replicas
                    .iter()
                    .copied()
                    .filter(|r| *r != p.leader && !p.isr.contains(r))
                    .collect();
                let followers: Vec<BrokerId> = if dropped.is_empty() {
                    p.isr.iter().copied().filter(|r| *r != p.leader).collect()
                } else {
                    dropped
                };
                if !followers.is_empty() {
                    waits.push((p.partition, p.leader, followers));
                }
            }
        }
    }
    let mut lags: Vec<cause::Lag> = links.iter().map(cause::Link::lag).collect();
    lags.extend(waits.iter().map(|(_, leader, followers)| cause::Lag {
        leader: *leader,
        followers: followers.clone(),
        leader_candidate: true,
    }));
    let decided = cause::decide(&lags, sick);
    let mut out = Causes {
        lagging: BTreeMap::new(),
        followers_lost: BTreeMap::new(),
        links: BTreeMap::new(),
        canary: BTreeMap::new(),
        canary_charged: BTreeMap::new(),
    };
    let mut lost: BTreeMap<(BrokerId, String, i32), Vec<BrokerId>> = BTreeMap::new();
    for (link, suspects) in links.iter().zip(&decided) {
        let name = format!("{}-{}", link.topic, link.partition);
        for s in suspects {
            if *s == link.follower {
                out.lagging
                    .entry(*s)
                    .or_default()
                    .push(format!("{name} (leader {})", link.leader));
            } else if *s == link.leader {
                lost.entry((*s, link.topic.clone(), link.partition))
                    .or_default()
                    .push(link.follower);
            }
        }
        out.links.insert(
            (link.topic.clone(), link.partition, link.follower),
            suspects.clone(),
        );
    }
    for ((leader, topic, partition), followers) in lost {
        let list: Vec<String> = followers.iter().map(|f| f.to_string()).collect();
        let why = sick
            .get(&leader)
            .map(|w| format!("; {w}"))
            .unwrap_or_default();
        out.followers_lost.entry(leader).or_default().push(format!(
            "{topic}-{partition} (follower(s) {}{why})",
            list.join(", ")
        ));
    }
    if let Some(round) = canary {
        let wait_suspects: BTreeMap<i32, &Vec<BrokerId>> = waits
            .iter()
            .zip(&decided[links.len()..])
            .map(|((partition, _, _), s)| (*partition, s))
            .collect();
        (out.canary, out.canary_charged) = canary_facts(round, &out.links, &wait_suspects, sick);
    }
    out
}

/// Attributes each canary partition's result to the broker that received the write, never
/// to the view's leader on the client's word: a failure for lack of in-sync replicas or an
/// acks=all timeout on a leader that still takes acks=1 writes to the decided cause of
/// the partition's broken links; a NOT_LEADER from a broker the view does not name leader
/// to nobody (it is right, the client's metadata is old); a write that never reached a
/// broker (queue full, timed out in the client) to nobody; any other failure to the broker
/// that received it.
fn canary_facts(
    round: &crate::observe::canary::CanaryRound,
    links: &BTreeMap<(String, i32, BrokerId), Vec<BrokerId>>,
    waits: &BTreeMap<i32, &Vec<BrokerId>>,
    sick: &cause::Sickness,
) -> (
    BTreeMap<BrokerId, CanaryFacts>,
    BTreeMap<i32, Vec<BrokerId>>,
) {
    let mut facts: BTreeMap<BrokerId, CanaryFacts> = BTreeMap::new();
    let mut charged: BTreeMap<i32, Vec<BrokerId>> = BTreeMap::new();
    let blame = |facts: &mut BTreeMap<BrokerId, CanaryFacts>,
                 suspects: &[BrokerId],
                 p: &crate::observe::canary::PartitionRound,
                 what: &str| {
        for s in suspects {
            let role = if *s == p.leader {
                match sick.get(s) {
                    Some(why) => format!("it leads it and {why}"),
                    None => "it leads it and its followers keep up with other leaders".into(),
                }
            } else {
                "it is the follower that does not keep up".into()
            };
            facts
                .entry(*s)
                .or_default()
                .blamed
                .push(format!("partition {}: {what}, {role}", p.partition));
        }
    };
    for p in &round.partitions {
        if p.leader >= 0 {
            facts.entry(p.leader).or_default().led += 1;
        }
        // Writes that failed since the last round at a broker that no longer leads the
        // partition: a leader outage shorter than a round, charged to the leader that had
        // it (issue 14 item 2). Refusals, client-side failures and replication failures (whose cause the
        // round's links decide) charge nobody here.
        for fw in &p.failed_writes {
            let latest_there = p
                .produce_error
                .as_ref()
                .is_some_and(|e| e.broker == Some(fw.broker));
            // Only where the client says which broker had them: a write that never left
            // the client charges nobody (as below).
            if !fw.received
                || fw.leader_appended
                || fw.broker == p.leader
                || latest_there
                || fw.kind == crate::observe::canary::AUTHORIZATION
                || fw.kind == "not_leader"
                || crate::observe::canary::client_side(fw.kind)
                || crate::observe::canary::blames_followers(fw.kind)
            {
                continue;
            }
            let to = charged.entry(p.partition).or_default();
            if !to.contains(&fw.broker) {
                to.push(fw.broker);
            }
            facts
                .entry(fw.broker)
                .or_default()
                .failed_elsewhere
                .push(format!(
                    "partition {}: {} x{} while it led it (the view's leader is now {})",
                    p.partition, fw.kind, fw.count, p.leader
                ));
        }
        let Some(err) = &p.produce_error else {
            continue;
        };
        let to = charged.entry(p.partition).or_default();
        // Refused to the watchdog's user: its permissions, not the broker, are at fault.
        if err.kind == crate::model::words::AUTHORIZATION
            || crate::model::words::client_side(err.kind)
        {
            continue;
        }
        let Some(received) = err.broker else {
            continue;
        };
        let what = format!("partition {}: {}", p.partition, err.kind);
        if received != p.leader {
            if err.kind != "not_leader" {
                to.push(received);
                facts
                    .entry(received)
                    .or_default()
                    .failed_elsewhere
                    .push(format!("{what} (the view's leader is {})", p.leader));
            }
            continue;
        }
        if crate::model::words::blames_followers(err.kind) {
            let mut suspects: Vec<BrokerId> = p
                .replicas
                .iter()
                .filter(|r| !p.isr.contains(r))
                .flat_map(|r| {
                    links
                        .get(&(round.topic.clone(), p.partition, *r))
                        .cloned()
                        .unwrap_or_default()
                })
                .collect();
            suspects.sort_unstable();
            suspects.dedup();
            to.extend(&suspects);
            blame(&mut facts, &suspects, p, "NOT_ENOUGH_REPLICAS");
        } else if let Some(suspects) = waits.get(&p.partition) {
            to.extend(suspects.iter());
            blame(
                &mut facts,
                suspects,
                p,
                "acks=all timed out while the leader took acks=1 writes",
            );
        } else {
            to.push(p.leader);
            facts.entry(p.leader).or_default().failed.push(what);
        }
    }
    (facts, charged)
}

/// Replaces the suspects of every partition problem with an online leader by the decided
/// causes of its broken links (plus the leader when it is outside its own ISR), so the
/// partition findings name the same brokers as the verdicts; notes in each failed canary
/// write whom it is charged to, for the canary findings.
pub fn attribute_suspects(
    obs: &RoundObservation,
    view: &ClusterView,
    health: &mut Health,
    canary: Option<&mut crate::observe::canary::CanaryRound>,
) {
    let sick = cause::sickness(obs, view);
    let mut canary = canary;
    let c = causes(health, canary.as_deref(), &sick);
    if let Some(round) = canary.as_mut() {
        for p in &mut round.partitions {
            p.charged_to = c.canary_charged.get(&p.partition).cloned();
        }
    }
    for p in &mut health.problems {
        if p.leader < 0 {
            continue;
        }
        let mut suspects: Vec<BrokerId> = p
            .replicas
            .iter()
            .filter(|r| **r != p.leader && !p.isr.contains(r))
            .flat_map(|r| {
                c.links
                    .get(&(p.topic.clone(), p.partition, *r))
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
        if !p.isr.contains(&p.leader) {
            suspects.push(p.leader);
        }
        let mut seen = std::collections::BTreeSet::new();
        suspects.retain(|b| seen.insert(*b));
        p.suspects = suspects;
    }
}

/// Whether any partition of the newest view names `broker` as a replica (offline replicas
/// included): the whole view, not only the topics the filter admits.
fn named_as_replica(view: &ClusterView, broker: BrokerId) -> bool {
    view.topics.values().any(|t| {
        t.partitions
            .iter()
            .any(|p| p.replicas.contains(&broker) || p.offline_replicas.contains(&broker))
    })
}

/// Per broker, the partitions of every topic the view names it leader or in-sync replica of.
/// Kafka's controlled shutdown moves a broker's leaderships away and takes it out of every
/// ISR before its listener closes; a killed broker keeps both until the controller notices.
pub fn holdings_in(view: &ClusterView) -> BTreeMap<BrokerId, u32> {
    let mut n = BTreeMap::new();
    for t in view.topics.values() {
        for p in &t.partitions {
            let mut held: smallvec::SmallVec<[BrokerId; 8]> = p.isr.iter().copied().collect();
            if p.leader != NO_LEADER && !held.contains(&p.leader) {
                held.push(p.leader);
            }
            held.sort_unstable();
            held.dedup();
            for b in held {
                *n.entry(b).or_insert(0) += 1;
            }
        }
    }
    n
}

/// The verdict of every probed broker.
pub fn judge(
    obs: &RoundObservation,
    view: &ClusterView,
    health: &Health,
    canary: Option<&crate::observe::canary::CanaryRound>,
    memory: &BTreeMap<BrokerId, BrokerMemory>,
    settings: &VerdictSettings,
    now: SystemTime,
) -> Vec<BrokerVerdict> {
    let cluster_invisible = !obs.probes.values().any(BrokerProbe::answered);
    let registrations = registrations(obs);
    let sick = cause::sickness_with(obs, view, &registrations);
    let mut causes = causes(health, canary, &sick);
    let medians = peer_medians(obs);
    // Only a refused broker's leaderships are asked about; a healthy round of a large
    // cluster does not count them.
    let refused = obs
        .probes
        .values()
        .any(|p| p.connect.as_ref().is_err_and(|e| closed(e.kind)));
    let leads = if refused {
        holdings_in(view)
    } else {
        BTreeMap::new()
    };
    // Answers reporting fencing, counted once per round (each broker's own is taken off).
    let fencing_answers = obs
        .probes
        .values()
        .filter(|p| answer_kind(p) == Some(AnswerKind::DescribedAll))
        .count() as u32;
    let mut stale: BTreeMap<BrokerId, Vec<String>> = BTreeMap::new();
    for s in &view.stale_leaders {
        stale.entry(s.broker).or_default().push(format!(
            "{}-{} (epoch {} < {})",
            s.topic, s.partition, s.claimed_epoch, s.current_epoch
        ));
    }
    let mut verdicts: Vec<BrokerVerdict> = obs
        .probes
        .iter()
        .filter(|(id, probe)| {
            // Emptied, stopped and unregistered: it left the cluster. Kafka forgot it, and a
            // "down" page for a decommissioned broker is a false page; the prober stops
            // asking after forget_broker_after_secs.
            let left = !cluster_invisible
                && !probe.answered()
                && registrations.get(id) == Some(&Registration::Absent)
                && !named_as_replica(view, **id);
            !left
        })
        .map(|(id, probe)| {
            let mem = memory.get(id);
            let recently_down = mem
                .and_then(|m| m.last_down_at)
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|ago| ago < settings.restart_grace);
            let facts = BrokerFacts {
                id: *id,
                probe,
                registration: registrations
                    .get(id)
                    .copied()
                    .unwrap_or(Registration::Unknown),
                partitions: health.brokers.get(id).cloned().unwrap_or_default(),
                stale_leader_of: stale.remove(id).unwrap_or_default(),
                disagreements: view.disagreements.get(id).copied().unwrap_or(0),
                peer_median_latency: medians.get(id).copied(),
                recently_down,
                cluster_invisible,
                holds_in_cluster: leads.get(id).copied().unwrap_or(0),
                fencing_reported: fencing_answers
                    > u32::from(answer_kind(probe) == Some(AnswerKind::DescribedAll)),
                canary: causes.canary.remove(id).unwrap_or_default(),
                host: obs.host.get(id),
                silent_for: if probe.answered() {
                    None
                } else {
                    mem.and_then(|m| m.last_answered_at)
                        .and_then(|t| now.duration_since(t).ok())
                },
                accepting_silently_for: mem
                    .and_then(|m| m.accepting_silently_since)
                    .map(|t| now.duration_since(t).unwrap_or_default()),
                catch_up: catch_up::facts(obs, *id, mem, now),
                lagging: causes.lagging.remove(id).unwrap_or_default(),
                followers_lost: causes.followers_lost.remove(id).unwrap_or_default(),
            };
            verdict_of(&facts, settings)
        })
        .collect();
    // Brokers that partitions name as replicas but that were not probed: either nobody lists
    // them and their address was never learned (down since before the watchdog started:
    // down, as far as anyone knows), or this round's answers list them and they are probed
    // from the next round on (unknown until then, not down).
    if !cluster_invisible {
        for (id, p) in &health.brokers {
            if obs.probes.contains_key(id) || p.replica_of == 0 {
                continue;
            }
            let votes = unprobed_votes(obs, *id);
            let listed_by: u32 = votes.registered.iter().chain(&votes.fenced).sum();
            // Listed by some answer: the prober learned its address from this very round
            // and probes it from the next one. Until then nothing is known of it.
            let hit = if listed_by > 0 {
                RuleHit {
                    rule: "not_probed_yet",
                    state: BrokerState::Unknown,
                    detail: format!(
                        "replica of {} partition(s), listed by {listed_by} broker(s) this round, not probed yet: its address was just learned and the next round probes it",
                        p.replica_of
                    ),
                }
            } else {
                RuleHit {
                    rule: "not_registered",
                    state: BrokerState::Down,
                    detail: format!(
                        "replica of {} partition(s) ({} offline), but no broker lists it and its address was never seen",
                        p.replica_of, p.replica_of_offline
                    ),
                }
            };
            let address =
                obs.probes
                    .values()
                    .find_map(|p| {
                        let listed = p
                            .metadata_view()
                            .and_then(|m| m.brokers.iter().find(|b| b.id == *id));
                        let described = p.description.iter().flatten().find_map(|d| {
                            d.brokers.iter().map(|b| &b.endpoint).find(|e| e.id == *id)
                        });
                        listed.or(described).map(BrokerEndpoint::address)
                    })
                    .unwrap_or_default();
            verdicts.push(BrokerVerdict {
                broker: *id,
                address,
                state: hit.state,
                registration: if listed_by > 0 {
                    votes.decide()
                } else {
                    Registration::Absent
                },
                answered: false,
                hits: vec![hit],
                observed_at: None,
                held_since: None,
                page_after: None,
            });
        }
        verdicts.sort_by_key(|v| v.broker);
    }
    hold_after_clean_stop(&mut verdicts, memory, settings, now);
    verdicts
}

/// Applies every rule to one broker.
pub fn verdict_of(facts: &BrokerFacts, settings: &VerdictSettings) -> BrokerVerdict {
    let mut hits: Vec<RuleHit> = RULES
        .iter()
        .filter_map(|rule| rule(facts, settings))
        .collect();
    hits.sort_by_key(|h| std::cmp::Reverse(h.state));
    BrokerVerdict {
        broker: facts.id,
        address: facts.probe.endpoint.address(),
        state: hits
            .first()
            .map(|h| h.state)
            .unwrap_or(BrokerState::Healthy),
        registration: facts.registration,
        answered: facts.probe.answered(),
        hits,
        observed_at: None,
        held_since: None,
        page_after: None,
    }
}

/// Updates what the verdicts remember, after a round.
pub fn remember(
    memory: &mut BTreeMap<BrokerId, BrokerMemory>,
    verdicts: &[BrokerVerdict],
    now: SystemTime,
) {
    for v in verdicts {
        if v.answered {
            memory.entry(v.broker).or_default().last_answered_at = Some(now);
        }
    }
    remember_states(memory, verdicts, now);
    memory.retain(|id, _| verdicts.iter().any(|v| v.broker == *id));
}

/// A broker seen shutting down cleanly is expected back: until it is healthy again, what it
/// goes through (down, restarting, registering, catching up) pages only if it outlasts the
/// restart grace. A zombie verdict pages as always: the rules already spare a restart that.
pub fn hold_after_clean_stop(
    verdicts: &mut [BrokerVerdict],
    memory: &BTreeMap<BrokerId, BrokerMemory>,
    settings: &VerdictSettings,
    now: SystemTime,
) {
    for v in verdicts {
        if matches!(v.state, BrokerState::Healthy | BrokerState::Zombie) {
            continue;
        }
        let clean_now = v.hits.iter().any(|h| h.rule == SHUT_DOWN_CLEANLY);
        let clean_recently = memory
            .get(&v.broker)
            .and_then(|m| m.stopped_cleanly_at)
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|ago| ago < settings.restart_grace);
        if clean_now || clean_recently {
            v.page_after = Some(settings.restart_grace);
        }
    }
}

/// The part of [`remember`] a re-evaluation between rounds updates too: each broker's
/// state and since when, and when it was last down (the restart grace counts from it).
pub fn remember_states(
    memory: &mut BTreeMap<BrokerId, BrokerMemory>,
    verdicts: &[BrokerVerdict],
    now: SystemTime,
) {
    for v in verdicts {
        let m = memory.entry(v.broker).or_default();
        if v.state == BrokerState::Down {
            m.last_down_at = Some(now);
        }
        if v.state == BrokerState::Healthy {
            m.stopped_cleanly_at = None;
        } else if v.hits.iter().any(|h| h.rule == SHUT_DOWN_CLEANLY) {
            m.stopped_cleanly_at.get_or_insert(now);
        }
        if m.state.is_none_or(|(s, _)| s != v.state) {
            m.state = Some((v.state, now));
        }
    }
}

/// [`remember`], plus what this round's observation adds: since when a broker accepts
/// connections without answering, and the catch-up measurements of brokers out of every ISR.
pub fn remember_round(
    memory: &mut BTreeMap<BrokerId, BrokerMemory>,
    obs: &RoundObservation,
    verdicts: &[BrokerVerdict],
    now: SystemTime,
) {
    remember(memory, verdicts, now);
    catch_up::remember_silence(memory, obs, now);
    catch_up::remember(memory, obs, verdicts, now);
}

pub mod catch_up;
pub mod cause;
pub mod live;

pub use live::apply_liveness;

#[cfg(test)]
mod tests;
