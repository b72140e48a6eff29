//! Each receiver's body against its service's documented fields: generic, Slack,
//! PagerDuty, Alertmanager, Teams.

use super::*;

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
        "runbook_url",
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
fn slack_without_a_status_or_runbooks_url_has_no_button() {
    let n = note(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    );
    let v = slack(
        &n,
        &Context {
            status_url: None,
            runbooks_url: None,
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

// ---- runbook links ----

/// Issue 39: a page said what broke but not where to read what to do. Every format links
/// the runbook of the incident's kind and state (`/runbooks#<alert>`, or the configured
/// `http.runbooks_url`) beside what it carried before: a field added, none renamed.
#[test]
fn every_format_links_the_runbook_of_the_incident() {
    let zombie = note(
        EventKind::Opened,
        incident("lab", Some(2), Severity::Critical),
    );
    let link = "https://watchdog.example:9644/runbooks#kafkabrokerzombie";
    assert_eq!(generic(&zombie, &ctx())["runbook_url"], link);
    let am = alertmanager(None, &zombie, &ctx());
    assert_eq!(am[0]["annotations"]["runbook_url"], link);
    let pd = pagerduty("R0UT1NGKEY", &zombie, &ctx());
    assert_eq!(pd["payload"]["custom_details"]["runbook_url"], link);
    assert!(
        pd["links"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["href"] == link && l["text"] == "runbook"),
        "{pd}"
    );
    let buttons: Vec<Value> = slack(&zombie, &ctx())["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().unwrap().clone())
        .collect();
    assert!(
        buttons
            .iter()
            .any(|b| b["url"] == link && b["text"]["text"] == "Runbook"),
        "{buttons:?}"
    );
    let card = &teams(&zombie, &ctx())["attachments"][0]["content"];
    assert_eq!(card["actions"][0]["type"], "Action.OpenUrl");
    assert_eq!(card["actions"][0]["url"], link);

    // Another kind, another section; a site of one's own; none known, no link.
    let offline = note(EventKind::Opened, incident("lab", None, Severity::Critical));
    let own = Context {
        runbooks_url: Some("https://wiki.example/kw/runbooks"),
        ..ctx()
    };
    assert_eq!(
        generic(&offline, &own)["runbook_url"],
        "https://wiki.example/kw/runbooks#kafkaofflinepartitions"
    );
    let none = Context {
        runbooks_url: None,
        ..ctx()
    };
    assert!(generic(&offline, &none)["runbook_url"].is_null());
    assert!(alertmanager(None, &offline, &none)[0]["annotations"]
        .get("runbook_url")
        .is_none());
}
