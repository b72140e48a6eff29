//! What the canary takes from a metadata round: brokers, the canary topic's partitions with
//! their leader epochs, the leaderships brokers claim, and where to reach them.

use std::collections::BTreeMap;

use serde::Serialize;

use super::layout::{BrokerInfo, PartitionState};
use crate::model::round::BrokerId;

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

/// The canary's picture of the cluster from one round of direct probes: the registered
/// brokers (as the other brokers list them), the canary topic's partitions from the
/// round's merged view (newest leader epochs; merged once per round, see
/// `report::newest_view`) and the leaderships each broker claims.
pub fn view_from(
    obs: &crate::model::round::RoundObservation,
    merged: &crate::observe::cluster_view::ClusterView,
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
