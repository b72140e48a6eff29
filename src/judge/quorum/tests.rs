//! The control plane's verdicts on hand-built looks.

use std::sync::Arc;

use super::*;
use crate::model::round::{AppliedMetadata, ProbeFailure, ReplicaProgress};

const T0: u64 = 1_000_000;

fn at(secs: f64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(T0) + Duration::from_secs_f64(secs)
}

fn ms(v: u64) -> Option<Duration> {
    Some(Duration::from_millis(v))
}

fn voter(id: NodeId, fetch_ms: u64, caught_up_ms: u64) -> ReplicaProgress {
    ReplicaProgress {
        id,
        log_end_offset: 100,
        last_fetch_ago: ms(fetch_ms),
        last_caught_up_ago: ms(caught_up_ms),
    }
}

/// Leader `leader` of voters 0, 100, 101, all fetching 100 ms ago.
fn described(leader: NodeId) -> QuorumDescription {
    QuorumDescription {
        leader,
        epoch: 4,
        high_watermark: 100,
        voters: [0, 100, 101]
            .iter()
            .map(|id| voter(*id, 100, 100))
            .collect(),
        observers: vec![voter(1, 100, 100), voter(2, 100, 100)],
        endpoints: BTreeMap::new(),
        version: 2,
    }
}

fn answered(id: NodeId, role: ControllerRole) -> ControllerLook {
    ControllerLook {
        address: format!("c{id}:9093"),
        id: Some(id),
        outcome: Ok(role),
        accepted: true,
        failing_since: None,
        accepted_in_streak: false,
        ever_reached: true,
    }
}

fn failing(id: NodeId, kind: FailureKind, accepted: bool, since: f64) -> ControllerLook {
    ControllerLook {
        address: format!("c{id}:9093"),
        id: Some(id),
        outcome: Err(ProbeFailure {
            kind,
            detail: kind.as_label().into(),
            after: Duration::from_secs(1),
        }),
        accepted,
        failing_since: Some(at(since)),
        accepted_in_streak: accepted,
        ever_reached: true,
    }
}

fn look(
    controllers: Vec<ControllerLook>,
    d: Option<QuorumDescription>,
    still_since: Option<f64>,
) -> Arc<QuorumObservation> {
    let last_leader = d.as_ref().map(|d| (d.leader, d.epoch, at(10.0)));
    Arc::new(QuorumObservation {
        at: at(10.0),
        controllers,
        via_broker: None,
        description: d,
        last_leader,
        high_watermark_still_since: still_since.map(at),
        last_progress_at: Some(at(still_since.unwrap_or(10.0))),
        metadata_changed_at: None,
        metadata_applied: None,
    })
}

fn judge(l: &Arc<QuorumObservation>, now: f64) -> QuorumReport {
    judge_quorum(
        l,
        &mut QuorumMemory::default(),
        &QuorumSettings::default(),
        at(now),
    )
}

fn states(r: &QuorumReport) -> Vec<(NodeId, &'static str)> {
    r.controllers
        .iter()
        .map(|c| (c.controller, c.state.as_label()))
        .collect()
}

fn all_answer(leader: NodeId) -> Vec<ControllerLook> {
    [0, 100, 101]
        .iter()
        .map(|id| {
            answered(
                *id,
                if *id == leader {
                    ControllerRole::Leader
                } else {
                    ControllerRole::Follower
                },
            )
        })
        .collect()
}

#[test]
fn a_healthy_quorum_names_nobody() {
    let r = judge(&look(all_answer(0), Some(described(0)), None), 10.5);
    assert_eq!(
        states(&r),
        [(0, "healthy"), (100, "healthy"), (101, "healthy")]
    );
    assert!(r.problem.is_none());
    assert!(!r.settling);
    assert!(r.controller(0).unwrap().leader);
    // A high watermark still for less than the stall is a quiet moment, not a wedge.
    let r = judge(&look(all_answer(0), Some(described(0)), Some(9.0)), 10.5);
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert_eq!(r.controller(0).unwrap().state, ControllerState::Healthy);
}

