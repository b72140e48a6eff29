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

// ---- generic ----

#[test]
fn generic_body_has_every_documented_field() {
    let n = note(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    );
    let v = generic(&n, &ctx());
    let expected = [
        "schema_version",
        "event",
        "notification_id",
        "sequence",
        "incident_id",
        "dedup_key",
        "kind",
        "cluster",
        "labels",
        "broker_id",
        "broker_address",
        "state",
        "severity",
        "summary",
        "evidence",
        "affected_partitions",
        "affected_partitions_total",
        "suspects",
        "changes",
        "started_at",
        "updated_at",
        "resolved_at",
        "duration_seconds",
        "unavailable_seconds",
        "sent_at",
        "instance_id",
        "watchdog_version",
    ];
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let mut want = expected.to_vec();
    want.sort_unstable();
    let mut got = keys.clone();
    got.sort_unstable();
    assert_eq!(got, want);
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["event"], "opened");
    assert_eq!(v["notification_id"], "wd-1/ops/7");
    assert_eq!(v["sequence"], 7);
    assert_eq!(v["broker_id"], 2);
    assert_eq!(v["state"], "zombie");
    assert_eq!(v["severity"], "critical");
    assert_eq!(v["dedup_key"], "kafka-watchdog/lab/broker-2/broker");
    assert_eq!(v["started_at"], "2023-11-14T22:13:20.000Z");
    assert!(v["resolved_at"].is_null());
    assert_eq!(v["duration_seconds"], 300.0);
    assert_eq!(v["unavailable_seconds"], 12.5);
    assert_eq!(v["instance_id"], "wd-1");
    assert_eq!(v["watchdog_version"], env!("CARGO_PKG_VERSION"));
    assert!(
        v["evidence"].is_array() && v["affected_partitions"].is_array() && v["suspects"].is_array()
    );
}

/// Issue 28 item 3: a cluster's static labels (`env`, `team`) reach every receiver that can
/// route by them: the generic body's `labels`, Alertmanager's labels (never over the
/// watchdog's own), PagerDuty's custom details.
#[test]
fn a_clusters_static_labels_reach_the_receivers() {
    let mut i = incident("lab", Some(2), Severity::Critical);
    i.labels = [
        ("env".to_string(), "prod".to_string()),
        ("team".to_string(), "payments".to_string()),
    ]
    .into();
    let n = note(EventKind::Opened, i);
    let g = generic(&n, &ctx());
    assert_eq!(
        g["labels"],
        serde_json::json!({"env": "prod", "team": "payments"})
    );
    let am = alertmanager(Some(Duration::from_secs(3600)), &n, &ctx());
    assert_eq!(am[0]["labels"]["env"], "prod", "{am:#}");
    assert_eq!(am[0]["labels"]["team"], "payments");
    assert_eq!(am[0]["labels"]["cluster"], "lab");
    let pd = render(
        &hook("pd", "http://x", WebhookFormat::PagerDuty),
        &n,
        &ctx(),
    );
    let pd: Value = serde_json::from_slice(&pd.body).unwrap();
    assert_eq!(
        pd["payload"]["custom_details"]["labels"]["team"], "payments",
        "{pd:#}"
    );
    // Without labels the generic body still has the field, empty.
    let plain = note(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    );
    assert_eq!(generic(&plain, &ctx())["labels"], serde_json::json!({}));
}

#[test]
fn generic_body_of_a_cluster_incident_and_a_resolve() {
    let n = note(
        EventKind::Resolved,
        incident("lab", None, Severity::Critical),
    );
    let v = generic(&n, &ctx());
    assert_eq!(v["event"], "resolved");
    assert!(v["broker_id"].is_null());
    assert!(v["state"].is_null());
    assert!(is_rfc3339(&v["resolved_at"]));
    assert_eq!(v["duration_seconds"], 250.0, "to the resolve, not to now");
    for kind in [EventKind::Updated, EventKind::Reminder] {
        assert_eq!(
            generic(
                &note(kind, incident("lab", None, Severity::Warning)),
                &ctx()
            )["event"],
            kind.as_str()
        );
    }
}

#[test]
fn generic_body_is_signed_when_a_secret_is_set() {
    let n = note(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    );
    let mut cfg = hook("ops", "http://x", WebhookFormat::Generic);
    let plain = render(&cfg, &n, &ctx());
    assert!(!plain.headers.iter().any(|(k, _)| k == SIGNATURE_HEADER));
    cfg.hmac_secret = Some(Secret::new("s3cret"));
    let signed = render(&cfg, &n, &ctx());
    assert_eq!(signed.body, plain.body);
    let (_, sig) = signed
        .headers
        .iter()
        .find(|(k, _)| k == SIGNATURE_HEADER)
        .unwrap();
    let hex = sig.strip_prefix("sha256=").unwrap();
    assert_eq!(hex.len(), 64);
    let tag: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"s3cret");
    ring::hmac::verify(&key, &signed.body, &tag).expect("signature verifies");
    assert!(ring::hmac::verify(&key, b"other body", &tag).is_err());
}

#[test]
fn hmac_matches_a_known_vector() {
    // RFC 4231 test case 2.
    assert_eq!(
        signature(b"Jefe", b"what do ya want for nothing?"),
        "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

// ---- Slack ----

#[test]
fn slack_message_has_text_and_top_level_blocks_led_by_a_severity_marker() {
    let n = note(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    );
    let v = slack(&n, &ctx());
    assert!(v["text"]
        .as_str()
        .unwrap()
        .starts_with("[CRITICAL] lab broker: opened"));
    // Legacy attachments may lose visibility in Slack: blocks stand at the top level.
    assert!(v.get("attachments").is_none(), "{v:#}");
    let blocks = v["blocks"].as_array().unwrap();
    assert!(blocks[0]["text"]["text"]
        .as_str()
        .unwrap()
        .starts_with(":red_circle: *[CRITICAL]"));
    for b in blocks {
        let ty = b["type"].as_str().unwrap();
        assert!(["section", "context", "actions"].contains(&ty), "{ty}");
        if let Some(text) = b["text"]["text"].as_str() {
            assert_eq!(b["text"]["type"], "mrkdwn");
            assert!(text.chars().count() <= 3000);
        }
        if let Some(fields) = b["fields"].as_array() {
            assert!(fields.len() <= 10);
            assert!(fields
                .iter()
                .all(|f| f["type"] == "mrkdwn" && f["text"].as_str().unwrap().len() <= 2000));
        }
    }
    let evidence = blocks
        .iter()
        .find(|b| {
            b["text"]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("*Evidence*"))
        })
        .unwrap();
    assert!(
        evidence["text"]["text"]
            .as_str()
            .unwrap()
            .contains("&lt;fast&gt; &amp; then"),
        "escaped"
    );
    let button = blocks.iter().find(|b| b["type"] == "actions").unwrap();
    assert_eq!(
        button["elements"][0]["url"],
        "https://watchdog.example:9644/status"
    );
    let warning = slack(
        &note(EventKind::Opened, incident("lab", None, Severity::Warning)),
        &ctx(),
    );
    assert!(warning["blocks"][0]["text"]["text"]
        .as_str()
        .unwrap()
        .starts_with(":large_orange_circle:"));
}

#[test]
fn slack_resolve_is_green_and_says_how_long() {
    let v = slack(
        &note(
            EventKind::Resolved,
            incident("lab", Some(2), Severity::Critical),
        ),
        &ctx(),
    );
    assert!(v["blocks"][0]["text"]["text"]
        .as_str()
        .unwrap()
        .starts_with(":large_green_circle:"));
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("resolved after 4m 10s"),
        "{}",
        v["text"]
    );
}

#[test]
fn slack_cuts_long_evidence_inside_its_code_fence() {
    let mut i = incident("lab", Some(2), Severity::Critical);
    i.evidence = vec!["x".repeat(5000)];
    let v = slack(&note(EventKind::Opened, i), &ctx());
    let mut evidence = None;
    for b in v["blocks"].as_array().unwrap() {
        if let Some(text) = b["text"]["text"].as_str() {
            assert!(text.chars().count() <= 3000);
            if text.starts_with("*Evidence*") {
                evidence = Some(text.to_string());
            }
        }
    }
    let evidence = evidence.unwrap();
    assert!(evidence.ends_with("…```"), "closing fence kept: {evidence}");
    assert_eq!(evidence.matches("```").count(), 2);
}

#[test]
fn slack_without_a_status_url_has_no_button() {
    let n = note(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    );
    let v = slack(
        &n,
        &Context {
            status_url: None,
            ..ctx()
        },
    );
    assert!(v["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|b| b["type"] != "actions"));
}

// ---- PagerDuty ----

#[test]
fn pagerduty_trigger_has_the_events_api_v2_fields() {
    let v = pagerduty(
        "R0UT1NGKEY",
        &note(
            EventKind::Opened,
            incident("lab", Some(2), Severity::Critical),
        ),
        &ctx(),
    );
    assert_eq!(v["routing_key"], "R0UT1NGKEY");
    assert_eq!(v["event_action"], "trigger");
    assert_eq!(v["dedup_key"], "kafka-watchdog/lab/broker-2/broker");
    assert!(v["dedup_key"].as_str().unwrap().len() <= 255);
    let p = &v["payload"];
    for required in ["summary", "source", "severity"] {
        assert!(
            p[required].as_str().is_some_and(|s| !s.is_empty()),
            "{required}"
        );
    }
    assert!(["critical", "error", "warning", "info"].contains(&p["severity"].as_str().unwrap()));
    assert_eq!(p["severity"], "critical");
    assert_eq!(p["source"], "127.0.0.12:9092");
    assert!(is_rfc3339(&p["timestamp"]));
    assert_eq!(p["component"], "broker-2");
    assert_eq!(p["group"], "lab");
    assert_eq!(p["class"], "broker");
    assert!(p["custom_details"].is_object());
    assert_eq!(p["custom_details"]["incident_id"], "kw-lab-broker-2");
    assert_eq!(v["client_url"], "https://watchdog.example:9644/status");
    assert_eq!(
        v["links"][0]["href"],
        "https://watchdog.example:9644/status"
    );
    assert!(v["links"][0]["text"].is_string());
    let cluster = pagerduty(
        "k",
        &note(
            EventKind::Reminder,
            incident("lab", None, Severity::Warning),
        ),
        &ctx(),
    );
    assert_eq!(cluster["event_action"], "trigger");
    assert_eq!(cluster["payload"]["source"], "lab");
    assert_eq!(cluster["payload"]["severity"], "warning");
}

#[test]
fn pagerduty_summary_stays_within_1024_characters() {
    let mut i = incident("lab", Some(2), Severity::Critical);
    i.summary = "é".repeat(3000);
    let v = pagerduty("k", &note(EventKind::Opened, i), &ctx());
    assert_eq!(
        v["payload"]["summary"].as_str().unwrap().chars().count(),
        PAGERDUTY_SUMMARY_MAX
    );
}

#[test]
fn pagerduty_resolve_carries_only_what_finds_the_alert() {
    let v = pagerduty(
        "k",
        &note(
            EventKind::Resolved,
            incident("lab", Some(2), Severity::Critical),
        ),
        &ctx(),
    );
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, vec!["dedup_key", "event_action", "routing_key"]);
    assert_eq!(v["event_action"], "resolve");
}

#[test]
fn render_uses_the_configured_routing_key() {
    let cfg = hook("pd", "http://x", WebhookFormat::PagerDuty);
    let r = render(
        &cfg,
        &note(EventKind::Opened, incident("lab", None, Severity::Critical)),
        &ctx(),
    );
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["routing_key"], "R0UT1NGKEY");
    assert!(r
        .headers
        .contains(&("Content-Type".into(), "application/json".into())));
}

