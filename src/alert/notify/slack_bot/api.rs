//! Slack's Web API, pure: which calls a notification takes, their JSON bodies, and what an
//! answer means. Slack answers most failures with HTTP 200 and `{"ok": false, "error":
//! "..."}`, so the body decides, not only the status.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use crate::alert::incident::{EventKind, FindingKey};
use crate::model::kind::FindingKind;

use super::super::coalesce::is_escalation;
use super::super::format::{
    cut, headline, human, slack_escape, slack_marker, slack_state, Context, SLACK_SECTION_MAX,
};
use super::super::route::{judge as judge_status, Asked, Outcome};
use super::super::Notification;
use super::threads::{Thread, Threads};

pub const POST_MESSAGE: &str = "chat.postMessage";
pub const UPDATE: &str = "chat.update";

/// What one notification does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// A new message in the configured channel; `keep`: it stands for the incident from
    /// now on (its later states edit it).
    Post { keep: bool },
    /// Edit the incident's message to show its state; `reply`: then say in its thread
    /// what happened; `forget`: the incident is over, its message is not kept.
    Edit {
        thread: Thread,
        reply: bool,
        forget: bool,
    },
    /// A one-shot event (remediation) as a reply in the thread of its broker's incident.
    Reply { thread: Thread },
}

/// The dedup key of the incident whose thread a one-shot event belongs to: its broker's.
fn broker_dedup_key(n: &Notification) -> String {
    let i = &n.event.incident;
    FindingKey::new(&i.cluster, i.subject, FindingKind::Broker).dedup_key()
}

/// Decides from the event and the messages kept.
pub fn plan(n: &Notification, threads: &Threads) -> Plan {
    let ev = &n.event;
    if ev.kind.is_one_shot() {
        return match threads.by_dedup_key(&broker_dedup_key(n)) {
            Some(t) => Plan::Reply { thread: t.clone() },
            None => Plan::Post { keep: false },
        };
    }
    let resolved = ev.kind == EventKind::Resolved;
    match threads.get(&ev.incident.id) {
        // Sent again (at least once) or told again after a silence: the message exists,
        // show the state there and say nothing twice in the thread.
        Some(t) if ev.kind == EventKind::Opened => Plan::Edit {
            thread: t.clone(),
            reply: false,
            forget: false,
        },
        Some(t) => Plan::Edit {
            thread: t.clone(),
            reply: true,
            forget: resolved,
        },
        // Never posted (it opened before the token was configured, its message was
        // forgotten): a message of its own, showing where it stands.
        None => Plan::Post { keep: !resolved },
    }
}

/// The message that stands for the incident, posted to `channel`.
pub fn post_body(channel: &str, n: &Notification, ctx: &Context) -> Value {
    let mut body = if n.event.kind.is_one_shot() {
        super::super::format::slack(n, ctx)
    } else {
        slack_state(n, ctx)
    };
    body["channel"] = json!(channel);
    // A link to /status would otherwise unfurl into a preview under every message.
    body["unfurl_links"] = json!(false);
    body["unfurl_media"] = json!(false);
    body
}

/// The incident's message, edited to show its state now.
pub fn update_body(thread: &Thread, n: &Notification, ctx: &Context) -> Value {
    let mut body = slack_state(n, ctx);
    body["channel"] = json!(thread.channel);
    body["ts"] = json!(thread.ts);
    body
}

/// A reply in the incident's thread saying what happened.
pub fn reply_body(thread: &Thread, n: &Notification, ctx: &Context) -> Value {
    let mut body = json!({
        "channel": thread.channel,
        "thread_ts": thread.ts,
        "text": cut(&reply_text(n, ctx.now), SLACK_SECTION_MAX),
        "unfurl_links": false,
        "unfurl_media": false,
    });
    if broadcast(n) {
        body["reply_broadcast"] = json!(true);
    }
    body
}

/// Whether a reply goes to the channel too: an escalation, and what remediation did to
/// the broker, are news for everyone, and a reply only in the thread notifies no one
/// (issue 38 item 6). The first message is edited as well, but an edit notifies no one.
fn broadcast(n: &Notification) -> bool {
    n.event.kind.is_one_shot() || is_escalation(&n.event)
}