/// The one-controller lab's controller frozen: it accepts and never answers, nothing
/// describes the quorum. The controller is a zombie, and the quorum has no leader at once:
/// no other voter could elect one.
#[test]
fn the_only_controller_frozen_is_a_zombie_and_the_quorum_has_no_leader() {
    let mut m = QuorumMemory::default();
    let s = QuorumSettings::default();
    let healthy = look(
        vec![answered(0, ControllerRole::Leader)],
        Some(QuorumDescription {
            voters: vec![voter(0, 0, 0)],
            ..described(0)
        }),
        None,
    );
    judge_quorum(&healthy, &mut m, &s, at(9.0));
    let frozen = Arc::new(QuorumObservation {
        at: at(11.0),
        controllers: vec![failing(0, FailureKind::Timeout, true, 10.2)],
        via_broker: None,
        description: None,
        last_leader: Some((0, 4, at(10.0))),
        high_watermark_still_since: None,
        last_progress_at: Some(at(10.0)),
        metadata_changed_at: None,
        metadata_applied: None,
    });
    let r = judge_quorum(&frozen, &mut m, &s, at(11.5));
    assert_eq!(states(&r), [(0, "zombie")]);
    let c = r.controller(0).unwrap();
    assert_eq!(c.hits[0].rule, ControllerRule::NoAnswer);
    assert_eq!(c.held_since, Some(at(10.2)));
    assert_eq!(c.page_after, None, "a frozen controller pages at once");
    let p = r.problem.expect("no leader");
    assert_eq!(p.kind, QuorumProblemKind::NoLeader);
    assert_eq!(p.suspects, [0]);
    assert_eq!(p.since, at(10.0));
    assert!(
        p.detail.contains("controller 0 led at epoch 4"),
        "{}",
        p.detail
    );
    assert!(r.settling);
}

/// Three controllers, the active one frozen: the other two still answer (as followers), so
/// Kafka elects one of them within seconds. The frozen one is named; the quorum is given
/// its election time before it is a problem of its own.
#[test]
fn a_frozen_leader_among_three_is_named_and_the_quorum_waits_for_the_election() {
    let mut m = QuorumMemory::default();
    let s = QuorumSettings::default();
    judge_quorum(
        &look(all_answer(0), Some(described(0)), None),
        &mut m,
        &s,
        at(9.0),
    );
    let frozen = Arc::new(QuorumObservation {
        at: at(11.0),
        controllers: vec![
            failing(0, FailureKind::Timeout, true, 10.1),
            answered(100, ControllerRole::Follower),
            answered(101, ControllerRole::Follower),
        ],
        via_broker: None,
        description: None,
        last_leader: Some((0, 4, at(10.0))),
        high_watermark_still_since: None,
        last_progress_at: Some(at(10.0)),
        metadata_changed_at: None,
        metadata_applied: None,
    });
    let r = judge_quorum(&frozen, &mut m, &s, at(11.5));
    assert_eq!(
        states(&r),
        [(0, "zombie"), (100, "healthy"), (101, "healthy")]
    );
    assert!(r.problem.is_none(), "{:?}", r.problem);
    // No election within the grace: now it is.
    let r = judge_quorum(&frozen, &mut m, &s, at(17.0));
    assert_eq!(r.problem.unwrap().suspects, [0]);
    // Elected: 100 leads, 0 still frozen, the leader has not heard from it.
    let mut d = described(100);
    d.voters[0].last_fetch_ago = ms(4000);
    d.voters[0].last_caught_up_ago = ms(4000);
    let after = look(
        vec![
            failing(0, FailureKind::Timeout, true, 10.1),
            answered(100, ControllerRole::Leader),
            answered(101, ControllerRole::Follower),
        ],
        Some(d),
        None,
    );
    let r = judge_quorum(&after, &mut m, &s, at(18.0));
    assert!(r.problem.is_none());
    let zero = r.controller(0).unwrap();
    assert_eq!(zero.state, ControllerState::Zombie);
    assert!(
        zero.hits
            .iter()
            .any(|h| h.rule == ControllerRule::NotFetching),
        "{:?}",
        zero.hits
    );
    assert!(r.controller(100).unwrap().leader);
}

