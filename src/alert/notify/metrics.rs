//! Webhook delivery: notifications by receiver and outcome, the queue waiting per receiver,
//! the last successful delivery, the updates held and coalesced per receiver, and the
//! notifications its spool could not take; with `peers:`, how lately each other watchdog
//! answered.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;

use super::NotifierStats;
use crate::model::metric_kit::{counter, gauge, secs, set, CounterFamily, GaugeFamily};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReceiverLabels {
    pub receiver: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PeerLabels {
    /// The other watchdog's instance_id.
    pub peer: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusedLabels {
    /// `unsigned`, `bad_signature` or `malformed` (`alert::peers::auth::Refusal`).
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeliveryLabels {
    pub receiver: String,
    /// `ok`, `failed` (and retried), `dropped`, or `peer` (another watchdog delivered it).
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CoalescedLabels {
    pub receiver: String,
    /// `merged` (sent inside a later message) or `superseded` (dropped: the incident
    /// resolved first).
    pub outcome: &'static str,
}

pub fn encode(reg: &mut Registry, stats: &NotifierStats) {
    let deliveries: CounterFamily<DeliveryLabels> = counter(
        reg,
        "webhook_deliveries",
        "Webhook notifications by receiver and outcome (ok, failed and retried, dropped, peer: another watchdog on the cluster delivered it)",
    );
    let depth: GaugeFamily<ReceiverLabels> = gauge(
        reg,
        "webhook_queue_depth",
        "Notifications waiting per receiver",
    );
    let last: GaugeFamily<ReceiverLabels> = gauge(
        reg,
        "webhook_last_success_timestamp_seconds",
        "Unix time of the receiver's last successful delivery",
    );
    let held: GaugeFamily<ReceiverLabels> = gauge(
        reg,
        "webhook_updates_held",
        "Incident updates waiting per receiver for its group interval",
    );
    let coalesced: CounterFamily<CoalescedLabels> = counter(
        reg,
        "webhook_coalesced_updates",
        "Held incident updates by receiver and outcome (merged into a later message, superseded by the resolve)",
    );
    let unspooled: CounterFamily<ReceiverLabels> = counter(
        reg,
        "webhook_unspooled",
        "Notifications per receiver its spool could not take (disk full, read-only, out of descriptors), kept in memory and sent from there: a restart before they are delivered loses them",
    );
    if let Some(p) = &stats.peers {
        encode_peers(reg, p);
    }
    for r in &stats.receivers {
        unspooled
            .get_or_create(&ReceiverLabels {
                receiver: r.receiver.clone(),
            })
            .inc_by(r.unspooled);
        let receiver = || ReceiverLabels {
            receiver: r.receiver.clone(),
        };
        for (outcome, n) in r.deliveries() {
            let labels = DeliveryLabels {
                receiver: r.receiver.clone(),
                outcome,
            };
            deliveries.get_or_create(&labels).inc_by(n);
        }
        set(&depth, receiver(), r.queue_depth as f64);
        set(&held, receiver(), r.held as f64);
        for (outcome, n) in [("merged", r.merged), ("superseded", r.superseded)] {
            let labels = CoalescedLabels {
                receiver: r.receiver.clone(),
                outcome,
            };
            coalesced.get_or_create(&labels).inc_by(n);
        }
        if let Some(t) = r.last_success {
            set(&last, receiver(), secs(t));
        }
    }
}

/// How lately each other watchdog of `peers:` answered, and how many do not.
fn encode_peers(reg: &mut Registry, p: &crate::alert::peers::PeersStats) {
    let answering: GaugeFamily<PeerLabels> = gauge(
        reg,
        "peer_last_answer_age_seconds",
        "Seconds since each other watchdog of peers: last answered (silences and deliveries shared); past peers.takeover_secs it is taken for gone and this one sends in its place",
    );
    for (id, _, age) in &p.peers {
        set(&answering, PeerLabels { peer: id.clone() }, *age);
    }
    let count: prometheus_client::metrics::gauge::Gauge<i64> = Default::default();
    count.set(p.answering as i64);
    reg.register(
        "peers_answering",
        "Other watchdogs (peers:) that answered within peers.takeover_secs",
        count,
    );
    let answers: CounterFamily<RefusedLabels> = counter(
        reg,
        "peer_answers_refused",
        "Answers from other watchdogs (peers:) refused, by reason: unsigned (no signature: not a watchdog holding the peer key), bad_signature (another key, or altered or replayed on the way), malformed (signed, not a peer document); their silences and deliveries are not taken",
    );
    for (reason, n) in &p.answers_refused {
        answers.get_or_create(&RefusedLabels { reason }).inc_by(*n);
    }
    let refused: prometheus_client::metrics::counter::Counter = Default::default();
    refused.inc_by(p.silences_refused);
    reg.register(
        "peer_silences_refused",
        "Silences other watchdogs (peers:) passed on that fail the checks of the silences API (over the 30-day cap, a cluster not watched here, no comment): not taken, each counted once",
        refused,
    );
    let unreachable: prometheus_client::metrics::gauge::Gauge<i64> = Default::default();
    unreachable.set(p.unreachable.len() as i64);
    reg.register(
        "peers_unreachable",
        "Peer URLs (peers:) whose last look failed: refused, timed out, or not a watchdog; while a peer cannot be reached both may send to Slack, Teams and generic receivers",
        unreachable,
    );
}
