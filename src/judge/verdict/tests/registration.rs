//! Registration (who the others count as a member) and the watchdog's own access problems.

use super::*;

/// DescribeCluster v2 with fenced brokers: (id, fenced) for each listed broker.
fn described(brokers: &[(i32, bool)]) -> ClusterDescription {
    ClusterDescription {
        cluster_id: "c".into(),
        controller_id: 1,
        brokers: brokers
            .iter()
            .map(|(id, fenced)| RegisteredBroker {
                endpoint: ep(*id),
                fenced: *fenced,
            })
            .collect(),
        includes_fenced: true,
    }
}

/// Broker `lister` answers like the others but its Metadata omits `missing`.
fn without(w: &mut World, lister: i32, missing: i32) {
    let mut m = w.metadata();
    m.brokers.retain(|b| b.id != missing);
    if let Some(Ok((md, _))) = &mut w.probes.get_mut(&lister).unwrap().metadata {
        *md = m;
    }
}

#[test]
fn a_registration_tie_without_the_controllers_view_is_unknown_not_guilt() {
    // Three brokers, Metadata only: broker 1 lists broker 2, broker 3 (cache behind) does
    // not. One to one says nothing about broker 2.
    let mut w = World::healthy();
    without(&mut w, 3, 2);
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Unknown);
    assert_ne!(v[&2].state, BrokerState::Zombie, "{:?}", v[&2].hits);
    assert!(!rules(&v[&2]).contains(&"fenced_but_serving"));
    // Two to nothing still decides.
    without(&mut w, 1, 2);
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Absent);
    assert_eq!(v[&2].state, BrokerState::Zombie);
}

#[test]
fn describe_cluster_with_fenced_brokers_decides_over_metadata_lists() {
    // Broker 1 reports the controller's records: broker 2 registered, unfenced. Broker 3's
    // DescribeCluster failed and its Metadata does not list broker 2.
    let mut w = World::healthy();
    w.probes.get_mut(&1).unwrap().description =
        Some(Ok(described(&[(1, false), (2, false), (3, false)])));
    without(&mut w, 3, 2);
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Registered);
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2].hits);
    // And the other way: fenced in the controller's records though a Metadata lists it.
    let mut w = World::healthy();
    w.probes.get_mut(&1).unwrap().description =
        Some(Ok(described(&[(1, false), (2, true), (3, false)])));
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Fenced);
    assert_eq!(v[&2].state, BrokerState::Zombie);
}

#[test]
fn a_tie_between_describe_cluster_answers_is_unknown() {
    let mut w = World::healthy();
    w.probes.get_mut(&1).unwrap().description =
        Some(Ok(described(&[(1, false), (2, true), (3, false)])));
    w.probes.get_mut(&3).unwrap().description =
        Some(Ok(described(&[(1, false), (2, false), (3, false)])));
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Unknown);
    assert_eq!(v[&2].state, BrokerState::Healthy, "{:?}", v[&2].hits);
}

#[test]
fn a_replica_listed_this_round_but_not_yet_probed_is_unknown_not_down() {
    // Broker 7 joined: every answer lists it, but its address was learned from this round's
    // answers, so it is probed from the next round on.
    let mut w = World::healthy();
    w.registered.push(7);
    w.parts.push((1, 1, vec![1, 7], vec![1]));
    w.refresh();
    let v = w.judge();
    assert_eq!(v[&7].state, BrokerState::Unknown, "{:?}", v[&7].hits);
    assert_eq!(rules(&v[&7]), vec!["not_probed_yet"]);
    assert!(!v[&7].hits[0].detail.contains("no broker lists it"));
    assert_eq!(v[&7].address, "127.0.0.17:9092");
    assert_eq!(v[&7].registration, Registration::Registered);
}

/// Broker `id` accepted TCP, then `step` failed with `kind`.
fn failing_at(w: &mut World, id: i32, step: &str, kind: FailureKind) {
    let p = w.answering(id, 10);
    match step {
        "connect" => {
            p.connect = Err(fail(kind));
            p.api_versions = None;
            p.metadata = None;
        }
        "api_versions" => {
            p.api_versions = Some(Err(fail(kind)));
            p.metadata = None;
        }
        _ => p.metadata = Some(Err(fail(kind))),
    }
}

#[test]
fn a_refused_login_on_one_broker_is_the_watchdogs_access_not_a_zombie() {
    // SASL refused during the handshake (wrong credentials on this broker).
    let mut w = World::healthy();
    failing_at(&mut w, 2, "api_versions", FailureKind::Authentication);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Unknown, "{:?}", v[&2].hits);
    assert_eq!(rules(&v[&2]), vec!["auth_failed"]);
    assert!(v[&2].hits[0].detail.contains("credentials"));
    // An expired or untrusted certificate fails the TLS handshake, reported by connect:
    // the port was reached, so neither unreachable nor down.
    let mut w = World::healthy();
    failing_at(&mut w, 2, "connect", FailureKind::Tls);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Unknown, "{:?}", v[&2].hits);
    assert_eq!(rules(&v[&2]), vec!["auth_failed"]);
}

