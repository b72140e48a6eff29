//! Canary failures charged to the broker that had them, and who is to blame when replication
//! fails (leader or follower).

use super::*;

// Issue 15 item 7: with retries off, librdkafka sends a write to the leader of its cached
// metadata; a failure there says nothing about the view's (new) leader.

#[test]
fn a_stale_client_cache_does_not_charge_the_views_new_leader() {
    let mut w = World::healthy();
    // Partition 0 moved from broker 1 to broker 2; the client still wrote to broker 1,
    // which answered NOT_LEADER, rightly.
    w.parts[0] = (2, 2, vec![1, 2, 3], vec![1, 2, 3]);
    w.refresh();
    w.canary_round(&[(0, "not_leader", Some(1))], &[]);
    let v = w.judge();
    for b in 1..=3 {
        assert_eq!(v[&b].state, BrokerState::Healthy, "{:?}", v[&b]);
    }
    // A transport failure to the old leader (the client's connection to it broke) is the
    // old leader's, not the new one's; it leads no canary partition, so it is no zombie.
    w.canary_round(&[(0, "transport", Some(1))], &[]);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
    assert_eq!(v[&1].state, BrokerState::Degraded, "{:?}", v[&1]);
    assert!(hit_of(&v[&1], "canary_writes_fail")
        .detail
        .contains("the view's leader is 2"));
    // The view's leader answering NOT_LEADER is its own fault: its cache is behind.
    w.canary_round(&[(0, "not_leader", Some(2))], &[]);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Degraded, "{:?}", v[&2]);
    assert!(hit_of(&v[&2], "canary_writes_fail")
        .detail
        .contains("1 of the 2 partition(s) it leads: partition 0: not_leader"));
    assert_eq!(rules(&v[&2]), vec!["canary_writes_fail"]);
}

/// Issue 14 item 2: broker 1 led partition 0 and was frozen for a few seconds between two
/// rounds; the writes sent to it then timed out, and by the next round Kafka had moved the
/// partition to broker 2, whose writes work. The outage is charged to broker 1, never to 2
/// or 3.
#[test]
fn a_leader_outage_between_two_rounds_is_charged_to_the_leader_that_had_it() {
    let mut w = World::healthy();
    w.parts[0] = (2, 2, vec![1, 2, 3], vec![2, 3]);
    w.refresh();
    w.canary_round(&[], &[]);
    let failed = |broker, received, kind: &'static str| crate::observe::canary::FailedWrites {
        broker,
        kind,
        count: 3,
        received,
        leader_appended: false,
        first_sent_at: SystemTime::UNIX_EPOCH,
        last_sent_at: SystemTime::UNIX_EPOCH + Duration::from_secs(2),
    };
    if let Some(c) = w.canary.as_mut() {
        c.partitions[0].failed_writes = vec![failed(1, true, "timeout")];
    }
    let v = w.judge();
    assert_eq!(v[&1].state, BrokerState::Degraded, "{:?}", v[&1]);
    assert!(hit_of(&v[&1], "canary_writes_fail")
        .detail
        .contains("partition 0: timeout x3 while it led it (the view's leader is now 2)"));
    for b in [2, 3] {
        assert!(
            !rules(&v[&b]).contains(&"canary_writes_fail"),
            "broker {b}: {:?}",
            v[&b]
        );
    }
    assert_eq!(w.charged(), [(0, vec![1])].into_iter().collect());
    // NOT_LEADER is right, a write the client never sent charges nobody, and a
    // replication failure is the links' to decide.
    for (received, kind) in [
        (true, "not_leader"),
        (false, "timeout"),
        (true, "not_enough_replicas"),
    ] {
        if let Some(c) = w.canary.as_mut() {
            c.partitions[0].failed_writes = vec![failed(1, received, kind)];
        }
        let v = w.judge();
        assert!(
            !rules(&v[&1]).contains(&"canary_writes_fail"),
            "{kind}: {:?}",
            v[&1]
        );
    }
}

#[test]
fn client_side_canary_errors_charge_nobody() {
    let mut w = World::healthy();
    // The local queue was full, or the write timed out before it reached any broker.
    w.canary_round(&[(0, "queue_full", None), (1, "timeout", None)], &[]);
    let v = w.judge();
    for b in 1..=3 {
        assert_eq!(v[&b].state, BrokerState::Healthy, "{:?}", v[&b]);
    }
    // A timeout at the broker that leads it is still that broker's.
    w.canary_round(&[(1, "timeout", Some(2))], &[]);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Zombie, "{:?}", v[&2]);
    assert!(hit_of(&v[&2], "canary_writes_fail")
        .detail
        .contains("partition 1: timeout"));
}

// Issue 14 item 4: a follower is charged only while its leader is healthy by every other
// evidence; otherwise the leader is the suspect.

/// Partition 0 led by 1 has lost both followers and its acks=all writes fail.
fn leader_1_without_followers(kind: &'static str) -> World {
    let mut w = World::healthy();
    w.parts[0] = (1, 1, vec![1, 2, 3], vec![1]);
    w.refresh();
    w.canary_round(&[(0, kind, Some(1))], &[(0, 1)]);
    w
}

