//! Reach: a broker that answers, refuses, times out or stalls, and what each means.

use super::*;

#[test]
fn healthy_cluster_is_healthy() {
    let v = World::healthy().judge();
    assert_eq!(v.len(), 3);
    for verdict in v.values() {
        assert_eq!(verdict.state, BrokerState::Healthy, "{verdict:?}");
        assert!(verdict.hits.is_empty());
        assert_eq!(verdict.registration, Registration::Registered);
    }
}

#[test]
fn frozen_broker_is_a_zombie() {
    let mut w = World::healthy();
    w.silent(2);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Zombie);
    assert_eq!(rules(&v[&2]), vec!["no_answer"]);
    assert!(v[&2].hits[0]
        .detail
        .contains("api_versions failed: timeout"));
    assert_eq!(v[&1].state, BrokerState::Healthy);
}

#[test]
fn closed_port_is_down() {
    let mut w = World::healthy();
    w.registered = vec![1, 3];
    w.refresh();
    w.refused(2);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Down);
    assert_eq!(rules(&v[&2]), vec!["port_closed"]);
}

/// With continuous liveness every restart's refusal was paged as `down` within seconds
/// (a rolling restart: one warning per broker). Kafka's controlled shutdown moves leadership
/// away before the listener closes; a crash or a kill leaves the broker leader until the
/// controller notices, and in the ISRs. What the refused broker still holds tells them apart.
#[test]
fn a_broker_that_held_nothing_when_its_port_closed_shut_down_cleanly_and_is_held() {
    let mut w = World::healthy();
    // Leadership moved from 2 to 3, and 2 left every ISR, before its port closed.
    w.parts = vec![
        (1, 1, vec![1, 2, 3], vec![1, 3]),
        (3, 2, vec![2, 3, 1], vec![3, 1]),
        (3, 1, vec![3, 1, 2], vec![3, 1]),
    ];
    w.refresh();
    w.refused(2);
    let mut memory = BTreeMap::new();
    let v = w.round(&mut memory, 1000);
    assert_eq!(v[&2].state, BrokerState::Down);
    assert_eq!(rules(&v[&2]), vec![Rule::ShutDownCleanly.name()]);
    assert!(v[&2].hits[0].detail.contains("controlled shutdown"));
    assert_eq!(v[&2].page_after, Some(Duration::from_secs(120)));
    assert_eq!(v[&1].page_after, None);
    // Back, answering but not registered yet: still held, the stop was clean.
    w.registered = vec![1, 3];
    w.refresh();
    w.answering(2, 10);
    let v = w.round(&mut memory, 1020);
    assert_ne!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
    assert_eq!(
        v[&2].page_after,
        Some(Duration::from_secs(120)),
        "{:?}",
        v[&2]
    );
    // Healthy again: the next stop is judged afresh.
    w.registered = vec![1, 2, 3];
    w.parts = World::healthy().parts;
    w.refresh();
    w.answering(2, 10);
    let v = w.round(&mut memory, 1040);
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2]);
    assert!(memory[&2].stopped_cleanly_at.is_none());
    w.refused(2);
    let v = w.round(&mut memory, 1060);
    assert_eq!(
        rules(&v[&2]),
        vec!["port_closed"],
        "it holds partitions again: a crash"
    );
    assert_eq!(v[&2].page_after, None);
}

/// Two replicas killed in the lab: the next rounds saw Kafka fence them, elect away and
/// shrink the ISRs, and judged from that view the crash read as a clean stop (held, not
/// paged). A refusal is told clean or crashed once, when it starts.
#[test]
fn a_crash_stays_a_crash_after_kafka_moves_the_broker_out_of_every_isr() {
    let mut w = World::healthy();
    w.refused(2);
    let mut memory = BTreeMap::new();
    let v = w.round(&mut memory, 1000);
    assert_eq!(rules(&v[&2]), vec!["port_closed"]);
    // Fenced: leadership moved from 2 and it left every ISR.
    w.parts = vec![
        (1, 1, vec![1, 2, 3], vec![1, 3]),
        (3, 2, vec![2, 3, 1], vec![3, 1]),
        (3, 1, vec![3, 1, 2], vec![3, 1]),
    ];
    w.registered = vec![1, 3];
    w.refresh();
    w.refused(2);
    for at in [1010, 1020] {
        let v = w.round(&mut memory, at);
        assert_eq!(rules(&v[&2])[0], "port_closed", "at {at}: {:?}", v[&2]);
        assert_eq!(v[&2].page_after, None);
    }
}

