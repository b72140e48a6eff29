//! Formats against each service's documented fields, the routing and timing rules, and
//! delivery against an in-process HTTP receiver that fails on cue.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request as HttpRequest, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;

use super::*;
use crate::alert::incident::{EventKind, Incident, IncidentEvent, Previous, Subject};
use crate::config::{Secret, Severity, WebhookConfig, WebhookFormat};
use crate::judge::verdict::BrokerState;
use crate::model::kind::FindingKind;

fn t(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

fn incident(cluster: &str, broker: Option<i32>, severity: Severity) -> Incident {
    let subject = broker.map_or(Subject::Cluster, Subject::Broker);
    let kind = if broker.is_some() {
        FindingKind::Broker
    } else {
        FindingKind::OfflinePartitions
    };
    Incident {
        id: format!("kw-{cluster}-{subject}"),
        dedup_key: format!("kafka-watchdog/{cluster}/{subject}/{kind}"),
        cluster: cluster.into(),
        subject,
        kind,
        broker,
        broker_address: broker.map(|b| format!("127.0.0.1{b}:9092")),
        state: broker.map(|_| BrokerState::Zombie),
        severity,
        peak_severity: severity,
        summary: "broker 2 (127.0.0.12:9092) is a zombie: TCP connect succeeded in 1 ms but api_versions failed: timeout after 2.0 s".into(),
        evidence: vec!["no_answer: TCP connect succeeded <fast> & then nothing".into()],
        rules: vec!["no_answer".into()],
        affected_partitions: vec!["orders-0".into(), "orders-1".into()],
        affected_partitions_total: 2,
        suspects: broker.into_iter().collect(),
        started_at: t(0),
        updated_at: t(20),
        resolved_at: None,
        unavailable_seconds: Some(12.5),
        silenced: None,
        notified_peak: Some(severity),
        flapping_since: None,
        labels: Default::default(),
    }
}

fn event(kind: EventKind, mut i: Incident) -> IncidentEvent {
    if kind == EventKind::Resolved {
        i.resolved_at = Some(t(250));
    }
    IncidentEvent {
        kind,
        at: t(30),
        incident: i,
        previous: None,
        changes: Vec::new(),
    }
}

fn note(kind: EventKind, i: Incident) -> Notification {
    Notification {
        sequence: 7,
        receiver: "ops".into(),
        event: event(kind, i),
        queued_at: t(30),
    }
}

fn ctx() -> Context<'static> {
    Context {
        instance_id: "wd-1",
        now: t(300),
        status_url: Some("https://watchdog.example:9644/status"),
        runbooks_url: Some("https://watchdog.example:9644/runbooks"),
    }
}

fn hook(name: &str, url: &str, format: WebhookFormat) -> WebhookConfig {
    WebhookConfig {
        name: name.into(),
        url: Secret::new(url),
        target: url.into(),
        format,
        min_severity: Severity::Info,
        clusters: Vec::new(),
        repeat_interval: None,
        send_resolved: true,
        timeout: Duration::from_secs(2),
        tls_verify: true,
        ca_file: None,
        headers: BTreeMap::new(),
        hmac_secret: None,
        routing_key: (format == WebhookFormat::PagerDuty).then(|| Secret::new("R0UT1NGKEY")),
        // Every update at once, as before coalescing; the coalescing tests set it.
        group_interval: None,
        slack_bot: None,
    }
}

fn is_rfc3339(v: &Value) -> bool {
    let Some(s) = v.as_str() else { return false };
    let b = s.as_bytes();
    s.len() == 24
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'.'
        && s.ends_with('Z')
}

fn updated(from: Severity, peak_before: Severity, to: Severity) -> IncidentEvent {
    let mut i = incident("lab", Some(2), to);
    i.peak_severity = peak_before.max(to);
    i.notified_peak = Some(i.peak_severity);
    let mut e = event(EventKind::Updated, i);
    e.previous = Some(Previous {
        severity: from,
        peak_severity: peak_before,
        state: None,
        notified_peak: Some(peak_before),
    });
    e
}

/// A non-escalating update of broker 2's incident (critical, as told), saying `change`.
fn minor_update(change: &str, evidence: &str) -> IncidentEvent {
    let mut e = updated(Severity::Critical, Severity::Critical, Severity::Critical);
    e.incident.evidence = vec![evidence.into()];
    e.changes = vec![change.into()];
    e
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// n opened events of distinct brokers, in order.
fn events(n: i32) -> Vec<IncidentEvent> {
    (1..=n)
        .map(|b| {
            event(
                EventKind::Opened,
                incident("lab", Some(b), Severity::Critical),
            )
        })
        .collect()
}

fn fast() -> DeliverySettings {
    DeliverySettings {
        backoff: Backoff {
            initial: Duration::from_millis(10),
            page_max: Duration::from_millis(80),
            info_max: Duration::from_millis(80),
            jitter: 0.2,
        },
        max_retry_after: Duration::from_secs(5),
        inbox_capacity: 64,
        max_queued: 1000,
        max_age: Duration::from_secs(3600),
        reminder_check: Duration::from_millis(10),
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kw-notify-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

mod delivery;
mod formats;
mod routing;
mod slack_web_api;
mod timing;
