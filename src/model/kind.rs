//! The kinds of incident: a closed list whose spellings are part of every dedup key, webhook
//! `kind` and metric label. Plain data, so silences (read with the configuration) can name
//! a kind without reaching into the alert stage.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What kind of trouble a finding is. The spelling of `as_str` is part of every dedup key,
/// so it must never change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// A broker's verdict is not healthy; the state says how bad.
    Broker,
    /// Partitions without a leader: nothing can be written to or read from them.
    OfflinePartitions,
    /// Partitions whose ISR is below min.insync.replicas: acks=all writes fail.
    UnderMinIsr,
    UnderReplicated,
    /// A broker claims a leadership that a newer leader epoch gave to another.
    SplitBrain,
    /// No broker of the cluster answered.
    ClusterUnreachable,
    /// The canary lost an acks=all record the cluster had acknowledged (produced by the
    /// canary): the cluster broke its promise.
    AcknowledgedLoss,
    /// A broker kept acknowledging acks=1 canary records, round after round, that the
    /// partition's log does not hold: it took writes as a leader the others had replaced
    /// (isolated or split-brain leader, incident 3). One such record at a leader change is
    /// what acks=1 means and raises nothing.
    Acks1Loss,
    /// The canary could not write or read (produced by the canary).
    CanaryUnavailable,
    /// A partition's new leader was not in its previous ISR: acknowledged writes may be
    /// gone (incident 4).
    UncleanElection,
    /// The watchdog ran, refused to run, or would have run (dry run) a broker's remediation
    /// command. Its events are one-shot (`EventKind::is_one_shot`), never an open incident.
    Remediation,
    /// The watchdog cannot get in to a broker (its credentials or certificates refused, the
    /// broker's certificate not trusted) or cannot decode its answers: the watchdog's own
    /// access or compatibility problem, and no verdict on the broker.
    WatchdogAccess,
    /// A KRaft controller's verdict is not healthy (frozen, wedged, down, lagging).
    Controller,
    /// The KRaft quorum cannot change the cluster's metadata: no leader, a leader whose
    /// high watermark does not move, or fewer than a majority of voters caught up.
    Quorum,
    /// A broker listener's TLS certificate expires soon (or has): every new client
    /// connection to it fails from then on, while the broker itself is fine.
    Certificate,
    /// The watchdog's own round loop of a cluster completes no rounds (stuck, or dying
    /// again and again): nothing about the cluster is judged, so no other incident of it
    /// can open or resolve. Opened and resolved by the daemon's watch on its loops, never
    /// by a round (no round report reaches alerting then).
    WatchdogBlind,
}

impl FindingKind {
    pub const ALL: [FindingKind; 16] = [
        FindingKind::Broker,
        FindingKind::OfflinePartitions,
        FindingKind::UnderMinIsr,
        FindingKind::UnderReplicated,
        FindingKind::SplitBrain,
        FindingKind::ClusterUnreachable,
        FindingKind::AcknowledgedLoss,
        FindingKind::Acks1Loss,
        FindingKind::CanaryUnavailable,
        FindingKind::UncleanElection,
        FindingKind::Remediation,
        FindingKind::WatchdogAccess,
        FindingKind::Controller,
        FindingKind::Quorum,
        FindingKind::Certificate,
        FindingKind::WatchdogBlind,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::Broker => "broker",
            FindingKind::OfflinePartitions => "offline_partitions",
            FindingKind::UnderMinIsr => "under_min_isr",
            FindingKind::UnderReplicated => "under_replicated",
            FindingKind::SplitBrain => "split_brain",
            FindingKind::ClusterUnreachable => "cluster_unreachable",
            FindingKind::AcknowledgedLoss => "acknowledged_loss",
            FindingKind::CanaryUnavailable => "canary_unavailable",
            FindingKind::UncleanElection => "unclean_election",
            FindingKind::Remediation => "remediation",
            FindingKind::WatchdogAccess => "watchdog_access",
            FindingKind::Acks1Loss => "acks1_loss",
            FindingKind::Controller => "controller",
            FindingKind::Quorum => "quorum",
            FindingKind::Certificate => "certificate",
            FindingKind::WatchdogBlind => "watchdog_blind",
        }
    }

    /// The Alertmanager `alertname` of this kind.
    pub fn alert_name(self) -> &'static str {
        match self {
            FindingKind::Broker => "KafkaWatchdogBroker",
            FindingKind::OfflinePartitions => "KafkaWatchdogOfflinePartitions",
            FindingKind::UnderMinIsr => "KafkaWatchdogUnderMinIsr",
            FindingKind::UnderReplicated => "KafkaWatchdogUnderReplicated",
            FindingKind::SplitBrain => "KafkaWatchdogSplitBrain",
            FindingKind::ClusterUnreachable => "KafkaWatchdogClusterUnreachable",
            FindingKind::AcknowledgedLoss => "KafkaWatchdogAcknowledgedLoss",
            FindingKind::CanaryUnavailable => "KafkaWatchdogCanaryUnavailable",
            FindingKind::UncleanElection => "KafkaWatchdogUncleanElection",
            FindingKind::Remediation => "KafkaWatchdogRemediation",
            FindingKind::WatchdogAccess => "KafkaWatchdogAccess",
            FindingKind::Acks1Loss => "KafkaWatchdogAcks1Loss",
            FindingKind::Controller => "KafkaWatchdogController",
            FindingKind::Quorum => "KafkaWatchdogQuorum",
            FindingKind::Certificate => "KafkaWatchdogCertificate",
            FindingKind::WatchdogBlind => "KafkaWatchdogBlind",
        }
    }

    /// Findings computed from a round's probes. When the cluster cannot be seen their
    /// absence means nothing, so their incidents are held as they are.
    pub fn from_probes(self) -> bool {
        matches!(
            self,
            FindingKind::Broker
                | FindingKind::OfflinePartitions
                | FindingKind::UnderMinIsr
                | FindingKind::UnderReplicated
                | FindingKind::SplitBrain
                | FindingKind::WatchdogAccess
                | FindingKind::Certificate
        )
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
