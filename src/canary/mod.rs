//! Canary round trips, per partition, continuously: one acks=all record to each partition of
//! a dedicated topic (laid out so every broker leads one) every `interval`, whatever the
//! metadata round does, read back by an assigned consumer. Measures produce and end-to-end
//! latency and unavailability windows (to about a second, charged to the leader that had
//! them), and catches acknowledged writes the cluster later loses. Each metadata round brings
//! the layout, the consumer's assignment and the writer's targets up to date and collects
//! what happened since the last round. rdkafka is used on purpose: the canary sees what a
//! real client sees, retries and metadata caching included.

mod auth;
mod conns;
pub mod layout;
pub mod ledger;
pub mod metrics;
pub mod record;
pub mod stats;
pub mod window;
pub mod writer;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, ProducerContext, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;
use tokio::sync::{oneshot, watch};

use crate::observe::BrokerId;
use auth::CanaryContext;
use layout::{BrokerInfo, LayoutMemory, LayoutSettings, PartitionState, Plan};
use ledger::{Entry, Ledger, LedgerEvent};
use record::{Acks, CanaryRecord};
use stats::CanaryStats;
use window::{Window, Windows};
use writer::{Ack, Attempt, Schedule, Target};

/// How the canary of one cluster runs.
#[derive(Clone)]
pub struct CanarySettings {
    pub cluster: String,
    pub topic: String,
    pub instance: String,
    pub produce_timeout: Duration,
    /// One write to every canary partition (and to every claimed leader) this often.
    pub interval: Duration,
    pub lost_after: Duration,
    pub manage_topic: bool,
    pub layout: LayoutSettings,
    /// Bootstrap, security and the operator's extra properties, shared by every client.
    pub client: ClientConfig,
    /// Also write acks=1 records straight to every broker that claims a leadership.
    pub acks1_probe: bool,
    /// How to reach one broker directly, for the acks=1 probe and layout changes.
    pub wire: crate::wire::WireOptions,
}

// The produce error kinds the verdict reads are declared with it, in a pure module.
pub use crate::words::AUTHORIZATION;

/// Why a canary write failed, as a bounded label.
pub fn error_kind(e: &KafkaError) -> &'static str {
    match e.rdkafka_error_code() {
        Some(RDKafkaErrorCode::MessageTimedOut) | Some(RDKafkaErrorCode::RequestTimedOut) => {
            "timeout"
        }
        Some(RDKafkaErrorCode::NotEnoughReplicas) => "not_enough_replicas",
        Some(RDKafkaErrorCode::NotEnoughReplicasAfterAppend) => "not_enough_replicas_after_append",
        Some(RDKafkaErrorCode::NotLeaderForPartition) => "not_leader",
        Some(RDKafkaErrorCode::LeaderNotAvailable) => "leader_not_available",
        Some(RDKafkaErrorCode::UnknownTopicOrPartition)
        | Some(RDKafkaErrorCode::UnknownPartition)
        | Some(RDKafkaErrorCode::UnknownTopic) => "unknown_partition",
        Some(RDKafkaErrorCode::TopicAuthorizationFailed)
        | Some(RDKafkaErrorCode::ClusterAuthorizationFailed) => AUTHORIZATION,
        Some(RDKafkaErrorCode::KafkaStorageError) => "storage_error",
        Some(RDKafkaErrorCode::BrokerTransportFailure) | Some(RDKafkaErrorCode::AllBrokersDown) => {
            "transport"
        }
        Some(RDKafkaErrorCode::QueueFull) => "queue_full",
        _ => "other",
    }
}

/// A canary write slower than this counts as an unavailability window, however it ended.
pub fn slow_write(produce_timeout: Duration) -> Duration {
    (produce_timeout / 3).max(Duration::from_millis(500))
}

/// Whom a failed (or slow, kind "slow") acks=all write is charged to, for the windows and
/// the per-broker metrics: the broker that had it, unless it says nothing about that broker
/// (refused to the watchdog, never left the client, a right NOT_LEADER, a lack of in-sync
/// replicas) or the broker took acks=1 writes meanwhile (it appends; its followers held
/// the write, and the round's causes decide which).
pub fn charge(kind: &str, broker: BrokerId, leader_appended: bool) -> Option<BrokerId> {
    let not_the_broker = kind == AUTHORIZATION
        || kind == "not_leader"
        || client_side(kind)
        || blames_followers(kind);
    (!not_the_broker && !leader_appended && broker >= 0).then_some(broker)
}

/// Whether a produce error points at the replicas missing from the ISR rather than at the
/// leader that answered it.
pub fn blames_followers(kind: &str) -> bool {
    crate::words::blames_followers(kind)
}

/// Whether a produce error happened in the client, before any broker had the write: the
/// local queue was full, or the message timed out waiting to be sent. It says nothing about
/// a broker.
pub fn client_side(kind: &str) -> bool {
    crate::words::client_side(kind)
}

#[derive(Debug, Clone, Serialize)]
pub struct ProduceFailure {
    pub kind: &'static str,
    pub detail: String,
    /// The broker the client sent the write to, as librdkafka reports it; `None` when the
    /// write never left the client. With retries off it may differ from the view's leader:
    /// the client's cached metadata can be older than the view.
    pub broker: Option<BrokerId>,
}

/// One canary partition: the newest view of it this round, and what its writes did since
/// the last round.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionRound {
    pub partition: i32,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    /// The newest acks=all write that ended: its latency, or why it failed; None when none
    /// ended yet.
    #[serde(skip)]
    pub produce: Option<Result<Duration, ProduceFailure>>,
    pub produce_seconds: Option<f64>,
    pub produce_error: Option<ProduceFailure>,
    /// End-to-end latencies of records of this partition read back since the last round.
    pub end_to_end_seconds: Vec<f64>,
    /// How long the partition has been unwritable, when it is.
    pub unavailable_seconds: Option<f64>,
    /// The broker its open unavailability window is charged to, when one is open.
    pub unavailable_broker: Option<BrokerId>,
    /// acks=all writes that ended since the last round.
    pub writes: u32,
    /// The failed ones, per charged broker and kind.
    pub failed_writes: Vec<FailedWrites>,
    /// Records acknowledged more than `lost_after` ago, neither read back nor lost.
    pub overdue: u64,
    /// The brokers this round's failed write is charged to, as the verdicts decided (the
    /// broker that received it, or the cause of a replication failure; empty: nobody, the
    /// failure was the client's). `None` until decided, or when the write did not fail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub charged_to: Option<Vec<BrokerId>>,
}

/// The state of the canary topic itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "detail")]
pub enum TopicStatus {
    Ready,
    /// Missing and not ours to create (manage_topic: false) or creation failed.
    Missing(String),
    /// The watchdog lacks a permission; the other checks go on.
    NotPermitted(String),
    /// The canary could not start its clients.
    Broken(String),
}

/// A loss or duplicate, attributed.
#[derive(Debug, Clone, Serialize)]
pub struct LossEvent {
    pub partition: i32,
    pub offset: i64,
    pub seq: u64,
    pub acks: Acks,
    pub broker: BrokerId,
    pub reason: &'static str,
}

