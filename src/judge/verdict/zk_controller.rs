//! ZooKeeper mode: one broker is also the cluster's controller (elected through ZooKeeper),
//! and while it does not work nothing changes the cluster's metadata: no partition leader is
//! elected, no ISR shrinks or grows, no topic is created, until ZooKeeper expires its session
//! (`zookeeper.session.timeout.ms`, 18 s by default) and another broker takes over. A broker
//! that is not healthy and is that controller says so in its verdict, so that its page tells
//! an operator why the rest of the cluster cannot heal (issue 25).
//!
//! In KRaft, Metadata's `controller_id` names a random live broker, not the active
//! controller, so this reads it only when the brokers are in ZooKeeper mode: none announces
//! DescribeQuorum, which every KRaft broker does.

use std::collections::BTreeMap;

use super::{BrokerState, BrokerVerdict, Rule, RuleHit};
use crate::model::round::{BrokerId, BrokerProbe};

/// The broker the answering brokers name as the controller, with how many name it, when
/// they are in ZooKeeper mode; the one most name (the lowest id on a tie).
pub fn zookeeper_controller(probes: &BTreeMap<BrokerId, BrokerProbe>) -> Option<(BrokerId, usize)> {
    let answered: Vec<&BrokerProbe> = probes.values().filter(|p| p.answered()).collect();
    // One KRaft answer is enough to say this is no ZooKeeper cluster (a migration from
    // ZooKeeper to KRaft has both for a while; its controller is a KRaft one).
    if answered.is_empty() || answered.iter().any(|p| p.speaks_quorum != Some(false)) {
        return None;
    }
    let mut votes: BTreeMap<BrokerId, usize> = BTreeMap::new();
    for p in &answered {
        if let Some(id) = p.metadata_view().and_then(|m| m.controller_id) {
            *votes.entry(id).or_default() += 1;
        }
    }
    votes
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
}

