//! The host-mode rules: the process and ports in the operator's words.

use super::*;

// ---------------------------------------------------------------------------------------
// Host mode: what the broker's own host shows, beside what the protocol said.

#[test]
fn stopped_process_with_listening_port_is_a_zombie_in_the_operators_words() {
    let mut w = World::healthy();
    w.silent(1);
    w.host.insert(1, host(Some(ProcessState::Stopped), true));
    let v = w.judge_with(&answered_12s_ago()).remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Zombie);
    assert!(!v.answered);
    assert_eq!(
        v.hits[0].rule,
        Rule::ProcessStopped,
        "the host's sentence leads: {v:#?}"
    );
    assert_eq!(
        v.hits[0].detail,
        "process 4711 stopped by a signal (SIGSTOP or SIGTSTP), CPU time not advancing (28.8 s), 74 threads, 312 open fds; port 127.0.0.11:9092 listening (its socket); no request answered for 12 s"
    );
    assert!(
        rules(&v).contains(&"no_answer"),
        "the protocol's view stays"
    );
    assert!(!rules(&v).contains(&"process_alive_no_answer"));
}

#[test]
fn a_stopped_process_is_a_zombie_even_in_the_round_it_still_answered() {
    let mut w = World::healthy();
    w.host.insert(1, host(Some(ProcessState::Traced), true));
    let v = w.judge().remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Zombie);
    assert!(hit_of(&v, "process_stopped")
        .detail
        .contains("it answers requests"));
}

#[test]
fn a_running_process_that_does_not_answer_gets_the_host_evidence() {
    let mut w = World::healthy();
    w.silent(1);
    let mut h = host(Some(ProcessState::Sleeping), true);
    if let Some(p) = h.process.as_mut() {
        p.threads_in_io_wait = Some(12);
    }
    w.host.insert(1, h);
    let v = w.judge_with(&answered_12s_ago()).remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Zombie);
    assert_eq!(v.hits[0].rule, Rule::ProcessAliveNoAnswer);
    assert!(
        v.hits[0]
            .detail
            .starts_with("process 4711 running (sleeping), CPU time advancing, 74 threads, 12 in uninterruptible I/O wait (D)"),
        "{}",
        v.hits[0].detail
    );
    assert!(v.hits[0].detail.ends_with("no request answered for 12 s"));
}

#[test]
fn a_gone_process_is_down_even_when_the_cluster_is_invisible() {
    let mut w = World::healthy();
    for id in 1..=3 {
        w.connect_timeout(id);
    }
    w.host.insert(1, host(None, false));
    let v = w.judge().remove(&1).unwrap();
    assert_eq!(
        v.state,
        BrokerState::Down,
        "the host saw it, the network did not: {v:#?}"
    );
    assert_eq!(
        hit_of(&v, "process_gone").detail,
        "no process found (pid file /run/k.pid names 4711, which is not running); port 127.0.0.11:9092 not listening; no request answered this round"
    );
    // Brokers without host mode stay unknown.
    assert_eq!(w.judge()[&2].state, BrokerState::Unknown);
}

#[test]
fn a_gone_process_behind_an_answering_port_points_at_the_lookup() {
    let mut w = World::healthy();
    w.host.insert(1, host(None, true));
    let v = w.judge().remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Degraded);
    assert!(hit_of(&v, "process_gone")
        .detail
        .contains("check the host.brokers process setting"));
}

#[test]
fn an_exited_process_is_down() {
    let mut w = World::healthy();
    w.refused(1);
    w.host.insert(1, host(Some(ProcessState::Zombie), false));
    let v = w.judge().remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Down);
    assert!(hit_of(&v, "process_exited")
        .detail
        .contains("exited, not yet reaped"));
    assert!(!rules(&v).contains(&"port_not_listening"));
}

#[test]
fn ports_not_listening_or_held_by_another_process_degrade() {
    let mut w = World::healthy();
    w.host.insert(1, host(Some(ProcessState::Running), false));
    let v = w.judge().remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Degraded);
    assert_eq!(
        hit_of(&v, "port_not_listening").detail,
        "process 4711 is running, but nothing listens on 127.0.0.11:9092"
    );
    let mut h = host(Some(ProcessState::Running), true);
    h.ports[0].owned_by_process = Some(false);
    w.host.insert(1, h);
    let v = w.judge().remove(&1).unwrap();
    assert!(hit_of(&v, "port_not_listening")
        .detail
        .ends_with("127.0.0.11:9092 is held by another process"));
    // Unknown ownership (descriptors unreadable) is no finding.
    let mut h = host(Some(ProcessState::Running), true);
    h.ports[0].owned_by_process = None;
    w.host.insert(1, h);
    assert_eq!(w.judge()[&1].state, BrokerState::Healthy);
}

#[test]
fn low_and_unreadable_log_dirs_degrade() {
    let mut w = World::healthy();
    let mut h = host(Some(ProcessState::Sleeping), true);
    h.log_dirs[0].free_bytes = Some(1 << 20);
    h.log_dirs[0].total_bytes = Some(16 << 20);
    h.log_dirs[0].free_ratio = Some(1.0 / 16.0);
    h.log_dir_min_free_ratio = 0.1;
    h.log_dirs.push(LogDirSeen {
        path: "/mnt/gone".into(),
        total_bytes: None,
        free_bytes: None,
        free_ratio: None,
        error: Some("cannot read /mnt/gone: No such file or directory".into()),
    });
    w.host.insert(1, h.clone());
    let v = w.judge().remove(&1).unwrap();
    assert_eq!(v.state, BrokerState::Degraded);
    assert_eq!(
        hit_of(&v, "log_dir_low_space").detail,
        "low free space, below 10.0%: log dir /var/lib/kafka: 1.0 MiB free of 16.0 MiB (6.2%)"
    );
    assert!(hit_of(&v, "log_dir_unreadable")
        .detail
        .contains("/mnt/gone"));
    // Above the threshold: nothing.
    h.log_dir_min_free_ratio = 0.05;
    h.log_dirs.pop();
    w.host.insert(1, h);
    assert_eq!(w.judge()[&1].state, BrokerState::Healthy);
}

#[test]
fn a_healthy_host_adds_nothing_and_a_failed_look_says_nothing() {
    let mut w = World::healthy();
    w.host.insert(1, host(Some(ProcessState::Sleeping), true));
    assert_eq!(w.judge()[&1].state, BrokerState::Healthy);
    assert!(w.judge()[&1].hits.is_empty());
    let mut failed = host(None, false);
    failed.not_found = None;
    failed.error = Some("reading /proc took over 3 s".into());
    failed.ports.clear();
    w.host.insert(1, failed);
    assert_eq!(
        w.judge()[&1].state,
        BrokerState::Healthy,
        "no look, no finding"
    );
}

#[test]
fn the_last_answer_is_remembered() {
    let mut w = World::healthy();
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
    let mut memory = BTreeMap::new();
    let verdicts: Vec<BrokerVerdict> = w.judge().into_values().collect();
    remember(&mut memory, &verdicts, t0);
    assert_eq!(memory[&1].last_answered_at, Some(t0));
    w.silent(1);
    let verdicts: Vec<BrokerVerdict> = w.judge().into_values().collect();
    remember(&mut memory, &verdicts, t0 + Duration::from_secs(5));
    assert_eq!(memory[&1].last_answered_at, Some(t0), "not while silent");
    assert_eq!(
        memory[&2].last_answered_at,
        Some(t0 + Duration::from_secs(5))
    );
}
