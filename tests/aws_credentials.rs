//! AWS_MSK_IAM with the credentials of each link of the AWS SDK's default chain, found the
//! way a deployment finds them (environment, profile files, IRSA's web identity, EKS Pod
//! Identity's container credentials, an instance profile through IMDSv2), against local
//! fakes of those endpoints and of an MSK broker that reads the signed payload. The real
//! binary runs `check` with an environment of the test's making only. No lab, no network.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::watchdog::temp_dir;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_watchdog_test_support::fake_aws::{self, FakeAws};
use kafka_watchdog_test_support::fake_broker::{
    answer, answer_api_versions, FakeBroker, Received, Reply, KAFKA_4_1,
};

const POD_TOKEN: &str = "pod-identity-token-1";
const WEB_IDENTITY_TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.irsa.sig";

/// An MSK broker as far as authentication goes: it offers AWS_MSK_IAM, keeps every
/// payload, accepts it, and closes the connection at the next request.
async fn msk_broker() -> (FakeBroker, Arc<Mutex<Vec<serde_json::Value>>>) {
    let payloads = Arc::new(Mutex::new(Vec::new()));
    let log = payloads.clone();
    let b = FakeBroker::start(move |r: &Received| match ApiKey::try_from(r.api_key) {
        Ok(ApiKey::ApiVersions) => answer_api_versions(r, KAFKA_4_1),
        Ok(ApiKey::SaslHandshake) => answer(
            r,
            &SaslHandshakeResponse::default()
                .with_mechanisms(vec![StrBytes::from_static_str("AWS_MSK_IAM")]),
        ),
        Ok(ApiKey::SaslAuthenticate) => {
            let request: SaslAuthenticateRequest = r.decode();
            let doc = serde_json::from_slice(&request.auth_bytes).unwrap_or_default();
            log.lock().unwrap().push(doc);
            answer(
                r,
                &SaslAuthenticateResponse::default()
                    .with_auth_bytes(r#"{"version":"2020_10_22","request-id":"t-1"}"#.into())
                    .with_session_lifetime_ms(60_000),
            )
        }
        _ => Reply::Close,
    })
    .await;
    (b, payloads)
}

/// `kafka-watchdog check` against `broker` with only `env` (and PATH) in its environment;
/// its stdout and stderr together.
fn check(dir: &Path, broker: &str, profile: Option<&str>, env: &[(&str, String)]) -> String {
    let config = dir.join("watchdog.yaml");
    std::fs::write(
        &config,
        format!(
            "state_dir: {state}\nclusters:\n  - name: msk\n    bootstrap_servers: [{broker}]\n    \
             connect_timeout_ms: 2000\n    request_timeout_ms: 2000\n    canary:\n      enabled: false\n    \
             security:\n      protocol: SASL_PLAINTEXT\n      sasl:\n        mechanism: AWS_MSK_IAM\n        \
             region: eu-west-1\n{profile}",
            state = dir.join("state").display(),
            profile = profile.map_or_else(String::new, |p| format!("        profile: {p}\n")),
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kafka-watchdog"))
        .args(["check", "-c"])
        .arg(&config)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        // No profile files but the test's own.
        .env("AWS_CONFIG_FILE", dir.join("no-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-credentials"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kafka-watchdog check");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "check ran past 60 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The payload the broker saw first: signed for it, with the given key and session token.
fn assert_signed_with(
    payloads: &Mutex<Vec<serde_json::Value>>,
    key: &str,
    session: Option<&str>,
    output: &str,
) {
    let payloads = payloads.lock().unwrap();
    let first = payloads
        .first()
        .unwrap_or_else(|| panic!("no AWS_MSK_IAM payload reached the broker:\n{output}"));
    let credential = first["x-amz-credential"].as_str().unwrap_or_default();
    assert!(
        credential.starts_with(&format!("{key}/"))
            && credential.ends_with("/eu-west-1/kafka-cluster/aws4_request"),
        "{first:#}"
    );
    assert_eq!(first["host"], "127.0.0.1", "{first:#}");
    assert_eq!(first["x-amz-security-token"].as_str(), session, "{first:#}");
    assert_eq!(
        first["x-amz-signature"].as_str().map(str::len),
        Some(64),
        "{first:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_link_of_the_default_chain_signs_the_msk_payload() {
    let aws = FakeAws::start(POD_TOKEN, WEB_IDENTITY_TOKEN).await.unwrap();
    let dir = temp_dir("aws-chain");
    let imds = ("AWS_EC2_METADATA_SERVICE_ENDPOINT", aws.imds_endpoint());
    let pod_token_file = dir.join("pod-token");
    std::fs::write(&pod_token_file, POD_TOKEN).unwrap();
    let web_token_file = dir.join("web-identity-token");
    std::fs::write(&web_token_file, WEB_IDENTITY_TOKEN).unwrap();
    std::fs::write(
        dir.join("credentials"),
        "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = d\n\n\
         [msk]\naws_access_key_id = AKIDFROMPROFILE\naws_secret_access_key = p\n\
         aws_session_token = profile-session\n",
    )
    .unwrap();
    std::fs::write(dir.join("config"), "[profile msk]\nregion = eu-west-1\n").unwrap();

    type Case<'a> = (
        &'a str,
        Option<&'a str>,
        Vec<(&'a str, String)>,
        &'a str,
        Option<&'a str>,
    );
    let cases: Vec<Case> = vec![
        (
            "environment, ahead of instance metadata",
            None,
            vec![
                ("AWS_ACCESS_KEY_ID", "AKIDFROMENV".into()),
                ("AWS_SECRET_ACCESS_KEY", "e".into()),
                imds.clone(),
            ],
            "AKIDFROMENV",
            None,
        ),
        (
            "the profile the config names",
            Some("msk"),
            vec![
                (
                    "AWS_SHARED_CREDENTIALS_FILE",
                    dir.join("credentials").display().to_string(),
                ),
                ("AWS_CONFIG_FILE", dir.join("config").display().to_string()),
                imds.clone(),
            ],
            "AKIDFROMPROFILE",
            Some("profile-session"),
        ),
        (
            "IRSA: a web identity token exchanged at STS",
            None,
            vec![
                (
                    "AWS_WEB_IDENTITY_TOKEN_FILE",
                    web_token_file.display().to_string(),
                ),
                (
                    "AWS_ROLE_ARN",
                    "arn:aws:iam::123456789012:role/watchdog".into(),
                ),
                ("AWS_ROLE_SESSION_NAME", "kw".into()),
                ("AWS_ENDPOINT_URL_STS", aws.sts_endpoint()),
                imds.clone(),
            ],
            fake_aws::STS_KEY,
            Some("irsa-session"),
        ),
        (
            "EKS Pod Identity: container credentials with an authorization token file",
            None,
            vec![
                ("AWS_CONTAINER_CREDENTIALS_FULL_URI", aws.container_uri()),
                (
                    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                    pod_token_file.display().to_string(),
                ),
                imds.clone(),
            ],
            fake_aws::CONTAINER_KEY,
            Some("pod-session"),
        ),
        (
            "an instance profile through IMDSv2",
            None,
            vec![imds.clone()],
            fake_aws::IMDS_KEY,
            Some("imds-session"),
        ),
    ];
    for (what, profile, env, key, session) in cases {
        let (broker, payloads) = msk_broker().await;
        let calls_before = aws.calls().len();
        let (d, address) = (dir.clone(), broker.address.clone());
        let output = tokio::task::spawn_blocking(move || check(&d, &address, profile, &env))
            .await
            .unwrap();
        eprintln!("{what}: {:?}", &aws.calls()[calls_before..]);
        assert_signed_with(&payloads, key, session, &format!("{what}:\n{output}"));
        if key == "AKIDFROMENV" {
            assert_eq!(
                aws.calls().len(),
                calls_before,
                "the environment's keys win: no endpoint asked"
            );
        }
    }
}

/// With no link of the chain giving credentials, `check` says so and what it tried, and
/// the broker is never sent an unsigned payload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_credentials_check_names_what_the_chain_tried() {
    let dir = temp_dir("aws-none");
    let (broker, payloads) = msk_broker().await;
    let address = broker.address.clone();
    let d = dir.clone();
    let output = tokio::task::spawn_blocking(move || {
        check(
            &d,
            &address,
            None,
            &[("AWS_EC2_METADATA_DISABLED", "true".into())],
        )
    })
    .await
    .unwrap();
    eprintln!("{output}");
    assert!(
        output.contains("no AWS credentials for AWS_MSK_IAM"),
        "{output}"
    );
    assert!(payloads.lock().unwrap().is_empty(), "{output}");
}
