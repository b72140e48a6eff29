//! The `/status` document: per cluster and broker, what was observed, when, and what the
//! watchdog concluded. Built from the same reports as the metrics.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::judge::health::{BrokerPartitions, PartitionProblem};
use crate::judge::report::{ClusterReport, Severity};
use crate::judge::verdict::{BrokerVerdict, Registration};
use crate::model::round::{BrokerProbe, ProbeFailure};
use crate::observe::cluster_view::StaleLeader;

/// At most this many problem partitions are listed per cluster; the counts are always whole.
const MAX_LISTED_PROBLEMS: usize = 200;

#[derive(Serialize)]
pub struct Status<'a> {
    pub version: &'static str,
    pub instance_id: &'a str,
    pub clusters: Vec<ClusterStatus<'a>>,
    pub incidents: &'a [crate::alert::incident::Incident],
    pub webhooks: Vec<WebhookStatus<'a>>,
    pub config_reload_success: Option<bool>,
    /// The latest remediation decisions (acted, failed, refused, dry run), oldest first.
    pub remediations: &'a [crate::alert::remediate::Record],
    /// Every silence, as the silences API lists it.
    pub silences: Vec<serde_json::Value>,
    /// With `peers:`: the other watchdogs as last heard.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers: Option<PeersStatus<'a>>,
    /// The watchdog's own health (issue 38 item 4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_health: Option<OwnHealthStatus<'a>>,
}

#[derive(Serialize)]
pub struct OwnHealthStatus<'a> {
    /// `ok`, or `degraded` while the watchdog itself is unwell or was within the last 10 s:
    /// meanwhile no broker or controller is judged on its timing alone (silences, timeouts,
    /// slow answers).
    pub state: &'static str,
    /// Each way it is (or just was) unwell.
    pub problems: Vec<OwnProblemStatus<'a>>,
    /// Its own timer's largest lateness in the last 10-20 s.
    pub event_loop_lag_seconds: f64,
    pub clock_jumps: u64,
    pub cpu_throttled_seconds: f64,
    pub liveness_segments_retransmitted: u64,
}

#[derive(Serialize)]
pub struct OwnProblemStatus<'a> {
    /// `event_loop_lag`, `paused`, `clock_jump`, `cpu_throttled`, `packet_loss`.
    pub reason: &'static str,
    pub detail: &'a str,
    pub since: f64,
    /// `null` while it lasts.
    pub ended: Option<f64>,
}

fn own_health_status(own: &crate::serve::metrics::OwnHealth) -> OwnHealthStatus<'_> {
    let j = &own.judgment;
    OwnHealthStatus {
        state: if j.degraded() { "degraded" } else { "ok" },
        problems: j
            .problems
            .iter()
            .map(|p| OwnProblemStatus {
                reason: p.kind.as_label(),
                detail: &p.detail,
                since: secs(p.since),
                ended: p.ended.map(secs),
            })
            .collect(),
        event_loop_lag_seconds: own
            .facts
            .late
            .iter()
            .find(|(t, _)| *t == crate::model::own_health::Timer::Tick)
            .map_or(0.0, |(_, d)| d.as_secs_f64()),
        clock_jumps: own.facts.clock_jumps,
        cpu_throttled_seconds: own.facts.cpu_throttled.as_secs_f64(),
        liveness_segments_retransmitted: own.facts.segments_retransmitted,
    }
}

#[derive(Serialize)]
pub struct PeersStatus<'a> {
    /// Every peer that answered since this instance started.
    pub known: Vec<PeerStatus<'a>>,
    /// Peer URLs whose last look failed.
    pub unreachable: &'a [String],
}

#[derive(Serialize)]
pub struct PeerStatus<'a> {
    pub instance_id: &'a str,
    pub url: &'a str,
    pub last_answer_seconds_ago: f64,
}

#[derive(Serialize)]
pub struct WebhookStatus<'a> {
    pub receiver: &'a str,
    pub format: &'a str,
    pub target: &'a str,
    pub delivered: u64,
    pub failed_attempts: u64,
    pub dropped: u64,
    pub queue_depth: u64,
    /// Incident updates waiting for the receiver's group interval.
    pub held_updates: u64,
    /// Notifications another watchdog delivered (`peers:`), so this one did not.
    pub delivered_by_peers: u64,
    pub last_success_at: Option<f64>,
    pub last_failure: Option<&'a str>,
}