/// Adds to the verdict of the controller broker, when it is not healthy, that it is the
/// controller: a hit at the verdict's own state, so the state does not change.
pub fn name_zookeeper_controller(
    verdicts: &mut [BrokerVerdict],
    probes: &BTreeMap<BrokerId, BrokerProbe>,
) {
    let Some((id, named_by)) = zookeeper_controller(probes) else {
        return;
    };
    let Some(v) = verdicts.iter_mut().find(|v| v.broker == id) else {
        return;
    };
    if matches!(v.state, BrokerState::Healthy | BrokerState::Unknown)
        || v.hits.iter().any(|h| h.rule == Rule::ZookeeperController)
    {
        return;
    }
    v.hits.push(RuleHit {
        rule: Rule::ZookeeperController,
        state: v.state,
        detail: format!(
            "it is the cluster's controller (ZooKeeper mode; {named_by} broker(s) name it): while it does not work no partition leader is elected, no ISR changes and no topic is created, until ZooKeeper expires its session and another broker takes over"
        ),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::round::{BrokerEndpoint, MetadataView};
    use std::time::Duration;

    fn probe(
        id: BrokerId,
        speaks_quorum: Option<bool>,
        controller: Option<BrokerId>,
    ) -> BrokerProbe {
        BrokerProbe {
            endpoint: BrokerEndpoint {
                id,
                host: format!("10.0.0.{id}"),
                port: 9092,
                rack: None,
            },
            connect: Ok(Duration::from_millis(1)),
            api_versions: Some(Ok(Duration::from_millis(1))),
            metadata: Some(Ok((
                MetadataView {
                    controller_id: controller,
                    ..MetadataView::default()
                },
                Duration::from_millis(2),
            ))),
            description: None,
            certificate: None,
            log_dirs: None,
            speaks_quorum,
        }
    }

    fn silent(id: BrokerId) -> BrokerProbe {
        BrokerProbe {
            api_versions: Some(Err(crate::model::round::ProbeFailure {
                kind: crate::model::round::FailureKind::Timeout,
                detail: "no answer".into(),
                after: Duration::from_secs(1),
            })),
            metadata: None,
            speaks_quorum: None,
            ..probe(id, None, None)
        }
    }

    fn verdict(id: BrokerId, state: BrokerState) -> BrokerVerdict {
        BrokerVerdict {
            broker: id,
            address: String::new(),
            state,
            registration: super::super::Registration::Registered,
            answered: state == BrokerState::Healthy,
            hits: if state == BrokerState::Healthy {
                Vec::new()
            } else {
                vec![RuleHit {
                    rule: Rule::NoAnswer,
                    state,
                    detail: "accepts connections and answers nothing".into(),
                }]
            },
            observed_at: None,
            held_since: None,
            page_after: None,
        }
    }

    fn probes(list: Vec<BrokerProbe>) -> BTreeMap<BrokerId, BrokerProbe> {
        list.into_iter().map(|p| (p.endpoint.id, p)).collect()
    }

    #[test]
    fn a_frozen_zookeeper_controller_is_named_as_the_controller() {
        // Broker 2 is frozen; brokers 1 and 3 still name it the controller.
        let p = probes(vec![
            probe(1, Some(false), Some(2)),
            silent(2),
            probe(3, Some(false), Some(2)),
        ]);
        assert_eq!(zookeeper_controller(&p), Some((2, 2)));
        let mut v = vec![
            verdict(1, BrokerState::Healthy),
            verdict(2, BrokerState::Zombie),
            verdict(3, BrokerState::Healthy),
        ];
        name_zookeeper_controller(&mut v, &p);
        assert_eq!(v[1].state, BrokerState::Zombie);
        assert_eq!(v[1].hits.len(), 2);
        assert_eq!(v[1].hits[1].rule, Rule::ZookeeperController);
        assert_eq!(v[1].hits[1].state, BrokerState::Zombie);
        assert!(v[1].hits[1].detail.contains("2 broker(s) name it"));
        assert!(v[0].hits.is_empty() && v[2].hits.is_empty());
        // Made again (a re-evaluation of the same verdicts): said once.
        name_zookeeper_controller(&mut v, &p);
        assert_eq!(v[1].hits.len(), 2);
    }

    #[test]
    fn kraft_brokers_name_a_random_broker_and_that_means_nothing() {
        let p = probes(vec![
            probe(1, Some(true), Some(2)),
            silent(2),
            probe(3, Some(true), Some(2)),
        ]);
        assert_eq!(zookeeper_controller(&p), None);
        // A migration, ZooKeeper and KRaft brokers together: not ZooKeeper mode.
        let p = probes(vec![
            probe(1, Some(false), Some(2)),
            probe(3, Some(true), Some(2)),
        ]);
        assert_eq!(zookeeper_controller(&p), None);
        let mut v = vec![verdict(2, BrokerState::Zombie)];
        name_zookeeper_controller(&mut v, &p);
        assert_eq!(v[0].hits.len(), 1);
    }

    #[test]
    fn a_healthy_controller_or_one_nobody_answers_for_is_not_named() {
        let p = probes(vec![
            probe(1, Some(false), Some(1)),
            probe(2, Some(false), Some(1)),
        ]);
        let mut v = vec![
            verdict(1, BrokerState::Healthy),
            verdict(2, BrokerState::Degraded),
        ];
        name_zookeeper_controller(&mut v, &p);
        assert!(v
            .iter()
            .all(|v| v.hits.iter().all(|h| h.rule != Rule::ZookeeperController)));
        assert_eq!(
            zookeeper_controller(&probes(vec![silent(1), silent(2)])),
            None
        );
    }

    #[test]
    fn after_zookeeper_moves_the_controller_the_majority_names_it() {
        // Broker 1 already saw the new controller 3; broker 3 too; broker 2 is behind.
        let p = probes(vec![
            probe(1, Some(false), Some(3)),
            probe(2, Some(false), Some(2)),
            probe(3, Some(false), Some(3)),
        ]);
        assert_eq!(zookeeper_controller(&p), Some((3, 2)));
    }
}
