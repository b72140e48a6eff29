//! How the canary's librdkafka clients authenticate when librdkafka cannot do it alone:
//! OAUTHBEARER with tokens from the cluster's OIDC endpoint (librdkafka's own OIDC support
//! needs libcurl, which this build leaves out), and Amazon MSK IAM, which librdkafka does
//! not know as a mechanism but MSK accepts as an OAUTHBEARER token (the SigV4-signed
//! request the probes' AWS_MSK_IAM sends, as a URL).
//!
//! The canary sets each client's token itself, with the cluster's SASL extensions, when
//! the client is made and at every canary round after: rust-rdkafka's refresh callback can
//! hand librdkafka no extensions, and Confluent Cloud refuses a token without its
//! `logicalCluster`. A token is renewed at 80% of its life, far more than a round apart.
//!
//! The token is asked for on the runtime, as the probes ask for theirs, within a deadline;
//! then handed to the clients, which is quick. It was fetched blocking a runtime worker
//! while the AWS credential lookup it waited for needed a worker of its own: two MSK
//! clusters' canaries took both workers and the daemon froze (issue 38 item 3).

use std::ffi::CString;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use rdkafka::client::{Client, ClientContext};
use rdkafka::consumer::ConsumerContext;

use crate::observe::wire::{AwsIdentity, Token, TokenSource, WireOptions};

/// Where the canary's tokens come from.
#[derive(Clone)]
enum Source {
    Oidc(Arc<TokenSource>),
    MskIam(Arc<AwsIdentity>),
}

impl Source {
    async fn token(&self) -> Result<Token, String> {
        match self {
            Source::Oidc(s) => s.token().await,
            Source::MskIam(a) => a.oauth_token().await,
        }
    }
}

/// The context of every canary client.
#[derive(Clone, Default)]
pub struct CanaryContext {
    token: Option<Source>,
    extensions: Vec<(String, String)>,
}

impl CanaryContext {
    pub fn new(wire: &WireOptions) -> Self {
        let Some(sasl) = wire.security.sasl() else {
            return CanaryContext::default();
        };
        let token = match (&sasl.oauth, &sasl.aws) {
            (Some(o), _) => Some(Source::Oidc(o.clone())),
            (None, Some(a)) => Some(Source::MskIam(a.clone())),
            (None, None) => None,
        };
        CanaryContext {
            token,
            extensions: sasl.extensions.clone(),
        }
    }

    /// The token for the clients now (`None` without a token mechanism): the one kept while
    /// it is fresh, else a new one from the endpoint or the AWS credential chain, awaited
    /// for at most `deadline`. A lookup cut short goes on by itself (see
    /// `AwsIdentity::credentials`) and serves the next round.
    pub async fn token(&self, deadline: Duration) -> Result<Option<Token>, String> {
        let Some(source) = &self.token else {
            return Ok(None);
        };
        match tokio::time::timeout(deadline, source.token()).await {
            Ok(token) => token.map(Some),
            Err(_) => Err(format!(
                "no token within {} s: the token endpoint or the AWS credential chain is slow or unreachable",
                deadline.as_secs_f64()
            )),
        }
    }

    /// Hands `client` `token` (a no-op without one): called when a client is made, before
    /// it connects, and at every canary round. librdkafka only keeps it: nothing waits.
    pub fn prime<C: ClientContext>(
        &self,
        client: &Client<C>,
        token: Option<&Token>,
    ) -> Result<(), String> {
        match token {
            Some(t) => set_token(client, t, &self.extensions),
            None => Ok(()),
        }
    }
}

fn set_token<C: ClientContext>(
    client: &Client<C>,
    token: &Token,
    extensions: &[(String, String)],
) -> Result<(), String> {
    let c = |s: &str, what: &str| CString::new(s).map_err(|_| format!("{what} holds a NUL byte"));
    let value = c(&token.value, "the token")?;
    let principal = c(&token.principal, "the token's principal")?;
    let extensions = extensions
        .iter()
        .map(|(k, v)| Ok((c(k, "an extension name")?, c(v, "an extension value")?)))
        .collect::<Result<Vec<_>, String>>()?;
    let lifetime_ms = token
        .expires_at
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    crate::sys::set_oauthbearer_token(client, &value, lifetime_ms, &principal, &extensions)
}

