//! One round of direct probes of one cluster: every known broker is asked, over a connection
//! of its own and with its own deadlines, whether it answers and what it believes. A hung
//! broker costs at most its own deadlines; it never stalls the others.

mod followers;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime};

use futures::future::join_all;

use crate::model::round::{
    BrokerEndpoint, BrokerId, BrokerProbe, EligibleLeaders, FailureKind, MetadataView,
    ProbeFailure, RoundObservation, NO_LEADER,
};
use crate::observe::cluster_view::doubted_topics;
use crate::observe::quorum::QuorumProber;
use crate::observe::wire::{BrokerClient, OpenFailure, WireError, WireOptions};

use followers::{carry_adding, measure_followers};

/// How to probe one cluster.
#[derive(Debug, Clone)]
pub struct ProbeSettings {
    pub cluster: String,
    pub bootstrap_servers: Vec<String>,
    pub wire: WireOptions,
    /// A broker no answer lists any more is still probed this long (a fenced or crashed
    /// broker vanishes from KRaft metadata, which is exactly when it must stay watched).
    pub forget_broker_after: Duration,
    /// How often topics' min.insync.replicas is read again.
    pub topic_config_refresh: Duration,
    /// Partition entries per round in full Metadata answers, over all brokers.
    pub full_metadata_budget: u64,
    /// What brokers not asked for every topic this round are asked about.
    pub scoped_topics: Vec<String>,
}

/// See `full_metadata_partition_budget` in the configuration, which declares it: the
/// configuration comes before the probe and imports nothing from it.
pub const DEFAULT_FULL_METADATA_BUDGET: u64 = crate::config::DEFAULT_FULL_METADATA_BUDGET;

/// How many brokers are asked for every topic this round: all of them while
/// `partitions x brokers` fits the budget, else as many as fit, never fewer than three (a
/// majority of answers to merge even when one is stale). Unknown size (0): three, until the
/// first answer tells.
pub fn full_sources(partitions: u64, brokers: usize, budget: u64) -> usize {
    const MIN_FULL: usize = 3;
    if partitions == 0 {
        return brokers.min(MIN_FULL);
    }
    let fit = usize::try_from(budget / partitions).unwrap_or(usize::MAX);
    fit.max(MIN_FULL).min(brokers)
}

/// Which of `targets` (sorted by id) are asked for every topic: `n` of them starting at
/// `cursor`, wrapping, so that over rounds every broker's whole picture is compared.
fn rotate(targets: &[BrokerEndpoint], n: usize, cursor: usize) -> Vec<bool> {
    let len = targets.len();
    let mut full = vec![false; len];
    for k in 0..n.min(len) {
        full[(cursor + k) % len] = true;
    }
    full
}

struct Known {
    endpoint: BrokerEndpoint,
    last_listed: Instant,
}

/// How long a broker that does not know a topic its peers describe is given before it is
/// asked again (see `confirm_stale_claims`).
const UNAWARE_RECHECK_AFTER: Duration = Duration::from_secs(1);

/// At most this many brokers of one cluster are watched. Each costs the watchdog a few
/// connections (probe, liveness, coordinator), so a metadata answer listing 20,000 brokers
/// (broken, or hostile) must not exhaust its file descriptors (the unit allows 16,384):
/// beyond the cap, brokers are not probed, and the round says how many (issue 27 item 11).
pub const MAX_BROKERS: usize = 1000;

/// Probes one cluster, round after round, remembering the brokers it has seen.
pub struct ClusterProber {
    settings: ProbeSettings,
    known: BTreeMap<BrokerId, Known>,
    min_isr: BTreeMap<String, i32>,
    /// Topics whose unclean.leader.election.enable is true, read with min_isr.
    unclean_allowed: BTreeSet<String>,
    min_isr_read_at: Option<Instant>,
    /// Partitions in the last full answer, to size the next round's full asks.
    partitions: u64,
    /// Where the next round's turn of full asks starts.
    cursor: usize,
    /// Per broker, the partitions the last round's reassignments were adding it to.
    adding_before: BTreeMap<BrokerId, Vec<(String, i32)>>,
    /// Looks at the control plane once per round, when no continuous watch does.
    quorum: Option<QuorumProber>,
    /// Distinct brokers listed this round that the cap left out.
    unwatched: BTreeSet<BrokerId>,
}

