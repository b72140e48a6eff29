//! Request bodies, one pure function per receiver format: a notification in, a JSON body
//! and headers out. Time is a parameter, so every body can be checked in a unit test.

use std::time::{Duration, SystemTime};

use serde_json::{json, Map, Value};

use crate::alert::incident::{EventKind, Incident};
use crate::config::{Severity, WebhookConfig, WebhookFormat};
use crate::model::time::rfc3339;

use super::Notification;

/// Version of the generic body; a change that breaks receivers increments it.
pub const GENERIC_SCHEMA_VERSION: u32 = 1;
/// Header carrying the generic body's HMAC-SHA256 signature, as `sha256=<hex>`.
pub const SIGNATURE_HEADER: &str = "X-Kafka-Watchdog-Signature";
/// Events API v2 refuses longer summaries.
pub const PAGERDUTY_SUMMARY_MAX: usize = 1024;
/// How long Alertmanager shows a one-shot event (remediation acted, refused, dry run).
pub const ONE_SHOT_ALERT_LIFETIME: Duration = Duration::from_secs(900);

/// What a format needs besides the notification.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Names this watchdog (`instance_id` in the configuration).
    pub instance_id: &'a str,
    /// When the request is made; Alertmanager's `endsAt` and durations count from it.
    pub now: SystemTime,
    /// Where people read this watchdog's `/status` (`http.external_url`, or one made from
    /// `http.listen`): Alertmanager's `generatorURL`, PagerDuty's `client_url` and links.
    pub status_url: Option<&'a str>,
    /// The runbooks page as people reach them (`http.runbooks_url`, or this watchdog's
    /// `/runbooks`): the link to an incident's runbook is `<it>#<its alert, lower case>`.
    pub runbooks_url: Option<&'a str>,
}

/// One HTTP POST, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub body: Vec<u8>,
    /// Set after the receiver's configured headers, so they win over them.
    pub headers: Vec<(String, String)>,
}

/// The request for `n` in the receiver's format.
pub fn render(cfg: &WebhookConfig, n: &Notification, ctx: &Context) -> Request {
    let body = match cfg.format {
        WebhookFormat::Generic => generic(n, ctx),
        WebhookFormat::Slack => slack(n, ctx),
        WebhookFormat::PagerDuty => {
            pagerduty(cfg.routing_key.as_ref().map_or("", |k| k.expose()), n, ctx)
        }
        WebhookFormat::Alertmanager => alertmanager(cfg.repeat_interval, n, ctx),
        WebhookFormat::Teams => teams(n, ctx),
    };
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let mut headers = vec![("Content-Type".to_string(), "application/json".to_string())];
    if let (WebhookFormat::Generic, Some(secret)) = (cfg.format, &cfg.hmac_secret) {
        headers.push((
            SIGNATURE_HEADER.to_string(),
            signature(secret.expose().as_bytes(), &body),
        ));
    }
    Request { body, headers }
}

/// `sha256=<hex of HMAC-SHA256(secret, body)>`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let tag = ring::hmac::sign(&key, body);
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// The incident's runbook: the section of its alert (kind, and state for a node) on the
/// runbooks page; none when no page is known.
fn runbook_link(i: &Incident, ctx: &Context) -> Option<String> {
    let section = i.kind.runbook_section(i.state).to_lowercase();
    ctx.runbooks_url.map(|base| format!("{base}#{section}"))
}

fn duration_secs(i: &Incident, now: SystemTime) -> f64 {
    (i.duration(now).as_millis() as f64) / 1000.0
}

/// `1h 02m`, `4m 10s`, `12s`.
pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

