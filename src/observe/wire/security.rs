//! How the connection is protected: TLS settings, SASL credentials, and the TLS handshake.
//! Secrets live only in these types, whose `Debug` output withholds them.

use std::fmt;
use std::io;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::crypto::{
    ring as ring_provider, verify_tls12_signature, verify_tls13_signature, CryptoProvider,
};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio_rustls::rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_rustls::TlsConnector;

use super::error::{Phase, WireError};
use super::msk_iam::AwsIdentity;
use super::oauth::TokenSource;
use crate::config::live::Current;
use crate::model::round::PeerCertificate;

/// Kafka's `security.protocol`, with what each variant needs.
#[derive(Debug, Clone, Default)]
pub enum Security {
    #[default]
    Plaintext,
    Ssl(TlsSettings),
    SaslPlaintext(SaslSettings),
    SaslSsl(TlsSettings, SaslSettings),
}

impl Security {
    pub(crate) fn tls(&self) -> Option<&TlsSettings> {
        match self {
            Security::Ssl(tls) | Security::SaslSsl(tls, _) => Some(tls),
            Security::Plaintext | Security::SaslPlaintext(_) => None,
        }
    }

    pub(crate) fn sasl(&self) -> Option<&SaslSettings> {
        match self {
            Security::SaslPlaintext(sasl) | Security::SaslSsl(_, sasl) => Some(sasl),
            Security::Plaintext | Security::Ssl(_) => None,
        }
    }
}

/// Certificates are read at each connection ([`Current`]): one renewed on disk is used by
/// the next connection.
#[derive(Clone, Default)]
pub struct TlsSettings {
    /// Trusted CA certificates (PEM, one or more). `None` trusts the system store.
    pub ca_pem: Option<Current>,
    /// For brokers that require mutual TLS: the client certificate chain (PEM), then its
    /// private key (PEM: PKCS#8, PKCS#1 or SEC1), which go together.
    pub client_cert: Option<Current>,
    /// The name the broker's certificate must carry; `None` uses the host of the address.
    pub server_name: Option<String>,
    /// Accept any certificate. The traffic is still encrypted but anyone on the path can
    /// pose as the broker: for labs only.
    pub insecure_skip_verify: bool,
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSettings")
            .field("ca_pem", &self.ca_pem)
            .field("client_cert", &self.client_cert)
            .field("server_name", &self.server_name)
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
    AwsMskIam,
}

impl SaslMechanism {
    /// The name Kafka uses in `sasl.enabled.mechanisms` and in SaslHandshake.
    pub fn as_str(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
            SaslMechanism::AwsMskIam => "AWS_MSK_IAM",
        }
    }
}

/// `username` and `password` serve PLAIN and SCRAM; `oauth` OAUTHBEARER (shared by every
/// connection to the cluster, so they share its cached token); `aws` AWS_MSK_IAM. The
/// password is read at each authentication: a rotated one is used by the next.
#[derive(Clone)]
pub struct SaslSettings {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: Current,
    pub oauth: Option<Arc<TokenSource>>,
    pub aws: Option<Arc<AwsIdentity>>,
    /// OAUTHBEARER's SASL extensions (RFC 7628 kvpairs), sent with every token.
    pub extensions: Vec<(String, String)>,
}

impl SaslSettings {
    /// PLAIN or SCRAM credentials.
    pub fn user_password(mechanism: SaslMechanism, username: &str, password: &str) -> Self {
        SaslSettings {
            mechanism,
            username: username.to_string(),
            password: Current::from(password),
            oauth: None,
            aws: None,
            extensions: Vec::new(),
        }
    }
}

impl fmt::Debug for SaslSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslSettings")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"<withheld>")
            .field("oauth", &self.oauth)
            .field("aws", &self.aws)
            .field("extensions", &self.extensions)
            .finish()
    }
}

fn tls_error(detail: impl Into<String>) -> WireError {
    WireError::Tls {
        phase: Phase::Tls,
        detail: detail.into(),
    }
}

/// The TLS handshake over an open TCP connection, bounded by `limit`, and the leaf
/// certificate the broker presented (with the name it was checked against).
pub(crate) async fn handshake(
    tcp: TcpStream,
    settings: &TlsSettings,
    address: &str,
    limit: Duration,
) -> Result<(TlsStream<TcpStream>, Option<PeerCertificate>), WireError> {
    let config = client_config(settings)?;
    let name = server_name(settings, address)?;
    let checked = match &settings.server_name {
        Some(n) => n.clone(),
        None => host_of(address).to_string(),
    };
    let connector = TlsConnector::from(Arc::new(config));
    match timeout(limit, connector.connect(name, tcp)).await {
        Err(_) => Err(WireError::Timeout {
            phase: Phase::Tls,
            limit,
        }),
        Ok(Err(e)) => Err(tls_error(describe_handshake_error(&e))),
        Ok(Ok(stream)) => {
            let leaf = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .and_then(|c| super::certificate::read(c.as_ref(), &checked));
            Ok((stream, leaf))
        }
    }
}

fn describe_handshake_error(e: &io::Error) -> String {
    if let Some(tls) = rustls_error(e) {
        return tls.to_string();
    }
    match e.kind() {
        // A plaintext Kafka listener reads a ClientHello as an oversized frame and hangs up.
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => {
            format!("broker closed the connection during the handshake (plaintext listener?): {e}")
        }
        _ => e.to_string(),
    }
}

