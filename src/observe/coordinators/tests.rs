use super::*;
use crate::model::round::PartitionView;
use crate::observe::cluster_view::{ClusterView, ViewTopic};

fn partition(partition: i32, leader: BrokerId) -> PartitionView {
    PartitionView {
        partition,
        error_code: 0,
        leader,
        leader_epoch: 1,
        replicas: vec![1, 2, 3].into(),
        isr: vec![1, 2, 3].into(),
        offline_replicas: Default::default(),
    }
}

fn view(partitions: Vec<PartitionView>) -> ClusterView {
    let mut v = ClusterView::default();
    v.topics.insert(
        OFFSETS_TOPIC.to_string(),
        ViewTopic {
            is_internal: true,
            topic_id: Default::default(),
            partitions: Arc::new(partitions),
        },
    );
    v
}

#[test]
fn shards_are_the_offsets_partitions_with_a_leader_and_an_address() {
    let v = view(vec![
        partition(0, 1),
        partition(1, -1),
        partition(2, 3),
        partition(3, 9),
    ]);
    let plan = shard_leaders(&v, |b| (b != 9).then(|| format!("127.0.0.1{b}:9092")));
    assert_eq!(plan.partitions, 4);
    assert_eq!(
        plan.leaders.into_iter().collect::<Vec<_>>(),
        vec![
            (0, (1, "127.0.0.11:9092".to_string())),
            (2, (3, "127.0.0.13:9092".to_string()))
        ]
    );
    assert_eq!(
        shard_leaders(&ClusterView::default(), |_| None),
        ShardLeaders::default()
    );
}

#[tokio::test]
async fn a_broker_that_refuses_is_a_failure_not_a_stall() {
    // A port nothing listens on: refused at once.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    drop(listener);
    let mut prober = CoordinatorProber::new(CoordinatorSettings {
        cluster: "lab".into(),
        group_prefix: "kafka-watchdog-probe-test".into(),
        timeout: Duration::from_millis(300),
        interval: Duration::from_millis(100),
        groups: true,
        transactions: None,
        wire: WireOptions {
            connect_timeout: Duration::from_millis(300),
            request_timeout: Duration::from_millis(300),
            ..WireOptions::default()
        },
    });
    let plan = ShardLeaders {
        partitions: 3,
        leaders: [(0, (1, address.clone())), (2, (1, address))].into(),
    };
    let look = prober.look(&plan).await;
    let b = &look.brokers[&1];
    assert_eq!(b.shards, vec![0, 2]);
    assert!(matches!(b.last, ShardProbe::Failed { .. }), "{:?}", b.last);
    assert_eq!(b.unanswered_in_a_row, 0);
    assert!(look.blind.is_none());
}

mod fake {
    use super::*;
    use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponseGroup;
    use kafka_protocol::messages::{ApiKey, GroupId, OffsetFetchRequest, OffsetFetchResponse};
    use kafka_watchdog_test_support::fake_broker::{
        answer, answer_api_versions, FakeBroker, Received, Reply, KAFKA_4_1,
    };
    use std::sync::atomic::{AtomicBool, AtomicI16, Ordering};

    /// A broker with OffsetFetch v9 whose coordinator can hang, answer an error, and whose
    /// whole process can freeze (every request unanswered).
    struct Knobs {
        coordinator_hangs: AtomicBool,
        frozen: AtomicBool,
        code: AtomicI16,
    }

    async fn broker(knobs: Arc<Knobs>) -> FakeBroker {
        FakeBroker::start(move |r: &Received| {
            if knobs.frozen.load(Ordering::SeqCst) {
                return Reply::Hang;
            }
            match ApiKey::try_from(r.api_key) {
                Ok(ApiKey::ApiVersions) => {
                    let mut ranges = KAFKA_4_1.to_vec();
                    ranges.push((ApiKey::OffsetFetch, 1, 9));
                    answer_api_versions(r, &ranges)
                }
                Ok(ApiKey::OffsetFetch) if knobs.coordinator_hangs.load(Ordering::SeqCst) => {
                    Reply::Hang
                }
                Ok(ApiKey::OffsetFetch) => {
                    let asked: OffsetFetchRequest = r.decode();
                    let code = knobs.code.load(Ordering::SeqCst);
                    let groups = asked
                        .groups
                        .iter()
                        .map(|g| {
                            OffsetFetchResponseGroup::default()
                                .with_group_id(GroupId(g.group_id.0.clone()))
                                .with_error_code(code)
                        })
                        .collect();
                    answer(r, &OffsetFetchResponse::default().with_groups(groups))
                }
                _ => Reply::Close,
            }
        })
        .await
    }