/// `stall --controller`: the leader answers DescribeQuorum (its Raft threads run) and its
/// high watermark stands still: it is wedged, and the quorum's leader does not advance.
#[test]
fn a_leader_whose_high_watermark_stands_still_is_wedged() {
    let l = look(all_answer(100), Some(described(100)), Some(7.0));
    let r = judge(&l, 10.0);
    assert_eq!(
        states(&r),
        [(0, "healthy"), (100, "zombie"), (101, "healthy")]
    );
    let c = r.controller(100).unwrap();
    assert_eq!(c.hits[0].rule, ControllerRule::Wedged);
    assert_eq!(c.held_since, Some(at(7.0)));
    let p = r.problem.clone().unwrap();
    assert_eq!(p.kind, QuorumProblemKind::LeaderNotAdvancing);
    assert_eq!(p.suspects, [100]);
    assert_eq!(r.high_watermark_still_for, Some(Duration::from_secs(3)));
}

/// Two followers behind and not fetching: the leader cannot commit; they are at fault.
#[test]
fn fewer_than_a_majority_caught_up_names_the_voters_behind() {
    let mut d = described(0);
    for v in d.voters.iter_mut().filter(|v| v.id != 0) {
        v.last_fetch_ago = ms(8000);
        v.last_caught_up_ago = ms(8000);
    }
    let r = judge(&look(Vec::new(), Some(d), Some(6.0)), 10.0);
    let p = r.problem.clone().unwrap();
    assert_eq!(p.kind, QuorumProblemKind::MajorityNotCaughtUp);
    assert_eq!(p.suspects, [100, 101]);
    assert_eq!(
        states(&r),
        [(0, "healthy"), (100, "lagging"), (101, "lagging")]
    );
}

/// A controller stopped (a restart, or killed) while the others keep the quorum: down, and
/// paged only if it is not back within the restart grace.
#[test]
fn a_refused_follower_is_down_and_held_for_the_restart_grace() {
    let mut c = all_answer(0);
    c[2] = failing(101, FailureKind::ConnectionRefused, false, 9.5);
    let r = judge(&look(c, Some(described(0)), None), 10.0);
    let v = r.controller(101).unwrap();
    assert_eq!(v.state, ControllerState::Down);
    assert_eq!(v.hits[0].rule, ControllerRule::PortClosed);
    assert_eq!(v.page_after, Some(Duration::from_secs(120)));
    assert!(r.problem.is_none());
}

/// Without `controllers:` the quorum is asked through brokers: nothing answers, so no
/// leader once Kafka has had its election time (it may be electing: nothing says how many
/// voters are alive), naming the last leader. The routine bench's false page was the
/// election a follower controller's restart made (Kafka 4.1: 4.5 s without a leader),
/// read as no leader at once.
#[test]
fn through_brokers_only_a_silent_quorum_names_its_last_leader() {
    let l = Arc::new(QuorumObservation {
        at: at(11.0),
        controllers: Vec::new(),
        via_broker: Some((
            "b1:9092".into(),
            Err(ProbeFailure {
                kind: FailureKind::Timeout,
                detail: "no answer within 1000ms during describe_quorum".into(),
                after: Duration::from_secs(1),
            }),
        )),
        description: None,
        last_leader: Some((0, 4, at(10.0))),
        high_watermark_still_since: None,
        last_progress_at: Some(at(10.0)),
        metadata_changed_at: None,
        metadata_applied: None,
    });
    let mut m = QuorumMemory {
        voters: [0].into(),
        ..QuorumMemory::default()
    };
    let r = judge_quorum(&l, &mut m, &QuorumSettings::default(), at(15.5));
    assert!(
        r.problem.is_none(),
        "within the election time: {:?}",
        r.problem
    );
    let r = judge_quorum(&l, &mut m, &QuorumSettings::default(), at(16.5));
    let p = r.problem.clone().unwrap();
    assert_eq!((p.kind, p.suspects), (QuorumProblemKind::NoLeader, vec![0]));
    assert!(p.detail.contains("through broker b1:9092"), "{}", p.detail);
    assert_eq!(states(&r), [(0, "unknown")]);
}

