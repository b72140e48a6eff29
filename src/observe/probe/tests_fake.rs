//! Whole rounds against in-process fake brokers: what the prober asks again, and what the
//! evaluator then makes of the round.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::describe_topic_partitions_response::{
    DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeConfigsRequest, DescribeConfigsResponse,
    DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
    ListPartitionReassignmentsResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::*;
use crate::judge::report::{ClusterReport, Evaluator};
use crate::judge::verdict::BrokerState;
use kafka_watchdog_test_support::fake_broker::{
    answer, answer_api_versions, ranges_with, FakeBroker, Reply,
};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

#[derive(Clone)]
struct Part {
    leader: i32,
    epoch: i32,
    isr: Vec<i32>,
}

fn part(leader: i32, epoch: i32, isr: &[i32]) -> Part {
    Part {
        leader,
        epoch,
        isr: isr.to_vec(),
    }
}

/// What one fake broker answers. Topic "t" has one partition, replicas [1, 2, 3].
#[derive(Clone)]
struct Script {
    /// Metadata for every topic: partition 0 of "t".
    full: Part,
    /// Metadata naming "t" (a second ask); `full` when None.
    named: Option<Part>,
    /// The second ask is not answered: the connection closes.
    named_fails: bool,
    /// DescribeConfigs of "t"; None: the connection is closed instead.
    configs: Option<Vec<(&'static str, &'static str)>>,
    /// DescribeTopicPartitions: partition 0's eligible leader replicas.
    elr: Option<Vec<i32>>,
    /// Brokers 1001.. listed besides the real ones, at a port nothing listens on.
    phantoms: i32,
    /// Until then its answers lack "t" (a topic created a moment ago that it has not
    /// applied yet): not in an answer about every topic, UNKNOWN_TOPIC_OR_PARTITION by name.
    learns_t_at: Option<std::time::Instant>,
}

impl Script {
    fn says(full: Part) -> Script {
        Script {
            full,
            named: None,
            named_fails: false,
            configs: None,
            elr: None,
            phantoms: 0,
            learns_t_at: None,
        }
    }
}

#[derive(Default)]
struct Shared {
    ports: BTreeMap<i32, u16>,
    scripts: BTreeMap<i32, Script>,
}

struct Cluster {
    brokers: BTreeMap<i32, FakeBroker>,
    shared: Arc<Mutex<Shared>>,
}

fn metadata(shared: &Shared, id: i32, request: &MetadataRequest) -> MetadataResponse {
    let script = &shared.scripts[&id];
    let brokers = shared
        .ports
        .iter()
        .map(|(id, port)| (*id, i32::from(*port)))
        .chain((0..script.phantoms).map(|k| (1001 + k, 1)))
        .map(|(id, port)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(id))
                .with_host(s("127.0.0.1"))
                .with_port(port)
        })
        .collect();
    let unaware = script
        .learns_t_at
        .is_some_and(|at| std::time::Instant::now() < at);
    if unaware && request.topics.as_ref().is_some_and(|t| !t.is_empty()) {
        let unknown = MetadataResponseTopic::default()
            .with_name(Some(TopicName(s("t"))))
            .with_error_code(3);
        return MetadataResponse::default()
            .with_cluster_id(Some(s("fake")))
            .with_controller_id(BrokerId(1))
            .with_brokers(brokers)
            .with_topics(vec![unknown]);
    }
    let p = match &request.topics {
        None if unaware => None,
        None => Some(&script.full),
        Some(named) if named.is_empty() => None,
        Some(_) => Some(script.named.as_ref().unwrap_or(&script.full)),
    };
    let topics = p
        .map(|p| {
            vec![MetadataResponseTopic::default()
                .with_name(Some(TopicName(s("t"))))
                .with_partitions(vec![MetadataResponsePartition::default()
                    .with_partition_index(0)
                    .with_error_code(if p.leader < 0 { 5 } else { 0 })
                    .with_leader_id(BrokerId(p.leader))
                    .with_leader_epoch(p.epoch)
                    .with_replica_nodes(vec![BrokerId(1), BrokerId(2), BrokerId(3)])
                    .with_isr_nodes(p.isr.iter().copied().map(BrokerId).collect())])]
        })
        .unwrap_or_default();
    MetadataResponse::default()
        .with_cluster_id(Some(s("fake")))
        .with_controller_id(BrokerId(1))
        .with_brokers(brokers)
        .with_topics(topics)
}

