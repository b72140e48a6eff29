//! The liveness state machine and threshold, with explicit instants (tokio's paused clock).

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::*;

const FLOOR: Duration = Duration::from_secs(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn the_threshold_is_the_floor_for_a_fast_broker_and_a_multiple_for_a_slow_one() {
    assert_eq!(threshold(FLOOR, None), FLOOR);
    assert_eq!(threshold(FLOOR, Some(ms(3))), FLOOR);
    assert_eq!(threshold(FLOOR, Some(ms(400))), ms(1600));
}

/// A fast broker is caught at the floor; one that usually answers in 400 ms is not suspect
/// at 1.2 s of silence, only past four times its slowest answer.
#[tokio::test(start_paused = true)]
async fn a_slow_but_working_broker_is_not_past_its_threshold_where_a_fast_one_is() {
    let mut fast = Tracker::new(FLOOR);
    let mut slow = Tracker::new(FLOOR);
    for _ in 0..10 {
        let t = Instant::now();
        fast.sent(t);
        slow.sent(t);
        fast.answered(t + ms(3), ms(3));
        slow.answered(t + ms(400), ms(400));
        tokio::time::advance(ms(500)).await;
    }
    let t = Instant::now();
    fast.sent(t);
    slow.sent(t);
    tokio::time::advance(ms(1200)).await;
    let now = Instant::now();
    assert!(fast.past_threshold(now));
    assert!(!slow.past_threshold(now));
    tokio::time::advance(ms(500)).await;
    assert!(slow.past_threshold(Instant::now()));
}

/// The silence counts from the first unanswered request, across reconnects, and ends with
/// the next answer; a silence past the threshold is remembered as a spell and does not
/// raise the threshold.
#[tokio::test(start_paused = true)]
async fn a_silence_ages_from_the_first_unanswered_request_until_an_answer() {
    let mut t = Tracker::new(FLOOR);
    let start = Instant::now();
    t.sent(start);
    assert!(
        !t.answered(start + ms(2), ms(2)),
        "an ordinary answer is no news"
    );
    let frozen = start + ms(500);
    t.sent(frozen);
    t.sent(frozen + ms(5000)); // a reconnect after the request deadline
    assert_eq!(t.crossing(), Some(frozen + FLOOR));
    assert!(!t.past_threshold(frozen + ms(999)));
    assert!(t.past_threshold(frozen + ms(1000)));
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
    let fact = t.fact("b:9092", frozen + ms(1400), wall);
    assert_eq!(fact.silent_for(wall), Some(ms(1400)));
    assert!(fact.past_threshold(wall));
    assert!(!fact.answering(wall));
    assert!(
        t.answered(frozen + ms(6000), ms(3)),
        "the end of a spell is news"
    );
    assert_eq!(t.threshold(), FLOOR, "the silence is not an answer time");
    let fact = t.fact("b:9092", frozen + ms(6000), wall);
    assert_eq!(fact.spells.len(), 1);
    assert_eq!(fact.spells[0].length, ms(6000));
    assert!(fact.answering(wall));
}

/// A fresh connection accepted during the silence makes a later timed-out one the same
/// process with a full accept queue; a refusal is a port closed.
#[tokio::test(start_paused = true)]
async fn fresh_connections_tell_accepted_from_refused_and_from_a_full_queue() {
    let mut t = Tracker::new(FLOOR);
    let s = Instant::now();
    t.sent(s);
    assert_eq!(t.side_due(), Some(s + FLOOR));
    assert!(t.side_result(s + FLOOR, SideOutcome::Accepted, ms(1), "accepted".into()));
    assert_eq!(t.side_due(), Some(s + FLOOR + SIDE_CONNECT_EVERY));
    assert!(t.side_result(
        s + ms(7000),
        SideOutcome::TimedOut,
        ms(2000),
        "no handshake".into()
    ));
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
    let fact = t.fact("b:9092", s + ms(7000), wall);
    assert!(fact.accepted_in_silence);
    assert_eq!(
        fact.side.as_ref().map(|x| x.outcome),
        Some(SideOutcome::TimedOut)
    );
    assert!(fact.refused_since.is_none());
    assert!(t.side_result(s + ms(12000), SideOutcome::Refused, ms(1), "refused".into()));
    assert!(t
        .fact("b:9092", s + ms(12000), wall)
        .refused_since
        .is_some());
    // Answering again clears all of it.
    assert!(t.answered(s + ms(20000), ms(2)));
    let fact = t.fact("b:9092", s + ms(20000), wall);
    assert!(fact.side.is_none() && fact.refused_since.is_none() && !fact.accepted_in_silence);
}

#[tokio::test(start_paused = true)]
async fn a_refusal_is_news_once() {
    let mut t = Tracker::new(FLOOR);
    let s = Instant::now();
    assert!(t.refused(s, "refused".into()));
    assert!(!t.refused(s + ms(500), "refused".into()));
    assert!(
        t.answered(s + ms(9000), ms(4)),
        "the port open again is news"
    );
}

/// GC thrashing: 2 s silent in every 4 s leaves one spell per pause in the window.
#[tokio::test(start_paused = true)]
async fn short_spells_are_remembered_within_the_window() {
    let mut t = Tracker::new(FLOOR);
    let s = Instant::now();
    for k in 0..10u32 {
        let pause = s + Duration::from_secs(4) * k;
        t.sent(pause);
        t.answered(pause + ms(2000), ms(3));
    }
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
    let fact = t.fact("b:9092", s + Duration::from_secs(38), wall);
    assert_eq!(fact.spells.len(), 10);
    assert!(fact.answering(wall));
}

fn board_of(ids: &[BrokerId]) -> Board {
    let board = Board::default();
    for &id in ids {
        board.lock().insert(
            id,
            Entry {
                address: format!("127.0.0.1:{}", 9000 + id),
                tracker: Tracker::new(Duration::from_secs(1)),
                registered: None,
            },
        );
    }
    board
}

/// A peer fenced is news once: the first broker to list it gone says so, the next peers
/// telling the same are none, and a stale broker that lists it all along is none either.
/// Its return is news again.
#[test]
fn a_changed_registered_list_is_news_once() {
    let board = board_of(&[1, 2, 3]);
    assert!(!board.listed(1, vec![1, 2, 3]), "a first answer is no news");
    assert!(!board.listed(2, vec![3, 2, 1]), "order is no news");
    assert!(!board.listed(3, vec![1, 2, 3]));
    assert!(board.listed(2, vec![2, 3]), "broker 1 fenced");
    assert!(!board.listed(3, vec![2, 3]), "the same change again");
    assert!(
        !board.listed(1, vec![1, 2, 3]),
        "the isolated one's stale list"
    );
    assert!(!board.listed(2, vec![2, 3]));
    assert!(board.listed(3, vec![1, 2, 3]), "broker 1 back");
    assert!(!board.listed(2, vec![1, 2, 3]));
    assert!(!board.listed(9, vec![1]), "a broker not watched");
}

/// About `LISTERS` lists per interval: every request of every task in a small cluster, a
/// staggered few in a large one.
#[test]
fn registered_lists_are_asked_for_by_a_few_brokers_per_interval() {
    let mut live = Liveness::new(LivenessSettings {
        interval: Duration::from_millis(500),
        floor: Duration::from_secs(1),
        wire: crate::observe::wire::WireOptions::default(),
        own: Default::default(),
    });
    let endpoints = |n: i32| -> Vec<BrokerEndpoint> {
        (1..=n)
            .map(|id| BrokerEndpoint {
                id,
                host: "127.0.0.1".into(),
                port: 1,
                rack: None,
            })
            .collect()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    live.track(&endpoints(3));
    let board = live.board();
    assert!((1..=3).all(|id| (0..10).all(|n| board.lists_now(id, n))));
    live.track(&endpoints(1000));
    for n in 0..10 {
        let asking = (1..=1000).filter(|&id| board.lists_now(id, n)).count();
        assert!(
            (LISTERS..=LISTERS + 1).contains(&asking),
            "request {n}: {asking}"
        );
    }
}

/// `check` waits for each broker's liveness to say something: an answer, a refusal, or a
/// silence past the threshold with a fresh connection tried beside it; not a bare silence.
#[tokio::test(start_paused = true)]
async fn a_fact_is_settled_by_an_answer_a_refusal_or_a_silence_with_its_fresh_connection() {
    let wall = SystemTime::now();
    let start = Instant::now();
    let fact = |t: &Tracker| t.fact("b:9092", Instant::now(), wall + (Instant::now() - start));
    let mut t = Tracker::new(FLOOR);
    t.sent(Instant::now());
    assert!(!fact(&t).settled(wall), "nothing known yet");
    tokio::time::advance(ms(3)).await;
    t.answered(Instant::now(), ms(3));
    assert!(fact(&t).settled(wall + ms(3)));

    let mut silent = Tracker::new(FLOOR);
    silent.sent(Instant::now());
    tokio::time::advance(FLOOR + ms(10)).await;
    let now = wall + (Instant::now() - start);
    assert!(
        !fact(&silent).settled(now),
        "past the floor, nothing tried beside it"
    );
    silent.side_result(Instant::now(), SideOutcome::Accepted, ms(1), String::new());
    assert!(fact(&silent).settled(now));

    let mut refused = Tracker::new(FLOOR);
    refused.refused(Instant::now(), "refused".into());
    assert!(fact(&refused).settled(now));
}

/// Issue 31: a stall is recorded as a pause (how long, when) and kept out of the answer
/// times, so it neither raises the threshold nor hides the next one; a freeze longer than
/// [`PAUSE_TOLERANCE_FLOORS`] floors teaches no tolerance.
#[tokio::test(start_paused = true)]
async fn stalls_are_the_brokers_pause_record_and_freezes_are_not() {
    let mut t = answering_in_2_ms().await;
    // A 0.8 s stall: under the threshold, no news, but a pause.
    let at = Instant::now();
    t.sent(at);
    tokio::time::advance(ms(800)).await;
    assert!(!t.answered(Instant::now(), ms(800)));
    assert_eq!(t.threshold(), FLOOR, "the stall is no answer time");
    let f = t.fact("b:9092", Instant::now(), SystemTime::now());
    assert_eq!(f.pauses.len(), 1);
    assert_eq!(f.pauses[0].length, ms(800));
    assert!(f.spells.is_empty());
    assert_eq!(f.median, Some(ms(2)));
    // A 10 s freeze: a spell past the threshold, no pause.
    let at = Instant::now();
    t.sent(at);
    tokio::time::advance(Duration::from_secs(10)).await;
    assert!(t.answered(Instant::now(), Duration::from_secs(10)));
    let f = t.fact("b:9092", Instant::now(), SystemTime::now());
    assert_eq!(f.pauses.len(), 1);
    assert_eq!(f.spells.len(), 1);
}

/// `detect` freezes each broker again every third trial: a first freeze that lasted until
/// Kafka fenced it (2.9 s of silence) is no pause, and the next freeze is past the threshold
/// at the floor, not at 3.4 s.
#[tokio::test(start_paused = true)]
async fn a_freeze_as_long_as_kafkas_fencing_teaches_no_tolerance() {
    let mut t = answering_in_2_ms().await;
    let at = Instant::now();
    t.sent(at);
    tokio::time::advance(ms(2_900)).await;
    t.answered(Instant::now(), ms(2_900));
    let f = t.fact("b:9092", Instant::now(), SystemTime::now());
    assert!(f.pauses.is_empty(), "{:?}", f.pauses);
    // A 1.9 s one is a pause (GC trouble), remembered.
    let at = Instant::now();
    t.sent(at);
    tokio::time::advance(ms(1_900)).await;
    t.answered(Instant::now(), ms(1_900));
    let f = t.fact("b:9092", Instant::now(), SystemTime::now());
    assert_eq!(f.pauses.len(), 1);
}

/// A tracker that has seen eight answers of 2 ms, 500 ms apart: its usual is known.
async fn answering_in_2_ms() -> Tracker {
    let mut t = Tracker::new(FLOOR);
    for _ in 0..8 {
        let at = Instant::now();
        t.sent(at);
        t.answered(at + ms(2), ms(2));
        tokio::time::advance(ms(500)).await;
    }
    t
}