impl ClusterProber {
    pub fn new(settings: ProbeSettings) -> Self {
        ClusterProber {
            settings,
            known: BTreeMap::new(),
            min_isr: BTreeMap::new(),
            unclean_allowed: BTreeSet::new(),
            min_isr_read_at: None,
            partitions: 0,
            cursor: 0,
            adding_before: BTreeMap::new(),
            quorum: None,
            unwatched: BTreeSet::new(),
        }
    }

    /// Keeps `b` among the known brokers, unless the cap is reached and it is not one of
    /// them already: brokers known stay watched, newcomers beyond the cap are counted.
    fn remember(&mut self, b: BrokerEndpoint, now: Instant) {
        if self.known.len() >= MAX_BROKERS && !self.known.contains_key(&b.id) {
            self.unwatched.insert(b.id);
            return;
        }
        self.known.insert(
            b.id,
            Known {
                endpoint: b,
                last_listed: now,
            },
        );
    }

    /// Looks at the control plane (DescribeQuorum) in every round, beside the probes: for
    /// `check`, and for a daemon without the continuous watch.
    pub fn with_quorum(mut self, quorum: QuorumProber) -> Self {
        self.quorum = Some(quorum);
        self
    }

    /// Runs one round: discovery if no broker is known yet, every broker probed at once, the
    /// set of known brokers updated, min.insync.replicas refreshed when due.
    pub async fn round(&mut self) -> RoundObservation {
        let started_at = SystemTime::now();
        let started = Instant::now();
        let mut bootstrap_failures = Vec::new();
        self.unwatched.clear();
        if self.known.is_empty() {
            bootstrap_failures = self.discover().await;
        }
        let targets: Vec<BrokerEndpoint> =
            self.known.values().map(|k| k.endpoint.clone()).collect();
        let full = self.turn_of_full_asks(&targets);
        let wire = &self.settings.wire;
        let scoped = &self.settings.scoped_topics;
        let addresses: Vec<String> = targets.iter().map(BrokerEndpoint::address).collect();
        let probes = join_all(targets.into_iter().zip(full).map(|(ep, full)| {
            let topics = if full { None } else { Some(scoped.as_slice()) };
            probe_broker(ep, wire, topics)
        }));
        // The quorum look has deadlines of its own and runs beside the probes.
        let look = async {
            match self.quorum.as_mut() {
                Some(q) => q.look(&addresses).await.map(std::sync::Arc::new),
                None => None,
            }
        };
        let (results, quorum) = futures::join!(probes, look);
        let mut probes: BTreeMap<BrokerId, BrokerProbe> =
            results.into_iter().map(|p| (p.endpoint.id, p)).collect();
        ensure_complete(&mut probes, wire).await;
        self.confirm_stale_claims(&mut probes).await;
        self.learn(&probes);
        if let Some(m) = probes
            .values()
            .filter(|p| complete(p))
            .find_map(BrokerProbe::metadata_view)
        {
            self.partitions = m.topics.values().map(|t| t.partitions.len() as u64).sum();
        }
        let wire = self.settings.wire.clone();
        let (_, mut followers) = futures::join!(
            self.refresh_min_isr(&probes),
            measure_followers(&probes, &wire)
        );
        self.adding_before = carry_adding(&mut followers, std::mem::take(&mut self.adding_before));
        let eligible_leaders = self.read_eligible_leaders(&probes).await;
        RoundObservation {
            cluster: self.settings.cluster.clone(),
            started_at,
            duration: started.elapsed(),
            probes,
            bootstrap_failures,
            min_isr: self.min_isr.clone(),
            unclean_allowed: self.unclean_allowed.clone(),
            eligible_leaders,
            host: BTreeMap::new(),
            followers,
            liveness: BTreeMap::new(),
            quorum,
            coordinators: None,
            brokers_unwatched: self.unwatched.len(),
        }
    }

    /// Which of `targets` are asked for every topic this round (as many as the budget
    /// allows, see `full_sources`); the next round's turn starts after them.
    fn turn_of_full_asks(&mut self, targets: &[BrokerEndpoint]) -> Vec<bool> {
        let n = full_sources(
            self.partitions,
            targets.len(),
            self.settings.full_metadata_budget,
        );
        let full = rotate(targets, n, self.cursor);
        self.cursor = if targets.is_empty() {
            0
        } else {
            (self.cursor + n) % targets.len()
        };
        full
    }

