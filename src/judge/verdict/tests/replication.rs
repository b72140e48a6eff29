//! Replication: leaders with old epochs, followers out of ISRs (catching up, throttled, reassigned or standing still), lagging metadata.

use super::*;

#[test]
fn isolated_leader_with_old_epoch_is_a_stale_zombie() {
    let mut w = World::healthy();
    let old = w.metadata();
    // The cluster moved partition 0 to broker 2 at epoch 2 and fenced broker 1.
    w.parts[0] = (2, 2, vec![1, 2, 3], vec![2, 3]);
    w.registered = vec![2, 3];
    w.refresh();
    if let Some(Ok((m, _))) = &mut w.answering(1, 10).metadata {
        *m = old;
    }
    let v = w.judge();
    assert_eq!(v[&1].state, BrokerState::Zombie, "{:?}", v[&1]);
    let r = rules(&v[&1]);
    assert!(r.contains(&"stale_leader"), "{r:?}");
    assert!(v[&1]
        .hits
        .iter()
        .any(|h| h.detail.contains("t-0 (epoch 1 < 2)")));
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
}

/// Broker 3 replicates partitions 0 and 1, leads none and is in neither ISR.
fn out_of_every_isr() -> World {
    let mut w = World::healthy();
    w.parts = vec![
        (1, 1, vec![1, 3], vec![1]),
        (2, 1, vec![2, 3], vec![2]),
        (1, 1, vec![1, 2], vec![1, 2]),
    ];
    w.refresh();
    w
}

/// Broker 3's log end offsets on t-0 and t-1, the leaders' high watermark at `hw`.
fn measured(w: &mut World, log_end: [i64; 2], hw: i64, adding: Option<u32>) {
    let offsets = (0..2)
        .map(|p| {
            (
                ("t".to_string(), p),
                crate::model::round::ReplicaOffsets {
                    log_end: log_end[p as usize],
                    leader_high_watermark: Some(hw),
                },
            )
        })
        .collect();
    w.followers.insert(
        3,
        crate::model::round::FollowerProgress {
            offsets,
            adding_to: adding.map(|n| (0..n as i32).map(|p| ("t".to_string(), p)).collect()),
            ..Default::default()
        },
    );
}

#[test]
fn follower_out_of_every_isr_whose_logs_stand_still_for_the_window_is_a_zombie() {
    // Incident 2's dead fetcher on a broker that leads nothing: its logs never grow.
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    measured(&mut w, [100, 100], 500, None);
    for secs in [1000, 1030] {
        let v = w.round(&mut memory, secs);
        assert_eq!(v[&3].state, BrokerState::Degraded, "at {secs}: {:?}", v[&3]);
        assert!(v[&3].hits[0]
            .detail
            .contains("watching whether it catches up"));
    }
    let v = w.round(&mut memory, 1061);
    assert_eq!(v[&3].state, BrokerState::Zombie, "{:?}", v[&3]);
    assert_eq!(rules(&v[&3]), vec!["out_of_every_isr", "out_of_some_isrs"]);
    let d = &v[&3].hits[0].detail;
    assert!(d.contains("have not grown for 61 s"), "{d}");
    assert!(d.contains("800 offset(s) behind"), "{d}");
    assert!(v[&3].hits[1]
        .detail
        .contains("2 of them now under min.insync.replicas"));
    // Without a leader that answers, standing still is not its fault.
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    measured(&mut w, [100, 100], 500, None);
    for o in w.followers.get_mut(&3).unwrap().offsets.values_mut() {
        o.leader_high_watermark = None;
    }
    w.round(&mut memory, 1000);
    let v = w.round(&mut memory, 1100);
    assert_eq!(v[&3].state, BrokerState::Degraded, "{:?}", v[&3]);
    assert!(v[&3].hits[0]
        .detail
        .contains("no leader of its partitions answered"));
    // Caught up and still outside the ISRs is no better: nothing fetches.
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    measured(&mut w, [500, 500], 500, None);
    w.round(&mut memory, 1000);
    assert_eq!(w.round(&mut memory, 1060)[&3].state, BrokerState::Zombie);
}

