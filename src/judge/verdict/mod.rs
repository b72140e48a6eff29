//! Verdicts, pure: from one round's observations (and the little the past says) to a state
//! per broker with the rules that fired. No I/O; `now` is a parameter. Rules are small
//! functions applied in order of severity; a broker's state is the worst rule that fired.
//!
//! This file holds the verdict types, the rule table and the judge. The rules live by family
//! in `rules_reach.rs`, `rules_access.rs`, `rules_partitions.rs`, `rules_canary.rs` and
//! `rules_host.rs`; what they read in `facts.rs` and `registration.rs`; who is to blame for
//! broken replication in `cause.rs`; catching up and liveness in `catch_up.rs` and `live.rs`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::config::{CoordinatorsConfig, VerdictKeys};
use crate::judge::health::Health;
pub use crate::judge::rule::{BrokerState, Rule};
use crate::model::round::{BrokerEndpoint, BrokerId, BrokerProbe, RoundObservation};
use crate::observe::cluster_view::ClusterView;

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
    pub rule: Rule,
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
    /// A broker's Raft fetch of the metadata log keeps up when the quorum's leader had a
    /// fetch from it within this...
    pub metadata_fetch_lag: Duration,
    /// ...and it was caught up within this (`stale_metadata`).
    pub metadata_caught_up: Duration,
    /// A described log directory with less free space than this share is filling
    /// (`verdict.log_dir_min_free_ratio`)...
    pub log_dir_min_free_ratio: f64,
    /// ...and so is one full within this at its recent pace; zero: no forecast
    /// (`verdict.log_dir_full_within_secs`).
    pub log_dir_full_within: Duration,
    /// When the group coordinator probe's evidence counts (`coordinators:`).
    pub coordinators: CoordinatorRules,
    /// When a listener certificate is worth an incident (`certificates:`).
    pub certificates: crate::judge::certificates::CertificateRules,
}

impl VerdictSettings {
    /// The thresholds a cluster's configuration sets (its `verdict:`, `coordinators:` and
    /// `certificates:` blocks), beside the judge's own.
    pub fn configured(
        verdict: &VerdictKeys,
        coordinators: &CoordinatorsConfig,
        certificates: &crate::config::CertificatesConfig,
    ) -> Self {
        VerdictSettings {
            latency_degraded_factor: verdict.latency_degraded_factor,
            latency_floor: Duration::from_millis(250),
            restart_grace: verdict.restart_grace,
            catch_up_window: verdict.catch_up_window,
            metadata_fetch_lag: Duration::from_secs(3),
            metadata_caught_up: Duration::from_secs(6),
            log_dir_min_free_ratio: verdict.log_dir_min_free_ratio,
            log_dir_full_within: verdict.log_dir_full_within,
            coordinators: CoordinatorRules::configured(coordinators),
            certificates: certificates.into(),
        }
    }
}

/// The key table's defaults: what a configuration that sets nothing judges with.
impl Default for VerdictSettings {
    fn default() -> Self {
        VerdictSettings::configured(
            &VerdictKeys::default(),
            &CoordinatorsConfig::default(),
            &Default::default(),
        )
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
    /// The last round in which the other brokers listed it as registered (and unfenced).
    pub registered_at: Option<SystemTime>,
    /// Since when it has been `slow`: it stays so until its answers are clearly back among
    /// its peers', not at the first answer under the line (see `live::slow`).
    pub slow_since: Option<SystemTime>,
    /// Each log directory's usable bytes over the last half hour (DescribeLogDirs v4), for
    /// the time-to-full forecast.
    pub dir_usage: BTreeMap<String, rules_disk::Usage>,
}

impl BrokerMemory {
    /// When it was last down, while it has not answered since: the restart the grace
    /// covers, from its port opening to its first answer. `answered_at` is the newest
    /// answer the caller knows of besides the rounds' (the liveness check's).
    pub fn restart_pending(&self, answered_at: Option<SystemTime>) -> Option<SystemTime> {
        let down = self.last_down_at?;
        let answered_since = |a: Option<SystemTime>| a.is_some_and(|a| a > down);
        (!answered_since(self.last_answered_at) && !answered_since(answered_at)).then_some(down)
    }