fn assert_followers_spared(v: &BTreeMap<i32, BrokerVerdict>) {
    for b in [2, 3] {
        assert_eq!(v[&b].state, BrokerState::Healthy, "{:?}", v[&b]);
    }
}

#[test]
fn a_leader_that_lost_every_follower_is_the_suspect_not_its_followers() {
    // Followers 2 and 3 keep up with leaders 2 and 3 (partitions 1, 2 have full ISRs):
    // the common end of the broken links is leader 1.
    let w = leader_1_without_followers("not_enough_replicas");
    let v = w.judge();
    assert_followers_spared(&v);
    assert_eq!(v[&1].state, BrokerState::Degraded, "{:?}", v[&1]);
    let r = rules(&v[&1]);
    assert!(r.contains(&"followers_cannot_replicate"), "{r:?}");
    assert!(r.contains(&"canary_not_enough_replicas"), "{r:?}");
    assert!(hit_of(&v[&1], "canary_not_enough_replicas")
        .detail
        .contains("it leads it"));
    assert_eq!(w.suspects()[&0], vec![1]);
}

#[test]
fn a_silent_leader_is_the_suspect_and_its_followers_are_not_flagged() {
    let mut w = leader_1_without_followers("not_enough_replicas");
    w.silent(1);
    let v = w.judge();
    assert_followers_spared(&v);
    assert_eq!(v[&1].state, BrokerState::Zombie);
    assert_eq!(w.suspects()[&0], vec![1]);
}

#[test]
fn a_fenced_leader_is_the_suspect_even_when_one_follower_lags_elsewhere() {
    // Broker 3 is also missing from partition 1 (led by 2), which alone would make it the
    // broker in most broken links; but leader 1 is fenced.
    let mut w = World::healthy();
    w.parts[0] = (1, 1, vec![1, 2, 3], vec![1]);
    w.parts[1] = (2, 1, vec![2, 3, 1], vec![2, 1]);
    w.refresh();
    w.canary_round(&[(0, "not_enough_replicas", Some(1))], &[]);
    let fenced = ClusterDescription {
        cluster_id: "c".into(),
        controller_id: 0,
        brokers: vec![
            RegisteredBroker {
                endpoint: ep(1),
                fenced: true,
            },
            RegisteredBroker {
                endpoint: ep(2),
                fenced: false,
            },
            RegisteredBroker {
                endpoint: ep(3),
                fenced: false,
            },
        ],
        includes_fenced: true,
    };
    w.probes.get_mut(&2).unwrap().description = Some(Ok(fenced.clone()));
    w.probes.get_mut(&3).unwrap().description = Some(Ok(fenced));
    let v = w.judge();
    assert_eq!(v[&1].registration, Registration::Fenced);
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
    assert!(
        !rules(&v[&3]).contains(&"canary_not_enough_replicas"),
        "{:?}",
        v[&3]
    );
    assert!(hit_of(&v[&1], "canary_not_enough_replicas")
        .detail
        .contains("fenced"));
    assert_eq!(w.suspects()[&0], vec![1]);
}

#[test]
fn a_stale_or_lagging_leader_is_the_suspect_of_acks_all_timeouts() {
    // Leader 1 still takes acks=1 writes, acks=all times out waiting on 2 and 3: with a
    // healthy leader that is ambiguous between the two followers (nobody is named); with a
    // leader whose metadata is behind the cluster's, it is the leader.
    let mut w = World::healthy();
    w.canary_round(&[(0, "timeout", Some(1))], &[(0, 1)]);
    let v = w.judge();
    for b in 1..=3 {
        assert_eq!(v[&b].state, BrokerState::Healthy, "{:?}", v[&b]);
    }
    let old = w.metadata();
    w.parts[1] = (3, 2, vec![2, 3, 1], vec![2, 3, 1]);
    w.refresh();
    if let Some(Ok((m, _))) = &mut w.answering(1, 10).metadata {
        *m = old;
    }
    let v = w.judge();
    assert_followers_spared(&v);
    assert!(
        hit_of(&v[&1], "canary_not_enough_replicas")
            .detail
            .contains("metadata is behind"),
        "{:?}",
        v[&1]
    );
}

/// Follower 3's replication cut: partition 0 (leader 1, followers 2 and 3) held an acks=all
/// write until 3 was dropped from the ISR, and the write's timeout arrived with the ISR
/// already [1, 2]. Follower 2, still in sync, is not the cause; 3 is named by the link.
/// (The lab's cut-replication and stalled-fetcher tests saw the healthy follower blamed.)
#[test]
fn an_acks_all_timeout_that_straddled_an_isr_shrink_blames_the_dropped_follower_only() {
    let mut w = World::healthy();
    w.parts[0] = (1, 1, vec![1, 2, 3], vec![1, 2]);
    w.refresh();
    w.canary_round(&[(0, "timeout", Some(1))], &[(0, 1)]);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
    assert_eq!(v[&1].state, BrokerState::Healthy, "{:?}", v[&1]);
    assert!(rules(&v[&3]).contains(&"out_of_some_isrs"), "{:?}", v[&3]);
}