/// What the canary did and saw in one round.
#[derive(Debug, Clone, Serialize)]
pub struct CanaryRound {
    pub topic: String,
    pub status: TopicStatus,
    pub partitions: Vec<PartitionRound>,
    /// Layout actions taken, or why one is held back.
    pub layout: Vec<String>,
    pub not_leading: Vec<BrokerId>,
    pub lost: Vec<LossEvent>,
    pub duplicated: Vec<(i32, BrokerId)>,
    /// Unavailability windows that closed since the last round: (partition, the broker it
    /// is charged to, seconds).
    pub windows_closed: Vec<(i32, BrokerId, f64)>,
    /// The newest direct acks=1 write to every broker claiming a canary leadership.
    pub acks1: Vec<Acks1Probe>,
}

/// What the canary needs to know about the cluster this round.
#[derive(Debug, Clone, Default)]
pub struct CanaryView {
    pub brokers: Vec<BrokerInfo>,
    /// The canary topic's partitions, if the topic exists.
    pub partitions: Option<Vec<PartitionStateWithEpoch>>,
    /// Every broker whose own metadata says it leads a canary partition, at its address.
    pub claims: Vec<LeaderClaim>,
    /// Addresses of the brokers that answered this round, for admin requests.
    pub addresses: Vec<String>,
}

/// A broker's belief that it leads a canary partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderClaim {
    pub partition: i32,
    pub broker: BrokerId,
    pub address: String,
    pub epoch: i32,
}

/// The outcome of one direct acks=1 write to a broker claiming a leadership.
#[derive(Debug, Clone, Serialize)]
pub struct Acks1Probe {
    pub partition: i32,
    pub broker: BrokerId,
    /// The claim was stale: the newest view names another leader.
    pub stale: bool,
    /// Offset acknowledged, or the failure kind.
    pub offset: Option<i64>,
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
pub struct PartitionStateWithEpoch {
    pub state: PartitionState,
    pub leader_epoch: i32,
}

/// What librdkafka reports for one acks=all write, with the broker that received it: the
/// delivery report of `FutureProducer` leaves the broker out, and without it a failure
/// caused by the client's stale metadata would be charged to the view's new leader.
struct Delivered {
    result: Result<i64, KafkaError>,
    broker: Option<BrokerId>,
}

/// Hands each delivery report, with the broker it came from, to the write waiting for it;
/// authenticates like the canary's other clients.
struct Attributing {
    auth: CanaryContext,
}

impl rdkafka::ClientContext for Attributing {
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = CanaryContext::ENABLE_REFRESH_OAUTH_TOKEN;

    fn generate_oauth_token(
        &self,
        oauthbearer_config: Option<&str>,
    ) -> Result<rdkafka::client::OAuthToken, Box<dyn std::error::Error>> {
        self.auth.generate_oauth_token(oauthbearer_config)
    }
}

impl ProducerContext for Attributing {
    type DeliveryOpaque = Box<oneshot::Sender<Delivered>>;

    fn delivery(&self, result: &DeliveryResult<'_>, tx: Self::DeliveryOpaque) {
        let (result, message) = match result {
            Ok(m) => (Ok(m.offset()), m),
            Err((e, m)) => (Err(e.clone()), m),
        };
        // SAFETY: the message pointer is valid for the duration of the callback, and
        // rd_kafka_message_broker_id only reads a field of it.
        let id = unsafe { rdkafka::bindings::rd_kafka_message_broker_id(message.ptr()) };
        let _ = tx.send(Delivered {
            result,
            broker: (id >= 0).then_some(id),
        });
    }
}

struct Clients {
    consumer: Arc<StreamConsumer<CanaryContext>>,
    admin: AdminClient<CanaryContext>,
    context: CanaryContext,
    /// What the writer writes to; an empty plan writes nothing.
    plan: watch::Sender<Vec<Target>>,
    reader: tokio::task::JoinHandle<()>,
    writer: tokio::task::JoinHandle<()>,
}

impl Drop for Clients {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
    }
}

pub struct Canary {
    settings: CanarySettings,
    clients: Option<Clients>,
    shared: Arc<Shared>,
    layout: LayoutMemory,
    assigned: BTreeSet<i32>,
    epochs: BTreeMap<i32, i32>,
}

fn config_error(e: KafkaError) -> TopicStatus {
    TopicStatus::Broken(format!("cannot create the canary's Kafka clients: {e}"))
}

impl Canary {
    /// `stats` are the canary's cumulative metrics, shared with the metrics renderer: each
    /// write and read adds to them when it happens.
    pub fn new(settings: CanarySettings, stats: CanaryStats) -> Self {
        Canary {
            shared: Arc::new(Shared {
                books: Mutex::new(Books::new(&settings.instance, settings.lost_after)),
                stats,
                cluster: settings.cluster.clone(),
                slow: slow_write(settings.produce_timeout),
            }),
            settings,
            clients: None,
            layout: LayoutMemory::default(),
            assigned: BTreeSet::new(),
            epochs: BTreeMap::new(),
        }
    }

    pub fn topic(&self) -> String {
        self.settings.topic.clone()
    }