    /// When it was last down, while it has not been registered since: the registering the
    /// grace covers after a restart.
    fn registering(&self) -> Option<SystemTime> {
        let down = self.last_down_at?;
        self.registered_at.is_none_or(|r| r <= down).then_some(down)
    }

    /// What the current refusal was decided to hold: a decision taken before the broker
    /// last answered belongs to an earlier refusal.
    fn held_this_refusal(&self) -> Option<u32> {
        self.held_when_refused
            .filter(|(at, _)| self.last_answered_at.is_none_or(|a| a < *at))
            .map(|(_, n)| n)
    }
}
/// Per broker, the partitions of the view that name it an offline replica (its log
/// directory failed, or it is down): one pass over the view, whatever the broker count.
fn offline_replicas(view: &ClusterView) -> BTreeMap<BrokerId, Named> {
    let mut named: BTreeMap<BrokerId, Named> = BTreeMap::new();
    for (topic, t) in &view.topics {
        for p in t.partitions.iter() {
            for b in p.offline_replicas.iter() {
                named
                    .entry(*b)
                    .or_default()
                    .push_with(|| format!("{topic}-{}", p.partition));
            }
        }
    }
    named
}

/// When the group coordinator probe's evidence counts (`judge::coordinators` applies it).
#[derive(Debug, Clone)]
pub struct CoordinatorRules {
    /// Unanswered probes in a row (while the broker answered another connection quickly).
    pub stalled_after: u32,
    /// How long a coordinator error must last.
    pub error_grace: Duration,
    /// How long a transaction shard's probe transaction may stay unended.
    pub txn_stall_grace: Duration,
}

impl CoordinatorRules {
    /// The graces of a cluster's `coordinators:` block, beside the judge's own count.
    pub fn configured(c: &CoordinatorsConfig) -> Self {
        CoordinatorRules {
            stalled_after: 2,
            error_grace: c.error_grace,
            txn_stall_grace: c.txn_stall_grace,
        }
    }
}

/// The key table's defaults.
impl Default for CoordinatorRules {
    fn default() -> Self {
        CoordinatorRules::configured(&CoordinatorsConfig::default())
    }
}

type RuleFn = fn(&BrokerFacts, &VerdictSettings) -> Option<RuleHit>;

/// The rules, most severe first. Each returns a hit or nothing.
const RULES: &[RuleFn] = &[
    rules_reach::port_closed,
    rules_host::process_gone,
    rules_host::process_exited,
    rules_host::process_stopped,
    rules_reach::unreachable,
    // Before cluster_invisible: when the watchdog's password is wrong everywhere, that is
    // the first thing to say.
    rules_access::auth_failed,
    rules_access::protocol_error,
    rules_reach::cluster_invisible,
    rules_host::process_alive_no_answer,
    rules_reach::no_answer,
    rules_reach::request_error,
    rules_partitions::fenced_but_serving,
    // Before stale_leader: a broker that applies no metadata claims leaderships it lost,
    // and this says why.
    rules_partitions::stale_metadata,
    rules_partitions::stale_leader,
    rules_partitions::out_of_every_isr,
    rules_partitions::reassignment_stalled,
    rules_canary::canary_writes_fail,
    rules_partitions::out_of_some_isrs,
    rules_partitions::followers_cannot_replicate,
    rules_canary::canary_not_enough_replicas,
    rules_partitions::metadata_disagreement,
    rules_partitions::slow,
    rules_host::port_not_listening,
    rules_host::log_dir_low_space,
    rules_host::log_dir_unreadable,
    rules_disk::log_dir_failed,
    rules_disk::log_dir_filling,
];

fn hit(rule: Rule, state: BrokerState, detail: String) -> Option<RuleHit> {
    debug_assert!(rule.allows(state), "{rule} cannot set {state:?}");
    Some(RuleHit {
        rule,
        state,
        detail,
    })
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
    let registrations = registrations(obs);
    let sick = cause::sickness_with(obs, view, &registrations);
    let causes = causes(health, canary, &sick);
    judge_with(
        obs,
        view,
        health,
        registrations,
        causes,
        memory,
        settings,
        now,
    )
}

/// [`judge`] with the round's registrations and causes decided already
/// (`attribute_suspects` returns them), so a round decides them once.
pub fn judge_decided(
    obs: &RoundObservation,
    view: &ClusterView,
    health: &Health,
    decided: Decided,
    memory: &BTreeMap<BrokerId, BrokerMemory>,
    settings: &VerdictSettings,
    now: SystemTime,
) -> Vec<BrokerVerdict> {
    judge_with(
        obs,
        view,
        health,
        decided.registrations,
        decided.causes,
        memory,
        settings,
        now,
    )
}

#[allow(clippy::too_many_arguments)]
fn judge_with(
    obs: &RoundObservation,
    view: &ClusterView,
    health: &Health,
    registrations: BTreeMap<BrokerId, Registration>,
    mut causes: Causes,
    memory: &BTreeMap<BrokerId, BrokerMemory>,
    settings: &VerdictSettings,
    now: SystemTime,
) -> Vec<BrokerVerdict> {
    let mut round = RoundFacts::of(obs, view, memory);
    let cluster_invisible = round.cluster_invisible;
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
            let registration = registrations
                .get(id)
                .copied()
                .unwrap_or(Registration::Unknown);
            let one = One {
                id: *id,
                probe,
                registration,
                mem: memory.get(id),
            };
            let facts = round.facts_of(one, obs, view, health, &mut causes, settings, now);
            verdict_of(&facts, settings)
        })
        .collect();
    if !cluster_invisible {
        verdicts.extend(unprobed_verdicts(obs, health));
        verdicts.sort_by_key(|v| v.broker);
    }
    hold_after_clean_stop(&mut verdicts, memory, settings, now);
    verdicts
}

