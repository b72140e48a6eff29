//! Looks at fake controllers and brokers: what is asked, how answers become an
//! observation, that a hung controller costs one deadline, and how the high watermark is
//! tracked across looks.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_quorum_response as dq;
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeClusterRequest, DescribeClusterResponse, DescribeQuorumRequest,
    DescribeQuorumResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_watchdog_test_support::fake_broker::{
    answer, answer_api_versions, FakeBroker, Received, Reply, KAFKA_4_1,
};

use super::*;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// A KRaft node's API ranges: Kafka 4.1's, with DescribeQuorum.
fn kraft_ranges() -> Vec<(ApiKey, i16, i16)> {
    let mut r = KAFKA_4_1.to_vec();
    r.push((ApiKey::DescribeQuorum, 0, 2));
    r
}

/// The leader's answer: `leader` at `epoch`, the high watermark `hw`; voters 0 and 100
/// (0 fetched 300 ms before), broker 2 as an observer.
fn leader_answer(leader: i32, epoch: i32, hw: i64) -> DescribeQuorumResponse {
    let now = 1_700_000_000_000;
    let replica = |id: i32, ago: i64| {
        dq::ReplicaState::default()
            .with_replica_id(BrokerId(id))
            .with_log_end_offset(hw)
            .with_last_fetch_timestamp(now - ago)
            .with_last_caught_up_timestamp(now - ago)
    };
    let other = if leader == 0 { 100 } else { 0 };
    DescribeQuorumResponse::default().with_topics(vec![dq::TopicData::default()
        .with_topic_name(TopicName(s("__cluster_metadata")))
        .with_partitions(vec![dq::PartitionData::default()
            .with_leader_id(BrokerId(leader))
            .with_leader_epoch(epoch)
            .with_high_watermark(hw)
            .with_current_voters(vec![replica(leader, 0), replica(other, 300)])
            .with_observers(vec![replica(2, 100)])])])
}

fn not_leader() -> DescribeQuorumResponse {
    DescribeQuorumResponse::default().with_topics(vec![dq::TopicData::default()
        .with_topic_name(TopicName(s("__cluster_metadata")))
        .with_partitions(vec![dq::PartitionData::default().with_error_code(6)])])
}

/// A KRaft node answering ApiVersions and DescribeQuorum with `quorum`, and DescribeCluster
/// with `controllers` (id, port) when given (KIP-919).
async fn node(
    quorum: impl Fn() -> Reply2 + Send + Sync + 'static,
    controllers: Option<Vec<(i32, u16)>>,
) -> FakeBroker {
    FakeBroker::start(move |r: &Received| {
        if r.api_key == ApiKey::ApiVersions as i16 {
            return answer_api_versions(r, &kraft_ranges());
        }
        if r.api_key == ApiKey::DescribeCluster as i16 {
            let asked: DescribeClusterRequest = r.decode();
            assert_eq!(
                asked.endpoint_type, 2,
                "controllers are asked for controllers"
            );
            return match &controllers {
                Some(list) => answer(
                    r,
                    &DescribeClusterResponse::default()
                        .with_endpoint_type(2)
                        .with_brokers(
                            list.iter()
                                .map(|(id, port)| {
                                    DescribeClusterBroker::default()
                                        .with_broker_id(BrokerId(*id))
                                        .with_host(s("127.0.0.1"))
                                        .with_port(i32::from(*port))
                                })
                                .collect(),
                        ),
                ),
                None => answer(r, &DescribeClusterResponse::default().with_error_code(35)),
            };
        }
        assert_eq!(r.api_key, ApiKey::DescribeQuorum as i16);
        let asked: DescribeQuorumRequest = r.decode();
        assert_eq!(asked.topics.len(), 1);
        assert_eq!(asked.topics[0].topic_name.0.as_str(), "__cluster_metadata");
        assert_eq!(asked.topics[0].partitions[0].partition_index, 0);
        match quorum() {
            Reply2::Answer(body) => answer(r, &body),
            Reply2::Hang => Reply::Hang,
        }
    })
    .await
}