// ---- Alertmanager ----

#[test]
fn alertmanager_posts_an_array_of_alerts_firing_into_the_future() {
    let v = alertmanager(
        Some(Duration::from_secs(300)),
        &note(
            EventKind::Opened,
            incident("lab", Some(2), Severity::Critical),
        ),
        &ctx(),
    );
    let alerts = v.as_array().unwrap();
    assert_eq!(alerts.len(), 1);
    let a = &alerts[0];
    let labels = a["labels"].as_object().unwrap();
    assert!(
        labels.values().all(Value::is_string),
        "label values are strings"
    );
    assert_eq!(labels["alertname"], "KafkaWatchdogBroker");
    assert_eq!(labels["cluster"], "lab");
    assert_eq!(labels["broker"], "2");
    assert_eq!(labels["severity"], "critical");
    assert_eq!(labels["dedup_key"], "kafka-watchdog/lab/broker-2/broker");
    let ann = a["annotations"].as_object().unwrap();
    assert!(ann.values().all(Value::is_string));
    assert!(ann["summary"].as_str().unwrap().contains("zombie"));
    assert!(ann.contains_key("description"));
    assert_eq!(a["startsAt"], "2023-11-14T22:13:20.000Z");
    // Alertmanager's UI links "Source" to it.
    assert_eq!(a["generatorURL"], "https://watchdog.example:9644/status");
    // 300 s after now (t(300)) plus three repeat intervals.
    assert_eq!(a["endsAt"], crate::model::time::rfc3339(t(300 + 900)));
    let no_broker = alertmanager(
        None,
        &note(EventKind::Opened, incident("lab", None, Severity::Critical)),
        &ctx(),
    );
    assert!(no_broker[0]["labels"].get("broker").is_none());
    assert_eq!(
        no_broker[0]["endsAt"],
        crate::model::time::rfc3339(t(300 + 86_400))
    );
}

#[test]
fn alertmanager_resolve_ends_the_alert_when_it_went_away() {
    let v = alertmanager(
        None,
        &note(
            EventKind::Resolved,
            incident("lab", Some(2), Severity::Critical),
        ),
        &ctx(),
    );
    assert_eq!(v[0]["endsAt"], crate::model::time::rfc3339(t(250)));
}

#[test]
fn alertmanager_update_of_severity_ends_the_old_alert() {
    let mut n = note(
        EventKind::Updated,
        incident("lab", Some(2), Severity::Critical),
    );
    n.event.previous = Some(Previous {
        severity: Severity::Warning,
        peak_severity: Severity::Warning,
        state: Some(BrokerState::Degraded),
        notified_peak: Some(Severity::Warning),
    });
    let v = alertmanager(Some(Duration::from_secs(60)), &n, &ctx());
    let alerts = v.as_array().unwrap();
    assert_eq!(alerts.len(), 2);
    assert_eq!(alerts[1]["labels"]["severity"], "warning");
    assert_eq!(alerts[1]["endsAt"], crate::model::time::rfc3339(t(300)));
    assert_eq!(
        alert_lifetime(Some(Duration::from_secs(60))),
        Duration::from_secs(300),
        "at least 5 min"
    );
}

// ---- Teams ----

#[test]
fn teams_sends_an_adaptive_card_in_a_message() {
    let v = teams(
        &note(
            EventKind::Opened,
            incident("lab", Some(2), Severity::Critical),
        ),
        &ctx(),
    );
    assert_eq!(v["type"], "message");
    let a = &v["attachments"][0];
    assert_eq!(a["contentType"], "application/vnd.microsoft.card.adaptive");
    assert!(a["contentUrl"].is_null());
    let card = &a["content"];
    assert_eq!(card["type"], "AdaptiveCard");
    assert_eq!(card["version"], "1.4");
    assert_eq!(
        card["$schema"],
        "http://adaptivecards.io/schemas/adaptive-card.json"
    );
    let body = card["body"].as_array().unwrap();
    assert!(body
        .iter()
        .all(|b| ["TextBlock", "FactSet"].contains(&b["type"].as_str().unwrap())));
    assert_eq!(body[0]["color"], "Attention");
    let facts = body.iter().find(|b| b["type"] == "FactSet").unwrap()["facts"]
        .as_array()
        .unwrap();
    assert!(facts
        .iter()
        .all(|f| f["title"].is_string() && f["value"].is_string()));
    let resolved = teams(
        &note(
            EventKind::Resolved,
            incident("lab", Some(2), Severity::Critical),
        ),
        &ctx(),
    );
    assert_eq!(
        resolved["attachments"][0]["content"]["body"][0]["color"],
        "Good"
    );
}

#[test]
fn durations_read_like_a_person_wrote_them() {
    assert_eq!(human(Duration::from_secs(12)), "12s");
    assert_eq!(human(Duration::from_secs(250)), "4m 10s");
    assert_eq!(human(Duration::from_secs(3720)), "1h 02m");
    assert_eq!(human(Duration::from_secs(90_000)), "1d 01h");
}

// ---- routing ----

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

#[test]
fn routing_follows_severity_and_what_the_receiver_was_told() {
    use EventKind::*;
    use Severity::*;
    let mut pd = hook("pd", "http://x", WebhookFormat::PagerDuty);
    pd.min_severity = Critical;
    let warn_open = event(Opened, incident("lab", Some(2), Warning));
    assert_eq!(route(&pd, &warn_open), None);
    // Lifted over the threshold: the first this receiver hears is an "opened".
    assert_eq!(
        route(&pd, &updated(Warning, Warning, Critical)),
        Some(Opened)
    );
    // Already told (it peaked at critical): updates, also downwards, go through.
    assert_eq!(
        route(&pd, &updated(Critical, Critical, Warning)),
        Some(Updated)
    );
    assert_eq!(route(&pd, &updated(Warning, Warning, Warning)), None);
    let mut calmed = incident("lab", Some(2), Warning);
    calmed.peak_severity = Critical;
    calmed.notified_peak = Some(Critical);
    assert_eq!(route(&pd, &event(Resolved, calmed.clone())), Some(Resolved));
    assert_eq!(route(&pd, &event(Reminder, calmed)), Some(Reminder));
    assert_eq!(
        route(&pd, &event(Resolved, incident("lab", Some(2), Warning))),
        None,
        "never told"
    );
    pd.send_resolved = false;
    assert_eq!(
        route(&pd, &event(Resolved, incident("lab", Some(2), Critical))),
        None
    );
    let mut only_b = hook("b", "http://x", WebhookFormat::Generic);
    only_b.clusters = vec!["b".into()];
    assert_eq!(
        route(&only_b, &event(Opened, incident("lab", Some(2), Critical))),
        None
    );
    assert_eq!(
        route(&only_b, &event(Opened, incident("b", Some(2), Info))),
        Some(Opened)
    );
}

// ---- retry decisions ----

#[test]
fn answers_are_judged_retry_or_drop() {
    let cap = Duration::from_secs(900);
    for s in [200, 202, 204] {
        assert_eq!(judge(s, None, t(0), cap), Outcome::Delivered);
    }
    for s in [408, 429, 500, 502, 503, 504] {
        assert!(
            matches!(
                judge(s, None, t(0), cap),
                Outcome::Retry { after: None, .. }
            ),
            "{s}"
        );
    }
    for s in [301, 400, 401, 403, 404, 410, 413, 422] {
        assert!(
            matches!(judge(s, None, t(0), cap), Outcome::Drop { .. }),
            "{s}"
        );
    }
    assert_eq!(
        judge(429, Some("7"), t(0), cap),
        Outcome::Retry {
            after: Some(Duration::from_secs(7)),
            why: "HTTP 429".into()
        }
    );
    assert!(
        matches!(judge(503, Some("99999"), t(0), cap), Outcome::Retry { after: Some(d), .. } if d == cap)
    );
}

#[test]
fn retry_after_takes_seconds_or_a_date() {
    let now = UNIX_EPOCH + Duration::from_secs(1_445_412_480); // Wed, 21 Oct 2015 07:28:00 GMT
    assert_eq!(
        parse_retry_after("120", now),
        Some(Duration::from_secs(120))
    );
    assert_eq!(parse_retry_after(" 5 ", now), Some(Duration::from_secs(5)));
    assert_eq!(
        parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
        Some(Duration::from_secs(30))
    );
    assert_eq!(
        parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now),
        Some(Duration::ZERO)
    );
    assert_eq!(parse_retry_after("soon", now), None);
}

#[test]
fn backoff_doubles_to_its_cap_with_bounded_jitter() {
    let b = Backoff {
        initial: Duration::from_secs(1),
        max: Duration::from_secs(300),
        jitter: 0.2,
    };
    let nominal: Vec<u64> = (0..12).map(|a| b.wait(a, 0.0).as_secs()).collect();
    assert_eq!(
        nominal,
        vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
    );
    assert_eq!(b.wait(1000, 0.0), Duration::from_secs(300), "no overflow");
    assert_eq!(b.wait(3, 1.0), Duration::from_millis(9600));
    assert_eq!(b.wait(3, -1.0), Duration::from_millis(6400));
    assert_eq!(
        b.wait(3, 7.0),
        Duration::from_millis(9600),
        "unit is clamped"
    );
}

