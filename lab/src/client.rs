//! Kafka client helpers for tests, built on rdkafka: topics with an explicit replica
//! assignment, produce with a chosen `acks`, read a partition back, wait for a metadata
//! condition. All blocking, with explicit deadlines: librdkafka's defaults would turn a hung
//! broker into half a minute of waiting.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use crate::error::LabError;

fn base_config(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("socket.timeout.ms", "5000")
        .set("socket.connection.setup.timeout.ms", "3000")
        .set("api.version.request.timeout.ms", "3000")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .set("log_level", "3");
    c
}

/// Polls `check` every 250 ms until it yields a value or `timeout` passes.
pub fn wait_until<T>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> Option<T>,
) -> Result<T, LabError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            return Err(LabError::Timeout {
                what: what.to_string(),
                secs: timeout.as_secs(),
            });
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// One partition as a client's metadata shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    pub partition: i32,
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// The partition-level error librdkafka reports (e.g. LeaderNotAvailable), if any.
    pub error: Option<String>,
}

/// Brokers listed in cluster metadata (registered and, in KRaft, unfenced).
pub fn registered_brokers(bootstrap: &str) -> Result<Vec<i32>, LabError> {
    let consumer: BaseConsumer = base_config(bootstrap)
        .create()
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    let md = consumer
        .fetch_metadata(None, Duration::from_secs(3))
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    Ok(md.brokers().iter().map(|b| b.id()).collect())
}

/// The partitions of `topic` as metadata shows them.
pub fn partitions(bootstrap: &str, topic: &str) -> Result<Vec<PartitionState>, LabError> {
    let consumer: BaseConsumer = base_config(bootstrap)
        .create()
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(5))
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    let t = md
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .ok_or_else(|| LabError::Kafka(format!("topic {topic} missing from metadata")))?;
    let mut out: Vec<PartitionState> = t
        .partitions()
        .iter()
        .map(|p| PartitionState {
            partition: p.id(),
            leader: p.leader(),
            replicas: p.replicas().to_vec(),
            isr: p.isr().to_vec(),
            error: p
                .error()
                .map(|e| format!("{:?}", RDKafkaErrorCode::from(e))),
        })
        .collect();
    out.sort_by_key(|p| p.partition);
    Ok(out)
}

/// Every partition, of every topic, whose ISR is smaller than its replica list, as
/// `topic-partition isr [..] of replicas [..]`.
pub fn under_replicated(bootstrap: &str) -> Result<Vec<String>, LabError> {
    let consumer: BaseConsumer = base_config(bootstrap)
        .create()
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    let md = consumer
        .fetch_metadata(None, Duration::from_secs(5))
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    Ok(md
        .topics()
        .iter()
        .flat_map(|t| {
            t.partitions()
                .iter()
                .filter(|p| p.isr().len() < p.replicas().len())
                .map(move |p| {
                    format!(
                        "{}-{} isr {:?} of replicas {:?}",
                        t.name(),
                        p.id(),
                        p.isr(),
                        p.replicas()
                    )
                })
        })
        .collect())
}

/// Creates `topic` with one partition per entry of `assignment` (the replica list, preferred
/// leader first) and the given topic configs. Waits until every partition has a leader.
pub fn create_topic(
    bootstrap: &str,
    topic: &str,
    assignment: &[Vec<i32>],
    configs: &[(&str, &str)],
) -> Result<(), LabError> {
    let admin: AdminClient<DefaultClientContext> = base_config(bootstrap)
        .create()
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    let refs: Vec<&[i32]> = assignment.iter().map(Vec::as_slice).collect();
    let mut new = NewTopic::new(
        topic,
        assignment.len() as i32,
        TopicReplication::Variable(&refs),
    );
    for (k, v) in configs {
        new = new.set(k, v);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let results = rt
        .block_on(admin.create_topics([&new], &opts))
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    for r in results {
        if let Err((name, code)) = r {
            if code != RDKafkaErrorCode::TopicAlreadyExists {
                return Err(LabError::Kafka(format!("create topic {name}: {code:?}")));
            }
        }
    }
    wait_until(
        Duration::from_secs(30),
        &format!("{topic} to have leaders"),
        || {
            let ps = partitions(bootstrap, topic).ok()?;
            (ps.len() == assignment.len() && ps.iter().all(|p| p.leader >= 0)).then_some(())
        },
    )
}

/// Adds one partition to `topic` per entry of `assignment` (the replica list, preferred
/// leader first). Waits until every partition has a leader.
pub fn add_partitions(
    bootstrap: &str,
    topic: &str,
    assignment: &[Vec<i32>],
) -> Result<(), LabError> {
    let before = partitions(bootstrap, topic)?.len();
    let total = before + assignment.len();
    let admin: AdminClient<DefaultClientContext> = base_config(bootstrap)
        .create()
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    let refs: Vec<&[i32]> = assignment.iter().map(Vec::as_slice).collect();
    let new = NewPartitions::new(topic, total).assign(&refs);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let results = rt
        .block_on(admin.create_partitions([&new], &opts))
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    for r in results {
        if let Err((name, code)) = r {
            return Err(LabError::Kafka(format!(
                "add partitions to {name}: {code:?}"
            )));
        }
    }
    wait_until(
        Duration::from_secs(30),
        &format!("{topic}'s {total} partitions to have leaders"),
        || {
            let ps = partitions(bootstrap, topic).ok()?;
            (ps.len() == total && ps.iter().all(|p| p.leader >= 0)).then_some(())
        },
    )
}

/// Deletes a topic (ignores a missing one).
pub fn delete_topic(bootstrap: &str, topic: &str) -> Result<(), LabError> {
    let admin: AdminClient<DefaultClientContext> = base_config(bootstrap)
        .create()
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let results = rt
        .block_on(admin.delete_topics(&[topic], &opts))
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    for r in results {
        if let Err((name, code)) = r {
            if code != RDKafkaErrorCode::UnknownTopicOrPartition {
                return Err(LabError::Kafka(format!("delete topic {name}: {code:?}")));
            }
        }
    }
    Ok(())
}

/// What happened to each record of a produce run, in send order.
#[derive(Debug, Clone, Default)]
pub struct ProduceReport {
    /// (payload, offset) of each acknowledged record.
    pub acknowledged: Vec<(String, i64)>,
    /// (payload, error code) of each failed record.
    pub failed: Vec<(String, RDKafkaErrorCode)>,
}

impl ProduceReport {
    pub fn failed_with(&self, code: RDKafkaErrorCode) -> usize {
        self.failed.iter().filter(|(_, c)| *c == code).count()
    }
}

#[derive(Default)]
struct Collect(Arc<Mutex<ProduceReport>>);

impl ClientContext for Collect {}

impl ProducerContext for Collect {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let mut report = self.0.lock().expect("report lock");
        match result {
            Ok(m) => {
                let payload = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                report.acknowledged.push((payload, m.offset()));
            }
            Err((e, m)) => {
                let payload = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                let code = e.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail);
                report.failed.push((payload, code));
            }
        }
    }
}

