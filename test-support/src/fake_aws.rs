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

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

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
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeAws {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn credentials_json(key: &str, source: &str) -> String {
    format!(
        r#"{{"Code":"Success","LastUpdated":"2026-01-01T00:00:00Z","Type":"AWS-HMAC","AccessKeyId":"{key}","SecretAccessKey":"secret-of-{source}","Token":"{source}-session","Expiration":"{EXPIRATION}"}}"#
    )
}

fn sts_xml() -> String {
    format!(
        "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
         <AssumeRoleWithWebIdentityResult>\
         <Credentials><AccessKeyId>{STS_KEY}</AccessKeyId><SecretAccessKey>secret-of-irsa</SecretAccessKey>\
         <SessionToken>irsa-session</SessionToken><Expiration>{EXPIRATION}</Expiration></Credentials>\
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
            (200, vec![], credentials_json(IMDS_KEY, "imds"))
        }
        ("GET", "/pod/credentials") => {
            if header("authorization").as_deref() == Some(pod_token) {
                (200, vec![], credentials_json(CONTAINER_KEY, "pod"))
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
                (200, vec![("content-type", "text/xml".into())], sts_xml())
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

impl FakeAws {
    /// Serves on a free loopback port; container credentials need `pod_token` as the
    /// `Authorization` header, STS needs `web_identity_token` in the request.
    pub async fn start(pod_token: &str, web_identity_token: &str) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let calls: Arc<Mutex<Vec<String>>> = Arc::default();
        let (log, pod, web) = (
            calls.clone(),
            pod_token.to_string(),
            web_identity_token.to_string(),
        );
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (log, pod, web) = (log.clone(), pod.clone(), web.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        let (log, pod, web) = (log.clone(), pod.clone(), web.clone());
                        async move {
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
                            let (status, extra, text) =
                                route(&method, &path, &header, &body, &pod, &web);
                            log.lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push(format!("{method} {path} -> {status}"));
                            let mut r = Response::builder().status(status);
                            for (k, v) in extra {
                                r = r.header(k, v);
                            }
                            Ok::<_, Infallible>(
                                r.body(Full::new(Bytes::from(text)))
                                    .expect("a valid response"),
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(FakeAws { addr, calls, task })
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