    /// Asks the bootstrap servers, in order, for the broker list.
    async fn discover(&mut self) -> Vec<(String, ProbeFailure)> {
        let mut failures = Vec::new();
        for address in &self.settings.bootstrap_servers {
            let started = Instant::now();
            let answer = async {
                let mut c = BrokerClient::connect(address, &self.settings.wire).await?;
                let md = c.client.metadata(Some(&[])).await?;
                // KRaft metadata omits fenced brokers; DescribeCluster v2 lists them, so a
                // broker frozen before the watchdog started is still found and probed.
                let fenced = match c.client.describe_cluster().await {
                    Ok(Some(d)) => d.value.brokers.into_iter().map(|b| b.endpoint).collect(),
                    _ => Vec::new(),
                };
                Ok::<_, WireError>((md, fenced))
            }
            .await;
            match answer {
                Ok((md, described)) if !md.value.brokers.is_empty() => {
                    let now = Instant::now();
                    for b in described.into_iter().chain(md.value.brokers) {
                        self.remember(b, now);
                    }
                    return failures;
                }
                Ok(_) => failures.push((
                    address.clone(),
                    ProbeFailure {
                        kind: crate::model::round::FailureKind::Protocol,
                        detail: "metadata listed no brokers".into(),
                        after: started.elapsed(),
                    },
                )),
                Err(e) => failures.push((address.clone(), e.to_failure(started.elapsed()))),
            }
        }
        failures
    }

    /// Updates the known brokers from what this round's answers list.
    fn learn(&mut self, probes: &BTreeMap<BrokerId, BrokerProbe>) {
        let now = Instant::now();
        for probe in probes.values() {
            let listed = probe
                .metadata_view()
                .map(|m| m.brokers.clone())
                .unwrap_or_default()
                .into_iter()
                .chain(
                    probe
                        .description
                        .iter()
                        .flatten()
                        .flat_map(|d| d.brokers.iter().map(|b| b.endpoint.clone())),
                );
            for b in listed {
                self.remember(b, now);
            }
        }
        let forget = self.settings.forget_broker_after;
        self.known
            .retain(|_, k| now.duration_since(k.last_listed) < forget);
    }

    /// Reads min.insync.replicas of every topic from one answering broker when due, or when
    /// topics appeared that have no value yet.
    async fn refresh_min_isr(&mut self, probes: &BTreeMap<BrokerId, BrokerProbe>) {
        // Only an answer about every topic says which topics exist.
        let Some(source) = probes
            .values()
            .find(|p| p.answered() && p.metadata_view().is_some_and(|m| m.all_topics))
        else {
            return;
        };
        let topics: Vec<String> = source
            .metadata_view()
            .map(|m| m.topics.keys().cloned().collect())
            .unwrap_or_default();
        let due = self
            .min_isr_read_at
            .is_none_or(|t| t.elapsed() >= self.settings.topic_config_refresh);
        let missing: Vec<String> = topics
            .iter()
            .filter(|t| !self.min_isr.contains_key(*t))
            .cloned()
            .collect();
        let ask = if due { topics.clone() } else { missing };
        if ask.is_empty() {
            return;
        }
        let address = source.endpoint.address();
        let read = async {
            let mut c = BrokerClient::connect(&address, &self.settings.wire).await?;
            let mut values = BTreeMap::new();
            let mut allowed = BTreeSet::new();
            // Bounded batches keep each answer small on clusters with many topics.
            for chunk in ask.chunks(500) {
                let answer = c
                    .client
                    .describe_topic_configs(
                        chunk,
                        &["min.insync.replicas", "unclean.leader.election.enable"],
                    )
                    .await?;
                for (topic, configs) in answer.value {
                    if let Ok(configs) = configs {
                        if configs
                            .get("unclean.leader.election.enable")
                            .is_some_and(|v| v == "true")
                        {
                            allowed.insert(topic.clone());
                        }
                        if let Some(v) = configs
                            .get("min.insync.replicas")
                            .and_then(|v| v.parse::<i32>().ok())
                        {
                            values.insert(topic, v);
                        }
                    }
                }
            }
            Ok::<_, WireError>((values, allowed))
        }
        .await;
        match read {
            Ok((values, allowed)) => {
                if due {
                    self.min_isr = values;
                    self.min_isr_read_at = Some(Instant::now());
                    self.unclean_allowed = allowed;
                } else {
                    self.min_isr.extend(values);
                    self.unclean_allowed.extend(allowed);
                }
                self.min_isr.retain(|t, _| topics.contains(t));
                self.unclean_allowed.retain(|t| topics.contains(t));
            }
            Err(e) => tracing::warn!(
                cluster = %self.settings.cluster,
                broker = source.endpoint.id,
                error = %e,
                "cannot read min.insync.replicas; keeping the previous values"
            ),
        }
    }
}

