//! From kafka-protocol responses to the observation types. Fields that the negotiated
//! version lacks hold the crate's defaults, so the version decides what is trusted here.

use std::collections::BTreeMap;

use kafka_protocol::messages::{
    DescribeClusterResponse, DescribeConfigsResponse, MetadataResponse,
};

use crate::model::round::{
    BrokerEndpoint, BrokerId, ClusterDescription, MetadataView, PartitionView, RegisteredBroker,
    TopicView, NO_TOPIC_ID,
};

/// Metadata v5 added `offline_replicas`.
pub(crate) const METADATA_OFFLINE_REPLICAS: i16 = 5;
/// Metadata v7 added `leader_epoch`.
pub(crate) const METADATA_LEADER_EPOCH: i16 = 7;
/// Metadata v10 added `topic_id`.
pub(crate) const METADATA_TOPIC_ID: i16 = 10;
/// DescribeCluster v2 added `include_fenced_brokers` and `is_fenced`.
pub(crate) const DESCRIBE_CLUSTER_FENCED: i16 = 2;

/// Per topic: its configs by name, or the Kafka error code the broker gave for that topic.
pub type TopicConfigs = BTreeMap<String, Result<BTreeMap<String, String>, i16>>;

fn port(broker: BrokerId, port: i32) -> Result<u16, String> {
    u16::try_from(port).map_err(|_| format!("broker {broker} advertises port {port}"))
}

pub(crate) fn metadata_view(
    response: MetadataResponse,
    version: i16,
) -> Result<MetadataView, String> {
    let has_leader_epochs = version >= METADATA_LEADER_EPOCH;
    let has_offline_replicas = version >= METADATA_OFFLINE_REPLICAS;

    let brokers = response
        .brokers
        .into_iter()
        .map(|b| {
            Ok(BrokerEndpoint {
                id: b.node_id.0,
                host: b.host.to_string(),
                port: port(b.node_id.0, b.port)?,
                rack: b.rack.map(|r| r.to_string()),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;

    let mut topics = BTreeMap::new();
    for topic in response.topics {
        // From v12 a topic may come back by id only; the id is then its only usable key.
        let name = match topic.name {
            Some(name) => name.0.to_string(),
            None if !topic.topic_id.is_nil() => topic.topic_id.to_string(),
            None => continue,
        };
        let mut partitions: Vec<PartitionView> = topic
            .partitions
            .into_iter()
            .map(|p| PartitionView {
                partition: p.partition_index,
                error_code: p.error_code,
                leader: p.leader_id.0,
                leader_epoch: if has_leader_epochs {
                    p.leader_epoch
                } else {
                    -1
                },
                replicas: p.replica_nodes.into_iter().map(|b| b.0).collect(),
                isr: p.isr_nodes.into_iter().map(|b| b.0).collect(),
                offline_replicas: if has_offline_replicas {
                    p.offline_replicas.into_iter().map(|b| b.0).collect()
                } else {
                    Default::default()
                },
            })
            .collect();
        partitions.sort_by_key(|p| p.partition);
        topics.insert(
            name.clone(),
            TopicView {
                name,
                topic_id: if version >= METADATA_TOPIC_ID {
                    topic.topic_id.as_u128()
                } else {
                    NO_TOPIC_ID
                },
                error_code: topic.error_code,
                is_internal: topic.is_internal,
                partitions: partitions.into(),
            },
        );
    }

    Ok(MetadataView {
        cluster_id: response.cluster_id.map(|c| c.to_string()),
        controller_id: (response.controller_id.0 >= 0).then_some(response.controller_id.0),
        brokers,
        topics,
        has_leader_epochs,
        has_offline_replicas,
        version,
        // The request, not the answer, says whether every topic was asked; the caller sets it.
        all_topics: false,
    })
}

pub(crate) fn cluster_description(
    response: DescribeClusterResponse,
    version: i16,
) -> Result<ClusterDescription, String> {
    let includes_fenced = version >= DESCRIBE_CLUSTER_FENCED;
    let brokers = response
        .brokers
        .into_iter()
        .map(|b| {
            Ok(RegisteredBroker {
                endpoint: BrokerEndpoint {
                    id: b.broker_id.0,
                    host: b.host.to_string(),
                    port: port(b.broker_id.0, b.port)?,
                    rack: b.rack.map(|r| r.to_string()),
                },
                fenced: includes_fenced && b.is_fenced,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(ClusterDescription {
        cluster_id: response.cluster_id.to_string(),
        controller_id: response.controller_id.0,
        brokers,
        includes_fenced,
    })
}

/// Configs whose value the broker withholds (sensitive ones) are left out rather than shown
/// as empty, so an empty string always means the broker said empty.
pub(crate) fn topic_configs(response: DescribeConfigsResponse) -> TopicConfigs {
    response
        .results
        .into_iter()
        .map(|result| {
            let configs = if result.error_code != 0 {
                Err(result.error_code)
            } else {
                Ok(result
                    .configs
                    .into_iter()
                    .filter_map(|c| Some((c.name.to_string(), c.value?.to_string())))
                    .collect())
            };
            (result.resource_name.to_string(), configs)
        })
        .collect()
}
