//! The `http:` block: where the server listens, and optionally HTTPS and who may read
//! `/metrics` and `/status`.
//!
//! The certificate and key are parsed here, with the same code the server runs at start,
//! so that `check-config` refuses a file the server could not serve.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio_rustls::rustls::crypto::ring as ring_provider;
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::ServerConfig;

use super::ctx::Ctx;
use super::live::{self, Current, PairProblem};
use super::read::{text, Fields};
use super::schema as s;
use super::secret::{readable_file, secret, Need};
use super::types::{HttpAuth, HttpTlsConfig};
use super::yaml::{shorten, Entry};

/// What the `http:` block resolves to.
pub(crate) struct Http {
    pub listen: SocketAddr,
    pub external_url: Option<url::Url>,
    pub runbooks_url: Option<url::Url>,
    pub tls: Option<HttpTlsConfig>,
    pub auth: Option<HttpAuth>,
}

pub(crate) fn http(cx: &mut Ctx, e: Option<&Entry>) -> Option<Http> {
    let Some(e) = e else {
        return Some(Http {
            listen: s::HTTP_LISTEN_DEFAULT,
            external_url: None,
            runbooks_url: None,
            tls: None,
            auth: None,
        });
    };
    let mut f = Fields::open(&mut cx.rep, &e.value, Some(e), "http".into())?;
    let listen = match f.get("listen") {
        Some(le) => {
            let expected = "an IP address and port, e.g. 127.0.0.1:9644 or [::]:9644";
            text(&mut cx.rep, le, expected).and_then(|t| match t.value.parse::<SocketAddr>() {
                Ok(a) => Some(a),
                Err(_) => {
                    cx.rep.add(
                        t.value_pos,
                        format!("'{}' is not a socket address", shorten(&t.value)),
                        Some(expected.into()),
                    );
                    None
                }
            })
        }
        None => Some(s::HTTP_LISTEN_DEFAULT),
    };
    let external_url = absolute_url(
        cx,
        f.get("external_url"),
        true,
        "the absolute http(s) URL people reach this watchdog at, e.g. https://kafka-watchdog.example.com/ (links in webhooks point below it)",
    );
    let runbooks_url = absolute_url(
        cx,
        f.get("runbooks_url"),
        false,
        "the absolute http(s) URL of the runbooks page, without #, e.g. https://wiki.example.com/kafka-watchdog/runbooks (webhooks link to it#<alert name>)",
    );
    let tls_entry = f.get("tls");
    let auth_entry = f.get("auth");
    f.finish(&mut cx.rep, &|_| None);
    // Each block is read whatever happened to the others, so all their problems show.
    let tls = tls_entry.map(|e| tls(cx, e, f.child("tls")));
    let auth = auth_entry.map(|e| auth(cx, e, f.child("auth")));
    Some(Http {
        listen: listen?,
        external_url: external_url?,
        runbooks_url: runbooks_url?,
        tls: tls.map_or(Some(None), |t| t.map(Some))?,
        auth: auth.map_or(Some(None), |a| a.map(Some))?,
    })
}

/// An optional absolute http(s) URL: `Some(None)` when absent, `None` when wrong (said).
/// Without `fragment_ok`, a `#...` is refused: the links add their own (`#<alert name>`).
fn absolute_url(
    cx: &mut Ctx,
    e: Option<&Entry>,
    fragment_ok: bool,
    expected: &str,
) -> Option<Option<url::Url>> {
    let Some(e) = e else {
        return Some(None);
    };
    let t = text(&mut cx.rep, e, expected)?;
    let what = match url::Url::parse(t.value.trim()) {
        Ok(u) if !matches!(u.scheme(), "http" | "https") || !u.has_host() => {
            "is not an absolute http or https URL"
        }
        Err(_) => "is not an absolute http or https URL",
        Ok(u) if u.fragment().is_some() && !fragment_ok => "has a #: links add #<alert name> to it",
        Ok(u) => return Some(Some(u)),
    };
    cx.rep.add(
        t.value_pos,
        format!("'{}' {what}", shorten(&t.value)),
        Some(expected.into()),
    );
    None
}