#[derive(Serialize)]
pub struct ClusterStatus<'a> {
    pub name: &'a str,
    pub severity: Severity,
    pub round: u64,
    pub started_at: f64,
    pub duration_seconds: f64,
    pub last_success_at: Option<f64>,
    pub cluster_id: Option<&'a str>,
    pub reachable: bool,
    pub brokers: Vec<BrokerStatus<'a>>,
    pub partitions: PartitionsStatus<'a>,
    pub split_brain: &'a [StaleLeader],
    pub unclean_elections: &'a [crate::judge::report::UncleanElection],
    pub bootstrap_failures: Vec<BootstrapFailure<'a>>,
    pub canary: Option<&'a crate::observe::canary::CanaryRound>,
    pub canary_last_unavailable_seconds: &'a BTreeMap<i32, f64>,
    /// The KRaft control plane; absent when nothing speaks DescribeQuorum.
    pub quorum: Option<QuorumStatus<'a>>,
    /// The group coordinator probe's newest look; absent when it is off.
    pub group_coordinators: Option<CoordinatorsStatus<'a>>,
    /// The transaction coordinator probe's newest look (`offsets_partitions` counts
    /// `__transaction_state`'s); absent when it is off.
    pub txn_coordinators: Option<CoordinatorsStatus<'a>>,
    /// The brokers' listener certificates; absent without TLS.
    pub certificates: Option<CertificatesStatus<'a>>,
}

#[derive(Serialize)]
pub struct CertificatesStatus<'a> {
    pub issuers: &'a [String],
    pub brokers: Vec<CertificateStatus<'a>>,
}

#[derive(Serialize)]
pub struct CertificateStatus<'a> {
    pub broker: i32,
    pub address: &'a str,
    pub subject: &'a str,
    pub issuer: &'a str,
    pub checked_name: &'a str,
    /// Unix time of its notAfter.
    pub not_after: f64,
    /// Days until then (negative once expired).
    pub days_left: f64,
    pub urgency: crate::judge::certificates::Urgency,
}

fn certificates_status(
    c: &crate::judge::certificates::CertificatesReport,
    now: std::time::SystemTime,
) -> CertificatesStatus<'_> {
    CertificatesStatus {
        issuers: &c.issuers,
        brokers: c
            .brokers
            .iter()
            .map(|b| {
                let not_after = secs(b.certificate.not_after);
                CertificateStatus {
                    broker: b.broker,
                    address: &b.address,
                    subject: &b.certificate.subject,
                    issuer: &b.certificate.issuer,
                    checked_name: &b.certificate.checked_name,
                    not_after,
                    days_left: (not_after - secs(now)) / 86_400.0,
                    urgency: b.urgency,
                }
            })
            .collect(),
    }
}

/// Every broker's group coordinator shards as the newest probe saw them.
#[derive(Serialize)]
pub struct CoordinatorsStatus<'a> {
    /// Unix time of the look.
    pub observed_at: f64,
    /// `__consumer_offsets` partitions (0: the topic does not exist yet).
    pub offsets_partitions: u32,
    pub timeout_seconds: f64,
    /// Why nothing was probed, when nothing was.
    pub blind: Option<&'a str>,
    pub brokers: Vec<CoordinatorStatus<'a>>,
}

#[derive(Serialize)]
pub struct CoordinatorStatus<'a> {
    pub broker: i32,
    /// The `__consumer_offsets` partitions it leads.
    pub shards: &'a [i32],
    /// `answered`, `unanswered`, `failed` or `not_yet`.
    pub probe: &'static str,
    pub latency_seconds: Option<f64>,
    pub failure: Option<&'a str>,
    /// Its ApiVersions on another connection meanwhile; null when that did not answer.
    pub control_latency_seconds: Option<f64>,
    pub unanswered_in_a_row: u32,
    pub unanswered_seconds: Option<f64>,
    pub errors: Vec<ShardErrorStatus>,
}

