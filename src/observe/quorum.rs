//! Looks at a KRaft cluster's control plane: DescribeQuorum to every controller the
//! configuration names (`controllers:`, KIP-919) and through brokers, which forward it to
//! the active controller; and, across looks, whether the metadata log's high watermark
//! moves. Each request has its own deadline and every target is asked at once, so one
//! hung controller costs one deadline and never stalls the look, let alone the round.
//!
//! The daemon looks every `verdict.liveness_interval_ms` on a task of its own
//! ([`QuorumWatch`]), since a frozen controller is to be named within seconds and rounds
//! come every ten; a one-shot `check`, or a daemon without the liveness check, looks once
//! per round (`ClusterProber::with_quorum`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::future::join_all;
use tokio::sync::watch;

use crate::model::round::{
    AppliedMetadata, ControllerLook, ControllerRole, NodeId, QuorumAnswer, QuorumDescription,
    QuorumObservation,
};
use crate::model::round::{FailureKind, ProbeFailure};
use crate::observe::wire::{BrokerClient, OpenFailure, WireError, WireOptions};

/// How to look at one cluster's quorum.
#[derive(Debug, Clone)]
pub struct QuorumSettings {
    pub cluster: String,
    /// The configured controllers: an id when written `id@host:port`, and the address.
    pub controllers: Vec<(Option<NodeId>, String)>,
    /// Security as for the brokers; `request_timeout` bounds each DescribeQuorum.
    pub wire: WireOptions,
}

/// Brokers asked per look: two, so that one frozen broker cannot pass for a frozen
/// controller (a broker holds a forwarded request until the controller answers).
const BROKERS_ASKED: usize = 2;

/// One target's connection and what its current streak of failures looks like.
#[derive(Default)]
struct Target {
    id: Option<NodeId>,
    client: Option<BrokerClient>,
    failing_since: Option<SystemTime>,
    accepted_in_streak: bool,
    /// KIP-919's DescribeCluster was tried on this connection (once per connection).
    described: bool,
}

/// What the high watermark did under one leader and epoch.
#[derive(Debug, Clone, Copy)]
struct Progress {
    leader: NodeId,
    epoch: i32,
    high_watermark: i64,
    moved_at: SystemTime,
    /// The look before: its time and the high watermark it saw.
    seen_at: SystemTime,
    seen: i64,
}

/// The active controller appends a no-op record this often on an idle cluster (KIP-835).
const NO_OP_INTERVAL: Duration = Duration::from_millis(500);
/// Records beyond the no-ops a look may see without calling it a change. At most
/// `elapsed / 500 ms + 1` no-ops fit between two looks, so none: a topic created is two
/// records, which one record of slack missed on the lab. The answers' own timing within
/// their looks can make a slow answer look like one more record; that costs an early round
/// (at most five per interval), never a verdict.
const NO_OP_SLACK: i64 = 0;

/// Looks at the quorum, keeping connections and the high watermark's history.
pub struct QuorumProber {
    settings: QuorumSettings,
    /// Controllers by address: configured, then learned from DescribeCluster (KIP-919).
    controllers: BTreeMap<String, Target>,
    brokers: BTreeMap<String, Target>,
    progress: Option<Progress>,
    last_progress_at: Option<SystemTime>,
    last_leader: Option<(NodeId, i32, SystemTime)>,
    metadata_changed_at: Option<SystemTime>,
    /// The furthest the brokers asked have applied the metadata log.
    applied: Option<AppliedMetadata>,
    /// A broker said it has no DescribeQuorum (ZooKeeper mode, Kafka before 2.8): the
    /// brokers are not asked again.
    brokers_without_quorum: bool,
}

impl QuorumProber {
    pub fn new(settings: QuorumSettings) -> Self {
        let controllers = settings
            .controllers
            .iter()
            .map(|(id, address)| {
                (
                    address.clone(),
                    Target {
                        id: *id,
                        ..Target::default()
                    },
                )
            })
            .collect();
        QuorumProber {
            settings,
            controllers,
            brokers: BTreeMap::new(),
            progress: None,
            last_progress_at: None,
            last_leader: None,
            metadata_changed_at: None,
            applied: None,
            brokers_without_quorum: false,
        }
    }

