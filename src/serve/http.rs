//! The HTTP surface: `/metrics`, `/healthz`, `/readyz`, `/status`, `/runbooks`, and the
//! silences API (`/api/v1/silences`). Every page is rendered from the snapshot published last
//! (`snapshot::Publisher::current`), so a hung broker can never make a scrape wait.
//!
//! The server faces whatever can reach its address, so every resource a client can hold is
//! bounded: connections (a semaphore), header bytes and time, connection lifetime, and the
//! request body, which is read only by the silences API (16 KiB within 5 s) and never
//! elsewhere. HTTPS (rustls) and a credential for everything but `/healthz`, `/readyz` and
//! `/runbooks` are optional; without a credential, a change to silences needs the local token that the
//! daemon keeps in its state directory, from loopback, naming a loopback host.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Incoming};
use hyper::header::{
    HeaderValue, ACCEPT, ALLOW, AUTHORIZATION, CONNECTION, CONTENT_TYPE, VARY, WWW_AUTHENTICATE,
};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;

use crate::alert::peers::auth::{LiveKey, PeerKey};
use crate::alert::peers::PEER_PATH;
use crate::config::live::{self, Current};
use crate::config::{Config, HttpAuth, HttpTlsError, Secret};
use crate::observe::self_metrics::ProcessFigures;
use crate::serve::runbooks::RUNBOOKS_PATH;
use crate::serve::snapshot::Publisher;

/// Far more than the scrapers and dashboards of one watchdog; a client flood beyond it
/// waits in the kernel's accept queue instead of costing tasks and buffers here.
pub const MAX_CONNECTIONS: usize = 64;
/// Headers must arrive within this, and a TLS handshake must end within it.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Request line and headers; the body is never read, so this bounds what one connection
/// can make the server buffer.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// A slow or idle client may hold a connection this long at most.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(30);
/// Connections past a cap kept open at once to answer `/healthz` and `/readyz` (and
/// nothing else): a flood of slow clients must not make the kubelet or systemd think the
/// daemon hung and restart it (issue 27 item 10, issue 38 item 8). See `ProbeLane`.
pub const PROBE_LANE: usize = 16;
/// Connections one client address may hold at once for anything but the probes: one
/// client cannot take every slot.
pub const PER_CLIENT: usize = 16;
const REALM: &str = "kafka-watchdog";

/// What the server does beyond routing. The default is plain HTTP without credentials.
#[derive(Clone)]
pub struct ServeOptions {
    pub tls: Option<TlsAcceptor>,
    /// Asked for by every page but `/healthz`, `/readyz` and `/runbooks`.
    pub auth: Option<HttpAuth>,
    /// Without `auth`: the token that changes to silences must carry (see
    /// [`create_local_token`]); none refuses every change.
    pub local_token: Option<Secret>,
    /// With `peers:`: what `/api/v1/peer` asks of a peer instead of `auth`.
    pub peer_key: Option<Arc<LiveKey>>,
    pub max_connections: usize,
    /// Stamped by the accept loop at each connection and each idle second: whether the
    /// server makes progress (`/healthz`, the systemd watchdog).
    pub progress: Option<crate::model::progress::Stamp>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            tls: None,
            auth: None,
            local_token: None,
            peer_key: None,
            max_connections: MAX_CONNECTIONS,
            progress: None,
        }
    }
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("tls", &self.tls.is_some())
            .field("auth", &self.auth)
            .field("local_token", &self.local_token.is_some())
            .field("peer_key", &self.peer_key.is_some())
            .field("max_connections", &self.max_connections)
            .finish()
    }
}

impl ServeOptions {
    /// The `http:` settings of `config`. The certificate and key are read again here:
    /// loading checked them, but the files may have changed since.
    pub fn from_config(config: &Config) -> Result<Self, HttpTlsError> {
        let tls = match &config.http_tls {
            Some(t) => Some(TlsAcceptor::from(t.server_config()?)),
            None => None,
        };
        Ok(ServeOptions {
            tls,
            auth: config.http_auth.clone(),
            local_token: None,
            peer_key: config.peers.as_ref().map(|p| Arc::new(LiveKey::of(&p.key))),
            max_connections: MAX_CONNECTIONS,
            progress: None,
        })
    }
}

/// The file in the state directory that holds the local write token.
pub const LOCAL_TOKEN_FILE: &str = "api-token";

