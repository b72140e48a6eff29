//! Times a broker's answers to coordinator requests, each on its own connection, to see
//! which wait while `kafka-lab stall N --group-coordinator` (or `--txn-coordinator`) holds
//! its threads. Raw requests, so nothing retries or hides a timeout:
//!
//!   coordinator_probe setup N         a topic `coord-probe`, then a group id and a
//!                                     transactional id that broker N coordinates
//!   coordinator_probe probe N GROUP TXN [SECONDS]
//!                                     Metadata, Produce, FindCoordinator (group, txn),
//!                                     OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
//!                                     InitProducerId at once; and a Metadata sent after an
//!                                     OffsetCommit on one connection
//!   coordinator_probe txn TXN [SECONDS]
//!                                     a transactional producer (librdkafka): init, then
//!                                     two transactions of one record each, every step timed

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const TOPIC: &str = "coord-probe";

fn address(id: i32) -> String {
    kafka_lab::broker_address(id)
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

struct Conn {
    stream: TcpStream,
    correlation: i32,
}

impl Conn {
    fn open(address: &str, timeout: Duration) -> Result<Conn, String> {
        let stream = TcpStream::connect(address).map_err(|e| format!("connect: {e}"))?;
        stream.set_read_timeout(Some(timeout)).unwrap();
        Ok(Conn {
            stream,
            correlation: 0,
        })
    }

    fn send<R: Request>(&mut self, request: &R, version: i16) -> Result<(), String> {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(s("coordinator-probe")));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, R::header_version(version))
            .and_then(|()| request.encode(&mut body, version))
            .map_err(|e| format!("encode: {e}"))?;
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        self.stream
            .write_all(&frame)
            .map_err(|e| format!("send: {e}"))
    }

    fn receive<R: Request>(&mut self, version: i16) -> Result<R::Response, String> {
        let mut len = [0u8; 4];
        self.stream
            .read_exact(&mut len)
            .map_err(|e| format!("no answer ({e})"))?;
        let mut answer = vec![0u8; i32::from_be_bytes(len) as usize];
        self.stream
            .read_exact(&mut answer)
            .map_err(|e| format!("cut short ({e})"))?;
        let mut buf = Bytes::from(answer);
        ResponseHeader::decode(&mut buf, R::Response::header_version(version))
            .map_err(|e| format!("header: {e}"))?;
        R::Response::decode(&mut buf, version).map_err(|e| format!("decode: {e}"))
    }

    fn call<R: Request>(&mut self, request: &R, version: i16) -> Result<R::Response, String> {
        self.send(request, version)?;
        self.receive::<R>(version)
    }
}

/// One request on a fresh connection; the answer and how long it took.
fn timed<R: Request>(
    address: &str,
    request: &R,
    version: i16,
    timeout: Duration,
) -> (Duration, Result<R::Response, String>) {
    let start = Instant::now();
    let answer = Conn::open(address, timeout).and_then(|mut c| c.call(request, version));
    (start.elapsed(), answer)
}

fn metadata(topics: &[&str]) -> MetadataRequest {
    MetadataRequest::default().with_topics(Some(
        topics
            .iter()
            .map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(s(t)))))
            .collect(),
    ))
}

/// Partition leaders of `topic`, by partition index.
fn leaders(topic: &str) -> Vec<i32> {
    let Ok(answer) = Conn::open(&address(1), Duration::from_secs(5))
        .and_then(|mut c| c.call(&metadata(&[topic]), 12))
    else {
        return Vec::new();
    };
    let mut partitions: Vec<(i32, i32)> = answer
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .flat_map(|t| &t.partitions)
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect();
    partitions.sort();
    partitions.into_iter().map(|(_, l)| l).collect()
}

/// Kafka's `Utils.abs(key.hashCode()) % partitions`.
fn partition_of(key: &str, partitions: usize) -> usize {
    let hash = key
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32));
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs as usize % partitions
}