    /// One look: every controller and up to two of `brokers` (addresses, those that answer
    /// first) asked at once. `None` when nothing here speaks DescribeQuorum: a ZooKeeper
    /// cluster without configured controllers.
    pub async fn look(&mut self, brokers: &[String]) -> Option<QuorumObservation> {
        let at = SystemTime::now();
        let asked: Vec<String> = if self.brokers_without_quorum {
            Vec::new()
        } else {
            brokers.iter().take(BROKERS_ASKED).cloned().collect()
        };
        self.brokers.retain(|a, _| asked.contains(a));
        for a in &asked {
            self.brokers.entry(a.clone()).or_default();
        }
        if self.controllers.is_empty() && self.brokers.is_empty() {
            return None;
        }
        let wire = &self.settings.wire;
        let controller_asks = self
            .controllers
            .iter_mut()
            .map(|(address, t)| ask(address, t, wire, true, at));
        let broker_asks = self
            .brokers
            .iter_mut()
            .map(|(address, t)| ask(address, t, wire, false, at));
        let (from_controllers, from_brokers) =
            futures::join!(join_all(controller_asks), join_all(broker_asks));

        let mut description: Option<QuorumDescription> = None;
        let mut learned: Vec<(NodeId, String)> = Vec::new();
        let looks = controller_outcomes(from_controllers, &mut description, &mut learned);
        let applied = from_brokers.iter().filter_map(|a| a.applied).max();
        let via_broker = self.via_broker(from_brokers, &mut description);
        if self.brokers_without_quorum && self.controllers.is_empty() {
            return None;
        }
        self.learn_controllers(learned, description.as_ref(), &looks);
        let controllers = looks
            .into_iter()
            .map(|(address, outcome, accepted)| {
                let t = self.controllers.get(&address);
                ControllerLook {
                    id: t.and_then(|t| t.id),
                    failing_since: t.and_then(|t| t.failing_since),
                    accepted_in_streak: t.is_some_and(|t| t.accepted_in_streak),
                    address,
                    outcome,
                    accepted,
                }
            })
            .collect();
        let still_since = self.track(description.as_ref(), at);
        if let Some(offset) = applied {
            if self.applied.is_none_or(|a| offset > a.offset) {
                self.applied = Some(AppliedMetadata { offset, since: at });
            }
        }
        Some(QuorumObservation {
            at,
            controllers,
            via_broker,
            description,
            last_leader: self.last_leader,
            high_watermark_still_since: still_since,
            last_progress_at: self.last_progress_at,
            metadata_changed_at: self.metadata_changed_at,
            metadata_applied: self.applied,
        })
    }

    /// The brokers' answers: one is enough, otherwise the first failure says why. A
    /// broker without DescribeQuorum at all is not asked again.
    fn via_broker(
        &mut self,
        from_brokers: Vec<Asked>,
        description: &mut Option<QuorumDescription>,
    ) -> Option<(String, Result<(), ProbeFailure>)> {
        let mut via_broker: Option<(String, Result<(), ProbeFailure>)> = None;
        for asked in from_brokers {
            if asked.unsupported {
                self.brokers_without_quorum = true;
            }
            let result = match asked.answer {
                Ok(QuorumAnswer::Leader(d)) => {
                    keep_newest(description, d);
                    Ok(())
                }
                Ok(QuorumAnswer::NotLeader { error_code }) => Err(ProbeFailure {
                    kind: FailureKind::KafkaError,
                    detail: format!("the broker answered NOT_LEADER_OR_FOLLOWER ({error_code})"),
                    after: Duration::ZERO,
                }),
                Err(f) => Err(f),
            };
            if via_broker
                .as_ref()
                .is_none_or(|(_, r)| r.is_err() && result.is_ok())
            {
                via_broker = Some((asked.address, result));
            }
        }
        via_broker
    }

    /// Gives the controllers the ids the description, KIP-919's lists and the leader's own
    /// answer name, and learns the controllers a configured one lists.
    fn learn_controllers(
        &mut self,
        mut learned: Vec<(NodeId, String)>,
        description: Option<&QuorumDescription>,
        looks: &[ControllerOutcome],
    ) {
        if let Some(d) = description {
            learned.extend(d.endpoints.iter().map(|(id, a)| (*id, a.clone())));
        }
        for (id, address) in learned {
            match self.controllers.get_mut(&address) {
                Some(t) => {
                    t.id.get_or_insert(id);
                }
                // Only controllers the configuration reaches are learned: the others
                // may sit behind a listener the watchdog cannot use.
                None if !self.settings.controllers.is_empty() => {
                    self.controllers.insert(
                        address,
                        Target {
                            id: Some(id),
                            ..Target::default()
                        },
                    );
                }
                None => {}
            }
        }
        if let Some(d) = description {
            // The leader answered for itself: its address is the one that said so.
            for (address, outcome, _) in looks {
                if matches!(outcome, Ok(ControllerRole::Leader)) {
                    if let Some(t) = self.controllers.get_mut(address) {
                        t.id.get_or_insert(d.leader);
                    }
                }
            }
        }
    }