pub(super) fn cut(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max_chars.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn subject_words(i: &Incident) -> String {
    if let crate::alert::incident::Subject::Controller(id) = i.subject {
        return match &i.broker_address {
            Some(a) => format!("controller {id} ({a})"),
            None => format!("controller {id}"),
        };
    }
    match (i.broker, &i.broker_address) {
        (Some(b), Some(a)) => format!("broker {b} ({a})"),
        (Some(b), None) => format!("broker {b}"),
        _ => "cluster".to_string(),
    }
}

/// The headline of a message: what happened to the incident.
pub(super) fn headline(n: &Notification, now: SystemTime) -> String {
    let i = &n.event.incident;
    let what = match n.event.kind {
        EventKind::Opened => "opened".to_string(),
        EventKind::Updated => format!("updated ({})", n.event.changes.join("; ")),
        EventKind::Resolved => format!("resolved after {}", human(i.duration(now))),
        EventKind::Reminder => format!("still open after {}", human(i.duration(now))),
        EventKind::Acted => "command run".to_string(),
        EventKind::Refused => "refused".to_string(),
        EventKind::DryRun => "dry run".to_string(),
    };
    format!(
        "[{}] {} {}: {what}",
        i.severity.as_str().to_uppercase(),
        i.cluster,
        i.kind.as_str().replace('_', " ")
    )
}

/// The generic body, schema version 1. Every field is always present (null when empty):
///
/// | field | type | meaning |
/// |---|---|---|
/// | `schema_version` | number | 1 |
/// | `event` | string | `opened`, `updated`, `resolved`, `reminder`; for kind `remediation`: `acted`, `refused`, `dry_run` |
/// | `notification_id` | string | `<instance_id>/<receiver>/<sequence>`: unique per notification |
/// | `sequence` | number | grows with every notification to this receiver, also across restarts |
/// | `incident_id` | string | unique per incident (a problem that comes back gets a new one) |
/// | `dedup_key` | string | `kafka-watchdog/<cluster>/<subject>/<kind>`, the same on every watchdog |
/// | `kind` | string | `broker`, `offline_partitions`, `under_min_isr`, `under_replicated`, `split_brain`, `cluster_unreachable`, `acknowledged_loss`, `acks1_loss`, `canary_unavailable`, `unclean_election`, `remediation`, `watchdog_access`, `controller`, `quorum` |
/// | `cluster` | string | the cluster's configured name |
/// | `labels` | object | the cluster's static labels (`clusters[].labels`), `{}` when none |
/// | `broker_id`, `broker_address` | number, string or null | for broker incidents |
/// | `state` | string or null | the broker's verdict: `degraded`, `zombie`, `down`, `unknown` |
/// | `severity` | string | `info`, `warning`, `critical` |
/// | `summary` | string | one line |
/// | `evidence` | array of strings | verdict rules as `rule: detail`, or partition lines |
/// | `affected_partitions` | array of strings | `topic-partition`, at most 100 |
/// | `affected_partitions_total` | number | all affected partitions |
/// | `suspects` | array of numbers | broker ids to look at |
/// | `changes` | array of strings | for `updated`: what changed |
/// | `started_at`, `updated_at`, `resolved_at` | RFC 3339 string or null | |
/// | `duration_seconds` | number | so far, or in all once resolved |
/// | `unavailable_seconds` | number or null | time the canary could not use the partitions |
/// | `sent_at` | RFC 3339 string | when this request was made |
/// | `instance_id`, `watchdog_version` | string | who sends |
/// | `runbook_url` | string or null | what to do: the runbook of this kind of incident (`http.runbooks_url`) |
///
/// Delivery is at least once: a receiver may see one notification twice (same
/// `notification_id`) and should ignore the second.
pub fn generic(n: &Notification, ctx: &Context) -> Value {
    let i = &n.event.incident;
    json!({
        "schema_version": GENERIC_SCHEMA_VERSION,
        "event": n.event.kind.as_str(),
        "notification_id": format!("{}/{}/{}", ctx.instance_id, n.receiver, n.sequence),
        "sequence": n.sequence,
        "incident_id": i.id,
        "dedup_key": i.dedup_key,
        "kind": i.kind.as_str(),
        "cluster": i.cluster,
        "labels": i.labels,
        "broker_id": i.broker,
        "broker_address": i.broker_address,
        "state": i.state.map(|s| s.as_label()),
        "severity": i.severity.as_str(),
        "summary": i.summary,
        "evidence": i.evidence,
        "affected_partitions": i.affected_partitions,
        "affected_partitions_total": i.affected_partitions_total,
        "suspects": i.suspects,
        "changes": n.event.changes,
        "started_at": rfc3339(i.started_at),
        "updated_at": rfc3339(i.updated_at),
        "resolved_at": i.resolved_at.map(rfc3339),
        "duration_seconds": duration_secs(i, ctx.now),
        "unavailable_seconds": i.unavailable_seconds,
        "sent_at": rfc3339(ctx.now),
        "instance_id": ctx.instance_id,
        "watchdog_version": env!("CARGO_PKG_VERSION"),
        "runbook_url": runbook_link(i, ctx),
    })
}

/// Slack's mrkdwn treats these three as control characters.
pub(super) fn slack_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Slack's blocks have no colour bar of their own (that lives in legacy attachments, which
/// Slack may collapse or hide), so severity shows as an emoji at the start of the headline.
pub(super) fn slack_marker(n: &Notification) -> &'static str {
    if n.event.kind == EventKind::Resolved {
        return ":large_green_circle:";
    }
    match n.event.incident.severity {
        Severity::Critical => ":red_circle:",
        Severity::Warning => ":large_orange_circle:",
        Severity::Info => ":large_blue_circle:",
    }
}