/// What one round tells about every broker at once, worked out before any broker's facts.
struct RoundFacts {
    /// No broker answered: nothing can be said about any one of them.
    cluster_invisible: bool,
    medians: BTreeMap<BrokerId, Duration>,
    /// Partitions each broker leads or is in-sync for, counted only while a refusal is to
    /// be decided (see `held_at_refusal`): a round of a large cluster does not count them
    /// otherwise.
    leads: BTreeMap<BrokerId, u32>,
    /// Answers reporting fencing, counted once per round (each broker's own is taken off).
    fencing_answers: u32,
    offline: BTreeMap<BrokerId, Named>,
    stale: BTreeMap<BrokerId, Vec<String>>,
}

/// One probed broker, as `facts_of` takes it.
struct One<'a> {
    id: BrokerId,
    probe: &'a BrokerProbe,
    registration: Registration,
    mem: Option<&'a BrokerMemory>,
}

impl RoundFacts {
    fn of(
        obs: &RoundObservation,
        view: &ClusterView,
        memory: &BTreeMap<BrokerId, BrokerMemory>,
    ) -> Self {
        let undecided_refusal = obs.probes.iter().any(|(id, p)| {
            p.connect.as_ref().is_err_and(|e| closed(e.kind))
                && memory
                    .get(id)
                    .and_then(BrokerMemory::held_this_refusal)
                    .is_none()
        });
        let mut stale: BTreeMap<BrokerId, Vec<String>> = BTreeMap::new();
        for s in &view.stale_leaders {
            stale.entry(s.broker).or_default().push(format!(
                "{}-{} (epoch {} < {})",
                s.topic, s.partition, s.claimed_epoch, s.current_epoch
            ));
        }
        RoundFacts {
            cluster_invisible: !obs.probes.values().any(BrokerProbe::answered),
            medians: peer_medians(obs),
            leads: if undecided_refusal {
                holdings_in(view)
            } else {
                BTreeMap::new()
            },
            fencing_answers: obs
                .probes
                .values()
                .filter(|p| answer_kind(p) == Some(AnswerKind::DescribedAll))
                .count() as u32,
            offline: offline_replicas(view),
            stale,
        }
    }