/// Whether `p` answered about every topic.
fn complete(p: &BrokerProbe) -> bool {
    p.metadata_view().is_some_and(|m| m.all_topics)
}

/// When every broker whose turn it was failed, one that answered is asked again for
/// every topic, so that no round's picture is limited to the scoped topics.
async fn ensure_complete(probes: &mut BTreeMap<BrokerId, BrokerProbe>, wire: &WireOptions) {
    if !probes.values().any(complete) {
        if let Some(p) = probes.values().find(|p| p.answered()) {
            let again = probe_broker(p.endpoint.clone(), wire, None).await;
            if again.answered() {
                probes.insert(again.endpoint.id, again);
            }
        }
    }
}

/// Requests of one DescribeTopicPartitions read at most (2000 partitions each by default).
const ELR_MAX_PAGES: usize = 16;

impl ClusterProber {
    /// Probes run at once, so a broker that answered just before a leader change reached it
    /// claims, for this round, a leadership the newer epoch gave away. A claim counts only
    /// once the broker repeats it: each claiming broker is asked again (Metadata for those
    /// topics, on a new connection) and its answer about them replaced by the new one. A
    /// broker that does not answer again leaves its claims unconfirmed: those topics are
    /// dropped from its answer (the newer answers cover them).
    async fn confirm_stale_claims(&self, probes: &mut BTreeMap<BrokerId, BrokerProbe>) {
        let answers: Vec<(BrokerId, &MetadataView)> = probes
            .iter()
            .filter_map(|(id, p)| p.metadata_view().map(|m| (*id, m)))
            .collect();
        let doubted = doubted_topics(&answers);
        if doubted.is_empty() {
            return;
        }
        // A topic created a moment ago is known to the brokers that applied its record and
        // not yet to one that is a few hundred milliseconds behind (a loaded host): asked
        // again at once, it still does not know it, and the round named it stale (the
        // routine bench's topic churn). Such a broker is asked again a little later; a
        // broker whose loader stopped does not know the topic then either.
        let unaware = doubted.iter().any(|(id, topics)| {
            probes
                .get(id)
                .and_then(BrokerProbe::metadata_view)
                .is_some_and(|m| topics.iter().any(|t| !m.topics.contains_key(t)))
        });
        if unaware {
            tokio::time::sleep(UNAWARE_RECHECK_AFTER).await;
        }
        let wire = &self.settings.wire;
        let asks: Vec<_> = doubted
            .into_iter()
            .filter_map(|(id, topics)| {
                let address = probes.get(&id)?.endpoint.address();
                let topics: Vec<String> = topics.into_iter().collect();
                Some(async move {
                    let answer = async {
                        let mut c = BrokerClient::connect(&address, wire).await?;
                        c.client.metadata(Some(&topics)).await
                    }
                    .await;
                    (id, topics, answer)
                })
            })
            .collect();
        for (id, topics, answer) in join_all(asks).await {
            let Some(Some(Ok((md, _)))) = probes.get_mut(&id).map(|p| p.metadata.as_mut()) else {
                continue;
            };
            match answer {
                Ok(again) => {
                    let mut again = again.value;
                    for topic in topics {
                        // A topic it answers with an error (UNKNOWN_TOPIC_OR_PARTITION)
                        // it does not know: absent, as in an answer about every topic.
                        match again.topics.remove(&topic).filter(|t| t.error_code == 0) {
                            Some(t) => md.topics.insert(topic, t),
                            None => md.topics.remove(&topic),
                        };
                    }
                }
                Err(e) => {
                    tracing::debug!(
                        cluster = %self.settings.cluster,
                        broker = id,
                        error = %e,
                        "stale leadership claim not confirmed: no second answer"
                    );
                    for topic in &topics {
                        md.topics.remove(topic);
                    }
                    // Without those topics its answer no longer covers every topic: a
                    // topic it lacks now says nothing about what it knows.
                    md.all_topics = false;
                }
            }
        }
    }

