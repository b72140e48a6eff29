//! The seed chaos tests ran on ZooKeeper clusters: the same leader isolation on Kafka 3.9 in
//! ZooKeeper mode, where the leader is cut off from ZooKeeper and the other brokers.

mod common;

use kafka_lab::KafkaVersion;

#[test]
fn zookeeper_isolated_leader_acknowledges_writes_that_are_lost() {
    let mut lab = common::lab_of(KafkaVersion::V3_9);
    common::isolated_leader_loses_acks1_writes(&mut lab);
}