impl ClientContext for CanaryContext {
    // The canary sets tokens itself (see the module's comment): librdkafka is never asked
    // to refresh one through rust-rdkafka's callback.
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = false;
}

impl ConsumerContext for CanaryContext {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::wire::{AwsIamSettings, SaslMechanism, SaslSettings, Security};
    use base64::Engine as _;
    use kafka_protocol::messages::{
        ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeResponse,
    };
    use kafka_protocol::protocol::StrBytes;
    use kafka_watchdog_test_support::fake_broker::{
        answer, answer_api_versions, FakeBroker, Received, Reply, KAFKA_4_1,
    };
    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    use std::sync::Mutex;

    fn oauth_wire(extensions: &[(&str, &str)]) -> WireOptions {
        WireOptions {
            security: Security::SaslPlaintext(SaslSettings {
                oauth: Some(Arc::new(TokenSource::with_cached("a.b.c", "watchdog"))),
                extensions: extensions
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..SaslSettings::user_password(SaslMechanism::OAuthBearer, "", "")
            }),
            ..WireOptions::default()
        }
    }

    fn consumer(context: CanaryContext) -> BaseConsumer<CanaryContext> {
        ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .set("security.protocol", "SASL_PLAINTEXT")
            .set("sasl.mechanism", "OAUTHBEARER")
            .set("group.id", "t")
            .create_with_context(context)
            .unwrap()
    }

    const DEADLINE: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn a_client_takes_the_token_with_its_extensions() {
        let context = CanaryContext::new(&oauth_wire(&[("logicalCluster", "lkc-abc123")]));
        assert_eq!(context.extensions.len(), 1);
        let c = consumer(context.clone());
        let token = context.token(DEADLINE).await.unwrap();
        context.prime(c.client(), token.as_ref()).unwrap();
    }

    /// librdkafka checks extensions as Kafka does (RFC 7628): the name `auth` is refused,
    /// so a token with a bad extension fails here, not silently at the broker.
    #[tokio::test]
    async fn librdkafka_refuses_an_extension_named_auth() {
        let context = CanaryContext::new(&oauth_wire(&[("auth", "x")]));
        let c = consumer(context.clone());
        let token = context.token(DEADLINE).await.unwrap();
        let err = context.prime(c.client(), token.as_ref()).unwrap_err();
        assert!(err.contains("auth"), "{err}");
    }

    /// A broker offering OAUTHBEARER that keeps each SaslAuthenticate's bytes and then
    /// answers nothing more.
    async fn oauthbearer_broker() -> (FakeBroker, Arc<Mutex<Vec<Vec<u8>>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let b = FakeBroker::start(move |r: &Received| match ApiKey::try_from(r.api_key) {
            Ok(ApiKey::ApiVersions) => answer_api_versions(r, KAFKA_4_1),
            Ok(ApiKey::SaslHandshake) => answer(
                r,
                &SaslHandshakeResponse::default()
                    .with_mechanisms(vec![StrBytes::from_static_str("OAUTHBEARER")]),
            ),
            Ok(ApiKey::SaslAuthenticate) => {
                let request: SaslAuthenticateRequest = r.decode();
                log.lock().unwrap().push(request.auth_bytes.to_vec());
                answer(
                    r,
                    &SaslAuthenticateResponse::default().with_session_lifetime_ms(60_000),
                )
            }
            _ => Reply::Hang,
        })
        .await;
        (b, seen)
    }

