//! Turns a validated cluster config into what the probes and evaluator need: wire options
//! with certificates read, verdict settings, topic filter.

use std::sync::Arc;

use rdkafka::config::ClientConfig;

use crate::config::live::{self, Current};
use crate::config::{
    ClusterConfig, SaslConfig, SaslMechanism, Secret, SecurityProtocol, TlsConfig,
};
use crate::judge::report::{Evaluator, TopicFilterFn};
use crate::judge::verdict::VerdictSettings;
use crate::observe::canary::layout::LayoutSettings;
use crate::observe::canary::CanarySettings;
use crate::observe::coordinators::{CoordinatorSettings, TxnProbeSettings};
use crate::observe::host::HostObserver;
use crate::observe::probe::{ClusterProber, ProbeSettings};
use crate::observe::quorum::QuorumSettings;
use crate::observe::wire::{
    self, AwsIamSettings, AwsIdentity, SaslSettings, TlsSettings, TokenSource, WireOptions,
};

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cluster {cluster}: cannot use the {what}: {why}")]
    File {
        cluster: String,
        what: &'static str,
        why: String,
    },
    /// AWS credentials are looked up on the runtime the probes run on; made outside one,
    /// there is none to give them.
    #[error("cluster {cluster}: AWS_MSK_IAM is set up outside the async runtime")]
    Runtime { cluster: String },
}

/// A credential file, watched from now on (`config::live`): the next connection after a
/// rotation reads the new content.
fn watched(
    cluster: &str,
    what: &'static str,
    kind: live::Kind,
    paths: &[&std::path::Path],
) -> Result<Current, SetupError> {
    live::watch(kind, paths).map_err(|why| SetupError::File {
        cluster: cluster.to_string(),
        what,
        why,
    })
}

/// A secret as the connections read it: watched when it came from a file.
fn current(cluster: &str, what: &'static str, secret: &Secret) -> Result<Current, SetupError> {
    match secret.file() {
        Some(file) => watched(cluster, what, live::Kind::Secret, &[file]),
        None => Ok(Current::from(secret.expose())),
    }
}

