//! A SASL_SSL cluster (SCRAM-SHA-512 over TLS with the lab's own CA) with Kafka's
//! authorizer on, the watchdog's user holding only the ACLs of docs/install.md: watched,
//! canary included; without rights on its canary topic it says so and runs every other
//! check; a wrong password is a clear per-cluster authentication error that leaves the
//! other cluster watched and never shows the secret; an untrusted certificate is refused
//! unless the config says otherwise, explicitly.

mod common;

use std::time::Duration;

use common::watchdog::Watchdog;
use common::{eventually, lab_with};
use kafka_lab::secrets::Secrets;
use kafka_lab::{KafkaVersion, Security, UpOptions};

const WAIT: Duration = Duration::from_secs(90);

fn secure_lab() -> common::LabGuard {
    lab_with(UpOptions {
        version: KafkaVersion::V4,
        security: Security::SaslSsl,
        brokers: 3,
        ..UpOptions::default()
    })
}

fn cluster_yaml(name: &str, bootstrap: &str, password_file: &str, tls: &str) -> String {
    // Under the canary prefix the lab grants (kafka_lab::CANARY_TOPIC_PREFIX).
    canary_cluster_yaml(
        name,
        bootstrap,
        password_file,
        tls,
        &format!("__kafka_watchdog_canary-secure-{name}"),
    )
}

fn canary_cluster_yaml(
    name: &str,
    bootstrap: &str,
    password_file: &str,
    tls: &str,
    canary_topic: &str,
) -> String {
    format!(
        "  - name: {name}\n    bootstrap_servers: [{bootstrap}]\n    round_interval_secs: 2\n    \
         connect_timeout_ms: 1000\n    request_timeout_ms: 1500\n    security:\n      protocol: SASL_SSL\n      \
         sasl:\n        mechanism: SCRAM-SHA-512\n        username: watchdog\n        password_file: {password_file}\n      \
         tls:\n{tls}    canary:\n      produce_timeout_ms: 1500\n      topic: {canary_topic}\n"
    )
}

/// The watchdog on the SASL_SSL lab as cluster `lab`, webhooks to `rx`, once every broker
/// is healthy.
fn watch_secure_lab(lab: &kafka_lab::Lab, name: &str, rx: &common::watchdog::Receiver) -> Watchdog {
    let secure = lab.secure_bootstrap().expect("a SASL_SSL listener");
    let secrets = Secrets::load(&kafka_lab::lab_dir()).unwrap();
    let ca = secrets.ca().display().to_string();
    let w = Watchdog::start_yaml(name, |port, dir| {
        header(port, dir)
            + &cluster_yaml(
                "lab",
                &secure,
                &secrets.dir.join("watchdog.password").display().to_string(),
                &format!("        ca_file: {ca}\n"),
            )
            + &rx.yaml()
    });
    eventually(WAIT, "every broker healthy", || {
        (1..=3)
            .all(|b| w.broker_state(b).as_deref() == Some("healthy"))
            .then_some(())
    });
    w
}

fn header(port: u16, dir: &std::path::Path) -> String {
    format!(
        "instance_id: secure-test\nhttp:\n  listen: 127.0.0.1:{port}\nlog:\n  level: debug\nstate_dir: {}\nclusters:\n",
        dir.join("state").display()
    )
}

