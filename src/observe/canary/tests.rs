use super::books::lock;
use super::consumer::resume_offset;
use super::layout::PartitionState;
use super::record::Acks;
use super::writer::{Ack, Attempt};
use super::*;
use crate::model::round::BrokerId;
use rdkafka::Offset;
use std::time::{SystemTime, UNIX_EPOCH};

#[test]
fn a_failure_is_charged_to_the_broker_that_had_it_unless_it_says_nothing_about_it() {
    assert_eq!(charge("timeout", 2, false), Some(2));
    assert_eq!(charge("slow", 2, false), Some(2));
    assert_eq!(charge("transport", 2, false), Some(2));
    assert_eq!(charge("timeout", 2, true), None, "it appended: followers");
    for kind in [
        AUTHORIZATION,
        "not_leader",
        "queue_full",
        "not_enough_replicas",
        "not_enough_replicas_after_append",
    ] {
        assert_eq!(charge(kind, 2, false), None, "{kind}");
    }
    assert_eq!(charge("timeout", -1, false), None, "no leader");
}

fn shared() -> Shared {
    Shared {
        books: Mutex::new(Books::new("me", Duration::from_secs(60))),
        stats: CanaryStats::default(),
        cluster: "lab".into(),
        slow: Duration::from_millis(500),
        news: Arc::new(tokio::sync::Notify::new()),
    }
}

/// Whether `sh.news` was told since the last call (a stored permit).
fn told(sh: &Shared) -> bool {
    let fut = sh.news.notified();
    tokio::pin!(fut);
    fut.as_mut().enable()
}

/// A partition's writes that change how they end (working, slow, failing) wake the round
/// loop; the same outcome again, and a write older than the newest, do not.
#[test]
fn a_partition_whose_writes_change_how_they_end_is_news() {
    let sh = shared();
    let mut b = lock(&sh.books);
    b.write_ended(attempt(0, 1, false, 0, 5, Ok(())), &sh);
    assert!(!told(&sh), "the first write is no news");
    b.write_ended(attempt(0, 1, false, 1_000, 5, Ok(())), &sh);
    assert!(!told(&sh));
    // A follower stopped fetching: writes held, then acknowledged when the ISR shrank.
    b.write_ended(attempt(0, 1, false, 2_000, 4_000, Ok(())), &sh);
    assert!(told(&sh), "slow");
    b.write_ended(attempt(0, 1, false, 3_000, 3_000, Ok(())), &sh);
    assert!(!told(&sh), "slow again");
    b.write_ended(attempt(0, 1, false, 6_000, 5, Ok(())), &sh);
    assert!(told(&sh), "working again");
    b.write_ended(attempt(0, 1, false, 5_000, 5_000, Err("timeout")), &sh);
    assert!(!told(&sh), "older than the newest");
    b.write_ended(
        attempt(0, 1, false, 7_000, 5, Err("not_enough_replicas")),
        &sh,
    );
    assert!(told(&sh), "failing");
    b.write_ended(attempt(1, 2, false, 7_000, 5, Err("timeout")), &sh);
    assert!(!told(&sh), "another partition's first write");
}

fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// An acks=all (`claim` None) or acks=1 write to `partition` sent at `sent` ms to
/// `leader`, that took `took` ms and ended with `result`.
fn attempt(
    partition: i32,
    leader: BrokerId,
    acks1: bool,
    sent: u64,
    took: u64,
    result: Result<(), &'static str>,
) -> Attempt {
    Attempt {
        target: Target {
            partition,
            acks: if acks1 { Acks::One } else { Acks::All },
            leader,
            claim: acks1.then(|| LeaderClaim {
                partition,
                broker: leader,
                address: String::new(),
                epoch: 1,
            }),
        },
        sent_at: at(sent),
        took: Duration::from_millis(took),
        result: match result {
            Ok(()) => Ok(Ack {
                offset: sent as i64,
                seq: sent,
                broker: Some(leader),
            }),
            Err(kind) => Err(ProduceFailure {
                kind,
                detail: kind.into(),
                broker: Some(leader),
            }),
        },
    }
}