enum Reply2 {
    Answer(DescribeQuorumResponse),
    Hang,
}

fn wire(timeout_ms: u64) -> WireOptions {
    WireOptions {
        connect_timeout: Duration::from_millis(timeout_ms),
        request_timeout: Duration::from_millis(timeout_ms),
        ..WireOptions::default()
    }
}

fn settings(controllers: Vec<(Option<NodeId>, String)>, timeout_ms: u64) -> QuorumSettings {
    QuorumSettings {
        cluster: "lab".into(),
        controllers,
        wire: wire(timeout_ms),
    }
}

fn prober(controllers: Vec<(Option<NodeId>, String)>, timeout_ms: u64) -> QuorumProber {
    QuorumProber::new(settings(controllers, timeout_ms))
}

fn port(b: &FakeBroker) -> u16 {
    b.address.rsplit_once(':').unwrap().1.parse().unwrap()
}

#[tokio::test]
async fn the_leader_describes_the_quorum_and_followers_say_they_do_not_lead() {
    let leader = node(|| Reply2::Answer(leader_answer(100, 7, 5000)), None).await;
    let follower = node(|| Reply2::Answer(not_leader()), None).await;
    let mut p = prober(
        vec![
            (Some(0), follower.address.clone()),
            (None, leader.address.clone()),
        ],
        1000,
    );
    let look = p.look(&[]).await.expect("controllers configured");
    let d = look.description.as_ref().expect("the leader answered");
    assert_eq!((d.leader, d.epoch, d.high_watermark), (100, 7, 5000));
    assert_eq!(
        d.voter(0).unwrap().last_fetch_ago,
        Some(Duration::from_millis(300))
    );
    assert_eq!(
        d.observer(2).unwrap().last_fetch_ago,
        Some(Duration::from_millis(100))
    );
    let by_address = |a: &str| look.controllers.iter().find(|c| c.address == a).unwrap();
    let f = by_address(&follower.address);
    assert_eq!(
        (f.id, f.outcome.clone()),
        (Some(0), Ok(ControllerRole::Follower))
    );
    // The address that answered as leader is the leader's: it learns its id.
    let l = by_address(&leader.address);
    assert_eq!(
        (l.id, l.outcome.clone()),
        (Some(100), Ok(ControllerRole::Leader))
    );
    assert!(look.via_broker.is_none(), "no broker was given");
    assert_eq!(look.last_leader.map(|l| (l.0, l.1)), Some((100, 7)));
}

#[tokio::test]
async fn a_controller_names_the_others_and_they_are_asked_from_then_on() {
    let other = node(|| Reply2::Answer(not_leader()), None).await;
    let other_port = port(&other);
    let first = node(
        || Reply2::Answer(leader_answer(0, 3, 10)),
        Some(vec![(0, 0), (101, other_port)]),
    )
    .await;
    let mut p = prober(vec![(None, first.address.clone())], 1000);
    let look = p.look(&[]).await.unwrap();
    assert_eq!(look.controllers.len(), 1);
    let look = p.look(&[]).await.unwrap();
    let learned = look
        .controllers
        .iter()
        .find(|c| c.address == format!("127.0.0.1:{other_port}"))
        .expect("the controller DescribeCluster named is asked");
    assert_eq!(learned.id, Some(101));
    assert_eq!(learned.outcome, Ok(ControllerRole::Follower));
}

/// A frozen controller accepts the connection and never answers: the look ends after its
/// deadline with the others' answers, and the frozen one failing as a timeout, accepted.
#[tokio::test]
async fn a_hung_controller_costs_one_deadline_and_is_silent_but_accepting() {
    let hung = node(|| Reply2::Hang, None).await;
    let leader = node(|| Reply2::Answer(leader_answer(100, 7, 5000)), None).await;
    let mut p = prober(
        vec![
            (Some(0), hung.address.clone()),
            (Some(100), leader.address.clone()),
        ],
        400,
    );
    let started = Instant::now();
    let look = p.look(&[]).await.unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(350) && took < Duration::from_millis(1500),
        "one deadline, not more: {took:?}"
    );
    assert!(look.description.is_some(), "the leader's answer is kept");
    let h = look.controller(0).unwrap();
    let failure = h.outcome.clone().unwrap_err();
    assert_eq!(failure.kind, FailureKind::Timeout, "{failure:?}");
    assert!(h.accepted && h.accepted_in_streak);
    let since = h.failing_since.expect("a failing streak");
    // The streak keeps its start across looks.
    let look = p.look(&[]).await.unwrap();
    assert_eq!(look.controller(0).unwrap().failing_since, Some(since));
    assert_eq!(look.controller(100).unwrap().failing_since, None);
}

