//! The round: what the canary saw since the last metadata round, per partition, and
//! the layout, assignment and targets brought up to date with the newest view.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::auth::CanaryContext;
use super::books::lock;
use super::layout::{self, PartitionState};
use super::produce::ProduceFailure;
use super::record::Acks;
use super::view::{Acks1Probe, CanaryView, LeaderClaim, PartitionStateWithEpoch};
use super::writer::Target;
use super::Canary;
use crate::model::round::BrokerId;
use crate::model::words::AUTHORIZATION;

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
    /// The canary could not start its clients, or could not tell whether the topic is its own.
    Broken(String),
    /// The topic exists and is not the watchdog's (see `ownership`): nothing is written to
    /// it and its layout is left alone.
    NotOurs(String),
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

impl CanaryRound {
    /// A round on a ready `topic` that saw nothing but `lost`, to build on in tests.
    pub fn with_losses(topic: &str, lost: Vec<LossEvent>) -> Self {
        CanaryRound {
            topic: topic.to_string(),
            status: TopicStatus::Ready,
            partitions: Vec::new(),
            layout: Vec::new(),
            not_leading: Vec::new(),
            lost,
            duplicated: Vec::new(),
            windows_closed: Vec::new(),
            acks1: Vec::new(),
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

pub(super) fn unix_seconds<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    s.serialize_f64(secs)
}

impl Canary {
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
        if let Err(status) = self.ready_clients().await {
            out.status = status;
            return out;
        }
        if let Some(status) = self.check_ownership(view).await {
            // Nothing written, read or changed: the writer gets an empty plan.
            out.status = status;
            self.publish_plan(&[], &[]);
            return out;
        }
        self.layout.observe(&view.brokers, now);
        if let Some(status) = self.manage_layout(view, &mut out.layout, now).await {
            out.status = status;
        }
        let Some(parts) = &view.partitions else {
            if out.status == TopicStatus::Ready {
                out.status = self.missing();
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
        self.report_books(parts, &mut out);
        if let Some(status) = self.write_refused(&out) {
            out.status = status;
        }
        out
    }

    /// Starts the clients when there are none yet or their credentials changed, else
    /// renews their tokens; `Err` with the topic's status when they cannot start.
    async fn ready_clients(&mut self) -> Result<(), TopicStatus> {
        self.renew_credentials();
        let context = match &self.clients {
            Some(c) => c.context.clone(),
            None => CanaryContext::new(&self.settings.wire),
        };
        let token = context.token(self.token_deadline()).await;
        let Some(c) = &self.clients else {
            // Without a token no client can authenticate: say so once, rather than create
            // and drop three clients every round.
            let token = token.map_err(|e| {
                TopicStatus::Broken(format!("cannot get a token for the canary's clients: {e}"))
            })?;
            self.clients = Some(self.start_clients(context, token.as_ref())?);
            return Ok(());
        };
        // Every client's token is renewed here (see auth::CanaryContext::prime); a failure
        // shows in the requests that need it, once the one they have expires.
        if let Err(e) = token.and_then(|t| {
            super::prime_all(&c.context, &c.admin, &c.producer, &c.consumer, t.as_ref())
        }) {
            tracing::warn!(cluster = %self.settings.cluster, "canary token: {e}");
        }
        Ok(())
    }

    /// How long a round waits for the clients' token: as long as a broker gets to answer
    /// the probes.
    fn token_deadline(&self) -> std::time::Duration {
        self.settings.wire.connect_timeout + self.settings.wire.request_timeout
    }

    /// The status of a topic the view does not list.
    fn missing(&self) -> TopicStatus {
        TopicStatus::Missing(format!(
            "topic {} does not exist{}",
            self.settings.topic,
            if self.settings.manage_topic {
                " yet"
            } else {
                " and manage_topic is off"
            }
        ))
    }

    /// What the writes and reads did since the last round, from the books, into `out`: the
    /// books learn the leaders, expire overdue records, and forget partitions gone.
    fn report_books(&self, parts: &[PartitionStateWithEpoch], out: &mut CanaryRound) {
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
        books.report(parts, end, out);
        books.retain_partitions(|p| existing.contains(&p), &self.shared);
    }

    /// `NotPermitted` when a write of this round was refused for lack of rights and the
    /// topic is otherwise ready.
    fn write_refused(&self, out: &CanaryRound) -> Option<TopicStatus> {
        let f = out
            .partitions
            .iter()
            .find_map(|p| p.produce_error.as_ref().filter(|f| f.kind == AUTHORIZATION))
            .filter(|_| out.status == TopicStatus::Ready)?;
        // A refused write says what the watchdog may do, not how the partition is.
        Some(TopicStatus::NotPermitted(format!(
            "the watchdog may not write to {} ({}); grant it Write, Read and Describe on the topic and Read on its consumer group",
            self.settings.topic, f.detail
        )))
    }

    /// Decides, once each time the topic appears, whether it is the watchdog's; `Some`
    /// with the status to report when the canary must leave it alone this round.
    async fn check_ownership(&mut self, view: &CanaryView) -> Option<TopicStatus> {
        use super::ownership::{decide, look, Ownership, DEFAULT_TOPIC};
        let Some(parts) = &view.partitions else {
            self.ownership = None;
            return None;
        };
        let topic = self.settings.topic.clone();
        if self.ownership.is_none() {
            let decided = if topic == DEFAULT_TOPIC {
                Ok(decide(&topic, &[], None))
            } else {
                let clients = self.clients.as_ref()?;
                let (client, context) = (self.settings.client.clone(), clients.context.clone());
                let partitions: Vec<i32> = parts.iter().map(|p| p.state.partition).collect();
                let timeout = self.settings.produce_timeout;
                let t = topic.clone();
                let looked = match context.token(self.token_deadline()).await {
                    Ok(token) => {
                        tokio::task::spawn_blocking(move || {
                            look(&client, context, token.as_ref(), &t, &partitions, timeout)
                        })
                        .await
                    }
                    Err(e) => Ok(Err(rdkafka::error::KafkaError::ClientCreation(e))),
                };
                match looked {
                    Ok(Ok(looks)) => {
                        // The retention matters only for a topic retention emptied.
                        let emptied = looks.iter().all(|p| p.low == p.high)
                            && looks.iter().any(|p| p.high > 0);
                        let retention = if emptied {
                            self.retention_ms(view).await
                        } else {
                            None
                        };
                        Ok(decide(&topic, &looks, retention.as_deref()))
                    }
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(e) => Err(e.to_string()),
                }
            };
            match decided {
                Ok(o) => {
                    match &o {
                        Ownership::Ours(why) => tracing::info!(cluster = %self.settings.cluster, %topic, why = %why, "the canary topic is the watchdog's"),
                        Ownership::NotOurs(why) => tracing::error!(cluster = %self.settings.cluster, %topic, "{why}"),
                    }
                    self.ownership = Some(o);
                }
                Err(e) => {
                    return Some(TopicStatus::Broken(format!(
                        "cannot tell whether {topic} is the watchdog's (its newest records are read to know): {e}"
                    )))
                }
            }
        }
        match &self.ownership {
            Some(Ownership::NotOurs(why)) => Some(TopicStatus::NotOurs(why.clone())),
            _ => None,
        }
    }

    /// The topic's `retention.ms`, asked of any broker; None when it cannot be read.
    async fn retention_ms(&self, view: &CanaryView) -> Option<String> {
        let mut c = super::admin::direct(&self.settings, view).await.ok()?;
        let answer = c
            .describe_topic_configs(
                std::slice::from_ref(&self.settings.topic),
                &["retention.ms"],
            )
            .await
            .ok()?;
        answer
            .value
            .get(&self.settings.topic)?
            .as_ref()
            .ok()?
            .get("retention.ms")
            .cloned()
    }

    /// What the writer writes to from the next tick on: every partition with a leader
    /// (acks=all), and every claimed leadership (acks=1, straight to the claimant).
    pub(super) fn publish_plan(&self, parts: &[PartitionStateWithEpoch], claims: &[LeaderClaim]) {
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
}