    fn start_clients(&self) -> Result<Clients, TopicStatus> {
        let s = &self.settings;
        if let Some(why) = auth::unsupported(&s.wire) {
            return Err(TopicStatus::Broken(why));
        }
        let context = CanaryContext::new(&s.wire);
        // Without a token no client can authenticate: say so once, rather than create and
        // drop three clients every round.
        context.token_ready().map_err(|e| {
            TopicStatus::Broken(format!("cannot get a token for the canary's clients: {e}"))
        })?;
        let ms = s.produce_timeout.as_millis().max(1).to_string();
        let producer: ThreadedProducer<Attributing> = s
            .client
            .clone()
            .set("acks", "all")
            .set("enable.idempotence", "false")
            .set("retries", "0")
            .set("linger.ms", "0")
            .set("message.timeout.ms", &ms)
            .set("request.timeout.ms", &ms)
            .create_with_context(Attributing {
                auth: context.clone(),
            })
            .map_err(config_error)?;
        let consumer: StreamConsumer<CanaryContext> = s
            .client
            .clone()
            .set("group.id", format!("kafka-watchdog-canary-{}", s.instance))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "latest")
            // A fetch returns as soon as a record arrives; the wait only bounds how often
            // an idle consumer asks each leader (2 fetches a second, not 10).
            .set("fetch.wait.max.ms", "500")
            .set("enable.partition.eof", "false")
            .create_with_context(context.clone())
            .map_err(config_error)?;
        let admin: AdminClient<CanaryContext> = s
            .client
            .clone()
            .create_with_context(context.clone())
            .map_err(config_error)?;
        context.prime(admin.inner()).map_err(|e| {
            TopicStatus::Broken(format!(
                "cannot authenticate the canary's admin client: {e}"
            ))
        })?;
        let consumer = Arc::new(consumer);
        let producer = Arc::new(producer);
        let reader = tokio::spawn(read_loop(consumer.clone(), self.shared.clone()));
        let (plan, plan_rx) = watch::channel(Vec::new());
        let writer = tokio::spawn(write_loop(
            plan_rx,
            producer.clone(),
            self.settings.clone(),
            self.shared.clone(),
        ));
        Ok(Clients {
            consumer,
            admin,
            context,
            plan,
            reader,
            writer,
        })
    }

    /// Brings the canary up to date with one metadata round's view (layout, consumer
    /// assignment, re-reads after leader changes, what the writer writes to) and reports
    /// what the continuous writes and reads saw since the last round. Never fails: what
    /// goes wrong is reported in the result.
    pub async fn round(&mut self, view: &CanaryView) -> CanaryRound {
        let now = SystemTime::now();
        let mut out = CanaryRound {
            topic: self.settings.topic.clone(),
            status: TopicStatus::Ready,
            partitions: Vec::new(),
            layout: Vec::new(),
            not_leading: Vec::new(),
            lost: Vec::new(),
            duplicated: Vec::new(),
            windows_closed: Vec::new(),
            acks1: Vec::new(),
        };
        if self.clients.is_none() {
            match self.start_clients() {
                Ok(c) => self.clients = Some(c),
                Err(status) => {
                    out.status = status;
                    return out;
                }
            }
        } else if let Some(c) = &self.clients {
            // The admin client's token is renewed here (see auth::CanaryContext::prime);
            // a failure shows in the admin request that needs it.
            if let Err(e) = c.context.prime(c.admin.inner()) {
                tracing::warn!(cluster = %self.settings.cluster, "canary admin token: {e}");
            }
        }
        self.layout.observe(&view.brokers, now);
        if let Some(status) = self.manage_layout(view, &mut out.layout, now).await {
            out.status = status;
        }
        let Some(parts) = &view.partitions else {
            if out.status == TopicStatus::Ready {
                out.status = TopicStatus::Missing(format!(
                    "topic {} does not exist{}",
                    self.settings.topic,
                    if self.settings.manage_topic {
                        " yet"
                    } else {
                        " and manage_topic is off"
                    }
                ));
            }
            self.publish_plan(&[], &[]);
            return out;
        };
        let states: Vec<PartitionState> = parts.iter().map(|p| p.state.clone()).collect();
        out.not_leading = layout::not_leading(&states, &view.brokers);
        self.assign(parts).await;
        self.check_leader_changes(parts, &mut out).await;
        let claims: &[LeaderClaim] = if self.settings.acks1_probe {
            &view.claims
        } else {
            &[]
        };
        self.publish_plan(parts, claims);
        self.shared.stats.prime(
            &self.settings.cluster,
            parts.iter().map(|p| (p.state.partition, p.state.leader)),
        );
        let existing: BTreeSet<i32> = parts.iter().map(|p| p.state.partition).collect();
        let mut books = lock(&self.shared.books);
        books.leaders = parts
            .iter()
            .map(|p| (p.state.partition, p.state.leader))
            .collect();
        let end = SystemTime::now();
        let expired = books.ledger.expire(end);
        for ev in expired {
            books.event(ev, &self.shared);
        }
        books.report(parts, end, &mut out);
        books.retain_partitions(|p| existing.contains(&p));
        drop(books);
        if let Some(f) = out
            .partitions
            .iter()
            .find_map(|p| p.produce_error.as_ref().filter(|f| f.kind == AUTHORIZATION))
            .filter(|_| out.status == TopicStatus::Ready)
        {
            // A refused write says what the watchdog may do, not how the partition is.
            out.status = TopicStatus::NotPermitted(format!(
                "the watchdog may not write to {} ({}); grant it Write, Read and Describe on the topic and Read on its consumer group",
                self.settings.topic, f.detail
            ));
        }
        out
    }

    /// What the writer writes to from the next tick on: every partition with a leader
    /// (acks=all), and every claimed leadership (acks=1, straight to the claimant).
    fn publish_plan(&self, parts: &[PartitionStateWithEpoch], claims: &[LeaderClaim]) {
        let Some(clients) = &self.clients else { return };
        let leader_of = |partition: i32| {
            parts
                .iter()
                .find(|p| p.state.partition == partition)
                .map_or(-1, |p| p.state.leader)
        };
        let mut plan: Vec<Target> = parts
            .iter()
            .filter(|p| p.state.leader >= 0)
            .map(|p| Target {
                partition: p.state.partition,
                acks: Acks::All,
                leader: p.state.leader,
                claim: None,
            })
            .collect();
        plan.extend(claims.iter().map(|c| Target {
            partition: c.partition,
            acks: Acks::One,
            leader: leader_of(c.partition),
            claim: Some(c.clone()),
        }));
        clients.plan.send_if_modified(|current| {
            let changed = *current != plan;
            if changed {
                *current = plan;
            }
            changed
        });
    }

    /// Creates, extends or reassigns the topic when the planner says so.
    async fn manage_layout(
        &mut self,
        view: &CanaryView,
        notes: &mut Vec<String>,
        now: SystemTime,
    ) -> Option<TopicStatus> {
        if !self.settings.manage_topic || view.brokers.is_empty() {
            return None;
        }
        let states: Option<Vec<PartitionState>> = view
            .partitions
            .as_ref()
            .map(|ps| ps.iter().map(|p| p.state.clone()).collect());
        let plan = layout::plan(
            states.as_deref(),
            &view.brokers,
            &self.settings.layout,
            &self.layout,
            now,
        );
        let clients = self.clients.as_ref()?;
        let opts = AdminOptions::new()
            .operation_timeout(Some(self.settings.produce_timeout))
            .request_timeout(Some(self.settings.produce_timeout));
        let topic = self.settings.topic.clone();
        let result = match plan {
            Plan::Nothing => return None,
            Plan::Waiting { why } => {
                notes.push(why);
                return None;
            }
            Plan::Create {
                assignment,
                min_insync_replicas,
            } => {
                let refs: Vec<&[i32]> = assignment.iter().map(Vec::as_slice).collect();
                let min_isr = min_insync_replicas.to_string();
                let new = NewTopic::new(
                    &topic,
                    assignment.len() as i32,
                    TopicReplication::Variable(&refs),
                )
                .set("min.insync.replicas", &min_isr)
                // Canary records matter for minutes; keep the topic small.
                .set("retention.ms", "3600000")
                .set("segment.ms", "600000")
                .set("cleanup.policy", "delete");
                notes.push(format!(
                    "creating {topic}: {} partitions, replicas {assignment:?}, min.insync.replicas {min_isr}",
                    assignment.len()
                ));
                clients
                    .admin
                    .create_topics([&new], &opts)
                    .await
                    .map(|r| r.into_iter().map(|x| x.map(|_| ())).collect::<Vec<_>>())
            }
            Plan::AddPartitions { assignment } => {
                let existing = view.partitions.as_ref().map(Vec::len).unwrap_or(0);
                let refs: Vec<&[i32]> = assignment.iter().map(Vec::as_slice).collect();
                let new = NewPartitions::new(&topic, existing + assignment.len()).assign(&refs);
                notes.push(format!("adding partitions to {topic}: {assignment:?}"));
                clients
                    .admin
                    .create_partitions([&new], &opts)
                    .await
                    .map(|r| r.into_iter().map(|x| x.map(|_| ())).collect::<Vec<_>>())
            }
            Plan::Reassign { moves } => {
                notes.push(format!("moving replicas of {topic}: {moves:?}"));
                let requested: Vec<(String, i32, Option<Vec<i32>>)> = moves
                    .iter()
                    .map(|(p, r)| (topic.clone(), *p, Some(r.clone())))
                    .collect();
                let timeout = self.settings.produce_timeout;
                let answer = match direct(&self.settings, view).await {
                    Ok(mut c) => c
                        .alter_partition_reassignments(&requested, timeout)
                        .await
                        .map(|t| t.value),
                    Err(e) => Err(e),
                };
                self.layout.changed(now);
                return layout_outcome(&topic, answer, notes);
            }
            Plan::ElectPreferred { partitions } => {
                notes.push(format!(
                    "electing the preferred leaders of {topic} partitions {partitions:?}"
                ));
                let requested: Vec<(String, i32)> =
                    partitions.iter().map(|p| (topic.clone(), *p)).collect();
                let timeout = self.settings.produce_timeout;
                let answer = match direct(&self.settings, view).await {
                    Ok(mut c) => c
                        .elect_leaders(true, &requested, timeout)
                        .await
                        .map(|t| t.value),
                    Err(e) => Err(e),
                };
                self.layout.changed(now);
                return layout_outcome(&topic, answer, notes);
            }
        };
        self.layout.changed(now);
        match result {
            Ok(results) => {
                for r in results {
                    if let Err((name, code)) = r {
                        if code == RDKafkaErrorCode::TopicAlreadyExists {
                            continue;
                        }
                        let detail = format!("{name}: {code}");
                        notes.push(format!("layout change failed: {detail}"));
                        return Some(match code {
                            RDKafkaErrorCode::TopicAuthorizationFailed
                            | RDKafkaErrorCode::ClusterAuthorizationFailed => TopicStatus::NotPermitted(format!(
                                "the watchdog may not create or alter {topic} ({code}); grant it Create and Alter on the topic, or create the topic yourself"
                            )),
                            _ => TopicStatus::Missing(detail),
                        });
                    }
                }
                None
            }
            Err(e) => {
                notes.push(format!("layout change failed: {e}"));
                None
            }
        }
    }

    /// Assigns the consumer to every partition, new ones at their current end, before any
    /// record is written to them (so none is missed). A partition whose end offset cannot
    /// be fetched is left out, and the ledger books no write to it until it is read: the
    /// consumer would start past those writes and count them lost.
    async fn assign(&mut self, parts: &[PartitionStateWithEpoch]) {
        let want: BTreeSet<i32> = parts.iter().map(|p| p.state.partition).collect();
        if want == self.assigned {
            return;
        }
        let Some(clients) = &self.clients else { return };
        let consumer = clients.consumer.clone();
        let topic = self.settings.topic.clone();
        let current = clients.consumer.position().unwrap_or_default();
        let mut starts: BTreeMap<i32, i64> = BTreeMap::new();
        let mut unknown: Vec<i32> = Vec::new();
        for p in &want {
            let own = current
                .find_partition(&topic, *p)
                .map(|e| e.offset())
                .unwrap_or(Offset::Invalid);
            match resume_offset(own, lock(&self.shared.books).ledger.position(*p)) {
                Some(o) => {
                    starts.insert(*p, o);
                }
                None => unknown.push(*p),
            }
        }
        let timeout = self.settings.produce_timeout;
        let fetch_topic = topic.clone();
        let ends = tokio::task::spawn_blocking(move || {
            unknown
                .into_iter()
                .map(|p| {
                    (
                        p,
                        consumer
                            .fetch_watermarks(&fetch_topic, p, timeout)
                            .map(|w| w.1),
                    )
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for (p, end) in ends {
            match end {
                Ok(o) => {
                    starts.insert(p, o);
                }
                Err(e) => {
                    tracing::warn!(cluster = %self.settings.cluster, partition = p, error = %e, "canary: no end offset yet; its writes are not checked until it is read");
                }
            }
        }
        let mut tpl = TopicPartitionList::new();
        for (p, o) in &starts {
            let _ = tpl.add_partition_offset(&topic, *p, Offset::Offset(*o));
        }
        match clients.consumer.assign(&tpl) {
            Ok(()) => {
                self.assigned = starts.keys().copied().collect();
                let mut books = lock(&self.shared.books);
                for (p, o) in &starts {
                    books.ledger.reading_from(*p, *o);
                }
            }
            Err(e) => {
                tracing::warn!(cluster = %self.settings.cluster, error = %e, "canary: cannot assign the consumer");
                // Whatever librdkafka keeps, nothing is known to be read from a known offset.
                self.assigned.clear();
            }
        }
        for p in want.iter().filter(|p| !self.assigned.contains(p)) {
            lock(&self.shared.books).ledger.not_reading(*p);
        }
    }

    /// After a leader change, re-reads what was read back before and checks it is all still
    /// there: a leader elected from outside the ISR truncates acknowledged writes. A re-read
    /// that does not get through (deadline, high watermark of the new leader still behind)
    /// judges what it read and is taken up again next round.
    async fn check_leader_changes(
        &mut self,
        parts: &[PartitionStateWithEpoch],
        out: &mut CanaryRound,
    ) {
        for p in parts {
            let partition = p.state.partition;
            let previous = self.epochs.insert(partition, p.leader_epoch);
            if previous.is_some_and(|e| e != p.leader_epoch) {
                lock(&self.shared.books).ledger.leader_changed(partition);
            }
            if p.state.leader < 0 {
                continue;
            }
            let owed = lock(&self.shared.books).ledger.verification_owed(partition);
            let Some(from) = owed else {
                continue;
            };
            let client = self.settings.client.clone();
            let topic = self.settings.topic.clone();
            let timeout = self.settings.produce_timeout;
            let log = tokio::task::spawn_blocking(move || {
                reread(&client, &topic, partition, from, timeout)
            })
            .await;
            match log {
                Ok(Ok(r)) => {
                    let mut books = lock(&self.shared.books);
                    for ev in books.ledger.verify(partition, &r.log, r.read_to) {
                        books.event(ev, &self.shared);
                    }
                    if let Some(e) = r.stopped {
                        out.layout.push(format!(
                            "re-read of partition {partition} after its leader changed stopped at offset {} ({e}); the rest is checked next round",
                            r.read_to
                        ));
                    }
                }
                Ok(Err(e)) => out.layout.push(format!(
                    "re-read of partition {partition} after its leader changed failed: {e}; tried again next round"
                )),
                Err(_) => {}
            }
        }
    }
}

/// Failed writes to one partition since the last round, of one kind, charged to one
/// broker.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedWrites {
    /// The broker that received them, or, when the client does not say, the leader they
    /// were sent to.
    pub broker: BrokerId,
    pub kind: &'static str,
    pub count: u32,
    /// Whether the client named the broker that received them (else it is the leader
    /// they were sent to, in the view of that time).
    pub received: bool,
    /// That broker took acks=1 writes to the partition meanwhile: it appends, and its
    /// followers held these writes. Not charged to it.
    pub leader_appended: bool,
    /// Unix seconds in /status.
    #[serde(serialize_with = "unix_seconds")]
    pub first_sent_at: SystemTime,
    #[serde(serialize_with = "unix_seconds")]
    pub last_sent_at: SystemTime,
}

fn unix_seconds<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    s.serialize_f64(secs)
}

/// What one partition's writes did since the last round.
#[derive(Debug, Default)]
struct SinceRound {
    writes: u32,
    failed: Vec<FailedWrites>,
    end_to_end: Vec<f64>,
}

/// Kept per partition for the round: enough for a round of 10 s at ten writes a second.
const MAX_SAMPLES: usize = 128;

/// What the writer, the reader and the rounds share. Locked briefly, never across an
/// await.
struct Books {
    ledger: Ledger,
    windows: Windows,
    /// The newest acks=all write that ended, per partition: (sent at, outcome).
    latest: BTreeMap<i32, (SystemTime, Result<Duration, ProduceFailure>)>,
    since: BTreeMap<i32, SinceRound>,
    /// The newest acks=1 probe per (partition, broker).
    acks1: BTreeMap<(i32, BrokerId), Acks1Probe>,
    /// Per (partition, broker), the send time of the newest acks=1 write it acknowledged
    /// in time: a leader that does so appends, and an acks=all write it holds meanwhile
    /// waits on its followers.
    appends_since: BTreeMap<(i32, BrokerId), SystemTime>,
    lost: Vec<LossEvent>,
    duplicated: Vec<(i32, BrokerId)>,
    windows_closed: Vec<Window>,
    /// Each partition's leader in the newest view, for events that do not name a broker.
    leaders: BTreeMap<i32, BrokerId>,
}

struct Shared {
    books: Mutex<Books>,
    stats: CanaryStats,
    cluster: String,
    slow: Duration,
}

fn lock(books: &Mutex<Books>) -> std::sync::MutexGuard<'_, Books> {
    // A panic while the books were held leaves them as consistent as any single update.
    books.lock().unwrap_or_else(|e| e.into_inner())
}