/// `Retry-After: 0` and a date already past were taken as a zero wait: a receiver that
/// answers 503 with either was retried in a loop without a pause (issue 27 item 4).
#[test]
fn retry_after_never_shortens_the_backoff() {
    let b = Backoff {
        initial: Duration::from_secs(1),
        max: Duration::from_secs(300),
        jitter: 0.0,
    };
    let now = UNIX_EPOCH + Duration::from_secs(1_445_412_480);
    let zero = parse_retry_after("0", now);
    let past = parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now);
    assert_eq!(retry_wait(zero, &b, 0, 0.0), Duration::from_secs(1));
    assert_eq!(retry_wait(past, &b, 3, 0.0), Duration::from_secs(8));
    // A longer wait the receiver asks for is honoured.
    assert_eq!(
        retry_wait(Some(Duration::from_secs(120)), &b, 2, 0.0),
        Duration::from_secs(120)
    );
    assert_eq!(retry_wait(None, &b, 2, 0.0), Duration::from_secs(4));
}

/// A full queue dropped the newest notification, however urgent: a page that came while a
/// receiver was down behind 10,000 others was lost (issue 27 item 4).
#[test]
fn a_full_queue_gives_up_what_matters_least_never_the_newest_page() {
    use EventKind::*;
    let q = |items: &[(&str, EventKind)]| -> Vec<QueuedEvent> {
        items
            .iter()
            .map(|(id, k)| Some((id.to_string(), *k)))
            .collect()
    };
    // An older update of the same incident: the new one says all of it.
    let queued = q(&[
        ("a", Opened),
        ("b", Opened),
        ("a", Updated),
        ("b", Resolved),
    ]);
    assert_eq!(evict(&queued, ("a", Updated)), Evict::Queued(2));
    // Else the oldest resolve or reminder, never the head (it may be on its way).
    let queued = q(&[
        ("z", Resolved),
        ("b", Opened),
        ("c", Reminder),
        ("d", Resolved),
    ]);
    assert_eq!(evict(&queued, ("e", Opened)), Evict::Queued(2));
    // Only pages queued: a resolve or a reminder coming in is the one given up...
    let pages = q(&[("a", Opened), ("b", Opened), ("c", Updated)]);
    assert_eq!(evict(&pages, ("a", Resolved)), Evict::Incoming);
    assert_eq!(evict(&pages, ("x", Reminder)), Evict::Incoming);
    // ... and a new page takes the place of the oldest one behind the head.
    assert_eq!(evict(&pages, ("d", Opened)), Evict::Queued(1));
    // Spooled before this start (unknown) counts as a page.
    let mut unknown = pages.clone();
    unknown.insert(1, None);
    assert_eq!(evict(&unknown, ("d", Opened)), Evict::Queued(1));
    assert_eq!(evict(&q(&[("a", Opened)]), ("d", Opened)), Evict::Incoming);
}

// ---- reminders, under paused time ----

#[tokio::test(start_paused = true)]
async fn reminders_come_at_each_receivers_interval_while_open() {
    let mut hourly = hook("hourly", "http://x", WebhookFormat::Slack);
    hourly.repeat_interval = Some(Duration::from_secs(3600));
    let mut am = hook("am", "http://x", WebhookFormat::Alertmanager);
    am.repeat_interval = Some(Duration::from_secs(300));
    let never = hook("never", "http://x", WebhookFormat::Generic);
    let receivers = [&hourly, &am, &never];
    let idle = [true, true, true];
    let mut r = Reminders::default();
    let opened = event(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    );
    r.record(&opened);
    let start = tokio::time::Instant::now();
    for idx in 0..3 {
        r.sent(idx, &opened.incident.id, start);
    }
    let mut got: Vec<(usize, u64)> = Vec::new();
    for _ in 0..(2 * 3600 / 60) {
        tokio::time::advance(Duration::from_secs(60)).await;
        let now = tokio::time::Instant::now();
        for (idx, e) in r.due(&receivers, &idle, now, SystemTime::now()) {
            assert_eq!(e.kind, EventKind::Reminder);
            got.push((idx, now.duration_since(start).as_secs()));
        }
    }
    let hourly_at: Vec<u64> = got
        .iter()
        .filter(|(i, _)| *i == 0)
        .map(|(_, s)| *s)
        .collect();
    assert_eq!(hourly_at, vec![3600, 7200]);
    assert_eq!(got.iter().filter(|(i, _)| *i == 1).count(), 24);
    assert!(!got.iter().any(|(i, _)| *i == 2));
    // Resolved: no more reminders.
    r.record(&event(
        EventKind::Resolved,
        incident("lab", Some(2), Severity::Critical),
    ));
    tokio::time::advance(Duration::from_secs(7200)).await;
    assert!(r
        .due(
            &receivers,
            &idle,
            tokio::time::Instant::now(),
            SystemTime::now()
        )
        .is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_busy_receiver_gets_no_reminders_and_a_restored_incident_waits_an_interval() {
    let mut am = hook("am", "http://x", WebhookFormat::Alertmanager);
    am.repeat_interval = Some(Duration::from_secs(300));
    let mut r = Reminders::default();
    r.restore(vec![incident("lab", None, Severity::Critical)]);
    let start = tokio::time::Instant::now();
    assert!(
        r.due(&[&am], &[true], start, SystemTime::now()).is_empty(),
        "counts from now"
    );
    tokio::time::advance(Duration::from_secs(300)).await;
    assert!(
        r.due(
            &[&am],
            &[false],
            tokio::time::Instant::now(),
            SystemTime::now()
        )
        .is_empty(),
        "busy"
    );
    tokio::time::advance(Duration::from_secs(299)).await;
    assert!(r
        .due(
            &[&am],
            &[true],
            tokio::time::Instant::now(),
            SystemTime::now()
        )
        .is_empty());
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        r.due(
            &[&am],
            &[true],
            tokio::time::Instant::now(),
            SystemTime::now()
        )
        .len(),
        1
    );
    // Below the receiver's threshold: never reminded.
    let mut strict = am.clone();
    strict.min_severity = Severity::Critical;
    let mut r = Reminders::default();
    r.record(&event(
        EventKind::Opened,
        incident("lab", Some(1), Severity::Warning),
    ));
    tokio::time::advance(Duration::from_secs(3600)).await;
    r.due(
        &[&strict],
        &[true],
        tokio::time::Instant::now(),
        SystemTime::now(),
    );
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert!(r
        .due(
            &[&strict],
            &[true],
            tokio::time::Instant::now(),
            SystemTime::now()
        )
        .is_empty());
}

// ---- coalescing, on injected time ----

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

#[test]
fn updates_within_the_group_interval_go_as_one_message_with_the_latest_state() {
    let start = tokio::time::Instant::now();
    let group = Some(secs(30));
    let mut c = Coalescer::default();
    let opened = event(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    );
    assert!(c.offer(0, group, opened.clone(), start).is_some());
    c.sent(0, &opened, start);
    let mut first = minor_update("rules: +slow_answers", "first");
    first.previous.as_mut().unwrap().state = Some(BrokerState::Degraded);
    assert_eq!(c.offer(0, group, first, start + secs(5)), None, "held");
    let second = minor_update("partitions: +orders-2", "second");
    assert_eq!(c.offer(0, group, second, start + secs(10)), None);
    let third = minor_update("rules: +slow_answers", "third");
    assert_eq!(c.offer(0, group, third, start + secs(12)), None);
    assert_eq!(c.held_count(0), 3);
    assert!(
        c.due(start + secs(29)).is_empty(),
        "30 s after the open, not before"
    );
    let due = c.due(start + secs(30));
    assert_eq!(due.len(), 1, "one message for three updates");
    let (r, merged) = &due[0];
    assert_eq!(*r, 0);
    assert_eq!(merged.kind, EventKind::Updated);
    assert_eq!(merged.incident.evidence, ["third"], "the latest state");
    assert_eq!(
        merged.changes,
        ["rules: +slow_answers", "partitions: +orders-2"],
        "every change once, in order"
    );
    assert_eq!(
        merged.previous.unwrap().state,
        Some(BrokerState::Degraded),
        "the state before the first held update: what the receiver last heard"
    );
    assert_eq!(c.held_count(0), 0);
    assert_eq!(
        c.take_tally(0),
        Tally {
            merged: 3,
            superseded: 0
        }
    );
    // The interval counts from the last message: an update right after it waits again.
    c.sent(0, merged, start + secs(30));
    assert_eq!(
        c.offer(0, group, minor_update("x", "y"), start + secs(31)),
        None
    );
    assert_eq!(c.due(start + secs(59)).len(), 0);
    assert_eq!(c.due(start + secs(60)).len(), 1);
}

#[test]
fn an_update_long_after_the_last_message_or_without_one_goes_at_once() {
    let start = tokio::time::Instant::now();
    let group = Some(secs(30));
    let mut c = Coalescer::default();
    // No message remembered (e.g. after a restart): nothing to wait for.
    assert!(c.offer(0, group, minor_update("a", "a"), start).is_some());
    let opened = event(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    );
    c.sent(0, &opened, start);
    assert!(c
        .offer(0, group, minor_update("b", "b"), start + secs(30))
        .is_some());
    // group_interval_secs: 0 sends every update at once.
    c.sent(1, &opened, start);
    assert!(c
        .offer(1, None, minor_update("c", "c"), start + secs(1))
        .is_some());
    assert_eq!(c.held_count(0) + c.held_count(1), 0);
}

#[test]
fn an_escalation_goes_at_once_and_takes_the_held_changes_with_it() {
    let start = tokio::time::Instant::now();
    let group = Some(secs(30));
    let mut c = Coalescer::default();
    let opened = event(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Warning),
    );
    c.sent(0, &opened, start);
    let mut minor = updated(Severity::Warning, Severity::Warning, Severity::Warning);
    minor.changes = vec!["partitions: +orders-2".into()];
    minor.previous.as_mut().unwrap().state = Some(BrokerState::Degraded);
    assert_eq!(c.offer(0, group, minor, start + secs(2)), None);
    let mut up = updated(Severity::Warning, Severity::Warning, Severity::Critical);
    up.changes = vec!["severity: warning -> critical".into()];
    assert!(is_escalation(&up));
    let sent = c
        .offer(0, group, up, start + secs(3))
        .expect("an escalation is not held");
    assert_eq!(sent.incident.severity, Severity::Critical);
    assert_eq!(
        sent.changes,
        ["partitions: +orders-2", "severity: warning -> critical"]
    );
    assert_eq!(sent.previous.unwrap().state, Some(BrokerState::Degraded));
    assert_eq!(c.held_count(0), 0);
    assert!(c.due(start + secs(3600)).is_empty(), "nothing left to send");
    assert_eq!(c.take_tally(0).merged, 1);
    // Not an escalation: the same severity, or lower.
    assert!(!is_escalation(&updated(
        Severity::Critical,
        Severity::Critical,
        Severity::Warning
    )));
    assert!(!is_escalation(&minor_update("a", "b")));
}