impl Cluster {
    /// Brokers 1..=n as scripted, speaking Kafka 4.1's APIs with DescribeTopicPartitions
    /// and without DescribeCluster.
    async fn start(scripts: Vec<Script>) -> Cluster {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let mut ranges = ranges_with(&[(ApiKey::DescribeCluster, 1, 0)]);
        ranges.push((ApiKey::DescribeTopicPartitions, 0, 0));
        let mut brokers = BTreeMap::new();
        for (i, script) in scripts.into_iter().enumerate() {
            let id = i as i32 + 1;
            shared.lock().unwrap().scripts.insert(id, script);
            let (shared_here, ranges) = (shared.clone(), ranges.clone());
            let b = FakeBroker::start(move |r| {
                let shared = shared_here.lock().unwrap();
                match ApiKey::try_from(r.api_key) {
                    Ok(ApiKey::ApiVersions) => answer_api_versions(r, &ranges),
                    Ok(ApiKey::Metadata) => {
                        let request: MetadataRequest = r.decode();
                        let named = request.topics.as_ref().is_some_and(|t| !t.is_empty());
                        if named && shared.scripts[&id].named_fails {
                            return Reply::Close;
                        }
                        answer(r, &metadata(&shared, id, &request))
                    }
                    Ok(ApiKey::DescribeConfigs) => {
                        let Some(configs) = &shared.scripts[&id].configs else {
                            return Reply::Close;
                        };
                        let request: DescribeConfigsRequest = r.decode();
                        let results = request
                            .resources
                            .iter()
                            .map(|res| {
                                DescribeConfigsResult::default()
                                    .with_resource_type(res.resource_type)
                                    .with_resource_name(res.resource_name.clone())
                                    .with_configs(
                                        configs
                                            .iter()
                                            .map(|(k, v)| {
                                                DescribeConfigsResourceResult::default()
                                                    .with_name(s(k))
                                                    .with_value(Some(s(v)))
                                            })
                                            .collect(),
                                    )
                            })
                            .collect();
                        answer(r, &DescribeConfigsResponse::default().with_results(results))
                    }
                    // Nothing is being reassigned.
                    Ok(ApiKey::ListPartitionReassignments) => {
                        answer(r, &ListPartitionReassignmentsResponse::default())
                    }
                    Ok(ApiKey::DescribeTopicPartitions) => {
                        let _: DescribeTopicPartitionsRequest = r.decode();
                        let script = &shared.scripts[&id];
                        let partition = DescribeTopicPartitionsResponsePartition::default()
                            .with_partition_index(0)
                            .with_leader_id(BrokerId(script.full.leader))
                            .with_eligible_leader_replicas(
                                script
                                    .elr
                                    .as_ref()
                                    .map(|e| e.iter().copied().map(BrokerId).collect()),
                            );
                        let topic = DescribeTopicPartitionsResponseTopic::default()
                            .with_name(Some(TopicName(s("t"))))
                            .with_partitions(vec![partition]);
                        answer(
                            r,
                            &DescribeTopicPartitionsResponse::default().with_topics(vec![topic]),
                        )
                    }
                    _ => Reply::Close,
                }
            })
            .await;
            let port = b.address.rsplit(':').next().unwrap().parse().unwrap();
            shared.lock().unwrap().ports.insert(id, port);
            brokers.insert(id, b);
        }
        Cluster { brokers, shared }
    }

