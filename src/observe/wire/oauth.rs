//! SASL/OAUTHBEARER with tokens from an OIDC token endpoint (OAuth 2.0 client credentials
//! grant, RFC 6749 4.4). One [`TokenSource`] per cluster caches the token and fetches a new
//! one once 80% of its lifetime has passed (librdkafka's and Kafka's own rule), so brokers
//! never see an expired token and the endpoint sees one request per token lifetime.
//! The client secret never leaves this module except in the request to the endpoint.

use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;

use crate::config::live::Current;

/// The longest a token is used before a new one is asked for, whatever it says of itself.
const MAX_LIFETIME: Duration = Duration::from_secs(7 * 86_400);
/// Used when the endpoint gives no `expires_in` and the token is not a JWT with `exp`.
const ASSUMED_LIFETIME: Duration = Duration::from_secs(300);
/// Error bodies are quoted in messages; longer ones are cut.
const MAX_QUOTED: usize = 200;

/// A bearer token and what is known about it.
#[derive(Clone)]
pub struct Token {
    pub value: String,
    /// The JWT `sub` claim when there is one, otherwise the client id.
    pub principal: String,
    /// When the endpoint says it expires.
    pub expires_at: SystemTime,
    refresh_at: Instant,
}

impl Token {
    /// A token from another source than an OIDC endpoint (MSK IAM's signed request),
    /// renewed at `refresh_at`.
    pub(crate) fn new(
        value: String,
        principal: String,
        expires_at: SystemTime,
        refresh_at: Instant,
    ) -> Self {
        Token {
            value,
            principal,
            expires_at,
            refresh_at,
        }
    }

    /// Not yet due for renewal.
    pub(crate) fn fresh(&self) -> bool {
        Instant::now() < self.refresh_at
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("value", &"<withheld>")
            .field("principal", &self.principal)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

pub struct TokenSource {
    endpoint: String,
    client_id: String,
    /// Read at each token request, as is the CA: rotated ones serve the next request.
    client_secret: Current,
    scope: Option<String>,
    ca_pem: Option<Current>,
    timeout: Duration,
    cache: Mutex<Option<Token>>,
    /// Serialises fetches, so the brokers of one round share one request.
    fetching: tokio::sync::Mutex<()>,
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSource")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<withheld>")
            .field("scope", &self.scope)
            .finish()
    }
}

