use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A state whose tick has run once at `t0`, with the clocks in step.
fn ticking() -> (State, Instant, SystemTime) {
    let (t0, w0) = (Instant::now(), SystemTime::now());
    let mut s = State::default();
    s.ticked(t0, w0, Duration::ZERO, Some(Duration::ZERO));
    (s, t0, w0)
}

fn kinds(s: &State, now: Instant, wall: SystemTime) -> Vec<(Sickness, bool)> {
    s.facts(now, wall)
        .episodes
        .iter()
        .map(|e| (e.kind, e.ended.is_none()))
        .collect()
}

#[test]
fn a_tick_seconds_late_is_a_pause_that_ended_when_it_fired() {
    let (mut s, t0, w0) = ticking();
    let (t1, w1) = (t0 + Duration::from_secs(30), w0 + Duration::from_secs(30));
    s.ticked(t1, w1, Duration::from_secs(30) - TICK, Some(Duration::ZERO));
    let f = s.facts(t1, w1);
    assert_eq!(f.episodes.len(), 1, "{f:?}");
    let e = &f.episodes[0];
    assert_eq!(e.kind, Sickness::Paused);
    assert_eq!(e.ended, Some(w1));
    assert!(e.started <= w0 + ms(200), "{e:?}");
    assert!(e.detail.contains("29.9 s late"), "{}", e.detail);
    assert_eq!(f.clock_jumps, 1);
    assert_eq!(f.last_tick, Some(w1));
}

#[test]
fn a_lag_lasts_until_a_tick_is_on_time_again() {
    let (mut s, t0, w0) = ticking();
    let at = |n: u64| (t0 + ms(n), w0 + ms(n));
    let (t1, w1) = at(500);
    s.ticked(t1, w1, ms(400), Some(Duration::ZERO));
    assert_eq!(kinds(&s, t1, w1), [(Sickness::EventLoopLag, true)]);
    let (t2, w2) = at(900);
    s.ticked(t2, w2, ms(300), Some(Duration::ZERO));
    let (t3, w3) = at(1000);
    s.ticked(t3, w3, ms(3), Some(Duration::ZERO));
    let f = s.facts(t3, w3);
    assert_eq!(f.episodes.len(), 1, "one spell, not two: {f:?}");
    assert_eq!(f.episodes[0].ended, Some(w3));
    assert!(
        f.episodes[0].detail.contains("400 ms late"),
        "the worst kept: {f:?}"
    );
    assert_eq!(f.late, [(Timer::Tick, ms(400))]);
    // Lag of a few ms is no spell at all.
    let (t4, w4) = at(1100);
    s.ticked(t4, w4, ms(30), Some(Duration::ZERO));
    assert_eq!(s.facts(t4, w4).episodes.len(), 1);
}

#[test]
fn a_suspend_and_a_wall_clock_step_are_clock_jumps() {
    let (mut s, t0, w0) = ticking();
    // Suspended 12 s: the monotonic clock did not see it, the wall clock did.
    let (t1, w1) = (t0 + TICK, w0 + TICK + Duration::from_secs(12));
    s.ticked(t1, w1, Duration::ZERO, Some(Duration::from_secs(12)));
    let f = s.facts(t1, w1);
    let words: Vec<&str> = f.episodes.iter().map(|e| e.detail.as_str()).collect();
    assert!(words[0].contains("suspended for 12.0 s"), "{words:?}");
    // The wall clock moved 12 s against the monotonic one too.
    assert!(words[1].contains("stepped forward by 12.0 s"), "{words:?}");
    let (t2, w2) = (t1 + TICK, w1 + TICK - Duration::from_secs(5));
    s.ticked(t2, w2, Duration::ZERO, Some(Duration::from_secs(12)));
    let f = s.facts(t2, w2);
    assert!(
        f.episodes[2].detail.contains("stepped back by 5.0 s"),
        "{f:?}"
    );
    assert!(f.episodes.iter().all(|e| e.kind == Sickness::ClockJump));
    assert_eq!(f.clock_jumps, 3);
    // Clocks in step again: nothing more.
    s.ticked(
        t2 + TICK,
        w2 + TICK,
        Duration::ZERO,
        Some(Duration::from_secs(12)),
    );
    assert_eq!(s.facts(t2 + TICK, w2 + TICK).clock_jumps, 3);
}