impl Books {
    fn new(instance: &str, lost_after: Duration) -> Self {
        Books {
            ledger: Ledger::new(instance, lost_after),
            windows: Windows::default(),
            latest: BTreeMap::new(),
            since: BTreeMap::new(),
            acks1: BTreeMap::new(),
            appends_since: BTreeMap::new(),
            lost: Vec::new(),
            duplicated: Vec::new(),
            windows_closed: Vec::new(),
            leaders: BTreeMap::new(),
        }
    }

    fn retain_partitions(&mut self, keep: impl Fn(i32) -> bool) {
        self.ledger.retain_partitions(&keep);
        self.windows.retain_partitions(&keep);
        self.latest.retain(|p, _| keep(*p));
        self.since.retain(|p, _| keep(*p));
        self.acks1.retain(|(p, _), _| keep(*p));
        self.appends_since.retain(|(p, _), _| keep(*p));
    }

    /// A ledger event: into the round's report and the cumulative metrics.
    fn event(&mut self, ev: LedgerEvent, sh: &Shared) {
        match ev {
            LedgerEvent::Confirmed {
                partition,
                end_to_end,
                acks: Acks::All,
                broker,
                ..
            } => {
                let s = end_to_end.as_secs_f64();
                sh.stats.end_to_end(&sh.cluster, partition, broker, s);
                let e2e = &mut self.since.entry(partition).or_default().end_to_end;
                if e2e.len() < MAX_SAMPLES {
                    e2e.push(s);
                }
            }
            LedgerEvent::Confirmed { .. } => {}
            LedgerEvent::Lost {
                partition,
                offset,
                seq,
                acks,
                broker,
                reason,
            } => {
                let loss = LossEvent {
                    partition,
                    offset,
                    seq,
                    acks,
                    broker,
                    reason: reason.as_label(),
                };
                sh.stats.lost(&sh.cluster, &loss);
                if self.lost.len() < MAX_SAMPLES {
                    self.lost.push(loss);
                }
            }
            LedgerEvent::Duplicate { partition, .. } => {
                let leader = self.leaders.get(&partition).copied().unwrap_or(-1);
                sh.stats.duplicated(&sh.cluster, partition, leader);
                if self.duplicated.len() < MAX_SAMPLES {
                    self.duplicated.push((partition, leader));
                }
            }
        }
    }