impl TokenSource {
    pub fn new(
        endpoint: String,
        client_id: String,
        client_secret: Current,
        scope: Option<String>,
        ca_pem: Option<Current>,
        timeout: Duration,
    ) -> Self {
        TokenSource {
            endpoint,
            client_id,
            client_secret,
            scope,
            ca_pem,
            timeout,
            cache: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// A source holding `token` for an hour, for tests of the SASL exchange.
    #[cfg(test)]
    pub(crate) fn with_cached(token: &str, principal: &str) -> Self {
        let s = TokenSource::new(
            "http://127.0.0.1:1/token".into(),
            principal.into(),
            "unused".into(),
            None,
            None,
            Duration::from_secs(1),
        );
        *s.cache.lock().unwrap() = Some(Token {
            value: token.into(),
            principal: principal.into(),
            expires_at: SystemTime::now() + Duration::from_secs(3600),
            refresh_at: Instant::now() + Duration::from_secs(3600),
        });
        s
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The cached token while it is fresh.
    pub fn cached(&self) -> Option<Token> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .as_ref()
            .filter(|t| Instant::now() < t.refresh_at)
            .cloned()
    }

    /// A fresh token: the cached one, or a new one from the endpoint.
    pub async fn token(&self) -> Result<Token, String> {
        if let Some(t) = self.cached() {
            return Ok(t);
        }
        let _one = self.fetching.lock().await;
        if let Some(t) = self.cached() {
            return Ok(t);
        }
        let t = self.fetch().await?;
        *self.cache.lock().unwrap_or_else(|p| p.into_inner()) = Some(t.clone());
        Ok(t)
    }

    fn what(&self) -> String {
        format!("token endpoint {}", self.endpoint)
    }

    /// A client per request: this runs on whichever runtime asks, and a pooled connection
    /// must not outlive the runtime that opened it. One request per token lifetime.
    fn http(&self) -> Result<reqwest::Client, String> {
        let mut b = reqwest::Client::builder()
            .timeout(self.timeout)
            .redirect(reqwest::redirect::Policy::none());
        if let Some(ca) = &self.ca_pem {
            let pem = ca.parts();
            for cert in
                reqwest::Certificate::from_pem_bundle(pem.first().map_or(&[][..], Vec::as_slice))
                    .map_err(|e| format!("{}: CA file: {e}", self.what()))?
            {
                b = b.add_root_certificate(cert);
            }
        }
        b.build().map_err(|e| format!("{}: {e}", self.what()))
    }

    async fn fetch(&self) -> Result<Token, String> {
        let mut form = vec![("grant_type", "client_credentials")];
        if let Some(scope) = &self.scope {
            form.push(("scope", scope));
        }
        let started = Instant::now();
        // client_secret_basic (RFC 6749 2.3.1): every OIDC provider must accept it.
        let response = self
            .http()?
            .post(&self.endpoint)
            .basic_auth(
                form_encode(&self.client_id),
                Some(form_encode(&self.client_secret.text())),
            )
            .form(&form)
            .send()
            .await
            .map_err(|e| format!("{}: {}", self.what(), without_url(&e)))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| format!("{}: {}", self.what(), without_url(&e)))?;
        if !status.is_success() {
            return Err(format!(
                "{} refused the client credentials of client {}: HTTP {status}{}",
                self.what(),
                self.client_id,
                error_detail(&body)
            ));
        }
        let granted = parse_token_response(&body, SystemTime::now())
            .map_err(|e| format!("{}: {e}", self.what()))?;
        tracing::debug!(
            endpoint = %self.endpoint,
            lifetime_s = granted.lifetime.as_secs(),
            "OAuth token fetched"
        );
        Ok(Token {
            principal: granted.subject.unwrap_or_else(|| self.client_id.clone()),
            value: granted.access_token,
            expires_at: SystemTime::now() + granted.lifetime,
            refresh_at: started + refresh_after(granted.lifetime),
        })
    }
}

/// reqwest's errors carry the URL, which is configuration and fine, but never the secret;
/// the chain of causes says what went wrong (refused, timeout, certificate).
fn without_url(e: &reqwest::Error) -> String {
    let mut s = if e.is_timeout() {
        "no answer in time".to_string()
    } else if e.is_connect() {
        "cannot connect".to_string()
    } else {
        "request failed".to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

/// RFC 6749 2.3.1: id and secret are form-encoded before going into the Basic header.
fn form_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The `error` and `error_description` of an OAuth error answer (RFC 6749 5.2), or the
/// start of whatever else came back.
fn error_detail(body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
        if let Some(code) = v["error"].as_str() {
            return match v["error_description"].as_str() {
                Some(d) => format!(" ({code}: {})", cut(d)),
                None => format!(" ({code})"),
            };
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!(" ({})", cut(text))
    }
}

fn cut(s: &str) -> String {
    match s.char_indices().nth(MAX_QUOTED) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Granted {
    access_token: String,
    lifetime: Duration,
    subject: Option<String>,
}

fn parse_token_response(body: &[u8], now: SystemTime) -> Result<Granted, String> {
    let v: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| format!("the answer is not a JSON token response: {e}"))?;
    let token = v["access_token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or("the answer has no access_token")?;
    if let Some(kind) = v["token_type"].as_str() {
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err(format!("token_type is {kind}, not Bearer"));
        }
    }
    let claims = jwt_claims(token);
    // Checked: an `exp` near u64::MAX is past what a clock holds, and panicked.
    let from_exp = claims
        .as_ref()
        .and_then(|c| c["exp"].as_u64())
        .and_then(|exp| UNIX_EPOCH.checked_add(Duration::from_secs(exp)))
        .and_then(|at| at.duration_since(now).ok());
    // A lifetime of centuries (`expires_in` near u64::MAX) overflowed the refresh timer;
    // no token is trusted longer than MAX_LIFETIME before it is asked for again.
    let lifetime = v["expires_in"]
        .as_u64()
        .map(Duration::from_secs)
        .or(from_exp)
        .unwrap_or(ASSUMED_LIFETIME)
        .min(MAX_LIFETIME);
    if lifetime.is_zero() {
        return Err("the token has already expired".into());
    }
    Ok(Granted {
        access_token: token.to_string(),
        lifetime,
        subject: claims.and_then(|c| c["sub"].as_str().map(str::to_string)),
    })
}

/// The claims of a JWT, without checking its signature (the broker does that): only to
/// learn its subject and expiry. `None` for opaque tokens.
fn jwt_claims(token: &str) -> Option<serde_json::Value> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

pub(crate) fn refresh_after(lifetime: Duration) -> Duration {
    lifetime.mul_f64(0.8)
}

/// RFC 7628 3.1 initial client response: GS2 header without authzid, then `auth=` and
/// the SASL extensions (KIP-342), each a kvpair ended by %x01, then a closing %x01.
pub(crate) fn client_first_message(token: &str, extensions: &[(String, String)]) -> Vec<u8> {
    let mut m = format!("n,,\x01auth=Bearer {token}\x01");
    for (k, v) in extensions {
        m.push_str(&format!("{k}={v}\x01"));
    }
    m.push('\x01');
    m.into_bytes()
}

/// RFC 7628 3.2.3: a failed validation comes back as a JSON challenge, which the client
/// must answer with a single %x01 before the server ends the exchange with an error.
pub(crate) const ERROR_ACK: &[u8] = b"\x01";

/// The `status` of a server error challenge, for the message.
pub(crate) fn challenge_status(challenge: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(challenge)
        .ok()
        .and_then(|v| v["status"].as_str().map(str::to_string))
        .unwrap_or_else(|| cut(&String::from_utf8_lossy(challenge)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_first_message_follows_rfc_7628() {
        assert_eq!(
            client_first_message("abc.def.ghi", &[]),
            b"n,,\x01auth=Bearer abc.def.ghi\x01\x01"
        );
        let extensions = [
            ("logicalCluster".to_string(), "lkc-abc123".to_string()),
            ("identityPoolId".to_string(), "pool-X y".to_string()),
        ];
        assert_eq!(
            client_first_message("t", &extensions),
            b"n,,\x01auth=Bearer t\x01logicalCluster=lkc-abc123\x01identityPoolId=pool-X y\x01\x01"
        );
    }

    fn jwt(claims: &str) -> String {
        let e = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.sig", e(r#"{"alg":"ES256"}"#), e(claims))
    }

    #[test]
    fn expires_in_is_the_lifetime_and_sub_the_principal() {
        let t = jwt(r#"{"sub":"watchdog","exp":2000}"#);
        let body = format!(r#"{{"access_token":"{t}","token_type":"bearer","expires_in":600}}"#);
        let g = parse_token_response(body.as_bytes(), UNIX_EPOCH).unwrap();
        assert_eq!(g.lifetime, Duration::from_secs(600));
        assert_eq!(g.subject.as_deref(), Some("watchdog"));
        assert_eq!(refresh_after(g.lifetime), Duration::from_secs(480));
    }

    /// Issue 27 item 12: `expires_in` or `exp` near u64::MAX panicked.
    #[test]
    fn lifetimes_past_what_a_clock_holds_are_capped_not_a_panic() {
        let huge = u64::MAX;
        let body =
            format!(r#"{{"access_token":"opaque","token_type":"bearer","expires_in":{huge}}}"#);
        let g = parse_token_response(body.as_bytes(), UNIX_EPOCH).unwrap();
        assert_eq!(g.lifetime, MAX_LIFETIME);
        let _ = std::time::Instant::now() + refresh_after(g.lifetime);
        let t = jwt(&format!(r#"{{"sub":"watchdog","exp":{huge}}}"#));
        let body = format!(r#"{{"access_token":"{t}","token_type":"bearer"}}"#);
        let g = parse_token_response(body.as_bytes(), UNIX_EPOCH).unwrap();
        assert!(g.lifetime <= MAX_LIFETIME, "{:?}", g.lifetime);
    }

    #[test]
    fn without_expires_in_the_jwt_exp_decides() {
        let t = jwt(r#"{"sub":"w","exp":1300}"#);
        let body = format!(r#"{{"access_token":"{t}","token_type":"Bearer"}}"#);
        let now = UNIX_EPOCH + Duration::from_secs(1000);
        let g = parse_token_response(body.as_bytes(), now).unwrap();
        assert_eq!(g.lifetime, Duration::from_secs(300));
        let opaque = br#"{"access_token":"opaque","token_type":"Bearer"}"#;
        let g = parse_token_response(opaque, now).unwrap();
        assert_eq!(g.lifetime, ASSUMED_LIFETIME);
        assert_eq!(g.subject, None);
    }

    #[test]
    fn bad_answers_are_explained() {
        let now = UNIX_EPOCH;
        assert!(parse_token_response(b"<html>", now)
            .unwrap_err()
            .contains("not a JSON"));
        assert!(parse_token_response(br#"{"token_type":"Bearer"}"#, now)
            .unwrap_err()
            .contains("no access_token"));
        assert!(
            parse_token_response(br#"{"access_token":"x","token_type":"mac"}"#, now)
                .unwrap_err()
                .contains("not Bearer")
        );
        assert_eq!(
            error_detail(br#"{"error":"invalid_client","error_description":"bad secret"}"#),
            " (invalid_client: bad secret)"
        );
        assert_eq!(
            challenge_status(br#"{"status":"invalid_token"}"#),
            "invalid_token"
        );
    }

    #[test]
    fn debug_output_withholds_the_secret_and_the_token() {
        let s = TokenSource::new(
            "https://idp.example/token".into(),
            "watchdog".into(),
            "s3cr3t-value".into(),
            None,
            None,
            Duration::from_secs(1),
        );
        let shown = format!("{s:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        let t = Token {
            value: "tok-123".into(),
            principal: "p".into(),
            expires_at: UNIX_EPOCH,
            refresh_at: Instant::now(),
        };
        assert!(!format!("{t:?}").contains("tok-123"));
    }

    /// A one-shot HTTP server on loopback answering every request with `answer`, and
    /// counting requests.
    async fn endpoint(
        answer: &'static str,
    ) -> (
        String,
        std::sync::Arc<std::sync::atomic::AtomicUsize>,
        std::sync::Arc<Mutex<String>>,
    ) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = std::sync::Arc::new(Mutex::new(String::new()));
        let (c, s) = (count.clone(), seen.clone());
        tokio::spawn(async move {
            loop {
                let (mut sock, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 8192];
                let n = sock.read(&mut buf).await.unwrap();
                *s.lock().unwrap() = String::from_utf8_lossy(&buf[..n]).into_owned();
                c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let (status, body) = answer.split_once('|').unwrap();
                let reply = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                sock.write_all(reply.as_bytes()).await.unwrap();
            }
        });
        (url, count, seen)
    }

    #[tokio::test]
    async fn a_token_is_fetched_once_and_reused_until_refresh_time() {
        let (url, count, seen) =
            endpoint(r#"200 OK|{"access_token":"tok-1","token_type":"Bearer","expires_in":3600}"#)
                .await;
        let s = TokenSource::new(
            url,
            "kw client".into(),
            "p@ss".into(),
            Some("kafka".into()),
            None,
            Duration::from_secs(5),
        );
        assert_eq!(s.token().await.unwrap().value, "tok-1");
        assert_eq!(s.token().await.unwrap().value, "tok-1");
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
        let request = seen.lock().unwrap().clone();
        assert!(
            request.contains("grant_type=client_credentials"),
            "{request}"
        );
        assert!(request.contains("scope=kafka"), "{request}");
        let basic = base64::engine::general_purpose::STANDARD.encode("kw+client:p%40ss");
        assert!(
            request
                .to_lowercase()
                .contains(&format!("authorization: basic {basic}").to_lowercase()),
            "{request}"
        );
        // Past the refresh point (80% of the lifetime) the next call fetches again.
        s.cache.lock().unwrap().as_mut().unwrap().refresh_at = Instant::now();
        s.token().await.unwrap();
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_refused_secret_is_named_without_being_shown() {
        let (url, _, _) = endpoint(
            r#"401 Unauthorized|{"error":"invalid_client","error_description":"Invalid client credentials"}"#,
        )
        .await;
        let s = TokenSource::new(
            url.clone(),
            "watchdog".into(),
            "wrong-secret-77".into(),
            None,
            None,
            Duration::from_secs(5),
        );
        let err = s.token().await.unwrap_err();
        assert!(
            err.contains("invalid_client") && err.contains("401"),
            "{err}"
        );
        assert!(err.contains(&url), "{err}");
        assert!(!err.contains("wrong-secret-77"), "{err}");
    }
}