#[derive(Serialize)]
pub struct ShardErrorStatus {
    pub shard: i32,
    pub error: String,
    pub seconds: f64,
}

fn coordinators_status(
    c: &crate::model::coordinators::CoordinatorObservation,
) -> CoordinatorsStatus<'_> {
    shards_status(
        c.at,
        c.offsets_partitions,
        c.timeout,
        c.blind.as_deref(),
        &c.brokers,
    )
}

fn shards_status<'a>(
    at: std::time::SystemTime,
    partitions: u32,
    timeout: std::time::Duration,
    blind: Option<&'a str>,
    brokers: &'a BTreeMap<i32, crate::model::coordinators::CoordinatorLook>,
) -> CoordinatorsStatus<'a> {
    use crate::model::coordinators::ShardProbe;
    let ago = |t: std::time::SystemTime| at.duration_since(t).unwrap_or_default().as_secs_f64();
    CoordinatorsStatus {
        observed_at: secs(at),
        offsets_partitions: partitions,
        timeout_seconds: timeout.as_secs_f64(),
        blind,
        brokers: brokers
            .values()
            .map(|l| {
                let (probe, latency, failure) = match &l.last {
                    ShardProbe::Answered { latency } => {
                        ("answered", Some(latency.as_secs_f64()), None)
                    }
                    ShardProbe::Unanswered => ("unanswered", None, None),
                    ShardProbe::Failed { detail, .. } => ("failed", None, Some(detail.as_str())),
                    ShardProbe::NotYet => ("not_yet", None, None),
                };
                CoordinatorStatus {
                    broker: l.broker,
                    shards: &l.shards,
                    probe,
                    latency_seconds: latency,
                    failure,
                    control_latency_seconds: l.control_latency.map(|d| d.as_secs_f64()),
                    unanswered_in_a_row: l.unanswered_in_a_row,
                    unanswered_seconds: l.unanswered_since.map(ago),
                    errors: l
                        .errors
                        .iter()
                        .map(|e| ShardErrorStatus {
                            shard: e.shard,
                            error: crate::observe::wire::kafka_error_name(e.code),
                            seconds: ago(e.since),
                        })
                        .collect(),
                }
            })
            .collect(),
    }
}

/// The control plane as the newest look saw it.
#[derive(Serialize)]
pub struct QuorumStatus<'a> {
    #[serde(flatten)]
    pub report: &'a crate::judge::quorum::QuorumReport,
    /// Unix time of the look.
    pub observed_at: f64,
    pub high_watermark_still_seconds: f64,
    pub problem_since: Option<f64>,
    pub controllers: Vec<ControllerStatus<'a>>,
    /// The broker asked (it forwards to the active controller) and how that went.
    pub via_broker: Option<ViaBroker<'a>>,
    /// The furthest the brokers asked have applied the metadata log (ApiVersions), and how
    /// long it has stood there: it grows every 500 ms while a leader commits.
    pub metadata_applied_offset: Option<i64>,
    pub metadata_applied_still_seconds: Option<f64>,
}

#[derive(Serialize)]
pub struct ViaBroker<'a> {
    pub address: &'a str,
    pub failure: Option<&'a ProbeFailure>,
}

#[derive(Serialize)]
pub struct ControllerStatus<'a> {
    #[serde(flatten)]
    pub verdict: &'a crate::judge::quorum::ControllerVerdict,
    /// Its answer when asked directly: `leader` or `follower`.
    pub role: Option<crate::model::round::ControllerRole>,
    /// Why asking it directly failed.
    pub failure: Option<&'a ProbeFailure>,
    /// The quorum leader's word on it.
    pub log_end_offset: Option<i64>,
    pub last_fetch_age_seconds: Option<f64>,
    pub last_caught_up_age_seconds: Option<f64>,
}

