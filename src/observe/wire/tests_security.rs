//! TLS and SASL against the fake broker. The certificates in `testdata/` are test-only
//! fixtures (see `testdata/README.md`), valid for a century.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, MetadataResponse, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use ring::{digest, hmac, pbkdf2};
use tokio_rustls::rustls::crypto::ring as ring_provider;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};

use super::*;
use crate::model::round::FailureKind;
use kafka_watchdog_test_support::fake_broker::{
    answer, answer_api_versions, ranges_with, FakeBroker, Received, Reply, KAFKA_4_1,
};

const CA: &[u8] = include_bytes!("testdata/ca.pem");
const ROGUE_CA: &[u8] = include_bytes!("testdata/rogue.pem");
const SERVER_CERT: &[u8] = include_bytes!("testdata/server.pem");
const SERVER_KEY: &[u8] = include_bytes!("testdata/server.key");
const CLIENT_CERT: &[u8] = include_bytes!("testdata/client.pem");
const CLIENT_KEY: &[u8] = include_bytes!("testdata/client.key");

const SHORT: Duration = Duration::from_millis(300);
const MARGIN: Duration = Duration::from_millis(400);

fn server_config(require_client_cert: bool) -> Arc<ServerConfig> {
    let provider = Arc::new(ring_provider::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if require_client_cert {
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(CA).unwrap())
            .unwrap();
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let chain = vec![CertificateDer::from_pem_slice(SERVER_CERT).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(SERVER_KEY).unwrap();
    Arc::new(builder.with_single_cert(chain, key).unwrap())
}

fn tls(ca: &[u8]) -> TlsSettings {
    TlsSettings {
        ca_pem: Some(ca.to_vec().into()),
        ..TlsSettings::default()
    }
}

fn opts(security: Security) -> WireOptions {
    WireOptions {
        connect_timeout: SHORT,
        request_timeout: SHORT,
        security,
        ..WireOptions::default()
    }
}

/// Answers ApiVersions and Metadata; SASL requests go to `sasl`.
fn kafka<F>(sasl: F) -> impl Fn(&Received) -> Reply + Send + Sync + 'static
where
    F: Fn(&Received) -> Reply + Send + Sync + 'static,
{
    move |r| match ApiKey::try_from(r.api_key) {
        Ok(ApiKey::ApiVersions) => answer_api_versions(r, KAFKA_4_1),
        Ok(ApiKey::Metadata) => answer(
            r,
            &MetadataResponse::default().with_cluster_id(Some(StrBytes::from_static_str("tls"))),
        ),
        _ => sasl(r),
    }
}

fn no_sasl(_: &Received) -> Reply {
    Reply::Close
}

async fn connect_err(address: &str, security: Security) -> WireError {
    BrokerClient::connect(address, &opts(security))
        .await
        .expect_err("connect should fail")
}

// ---- TLS ----

#[tokio::test]
async fn tls_with_the_broker_ca_works() {
    let b = FakeBroker::start_tls(server_config(false), kafka(no_sasl)).await;
    let mut client = BrokerClient::connect(&b.address, &opts(Security::Ssl(tls(CA))))
        .await
        .unwrap()
        .client;
    let view = client.metadata(None).await.unwrap().value;
    assert_eq!(view.cluster_id.as_deref(), Some("tls"));

    // The certificate also names "localhost".
    let by_name = TlsSettings {
        server_name: Some("localhost".into()),
        ..tls(CA)
    };
    BrokerClient::connect(&b.address, &opts(Security::Ssl(by_name)))
        .await
        .unwrap();
}

#[tokio::test]
async fn untrusted_or_misnamed_certificate_is_a_tls_failure() {
    let b = FakeBroker::start_tls(server_config(false), kafka(no_sasl)).await;
    let err = connect_err(&b.address, Security::Ssl(tls(ROGUE_CA))).await;
    assert_eq!(err.kind(), FailureKind::Tls, "{err}");
    assert_eq!(err.phase(), Some(Phase::Tls));

    let misnamed = TlsSettings {
        server_name: Some("other.example".into()),
        ..tls(CA)
    };
    let err = connect_err(&b.address, Security::Ssl(misnamed)).await;
    assert_eq!(err.kind(), FailureKind::Tls, "{err}");
    assert!(err.to_string().contains("certificate"), "{err}");

    // Skipping verification trusts anyone, including a certificate from an unknown CA.
    let blind = TlsSettings {
        insecure_skip_verify: true,
        ..tls(ROGUE_CA)
    };
    BrokerClient::connect(&b.address, &opts(Security::Ssl(blind)))
        .await
        .unwrap();
}

#[tokio::test]
async fn tls_to_a_plaintext_listener_is_a_tls_failure() {
    let b = FakeBroker::start(kafka(no_sasl)).await;
    let err = connect_err(&b.address, Security::Ssl(tls(CA))).await;
    assert_eq!(err.kind(), FailureKind::Tls, "{err}");
    assert!(err.to_string().contains("plaintext listener"), "{err}");
}

#[tokio::test]
async fn mutual_tls_needs_the_client_certificate() {
    let b = FakeBroker::start_tls(server_config(true), kafka(no_sasl)).await;
    let with_cert = TlsSettings {
        client_cert: Some(crate::config::live::Current::fixed(vec![
            CLIENT_CERT.to_vec(),
            CLIENT_KEY.to_vec(),
        ])),
        ..tls(CA)
    };
    let mut client = BrokerClient::connect(&b.address, &opts(Security::Ssl(with_cert)))
        .await
        .unwrap()
        .client;
    client.metadata(None).await.unwrap();

    // With TLS 1.3 the refusal arrives after the client's side of the handshake is done.
    let err = connect_err(&b.address, Security::Ssl(tls(CA))).await;
    assert_eq!(err.kind(), FailureKind::Tls, "{err}");
}

#[tokio::test]
async fn silent_listener_times_out_in_the_tls_handshake() {
    let b = FakeBroker::silent().await;
    let started = Instant::now();
    let err = connect_err(&b.address, Security::Ssl(tls(CA))).await;
    let took = started.elapsed();
    assert!(took >= SHORT && took < SHORT + MARGIN, "{took:?}");
    assert_eq!(err.kind(), FailureKind::Timeout, "{err}");
    assert_eq!(err.phase(), Some(Phase::Tls));
}

// ---- SASL ----

fn sasl(mechanism: SaslMechanism, password: &str) -> SaslSettings {
    SaslSettings::user_password(mechanism, "watchdog", password)
}

/// A broker enabling `mechanisms`, checking each SaslAuthenticate token with `check`, which
/// returns the reply token or an error message.
fn sasl_broker<C>(
    mechanisms: &'static [&'static str],
    check: C,
) -> impl Fn(&Received) -> Reply + Send + Sync
where
    C: Fn(&[u8]) -> Result<Vec<u8>, String> + Send + Sync + 'static,
{
    kafka(move |r| match ApiKey::try_from(r.api_key) {
        Ok(ApiKey::SaslHandshake) => {
            let request: SaslHandshakeRequest = r.decode();
            let offered = mechanisms
                .iter()
                .map(|m| StrBytes::from_static_str(m))
                .collect();
            let code = if mechanisms.contains(&request.mechanism.as_str()) {
                0
            } else {
                33
            };
            answer(
                r,
                &SaslHandshakeResponse::default()
                    .with_error_code(code)
                    .with_mechanisms(offered),
            )
        }
        Ok(ApiKey::SaslAuthenticate) => {
            let request: SaslAuthenticateRequest = r.decode();
            let response = match check(&request.auth_bytes) {
                Ok(token) => SaslAuthenticateResponse::default()
                    .with_auth_bytes(Bytes::from(token))
                    .with_session_lifetime_ms(if r.version >= 1 { 60_000 } else { 0 }),
                Err(message) => SaslAuthenticateResponse::default()
                    .with_error_code(58)
                    .with_error_message(Some(StrBytes::from_string(message))),
            };
            answer(r, &response)
        }
        _ => Reply::Close,
    })
}

fn plain_check(token: &[u8]) -> Result<Vec<u8>, String> {
    if token == b"\0watchdog\0right" {
        Ok(Vec::new())
    } else {
        Err("Authentication failed: Invalid username or password".into())
    }
}

#[tokio::test]
async fn sasl_plain_authenticates_before_other_requests() {
    let b = FakeBroker::start(sasl_broker(&["PLAIN"], plain_check)).await;
    let connected = BrokerClient::connect(
        &b.address,
        &opts(Security::SaslPlaintext(sasl(SaslMechanism::Plain, "right"))),
    )
    .await
    .unwrap();
    assert!(connected.sasl_latency.is_some());
    let mut client = connected.client;
    assert_eq!(client.session_lifetime(), Some(Duration::from_secs(60)));
    client.metadata(None).await.unwrap();
    let order: Vec<i16> = b.seen().iter().map(|r| r.api_key).collect();
    assert_eq!(
        order,
        vec![
            ApiKey::ApiVersions as i16,
            ApiKey::SaslHandshake as i16,
            ApiKey::SaslAuthenticate as i16,
            ApiKey::Metadata as i16
        ]
    );
    let handshake: SaslHandshakeRequest = b.seen()[1].decode();
    assert_eq!(handshake.mechanism.as_str(), "PLAIN");
    assert_eq!(b.seen()[1].version, 1);
    assert_eq!(b.seen()[2].version, 2);
}

#[tokio::test]
async fn wrong_password_is_an_authentication_failure() {
    let b = FakeBroker::start(sasl_broker(&["PLAIN"], plain_check)).await;
    let err = connect_err(
        &b.address,
        Security::SaslPlaintext(sasl(SaslMechanism::Plain, "wrong")),
    )
    .await;
    assert_eq!(err.kind(), FailureKind::Authentication, "{err}");
    assert_eq!(err.phase(), Some(Phase::SaslAuthenticate));
    let text = err.to_string();
    assert!(text.contains("SASL_AUTHENTICATION_FAILED"), "{text}");
    assert!(text.contains("Invalid username or password"), "{text}");
    assert!(!text.contains("wrong"), "password leaked: {text}");
}

#[tokio::test]
async fn mechanism_not_enabled_names_what_the_broker_offers() {
    let b = FakeBroker::start(sasl_broker(&["SCRAM-SHA-512"], plain_check)).await;
    let err = connect_err(
        &b.address,
        Security::SaslPlaintext(sasl(SaslMechanism::Plain, "right")),
    )
    .await;
    assert_eq!(err.kind(), FailureKind::Authentication, "{err}");
    assert_eq!(err.phase(), Some(Phase::SaslHandshake));
    assert!(err.to_string().contains("SCRAM-SHA-512"), "{err}");
    assert!(
        err.to_string().contains("UNSUPPORTED_SASL_MECHANISM"),
        "{err}"
    );
}

#[tokio::test]
async fn broker_without_sasl_authenticate_is_unsupported() {
    let b = FakeBroker::start(move |r| {
        answer_api_versions(r, &ranges_with(&[(ApiKey::SaslAuthenticate, 0, -1)]))
    })
    .await;
    let err = connect_err(
        &b.address,
        Security::SaslPlaintext(sasl(SaslMechanism::Plain, "right")),
    )
    .await;
    assert!(
        matches!(
            err,
            WireError::Unsupported {
                phase: Phase::SaslAuthenticate
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn frozen_broker_during_sasl_times_out() {
    let b = FakeBroker::start(kafka(|r| {
        if r.api_key == ApiKey::SaslAuthenticate as i16 {
            Reply::Hang
        } else {
            answer(r, &SaslHandshakeResponse::default())
        }
    }))
    .await;
    let started = Instant::now();
    let err = connect_err(
        &b.address,
        Security::SaslPlaintext(sasl(SaslMechanism::Plain, "right")),
    )
    .await;
    assert!(started.elapsed() < SHORT + MARGIN);
    assert_eq!(err.kind(), FailureKind::Timeout, "{err}");
    assert_eq!(err.phase(), Some(Phase::SaslAuthenticate));
}

/// The server side of SCRAM, written from RFC 5802 section 3 independently of the client.
struct ScramServer {
    sha512: bool,
    password: &'static str,
    forge_signature: bool,
    /// client-first-message-bare and server-first-message of the exchange under way.
    state: Mutex<Option<(String, String)>>,
}

impl ScramServer {
    const SALT: &'static [u8] = b"kafka-watchdog-salt";
    const ITERATIONS: u32 = 4096;

    fn step(&self, token: &[u8]) -> Result<Vec<u8>, String> {
        let text = std::str::from_utf8(token).map_err(|e| e.to_string())?;
        if let Some(bare) = text.strip_prefix("n,,") {
            let client_nonce = bare.split(",r=").nth(1).ok_or("no nonce")?;
            let server_first = format!(
                "r={client_nonce}srv-nonce,s={},i={}",
                BASE64.encode(Self::SALT),
                Self::ITERATIONS
            );
            *self.state.lock().unwrap() = Some((bare.to_owned(), server_first.clone()));
            return Ok(server_first.into_bytes());
        }
        let (bare, server_first) = self.state.lock().unwrap().take().ok_or("no exchange")?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or("no proof")?;
        let proof = BASE64.decode(proof).map_err(|e| e.to_string())?;
        let (pbkdf, mac, hash) = if self.sha512 {
            (
                pbkdf2::PBKDF2_HMAC_SHA512,
                hmac::HMAC_SHA512,
                &digest::SHA512,
            )
        } else {
            (
                pbkdf2::PBKDF2_HMAC_SHA256,
                hmac::HMAC_SHA256,
                &digest::SHA256,
            )
        };
        let mut salted = vec![0u8; hash.output_len()];
        pbkdf2::derive(
            pbkdf,
            Self::ITERATIONS.try_into().unwrap(),
            Self::SALT,
            self.password.as_bytes(),
            &mut salted,
        );
        let salted = hmac::Key::new(mac, &salted);
        let client_key = hmac::sign(&salted, b"Client Key");
        let stored_key = digest::digest(hash, client_key.as_ref());
        let auth_message = format!("{bare},{server_first},{without_proof}");
        let signature = hmac::sign(
            &hmac::Key::new(mac, stored_key.as_ref()),
            auth_message.as_bytes(),
        );
        let recovered: Vec<u8> = proof
            .iter()
            .zip(signature.as_ref())
            .map(|(p, s)| p ^ s)
            .collect();
        if digest::digest(hash, &recovered).as_ref() != stored_key.as_ref() {
            return Err(
                "Authentication failed during authentication due to invalid credentials".into(),
            );
        }
        let server_key = hmac::Key::new(mac, hmac::sign(&salted, b"Server Key").as_ref());
        let mut server_signature = hmac::sign(&server_key, auth_message.as_bytes())
            .as_ref()
            .to_vec();
        if self.forge_signature {
            server_signature[0] ^= 1;
        }
        Ok(format!("v={}", BASE64.encode(server_signature)).into_bytes())
    }
}

async fn scram_broker(
    sha512: bool,
    forge_signature: bool,
    tls_config: Option<Arc<ServerConfig>>,
) -> FakeBroker {
    let server = Arc::new(ScramServer {
        sha512,
        password: "pencil",
        forge_signature,
        state: Mutex::new(None),
    });
    let handler = sasl_broker(&["SCRAM-SHA-256", "SCRAM-SHA-512"], move |t| server.step(t));
    match tls_config {
        Some(config) => FakeBroker::start_tls(config, handler).await,
        None => FakeBroker::start(handler).await,
    }
}

#[tokio::test]
async fn scram_sha256_and_sha512_authenticate() {
    for (sha512, mechanism) in [
        (false, SaslMechanism::ScramSha256),
        (true, SaslMechanism::ScramSha512),
    ] {
        let b = scram_broker(sha512, false, None).await;
        let mut client = BrokerClient::connect(
            &b.address,
            &opts(Security::SaslPlaintext(sasl(mechanism, "pencil"))),
        )
        .await
        .unwrap_or_else(|e| panic!("{mechanism:?}: {e}"))
        .client;
        client.metadata(None).await.unwrap();
        let rounds = b
            .seen()
            .iter()
            .filter(|r| r.api_key == ApiKey::SaslAuthenticate as i16)
            .count();
        assert_eq!(rounds, 2, "{mechanism:?}");
    }
}

#[tokio::test]
async fn scram_with_a_wrong_password_is_refused_by_the_broker() {
    let b = scram_broker(false, false, None).await;
    let err = connect_err(
        &b.address,
        Security::SaslPlaintext(sasl(SaslMechanism::ScramSha256, "crayon")),
    )
    .await;
    assert_eq!(err.kind(), FailureKind::Authentication, "{err}");
    assert!(err.to_string().contains("invalid credentials"), "{err}");
}

#[tokio::test]
async fn scram_server_that_does_not_know_the_password_is_refused() {
    let b = scram_broker(true, true, None).await;
    let err = connect_err(
        &b.address,
        Security::SaslPlaintext(sasl(SaslMechanism::ScramSha512, "pencil")),
    )
    .await;
    assert_eq!(err.kind(), FailureKind::Authentication, "{err}");
    assert!(
        err.to_string().contains("server signature does not match"),
        "{err}"
    );
}

#[tokio::test]
async fn sasl_ssl_combines_both() {
    let b = scram_broker(true, false, Some(server_config(false))).await;
    let security = Security::SaslSsl(tls(CA), sasl(SaslMechanism::ScramSha512, "pencil"));
    let mut client = BrokerClient::connect(&b.address, &opts(security))
        .await
        .unwrap()
        .client;
    let view = client.metadata(None).await.unwrap().value;
    assert_eq!(view.cluster_id.as_deref(), Some("tls"));
}

// ---- Rotated credentials (issue 39 item 2) ----

/// A folder of its own for one test's credential files.
fn rotation_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("kw-rotate-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Replaces `path` whole, as Kubernetes and cert-manager do: a new file renamed over it.
fn replace(path: &std::path::Path, content: &[u8]) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The wire security of the one cluster of `security_yaml`, as the daemon sets it up.
fn cluster_security(address: &str, security_yaml: &str) -> Security {
    let yaml = format!(
        "clusters:\n  - name: c\n    bootstrap_servers: ['{address}']\n    security:\n{security_yaml}"
    );
    let config = crate::config::parse(&yaml, "test.yaml").expect("valid configuration");
    crate::run::setup::wire_security(&config.clusters[0]).unwrap()
}

/// What the watcher thread does every few seconds.
fn watcher_looks() {
    crate::config::live::look_all();
}

/// The password in `password_file` changes (a Strimzi KafkaUser's Secret): the next
/// connection authenticates with the new one, the same security settings, no restart.
#[tokio::test]
async fn a_rotated_password_file_is_used_by_the_next_connection() {
    let dir = rotation_dir("password");
    let file = dir.join("password");
    std::fs::write(&file, "old\n").unwrap();
    let b = FakeBroker::start(sasl_broker(&["PLAIN"], plain_check)).await;
    let security = cluster_security(
        &b.address,
        &format!(
            "      protocol: SASL_PLAINTEXT\n      sasl: {{mechanism: PLAIN, username: watchdog, password_file: {}}}\n",
            file.display()
        ),
    );
    let err = connect_err(&b.address, security.clone()).await;
    assert_eq!(err.kind(), FailureKind::Authentication, "{err}");

    replace(&file, b"right\n");
    watcher_looks();
    BrokerClient::connect(&b.address, &opts(security.clone()))
        .await
        .expect("the next connection uses the rotated password");

    // A file caught empty mid-write is no password: the last good one stays in use.
    replace(&file, b"");
    watcher_looks();
    BrokerClient::connect(&b.address, &opts(security))
        .await
        .expect("the last good password stays");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The brokers' certificates are renewed under a new CA and `ca_file` is replaced with it:
/// the next connection trusts the new CA.
#[tokio::test]
async fn a_rotated_ca_file_is_trusted_by_the_next_connection() {
    let dir = rotation_dir("ca");
    let file = dir.join("ca.crt");
    std::fs::write(&file, CA).unwrap();
    let renewed = {
        let chain =
            vec![
                CertificateDer::from_pem_slice(include_bytes!("testdata/renewed-server.pem"))
                    .unwrap(),
            ];
        let key =
            PrivateKeyDer::from_pem_slice(include_bytes!("testdata/renewed-server.key")).unwrap();
        let config =
            ServerConfig::builder_with_provider(Arc::new(ring_provider::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .unwrap();
        Arc::new(config)
    };
    let b = FakeBroker::start_tls(renewed, kafka(no_sasl)).await;
    let security = cluster_security(
        &b.address,
        &format!(
            "      protocol: SSL\n      tls: {{ca_file: {}}}\n",
            file.display()
        ),
    );
    let err = connect_err(&b.address, security.clone()).await;
    assert_eq!(err.kind(), FailureKind::Tls, "{err}");

    replace(&file, include_bytes!("testdata/renewed-ca.pem"));
    watcher_looks();
    BrokerClient::connect(&b.address, &opts(security))
        .await
        .expect("the next connection trusts the rotated CA");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- From the wire to the verdict ----

/// Broker 2 at `address` probed as a round probes it, beside a broker 1 that answered and
/// lists both; the verdict on broker 2. Shows which step a failure lands in and what the
/// verdict makes of it.
async fn verdict_on_probed(
    address: &str,
    security: Security,
) -> crate::judge::verdict::BrokerVerdict {
    use crate::model::round::{BrokerEndpoint, BrokerProbe, MetadataView, RoundObservation};
    use std::collections::BTreeMap;
    let (host, port) = address.rsplit_once(':').unwrap();
    let endpoint = |id| BrokerEndpoint {
        id,
        host: host.into(),
        port: port.parse().unwrap(),
        rack: None,
    };
    let probed = crate::observe::probe::probe_broker(endpoint(2), &opts(security), None).await;
    let md = MetadataView {
        cluster_id: Some("c".into()),
        brokers: vec![endpoint(1), endpoint(2)],
        has_leader_epochs: true,
        has_offline_replicas: true,
        version: 12,
        all_topics: true,
        ..MetadataView::default()
    };
    let ms = Duration::from_millis(1);
    let answering = BrokerProbe {
        endpoint: endpoint(1),
        connect: Ok(ms),
        api_versions: Some(Ok(ms)),
        metadata: Some(Ok((md, ms))),
        description: None,
        certificate: None,
        log_dirs: None,
        speaks_quorum: None,
    };
    let obs = RoundObservation {
        cluster: "c".into(),
        started_at: std::time::SystemTime::now(),
        duration: ms,
        probes: [(1, answering), (2, probed)].into_iter().collect(),
        bootstrap_failures: Vec::new(),
        min_isr: BTreeMap::new(),
        unclean_allowed: Default::default(),
        eligible_leaders: Default::default(),
        host: BTreeMap::new(),
        followers: BTreeMap::new(),
        liveness: BTreeMap::new(),
        quorum: None,
        coordinators: None,
        brokers_unwatched: 0,
    };
    let answers: Vec<_> = obs
        .probes
        .iter()
        .filter_map(|(id, p)| p.metadata_view().map(|m| (*id, m)))
        .collect();
    let view = crate::observe::cluster_view::merge(&answers);
    let health = crate::judge::health::classify(&view, &obs.min_isr, |_| true);
    crate::judge::verdict::judge(
        &obs,
        &view,
        &health,
        None,
        &BTreeMap::new(),
        &crate::judge::verdict::VerdictSettings::default(),
        std::time::SystemTime::now(),
    )
    .into_iter()
    .find(|v| v.broker == 2)
    .unwrap()
}

fn rule_names(v: &crate::judge::verdict::BrokerVerdict) -> Vec<&'static str> {
    v.hits.iter().map(|h| h.rule.name()).collect()
}

#[tokio::test]
async fn a_broker_refusing_the_watchdogs_password_is_not_judged_a_zombie() {
    let b = FakeBroker::start(sasl_broker(&["PLAIN"], plain_check)).await;
    let v = verdict_on_probed(
        &b.address,
        Security::SaslPlaintext(sasl(SaslMechanism::Plain, "wrong")),
    )
    .await;
    assert_eq!(
        v.state,
        crate::judge::verdict::BrokerState::Unknown,
        "{:?}",
        v.hits
    );
    assert_eq!(rule_names(&v), vec!["auth_failed"]);
    assert!(
        v.hits[0].detail.contains("SASL_AUTHENTICATION_FAILED"),
        "{}",
        v.hits[0].detail
    );
}

#[tokio::test]
async fn a_broker_whose_certificate_is_not_trusted_is_not_judged_down_or_a_zombie() {
    let b = FakeBroker::start_tls(server_config(false), kafka(no_sasl)).await;
    let v = verdict_on_probed(&b.address, Security::Ssl(tls(ROGUE_CA))).await;
    assert_eq!(
        v.state,
        crate::judge::verdict::BrokerState::Unknown,
        "{:?}",
        v.hits
    );
    assert_eq!(rule_names(&v), vec!["auth_failed"]);
}

#[tokio::test]
async fn an_answer_the_watchdog_cannot_decode_is_not_judged_a_zombie() {
    let b = FakeBroker::start(|r: &Received| match ApiKey::try_from(r.api_key) {
        Ok(ApiKey::ApiVersions) => answer_api_versions(r, KAFKA_4_1),
        // The right correlation id, then bytes no Metadata response decodes from.
        _ => {
            let mut frame = Vec::new();
            frame.extend_from_slice(&7i32.to_be_bytes());
            frame.extend_from_slice(&r.correlation_id.to_be_bytes());
            frame.extend_from_slice(&[0xff, 0xff, 0xff]);
            Reply::Raw(frame)
        }
    })
    .await;
    let v = verdict_on_probed(&b.address, Security::Plaintext).await;
    assert_eq!(
        v.state,
        crate::judge::verdict::BrokerState::Unknown,
        "{:?}",
        v.hits
    );
    assert_eq!(rule_names(&v), vec!["protocol_error"]);
}

// ---- OAUTHBEARER ----

/// Kafka's OAUTHBEARER server: a rejected token gets an RFC 7628 error challenge, and the
/// client's %x01 answer ends the exchange with an error.
fn oauth_check(token: &[u8]) -> Result<Vec<u8>, String> {
    match token {
        b"n,,\x01auth=Bearer good.jwt.sig\x01\x01" => Ok(Vec::new()),
        b"\x01" => Err("Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER".into()),
        _ => Ok(br#"{"status":"invalid_token"}"#.to_vec()),
    }
}

fn oauth(token: &str) -> SaslSettings {
    SaslSettings {
        oauth: Some(std::sync::Arc::new(super::oauth::TokenSource::with_cached(
            token, "watchdog",
        ))),
        ..SaslSettings::user_password(SaslMechanism::OAuthBearer, "", "")
    }
}

#[tokio::test]
async fn oauthbearer_sends_the_token_as_rfc_7628_initial_response() {
    let b = FakeBroker::start(sasl_broker(&["OAUTHBEARER"], oauth_check)).await;
    let connected = BrokerClient::connect(
        &b.address,
        &opts(Security::SaslPlaintext(oauth("good.jwt.sig"))),
    )
    .await
    .unwrap();
    connected.client.session_lifetime().unwrap();
    let handshake: SaslHandshakeRequest = b.seen()[1].decode();
    assert_eq!(handshake.mechanism.as_str(), "OAUTHBEARER");
}

#[tokio::test]
async fn a_rejected_token_is_an_authentication_failure_with_the_broker_status() {
    let b = FakeBroker::start(sasl_broker(&["OAUTHBEARER"], oauth_check)).await;
    let err = connect_err(
        &b.address,
        Security::SaslPlaintext(oauth("expired.jwt.sig")),
    )
    .await;
    assert_eq!(err.kind(), FailureKind::Authentication, "{err}");
    let text = err.to_string();
    assert!(text.contains("invalid_token"), "{text}");
    assert!(text.contains("watchdog"), "{text}");
    assert!(!text.contains("expired.jwt.sig"), "token leaked: {text}");
    // The client acknowledged the challenge, as RFC 7628 requires.
    let last: SaslAuthenticateRequest = b.seen().last().unwrap().decode();
    assert_eq!(&last.auth_bytes[..], b"\x01");
}

/// KIP-342: the extensions follow `auth=` in the initial response, each a kvpair.
#[tokio::test]
async fn oauthbearer_sends_the_extensions_after_the_token() {
    let check = |token: &[u8]| {
        match token {
        b"n,,\x01auth=Bearer good.jwt.sig\x01logicalCluster=lkc-1\x01identityPoolId=pool-2\x01\x01" => {
            Ok(Vec::new())
        }
        _ => Ok(br#"{"status":"invalid_extensions"}"#.to_vec()),
    }
    };
    let b = FakeBroker::start(sasl_broker(&["OAUTHBEARER"], check)).await;
    let settings = SaslSettings {
        extensions: vec![
            ("logicalCluster".into(), "lkc-1".into()),
            ("identityPoolId".into(), "pool-2".into()),
        ],
        ..oauth("good.jwt.sig")
    };
    BrokerClient::connect(&b.address, &opts(Security::SaslPlaintext(settings)))
        .await
        .unwrap();
}

// ---- AWS_MSK_IAM ----

/// The probes sign for the broker's own host with the identity's credentials; the
/// payload is the JSON document MSK reads.
#[tokio::test]
async fn aws_msk_iam_signs_for_the_broker_host_with_the_identity_credentials() {
    let b = FakeBroker::start(sasl_broker(&["AWS_MSK_IAM"], |payload| {
        let doc: serde_json::Value = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
        let credential = doc["x-amz-credential"].as_str().unwrap_or_default();
        if doc["host"] == "127.0.0.1"
            && credential.starts_with("AKIDPROBE/")
            && credential.ends_with("/eu-west-1/kafka-cluster/aws4_request")
            && doc["x-amz-security-token"] == "tok"
            && doc["action"] == "kafka-cluster:Connect"
        {
            Ok(br#"{"version":"2020_10_22","request-id":"r-1"}"#.to_vec())
        } else {
            Err(format!("unexpected payload {doc}"))
        }
    }))
    .await;
    let identity = super::AwsIdentity::with_credentials(
        super::AwsIamSettings {
            region: "eu-west-1".into(),
            profile: None,
        },
        aws_credential_types::Credentials::new(
            "AKIDPROBE",
            "secret",
            Some("tok".into()),
            None,
            "t",
        ),
        tokio::runtime::Handle::current(),
    );
    let settings = SaslSettings {
        aws: Some(std::sync::Arc::new(identity)),
        ..SaslSettings::user_password(SaslMechanism::AwsMskIam, "", "")
    };
    BrokerClient::connect(&b.address, &opts(Security::SaslPlaintext(settings)))
        .await
        .unwrap();
}