    fn prober(&self) -> ClusterProber {
        ClusterProber::new(ProbeSettings {
            cluster: "fake".into(),
            bootstrap_servers: vec![self.brokers[&1].address.clone()],
            wire: WireOptions {
                connect_timeout: Duration::from_millis(500),
                request_timeout: Duration::from_millis(500),
                ..WireOptions::default()
            },
            forget_broker_after: Duration::from_secs(3600),
            topic_config_refresh: Duration::ZERO,
            full_metadata_budget: DEFAULT_FULL_METADATA_BUDGET,
            scoped_topics: Vec::new(),
        })
    }

    fn script(&self, id: i32, change: impl FnOnce(&mut Script)) {
        change(self.shared.lock().unwrap().scripts.get_mut(&id).unwrap());
    }

    fn metadata_asks(&self, id: i32) -> usize {
        self.brokers[&id]
            .seen()
            .iter()
            .filter(|r| r.api_key == ApiKey::Metadata as i16)
            .count()
    }
}

fn evaluator() -> Evaluator {
    Evaluator::new("fake", Default::default(), Arc::new(|_: &str| true))
}

async fn evaluate(e: &mut Evaluator, prober: &mut ClusterProber) -> ClusterReport {
    let obs = prober.round().await;
    let view = Arc::new(crate::judge::report::newest_view(&obs));
    e.evaluate_merged(obs, view, None, SystemTime::now())
}

/// Broker 1 answered just before the controller moved its leadership to broker 2 (epoch 5):
/// for that answer it still leads at epoch 4. Asked again, it knows better: no stale leader.
#[tokio::test]
async fn a_stale_claim_the_broker_does_not_repeat_does_not_count() {
    let fresh = part(2, 5, &[2, 3]);
    let c = Cluster::start(vec![
        Script {
            named: Some(fresh.clone()),
            ..Script::says(part(1, 4, &[1, 2, 3]))
        },
        Script::says(fresh.clone()),
        Script::says(fresh),
    ])
    .await;
    let mut prober = c.prober();
    let report = evaluate(&mut evaluator(), &mut prober).await;
    assert!(
        report.stale_leaders.is_empty(),
        "{:?}",
        report.stale_leaders
    );
    assert!(
        report.disagreements.is_empty(),
        "{:?}",
        report.disagreements
    );
    assert!(c.metadata_asks(1) >= 2, "broker 1 was asked again");
    assert!(
        report.verdict(1).is_some_and(|v| !v
            .hits
            .iter()
            .any(|h| h.rule == crate::judge::verdict::Rule::StaleLeader)),
        "{:?}",
        report.verdict(1)
    );
}

/// An isolated broker (incident 3) repeats its claim: it counts.
#[tokio::test]
async fn a_stale_claim_the_broker_repeats_counts() {
    let fresh = part(2, 5, &[2, 3]);
    let c = Cluster::start(vec![
        Script::says(part(1, 4, &[1, 2, 3])),
        Script::says(fresh.clone()),
        Script::says(fresh),
    ])
    .await;
    let report = evaluate(&mut evaluator(), &mut c.prober()).await;
    assert_eq!(report.stale_leaders.len(), 1, "{:?}", report.stale_leaders);
    assert_eq!(report.stale_leaders[0].broker, 1);
    assert!(c.metadata_asks(1) >= 2, "broker 1 was asked again");
    assert_eq!(c.metadata_asks(2), 1, "no claim, no second ask");
}

/// A claim the broker does not repeat because it does not answer again is not confirmed
/// either: it does not count (the broker's other answers still do).
#[tokio::test]
async fn a_stale_claim_without_a_second_answer_does_not_count() {
    let fresh = part(2, 5, &[2, 3]);
    let c = Cluster::start(vec![
        Script {
            named_fails: true,
            ..Script::says(part(1, 4, &[1, 2, 3]))
        },
        Script::says(fresh.clone()),
        Script::says(fresh),
    ])
    .await;
    let report = evaluate(&mut evaluator(), &mut c.prober()).await;
    assert!(
        report.stale_leaders.is_empty(),
        "{:?}",
        report.stale_leaders
    );
    assert!(report.probes[&1].answered(), "its first answer stands");
}

