//! Slack's Web API (bot token): threads, edits and their limits.

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
    let j =
        |method, status, ra, body: &str| api::judge(method, status, ra, body.as_bytes(), t(0), cap);
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
            after: Some(Asked {
                wait: Duration::from_secs(12),
                rate_limited: true
            }),
            why: "chat.postMessage: ratelimited".into()
        }
    );
    assert!(matches!(
        j(api::UPDATE, 429, Some("3"), ""),
        Answer::Retry { after: Some(a), .. } if a == Asked { wait: Duration::from_secs(3), rate_limited: true }
    ));
    assert!(matches!(
        j(api::UPDATE, 503, None, ""),
        Answer::Retry { after: None, .. }
    ));
    assert_eq!(
        j(
            api::UPDATE,
            200,
            Some("5"),
            r#"{"ok":false,"error":"internal_error"}"#
        ),
        Answer::Retry {
            after: Some(Asked {
                wait: Duration::from_secs(5),
                rate_limited: false
            }),
            why: "chat.update: internal_error".into()
        },
        "Slack's own trouble is no rate limit: its wait is held to the backoff's cap"
    );
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

async fn calls(fake: &FakeSlack, n: usize) -> Vec<kafka_watchdog_test_support::fake_slack::Call> {
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

/// Issue 38 item 6: an escalation to critical edited the first message and replied in its
/// thread without `reply_broadcast`, so the channel was not notified: nobody heard it. The
/// reply now also goes to the channel; a minor update's stays in the thread.
#[tokio::test]
async fn an_escalation_is_told_to_the_channel_not_only_the_thread() {
    let fake = fake().await;
    let dir = temp_dir("slack-escalation");
    let handle = Notifier::spawn_with(&[bot_hook(&fake)], &dir, "wd-1", fast()).unwrap();
    let mut warn = incident("lab", Some(2), Severity::Warning);
    warn.notified_peak = Some(Severity::Warning);
    handle.submit(vec![event(EventKind::Opened, warn)]);
    calls(&fake, 1).await;
    let mut up = updated(Severity::Warning, Severity::Warning, Severity::Critical);
    up.changes = vec!["severity warning -> critical".into()];
    handle.submit(vec![up]);
    let c = calls(&fake, 3).await;
    let ts = c[0].answer["ts"].as_str().unwrap();
    assert_eq!(c[1].method, "chat.update");
    assert_eq!(c[1].body["ts"], ts, "the first message shows it");
    assert!(
        c[1].body["text"]
            .as_str()
            .unwrap()
            .starts_with("[CRITICAL]"),
        "{}",
        c[1].body
    );
    assert_eq!(c[2].method, "chat.postMessage");
    assert_eq!(c[2].body["thread_ts"], ts);
    assert_eq!(
        c[2].body["reply_broadcast"], true,
        "the escalation notifies the channel: {}",
        c[2].body
    );
    let text = c[2].body["text"].as_str().unwrap();
    assert!(
        text.starts_with(
            ":red_circle: *Escalated to critical*: broker 2 (127.0.0.12:9092) is a zombie"
        ),
        "{text}"
    );
    assert!(
        text.ends_with("\n• severity warning -&gt; critical"),
        "{text}"
    );
    // A change that is no escalation stays in the thread.
    handle.submit(vec![minor_update("partitions: +orders-2", "x")]);
    let c = calls(&fake, 5).await;
    assert_eq!(c[4].body["thread_ts"], ts);
    assert!(c[4].body.get("reply_broadcast").is_none(), "{}", c[4].body);
    handle.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 38 item 6: a replica that took over sending (the one first in line died) knew
/// nothing of the message the other had posted, so it posted a new one for the next state
/// and the first stayed red after the resolve. The peers now tell which message stands for
/// an incident they delivered, and the replica that takes over edits that one.
#[tokio::test]
async fn a_replica_that_takes_over_edits_the_first_message_to_its_end() {
    use crate::alert::peers::{Answer, Peers};
    let fake = fake().await;
    let peers = |id: &str| {
        Arc::new(Peers::new(
            id,
            Duration::from_millis(300),
            Duration::from_millis(20),
        ))
    };
    let (p1, p2) = (peers("wd-1"), peers("wd-2"));
    let sender = |id: &str, p: &Arc<Peers>| Sender {
        instance_id: id.into(),
        status_url: None,
        runbooks_url: None,
        peers: Some(p.clone()),
    };
    let (dir1, dir2) = (temp_dir("slack-peer-1"), temp_dir("slack-peer-2"));
    let first =
        Notifier::spawn_with(&[bot_hook(&fake)], &dir1, sender("wd-1", &p1), fast()).unwrap();
    let second =
        Notifier::spawn_with(&[bot_hook(&fake)], &dir2, sender("wd-2", &p2), fast()).unwrap();
    // wd-2 asks wd-1, first in line, for what it delivered.
    let ask_first = || {
        let answer = Answer {
            instance_id: "wd-1".into(),
            version: "0".into(),
            clusters: vec!["lab".into()],
            silences: vec![],
            deliveries: p1.deliveries(&[], SystemTime::now()),
        };
        p2.heard("http://wd-1:9644", &answer, SystemTime::now());
    };
    let mut warn = incident("lab", Some(2), Severity::Warning);
    warn.notified_peak = Some(Severity::Warning);
    // Deliveries are shown to the peers for ten minutes after the event.
    let mut opened = event(EventKind::Opened, warn);
    opened.at = SystemTime::now();
    first.submit(vec![opened.clone()]);
    first
        .stats_when("wd-1 posted it", |s| s.receivers[0].ok == 1)
        .await;
    ask_first();
    second.submit(vec![opened]);
    second
        .stats_when("wd-2 left it to wd-1", |s| {
            s.receivers[0].left_to_peers == 1
        })
        .await;
    // wd-1 dies; wd-2 sends the escalation and the resolve.
    first.shutdown(Duration::from_secs(1)).await;
    let mut up = updated(Severity::Warning, Severity::Warning, Severity::Critical);
    up.changes = vec!["severity warning -> critical".into()];
    second.submit(vec![
        up,
        event(
            EventKind::Resolved,
            incident("lab", Some(2), Severity::Critical),
        ),
    ]);
    second
        .stats_when("wd-2 sent both", |s| s.receivers[0].ok == 2)
        .await;
    let messages = fake.messages();
    let methods: Vec<String> = fake.calls().iter().map(|c| c.method.clone()).collect();
    assert_eq!(
        messages.len(),
        1,
        "one message for the incident: {methods:?}"
    );
    let m = &messages[0];
    let last = m.versions.last().unwrap()["text"].as_str().unwrap();
    assert!(
        last.contains("resolved after"),
        "the first message ends green: {last}"
    );
    assert_eq!(m.replies.len(), 2, "{:#?}", m.replies);
    assert_eq!(m.replies[0]["reply_broadcast"], true, "the escalation");
    assert!(
        kept(&dir2)["threads"].as_object().unwrap().is_empty(),
        "forgotten once resolved"
    );
    second.shutdown(Duration::from_secs(1)).await;
    let _ = std::fs::remove_dir_all(&dir1);
    let _ = std::fs::remove_dir_all(&dir2);
}