    fn prober() -> CoordinatorProber {
        CoordinatorProber::new(CoordinatorSettings {
            cluster: "lab".into(),
            group_prefix: "kafka-watchdog-probe-test".into(),
            timeout: Duration::from_millis(400),
            interval: Duration::from_millis(100),
            groups: true,
            transactions: None,
            wire: WireOptions {
                connect_timeout: Duration::from_millis(400),
                request_timeout: Duration::from_millis(400),
                ..WireOptions::default()
            },
        })
    }

    fn plan(address: &str) -> ShardLeaders {
        ShardLeaders {
            partitions: 50,
            leaders: [
                (3, (2, address.to_string())),
                (17, (2, address.to_string())),
            ]
            .into(),
        }
    }

    #[tokio::test]
    async fn a_coordinator_that_hangs_while_the_broker_answers_counts_probes_in_a_row() {
        let knobs = Arc::new(Knobs {
            coordinator_hangs: AtomicBool::new(false),
            frozen: AtomicBool::new(false),
            code: AtomicI16::new(0),
        });
        let b = broker(knobs.clone()).await;
        let mut p = prober();
        let look = p.look(&plan(&b.address)).await;
        let l = &look.brokers[&2];
        assert!(
            matches!(l.last, ShardProbe::Answered { .. }),
            "{:?}",
            l.last
        );
        assert_eq!(l.shards, vec![3, 17]);
        // Both groups in one request (v8+), each placed on its shard.
        let fetched: OffsetFetchRequest = b
            .seen()
            .into_iter()
            .find(|r| r.api_key == ApiKey::OffsetFetch as i16)
            .unwrap()
            .decode();
        let groups: Vec<String> = fetched
            .groups
            .iter()
            .map(|g| g.group_id.0.to_string())
            .collect();
        assert_eq!(groups.len(), 2);
        assert_eq!(crate::model::coordinators::shard_of(&groups[0], 50), 3);
        assert_eq!(crate::model::coordinators::shard_of(&groups[1], 50), 17);

        knobs.coordinator_hangs.store(true, Ordering::SeqCst);
        let first = p.look(&plan(&b.address)).await;
        let second = p.look(&plan(&b.address)).await;
        let l = &second.brokers[&2];
        assert_eq!(l.last, ShardProbe::Unanswered);
        assert_eq!(l.unanswered_in_a_row, 2);
        assert_eq!(l.unanswered_since, Some(first.at));
        assert!(l.control_latency.is_some());

        // Answering again ends the streak.
        knobs.coordinator_hangs.store(false, Ordering::SeqCst);
        let l = p.look(&plan(&b.address)).await.brokers[&2].clone();
        assert_eq!(l.unanswered_in_a_row, 0);
        assert_eq!(l.unanswered_since, None);
    }

    #[tokio::test]
    async fn a_broker_silent_on_both_connections_is_not_a_stuck_coordinator() {
        let knobs = Arc::new(Knobs {
            coordinator_hangs: AtomicBool::new(false),
            frozen: AtomicBool::new(false),
            code: AtomicI16::new(0),
        });
        let b = broker(knobs.clone()).await;
        let mut p = prober();
        p.look(&plan(&b.address)).await;
        knobs.frozen.store(true, Ordering::SeqCst);
        for _ in 0..2 {
            let l = p.look(&plan(&b.address)).await.brokers[&2].clone();
            assert_eq!(l.unanswered_in_a_row, 0, "{l:?}");
            assert_eq!(l.control_latency, None);
        }
    }