/// A look in which nothing answers as leader: through broker b1 only (its DescribeQuorum
/// timed out) or, with `direct`, from controller 0 asked directly as well (a zombie); the
/// brokers have applied the metadata log up to offset 700 since `applied_since`.
fn silent_look(direct: bool, applied_since: Option<f64>) -> Arc<QuorumObservation> {
    let timeout = ProbeFailure {
        kind: FailureKind::Timeout,
        detail: "no answer within 1000ms during describe_quorum".into(),
        after: Duration::from_secs(1),
    };
    Arc::new(QuorumObservation {
        at: at(11.0),
        controllers: if direct {
            vec![failing(0, FailureKind::Timeout, true, 11.0)]
        } else {
            Vec::new()
        },
        via_broker: Some(("b1:9092".into(), Err(timeout))),
        description: None,
        last_leader: Some((0, 4, at(10.0))),
        high_watermark_still_since: None,
        last_progress_at: Some(at(10.0)),
        metadata_changed_at: None,
        metadata_applied: applied_since.map(|t| AppliedMetadata {
            offset: 700,
            since: at(t),
        }),
    })
}

/// The routine bench's false page (Kafka 4.1, no `controllers:`): DescribeQuorum through
/// the brokers failed for 22 s while a follower controller restarted, and was read as no
/// leader. Brokers that keep applying new records show a leader committing them: no
/// problem until their applied offset has stood still for `stall` (through brokers) or
/// two no-op intervals (with a controller asked directly, so that a frozen only
/// controller is named as fast as before).
#[test]
fn no_leader_needs_the_brokers_applied_metadata_to_stand_still() {
    let judged = |direct: bool, applied_since: Option<f64>, now: f64| {
        let mut m = QuorumMemory {
            voters: [0].into(),
            ..QuorumMemory::default()
        };
        judge_quorum(
            &silent_look(direct, applied_since),
            &mut m,
            &QuorumSettings::default(),
            at(now),
        )
        .problem
        .map(|p| p.kind)
    };
    // Through brokers, past the election time (the leader was last seen at 10 s):
    // applying 0.5 s ago, and 1.9 s ago, is a working quorum.
    assert_eq!(judged(false, Some(16.5), 17.0), None);
    assert_eq!(judged(false, Some(15.1), 17.0), None);
    // Still for 2 s: no leader.
    assert_eq!(
        judged(false, Some(15.0), 17.0),
        Some(QuorumProblemKind::NoLeader)
    );
    // Nothing says how far the brokers applied (an older release): as before.
    assert_eq!(judged(false, None, 17.0), Some(QuorumProblemKind::NoLeader));
    // Controller 0 asked directly: still for 1 s is enough, less is not.
    assert_eq!(judged(true, Some(11.2), 12.0), None);
    assert_eq!(
        judged(true, Some(11.0), 12.0),
        Some(QuorumProblemKind::NoLeader)
    );
}

/// A broker that refuses the watchdog DescribeQuorum (no Describe on the cluster) says
/// nothing about the quorum: no problem, whatever the applied offset.
#[test]
fn a_broker_refusing_the_watchdog_is_not_a_quorum_without_leader() {
    let mut l = (*silent_look(false, None)).clone();
    l.via_broker = Some((
        "b1:9092".into(),
        Err(ProbeFailure {
            kind: FailureKind::Authorization,
            detail: "describe_quorum: Kafka error 31 CLUSTER_AUTHORIZATION_FAILED".into(),
            after: Duration::ZERO,
        }),
    ));
    let mut m = QuorumMemory {
        voters: [0].into(),
        ..QuorumMemory::default()
    };
    let r = judge_quorum(&Arc::new(l), &mut m, &QuorumSettings::default(), at(30.0));
    assert!(r.problem.is_none(), "{:?}", r.problem);
}