/// A producer with a chosen `acks` ("0", "1", "all"), no retries, each record failing after
/// `timeout`. It keeps its metadata for minutes, as a long-lived application producer does:
/// one created before a leader is isolated keeps writing to the old leader.
pub struct LabProducer {
    producer: BaseProducer<Collect>,
    report: Arc<Mutex<ProduceReport>>,
    timeout: Duration,
}

impl LabProducer {
    pub fn new(bootstrap: &str, acks: &str, timeout: Duration) -> Result<Self, LabError> {
        let report = Arc::new(Mutex::new(ProduceReport::default()));
        let ms = timeout.as_millis().to_string();
        let producer: BaseProducer<Collect> = base_config(bootstrap)
            .set("acks", acks)
            .set("enable.idempotence", "false")
            .set("retries", "0")
            .set("linger.ms", "0")
            .set("message.timeout.ms", &ms)
            .set("request.timeout.ms", &ms)
            .set("topic.metadata.refresh.interval.ms", "600000")
            .create_with_context(Collect(report.clone()))
            .map_err(|e| LabError::Kafka(e.to_string()))?;
        Ok(LabProducer {
            producer,
            report,
            timeout,
        })
    }

    /// Sends `payloads` to one partition and waits for every delivery report.
    pub fn send(
        &self,
        topic: &str,
        partition: i32,
        payloads: &[String],
    ) -> Result<ProduceReport, LabError> {
        *self.report.lock().expect("report lock") = ProduceReport::default();
        for p in payloads {
            let mut record = BaseRecord::<(), [u8]>::to(topic)
                .partition(partition)
                .payload(p.as_bytes());
            loop {
                match self.producer.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                        record = r;
                        self.producer.poll(Duration::from_millis(50));
                    }
                    Err((e, _)) => return Err(LabError::Kafka(format!("send: {e}"))),
                }
            }
            self.producer.poll(Duration::ZERO);
        }
        let _ = self.producer.flush(self.timeout + Duration::from_secs(5));
        let out = std::mem::take(&mut *self.report.lock().expect("report lock"));
        Ok(out)
    }
}

/// Sends `payloads` to one partition through a fresh producer (see `LabProducer`).
pub fn produce(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    acks: &str,
    payloads: &[String],
    timeout: Duration,
) -> Result<ProduceReport, LabError> {
    LabProducer::new(bootstrap, acks, timeout)?.send(topic, partition, payloads)
}

/// Reads every record of one partition from the beginning up to its high watermark.
/// Returns (payload, offset) pairs.
pub fn read_partition(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    timeout: Duration,
) -> Result<Vec<(String, i64)>, LabError> {
    let consumer: BaseConsumer = base_config(bootstrap)
        .set("group.id", "kafka-lab-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    let (low, high) = consumer
        .fetch_watermarks(topic, partition, timeout)
        .map_err(|e| LabError::Kafka(format!("watermarks: {e}")))?;
    let mut out = Vec::new();
    if high <= low {
        return Ok(out);
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Beginning)
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    consumer
        .assign(&tpl)
        .map_err(|e| LabError::Kafka(e.to_string()))?;
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let payload = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                out.push((payload, m.offset()));
                if m.offset() + 1 >= high {
                    return Ok(out);
                }
            }
            Some(Err(KafkaError::PartitionEOF(_))) => return Ok(out),
            Some(Err(e)) => return Err(LabError::Kafka(format!("consume: {e}"))),
            None => {}
        }
    }
    Err(LabError::Timeout {
        what: format!("{topic}-{partition} to be read up to offset {high}"),
        secs: timeout.as_secs(),
    })
}