/// Makes a new local write token and keeps it in `<state_dir>/api-token`, readable by its
/// owner only. Without `http.auth`, a change to silences must carry it: being on loopback
/// is no credential (a sidecar proxy forwards from loopback, a browser page can post to
/// 127.0.0.1, DNS rebinding gives a hostile name a loopback address), while reading a file
/// of the daemon's user is one. `kafka-watchdog silence -c <config>` reads it, run as root
/// or as that user. A new one at each start: a leaked token ends with the process.
pub fn create_local_token(state_dir: &std::path::Path) -> std::io::Result<Secret> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut bytes = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| std::io::Error::other("the system's random source failed"))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let path = state_dir.join(LOCAL_TOKEN_FILE);
    let tmp = state_dir.join(format!(".{LOCAL_TOKEN_FILE}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(token.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    Ok(Secret::new(token))
}

/// The local write token a running daemon keeps in `state_dir`, if this user can read it.
pub fn read_local_token(state_dir: &std::path::Path) -> std::io::Result<Secret> {
    let text = std::fs::read_to_string(state_dir.join(LOCAL_TOKEN_FILE))?;
    Ok(Secret::new(text.trim()))
}

/// Whether the `Host` of a request names this machine by a loopback address or
/// `localhost`: a page that DNS rebinding pointed at 127.0.0.1 still sends its own name.
fn host_is_loopback(req: &Request<Incoming>) -> bool {
    let Some(host) = req
        .headers()
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().host())
    else {
        return false;
    };
    let host = host.trim();
    // "[::1]:8080", "127.0.0.1:8080", "localhost", "localhost:8080".
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether a request says its body is JSON. A browser page can post `text/plain` to any
/// address without asking; it cannot post `application/json` elsewhere without a CORS
/// preflight, which this server never grants.
fn is_json(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// Compares a secret with what a client sent in time that does not depend on where they
/// differ. Both sides are hashed first, so the comparison is over equal lengths and even
/// the length of the secret stays hidden.
fn secrets_equal(sent: &[u8], secret: &[u8]) -> bool {
    let a = ring::digest::digest(&ring::digest::SHA256, sent);
    let b = ring::digest::digest(&ring::digest::SHA256, secret);
    let diff = a
        .as_ref()
        .iter()
        .zip(b.as_ref())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // Keeps the optimizer from turning the fold into an early exit.
    std::hint::black_box(diff) == 0
}

/// Whether the `Authorization` header carries the configured credential. The scheme name
/// is case-insensitive (RFC 9110); the parts an attacker sends are parsed without care
/// for timing, the secrets are compared only through `secrets_equal`.
fn authorized(auth: &HttpAuth, header: Option<&HeaderValue>) -> bool {
    let Some(value) = header.and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let value = value.trim();
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    let rest = rest.trim();
    match auth {
        HttpAuth::Basic { username, password } => {
            if !scheme.eq_ignore_ascii_case("basic") {
                return false;
            }
            let Ok(decoded) = BASE64.decode(rest) else {
                return false;
            };
            let Some(colon) = decoded.iter().position(|&b| b == b':') else {
                return false;
            };
            let user_ok = secrets_equal(&decoded[..colon], username.as_bytes());
            let password_ok = secrets_equal(&decoded[colon + 1..], password.expose().as_bytes());
            // Both are compared whatever the first gave, so timing does not tell which failed.
            user_ok & password_ok
        }
        HttpAuth::Bearer { token } => {
            scheme.eq_ignore_ascii_case("bearer")
                && secrets_equal(rest.as_bytes(), token.expose().as_bytes())
        }
    }
}

fn unauthorized(auth: &HttpAuth) -> Response<Full<Bytes>> {
    let mut r = text(
        StatusCode::UNAUTHORIZED,
        "text/plain; charset=utf-8",
        "credentials required (only /healthz, /readyz and /runbooks are open)\n".into(),
    );
    let challenge = match auth {
        HttpAuth::Basic { .. } => format!("Basic realm=\"{REALM}\", charset=\"UTF-8\""),
        HttpAuth::Bearer { .. } => format!("Bearer realm=\"{REALM}\""),
    };
    if let Ok(v) = HeaderValue::from_str(&challenge) {
        r.headers_mut().insert(WWW_AUTHENTICATE, v);
    }
    r
}

/// Answers one request. A request that comes with a body is refused and its connection
/// closed after the answer: the body is never read, so a client cannot make the server
/// buffer more than the headers.
fn respond(
    published: &Publisher,
    auth: Option<&HttpAuth>,
    peer_key: Option<&PeerKey>,
    req: &Request<Incoming>,
    own: Option<ProcessFigures>,
) -> Response<Full<Bytes>> {
    let has_body = !req.body().is_end_stream();
    let mut r = if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "only GET is served\n".into(),
        );
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        r
    } else if has_body {
        text(
            StatusCode::PAYLOAD_TOO_LARGE,
            "text/plain; charset=utf-8",
            "a request body is not accepted\n".into(),
        )
    } else if let (PEER_PATH, Some(key)) = (req.uri().path(), peer_key) {
        // Peers prove who they are with the peer key, never with the credential that
        // writes silences (issue 38 item 5).
        peer(published, key, req)
    } else {
        // Everything but the probes and the runbooks (the project's own documentation,
        // opened from a chat link at night) is guarded, so a page added later is guarded
        // too and a client without credentials cannot tell which pages exist.
        match auth {
            Some(a)
                if !matches!(req.uri().path(), "/healthz" | "/readyz" | RUNBOOKS_PATH)
                    && !authorized(a, req.headers().get(AUTHORIZATION)) =>
            {
                unauthorized(a)
            }
            _ => route(published, req, own),
        }
    };
    if has_body {
        r.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    r
}

/// Where the silences API lives.
pub const SILENCES_PATH: &str = "/api/v1/silences";
/// A silence request is a few hundred bytes.
const MAX_API_BODY: usize = 16 * 1024;

fn json(status: StatusCode, value: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut body = serde_json::to_string_pretty(value).unwrap_or_default();
    body.push('\n');
    text(status, "application/json", body)
}

fn api_error(status: StatusCode, message: impl Into<String>) -> Response<Full<Bytes>> {
    json(status, &serde_json::json!({"error": message.into()}))
}

/// A request that changes silences: the one kind of request whose body is read.
fn is_api_write(req: &Request<Incoming>) -> bool {
    let path = req.uri().path();
    (path == SILENCES_PATH && req.method() == Method::POST)
        || (path.starts_with(&format!("{SILENCES_PATH}/")) && req.method() == Method::DELETE)
}

/// Adds (POST) or expires (DELETE .../<id>) a silence: what keeps pages from being sent,
/// so whoever reaches the port must not be able to do it (issue 27 item 6). With
/// `http.auth` its credential is required; without it, a client on loopback that sends
/// the local token (see [`create_local_token`]) and names the host by a loopback address.
/// A body must say it is JSON.
async fn api_write(
    published: &Publisher,
    auth: Option<&HttpAuth>,
    local_token: Option<&Secret>,
    peer: Option<SocketAddr>,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    if let Some(refused) = write_refused(auth, local_token, peer, &req) {
        return refused;
    }
    if req.method() == Method::POST && !is_json(&req) {
        return api_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a silence request is JSON: send Content-Type: application/json",
        );
    }
    let Some(alerting) = published.alerting() else {
        return api_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "alerting has not started yet",
        );
    };
    let now = std::time::SystemTime::now();
    if req.method() == Method::DELETE {
        let id = req.uri().path()[SILENCES_PATH.len() + 1..].to_string();
        return match alerting.expire_silence(&id, now).await {
            Ok(true) => {
                published.refresh();
                json(StatusCode::OK, &serde_json::json!({"expired": id}))
            }
            Ok(false) => api_error(StatusCode::NOT_FOUND, format!("no silence {id}")),
            Err(e) => api_error(StatusCode::CONFLICT, e.to_string()),
        };
    }
    let who = match auth {
        Some(HttpAuth::Basic { username, .. }) => username.clone(),
        _ => "api".to_string(),
    };
    let mut request = match silence_request(req).await {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    if request.created_by.is_none() {
        request.created_by = Some(who);
    }
    let clusters = published.current().clusters.clone();
    match alerting.add_silence(&request, &clusters, now).await {
        Ok(s) => {
            // /status and the metrics show it at once, as the silences API does.
            published.refresh();
            json(
                StatusCode::CREATED,
                &crate::model::silence::to_json(&s, now),
            )
        }
        Err(e) => api_error(StatusCode::BAD_REQUEST, e.to_string()),
    }
}

/// Why a change to silences is refused before it is read, if it is: a wrong credential
/// with `http.auth`; without it, a caller that is not local or lacks the local token.
fn write_refused(
    auth: Option<&HttpAuth>,
    local_token: Option<&Secret>,
    peer: Option<SocketAddr>,
    req: &Request<Incoming>,
) -> Option<Response<Full<Bytes>>> {
    match auth {
        Some(a) if !authorized(a, req.headers().get(AUTHORIZATION)) => {
            return Some(unauthorized(a))
        }
        Some(_) => {}
        None => {
            if !peer.is_some_and(|p| p.ip().is_loopback()) {
                return Some(api_error(
                    StatusCode::FORBIDDEN,
                    "silences can be changed from loopback only, unless http.auth is configured",
                ));
            }
            if !host_is_loopback(req) {
                return Some(api_error(
                    StatusCode::FORBIDDEN,
                    "without http.auth, a change to silences must name this host as localhost or a loopback address (Host header)",
                ));
            }
            let local = local_token.map(|t| HttpAuth::Bearer { token: t.clone() });
            if !local
                .as_ref()
                .is_some_and(|l| authorized(l, req.headers().get(AUTHORIZATION)))
            {
                return Some(api_error(
                    StatusCode::UNAUTHORIZED,
                    format!(
                        "without http.auth, a change to silences needs the daemon's local token (Authorization: Bearer, from {LOCAL_TOKEN_FILE} in its state directory, readable by root and the daemon's user): `kafka-watchdog silence ... -c <its configuration>` sends it{}",
                        if local_token.is_none() {
                            "; this daemon could not write one, so changes are refused until http.auth is configured"
                        } else {
                            ""
                        }
                    ),
                ));
            }
        }
    }
    None
}

/// The silence request in the body, bounded in size and time.
async fn silence_request(
    req: Request<Incoming>,
) -> Result<crate::model::silence::Request, Response<Full<Bytes>>> {
    use http_body_util::BodyExt;
    let body = http_body_util::Limited::new(req.into_body(), MAX_API_BODY).collect();
    let bytes = match tokio::time::timeout(HEADER_TIMEOUT, body).await {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(_)) => {
            return Err(api_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("a silence request is at most {MAX_API_BODY} bytes"),
            ))
        }
        Err(_) => {
            return Err(api_error(
                StatusCode::REQUEST_TIMEOUT,
                "the body did not arrive in time",
            ))
        }
    };
    serde_json::from_slice(&bytes).map_err(|e| {
        api_error(
            StatusCode::BAD_REQUEST,
            format!("not a silence request ({e}); expected JSON with comment, ends_at or duration, and optionally cluster, broker, kind, starts_at, created_by"),
        )
    })
}

