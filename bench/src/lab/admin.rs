//! The administrative requests of the `routine` benchmark that neither the lab's rdkafka
//! helpers nor the watchdog's wire client send: configuration changes (replication
//! throttles, a broker setting), partition additions and broker unregistration (SCRAM
//! credential changes are the lab's: `kafka_lab::scram`). One request per connection, over a broker's plaintext listener, whose
//! ANONYMOUS user the lab makes a super user (also on a SASL_SSL lab). The lab runs
//! Kafka 4.1, so the versions are fixed rather than negotiated.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, IncrementalAlterConfigsRequest, RequestHeader,
    ResponseHeader, TopicName, UnregisterBrokerRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Kafka's config resource types.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

/// IncrementalAlterConfigs operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Sends `request` at `version` to `address` and decodes the answer.
async fn call<R: Request>(address: &str, request: &R, version: i16) -> Result<R::Response> {
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(address)
            .await
            .with_context(|| format!("connect {address}"))?;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(1)
            .with_client_id(Some(StrBytes::from_static_str("kafka-watchdog-bench")));
        let mut buf = BytesMut::with_capacity(256);
        buf.put_i32(0);
        header.encode(&mut buf, R::header_version(version))?;
        request.encode(&mut buf, version)?;
        let len = i32::try_from(buf.len() - 4)?;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        s.write_all(&buf).await?;
        let mut prefix = [0u8; 4];
        s.read_exact(&mut prefix).await?;
        let n = usize::try_from(i32::from_be_bytes(prefix)).context("negative frame length")?;
        if n > 16 << 20 {
            bail!("answer of {n} bytes announced");
        }
        let mut body = vec![0u8; n];
        s.read_exact(&mut body).await?;
        let mut body = Bytes::from(body);
        ResponseHeader::decode(&mut body, R::Response::header_version(version))?;
        R::Response::decode(&mut body, version)
    };
    tokio::time::timeout(TIMEOUT, exchange)
        .await
        .with_context(|| format!("{address}: no answer within {} s", TIMEOUT.as_secs()))?
}

fn check(what: &str, code: i16, message: Option<&StrBytes>) -> Result<()> {
    if code != 0 {
        bail!(
            "{what}: {} ({code}){}",
            kafka_watchdog::observe::wire::kafka_error_name(code),
            message.map(|m| format!(": {m}")).unwrap_or_default()
        );
    }
    Ok(())
}

/// Sets (`Some`) or removes (`None`, back to the default) configs of one resource.
pub async fn alter_configs(
    address: &str,
    resource_type: i8,
    name: &str,
    configs: &[(&str, Option<String>)],
) -> Result<()> {
    let resource = AlterConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(StrBytes::from_string(name.to_string()))
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    AlterableConfig::default()
                        .with_name(StrBytes::from_string((*k).to_string()))
                        .with_config_operation(if v.is_some() { OP_SET } else { OP_DELETE })
                        .with_value(v.clone().map(StrBytes::from_string))
                })
                .collect(),
        );
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![resource]);
    let answer = call(address, &request, 1).await?;
    for r in &answer.responses {
        check(
            &format!("alter configs of {name}"),
            r.error_code,
            r.error_message.as_ref(),
        )?;
    }
    Ok(())
}

/// Grows `topic` to `count` partitions; Kafka places the new replicas.
pub async fn create_partitions(address: &str, topic: &str, count: i32) -> Result<()> {
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_count(count)
            // Null, not an empty list: Kafka then places the new replicas itself.
            .with_assignments(None)]);
    let answer = call(address, &request, 3).await?;
    for r in &answer.results {
        check(
            &format!("add partitions to {topic}"),
            r.error_code,
            r.error_message.as_ref(),
        )?;
    }
    Ok(())
}

/// Removes a stopped broker's registration, the last step of decommissioning in KRaft.
pub async fn unregister_broker(address: &str, broker: i32) -> Result<()> {
    let request = UnregisterBrokerRequest::default().with_broker_id(BrokerId(broker));
    let answer = call(address, &request, 0).await?;
    check(
        &format!("unregister broker {broker}"),
        answer.error_code,
        answer.error_message.as_ref(),
    )
}
