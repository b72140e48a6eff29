//! The wire client against a real Kafka 4.1, one request of each kind the probe sends, to
//! every broker by name: the fake broker's tests (src/observe/wire/tests*.rs) only show that the
//! client agrees with itself; this shows it agrees with Kafka's encoders and decoders and
//! that each broker answers for itself (a follower is not a leader).

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use kafka_watchdog::observe::wire::{BrokerClient, WireOptions};

use common::{lab, unique_topic};

/// NOT_LEADER_OR_FOLLOWER: a consumer's ListOffsets to a broker that does not lead.
const NOT_LEADER: i16 = 6;

#[test]
fn every_broker_answers_each_probe_request_for_itself() {
    let lab = lab();
    let topic = unique_topic("kw-wire");
    // Partition p is led by broker p+1 (first replica, preferred leader at creation).
    let assignment = vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]];
    kafka_lab::client::create_topic(
        &lab.bootstrap(),
        &topic,
        &assignment,
        &[("min.insync.replicas", "2")],
    )
    .expect("create topic");
    let opts = WireOptions {
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(10),
        ..WireOptions::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let all: BTreeSet<i32> = lab.brokers().into_iter().collect();
        assert_eq!(all, BTreeSet::from([1, 2, 3]));
        let asked: Vec<(String, i32)> = (0..3).map(|p| (topic.clone(), p)).collect();
        for id in lab.brokers() {
            let address = kafka_lab::broker_address(id);
            let mut client = BrokerClient::connect(&address, &opts)
                .await
                .unwrap_or_else(|e| panic!("connect {address}: {e}"))
                .client;
            for api in [
                ApiKey::Metadata,
                ApiKey::DescribeCluster,
                ApiKey::DescribeConfigs,
                ApiKey::Produce,
                ApiKey::ListOffsets,
                ApiKey::ListPartitionReassignments,
            ] {
                assert!(
                    client.versions().negotiated(api).is_some(),
                    "broker {id}: no version of {api:?} in common"
                );
            }

            let view = client
                .metadata(Some(std::slice::from_ref(&topic)))
                .await
                .unwrap_or_else(|e| panic!("broker {id} metadata: {e}"))
                .value;
            let named: BTreeSet<i32> = view.brokers.iter().map(|b| b.id).collect();
            assert_eq!(named, all, "broker {id} names the registered brokers");
            let t = &view.topics[&topic];
            assert_eq!(t.error_code, 0);
            let leaders: Vec<i32> = t.partitions.iter().map(|p| p.leader).collect();
            assert_eq!(leaders, vec![1, 2, 3], "broker {id}: preferred leaders");
            assert!(t
                .partitions
                .iter()
                .all(|p| p.isr.len() == 3 && p.leader_epoch >= 0));

            let cluster = client
                .describe_cluster()
                .await
                .unwrap_or_else(|e| panic!("broker {id} describe_cluster: {e}"))
                .expect("Kafka 4.1 has DescribeCluster")
                .value;
            let registered: BTreeSet<i32> = cluster.brokers.iter().map(|b| b.endpoint.id).collect();
            assert_eq!(registered, all);

            let configs = client
                .describe_topic_configs(std::slice::from_ref(&topic), &["min.insync.replicas"])
                .await
                .unwrap_or_else(|e| panic!("broker {id} describe_configs: {e}"))
                .value;
            let mine = configs[&topic].as_ref().expect("topic configs");
            assert_eq!(
                mine.get("min.insync.replicas").map(String::as_str),
                Some("2")
            );

            let ongoing = client
                .list_partition_reassignments(None, Duration::from_secs(5))
                .await
                .unwrap_or_else(|e| panic!("broker {id} list reassignments: {e}"))
                .value;
            assert!(
                ongoing.iter().all(|r| r.0 != topic),
                "nothing reassigns {topic}: {ongoing:?}"
            );

            // One acks=all write to the partition this broker leads: acknowledged once the
            // followers have it, so the high watermark is past it when the answer comes.
            let led = id - 1;
            let record = vec![(None, format!("wire lab test to broker {id}").into_bytes())];
            let written = client
                .produce(&topic, led, -1, Duration::from_secs(5), &record)
                .await
                .unwrap_or_else(|e| panic!("broker {id} produce: {e}"))
                .value;
            assert_eq!(
                (written.error_code, written.base_offset),
                (0, 0),
                "broker {id}"
            );

            // As a consumer, only the leader answers; of its own replicas, every broker does.
            let consumer = client
                .latest_offsets(&asked, false)
                .await
                .unwrap_or_else(|e| panic!("broker {id} latest offsets: {e}"))
                .value;
            assert_eq!(consumer.len(), 3, "{consumer:?}");
            for (t, p, error, offset) in &consumer {
                assert_eq!(t, &topic);
                if *p == led {
                    assert_eq!((*error, *offset), (0, 1), "broker {id}, its partition {p}");
                } else {
                    assert_eq!(*error, NOT_LEADER, "broker {id}, partition {p} it follows");
                }
            }
            let own = client
                .latest_offsets(&asked, true)
                .await
                .unwrap_or_else(|e| panic!("broker {id} own replicas: {e}"))
                .value;
            assert_eq!(own.len(), 3, "{own:?}");
            assert!(
                own.iter()
                    .all(|(_, _, error, offset)| *error == 0 && *offset >= 0),
                "broker {id} holds a replica of every partition: {own:?}"
            );
            let led_end = own.iter().find(|(_, p, _, _)| *p == led).map(|o| o.3);
            assert_eq!(led_end, Some(1), "broker {id}: its log end after one write");
        }
    });
}
