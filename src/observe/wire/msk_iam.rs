//! Amazon MSK IAM access control. The direct probes use the SASL mechanism AWS_MSK_IAM:
//! one JSON document holding a SigV4 presigned `kafka-cluster:Connect` request for the
//! broker's host. librdkafka has no such mechanism; MSK accepts the same identity as an
//! OAUTHBEARER token (the presigned request for `kafka.<region>.amazonaws.com` as a URL,
//! base64url-encoded), which is what the canary's clients send.
//!
//! Credentials come from the AWS SDK for Rust's default chain, in its order: environment,
//! profile (credentials and config files, `credential_process`, `role_arn` with a source
//! profile), web identity (IRSA), container credentials (ECS task roles, EKS Pod
//! Identity), instance metadata (IMDSv2). Signing is the SDK's SigV4 signer. One
//! [`AwsIdentity`] per cluster keeps the credentials until five minutes before they
//! expire, so a round's brokers share one lookup and an instance profile's endpoint sees
//! a request per credential lifetime, not per connection.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use aws_config::provider_config::ProviderConfig;
use aws_config::timeout::TimeoutConfig;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use base64::Engine as _;

use super::oauth::Token;

pub(crate) const SERVICE: &str = "kafka-cluster";
const ACTION: &str = "kafka-cluster:Connect";
const PAYLOAD_VERSION: &str = "2020_10_22";
/// How long a signed request stays valid; the broker checks it once, at connection.
const EXPIRES: Duration = Duration::from_secs(900);
/// Credentials are asked for again this long before they expire.
const EXPIRY_MARGIN: Duration = Duration::from_secs(300);
/// Credentials that say nothing of their expiry (environment, a profile's keys) are read
/// again after this long, so a rotated credentials file is picked up without a reload.
const UNDATED_LIFETIME: Duration = Duration::from_secs(300);
/// After a failed lookup, connections within this long get the same error rather than
/// walking the chain again (its instance-metadata step alone can take seconds).
const FAILURE_HOLD: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsIamSettings {
    pub region: String,
    /// The profile of the shared config and credentials files; `None`: AWS_PROFILE, then
    /// `default`.
    pub profile: Option<String>,
}

/// What a lookup gave, kept until `until`.
enum Kept {
    Found(Credentials),
    Failed(String),
}

/// One cluster's AWS identity: the default credential chain and what it last gave.
pub struct AwsIdentity {
    settings: AwsIamSettings,
    /// The runtime the chain's lookups run on, as tasks of their own (see `credentials`):
    /// a pooled connection of the chain must stay with the runtime that opened it.
    runtime: tokio::runtime::Handle,
    chain: tokio::sync::OnceCell<SharedCredentialsProvider>,
    kept: Mutex<Option<(Kept, Instant)>>,
    /// The canary's OAUTHBEARER token while it is fresh: its clients are handed it at
    /// every round, and a new signature each time would be work for nothing.
    token: Mutex<Option<Token>>,
    /// Serialises lookups, so the brokers of one round share one.
    fetching: tokio::sync::Mutex<()>,
}