    /// Everything the rules read about one broker. What is one broker's alone (its stale
    /// leaderships, offline replicas, causes) is taken out of the round's.
    #[allow(clippy::too_many_arguments)]
    fn facts_of<'a>(
        &mut self,
        one: One<'a>,
        obs: &'a RoundObservation,
        view: &'a ClusterView,
        health: &Health,
        causes: &mut Causes,
        settings: &VerdictSettings,
        now: SystemTime,
    ) -> BrokerFacts<'a> {
        let One {
            id,
            probe,
            registration,
            mem,
        } = one;
        // Registering after a restart: from the last time it was down until the first
        // round that lists it registered again, within the grace.
        let recently_down = mem
            .and_then(BrokerMemory::registering)
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|ago| ago < settings.restart_grace);
        BrokerFacts {
            id,
            probe,
            registration,
            partitions: health.brokers.get(&id).copied().unwrap_or_default(),
            stale_leader_of: self.stale.remove(&id).unwrap_or_default(),
            disagreements: view.disagreements.get(&id).copied().unwrap_or(0),
            peer_median_latency: self.medians.get(&id).copied(),
            recently_down,
            cluster_invisible: self.cluster_invisible,
            holds_in_cluster: held_at_refusal(mem, self.leads.get(&id).copied().unwrap_or(0)),
            fencing_reported: self.fencing_answers
                > u32::from(answer_kind(probe) == Some(AnswerKind::DescribedAll)),
            canary: causes.canary.remove(&id).unwrap_or_default(),
            host: obs.host.get(&id),
            silent_for: if probe.answered() {
                None
            } else {
                mem.and_then(|m| m.last_answered_at)
                    .and_then(|t| now.duration_since(t).ok())
            },
            accepting_silently_for: mem
                .and_then(|m| m.accepting_silently_since)
                .map(|t| now.duration_since(t).unwrap_or_default()),
            catch_up: catch_up::facts(obs, id, mem, now),
            lagging: causes.lagging.remove(&id).unwrap_or_default(),
            followers_lost: causes.followers_lost.remove(&id).unwrap_or_default(),
            behind: view.behind.get(&id),
            metadata_fetch: obs
                .quorum
                .as_ref()
                .and_then(|q| q.description.as_ref())
                .and_then(|d| d.observer(id)),
            log_dirs: match &probe.log_dirs {
                Some(Ok(d)) => Some(d.as_slice()),
                _ => None,
            },
            dir_usage: mem.map(|m| &m.dir_usage),
            offline_replica_of: self.offline.remove(&id).unwrap_or_default(),
        }
    }
}

