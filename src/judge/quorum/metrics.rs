//! The control plane's families, read from a report's quorum part: the quorum's leader,
//! epoch and high watermark and how long it has stood still, its problem by kind, each
//! controller's state and the leader's word on it, and each broker's Raft fetch of the
//! metadata log and the leadership changes its own metadata missed.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;

use super::{ControllerState, QuorumProblemKind, QuorumReport};
use crate::model::metric_kit::{flag, gauge, set, BrokerLabels, ClusterLabels, GaugeFamily};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub cluster: String,
    pub controller: String,
}

impl ControllerLabels {
    fn new(cluster: &str, id: i32) -> Self {
        ControllerLabels {
            cluster: cluster.to_string(),
            controller: id.to_string(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerStateLabels {
    #[prometheus(flatten)]
    pub controller: ControllerLabels,
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerRuleLabels {
    #[prometheus(flatten)]
    pub controller: ControllerLabels,
    /// A name of the controllers' rule table (docs/rules.md): a bounded set.
    pub rule: &'static str,
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProblemLabels {
    pub cluster: String,
    pub kind: &'static str,
}

pub struct Families {
    leader: GaugeFamily<ClusterLabels>,
    epoch: GaugeFamily<ClusterLabels>,
    high_watermark: GaugeFamily<ClusterLabels>,
    still: GaugeFamily<ClusterLabels>,
    problem: GaugeFamily<ProblemLabels>,
    state: GaugeFamily<ControllerStateLabels>,
    leads: GaugeFamily<ControllerLabels>,
    log_end: GaugeFamily<ControllerLabels>,
    fetch_age: GaugeFamily<ControllerLabels>,
    broker_fetch_age: GaugeFamily<BrokerLabels>,
    behind: GaugeFamily<BrokerLabels>,
    rules: GaugeFamily<ControllerRuleLabels>,
}

impl Families {
    pub fn register(reg: &mut Registry) -> Self {
        Families {
            leader: gauge(
                reg,
                "quorum_leader",
                "Node id of the KRaft quorum's leader (the active controller) in the newest look, -1 when no controller answers as leader",
            ),
            epoch: gauge(reg, "quorum_leader_epoch", "The quorum leader's epoch"),
            high_watermark: gauge(
                reg,
                "quorum_high_watermark",
                "The metadata log's high watermark, as the quorum's leader describes it",
            ),
            still: gauge(
                reg,
                "quorum_high_watermark_still_seconds",
                "How long the high watermark has not moved under the current leader (0 while it moves; the active controller writes a record every 500 ms)",
            ),
            problem: gauge(
                reg,
                "quorum_problem",
                "1 when the control plane is out for this reason (no_leader, leader_not_advancing, majority_not_caught_up), else 0",
            ),
            state: gauge(
                reg,
                "controller_state",
                "1 for the controller's current verdict state (healthy, unknown, lagging, zombie, down), 0 for the others",
            ),
            leads: gauge(
                reg,
                "controller_leader",
                "1 for the controller that leads the quorum, 0 for the others",
            ),
            log_end: gauge(
                reg,
                "controller_log_end_offset",
                "A voter's log end offset in the metadata log, as the quorum's leader knows it",
            ),
            fetch_age: gauge(
                reg,
                "controller_last_fetch_age_seconds",
                "How long before the leader's answer a voter last fetched from it (DescribeQuorum v1+, on the leader's clock)",
            ),
            broker_fetch_age: gauge(
                reg,
                "broker_metadata_fetch_age_seconds",
                "How long before the leader's answer a broker last fetched the metadata log (it is an observer of the quorum)",
            ),
            behind: gauge(
                reg,
                "broker_metadata_behind_partitions",
                "Partitions whose newest leadership the broker's own metadata has not caught up with",
            ),
            rules: gauge(
                reg,
                "controller_rule",
                "1 for each rule the controller's verdict hit in the last look, with the state the rule sets (docs/rules.md); a rule that no longer holds takes its series with it",
            ),
        }
    }

    /// One cluster: its control plane (when looked at), what each broker's metadata
    /// missed (`behind`, from the round's merged view), for the brokers with a verdict.
    pub fn record(
        &self,
        cluster: &str,
        quorum: Option<&QuorumReport>,
        behind: &std::collections::BTreeMap<i32, crate::observe::cluster_view::Behind>,
        brokers: &[i32],
    ) {
        // Every broker with a verdict, at 0 when it is not behind: "not behind" is a value,
        // and the dashboard and rules find the family on a healthy cluster too.
        for broker in brokers {
            let partitions = behind.get(broker).map_or(0, |b| b.partitions);
            set(
                &self.behind,
                BrokerLabels::new(cluster, *broker),
                f64::from(partitions),
            );
        }
        let Some(q) = quorum else {
            return;
        };
        self.record_quorum(cluster, q);
        let Some(d) = q.look.description.as_ref() else {
            return;
        };
        for broker in brokers {
            if let Some(age) = d.observer(*broker).and_then(|o| o.last_fetch_ago) {
                set(
                    &self.broker_fetch_age,
                    BrokerLabels::new(cluster, *broker),
                    age.as_secs_f64(),
                );
            }
        }
    }

    fn record_quorum(&self, cluster: &str, q: &QuorumReport) {
        let c = || ClusterLabels::new(cluster);
        set(&self.leader, c(), f64::from(q.leader.unwrap_or(-1)));
        if let Some(e) = q.epoch {
            set(&self.epoch, c(), f64::from(e));
        }
        if let Some(hw) = q.high_watermark {
            set(&self.high_watermark, c(), hw as f64);
        }
        set(
            &self.still,
            c(),
            q.high_watermark_still_for.unwrap_or_default().as_secs_f64(),
        );
        for kind in QuorumProblemKind::ALL {
            let labels = ProblemLabels {
                cluster: cluster.to_string(),
                kind: kind.as_label(),
            };
            set(
                &self.problem,
                labels,
                flag(q.problem.as_ref().is_some_and(|p| p.kind == kind)),
            );
        }
        let description = q.look.description.as_ref();
        for v in &q.controllers {
            let l = || ControllerLabels::new(cluster, v.controller);
            for s in ControllerState::ALL {
                let labels = ControllerStateLabels {
                    controller: l(),
                    state: s.as_label(),
                };
                set(&self.state, labels, flag(v.state == s));
            }
            set(&self.leads, l(), flag(v.leader));
            for h in &v.hits {
                let labels = ControllerRuleLabels {
                    controller: l(),
                    rule: h.rule.name(),
                    state: h.state.as_label(),
                };
                set(&self.rules, labels, 1.0);
            }
            if let Some(p) = description.and_then(|d| d.voter(v.controller)) {
                set(&self.log_end, l(), p.log_end_offset as f64);
                if let Some(age) = p.last_fetch_ago {
                    set(&self.fetch_age, l(), age.as_secs_f64());
                }
            }
        }
    }
}
