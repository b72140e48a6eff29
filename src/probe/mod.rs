//! One round of direct probes of one cluster: every known broker is asked, over a connection
//! of its own and with its own deadlines, whether it answers and what it believes. A hung
//! broker costs at most its own deadlines; it never stalls the others.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use futures::future::join_all;

use crate::observe::{BrokerEndpoint, BrokerId, BrokerProbe, ProbeFailure, RoundObservation};
use crate::wire::{BrokerClient, WireError, WireOptions};

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
}

struct Known {
    endpoint: BrokerEndpoint,
    last_listed: Instant,
}

/// Probes one cluster, round after round, remembering the brokers it has seen.
pub struct ClusterProber {
    settings: ProbeSettings,
    known: BTreeMap<BrokerId, Known>,
    min_isr: BTreeMap<String, i32>,
    min_isr_read_at: Option<Instant>,
}

impl ClusterProber {
    pub fn new(settings: ProbeSettings) -> Self {
        ClusterProber {
            settings,
            known: BTreeMap::new(),
            min_isr: BTreeMap::new(),
            min_isr_read_at: None,
        }
    }

    pub fn settings(&self) -> &ProbeSettings {
        &self.settings
    }

    /// Runs one round: discovery if no broker is known yet, every broker probed at once, the
    /// set of known brokers updated, min.insync.replicas refreshed when due.
    pub async fn round(&mut self) -> RoundObservation {
        let started_at = SystemTime::now();
        let started = Instant::now();
        let mut bootstrap_failures = Vec::new();
        if self.known.is_empty() {
            bootstrap_failures = self.discover().await;
        }
        let targets: Vec<BrokerEndpoint> =
            self.known.values().map(|k| k.endpoint.clone()).collect();
        let wire = &self.settings.wire;
        let results = join_all(targets.into_iter().map(|ep| probe_broker(ep, wire))).await;
        let probes: BTreeMap<BrokerId, BrokerProbe> =
            results.into_iter().map(|p| (p.endpoint.id, p)).collect();
        self.learn(&probes);
        self.refresh_min_isr(&probes).await;
        RoundObservation {
            cluster: self.settings.cluster.clone(),
            started_at,
            duration: started.elapsed(),
            probes,
            bootstrap_failures,
            min_isr: self.min_isr.clone(),
            host: BTreeMap::new(),
        }
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
                        self.known.insert(
                            b.id,
                            Known {
                                endpoint: b,
                                last_listed: now,
                            },
                        );
                    }
                    return failures;
                }
                Ok(_) => failures.push((
                    address.clone(),
                    ProbeFailure {
                        kind: crate::observe::FailureKind::Protocol,
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
                self.known.insert(
                    b.id,
                    Known {
                        endpoint: b,
                        last_listed: now,
                    },
                );
            }
        }
        let forget = self.settings.forget_broker_after;
        self.known
            .retain(|_, k| now.duration_since(k.last_listed) < forget);
    }

    /// Reads min.insync.replicas of every topic from one answering broker when due, or when
    /// topics appeared that have no value yet.
    async fn refresh_min_isr(&mut self, probes: &BTreeMap<BrokerId, BrokerProbe>) {
        let Some(source) = probes.values().find(|p| p.answered()) else {
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
            // Bounded batches keep each answer small on clusters with many topics.
            for chunk in ask.chunks(500) {
                let answer = c
                    .client
                    .describe_topic_configs(chunk, &["min.insync.replicas"])
                    .await?;
                for (topic, configs) in answer.value {
                    if let Ok(configs) = configs {
                        if let Some(v) = configs
                            .get("min.insync.replicas")
                            .and_then(|v| v.parse::<i32>().ok())
                        {
                            values.insert(topic, v);
                        }
                    }
                }
            }
            Ok::<_, WireError>(values)
        }
        .await;
        match read {
            Ok(values) => {
                if due {
                    self.min_isr = values;
                    self.min_isr_read_at = Some(Instant::now());
                } else {
                    self.min_isr.extend(values);
                }
                self.min_isr.retain(|t, _| topics.contains(t));
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

/// Connect, ApiVersions, Metadata (all topics) and DescribeCluster to one broker.
pub async fn probe_broker(endpoint: BrokerEndpoint, wire: &WireOptions) -> BrokerProbe {
    let address = endpoint.address();
    let started = Instant::now();
    let mut probe = BrokerProbe {
        endpoint,
        connect: Ok(Duration::ZERO),
        api_versions: None,
        metadata: None,
        description: None,
    };
    let opened = match BrokerClient::open(&address, wire).await {
        Ok(o) => o,
        Err(e) => {
            probe.connect = Err(e.to_failure(started.elapsed()));
            return probe;
        }
    };
    probe.connect = Ok(opened.connect_latency);
    let handshake_started = Instant::now();
    let mut client = match opened.negotiate().await {
        Ok(c) => {
            probe.api_versions = Some(Ok(
                c.api_versions_latency + c.sasl_latency.unwrap_or_default()
            ));
            c.client
        }
        Err(e) => {
            probe.api_versions = Some(Err(e.to_failure(handshake_started.elapsed())));
            return probe;
        }
    };
    let md_started = Instant::now();
    match client.metadata(None).await {
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
    probe
}