/// Brokers that partitions name as replicas but that were not probed: either nobody lists
/// them and their address was never learned (down since before the watchdog started: down,
/// as far as anyone knows), or this round's answers list them and they are probed from the
/// next round on (unknown until then, not down).
fn unprobed_verdicts(obs: &RoundObservation, health: &Health) -> Vec<BrokerVerdict> {
    let mut out = Vec::new();
    for (id, p) in &health.brokers {
        if obs.probes.contains_key(id) || p.replica_of == 0 {
            continue;
        }
        let votes = unprobed_votes(obs, *id);
        let listed_by: u32 = votes.registered.iter().chain(&votes.fenced).sum();
        // Listed by some answer: the prober learned its address from this very round and
        // probes it from the next one. Until then nothing is known of it.
        let hit = if listed_by > 0 {
            RuleHit {
                rule: Rule::NotProbedYet,
                state: BrokerState::Unknown,
                detail: format!(
                    "replica of {} partition(s), listed by {listed_by} broker(s) this round, not probed yet: its address was just learned and the next round probes it",
                    p.replica_of
                ),
            }
        } else {
            RuleHit {
                rule: Rule::NotRegistered,
                state: BrokerState::Down,
                detail: format!(
                    "replica of {} partition(s) ({} offline), but no broker lists it and its address was never seen",
                    p.replica_of, p.replica_of_offline
                ),
            }
        };
        out.push(BrokerVerdict {
            broker: *id,
            address: unprobed_address(obs, *id),
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
    out
}

/// An unprobed broker's address as some answer lists or describes it; empty if none does.
fn unprobed_address(obs: &RoundObservation, id: BrokerId) -> String {
    obs.probes
        .values()
        .find_map(|p| {
            let listed = p
                .metadata_view()
                .and_then(|m| m.brokers.iter().find(|b| b.id == id));
            let described = p
                .description
                .iter()
                .flatten()
                .find_map(|d| d.brokers.iter().map(|b| &b.endpoint).find(|e| e.id == id));
            listed.or(described).map(BrokerEndpoint::address)
        })
        .unwrap_or_default()
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

/// What a refused broker held, as decided once per refusal: by the look right after it (or
/// the first round that saw it), not by the view of now. Within seconds of a crash Kafka fences
/// the broker and takes it out of every ISR and leadership, and judged from that view every
/// crash would read as a clean stop (the lab's two killed replicas both did).
fn held_at_refusal(mem: Option<&BrokerMemory>, holds_now: u32) -> u32 {
    mem.and_then(BrokerMemory::held_this_refusal)
        .unwrap_or(holds_now)
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
        if v.registration == Registration::Registered {
            memory.entry(v.broker).or_default().registered_at = Some(now);
        }
        // A refusal no look decided yet (no liveness check, or the round came first) is
        // decided by this round, once: later rounds see what Kafka moved since.
        let refused = v
            .hits
            .iter()
            .find(|h| h.rule == Rule::PortClosed || h.rule == Rule::ShutDownCleanly);
        if let Some(h) = refused {
            let m = memory.entry(v.broker).or_default();
            if m.held_this_refusal().is_none() {
                m.held_when_refused = Some((now, u32::from(h.rule == Rule::PortClosed)));
            }
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
        let clean_now = v.hits.iter().any(|h| h.rule == Rule::ShutDownCleanly);
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
        // Down for real: refused, gone, unreachable. `restarting` is the grace itself and
        // must not renew it, or a broker that wedges after its restart stays `down` for as
        // long as it is silent.
        if v.hits
            .iter()
            .any(|h| h.state == BrokerState::Down && h.rule != Rule::Restarting)
        {
            m.last_down_at = Some(now);
        }
        if v.hits.iter().any(|h| h.rule == Rule::Slow) {
            m.slow_since.get_or_insert(now);
        } else {
            m.slow_since = None;
        }
        if v.state == BrokerState::Healthy {
            m.stopped_cleanly_at = None;
        } else if v.hits.iter().any(|h| h.rule == Rule::ShutDownCleanly) {
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
    rules_disk::remember_usage(memory, obs, now);
    catch_up::remember_silence(memory, obs, now);
    catch_up::remember(memory, obs, verdicts, now);
}

pub mod catch_up;
pub mod cause;
mod facts;
pub mod live;
pub mod log_dir_metrics;
pub mod own;
mod registration;
mod rules_access;
mod rules_canary;
pub mod rules_disk;
mod rules_host;
mod rules_partitions;
mod rules_reach;
pub mod zk_controller;

pub use cause::{attribute_suspects, causes, Causes, Decided};
pub use facts::{holdings_in, BrokerFacts, CanaryFacts, Named};
use facts::{named_as_replica, peer_medians};
pub use registration::registrations;
use registration::{answer_kind, unprobed_votes, AnswerKind};
pub use rules_access::{access_rule, ACCESS_RULES};
use rules_reach::closed;
pub use rules_reach::refusal_rule;

pub use live::apply_liveness;
pub use rules_partitions::{spare_while_settling, SETTLING_SPARED};

#[cfg(test)]
mod tests;