    #[tokio::test]
    async fn coordinator_errors_are_kept_per_shard_with_their_start() {
        let knobs = Arc::new(Knobs {
            coordinator_hangs: AtomicBool::new(false),
            frozen: AtomicBool::new(false),
            code: AtomicI16::new(15),
        });
        let b = broker(knobs.clone()).await;
        let mut p = prober();
        let first = p.look(&plan(&b.address)).await.brokers[&2].clone();
        assert_eq!(first.errors.len(), 2);
        assert!(first.errors.iter().all(|e| e.code == 15));
        let again = p.look(&plan(&b.address)).await.brokers[&2].clone();
        assert_eq!(again.errors, first.errors, "the same error keeps its start");
        // Not a coordinator error: the watchdog's access, no shard error.
        knobs.code.store(30, Ordering::SeqCst);
        let refused = p.look(&plan(&b.address)).await.brokers[&2].clone();
        assert!(refused.errors.is_empty());
        assert!(matches!(
            refused.last,
            ShardProbe::Failed {
                kind: crate::model::round::FailureKind::Authorization,
                ..
            }
        ));
        knobs.code.store(0, Ordering::SeqCst);
        assert!(p.look(&plan(&b.address)).await.brokers[&2]
            .errors
            .is_empty());
    }
}

/// The transaction probe asks each broker one shard per look in turn, and every shard in
/// error each look: a full turn covers every shard, an error is followed until it ends.
#[test]
fn the_transaction_probe_takes_the_shards_in_turn_and_follows_those_in_error() {
    let shards: Vec<(i32, String)> = (0..4).map(|s| (s * 3, format!("id-{s}"))).collect();
    let mut t = Target::default();
    let asked = |t: &mut Target| -> Vec<i32> { txn_turn(&shards, t).iter().map(|s| s.0).collect() };
    let turn: Vec<i32> = (0..9).map(|_| asked(&mut t)[0]).collect();
    // Two looks each: the second's InitProducerId tells whether the first's transaction
    // ended.
    assert_eq!(turn, vec![0, 0, 3, 3, 6, 6, 9, 9, 0]);
    t.errors.insert(6, (51, SystemTime::UNIX_EPOCH));
    assert_eq!(asked(&mut t), vec![0, 6]);
    assert_eq!(asked(&mut t), vec![3, 6]);
    assert_eq!(asked(&mut t), vec![3, 6]);
    assert_eq!(asked(&mut t), vec![6]);
    t.errors.clear();
    assert_eq!(asked(&mut t), vec![6]);
    assert_eq!(asked(&mut t), vec![9]);
    assert!(txn_turn(&[], &mut t).is_empty());
}

/// Issue 38 item 3: finding each shard's synthetic group takes about as many tries as
/// there are shards, so building them all took the square of a partition count a broker
/// reports, on a runtime worker: a metadata answer claiming two million partitions of
/// `__consumer_offsets` held it for good. Now a count beyond what the probe looks at is
/// said, and every look ends promptly whatever the count.
#[test]
fn a_partition_count_beyond_reason_is_said_not_computed() {
    let (done, looked) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let settings = CoordinatorSettings {
            cluster: "lab".into(),
            group_prefix: "kafka-watchdog-probe-test".into(),
            timeout: Duration::from_millis(300),
            interval: Duration::from_millis(100),
            groups: true,
            transactions: Some(TxnProbeSettings {
                id_prefix: "kafka-watchdog-txn-test".into(),
                interval: Duration::from_millis(100),
            }),
            wire: WireOptions {
                connect_timeout: Duration::from_millis(300),
                request_timeout: Duration::from_millis(300),
                ..WireOptions::default()
            },
        };
        // Leaders at a port nothing listens on: refused at once.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        drop(listener);
        let plan = ShardLeaders {
            partitions: 2_000_000,
            leaders: (0..200)
                .map(|s| (s * 9_999, (1, address.clone())))
                .collect(),
        };
        let mut groups = CoordinatorProber::new(settings);
        let mut txns = groups.transactions().unwrap();
        let started = std::time::Instant::now();
        let (g, t) = rt.block_on(async {
            let g = groups.look(&plan).await;
            let t = txns.look(&plan, &plan).await;
            (g, t)
        });
        let _ = done.send((started.elapsed(), g, t));
    });
    let (took, g, t) = looked
        .recv_timeout(Duration::from_secs(20))
        .expect("the looks ended within 20 s");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let said = |blind: &Option<String>| {
        blind
            .as_deref()
            .is_some_and(|b| b.contains("2000000 partitions") && b.contains("not probed"))
    };
    assert!(said(&g.blind), "{:?}", g.blind);
    assert!(g.brokers.is_empty());
    assert!(said(&t.blind), "{:?}", t.blind);
    assert!(t.brokers.is_empty());
}