#[test]
fn a_follower_is_charged_while_its_leader_is_healthy() {
    // Incident 2: partitions of RF 2 led by 1, follower 2 stopped replicating.
    let mut w = World::healthy();
    w.parts = vec![
        (1, 1, vec![1, 2], vec![1]),
        (1, 1, vec![1, 2], vec![1]),
        (3, 1, vec![3, 2], vec![3, 2]),
    ];
    w.refresh();
    w.canary_round(&[(0, "not_enough_replicas", Some(1))], &[]);
    let v = w.judge();
    assert_eq!(v[&1].state, BrokerState::Healthy, "{:?}", v[&1]);
    assert_eq!(v[&2].state, BrokerState::Degraded);
    let r = rules(&v[&2]);
    assert!(r.contains(&"canary_not_enough_replicas"), "{r:?}");
    assert!(r.contains(&"out_of_some_isrs"), "{r:?}");
    assert!(hit_of(&v[&2], "canary_not_enough_replicas")
        .detail
        .contains("NOT_ENOUGH_REPLICAS"));
    assert_eq!(w.suspects()[&0], vec![2]);
    // The same with a timeout while leader 1 takes acks=1 writes.
    w.parts[0] = (1, 1, vec![1, 2], vec![1, 2]);
    w.refresh();
    w.canary_round(&[(0, "timeout", Some(1))], &[(0, 1)]);
    let v = w.judge();
    assert_eq!(v[&1].state, BrokerState::Healthy, "{:?}", v[&1]);
    assert!(rules(&v[&2]).contains(&"canary_not_enough_replicas"));
}

#[test]
fn a_follower_that_cannot_replicate_is_named_not_the_one_waiting_with_it() {
    // Broker 3's fetchers are cut: partition 1 (led by 2) already dropped it; partition 0
    // (led by 1) still waits on 2 and 3 and times out. Only broker 3 is named (issue 14:
    // "broker 2 degraded" went out too).
    let mut w = World::healthy();
    w.parts[1] = (2, 1, vec![2, 3, 1], vec![2, 1]);
    w.refresh();
    w.canary_round(&[(0, "timeout", Some(1))], &[(0, 1)]);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
    assert_eq!(v[&1].state, BrokerState::Healthy, "{:?}", v[&1]);
    let r = rules(&v[&3]);
    assert!(r.contains(&"canary_not_enough_replicas"), "{r:?}");
    assert!(r.contains(&"out_of_some_isrs"), "{r:?}");
    // Before any ISR shrank, both partitions it follows time out: it is common to both.
    let mut w = World::healthy();
    w.canary_round(
        &[(0, "timeout", Some(1)), (1, "timeout", Some(2))],
        &[(0, 1), (1, 2)],
    );
    let v = w.judge();
    assert_eq!(v[&1].state, BrokerState::Healthy, "{:?}", v[&1]);
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
    assert_eq!(v[&3].state, BrokerState::Degraded, "{:?}", v[&3]);
}

#[test]
fn followers_missing_from_a_silent_leaders_isr_make_no_broker_degraded() {
    // Partition findings name suspects, but a follower missing from the ISR of a leader
    // that does not answer is not degraded for it.
    let mut w = World::healthy();
    w.parts[0] = (1, 1, vec![1, 2, 3], vec![1]);
    w.refresh();
    w.silent(1);
    let v = w.judge();
    assert_followers_spared(&v);
    assert_eq!(w.suspects()[&0], vec![1]);
    // The same follower missing where its leader is healthy and kept another follower:
    // itself.
    w.answering(1, 10);
    w.parts[0] = (1, 1, vec![1, 2, 3], vec![1, 2]);
    w.refresh();
    let v = w.judge();
    assert_eq!(rules(&v[&3]), vec!["out_of_some_isrs"]);
    assert_eq!(w.suspects()[&0], vec![3]);
}

/// A round without an acks=1 answer of its own (an early round that starts as the first
/// timeouts end) still knows from the books that the leader appended beside its timed-out
/// writes: the followers it waits on are the suspects, not the leader. Before, both leaders
/// of a cut follower were `zombie` by canary_writes_fail for such a round.
#[test]
fn timeouts_the_leader_appended_beside_blame_its_followers_without_acks1_this_round() {
    let mut w = World::healthy();
    w.canary_round(&[(0, "timeout", Some(1)), (1, "timeout", Some(2))], &[]);
    let appended = |broker| crate::observe::canary::FailedWrites {
        broker,
        kind: "timeout",
        count: 3,
        received: true,
        leader_appended: true,
        first_sent_at: std::time::UNIX_EPOCH,
        last_sent_at: std::time::UNIX_EPOCH,
    };
    if let Some(c) = w.canary.as_mut() {
        c.partitions[0].failed_writes = vec![appended(1)];
        c.partitions[1].failed_writes = vec![appended(2)];
    }
    let v = w.judge();
    assert_eq!(v[&1].state, BrokerState::Healthy, "{:?}", v[&1]);
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
    assert_eq!(v[&3].state, BrokerState::Degraded, "{:?}", v[&3]);
}