/// A code block cut to `max_chars` in all, fences included: cutting the finished block
/// could drop the closing fence and turn the rest of the message into code.
fn slack_code_block(label: &str, code: &str, max_chars: usize) -> String {
    let head = format!("*{label}*\n```");
    let tail = "```";
    let room = max_chars.saturating_sub(head.chars().count() + tail.chars().count());
    format!("{head}{}{tail}", cut(code, room))
}

/// Slack's limits: 3000 characters of section text, 2000 per field.
pub(super) const SLACK_SECTION_MAX: usize = 3000;

/// A Slack incoming-webhook message: `text` (shown in notifications and where blocks
/// cannot be) and top-level `blocks`, the headline led by a severity emoji (green once
/// resolved).
pub fn slack(n: &Notification, ctx: &Context) -> Value {
    slack_message(n, ctx, headline(n, ctx.now))
}

/// The headline of a message that stands for the incident and is edited as it changes
/// (Slack's Web API): its state, not the event; the changes go to its thread.
fn state_headline(n: &Notification, now: SystemTime) -> String {
    let i = &n.event.incident;
    let what = if n.event.kind == EventKind::Resolved {
        format!("resolved after {}", human(i.duration(now)))
    } else {
        "open".to_string()
    };
    format!(
        "[{}] {} {}: {what}",
        i.severity.as_str().to_uppercase(),
        i.cluster,
        i.kind.as_str().replace('_', " ")
    )
}

/// The Slack message that stands for an incident (bot mode): posted when it opens and
/// edited to show its current state, green once resolved. Same blocks as `slack`.
pub fn slack_state(n: &Notification, ctx: &Context) -> Value {
    slack_message(n, ctx, state_headline(n, ctx.now))
}

