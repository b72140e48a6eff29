//! The topic's layout, managed: creation, partitions added, reassignments and elections so
//! every broker leads one partition, over a direct connection to any broker.

use std::collections::BTreeMap;
use std::time::SystemTime;

use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::types::RDKafkaErrorCode;

use super::auth::CanaryContext;
use super::layout::{self, PartitionState, Plan};
use super::round::TopicStatus;
use super::view::CanaryView;
use super::{Canary, CanarySettings};
use crate::model::round::BrokerId;

/// A direct connection to the first broker that answers. Admin requests are forwarded to
/// the controller by any broker in KRaft.
pub(super) async fn direct(
    settings: &CanarySettings,
    view: &CanaryView,
) -> Result<crate::observe::wire::BrokerClient, crate::observe::wire::WireError> {
    let mut last = None;
    for address in &view.addresses {
        match crate::observe::wire::BrokerClient::connect(address, &settings.wire).await {
            Ok(c) => return Ok(c.client),
            Err(e) => last = Some(e),
        }
    }
    Err(
        last.unwrap_or(crate::observe::wire::WireError::ConnectionClosed {
            phase: crate::observe::wire::Phase::Connect,
            detail: "no broker address known".into(),
        }),
    )
}

/// Notes what a reassignment or election did; a refusal for lack of permission becomes the
/// topic's status.
pub(super) fn layout_outcome(
    topic: &str,
    answer: Result<Vec<crate::observe::wire::PartitionOutcome>, crate::observe::wire::WireError>,
    notes: &mut Vec<String>,
) -> Option<TopicStatus> {
    match answer {
        Ok(outcomes) => {
            for (_, partition, code, message) in outcomes {
                // 84 ELECTION_NOT_NEEDED: the preferred leader leads already.
                if code != 0 && code != 84 {
                    notes.push(format!(
                        "{topic}-{partition}: {} {}",
                        crate::observe::wire::kafka_error_name(code),
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

impl Canary {
    /// Creates, extends or reassigns the topic when the planner says so.
    pub(super) async fn manage_layout(
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
        let admin = &clients.admin;
        // Whether the request failed as a whole: then it changed nothing.
        let (outcome, failed) = match plan {
            Plan::Nothing => return None,
            Plan::Waiting { why } => {
                notes.push(why);
                return None;
            }
            Plan::Create {
                assignment,
                min_insync_replicas,
            } => {
                let result = create_topic(
                    admin,
                    &opts,
                    &topic,
                    &assignment,
                    min_insync_replicas,
                    notes,
                )
                .await;
                let failed = result.is_err();
                (admin_outcome(&topic, result, notes), failed)
            }
            Plan::AddPartitions { assignment } => {
                let existing = view.partitions.as_ref().map(Vec::len).unwrap_or(0);
                let result =
                    add_partitions(admin, &opts, &topic, existing, &assignment, notes).await;
                let failed = result.is_err();
                (admin_outcome(&topic, result, notes), failed)
            }
            Plan::Reassign { moves } => {
                let answer = reassign(&self.settings, view, &topic, &moves, notes).await;
                let failed = answer.is_err();
                (layout_outcome(&topic, answer, notes), failed)
            }
            Plan::ElectPreferred { partitions } => {
                let answer =
                    elect_preferred(&self.settings, view, &topic, &partitions, notes).await;
                let failed = answer.is_err();
                (layout_outcome(&topic, answer, notes), failed)
            }
        };
        if failed {
            self.layout.failed(now);
        } else {
            self.layout.changed(now);
        }
        outcome
    }
}

/// Creates the canary topic with the planned assignment and the canary's topic configs.
async fn create_topic(
    admin: &AdminClient<CanaryContext>,
    opts: &AdminOptions,
    topic: &str,
    assignment: &[Vec<i32>],
    min_insync_replicas: usize,
    notes: &mut Vec<String>,
) -> AdminResults {
    let refs: Vec<&[i32]> = assignment.iter().map(Vec::as_slice).collect();
    let min_isr = min_insync_replicas.to_string();
    let new = NewTopic::new(
        topic,
        assignment.len() as i32,
        TopicReplication::Variable(&refs),
    )
    .set("min.insync.replicas", &min_isr)
    // Canary records matter for minutes; keep the topic small.
    .set("retention.ms", super::ownership::CANARY_RETENTION_MS)
    .set("segment.ms", "600000")
    .set("cleanup.policy", "delete");
    notes.push(format!(
        "creating {topic}: {} partitions, replicas {assignment:?}, min.insync.replicas {min_isr}",
        assignment.len()
    ));
    admin
        .create_topics([&new], opts)
        .await
        .map(|r| r.into_iter().map(|x| x.map(|_| ())).collect::<Vec<_>>())
}

/// Appends the planned partitions after the `existing` ones.
async fn add_partitions(
    admin: &AdminClient<CanaryContext>,
    opts: &AdminOptions,
    topic: &str,
    existing: usize,
    assignment: &[Vec<i32>],
    notes: &mut Vec<String>,
) -> AdminResults {
    let refs: Vec<&[i32]> = assignment.iter().map(Vec::as_slice).collect();
    let new = NewPartitions::new(topic, existing + assignment.len()).assign(&refs);
    notes.push(format!("adding partitions to {topic}: {assignment:?}"));
    admin
        .create_partitions([&new], opts)
        .await
        .map(|r| r.into_iter().map(|x| x.map(|_| ())).collect::<Vec<_>>())
}

/// Asks for the planned replica lists, over a direct connection to any broker.
async fn reassign(
    settings: &CanarySettings,
    view: &CanaryView,
    topic: &str,
    moves: &BTreeMap<i32, Vec<BrokerId>>,
    notes: &mut Vec<String>,
) -> Result<Vec<crate::observe::wire::PartitionOutcome>, crate::observe::wire::WireError> {
    notes.push(format!("moving replicas of {topic}: {moves:?}"));
    let requested: Vec<(String, i32, Option<Vec<i32>>)> = moves
        .iter()
        .map(|(p, r)| (topic.to_string(), *p, Some(r.clone())))
        .collect();
    match direct(settings, view).await {
        Ok(mut c) => c
            .alter_partition_reassignments(&requested, settings.produce_timeout)
            .await
            .map(|t| t.value),
        Err(e) => Err(e),
    }
}

/// Asks for the preferred leaders of `partitions`, over a direct connection to any broker.
async fn elect_preferred(
    settings: &CanarySettings,
    view: &CanaryView,
    topic: &str,
    partitions: &[i32],
    notes: &mut Vec<String>,
) -> Result<Vec<crate::observe::wire::PartitionOutcome>, crate::observe::wire::WireError> {
    notes.push(format!(
        "electing the preferred leaders of {topic} partitions {partitions:?}"
    ));
    let requested: Vec<(String, i32)> =
        partitions.iter().map(|p| (topic.to_string(), *p)).collect();
    match direct(settings, view).await {
        Ok(mut c) => c
            .elect_leaders(true, &requested, settings.produce_timeout)
            .await
            .map(|t| t.value),
        Err(e) => Err(e),
    }
}

/// The admin client's answer to a topic change, per topic.
type AdminResults = rdkafka::error::KafkaResult<Vec<Result<(), (String, RDKafkaErrorCode)>>>;

/// What an admin change's answer means for the topic: a refusal of the watchdog's rights is
/// `NotPermitted`, another failure `Missing`; a topic that exists already is no failure.
fn admin_outcome(
    topic: &str,
    result: AdminResults,
    notes: &mut Vec<String>,
) -> Option<TopicStatus> {
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