fn quorum_status(q: &crate::judge::quorum::QuorumReport) -> QuorumStatus<'_> {
    let d = q.look.description.as_ref();
    QuorumStatus {
        report: q,
        observed_at: secs(q.observed_at),
        high_watermark_still_seconds: q.high_watermark_still_for.unwrap_or_default().as_secs_f64(),
        problem_since: q.problem.as_ref().map(|p| secs(p.since)),
        controllers: q
            .controllers
            .iter()
            .map(|c| {
                let direct = q.look.controller(c.controller);
                let voter = d.and_then(|d| d.voter(c.controller));
                ControllerStatus {
                    verdict: c,
                    role: direct.and_then(|l| l.outcome.as_ref().ok().copied()),
                    failure: direct.and_then(|l| l.outcome.as_ref().err()),
                    log_end_offset: voter.map(|v| v.log_end_offset),
                    last_fetch_age_seconds: voter
                        .and_then(|v| v.last_fetch_ago)
                        .map(|a| a.as_secs_f64()),
                    last_caught_up_age_seconds: voter
                        .and_then(|v| v.last_caught_up_ago)
                        .map(|a| a.as_secs_f64()),
                }
            })
            .collect(),
        via_broker: q.look.via_broker.as_ref().map(|(address, r)| ViaBroker {
            address,
            failure: r.as_ref().err(),
        }),
        metadata_applied_offset: q.look.metadata_applied.map(|a| a.offset),
        metadata_applied_still_seconds: q.look.metadata_applied.map(|a| {
            q.observed_at
                .duration_since(a.since)
                .unwrap_or_default()
                .as_secs_f64()
        }),
    }
}

#[derive(Serialize)]
pub struct BootstrapFailure<'a> {
    pub address: &'a str,
    pub failure: &'a ProbeFailure,
}

#[derive(Serialize)]
pub struct BrokerStatus<'a> {
    #[serde(flatten)]
    pub verdict: &'a BrokerVerdict,
    pub listed_as_registered: bool,
    /// Unix time since which the broker has been in its current state.
    pub state_since: Option<f64>,
    pub probe: Option<&'a BrokerProbe>,
    /// The continuous liveness check, as of the last verdicts; absent when it is off.
    pub liveness: Option<LivenessStatus>,
    pub metadata_seconds: Option<f64>,
    pub partitions: BrokerPartitions,
    /// Host mode's look at its process, ports and log directories.
    pub host: Option<&'a crate::model::round::HostObservation>,
    /// Its log directories as it described them this round (DescribeLogDirs).
    pub log_dirs: Option<&'a [crate::model::round::LogDirState]>,
}

#[derive(Serialize)]
pub struct LivenessStatus {
    /// How long its oldest request had waited (0 while it answers).
    pub silence_seconds: f64,
    pub threshold_seconds: f64,
    pub last_latency_seconds: Option<f64>,
    pub refused: bool,
    /// What the last fresh connection of this silence found (`accepted`, `refused`,
    /// `timed_out`, `failed`).
    pub fresh_connection: Option<crate::observe::liveness::SideOutcome>,
    /// Silences past its threshold that ended, in the flapping window.
    pub recent_spells: usize,
}

fn liveness_status(
    f: &crate::observe::liveness::LivenessFact,
    at: std::time::SystemTime,
) -> LivenessStatus {
    LivenessStatus {
        silence_seconds: f.silent_for(at).unwrap_or_default().as_secs_f64(),
        threshold_seconds: f.threshold.as_secs_f64(),
        last_latency_seconds: f.last_latency.map(|d| d.as_secs_f64()),
        refused: f.refused_since.is_some(),
        fresh_connection: f.side.as_ref().map(|s| s.outcome),
        recent_spells: f.spells.len(),
    }
}

#[derive(Serialize)]
pub struct PartitionsStatus<'a> {
    pub observed: u64,
    pub offline: u64,
    pub under_replicated: u64,
    pub under_min_isr: u64,
    pub leader_not_in_isr: u64,
    pub problems: &'a [PartitionProblem],
    pub problems_truncated: bool,
}

fn secs(t: std::time::SystemTime) -> f64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