fn slack_message(n: &Notification, ctx: &Context, title: String) -> Value {
    let i = &n.event.incident;
    let mut fields = vec![
        json!({"type": "mrkdwn", "text": format!("*Cluster*\n{}", slack_escape(&i.cluster))}),
        json!({"type": "mrkdwn", "text": format!("*Subject*\n{}", slack_escape(&subject_words(i)))}),
        json!({"type": "mrkdwn", "text": format!("*Severity*\n{}", i.severity.as_str())}),
        json!({"type": "mrkdwn", "text": format!("*Started*\n{}", rfc3339(i.started_at))}),
    ];
    if let Some(s) = i.state {
        fields.push(json!({"type": "mrkdwn", "text": format!("*State*\n{}", s.as_label())}));
    }
    if let Some(u) = i.unavailable_seconds {
        fields.push(json!({"type": "mrkdwn", "text": format!("*Unavailable*\n{u:.1} s")}));
    }
    let mut blocks = vec![
        json!({"type": "section", "text": {"type": "mrkdwn", "text": cut(
            &format!(
                "{} *{}*\n{}",
                slack_marker(n),
                slack_escape(&title),
                slack_escape(&i.summary)
            ),
            SLACK_SECTION_MAX,
        )}}),
        json!({"type": "section", "fields": fields}),
    ];
    if !i.evidence.is_empty() {
        blocks.push(
            json!({"type": "section", "text": {"type": "mrkdwn", "text": slack_code_block(
                "Evidence",
                &slack_escape(&i.evidence.join("\n")),
                SLACK_SECTION_MAX,
            )}}),
        );
    }
    if i.affected_partitions_total > 0 {
        blocks.push(
            json!({"type": "section", "text": {"type": "mrkdwn", "text": cut(
                &format!(
                    "*Affected partitions* ({})\n{}",
                    i.affected_partitions_total,
                    slack_escape(&i.affected_partitions.join(", "))
                ),
                SLACK_SECTION_MAX,
            )}}),
        );
    }
    blocks.push(
        json!({"type": "context", "elements": [{"type": "mrkdwn", "text": format!(
            "incident `{}` · `{}` · kafka-watchdog {} on {}",
            i.id,
            slack_escape(&i.dedup_key),
            env!("CARGO_PKG_VERSION"),
            slack_escape(ctx.instance_id)
        )}]}),
    );
    let buttons: Vec<Value> = [
        ("Watchdog status", ctx.status_url.map(str::to_string)),
        ("Runbook", runbook_link(i, ctx)),
    ]
    .into_iter()
    .filter_map(|(text, url)| {
        url.map(|url| json!({"type": "button", "text": {"type": "plain_text", "text": text}, "url": url}))
    })
    .collect();
    if !buttons.is_empty() {
        blocks.push(json!({"type": "actions", "elements": buttons}));
    }
    let text = format!("{title}: {}", i.summary);
    json!({
        "text": cut(&slack_escape(&text), SLACK_SECTION_MAX),
        "blocks": blocks,
    })
}

fn pagerduty_severity(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "critical",
        Severity::Warning => "warning",
        Severity::Info => "info",
    }
}

/// A PagerDuty Events API v2 event. A resolve carries only what the API needs to find
/// the alert (routing key, dedup key, action); every other event is a `trigger`, which
/// PagerDuty merges into the open alert with the same dedup key.
pub fn pagerduty(routing_key: &str, n: &Notification, ctx: &Context) -> Value {
    let i = &n.event.incident;
    if n.event.kind == EventKind::Resolved {
        return json!({
            "routing_key": routing_key,
            "event_action": "resolve",
            "dedup_key": i.dedup_key,
        });
    }
    let source = i
        .broker_address
        .clone()
        .unwrap_or_else(|| i.cluster.clone());
    // A remediation event joins the alert of the broker it is about (PagerDuty logs a
    // trigger with an open alert's key on that alert) rather than opening an alert of its
    // own that nothing would ever resolve.
    let dedup_key = if n.event.kind.is_one_shot() {
        crate::alert::incident::FindingKey::new(
            &i.cluster,
            i.subject,
            crate::model::kind::FindingKind::Broker,
        )
        .dedup_key()
    } else {
        i.dedup_key.clone()
    };
    let mut event = json!({
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": dedup_key,
        "client": format!("kafka-watchdog on {}", ctx.instance_id),
        "payload": {
            "summary": cut(&format!("{}: {}", i.cluster, i.summary), PAGERDUTY_SUMMARY_MAX),
            "source": source,
            "severity": pagerduty_severity(i.severity),
            "timestamp": rfc3339(n.event.at),
            "component": i.subject.to_string(),
            "group": i.cluster,
            "class": i.kind.as_str(),
            "custom_details": {
                "event": n.event.kind.as_str(),
                "incident_id": i.id,
                "state": i.state.map(|s| s.as_label()),
                "evidence": i.evidence,
                "affected_partitions": i.affected_partitions,
                "affected_partitions_total": i.affected_partitions_total,
                "suspects": i.suspects,
                "changes": n.event.changes,
                "started_at": rfc3339(i.started_at),
                "duration_seconds": duration_secs(i, ctx.now),
                "unavailable_seconds": i.unavailable_seconds,
                "instance_id": ctx.instance_id,
                "labels": i.labels,
                "runbook_url": runbook_link(i, ctx),
            },
        },
    });
    let mut links = Vec::new();
    if let Some(url) = ctx.status_url {
        event["client_url"] = json!(url);
        links.push(json!({"href": url, "text": "kafka-watchdog status"}));
    }
    if let Some(url) = runbook_link(i, ctx) {
        links.push(json!({"href": url, "text": "runbook"}));
    }
    if !links.is_empty() {
        event["links"] = Value::Array(links);
    }
    event
}