#[test]
fn an_answer_the_watchdog_cannot_decode_is_a_protocol_error_not_a_zombie() {
    let mut w = World::healthy();
    failing_at(&mut w, 3, "metadata", FailureKind::Protocol);
    let v = w.judge();
    assert_eq!(v[&3].state, BrokerState::Unknown, "{:?}", v[&3].hits);
    assert_eq!(rules(&v[&3]), vec!["protocol_error"]);
    // A timeout in the same step is still a broker that does not answer.
    let mut w = World::healthy();
    failing_at(&mut w, 3, "metadata", FailureKind::Timeout);
    assert_eq!(w.judge()[&3].state, BrokerState::Zombie);
}

#[test]
fn a_whole_request_refused_as_not_authorized_is_the_watchdogs_access_not_a_zombie() {
    // Metadata answered with CLUSTER_AUTHORIZATION_FAILED for the whole request: the broker
    // answered, and what it refused is the watchdog's principal.
    let mut w = World::healthy();
    failing_at(&mut w, 2, "metadata", FailureKind::Authorization);
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Unknown, "{:?}", v[&2].hits);
    assert_eq!(rules(&v[&2]), vec!["auth_failed"]);
    assert!(
        v[&2].hits[0].detail.contains("grant"),
        "{}",
        v[&2].hits[0].detail
    );
    assert_eq!(v[&1].state, BrokerState::Healthy);
}

#[test]
fn a_whole_request_kafka_error_is_an_answer_not_a_zombie() {
    let mut w = World::healthy();
    failing_at(&mut w, 3, "metadata", FailureKind::KafkaError);
    let v = w.judge();
    assert_eq!(v[&3].state, BrokerState::Degraded, "{:?}", v[&3].hits);
    assert_eq!(rules(&v[&3]), vec!["request_error"]);
    assert!(
        v[&3].hits[0].detail.contains("answers"),
        "{}",
        v[&3].hits[0].detail
    );
}

#[test]
fn host_mode_does_not_turn_a_refused_login_into_a_zombie() {
    let mut w = World::healthy();
    failing_at(&mut w, 1, "api_versions", FailureKind::Authentication);
    w.host.insert(1, host(Some(ProcessState::Sleeping), true));
    let v = w.judge_with(&answered_12s_ago()).remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Unknown, "{:?}", v.hits);
    assert_eq!(rules(&v), vec!["auth_failed"]);
}

#[test]
fn a_wrong_password_everywhere_says_so_first() {
    let mut w = World::healthy();
    for id in 1..=3 {
        failing_at(&mut w, id, "api_versions", FailureKind::Authentication);
    }
    let v = w.judge();
    for id in 1..=3 {
        assert_eq!(v[&id].state, BrokerState::Unknown);
        assert_eq!(rules(&v[&id]), vec!["auth_failed", "cluster_invisible"]);
    }
}

#[test]
fn an_unreachable_broker_the_others_are_split_on_is_not_down() {
    let mut w = World::healthy();
    w.connect_timeout(2);
    without(&mut w, 3, 2);
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Unknown);
    assert_eq!(v[&2].state, BrokerState::Degraded, "{:?}", v[&2].hits);
    assert!(!v[&2].hits[0].detail.contains("does not list it"));
}

#[test]
fn a_stopped_process_whose_connects_time_out_is_a_zombie_not_down() {
    let mut w = World::healthy();
    w.registered = vec![1, 3];
    w.refresh();
    w.connect_timeout(2);
    w.host.insert(2, host(Some(ProcessState::Stopped), true));
    let v = w.judge();
    assert_eq!(v[&2].state, BrokerState::Zombie, "{:?}", v[&2]);
    assert_eq!(rules(&v[&2])[0], "process_stopped");
    assert!(
        v[&2].hits.iter().all(|h| h.state != BrokerState::Down),
        "{:?}",
        v[&2]
    );
}

#[test]
fn a_broker_that_left_the_cluster_is_forgotten_not_down() {
    // Broker 4 was emptied by reassignment, stopped and unregistered: nobody lists it, no
    // partition names it, its port refuses. It left; paging "down" for it is a false page.
    let mut w = World::healthy();
    w.refused(4);
    let v = w.judge();
    assert!(!v.contains_key(&4), "{:?}", v.get(&4));
    assert!(v.values().all(|v| v.state == BrokerState::Healthy), "{v:?}");
    // Still named as a replica: a broker that died with partitions on it is down.
    w.parts[0].2.push(4);
    w.refresh();
    let v = w.judge();
    assert_eq!(v[&4].state, BrokerState::Down, "{:?}", v[&4]);
    // Listed by the others (KRaft fences a dead broker, it stays registered): down.
    let mut w = World::healthy();
    w.registered.push(4);
    w.refresh();
    w.refused(4);
    assert_eq!(w.judge()[&4].state, BrokerState::Down);
}