fn route(
    published: &Publisher,
    req: &Request<Incoming>,
    own: Option<ProcessFigures>,
) -> Response<Full<Bytes>> {
    match req.uri().path() {
        SILENCES_PATH => silences(published),
        "/metrics" => metrics(published, req, own),
        "/healthz" => healthz(published),
        "/readyz" => readyz(published),
        RUNBOOKS_PATH => runbooks(),
        "/status" => {
            let snapshot = published.current();
            text(
                StatusCode::OK,
                "application/json",
                crate::serve::status::render(
                    &published.instance_id,
                    snapshot.reports(),
                    &published.extras(&snapshot),
                ),
            )
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found: try /metrics, /status, /runbooks, /healthz, /readyz or /api/v1/silences\n"
                .into(),
        ),
    }
}

/// The runbooks as a page (`serve::runbooks`). It links nowhere else and runs no script,
/// and the browser is told so.
fn runbooks() -> Response<Full<Bytes>> {
    let mut r = text(
        StatusCode::OK,
        "text/html; charset=utf-8",
        crate::serve::runbooks::page().into(),
    );
    r.headers_mut().insert(
        hyper::header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'"),
    );
    r
}

/// What another watchdog asks of this one: its silences and what it delivered, signed
/// for the ask it answers (`alert::peers::auth`); an ask without the peer key's proof is
/// refused.
fn peer(published: &Publisher, key: &PeerKey, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let header = req
        .headers()
        .get(crate::alert::peers::auth::HEADER)
        .and_then(|v| v.to_str().ok());
    let nonce = match key.check_ask(header, std::time::SystemTime::now()) {
        Ok(n) => n,
        Err(why) => {
            return text(
                StatusCode::UNAUTHORIZED,
                "text/plain; charset=utf-8",
                format!("{why}\n"),
            )
        }
    };
    let Some(a) = published.alerting() else {
        return api_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "alerting has not started yet",
        );
    };
    let answer = a.peer_answer(&published.instance_id, published.current().clusters.clone());
    let body = serde_json::to_string(&answer).unwrap_or_default();
    let signature = key.sign_answer(&nonce, body.as_bytes());
    let mut r = text(StatusCode::OK, "application/json", body);
    if let Ok(v) = HeaderValue::from_str(&signature) {
        r.headers_mut().insert(crate::alert::peers::auth::HEADER, v);
    }
    r
}

/// The silences in force, as the API lists them.
fn silences(published: &Publisher) -> Response<Full<Bytes>> {
    let now = std::time::SystemTime::now();
    let list: Vec<serde_json::Value> = published
        .alerting()
        .map(|a| a.silences())
        .unwrap_or_default()
        .iter()
        .map(|s| crate::model::silence::to_json(s, now))
        .collect();
    json(StatusCode::OK, &serde_json::json!({ "silences": list }))
}

/// The metrics page, in the format the scraper asks for, with the process's own figures
/// `own` (read before, off the runtime).
fn metrics(
    published: &Publisher,
    req: &Request<Incoming>,
    own: Option<ProcessFigures>,
) -> Response<Full<Bytes>> {
    let snapshot = published.current();
    let extras = crate::serve::metrics::Extras {
        process: own,
        ..published.extras(&snapshot)
    };
    let page = crate::serve::metrics::render(snapshot.reports(), &extras);
    let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
    let mut r = if crate::serve::metrics::wants_openmetrics(accept) {
        text(StatusCode::OK, crate::serve::metrics::CONTENT_TYPE, page)
    } else {
        text(
            StatusCode::OK,
            crate::serve::metrics::TEXT_CONTENT_TYPE,
            crate::serve::metrics::to_text_004(&page),
        )
    };
    // The answer depends on Accept: a cache must not hand one format to the other.
    r.headers_mut()
        .insert(VARY, HeaderValue::from_static("accept"));
    r
}

/// Alive while every round loop, the webhook dispatcher and the HTTP server make progress
/// (`model::progress`); 503 naming each one over its allowance, and since when, otherwise.
/// A lock and a few lines: cheap enough to be asked every second.
fn healthz(published: &Publisher) -> Response<Full<Bytes>> {
    let stuck = published.progress.stuck(std::time::Instant::now());
    if stuck.is_empty() {
        return text(StatusCode::OK, "text/plain; charset=utf-8", "ok\n".into());
    }
    let now = std::time::SystemTime::now();
    let mut body = String::from("stuck:\n");
    for l in stuck {
        body.push_str(&format!(
            "{}: no progress for {} s (allowed {} s), since {}\n",
            l.what,
            l.silent.as_secs(),
            l.allowed.as_secs(),
            crate::model::time::rfc3339(now - l.silent)
        ));
    }
    text(
        StatusCode::SERVICE_UNAVAILABLE,
        "text/plain; charset=utf-8",
        body,
    )
}

/// Ready once every cluster has completed a round.
fn readyz(published: &Publisher) -> Response<Full<Bytes>> {
    let waiting = published.current().waiting_for();
    if waiting.is_empty() {
        text(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            "ready\n".into(),
        )
    } else {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain; charset=utf-8",
            format!(
                "not ready: no round completed yet for cluster(s) {}\n",
                waiting.join(", ")
            ),
        )
    }
}

/// Binds the listener; errors here are start-up errors (address in use, permission).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves plain HTTP without credentials until `shutdown` turns true.
pub async fn serve(
    listener: Arc<TcpListener>,
    published: Arc<Publisher>,
    shutdown: watch::Receiver<bool>,
) {
    serve_with(listener, published, shutdown, ServeOptions::default()).await
}

/// Serves with `options` until `shutdown` turns true.
///
/// Every connection is accepted at once. Within its address's cap and the global one it is
/// served as usual; past either it goes to the probes' lane, where `/healthz` and `/readyz`
/// are answered and anything else gets 503 busy (issue 38 item 8: behind a service mesh
/// every client, the kubelet too, shares one address; a probe that waited in the kernel's
/// queue, or was closed, got a daemon that works restarted).
pub async fn serve_with(
    listener: Arc<TcpListener>,
    published: Arc<Publisher>,
    mut shutdown: watch::Receiver<bool>,
    options: ServeOptions,
) {
    let slots = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let auth = options.auth.as_ref().map(|a| Arc::new(LiveAuth::of(a)));
    let lane = Arc::new(ProbeLane::default());
    let per_client: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>> =
        Arc::default();
    loop {
        tick(&options.progress);
        let accepted = tokio::select! {
            a = listener.accept() => a,
            // Idle is progress too: the loop is there to accept.
            _ = tokio::time::sleep(IDLE_TICK) => continue,
            _ = shutdown.changed() => return,
        };
        let (stream, peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "accepting an HTTP connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (published, options, auth) = (published.clone(), options.clone(), auth.clone());
        let full = ClientSlot::take(&per_client, peer.ip())
            .and_then(|client| Some((slots.clone().try_acquire_owned().ok()?, client)));
        match full {
            Some(hold) => {
                tokio::spawn(serve_one(
                    stream, peer, published, options, auth, false, hold,
                ));
            }
            None => {
                tracing::debug!(%peer, "HTTP connections over a cap: this one answers the probes only");
                lane.admit(|hold| {
                    tokio::spawn(serve_one(
                        stream, peer, published, options, auth, true, hold,
                    ))
                });
            }
        }
    }
}

/// One connection, with TLS when configured, for `CONNECTION_LIFETIME` at most (a
/// probes-only one `HEADER_TIMEOUT`); `hold` is its place (a slot and its address's share,
/// or its place in the probes' lane), given back when it ends.
async fn serve_one<H: Send>(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    published: Arc<Publisher>,
    options: ServeOptions,
    auth: Option<Arc<LiveAuth>>,
    probes_only: bool,
    hold: H,
) {
    let _hold = hold;
    let ctx = Conn::new(&options, auth, peer, probes_only);
    let connection = async {
        match &options.tls {
            None => connection(stream, published, ctx).await,
            Some(acceptor) => {
                match tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => connection(tls, published, ctx).await,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    }
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                }
            }
        }
    };
    let lifetime = if probes_only {
        HEADER_TIMEOUT
    } else {
        CONNECTION_LIFETIME
    };
    let _ = tokio::time::timeout(lifetime, connection).await;
}

