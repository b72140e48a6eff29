//! Slack with a bot token, end to end: the real daemon against the real lab, sending to a
//! fake of Slack's Web API. A frozen broker is one message: `chat.postMessage` when it
//! opens; the daemon restarts meanwhile; the resolve edits that same message
//! (`chat.update` with the first message's channel and `ts`, read back from the state
//! directory) and replies in its thread.

mod common;

use std::path::Path;
use std::time::Duration;

use common::watchdog::{free_port, temp_dir, Watchdog, WatchdogSettings};
use common::{eventually, lab, unique_topic};
use kafka_watchdog_test_support::fake_slack::{Call, FakeSlack, CHANNEL_ID};
use kafka_watchdog_test_support::watchdog as support;

const WAIT: Duration = Duration::from_secs(120);
const TOKEN: &str = "xoxb-lab-test";
const BROKER2: &str = "kafka-watchdog/lab/broker-2/broker";

/// The daemon on the given state folder (`<dir>/state`), its config and log in `run`.
fn launch(dir: &Path, run: &str, settings: &WatchdogSettings) -> support::Watchdog {
    let port = free_port();
    let yaml = Watchdog::config_yaml(port, dir, settings);
    support::Watchdog::launch(&support::Launch {
        host: support::LOOPBACK,
        bin: Path::new(env!("CARGO_BIN_EXE_kafka-watchdog")),
        dir: &dir.join(run),
        port,
        yaml: &yaml,
        check_config: true,
        ready_within: Duration::from_secs(30),
        env: &[],
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A call about broker 2's incident: its dedup key is in every message's context line.
fn about_broker2(c: &Call) -> bool {
    c.body.to_string().contains(BROKER2)
}

fn top_post(c: &Call) -> bool {
    c.method == "chat.postMessage" && c.body.get("thread_ts").is_none()
}

fn text(c: &Call) -> &str {
    c.body["text"].as_str().unwrap_or_default()
}

#[test]
fn a_frozen_broker_is_one_slack_message_whose_resolve_edits_it_after_a_restart() {
    let mut lab = lab();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt
        .block_on(FakeSlack::start("127.0.0.1:0".parse().unwrap(), TOKEN))
        .unwrap();
    let dir = temp_dir("slack-bot");
    let token_file = dir.join("slack-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let settings = WatchdogSettings {
        canary_yaml: format!("      topic: {}\n", unique_topic("kwc-slack")),
        extra_cluster_yaml: "    verdict:\n      open_after_secs: 2\n      resolve_after_secs: 2\n"
            .into(),
        extra_top_yaml: format!(
            "webhooks:\n  - name: slack-bot\n    format: slack\n    url: {}\n    slack_bot_token_file: {}\n    slack_channel: '#kafka-ops'\n    min_severity: critical\n    repeat_interval_secs: 0\n",
            fake.base_url(),
            token_file.display()
        ),
        ..WatchdogSettings::default()
    };
    let messages_file = dir.join("state/slack/slack-bot.json");

    let first = launch(&dir, "run-1", &settings);
    lab.freeze(2).unwrap();
    let calls = rt
        .block_on(fake.calls_when(WAIT, |c| c.iter().any(|c| top_post(c) && about_broker2(c))))
        .unwrap_or_else(|| panic!("no chat.postMessage for broker 2: {:#?}", fake.calls()));
    let opened = calls
        .iter()
        .find(|c| top_post(c) && about_broker2(c))
        .unwrap()
        .clone();
    assert_eq!(
        opened.authorization.as_deref(),
        Some("Bearer xoxb-lab-test")
    );
    assert_eq!(opened.body["channel"], "#kafka-ops");
    assert!(
        text(&opened).starts_with("[CRITICAL] lab broker: open"),
        "{:#}",
        opened.body
    );
    assert_eq!(opened.answer["ok"], true);
    let ts = opened.answer["ts"].as_str().unwrap().to_string();
    // Kept on disk before the daemon goes: what the restart has to find.
    eventually(WAIT, "the message's ts in the state folder", || {
        std::fs::read_to_string(&messages_file)
            .ok()?
            .contains(&ts)
            .then_some(())
    });
    drop(first);

    let second = launch(&dir, "run-2", &settings);
    lab.thaw(2).unwrap();
    let calls = rt
        .block_on(fake.calls_when(WAIT, |c| {
            c.iter()
                .any(|c| c.body["thread_ts"] == ts.as_str() && text(c).contains("Resolved"))
        }))
        .unwrap_or_else(|| panic!("no resolve in the thread of {ts}: {:#?}", fake.calls()));
    let resolve = calls
        .iter()
        .find(|c| {
            c.method == "chat.update" && about_broker2(c) && text(c).contains("resolved after")
        })
        .unwrap_or_else(|| panic!("no chat.update of the resolve: {calls:#?}"));
    assert_eq!(
        resolve.body["ts"],
        ts.as_str(),
        "the first message is edited"
    );
    assert_eq!(
        resolve.body["channel"], CHANNEL_ID,
        "in the channel Slack named"
    );
    assert_eq!(resolve.answer["ok"], true, "{:#}", resolve.answer);
    let head = resolve.body["blocks"][0]["text"]["text"].as_str().unwrap();
    assert!(head.starts_with(":large_green_circle:"), "{head}");
    assert_eq!(
        calls
            .iter()
            .filter(|c| top_post(c) && about_broker2(c))
            .count(),
        1,
        "one message for the incident, across the restart: {calls:#?}"
    );
    let message = fake
        .messages()
        .into_iter()
        .find(|m| m.ts == ts)
        .expect("the message");
    assert!(message.versions.len() >= 2, "posted, then edited");
    eventually(WAIT, "the resolved incident's message forgotten", || {
        let kept = std::fs::read_to_string(&messages_file).ok()?;
        (!kept.contains(&ts)).then_some(())
    });
    drop(second);
    let _ = std::fs::remove_dir_all(&dir);
}