impl fmt::Debug for AwsIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsIdentity")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl AwsIdentity {
    /// Must be made on the runtime that will serve the chain's requests.
    pub fn new(settings: AwsIamSettings, runtime: tokio::runtime::Handle) -> Self {
        AwsIdentity {
            settings,
            runtime,
            chain: tokio::sync::OnceCell::new(),
            kept: Mutex::new(None),
            token: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// An identity holding `creds` for an hour, for tests of what is signed with them.
    #[cfg(test)]
    pub(crate) fn with_credentials(
        settings: AwsIamSettings,
        creds: Credentials,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        let me = AwsIdentity::new(settings, runtime);
        *me.kept.lock().unwrap() = Some((
            Kept::Found(creds),
            Instant::now() + Duration::from_secs(3600),
        ));
        me
    }

    pub fn settings(&self) -> &AwsIamSettings {
        &self.settings
    }

    fn kept(&self) -> Option<Result<Credentials, String>> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        match kept.as_ref() {
            Some((k, until)) if Instant::now() < *until => Some(match k {
                Kept::Found(c) => Ok(c.clone()),
                Kept::Failed(e) => Err(e.clone()),
            }),
            _ => None,
        }
    }

    /// Credentials from the chain, or the ones kept while they are fresh. The lookup runs
    /// as a task of its own on the identity's runtime: a connection that stops waiting
    /// (its deadline) does not cancel it, so a slow endpoint (STS, instance metadata) still
    /// fills the cache for the next connection instead of being cut at every try.
    pub async fn credentials(self: &Arc<Self>) -> Result<Credentials, String> {
        if let Some(k) = self.kept() {
            return k;
        }
        let me = self.clone();
        self.runtime
            .spawn(async move { me.lookup().await })
            .await
            .map_err(|e| format!("the AWS credentials lookup ended: {e}"))?
    }

    async fn lookup(&self) -> Result<Credentials, String> {
        let _one = self.fetching.lock().await;
        if let Some(k) = self.kept() {
            return k;
        }
        let chain = self
            .chain
            .get_or_init(|| default_chain(&self.settings))
            .await;
        let (kept, answer) = match chain.provide_credentials().await {
            Ok(c) => {
                let until = keep_until(c.expiry(), SystemTime::now());
                tracing::debug!(
                    access_key_id = c.access_key_id(),
                    expires = ?c.expiry(),
                    "AWS credentials from the default chain"
                );
                ((Kept::Found(c.clone()), until), Ok(c))
            }
            Err(e) => {
                let why = no_credentials(&self.settings, &e);
                (
                    (Kept::Failed(why.clone()), Instant::now() + FAILURE_HOLD),
                    Err(why),
                )
            }
        };
        *self.kept.lock().unwrap_or_else(|p| p.into_inner()) = Some(kept);
        answer
    }

    /// The OAUTHBEARER token for librdkafka's clients: the one kept while it is fresh,
    /// else a new one.
    pub async fn oauth_token(self: &Arc<Self>) -> Result<Token, String> {
        match self.fresh_token() {
            Some(t) => Ok(t),
            None => self.token().await,
        }
    }

    fn fresh_token(&self) -> Option<Token> {
        let kept = self.token.lock().unwrap_or_else(|p| p.into_inner());
        kept.as_ref().filter(|t| t.fresh()).cloned()
    }

    /// The OAUTHBEARER token, signed now.
    pub async fn token(self: &Arc<Self>) -> Result<Token, String> {
        let creds = self.credentials().await?;
        let now = SystemTime::now();
        let value = oauth_token(&self.settings.region, &creds, USER_AGENT, now)?;
        let expires_at = creds
            .expiry()
            .map_or(now + EXPIRES, |e| e.min(now + EXPIRES));
        let lifetime = expires_at.duration_since(now).unwrap_or_default();
        // Renewed at 80% of its life, as librdkafka renews its own tokens.
        let token = Token::new(
            value,
            creds.access_key_id().to_string(),
            expires_at,
            Instant::now() + lifetime.mul_f64(0.8),
        );
        *self.token.lock().unwrap_or_else(|p| p.into_inner()) = Some(token.clone());
        Ok(token)
    }
}

/// Who the watchdog says it is in what it signs.
pub(crate) const USER_AGENT: &str = concat!("kafka-watchdog/", env!("CARGO_PKG_VERSION"));

fn keep_until(expiry: Option<SystemTime>, now: SystemTime) -> Instant {
    let left = match expiry {
        Some(e) => e
            .duration_since(now)
            .unwrap_or_default()
            .saturating_sub(EXPIRY_MARGIN),
        None => UNDATED_LIFETIME,
    };
    Instant::now() + left
}

async fn default_chain(settings: &AwsIamSettings) -> SharedCredentialsProvider {
    // rustls with ring, as the rest of the watchdog; the SDK's default would be aws-lc.
    let https = aws_smithy_http_client::Builder::new()
        .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
            aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https();
    let conf = ProviderConfig::without_region()
        .with_http_client(https)
        .with_sleep_impl(aws_smithy_async::rt::sleep::TokioSleep::new())
        // Bounded like the rest of connecting: an instance-metadata endpoint that does not
        // exist must not hold a round.
        .with_timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(1))
                .read_timeout(Duration::from_secs(5))
                .build(),
        );
    let mut b = aws_config::default_provider::credentials::DefaultCredentialsChain::builder()
        .configure(conf)
        .region(aws_config::Region::new(settings.region.clone()));
    if let Some(p) = &settings.profile {
        b = b.profile_name(p);
    }
    SharedCredentialsProvider::new(b.build().await)
}

