use super::*;
use crate::judge::verdict::Registration;
use crate::model::coordinators::ShardProbe;
use std::collections::BTreeMap;
use std::time::UNIX_EPOCH;

fn t(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000) + Duration::from_millis(ms)
}

fn verdict(id: BrokerId) -> BrokerVerdict {
    BrokerVerdict {
        broker: id,
        address: format!("127.0.0.1{id}:9092"),
        state: BrokerState::Healthy,
        registration: Registration::Registered,
        answered: true,
        hits: Vec::new(),
        observed_at: None,
        held_since: None,
        page_after: None,
    }
}

fn look(id: BrokerId) -> CoordinatorLook {
    CoordinatorLook {
        broker: id,
        address: format!("127.0.0.1{id}:9092"),
        shards: vec![1, 4, 7],
        last: ShardProbe::Answered {
            latency: Duration::from_millis(3),
        },
        control_latency: Some(Duration::from_millis(2)),
        unanswered_in_a_row: 0,
        unanswered_since: None,
        errors: Vec::new(),
    }
}

fn observation(looks: Vec<CoordinatorLook>) -> CoordinatorObservation {
    CoordinatorObservation {
        at: t(0),
        offsets_partitions: 50,
        brokers: looks
            .into_iter()
            .map(|l| (l.broker, l))
            .collect::<BTreeMap<_, _>>(),
        timeout: Duration::from_secs(1),
        blind: None,
        transactions: None,
    }
}

fn judged(looks: Vec<CoordinatorLook>, now: SystemTime) -> Vec<BrokerVerdict> {
    let mut vs = vec![verdict(1), verdict(2), verdict(3)];
    apply(
        &mut vs,
        Some(&observation(looks)),
        &CoordinatorRules::default(),
        now,
    );
    vs
}

#[test]
fn answering_coordinators_leave_their_brokers_healthy() {
    let vs = judged(vec![look(1), look(2), look(3)], t(10_000));
    assert!(vs
        .iter()
        .all(|v| v.state == BrokerState::Healthy && v.hits.is_empty()));
}

#[test]
fn one_unanswered_probe_is_not_evidence_two_in_a_row_are_a_zombie_by_name() {
    let mut stuck = look(2);
    stuck.last = ShardProbe::Unanswered;
    stuck.unanswered_in_a_row = 1;
    stuck.unanswered_since = Some(t(1_000));
    let vs = judged(vec![look(1), stuck.clone(), look(3)], t(2_000));
    assert_eq!(vs[1].state, BrokerState::Healthy);

    stuck.unanswered_in_a_row = 2;
    let vs = judged(vec![look(1), stuck, look(3)], t(3_000));
    assert_eq!(vs[1].state, BrokerState::Zombie);
    assert_eq!(vs[1].hits[0].rule, Rule::GroupCoordinatorStalled);
    assert_eq!(vs[1].held_since, Some(t(1_000)));
    let d = &vs[1].hits[0].detail;
    assert!(
        d.contains("partitions 1, 4, 7") && d.contains("2 probes") && d.contains("2 ms"),
        "{d}"
    );
    assert_eq!(vs[0].state, BrokerState::Healthy);
    assert_eq!(vs[2].state, BrokerState::Healthy);
}

#[test]
fn a_coordinator_error_counts_only_after_its_grace() {
    let mut loading = look(3);
    loading.errors = vec![
        ShardError {
            shard: 4,
            code: 14,
            since: t(0),
        },
        ShardError {
            shard: 7,
            code: 15,
            since: t(30_000),
        },
    ];
    // 59 s of COORDINATOR_LOAD_IN_PROGRESS: a shard loading after a leadership change.
    let vs = judged(vec![loading.clone()], t(59_000));
    assert_eq!(vs[2].state, BrokerState::Healthy);
    let vs = judged(vec![loading], t(61_000));
    assert_eq!(vs[2].state, BrokerState::Zombie);
    assert_eq!(vs[2].hits[0].rule, Rule::GroupCoordinatorFailing);
    let d = &vs[2].hits[0].detail;
    assert!(
        d.contains("COORDINATOR_LOAD_IN_PROGRESS for __consumer_offsets partitions 4"),
        "{d}"
    );
    assert!(!d.contains("partitions 7"), "{d}");
}

#[test]
fn hits_of_an_earlier_look_are_replaced_not_kept() {
    let mut stuck = look(2);
    stuck.unanswered_in_a_row = 3;
    stuck.unanswered_since = Some(t(0));
    let mut vs = vec![verdict(1), verdict(2)];
    let rules = CoordinatorRules::default();
    apply(&mut vs, Some(&observation(vec![stuck])), &rules, t(3_000));
    assert_eq!(vs[1].state, BrokerState::Zombie);
    apply(&mut vs, Some(&observation(vec![look(2)])), &rules, t(4_000));
    assert_eq!(vs[1].state, BrokerState::Healthy);
    assert!(vs[1].hits.is_empty());
}

#[test]
fn a_worse_state_keeps_its_own_timing() {
    let mut down = verdict(2);
    down.state = BrokerState::Down;
    down.hits.push(RuleHit {
        rule: Rule::PortClosed,
        state: BrokerState::Down,
        detail: String::new(),
    });
    down.held_since = Some(t(500));
    let mut stuck = look(2);
    stuck.unanswered_in_a_row = 2;
    stuck.unanswered_since = Some(t(0));
    let mut vs = vec![down];
    apply(
        &mut vs,
        Some(&observation(vec![stuck])),
        &CoordinatorRules::default(),
        t(3_000),
    );
    assert_eq!(vs[0].state, BrokerState::Down);
    assert_eq!(vs[0].hits[0].rule, Rule::PortClosed);
    assert_eq!(vs[0].held_since, Some(t(500)));
}

/// Two coordinator problems of one state: the broker is held since the earlier. (The last
/// hit's start won, so a stall that began first was dated from the errors that came after.)
#[test]
fn two_coordinator_problems_date_the_broker_from_the_first() {
    let mut both = look(2);
    both.last = ShardProbe::Unanswered;
    both.unanswered_in_a_row = 40;
    both.unanswered_since = Some(t(0));
    both.errors = vec![ShardError {
        shard: 4,
        code: 15,
        since: t(5_000),
    }];
    let vs = judged(vec![look(1), both, look(3)], t(70_000));
    assert_eq!(vs[1].state, BrokerState::Zombie);
    assert_eq!(vs[1].hits.len(), 2, "{:?}", vs[1].hits);
    assert_eq!(vs[1].held_since, Some(t(0)));
}
