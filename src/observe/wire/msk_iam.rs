//! Amazon MSK IAM access control (SASL mechanism AWS_MSK_IAM): the client sends one JSON
//! document holding a SigV4 presigned `kafka-cluster:Connect` request for the broker's
//! host, signed with the caller's AWS credentials; the broker checks the signature and the
//! IAM policy and answers with a JSON document naming the request id.
//!
//! Credentials are looked up at every authentication, in the order of the AWS SDKs'
//! default chain as far as it can be followed without network: the environment
//! (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), then the shared
//! credentials file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, profile from the
//! config, AWS_PROFILE, or `default`). Instance metadata, ECS task roles and web identity
//! are not followed.

use std::fmt;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use ring::{digest, hmac};

pub(crate) const SERVICE: &str = "kafka-cluster";
const ACTION: &str = "kafka-cluster:Connect";
const PAYLOAD_VERSION: &str = "2020_10_22";
const ALGORITHM: &str = "AWS4-HMAC-SHA256";
/// How long the signed request stays valid; the broker checks it once, at connection.
const EXPIRES_SECS: u64 = 900;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsIamSettings {
    pub region: String,
    pub profile: Option<String>,
}

#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<withheld>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<withheld>"),
            )
            .finish()
    }
}

/// The credentials chain: `env` is the process environment in production, a map in tests.
pub(crate) fn credentials(
    profile: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<AwsCredentials, String> {
    let var = |k: &str| env(k).filter(|v| !v.is_empty());
    if let (Some(id), Some(secret)) = (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
        return Ok(AwsCredentials {
            access_key_id: id,
            secret_access_key: secret,
            session_token: var("AWS_SESSION_TOKEN"),
        });
    }
    let profile = profile
        .map(str::to_string)
        .or_else(|| var("AWS_PROFILE"))
        .unwrap_or_else(|| "default".into());
    let path = var("AWS_SHARED_CREDENTIALS_FILE")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".aws").join("credentials")));
    let Some(path) = path else {
        return Err(no_credentials("no HOME to find ~/.aws/credentials in"));
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| no_credentials(&format!("cannot read {}: {e}", path.display())))?;
    from_credentials_file(&text, &profile).ok_or_else(|| {
        no_credentials(&format!(
            "{} has no profile [{profile}] with aws_access_key_id and aws_secret_access_key",
            path.display()
        ))
    })
}

fn no_credentials(why: &str) -> String {
    format!(
        "no AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set and {why} \
         (instance metadata and web identity are not looked up)"
    )
}

/// The INI-style shared credentials file.
fn from_credentials_file(text: &str, profile: &str) -> Option<AwsCredentials> {
    let mut in_profile = false;
    let (mut id, mut secret, mut token) = (None, None, None);
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_profile = name.trim() == profile;
            continue;
        }
        if !in_profile {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            let v = v.trim().to_string();
            match k.trim() {
                "aws_access_key_id" => id = Some(v),
                "aws_secret_access_key" => secret = Some(v),
                "aws_session_token" => token = Some(v),
                _ => {}
            }
        }
    }
    Some(AwsCredentials {
        access_key_id: id.filter(|v| !v.is_empty())?,
        secret_access_key: secret.filter(|v| !v.is_empty())?,
        session_token: token.filter(|v| !v.is_empty()),
    })
}

/// `20150830T123600Z` and `20150830` for a point in time (UTC).
pub(crate) fn amz_date(at: SystemTime) -> (String, String) {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let date = format!("{y:04}{m:02}{d:02}");
    let time = format!(
        "{date}T{:02}{:02}{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    );
    (time, date)
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
        .as_ref()
        .to_vec()
}

/// SigV4 URI encoding: everything but RFC 3986 unreserved characters, upper-case hex.
pub(crate) fn uri_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What SigV4 signs for one request. Query pairs and headers are given unencoded; header
/// names in any case.
pub(crate) struct Request<'a> {
    pub method: &'a str,
    /// Already in canonical (encoded) form.
    pub path: &'a str,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    pub payload_sha256: String,
}

pub(crate) struct Scope<'a> {
    pub date: &'a str,
    pub region: &'a str,
    pub service: &'a str,
}

impl Scope<'_> {
    fn credential_scope(&self) -> String {
        format!(
            "{}/{}/{}/aws4_request",
            self.date, self.region, self.service
        )
    }
}

/// The canonical request and the signed header list.
pub(crate) fn canonical_request(r: &Request<'_>) -> (String, String) {
    let mut query: Vec<(String, String)> = r
        .query
        .iter()
        .map(|(k, v)| (uri_encode(k), uri_encode(v)))
        .collect();
    query.sort();
    let query = query
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let mut headers: Vec<(String, String)> = r
        .headers
        .iter()
        .map(|(k, v)| {
            let v = v.split_whitespace().collect::<Vec<_>>().join(" ");
            (k.to_ascii_lowercase(), v)
        })
        .collect();
    headers.sort();
    let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let signed = headers
        .iter()
        .map(|(k, _)| k.as_str())
        .collect::<Vec<_>>()
        .join(";");
    (
        format!(
            "{}\n{}\n{query}\n{canonical_headers}\n{signed}\n{}",
            r.method, r.path, r.payload_sha256
        ),
        signed,
    )
}