fn find_coordinator(key: &str, key_type: i8) -> FindCoordinatorRequest {
    FindCoordinatorRequest::default()
        .with_key_type(key_type)
        .with_coordinator_keys(vec![s(key)])
}

/// Leaders of an internal topic, creating it (FindCoordinator through broker 1) if needed.
fn internal_leaders(topic: &str, key_type: i8) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = leaders(topic);
        if !found.is_empty() && found.iter().all(|l| *l >= 0) {
            return found;
        }
        assert!(Instant::now() < deadline, "{topic} has no leaders");
        let _ = timed(
            &address(1),
            &find_coordinator("warm-up", key_type),
            4,
            Duration::from_secs(5),
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn pick(prefix: &str, leaders: &[i32], target: i32) -> String {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .find(|k| leaders[partition_of(k, leaders.len())] == target)
        .expect("some key maps to the target")
}

fn setup(target: i32) {
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_num_partitions(3)
            .with_replication_factor(3)]);
    let (_, answer) = timed(&address(1), &create, 5, Duration::from_secs(15));
    let codes: Vec<i16> = answer
        .expect("CreateTopics")
        .topics
        .iter()
        .map(|t| t.error_code)
        .collect();
    println!("create {TOPIC}: error codes {codes:?} (36: exists already)");
    let offsets = internal_leaders("__consumer_offsets", 0);
    let txns = internal_leaders("__transaction_state", 1);
    let group = pick("probe-group", &offsets, target);
    let txn = pick("probe-txn", &txns, target);
    println!(
        "group {group}: __consumer_offsets-{}; txn {txn}: __transaction_state-{}; both led by {target}",
        partition_of(&group, offsets.len()),
        partition_of(&txn, txns.len())
    );
    println!("GROUP={group} TXN={txn}");
}

fn produce(partition: i32) -> ProduceRequest {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 0,
        key: None,
        value: Some(Bytes::from_static(b"probe")),
        headers: Default::default(),
    };
    let mut records = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut records,
        [&record],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("a record batch");
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records.freeze()))])])
}

fn offset_commit(group: &str, partition: i32) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(1)])])
}

fn report<T>(
    name: &str,
    (took, answer): (Duration, Result<T, String>),
    summary: impl Fn(&T) -> String,
) {
    let ms = took.as_secs_f64() * 1000.0;
    match answer {
        Ok(a) => println!("{name:<28} answered in {ms:8.1} ms: {}", summary(&a)),
        Err(e) => println!("{name:<28} {e} after {ms:8.1} ms"),
    }
}