fn charged_failures(sh: &Shared, broker: &str) -> u64 {
    let mut text = String::new();
    let mut reg = prometheus_client::registry::Registry::default();
    reg.register("c", "c", sh.stats.charged_failures_total.clone());
    prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
    text.lines()
        .filter(|l| l.starts_with("c_total{") && l.contains(&format!("broker=\"{broker}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Broker 2 leads partition 1 and follows partition 0 (led by 1); it freezes at 1 s.
/// Partition 1's writes time out (acks=1 to 2 too): a window charged to 2. Partition
/// 0's acks=all writes wait on follower 2 until it is fenced, while leader 1 takes
/// acks=1 writes: a window, charged to no broker. Broker 1 is charged with nothing.
#[test]
fn a_frozen_leader_is_charged_its_window_and_its_followers_leaders_are_not() {
    let sh = shared();
    let ended = |a: Attempt| lock(&sh.books).write_ended(a, &sh);
    ended(attempt(1, 2, false, 0, 3, Ok(())));
    ended(attempt(0, 1, false, 0, 3, Ok(())));
    for t in [1_000, 2_000, 3_000] {
        ended(attempt(0, 1, true, t, 2, Ok(())));
        ended(attempt(1, 2, true, t, 1_500, Err("timeout")));
    }
    for t in [1_000, 2_000] {
        ended(attempt(1, 2, false, t, 1_500, Err("timeout")));
        ended(attempt(0, 1, false, t, 1_500, Err("timeout")));
    }
    // Fenced at 3.2 s: partition 0's held write goes through late; partition 1 moves
    // to broker 3, whose first write works at 4 s.
    ended(attempt(0, 1, false, 3_000, 600, Ok(())));
    ended(attempt(0, 1, false, 4_000, 3, Ok(())));
    let mut books = lock(&sh.books);
    let closed = std::mem::take(&mut books.windows_closed);
    assert_eq!(closed.len(), 1, "{closed:?}");
    assert_eq!(closed[0].partition, 0);
    assert_eq!(
        closed[0].broker, None,
        "the leader appended: not its window"
    );
    assert_eq!(closed[0].failed_writes, 3, "two timeouts and a slow write");
    assert_eq!(
        books.windows.open_for(1, at(4_000)),
        Some((Some(2), Duration::from_secs(3)))
    );
    drop(books);
    // A write sent at 3.5 s while the view still named 2, held by the client until it
    // found the new leader 3, which took it at 4.2 s: 2's outage, not 3's.
    let mut held = attempt(1, 3, false, 3_500, 700, Ok(()));
    held.target.leader = 2;
    ended(held);
    ended(attempt(1, 3, false, 4_000, 3, Ok(())));
    let closed = std::mem::take(&mut lock(&sh.books).windows_closed);
    assert_eq!(closed.len(), 1);
    assert_eq!((closed[0].partition, closed[0].broker), (1, Some(2)));
    assert!((closed[0].seconds() - 3.2).abs() < 0.1, "{closed:?}");
    assert_eq!(
        charged_failures(&sh, "2"),
        3,
        "two timeouts and the held write"
    );
    assert_eq!(charged_failures(&sh, "1"), 0);
    assert_eq!(charged_failures(&sh, "3"), 0);
    // The round's report: partition 1's failures since the last round, charged to 2.
    let mut out = CanaryRound {
        topic: "t".into(),
        status: TopicStatus::Ready,
        partitions: Vec::new(),
        layout: Vec::new(),
        not_leading: Vec::new(),
        lost: Vec::new(),
        duplicated: Vec::new(),
        windows_closed: Vec::new(),
        acks1: Vec::new(),
    };
    let part = |partition, leader| PartitionStateWithEpoch {
        state: PartitionState {
            partition,
            leader,
            replicas: vec![1, 2, 3],
            isr: vec![1, 3],
        },
        leader_epoch: 2,
    };
    lock(&sh.books).report(&[part(0, 1), part(1, 3)], at(5_000), &mut out);
    let p1 = &out.partitions[1];
    assert_eq!(p1.writes, 5);
    assert_eq!(p1.failed_writes.len(), 1);
    let f = &p1.failed_writes[0];
    assert_eq!(
        (f.broker, f.kind, f.count, f.leader_appended),
        (2, "timeout", 2, false)
    );
    assert!(p1.produce_seconds.is_some(), "the newest write worked");
    let f0 = &out.partitions[0].failed_writes[0];
    assert!(f0.leader_appended, "{f0:?}");
    // Collected once.
    let mut again = out.clone();
    again.partitions.clear();
    lock(&sh.books).report(&[part(1, 3)], at(6_000), &mut again);
    assert!(again.partitions[0].failed_writes.is_empty());
    assert_eq!(again.partitions[0].writes, 0);
}

#[test]
fn a_partition_read_before_resumes_where_it_stood_never_at_the_end() {
    // Reassigned (a partition was added) before the consumer delivered anything since
    // its last assignment: its own position is unknown, the ledger's is 5. Starting at
    // the end would pass over a record acknowledged at 5 and count it lost.
    assert_eq!(resume_offset(Offset::Invalid, Some(5)), Some(5));
    assert_eq!(resume_offset(Offset::Offset(7), Some(5)), Some(7));
    assert_eq!(
        resume_offset(Offset::Invalid, None),
        None,
        "fetch its end first"
    );
    assert_eq!(resume_offset(Offset::End, None), None);
}

fn unavailable_now(sh: &Shared) -> Vec<String> {
    let mut text = String::new();
    let mut reg = prometheus_client::registry::Registry::default();
    reg.register("u", "u", sh.stats.unavailable_now.clone());
    prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
    text.lines()
        .filter(|l| l.starts_with("u{"))
        .map(str::to_string)
        .collect()
}

/// A partition that vanished (the canary topic shrunk or was recreated) while a window of it
/// was open took its "unavailable now" series with it: it used to stay at 1 for good.
#[test]
fn a_vanished_partition_takes_its_unavailable_now_series_with_it() {
    let sh = shared();
    let mut b = lock(&sh.books);
    b.write_ended(attempt(0, 1, false, 0, 5_000, Err("timeout")), &sh);
    b.write_ended(attempt(1, 2, false, 0, 5_000, Err("timeout")), &sh);
    assert_eq!(unavailable_now(&sh).len(), 2, "{:?}", unavailable_now(&sh));
    b.retain_partitions(|p| p == 1, &sh);
    let left = unavailable_now(&sh);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].contains("partition=\"1\""), "{left:?}");
}

/// Issue 39 item 2: librdkafka takes the SASL password as a property and reads its CA and
/// client certificate files once, when a client is made (`rd_kafka_new` builds its TLS
/// context then); none is read again for a client that exists. A rotated credential
/// reaches the canary only through new clients: they are made at the first round after
/// the change, with the new password, and not at every round.
#[tokio::test]
async fn the_canary_starts_new_clients_when_its_credentials_change() {
    let dir = std::env::temp_dir().join(format!("kw-canary-rotate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("password");
    std::fs::write(&file, "old").unwrap();
    let yaml = format!(
        "clusters:\n  - name: c\n    bootstrap_servers: ['127.0.0.1:1']\n    security:\n      protocol: SASL_PLAINTEXT\n      sasl: {{mechanism: SCRAM-SHA-512, username: watchdog, password_file: {}}}\n    canary: {{manage_topic: false}}\n",
        file.display()
    );
    let config = crate::config::parse(&yaml, "test.yaml").unwrap();
    let c = &config.clusters[0];
    let wire = crate::run::setup::probe_settings(c).unwrap().wire;
    let mut canary = Canary::new(
        crate::run::setup::canary_settings(c, "me", wire),
        CanaryStats::default(),
    );
    let view = CanaryView {
        brokers: Vec::new(),
        partitions: None,
        claims: Vec::new(),
        addresses: Vec::new(),
    };
    let consumer = |c: &Canary| Arc::as_ptr(&c.clients.as_ref().expect("clients").consumer);
    canary.round(&view).await;
    let first = consumer(&canary);
    canary.round(&view).await;
    assert_eq!(
        consumer(&canary),
        first,
        "nothing changed: the same clients"
    );

    let tmp = dir.join("password.new");
    std::fs::write(&tmp, "new").unwrap();
    std::fs::rename(&tmp, &file).unwrap();
    crate::config::live::look_all();
    canary.round(&view).await;
    assert_ne!(consumer(&canary), first, "the clients were made again");
    assert_eq!(canary.settings.client.get("sasl.password"), Some("new"));
    let _ = std::fs::remove_dir_all(&dir);
}