#[tokio::test]
async fn a_refused_controller_was_not_accepted() {
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let mut p = prober(vec![(Some(0), gone)], 400);
    let look = p.look(&[]).await.unwrap();
    let c = look.controller(0).unwrap();
    assert_eq!(
        c.outcome.as_ref().unwrap_err().kind,
        FailureKind::ConnectionRefused
    );
    assert!(!c.accepted && !c.accepted_in_streak);
    assert!(look.description.is_none());
}

/// Without configured controllers a broker is asked, which forwards to the active
/// controller; one frozen broker of the two asked does not hide the answer.
#[tokio::test]
async fn brokers_forward_and_one_frozen_broker_does_not_hide_the_quorum() {
    let frozen = node(|| Reply2::Hang, None).await;
    let broker = node(|| Reply2::Answer(leader_answer(0, 2, 77)), None).await;
    let mut p = prober(Vec::new(), 400);
    let look = p
        .look(&[frozen.address.clone(), broker.address.clone()])
        .await
        .unwrap();
    assert_eq!(look.description.as_ref().map(|d| d.leader), Some(0));
    let (address, result) = look.via_broker.clone().unwrap();
    assert_eq!(address, broker.address);
    assert!(result.is_ok());
    assert!(look.controllers.is_empty());
}

/// A broker whose DescribeQuorum hangs (the controller behind it does not answer) still
/// says how far it applied the metadata log (ApiVersions' finalized-features epoch); the
/// look keeps the furthest offset and the look that first saw it.
#[tokio::test]
async fn a_broker_says_how_far_it_applied_the_metadata_log_even_when_its_quorum_answer_hangs() {
    let applied = Arc::new(AtomicI64::new(500));
    let offsets = applied.clone();
    let broker = FakeBroker::start(move |r: &Received| {
        if r.api_key == ApiKey::ApiVersions as i16 {
            let keys = kraft_ranges()
                .iter()
                .map(|&(k, min, max)| {
                    kafka_protocol::messages::api_versions_response::ApiVersion::default()
                        .with_api_key(k as i16)
                        .with_min_version(min)
                        .with_max_version(max)
                })
                .collect();
            return answer(
                r,
                &kafka_protocol::messages::ApiVersionsResponse::default()
                    .with_api_keys(keys)
                    .with_finalized_features_epoch(offsets.load(Ordering::SeqCst)),
            );
        }
        assert_eq!(r.api_key, ApiKey::DescribeQuorum as i16);
        Reply::Hang
    })
    .await;
    let mut p = prober(Vec::new(), 300);
    let brokers = [broker.address.clone()];
    let first = p.look(&brokers).await.unwrap();
    assert!(first.description.is_none());
    assert!(matches!(&first.via_broker, Some((_, Err(f))) if f.kind == FailureKind::Timeout));
    assert_eq!(
        first.metadata_applied.map(|a| (a.offset, a.since)),
        Some((500, first.at))
    );
    applied.store(503, Ordering::SeqCst);
    let second = p.look(&brokers).await.unwrap();
    assert_eq!(
        second.metadata_applied.map(|a| (a.offset, a.since)),
        Some((503, second.at))
    );
    // Standing still: the offset and the look that first saw it stay.
    let third = p.look(&brokers).await.unwrap();
    assert_eq!(
        third.metadata_applied.map(|a| (a.offset, a.since)),
        Some((503, second.at))
    );
}