/// A rolling restart: broker 3 was catching up (ISR [2]) when one round looked, rejoined and
/// took over from broker 2 before the next. The topic's unclean.leader.election.enable could
/// not be read (DescribeConfigs failed): Kafka's default (false) holds, nothing unclean.
#[tokio::test]
async fn an_unreadable_topic_config_does_not_make_elections_unclean() {
    let before = part(2, 4, &[2]);
    let c = Cluster::start(vec![
        Script::says(before.clone()),
        Script::says(before.clone()),
        Script::says(before),
    ])
    .await;
    let mut prober = c.prober();
    let mut e = evaluator();
    evaluate(&mut e, &mut prober).await;
    for id in 1..=3 {
        c.script(id, |s| s.full = part(3, 5, &[3]));
    }
    let report = evaluate(&mut e, &mut prober).await;
    assert!(
        report.unclean_elections.is_empty(),
        "{:?}",
        report.unclean_elections
    );
}

/// The same two rounds on a topic that allows unclean elections: reported, unless broker 3
/// was an eligible leader replica (KIP-966) when the first round looked.
#[tokio::test]
async fn where_unclean_elections_are_allowed_only_a_leader_from_outside_the_elr_is_unclean() {
    for (elr, unclean) in [(None, 1), (Some(vec![3]), 0), (Some(vec![1]), 1)] {
        let before = Script {
            configs: Some(vec![
                ("unclean.leader.election.enable", "true"),
                ("min.insync.replicas", "2"),
            ]),
            elr: elr.clone(),
            ..Script::says(part(2, 4, &[2]))
        };
        let c = Cluster::start(vec![before.clone(), before.clone(), before]).await;
        let mut prober = c.prober();
        let mut e = evaluator();
        evaluate(&mut e, &mut prober).await;
        for id in 1..=3 {
            c.script(id, |s| {
                s.full = part(3, 5, &[3]);
                s.elr = None;
            });
        }
        let report = evaluate(&mut e, &mut prober).await;
        assert_eq!(
            report.unclean_elections.len(),
            unclean,
            "ELR {elr:?}: {:?}",
            report.unclean_elections
        );
    }
}

/// A reassignment that completed between the round's metadata and its listing of
/// reassignments: the metadata still shows broker 3 outside the ISR of the partition it was
/// being added to, and the listing no longer lists it. Read again after the listing, the
/// partition has it in its ISR: copying, done, not missing (the remove-broker phase of the
/// routine bench flagged healthy brokers `degraded` for a round this way).
#[tokio::test]
async fn a_replica_a_newer_read_shows_back_in_the_isr_is_not_flagged() {
    let caught_in_flight = part(1, 5, &[1, 2]);
    let done = part(1, 5, &[1, 2, 3]);
    let script = || Script {
        named: Some(done.clone()),
        ..Script::says(caught_in_flight.clone())
    };
    let c = Cluster::start(vec![script(), script(), script()]).await;
    let obs = c.prober().round().await;
    let followers = obs.followers.clone();
    let report = judged(obs);
    let v = report.verdict(3).expect("broker 3 judged");
    assert_eq!(v.state, BrokerState::Healthy, "{:?} {followers:?}", v.hits);
    assert_eq!(followers[&3].settled, vec![("t".to_string(), 0)]);
    // Still missing when read again: flagged as before.
    let c = Cluster::start(vec![
        Script::says(caught_in_flight.clone()),
        Script::says(caught_in_flight.clone()),
        Script::says(caught_in_flight),
    ])
    .await;
    let report = evaluate(&mut evaluator(), &mut c.prober()).await;
    let v = report.verdict(3).expect("broker 3 judged");
    assert_ne!(v.state, BrokerState::Healthy, "{:?}", v.hits);
}