#[test]
fn a_refused_broker_still_leading_crashed_and_is_paged_at_once() {
    let mut w = World::healthy();
    w.refused(2);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Down);
    assert_eq!(rules(&v[&2]), vec!["port_closed"]);
    assert_eq!(v[&2].page_after, None);
    // A stop held for a clean one long ago does not hold a crash now.
    let mut memory = BTreeMap::new();
    memory.insert(
        2,
        BrokerMemory {
            stopped_cleanly_at: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(100)),
            ..BrokerMemory::default()
        },
    );
    let v = w.judge_at(&memory, 1000);
    assert_eq!(v[&2].page_after, None);
}

#[test]
fn connect_timeout_of_a_registered_broker_is_only_degraded() {
    let mut w = World::healthy();
    w.connect_timeout(3);
    let v = w.judge();
    assert_eq!(v[&3].state, BrokerState::Degraded);
    assert_eq!(v[&3].registration, Registration::Registered);
    w.registered = vec![1, 2];
    w.refresh();
    let v = w.judge();
    assert_eq!(v[&3].state, BrokerState::Down);
}

#[test]
fn nothing_answering_is_unknown_not_a_guess() {
    let mut w = World::healthy();
    for id in 1..=3 {
        w.connect_timeout(id);
    }
    let v = w.judge();
    for verdict in v.values() {
        assert_eq!(verdict.state, BrokerState::Unknown, "{verdict:?}");
        assert_eq!(rules(verdict), vec!["cluster_invisible"]);
    }
}

#[test]
fn all_ports_closed_is_down_even_when_nothing_answers() {
    let mut w = World::healthy();
    for id in 1..=3 {
        w.refused(id);
    }
    let v = w.judge();
    assert!(v.values().all(|x| x.state == BrokerState::Down));
}

#[test]
fn a_frozen_broker_whose_accept_queue_fills_stays_one_zombie_episode() {
    // SIGSTOP: the kernel completes handshakes until the listen backlog (50) is full, about
    // 50 s in; then connects time out. The controller fenced it long before.
    let mut w = World::healthy();
    w.registered = vec![1, 3];
    w.refresh();
    let mut memory = BTreeMap::new();
    w.silent(2);
    let v = w.round(&mut memory, 1000);
    assert_eq!(v[&2].state, BrokerState::Zombie, "{:?}", v[&2]);
    w.connect_timeout(2);
    for secs in [1050, 1060, 1120] {
        let v = w.round(&mut memory, secs);
        assert_eq!(v[&2].state, BrokerState::Zombie, "at {secs}: {:?}", v[&2]);
        assert_eq!(rules(&v[&2]), vec!["no_answer"]);
        let d = &v[&2].hits[0].detail;
        assert!(d.contains("accept queue is full"), "{d}");
        assert!(
            d.contains(&format!("without answering for {} s", secs - 1000)),
            "{d}"
        );
    }
    // A port that refuses is down, and ends the episode.
    w.refused(2);
    assert_eq!(w.round(&mut memory, 1130)[&2].state, BrokerState::Down);
    w.connect_timeout(2);
    let v = w.round(&mut memory, 1140);
    assert_eq!(v[&2].state, BrokerState::Down, "{:?}", v[&2]);
    assert_eq!(rules(&v[&2]), vec!["unreachable"]);
}