    /// What the canary's consumer sends to authenticate with `wire`'s mechanism.
    async fn first_auth_bytes(wire: WireOptions) -> Vec<u8> {
        let (b, seen) = oauthbearer_broker().await;
        let context = CanaryContext::new(&wire);
        let token = context.token(DEADLINE).await.unwrap();
        let address = b.address.clone();
        tokio::task::spawn_blocking(move || {
            let c: BaseConsumer<CanaryContext> = ClientConfig::new()
                .set("bootstrap.servers", &address)
                .set("security.protocol", "SASL_PLAINTEXT")
                .set("sasl.mechanism", "OAUTHBEARER")
                .set("group.id", "t")
                .create_with_context(context.clone())
                .unwrap();
            context.prime(c.client(), token.as_ref()).unwrap();
            // Authenticates, then waits on the metadata the broker never gives.
            let _ = c.fetch_metadata(None, std::time::Duration::from_secs(3));
        })
        .await
        .unwrap();
        let seen = seen.lock().unwrap();
        seen.first().cloned().expect("the client authenticated")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_canary_sends_its_token_with_the_extensions() {
        let bytes = first_auth_bytes(oauth_wire(&[
            ("logicalCluster", "lkc-abc123"),
            ("identityPoolId", "pool-Ab12"),
        ]))
        .await;
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with("n,,\x01auth=Bearer a.b.c\x01"), "{text:?}");
        assert!(
            text.contains("\x01logicalCluster=lkc-abc123\x01"),
            "{text:?}"
        );
        assert!(
            text.contains("\x01identityPoolId=pool-Ab12\x01"),
            "{text:?}"
        );
        assert!(text.ends_with("\x01\x01"), "{text:?}");
    }

    /// librdkafka has no AWS_MSK_IAM; the canary's clients send MSK's OAUTHBEARER form of
    /// the same identity: the signed request for the regional host, as a URL.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_canary_authenticates_to_msk_iam_with_the_signed_url_as_its_token() {
        let identity = AwsIdentity::with_credentials(
            AwsIamSettings {
                region: "eu-west-1".into(),
                profile: None,
            },
            aws_credential_types::Credentials::new(
                "AKIDCANARY",
                "secret",
                Some("tok".into()),
                None,
                "test",
            ),
            tokio::runtime::Handle::current(),
        );
        let wire = WireOptions {
            security: Security::SaslPlaintext(SaslSettings {
                aws: Some(Arc::new(identity)),
                ..SaslSettings::user_password(SaslMechanism::AwsMskIam, "", "")
            }),
            ..WireOptions::default()
        };
        let bytes = first_auth_bytes(wire).await;
        let text = String::from_utf8(bytes).unwrap();
        let token = text
            .strip_prefix("n,,\x01auth=Bearer ")
            .and_then(|t| t.strip_suffix("\x01\x01"))
            .unwrap_or_else(|| panic!("{text:?}"));
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .unwrap();
        let url = String::from_utf8(url).unwrap();
        assert!(
            url.starts_with(
                "https://kafka.eu-west-1.amazonaws.com/?Action=kafka-cluster%3AConnect&"
            ),
            "{url}"
        );
        assert!(url.contains("X-Amz-Credential=AKIDCANARY%2F"), "{url}");
        assert!(url.contains("X-Amz-Security-Token=tok"), "{url}");
        assert!(url.contains("&User-Agent=kafka-watchdog%2F"), "{url}");
    }

    /// A token endpoint that takes the request and never answers: the canary hears so at
    /// its deadline, in words, instead of waiting (a runtime worker with it, before).
    #[tokio::test]
    async fn a_token_endpoint_that_never_answers_is_an_error_at_the_deadline() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        let _held = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                held.push(s);
            }
        });
        let source = TokenSource::new(
            url,
            "watchdog".into(),
            "secret".into(),
            None,
            None,
            Duration::from_secs(30),
        );
        let wire = WireOptions {
            security: Security::SaslPlaintext(SaslSettings {
                oauth: Some(Arc::new(source)),
                ..SaslSettings::user_password(SaslMechanism::OAuthBearer, "", "")
            }),
            ..WireOptions::default()
        };
        let started = std::time::Instant::now();
        let err = CanaryContext::new(&wire)
            .token(Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(err.starts_with("no token within 0.3 s"), "{err}");
    }

    #[tokio::test]
    async fn without_a_token_mechanism_nothing_is_set() {
        let context = CanaryContext::new(&WireOptions::default());
        assert!(context.token.is_none());
        assert!(context.token(DEADLINE).await.unwrap().is_none());
    }
}