/// How long Alertmanager keeps a firing alert without hearing of it again. Reminders
/// re-send it every repeat interval; three intervals leave room for two lost ones. Without
/// reminders, a day: long enough not to flap, short enough that an alert whose watchdog
/// died does not fire forever.
pub fn alert_lifetime(repeat_interval: Option<Duration>) -> Duration {
    match repeat_interval {
        Some(r) => (r * 3).max(Duration::from_secs(300)),
        None => Duration::from_secs(86_400),
    }
}

fn alert(i: &Incident, severity: Severity, ends_at: SystemTime, ctx: &Context) -> Value {
    let mut labels = Map::new();
    labels.insert("alertname".into(), i.kind.alert_name().into());
    labels.insert("cluster".into(), i.cluster.clone().into());
    if let Some(b) = i.broker {
        labels.insert("broker".into(), b.to_string().into());
    }
    labels.insert("severity".into(), severity.as_str().into());
    labels.insert("dedup_key".into(), i.dedup_key.clone().into());
    // The cluster's static labels route like any other; never over one of the watchdog's
    // (the configuration refuses those names too).
    for (k, v) in &i.labels {
        labels.entry(k.clone()).or_insert_with(|| v.clone().into());
    }
    let mut annotations = Map::new();
    annotations.insert("summary".into(), i.summary.clone().into());
    annotations.insert("description".into(), i.evidence.join("\n").into());
    annotations.insert("incident_id".into(), i.id.clone().into());
    if let Some(s) = i.state {
        annotations.insert("state".into(), s.as_label().into());
    }
    if i.affected_partitions_total > 0 {
        annotations.insert(
            "affected_partitions".into(),
            format!(
                "{} ({} in all)",
                i.affected_partitions.join(", "),
                i.affected_partitions_total
            )
            .into(),
        );
    }
    if !i.suspects.is_empty() {
        let s: Vec<String> = i.suspects.iter().map(|b| b.to_string()).collect();
        annotations.insert("suspects".into(), s.join(", ").into());
    }
    if let Some(u) = i.unavailable_seconds {
        annotations.insert("unavailable_seconds".into(), format!("{u:.1}").into());
    }
    annotations.insert("watchdog_instance".into(), ctx.instance_id.into());
    // The annotation Prometheus' own alert rules use for the same link.
    if let Some(url) = runbook_link(i, ctx) {
        annotations.insert("runbook_url".into(), url.into());
    }
    let mut alert = json!({
        "labels": labels,
        "annotations": annotations,
        "startsAt": rfc3339(i.started_at),
        "endsAt": rfc3339(ends_at),
    });
    if let Some(url) = ctx.status_url {
        alert["generatorURL"] = json!(url);
    }
    alert
}