/// A replica out of the ISR that its topic's throttle lists is copying under a planned move:
/// the round reads the throttle, and a first round counts it copying, not missing.
#[tokio::test]
async fn a_replica_its_topic_throttles_is_read_as_throttled_and_not_flagged() {
    let script = |throttle: &'static str| Script {
        configs: Some(vec![("follower.replication.throttled.replicas", throttle)]),
        ..Script::says(part(1, 5, &[1, 2]))
    };
    let c = Cluster::start(vec![script("0:3"), script("0:3"), script("0:3")]).await;
    let obs = c.prober().round().await;
    let followers = obs.followers.clone();
    assert_eq!(
        followers[&3].throttled,
        vec![("t".to_string(), 0)],
        "{followers:?}"
    );
    let report = judged(obs);
    let v = report.verdict(3).expect("broker 3 judged");
    assert_eq!(v.state, BrokerState::Healthy, "{:?} {followers:?}", v.hits);
    // The throttle names another replica: broker 3 is missing, as before.
    let c = Cluster::start(vec![script("0:2"), script("0:2"), script("0:2")]).await;
    let obs = c.prober().round().await;
    assert!(
        obs.followers[&3].throttled.is_empty(),
        "{:?}",
        obs.followers
    );
    let report = judged(obs);
    let v = report.verdict(3).expect("broker 3 judged");
    assert_ne!(v.state, BrokerState::Healthy, "{:?}", v.hits);
}

/// Issue 27 item 11: a metadata answer listing 20,000 brokers (broken, or hostile) made the
/// watchdog open connections to all of them, round after round, until it ran out of file
/// descriptors. It watches at most `MAX_BROKERS`, keeps the brokers it knew, and says how
/// many it leaves out: a metric and a `watchdog_access` incident of the cluster.
#[tokio::test]
async fn a_cluster_listing_twenty_thousand_brokers_is_watched_up_to_the_cap() {
    let script = || Script {
        phantoms: 20_000,
        ..Script::says(part(1, 5, &[1, 2, 3]))
    };
    let c = Cluster::start(vec![script(), script(), script()]).await;
    let mut prober = c.prober();
    let mut e = evaluator();
    let mut report = evaluate(&mut e, &mut prober).await;
    for _ in 0..2 {
        report = evaluate(&mut e, &mut prober).await;
    }
    assert_eq!(report.probes.len(), MAX_BROKERS, "probed up to the cap");
    for id in 1..=3 {
        assert!(
            report.probes[&id].answered(),
            "the real brokers stay watched"
        );
    }
    assert_eq!(report.brokers_unwatched, 20_003 - MAX_BROKERS);
    let findings = crate::alert::incident::findings(&report, Vec::new());
    let f = findings
        .iter()
        .find(|f| f.key.kind == crate::model::kind::FindingKind::WatchdogAccess)
        .expect("a watchdog_access finding");
    assert!(f.summary.contains("19003 more broker(s)"), "{}", f.summary);
}

/// The routine bench's topic churn named a broker a zombie (`stale_metadata`) for a topic
/// created a moment before: its answer about every topic lacked it, and asked again at
/// once it still did. A broker that lacks a topic its peers describe is asked again a
/// little later, and one that knows it by then is not behind.
#[tokio::test]
async fn a_broker_that_learns_a_new_topic_a_moment_late_is_not_behind() {
    let c = Cluster::start(vec![
        Script::says(part(1, 5, &[1, 2, 3])),
        Script::says(part(1, 5, &[1, 2, 3])),
        Script {
            learns_t_at: Some(std::time::Instant::now() + Duration::from_millis(500)),
            ..Script::says(part(1, 5, &[1, 2, 3]))
        },
    ])
    .await;
    let obs = c.prober().round().await;
    assert!(
        obs.probes[&3]
            .metadata_view()
            .is_some_and(|m| m.topics.contains_key("t")),
        "asked again, it knows the topic"
    );
    let view = crate::judge::report::newest_view(&obs);
    assert!(!view.behind.contains_key(&3), "{:?}", view.behind);
}

/// A round judged as the round loop judges it: its view merged, then evaluated.
fn judged(obs: RoundObservation) -> ClusterReport {
    let view = Arc::new(crate::judge::report::newest_view(&obs));
    evaluator().evaluate_merged(obs, view, None, SystemTime::now())
}