#[test]
fn sasl_ssl_cluster_is_watched_and_a_wrong_password_is_a_clear_error_without_leaks() {
    let lab = secure_lab();
    let secure = lab.secure_bootstrap().expect("a SASL_SSL listener");
    let secrets = Secrets::load(&kafka_lab::lab_dir()).unwrap();
    let ca = secrets.ca().display().to_string();
    let good_password = secrets.watchdog_password.clone();
    let wrong_password = "not-the-password-4d1c0ffee";
    // The transaction coordinator probe needs __transaction_state (a transactional
    // producer creates it), and is on for the good cluster: its ACLs are the lab's.
    common::transactions_topic_ready(&lab.bootstrap());
    let w = Watchdog::start_yaml("secure", |port, dir| {
        let wrong = dir.join("wrong.password");
        std::fs::write(&wrong, wrong_password).unwrap();
        let good = secrets.dir.join("watchdog.password");
        header(port, dir)
            + &cluster_yaml(
                "good",
                &secure,
                &good.display().to_string(),
                &format!("        ca_file: {ca}\n"),
            )
            + "    coordinators:\n      transactions: true\n"
            + &cluster_yaml(
                "bad",
                &secure,
                &wrong.display().to_string(),
                &format!("        ca_file: {ca}\n"),
            )
    });
    let status = eventually(WAIT, "the good cluster's canary round-trips", || {
        let s = w.status();
        let good = s["clusters"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == "good")?
            .clone();
        let ps = good["canary"]["partitions"].as_array()?.clone();
        (ps.len() == 3 && ps.iter().all(|p| p["produce_seconds"].is_number())).then_some(s)
    });
    let clusters = status["clusters"].as_array().unwrap();
    let good = clusters.iter().find(|c| c["name"] == "good").unwrap();
    let bad = clusters.iter().find(|c| c["name"] == "bad").unwrap();
    assert_eq!(good["severity"], "ok", "{good:#}");
    // The group coordinators answer the probe under the least-privilege ACLs (Describe on
    // the probe's group prefix), once the consumer offsets topic exists.
    // The cluster named `name` on a fresh /status.
    let cluster = |name: &str| -> Option<serde_json::Value> {
        let s = w.status();
        s["clusters"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
    };
    eventually(WAIT, "every group coordinator answering the probe", || {
        let looks = cluster("good")?["group_coordinators"]["brokers"]
            .as_array()?
            .clone();
        (!looks.is_empty() && looks.iter().all(|l| l["probe"] == "answered")).then_some(())
    });
    // And the transaction coordinators, under the ACLs docs/install.md lists for that probe
    // (Write and Describe on the transactional ids, Read on the groups, one prefix): every
    // probe transaction ends, none refused.
    eventually(
        WAIT,
        "every transaction coordinator ending the probe's transactions",
        || {
            let looks = cluster("good")?["txn_coordinators"]["brokers"]
                .as_array()?
                .clone();
            let ended = !looks.is_empty()
                && looks.iter().all(|l| {
                    l["probe"] == "answered" && l["errors"].as_array().is_some_and(Vec::is_empty)
                });
            ended.then_some(())
        },
    );
    // Every broker's listener certificate is read: the lab CA's, far from its expiry.
    let certs = good["certificates"]["brokers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(certs.len(), 3, "{good:#}");
    for c in &certs {
        assert_eq!(c["urgency"], "fine", "{c:#}");
        assert!(c["days_left"].as_f64().is_some_and(|d| d > 14.0), "{c:#}");
    }
    assert_eq!(
        good["certificates"]["issuers"].as_array().map(Vec::len),
        Some(1)
    );
    common::watchdog::dashboard_metrics_exist(&w, common::watchdog::tls_metric);
    for b in good["brokers"].as_array().unwrap() {
        assert_eq!(b["state"], "healthy", "{b:#}");
    }
    assert_eq!(bad["severity"], "unreachable", "{bad:#}");
    let failures = bad["bootstrap_failures"].as_array().unwrap();
    assert!(!failures.is_empty(), "{bad:#}");
    for f in failures {
        assert_eq!(f["failure"]["kind"], "authentication", "{f:#}");
    }
    assert_eq!(
        w.metric("kafka_watchdog_cluster_reachable", &[("cluster", "bad")]),
        Some(0.0)
    );
    assert_eq!(
        w.metric("kafka_watchdog_cluster_reachable", &[("cluster", "good")]),
        Some(1.0)
    );
    let log = w.log();
    assert!(
        log.to_lowercase().contains("authentication"),
        "the log says why"
    );
    let (_, metrics) = w.get("/metrics").unwrap();
    let (_, status_text) = w.get("/status").unwrap();
    for secret in [good_password.as_str(), wrong_password] {
        assert!(!log.contains(secret), "a password leaked into the log");
        assert!(!metrics.contains(secret), "a password leaked into /metrics");
        assert!(
            !status_text.contains(secret),
            "a password leaked into /status"
        );
    }
}

#[test]
fn an_untrusted_certificate_is_refused_unless_verification_is_explicitly_off() {
    let lab = secure_lab();
    let secure = lab.secure_bootstrap().unwrap();
    let secrets = Secrets::load(&kafka_lab::lab_dir()).unwrap();
    let password = secrets.dir.join("watchdog.password").display().to_string();
    let w = Watchdog::start_yaml("untrusted", |port, dir| {
        header(port, dir)
            // No CA: the system roots do not know the lab's CA.
            + &cluster_yaml("strict", &secure, &password, "        server_name: localhost\n")
            + &cluster_yaml("lax", &secure, &password, "        insecure_skip_verify: true\n")
    });
    let status = eventually(WAIT, "both clusters report", || {
        let s = w.status();
        let lax = s["clusters"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == "lax")?
            .clone();
        (lax["severity"] == "ok").then_some(s)
    });
    let strict = status["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "strict")
        .unwrap();
    assert_eq!(strict["severity"], "unreachable", "{strict:#}");
    for f in strict["bootstrap_failures"].as_array().unwrap() {
        assert_eq!(f["failure"]["kind"], "tls", "{f:#}");
    }
}

/// With only the ACLs of docs/install.md, a canary topic outside the granted prefix cannot
/// be created: the canary says it is not permitted, what to grant, and no broker is blamed;
/// metadata, partition health and verdicts go on.
#[test]
fn without_rights_on_its_canary_topic_the_watchdog_says_so_and_checks_the_rest() {
    let lab = secure_lab();
    let secure = lab.secure_bootstrap().unwrap();
    let secrets = Secrets::load(&kafka_lab::lab_dir()).unwrap();
    let password = secrets.dir.join("watchdog.password").display().to_string();
    let ca = secrets.ca().display().to_string();
    let topic = common::unique_topic("kwc-not-granted");
    let w = Watchdog::start_yaml("no-canary-acl", |port, dir| {
        header(port, dir)
            + &canary_cluster_yaml(
                "limited",
                &secure,
                &password,
                &format!("        ca_file: {ca}\n"),
                &topic,
            )
    });
    let c = eventually(WAIT, "the canary reports a missing permission", || {
        let s = w.status();
        let c = s["clusters"][0].clone();
        (c["canary"]["status"]["state"] == "not_permitted").then_some(c)
    });
    let detail = c["canary"]["status"]["detail"].as_str().unwrap();
    assert!(
        detail.contains(&topic) && detail.contains("grant"),
        "{detail}"
    );
    // Every other check runs: the topics are seen, every broker is judged healthy.
    std::thread::sleep(Duration::from_secs(6));
    let s = w.status();
    let c = &s["clusters"][0];
    assert!(c["partitions"]["observed"].as_u64().unwrap() > 0, "{c:#}");
    assert_eq!(c["reachable"], true, "{c:#}");
    for b in c["brokers"].as_array().unwrap() {
        assert_eq!(
            b["state"], "healthy",
            "a permission is not a broker fault: {b:#}"
        );
    }
    assert_eq!(
        w.metric(
            "kafka_watchdog_canary_topic_ready",
            &[("cluster", "limited")]
        ),
        Some(0.0)
    );
    assert!(
        w.log().contains("not_permitted") || w.log().contains("may not"),
        "the log says what it cannot do"
    );
    // The topic was not created behind the ACLs' back.
    assert!(kafka_lab::client::partitions(&lab.bootstrap(), &topic).map_or(true, |p| p.is_empty()));
}

fn oauth_cluster_yaml(name: &str, bootstrap: &str, secret_file: &str) -> String {
    format!(
        "  - name: {name}\n    bootstrap_servers: [{bootstrap}]\n    round_interval_secs: 2\n    \
         connect_timeout_ms: 1000\n    request_timeout_ms: 1500\n    security:\n      protocol: SASL_PLAINTEXT\n      \
         sasl:\n        mechanism: OAUTHBEARER\n        token_endpoint_url: {}\n        client_id: {}\n        \
         client_secret_file: {secret_file}\n    canary:\n      produce_timeout_ms: 1500\n      \
         topic: __kafka_watchdog_canary-oauth-{name}\n",
        kafka_lab::oauth::token_url(),
        kafka_lab::oauth::CLIENT_ID,
    )
}

/// OAUTHBEARER against Kafka's own OIDC validation (JWKS of the lab's key, expected
/// audience): tokens from the lab's token endpoint, fetched by the watchdog for its direct
/// probes and handed to the canary's librdkafka clients. A wrong client secret is the
/// token endpoint's refusal, reported per cluster as an authentication failure, never as
/// a broker fault, and the secret appears nowhere.
#[test]
fn oauthbearer_cluster_is_watched_canary_included_and_a_wrong_client_secret_is_a_clear_error() {
    let lab = lab_with(UpOptions {
        version: KafkaVersion::V4,
        security: Security::SaslOauthbearer,
        brokers: 3,
        ..UpOptions::default()
    });
    let bootstrap = kafka_lab::oauth::bootstrap(&lab).expect("an OAUTHBEARER listener");
    let secret_file = kafka_lab::oauth::secret_path(&kafka_lab::lab_dir());
    let good_secret = std::fs::read_to_string(&secret_file).unwrap();
    let wrong_secret = "not-the-client-secret-5eed1e55";
    let w = Watchdog::start_yaml("oauth", |port, dir| {
        let wrong = dir.join("wrong.secret");
        std::fs::write(&wrong, wrong_secret).unwrap();
        header(port, dir)
            + &oauth_cluster_yaml("good", &bootstrap, &secret_file.display().to_string())
            + &oauth_cluster_yaml("bad", &bootstrap, &wrong.display().to_string())
    });
    let status = eventually(WAIT, "the good cluster's canary round-trips", || {
        let s = w.status();
        let good = s["clusters"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == "good")?
            .clone();
        let ps = good["canary"]["partitions"].as_array()?.clone();
        (ps.len() == 3 && ps.iter().all(|p| p["produce_seconds"].is_number())).then_some(s)
    });
    let clusters = status["clusters"].as_array().unwrap();
    let good = clusters.iter().find(|c| c["name"] == "good").unwrap();
    let bad = clusters.iter().find(|c| c["name"] == "bad").unwrap();
    assert_eq!(good["severity"], "ok", "{good:#}");
    let brokers = good["brokers"].as_array().unwrap();
    assert_eq!(brokers.len(), 3, "{good:#}");
    for b in brokers {
        assert_eq!(b["state"], "healthy", "{b:#}");
    }
    assert_eq!(bad["severity"], "unreachable", "{bad:#}");
    let failures = bad["bootstrap_failures"].as_array().unwrap();
    assert!(!failures.is_empty(), "{bad:#}");
    for f in failures {
        assert_eq!(f["failure"]["kind"], "authentication", "{f:#}");
    }
    for b in bad["brokers"].as_array().into_iter().flatten() {
        assert_ne!(
            b["state"], "zombie",
            "a refused secret is no broker fault: {b:#}"
        );
    }
    let log = w.log();
    assert!(
        log.contains("invalid_client"),
        "the log says the token endpoint refused the client"
    );
    let (_, metrics) = w.get("/metrics").unwrap();
    let (_, status_text) = w.get("/status").unwrap();
    for secret in [good_secret.trim(), wrong_secret] {
        assert!(!log.contains(secret), "a client secret leaked into the log");
        assert!(
            !metrics.contains(secret),
            "a client secret leaked into /metrics"
        );
        assert!(
            !status_text.contains(secret),
            "a client secret leaked into /status"
        );
    }
}

/// A frozen TLS broker: the kernel still accepts TCP connections, the JVM never answers the
/// TLS handshake. That is "accepted but silent", a zombie, as in plaintext; before, the
/// round's probe called it `unreachable`, and once Kafka had fenced it, `down` ("no TCP
/// connection and the cluster does not list it"): the wrong page for a process that is
/// alive, holding its port.
#[test]
fn a_frozen_tls_broker_is_a_zombie_not_unreachable_and_stays_one_after_it_is_fenced() {
    use common::watchdog::{is_event, Receiver};
    let mut lab = secure_lab();
    let rx = Receiver::start();
    let w = watch_secure_lab(&lab, "secure-freeze", &rx);
    // Steady state: the liveness check has its connections and the canary writes.
    w.wait_canary_writing(WAIT);
    lab.freeze(2).unwrap();
    let v = rx.wait("opened broker 2 zombie", WAIT, |v| {
        is_event(v, "opened", "broker", Some(2)) && v["state"] == "zombie"
    });
    eprintln!("paged: {v:#}");
    // Kafka fences it after a few seconds; several 2 s rounds later it is still a zombie,
    // named by its silence, never unreachable or down.
    std::thread::sleep(Duration::from_secs(20));
    let rules = w.rules(2);
    let state = w.broker_state(2);
    let verdict = w.broker(2).unwrap_or_default();
    lab.thaw(2).unwrap();
    assert_eq!(state.as_deref(), Some("zombie"), "rules {rules:?}");
    assert!(rules.iter().any(|r| r == "no_answer"), "{rules:?}");
    assert!(!rules.iter().any(|r| r == "unreachable"), "{rules:?}");
    // Its TCP connections are accepted at once: the round's probe says so, and that the
    // handshake is what nobody answers, not the connect.
    let evidence = verdict["hits"].to_string();
    assert!(!evidence.contains("accept queue"), "{verdict:#}");
    assert_eq!(verdict["probe"]["connect"]["ok"], true, "{verdict:#}");
    let failure = &verdict["probe"]["api_versions"]["failure"];
    assert_eq!(failure["kind"], "timeout", "{verdict:#}");
    assert!(
        failure["detail"].as_str().unwrap_or("").contains("tls"),
        "{verdict:#}"
    );
    let down = rx
        .received()
        .into_iter()
        .filter(|v| v["state"] == "down" || v["broker_id"].as_i64().is_some_and(|b| b != 2))
        .collect::<Vec<_>>();
    assert!(down.is_empty(), "{:#}", serde_json::Value::Array(down));
    rx.wait("resolved broker 2", WAIT, |v| {
        is_event(v, "resolved", "broker", Some(2))
    });
}

/// Issue 26 item 3: broker 2 given a certificate valid one more day (`kafka-lab cert 2
/// --days 1`) is a critical `certificate` incident on broker 2 and no other, with its date
/// on /status and in the metric; given a year again, it resolves.
#[test]
fn a_certificate_about_to_expire_is_a_critical_incident_on_its_broker() {
    use common::watchdog::{is_event, Receiver};
    let mut lab = secure_lab();
    let rx = Receiver::start();
    let w = watch_secure_lab(&lab, "secure-cert", &rx);
    lab.reissue_cert(2, 1).unwrap();
    let v = rx.wait("opened certificate of broker 2", WAIT, |v| {
        is_event(v, "opened", "certificate", Some(2))
    });
    assert_eq!(v["severity"], "critical", "{v:#}");
    assert!(
        v["summary"].as_str().unwrap_or("").contains("expires in"),
        "{v:#}"
    );
    let s = w.status();
    let certs = s["clusters"][0]["certificates"]["brokers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let of = |b: i64| certs.iter().find(|c| c["broker"] == b).cloned().unwrap();
    assert_eq!(of(2)["urgency"], "expiring_soon", "{certs:#?}");
    assert!(of(2)["days_left"]
        .as_f64()
        .is_some_and(|d| d > 0.0 && d <= 1.0));
    for b in [1, 3] {
        assert_eq!(of(b)["urgency"], "fine", "{certs:#?}");
    }
    let expiry = w
        .metric(
            "kafka_watchdog_broker_certificate_expiry_timestamp_seconds",
            &[("broker", "2")],
        )
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(expiry > now && expiry < now + 86_400.0 + 60.0, "{expiry}");
    let others: Vec<_> = rx
        .received()
        .into_iter()
        .filter(|v| v["event"] == "opened" && !is_event(v, "opened", "certificate", Some(2)))
        .filter(|v| v["kind"] == "certificate")
        .collect();
    assert!(others.is_empty(), "{others:#?}");
    // heal issues the lab's usual validity again and restarts the broker.
    lab.heal(Some(2)).unwrap();
    rx.wait("resolved certificate of broker 2", WAIT, |v| {
        is_event(v, "resolved", "certificate", Some(2))
    });
}

/// Whether `password` authenticates the watchdog's user at `address` now, on a new
/// connection (the lab CA trusted).
fn authenticates(address: &str, ca: &[u8], password: &str) -> bool {
    use kafka_watchdog::model::round::FailureKind;
    use kafka_watchdog::observe::wire::{
        BrokerClient, SaslMechanism, SaslSettings, Security as Wire, TlsSettings, WireOptions,
    };
    let opts = WireOptions {
        connect_timeout: Duration::from_secs(3),
        request_timeout: Duration::from_secs(5),
        security: Wire::SaslSsl(
            TlsSettings {
                ca_pem: Some(ca.to_vec().into()),
                ..TlsSettings::default()
            },
            SaslSettings::user_password(
                SaslMechanism::ScramSha512,
                kafka_lab::secrets::WATCHDOG_USER,
                password,
            ),
        ),
        ..WireOptions::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    match rt.block_on(BrokerClient::connect(address, &opts)) {
        Ok(_) => true,
        Err(e) if e.kind() == FailureKind::Authentication => false,
        Err(e) => panic!("{address}: {e}"),
    }
}

/// Issue 39 item 2: on Kubernetes nothing sends SIGHUP. The watchdog's password and CA come
/// from a Secret mounted as the kubelet mounts it (`..data` links). The password is rotated
/// as Strimzi rotates a KafkaUser's (the brokers first: the old one is refused from then on;
/// the Secret after), and the CA as cert-manager rotates one (the Secret trusts the old and
/// the new CA, then broker 2 restarts with a certificate of the new one). The same process
/// keeps watching: broker 2's new certificate is read by the probes, every broker stays
/// healthy, nothing is paged about a broker or the cluster, the canary writes and reads
/// back, and each file change is logged and counted. Before, broker 2 came back
/// unreachable (its certificate untrusted, the new password unknown to the watchdog).
#[test]
fn rotated_password_and_ca_files_are_used_without_a_restart() {
    use common::watchdog::{metric_sum, Receiver};
    use kafka_watchdog_test_support::secret_volume;
    let mut lab = secure_lab();
    let secure = lab.secure_bootstrap().unwrap();
    let first = secure.split(',').next().unwrap().to_string();
    let secrets = Secrets::load(&kafka_lab::lab_dir()).unwrap();
    let original = secrets.watchdog_password.clone();
    let lab_ca = std::fs::read(secrets.ca()).unwrap();
    let rx = Receiver::start();
    let mut mounted = std::path::PathBuf::new();
    let w = Watchdog::start_yaml("secure-rotate", |port, dir| {
        mounted = dir.join("kafka-user");
        secret_volume::write(
            &mounted,
            "1",
            &[("password", original.as_bytes()), ("ca.crt", &lab_ca)],
        )
        .unwrap();
        header(port, dir)
            + &cluster_yaml(
                "lab",
                &secure,
                &mounted.join("password").display().to_string(),
                &format!("        ca_file: {}\n", mounted.join("ca.crt").display()),
            )
            + &rx.yaml()
    });
    eventually(WAIT, "every broker healthy", || {
        (1..=3)
            .all(|b| w.broker_state(b).as_deref() == Some("healthy"))
            .then_some(())
    });
    w.wait_canary_writing(WAIT);
    let applied = |kind: &str| {
        w.metric(
            "kafka_watchdog_credential_reloads_total",
            &[("kind", kind), ("outcome", "applied")],
        )
        .unwrap_or(-1.0)
    };
    assert_eq!(applied("secret"), 0.0);
    assert_eq!(applied("certificates"), 0.0);

    // The password: the brokers first, then the Secret.
    let rotated = format!("rotated-{}", kafka_lab::secrets::random_password().unwrap());
    lab.set_watchdog_password(&rotated).unwrap();
    // Each broker applies the credential from the metadata log, a moment after the answer.
    eventually(Duration::from_secs(10), "the old password refused", || {
        (!authenticates(&first, &lab_ca, &original)).then_some(())
    });
    assert!(authenticates(&first, &lab_ca, &rotated));
    secret_volume::write(
        &mounted,
        "2",
        &[("password", rotated.as_bytes()), ("ca.crt", &lab_ca)],
    )
    .unwrap();
    let swapped = std::time::Instant::now();
    eventually(
        Duration::from_secs(30),
        "the password file taken in",
        || (applied("secret") >= 1.0).then_some(()),
    );
    eprintln!(
        "the password taken in {:.1} s after the Secret's swap",
        swapped.elapsed().as_secs_f64()
    );
    // The CA: the Secret trusts both, then broker 2 presents the new CA's certificate.
    let second_ca = secrets
        .ensure_second_ca()
        .map(|_| secrets.second_ca())
        .unwrap();
    let bundle = [lab_ca.clone(), std::fs::read(second_ca).unwrap()].concat();
    secret_volume::write(
        &mounted,
        "3",
        &[("password", rotated.as_bytes()), ("ca.crt", &bundle)],
    )
    .unwrap();
    let swapped = std::time::Instant::now();
    eventually(Duration::from_secs(30), "the CA file taken in", || {
        (applied("certificates") >= 1.0).then_some(())
    });
    eprintln!(
        "the CA bundle taken in {:.1} s after the Secret's swap",
        swapped.elapsed().as_secs_f64()
    );
    let read_back = || {
        metric_sum(
            &w.metrics(),
            "kafka_watchdog_canary_end_to_end_seconds_count",
            &[],
        )
    };
    let read_before = read_back();
    lab.reissue_cert_by(2, 365, true).unwrap();

    // Broker 2's certificate of the new CA, read by the probes' new connection to it.
    eventually(WAIT, "broker 2's new certificate seen", || {
        let s = w.status();
        let issuers = s["clusters"][0]["certificates"]["issuers"]
            .as_array()?
            .clone();
        (issuers.len() == 2).then_some(())
    });
    // A minute of rounds after: watched all along, every probe authenticated (each round's
    // probe connects anew), none refused for its password or certificate.
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < until {
        let s = w.status();
        let c = &s["clusters"][0];
        assert_eq!(c["reachable"], true, "{c:#}");
        assert!(
            c["bootstrap_failures"].as_array().is_none_or(Vec::is_empty),
            "{c:#}"
        );
        for b in 1..=3 {
            let v = w.broker(b).unwrap_or_default();
            for step in ["connect", "api_versions"] {
                let kind = &v["probe"][step]["failure"]["kind"];
                assert!(
                    kind != "authentication" && kind != "tls",
                    "broker {b}: {v:#}"
                );
            }
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    // Healthy; or degraded by stalls of its own (GC, a machine busy with other work: this
    // one has two cores), nothing the credentials could cause.
    for b in 1..=3 {
        let (state, rules) = (w.broker_state(b), w.rules(b));
        let load_only = rules.iter().all(|r| r == "liveness_flapping");
        assert!(
            state.as_deref() == Some("healthy")
                || (state.as_deref() == Some("degraded") && load_only),
            "broker {b}: {state:?} {rules:?}"
        );
    }
    let paged: Vec<_> = rx
        .received()
        .into_iter()
        .filter(|v| {
            v["event"] == "opened"
                && (v["severity"] == "critical"
                    || v["kind"] == "cluster_unreachable"
                    || v["kind"] == "watchdog_access")
        })
        .collect();
    assert!(paged.is_empty(), "{paged:#?}");
    assert!(
        read_back() > read_before,
        "the canary reads its writes back"
    );
    assert_eq!(
        metric_sum(
            &w.metrics(),
            "kafka_watchdog_canary_records_lost_total",
            &[]
        ),
        0.0
    );
    let log = w.log();
    assert!(
        log.contains("credential file changed"),
        "the change is logged"
    );
    assert!(
        log.contains("the canary's credentials changed"),
        "the canary made new clients"
    );
    assert!(!log.contains("reloading"), "no reload, no restart");
    assert!(!log.contains(&rotated), "the password leaked into the log");

    // The lab as it was: the first password (broker 2 gets the lab CA again when healed).
    lab.set_watchdog_password(&original).unwrap();
}
