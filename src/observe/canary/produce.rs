//! The writer: acks=all records to every canary partition each interval, acks=1 records
//! straight to every broker claiming a leadership, and what a failed write says (its
//! bounded kind and the broker it is charged to).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use serde::Serialize;
use tokio::sync::{oneshot, watch};

use super::auth::CanaryContext;
use super::books::{lock, Shared};
use super::polled::Polled;
use super::record::CanaryRecord;
use super::view::LeaderClaim;
use super::writer::{self, Ack, Schedule, Target};
use super::{conns, CanarySettings};
use crate::model::round::BrokerId;
use crate::model::words::AUTHORIZATION;

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
    crate::model::words::blames_followers(kind)
}

/// Whether a produce error happened in the client, before any broker had the write: the
/// local queue was full, or the message timed out waiting to be sent. It says nothing about
/// a broker.
pub fn client_side(kind: &str) -> bool {
    crate::model::words::client_side(kind)
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

/// What librdkafka reports for one acks=all write, with the broker that received it: the
/// delivery report of `FutureProducer` leaves the broker out, and without it a failure
/// caused by the client's stale metadata would be charged to the view's new leader.
pub(super) struct Delivered {
    pub(super) result: Result<i64, KafkaError>,
    pub(super) broker: Option<BrokerId>,
}

/// Hands each delivery report, with the broker it came from, to the write waiting for it;
/// its token is set like the canary's other clients' (auth::CanaryContext::prime).
pub(super) struct Attributing;

impl rdkafka::ClientContext for Attributing {
    // Tokens are set by the canary (auth::CanaryContext::prime), never asked for.
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = CanaryContext::ENABLE_REFRESH_OAUTH_TOKEN;
}

impl ProducerContext for Attributing {
    type DeliveryOpaque = Box<oneshot::Sender<Delivered>>;

    fn delivery(&self, result: &DeliveryResult<'_>, tx: Self::DeliveryOpaque) {
        let (result, message) = match result {
            Ok(m) => (Ok(m.offset()), m),
            Err((e, m)) => (Err(e.clone()), m),
        };
        let _ = tx.send(Delivered {
            result,
            broker: crate::sys::message_broker_id(message),
        });
    }
}

pub(super) type WriteFuture = Pin<Box<dyn Future<Output = Result<Ack, ProduceFailure>> + Send>>;

/// Runs the continuous writer of one cluster until its clients are dropped.
pub(super) async fn write_loop(
    plan: watch::Receiver<Vec<Target>>,
    producer: Arc<Polled<Attributing>>,
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
pub(super) async fn produce_one(
    producer: Arc<Polled<Attributing>>,
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
pub(super) async fn produce_acks1(
    settings: Arc<CanarySettings>,
    idle: Arc<conns::Idle>,
    claim: LeaderClaim,
    record: CanaryRecord,
) -> Result<Ack, ProduceFailure> {
    use crate::observe::wire::BrokerClient;
    let payload = record.encode().into_bytes();
    let send = |mut c: BrokerClient, opened: std::time::Instant| {
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
        let c = BrokerClient::connect(&claim.address, &settings.wire).await?;
        Ok::<_, crate::observe::wire::WireError>((c.client, std::time::Instant::now()))
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
                Err(e) if e.kind() != crate::model::round::FailureKind::Timeout => {}
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
            let name = crate::observe::wire::kafka_error_name(t.value.error_code);
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