/// Alertmanager API v2 (`POST /api/v2/alerts`): an array of alerts. Labels identify an
/// alert, so the severity label splits an incident whose severity changed into two
/// alerts; an update that changes it also ends the alert under the old severity.
pub fn alertmanager(repeat_interval: Option<Duration>, n: &Notification, ctx: &Context) -> Value {
    let i = &n.event.incident;
    if n.event.kind == EventKind::Resolved {
        let ended = i.resolved_at.unwrap_or(ctx.now);
        return json!([alert(i, i.severity, ended, ctx)]);
    }
    // A one-shot event (remediation) fires briefly and ends by itself: it is news, not a
    // condition that stays.
    let lifetime = if n.event.kind.is_one_shot() {
        ONE_SHOT_ALERT_LIFETIME
    } else {
        alert_lifetime(repeat_interval)
    };
    let mut alerts = vec![alert(i, i.severity, ctx.now + lifetime, ctx)];
    if let (EventKind::Updated, Some(p)) = (n.event.kind, n.event.previous) {
        if p.severity != i.severity {
            alerts.push(alert(i, p.severity, ctx.now, ctx));
        }
    }
    Value::Array(alerts)
}

fn teams_color(n: &Notification) -> &'static str {
    if n.event.kind == EventKind::Resolved {
        return "Good";
    }
    match n.event.incident.severity {
        Severity::Critical => "Attention",
        Severity::Warning => "Warning",
        Severity::Info => "Accent",
    }
}

/// Microsoft Teams: an Adaptive Card (schema 1.4) in a `message` envelope. Adaptive
/// Cards, not the older MessageCard, because the Workflows webhooks that replace the
/// retired Office 365 connectors accept nothing else, and classic incoming webhooks
/// accept them too.
pub fn teams(n: &Notification, ctx: &Context) -> Value {
    let i = &n.event.incident;
    let mut facts = vec![
        json!({"title": "Cluster", "value": i.cluster}),
        json!({"title": "Subject", "value": subject_words(i)}),
        json!({"title": "Severity", "value": i.severity.as_str()}),
        json!({"title": "Started", "value": rfc3339(i.started_at)}),
        json!({"title": "Duration", "value": human(i.duration(ctx.now))}),
    ];
    if let Some(s) = i.state {
        facts.push(json!({"title": "State", "value": s.as_label()}));
    }
    if i.affected_partitions_total > 0 {
        facts.push(json!({"title": "Partitions", "value": format!(
            "{} ({} in all)",
            cut(&i.affected_partitions.join(", "), 500),
            i.affected_partitions_total
        )}));
    }
    let mut body = vec![
        json!({"type": "TextBlock", "text": headline(n, ctx.now), "weight": "Bolder",
               "size": "Medium", "color": teams_color(n), "wrap": true}),
        json!({"type": "TextBlock", "text": i.summary, "wrap": true}),
        json!({"type": "FactSet", "facts": facts}),
    ];
    if !i.evidence.is_empty() {
        // Adaptive Card markdown joins single newlines; a blank line keeps them apart.
        body.push(json!({"type": "TextBlock", "text": i.evidence.join("\n\n"),
                         "wrap": true, "isSubtle": true, "fontType": "Monospace"}));
    }
    body.push(json!({"type": "TextBlock", "text": format!(
        "incident {} · {} · kafka-watchdog {} on {}",
        i.id, i.dedup_key, env!("CARGO_PKG_VERSION"), ctx.instance_id
    ), "wrap": true, "isSubtle": true, "size": "Small"}));
    let mut card = json!({
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "msteams": {"width": "Full"},
        "body": body,
    });
    if let Some(url) = runbook_link(i, ctx) {
        card["actions"] = json!([{"type": "Action.OpenUrl", "title": "Runbook", "url": url}]);
    }
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": card,
        }],
    })
}
