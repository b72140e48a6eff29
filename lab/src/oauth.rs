//! The lab's OAUTHBEARER set-up (`kafka-lab up --security sasl_oauthbearer`): an EC P-256
//! key made once per lab, its public half as a JWKS file the brokers validate tokens
//! against (Kafka's OAuthBearerValidatorCallbackHandler, `file:` JWKS URL), and a small
//! token endpoint on loopback that grants ES256 JWTs to the watchdog's OAuth client
//! (client credentials grant, HTTP Basic or form credentials). Everything lives under the
//! lab folder and goes with `down`; the endpoint's command line names that folder, so
//! `down` ends it with the brokers.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

use crate::error::LabError;

/// The OAuth client the watchdog authenticates as; the token's `sub`.
pub const CLIENT_ID: &str = "watchdog";
/// `aud` of every token, and the brokers' `sasl.oauthbearer.expected.audience`.
pub const AUDIENCE: &str = "kafka-lab";
pub const ISSUER: &str = "kafka-lab-token-endpoint";
/// The token endpoint's loopback port.
pub const TOKEN_PORT: u16 = 9650;
/// SASL_PLAINTEXT listener with OAUTHBEARER on every broker.
pub const OAUTH_PORT: u16 = 9292;
/// Short, so a watchdog run of a few minutes refreshes its token.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(120);
const KID: &str = "kafka-lab-1";

pub fn dir(lab_dir: &Path) -> PathBuf {
    lab_dir.join("oauth")
}

pub fn token_url() -> String {
    format!("http://127.0.0.1:{TOKEN_PORT}/token")
}

pub fn jwks_path(lab_dir: &Path) -> PathBuf {
    dir(lab_dir).join("jwks.json")
}

pub fn secret_path(lab_dir: &Path) -> PathBuf {
    dir(lab_dir).join("client.secret")
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LabError + '_ {
    move |e| LabError::io(path, e)
}

fn key(pkcs8: &[u8]) -> Result<EcdsaKeyPair, LabError> {
    EcdsaKeyPair::from_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        pkcs8,
        &SystemRandom::new(),
    )
    .map_err(|e| LabError::Invalid(format!("lab OAuth key: {e}")))
}

/// The JWKS holding the public key (RFC 7518 6.2: P-256 point coordinates).
pub fn jwks(pair: &EcdsaKeyPair) -> String {
    let point = pair.public_key().as_ref();
    // Uncompressed point: 0x04 || x (32 bytes) || y (32 bytes).
    let (x, y) = point[1..].split_at(32);
    serde_json::json!({"keys": [{
        "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": KID,
        "x": b64(x), "y": b64(y),
    }]})
    .to_string()
}

/// Creates the key, the JWKS file and the client secret of a new lab.
pub fn create(lab_dir: &Path) -> Result<(), LabError> {
    let d = dir(lab_dir);
    fs::create_dir_all(&d).map_err(io(&d))?;
    let pkcs8 =
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
            .map_err(|e| LabError::Invalid(format!("lab OAuth key: {e}")))?;
    let key_path = d.join("key.pk8");
    fs::write(&key_path, pkcs8.as_ref()).map_err(io(&key_path))?;
    let pair = key(pkcs8.as_ref())?;
    let jwks_file = jwks_path(lab_dir);
    fs::write(&jwks_file, jwks(&pair)).map_err(io(&jwks_file))?;
    let mut secret = [0u8; 16];
    let ur = Path::new("/dev/urandom");
    fs::File::open(ur)
        .and_then(|mut f| f.read_exact(&mut secret))
        .map_err(io(ur))?;
    let secret: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let sp = secret_path(lab_dir);
    fs::write(&sp, &secret).map_err(io(&sp))?;
    Ok(())
}

/// A signed ES256 JWT for `subject`, valid from `now` for `lifetime`.
pub fn jwt(pair: &EcdsaKeyPair, subject: &str, now: SystemTime, lifetime: Duration) -> String {
    let iat = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let header = serde_json::json!({"alg": "ES256", "typ": "JWT", "kid": KID});
    let claims = serde_json::json!({
        "sub": subject, "aud": AUDIENCE, "iss": ISSUER,
        "iat": iat, "nbf": iat, "exp": iat + lifetime.as_secs(), "scope": "kafka",
    });
    let signing_input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let sig = pair
        .sign(&SystemRandom::new(), signing_input.as_bytes())
        .map(|s| b64(s.as_ref()))
        .unwrap_or_default();
    format!("{signing_input}.{sig}")
}