pub fn cluster_status(r: &ClusterReport) -> ClusterStatus<'_> {
    use crate::judge::health::Condition::*;
    let n = r.health.problems.len().min(MAX_LISTED_PROBLEMS);
    ClusterStatus {
        name: &r.cluster,
        severity: r.severity(),
        round: r.round,
        started_at: secs(r.started_at),
        duration_seconds: r.duration.as_secs_f64(),
        last_success_at: r.last_success.map(secs),
        cluster_id: r.cluster_id.as_deref(),
        reachable: r.reachable,
        brokers: r
            .verdicts
            .iter()
            .map(|v| {
                let probe = r.probes.get(&v.broker);
                BrokerStatus {
                    verdict: v,
                    listed_as_registered: v.registration == Registration::Registered,
                    state_since: r.state_since.get(&v.broker).copied().map(secs),
                    probe,
                    metadata_seconds: probe
                        .and_then(BrokerProbe::metadata_latency)
                        .map(|d| d.as_secs_f64()),
                    partitions: r.health.brokers.get(&v.broker).cloned().unwrap_or_default(),
                    host: r.host.get(&v.broker),
                    log_dirs: match r.probes.get(&v.broker).map(|p| &p.log_dirs) {
                        Some(Some(Ok(d))) => Some(d.as_slice()),
                        _ => None,
                    },
                    liveness: r
                        .liveness
                        .get(&v.broker)
                        .map(|f| liveness_status(f, r.evaluated_at)),
                }
            })
            .collect(),
        partitions: PartitionsStatus {
            observed: r.health.partitions,
            offline: r.health.count(Offline),
            under_replicated: r.health.count(UnderReplicated),
            under_min_isr: r.health.count(UnderMinIsr),
            leader_not_in_isr: r.health.count(LeaderNotInIsr),
            problems: &r.health.problems[..n],
            problems_truncated: n < r.health.problems.len(),
        },
        split_brain: &r.stale_leaders,
        unclean_elections: &r.unclean_elections,
        bootstrap_failures: r
            .bootstrap_failures
            .iter()
            .map(|(address, failure)| BootstrapFailure { address, failure })
            .collect(),
        canary: r.canary.as_ref(),
        canary_last_unavailable_seconds: &r.canary_last_window,
        quorum: r.quorum.as_ref().map(quorum_status),
        group_coordinators: r.coordinators.as_deref().map(coordinators_status),
        txn_coordinators: r
            .coordinators
            .as_deref()
            .and_then(|c| Some((c, c.transactions.as_ref()?)))
            .map(|(c, t)| {
                shards_status(
                    t.at,
                    t.partitions,
                    c.timeout,
                    t.blind.as_deref(),
                    &t.brokers,
                )
            }),
        certificates: r
            .certificates
            .as_ref()
            .map(|c| certificates_status(c, r.evaluated_at)),
    }
}

pub fn render<'a>(
    instance_id: &'a str,
    reports: impl IntoIterator<Item = &'a ClusterReport>,
    extras: &'a crate::serve::metrics::Extras,
) -> String {
    let status = Status {
        version: env!("CARGO_PKG_VERSION"),
        instance_id,
        clusters: reports.into_iter().map(cluster_status).collect(),
        incidents: &extras.incidents,
        webhooks: extras
            .webhooks
            .iter()
            .flat_map(|w| &w.receivers)
            .map(|r| WebhookStatus {
                receiver: &r.receiver,
                format: r.format,
                target: &r.target,
                delivered: r.ok,
                failed_attempts: r.failed,
                dropped: r.dropped,
                queue_depth: r.queue_depth,
                held_updates: r.held,
                delivered_by_peers: r.left_to_peers,
                last_success_at: r.last_success.map(secs),
                last_failure: r.last_failure.as_deref(),
            })
            .collect(),
        config_reload_success: extras.reload_success,
        silences: extras
            .silences
            .iter()
            .map(|s| crate::model::silence::to_json(s, std::time::SystemTime::now()))
            .collect(),
        remediations: &extras.remediations,
        peers: extras
            .webhooks
            .as_ref()
            .and_then(|w| w.peers.as_ref())
            .map(|p| PeersStatus {
                known: p
                    .peers
                    .iter()
                    .map(|(id, url, age)| PeerStatus {
                        instance_id: id,
                        url,
                        last_answer_seconds_ago: (age * 10.0).round() / 10.0,
                    })
                    .collect(),
                unreachable: &p.unreachable,
            }),
        own_health: extras.own_health.as_ref().map(own_health_status),
    };
    serde_json::to_string_pretty(&status).expect("status serializes")
}