#[test]
fn cpu_refused_for_a_quarter_of_the_second_is_starvation() {
    let (mut s, t0, w0) = ticking();
    let file = std::path::PathBuf::from("/cg/wd/cpu.stat");
    let parent = std::path::PathBuf::from("/cg/cpu.stat");
    s.cpu(t0, vec![(file.clone(), ms(100)), (parent.clone(), ms(0))]);
    // The parent's quota refused 600 ms of the next second; the group's own 100 ms.
    let t1 = t0 + Duration::from_secs(1);
    s.cpu(t1, vec![(file.clone(), ms(200)), (parent.clone(), ms(600))]);
    let f = s.facts(t1, w0 + Duration::from_secs(1));
    assert_eq!(f.cpu_throttled, ms(600), "the largest, not the sum");
    assert_eq!(f.episodes.len(), 1);
    assert_eq!(f.episodes[0].kind, Sickness::CpuThrottled);
    assert!(f.episodes[0].detail.contains("600 ms of 1000 ms"), "{f:?}");
    // 100 ms of the next second: it ends.
    let t2 = t1 + Duration::from_secs(1);
    s.cpu(t2, vec![(file, ms(300)), (parent, ms(650))]);
    let f = s.facts(t2, w0 + Duration::from_secs(2));
    assert!(f.episodes[0].ended.is_some(), "{f:?}");
    assert_eq!(f.cpu_throttled, ms(700));
}

fn counters(sent: u32, retrans: u32) -> TcpCounters {
    TcpCounters {
        data_segs_out: sent,
        total_retrans: retrans,
        ..TcpCounters::default()
    }
}

#[test]
fn retransmissions_to_two_hosts_are_own_packet_loss_to_one_host_are_not() {
    let (mut s, t0, w0) = ticking();
    // One broker's connection loses packets: its own path, not the watchdog's.
    s.tcp("10.0.0.1:9092", t0, counters(10, 0));
    s.tcp("10.0.0.1:9092", t0 + ms(100), counters(50, 5));
    s.tcp("10.0.0.2:9092", t0 + ms(100), counters(40, 0));
    assert!(kinds(&s, t0 + ms(100), w0).is_empty());
    // A second host's connection does too: the watchdog's side.
    s.tcp("10.0.0.2:9092", t0 + ms(200), counters(80, 2));
    let f = s.facts(t0 + ms(200), w0 + ms(200));
    assert_eq!(f.episodes.len(), 1, "{f:?}");
    assert_eq!(f.episodes[0].kind, Sickness::PacketLoss);
    assert!(
        f.episodes[0].detail.contains("2 broker hosts sent 7 of"),
        "{f:?}"
    );
    assert_eq!(f.segments_retransmitted, 7);
    // Ten seconds without a retransmission: over.
    let later = t0 + ms(200) + LOSS_WINDOW + ms(100);
    s.tcp("10.0.0.2:9092", later, counters(120, 2));
    assert!(s.facts(later, w0).episodes[0].ended.is_some());
}

