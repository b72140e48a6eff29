//! The dead man's switch (issue 38 item 2): a URL called every `heartbeat.interval_secs`
//! while the watchdog sees its clusters, so that its receiver (healthchecks.io, a
//! heartbeat or push monitor, Alertmanager's always-firing `Watchdog` route) raises the
//! alarm when the beats stop: the watchdog stopped, cannot reach it, or went blind. No
//! incident the watchdog sends can say that it is gone.
//!
//! "Sees its clusters" is what `/healthz` answers: no watched loop (a cluster's round loop,
//! the webhook dispatcher, the HTTP server) over its allowance (`model::progress`). When one
//! is, `healthchecks` says so at once (`<url>/fail`), `alertmanager` ends its alert, and
//! `pagerduty` (any plain ping URL) sends nothing.
//!
//! The URL is a secret (a ping URL carries its check's token): logs name its host only.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;
use tokio::sync::watch;

use crate::config::live::{self, Current};
use crate::config::{HeartbeatConfig, HeartbeatFormat};
use crate::model::progress::{Look, Progress};

/// How the watchdog sees its clusters at one beat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sight {
    /// Loops watched (a cluster's round loop each, the dispatcher, the server).
    pub watched: usize,
    /// One line per loop over its allowance; empty: the watchdog sees its clusters.
    pub stuck: Vec<String>,
}

impl Sight {
    /// The board at `now`.
    pub fn of(progress: &Progress, now: Instant) -> Sight {
        let looks = progress.looks(now);
        Sight {
            watched: looks.len(),
            stuck: looks
                .iter()
                .filter(|l| l.stuck())
                .map(|l: &Look| {
                    format!(
                        "{}: no progress for {} s (allowed {} s)",
                        l.what,
                        l.silent.as_secs(),
                        l.allowed.as_secs()
                    )
                })
                .collect(),
        }
    }

    pub fn seeing(&self) -> bool {
        self.stuck.is_empty()
    }
}

/// One beat's request.
#[derive(Debug, Clone, PartialEq)]
pub struct Beat {
    pub method: reqwest::Method,
    pub url: String,
    /// The body and its content type; none for a GET.
    pub body: Option<(&'static str, String)>,
}

/// The alert name an `alertmanager` heartbeat fires, for the dead man's switch route.
pub const ALERT_NAME: &str = "KafkaWatchdogHeartbeat";

/// How many intervals ahead an `alertmanager` heartbeat's `endsAt` lies: two beats may be
/// lost before Alertmanager takes the alert for ended.
const ALERT_INTERVALS: u32 = 3;

/// What to send at `now` for `sight`, in `cfg.format`'s shape; `None`: nothing (a
/// `pagerduty` ping URL is only called while all is well). `since` is when this watchdog's
/// heartbeat began, the alert's `startsAt`.
pub fn beat(
    cfg: &HeartbeatConfig,
    instance_id: &str,
    sight: &Sight,
    since: SystemTime,
    now: SystemTime,
) -> Option<Beat> {
    let url = cfg.url.expose().to_string();
    let text = |sight: &Sight| {
        if sight.seeing() {
            format!(
                "kafka-watchdog {instance_id}: {} loops make progress\n",
                sight.watched
            )
        } else {
            format!(
                "kafka-watchdog {instance_id} is blind:\n{}\n",
                sight.stuck.join("\n")
            )
        }
    };
    match cfg.format {
        HeartbeatFormat::Healthchecks => Some(Beat {
            method: reqwest::Method::POST,
            url: if sight.seeing() {
                url
            } else {
                format!("{}/fail", url.trim_end_matches('/'))
            },
            body: Some(("text/plain; charset=utf-8", text(sight))),
        }),
        HeartbeatFormat::PagerDuty => sight.seeing().then_some(Beat {
            method: reqwest::Method::GET,
            url,
            body: None,
        }),
        HeartbeatFormat::Alertmanager => {
            let ends = if sight.seeing() {
                now + cfg.interval * ALERT_INTERVALS
            } else {
                now
            };
            let alert = json!([{
                "labels": {
                    "alertname": ALERT_NAME,
                    "watchdog_instance": instance_id,
                    "severity": "none",
                },
                "annotations": {
                    "summary": format!("kafka-watchdog {instance_id} sees its clusters: this alert always fires while it does, and stops when it stops or goes blind"),
                    "description": text(sight),
                },
                "startsAt": crate::model::time::rfc3339(since),
                "endsAt": crate::model::time::rfc3339(ends),
            }]);
            Some(Beat {
                method: reqwest::Method::POST,
                url,
                body: Some(("application/json", alert.to_string())),
            })
        }
    }
}

/// The client one configuration's beats are sent with, made again (once) when its
/// `ca_file` took new content (`config::live`).
fn client(cfg: &HeartbeatConfig) -> Result<live::Remade<reqwest::Client>, String> {
    let ca = match &cfg.ca_file {
        Some(path) => live::watch(live::Kind::Certificates, &[path])?,
        None => Current::fixed(Vec::new()),
    };
    let built = cfg.clone();
    live::Remade::new(ca, "the heartbeat's client", move |ca| {
        build_client(&built, ca.first().map(Vec::as_slice))
    })
}

fn build_client(cfg: &HeartbeatConfig, ca: Option<&[u8]>) -> Result<reqwest::Client, String> {
    // The system's roots, as docs/config.md says: a receiver behind an internal CA
    // installed on the host is reached without a ca_file, as webhooks and peers are.
    let mut b = crate::observe::wire::trust_system_roots(reqwest::Client::builder());
    if let Some(pem) = ca {
        for c in reqwest::Certificate::from_pem_bundle(pem).map_err(|e| format!("ca_file: {e}"))? {
            b = b.add_root_certificate(c);
        }
    }
    b.timeout(cfg.timeout)
        .connect_timeout(cfg.timeout)
        .user_agent(concat!("kafka-watchdog/", env!("CARGO_PKG_VERSION")))
        // A moved ping URL is a configuration error to see, not to follow.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())
}

/// Sends one beat; `Err` says why it did not land, in words without the URL.
async fn send(client: &reqwest::Client, b: Beat) -> Result<(), String> {
    let mut req = client.request(b.method, &b.url);
    if let Some((content_type, body)) = b.body {
        req = req
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body);
    }
    match req.send().await {
        Ok(r) if r.status().is_success() => Ok(()),
        Ok(r) => Err(format!("answered {}", r.status())),
        Err(e) => Err(if e.is_timeout() {
            "no answer in time".to_string()
        } else if e.is_connect() {
            "cannot connect".to_string()
        } else {
            "the request failed".to_string()
        }),
    }
}