#[test]
fn follower_catching_up_is_never_a_zombie() {
    // A broker added between rounds (never seen down) copying a backlog under a replication
    // throttle: its logs grow in bursts, with pauses shorter than the window.
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    let mut log_end = 0;
    for round in 0..40u64 {
        if round % 5 == 0 {
            log_end += 1000;
        }
        measured(&mut w, [log_end, log_end / 2], 100_000, None);
        let v = w.round(&mut memory, 1000 + round * 10);
        assert_eq!(
            v[&3].state,
            BrokerState::Degraded,
            "round {round}: {:?}",
            v[&3]
        );
        if round % 5 == 0 && round > 0 {
            let d = &v[&3].hits[0].detail;
            assert!(
                d.contains("catching up: its logs grew by 1500 offset(s)"),
                "{d}"
            );
        }
    }
    // The time since it was first seen is no verdict: it was never down, and 400 s passed.
    assert!(memory[&3].last_down_at.is_none());
}

/// The routine day (bench/results/2026-12-01-routine.md) paged a warning for a broker a
/// planned reassignment was filling, and made the partitions' other brokers `degraded`: a
/// replica being added is copying, not failing (Kafka's own under-replicated count leaves it
/// out too).
#[test]
fn a_replica_an_ongoing_reassignment_is_adding_is_not_missing_from_the_isr() {
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    // Copying: its logs grow every round (one standing still is the next test's).
    for (k, secs) in [1000u64, 1100, 1200].into_iter().enumerate() {
        measured(&mut w, [1000 * k as i64; 2], 9000, Some(2));
        let v = w.round(&mut memory, secs);
        for b in [1, 2, 3] {
            assert_eq!(v[&b].state, BrokerState::Healthy, "at {secs}: {:?}", v[&b]);
            assert!(v[&b].hits.is_empty(), "at {secs}: {:?}", v[&b]);
        }
    }
    // Its ISRs of one are under min.insync.replicas, which is a finding, but nobody's fault.
    assert!(
        w.suspects().values().all(Vec::is_empty),
        "{:?}",
        w.suspects()
    );
    // Added to one partition only: its absence from the other ISR still counts.
    measured(&mut w, [3000, 3000], 9000, Some(1));
    let v = w.round(&mut memory, 1300);
    assert_eq!(rules(&v[&3]), vec!["out_of_some_isrs"], "{:?}", v[&3]);
    assert!(
        v[&3].hits[0].detail.contains("t-1 (leader 2)"),
        "{:?}",
        v[&3]
    );
    assert_eq!(w.suspects().get(&1), Some(&vec![3]), "{:?}", w.suspects());
}

/// Issue 31, the routine bench's add-broker phase (bench/results/2026-12-04-routine-
/// controllers.md): broker 4's replica of routine-data-0 joined the ISR when its move
/// completed, fell behind under the move's throttle (Kafka throttles any replica that lags,
/// in the ISR or not), dropped out, and a `degraded` warning was paged for 30 s of a
/// planned move. A replica copying under the operator's throttle is copying, not missing,
/// for as long as its logs grow; once they stand still for the catch-up window it counts
/// missing again.
#[test]
fn a_replica_copying_under_a_replication_throttle_is_not_missing_until_its_logs_stand_still() {
    let mut w = World::healthy();
    // Broker 3 is in the ISR of t-2 and has fallen out of t-0's and t-1's.
    w.parts = vec![
        (1, 1, vec![1, 2, 3], vec![1, 2]),
        (2, 1, vec![2, 1, 3], vec![2, 1]),
        (1, 1, vec![1, 2, 3], vec![1, 2, 3]),
    ];
    w.refresh();
    let throttle = |w: &mut World, log_end: i64| {
        measured(w, [log_end; 2], 90_000, None);
        w.followers.get_mut(&3).unwrap().throttled = vec![("t".into(), 0), ("t".into(), 1)];
    };
    let mut memory = BTreeMap::new();
    for (k, secs) in [1000u64, 1010, 1020, 1030].into_iter().enumerate() {
        throttle(&mut w, 1000 * k as i64);
        let v = w.round(&mut memory, secs);
        for b in [1, 2, 3] {
            assert_eq!(v[&b].state, BrokerState::Healthy, "at {secs}: {:?}", v[&b]);
        }
        assert!(
            w.suspects().values().all(Vec::is_empty),
            "{:?}",
            w.suspects()
        );
    }
    // Standing still from 1030 on: the allowance ends with the window.
    throttle(&mut w, 3000);
    assert_eq!(w.round(&mut memory, 1080)[&3].state, BrokerState::Healthy);
    let v = w.round(&mut memory, 1091);
    assert_eq!(rules(&v[&3]), vec!["out_of_some_isrs"], "{:?}", v[&3]);
    assert!(v[&3].hits[0].detail.contains("2 of the 3"), "{:?}", v[&3]);
    // Without a throttle, the same replicas are missing at once.
    let mut w2 = World::healthy();
    w2.parts = w.parts.clone();
    w2.refresh();
    measured(&mut w2, [0; 2], 90_000, None);
    let v = w2.round(&mut BTreeMap::new(), 1000);
    assert_eq!(rules(&v[&3]), vec!["out_of_some_isrs"], "{:?}", v[&3]);
}