/// The rustls error inside an I/O error, when TLS is what failed.
pub(crate) fn rustls_error(e: &io::Error) -> Option<&tokio_rustls::rustls::Error> {
    e.get_ref()?.downcast_ref::<tokio_rustls::rustls::Error>()
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring_provider::default_provider())
}

fn client_config(settings: &TlsSettings) -> Result<ClientConfig, WireError> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(e.to_string()))?;
    let builder = if settings.insecure_skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
    } else {
        let ca = settings.ca_pem.as_ref().map(Current::parts);
        builder.with_root_certificates(roots(
            ca.as_ref().and_then(|p| p.first()).map(Vec::as_slice),
        )?)
    };
    let Some(client) = &settings.client_cert else {
        return Ok(builder.with_no_client_auth());
    };
    // Both from one read: a certificate renewed meanwhile comes with its own key.
    let pair = client.parts();
    let [cert, key] = pair.as_slice() else {
        return Err(tls_error(
            "a client certificate and its key must be given together",
        ));
    };
    let chain = certificates(cert, "client certificate")?;
    let key =
        PrivateKeyDer::from_pem_slice(key).map_err(|e| tls_error(format!("client key: {e}")))?;
    builder
        .with_client_auth_cert(chain, key)
        .map_err(|e| tls_error(format!("client certificate: {e}")))
}

fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, WireError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls_error(format!("{what}: {e}")))?;
    if certs.is_empty() {
        return Err(tls_error(format!("{what}: no certificate found")));
    }
    Ok(certs)
}

fn roots(ca_pem: Option<&[u8]>) -> Result<Arc<RootCertStore>, WireError> {
    let Some(pem) = ca_pem else {
        return system_roots();
    };
    let mut store = RootCertStore::empty();
    for cert in certificates(pem, "ca_pem")? {
        store
            .add(cert)
            .map_err(|e| tls_error(format!("ca_pem: {e}")))?;
    }
    Ok(Arc::new(store))
}

/// The system store is read once per process: it is the same for every broker and round.
fn system_roots() -> Result<Arc<RootCertStore>, WireError> {
    static SYSTEM: OnceLock<Result<Arc<RootCertStore>, String>> = OnceLock::new();
    SYSTEM
        .get_or_init(|| {
            let loaded = rustls_native_certs::load_native_certs();
            let mut store = RootCertStore::empty();
            let (added, _ignored) = store.add_parsable_certificates(loaded.certs);
            if added == 0 {
                let why = loaded
                    .errors
                    .first()
                    .map_or_else(|| "none found".to_owned(), |e| e.to_string());
                return Err(format!(
                    "no trusted certificates in the system store ({why}); set ca_pem"
                ));
            }
            Ok(Arc::new(store))
        })
        .clone()
        .map_err(tls_error)
}

fn server_name(settings: &TlsSettings, address: &str) -> Result<ServerName<'static>, WireError> {
    let host = match &settings.server_name {
        Some(name) => name.as_str(),
        None => host_of(address),
    };
    ServerName::try_from(host.to_owned())
        .map_err(|e| tls_error(format!("server name {host:?}: {e}")))
}

/// The host part of `host:port`, `[v6]:port` or a bare host.
pub(crate) fn host_of(address: &str) -> &str {
    if let Some(rest) = address.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(host, _)| host);
    }
    match address.rsplit_once(':') {
        Some((host, _)) if !host.contains(':') => host,
        _ => address,
    }
}

/// Skips the certificate check but still checks the handshake signatures, so the session
/// keys at least belong to whoever presented the certificate.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, tokio_rustls::rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_is_taken_from_the_address() {
        assert_eq!(host_of("broker-1.example:9093"), "broker-1.example");
        assert_eq!(host_of("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(host_of("[::1]:9093"), "::1");
        assert_eq!(host_of("broker-1"), "broker-1");
        assert_eq!(host_of("::1"), "::1");
    }

    #[test]
    fn debug_output_withholds_secrets() {
        let sasl =
            SaslSettings::user_password(SaslMechanism::ScramSha512, "watchdog", "hunter2-secret");
        let tls = TlsSettings {
            client_cert: Some(Current::fixed(vec![
                b"-----BEGIN CERTIFICATE-----".to_vec(),
                b"-----BEGIN PRIVATE KEY-----secret".to_vec(),
            ])),
            ..TlsSettings::default()
        };
        let shown = format!("{:?}", Security::SaslSsl(tls, sasl));
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("BEGIN PRIVATE KEY"), "{shown}");
        assert!(shown.contains("watchdog"), "{shown}");
    }

    #[test]
    fn bad_pem_is_a_tls_error() {
        let settings = TlsSettings {
            ca_pem: Some(b"not a certificate".to_vec().into()),
            ..TlsSettings::default()
        };
        let err = client_config(&settings).unwrap_err();
        assert_eq!(err.kind(), crate::model::round::FailureKind::Tls);
        assert!(err.to_string().contains("ca_pem"), "{err}");

        let half = TlsSettings {
            ca_pem: Some(include_bytes!("testdata/ca.pem").to_vec().into()),
            client_cert: Some(include_bytes!("testdata/client.pem").to_vec().into()),
            ..TlsSettings::default()
        };
        let err = client_config(&half).unwrap_err();
        assert!(err.to_string().contains("together"), "{err}");
    }
}