/// ZooKeeper-mode brokers have no DescribeQuorum: nothing to look at, and they are not
/// asked again.
#[tokio::test]
async fn a_zookeeper_cluster_has_no_quorum_to_look_at() {
    let zk = FakeBroker::start(|r: &Received| {
        assert_eq!(r.api_key, ApiKey::ApiVersions as i16, "asked only once");
        answer_api_versions(r, KAFKA_4_1)
    })
    .await;
    let mut p = prober(Vec::new(), 400);
    assert!(p.look(std::slice::from_ref(&zk.address)).await.is_none());
    assert!(p.look(std::slice::from_ref(&zk.address)).await.is_none());
    assert_eq!(zk.seen().len(), 1);
}

/// The high watermark moves with every look while the controller writes; once it stops
/// under the same leader and epoch, the look says since when; a new epoch starts over.
#[tokio::test]
async fn the_high_watermark_is_tracked_across_looks() {
    let hw = Arc::new(AtomicI64::new(100));
    let epoch = Arc::new(AtomicI64::new(5));
    let (h, e) = (hw.clone(), epoch.clone());
    let leader = node(
        move || {
            Reply2::Answer(leader_answer(
                0,
                e.load(Ordering::SeqCst) as i32,
                h.load(Ordering::SeqCst),
            ))
        },
        None,
    )
    .await;
    let mut p = prober(vec![(Some(0), leader.address.clone())], 1000);
    let first = p.look(&[]).await.unwrap();
    assert_eq!(first.high_watermark_still_since, None);
    assert_eq!(first.last_progress_at, Some(first.at));
    hw.store(101, Ordering::SeqCst);
    let moved = p.look(&[]).await.unwrap();
    assert_eq!(moved.high_watermark_still_since, None);
    assert_eq!(moved.last_progress_at, Some(moved.at));
    // Wedged: the same high watermark, look after look.
    let still = p.look(&[]).await.unwrap();
    assert_eq!(still.high_watermark_still_since, Some(moved.at));
    let still = p.look(&[]).await.unwrap();
    assert_eq!(still.high_watermark_still_since, Some(moved.at));
    assert_eq!(still.last_progress_at, Some(moved.at));
    assert_eq!(
        still.metadata_changed_at, None,
        "no-ops alone change nothing"
    );
    // Many records at once (a topic created, leaderships moved): a metadata change.
    hw.store(160, Ordering::SeqCst);
    let changed = p.look(&[]).await.unwrap();
    assert_eq!(changed.metadata_changed_at, Some(changed.at));
    hw.store(161, Ordering::SeqCst);
    let after = p.look(&[]).await.unwrap();
    assert_eq!(after.metadata_changed_at, Some(changed.at));
    hw.store(162, Ordering::SeqCst);
    let after = p.look(&[]).await.unwrap();
    assert_eq!(
        after.metadata_changed_at,
        Some(changed.at),
        "a no-op is no new change"
    );
    // Another election: a new epoch is progress, whatever its high watermark.
    epoch.store(6, Ordering::SeqCst);
    let elected = p.look(&[]).await.unwrap();
    assert_eq!(elected.high_watermark_still_since, None);
    assert_eq!(elected.last_progress_at, Some(elected.at));
}

/// The continuous watch publishes looks on its own schedule and asks the brokers it is
/// given.
#[tokio::test]
async fn the_watch_publishes_looks_and_asks_the_brokers_it_is_given() {
    let broker = node(|| Reply2::Answer(leader_answer(0, 1, 5)), None).await;
    let mut watch = QuorumWatch::start(settings(Vec::new(), 400), Duration::from_millis(50));
    watch.ask_brokers(vec![broker.address.clone()]);
    let got = next_described(&mut watch).await;
    assert_eq!(got.via_broker.as_ref().unwrap().0, broker.address);
}

async fn next_described(watch: &mut QuorumWatch) -> Arc<QuorumObservation> {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            watch.changed().await;
            if let Some(look) = watch.latest() {
                if look.description.is_some() {
                    return look;
                }
            }
        }
    })
    .await
    .expect("a look with the broker's answer")
}