pub fn wire_security(c: &ClusterConfig) -> Result<wire::Security, SetupError> {
    let tls = c
        .security
        .tls
        .as_ref()
        .map(|t| tls_settings(&c.name, t))
        .transpose()?;
    let sasl = c
        .security
        .sasl
        .as_ref()
        .map(|s| sasl_settings(c, s))
        .transpose()?;
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

fn tls_settings(cluster: &str, t: &TlsConfig) -> Result<TlsSettings, SetupError> {
    Ok(TlsSettings {
        ca_pem: t
            .ca_file
            .as_deref()
            .map(|p| watched(cluster, "CA file", live::Kind::Certificates, &[p]))
            .transpose()?,
        client_cert: t
            .client_cert
            .as_ref()
            .map(|cc| {
                watched(
                    cluster,
                    "client certificate and key",
                    live::Kind::CertificateAndKey,
                    &[&cc.cert_file, &cc.key_file],
                )
            })
            .transpose()?,
        server_name: t.server_name.clone(),
        insecure_skip_verify: t.insecure_skip_verify,
    })
}

fn sasl_settings(c: &ClusterConfig, s: &SaslConfig) -> Result<SaslSettings, SetupError> {
    Ok(SaslSettings {
        mechanism: match s.mechanism {
            SaslMechanism::Plain => wire::SaslMechanism::Plain,
            SaslMechanism::ScramSha256 => wire::SaslMechanism::ScramSha256,
            SaslMechanism::ScramSha512 => wire::SaslMechanism::ScramSha512,
            SaslMechanism::OAuthBearer => wire::SaslMechanism::OAuthBearer,
            SaslMechanism::AwsMskIam => wire::SaslMechanism::AwsMskIam,
        },
        username: s.username.clone(),
        password: current(&c.name, "password file", &s.password)?,
        oauth: match &s.oauthbearer {
            Some(o) => Some(Arc::new(TokenSource::new(
                o.token_endpoint_url.clone(),
                o.client_id.clone(),
                current(&c.name, "client secret file", &o.client_secret)?,
                o.scope.clone(),
                o.ca_file
                    .as_deref()
                    .map(|p| {
                        watched(
                            &c.name,
                            "token endpoint CA file",
                            live::Kind::Certificates,
                            &[p],
                        )
                    })
                    .transpose()?,
                // The token request is part of connecting: it gets the same bound as
                // any other request, so a hung endpoint cannot stall a round.
                c.timing.request_timeout,
            ))),
            None => None,
        },
        aws: match &s.aws_msk_iam {
            Some(a) => Some(Arc::new(AwsIdentity::new(
                AwsIamSettings {
                    region: a.region.clone(),
                    profile: a.profile.clone(),
                },
                tokio::runtime::Handle::try_current().map_err(|_| SetupError::Runtime {
                    cluster: c.name.clone(),
                })?,
            ))),
            None => None,
        },
        extensions: s
            .oauthbearer
            .as_ref()
            .map(|o| o.extensions.clone())
            .unwrap_or_default(),
    })
}

/// What one round of a cluster is made with, in the daemon's loop and in `check` alike.
pub struct RoundParts {
    pub prober: ClusterProber,
    pub evaluator: Evaluator,
    /// Host mode's observer of the brokers' processes, when the cluster has `host:`.
    pub host: Option<HostObserver>,
    /// The cluster's wire options, for the looks beside the rounds (liveness, the control
    /// plane, the coordinators, the canary's clients).
    pub wire: WireOptions,
}

pub fn round_parts(c: &ClusterConfig) -> Result<RoundParts, SetupError> {
    let settings = probe_settings(c)?;
    let wire = settings.wire.clone();
    Ok(RoundParts {
        prober: ClusterProber::new(settings),
        evaluator: Evaluator::new(&c.name, verdict_settings(c), topic_filter(c)),
        host: c.host.clone().map(HostObserver::new),
        wire,
    })
}

pub fn probe_settings(c: &ClusterConfig) -> Result<ProbeSettings, SetupError> {
    Ok(ProbeSettings {
        cluster: c.name.clone(),
        bootstrap_servers: c.bootstrap_servers.clone(),
        wire: WireOptions {
            connect_timeout: c.timing.connect_timeout,
            request_timeout: c.timing.request_timeout,
            client_id: "kafka-watchdog".into(),
            max_frame_bytes: 100 * 1024 * 1024,
            security: wire_security(c)?,
        },
        forget_broker_after: c.timing.forget_broker_after,
        topic_config_refresh: c.timing.topic_config_refresh,
        full_metadata_budget: c.timing.full_metadata_budget,
        // Brokers asked for less than every topic still say what they believe about the
        // canary topic, where every broker leads a partition: a stale leader shows there.
        scoped_topics: if c.canary.enabled {
            vec![c.canary.topic.clone()]
        } else {
            Vec::new()
        },
    })
}

/// How the control plane is looked at: the configured controllers, with the cluster's
/// security; each DescribeQuorum bounded by the liveness floor (within the request timeout),
/// since a controller that takes longer than that to describe its quorum is the news.
/// `security` is the probes' own (`RoundParts::wire`), so one token or AWS identity serves
/// the cluster's every connection.
pub fn quorum_settings(c: &ClusterConfig, security: wire::Security) -> QuorumSettings {
    let bound = c.verdict.keys.liveness_floor.min(c.timing.request_timeout);
    QuorumSettings {
        cluster: c.name.clone(),
        controllers: c
            .controllers
            .iter()
            .map(|ca| (ca.id, ca.address.clone()))
            .collect(),
        wire: WireOptions {
            connect_timeout: c.timing.connect_timeout.min(bound),
            request_timeout: bound,
            client_id: "kafka-watchdog".into(),
            max_frame_bytes: 16 * 1024 * 1024,
            security,
        },
    }
}

/// The coordinator probes' settings, when one is on. Their synthetic groups and
/// transactional ids carry the instance id, so two watchdogs (an HA pair) never share one.
pub fn coordinator_settings(
    c: &ClusterConfig,
    instance: &str,
    security: wire::Security,
) -> Option<CoordinatorSettings> {
    if !c.coordinators.groups && !c.coordinators.transactions {
        return None;
    }
    let timeout = c.coordinators.timeout;
    Some(CoordinatorSettings {
        cluster: c.name.clone(),
        group_prefix: format!("kafka-watchdog-probe-{instance}"),
        groups: c.coordinators.groups,
        transactions: c.coordinators.transactions.then(|| TxnProbeSettings {
            id_prefix: format!("kafka-watchdog-txn-{instance}"),
            interval: c.coordinators.transactions_interval,
        }),
        timeout,
        interval: c.coordinators.interval,
        wire: WireOptions {
            connect_timeout: c.timing.connect_timeout.min(timeout),
            request_timeout: timeout,
            client_id: "kafka-watchdog".into(),
            max_frame_bytes: 16 * 1024 * 1024,
            security,
        },
    })
}

pub fn verdict_settings(c: &ClusterConfig) -> VerdictSettings {
    VerdictSettings::configured(&c.verdict.keys, &c.coordinators, &c.certificates)
}

pub fn topic_filter(c: &ClusterConfig) -> TopicFilterFn {
    let filter = c.topics.clone();
    Arc::new(move |t: &str| filter.matches(t))
}

/// The smallest `socket.connection.setup.timeout.ms` librdkafka accepts.
const LIBRDKAFKA_MIN_CONNECT_SETUP: std::time::Duration = std::time::Duration::from_millis(1000);

/// librdkafka settings shared by the canary's clients: bootstrap, security, deadlines short
/// enough that a hung broker is an error within a round (librdkafka's defaults would turn
/// it into half a minute of latency), then the operator's own properties.
pub fn client_config(c: &ClusterConfig) -> ClientConfig {
    let mut cc = ClientConfig::new();
    let ms = |d: std::time::Duration| d.as_millis().max(1).to_string();
    cc.set("bootstrap.servers", c.bootstrap_servers.join(","))
        .set("client.id", "kafka-watchdog")
        .set(
            "socket.timeout.ms",
            ms(c.timing.request_timeout.max(c.canary.produce_timeout)),
        )
        // librdkafka refuses a setup deadline under a second; the direct probes keep the
        // operator's shorter one, which is where a fast answer matters.
        .set(
            "socket.connection.setup.timeout.ms",
            ms(c.timing.connect_timeout.max(LIBRDKAFKA_MIN_CONNECT_SETUP)),
        )
        .set(
            "api.version.request.timeout.ms",
            ms(c.timing.request_timeout),
        )
        .set(
            "topic.metadata.refresh.interval.ms",
            ms(c.timing.round_interval * 6),
        )
        .set("metadata.max.age.ms", ms(c.timing.round_interval * 18))
        .set("log_level", "4")
        .set("security.protocol", c.security.protocol.as_str());
    if let Some(s) = &c.security.sasl {
        match s.mechanism {
            // The canary sets its clients' tokens (canary::auth) from the same source as
            // the direct probes: librdkafka's built-in OIDC needs a libcurl this build does
            // not link, and it has no AWS_MSK_IAM, which MSK also takes as an OAUTHBEARER
            // token.
            SaslMechanism::OAuthBearer | SaslMechanism::AwsMskIam => {
                cc.set("sasl.mechanism", "OAUTHBEARER");
            }
            _ => {
                cc.set("sasl.mechanism", s.mechanism.as_str())
                    .set("sasl.username", &s.username)
                    .set("sasl.password", s.password.expose());
            }
        }
    }
    if let Some(t) = &c.security.tls {
        if let Some(ca) = &t.ca_file {
            cc.set("ssl.ca.location", ca.display().to_string());
        }
        if let Some(cert) = &t.client_cert {
            cc.set(
                "ssl.certificate.location",
                cert.cert_file.display().to_string(),
            )
            .set("ssl.key.location", cert.key_file.display().to_string());
        }
        if t.insecure_skip_verify {
            cc.set("enable.ssl.certificate.verification", "false")
                .set("ssl.endpoint.identification.algorithm", "none");
        }
    }
    for (k, v) in &c.librdkafka {
        cc.set(k, v);
    }
    cc
}

pub fn canary_settings(
    c: &ClusterConfig,
    instance: &str,
    wire: crate::observe::wire::WireOptions,
) -> CanarySettings {
    CanarySettings {
        acks1_probe: c.canary.acks1_probe,
        wire,
        cluster: c.name.clone(),
        topic: c.canary.topic.clone(),
        instance: instance.to_string(),
        produce_timeout: c.canary.produce_timeout,
        interval: c.canary.interval,
        lost_after: c.canary.lost_after,
        manage_topic: c.canary.manage_topic,
        layout: LayoutSettings {
            replication_factor: c.canary.replication_factor,
            min_insync_replicas: c.canary.min_insync_replicas,
            stable_for: c.canary.reassign_stable,
            min_interval: c.canary.reassign_min_interval,
            elect_preferred_leaders: c.canary.elect_preferred_leaders,
        },
        client: client_config(c),
    }
}

#[cfg(test)]
mod tests {
    use rdkafka::producer::BaseProducer;

    use super::*;

    fn cluster(extra: &str) -> ClusterConfig {
        let yaml =
            format!("clusters:\n  - name: c\n    bootstrap_servers: ['127.0.0.1:9092']\n{extra}");
        let mut config = crate::config::parse(&yaml, "test.yaml").expect("valid configuration");
        config.clusters.remove(0)
    }

    /// Every threshold the judge takes from a cluster's configuration reaches it: a value
    /// set in the file, not the default, is what it judges with.
    #[test]
    fn the_judge_uses_the_thresholds_the_file_sets() {
        let c = cluster(concat!(
            "    verdict: {latency_degraded_factor: 3.5, restart_grace_secs: 7, catch_up_window_secs: 11,\n",
            "              log_dir_min_free_ratio: 0.2, log_dir_full_within_secs: 13}\n",
            "    coordinators: {error_grace_secs: 17, txn_stall_grace_ms: 1900}\n",
            "    certificates: {warning_days: 30, critical_days: 3}\n",
        ));
        let v = verdict_settings(&c);
        let secs = std::time::Duration::from_secs;
        assert_eq!(v.latency_degraded_factor, 3.5);
        assert_eq!(v.restart_grace, secs(7));
        assert_eq!(v.catch_up_window, secs(11));
        assert_eq!(v.log_dir_min_free_ratio, 0.2);
        assert_eq!(v.log_dir_full_within, secs(13));
        assert_eq!(v.coordinators.error_grace, secs(17));
        assert_eq!(
            v.coordinators.txn_stall_grace,
            std::time::Duration::from_millis(1900)
        );
        assert_eq!(v.certificates.warning, secs(30 * 86_400));
        assert_eq!(v.certificates.critical, secs(3 * 86_400));
        // A file that sets nothing judges with the judge's defaults, which are the table's.
        assert_eq!(
            format!("{:?}", verdict_settings(&cluster(""))),
            format!("{:?}", VerdictSettings::default())
        );
    }

    /// The direct probes may use a connect deadline under a second; librdkafka refuses one
    /// (its `socket.connection.setup.timeout.ms` starts at 1000), which left the canary
    /// unable to start while `check-config` had said the file was fine.
    #[test]
    fn a_sub_second_connect_timeout_still_gives_the_canary_a_client() {
        let c = cluster("    connect_timeout_ms: 300\n");
        assert_eq!(
            c.timing.connect_timeout,
            std::time::Duration::from_millis(300)
        );
        let producer: Result<BaseProducer, _> = client_config(&c).create();
        assert!(producer.is_ok(), "{:?}", producer.err());
    }

    /// One identity per cluster: the control-plane and coordinator looks use the probes'
    /// security, so an AWS credential lookup or an OIDC token serves every connection
    /// (each made its own before, and asked the endpoint three times as often).
    #[tokio::test]
    async fn every_look_of_a_cluster_shares_one_aws_identity() {
        let c = cluster(
            "    security:\n      protocol: SASL_SSL\n      sasl:\n        mechanism: AWS_MSK_IAM\n        region: eu-west-1\n    coordinators:\n      groups: true\n",
        );
        let parts = round_parts(&c).unwrap();
        let aws = |s: &wire::Security| s.sasl().and_then(|s| s.aws.clone()).unwrap();
        let probes = aws(&parts.wire.security);
        let quorum = quorum_settings(&c, parts.wire.security.clone());
        assert!(Arc::ptr_eq(&probes, &aws(&quorum.wire.security)));
        let coordinators = coordinator_settings(&c, "i", parts.wire.security.clone()).unwrap();
        assert!(Arc::ptr_eq(&probes, &aws(&coordinators.wire.security)));
    }
}
