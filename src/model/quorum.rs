//! What the watchdog saw of a KRaft cluster's control plane, as plain data: the metadata
//! log's Raft quorum as its leader describes it (DescribeQuorum, API 55), each controller
//! asked directly, and whether the log's high watermark keeps moving. The observe stage
//! fills it in (`observe::quorum`); the verdicts read it with their own `now`.
//!
//! The active controller appends a no-op record every 500 ms on an idle cluster
//! (`metadata.max.idle.interval.ms`, KIP-835), so a high watermark that stops under a
//! stable leader is a frozen or wedged controller, never a quiet one.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::round::{BrokerId, ProbeFailure};

/// A KRaft node id: a controller's or a broker's (`node.id`).
pub type NodeId = BrokerId;

/// One replica of the metadata log, as the quorum's leader describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplicaProgress {
    pub id: NodeId,
    /// -1 when the leader does not know it yet.
    pub log_end_offset: i64,
    /// How long before the answer the leader last had a fetch from it, on the leader's own
    /// clock (its own entry carries the answer's time), so no clock of the watchdog's is
    /// compared with Kafka's. `None`: DescribeQuorum below v1, or never fetched.
    pub last_fetch_ago: Option<Duration>,
    /// How long before the answer it was last caught up with the leader's log end.
    pub last_caught_up_ago: Option<Duration>,
}

/// The quorum as its leader describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuorumDescription {
    pub leader: NodeId,
    pub epoch: i32,
    pub high_watermark: i64,
    /// The voters (controllers), the leader among them.
    pub voters: Vec<ReplicaProgress>,
    /// Replicas that fetch without voting: the brokers.
    pub observers: Vec<ReplicaProgress>,
    /// Controller endpoints (`host:port`) by node id, where the answer has them (v2).
    pub endpoints: BTreeMap<NodeId, String>,
    /// The negotiated DescribeQuorum version: fetch times need v1 (Kafka 3.3+).
    pub version: i16,
}

impl QuorumDescription {
    pub fn voter(&self, id: NodeId) -> Option<&ReplicaProgress> {
        self.voters.iter().find(|v| v.id == id)
    }

    pub fn observer(&self, id: NodeId) -> Option<&ReplicaProgress> {
        self.observers.iter().find(|v| v.id == id)
    }
}

/// One answer to DescribeQuorum: only the leader describes the quorum; a controller that
/// does not lead says so (NOT_LEADER_OR_FOLLOWER), which still proves it answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "role")]
pub enum QuorumAnswer {
    Leader(QuorumDescription),
    NotLeader { error_code: i16 },
}

/// What one controller, asked directly on its own listener, did in one look.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControllerLook {
    /// As configured (`controllers:`) or learned.
    pub address: String,
    /// Its node id, when known: configured as `id@host:port`, learned from DescribeCluster
    /// on a controller (KIP-919, Kafka 3.7+) or from the quorum's endpoints (v2), or it
    /// answered as the leader.
    pub id: Option<NodeId>,
    /// How it answered, or why it did not.
    pub outcome: Result<ControllerRole, ProbeFailure>,
    /// The TCP connection was accepted this look (also when nothing answered after).
    pub accepted: bool,
    /// Since when it has not answered: the start of the first look of the current streak
    /// of failures; `None` while it answers.
    #[serde(skip)]
    pub failing_since: Option<SystemTime>,
    /// It accepted a connection in the current streak of failures (a frozen process keeps
    /// accepting until its queue is full, then connects time out: still the same process).
    pub accepted_in_streak: bool,
}

/// What a controller's answer said of its place in the quorum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ControllerRole {
    Leader,
    Follower,
}

/// One look at the quorum: the controllers asked directly, a broker asked (it forwards to
/// the active controller), the leader's description, and the high watermark's progress
/// across looks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuorumObservation {
    /// When the look started.
    #[serde(skip)]
    pub at: SystemTime,
    pub controllers: Vec<ControllerLook>,
    /// The broker asked (address) and how that went; `None` when no broker was asked.
    #[serde(serialize_with = "serialize_via")]
    pub via_broker: Option<(String, Result<(), ProbeFailure>)>,
    /// The leader's description, from this look's answers; `None` when no leader answered.
    pub description: Option<QuorumDescription>,
    /// The last leader any look saw, and when: when nothing answers now, this is the
    /// controller that led when it stopped.
    #[serde(skip)]
    pub last_leader: Option<(NodeId, i32, SystemTime)>,
    /// Since when the high watermark has not moved under the current leader and epoch;
    /// `None` while it moves (or before two looks at one leader compared it).
    #[serde(skip)]
    pub high_watermark_still_since: Option<SystemTime>,
    /// When the quorum last had a leader that answered with a moving high watermark (or
    /// the first look at a leader): how long the control plane has been out.
    #[serde(skip)]
    pub last_progress_at: Option<SystemTime>,
}

impl QuorumObservation {
    /// A look that found nothing yet.
    pub fn empty(at: SystemTime) -> Self {
        QuorumObservation {
            at,
            controllers: Vec::new(),
            via_broker: None,
            description: None,
            last_leader: None,
            high_watermark_still_since: None,
            last_progress_at: None,
        }
    }

    /// The controller looked at directly with this id.
    pub fn controller(&self, id: NodeId) -> Option<&ControllerLook> {
        self.controllers.iter().find(|c| c.id == Some(id))
    }
}

fn serialize_via<S: serde::Serializer>(
    v: &Option<(String, Result<(), ProbeFailure>)>,
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Out<'a> {
        address: &'a str,
        ok: bool,
        failure: Option<&'a ProbeFailure>,
    }
    match v {
        None => s.serialize_none(),
        Some((address, r)) => Out {
            address,
            ok: r.is_ok(),
            failure: r.as_ref().err(),
        }
        .serialize(s),
    }
}