#[test]
fn follower_out_of_every_isr_that_cannot_be_measured_is_degraded_not_a_zombie() {
    let w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    for secs in [1000, 1100, 1200] {
        let v = w.round(&mut memory, secs);
        assert_eq!(v[&3].state, BrokerState::Degraded, "{:?}", v[&3]);
        assert!(v[&3].hits[0].detail.contains("cannot be measured"));
    }
    // Back in an ISR: nothing about catching up is kept.
    let mut w = World::healthy();
    w.refresh();
    w.round(&mut memory, 1300);
    assert!(memory[&3].catch_up.is_none());
}

#[test]
fn follower_out_of_some_isrs_is_degraded() {
    let mut w = World::healthy();
    w.parts[0] = (1, 1, vec![1, 2, 3], vec![1, 2]);
    w.refresh();
    let v = w.judge();
    assert_eq!(v[&3].state, BrokerState::Degraded);
    assert_eq!(rules(&v[&3]), vec!["out_of_some_isrs"]);
}

#[test]
fn a_lagging_cache_is_a_disagreement() {
    let mut w = World::healthy();
    let old = w.metadata();
    w.parts[1] = (3, 2, vec![2, 3, 1], vec![3, 1]);
    w.refresh();
    if let Some(Ok((m, _))) = &mut w.answering(1, 10).metadata {
        *m = old;
    }
    let v = w.judge();
    assert!(
        rules(&v[&1]).contains(&"metadata_disagreement"),
        "{:?}",
        v[&1]
    );
    assert_eq!(v[&1].state, BrokerState::Degraded);
}

/// Issue 31: the dead fetcher's broker whose Metadata answer failed once in a while stayed
/// `degraded` for 290 s: each failed round ended its catch-up window. A round that saw no
/// answer says nothing about its ISRs; the window runs from when it left them.
#[test]
fn a_round_whose_answer_failed_does_not_restart_the_catch_up_window() {
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    measured(&mut w, [100, 100], 500, None);
    assert_eq!(w.round(&mut memory, 1000)[&3].state, BrokerState::Degraded);
    w.probes.get_mut(&3).unwrap().metadata = Some(Err(fail(FailureKind::Timeout)));
    let v = w.round(&mut memory, 1030);
    assert!(!rules(&v[&3]).contains(&"out_of_every_isr"), "{:?}", v[&3]);
    w.answering(3, 10);
    let v = w.round(&mut memory, 1061);
    assert_eq!(v[&3].state, BrokerState::Zombie, "{:?}", v[&3]);
    assert!(v[&3].hits[0].detail.contains("have not grown for 61 s"));
}

/// A reassignment adding a broker whose logs stand still has the window's limit too: the
/// partitions do not count it missing, its own verdict names it once its logs stood still
/// for the window while its leaders are ahead.
#[test]
fn a_reassignment_adding_a_replica_that_never_grows_is_a_zombie_after_the_window() {
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    for (k, secs) in [1000u64, 1010, 1020].into_iter().enumerate() {
        measured(&mut w, [100 * k as i64; 2], 9000, Some(2));
        let v = w.round(&mut memory, secs);
        assert_eq!(v[&3].state, BrokerState::Healthy, "at {secs}: {:?}", v[&3]);
    }
    // Standing still from 1020 on.
    let v = w.round(&mut memory, 1070);
    assert_eq!(v[&3].state, BrokerState::Healthy, "{:?}", v[&3]);
    let v = w.round(&mut memory, 1081);
    assert_eq!(v[&3].state, BrokerState::Zombie, "{:?}", v[&3]);
    assert_eq!(rules(&v[&3]), vec!["reassignment_stalled"]);
    assert!(
        v[&3].hits[0].detail.contains("have not grown for 61 s"),
        "{:?}",
        v[&3]
    );
    // Its leaders not ahead (caught up): not its fault.
    let mut w = out_of_every_isr();
    let mut memory = BTreeMap::new();
    measured(&mut w, [9000, 9000], 9000, Some(2));
    w.round(&mut memory, 1000);
    w.round(&mut memory, 1010);
    assert_eq!(w.round(&mut memory, 1100)[&3].state, BrokerState::Healthy);
}
