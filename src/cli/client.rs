//! Fetching a running daemon's `/status`: where it listens, with what credentials and CA,
//! and a refusal or timeout said as a sentence for the page.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::config::{HttpAuth, Secret};

/// How long one fetch of `/status` may take before the page says the daemon does not answer.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the daemon is and how to talk to it.
#[derive(Debug, Clone)]
pub struct Target {
    /// Up to and without `/status`.
    pub base_url: String,
    pub auth: Option<HttpAuth>,
    /// The daemon's `http.tls.cert_file`: every certificate in it is trusted, besides the
    /// system's store, so a self-signed certificate or one whose file carries its CA works.
    pub ca_file: Option<PathBuf>,
    /// Without `http.auth`: the daemon's local write token, read from its state directory
    /// (`Err` says why it could not be, for the answer that asks for it).
    pub local_token: Option<Result<Secret, String>>,
}

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("{url} is not an http:// or https:// URL")]
    BadUrl { url: String },
    #[error("cannot use the certificate {path} (http.tls.cert_file): {why}")]
    Certificate { path: PathBuf, why: String },
    #[error("cannot build an HTTP client: {0}")]
    Client(String),
    #[error("no answer from {url}: {why}")]
    Unreachable { url: String, why: String },
    #[error("{url} wants a credential: give -c with the daemon's configuration (http.auth), or check it")]
    Unauthorized { url: String },
    #[error("{url} answered HTTP {code}: {body}")]
    Http {
        url: String,
        code: u16,
        body: String,
    },
    #[error("{url} did not answer a /status document: {why}")]
    NotStatus { url: String, why: String },
}

impl StatusError {
    /// A wrong invocation (exit 78, like a wrong configuration) rather than a daemon that
    /// cannot be asked (exit 3).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            StatusError::BadUrl { .. } | StatusError::Certificate { .. } | StatusError::Client(_)
        )
    }
}

/// The URL of a daemon listening on `listen`: a wildcard address is asked on loopback.
pub fn base_url(listen: SocketAddr, tls: bool) -> String {
    let ip = match listen.ip() {
        IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let scheme = if tls { "https" } else { "http" };
    format!("{scheme}://{}", SocketAddr::new(ip, listen.port()))
}

impl Target {
    /// The daemon named by its file's `http:` block and state directory (see
    /// `config::load_client_section`), or at `url`, with the file's credential.
    pub fn from_config(cfg: &crate::config::ClientSection, url: Option<String>) -> Self {
        let local_token = cfg.http_auth.is_none().then(|| {
            crate::serve::http::read_local_token(&cfg.state_dir).map_err(|e| {
                format!(
                    "cannot read {}: {e} (run as root or as the daemon's user)",
                    cfg.state_dir
                        .join(crate::serve::http::LOCAL_TOKEN_FILE)
                        .display()
                )
            })
        });
        Target {
            base_url: url.unwrap_or_else(|| base_url(cfg.http_listen, cfg.http_tls.is_some())),
            auth: cfg.http_auth.clone(),
            ca_file: cfg.http_tls.as_ref().map(|t| t.cert_file.clone()),
            local_token,
        }
    }

    pub fn status_url(&self) -> String {
        format!("{}/status", self.base_url.trim_end_matches('/'))
    }
}

/// The daemon at `url` could not be asked. The error chain holds the cause (refused,
/// certificate, timeout); its top says "error sending request" only.
pub fn unreachable(url: &str, e: &reqwest::Error) -> StatusError {
    StatusError::Unreachable {
        url: url.to_string(),
        why: std::iter::successors(Some(e as &dyn std::error::Error), |e| e.source())
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join(": "),
    }
}

/// The request with the daemon's credential, if it has one.
pub fn with_auth(req: reqwest::RequestBuilder, target: &Target) -> reqwest::RequestBuilder {
    match &target.auth {
        Some(auth) => auth.sign(req),
        None => match &target.local_token {
            Some(Ok(token)) => req.bearer_auth(token.expose()),
            _ => req,
        },
    }
}

pub fn client(target: &Target) -> Result<reqwest::Client, StatusError> {
    let url = target.status_url();
    if !(url.starts_with("http://") || url.starts_with("https://"))
        || url::Url::parse(&url).is_err()
    {
        return Err(StatusError::BadUrl {
            url: target.base_url.clone(),
        });
    }
    let mut b = crate::observe::wire::trust_system_roots(reqwest::Client::builder())
        .timeout(FETCH_TIMEOUT)
        .user_agent(concat!("kafka-watchdog-status/", env!("CARGO_PKG_VERSION")));
    if let Some(path) = &target.ca_file {
        let cert_error = |why: String| StatusError::Certificate {
            path: path.clone(),
            why,
        };
        let pem = std::fs::read(path).map_err(|e| cert_error(e.to_string()))?;
        for c in
            reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| cert_error(e.to_string()))?
        {
            b = b.add_root_certificate(c);
        }
    }
    b.build().map_err(|e| StatusError::Client(e.to_string()))
}

pub async fn fetch(client: &reqwest::Client, target: &Target) -> Result<Value, StatusError> {
    let url = target.status_url();
    let req = with_auth(client.get(&url), target);
    let unreachable = |e: reqwest::Error| unreachable(&url, &e);
    let answer = req.send().await.map_err(unreachable)?;
    let code = answer.status().as_u16();
    let body = answer.text().await.map_err(unreachable)?;
    match code {
        200 => {}
        401 => return Err(StatusError::Unauthorized { url }),
        _ => {
            return Err(StatusError::Http {
                url,
                code,
                body: body.trim().chars().take(200).collect(),
            })
        }
    }
    let doc: Value = serde_json::from_str(&body).map_err(|e| StatusError::NotStatus {
        url: url.clone(),
        why: e.to_string(),
    })?;
    if !doc["clusters"].is_array() {
        return Err(StatusError::NotStatus {
            url,
            why: "no `clusters` list".into(),
        });
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_from_the_listen_address() {
        assert_eq!(
            base_url("0.0.0.0:9644".parse().unwrap(), false),
            "http://127.0.0.1:9644"
        );
        assert_eq!(
            base_url("[::]:9644".parse().unwrap(), true),
            "https://[::1]:9644"
        );
        assert_eq!(
            base_url("10.1.2.3:9000".parse().unwrap(), false),
            "http://10.1.2.3:9000"
        );
        let t = Target {
            base_url: "http://h:1/".into(),
            auth: None,
            ca_file: None,
            local_token: None,
        };
        assert_eq!(t.status_url(), "http://h:1/status");
        let bad = Target {
            base_url: "h:1".into(),
            ..t
        };
        assert!(client(&bad).unwrap_err().is_usage());
    }
}
