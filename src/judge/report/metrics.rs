//! The round's families of one cluster and its brokers, read from its report: reachability,
//! rounds, partition problems, verdict states, direct-request latency and failures, what
//! each broker leads and replicates, stale leaderships and metadata disagreements. The
//! canary's, liveness's and host mode's gauges of the same report are their modules' own.

use std::collections::BTreeSet;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;

use super::ClusterReport;
use crate::judge::health::Condition;
use crate::judge::verdict::{BrokerState, BrokerVerdict, Registration};
use crate::model::metric_kit::{
    counter, flag, gauge, secs, set, BrokerLabels, BrokerStateLabels, ClusterLabels, CounterFamily,
    GaugeFamily,
};

/// `broker_rule`: a rule the broker's verdict hit, and the state that rule sets.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BrokerRuleLabels {
    #[prometheus(flatten)]
    pub broker: BrokerLabels,
    /// A name of the rule table (`judge::rule`, docs/rules.md): a bounded set.
    pub rule: &'static str,
    pub state: &'static str,
}

/// `partitions` by problem state, `brokers` by verdict state.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterStateLabels {
    pub cluster: String,
    pub state: &'static str,
}

/// `early_rounds` by why they started early.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterReasonLabels {
    pub cluster: String,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BootstrapLabels {
    pub cluster: String,
    pub address: String,
    pub kind: &'static str,
}

/// `connect`, `api_versions` or `metadata`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    #[prometheus(flatten)]
    pub broker: BrokerLabels,
    pub request: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    #[prometheus(flatten)]
    pub broker: BrokerLabels,
    pub request: &'static str,
    pub kind: &'static str,
}

pub struct Families {
    reachable: GaugeFamily<ClusterLabels>,
    rounds: CounterFamily<ClusterLabels>,
    early_rounds: CounterFamily<ClusterReasonLabels>,
    round_duration: GaugeFamily<ClusterLabels>,
    last_success: GaugeFamily<ClusterLabels>,
    partitions: GaugeFamily<ClusterStateLabels>,
    observed: GaugeFamily<ClusterLabels>,
    split: GaugeFamily<ClusterLabels>,
    unwatched: GaugeFamily<ClusterLabels>,
    bootstrap: GaugeFamily<BootstrapLabels>,
    brokers_in: GaugeFamily<ClusterStateLabels>,
    unclean: CounterFamily<ClusterLabels>,
    up: GaugeFamily<BrokerLabels>,
    state: GaugeFamily<BrokerStateLabels>,
    state_seconds: GaugeFamily<BrokerLabels>,
    registered: GaugeFamily<BrokerLabels>,
    latency: GaugeFamily<RequestLabels>,
    failures: CounterFamily<FailureLabels>,
    led: GaugeFamily<BrokerLabels>,
    replicas: GaugeFamily<BrokerLabels>,
    out_of_isr: GaugeFamily<BrokerLabels>,
    offline_replicas: GaugeFamily<BrokerLabels>,
    stale: GaugeFamily<BrokerLabels>,
    disagree: GaugeFamily<BrokerLabels>,
    rules: GaugeFamily<BrokerRuleLabels>,
}