/// The words of a thread reply: the change, in Slack's mrkdwn.
pub fn reply_text(n: &Notification, now: SystemTime) -> String {
    let ev = &n.event;
    let i = &ev.incident;
    let marker = slack_marker(n);
    match ev.kind {
        EventKind::Updated => {
            let severity = i.severity.as_str();
            let mut t = if is_escalation(ev) {
                // Seen in the channel too: it says what the incident is.
                let summary = slack_escape(&i.summary);
                format!("{marker} *Escalated to {severity}*: {summary}")
            } else {
                format!("{marker} *Updated* ({severity})")
            };
            for c in &ev.changes {
                t.push_str(&format!("\n• {}", slack_escape(c)));
            }
            t
        }
        EventKind::Resolved => format!("{marker} *Resolved* after {}", human(i.duration(now))),
        EventKind::Reminder => format!("{marker} *Still open* after {}", human(i.duration(now))),
        EventKind::Opened => format!("{marker} *Open*: {}", slack_escape(&i.summary)),
        EventKind::Acted | EventKind::Refused | EventKind::DryRun => {
            let mut t = format!(
                "{marker} *{}*\n{}",
                slack_escape(&headline(n, now)),
                slack_escape(&i.summary)
            );
            if !i.evidence.is_empty() {
                t.push_str(&format!("\n```{}```", slack_escape(&i.evidence.join("\n"))));
            }
            t
        }
    }
}

/// What an answer of Slack means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Done; `channel` and `ts` name the message posted or edited.
    Ok { channel: String, ts: String },
    /// Rate limited, Slack's trouble, or the network: the same call later.
    Retry { after: Option<Asked>, why: String },
    /// `chat.update` found no message to edit (deleted, or its channel is gone): post
    /// a new one.
    Gone { why: String },
    /// Any other refusal: the same call would be refused again.
    Refused { why: String },
}

/// Errors Slack documents as its own, temporary trouble.
const TEMPORARY: &[&str] = &[
    "ratelimited",
    "internal_error",
    "fatal_error",
    "service_unavailable",
    "request_timeout",
];
/// `chat.update` errors after which posting anew is the way to show the state.
const MESSAGE_GONE: &[&str] = &[
    "message_not_found",
    "cant_update_message",
    "channel_not_found",
];

/// Judges the answer to `method`: HTTP status, `Retry-After`, and the body.
pub fn judge(
    method: &str,
    status: u16,
    retry_after: Option<&str>,
    body: &[u8],
    now: SystemTime,
    cap: Duration,
) -> Answer {
    match judge_status(status, retry_after, now, cap) {
        Outcome::Delivered => {}
        Outcome::Retry { after, why } => {
            return Answer::Retry {
                after,
                why: format!("{method}: {why}"),
            }
        }
        Outcome::Drop { why } => {
            return Answer::Refused {
                why: format!("{method}: {why}"),
            }
        }
    }
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        // Not the Web API answering (a proxy's page, a wrong url): asking again would
        // get the same.
        return Answer::Refused {
            why: format!("{method}: HTTP {status} without a JSON answer; is url Slack's Web API?"),
        };
    };
    if v["ok"] == true {
        let field = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        let (channel, ts) = (field("channel"), field("ts"));
        if ts.is_empty() || channel.is_empty() {
            return Answer::Refused {
                why: format!("{method}: ok, but no channel and ts in the answer"),
            };
        }
        return Answer::Ok { channel, ts };
    }
    let error = v["error"].as_str().unwrap_or("no error named").to_string();
    let why = format!("{method}: {error}");
    if TEMPORARY.contains(&error.as_str()) {
        let after = retry_after
            .and_then(|r| super::super::route::parse_retry_after(r, now))
            .map(|d| Asked {
                wait: d.min(cap),
                rate_limited: error == "ratelimited",
            });
        return Answer::Retry { after, why };
    }
    if method == UPDATE && MESSAGE_GONE.contains(&error.as_str()) {
        return Answer::Gone { why };
    }
    Answer::Refused { why }
}