/// server.properties lines of a broker's OAUTHBEARER listener, written after the
/// others (a later key wins in Java properties, so the listener lists are replaced whole).
pub fn broker_properties(
    lab_dir: &Path,
    host: &str,
    kraft: bool,
    client_port: u16,
    replication_port: u16,
) -> String {
    let listeners = format!(
        "CLIENT://{host}:{client_port},REPLICATION://{host}:{replication_port},OAUTH://{host}:{OAUTH_PORT}"
    );
    let mut map = "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT,OAUTH:SASL_PLAINTEXT".to_string();
    if kraft {
        map.push_str(",CONTROLLER:PLAINTEXT");
    }
    let prefix = "listener.name.oauth.oauthbearer";
    format!(
        "listeners={listeners}\nadvertised.listeners={listeners}\nlistener.security.protocol.map={map}\n\
         sasl.enabled.mechanisms=OAUTHBEARER\n\
         {prefix}.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n\
         {prefix}.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler\n\
         sasl.oauthbearer.jwks.endpoint.url={}\n\
         sasl.oauthbearer.expected.audience={AUDIENCE}\n\
         sasl.oauthbearer.expected.issuer={ISSUER}\n",
        jwks_url(lab_dir)
    )
}

fn jwks_url(lab_dir: &Path) -> String {
    format!("file://{}", jwks_path(lab_dir).display())
}

/// JVM options of a broker: Kafka 4 refuses OAuth URLs that are not explicitly allowed.
pub fn jvm_args(lab_dir: &Path) -> Vec<String> {
    vec![format!(
        "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={}",
        jwks_url(lab_dir)
    )]
}