#[test]
fn a_resolve_goes_at_once_and_drops_the_held_update() {
    let start = tokio::time::Instant::now();
    let group = Some(secs(30));
    let mut c = Coalescer::default();
    let i = incident("lab", Some(2), Severity::Critical);
    c.sent(0, &event(EventKind::Opened, i.clone()), start);
    c.sent(1, &event(EventKind::Opened, i.clone()), start);
    assert_eq!(
        c.offer(0, group, minor_update("a", "a"), start + secs(1)),
        None
    );
    assert_eq!(
        c.offer(0, group, minor_update("b", "b"), start + secs(2)),
        None
    );
    assert_eq!(
        c.offer(1, group, minor_update("a", "a"), start + secs(1)),
        None
    );
    let resolved = event(EventKind::Resolved, i.clone());
    let sent = c.offer(0, group, resolved.clone(), start + secs(3));
    assert_eq!(sent.map(|e| e.kind), Some(EventKind::Resolved));
    // Receiver 1 does not hear resolves (send_resolved: false): forgetting the incident
    // drops what it held as well.
    c.forget(&i.id);
    assert!(
        c.due(start + secs(3600)).is_empty(),
        "the update never follows the resolve"
    );
    assert_eq!(
        c.take_tally(0),
        Tally {
            merged: 0,
            superseded: 2
        }
    );
    assert_eq!(c.take_tally(1).superseded, 1);
    // Forgotten: a late update of it would not wait for anything.
    assert!(c
        .offer(0, group, minor_update("late", "late"), start + secs(4))
        .is_some());
}

#[test]
fn a_silence_drops_what_waited_for_the_incident() {
    let start = tokio::time::Instant::now();
    let mut c = Coalescer::default();
    let i = incident("lab", Some(2), Severity::Critical);
    c.sent(0, &event(EventKind::Opened, i.clone()), start);
    assert_eq!(
        c.offer(0, Some(secs(30)), minor_update("a", "a"), start),
        None
    );
    c.drop_held(0, &i.id);
    assert!(c.due(start + secs(30)).is_empty());
    assert_eq!(c.take_tally(0).superseded, 1);
}

#[test]
fn a_reminder_while_updates_wait_sends_the_updates_instead() {
    let start = tokio::time::Instant::now();
    let group = Some(secs(30));
    let mut c = Coalescer::default();
    let i = incident("lab", Some(2), Severity::Critical);
    c.sent(0, &event(EventKind::Opened, i.clone()), start);
    assert_eq!(
        c.offer(0, group, minor_update("a", "a"), start + secs(1)),
        None
    );
    let sent = c
        .offer(
            0,
            group,
            IncidentEvent::reminder(i.clone(), t(60)),
            start + secs(2),
        )
        .unwrap();
    assert_eq!(sent.kind, EventKind::Updated);
    assert_eq!(sent.changes, ["a"]);
    assert_eq!(c.held_count(0), 0);
    // Without held updates a reminder is a reminder.
    let plain = c
        .offer(0, group, IncidentEvent::reminder(i, t(60)), start + secs(3))
        .unwrap();
    assert_eq!(plain.kind, EventKind::Reminder);
}

#[test]
fn held_updates_restored_after_a_restart_go_at_the_first_look() {
    let start = tokio::time::Instant::now();
    let mut c = Coalescer::default();
    c.restore(
        0,
        vec![minor_update("a", "a"), minor_update("b", "b")],
        start,
    );
    assert_eq!(c.held_events(0).len(), 1, "one incident");
    let due = c.due(start);
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].1.changes, ["a", "b"]);
}