    fn window_closed(&mut self, w: Window, sh: &Shared) {
        sh.stats.window_closed(&sh.cluster, &w);
        if self.windows_closed.len() < MAX_SAMPLES {
            self.windows_closed.push(w);
        }
    }

    /// One write ended.
    fn write_ended(&mut self, a: Attempt, sh: &Shared) {
        // When it ended, on the clock its send time was read from.
        let now = a.sent_at + a.took;
        let partition = a.target.partition;
        let broker = a.broker();
        match a.target.acks {
            Acks::All => {
                let outcome = match &a.result {
                    Ok(_) => "ok",
                    Err(f) => f.kind,
                };
                let ok_seconds = a.result.as_ref().ok().map(|_| a.took.as_secs_f64());
                sh.stats
                    .write(&sh.cluster, partition, broker, outcome, ok_seconds);
                let slow = a.result.is_ok() && a.took >= sh.slow;
                // A write held long, then acknowledged, was held by whatever ailed the leader
                // it was sent to; after a failover the new leader that finally took it is
                // not to blame.
                let held_by = if slow { a.target.leader } else { broker };
                let appended = self
                    .appends_since
                    .get(&(partition, held_by))
                    .is_some_and(|t| *t >= a.sent_at);
                let failure = match &a.result {
                    Err(f) => Some(f.kind),
                    Ok(_) if slow => Some("slow"),
                    Ok(_) => None,
                };
                let charge = failure.and_then(|kind| charge(kind, held_by, appended));
                if let (Some(kind), Some(b)) = (failure, charge) {
                    sh.stats.charged_failure(&sh.cluster, b, kind);
                }
                let since = self.since.entry(partition).or_default();
                since.writes = since.writes.saturating_add(1);
                if let Err(f) = &a.result {
                    let received = f.broker.is_some();
                    let full = since.failed.len() >= MAX_SAMPLES;
                    match since.failed.iter_mut().find(|x| {
                        x.broker == broker && x.kind == f.kind && x.leader_appended == appended
                    }) {
                        Some(x) => {
                            x.count = x.count.saturating_add(1);
                            x.first_sent_at = x.first_sent_at.min(a.sent_at);
                            x.last_sent_at = x.last_sent_at.max(a.sent_at);
                            x.received |= received;
                        }
                        None if !full => since.failed.push(FailedWrites {
                            broker,
                            kind: f.kind,
                            count: 1,
                            received,
                            leader_appended: appended,
                            first_sent_at: a.sent_at,
                            last_sent_at: a.sent_at,
                        }),
                        None => {}
                    }
                }
                // A refused write says what the watchdog may do, not how the partition is:
                // it measures nothing.
                if failure.is_some_and(|k| k != AUTHORIZATION) {
                    if let Some(w) = self.windows.failed(partition, charge, a.sent_at) {
                        self.window_closed(w, sh);
                    }
                    sh.stats.window_open(&sh.cluster, partition, charge, true);
                }
                if a.result.is_ok() {
                    if let Some(w) = self.windows.succeeded(partition, a.sent_at, now) {
                        self.window_closed(w, sh);
                    }
                }
                if self
                    .latest
                    .get(&partition)
                    .is_none_or(|(at, _)| *at <= a.sent_at)
                {
                    let result = match &a.result {
                        Ok(_) => Ok(a.took),
                        Err(f) => Err(f.clone()),
                    };
                    self.latest.insert(partition, (a.sent_at, result));
                }
                if let Ok(ack) = a.result {
                    let entry = Entry {
                        seq: ack.seq,
                        acks: Acks::All,
                        sent_at: a.sent_at,
                        acked_at: now,
                        broker,
                        stale_ack: false,
                    };
                    if let ledger::Booked::Read(ev) =
                        self.ledger.acked(partition, ack.offset, entry)
                    {
                        self.event(ev, sh);
                    }
                }
            }
            Acks::One => {
                let stale = a.target.leader != broker;
                let mut probe = Acks1Probe {
                    partition,
                    broker,
                    stale,
                    offset: None,
                    error: None,
                };
                match a.result {
                    Ok(ack) => {
                        probe.offset = Some(ack.offset);
                        if a.took < sh.slow {
                            let t = self
                                .appends_since
                                .entry((partition, broker))
                                .or_insert(a.sent_at);
                            *t = (*t).max(a.sent_at);
                        }
                        let entry = Entry {
                            seq: ack.seq,
                            acks: Acks::One,
                            sent_at: a.sent_at,
                            acked_at: now,
                            broker,
                            stale_ack: stale,
                        };
                        if let ledger::Booked::Read(ev) =
                            self.ledger.acked(partition, ack.offset, entry)
                        {
                            self.event(ev, sh);
                        }
                    }
                    Err(f) => probe.error = Some(f.detail),
                }
                self.acks1.insert((partition, broker), probe);
            }
        }
    }