/// What one `heartbeat:` block is sent with: its client (made again when its `ca_file`
/// changed), and its `url_file` watched by `config::live` (the URL carries the check's
/// token), so a rotated URL or CA takes the next beat without a reload; a rewrite that
/// cannot be used keeps the last good one.
struct Built {
    cfg: HeartbeatConfig,
    client: Result<live::Remade<reqwest::Client>, String>,
    url: Option<Current>,
}

impl Built {
    fn of(cfg: HeartbeatConfig) -> Built {
        let url = cfg.url.file().and_then(|_| {
            // The file was read well while loading; unreadable now, it keeps that value.
            live::secret(&cfg.url)
                .inspect_err(|why| tracing::warn!(problem = %why, "cannot watch heartbeat.url_file: the URL loaded stays in use"))
                .ok()
        });
        Built {
            client: client(&cfg),
            cfg,
            url,
        }
    }

    /// The block with its URL as the file holds it now.
    fn now(&self) -> HeartbeatConfig {
        let mut cfg = self.cfg.clone();
        if let Some(url) = &self.url {
            cfg.url = cfg.url.with_value(url.text().trim());
        }
        cfg
    }
}

/// Beats while the watchdog runs, with the newest `heartbeat:` block (a reload changes it,
/// `None` stops the beats), until `stop`.
pub async fn run(
    mut config: watch::Receiver<Option<HeartbeatConfig>>,
    progress: Arc<Progress>,
    instance_id: String,
    mut stop: watch::Receiver<bool>,
) {
    let since = SystemTime::now();
    // The client and the watched URL, made again only when the block changes; the last
    // outcome, said once.
    let mut built: Option<Built> = None;
    let mut last: Option<Result<bool, String>> = None;
    loop {
        let cfg = config.borrow_and_update().clone();
        let wait = match cfg {
            None => Duration::from_secs(3600),
            Some(cfg) => {
                if built.as_ref().is_none_or(|b| b.cfg != cfg) {
                    built = Some(Built::of(cfg.clone()));
                }
                let cfg = built.as_ref().map_or(cfg, Built::now);
                let sight = Sight::of(&progress, Instant::now());
                let outcome = match built.as_ref().map(|b| &b.client) {
                    Some(Ok(c)) => {
                        match beat(&cfg, &instance_id, &sight, since, SystemTime::now()) {
                            Some(b) => send(&c.get(), b).await.map(|()| sight.seeing()),
                            None => Ok(false),
                        }
                    }
                    Some(Err(e)) => Err(e.clone()),
                    None => Ok(false),
                };
                say(&cfg, &sight, &outcome, &last);
                last = Some(outcome);
                cfg.interval
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            changed = config.changed() => if changed.is_err() { return },
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Logs a beat's outcome when it differs from the last: blind, failing, back.
fn say(
    cfg: &HeartbeatConfig,
    sight: &Sight,
    outcome: &Result<bool, String>,
    last: &Option<Result<bool, String>>,
) {
    if last.as_ref() == Some(outcome) {
        return;
    }
    let target = &cfg.target;
    let format = cfg.format.as_str();
    match outcome {
        Ok(true) => tracing::info!(%target, format, "heartbeat: beating"),
        Ok(false) => {
            tracing::error!(%target, format, stuck = %sight.stuck.join("; "), "heartbeat: the watchdog is blind; its receiver is told or the beats stop")
        }
        Err(e) => {
            tracing::warn!(%target, format, error = %e, "heartbeat: a beat did not land; its receiver will raise the alarm if none does")
        }
    }
}

#[cfg(test)]
mod tests;