fn tls(cx: &mut Ctx, e: &Entry, path: String) -> Option<HttpTlsConfig> {
    let mut f = Fields::open(&mut cx.rep, &e.value, Some(e), path)?;
    let cert_entry = f.get(s::HTTP_TLS_CERT_FILE);
    let key_entry = f.get(s::HTTP_TLS_KEY_FILE);
    f.finish(&mut cx.rep, &|_| None);
    let file = |cx: &mut Ctx, entry: Option<&Entry>, key: &str, what: &str| match entry {
        Some(e) => readable_file(cx, e).map(|p| (p, e.value.pos)),
        None => {
            f.missing(&mut cx.rep, key, format!("a PEM file holding {what}"));
            None
        }
    };
    let cert = file(
        cx,
        cert_entry,
        s::HTTP_TLS_CERT_FILE,
        "the server certificate chain",
    );
    let key = file(cx, key_entry, s::HTTP_TLS_KEY_FILE, "its private key");
    let ((cert_file, cert_pos), (key_file, key_pos)) = cert.zip(key)?;
    let config = HttpTlsConfig {
        cert_file,
        key_file,
    };
    match config.server_config() {
        Ok(_) => Some(config),
        Err(err) => {
            let pos = if err.key == s::HTTP_TLS_CERT_FILE {
                cert_pos
            } else {
                key_pos
            };
            cx.rep.add(pos, err.to_string(), Some(err.expected.into()));
            None
        }
    }
}

fn auth(cx: &mut Ctx, e: &Entry, path: String) -> Option<HttpAuth> {
    let mut f = Fields::open(&mut cx.rep, &e.value, Some(e), path)?;
    let basic_entry = f.get("basic");
    // One scheme only: a second one would be a credential nobody checks the use of.
    let bearer_need = if basic_entry.is_some() {
        Need::Forbidden("basic is set too")
    } else {
        Need::Optional
    };
    let bearer = secret(cx, &mut f, &s::HTTP_BEARER_TOKEN, bearer_need);
    f.finish(&mut cx.rep, &|_| None);
    if let Some(be) = basic_entry {
        let basic = basic(cx, be, f.child("basic"));
        return bearer.ok().and(basic);
    }
    match bearer {
        Ok(Some(token)) => match check_token(&token.value) {
            Ok(()) => Some(HttpAuth::Bearer {
                token: token.into_secret(),
            }),
            Err(m) => {
                cx.rep.add(
                    token.pos,
                    format!("the bearer token from {} {m}", token.key),
                    Some("letters, digits and - . _ ~ + / only, then optional '=' padding".into()),
                );
                None
            }
        },
        Ok(None) => {
            f.missing_what(
                &mut cx.rep,
                "a credential",
                format!(
                    "basic (username and {}) or {}",
                    s::HTTP_BASIC_PASSWORD.choices(),
                    s::HTTP_BEARER_TOKEN.choices()
                ),
            );
            None
        }
        Err(()) => None,
    }
}

fn basic(cx: &mut Ctx, e: &Entry, path: String) -> Option<HttpAuth> {
    let mut f = Fields::open(&mut cx.rep, &e.value, Some(e), path)?;
    let username = secret(cx, &mut f, &s::HTTP_BASIC_USERNAME, Need::Required);
    let password = secret(cx, &mut f, &s::HTTP_BASIC_PASSWORD, Need::Required);
    f.finish(&mut cx.rep, &|_| None);
    let username = username.ok()??;
    // RFC 7617: the user-id ends at the first colon, so one inside it could never match.
    if username.value.contains(':') || username.value.chars().any(char::is_control) {
        cx.rep.add(
            username.pos,
            format!(
                "the username{} holds a colon or a control character",
                if username.key == s::HTTP_BASIC_USERNAME.inline {
                    String::new()
                } else {
                    format!(" from {}", username.key)
                }
            ),
            Some("a username without ':' (HTTP Basic ends the name at the first colon)".into()),
        );
        return None;
    }
    Some(HttpAuth::Basic {
        username: username.value,
        password: password.ok()??.into_secret(),
    })
}