fn probe(target: i32, group: &str, txn: &str, timeout: Duration) {
    let at = address(target);
    let partition = leaders(TOPIC)
        .iter()
        .position(|l| *l == target)
        .expect("a coord-probe partition led by the target") as i32;
    std::thread::scope(|scope| {
        let at = at.as_str();
        scope.spawn(move || {
            report(
                "Metadata",
                timed(at, &metadata(&[TOPIC]), 12, timeout),
                |a| format!("{} brokers", a.brokers.len()),
            )
        });
        scope.spawn(move || {
            report(
                &format!("Produce {TOPIC}-{partition}"),
                timed(at, &produce(partition), 9, timeout),
                |a| {
                    let codes: Vec<i16> = a
                        .responses
                        .iter()
                        .flat_map(|t| &t.partition_responses)
                        .map(|p| p.error_code)
                        .collect();
                    format!("error {codes:?}")
                },
            )
        });
        for (name, key_type, key) in [("group", 0, group), ("txn", 1, txn)] {
            scope.spawn(move || {
                report(
                    &format!("FindCoordinator {name}"),
                    timed(at, &find_coordinator(key, key_type), 4, timeout),
                    |a| {
                        let c = &a.coordinators[0];
                        format!("node {} error {}", c.node_id.0, c.error_code)
                    },
                )
            });
        }
        scope.spawn(move || {
            report(
                "OffsetCommit",
                timed(at, &offset_commit(group, partition), 8, timeout),
                |a| {
                    let codes: Vec<i16> = a
                        .topics
                        .iter()
                        .flat_map(|t| &t.partitions)
                        .map(|p| p.error_code)
                        .collect();
                    format!("error {codes:?}")
                },
            )
        });
        scope.spawn(move || {
            let request =
                OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(s(group)))
                    .with_topics(None)]);
            report("OffsetFetch", timed(at, &request, 8, timeout), |a| {
                let g = &a.groups[0];
                let offsets: Vec<i64> = g
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.committed_offset)
                    .collect();
                format!("error {} offsets {offsets:?}", g.error_code)
            })
        });
        scope.spawn(move || {
            let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]);
            report("DescribeGroups", timed(at, &request, 5, timeout), |a| {
                let g = &a.groups[0];
                format!("error {} state {:?}", g.error_code, g.group_state.as_str())
            })
        });
        scope.spawn(move || {
            report(
                "ListGroups",
                timed(at, &ListGroupsRequest::default(), 4, timeout),
                |a| format!("error {} groups {}", a.error_code, a.groups.len()),
            )
        });
        scope.spawn(move || {
            let request = InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(s(txn))))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1);
            report("InitProducerId", timed(at, &request, 4, timeout), |a| {
                format!(
                    "error {} producer {} epoch {}",
                    a.error_code, a.producer_id.0, a.producer_epoch
                )
            })
        });
        scope.spawn(move || {
            // Kafka reads one request of a connection at a time: does a Metadata behind a
            // waiting OffsetCommit wait too?
            let start = Instant::now();
            let answer = Conn::open(at, timeout).and_then(|mut c| {
                c.send(&offset_commit(group, partition), 8)?;
                c.send(&metadata(&[TOPIC]), 12)?;
                c.receive::<OffsetCommitRequest>(8)?;
                c.receive::<MetadataRequest>(12)
            });
            report(
                "Metadata after OffsetCommit",
                (start.elapsed(), answer),
                |_| "(same connection)".into(),
            )
        });
    });
}

/// librdkafka's transactional producer: each step's time and outcome.
fn transactions(txn: &str, timeout: Duration) {
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", address(1))
        .set("transactional.id", txn)
        .set("transaction.timeout.ms", "60000")
        .create()
        .expect("a producer");
    let step = |name: &str, f: &dyn Fn() -> Result<(), String>| {
        let start = Instant::now();
        let outcome = f();
        let ms = start.elapsed().as_secs_f64() * 1000.0;
        println!("{name:<28} {ms:8.1} ms: {outcome:?}");
        outcome.is_ok()
    };
    if !step("init_transactions", &|| {
        producer
            .init_transactions(timeout)
            .map_err(|e| e.to_string())
    }) {
        return;
    }
    for round in 1..=2 {
        let ok = step(&format!("transaction {round}: begin+send"), &|| {
            producer.begin_transaction().map_err(|e| e.to_string())?;
            producer
                .send(BaseRecord::<(), str>::to(TOPIC).payload("txn"))
                .map_err(|(e, _)| e.to_string())
        }) && step(&format!("transaction {round}: commit"), &|| {
            producer
                .commit_transaction(timeout)
                .map_err(|e| e.to_string())
        });
        if !ok {
            return;
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let target = |i: usize| args[i].parse::<i32>().expect("a broker id");
    match args.first().map(String::as_str) {
        Some("setup") => setup(target(1)),
        Some("probe") => {
            let seconds = args.get(4).map_or(40, |t| t.parse().expect("seconds"));
            probe(target(1), &args[2], &args[3], Duration::from_secs(seconds))
        }
        Some("txn") => {
            let seconds = args.get(2).map_or(30, |t| t.parse().expect("seconds"));
            transactions(&args[1], Duration::from_secs(seconds))
        }
        _ => eprintln!(
            "usage: coordinator_probe setup N | probe N GROUP TXN [SECONDS] | txn TXN [SECONDS]"
        ),
    }
}