/// The control plane back: broker rules that read registration hold off for `settle`.
#[test]
fn after_an_outage_the_cluster_settles_for_a_while() {
    let mut m = QuorumMemory::default();
    let s = QuorumSettings::default();
    judge_quorum(
        &look(all_answer(100), Some(described(100)), Some(5.0)),
        &mut m,
        &s,
        at(10.0),
    );
    let healthy = look(all_answer(100), Some(described(100)), None);
    assert!(judge_quorum(&healthy, &mut m, &s, at(20.0)).settling);
    assert!(!judge_quorum(&healthy, &mut m, &s, at(41.0)).settling);
}

/// A failover moves the brokers with no quorum problem at all: the active controller of
/// three froze, Kafka elected another within a second, and the new leader fenced two brokers
/// 5-8 s later (seen on the lab by `bench detect --faults controller-freeze`). A controller
/// newly zombie, and a new leader, settle the brokers' rules as a problem does; a controller
/// long gone does not keep them settled.
#[test]
fn a_failover_settles_the_brokers_without_a_quorum_problem() {
    let mut m = QuorumMemory::default();
    let s = QuorumSettings::default();
    let steady = look(all_answer(0), Some(described(0)), None);
    assert!(!judge_quorum(&steady, &mut m, &s, at(9.0)).settling);
    // Controller 0 frozen; 100 elected at once: no problem in any look.
    let mut d = described(100);
    d.epoch = 5;
    let elected = look(
        vec![
            failing(0, FailureKind::Timeout, true, 10.1),
            answered(100, ControllerRole::Leader),
            answered(101, ControllerRole::Follower),
        ],
        Some(d),
        None,
    );
    let r = judge_quorum(&elected, &mut m, &s, at(11.5));
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert_eq!(r.controller(0).unwrap().state, ControllerState::Zombie);
    assert!(r.settling, "controller 0 newly zombie, and a new leader");
    assert!(judge_quorum(&elected, &mut m, &s, at(30.0)).settling);
    // 30 s after the last move the brokers' rules apply again, though 0 is still frozen.
    assert!(!judge_quorum(&elected, &mut m, &s, at(42.0)).settling);
}

/// Controller `id` asked directly, its connects timing out since the first look: never
/// reached since the watchdog started.
fn never_reached(id: NodeId) -> ControllerLook {
    ControllerLook {
        ever_reached: false,
        ..failing(id, FailureKind::Timeout, false, 0.0)
    }
}

/// Strimzi's NetworkPolicy lets only the cluster's pods and its operator reach the
/// controller port: every configured controller's connect times out from the first look
/// on. That is the watchdog's view, not three controllers down: each is unknown, nobody
/// is paged, the report says the controllers are not watched, and the quorum is judged
/// through the brokers, as without `controllers:`.
#[test]
fn controllers_never_reached_are_not_watched_rather_than_down() {
    let c = vec![never_reached(0), never_reached(100), never_reached(101)];
    let r = judge(&look(c, Some(described(0)), None), 300.0);
    assert_eq!(
        states(&r),
        [(0, "unknown"), (100, "unknown"), (101, "unknown")]
    );
    for v in &r.controllers {
        assert_eq!(v.hits[0].rule, ControllerRule::NeverReached, "{v:?}");
        assert_eq!(v.page_after, None);
    }
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert!(!r.settling, "the brokers' rules are not held off");
    let why = r.controllers_not_watched.as_deref().unwrap_or_default();
    assert!(why.contains("3 configured controller"), "{why}");
}