// ---- spool ----

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kw-notify-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn the_spool_keeps_order_and_sequence_across_reopen() {
    let dir = temp_dir("spool");
    let (s, waiting) = spool::Spool::open(&dir).unwrap();
    assert!(waiting.is_empty());
    let seqs: Vec<u64> = (0..3).map(|_| s.reserve()).collect();
    for (i, seq) in seqs.iter().enumerate() {
        s.write(*seq, &format!("entry {i}")).unwrap();
    }
    std::fs::write(dir.join(".00000000000000000099.json.tmp"), b"half").unwrap();
    s.remove(seqs[0]).unwrap();
    drop(s);
    let (s, waiting) = spool::Spool::open(&dir).unwrap();
    assert_eq!(waiting, seqs[1..].to_vec());
    assert_eq!(s.read::<String>(seqs[2]).unwrap(), "entry 2");
    assert!(s.reserve() > seqs[2]);
    assert!(
        !dir.join(".00000000000000000099.json.tmp").exists(),
        "torn write removed"
    );
    std::fs::write(dir.join(format!("{:020}.json", seqs[1])), b"{not json").unwrap();
    assert!(matches!(
        s.read::<String>(seqs[1]),
        Err(SpoolError::Corrupt { .. })
    ));
    assert_eq!(spool::dir_name(".."), "%2E%2E");
    assert_eq!(spool::dir_name("slack-ops"), "slack-ops");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- delivery against a live receiver ----

#[derive(Debug, Clone)]
struct Hit {
    status: u16,
    body: Bytes,
    headers: Vec<(String, String)>,
    at: tokio::time::Instant,
}

impl Hit {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

type Script = Arc<dyn Fn(usize) -> (u16, Option<&'static str>) + Send + Sync>;

/// An HTTP receiver that answers request n (from 0) as `script(n)` says.
struct TestReceiver {
    addr: SocketAddr,
    hits: Arc<Mutex<Vec<Hit>>>,
    /// Ticks after every request logged in `hits`, for waits without sleeping.
    logged: Arc<tokio::sync::watch::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl TestReceiver {
    async fn start(addr: SocketAddr, script: Script) -> Self {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let count = Arc::new(AtomicUsize::new(0));
        let log = hits.clone();
        let logged = Arc::new(tokio::sync::watch::Sender::new(()));
        let tick = logged.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (log, count, script) = (log.clone(), count.clone(), script.clone());
                let tick = tick.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req: HttpRequest<Incoming>| {
                        let (log, count, script) = (log.clone(), count.clone(), script.clone());
                        let tick = tick.clone();
                        async move {
                            let headers = req
                                .headers()
                                .iter()
                                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
                                .collect();
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let (status, retry_after) =
                                script(count.fetch_add(1, Ordering::SeqCst));
                            log.lock().unwrap().push(Hit {
                                status,
                                body,
                                headers,
                                at: tokio::time::Instant::now(),
                            });
                            tick.send_replace(());
                            let mut resp = Response::builder().status(status);
                            if let Some(r) = retry_after {
                                resp = resp.header("Retry-After", r);
                            }
                            Ok::<_, Infallible>(
                                resp.body(Full::new(Bytes::from_static(b"{\"why\":\"scripted\"}")))
                                    .unwrap(),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        TestReceiver {
            addr,
            hits,
            logged,
            task,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    fn delivered(&self) -> Vec<Value> {
        self.hits()
            .iter()
            .filter(|h| (200..300).contains(&h.status))
            .map(Hit::json)
            .collect()
    }

    /// What was delivered once `until` holds of it, checked after every request; after
    /// 10 s, whatever was delivered by then.
    async fn delivered_when(&self, until: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        // Subscribed before the first look, so no request in between goes unseen.
        let mut logged = self.logged.subscribe();
        let wait = async {
            loop {
                let got = self.delivered();
                if until(&got) || logged.changed().await.is_err() {
                    return got;
                }
            }
        };
        match tokio::time::timeout(Duration::from_secs(10), wait).await {
            Ok(got) => got,
            Err(_) => self.delivered(),
        }
    }

    async fn wait_delivered(&self, n: usize) -> Vec<Value> {
        self.delivered_when(|got| got.len() >= n).await
    }
}

impl Drop for TestReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn always(status: u16) -> Script {
    Arc::new(move |_| (status, None))
}

fn fast() -> DeliverySettings {
    DeliverySettings {
        backoff: Backoff {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(80),
            jitter: 0.2,
        },
        max_retry_after: Duration::from_secs(5),
        inbox_capacity: 64,
        max_queued: 1000,
        max_age: Duration::from_secs(3600),
        reminder_check: Duration::from_millis(10),
    }
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

fn brokers(bodies: &[Value]) -> Vec<i64> {
    bodies
        .iter()
        .map(|v| v["broker_id"].as_i64().unwrap())
        .collect()
}

fn sequences_grow(bodies: &[Value]) -> bool {
    bodies
        .windows(2)
        .all(|w| w[0]["sequence"].as_u64() < w[1]["sequence"].as_u64())
}

fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

#[tokio::test]
async fn failing_503s_are_retried_until_all_arrive_in_order() {
    let rx = TestReceiver::start(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(|n| (if n < 3 { 503 } else { 200 }, None)),
    )
    .await;
    let dir = temp_dir("503");
    let handle = Notifier::spawn_with(
        &[hook("ops", &rx.url(), WebhookFormat::Generic)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    handle.submit(events(4));
    let got = rx.wait_delivered(4).await;
    assert_eq!(brokers(&got), vec![1, 2, 3, 4]);
    assert!(sequences_grow(&got));
    let hits = rx.hits();
    assert_eq!(hits.len(), 7, "3 refusals of the first, then 4 deliveries");
    assert!(
        hits[..4].iter().all(|h| h.json()["broker_id"] == 1),
        "head of line waits: order before speed"
    );
    let stats = handle.shutdown(Duration::from_secs(1)).await;
    let s = &stats.receivers[0];
    assert_eq!((s.ok, s.failed, s.dropped, s.queue_depth), (4, 3, 0, 0));
    assert!(s.last_success.is_some());
    assert_eq!(s.last_failure.as_deref(), Some("HTTP 503"));
    assert_eq!(
        std::fs::read_dir(dir.join("spool/ops")).unwrap().count(),
        0,
        "spool emptied"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_429_is_retried_after_the_time_it_asks_for() {
    let rx = TestReceiver::start(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(|n| {
            if n == 0 {
                (429, Some("1"))
            } else {
                (200, None)
            }
        }),
    )
    .await;
    let dir = temp_dir("429");
    let handle = Notifier::spawn_with(
        &[hook("slack", &rx.url(), WebhookFormat::Slack)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    handle.submit(events(1));
    let got = rx.wait_delivered(1).await;
    assert_eq!(got.len(), 1);
    let hits = rx.hits();
    let waited = hits[1].at.duration_since(hits[0].at);
    assert!(
        waited >= Duration::from_millis(950),
        "honoured Retry-After: waited {waited:?}"
    );
    assert!(got[0]["text"].is_string(), "a Slack body");
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_receiver_down_then_up_gets_everything_in_order() {
    let addr = free_addr();
    let dir = temp_dir("down-up");
    let handle = Notifier::spawn_with(
        &[hook(
            "ops",
            &format!("http://{addr}/hook"),
            WebhookFormat::Generic,
        )],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    handle.submit(events(3));
    handle.submit(events(5).split_off(3));
    let during = handle
        .stats_when("three failed attempts with all five queued", |s| {
            s.receivers[0].failed >= 3 && s.receivers[0].queue_depth == 5
        })
        .await;
    assert_eq!(during.receivers[0].queue_depth, 5);
    assert!(during.receivers[0].failed >= 3, "{during:?}");
    assert_eq!(during.receivers[0].ok, 0);
    let rx = TestReceiver::start(addr, always(200)).await;
    let got = rx.wait_delivered(5).await;
    assert_eq!(brokers(&got), vec![1, 2, 3, 4, 5]);
    assert!(sequences_grow(&got));
    handle.shutdown(Duration::from_secs(1)).await;
    assert_eq!(rx.hits().len(), 5, "each once");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A worker or dispatcher that ended (aborted here, as a panic ends one) left its receiver
/// deaf with nothing said (issue 27 item 5). `revive` starts them again and counts it; what
/// was queued is delivered.
#[tokio::test]
async fn a_delivery_task_that_ended_is_started_again_and_delivers() {
    let addr = free_addr();
    let dir = temp_dir("revive");
    let handle = Notifier::spawn_with(
        &[hook(
            "revived",
            &format!("http://{addr}/hook"),
            WebhookFormat::Generic,
        )],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    {
        let mut tasks = lock(&handle.tasks);
        let t = tasks.as_mut().unwrap();
        t.workers[0].abort();
        t.dispatcher.abort();
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let restarts = |task: &str| {
        crate::model::task_restarts::snapshot()
            .into_iter()
            .filter(|(t, s, _)| *t == task && (s == "revived" || s.is_empty()))
            .map(|(_, _, n)| n)
            .sum::<u64>()
    };
    let (workers, dispatchers) = (restarts("webhook_worker"), restarts("webhook_dispatcher"));
    handle.submit(events(2));
    handle.revive();
    assert_eq!(restarts("webhook_worker"), workers + 1);
    assert!(restarts("webhook_dispatcher") > dispatchers);
    let rx = TestReceiver::start(addr, always(200)).await;
    let got = rx.wait_delivered(2).await;
    assert_eq!(brokers(&got), vec![1, 2]);
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 27 item 2: the incident book records events as told when it is saved, and the
/// events went to an in-memory inbox after that save, so a crash in between lost them for
/// good. `submit_durably` has them on disk when it returns: here delivery is stopped dead
/// (its tasks aborted, as `kill -9` would leave it) before it could route anything, and a
/// new start on the same folder delivers them.
#[tokio::test]
async fn events_submitted_durably_outlive_a_crash_before_they_are_routed() {
    let addr = free_addr();
    let dir = temp_dir("durable");
    let url = format!("http://{addr}/hook");
    let first = Notifier::spawn_with(
        &[hook("ops", &url, WebhookFormat::Generic)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    {
        let mut tasks = lock(&first.tasks);
        let t = tasks.as_mut().unwrap();
        t.dispatcher.abort();
        for w in &t.workers {
            w.abort();
        }
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    first.submit_durably(events(2));
    drop(first);

    let rx = TestReceiver::start(addr, always(200)).await;
    let second = Notifier::spawn_with(
        &[hook("ops", &url, WebhookFormat::Generic)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    let got = rx.wait_delivered(2).await;
    assert_eq!(brokers(&got), vec![1, 2]);
    second.shutdown(Duration::from_secs(1)).await;
    assert_eq!(
        std::fs::read_dir(dir.join("spool-inbox")).unwrap().count(),
        0,
        "an inbox file is removed once its events are spooled"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Where the inbox cannot be written either, durable submission still queues in memory and
/// delivers: a broken disk costs the crash guarantee, never the page.
#[tokio::test]
async fn events_submitted_durably_with_an_unwritable_inbox_are_still_delivered() {
    let addr = free_addr();
    let dir = temp_dir("durable-unwritable");
    let handle = Notifier::spawn_with(
        &[hook(
            "ops",
            &format!("http://{addr}/hook"),
            WebhookFormat::Generic,
        )],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    let inbox = dir.join("spool-inbox");
    std::fs::remove_dir_all(&inbox).unwrap();
    std::fs::write(&inbox, b"not a folder").unwrap();
    handle.submit_durably(events(3));
    let rx = TestReceiver::start(addr, always(200)).await;
    let got = rx.wait_delivered(3).await;
    assert_eq!(brokers(&got), vec![1, 2, 3]);
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A spool that cannot be written (disk full, read-only, out of descriptors) dropped every
/// notification for good while the incident counted as notified (issue 27 item 1). Now they
/// are kept in memory, sent from there, and counted. The spool folder is replaced by a file
/// here: every write in it fails, even as root.
#[tokio::test]
async fn a_spool_that_cannot_be_written_loses_no_notification() {
    let addr = free_addr();
    let dir = temp_dir("unwritable");
    let handle = Notifier::spawn_with(
        &[hook(
            "ops",
            &format!("http://{addr}/hook"),
            WebhookFormat::Generic,
        )],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    let spool = dir.join("spool").join("ops");
    std::fs::remove_dir_all(&spool).unwrap();
    std::fs::write(&spool, b"not a folder").unwrap();
    handle.submit(events(3));
    let stats = handle
        .stats_when("three kept in memory", |s| s.receivers[0].unspooled == 3)
        .await;
    assert_eq!(stats.receivers[0].dropped, 0, "{stats:?}");
    let rx = TestReceiver::start(addr, always(200)).await;
    let got = rx.wait_delivered(3).await;
    assert_eq!(brokers(&got), vec![1, 2, 3]);
    assert!(sequences_grow(&got));
    let stats = handle.shutdown(Duration::from_secs(1)).await;
    assert_eq!(stats.receivers[0].ok, 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_spool_survives_a_restart() {
    let addr = free_addr();
    let dir = temp_dir("restart");
    let url = format!("http://{addr}/hook");
    let first = Notifier::spawn_with(
        &[hook("ops", &url, WebhookFormat::Generic)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    first.submit(events(3));
    first
        .stats_when("the three queued and tried", |s| {
            s.receivers[0].queue_depth == 3 && s.receivers[0].failed >= 1
        })
        .await;
    let stats = first.shutdown(Duration::from_millis(100)).await;
    assert_eq!(stats.receivers[0].queue_depth, 3, "left in the spool");
    // Submitted after shutdown: kept on disk for the next start.
    first.submit(events(4).split_off(3));

    let rx = TestReceiver::start(addr, always(200)).await;
    let second = Notifier::spawn_with(
        &[hook("ops", &url, WebhookFormat::Generic)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    second.submit(events(5).split_off(4));
    let got = rx.wait_delivered(5).await;
    assert_eq!(brokers(&got), vec![1, 2, 3, 4, 5]);
    assert!(sequences_grow(&got));
    second.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 27 item 14: a receiver behind an internal CA needed `tls_verify: false`. With
/// `ca_file` its certificate is trusted: here the receiver is an HTTPS server whose
/// certificate the test CA signed (the watchdog's own server, which answers a POST to
/// /hook with an HTTP error: an answer, so the TLS session was made).
#[tokio::test]
async fn a_receiver_behind_an_internal_ca_is_trusted_with_ca_file() {
    const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/observe/wire/testdata");
    let listener = crate::serve::http::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let tls = crate::config::HttpTlsConfig {
        cert_file: format!("{TESTDATA}/server.pem").into(),
        key_file: format!("{TESTDATA}/server.key").into(),
    };
    let (_stop, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(crate::serve::http::serve_with(
        listener,
        crate::serve::snapshot::Publisher::new("rx", Vec::new()),
        stop_rx,
        crate::serve::http::ServeOptions {
            tls: Some(tokio_rustls::TlsAcceptor::from(
                tls.server_config().unwrap(),
            )),
            ..Default::default()
        },
    ));
    let url = format!("https://localhost:{port}/hook");
    for (ca_file, answered) in [(None, false), (Some(format!("{TESTDATA}/ca.pem")), true)] {
        let dir = temp_dir(if answered { "ca-file" } else { "no-ca-file" });
        let mut cfg = hook("internal", &url, WebhookFormat::Generic);
        cfg.ca_file = ca_file.map(Into::into);
        let handle = Notifier::spawn_with(&[cfg], &dir, "wd-1", fast()).unwrap();
        handle.submit(events(1));
        let stats = handle
            .stats_when("an attempt", |s| {
                s.receivers[0].failed + s.receivers[0].dropped >= 1
            })
            .await;
        let r = &stats.receivers[0];
        if answered {
            // The server answered (an HTTP error for a page it does not serve).
            assert_eq!((r.dropped, r.failed), (1, 0), "{r:?}");
            assert!(
                r.last_failure.as_deref().unwrap_or("").starts_with("HTTP "),
                "{r:?}"
            );
        } else {
            assert_eq!(r.dropped, 0, "not trusted: no answer, {r:?}");
            assert!(r.failed >= 1, "{r:?}");
        }
        handle.shutdown(Duration::from_millis(100)).await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[tokio::test]
async fn a_400_is_dropped_and_counted_and_the_next_goes_on() {
    let rx = TestReceiver::start(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(|n| (if n == 0 { 400 } else { 202 }, None)),
    )
    .await;
    let dir = temp_dir("400");
    let handle = Notifier::spawn_with(
        &[hook("pd", &rx.url(), WebhookFormat::PagerDuty)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    handle.submit(events(2));
    let got = rx.wait_delivered(1).await;
    assert_eq!(got[0]["payload"]["component"], "broker-2");
    let stats = handle.shutdown(Duration::from_secs(1)).await;
    let s = &stats.receivers[0];
    assert_eq!((s.ok, s.failed, s.dropped, s.queue_depth), (1, 0, 1, 0));
    assert_eq!(
        s.last_failure.as_deref(),
        Some("HTTP 400: {\"why\":\"scripted\"}")
    );
    assert_eq!(
        rx.hits().len(),
        2,
        "a refused notification is not sent again"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_received_signature_verifies_and_configured_headers_are_sent() {
    let rx = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("hmac");
    let mut cfg = hook("signed", &rx.url(), WebhookFormat::Generic);
    cfg.hmac_secret = Some(Secret::new("topsecret"));
    cfg.headers.insert("X-Scope-OrgID".into(), "kafka".into());
    // The signature is the watchdog's to set.
    cfg.headers.insert(SIGNATURE_HEADER.into(), "forged".into());
    let handle = Notifier::spawn_with(&[cfg], &dir, "wd-1", fast()).unwrap();
    handle.submit(events(1));
    rx.wait_delivered(1).await;
    let hit = rx.hits().remove(0);
    let header = |name: &str| {
        hit.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(header("x-scope-orgid"), vec!["kafka".to_string()]);
    assert_eq!(header("content-type"), vec!["application/json".to_string()]);
    let sig = header(SIGNATURE_HEADER);
    assert_eq!(sig.len(), 1);
    assert_eq!(sig[0], signature(b"topsecret", &hit.body));
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn each_receiver_gets_what_its_filters_admit() {
    let rx_all = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let rx_crit = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("filters");
    let all = hook("all", &rx_all.url(), WebhookFormat::Generic);
    let mut crit = hook("crit", &rx_crit.url(), WebhookFormat::Generic);
    crit.min_severity = Severity::Critical;
    crit.clusters = vec!["lab".into()];
    let handle = Notifier::spawn_with(&[all, crit], &dir, "wd-1", fast()).unwrap();
    handle.submit(vec![
        event(
            EventKind::Opened,
            incident("lab", Some(1), Severity::Warning),
        ),
        event(
            EventKind::Opened,
            incident("other", Some(2), Severity::Critical),
        ),
        updated(Severity::Warning, Severity::Warning, Severity::Critical),
        event(
            EventKind::Resolved,
            incident("lab", Some(3), Severity::Warning),
        ),
    ]);
    let got_all = rx_all.wait_delivered(4).await;
    let events_all: Vec<&str> = got_all
        .iter()
        .map(|v| v["event"].as_str().unwrap())
        .collect();
    assert_eq!(events_all, vec!["opened", "opened", "updated", "resolved"]);
    // A last event both admit: routed after the others and sent in order, so once it
    // arrives everything before it has been sent or filtered out.
    handle.submit(vec![event(
        EventKind::Opened,
        incident("lab", Some(9), Severity::Critical),
    )]);
    let got_crit = rx_crit
        .delivered_when(|got| got.iter().any(|v| v["broker_id"] == 9))
        .await;
    assert_eq!(got_crit.len(), 2, "{got_crit:?}");
    assert_eq!(got_crit[1]["broker_id"], 9);
    assert_eq!(
        got_crit[0]["event"], "opened",
        "first heard of when it became critical"
    );
    assert_eq!(got_crit[0]["broker_id"], 2);
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn reminders_repeat_while_open_and_stop_when_resolved() {
    let rx = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("reminders");
    let mut cfg = hook("am", &rx.url(), WebhookFormat::Generic);
    cfg.repeat_interval = Some(Duration::from_millis(60));
    let handle = Notifier::spawn_with(&[cfg], &dir, "wd-1", fast()).unwrap();
    let i = incident("lab", Some(1), Severity::Critical);
    handle.submit(vec![event(EventKind::Opened, i.clone())]);
    let got = rx.wait_delivered(3).await;
    assert_eq!(got[0]["event"], "opened");
    assert!(got[1..].iter().all(|v| v["event"] == "reminder"), "{got:?}");
    assert_eq!(handle.stats().open_incidents, 1);
    handle.submit(vec![event(EventKind::Resolved, i)]);
    let got = rx
        .delivered_when(|got| got.iter().any(|v| v["event"] == "resolved"))
        .await;
    let resolved_at = got.iter().position(|v| v["event"] == "resolved").unwrap();
    assert_eq!(handle.stats().open_incidents, 0);
    // Another incident opened after the resolve: its first reminder is due no earlier than
    // the resolved one's next, and reminders go out in the order they fall due, so once it
    // arrives the resolved incident has had its chance to be reminded of.
    handle.submit(vec![event(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    )]);
    let got = rx
        .delivered_when(|got| {
            got.iter()
                .any(|v| v["event"] == "reminder" && v["broker_id"] == 2)
        })
        .await;
    assert!(
        got.iter()
            .any(|v| v["event"] == "reminder" && v["broker_id"] == 2),
        "the other incident is reminded of: {got:?}"
    );
    assert!(
        got[resolved_at..]
            .iter()
            .all(|v| v["broker_id"] != 1 || v["event"] == "resolved"),
        "no reminder after the resolve: {got:?}"
    );
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_receiver_hears_updates_within_its_group_interval_as_one_message() {
    let rx = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("group");
    let mut cfg = hook("grouped", &rx.url(), WebhookFormat::Generic);
    let group = Duration::from_millis(300);
    cfg.group_interval = Some(group);
    let handle = Notifier::spawn_with(&[cfg], &dir, "wd-1", fast()).unwrap();
    let i = incident("lab", Some(2), Severity::Critical);
    handle.submit(vec![event(EventKind::Opened, i.clone())]);
    rx.wait_delivered(1).await;
    handle.submit(vec![minor_update("rules: +slow_answers", "first")]);
    handle.submit(vec![minor_update("partitions: +orders-2", "second")]);
    handle.submit(vec![minor_update("rules: +slow_answers", "third")]);
    let got = rx.wait_delivered(2).await;
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[1]["event"], "updated");
    assert_eq!(got[1]["evidence"], serde_json::json!(["third"]));
    assert_eq!(
        got[1]["changes"],
        serde_json::json!(["rules: +slow_answers", "partitions: +orders-2"])
    );
    let hits = rx.hits();
    let waited = hits[1].at.duration_since(hits[0].at);
    assert!(
        waited >= group - Duration::from_millis(50),
        "held for the group interval: {waited:?}"
    );
    let stats = handle
        .stats_when("the three updates merged", |s| s.receivers[0].merged == 3)
        .await;
    assert_eq!(
        (stats.receivers[0].held, stats.receivers[0].superseded),
        (0, 0)
    );
    // The resolve does not wait.
    handle.submit(vec![event(EventKind::Resolved, i)]);
    let got = rx.wait_delivered(3).await;
    assert_eq!(got[2]["event"], "resolved");
    handle.shutdown(Duration::from_secs(1)).await;
    assert_eq!(rx.hits().len(), 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_resolve_drops_held_updates_and_held_updates_survive_a_restart() {
    let rx = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("held");
    let mut cfg = hook("grouped", &rx.url(), WebhookFormat::Generic);
    cfg.group_interval = Some(Duration::from_secs(3600));
    let held_file = dir.join("spool/grouped/held.json");
    let handle = Notifier::spawn_with(std::slice::from_ref(&cfg), &dir, "wd-1", fast()).unwrap();
    let i = incident("lab", Some(2), Severity::Critical);
    handle.submit(vec![event(EventKind::Opened, i.clone())]);
    rx.wait_delivered(1).await;
    handle.submit(vec![minor_update("partitions: +orders-2", "x")]);
    handle
        .stats_when("the update held", |s| s.receivers[0].held == 1)
        .await;
    assert!(held_file.exists(), "held updates are kept on disk");
    handle.submit(vec![event(EventKind::Resolved, i)]);
    let got = rx.wait_delivered(2).await;
    assert_eq!(got[1]["event"], "resolved");
    let stats = handle
        .stats_when("the held update superseded", |s| {
            s.receivers[0].superseded == 1
        })
        .await;
    assert_eq!(stats.receivers[0].held, 0);
    assert!(!held_file.exists(), "nothing held, no file");

    // A silence that begins while an update waits: the update does not go under it.
    let k = incident("lab", Some(4), Severity::Critical);
    handle.submit(vec![event(EventKind::Opened, k.clone())]);
    rx.wait_delivered(3).await;
    let mut waiting = event(EventKind::Updated, k.clone());
    waiting.previous = Some(Previous {
        severity: Severity::Critical,
        peak_severity: Severity::Critical,
        state: None,
        notified_peak: Some(Severity::Critical),
    });
    waiting.changes = vec!["partitions: +orders-3".into()];
    let mut silenced = waiting.clone();
    silenced.incident.silenced = Some(crate::model::silence::SilenceMark {
        id: "s-1".into(),
        ends_at: t(3600),
        comment: "maintenance".into(),
    });
    silenced.changes = vec!["silenced by s-1".into()];
    handle.submit(vec![waiting]);
    handle
        .stats_when("the update held", |s| s.receivers[0].held == 1)
        .await;
    handle.submit(vec![silenced]);
    handle
        .stats_when("dropped by the silence", |s| {
            s.receivers[0].superseded == 2 && s.receivers[0].held == 0
        })
        .await;
    assert_eq!(rx.hits().len(), 3);

    // Another incident: its update is held when delivery stops, and goes at once after
    // the restart (when its last message went is not known any more).
    let j = incident("lab", Some(3), Severity::Critical);
    handle.submit(vec![event(EventKind::Opened, j.clone())]);
    rx.wait_delivered(4).await;
    let mut u = event(EventKind::Updated, j.clone());
    u.previous = Some(Previous {
        severity: Severity::Critical,
        peak_severity: Severity::Critical,
        state: None,
        notified_peak: Some(Severity::Critical),
    });
    u.changes = vec!["suspects: +1".into()];
    handle.submit(vec![u]);
    handle
        .stats_when("the second update held", |s| s.receivers[0].held == 1)
        .await;
    handle.shutdown(Duration::from_secs(1)).await;
    assert!(held_file.exists());
    assert_eq!(rx.hits().len(), 4, "held, not sent");
    let second = Notifier::spawn_with(&[cfg], &dir, "wd-1", fast()).unwrap();
    let got = rx.wait_delivered(5).await;
    assert_eq!(got.len(), 5, "{got:?}");
    assert_eq!(got[4]["event"], "updated");
    assert_eq!(got[4]["broker_id"], 3);
    assert_eq!(got[4]["changes"], serde_json::json!(["suspects: +1"]));
    second
        .stats_when("the held file emptied", |s| s.receivers[0].merged == 1)
        .await;
    second.shutdown(Duration::from_secs(1)).await;
    assert!(!held_file.exists());
    assert_eq!(rx.hits().len(), 5, "once");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_full_inbox_spills_to_disk_and_keeps_order() {
    let addr = free_addr();
    let dir = temp_dir("spill");
    let mut settings = fast();
    settings.inbox_capacity = 2;
    let handle = Notifier::spawn_with(
        &[hook(
            "ops",
            &format!("http://{addr}/hook"),
            WebhookFormat::Generic,
        )],
        &dir,
        "wd-1",
        settings,
    )
    .unwrap();
    for e in events(30) {
        handle.submit(vec![e]);
    }
    let rx = TestReceiver::start(addr, always(200)).await;
    let got = rx.wait_delivered(30).await;
    assert_eq!(brokers(&got), (1..=30).collect::<Vec<i64>>());
    let stats = handle.shutdown(Duration::from_secs(1)).await;
    assert_eq!(stats.unrouted_events, 0);
    assert_eq!(
        std::fs::read_dir(dir.join("spool-inbox")).unwrap().count(),
        0
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn shutdown_flushes_what_it_can() {
    let rx = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(200)).await;
    let dir = temp_dir("flush");
    let handle = Notifier::spawn_with(
        &[hook("ops", &rx.url(), WebhookFormat::Teams)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    handle.submit(events(10));
    let stats = handle.shutdown(Duration::from_secs(5)).await;
    assert_eq!(stats.receivers[0].ok, 10);
    assert_eq!(stats.receivers[0].queue_depth, 0);
    assert_eq!(rx.delivered().len(), 10);
    assert_eq!(rx.delivered()[0]["type"], "message");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn shutdown_gives_up_at_its_deadline() {
    let rx = TestReceiver::start("127.0.0.1:0".parse().unwrap(), always(503)).await;
    let dir = temp_dir("deadline");
    let handle = Notifier::spawn_with(
        &[hook("ops", &rx.url(), WebhookFormat::Generic)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    handle.submit(events(2));
    let started = std::time::Instant::now();
    let stats = handle.shutdown(Duration::from_millis(200)).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(stats.receivers[0].queue_depth, 2);
    assert_eq!(std::fs::read_dir(dir.join("spool/ops")).unwrap().count(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_lab_sink_receives_generic_notifications() {
    let sink = kafka_lab::sink::Sink::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = temp_dir("sink");
    let handle = Notifier::spawn_with(
        &[hook("sink", &sink.url(), WebhookFormat::Generic)],
        &dir,
        "wd-1",
        fast(),
    )
    .unwrap();
    handle.submit(events(2));
    let got = sink.wait_for(2, Duration::from_secs(10)).await;
    assert_eq!(brokers(&got), vec![1, 2]);
    assert_eq!(got[0]["schema_version"], 1);
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- Slack's Web API (bot token) ----

mod slack_web_api {
    use super::*;
    use crate::alert::notify::slack_bot::api::{self, Answer, Plan};
    use crate::alert::notify::slack_bot::threads::{Thread, Threads, MAX_THREADS};
    use crate::config::SlackBot;
    use kafka_watchdog_test_support::fake_slack::{FakeSlack, Scripted, CHANNEL_ID};

    const TOKEN: &str = "xoxb-test-token";

    fn thread(ts: &str) -> Thread {
        Thread {
            channel: "C0OPS".into(),
            ts: ts.into(),
            dedup_key: "kafka-watchdog/lab/broker-2/broker".into(),
        }
    }

    fn store(name: &str) -> (PathBuf, Threads) {
        let dir = temp_dir(name);
        let path = dir.join("slack/bot.json");
        let t = Threads::load(&path);
        (dir, t)
    }

    #[test]
    fn the_first_message_shows_the_state_and_asks_for_no_previews() {
        let n = note(
            EventKind::Opened,
            incident("lab", Some(2), Severity::Critical),
        );
        let v = api::post_body("#kafka-ops", &n, &ctx());
        assert_eq!(v["channel"], "#kafka-ops");
        assert_eq!(v["unfurl_links"], false);
        let text = v["text"].as_str().unwrap();
        assert!(text.starts_with("[CRITICAL] lab broker: open: "), "{text}");
        assert!(v["blocks"].as_array().unwrap().len() >= 3);
        assert!(v.get("ts").is_none() && v.get("thread_ts").is_none());
    }

    #[test]
    fn an_edit_names_the_kept_message_and_turns_green_when_resolved() {
        let n = note(
            EventKind::Resolved,
            incident("lab", Some(2), Severity::Critical),
        );
        let v = api::update_body(&thread("1700000000.000042"), &n, &ctx());
        assert_eq!(v["channel"], "C0OPS");
        assert_eq!(v["ts"], "1700000000.000042");
        assert!(
            v["text"]
                .as_str()
                .unwrap()
                .starts_with("[CRITICAL] lab broker: resolved after 4m 10s"),
            "{v}"
        );
        let head = v["blocks"][0]["text"]["text"].as_str().unwrap();
        assert!(head.starts_with(":large_green_circle:"), "{head}");
    }

    #[test]
    fn a_thread_reply_says_what_changed() {
        let mut n = note(
            EventKind::Updated,
            incident("lab", Some(2), Severity::Critical),
        );
        n.event.changes = vec![
            "rules: +slow<answers>".into(),
            "partitions: +orders-2".into(),
        ];
        let v = api::reply_body(&thread("1.000001"), &n, &ctx());
        assert_eq!(v["thread_ts"], "1.000001");
        assert_eq!(v["channel"], "C0OPS");
        assert!(v.get("reply_broadcast").is_none());
        assert_eq!(
            v["text"],
            ":red_circle: *Updated* (critical)\n• rules: +slow&lt;answers&gt;\n• partitions: +orders-2"
        );
        let text = |kind| {
            api::reply_text(
                &note(kind, incident("lab", Some(2), Severity::Critical)),
                t(300),
            )
        };
        assert_eq!(
            text(EventKind::Resolved),
            ":large_green_circle: *Resolved* after 4m 10s"
        );
        assert_eq!(
            text(EventKind::Reminder),
            ":red_circle: *Still open* after 5m 00s"
        );
        let mut acted = note(
            EventKind::Acted,
            incident("lab", Some(2), Severity::Critical),
        );
        acted.event.incident.kind = FindingKind::Remediation;
        let v = api::reply_body(&thread("1.000001"), &acted, &ctx());
        assert_eq!(
            v["reply_broadcast"], true,
            "what remediation did goes to the channel too"
        );
        assert!(v["text"].as_str().unwrap().contains("command run"), "{v}");
    }

    #[test]
    fn plans_post_first_then_edit_and_reply_and_forget_at_the_resolve() {
        let (dir, mut threads) = store("plans");
        let i = incident("lab", Some(2), Severity::Critical);
        let n = |kind| note(kind, i.clone());
        assert_eq!(
            api::plan(&n(EventKind::Opened), &threads),
            Plan::Post { keep: true }
        );
        assert_eq!(
            api::plan(&n(EventKind::Updated), &threads),
            Plan::Post { keep: true },
            "no message yet: one of its own, kept"
        );
        assert_eq!(
            api::plan(&n(EventKind::Resolved), &threads),
            Plan::Post { keep: false }
        );
        threads.keep(&i.id, thread("5.000001"));
        let edit = |reply, forget| Plan::Edit {
            thread: thread("5.000001"),
            reply,
            forget,
        };
        assert_eq!(
            api::plan(&n(EventKind::Updated), &threads),
            edit(true, false)
        );
        assert_eq!(
            api::plan(&n(EventKind::Reminder), &threads),
            edit(true, false)
        );
        assert_eq!(
            api::plan(&n(EventKind::Resolved), &threads),
            edit(true, true)
        );
        assert_eq!(
            api::plan(&n(EventKind::Opened), &threads),
            edit(false, false),
            "an open sent again edits, it does not post twice"
        );
        // A remediation replies in its broker's thread, found by the dedup key.
        let mut acted = incident("lab", Some(2), Severity::Critical);
        acted.id = "kw-remediation".into();
        acted.kind = FindingKind::Remediation;
        acted.dedup_key = "kafka-watchdog/lab/broker-2/remediation".into();
        assert_eq!(
            api::plan(&note(EventKind::Acted, acted.clone()), &threads),
            Plan::Reply {
                thread: thread("5.000001")
            }
        );
        acted.broker = Some(3);
        acted.subject = Subject::Broker(3);
        assert_eq!(
            api::plan(&note(EventKind::Acted, acted), &threads),
            Plan::Post { keep: false }
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn slack_answers_are_judged_by_their_body() {
        let cap = Duration::from_secs(900);
        let j = |method, status, ra, body: &str| {
            api::judge(method, status, ra, body.as_bytes(), t(0), cap)
        };
        assert_eq!(
            j(
                api::POST_MESSAGE,
                200,
                None,
                r#"{"ok":true,"channel":"C1","ts":"1.2"}"#
            ),
            Answer::Ok {
                channel: "C1".into(),
                ts: "1.2".into()
            }
        );
        assert_eq!(
            j(
                api::POST_MESSAGE,
                200,
                Some("12"),
                r#"{"ok":false,"error":"ratelimited"}"#
            ),
            Answer::Retry {
                after: Some(Duration::from_secs(12)),
                why: "chat.postMessage: ratelimited".into()
            }
        );
        assert!(matches!(
            j(api::UPDATE, 429, Some("3"), ""),
            Answer::Retry { after: Some(d), .. } if d == Duration::from_secs(3)
        ));
        assert!(matches!(
            j(api::UPDATE, 503, None, ""),
            Answer::Retry { after: None, .. }
        ));
        assert!(matches!(
            j(
                api::UPDATE,
                200,
                None,
                r#"{"ok":false,"error":"internal_error"}"#
            ),
            Answer::Retry { .. }
        ));
        assert_eq!(
            j(
                api::UPDATE,
                200,
                None,
                r#"{"ok":false,"error":"message_not_found"}"#
            ),
            Answer::Gone {
                why: "chat.update: message_not_found".into()
            }
        );
        assert_eq!(
            j(
                api::POST_MESSAGE,
                200,
                None,
                r#"{"ok":false,"error":"message_not_found"}"#
            ),
            Answer::Refused {
                why: "chat.postMessage: message_not_found".into()
            },
            "only an edit can find its message gone"
        );
        assert_eq!(
            j(
                api::POST_MESSAGE,
                200,
                None,
                r#"{"ok":false,"error":"invalid_auth"}"#
            ),
            Answer::Refused {
                why: "chat.postMessage: invalid_auth".into()
            }
        );
        assert!(matches!(
            j(api::POST_MESSAGE, 404, None, "nope"),
            Answer::Refused { .. }
        ));
        assert!(matches!(
            j(api::POST_MESSAGE, 200, None, "<html>proxy</html>"),
            Answer::Refused { why } if why.contains("without a JSON answer")
        ));
        assert!(matches!(
            j(api::POST_MESSAGE, 200, None, r#"{"ok":true}"#),
            Answer::Refused { .. }
        ));
    }

    #[test]
    fn kept_messages_survive_a_reload_and_stay_bounded() {
        let (dir, mut threads) = store("threads");
        threads.keep("kw-a", thread("10.000001"));
        threads::save(threads.path(), &threads.bytes()).unwrap();
        let again = Threads::load(threads.path());
        assert_eq!(again.get("kw-a"), Some(&thread("10.000001")));
        assert_eq!(
            again
                .by_dedup_key("kafka-watchdog/lab/broker-2/broker")
                .map(|t| t.ts.as_str()),
            Some("10.000001")
        );
        assert!(threads.forget("kw-a"));
        assert!(!threads.forget("kw-a"), "nothing to save");
        for k in 0..=MAX_THREADS {
            threads.keep(&format!("kw-{k}"), thread(&format!("{}.000001", 100 + k)));
        }
        assert_eq!(threads.len(), MAX_THREADS);
        assert!(
            threads.get("kw-0").is_none(),
            "the oldest message forgotten"
        );
        assert!(threads.get(&format!("kw-{MAX_THREADS}")).is_some());
        std::fs::write(threads.path(), b"{broken").unwrap();
        assert_eq!(
            Threads::load(threads.path()).len(),
            0,
            "a corrupt file is set aside"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    use crate::alert::notify::slack_bot::threads;

    fn bot_hook(fake: &FakeSlack) -> WebhookConfig {
        let mut h = hook("bot", &fake.base_url(), WebhookFormat::Slack);
        h.slack_bot = Some(SlackBot {
            token: Secret::new(TOKEN),
            channel: "#kafka-ops".into(),
        });
        h
    }

    async fn fake() -> FakeSlack {
        FakeSlack::start("127.0.0.1:0".parse().unwrap(), TOKEN)
            .await
            .unwrap()
    }

    async fn calls(
        fake: &FakeSlack,
        n: usize,
    ) -> Vec<kafka_watchdog_test_support::fake_slack::Call> {
        fake.calls_when(Duration::from_secs(10), |c| c.len() >= n)
            .await
            .unwrap_or_else(|| panic!("{n} calls: {:#?}", fake.calls()))
    }

    fn kept(dir: &std::path::Path) -> Value {
        serde_json::from_slice(&std::fs::read(dir.join("slack/bot.json")).unwrap()).unwrap()
    }

    fn minor(i: &Incident, change: &str) -> IncidentEvent {
        let mut e = event(EventKind::Updated, i.clone());
        e.previous = Some(Previous {
            severity: i.severity,
            peak_severity: i.severity,
            state: i.state,
            notified_peak: Some(i.severity),
        });
        e.changes = vec![change.into()];
        e
    }

    #[tokio::test]
    async fn an_incident_is_one_message_edited_in_place_with_its_changes_in_the_thread() {
        let fake = fake().await;
        let dir = temp_dir("slack-bot");
        let handle = Notifier::spawn_with(&[bot_hook(&fake)], &dir, "wd-1", fast()).unwrap();
        let i = incident("lab", Some(2), Severity::Critical);
        handle.submit(vec![event(EventKind::Opened, i.clone())]);
        let c = calls(&fake, 1).await;
        assert_eq!(c[0].method, "chat.postMessage");
        assert_eq!(c[0].path, "/api/chat.postMessage");
        assert_eq!(
            c[0].authorization.as_deref(),
            Some("Bearer xoxb-test-token")
        );
        assert_eq!(
            c[0].content_type.as_deref(),
            Some("application/json; charset=utf-8")
        );
        assert_eq!(c[0].body["channel"], "#kafka-ops");
        let ts = c[0].answer["ts"].as_str().unwrap().to_string();
        handle
            .stats_when("the open delivered", |s| s.receivers[0].ok == 1)
            .await;
        assert_eq!(kept(&dir)["threads"][&i.id]["ts"], ts.as_str());
        assert_eq!(kept(&dir)["threads"][&i.id]["channel"], CHANNEL_ID);

        handle.submit(vec![minor(&i, "partitions: +orders-2")]);
        let c = calls(&fake, 3).await;
        assert_eq!(c[1].method, "chat.update");
        assert_eq!(c[1].body["ts"], ts.as_str(), "the first message is edited");
        assert_eq!(
            c[1].body["channel"], CHANNEL_ID,
            "in the channel Slack named"
        );
        assert_eq!(c[2].method, "chat.postMessage");
        assert_eq!(c[2].body["thread_ts"], ts.as_str());
        assert!(c[2].body["text"]
            .as_str()
            .unwrap()
            .contains("partitions: +orders-2"));

        handle.submit(vec![event(EventKind::Resolved, i.clone())]);
        let c = calls(&fake, 5).await;
        assert_eq!(c[3].method, "chat.update");
        assert_eq!(c[3].body["ts"], ts.as_str());
        assert!(c[3].body["text"]
            .as_str()
            .unwrap()
            .contains("resolved after"));
        assert_eq!(c[4].body["thread_ts"], ts.as_str());
        let stats = handle
            .stats_when("three delivered", |s| s.receivers[0].ok == 3)
            .await;
        assert_eq!(stats.receivers[0].dropped, 0);
        assert!(
            kept(&dir)["threads"].as_object().unwrap().is_empty(),
            "the resolved incident's message is forgotten"
        );
        assert_eq!(fake.messages().len(), 1, "one message in the channel");
        assert_eq!(fake.messages()[0].replies.len(), 2);
        handle.shutdown(Duration::from_secs(1)).await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn after_a_restart_the_resolve_edits_the_first_message() {
        let fake = fake().await;
        let dir = temp_dir("slack-restart");
        let first = Notifier::spawn_with(&[bot_hook(&fake)], &dir, "wd-1", fast()).unwrap();
        let i = incident("lab", Some(2), Severity::Critical);
        first.submit(vec![event(EventKind::Opened, i.clone())]);
        first
            .stats_when("the open delivered", |s| s.receivers[0].ok == 1)
            .await;
        first.shutdown(Duration::from_secs(1)).await;
        let ts = fake.calls()[0].answer["ts"].as_str().unwrap().to_string();

        let second = Notifier::spawn_with(&[bot_hook(&fake)], &dir, "wd-1", fast()).unwrap();
        second.submit(vec![event(EventKind::Resolved, i)]);
        let c = calls(&fake, 3).await;
        assert_eq!(c[1].method, "chat.update");
        assert_eq!(c[1].body["ts"], ts.as_str());
        assert_eq!(c[1].answer["ok"], true);
        assert_eq!(c[2].body["thread_ts"], ts.as_str());
        second.shutdown(Duration::from_secs(1)).await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_message_gone_is_posted_anew_and_the_new_one_is_edited_from_then_on() {
        let fake = fake().await;
        let dir = temp_dir("slack-gone");
        let handle = Notifier::spawn_with(&[bot_hook(&fake)], &dir, "wd-1", fast()).unwrap();
        let i = incident("lab", Some(2), Severity::Critical);
        handle.submit(vec![event(EventKind::Opened, i.clone())]);
        calls(&fake, 1).await;
        fake.script("chat.update", vec![Scripted::Error("message_not_found")]);
        handle.submit(vec![minor(&i, "a")]);
        let c = calls(&fake, 3).await;
        assert_eq!(c[1].answer["error"], "message_not_found");
        assert_eq!(c[2].method, "chat.postMessage");
        assert!(c[2].body.get("thread_ts").is_none(), "a new top message");
        let new_ts = c[2].answer["ts"].as_str().unwrap().to_string();
        handle.submit(vec![minor(&i, "b")]);
        let c = calls(&fake, 5).await;
        assert_eq!(c[3].method, "chat.update");
        assert_eq!(c[3].body["ts"], new_ts.as_str());
        assert_eq!(c[4].body["thread_ts"], new_ts.as_str());
        let stats = handle.shutdown(Duration::from_secs(1)).await;
        assert_eq!((stats.receivers[0].ok, stats.receivers[0].dropped), (3, 0));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn rate_limits_are_retried_and_other_refusals_dropped_and_counted() {
        let fake = fake().await;
        let dir = temp_dir("slack-limits");
        let handle = Notifier::spawn_with(&[bot_hook(&fake)], &dir, "wd-1", fast()).unwrap();
        fake.script(
            "chat.postMessage",
            vec![
                Scripted::Status(429, Some("0")),
                Scripted::Error("ratelimited"),
                Scripted::Error("not_in_channel"),
            ],
        );
        handle.submit(events(2));
        let c = calls(&fake, 4).await;
        let answers: Vec<&Value> = c.iter().map(|c| &c.answer).collect();
        assert_eq!(answers[0]["status"], 429);
        assert_eq!(answers[1]["error"], "ratelimited");
        assert_eq!(answers[2]["error"], "not_in_channel");
        assert_eq!(answers[3]["ok"], true);
        assert_eq!(
            c[2].body["blocks"], c[0].body["blocks"],
            "retried, then refused: the same message"
        );
        let stats = handle
            .stats_when("one dropped, one delivered", |s| {
                s.receivers[0].ok == 1 && s.receivers[0].dropped == 1
            })
            .await;
        let r = &stats.receivers[0];
        assert_eq!(r.failed, 2);
        assert_eq!(
            r.last_failure.as_deref(),
            Some("chat.postMessage: not_in_channel")
        );
        assert_eq!(
            kept(&dir)["threads"].as_object().unwrap().len(),
            1,
            "only the delivered incident has a message"
        );
        handle.shutdown(Duration::from_secs(1)).await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}
