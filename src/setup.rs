//! Turns a validated cluster config into what the probes and evaluator need: wire options
//! with certificates read, verdict settings, topic filter.

use std::sync::Arc;

use crate::config::{ClusterConfig, SaslMechanism, SecurityProtocol};
use crate::probe::ProbeSettings;
use crate::report::TopicFilterFn;
use crate::verdict::VerdictSettings;
use crate::wire::{self, SaslSettings, TlsSettings, WireOptions};

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cluster {cluster}: cannot read {what} {path}: {source}")]
    File {
        cluster: String,
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
}

fn read(cluster: &str, what: &'static str, path: &std::path::Path) -> Result<Vec<u8>, SetupError> {
    std::fs::read(path).map_err(|source| SetupError::File {
        cluster: cluster.to_string(),
        what,
        path: path.display().to_string(),
        source,
    })
}

pub fn wire_security(c: &ClusterConfig) -> Result<wire::Security, SetupError> {
    let tls = match &c.security.tls {
        Some(t) => Some(TlsSettings {
            ca_pem: t
                .ca_file
                .as_deref()
                .map(|p| read(&c.name, "CA file", p))
                .transpose()?,
            client_cert_pem: t
                .client_cert
                .as_ref()
                .map(|cc| read(&c.name, "client certificate", &cc.cert_file))
                .transpose()?,
            client_key_pem: t
                .client_cert
                .as_ref()
                .map(|cc| read(&c.name, "client key", &cc.key_file))
                .transpose()?,
            server_name: t.server_name.clone(),
            insecure_skip_verify: t.insecure_skip_verify,
        }),
        None => None,
    };
    let sasl = c.security.sasl.as_ref().map(|s| SaslSettings {
        mechanism: match s.mechanism {
            SaslMechanism::Plain => wire::SaslMechanism::Plain,
            SaslMechanism::ScramSha256 => wire::SaslMechanism::ScramSha256,
            SaslMechanism::ScramSha512 => wire::SaslMechanism::ScramSha512,
        },
        username: s.username.clone(),
        password: s.password.expose().to_string(),
    });
    Ok(match (c.security.protocol, tls, sasl) {
        (SecurityProtocol::Ssl, Some(t), _) => wire::Security::Ssl(t),
        (SecurityProtocol::SaslPlaintext, _, Some(s)) => wire::Security::SaslPlaintext(s),
        (SecurityProtocol::SaslSsl, t, Some(s)) => {
            wire::Security::SaslSsl(t.unwrap_or_default(), s)
        }
        (SecurityProtocol::Ssl, None, _) => wire::Security::Ssl(TlsSettings::default()),
        _ => wire::Security::Plaintext,
    })
}

pub fn probe_settings(c: &ClusterConfig) -> Result<ProbeSettings, SetupError> {
    Ok(ProbeSettings {
        cluster: c.name.clone(),
        bootstrap_servers: c.bootstrap_servers.clone(),
        wire: WireOptions {
            connect_timeout: c.connect_timeout,
            request_timeout: c.request_timeout,
            client_id: "kafka-watchdog".into(),
            max_frame_bytes: 100 * 1024 * 1024,
            security: wire_security(c)?,
        },
        forget_broker_after: c.forget_broker_after,
        topic_config_refresh: c.topic_config_refresh,
    })
}

pub fn verdict_settings(c: &ClusterConfig) -> VerdictSettings {
    VerdictSettings {
        latency_degraded_factor: c.verdict.latency_degraded_factor,
        ..VerdictSettings::default()
    }
}

pub fn topic_filter(c: &ClusterConfig) -> TopicFilterFn {
    let filter = c.topics.clone();
    Arc::new(move |t: &str| filter.matches(t))
}