    /// Folds one look's description into the high watermark's history; returns since when
    /// it has stood still under this leader and epoch.
    fn track(&mut self, d: Option<&QuorumDescription>, at: SystemTime) -> Option<SystemTime> {
        let d = d?;
        self.last_leader = Some((d.leader, d.epoch, at));
        match &mut self.progress {
            Some(p) if p.leader == d.leader && p.epoch == d.epoch => {
                // More records than no-ops since the look before: the metadata changed.
                let elapsed = at.duration_since(p.seen_at).unwrap_or_default();
                let no_ops = (elapsed.as_millis() / NO_OP_INTERVAL.as_millis()) as i64 + 1;
                if d.high_watermark - p.seen > no_ops + NO_OP_SLACK {
                    self.metadata_changed_at = Some(at);
                }
                p.seen_at = at;
                p.seen = d.high_watermark;
                if d.high_watermark > p.high_watermark {
                    p.high_watermark = d.high_watermark;
                    p.moved_at = at;
                    self.last_progress_at = Some(at);
                    None
                } else {
                    Some(p.moved_at)
                }
            }
            // A new leader (or epoch) is progress of the quorum: it was elected.
            _ => {
                self.progress = Some(Progress {
                    leader: d.leader,
                    epoch: d.epoch,
                    high_watermark: d.high_watermark,
                    moved_at: at,
                    seen_at: at,
                    seen: d.high_watermark,
                });
                self.last_progress_at = Some(at);
                None
            }
        }
    }
}

/// One controller's address, what its answer says it is, and whether it accepted.
type ControllerOutcome = (String, Result<ControllerRole, ProbeFailure>, bool);

/// Keeps the description of the newest epoch: a deposed leader that still answers is
/// behind.
fn keep_newest(kept: &mut Option<QuorumDescription>, d: QuorumDescription) {
    if kept.as_ref().is_none_or(|o| d.epoch > o.epoch) {
        *kept = Some(d);
    }
}

/// The controllers' answers, in order, with the description a leader gave kept and the
/// controllers they list gathered.
fn controller_outcomes(
    from_controllers: Vec<Asked>,
    description: &mut Option<QuorumDescription>,
    learned: &mut Vec<(NodeId, String)>,
) -> Vec<ControllerOutcome> {
    let mut looks = Vec::new();
    for asked in from_controllers {
        learned.extend(asked.controllers);
        let outcome = match asked.answer {
            Ok(QuorumAnswer::Leader(d)) => {
                keep_newest(description, d);
                Ok(ControllerRole::Leader)
            }
            Ok(QuorumAnswer::NotLeader { .. }) => Ok(ControllerRole::Follower),
            Err(f) => Err(f),
        };
        looks.push((asked.address, outcome, asked.accepted));
    }
    looks
}

/// What asking one target gave.
struct Asked {
    address: String,
    answer: Result<QuorumAnswer, ProbeFailure>,
    accepted: bool,
    /// It has no DescribeQuorum at all.
    unsupported: bool,
    /// Controllers a controller listed (KIP-919).
    controllers: Vec<(NodeId, String)>,
    /// A broker's applied metadata offset, asked before DescribeQuorum so that a failing
    /// DescribeQuorum still leaves it.
    applied: Option<i64>,
}