    /// The round's report of the canary partitions, from what happened since the last one.
    fn report(
        &mut self,
        parts: &[PartitionStateWithEpoch],
        now: SystemTime,
        out: &mut CanaryRound,
    ) {
        let overdue = self.ledger.overdue(now);
        for p in parts {
            let partition = p.state.partition;
            let since = self.since.remove(&partition).unwrap_or_default();
            let result = self.latest.get(&partition).map(|(_, r)| r.clone());
            let (produce_seconds, produce_error) = match &result {
                Some(Ok(d)) => (Some(d.as_secs_f64()), None),
                Some(Err(f)) => (None, Some(f.clone())),
                None => (None, None),
            };
            let open = self.windows.open_for(partition, now);
            out.partitions.push(PartitionRound {
                partition,
                leader: p.state.leader,
                leader_epoch: p.leader_epoch,
                replicas: p.state.replicas.clone(),
                isr: p.state.isr.clone(),
                produce: result,
                produce_seconds,
                produce_error,
                end_to_end_seconds: since.end_to_end,
                unavailable_seconds: open.map(|(_, d)| d.as_secs_f64()),
                unavailable_broker: open.and_then(|(b, _)| b),
                overdue: overdue.get(&partition).copied().unwrap_or(0),
                writes: since.writes,
                failed_writes: since.failed,
                charged_to: None,
            });
        }
        out.lost.append(&mut self.lost);
        out.duplicated.append(&mut self.duplicated);
        out.windows_closed = std::mem::take(&mut self.windows_closed)
            .into_iter()
            .map(|w| (w.partition, w.broker.unwrap_or(-1), w.seconds()))
            .collect();
        out.acks1 = std::mem::take(&mut self.acks1).into_values().collect();
    }
}

