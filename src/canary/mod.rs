//! Canary round trips, per partition, every round: one acks=all record to each partition of
//! a dedicated topic (laid out so every broker leads one), read back by an assigned consumer.
//! Measures produce and end-to-end latency and availability, and catches acknowledged writes
//! the cluster later loses. rdkafka is used on purpose: the canary sees what a real client
//! sees, retries and metadata caching included.

mod auth;
pub mod layout;
pub mod ledger;
pub mod record;
pub mod stats;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
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
use tokio::sync::{mpsc, oneshot};

use crate::observe::BrokerId;
use auth::CanaryContext;
use layout::{BrokerInfo, LayoutMemory, LayoutSettings, PartitionState, Plan};
use ledger::{Entry, Ledger, LedgerEvent};
use record::{Acks, CanaryRecord};

/// How the canary of one cluster runs.
#[derive(Clone)]
pub struct CanarySettings {
    pub cluster: String,
    pub topic: String,
    pub instance: String,
    pub produce_timeout: Duration,
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

/// One canary partition this round.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionRound {
    pub partition: i32,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    /// acks=all produce latency, or why it failed; None when nothing was sent.
    #[serde(skip)]
    pub produce: Option<Result<Duration, ProduceFailure>>,
    pub produce_seconds: Option<f64>,
    pub produce_error: Option<ProduceFailure>,
    /// End-to-end latencies of records of this partition read back this round.
    pub end_to_end_seconds: Vec<f64>,
    /// How long the partition has been unwritable, when it is.
    pub unavailable_seconds: Option<f64>,
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
    /// Unavailability windows that closed this round: (partition, leader now, seconds).
    pub windows_closed: Vec<(i32, BrokerId, f64)>,
    /// Direct acks=1 writes to every broker claiming a canary leadership.
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

struct Consumed {
    partition: i32,
    offset: i64,
    record: Option<CanaryRecord>,
    at: SystemTime,
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
    producer: ThreadedProducer<Attributing>,
    consumer: Arc<StreamConsumer<CanaryContext>>,
    admin: AdminClient<CanaryContext>,
    context: CanaryContext,
    consumed: mpsc::UnboundedReceiver<Consumed>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Clients {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

pub struct Canary {
    settings: CanarySettings,
    clients: Option<Clients>,
    ledger: Ledger,
    layout: LayoutMemory,
    assigned: BTreeSet<i32>,
    epochs: BTreeMap<i32, i32>,
}

fn config_error(e: KafkaError) -> TopicStatus {
    TopicStatus::Broken(format!("cannot create the canary's Kafka clients: {e}"))
}

impl Canary {
    pub fn new(settings: CanarySettings) -> Self {
        Canary {
            ledger: Ledger::new(&settings.instance, settings.lost_after),
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
            .set("fetch.wait.max.ms", "100")
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
        let (tx, rx) = mpsc::unbounded_channel();
        let reader = tokio::spawn(read_loop(consumer.clone(), tx, s.cluster.clone()));
        Ok(Clients {
            producer,
            consumer,
            admin,
            context,
            consumed: rx,
            reader,
        })
    }

    /// One canary round. Never fails: what goes wrong is reported in the result.
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
            return out;
        };
        let states: Vec<PartitionState> = parts.iter().map(|p| p.state.clone()).collect();
        out.not_leading = layout::not_leading(&states, &view.brokers);
        self.assign(parts).await;
        self.check_leader_changes(parts, &mut out).await;

        let seqs: Vec<u64> = parts
            .iter()
            .map(|p| self.ledger.next_seq(p.state.partition))
            .collect();
        let claims: Vec<(LeaderClaim, u64)> = if self.settings.acks1_probe {
            view.claims
                .iter()
                .map(|c| (c.clone(), self.ledger.next_seq(c.partition)))
                .collect()
        } else {
            Vec::new()
        };
        let Some(clients) = &self.clients else {
            return out;
        };
        let (sent_all, acks1) = tokio::join!(
            produce_all(&clients.producer, &self.settings, parts, &seqs),
            acks1_probes(&self.settings, parts, &claims)
        );
        let acked_at = SystemTime::now();
        let mut results = Vec::new();
        // Records the consumer will read back, for the drain to wait for.
        let mut booked: BTreeSet<(i32, u64)> = BTreeSet::new();
        for s in sent_all {
            match s.result {
                Ok((offset, took)) => {
                    let read = self.ledger.acked(
                        s.partition,
                        offset,
                        Entry {
                            seq: s.seq,
                            acks: Acks::All,
                            sent_at: s.sent_at,
                            acked_at,
                            broker: s.leader,
                            stale_ack: false,
                        },
                    );
                    if read {
                        booked.insert((s.partition, s.seq));
                    }
                    results.push((s.partition, s.seq, Ok(took)));
                }
                Err(f) => results.push((s.partition, s.seq, Err(f))),
            }
        }
        for (probe, acked) in acks1 {
            if let Some((offset, entry)) = acked {
                self.ledger.acked(probe.partition, offset, entry);
            }
            out.acks1.push(probe);
        }
        let mut e2e: BTreeMap<i32, Vec<f64>> = BTreeMap::new();
        self.drain(&booked, &mut e2e, &mut out).await;
        for ev in self.ledger.expire(SystemTime::now()) {
            record_event(ev, &mut e2e, &mut out);
        }
        let overdue = self.ledger.overdue(SystemTime::now());
        let end = SystemTime::now();
        for ((partition, _seq, result), p) in results.into_iter().zip(parts) {
            // A refused write says what the watchdog may do, not how the partition is: it is
            // reported as such and measures nothing.
            let refused = result.as_ref().err().filter(|f| f.kind == AUTHORIZATION);
            if let Some(f) = refused.filter(|_| out.status == TopicStatus::Ready) {
                out.status = TopicStatus::NotPermitted(format!(
                    "the watchdog may not write to {} ({}); grant it Write, Read and Describe on the topic and Read on its consumer group",
                    self.settings.topic, f.detail
                ));
            }
            let refused = refused.is_some();
            // A write that librdkafka held until a new leader was elected succeeds late: the
            // partition was unusable for that long even though nothing failed.
            let slow = result
                .as_ref()
                .is_ok_and(|d| *d >= slow_write(self.settings.produce_timeout));
            if slow {
                self.ledger.availability(partition, false, now, end);
            }
            let available = result.is_ok();
            if let Some(window) = (!refused)
                .then(|| self.ledger.availability(partition, available, now, end))
                .flatten()
            {
                out.windows_closed
                    .push((partition, p.state.leader, window.as_secs_f64()));
            }
            let (produce_seconds, produce_error) = match &result {
                Ok(d) => (Some(d.as_secs_f64()), None),
                Err(f) => (None, Some(f.clone())),
            };
            out.partitions.push(PartitionRound {
                partition,
                leader: p.state.leader,
                leader_epoch: p.leader_epoch,
                replicas: p.state.replicas.clone(),
                isr: p.state.isr.clone(),
                produce: Some(result),
                produce_seconds,
                produce_error,
                end_to_end_seconds: e2e.remove(&partition).unwrap_or_default(),
                unavailable_seconds: self
                    .ledger
                    .unavailable_for(partition, end)
                    .map(|d| d.as_secs_f64()),
                overdue: overdue.get(&partition).copied().unwrap_or(0),
                charged_to: None,
            });
        }
        let existing: BTreeSet<i32> = parts.iter().map(|p| p.state.partition).collect();
        self.ledger.retain_partitions(|p| existing.contains(&p));
        out
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
            match resume_offset(own, self.ledger.position(*p)) {
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
                for (p, o) in &starts {
                    self.ledger.reading_from(*p, *o);
                }
            }
            Err(e) => {
                tracing::warn!(cluster = %self.settings.cluster, error = %e, "canary: cannot assign the consumer");
                // Whatever librdkafka keeps, nothing is known to be read from a known offset.
                self.assigned.clear();
            }
        }
        for p in want.iter().filter(|p| !self.assigned.contains(p)) {
            self.ledger.not_reading(*p);
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
                self.ledger.leader_changed(partition);
            }
            if p.state.leader < 0 {
                continue;
            }
            let Some(from) = self.ledger.verification_owed(partition) else {
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
                    for ev in self.ledger.verify(partition, &r.log, r.read_to) {
                        record_event(ev, &mut BTreeMap::new(), out);
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

    /// Takes what the consumer read, waiting briefly for this round's records.
    async fn drain(
        &mut self,
        sent: &BTreeSet<(i32, u64)>,
        e2e: &mut BTreeMap<i32, Vec<f64>>,
        out: &mut CanaryRound,
    ) {
        let Some(clients) = &mut self.clients else {
            return;
        };
        let mut waiting: BTreeSet<(i32, u64)> = sent.clone();
        let deadline =
            tokio::time::Instant::now() + Duration::from_secs(1).min(self.settings.produce_timeout);
        loop {
            let next = if waiting.is_empty() {
                clients.consumed.try_recv().ok()
            } else {
                tokio::time::timeout_at(deadline, clients.consumed.recv())
                    .await
                    .ok()
                    .flatten()
            };
            let Some(c) = next else { break };
            if let Some(r) = &c.record {
                waiting.remove(&(c.partition, r.seq));
            }
            for ev in self
                .ledger
                .consumed(c.partition, c.offset, c.record.as_ref(), c.at)
            {
                record_event(ev, e2e, out);
            }
        }
    }
}

fn record_event(ev: LedgerEvent, e2e: &mut BTreeMap<i32, Vec<f64>>, out: &mut CanaryRound) {
    match ev {
        LedgerEvent::Confirmed {
            partition,
            end_to_end,
            acks: Acks::All,
            ..
        } => e2e
            .entry(partition)
            .or_default()
            .push(end_to_end.as_secs_f64()),
        LedgerEvent::Confirmed { .. } => {}
        LedgerEvent::Lost {
            partition,
            offset,
            seq,
            acks,
            broker,
            reason,
        } => out.lost.push(LossEvent {
            partition,
            offset,
            seq,
            acks,
            broker,
            reason: reason.as_label(),
        }),
        LedgerEvent::Duplicate { partition, .. } => {
            let leader = out
                .partitions
                .iter()
                .find(|p| p.partition == partition)
                .map(|p| p.leader)
                .unwrap_or(-1);
            out.duplicated.push((partition, leader));
        }
    }
}

/// Forwards every record the consumer reads to the round, decoded.
async fn read_loop(
    consumer: Arc<StreamConsumer<CanaryContext>>,
    tx: mpsc::UnboundedSender<Consumed>,
    cluster: String,
) {
    let mut last_error: Option<Instant> = None;
    loop {
        match consumer.recv().await {
            Ok(m) => {
                let c = Consumed {
                    partition: m.partition(),
                    offset: m.offset(),
                    record: m.payload().and_then(CanaryRecord::decode),
                    at: SystemTime::now(),
                };
                if tx.send(c).is_err() {
                    return;
                }
            }
            Err(e) => {
                // A partition without leader makes the consumer complain every poll; one
                // line a minute is enough.
                if last_error.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
                    tracing::warn!(%cluster, error = %e, "canary consumer");
                    last_error = Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
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
/// brokers (as the other brokers list them) and the canary topic's partitions from the
/// newest leader epochs.
pub fn view_from(obs: &crate::observe::RoundObservation, topic: &str) -> CanaryView {
    use crate::observe::MetadataView;
    let mut listed: BTreeMap<BrokerId, BrokerInfo> = BTreeMap::new();
    let mut answers: Vec<(BrokerId, MetadataView)> = Vec::new();
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
        let mut only = md.clone_header();
        if let Some(t) = md.topics.get(topic) {
            only.topics.insert(topic.to_string(), t.clone());
            for p in t.partitions.iter().filter(|p| p.leader == *source) {
                claims.push(LeaderClaim {
                    partition: p.partition,
                    broker: *source,
                    address: probe.endpoint.address(),
                    epoch: p.leader_epoch,
                });
            }
        }
        answers.push((*source, only));
    }
    let refs: Vec<(BrokerId, &MetadataView)> = answers.iter().map(|(id, m)| (*id, m)).collect();
    let merged = crate::cluster_view::merge(&refs);
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

struct Sent {
    partition: i32,
    seq: u64,
    leader: BrokerId,
    sent_at: SystemTime,
    result: Result<(i64, Duration), ProduceFailure>,
}

/// One acks=all record to every partition, all at once, through the regular producer.
async fn produce_all(
    producer: &ThreadedProducer<Attributing>,
    settings: &CanarySettings,
    parts: &[PartitionStateWithEpoch],
    seqs: &[u64],
) -> Vec<Sent> {
    let sends = parts.iter().zip(seqs).map(|(p, seq)| async move {
        let partition = p.state.partition;
        let record = CanaryRecord {
            instance: settings.instance.clone(),
            partition,
            seq: *seq,
            sent_at: SystemTime::now(),
            acks: Acks::All,
        };
        let payload = record.encode();
        let started = Instant::now();
        let (tx, rx) = oneshot::channel();
        let queued = producer.send(
            BaseRecord::<(), str, _>::with_opaque_to(&settings.topic, Box::new(tx))
                .partition(partition)
                .payload(&payload),
        );
        let delivered = match queued {
            Ok(()) => {
                // librdkafka reports every queued message once, at the latest when
                // message.timeout.ms expires; the margin only guards against a lost report.
                match tokio::time::timeout(settings.produce_timeout * 2, rx).await {
                    Ok(Ok(d)) => d,
                    _ => Delivered {
                        result: Err(KafkaError::MessageProduction(
                            RDKafkaErrorCode::MessageTimedOut,
                        )),
                        broker: None,
                    },
                }
            }
            Err((e, _)) => Delivered {
                result: Err(e),
                broker: None,
            },
        };
        Sent {
            partition,
            seq: *seq,
            leader: p.state.leader,
            sent_at: record.sent_at,
            result: match delivered.result {
                Ok(offset) => Ok((offset, started.elapsed())),
                Err(e) => Err(ProduceFailure {
                    kind: error_kind(&e),
                    detail: e.to_string(),
                    broker: delivered.broker,
                }),
            },
        }
    });
    futures::future::join_all(sends).await
}

/// One acks=1 record sent straight to every broker that claims to lead a canary partition,
/// stale claims included: a leader cut off from the controller and its followers keeps
/// acknowledging such writes and loses them when the network heals (incident 3). Returns
/// what each broker answered and, for acknowledged writes, the ledger entry.
async fn acks1_probes(
    settings: &CanarySettings,
    parts: &[PartitionStateWithEpoch],
    claims: &[(LeaderClaim, u64)],
) -> Vec<(Acks1Probe, Option<(i64, Entry)>)> {
    let probes = claims.iter().map(|(claim, seq)| async move {
        let current = parts
            .iter()
            .find(|p| p.state.partition == claim.partition)
            .map(|p| p.state.leader);
        let stale = current != Some(claim.broker);
        let record = CanaryRecord {
            instance: settings.instance.clone(),
            partition: claim.partition,
            seq: *seq,
            sent_at: SystemTime::now(),
            acks: Acks::One,
        };
        let answer = async {
            let mut c = crate::wire::BrokerClient::connect(&claim.address, &settings.wire).await?;
            c.client
                .produce(
                    &settings.topic,
                    claim.partition,
                    1,
                    settings.produce_timeout,
                    &[(None, record.encode().into_bytes())],
                )
                .await
        }
        .await;
        let mut probe = Acks1Probe {
            partition: claim.partition,
            broker: claim.broker,
            stale,
            offset: None,
            error: None,
        };
        let mut acked = None;
        match answer {
            Ok(t) if t.value.error_code == 0 => {
                probe.offset = Some(t.value.base_offset);
                acked = Some((
                    t.value.base_offset,
                    Entry {
                        seq: *seq,
                        acks: Acks::One,
                        sent_at: record.sent_at,
                        acked_at: SystemTime::now(),
                        broker: claim.broker,
                        stale_ack: stale,
                    },
                ));
            }
            Ok(t) => probe.error = Some(crate::wire::kafka_error_name(t.value.error_code)),
            Err(e) => probe.error = Some(e.kind().as_label().to_string()),
        }
        (probe, acked)
    });
    futures::future::join_all(probes).await
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