/// The hex signature of a request.
pub(crate) fn signature(
    secret_access_key: &str,
    amz_date: &str,
    scope: &Scope<'_>,
    request: &Request<'_>,
) -> String {
    let (canonical, _) = canonical_request(request);
    let string_to_sign = format!(
        "{ALGORITHM}\n{amz_date}\n{}\n{}",
        scope.credential_scope(),
        sha256_hex(canonical.as_bytes())
    );
    let k_date = hmac_sha256(
        format!("AWS4{secret_access_key}").as_bytes(),
        scope.date.as_bytes(),
    );
    let k_region = hmac_sha256(&k_date, scope.region.as_bytes());
    let k_service = hmac_sha256(&k_region, scope.service.as_bytes());
    let k_signing = hmac_sha256(&k_service, b"aws4_request");
    hex(&hmac_sha256(&k_signing, string_to_sign.as_bytes()))
}

/// The AWS_MSK_IAM authentication payload for a broker host (no port), signed at `at`.
pub(crate) fn payload(
    host: &str,
    region: &str,
    creds: &AwsCredentials,
    user_agent: &str,
    at: SystemTime,
) -> Vec<u8> {
    let (amz_date, date) = amz_date(at);
    let scope = Scope {
        date: &date,
        region,
        service: SERVICE,
    };
    let credential = format!("{}/{}", creds.access_key_id, scope.credential_scope());
    let mut query = vec![
        ("Action".to_string(), ACTION.to_string()),
        ("X-Amz-Algorithm".into(), ALGORITHM.into()),
        ("X-Amz-Credential".into(), credential.clone()),
        ("X-Amz-Date".into(), amz_date.clone()),
        ("X-Amz-Expires".into(), EXPIRES_SECS.to_string()),
        ("X-Amz-SignedHeaders".into(), "host".into()),
    ];
    if let Some(t) = &creds.session_token {
        query.push(("X-Amz-Security-Token".into(), t.clone()));
    }
    let request = Request {
        method: "GET",
        path: "/",
        query,
        headers: vec![("host".into(), host.to_string())],
        // A presigned request carries no body: the hash of the empty string.
        payload_sha256: sha256_hex(b""),
    };
    let sig = signature(&creds.secret_access_key, &amz_date, &scope, &request);
    let mut doc = serde_json::json!({
        "version": PAYLOAD_VERSION,
        "host": host,
        "user-agent": user_agent,
        "action": ACTION,
        "x-amz-algorithm": ALGORITHM,
        "x-amz-credential": credential,
        "x-amz-date": amz_date,
        "x-amz-signedheaders": "host",
        "x-amz-expires": EXPIRES_SECS.to_string(),
        "x-amz-signature": sig,
    });
    if let Some(t) = &creds.session_token {
        doc["x-amz-security-token"] = serde_json::Value::String(t.clone());
    }
    serde_json::to_vec(&doc).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

    /// AWS's SigV4 test suite: credentials AKIDEXAMPLE, 2015-08-30T12:36:00Z, us-east-1,
    /// service "service", host example.amazonaws.com.
    fn suite(method: &str, query: &[(&str, &str)]) -> String {
        let scope = Scope {
            date: "20150830",
            region: "us-east-1",
            service: "service",
        };
        let request = Request {
            method,
            path: "/",
            query: query
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            headers: vec![
                ("Host".into(), "example.amazonaws.com".into()),
                ("X-Amz-Date".into(), "20150830T123600Z".into()),
            ],
            payload_sha256: sha256_hex(b""),
        };
        signature(KEY, "20150830T123600Z", &scope, &request)
    }

    #[test]
    fn signatures_match_the_aws_sigv4_test_suite() {
        // get-vanilla
        assert_eq!(
            suite("GET", &[]),
            "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
        );
        // get-vanilla-query-order-key-case: parameters are sorted before signing.
        assert_eq!(
            suite("GET", &[("Param2", "value2"), ("Param1", "value1")]),
            "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"
        );
        // post-vanilla
        assert_eq!(
            suite("POST", &[]),
            "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"
        );
    }

    #[test]
    fn the_canonical_request_of_get_vanilla() {
        let (canonical, signed) = canonical_request(&Request {
            method: "GET",
            path: "/",
            query: Vec::new(),
            headers: vec![
                ("Host".into(), "example.amazonaws.com".into()),
                ("X-Amz-Date".into(), "20150830T123600Z".into()),
            ],
            payload_sha256: sha256_hex(b""),
        });
        assert_eq!(signed, "host;x-amz-date");
        assert_eq!(
            canonical,
            "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n\
             host;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn dates_are_formatted_in_utc() {
        let at = UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        assert_eq!(
            amz_date(at),
            ("20150830T123600Z".to_string(), "20150830".to_string())
        );
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(amz_date(leap).1, "20000229");
    }

    #[test]
    fn the_payload_has_the_documented_shape_and_a_verifiable_signature() {
        let creds = AwsCredentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: KEY.into(),
            session_token: Some("session/token+1".into()),
        };
        let at = UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        let host = "b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com";
        let bytes = payload(host, "eu-west-1", &creds, "kafka-watchdog/0.1.0", at);
        let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(doc["version"], "2020_10_22");
        assert_eq!(doc["host"], host);
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
        assert_eq!(doc["x-amz-security-token"], "session/token+1");
        // The signature is the one of the presigned GET the broker rebuilds from these
        // fields: its query has every x-amz field but the signature, encoded and sorted.
        let (canonical, _) = canonical_request(&Request {
            method: "GET",
            path: "/",
            query: vec![
                ("Action".into(), "kafka-cluster:Connect".into()),
                ("X-Amz-Algorithm".into(), "AWS4-HMAC-SHA256".into()),
                (
                    "X-Amz-Credential".into(),
                    "AKIDEXAMPLE/20150830/eu-west-1/kafka-cluster/aws4_request".into(),
                ),
                ("X-Amz-Date".into(), "20150830T123600Z".into()),
                ("X-Amz-Expires".into(), "900".into()),
                ("X-Amz-Security-Token".into(), "session/token+1".into()),
                ("X-Amz-SignedHeaders".into(), "host".into()),
            ],
            headers: vec![("host".into(), host.into())],
            payload_sha256: sha256_hex(b""),
        });
        assert!(canonical.starts_with(
            "GET\n/\nAction=kafka-cluster%3AConnect&X-Amz-Algorithm=AWS4-HMAC-SHA256&\
             X-Amz-Credential=AKIDEXAMPLE%2F20150830%2Feu-west-1%2Fkafka-cluster%2Faws4_request&\
             X-Amz-Date=20150830T123600Z&X-Amz-Expires=900&\
             X-Amz-Security-Token=session%2Ftoken%2B1&X-Amz-SignedHeaders=host\nhost:"
        ));
        let sig = doc["x-amz-signature"].as_str().unwrap();
        assert_eq!(sig.len(), 64);
        let other = payload(host, "eu-west-1", &creds, "x", at + Duration::from_secs(1));
        let other: serde_json::Value = serde_json::from_slice(&other).unwrap();
        assert_ne!(other["x-amz-signature"], doc["x-amz-signature"]);
    }

    #[test]
    fn credentials_come_from_the_environment_then_the_shared_file() {
        let dir = std::env::temp_dir().join(format!("kw-aws-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("credentials");
        std::fs::write(
            &file,
            "[default]\naws_access_key_id = AKDEFAULT\naws_secret_access_key = sd\n\n\
             [msk]\naws_access_key_id=AKMSK\naws_secret_access_key=sm\naws_session_token=tm\n",
        )
        .unwrap();
        let f = file.display().to_string();
        let env = |pairs: Vec<(&'static str, String)>| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())
        };
        let from_env = credentials(
            None,
            &env(vec![
                ("AWS_ACCESS_KEY_ID", "AKENV".into()),
                ("AWS_SECRET_ACCESS_KEY", "se".into()),
                ("AWS_SHARED_CREDENTIALS_FILE", f.clone()),
            ]),
        )
        .unwrap();
        assert_eq!(from_env.access_key_id, "AKENV");
        assert_eq!(from_env.session_token, None);
        let default = credentials(None, &env(vec![("AWS_SHARED_CREDENTIALS_FILE", f.clone())]));
        assert_eq!(default.unwrap().access_key_id, "AKDEFAULT");
        let by_env_profile = credentials(
            None,
            &env(vec![
                ("AWS_SHARED_CREDENTIALS_FILE", f.clone()),
                ("AWS_PROFILE", "msk".into()),
            ]),
        )
        .unwrap();
        assert_eq!(by_env_profile.access_key_id, "AKMSK");
        assert_eq!(by_env_profile.session_token.as_deref(), Some("tm"));
        let missing = credentials(
            Some("nope"),
            &env(vec![("AWS_SHARED_CREDENTIALS_FILE", f.clone())]),
        )
        .unwrap_err();
        assert!(missing.contains("[nope]"), "{missing}");
        let shown = format!("{by_env_profile:?}");
        assert!(
            !shown.contains("sm") || !shown.contains("\"sm\""),
            "{shown}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
