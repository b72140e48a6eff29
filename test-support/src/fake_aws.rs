//! Fakes of the AWS endpoints that hand out credentials, on one local HTTP server, each
//! answering with keys of its own so a test can tell which one the credential chain used:
//!
//! - instance metadata, IMDSv2 (`PUT /latest/api/token`, then the role and its keys under
//!   `/latest/meta-data/iam/security-credentials/`, the session token required);
//! - container credentials as ECS and EKS Pod Identity serve them (`GET /pod/credentials`,
//!   the `Authorization` header required to be the token a test gives);
//! - STS `AssumeRoleWithWebIdentity` (a POST under `/sts`, the web identity token required),
//!   which IRSA's web identity credentials come from.
//!
//! Point the chain at it with `AWS_EC2_METADATA_SERVICE_ENDPOINT`, `AWS_CONTAINER_CREDENTIALS_FULL_URI`
//! and `AWS_ENDPOINT_URL_STS` (see [`FakeAws::imds_endpoint`] and the others).
//!
//! By default its keys expire far in the future and every answer is immediate;
//! [`FakeAws::set_slow`] makes the keys' answers late and the keys short-lived, as an
//! instance metadata endpoint under load near the end of a credential's life.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// The access key id each endpoint hands out, with the session token `<source>-session`.
pub const IMDS_KEY: &str = "AKIDFROMIMDS";
pub const CONTAINER_KEY: &str = "AKIDFROMPOD";
pub const STS_KEY: &str = "AKIDFROMIRSA";

const IMDS_SESSION: &str = "imds-session-token";
const ROLE: &str = "kw-node-role";
/// Far enough ahead that no chain renews within a test.
const EXPIRATION: &str = "2099-01-01T00:00:00Z";

pub struct FakeAws {
    addr: SocketAddr,
    calls: Arc<Mutex<Vec<String>>>,
    slow: Arc<Mutex<Slow>>,
    task: tokio::task::JoinHandle<()>,
}

/// How the endpoints that hand out keys answer (see [`FakeAws::set_slow`]).
#[derive(Clone, Copy, Default)]
struct Slow {
    delay: Duration,
    /// The keys expire this long after they are handed out; `None`: in 2099.
    lifetime: Option<Duration>,
}

impl Slow {
    fn expiration(&self) -> String {
        self.lifetime.map_or_else(
            || EXPIRATION.to_string(),
            |l| rfc3339(SystemTime::now() + l),
        )
    }
}

/// `t` as `YYYY-MM-DDTHH:MM:SSZ` (UTC), the form the endpoints write expirations in.
fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    // Days since 1970-01-01 to a civil date, counting in 400-year eras from 0000-03-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