#[test]
fn a_connect_timeout_never_preceded_by_silence_is_a_host_gone() {
    let mut w = World::healthy();
    w.registered = vec![1, 3];
    w.refresh();
    let mut memory = BTreeMap::new();
    w.round(&mut memory, 990);
    w.connect_timeout(2);
    let v = w.round(&mut memory, 1000);
    assert_eq!(v[&2].state, BrokerState::Down, "{:?}", v[&2]);
    assert_eq!(rules(&v[&2]), vec!["unreachable"]);
    // Refused at authentication is an answer, not silence: no accept-queue episode follows.
    w.silent(2);
    w.probes.get_mut(&2).unwrap().api_versions = Some(Err(fail(FailureKind::Authentication)));
    w.round(&mut memory, 1010);
    w.connect_timeout(2);
    assert_eq!(w.round(&mut memory, 1020)[&2].state, BrokerState::Down);
}

#[test]
fn slow_broker_is_degraded_above_factor_and_floor() {
    let mut w = World::healthy();
    w.answering(3, 2000);
    let v = w.judge();
    assert_eq!(v[&3].state, BrokerState::Degraded);
    assert_eq!(rules(&v[&3]), vec!["slow"]);
    // 5x of 10 ms is still under the 250 ms floor: noise, not a finding.
    w.answering(3, 200);
    assert_eq!(w.judge()[&3].state, BrokerState::Healthy);
}

#[test]
fn memory_records_down_and_forgets_gone_brokers() {
    let mut memory = BTreeMap::new();
    memory.insert(9, BrokerMemory::default());
    let mut w = World::healthy();
    w.refused(2);
    let v: Vec<BrokerVerdict> = w.judge().into_values().collect();
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(5);
    remember(&mut memory, &v, now);
    assert_eq!(memory[&2].last_down_at, Some(now));
    assert!(memory[&1].last_down_at.is_none());
    assert_eq!(memory[&2].state, Some((BrokerState::Down, now)));
    // The same state later keeps its start time.
    remember(&mut memory, &v, now + Duration::from_secs(7));
    assert_eq!(memory[&2].state, Some((BrokerState::Down, now)));
    assert!(!memory.contains_key(&9));
}

#[test]
fn a_replica_nobody_lists_is_down() {
    let mut w = World::healthy();
    w.parts.push((1, 1, vec![1, 7], vec![1]));
    w.refresh();
    let v = w.judge();
    assert_eq!(v[&7].state, BrokerState::Down);
    assert_eq!(rules(&v[&7]), vec!["not_registered"]);
    assert_eq!(v.len(), 4);
}

#[test]
fn peer_medians_match_the_median_of_the_others() {
    // Latencies with ties and one broker without an answer.
    let lat = [40u64, 10, 30, 10, 50, 20, 0];
    let mut w = World::healthy();
    w.probes.clear();
    for (i, ms) in lat.iter().enumerate() {
        let id = i as i32 + 1;
        if *ms == 0 {
            w.silent(id);
        } else {
            w.answering(id, *ms);
        }
    }
    let obs = RoundObservation {
        cluster: "lab".into(),
        started_at: SystemTime::UNIX_EPOCH,
        duration: Duration::ZERO,
        probes: w.probes.clone(),
        bootstrap_failures: Vec::new(),
        min_isr: BTreeMap::new(),
        unclean_allowed: Default::default(),
        eligible_leaders: Default::default(),
        host: BTreeMap::new(),
        followers: BTreeMap::new(),
        liveness: BTreeMap::new(),
        quorum: None,
        coordinators: None,
        brokers_unwatched: 0,
    };
    let fast = super::peer_medians(&obs);
    for id in obs.probes.keys() {
        let mut others: Vec<Duration> = obs
            .probes
            .iter()
            .filter(|(o, _)| *o != id)
            .filter_map(|(_, p)| p.metadata_latency())
            .collect();
        others.sort_unstable();
        let naive = others.get(others.len() / 2).copied();
        assert_eq!(fast.get(id).copied(), naive, "broker {id}");
    }
}