/// Connections in the probes' lane, oldest first, by id, with the handle that closes each.
type Lane = std::collections::VecDeque<(u64, Option<tokio::task::AbortHandle>)>;

/// The connections past a cap, which answer the probes only. At most `PROBE_LANE`: a new
/// one closes the oldest, since a probe sends its request as it connects and is answered
/// within milliseconds, and one still there is not a probe. A flood of idle clients then
/// holds `PROBE_LANE` connections, and never keeps a probe from its answer.
#[derive(Default)]
struct ProbeLane {
    /// The next id, and the lane.
    open: std::sync::Mutex<(u64, Lane)>,
}

impl ProbeLane {
    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, Lane)> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a connection in the lane (`start` spawns it, holding the guard that takes
    /// it out when it ends), closing the oldest when the lane is full. Called by the
    /// accept loop alone, so no other connection is admitted between the two locks.
    fn admit(self: &Arc<Self>, start: impl FnOnce(LaneGuard) -> tokio::task::JoinHandle<()>) {
        let id = {
            let mut open = self.lock();
            let id = open.0;
            open.0 += 1;
            open.1.push_back((id, None));
            if open.1.len() > PROBE_LANE {
                if let Some((_, Some(oldest))) = open.1.pop_front() {
                    oldest.abort();
                }
            }
            id
        };
        let task = start(LaneGuard {
            lane: self.clone(),
            id,
        });
        if let Some(entry) = self.lock().1.iter_mut().find(|(i, _)| *i == id) {
            entry.1 = Some(task.abort_handle());
        }
    }
}

/// A connection's place in the probes' lane, given back when it ends.
struct LaneGuard {
    lane: Arc<ProbeLane>,
    id: u64,
}

impl Drop for LaneGuard {
    fn drop(&mut self) {
        self.lane.lock().1.retain(|(i, _)| *i != self.id);
    }
}

/// How often an idle accept loop stamps its progress.
const IDLE_TICK: Duration = Duration::from_secs(1);

fn tick(progress: &Option<crate::model::progress::Stamp>) {
    if let Some(p) = progress {
        p.tick();
    }
}

/// One client address's share of the connections, given back when the connection ends.
struct ClientSlot {
    counts: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
    ip: std::net::IpAddr,
}

impl ClientSlot {
    /// None when the address holds `PER_CLIENT` connections already.
    fn take(
        counts: &Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
        ip: std::net::IpAddr,
    ) -> Option<ClientSlot> {
        let mut c = counts.lock().unwrap_or_else(|p| p.into_inner());
        let n = c.entry(ip).or_default();
        if *n >= PER_CLIENT {
            return None;
        }
        *n += 1;
        Some(ClientSlot {
            counts: counts.clone(),
            ip,
        })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = c.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                c.remove(&self.ip);
            }
        }
    }
}

/// `http.auth` as its secret's file holds it now (`config::live`): a rotated password or
/// token is checked from the next request on, without a reload; a rewrite that cannot be
/// used keeps the last good one (said and counted there). Made once per server.
struct LiveAuth {
    auth: HttpAuth,
    secret: Option<Current>,
}

impl LiveAuth {
    fn of(auth: &HttpAuth) -> LiveAuth {
        let secret = match auth {
            HttpAuth::Basic { password: s, .. } | HttpAuth::Bearer { token: s } => s,
        };
        let secret = secret.file().and_then(|_| {
            // The file was read well while loading; unreadable now, it keeps that value.
            live::secret(secret)
                .inspect_err(|why| tracing::warn!(problem = %why, "cannot watch http.auth's file: the value loaded stays in use"))
                .ok()
        });
        LiveAuth {
            auth: auth.clone(),
            secret,
        }
    }

    /// The credential to check a request against now.
    fn now(&self) -> HttpAuth {
        let Some(current) = &self.secret else {
            return self.auth.clone();
        };
        match &self.auth {
            HttpAuth::Basic { username, password } => HttpAuth::Basic {
                username: username.clone(),
                password: password.with_value(current.text()),
            },
            HttpAuth::Bearer { token } => HttpAuth::Bearer {
                token: token.with_value(current.text()),
            },
        }
    }
}

/// What one connection is served with.
#[derive(Clone)]
struct Conn {
    auth: Option<Arc<LiveAuth>>,
    peer_key: Option<Arc<LiveKey>>,
    local_token: Option<Secret>,
    peer: Option<SocketAddr>,
    /// A reserved connection: the probes only.
    probes_only: bool,
}

impl Conn {
    fn new(
        options: &ServeOptions,
        auth: Option<Arc<LiveAuth>>,
        peer: SocketAddr,
        probes_only: bool,
    ) -> Conn {
        Conn {
            auth,
            peer_key: options.peer_key.clone(),
            local_token: options.local_token.clone(),
            peer: Some(peer),
            probes_only,
        }
    }
}