/// Feeds every record the consumer reads to the books, decoded.
async fn read_loop(consumer: Arc<StreamConsumer<CanaryContext>>, shared: Arc<Shared>) {
    let mut last_error: Option<Instant> = None;
    loop {
        match consumer.recv().await {
            Ok(m) => {
                let record = m.payload().and_then(CanaryRecord::decode);
                let (partition, offset) = (m.partition(), m.offset());
                let mut books = lock(&shared.books);
                let events =
                    books
                        .ledger
                        .consumed(partition, offset, record.as_ref(), SystemTime::now());
                for ev in events {
                    books.event(ev, &shared);
                }
            }
            Err(e) => {
                // A partition without leader makes the consumer complain every poll; one
                // line a minute is enough.
                if last_error.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
                    tracing::warn!(cluster = %shared.cluster, error = %e, "canary consumer");
                    last_error = Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

type WriteFuture = Pin<Box<dyn Future<Output = Result<Ack, ProduceFailure>> + Send>>;

/// Runs the continuous writer of one cluster until its clients are dropped.
async fn write_loop(
    plan: watch::Receiver<Vec<Target>>,
    producer: Arc<ThreadedProducer<Attributing>>,
    settings: CanarySettings,
    shared: Arc<Shared>,
) {
    // librdkafka ends every write at message.timeout.ms (= produce_timeout) and says which
    // broker had it; the writer's own deadline only guards against a lost report.
    let schedule = Schedule::new(
        settings.interval,
        settings.produce_timeout + Duration::from_secs(1),
    );
    let settings = Arc::new(settings);
    let idle = Arc::new(conns::Idle::default());
    let seqs = shared.clone();
    let write = move |t: Target, sent_at: SystemTime| -> WriteFuture {
        let seq = lock(&seqs.books).ledger.next_seq(t.partition);
        let record = CanaryRecord {
            instance: settings.instance.clone(),
            partition: t.partition,
            seq,
            sent_at,
            acks: t.acks,
        };
        match t.claim {
            None => Box::pin(produce_one(producer.clone(), settings.clone(), record)),
            Some(claim) => Box::pin(produce_acks1(settings.clone(), idle.clone(), claim, record)),
        }
    };
    writer::run(plan, schedule, write, |a| {
        lock(&shared.books).write_ended(a, &shared)
    })
    .await;
}

/// One acks=all record through the regular producer.
async fn produce_one(
    producer: Arc<ThreadedProducer<Attributing>>,
    settings: Arc<CanarySettings>,
    record: CanaryRecord,
) -> Result<Ack, ProduceFailure> {
    let payload = record.encode();
    let (tx, rx) = oneshot::channel();
    let queued = producer.send(
        BaseRecord::<(), str, _>::with_opaque_to(&settings.topic, Box::new(tx))
            .partition(record.partition)
            .payload(&payload),
    );
    let delivered = match queued {
        // librdkafka reports every queued message once, at the latest when
        // message.timeout.ms expires.
        Ok(()) => rx.await.unwrap_or(Delivered {
            result: Err(KafkaError::MessageProduction(
                RDKafkaErrorCode::MessageTimedOut,
            )),
            broker: None,
        }),
        Err((e, _)) => Delivered {
            result: Err(e),
            broker: None,
        },
    };
    match delivered.result {
        Ok(offset) => Ok(Ack {
            offset,
            seq: record.seq,
            broker: delivered.broker,
        }),
        Err(e) => Err(ProduceFailure {
            kind: error_kind(&e),
            detail: e.to_string(),
            broker: delivered.broker,
        }),
    }
}

/// One acks=1 record sent straight to a broker that claims to lead the partition, stale
/// claims included: a leader cut off from the controller and its followers keeps
/// acknowledging such writes and loses them when the network heals (incident 3).
async fn produce_acks1(
    settings: Arc<CanarySettings>,
    idle: Arc<conns::Idle>,
    claim: LeaderClaim,
    record: CanaryRecord,
) -> Result<Ack, ProduceFailure> {
    let payload = record.encode().into_bytes();
    let send = |mut c: crate::wire::BrokerClient, opened: std::time::Instant| {
        let (settings, payload, partition) = (&settings, payload.clone(), claim.partition);
        async move {
            let answer = c
                .produce(
                    &settings.topic,
                    partition,
                    1,
                    settings.produce_timeout,
                    &[(None, payload)],
                )
                .await;
            (answer, c, opened)
        }
    };
    let fresh = || async {
        let c = crate::wire::BrokerClient::connect(&claim.address, &settings.wire).await?;
        Ok::<_, crate::wire::WireError>((c.client, std::time::Instant::now()))
    };
    let answer = async {
        if let Some((c, opened)) = idle.take(&claim.address) {
            let (answer, c, opened) = send(c, opened).await;
            match answer {
                Ok(t) => {
                    idle.put(c, opened);
                    return Ok(t);
                }
                // A kept connection the broker closed meanwhile (a restart, an idle close)
                // says nothing about the broker now: the write goes again on a new one.
                // A timeout is the broker's and is not retried.
                Err(e) if e.kind() != crate::observe::FailureKind::Timeout => {}
                Err(e) => return Err(e),
            }
        }
        let (c, opened) = fresh().await?;
        let (answer, c, opened) = send(c, opened).await;
        if answer.is_ok() {
            idle.put(c, opened);
        }
        answer
    }
    .await;
    match answer {
        Ok(t) if t.value.error_code == 0 => Ok(Ack {
            offset: t.value.base_offset,
            seq: record.seq,
            broker: Some(claim.broker),
        }),
        Ok(t) => {
            let name = crate::wire::kafka_error_name(t.value.error_code);
            Err(ProduceFailure {
                kind: "refused",
                detail: name,
                broker: Some(claim.broker),
            })
        }
        Err(e) => Err(ProduceFailure {
            kind: e.kind().as_label(),
            detail: e.kind().as_label().to_string(),
            broker: Some(claim.broker),
        }),
    }
}

/// What a re-read found.
struct Reread {
    log: BTreeMap<i64, Option<CanaryRecord>>,
    /// Every offset from the start up to this one (exclusive) was read.
    read_to: i64,
    /// Why it stopped before the high watermark it saw at its start, if it did.
    stopped: Option<String>,
}

/// Reads one partition from `from` to its current end, or as far as it gets within
/// `timeout`.
fn reread(
    client: &ClientConfig,
    topic: &str,
    partition: i32,
    from: i64,
    timeout: Duration,
) -> Result<Reread, KafkaError> {
    let consumer: BaseConsumer = client
        .clone()
        .set("group.id", "kafka-watchdog-canary-verify")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "error")
        .create()?;
    let (_, high) = consumer.fetch_watermarks(topic, partition, timeout)?;
    let mut out = Reread {
        log: BTreeMap::new(),
        read_to: from,
        stopped: None,
    };
    if high <= from {
        return Ok(out);
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(from))?;
    consumer.assign(&tpl)?;
    let deadline = Instant::now() + timeout;
    while out.read_to < high {
        if Instant::now() >= deadline {
            out.stopped = Some(format!("deadline of {} ms", timeout.as_millis()));
            break;
        }
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                out.log
                    .insert(m.offset(), m.payload().and_then(CanaryRecord::decode));
                // Offsets the consumer skips (none in this topic: no transactions, no
                // compaction) were read as far as the log goes.
                out.read_to = out.read_to.max(m.offset() + 1);
            }
            // What was read so far still counts.
            Some(Err(e)) => {
                out.stopped = Some(e.to_string());
                break;
            }
            None => {}
        }
    }
    Ok(out)
}

/// The canary's picture of the cluster from one round of direct probes: the registered
/// brokers (as the other brokers list them), the canary topic's partitions from the
/// round's merged view (newest leader epochs; merged once per round, see
/// `report::newest_view`) and the leaderships each broker claims.
pub fn view_from(
    obs: &crate::observe::RoundObservation,
    merged: &crate::cluster_view::ClusterView,
    topic: &str,
) -> CanaryView {
    let mut listed: BTreeMap<BrokerId, BrokerInfo> = BTreeMap::new();
    let mut claims = Vec::new();
    let mut addresses = Vec::new();
    for (source, probe) in &obs.probes {
        let Some(md) = probe.metadata_view() else {
            continue;
        };
        addresses.push(probe.endpoint.address());
        for b in &md.brokers {
            // A broker's own answer may list itself from a stale cache; others decide.
            if b.id != *source || obs.probes.len() == 1 {
                listed.entry(b.id).or_insert_with(|| BrokerInfo {
                    id: b.id,
                    rack: b.rack.clone(),
                });
            }
        }
        if let Some(t) = md.topics.get(topic) {
            for p in t.partitions.iter().filter(|p| p.leader == *source) {
                claims.push(LeaderClaim {
                    partition: p.partition,
                    broker: *source,
                    address: probe.endpoint.address(),
                    epoch: p.leader_epoch,
                });
            }
        }
    }
    let partitions = merged.topics.get(topic).map(|t| {
        t.partitions
            .iter()
            .map(|p| PartitionStateWithEpoch {
                state: PartitionState {
                    partition: p.partition,
                    leader: p.leader,
                    replicas: p.replicas.to_vec(),
                    isr: p.isr.to_vec(),
                },
                leader_epoch: p.leader_epoch,
            })
            .collect()
    });
    CanaryView {
        brokers: listed.into_values().collect(),
        partitions,
        claims,
        addresses,
    }
}

/// A direct connection to the first broker that answers. Admin requests are forwarded to
/// the controller by any broker in KRaft.
async fn direct(
    settings: &CanarySettings,
    view: &CanaryView,
) -> Result<crate::wire::BrokerClient, crate::wire::WireError> {
    let mut last = None;
    for address in &view.addresses {
        match crate::wire::BrokerClient::connect(address, &settings.wire).await {
            Ok(c) => return Ok(c.client),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or(crate::wire::WireError::ConnectionClosed {
        phase: crate::wire::Phase::Connect,
        detail: "no broker address known".into(),
    }))
}

/// Notes what a reassignment or election did; a refusal for lack of permission becomes the
/// topic's status.
fn layout_outcome(
    topic: &str,
    answer: Result<Vec<crate::wire::PartitionOutcome>, crate::wire::WireError>,
    notes: &mut Vec<String>,
) -> Option<TopicStatus> {
    match answer {
        Ok(outcomes) => {
            for (_, partition, code, message) in outcomes {
                // 84 ELECTION_NOT_NEEDED: the preferred leader leads already.
                if code != 0 && code != 84 {
                    notes.push(format!(
                        "{topic}-{partition}: {} {}",
                        crate::wire::kafka_error_name(code),
                        message.unwrap_or_default()
                    ));
                }
            }
            None
        }
        Err(e) => {
            notes.push(format!("layout change failed: {e}"));
            match e.kafka_code() {
                // CLUSTER_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED
                Some(31) | Some(29) => Some(TopicStatus::NotPermitted(format!(
                    "the watchdog may not alter {topic} ({e}); grant it Alter on the topic and cluster, or move its replicas yourself"
                ))),
                _ => None,
            }
        }
    }
}

/// Where the consumer resumes a partition on a new assignment: its own position, else where
/// the ledger last saw it; None when neither knows (never read), so its end offset must be
/// fetched first. Never "the end" as such: librdkafka resolves it when it fetches, after
/// this round's writes, and the records acknowledged before would be passed over and
/// counted lost.
fn resume_offset(consumer: Offset, ledger: Option<i64>) -> Option<i64> {
    match consumer {
        Offset::Offset(o) => Some(o),
        _ => ledger,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn a_failure_is_charged_to_the_broker_that_had_it_unless_it_says_nothing_about_it() {
        assert_eq!(charge("timeout", 2, false), Some(2));
        assert_eq!(charge("slow", 2, false), Some(2));
        assert_eq!(charge("transport", 2, false), Some(2));
        assert_eq!(charge("timeout", 2, true), None, "it appended: followers");
        for kind in [
            AUTHORIZATION,
            "not_leader",
            "queue_full",
            "not_enough_replicas",
            "not_enough_replicas_after_append",
        ] {
            assert_eq!(charge(kind, 2, false), None, "{kind}");
        }
        assert_eq!(charge("timeout", -1, false), None, "no leader");
    }

    fn shared() -> Shared {
        Shared {
            books: Mutex::new(Books::new("me", Duration::from_secs(60))),
            stats: CanaryStats::default(),
            cluster: "lab".into(),
            slow: Duration::from_millis(500),
        }
    }

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    /// An acks=all (`claim` None) or acks=1 write to `partition` sent at `sent` ms to
    /// `leader`, that took `took` ms and ended with `result`.
    fn attempt(
        partition: i32,
        leader: BrokerId,
        acks1: bool,
        sent: u64,
        took: u64,
        result: Result<(), &'static str>,
    ) -> Attempt {
        Attempt {
            target: Target {
                partition,
                acks: if acks1 { Acks::One } else { Acks::All },
                leader,
                claim: acks1.then(|| LeaderClaim {
                    partition,
                    broker: leader,
                    address: String::new(),
                    epoch: 1,
                }),
            },
            sent_at: at(sent),
            took: Duration::from_millis(took),
            result: match result {
                Ok(()) => Ok(Ack {
                    offset: sent as i64,
                    seq: sent,
                    broker: Some(leader),
                }),
                Err(kind) => Err(ProduceFailure {
                    kind,
                    detail: kind.into(),
                    broker: Some(leader),
                }),
            },
        }
    }

    fn charged_failures(sh: &Shared, broker: &str) -> u64 {
        let mut text = String::new();
        let mut reg = prometheus_client::registry::Registry::default();
        reg.register("c", "c", sh.stats.charged_failures_total.clone());
        prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
        text.lines()
            .filter(|l| l.starts_with("c_total{") && l.contains(&format!("broker=\"{broker}\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// Broker 2 leads partition 1 and follows partition 0 (led by 1); it freezes at 1 s.
    /// Partition 1's writes time out (acks=1 to 2 too): a window charged to 2. Partition
    /// 0's acks=all writes wait on follower 2 until it is fenced, while leader 1 takes
    /// acks=1 writes: a window, charged to no broker. Broker 1 is charged with nothing.
    #[test]
    fn a_frozen_leader_is_charged_its_window_and_its_followers_leaders_are_not() {
        let sh = shared();
        let ended = |a: Attempt| lock(&sh.books).write_ended(a, &sh);
        ended(attempt(1, 2, false, 0, 3, Ok(())));
        ended(attempt(0, 1, false, 0, 3, Ok(())));
        for t in [1_000, 2_000, 3_000] {
            ended(attempt(0, 1, true, t, 2, Ok(())));
            ended(attempt(1, 2, true, t, 1_500, Err("timeout")));
        }
        for t in [1_000, 2_000] {
            ended(attempt(1, 2, false, t, 1_500, Err("timeout")));
            ended(attempt(0, 1, false, t, 1_500, Err("timeout")));
        }
        // Fenced at 3.2 s: partition 0's held write goes through late; partition 1 moves
        // to broker 3, whose first write works at 4 s.
        ended(attempt(0, 1, false, 3_000, 600, Ok(())));
        ended(attempt(0, 1, false, 4_000, 3, Ok(())));
        let mut books = lock(&sh.books);
        let closed = std::mem::take(&mut books.windows_closed);
        assert_eq!(closed.len(), 1, "{closed:?}");
        assert_eq!(closed[0].partition, 0);
        assert_eq!(
            closed[0].broker, None,
            "the leader appended: not its window"
        );
        assert_eq!(closed[0].failed_writes, 3, "two timeouts and a slow write");
        assert_eq!(
            books.windows.open_for(1, at(4_000)),
            Some((Some(2), Duration::from_secs(3)))
        );
        drop(books);
        // A write sent at 3.5 s while the view still named 2, held by the client until it
        // found the new leader 3, which took it at 4.2 s: 2's outage, not 3's.
        let mut held = attempt(1, 3, false, 3_500, 700, Ok(()));
        held.target.leader = 2;
        ended(held);
        ended(attempt(1, 3, false, 4_000, 3, Ok(())));
        let closed = std::mem::take(&mut lock(&sh.books).windows_closed);
        assert_eq!(closed.len(), 1);
        assert_eq!((closed[0].partition, closed[0].broker), (1, Some(2)));
        assert!((closed[0].seconds() - 3.2).abs() < 0.1, "{closed:?}");
        assert_eq!(
            charged_failures(&sh, "2"),
            3,
            "two timeouts and the held write"
        );
        assert_eq!(charged_failures(&sh, "1"), 0);
        assert_eq!(charged_failures(&sh, "3"), 0);
        // The round's report: partition 1's failures since the last round, charged to 2.
        let mut out = CanaryRound {
            topic: "t".into(),
            status: TopicStatus::Ready,
            partitions: Vec::new(),
            layout: Vec::new(),
            not_leading: Vec::new(),
            lost: Vec::new(),
            duplicated: Vec::new(),
            windows_closed: Vec::new(),
            acks1: Vec::new(),
        };
        let part = |partition, leader| PartitionStateWithEpoch {
            state: PartitionState {
                partition,
                leader,
                replicas: vec![1, 2, 3],
                isr: vec![1, 3],
            },
            leader_epoch: 2,
        };
        lock(&sh.books).report(&[part(0, 1), part(1, 3)], at(5_000), &mut out);
        let p1 = &out.partitions[1];
        assert_eq!(p1.writes, 5);
        assert_eq!(p1.failed_writes.len(), 1);
        let f = &p1.failed_writes[0];
        assert_eq!(
            (f.broker, f.kind, f.count, f.leader_appended),
            (2, "timeout", 2, false)
        );
        assert!(p1.produce_seconds.is_some(), "the newest write worked");
        let f0 = &out.partitions[0].failed_writes[0];
        assert!(f0.leader_appended, "{f0:?}");
        // Collected once.
        let mut again = out.clone();
        again.partitions.clear();
        lock(&sh.books).report(&[part(1, 3)], at(6_000), &mut again);
        assert!(again.partitions[0].failed_writes.is_empty());
        assert_eq!(again.partitions[0].writes, 0);
    }

    #[test]
    fn a_partition_read_before_resumes_where_it_stood_never_at_the_end() {
        // Reassigned (a partition was added) before the consumer delivered anything since
        // its last assignment: its own position is unknown, the ledger's is 5. Starting at
        // the end would pass over a record acknowledged at 5 and count it lost.
        assert_eq!(resume_offset(Offset::Invalid, Some(5)), Some(5));
        assert_eq!(resume_offset(Offset::Offset(7), Some(5)), Some(7));
        assert_eq!(
            resume_offset(Offset::Invalid, None),
            None,
            "fetch its end first"
        );
        assert_eq!(resume_offset(Offset::End, None), None);
    }
}