/// Seen on the lab (own-faults --unwell loss, 2026-12-07): the watchdog losing a tenth of
/// its packets, then two of the three brokers frozen and stalled. Their connections went
/// quiet (one request waits unanswered), so only the healthy broker's showed the loss, the
/// loss was no longer the watchdog's own, and the healthy broker was paged for it. Own loss
/// once seen on two hosts lasts while any connection keeps losing packets.
#[test]
fn own_packet_loss_lasts_while_one_connection_still_loses_packets() {
    let (mut s, t0, w0) = ticking();
    s.tcp("10.0.0.1:9092", t0, counters(10, 0));
    s.tcp("10.0.0.2:9092", t0, counters(10, 0));
    s.tcp("10.0.0.1:9092", t0 + ms(100), counters(50, 4));
    s.tcp("10.0.0.2:9092", t0 + ms(100), counters(50, 4));
    assert_eq!(
        kinds(&s, t0 + ms(100), w0),
        vec![(Sickness::PacketLoss, true)]
    );
    // Broker 2 goes quiet; broker 1's connection keeps losing a segment every 3 s, as a
    // liveness connection losing a tenth of its packets does on the lab.
    let mut at = t0 + ms(100);
    for i in 1..=30u32 {
        at += ms(1_000);
        s.tcp("10.0.0.1:9092", at, counters(50 + 10 * i, 4 + i / 3));
        assert_eq!(
            kinds(&s, at, w0),
            vec![(Sickness::PacketLoss, true)],
            "{} s after the second host went quiet",
            i
        );
    }
    // The loss stops: over one window later.
    let later = at + LOSS_WINDOW + ms(100);
    s.tcp("10.0.0.1:9092", later, counters(1_000, 14));
    assert_eq!(kinds(&s, later, w0), vec![(Sickness::PacketLoss, false)]);
}

#[test]
fn a_new_connection_counts_from_zero() {
    let (mut s, t0, _) = ticking();
    s.tcp("[::1]:9092", t0, counters(100, 4));
    s.tcp("[::1]:9092", t0 + ms(10), counters(3, 1));
    assert_eq!(s.segments_sent, 103);
    assert_eq!(s.segments_retransmitted, 5);
    assert_eq!(host_of("[::1]:9092"), "::1");
    assert_eq!(host_of("b1.example:9092"), "b1.example");
}

#[test]
fn old_spells_are_forgotten() {
    let (mut s, t0, w0) = ticking();
    s.ticked(
        t0 + Duration::from_secs(5),
        w0 + Duration::from_secs(5),
        Duration::from_secs(5),
        None,
    );
    let later = t0 + Duration::from_secs(5) + MEMORY + Duration::from_secs(1);
    s.ticked(
        later,
        w0 + Duration::from_secs(5) + MEMORY + Duration::from_secs(1),
        Duration::ZERO,
        None,
    );
    assert!(s.facts(later, w0).episodes.is_empty());
}

#[tokio::test]
async fn the_tick_runs_and_stops_with_the_last_handle() {
    let h = OwnHealth::default();
    assert_eq!(h.facts().last_tick, None);
    h.start();
    h.start();
    tokio::time::sleep(TICK * 3).await;
    assert!(h.facts().last_tick.is_some());
    assert_eq!(lock(&h.inner.tasks).len(), 2, "started once");
    let weak = Arc::downgrade(&h.inner);
    drop(h);
    tokio::time::sleep(TICK * 2).await;
    assert!(weak.upgrade().is_none());
}

/// A dead tick is worse than a missing figure: the judgment reads a timer silent past its
/// schedule as the watchdog unwell, and would hold every broker's timing evidence for good.
/// So the tick is supervised like every long-lived task: started again and counted.
#[tokio::test]
async fn a_tick_that_panics_is_started_again_and_counted() {
    let restarts = || {
        crate::model::task_restarts::snapshot()
            .into_iter()
            .filter(|(t, _, _)| *t == "own_health")
            .map(|(_, _, n)| n)
            .sum::<u64>()
    };
    let before = restarts();
    let h = OwnHealth::default();
    h.start();
    tokio::time::sleep(TICK * 3).await;
    h.inner
        .panic_tick
        .store(true, std::sync::atomic::Ordering::Relaxed);
    tokio::time::sleep(TICK * 3).await;
    let dead_at = h.facts().last_tick;
    // The supervisor's first wait is 1 s.
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    assert!(h.facts().last_tick > dead_at, "the tick stayed dead");
    assert!(restarts() > before, "its restart was not counted");
}