/// Starts `kafka-lab token-endpoint` in the background unless one answers already.
pub fn ensure_endpoint(lab_dir: &Path) -> Result<(), LabError> {
    let addr = format!("127.0.0.1:{TOKEN_PORT}");
    if crate::sys::port_open(&addr) {
        return Ok(());
    }
    let exe = std::env::var("KAFKA_LAB_BIN")
        .map(PathBuf::from)
        .ok()
        .or_else(lab_binary)
        .ok_or_else(|| {
            LabError::Invalid(
                "cannot find the kafka-lab binary for the token endpoint; set KAFKA_LAB_BIN".into(),
            )
        })?;
    let d = dir(lab_dir);
    let args = vec![
        "token-endpoint".to_string(),
        "--dir".into(),
        format!("{}/", d.display()),
    ];
    crate::sys::spawn_detached(
        &exe.display().to_string(),
        &args,
        0,
        0,
        &d,
        &d.join("endpoint.log"),
    )?;
    for _ in 0..100 {
        if crate::sys::port_open(&addr) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(LabError::Invalid(format!(
        "the token endpoint did not start; see {}",
        d.join("endpoint.log").display()
    )))
}

/// The kafka-lab binary: this one, or the one built next to a test binary.
fn lab_binary() -> Option<PathBuf> {
    let me = std::env::current_exe().ok()?;
    if me.file_name().is_some_and(|n| n == "kafka-lab") {
        return Some(me);
    }
    // target/debug/deps/<test> -> target/debug/kafka-lab
    let candidate = me.parent()?.parent()?.join("kafka-lab");
    candidate.exists().then_some(candidate)
}

/// Serves `/token` and `/jwks` on the token port until killed.
pub fn serve(oauth_dir: &Path) -> Result<(), LabError> {
    let key_path = oauth_dir.join("key.pk8");
    let pkcs8 = fs::read(&key_path).map_err(io(&key_path))?;
    let pair = key(&pkcs8)?;
    let sp = oauth_dir.join("client.secret");
    let secret = fs::read_to_string(&sp).map_err(io(&sp))?.trim().to_string();
    let addr = format!("127.0.0.1:{TOKEN_PORT}");
    let listener =
        TcpListener::bind(&addr).map_err(|e| LabError::Invalid(format!("bind {addr}: {e}")))?;
    eprintln!(
        "kafka-lab token endpoint: {} (client {CLIENT_ID})",
        token_url()
    );
    for conn in listener.incoming().flatten() {
        let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
        if let Err(e) = answer(conn, &pair, &secret) {
            eprintln!("token endpoint: {e}");
        }
    }
    Ok(())
}

fn answer(mut conn: TcpStream, pair: &EcdsaKeyPair, secret: &str) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let length: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
        .min(64 * 1024);
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let path = request_line.split_whitespace().nth(1).unwrap_or("");
    let (status, json) = if path.starts_with("/jwks") {
        ("200 OK", jwks(pair))
    } else if path.starts_with("/token") {
        let form: Vec<(String, String)> = url_form(&body);
        let field = |n: &str| form.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        let (id, given) = basic(header("authorization").as_deref()).unwrap_or_else(|| {
            (
                field("client_id").unwrap_or_default(),
                field("client_secret").unwrap_or_default(),
            )
        });
        if field("grant_type").as_deref() != Some("client_credentials") {
            (
                "400 Bad Request",
                r#"{"error":"unsupported_grant_type"}"#.to_string(),
            )
        } else if id != CLIENT_ID || given != secret {
            (
                "401 Unauthorized",
                r#"{"error":"invalid_client","error_description":"unknown client or wrong secret"}"#.to_string(),
            )
        } else {
            let token = jwt(pair, &id, SystemTime::now(), TOKEN_LIFETIME);
            (
                "200 OK",
                serde_json::json!({"access_token": token, "token_type": "Bearer", "expires_in": TOKEN_LIFETIME.as_secs()}).to_string(),
            )
        }
    } else {
        ("404 Not Found", r#"{"error":"not_found"}"#.to_string())
    };
    write!(
        conn,
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{json}",
        json.len()
    )
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match u8::from_str_radix(&s[i + 1..i + 3], 16) {
                Ok(b) => {
                    out.push(b);
                    i += 2;
                }
                Err(_) => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn url_form(body: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(body)
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (percent_decode(k), percent_decode(v)))
        .collect()
}

/// RFC 6749 2.3.1: Basic credentials whose parts are form-encoded.
fn basic(header: Option<&str>) -> Option<(String, String)> {
    let encoded = header?
        .strip_prefix("Basic ")
        .or_else(|| header?.strip_prefix("basic "))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (id, secret) = text.split_once(':')?;
    Some((percent_decode(id), percent_decode(secret)))
}

/// Bootstrap servers of the OAUTHBEARER listeners, when the lab has them.
pub fn bootstrap(lab: &crate::Lab) -> Option<String> {
    (lab.security() == crate::Security::SaslOauthbearer).then(|| {
        lab.brokers()
            .iter()
            .map(|id| format!("{}:{OAUTH_PORT}", crate::topology::host(*id)))
            .collect::<Vec<_>>()
            .join(",")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};

    #[test]
    fn tokens_verify_against_the_published_jwks() {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        let pair = key(pkcs8.as_ref()).unwrap();
        let token = jwt(
            &pair,
            "watchdog",
            UNIX_EPOCH + Duration::from_secs(1000),
            TOKEN_LIFETIME,
        );
        let keys: serde_json::Value = serde_json::from_str(&jwks(&pair)).unwrap();
        let k = &keys["keys"][0];
        let d = |v: &serde_json::Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(v.as_str().unwrap())
                .unwrap()
        };
        let mut point = vec![4u8];
        point.extend(d(&k["x"]));
        point.extend(d(&k["y"]));
        let (input, sig) = token.rsplit_once('.').unwrap();
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(sig)
            .unwrap();
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(input.as_bytes(), &sig)
            .expect("the JWKS key verifies the token");
        let claims: serde_json::Value = serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(input.split('.').nth(1).unwrap())
                .unwrap(),
        )
        .unwrap();
        assert_eq!(claims["sub"], "watchdog");
        assert_eq!(claims["aud"], AUDIENCE);
        assert_eq!(claims["exp"], 1000 + TOKEN_LIFETIME.as_secs());
    }

    #[test]
    fn client_credentials_are_read_from_basic_or_the_form() {
        let h = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("kw+client:p%40ss")
        );
        assert_eq!(basic(Some(&h)), Some(("kw client".into(), "p@ss".into())));
        let form = url_form(b"grant_type=client_credentials&scope=a+b");
        assert_eq!(form[1], ("scope".into(), "a b".into()));
    }
}