/// DescribeQuorum to one target on its kept connection (opened first when there is none,
/// and on a controller whose id is unknown, DescribeCluster for the controllers once).
async fn ask(
    address: &str,
    t: &mut Target,
    wire: &WireOptions,
    controller: bool,
    at: SystemTime,
) -> Asked {
    let started = Instant::now();
    let mut asked = Asked {
        address: address.to_string(),
        answer: Err(ProbeFailure {
            kind: FailureKind::Io,
            detail: String::new(),
            after: Duration::ZERO,
        }),
        accepted: t.client.is_some(),
        unsupported: false,
        controllers: Vec::new(),
        applied: None,
    };
    let result = async {
        if t.client.as_ref().is_none_or(|c| !c.is_usable()) {
            t.client = None;
            t.described = false;
            let opened = BrokerClient::open_traced(address, wire).await.map_err(
                |OpenFailure { error, tcp }| {
                    asked.accepted = tcp.is_some();
                    error
                },
            )?;
            asked.accepted = true;
            t.client = Some(opened.negotiate().await?.client);
        }
        let client = t.client.as_mut().expect("a client was just opened");
        if controller && !t.described {
            t.described = true;
            // KIP-919 (Kafka 3.7+): the controllers and their ids; older controllers
            // refuse it, which costs nothing but this one try per connection.
            if let Ok(Some(d)) = client.describe_controllers().await {
                asked.controllers = d
                    .value
                    .brokers
                    .into_iter()
                    .map(|b| (b.endpoint.id, b.endpoint.address()))
                    .collect();
            }
        }
        let speaks_quorum = client
            .versions()
            .negotiated(kafka_protocol::messages::ApiKey::DescribeQuorum)
            .is_some();
        if !controller && speaks_quorum {
            // The broker answers this itself: what it says holds even when the controller
            // behind it does not answer.
            asked.applied = client.applied_metadata_offset().await?;
        }
        client.describe_quorum().await.map(|a| a.value)
    }
    .await;
    match result {
        Ok(answer) => {
            t.failing_since = None;
            t.accepted_in_streak = false;
            asked.answer = Ok(answer);
        }
        Err(e) => {
            // The connection is given up after any failure: a late answer must never be
            // read as the next look's.
            t.client = None;
            asked.unsupported = matches!(e, WireError::Unsupported { .. });
            t.failing_since.get_or_insert(at);
            t.accepted_in_streak |= asked.accepted;
            asked.answer = Err(e.to_failure(started.elapsed()));
        }
    }
    asked
}

/// The daemon's continuous look: a task that looks every `interval` and publishes each
/// look; the round loop reads the newest and re-judges when one arrives. The task is
/// supervised: one that ends (a panic) is started again, with the same channels.
pub struct QuorumWatch {
    looks: watch::Receiver<Option<Arc<QuorumObservation>>>,
    brokers: watch::Sender<Vec<String>>,
    task: tokio::task::JoinHandle<()>,
}

impl QuorumWatch {
    /// Starts looking every `interval` (a look that outlives it is followed at once).
    pub fn start(settings: QuorumSettings, interval: Duration) -> Self {
        let (tx, looks) = watch::channel(None);
        let publish = Arc::new(tx);
        let (brokers, brokers_rx) = watch::channel(Vec::new());
        let cluster = settings.cluster.clone();
        let task = crate::model::supervise::spawn(
            crate::model::supervise::Task::QuorumWatch,
            cluster,
            move || {
                look_task(
                    QuorumProber::new(settings.clone()),
                    interval,
                    publish.clone(),
                    brokers_rx.clone(),
                )
            },
        );
        QuorumWatch {
            looks,
            brokers,
            task,
        }
    }

    /// The brokers to ask from now on, those most likely to answer first.
    pub fn ask_brokers(&self, addresses: Vec<String>) {
        self.brokers.send_if_modified(|b| {
            let changed = *b != addresses;
            *b = addresses;
            changed
        });
    }

    /// The newest look.
    pub fn latest(&self) -> Option<Arc<QuorumObservation>> {
        self.looks.borrow().clone()
    }

    /// Returns when a new look is published.
    pub async fn changed(&mut self) {
        if self.looks.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

async fn look_task(
    mut prober: QuorumProber,
    interval: Duration,
    publish: Arc<watch::Sender<Option<Arc<QuorumObservation>>>>,
    mut brokers_rx: watch::Receiver<Vec<String>>,
) {
    let mut next = tokio::time::Instant::now();
    loop {
        tokio::time::sleep_until(next).await;
        next = tokio::time::Instant::now() + interval;
        let asked = brokers_rx.borrow_and_update().clone();
        let look = prober.look(&asked).await;
        publish.send_replace(look.map(Arc::new));
    }
}

impl Drop for QuorumWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests;