/// Not reached and nothing leads through the brokers either: Kafka gets its election time
/// as through brokers only (rather than no leader at once, which configured controllers
/// that answer as too few voters would mean), then a quorum whose brokers apply nothing
/// has no leader, as before.
#[test]
fn controllers_never_reached_leave_the_quorum_to_the_brokers() {
    let mut l = (*silent_look(false, Some(10.0))).clone();
    l.controllers = vec![never_reached(0), never_reached(100), never_reached(101)];
    let l = Arc::new(l);
    let judged = |now: f64| {
        let mut m = QuorumMemory::default();
        judge_quorum(&l, &mut m, &QuorumSettings::default(), at(now))
    };
    assert!(judged(12.0).problem.is_none(), "within the election time");
    let r = judged(17.0);
    assert_eq!(r.problem.map(|p| p.kind), Some(QuorumProblemKind::NoLeader));
    assert!(r
        .controllers
        .iter()
        .all(|c| c.state == ControllerState::Unknown));
}

/// A controller that was reached once and then stops answering is a real fault, judged as
/// before: down once its connects time out (held for the restart grace), and the others,
/// never reached, are down too, since the path to the controllers was shown to exist.
#[test]
fn a_controller_reached_once_then_unreachable_is_still_down() {
    let mut c = vec![never_reached(0), never_reached(100), never_reached(101)];
    c[1].ever_reached = true;
    let r = judge(&look(c, Some(described(0)), None), 300.0);
    assert_eq!(states(&r), [(0, "down"), (100, "down"), (101, "down")]);
    assert_eq!(r.controllers[1].hits[0].rule, ControllerRule::Unreachable);
    assert_eq!(r.controllers[1].page_after, Some(Duration::from_secs(120)));
    assert!(r.controllers_not_watched.is_none());
}

/// Issue 38 item 4: the only controller's looks failed while the watchdog itself was
/// paused: no zombie and no quorum without leader on that; a controller failing since
/// before the watchdog fell ill stays as it was.
#[test]
fn a_controller_silent_while_the_watchdog_was_paused_is_unknown_not_a_zombie() {
    use crate::judge::own_health::judge as judge_own;
    use crate::model::own_health::{Episode, OwnHealthFacts, Sickness};
    let frozen = |since: f64| {
        Arc::new(QuorumObservation {
            at: at(11.0),
            controllers: vec![failing(0, FailureKind::Timeout, true, since)],
            via_broker: None,
            description: None,
            last_leader: Some((0, 4, at(10.0))),
            high_watermark_still_since: None,
            last_progress_at: Some(at(10.0)),
            metadata_changed_at: None,
            metadata_applied: None,
        })
    };
    let facts = |tick: f64| OwnHealthFacts {
        last_tick: Some(at(tick)),
        episodes: vec![Episode {
            kind: Sickness::Paused,
            started: at(5.0),
            ended: Some(at(11.0)),
            detail: "its 100 ms timer fired 6.0 s late".into(),
        }],
        ..OwnHealthFacts::default()
    };
    let own = judge_own(&facts(11.4), at(11.5));
    let mut r = judge(&frozen(10.2), 11.5);
    assert_eq!(states(&r), [(0, "zombie")], "the test's premise");
    assert!(r.problem.is_some());
    hold_while_unwell(&mut r, &own, at(11.5));
    assert_eq!(states(&r), [(0, "unknown")]);
    assert_eq!(
        r.controllers[0].hits[0].rule,
        ControllerRule::WatchdogUnwell
    );
    assert!(r.problem.is_none(), "{:?}", r.problem);
    // Failing since before the pause began: its own fault, as it was.
    let mut r = judge(&frozen(4.0), 11.5);
    hold_while_unwell(&mut r, &own, at(11.5));
    assert_eq!(states(&r), [(0, "zombie")]);
    // Past the settle, its looks are judged as ever.
    let mut r = judge(&frozen(10.2), 22.0);
    hold_while_unwell(&mut r, &judge_own(&facts(21.9), at(22.0)), at(22.0));
    assert_eq!(states(&r), [(0, "zombie")]);
}