impl Drop for FakeAws {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn credentials_json(key: &str, source: &str, expiration: &str) -> String {
    format!(
        r#"{{"Code":"Success","LastUpdated":"2026-01-01T00:00:00Z","Type":"AWS-HMAC","AccessKeyId":"{key}","SecretAccessKey":"secret-of-{source}","Token":"{source}-session","Expiration":"{expiration}"}}"#
    )
}

fn sts_xml(expiration: &str) -> String {
    format!(
        "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
         <AssumeRoleWithWebIdentityResult>\
         <Credentials><AccessKeyId>{STS_KEY}</AccessKeyId><SecretAccessKey>secret-of-irsa</SecretAccessKey>\
         <SessionToken>irsa-session</SessionToken><Expiration>{expiration}</Expiration></Credentials>\
         <SubjectFromWebIdentityToken>system:serviceaccount:kafka:watchdog</SubjectFromWebIdentityToken>\
         <AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/watchdog/kw</Arn>\
         <AssumedRoleId>AROA123:kw</AssumedRoleId></AssumedRoleUser>\
         </AssumeRoleWithWebIdentityResult>\
         <ResponseMetadata><RequestId>00000000-0000-0000-0000-000000000000</RequestId></ResponseMetadata>\
         </AssumeRoleWithWebIdentityResponse>"
    )
}

/// The answer to one request: status, extra headers, body.
fn route(
    method: &str,
    path: &str,
    header: &dyn Fn(&str) -> Option<String>,
    body: &str,
    pod_token: &str,
    web_identity_token: &str,
    expiration: &str,
) -> (u16, Vec<(&'static str, String)>, String) {
    let imds_ok = header("x-aws-ec2-metadata-token").as_deref() == Some(IMDS_SESSION);
    let creds_path = "/latest/meta-data/iam/security-credentials/";
    match (method, path) {
        ("PUT", "/latest/api/token") => (
            200,
            vec![("x-aws-ec2-metadata-token-ttl-seconds", "21600".into())],
            IMDS_SESSION.into(),
        ),
        ("GET", p) if p.starts_with(creds_path) && !imds_ok => (401, vec![], String::new()),
        ("GET", p) if p == creds_path => (200, vec![], ROLE.into()),
        ("GET", p) if p.strip_prefix(creds_path) == Some(ROLE) => {
            (200, vec![], credentials_json(IMDS_KEY, "imds", expiration))
        }
        ("GET", "/pod/credentials") => {
            if header("authorization").as_deref() == Some(pod_token) {
                (
                    200,
                    vec![],
                    credentials_json(CONTAINER_KEY, "pod", expiration),
                )
            } else {
                (401, vec![], r#"{"message":"bad token"}"#.into())
            }
        }
        ("POST", p) if p.starts_with("/sts") => {
            let form: Vec<(String, String)> = url_decoded_pairs(body);
            let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
            if get("Action") == Some("AssumeRoleWithWebIdentity")
                && get("WebIdentityToken") == Some(web_identity_token)
            {
                (
                    200,
                    vec![("content-type", "text/xml".into())],
                    sts_xml(expiration),
                )
            } else {
                (403, vec![], format!("unexpected STS request: {body}"))
            }
        }
        _ => (404, vec![], String::new()),
    }
}

/// `application/x-www-form-urlencoded` pairs, enough for STS's query protocol.
fn url_decoded_pairs(body: &str) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                    out.push(b);
                    i += 3;
                    continue;
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    body.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

/// What every connection's service shares.
struct Ctx {
    calls: Arc<Mutex<Vec<String>>>,
    slow: Arc<Mutex<Slow>>,
    pod_token: String,
    web_identity_token: String,
}

impl Ctx {
    async fn answer(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let method = req.method().to_string();
        let path = req.uri().path().to_string();
        let headers = req.headers().clone();
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let body = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let body = String::from_utf8_lossy(&body).into_owned();
        let slow = *self.slow.lock().unwrap_or_else(|p| p.into_inner());
        tokio::time::sleep(slow.delay).await;
        let (status, extra, text) = route(
            &method,
            &path,
            &header,
            &body,
            &self.pod_token,
            &self.web_identity_token,
            &slow.expiration(),
        );
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!("{method} {path} -> {status}"));
        let mut r = Response::builder().status(status);
        for (k, v) in extra {
            r = r.header(k, v);
        }
        r.body(Full::new(Bytes::from(text)))
            .expect("a valid response")
    }
}

impl FakeAws {
    /// Serves on a free loopback port; container credentials need `pod_token` as the
    /// `Authorization` header, STS needs `web_identity_token` in the request.
    pub async fn start(pod_token: &str, web_identity_token: &str) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let ctx = Arc::new(Ctx {
            calls: Arc::default(),
            slow: Arc::default(),
            pod_token: pod_token.to_string(),
            web_identity_token: web_identity_token.to_string(),
        });
        let (calls, slow) = (ctx.calls.clone(), ctx.slow.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let ctx = ctx.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        let ctx = ctx.clone();
                        async move { Ok::<_, Infallible>(ctx.answer(req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(FakeAws {
            addr,
            calls,
            slow,
            task,
        })
    }

    /// From now on every answer comes `delay` late, and the keys handed out expire
    /// `lifetime` after they are handed out.
    pub fn set_slow(&self, delay: Duration, lifetime: Duration) {
        *self.slow.lock().unwrap_or_else(|p| p.into_inner()) = Slow {
            delay,
            lifetime: Some(lifetime),
        };
    }

    /// For `AWS_EC2_METADATA_SERVICE_ENDPOINT`.
    pub fn imds_endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// For `AWS_CONTAINER_CREDENTIALS_FULL_URI` (loopback is one of the addresses the SDK
    /// accepts over plain HTTP, as it accepts EKS Pod Identity's 169.254.170.23).
    pub fn container_uri(&self) -> String {
        format!("http://{}/pod/credentials", self.addr)
    }

    /// For `AWS_ENDPOINT_URL_STS`.
    pub fn sts_endpoint(&self) -> String {
        format!("http://{}/sts", self.addr)
    }

    /// Every request so far, as `METHOD /path -> status`.
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expirations_are_written_in_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_709_210_096);
        assert_eq!(rfc3339(t), "2024-02-29T12:34:56Z");
        let t = UNIX_EPOCH + Duration::from_secs(4_102_444_800);
        assert_eq!(rfc3339(t), "2100-01-01T00:00:00Z");
    }

    #[test]
    fn form_bodies_are_decoded() {
        let pairs = url_decoded_pairs(
            "Action=AssumeRoleWithWebIdentity&RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fw&X=a+b",
        );
        assert_eq!(
            pairs[0],
            ("Action".into(), "AssumeRoleWithWebIdentity".into())
        );
        assert_eq!(pairs[1], ("RoleArn".into(), "arn:aws:iam::1:role/w".into()));
        assert_eq!(pairs[2], ("X".into(), "a b".into()));
    }
}