/// The chain's error with every cause it carries: which providers were tried and why each
/// gave nothing is what an operator needs to fix it.
fn no_credentials(settings: &AwsIamSettings, e: &dyn std::error::Error) -> String {
    let mut why = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !why.contains(&text) {
            why = format!("{why}: {text}");
        }
        source = s.source();
    }
    // The SDK lists each provider it tried on a line of its own; one line reads better in
    // the evidence, the log and /status.
    let why: Vec<&str> = why
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    format!(
        "no AWS credentials for AWS_MSK_IAM{}: {}",
        settings
            .profile
            .as_deref()
            .map_or_else(String::new, |p| format!(" (profile {p})")),
        why.join("; ").replace(":; ", ": ")
    )
}

/// The query of a presigned `kafka-cluster:Connect` GET for `host`, signed at `at`, in the
/// order the signer returns it: every X-Amz parameter, the signature last.
fn presigned_query(
    host: &str,
    region: &str,
    creds: &Credentials,
    body: SignableBody<'_>,
    at: SystemTime,
) -> Result<Vec<(String, String)>, String> {
    let identity: Identity = creds.clone().into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(EXPIRES);
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(at)
        .settings(settings)
        .build()
        .map_err(|e| format!("SigV4 parameters: {e}"))?
        .into();
    let uri = format!("https://{host}/?Action=kafka-cluster%3AConnect");
    let request = SignableRequest::new("GET", uri, [("host", host)].into_iter(), body)
        .map_err(|e| format!("SigV4 request for {host}: {e}"))?;
    let (instructions, _) = sign(request, &params)
        .map_err(|e| format!("SigV4 signing for {host}: {e}"))?
        .into_parts();
    Ok(instructions
        .params()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

/// The AWS_MSK_IAM authentication payload for a broker host (no port), signed at `at`.
/// A presigned request carries no body: it is signed with the hash of the empty payload,
/// as the Java client library signs it.
pub(crate) fn payload(
    host: &str,
    region: &str,
    creds: &Credentials,
    user_agent: &str,
    at: SystemTime,
) -> Result<Vec<u8>, String> {
    let query = presigned_query(host, region, creds, SignableBody::Bytes(&[]), at)?;
    let mut doc = serde_json::json!({
        "version": PAYLOAD_VERSION,
        "host": host,
        "user-agent": user_agent,
        "action": ACTION,
    });
    for (k, v) in query {
        doc[k.to_ascii_lowercase()] = serde_json::Value::String(v);
    }
    serde_json::to_vec(&doc).map_err(|e| e.to_string())
}

/// The OAUTHBEARER token MSK accepts for IAM: the presigned request for the regional
/// service host as a URL, with a `User-Agent` parameter after the signature,
/// base64url-encoded without padding. Signed with UNSIGNED-PAYLOAD, as AWS's signer
/// libraries sign it.
pub(crate) fn oauth_token(
    region: &str,
    creds: &Credentials,
    user_agent: &str,
    at: SystemTime,
) -> Result<String, String> {
    let host = format!("kafka.{region}.amazonaws.com");
    let query = presigned_query(&host, region, creds, SignableBody::UnsignedPayload, at)?;
    let mut url = url::Url::parse(&format!("https://{host}/"))
        .map_err(|e| format!("region {region}: {e}"))?;
    url.query_pairs_mut()
        .append_pair("Action", ACTION)
        .extend_pairs(query)
        .append_pair("User-Agent", user_agent);
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(url.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    const KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    const HOST: &str = "b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com";

    fn creds(token: Option<&str>) -> Credentials {
        Credentials::new("AKIDEXAMPLE", KEY, token.map(str::to_string), None, "test")
    }

    fn at() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_440_938_160) // 2015-08-30T12:36:00Z
    }

    /// The signatures the hand-written signer this replaced computed for the same inputs
    /// (it passed AWS's SigV4 test suite): the SDK's signer agrees with it byte for byte.
    #[test]
    fn the_payload_is_signed_as_before_with_and_without_a_session_token() {
        for (token, signature) in [
            (
                Some("session/token+1"),
                "f593976d4c63156d5d522c19298d3fd6379ab1766a8f008bde17233e19e6f664",
            ),
            (
                None,
                "3e72202b2d1c50c7e17b4eec8b2dadb465846a528bf234c385077be357e42fb1",
            ),
        ] {
            let bytes = payload(
                HOST,
                "eu-west-1",
                &creds(token),
                "kafka-watchdog/0.1.0",
                at(),
            )
            .unwrap();
            let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(doc["version"], "2020_10_22");
            assert_eq!(doc["host"], HOST);
            assert_eq!(doc["user-agent"], "kafka-watchdog/0.1.0");
            assert_eq!(doc["action"], "kafka-cluster:Connect");
            assert_eq!(doc["x-amz-algorithm"], "AWS4-HMAC-SHA256");
            assert_eq!(
                doc["x-amz-credential"],
                "AKIDEXAMPLE/20150830/eu-west-1/kafka-cluster/aws4_request"
            );
            assert_eq!(doc["x-amz-date"], "20150830T123600Z");
            assert_eq!(doc["x-amz-signedheaders"], "host");
            assert_eq!(doc["x-amz-expires"], "900");
            match token {
                Some(t) => assert_eq!(doc["x-amz-security-token"], t),
                None => assert!(doc.get("x-amz-security-token").is_none(), "{doc}"),
            }
            assert_eq!(doc["x-amz-signature"], signature, "{doc}");
        }
        let later = payload(
            HOST,
            "eu-west-1",
            &creds(None),
            "x",
            at() + Duration::from_secs(1),
        );
        assert!(!String::from_utf8(later.unwrap())
            .unwrap()
            .contains("3e72202b"));
    }

    #[test]
    fn the_oauthbearer_token_is_the_presigned_url_of_the_regional_host() {
        let token =
            oauth_token("eu-west-1", &creds(Some("tok/1")), "kafka-watchdog/9", at()).unwrap();
        assert!(!token.contains('='), "no padding: {token}");
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&token)
            .unwrap();
        let url = url::Url::parse(std::str::from_utf8(&url).unwrap()).unwrap();
        assert_eq!(url.host_str(), Some("kafka.eu-west-1.amazonaws.com"));
        assert_eq!(url.path(), "/");
        let q: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        let names: Vec<&str> = q.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names.first(), Some(&"Action"));
        assert_eq!(names.last(), Some(&"User-Agent"));
        let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("Action"), Some("kafka-cluster:Connect"));
        assert_eq!(get("X-Amz-Security-Token"), Some("tok/1"));
        assert_eq!(get("X-Amz-Expires"), Some("900"));
        assert_eq!(get("User-Agent"), Some("kafka-watchdog/9"));
        assert_eq!(get("X-Amz-Signature").map(str::len), Some(64));
        // Signed over UNSIGNED-PAYLOAD: not the signature an empty-body signing gives.
        let empty = presigned_query(
            "kafka.eu-west-1.amazonaws.com",
            "eu-west-1",
            &creds(Some("tok/1")),
            SignableBody::Bytes(&[]),
            at(),
        )
        .unwrap();
        let empty_sig = empty.iter().find(|(k, _)| k == "X-Amz-Signature").unwrap();
        assert_ne!(get("X-Amz-Signature"), Some(empty_sig.1.as_str()));
    }

    #[test]
    fn credentials_are_kept_until_five_minutes_before_they_expire() {
        let now = SystemTime::now();
        let soon = keep_until(Some(now + Duration::from_secs(3600)), now);
        let left = soon.duration_since(Instant::now());
        assert!(left > Duration::from_secs(3200) && left <= Duration::from_secs(3300));
        // Already within the margin: asked for again at once.
        let past = keep_until(Some(now + Duration::from_secs(60)), now);
        assert!(past <= Instant::now());
        let undated = keep_until(None, now).duration_since(Instant::now());
        assert!(undated > Duration::from_secs(290));
    }
}