/// Before Kafka 4.0 no answer reports fencing (DescribeCluster below v2, or none): a broker
/// the others do not list may be fenced or unregistered, and the verdict says it cannot tell
/// instead of picking one. With DescribeCluster v2 answers, unlisted means unregistered.
#[test]
fn unlisted_broker_on_a_cluster_without_fencing_says_what_it_cannot_see() {
    let mut w = World::healthy();
    w.parts = vec![(1, 2, vec![1, 2, 3], vec![1, 3])];
    w.registered = vec![1, 3];
    w.refresh();
    let view = w.metadata();
    let listed = {
        let mut m = view.clone();
        m.brokers = vec![ep(1), ep(2), ep(3)];
        m
    };
    if let Some(Ok((m, _))) = &mut w.answering(2, 10).metadata {
        *m = listed;
    }
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Absent);
    let hit = v[&2]
        .hits
        .iter()
        .find(|h| h.rule == Rule::FencedButServing)
        .expect("fenced_but_serving");
    assert!(
        hit.detail
            .contains("fenced or unregistered cannot be told apart"),
        "{}",
        hit.detail
    );

    // DescribeCluster v0-1 (Kafka 2.8-3.9) lists unfenced brokers only: leaving broker 2
    // out counts as "may be fenced", and the verdict must not say the controller fenced it
    // (seen on the 2.8 lab: "the controller has fenced it" about a ZooKeeper cluster).
    let old_describe = ClusterDescription {
        cluster_id: "c".into(),
        controller_id: 1,
        brokers: vec![
            RegisteredBroker {
                endpoint: ep(1),
                fenced: false,
            },
            RegisteredBroker {
                endpoint: ep(3),
                fenced: false,
            },
        ],
        includes_fenced: false,
    };
    for id in [1, 3] {
        w.probes.get_mut(&id).unwrap().description = Some(Ok(old_describe.clone()));
    }
    let v = w.judge();
    let hit = v[&2]
        .hits
        .iter()
        .find(|h| h.rule == Rule::FencedButServing)
        .expect("fenced_but_serving");
    assert!(
        !hit.detail.contains("the controller has fenced it"),
        "{}",
        hit.detail
    );
    assert!(
        hit.detail.contains("cannot be told apart"),
        "{}",
        hit.detail
    );

    let desc = ClusterDescription {
        cluster_id: "c".into(),
        controller_id: 0,
        brokers: vec![
            RegisteredBroker {
                endpoint: ep(1),
                fenced: false,
            },
            RegisteredBroker {
                endpoint: ep(3),
                fenced: false,
            },
        ],
        includes_fenced: true,
    };
    for id in [1, 3] {
        w.probes.get_mut(&id).unwrap().description = Some(Ok(desc.clone()));
    }
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Absent);
    let hit = v[&2]
        .hits
        .iter()
        .find(|h| h.rule == Rule::FencedButServing)
        .unwrap();
    assert!(
        !hit.detail.contains("cannot be told apart"),
        "{}",
        hit.detail
    );
}

#[test]
fn fenced_broker_that_answers_is_a_zombie() {
    let w = fenced_world();
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Fenced);
    assert_eq!(v[&2].state, BrokerState::Zombie);
    assert!(rules(&v[&2]).contains(&"fenced_but_serving"));
}

/// Issue 31: registering after a restart is the window from its last down to the first
/// round that lists it registered; a broker fenced after that is a zombie, not
/// "registering" for the rest of the restart grace.
#[test]
fn the_registering_window_ends_at_the_first_round_that_lists_it_registered() {
    let w = fenced_world();
    let at = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
    let mut memory = BTreeMap::new();
    memory.insert(
        2,
        BrokerMemory {
            last_down_at: Some(at(990)),
            ..BrokerMemory::default()
        },
    );
    let v = w.judge_with(&memory);
    assert_eq!(v[&2].state, BrokerState::Degraded, "{:?}", v[&2]);
    assert!(v[&2].hits[0].detail.contains("registering"));
    memory.get_mut(&2).unwrap().registered_at = Some(at(995));
    let v = w.judge_with(&memory);
    assert_eq!(v[&2].state, BrokerState::Zombie, "{:?}", v[&2]);
}

#[test]
fn registration_without_fenced_listing_counts_absence_as_fenced() {
    let mut w = World::healthy();
    let desc = ClusterDescription {
        cluster_id: "c".into(),
        controller_id: 0,
        brokers: vec![RegisteredBroker {
            endpoint: ep(1),
            fenced: false,
        }],
        includes_fenced: false,
    };
    w.probes.get_mut(&1).unwrap().description = Some(Ok(desc.clone()));
    w.probes.get_mut(&3).unwrap().description = Some(Ok(desc));
    let v = w.judge();
    assert_eq!(v[&2].registration, Registration::Fenced);
}
