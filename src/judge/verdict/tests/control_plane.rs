//! Brokers and the control plane: a broker whose Raft fetch keeps up while its answers
//! miss what the quorum committed is named (`stale_metadata`); while the control plane is
//! out, brokers are spared the rules that read registration or metadata staleness.

use std::sync::Arc;

use super::*;
use crate::model::round::{QuorumDescription, QuorumObservation, ReplicaProgress};

/// The quorum's leader describes broker `id` as an observer that fetched `fetch_ms` ago.
fn quorum_with_observer(id: i32, fetch_ms: u64) -> Arc<QuorumObservation> {
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
    let progress = |id, ms| ReplicaProgress {
        id,
        log_end_offset: 500,
        last_fetch_ago: Some(Duration::from_millis(ms)),
        last_caught_up_ago: Some(Duration::from_millis(ms)),
    };
    Arc::new(QuorumObservation {
        description: Some(QuorumDescription {
            leader: 0,
            epoch: 3,
            high_watermark: 500,
            voters: vec![progress(0, 0)],
            observers: vec![progress(id, fetch_ms), progress(1, 100), progress(3, 100)],
            endpoints: BTreeMap::new(),
            version: 2,
        }),
        ..QuorumObservation::empty(at)
    })
}

/// Broker 2 applies nothing: partition 0 moved to it (epoch 2), and its own answer still
/// says broker 1 leads at epoch 1.
fn broker_2_behind() -> World {
    let mut w = World::healthy();
    let old = w.metadata();
    w.parts[0] = (2, 2, vec![1, 2, 3], vec![1, 2, 3]);
    w.refresh();
    if let Some(Some(Ok((m, _)))) = w.probes.get_mut(&2).map(|p| p.metadata.as_mut()) {
        *m = old;
    }
    w
}

fn rules(v: &BrokerVerdict) -> Vec<&'static str> {
    v.hits.iter().map(|h| h.rule.name()).collect()
}

#[test]
fn a_broker_that_fetches_the_metadata_log_and_applies_nothing_is_a_zombie() {
    let mut w = broker_2_behind();
    w.quorum = Some(quorum_with_observer(2, 200));
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Zombie, "{:?}", v[&2].hits);
    assert_eq!(v[&2].hits[0].rule, Rule::StaleMetadata);
    let detail = &v[&2].hits[0].detail;
    assert!(
        detail.contains("1 leadership change(s) the quorum committed, 1 of them onto itself: t-0 (leader 2 at epoch 2; it knows epoch 1)"),
        "{detail}"
    );
    assert!(detail.contains("fetched 0.2 s"), "{detail}");
    assert!(
        !rules(&v[&2]).contains(&"metadata_disagreement"),
        "the same fact, said once: {:?}",
        rules(&v[&2])
    );
    assert_eq!(v[&1].state, BrokerState::Healthy);
    assert_eq!(v[&3].state, BrokerState::Healthy);
}

/// Without the quorum's word, or with a Raft fetch that does not keep up (a broker cut off
/// from the controllers), its cache is only behind: the old rule, degraded.
#[test]
fn without_a_raft_fetch_that_keeps_up_a_stale_cache_is_only_a_disagreement() {
    let w = broker_2_behind();
    let v = w.judge();
    assert_eq!(rules(&v[&2]), ["metadata_disagreement"]);
    assert_eq!(v[&2].state, BrokerState::Degraded);
    let mut w = broker_2_behind();
    w.quorum = Some(quorum_with_observer(2, 8000));
    let v = w.judge();
    assert_eq!(rules(&v[&2]), ["metadata_disagreement"]);
    // A broker the quorum's leader does not list as an observer at all.
    let mut w = broker_2_behind();
    w.quorum = Some(quorum_with_observer(4, 100));
    assert_eq!(rules(&w.judge()[&2]), ["metadata_disagreement"]);
}

#[test]
fn while_the_control_plane_settles_registration_and_staleness_rules_are_spared() {
    let mut w = broker_2_behind();
    w.quorum = Some(quorum_with_observer(2, 200));
    let mut verdicts: Vec<BrokerVerdict> = w.judge().into_values().collect();
    // A broker fenced by a controller coming back, and one the round could not reach:
    // the first is spared, the second keeps its verdict.
    verdicts[0].hits.insert(
        0,
        RuleHit {
            rule: Rule::FencedButServing,
            state: BrokerState::Zombie,
            detail: "fenced".into(),
        },
    );
    verdicts[0].state = BrokerState::Zombie;
    verdicts[2].hits.insert(
        0,
        RuleHit {
            rule: Rule::PortClosed,
            state: BrokerState::Down,
            detail: "refused".into(),
        },
    );
    verdicts[2].state = BrokerState::Down;
    spare_while_settling(&mut verdicts);
    let states: Vec<(i32, BrokerState)> = verdicts.iter().map(|v| (v.broker, v.state)).collect();
    assert_eq!(
        states,
        [
            (1, BrokerState::Healthy),
            (2, BrokerState::Healthy),
            (3, BrokerState::Down)
        ]
    );
}
