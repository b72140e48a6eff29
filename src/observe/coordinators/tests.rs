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
