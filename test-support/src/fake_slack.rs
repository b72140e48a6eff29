//! A fake of Slack's Web API (`chat.postMessage`, `chat.update`) that keeps every call and
//! the messages as Slack would: a post gets a new `ts` in the channel's id, an update
//! must name a message that exists (else `message_not_found`, as Slack answers), and a
//! wrong token is `invalid_auth`. A test can make the next answers to a method fail.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;

/// The channel id every channel name resolves to.
pub const CHANNEL_ID: &str = "C0FAKEOPS";

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct Call {
    /// `chat.postMessage`, `chat.update`, ...: the last segment of the path.
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub content_type: Option<String>,
    pub body: Value,
    /// What the fake answered: `ok` and `error`, or the HTTP status it failed with.
    pub answer: Value,
}

/// An answer a test scripts for the next call of a method.
#[derive(Debug, Clone)]
pub enum Scripted {
    /// HTTP 200 with `{"ok": false, "error": <error>}`.
    Error(&'static str),
    /// An HTTP status and a `Retry-After`, Slack's rate limit.
    Status(u16, Option<&'static str>),
}

/// A message as the fake keeps it.
#[derive(Debug, Clone)]
pub struct Message {
    pub channel: String,
    pub ts: String,
    /// The body of the post, then of each update.
    pub versions: Vec<Value>,
    /// Replies in its thread, in order.
    pub replies: Vec<Value>,
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    messages: BTreeMap<String, Message>,
    scripted: BTreeMap<String, VecDeque<Scripted>>,
    next_ts: u64,
}

/// A running fake; it stops when dropped.
pub struct FakeSlack {
    addr: SocketAddr,
    token: String,
    state: Arc<Mutex<State>>,
    /// Ticks after every call recorded, so waits need no polling.
    logged: Arc<tokio::sync::watch::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeSlack {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

fn answer(status: u16, retry_after: Option<&str>, body: &Value) -> Response<Full<Bytes>> {
    let mut r = Response::builder()
        .status(status)
        .header("Content-Type", "application/json; charset=utf-8");
    if let Some(ra) = retry_after {
        r = r.header("Retry-After", ra);
    }
    r.body(Full::new(Bytes::from(body.to_string())))
        .unwrap_or_default()
}

/// What the fake does with one call: (HTTP status, Retry-After, JSON answer).
fn handle(
    state: &Mutex<State>,
    token: &str,
    method: &str,
    authorization: Option<&str>,
    body: &Value,
) -> (u16, Option<&'static str>, Value) {
    let mut s = lock(state);
    if let Some(next) = s.scripted.get_mut(method).and_then(VecDeque::pop_front) {
        return match next {
            Scripted::Error(e) => (200, None, json!({"ok": false, "error": e})),
            Scripted::Status(code, ra) => (code, ra, json!({"ok": false, "error": "ratelimited"})),
        };
    }
    if authorization != Some(format!("Bearer {token}").as_str()) {
        return (200, None, json!({"ok": false, "error": "invalid_auth"}));
    }
    match method {
        "chat.postMessage" => {
            if let Some(thread_ts) = body["thread_ts"].as_str() {
                let Some(m) = s.messages.get_mut(thread_ts) else {
                    return (200, None, json!({"ok": false, "error": "thread_not_found"}));
                };
                m.replies.push(body.clone());
                let channel = m.channel.clone();
                s.next_ts += 1;
                let ts = format!("1700000000.{:06}", s.next_ts);
                return (200, None, json!({"ok": true, "channel": channel, "ts": ts}));
            }
            if body["channel"].as_str().is_none_or(str::is_empty) {
                return (
                    200,
                    None,
                    json!({"ok": false, "error": "channel_not_found"}),
                );
            }
            s.next_ts += 1;
            let ts = format!("1700000000.{:06}", s.next_ts);
            s.messages.insert(
                ts.clone(),
                Message {
                    channel: CHANNEL_ID.into(),
                    ts: ts.clone(),
                    versions: vec![body.clone()],
                    replies: Vec::new(),
                },
            );
            (
                200,
                None,
                json!({"ok": true, "channel": CHANNEL_ID, "ts": ts}),
            )
        }
        "chat.update" => {
            let ts = body["ts"].as_str().unwrap_or_default();
            match s.messages.get_mut(ts) {
                Some(m) if body["channel"] == m.channel.as_str() => {
                    m.versions.push(body.clone());
                    (
                        200,
                        None,
                        json!({"ok": true, "channel": m.channel, "ts": ts}),
                    )
                }
                Some(_) => (
                    200,
                    None,
                    json!({"ok": false, "error": "channel_not_found"}),
                ),
                None => (
                    200,
                    None,
                    json!({"ok": false, "error": "message_not_found"}),
                ),
            }
        }
        _ => (200, None, json!({"ok": false, "error": "unknown_method"})),
    }
}

impl FakeSlack {
    /// Listens on `addr` (port 0: any free port); calls must carry `Bearer <token>`.
    pub async fn start(addr: SocketAddr, token: &str) -> std::io::Result<FakeSlack> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state: Arc<Mutex<State>> = Arc::default();
        let logged = Arc::new(tokio::sync::watch::Sender::new(()));
        let (keep, expected, tick) = (state.clone(), token.to_string(), logged.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (state, token, tick) = (keep.clone(), expected.clone(), tick.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        let (state, token, tick) = (state.clone(), token.clone(), tick.clone());
                        async move {
                            let path = req.uri().path().to_string();
                            let method = path.rsplit('/').next().unwrap_or_default().to_string();
                            let header = |name: &str| {
                                req.headers()
                                    .get(name)
                                    .and_then(|v| v.to_str().ok())
                                    .map(str::to_string)
                            };
                            let (authorization, content_type) =
                                (header("authorization"), header("content-type"));
                            let bytes = req
                                .into_body()
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                            let (status, retry_after, json) =
                                handle(&state, &token, &method, authorization.as_deref(), &body);
                            let mut recorded = json.clone();
                            if status != 200 {
                                recorded = json!({"status": status});
                            }
                            lock(&state).calls.push(Call {
                                method,
                                path,
                                authorization,
                                content_type,
                                body,
                                answer: recorded,
                            });
                            tick.send_replace(());
                            Ok::<_, Infallible>(answer(status, retry_after, &json))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(FakeSlack {
            addr,
            token: token.to_string(),
            state,
            logged,
            task,
        })
    }

    /// The Web API's base, for a webhook's `url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/api/", self.addr)
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.state).calls.clone()
    }

    /// The messages in the channel (not replies), oldest first.
    pub fn messages(&self) -> Vec<Message> {
        lock(&self.state).messages.values().cloned().collect()
    }

    /// The next `n`-th answers to `method` fail as scripted, in order.
    pub fn script(&self, method: &str, answers: Vec<Scripted>) {
        lock(&self.state)
            .scripted
            .entry(method.to_string())
            .or_default()
            .extend(answers);
    }

    /// The calls once `until` holds of them, checked after every call; `None` after
    /// `timeout`.
    pub async fn calls_when(
        &self,
        timeout: Duration,
        until: impl Fn(&[Call]) -> bool,
    ) -> Option<Vec<Call>> {
        // Subscribed before the first look, so no call in between goes unseen.
        let mut logged = self.logged.subscribe();
        let wait = async {
            loop {
                let calls = self.calls();
                if until(&calls) {
                    return calls;
                }
                if logged.changed().await.is_err() {
                    return calls;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.ok()
    }
}
