//! The shipped example configurations load.

use super::*;

#[test]
fn example_lab_loads() {
    let c = load(&example_path("lab.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.state_dir, Path::new("/tmp/kafka-watchdog-lab"));
    let lab = &c.clusters[0];
    assert_eq!(lab.name, "lab");
    assert_eq!(
        lab.bootstrap_servers,
        ["127.0.0.11:9092", "127.0.0.12:9092", "127.0.0.13:9092"]
    );
    assert_eq!(lab.timing.round_interval, Duration::from_secs(5));
    assert_eq!(lab.timing.request_timeout, Duration::from_millis(2000));
    assert_eq!(lab.timing.connect_timeout, Duration::from_millis(1000));
    let hook = &c.webhooks[0];
    assert_eq!(hook.name, "lab-sink");
    assert_eq!(hook.format, WebhookFormat::Generic);
    assert_eq!(hook.url.expose(), "http://127.0.0.1:9645/");
    assert_eq!(hook.min_severity, Severity::Info);
}

#[test]
fn example_lab_sasl_loads() {
    let dir = temp_dir();
    std::fs::write(dir.join("watchdog.password"), "lab-password\n").unwrap();
    std::fs::write(dir.join("ca.pem"), "-----BEGIN CERTIFICATE-----\n").unwrap();
    let text = std::fs::read_to_string(example_path("lab-sasl.yaml"))
        .unwrap()
        .replace("/tmp/kafka-lab/secrets/", &format!("{}/", dir.display()));
    let path = dir.join("lab-sasl.yaml");
    std::fs::write(&path, text).unwrap();
    let c = load(&path).unwrap_or_else(|e| panic!("{e}"));
    let lab = &c.clusters[0];
    assert_eq!(lab.bootstrap_servers[0], "127.0.0.11:9192");
    assert_eq!(lab.security.protocol, SecurityProtocol::SaslSsl);
    let sasl = lab.security.sasl.as_ref().unwrap();
    assert_eq!(sasl.mechanism, SaslMechanism::ScramSha512);
    assert_eq!(sasl.username, "watchdog");
    assert_eq!(sasl.password.expose(), "lab-password");
    let tls = lab.security.tls.as_ref().unwrap();
    assert_eq!(tls.ca_file.as_deref(), Some(dir.join("ca.pem").as_path()));
    assert!(!tls.insecure_skip_verify);

    // As shipped, the lab's secret files are named where the lab puts them.
    let shipped = std::fs::read_to_string(example_path("lab-sasl.yaml")).unwrap();
    assert!(shipped.contains("password_file: /tmp/kafka-lab/secrets/watchdog.password"));
    assert!(shipped.contains("ca_file: /tmp/kafka-lab/secrets/ca.pem"));
}

#[test]
fn example_production_loads() {
    let dir = temp_dir();
    let creds = dir.join("creds");
    let etc = dir.join("etc");
    std::fs::create_dir_all(&creds).unwrap();
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::write(creds.join("payments-password"), "pw\n").unwrap();
    std::fs::write(etc.join("payments-ca.pem"), "ca\n").unwrap();
    let text = std::fs::read_to_string(example_path("example.yaml"))
        .unwrap()
        .replace(
            "/run/credentials/kafka-watchdog.service/",
            &format!("{}/", creds.display()),
        )
        .replace("/etc/kafka-watchdog/", &format!("{}/", etc.display()));
    let path = dir.join("example.yaml");
    std::fs::write(&path, text).unwrap();
    let env = env_of(&[
        (
            "KW_SLACK_WEBHOOK_URL",
            "https://hooks.slack.com/services/T/B/x",
        ),
        ("KW_PAGERDUTY_ROUTING_KEY", "routing"),
    ]);
    let c = load_inner(&path, &env).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.clusters.len(), 2);
    let (orders, payments) = (&c.clusters[0], &c.clusters[1]);
    // Issue 39: the example advised excluding `__.*`, which hides the consumer offsets and
    // the transaction state from the partition checks: offline, they stop every consumer
    // group or transactional producer whose coordinator lives there.
    for c in &c.clusters {
        for internal in ["__consumer_offsets", "__transaction_state"] {
            assert!(
                c.topics.matches(internal),
                "{}: {internal} excluded",
                c.name
            );
        }
    }
    assert!(!orders.topics.matches("tmp.x"));
    assert!(payments.topics.matches("tmp.x"), "defaults' exclude list");
    assert_eq!(payments.security.protocol, SecurityProtocol::SaslSsl);
    assert_eq!(payments.timing.round_interval, Duration::from_secs(15));
    assert_eq!(payments.verdict.open_after, Duration::from_secs(30));
    assert_eq!(payments.verdict.resolve_after, Duration::from_secs(20));
    assert_eq!(payments.verdict.deprecated_rounds, None);
    assert_eq!(
        payments.verdict.keys.liveness_interval,
        Duration::from_millis(400)
    );
    assert_eq!(payments.canary.replication_factor, Some(3));
    assert_eq!(orders.canary.replication_factor, None);
    let formats: Vec<WebhookFormat> = c.webhooks.iter().map(|w| w.format).collect();
    assert_eq!(
        formats,
        [
            WebhookFormat::Slack,
            WebhookFormat::PagerDuty,
            WebhookFormat::Alertmanager
        ]
    );
    assert_eq!(c.webhooks[1].clusters, ["payments-eu"]);
    assert_eq!(c.webhooks[2].headers["X-Scope-OrgID"], "kafka");
}

/// Issue 39: the .deb installed the full production example as its configuration, naming
/// clusters, credentials and receivers that are not the operator's. It installs this one:
/// it loads, names one cluster to replace, sends nothing anywhere, reads no secret, and
/// serves on loopback only until told otherwise.
#[test]
fn the_packages_minimal_configuration_loads_and_stays_minimal() {
    let c = load(&example_path("minimal.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.clusters.len(), 1);
    assert_eq!(c.clusters[0].name, "main");
    assert!(c.webhooks.is_empty() && c.silences.is_empty() && c.peers.is_none());
    assert!(c.http_auth.is_none() && c.http_tls.is_none());
    assert!(c.http_listen.ip().is_loopback());
    assert_eq!(c.state_dir, Path::new("/var/lib/kafka-watchdog"));
    let keys = std::fs::read_to_string(example_path("minimal.yaml"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && l.contains(':'))
        .count();
    assert!(keys <= 5, "{keys} keys: minimal means few");
    let deb = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    assert!(
        deb.contains(r#"["config/minimal.yaml", "etc/kafka-watchdog/config.yaml", "644"]"#),
        "the .deb installs config/minimal.yaml as /etc/kafka-watchdog/config.yaml"
    );
}