async fn connection<S>(stream: S, published: Arc<Publisher>, ctx: Conn)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let probes_only = ctx.probes_only;
    let service = service_fn(move |req: Request<Incoming>| {
        let published = published.clone();
        let ctx = ctx.clone();
        async move {
            let auth = ctx.auth.as_ref().map(|a| a.now());
            let response = if ctx.probes_only && !matches!(req.uri().path(), "/healthz" | "/readyz")
            {
                let mut r = text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain; charset=utf-8",
                    "busy: every connection (or this address's share) is taken; only /healthz and /readyz are answered now\n"
                        .into(),
                );
                r.headers_mut()
                    .insert(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"));
                r
            } else if is_api_write(&req) {
                api_write(
                    &published,
                    auth.as_ref(),
                    ctx.local_token.as_ref(),
                    ctx.peer,
                    req,
                )
                .await
            } else {
                // The page's `process_*` figures are read from /proc off the runtime
                // (issue 38 item 3), before the page is made.
                let own = match req.uri().path() {
                    "/metrics" => Some(crate::observe::self_metrics::read_own().await),
                    _ => None,
                };
                respond(
                    &published,
                    auth.as_ref(),
                    ctx.peer_key.as_ref().map(|k| k.now()).as_deref(),
                    &req,
                    own,
                )
            };
            Ok::<_, Infallible>(response)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        // One answer per probes-only connection: its place in the lane is for the next.
        .keep_alive(!probes_only)
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// Serves one connection on `stream` as the server serves a client at `peer` with
/// `options` (their TLS aside), in the probes' lane when `probes_only`: for the fuzz
/// target in fuzz/, which feeds it raw requests without a socket.
#[doc(hidden)]
pub async fn serve_stream(
    stream: impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
    published: Arc<Publisher>,
    options: &ServeOptions,
    peer: SocketAddr,
    probes_only: bool,
) {
    let auth = options.auth.as_ref().map(|a| Arc::new(LiveAuth::of(a)));
    connection(
        stream,
        published,
        Conn::new(options, auth, peer, probes_only),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{HttpTlsConfig, Secret};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    use tokio_rustls::rustls::crypto::ring as ring_provider;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
    use tokio_rustls::rustls::{ClientConfig, RootCertStore};
    use tokio_rustls::TlsConnector;

    const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/observe/wire/testdata");
    const CA: &[u8] = include_bytes!("../observe/wire/testdata/ca.pem");
    const ANSWER_WITHIN: Duration = Duration::from_secs(5);

    struct Server {
        addr: SocketAddr,
        stop: watch::Sender<bool>,
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.stop.send(true);
        }
    }

    async fn start(options: ServeOptions) -> Server {
        start_with(Publisher::new("wd-test", vec!["orders".into()]), options).await
    }

    async fn start_with(published: Arc<Publisher>, options: ServeOptions) -> Server {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stop_rx) = watch::channel(false);
        tokio::spawn(serve_with(Arc::new(listener), published, stop_rx, options));
        Server { addr, stop }
    }

    fn with_auth(auth: HttpAuth) -> ServeOptions {
        ServeOptions {
            auth: Some(auth),
            ..ServeOptions::default()
        }
    }

    fn basic() -> HttpAuth {
        HttpAuth::Basic {
            username: "prometheus".into(),
            password: Secret::new("pa:ss wörd"),
        }
    }

    /// Sends `head` (request line and headers, without the blank line) and reads until the
    /// server closes: (status, everything after the status line).
    async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(s: S, head: &str) -> (u16, String) {
        send(
            s,
            &format!("{head}\r\nHost: test\r\nConnection: close\r\n\r\n"),
        )
        .await
    }

    /// Sends `request` whole and reads until the server closes: (status, everything).
    async fn send<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, request: &str) -> (u16, String) {
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(ANSWER_WITHIN, s.read_to_end(&mut out))
            .await
            .expect("the server answers and closes")
            .unwrap();
        let out = String::from_utf8_lossy(&out).into_owned();
        let status = out
            .get(9..12)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status line in {out:?}"));
        (status, out)
    }

    async fn get(server: &Server, path: &str, headers: &[&str]) -> (u16, String) {
        let stream = TcpStream::connect(server.addr).await.unwrap();
        let mut head = format!("GET {path} HTTP/1.1");
        for h in headers {
            head.push_str("\r\n");
            head.push_str(h);
        }
        exchange(stream, &head).await
    }

    fn basic_header(user: &str, password: &str) -> String {
        format!(
            "Authorization: Basic {}",
            BASE64.encode(format!("{user}:{password}"))
        )
    }

    /// Sends a whole request as written and reads the answer's status and text.
    async fn raw(addr: SocketAddr, request: &str) -> (u16, String) {
        send(TcpStream::connect(addr).await.unwrap(), request).await
    }

    fn silence_post(host: &str, content_type: &str, token: Option<&str>) -> String {
        let body = r#"{"comment":"test","duration":"1h"}"#;
        let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        format!(
            "POST {SILENCES_PATH} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    /// Issue 27 item 6: without `http.auth`, anything that reached loopback could mute all
    /// paging for 30 days: a sidecar proxy, a browser page posting `text/plain` to
    /// 127.0.0.1, a DNS-rebound name. A change now needs the local token, a JSON body and a
    /// loopback Host. (No alerting runs here: a request that passes every guard gets 503.)
    #[tokio::test]
    async fn without_auth_a_silence_needs_the_local_token_json_and_a_loopback_host() {
        let dir = std::env::temp_dir().join(format!("kw-http-token-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let token = create_local_token(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(LOCAL_TOKEN_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "readable by its owner only");
        assert_eq!(read_local_token(&dir).unwrap().expose(), token.expose());
        assert_eq!(token.expose().len(), 64);
        let server = start(ServeOptions {
            local_token: Some(token.clone()),
            ..ServeOptions::default()
        })
        .await;
        let t = token.expose();
        let json = "application/json";
        // What a page or a proxy can send: no token.
        let (code, body) = raw(server.addr, &silence_post("127.0.0.1", "text/plain", None)).await;
        assert_eq!(code, 401, "{body}");
        assert!(body.contains(LOCAL_TOKEN_FILE), "{body}");
        let (code, _) = raw(server.addr, &silence_post("127.0.0.1", json, Some("guess"))).await;
        assert_eq!(code, 401);
        // DNS rebinding: the right address under a hostile name.
        let (code, body) = raw(
            server.addr,
            &silence_post("evil.example:8080", json, Some(t)),
        )
        .await;
        assert_eq!(code, 403, "{body}");
        // A simple cross-site form post is text/plain.
        let (code, _) = raw(
            server.addr,
            &silence_post("localhost", "text/plain", Some(t)),
        )
        .await;
        assert_eq!(code, 415);
        for host in ["127.0.0.1:9644", "localhost", "[::1]:9644"] {
            let (code, body) = raw(server.addr, &silence_post(host, json, Some(t))).await;
            assert_eq!(code, 503, "{host}: past every guard: {body}");
        }
        let (code, body) = raw(
            server.addr,
            &format!("DELETE {SILENCES_PATH}/s-1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert_eq!(code, 401, "{body}");
        // A daemon that could not write its token refuses every change, and says why.
        let server = start(ServeOptions::default()).await;
        let (code, body) = raw(server.addr, &silence_post("localhost", json, Some(t))).await;
        assert_eq!(code, 401);
        assert!(body.contains("could not write one"), "{body}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn without_auth_everything_is_open() {
        let server = start(ServeOptions::default()).await;
        assert_eq!(get(&server, "/metrics", &[]).await.0, 200);
        assert_eq!(get(&server, "/status", &[]).await.0, 200);
        assert_eq!(get(&server, "/healthz", &[]).await.0, 200);
        assert_eq!(get(&server, "/readyz", &[]).await.0, 503);
    }

    /// The header block of an answer, lowercased, and its body.
    fn split_answer(answer: &str) -> (String, &str) {
        let (head, body) = answer.split_once("\r\n\r\n").expect("headers end");
        (head.to_ascii_lowercase(), body)
    }

    #[tokio::test]
    async fn metrics_answer_in_the_format_the_scraper_accepts() {
        let server = start(ServeOptions::default()).await;
        let prometheus = "Accept: application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        let (status, answer) = get(&server, "/metrics", &[prometheus]).await;
        assert_eq!(status, 200);
        let (head, body) = split_answer(&answer);
        assert!(
            head.contains("content-type: application/openmetrics-text; version=1.0.0"),
            "{head}"
        );
        assert!(head.contains("vary: accept"), "{head}");
        assert!(body.ends_with("# EOF\n"), "{body}");
        for accept in [
            "Accept: text/plain;version=0.0.4",
            "Accept: */*",
            "X-None: 1",
        ] {
            let (status, answer) = get(&server, "/metrics", &[accept]).await;
            assert_eq!(status, 200);
            let (head, body) = split_answer(&answer);
            assert!(
                head.contains("content-type: text/plain; version=0.0.4"),
                "{accept}: {head}"
            );
            assert!(!body.contains("# EOF"), "{accept}: {body}");
            assert!(
                body.contains("# TYPE process_cpu_seconds_total counter\n"),
                "{body}"
            );
        }
    }

    /// Every page reads the snapshot published last: a report, a refused reload.
    #[tokio::test]
    async fn pages_show_what_was_published_last() {
        let published = Publisher::new("wd-test", vec!["orders".into()]);
        let server = start_with(published.clone(), ServeOptions::default()).await;
        assert_eq!(get(&server, "/readyz", &[]).await.0, 503);
        let mut report =
            crate::judge::report::ClusterReport::empty("orders", std::time::UNIX_EPOCH);
        report.round = 5;
        published.publish(Arc::new(report));
        assert_eq!(get(&server, "/readyz", &[]).await.0, 200);
        let (_, metrics) = get(&server, "/metrics", &[]).await;
        assert!(
            metrics.contains("kafka_watchdog_rounds_total{cluster=\"orders\"} 5\n"),
            "{metrics}"
        );
        assert!(metrics.contains("kafka_watchdog_config_reload_success{} 1.0\n"));
        let (_, status) = get(&server, "/status", &[]).await;
        assert!(status.contains("\"round\": 5,"), "{status}");
        published.reload_done(false);
        let (_, metrics) = get(&server, "/metrics", &[]).await;
        assert!(
            metrics.contains("kafka_watchdog_config_reload_success{} 0.0\n"),
            "{metrics}"
        );
        let (_, status) = get(&server, "/status", &[]).await;
        assert!(
            status.contains("\"config_reload_success\": false"),
            "{status}"
        );
    }

    /// Issue 39: every alert rule's runbook_url led to a repository that does not exist.
    /// The watchdog serves its runbooks itself, without a credential (a runbook behind one
    /// is no use from a chat link at night, and it holds nothing secret), as HTML whose
    /// ids are the anchors the rules link to.
    #[tokio::test]
    async fn the_runbooks_are_served_openly_with_every_alert_rules_anchor() {
        let server = start(with_auth(basic())).await;
        let (status, answer) = get(&server, "/runbooks", &[]).await;
        assert_eq!(status, 200, "{answer}");
        let (head, body) = split_answer(&answer);
        assert!(
            head.contains("content-type: text/html; charset=utf-8"),
            "{head}"
        );
        assert!(
            head.contains("content-security-policy: default-src 'none'"),
            "{head}"
        );
        let rules: serde_norway::Value =
            serde_norway::from_str(include_str!("../../dashboards/alerts.yaml")).unwrap();
        let mut anchors = 0;
        for rule in rules["groups"]
            .as_sequence()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_sequence().unwrap())
        {
            let url = rule["annotations"]["runbook_url"].as_str().unwrap();
            let (_, anchor) = url.rsplit_once('#').expect("an anchor");
            assert!(
                body.contains(&format!(" id=\"{anchor}\"")),
                "{url}: no such anchor on /runbooks"
            );
            anchors += 1;
        }
        assert!(anchors >= 29, "{anchors} rules");
        // The page is rendered once; only the Date header may differ (a second may pass).
        let again = get(&server, "/runbooks", &[]).await.1;
        assert_eq!(split_answer(&again).1, body);
        let (status, _) = get(&server, "/runbooks/x", &[]).await;
        assert_eq!(status, 401, "only the page itself is open");
    }

    #[tokio::test]
    async fn basic_auth_guards_everything_but_the_probes() {
        let server = start(with_auth(basic())).await;
        let right = basic_header("prometheus", "pa:ss wörd");
        for path in ["/metrics", "/status"] {
            let (status, answer) = get(&server, path, &[]).await;
            assert_eq!(status, 401, "{path}");
            assert!(
                answer.contains("www-authenticate: Basic realm=\"kafka-watchdog\""),
                "{answer}"
            );
            for wrong in [
                basic_header("prometheus", "pa:ss"),
                basic_header("prometheus", "pa:ss wörd "),
                basic_header("grafana", "pa:ss wörd"),
                basic_header("", ""),
                "Authorization: Basic !!!".into(),
                "Authorization: Basic".into(),
                "Authorization: Bearer pa:ss wörd".into(),
                right.replace("Basic", "Digest"),
            ] {
                assert_eq!(get(&server, path, &[&wrong]).await.0, 401, "{path} {wrong}");
            }
            assert_eq!(get(&server, path, &[&right]).await.0, 200, "{path}");
            let lower = right.replace("Basic", "basic");
            assert_eq!(get(&server, path, &[&lower]).await.0, 200, "{path}");
        }
        assert_eq!(get(&server, "/healthz", &[]).await.0, 200);
        assert_eq!(get(&server, "/readyz", &[]).await.0, 503);
        assert_eq!(get(&server, "/nothing", &[]).await.0, 401);
        assert_eq!(get(&server, "/nothing", &[&right]).await.0, 404);
    }

    /// Issue 39 item 2: a token read from a file follows the file (a rotated Kubernetes
    /// Secret) with no reload: the next request is checked against what it holds now.
    #[tokio::test]
    async fn a_rotated_token_file_is_checked_by_the_next_request() {
        let dir = std::env::temp_dir().join(format!("kw-http-auth-rotate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "first-token\n").unwrap();
        let server = start(with_auth(HttpAuth::Bearer {
            token: Secret::from_file("first-token", file.clone()),
        }))
        .await;
        let (old, new) = (
            "Authorization: Bearer first-token",
            "Authorization: Bearer second-token",
        );
        assert_eq!(get(&server, "/metrics", &[old]).await.0, 200);
        std::fs::write(&file, "second-token\n").unwrap();
        crate::config::live::look_all();
        assert_eq!(
            get(&server, "/metrics", &[old]).await.0,
            401,
            "the old token is refused"
        );
        assert_eq!(
            get(&server, "/metrics", &[new]).await.0,
            200,
            "the new one is taken"
        );
        // A rewrite that cannot be used keeps the last good token.
        std::fs::write(&file, "").unwrap();
        crate::config::live::look_all();
        assert_eq!(get(&server, "/metrics", &[new]).await.0, 200);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn bearer_auth() {
        let token = "c2VjcmV0LXRva2Vu.x_y~z+/==";
        let server = start(with_auth(HttpAuth::Bearer {
            token: Secret::new(token),
        }))
        .await;
        let (status, answer) = get(&server, "/metrics", &[]).await;
        assert_eq!(status, 401);
        assert!(
            answer.contains("www-authenticate: Bearer realm=\"kafka-watchdog\""),
            "{answer}"
        );
        for wrong in [
            format!("Authorization: Bearer {}", &token[..token.len() - 1]),
            format!("Authorization: Bearer {token}x"),
            format!("Authorization: Basic {token}"),
            "Authorization: Bearer".into(),
        ] {
            assert_eq!(get(&server, "/metrics", &[&wrong]).await.0, 401, "{wrong}");
        }
        let right = format!("Authorization: Bearer {token}");
        assert_eq!(get(&server, "/metrics", &[&right]).await.0, 200);
        assert_eq!(get(&server, "/status", &[&right]).await.0, 200);
        assert_eq!(get(&server, "/healthz", &[]).await.0, 200);
    }

    #[test]
    fn secrets_compare_whole_values() {
        assert!(secrets_equal(b"s3cret", b"s3cret"));
        assert!(secrets_equal(b"", b""));
        assert!(
            !secrets_equal(b"s3cre", b"s3cret"),
            "a prefix is not the secret"
        );
        assert!(!secrets_equal(b"s3cretx", b"s3cret"));
        assert!(!secrets_equal(b"S3cret", b"s3cret"));
        assert!(!secrets_equal(b"", b"s3cret"));
    }

    fn tls_client() -> TlsConnector {
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(CA).unwrap())
            .unwrap();
        let mut config =
            ClientConfig::builder_with_provider(Arc::new(ring_provider::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        // As curl offers: the server must pick the one it speaks.
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        TlsConnector::from(Arc::new(config))
    }

    fn tls_options(auth: Option<HttpAuth>) -> ServeOptions {
        let tls = HttpTlsConfig {
            cert_file: format!("{TESTDATA}/server.pem").into(),
            key_file: format!("{TESTDATA}/server.key").into(),
        };
        ServeOptions {
            tls: Some(TlsAcceptor::from(tls.server_config().unwrap())),
            auth,
            ..ServeOptions::default()
        }
    }

    #[tokio::test]
    async fn https_with_the_configured_certificate() {
        let server = start(tls_options(Some(basic()))).await;
        let connect = || async {
            let tcp = TcpStream::connect(server.addr).await.unwrap();
            tls_client()
                .connect(ServerName::try_from("localhost").unwrap(), tcp)
                .await
                .expect("the handshake succeeds with the test CA")
        };
        let (status, _) = exchange(connect().await, "GET /healthz HTTP/1.1").await;
        assert_eq!(status, 200);
        let (status, _) = exchange(connect().await, "GET /metrics HTTP/1.1").await;
        assert_eq!(status, 401);
        let right = basic_header("prometheus", "pa:ss wörd");
        let (status, _) = exchange(
            connect().await,
            &format!("GET /metrics HTTP/1.1\r\n{right}"),
        )
        .await;
        assert_eq!(status, 200);
        let tls = connect().await;
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));

        // Plain HTTP to the TLS port gets no HTTP answer.
        let mut plain = TcpStream::connect(server.addr).await.unwrap();
        plain
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(ANSWER_WITHIN, plain.read_to_end(&mut out)).await;
        assert!(!out.starts_with(b"HTTP/"), "{out:?}");
    }

    /// The leaf certificate the server presents to a new connection (the client trusts the
    /// test CA and the renewed one).
    async fn served_leaf(addr: SocketAddr) -> Vec<u8> {
        let mut roots = RootCertStore::empty();
        for ca in [
            CA,
            &include_bytes!("../observe/wire/testdata/renewed-ca.pem")[..],
        ] {
            roots
                .add(CertificateDer::from_pem_slice(ca).unwrap())
                .unwrap();
        }
        let config =
            ClientConfig::builder_with_provider(Arc::new(ring_provider::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        let tcp = TcpStream::connect(addr).await.unwrap();
        let tls = TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .expect("the handshake succeeds");
        tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
    }

    /// Issue 39 item 2: cert-manager renews `http.tls`'s files in place (a Kubernetes
    /// Secret's `..data` swap); the next connection gets the new certificate, without a
    /// restart. Before, the acceptor kept the certificate it was started with.
    #[tokio::test]
    async fn a_renewed_certificate_is_served_to_the_next_connection() {
        let dir = std::env::temp_dir().join(format!("kw-http-renew-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let put = |name: &str, from: &str| {
            let tmp = dir.join(format!("{name}.tmp"));
            std::fs::copy(format!("{TESTDATA}/{from}"), &tmp).unwrap();
            std::fs::rename(&tmp, dir.join(name)).unwrap();
        };
        put("tls.crt", "server.pem");
        put("tls.key", "server.key");
        let tls = HttpTlsConfig {
            cert_file: dir.join("tls.crt"),
            key_file: dir.join("tls.key"),
        };
        let server = start(ServeOptions {
            tls: Some(TlsAcceptor::from(tls.server_config().unwrap())),
            ..ServeOptions::default()
        })
        .await;
        let first =
            CertificateDer::from_pem_slice(include_bytes!("../observe/wire/testdata/server.pem"))
                .unwrap();
        assert!(served_leaf(server.addr).await == first.to_vec());

        put("tls.crt", "renewed-server.pem");
        put("tls.key", "renewed-server.key");
        crate::config::live::look_all();
        let renewed = CertificateDer::from_pem_slice(include_bytes!(
            "../observe/wire/testdata/renewed-server.pem"
        ))
        .unwrap();
        assert!(
            served_leaf(server.addr).await == renewed.to_vec(),
            "the next connection still got the old certificate"
        );

        // A key that is not the certificate's: the last good pair stays served.
        put("tls.key", "server.key");
        crate::config::live::look_all();
        assert!(served_leaf(server.addr).await == renewed.to_vec());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_silent_client_cannot_hold_the_tls_handshake() {
        let server = start(ServeOptions {
            max_connections: 1,
            ..tls_options(None)
        })
        .await;
        let _silent = TcpStream::connect(server.addr).await.unwrap();
        // The only slot frees once the handshake times out.
        let started = tokio::time::Instant::now();
        let tcp = TcpStream::connect(server.addr).await.unwrap();
        let tls = tls_client()
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
        let (status, _) = exchange(tls, "GET /healthz HTTP/1.1").await;
        assert_eq!(status, 200);
        assert!(started.elapsed() < HEADER_TIMEOUT + Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_request_body_is_refused_without_being_read() {
        let server = start(ServeOptions::default()).await;
        let mut s = TcpStream::connect(server.addr).await.unwrap();
        // Announces a gigabyte and sends a little of it.
        s.write_all(
            b"GET /metrics HTTP/1.1\r\nHost: test\r\nContent-Length: 1073741824\r\n\r\nxxxxxxxx",
        )
        .await
        .unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(ANSWER_WITHIN, s.read_to_end(&mut out))
            .await
            .expect("answered and closed without waiting for the body")
            .unwrap();
        let out = String::from_utf8_lossy(&out);
        assert!(out.starts_with("HTTP/1.1 413"), "{out}");
        assert!(out.contains("connection: close"), "{out}");

        let mut s = TcpStream::connect(server.addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(ANSWER_WITHIN, s.read_to_end(&mut out))
            .await
            .expect("answered and closed without waiting for the last chunk")
            .unwrap();
        assert!(out.starts_with(b"HTTP/1.1 413"));
    }

    #[tokio::test]
    async fn oversized_headers_and_other_methods_are_refused() {
        let server = start(ServeOptions::default()).await;
        let big = format!("X-Padding: {}", "a".repeat(MAX_HEAD_BYTES + 1));
        let (status, _) = get(&server, "/healthz", &[&big]).await;
        assert_eq!(status, 431);
        let stream = TcpStream::connect(server.addr).await.unwrap();
        let (status, answer) = exchange(stream, "DELETE /status HTTP/1.1").await;
        assert_eq!(status, 405);
        assert!(answer.contains("allow: GET, HEAD"), "{answer}");
    }

    /// Beyond the connection limit, the probes are answered and anything else gets 503
    /// busy with `Retry-After: 1` (issue 27 item 10), until a connection ends.
    #[tokio::test]
    async fn connections_beyond_the_limit_answer_only_the_probes() {
        let server = start(ServeOptions {
            max_connections: 2,
            ..ServeOptions::default()
        })
        .await;
        let first = TcpStream::connect(server.addr).await.unwrap();
        let _second = TcpStream::connect(server.addr).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let get = |path: &str| {
            let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
            async move { raw(server.addr, &request).await }
        };
        let (code, _) = get("/healthz").await;
        assert_eq!(code, 200, "/healthz past the limit");
        let (code, body) = get("/metrics").await;
        assert_eq!(code, 503, "{body}");
        assert!(body.contains("retry-after: 1"), "{body}");
        drop(first);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (code, body) = get("/metrics").await;
        assert_eq!(code, 200, "served once a slot is free: {body}");
    }

    /// Issue 38 item 1: `/healthz` was a constant 200, so nothing restarted a daemon whose
    /// loops were stuck. A loop over its allowance makes it 503, naming the loop and since
    /// when; its progress makes it 200 again. Open without the credential, as before.
    #[tokio::test]
    async fn healthz_is_503_naming_what_is_stuck_and_since_when() {
        use crate::model::progress::Watched;
        let published = Publisher::new("wd-test", vec!["orders".into()]);
        let t0 = std::time::Instant::now();
        let Some(long_ago) = t0.checked_sub(Duration::from_secs(100)) else {
            return;
        };
        let stamp = published.progress.watch(
            Watched::ClusterLoop("orders".into()),
            Duration::from_secs(30),
            long_ago,
        );
        published
            .progress
            .watch(Watched::Dispatcher, Duration::from_secs(30), t0);
        let server = start_with(published.clone(), with_auth(basic())).await;
        let (code, body) = get(&server, "/healthz", &[]).await;
        assert_eq!(code, 503, "{body}");
        assert!(
            body.contains(
                "the round loop of cluster orders: no progress for 100 s (allowed 30 s), since "
            ),
            "{body}"
        );
        assert!(!body.contains("dispatcher"), "{body}");
        stamp.tick();
        let (code, body) = get(&server, "/healthz", &[]).await;
        assert_eq!(code, 200, "{body}");
    }

    /// Connects from `ip` (a loopback address of its own) and sends nothing.
    async fn idle_from(ip: &str, server: &Server) -> TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{ip}:0").parse().unwrap()).unwrap();
        socket.connect(server.addr).await.unwrap()
    }

    /// Sends `path` from `ip`: (status, answer).
    async fn get_from(ip: &str, server: &Server, path: &str) -> (u16, String) {
        let s = idle_from(ip, server).await;
        send(
            s,
            &format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"),
        )
        .await
    }

    /// Issue 38 item 8: behind a service mesh every client shares one address, the
    /// kubelet's probes too. An address at its connection cap still has `/healthz` and
    /// `/readyz` answered (they were closed at once, so the kubelet restarted a daemon that
    /// worked); anything else it asks gets 503 busy, so the cap still bounds its share.
    #[tokio::test]
    async fn an_address_at_its_cap_still_has_its_probes_answered() {
        let server = start(ServeOptions::default()).await;
        let mut held = Vec::new();
        for _ in 0..PER_CLIENT + 4 {
            held.push(idle_from("127.0.0.3", &server).await);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (code, body) = get_from("127.0.0.3", &server, "/healthz").await;
        assert_eq!(code, 200, "{body}");
        let (code, body) = get_from("127.0.0.3", &server, "/readyz").await;
        assert_eq!(code, 503, "answered (no round yet): {body}");
        assert!(body.contains("not ready"), "{body}");
        let (code, body) = get_from("127.0.0.3", &server, "/metrics").await;
        assert_eq!(code, 503, "{body}");
        assert!(body.contains("busy"), "{body}");
        let (code, _) = get_from("127.0.0.4", &server, "/metrics").await;
        assert_eq!(code, 200, "another address is served as usual");
    }

    /// Issue 38 item 8: every connection taken, the reserve for the probes too (here by
    /// idle clients from many addresses): a probe is still answered, at once. The oldest
    /// probes-only connection makes room for it; a probe sends its request as it connects,
    /// an idle client does not.
    #[tokio::test]
    async fn every_connection_taken_a_probe_is_still_answered() {
        let server = start(ServeOptions {
            max_connections: 2,
            ..ServeOptions::default()
        })
        .await;
        let mut idle = Vec::new();
        for i in 0..40 {
            idle.push(idle_from(&format!("127.0.1.{}", i + 1), &server).await);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        for _ in 0..3 {
            let (code, body) = tokio::time::timeout(
                Duration::from_secs(2),
                get_from("127.0.2.1", &server, "/healthz"),
            )
            .await
            .expect("a probe never waits for a free slot");
            assert_eq!(code, 200, "{body}");
        }
    }

    /// Issue 39 item 2: the peer key read from `peers.key_file` follows the file: the next
    /// ask is checked with what the file holds now. (No alerting runs here: an ask that
    /// passes the key's check gets 503, one that does not 401.)
    #[tokio::test]
    async fn a_rotated_peer_key_file_checks_the_next_ask() {
        use crate::alert::peers::auth::{Nonce, PeerKey, HEADER};
        let dir = std::env::temp_dir().join(format!("kw-http-peer-rotate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("peer.key");
        let (old, new) = ("o".repeat(40), "n".repeat(40));
        std::fs::write(&file, format!("{old}\n")).unwrap();
        let text = format!(
            "clusters: [{{name: a, bootstrap_servers: ['k:9092']}}]\npeers:\n  urls: ['http://127.0.0.1:1']\n  key_file: {}\n",
            file.display()
        );
        let config = crate::config::parse(&text, "t.yaml").unwrap();
        let server = start(ServeOptions::from_config(&config).unwrap()).await;
        let ask = |key: &str| {
            let header =
                PeerKey::new(key).ask(&Nonce::fresh().unwrap(), std::time::SystemTime::now());
            format!("{HEADER}: {header}")
        };
        assert_eq!(get(&server, PEER_PATH, &[&ask(&old)]).await.0, 503);
        std::fs::write(&file, format!("{new}\n")).unwrap();
        crate::config::live::look_all();
        let (code, body) = get(&server, PEER_PATH, &[&ask(&old)]).await;
        assert_eq!(code, 401, "the old key is refused: {body}");
        assert_eq!(
            get(&server, PEER_PATH, &[&ask(&new)]).await.0,
            503,
            "the new key is taken"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 39 item 2: `peers.ca_file` follows its file. A peer whose certificate was
    /// renewed under a new CA is not trusted while the file holds the old CA, and is by the
    /// next ask once it holds the new one. (No alerting runs here: a peer reached answers 503.)
    #[tokio::test]
    async fn a_rotated_peer_ca_file_is_trusted_by_the_next_ask() {
        use crate::alert::peers::{auth::PeerKey, sync};
        let dir = std::env::temp_dir().join(format!("kw-http-peer-ca-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (ca, key) = (dir.join("ca.crt"), dir.join("peer.key"));
        std::fs::write(&ca, CA).unwrap();
        std::fs::write(&key, "k".repeat(40)).unwrap();
        let text = format!(
            "clusters: [{{name: a, bootstrap_servers: ['k:9092']}}]\nhttp:\n  tls: {{cert_file: {TESTDATA}/renewed-server.pem, key_file: {TESTDATA}/renewed-server.key}}\npeers:\n  urls: ['https://localhost:1']\n  key_file: {}\n  ca_file: {}\n",
            key.display(),
            ca.display()
        );
        let config = crate::config::parse(&text, "t.yaml").unwrap();
        let server = start(ServeOptions::from_config(&config).unwrap()).await;
        let setup = sync::Setup {
            config: config.peers.clone().unwrap(),
            listen: "0.0.0.0:0".parse().unwrap(),
        };
        let client = sync::client(&setup).unwrap();
        let base = format!("https://localhost:{}", server.addr.port());
        let asked = |client: reqwest::Client| {
            let base = base.clone();
            async move {
                match sync::ask(&client, &base, &PeerKey::new(&"k".repeat(40))).await {
                    Err(sync::AskError::Failed(why)) => why,
                    other => format!("{other:?}"),
                }
            }
        };
        let why = asked(client.get()).await;
        assert!(!why.starts_with("HTTP "), "not trusted yet: {why}");
        std::fs::write(
            &ca,
            std::fs::read(format!("{TESTDATA}/renewed-ca.pem")).unwrap(),
        )
        .unwrap();
        crate::config::live::look_all();
        let why = asked(client.get()).await;
        assert!(why.starts_with("HTTP 503"), "trusted now: {why}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn options_come_from_the_configuration() {
        let text = format!(
            "clusters: [{{name: a, bootstrap_servers: ['k:9092']}}]\nhttp:\n  tls: {{cert_file: {TESTDATA}/server.pem, key_file: {TESTDATA}/server.key}}\n  auth: {{bearer_token_env: TOKEN}}\n"
        );
        let env = |k: &str| (k == "TOKEN").then(|| "t0ken".to_string());
        let config = crate::config::parse_with_env(&text, "t.yaml", &env).unwrap();
        let options = ServeOptions::from_config(&config).unwrap();
        assert!(options.tls.is_some());
        assert_eq!(
            options.auth,
            Some(HttpAuth::Bearer {
                token: Secret::new("t0ken")
            })
        );
        assert_eq!(options.max_connections, MAX_CONNECTIONS);
        assert!(!format!("{options:?}").contains("t0ken"));
    }
}