impl Families {
    pub fn register(reg: &mut Registry) -> Self {
        Families {
            reachable: gauge(
                reg,
                "cluster_reachable",
                "1 when at least one broker answered every request in the last round",
            ),
            rounds: counter(reg, "rounds", "Rounds completed per cluster"),
            early_rounds: counter(
                reg,
                "early_rounds",
                "Rounds started before their interval, by why: a broker's registered list changed (registration), a canary partition's writes changed how they end (canary), a broker's verdict waited for its confirming look (confirmation), the metadata log grew by more than the controller's no-op records (metadata)",
            ),
            round_duration: gauge(reg, "round_duration_seconds", "Duration of the last round"),
            last_success: gauge(
                reg,
                "last_successful_round_timestamp_seconds",
                "Unix time at which the last round that reached the cluster ended",
            ),
            partitions: gauge(
                reg,
                "partitions",
                "Partitions in each problem state (offline, under_replicated, under_min_isr, leader_not_in_isr)",
            ),
            observed: gauge(
                reg,
                "partitions_observed",
                "Partitions of the watched topics in the last round",
            ),
            split: gauge(
                reg,
                "split_brain_partitions",
                "Partitions for which a broker still claims a leadership a newer epoch gave away",
            ),
            unwatched: gauge(
                reg,
                "brokers_unwatched",
                "Brokers the cluster listed in the last round beyond the watchdog's cap per cluster (1000): not probed (a broken or hostile metadata answer, or a cluster larger than the watchdog is built for)",
            ),
            bootstrap: gauge(
                reg,
                "bootstrap_failures",
                "1 per bootstrap address that failed in the last round while no broker was known, by failure kind",
            ),
            brokers_in: gauge(reg, "brokers", "Brokers in each verdict state"),
            unclean: counter(
                reg,
                "unclean_elections",
                "Partitions that got a leader from outside their previous ISR",
            ),
            up: gauge(
                reg,
                "broker_up",
                "1 when the broker answered every direct request this round, else 0",
            ),
            state: gauge(
                reg,
                "broker_state",
                "1 for the broker's current verdict state, 0 for the others",
            ),
            state_seconds: gauge(
                reg,
                "broker_state_seconds",
                "Seconds the broker has been in its current verdict state",
            ),
            registered: gauge(
                reg,
                "broker_registered",
                "1 when the other brokers count it as registered and unfenced (the verdict's registration), else 0",
            ),
            latency: gauge(
                reg,
                "broker_request_seconds",
                "Latency of the last direct request of each kind (connect, api_versions, metadata)",
            ),
            failures: counter(
                reg,
                "broker_request_failures",
                "Direct requests that failed, by request and failure kind",
            ),
            led: gauge(reg, "broker_partitions_led", "Partitions the broker leads"),
            replicas: gauge(
                reg,
                "broker_replicas",
                "Partitions the broker is a replica of",
            ),
            out_of_isr: gauge(
                reg,
                "broker_replicas_out_of_isr",
                "Partitions the broker replicates but is missing from the ISR of",
            ),
            offline_replicas: gauge(
                reg,
                "broker_offline_partitions",
                "Offline partitions the broker is a replica of",
            ),
            stale: gauge(
                reg,
                "broker_stale_leaderships",
                "Partitions the broker claims to lead although a newer leader epoch names another broker",
            ),
            disagree: gauge(
                reg,
                "broker_metadata_disagreements",
                "Partitions for which the broker's metadata names another leader than the newest view",
            ),
            // Who and why (issue 39 item 5): the dashboard's table joins it with
            // `broker_state`.
            rules: gauge(
                reg,
                "broker_rule",
                "1 for each rule the broker's verdict hit in the last round, with the state the rule sets (docs/rules.md); a rule that no longer holds takes its series with it",
            ),
        }
    }

    pub fn record(&self, r: &ClusterReport) {
        self.record_cluster(r);
        for v in &r.verdicts {
            self.record_broker(r, v);
        }
        for ((broker, request, kind), n) in &r.failures_total {
            let labels = FailureLabels {
                broker: BrokerLabels::new(&r.cluster, *broker),
                request,
                kind: kind.as_label(),
            };
            self.failures.get_or_create(&labels).inc_by(*n);
        }
    }

