//! Slack with a bot token: an incident is one message. `opened` posts it
//! (`chat.postMessage`) and keeps its channel and `ts` (`threads`, on disk, so a restart
//! edits the same message); every later state edits it (`chat.update`) and says in its
//! thread what changed; the resolve turns it green and forgets it.
//!
//! Replicas that share deliveries (`alert::peers`) tell each other which message stands
//! for an incident: the one that takes over sending edits the message another posted.
//!
//! A notification's calls are retried together: an edit is idempotent, and a reply sent
//! twice after a failure between the two is the at-least-once every receiver gets.

pub mod api;
pub mod threads;

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::alert::incident::{EventKind, IncidentEvent};
use crate::alert::peers::SlackMessage;
use crate::config::{SlackBot, WebhookConfig};

use super::format::Context;
use super::route::Outcome;
use super::{lock, Notification};
use api::{Answer, Plan};
use threads::{Thread, Threads};

/// The folder, below the state directory, of the receivers' message files.
pub const DIR: &str = "slack";

/// One Slack receiver in bot mode.
pub struct Bot {
    token: crate::config::Secret,
    channel: String,
    /// The Web API's base, ending in '/'.
    base: url::Url,
    threads: Mutex<Threads>,
}

impl Bot {
    /// `None` for receivers that are not Slack bots, or whose base does not parse (the
    /// configuration checked it).
    pub fn new(cfg: &WebhookConfig, bot: &SlackBot, state_dir: &Path) -> Option<Bot> {
        let base = url::Url::parse(cfg.url.expose()).ok()?;
        let file = state_dir
            .join(DIR)
            .join(format!("{}.json", super::spool::dir_name(&cfg.name)));
        Some(Bot {
            token: bot.token.clone(),
            channel: bot.channel.clone(),
            base,
            threads: Mutex::new(Threads::load(&file)),
        })
    }

    async fn save(&self, bytes: Vec<u8>) {
        let path = lock(&self.threads).path().to_path_buf();
        let written = crate::alert::incident::disk()
            .finish(
                "writing the Slack message file",
                crate::alert::incident::SLOW_WRITE,
                move || threads::save(&path, &bytes),
            )
            .await;
        if let Ok(Err(e)) = written {
            // The message stays known until the restart; after it, the incident's next
            // state is a new message.
            tracing::error!(error = %e, "cannot write the Slack message file");
        }
    }

    async fn keep(&self, incident_id: &str, thread: Thread) {
        let bytes = {
            let mut t = lock(&self.threads);
            t.keep(incident_id, thread);
            t.bytes()
        };
        self.save(bytes).await;
    }

    async fn forget(&self, incident_id: &str) {
        let bytes = {
            let mut t = lock(&self.threads);
            t.forget(incident_id).then(|| t.bytes())
        };
        if let Some(bytes) = bytes {
            self.save(bytes).await;
        }
    }

    /// The message kept for an incident, for the peers.
    pub fn message(&self, incident_id: &str) -> Option<SlackMessage> {
        let t = lock(&self.threads);
        let thread = t.get(incident_id)?;
        Some(SlackMessage {
            channel: thread.channel.clone(),
            ts: thread.ts.clone(),
        })
    }

    /// A peer delivered `event`, shown in `message`: the states this instance sends next
    /// (when it takes over) edit that message; after the resolve nothing is kept.
    pub async fn adopt(&self, event: &IncidentEvent, message: Option<SlackMessage>) {
        let id = &event.incident.id;
        if event.kind.is_one_shot() {
            return;
        }
        if event.kind == EventKind::Resolved {
            self.forget(id).await;
            return;
        }
        let Some(m) = message else {
            return;
        };
        let thread = Thread {
            channel: m.channel,
            ts: m.ts,
            dedup_key: event.incident.dedup_key.clone(),
        };
        if lock(&self.threads).get(id) != Some(&thread) {
            self.keep(id, thread).await;
        }
    }