    /// The eligible leader replicas (KIP-966) of the topics that can need them: those that
    /// allow unclean elections (elsewhere none is judged unclean) with a partition without
    /// a leader or with an ISR below min.insync.replicas (Kafka adds to the ELR only then).
    /// Asked of a broker that answered for every topic, if it speaks DescribeTopicPartitions.
    async fn read_eligible_leaders(
        &self,
        probes: &BTreeMap<BrokerId, BrokerProbe>,
    ) -> EligibleLeaders {
        let mut found = EligibleLeaders::new();
        let Some((source, md)) = probes.values().find_map(|p| {
            p.metadata_view()
                .filter(|m| m.all_topics)
                .map(|m| (&p.endpoint, m))
        }) else {
            return found;
        };
        let topics: Vec<String> = self
            .unclean_allowed
            .iter()
            .filter(|name| {
                let min_isr = self.min_isr.get(*name).copied().unwrap_or(1);
                md.topics.get(*name).is_some_and(|t| {
                    t.partitions.iter().any(|p| {
                        p.leader == NO_LEADER || i32::try_from(p.isr.len()).unwrap_or(0) < min_isr
                    })
                })
            })
            .cloned()
            .collect();
        if topics.is_empty() {
            return found;
        }
        let read = async {
            let mut c = BrokerClient::connect(&source.address(), &self.settings.wire).await?;
            c.client
                .eligible_leader_replicas(&topics, ELR_MAX_PAGES)
                .await
        }
        .await;
        match read {
            Ok(Some(answer)) => {
                for (topic, partition, elr) in answer.value {
                    found
                        .entry(topic)
                        .or_default()
                        .insert(partition, elr.into_iter().collect());
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(
                cluster = %self.settings.cluster,
                broker = source.id,
                error = %e,
                "cannot read eligible leader replicas"
            ),
        }
        found
    }
}

/// Connect, ApiVersions, Metadata and DescribeCluster to one broker. Metadata asks for
/// every topic when `topics` is None, else for those only (an empty list: none).
pub async fn probe_broker(
    endpoint: BrokerEndpoint,
    wire: &WireOptions,
    topics: Option<&[String]>,
) -> BrokerProbe {
    let address = endpoint.address();
    let started = Instant::now();
    let mut probe = BrokerProbe {
        endpoint,
        connect: Ok(Duration::ZERO),
        api_versions: None,
        metadata: None,
        description: None,
        certificate: None,
        log_dirs: None,
        speaks_quorum: None,
    };
    let Some(mut client) = connect_and_negotiate(&mut probe, &address, wire, started).await else {
        return probe;
    };
    let md_started = Instant::now();
    match client.metadata(topics).await {
        Ok(t) => probe.metadata = Some(Ok((t.value, t.latency))),
        Err(e) => {
            probe.metadata = Some(Err(e.to_failure(md_started.elapsed())));
            return probe;
        }
    }
    let dc_started = Instant::now();
    probe.description = match client.describe_cluster().await {
        Ok(Some(t)) => Some(Ok(t.value)),
        Ok(None) => None,
        Err(e) => Some(Err(e.to_failure(dc_started.elapsed()))),
    };
    // Its log directories: one in error (a failed disk) and free space. After
    // DescribeCluster, so a broker that stops answering here still answered the rest.
    if probe.description.as_ref().is_none_or(|d| d.is_ok()) {
        let ld_started = Instant::now();
        probe.log_dirs = match client.describe_log_dirs().await {
            Ok(Some(t)) => Some(Ok(t.value)),
            Ok(None) => None,
            Err(e) => Some(Err(e.to_failure(ld_started.elapsed()))),
        };
    }
    probe
}

/// Connects and negotiates (TCP, TLS, ApiVersions, SASL), noting in `probe` what each took
/// or how it failed; the client, or `None` when the broker did not answer that far.
async fn connect_and_negotiate(
    probe: &mut BrokerProbe,
    address: &str,
    wire: &WireOptions,
    started: Instant,
) -> Option<BrokerClient> {
    let opened = match BrokerClient::open_traced(address, wire).await {
        Ok(o) => o,
        // Accepted, then silent through the TLS handshake: a frozen TLS broker, as silent as
        // a plaintext one that never answers ApiVersions (`no_answer`), not unreachable.
        Err(OpenFailure {
            error,
            tcp: Some(tcp),
        }) if error.kind() == FailureKind::Timeout => {
            probe.connect = Ok(tcp);
            probe.api_versions = Some(Err(error.to_failure(started.elapsed().saturating_sub(tcp))));
            return None;
        }
        Err(OpenFailure { error, .. }) => {
            probe.connect = Err(error.to_failure(started.elapsed()));
            return None;
        }
    };
    probe.connect = Ok(opened.connect_latency);
    probe.certificate = opened.certificate.clone();
    let handshake_started = Instant::now();
    match opened.negotiate().await {
        Ok(c) => {
            probe.speaks_quorum = Some(
                c.client
                    .versions()
                    .negotiated(kafka_protocol::messages::ApiKey::DescribeQuorum)
                    .is_some(),
            );
            probe.api_versions = Some(Ok(
                c.api_versions_latency + c.sasl_latency.unwrap_or_default()
            ));
            Some(c.client)
        }
        Err(e) => {
            probe.api_versions = Some(Err(e.to_failure(handshake_started.elapsed())));
            None
        }
    }
}

#[cfg(test)]
mod tests_fake;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_clusters_ask_every_broker_for_every_topic() {
        assert_eq!(full_sources(3_000, 3, DEFAULT_FULL_METADATA_BUDGET), 3);
        assert_eq!(full_sources(10_000, 50, DEFAULT_FULL_METADATA_BUDGET), 50);
        assert_eq!(full_sources(12_000, 50, DEFAULT_FULL_METADATA_BUDGET), 50);
    }

    #[test]
    fn large_clusters_ask_as_many_as_the_budget_allows_but_at_least_three() {
        assert_eq!(full_sources(200_000, 500, DEFAULT_FULL_METADATA_BUDGET), 3);
        assert_eq!(full_sources(100_000, 200, DEFAULT_FULL_METADATA_BUDGET), 6);
        assert_eq!(
            full_sources(10_000_000, 500, DEFAULT_FULL_METADATA_BUDGET),
            3
        );
        assert_eq!(full_sources(10_000_000, 2, DEFAULT_FULL_METADATA_BUDGET), 2);
        // Size unknown before the first answer: three, not everyone.
        assert_eq!(full_sources(0, 500, DEFAULT_FULL_METADATA_BUDGET), 3);
        assert_eq!(full_sources(0, 1, DEFAULT_FULL_METADATA_BUDGET), 1);
    }

    #[test]
    fn the_turn_of_full_asks_visits_every_broker() {
        let targets: Vec<BrokerEndpoint> = (1..=7)
            .map(|id| BrokerEndpoint {
                id,
                host: "h".into(),
                port: 9092,
                rack: None,
            })
            .collect();
        let mut asked = [0; 7];
        let mut cursor = 0;
        for _ in 0..7 {
            for (i, full) in rotate(&targets, 3, cursor).into_iter().enumerate() {
                asked[i] += u32::from(full);
            }
            cursor = (cursor + 3) % targets.len();
        }
        assert_eq!(asked, [3; 7], "every broker asked equally often");
        assert_eq!(
            rotate(&targets, 3, 6),
            [true, true, false, false, false, false, true]
        );
        assert_eq!(rotate(&targets, 10, 0), [true; 7]);
    }

    /// A frozen TLS broker: the kernel accepts the TCP connection, the JVM never answers the
    /// ClientHello. That is "accepted but silent", as a plaintext broker that never answers
    /// ApiVersions, and must be `no_answer` (zombie), not `unreachable`.
    #[tokio::test]
    async fn a_tls_broker_silent_through_the_handshake_is_open_but_unanswered() {
        use crate::observe::wire::{Security, TlsSettings};
        let silent = kafka_watchdog_test_support::fake_broker::FakeBroker::silent().await;
        let (host, port) = silent.address.rsplit_once(':').expect("host:port");
        let wire = WireOptions {
            connect_timeout: Duration::from_millis(300),
            request_timeout: Duration::from_millis(300),
            security: Security::Ssl(TlsSettings {
                ca_pem: Some(include_bytes!("../wire/testdata/ca.pem").to_vec().into()),
                ..TlsSettings::default()
            }),
            ..WireOptions::default()
        };
        let endpoint = BrokerEndpoint {
            id: 1,
            host: host.to_string(),
            port: port.parse().expect("port"),
            rack: None,
        };
        let probe = probe_broker(endpoint, &wire, None).await;
        assert!(
            probe.tcp_open(),
            "the TCP connection was accepted: {probe:?}"
        );
        let (step, failure) = probe.first_failure().expect("nothing was answered");
        assert_eq!(step, "api_versions");
        assert_eq!(failure.kind, FailureKind::Timeout);
        assert!(failure.detail.contains("tls"), "{}", failure.detail);
    }
}