/// RFC 6750 `b64token`: what a client can put after `Bearer ` without quoting.
fn check_token(token: &str) -> Result<(), &'static str> {
    let body = token.trim_end_matches('=');
    if body.is_empty() {
        return Err("is empty");
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~+/".contains(c);
    if body.chars().all(allowed) {
        Ok(())
    } else {
        Err("holds a character a bearer token cannot carry (a space, a newline, ...)")
    }
}

/// Why a certificate or key cannot be served, and which key of `http.tls` names the file.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{key} '{}': {message}", path.display())]
pub struct HttpTlsError {
    pub key: &'static str,
    pub path: PathBuf,
    pub message: String,
    pub expected: &'static str,
}

fn read_pem(
    key: &'static str,
    path: &Path,
    expected: &'static str,
) -> Result<Vec<u8>, HttpTlsError> {
    live::read_bounded(path, live::PEM_MAX_BYTES).map_err(|e| HttpTlsError {
        key,
        path: path.to_path_buf(),
        message: format!("cannot read it: {e}"),
        expected,
    })
}

impl HttpTlsConfig {
    /// Reads the files and builds what the server hands to rustls: TLS 1.2 and 1.3 with
    /// the ring provider, HTTP/1.1 only (the server speaks nothing else). The files stay
    /// watched (`live`): a certificate renewed in place is served to the next connection,
    /// and one that cannot be served is logged while the last good one stays.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, HttpTlsError> {
        const CERT_EXPECTED: &str =
            "a PEM file with the server certificate first, then any intermediates";
        const KEY_EXPECTED: &str =
            "a PEM file with the certificate's private key (PKCS#8, PKCS#1 or SEC1), unencrypted";
        let cert_fail = |message: String| HttpTlsError {
            key: s::HTTP_TLS_CERT_FILE,
            path: self.cert_file.clone(),
            message,
            expected: CERT_EXPECTED,
        };
        let key_fail = |message: String| HttpTlsError {
            key: s::HTTP_TLS_KEY_FILE,
            path: self.key_file.clone(),
            message,
            expected: KEY_EXPECTED,
        };
        let cert_pem = read_pem(s::HTTP_TLS_CERT_FILE, &self.cert_file, CERT_EXPECTED)?;
        let key_pem = read_pem(s::HTTP_TLS_KEY_FILE, &self.key_file, KEY_EXPECTED)?;
        let served = live::certified_key(&cert_pem, &key_pem).map_err(|p| match p {
            PairProblem::Certificate(m) => cert_fail(m),
            PairProblem::Key(m) => key_fail(m),
            PairProblem::Mismatch => key_fail(format!(
                "is not the key of the certificate in {}",
                self.cert_file.display()
            )),
        })?;
        // Changed since the read above: the watcher's check refuses it, as it would later.
        let pair = live::watch(
            live::Kind::CertificateAndKey,
            &[&self.cert_file, &self.key_file],
        )
        .map_err(cert_fail)?;
        let provider = Arc::new(ring_provider::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| key_fail(format!("no TLS version available: {e}")))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(Renewed::new(pair, served)));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The server's certificate: built again from the watched files when they change; the
/// last one built stays while they cannot be (the watcher has said why).
struct Renewed {
    pair: Current,
    /// The files' generation it was built from, and what it built.
    built: Mutex<(u64, Arc<CertifiedKey>)>,
}

impl Renewed {
    fn new(pair: Current, first: CertifiedKey) -> Self {
        let generation = pair.generation();
        Renewed {
            pair,
            built: Mutex::new((generation, Arc::new(first))),
        }
    }
}

/// rustls asks for it; the key stays out of it.
impl std::fmt::Debug for Renewed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renewed").field("pair", &self.pair).finish()
    }
}

impl ResolvesServerCert for Renewed {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let generation = self.pair.generation();
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if built.0 != generation {
            built.0 = generation;
            let parts = self.pair.parts();
            if let [cert, key] = parts.as_slice() {
                match live::certified_key(cert, key) {
                    Ok(k) => built.1 = Arc::new(k),
                    Err(p) => {
                        tracing::warn!(problem = %p, "http.tls: the renewed certificate cannot be served; the last one stays")
                    }
                }
            }
        }
        Some(built.1.clone())
    }
}