    /// One call of the Web API.
    async fn call(
        &self,
        client: &reqwest::Client,
        cfg: &WebhookConfig,
        method: &str,
        body: &Value,
        cap: Duration,
    ) -> Answer {
        let Ok(url) = self.base.join(method) else {
            return Answer::Refused {
                why: format!("{method}: cannot join it to the API base"),
            };
        };
        let mut request = client.post(url);
        for (k, v) in &cfg.headers {
            request = request.header(k, v);
        }
        let answered = match super::http::send(
            request
                .header("Content-Type", "application/json; charset=utf-8")
                .bearer_auth(self.token.expose())
                .body(serde_json::to_vec(body).unwrap_or_default()),
        )
        .await
        {
            Ok(a) => a,
            Err(why) => {
                return Answer::Retry {
                    after: None,
                    why: format!("{method}: {why}"),
                }
            }
        };
        let (status, retry_after) = (answered.status, answered.retry_after.clone());
        let bytes = match answered.body().await {
            Ok(b) => b,
            Err(why) => {
                return Answer::Retry {
                    after: None,
                    why: format!("{method}: {why}"),
                }
            }
        };
        api::judge(
            method,
            status,
            retry_after.as_deref(),
            &bytes,
            SystemTime::now(),
            cap,
        )
    }

    /// Posts a new message for the notification, keeping it when `keep`.
    async fn post(
        &self,
        client: &reqwest::Client,
        cfg: &WebhookConfig,
        n: &Notification,
        ctx: &Context<'_>,
        keep: bool,
        cap: Duration,
    ) -> Outcome {
        let body = api::post_body(&self.channel, n, ctx);
        match self.call(client, cfg, api::POST_MESSAGE, &body, cap).await {
            Answer::Ok { channel, ts } => {
                if keep {
                    let i = &n.event.incident;
                    let thread = Thread {
                        channel,
                        ts,
                        dedup_key: i.dedup_key.clone(),
                    };
                    self.keep(&i.id, thread).await;
                }
                Outcome::Delivered
            }
            other => outcome(other),
        }
    }

    /// Delivers one notification: the calls its plan takes, in order.
    pub async fn deliver(
        &self,
        client: &reqwest::Client,
        cfg: &WebhookConfig,
        n: &Notification,
        ctx: &Context<'_>,
        cap: Duration,
    ) -> Outcome {
        let plan = api::plan(n, &lock(&self.threads));
        let id = &n.event.incident.id;
        let resolved = n.event.kind == EventKind::Resolved;
        match plan {
            Plan::Post { keep } => self.post(client, cfg, n, ctx, keep, cap).await,
            Plan::Reply { thread } => {
                let body = api::reply_body(&thread, n, ctx);
                outcome(self.call(client, cfg, api::POST_MESSAGE, &body, cap).await)
            }
            Plan::Edit {
                thread,
                reply,
                forget,
            } => {
                let body = api::update_body(&thread, n, ctx);
                let edited = match self.call(client, cfg, api::UPDATE, &body, cap).await {
                    Answer::Ok { .. } => Outcome::Delivered,
                    Answer::Gone { why } => {
                        tracing::warn!(receiver = %cfg.name, incident = %id, why = %why, "the incident's Slack message is gone: posting a new one");
                        self.forget(id).await;
                        return self.post(client, cfg, n, ctx, !resolved, cap).await;
                    }
                    other => outcome(other),
                };
                let done = match edited {
                    Outcome::Delivered if reply => {
                        let body = api::reply_body(&thread, n, ctx);
                        outcome(self.call(client, cfg, api::POST_MESSAGE, &body, cap).await)
                    }
                    other => other,
                };
                // Kept while the notification is retried: the retry edits the same message.
                if forget && !matches!(done, Outcome::Retry { .. }) {
                    self.forget(id).await;
                }
                done
            }
        }
    }
}

fn outcome(a: Answer) -> Outcome {
    match a {
        Answer::Ok { .. } => Outcome::Delivered,
        Answer::Retry { after, why } => Outcome::Retry { after, why },
        Answer::Gone { why } | Answer::Refused { why } => Outcome::Drop { why },
    }
}