    fn record_cluster(&self, r: &ClusterReport) {
        let c = || ClusterLabels::new(&r.cluster);
        let state = |state: &'static str| ClusterStateLabels {
            cluster: r.cluster.clone(),
            state,
        };
        set(&self.reachable, c(), flag(r.reachable));
        self.rounds.get_or_create(&c()).inc_by(r.round);
        let e = r.early_rounds;
        for (reason, n) in [
            ("registration", e.registration),
            ("canary", e.canary),
            ("confirmation", e.confirmation),
            ("metadata", e.metadata),
        ] {
            let labels = ClusterReasonLabels {
                cluster: r.cluster.clone(),
                reason,
            };
            self.early_rounds.get_or_create(&labels).inc_by(n);
        }
        for (address, failure) in &r.bootstrap_failures {
            let labels = BootstrapLabels {
                cluster: r.cluster.clone(),
                address: address.clone(),
                kind: failure.kind.as_label(),
            };
            set(&self.bootstrap, labels, 1.0);
        }
        set(&self.round_duration, c(), r.duration.as_secs_f64());
        if let Some(t) = r.last_success {
            set(&self.last_success, c(), secs(t));
        }
        for cond in Condition::ALL {
            let n = r.health.count(cond);
            set(&self.partitions, state(cond.as_label()), n as f64);
        }
        set(&self.observed, c(), r.health.partitions as f64);
        self.unclean
            .get_or_create(&c())
            .inc_by(r.unclean_elections_total);
        let split_partitions: BTreeSet<(&str, i32)> = r
            .stale_leaders
            .iter()
            .map(|s| (s.topic.as_str(), s.partition))
            .collect();
        set(&self.split, c(), split_partitions.len() as f64);
        set(&self.unwatched, c(), r.brokers_unwatched as f64);
        for s in BrokerState::ALL {
            let n = r.verdicts.iter().filter(|v| v.state == s).count();
            set(&self.brokers_in, state(s.as_label()), n as f64);
        }
    }

    fn record_broker(&self, r: &ClusterReport, v: &BrokerVerdict) {
        let b = || BrokerLabels::new(&r.cluster, v.broker);
        let probe = r.probes.get(&v.broker);
        set(&self.up, b(), flag(probe.is_some_and(|p| p.answered())));
        for s in BrokerState::ALL {
            let labels = BrokerStateLabels {
                broker: b(),
                state: s.as_label(),
            };
            set(&self.state, labels, flag(v.state == s));
        }
        for h in &v.hits {
            let labels = BrokerRuleLabels {
                broker: b(),
                rule: h.rule.name(),
                state: h.state.as_label(),
            };
            set(&self.rules, labels, 1.0);
        }
        if let Some(since) = r.state_since.get(&v.broker) {
            let end = r.started_at + r.duration;
            let held = end.duration_since(*since).unwrap_or_default();
            set(&self.state_seconds, b(), held.as_secs_f64());
        }
        set(
            &self.registered,
            b(),
            flag(v.registration == Registration::Registered),
        );
        if let Some(p) = probe {
            let kinds = [
                ("connect", p.connect.as_ref().ok().copied()),
                (
                    "api_versions",
                    p.api_versions
                        .as_ref()
                        .and_then(|r| r.as_ref().ok().copied()),
                ),
                ("metadata", p.metadata_latency()),
            ];
            for (request, d) in kinds {
                if let Some(d) = d {
                    let labels = RequestLabels {
                        broker: b(),
                        request,
                    };
                    set(&self.latency, labels, d.as_secs_f64());
                }
            }
        }
        let stats = r.health.brokers.get(&v.broker).cloned().unwrap_or_default();
        set(&self.led, b(), f64::from(stats.leader_of));
        set(&self.replicas, b(), f64::from(stats.replica_of));
        set(&self.out_of_isr, b(), f64::from(stats.missing_from_isr));
        set(
            &self.offline_replicas,
            b(),
            f64::from(stats.replica_of_offline),
        );
        let n_stale = r
            .stale_leaders
            .iter()
            .filter(|s| s.broker == v.broker)
            .count();
        set(&self.stale, b(), n_stale as f64);
        let disagreements = r.disagreements.get(&v.broker).copied().unwrap_or(0);
        set(&self.disagree, b(), f64::from(disagreements));
    }
}
