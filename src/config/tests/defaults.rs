//! Built-in defaults, the `defaults:` block and what each cluster inherits; timing checks.

use super::*;

#[test]
fn built_in_defaults_are_applied() {
    let c = ok(MINIMAL);
    assert!(!c.instance_id.is_empty());
    assert_eq!(c.http_listen.to_string(), "127.0.0.1:9644");
    assert_eq!(
        c.log,
        LogConfig {
            level: LogLevel::Info,
            format: LogFormat::Text
        }
    );
    assert_eq!(c.state_dir, Path::new("/var/lib/kafka-watchdog"));
    assert!(c.webhooks.is_empty());
    let k = &c.clusters[0];
    assert_eq!(k.name, "lab");
    assert_eq!(
        k.security,
        Security {
            protocol: SecurityProtocol::Plaintext,
            sasl: None,
            tls: None
        }
    );
    assert_eq!(k.timing.round_interval, Duration::from_secs(10));
    assert_eq!(k.timing.connect_timeout, Duration::from_millis(2000));
    assert_eq!(k.timing.request_timeout, Duration::from_millis(3000));
    assert_eq!(k.timing.topic_config_refresh, Duration::from_secs(300));
    assert_eq!(k.timing.forget_broker_after, Duration::from_secs(3600));
    assert_eq!(k.topics.include_patterns(), [".*"]);
    assert!(k.topics.exclude_patterns().is_empty());
    assert!(k.topics.matches("anything"));
    assert_eq!(
        k.canary,
        CanaryConfig {
            enabled: true,
            topic: "__kafka_watchdog_canary".into(),
            manage_topic: true,
            replication_factor: None,
            min_insync_replicas: None,
            produce_timeout: Duration::from_millis(5000),
            interval: Duration::from_millis(1000),
            lost_after: Duration::from_secs(60),
            acks1_probe: true,
            reassign_stable: Duration::from_secs(300),
            reassign_min_interval: Duration::from_secs(3600),
            elect_preferred_leaders: false,
        }
    );
    assert_eq!(
        k.verdict,
        VerdictConfig {
            open_after: Duration::from_secs(1),
            resolve_after: Duration::from_secs(20),
            deprecated_rounds: None,
            keys: VerdictKeys {
                liveness_interval: Duration::from_millis(400),
                liveness_floor: Duration::from_millis(1000),
                latency_degraded_factor: 5.0,
                restart_grace: Duration::from_secs(120),
                catch_up_window: Duration::from_secs(60),
                log_dir_min_free_ratio: 0.05,
                log_dir_full_within: Duration::from_secs(6 * 3600),
                flap_window: Duration::from_secs(120),
                flap_start_changes: 6,
                flap_stop_changes: 2,
            },
        }
    );
    assert!(k.librdkafka.is_empty());
    // The public Default impls agree with what loading applies.
    assert_eq!(k.canary, CanaryConfig::default());
    assert_eq!(k.verdict, VerdictConfig::default());
    assert_eq!(c.log, LogConfig::default());
    assert!(TopicFilter::default().matches("anything"));
}

#[test]
fn topic_filter_new() {
    let f = TopicFilter::new(&["a.*"], &["ab"]).unwrap();
    assert!(f.matches("ax") && !f.matches("ab") && !f.matches("xa"));
    assert_eq!(
        TopicFilter::new(&["("], &[]).unwrap_err(),
        "invalid regex '(': unclosed group"
    );
}

#[test]
fn defaults_block_is_inherited_and_overridden_key_by_key() {
    let text = "\
defaults:
  round_interval_secs: 20
  request_timeout_ms: 4000
  topics:
    include: ['a.*']
    exclude: ['ab']
  canary:
    lost_after_secs: 120
    acks1_probe: false
  verdict:
    open_after_rounds: 4
    latency_degraded_factor: 2.5
  librdkafka:
    socket.keepalive.enable: true
    fetch.wait.max.ms: 100
clusters:
  - name: inherits
    bootstrap_servers: [a:1]
  - name: overrides
    bootstrap_servers: [b:1]
    round_interval_secs: 30
    topics:
      exclude: []
    canary:
      lost_after_secs: 90
      replication_factor: 2
    verdict:
      resolve_after_rounds: 7
      catch_up_window_secs: 300
      restart_grace_secs: 0
    librdkafka:
      fetch.wait.max.ms: 50
";
    let c = ok(text);
    let (a, b) = (&c.clusters[0], &c.clusters[1]);

    assert_eq!(a.timing.round_interval, Duration::from_secs(20));
    assert_eq!(a.timing.request_timeout, Duration::from_millis(4000));
    assert_eq!(
        a.timing.connect_timeout,
        Duration::from_millis(2000),
        "built-in"
    );
    assert!(a.topics.matches("ax") && !a.topics.matches("ab"));
    assert_eq!(a.canary.lost_after, Duration::from_secs(120));
    assert!(!a.canary.acks1_probe);
    // The deprecated round count, converted with the round interval (3 intervals of 20 s,
    // less a tenth for jitter).
    assert_eq!(a.verdict.open_after, Duration::from_secs(54));
    assert_eq!(a.verdict.resolve_after, Duration::from_secs(20), "built-in");
    assert_eq!(a.verdict.deprecated_rounds, Some((Some(4), None)));
    assert!(a
        .verdict
        .deprecation("inherits")
        .is_some_and(|m| m.contains("open_after_rounds: 4 is now open_after_secs: 54")));
    assert_eq!(a.verdict.keys.latency_degraded_factor, 2.5);
    assert_eq!(a.librdkafka["socket.keepalive.enable"], "true");
    assert_eq!(a.librdkafka["fetch.wait.max.ms"], "100");

    assert_eq!(b.timing.round_interval, Duration::from_secs(30));
    assert_eq!(
        b.timing.request_timeout,
        Duration::from_millis(4000),
        "from defaults"
    );
    assert!(
        b.topics.matches("ab"),
        "exclude overridden, include inherited"
    );
    assert!(!b.topics.matches("b"));
    assert_eq!(b.canary.lost_after, Duration::from_secs(90));
    assert!(!b.canary.acks1_probe, "sibling key still inherited");
    assert_eq!(b.canary.replication_factor, Some(2));
    assert_eq!(
        b.verdict.open_after,
        Duration::from_secs(81),
        "3 x 30 s, less a tenth"
    );
    assert_eq!(b.verdict.resolve_after, Duration::from_secs(162));
    assert_eq!(b.verdict.keys.catch_up_window, Duration::from_secs(300));
    assert_eq!(b.verdict.keys.restart_grace, Duration::ZERO);
    assert_eq!(
        a.verdict.keys.catch_up_window,
        Duration::from_secs(60),
        "built-in"
    );
    assert_eq!(b.librdkafka["fetch.wait.max.ms"], "50");
    assert_eq!(b.librdkafka["socket.keepalive.enable"], "true");
}

#[test]
fn defaults_block_problems() {
    let text = format!("defaults:\n  name: x\n  round_interval_secs: 0\n{MINIMAL}");
    let got: Vec<String> = problems(&text).iter().map(short).collect();
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(got[0].starts_with("2:3: 'name' cannot be set in defaults, only in each cluster (expected one of: round_interval_secs,"), "{got:#?}");
    assert_eq!(
        got[1],
        "3:24: round_interval_secs 0 is out of range (expected an integer from 1 to 3600)"
    );

    // A default that breaks a rule in one cluster is reported against that cluster.
    let text = format!(
        "defaults:\n  request_timeout_ms: 12000\n{MINIMAL}  - name: fast\n    bootstrap_servers: [a:1]\n    round_interval_secs: 30\n"
    );
    assert_eq!(
        one(&text),
        "2:3: request_timeout_ms 12000 (from defaults) is not below round_interval_secs of cluster 'lab' (10 s) (expected a value under 10000)"
    );
}

#[test]
fn timeouts_must_fit_in_the_round() {
    // Built-in request timeout (3000 ms) against a written round interval.
    assert_eq!(
        problems(&cluster_with("round_interval_secs: 2"))
            .iter()
            .map(short)
            .collect::<Vec<_>>(),
        [
            "4:5: round_interval_secs 2 leaves no room for the default request_timeout_ms of 3000 in cluster 'lab' (expected at least 4 s, or a smaller request_timeout_ms)",
            "4:5: round_interval_secs 2 leaves no room for the default connect_timeout_ms of 2000 in cluster 'lab' (expected at least 3 s, or a smaller connect_timeout_ms)",
            "4:5: round_interval_secs 2 leaves no room for the default produce_timeout_ms of 5000 in cluster 'lab' (expected at least 6 s, or a smaller produce_timeout_ms)",
        ]
    );
    assert_eq!(
        one(&cluster_with("canary:\n  produce_timeout_ms: 10000")),
        "5:7: produce_timeout_ms 10000 is not below round_interval_secs (10 s) (expected a value under 10000)"
    );
    // A disabled canary produces nothing, so its timeout is not held to the round.
    ok(&cluster_with(
        "canary:\n  enabled: false\n  produce_timeout_ms: 10000",
    ));
    // A bad round interval does not also produce a spurious timeout conflict.
    assert_eq!(
        problems(&cluster_with(
            "round_interval_secs: x\nrequest_timeout_ms: 60000"
        ))
        .len(),
        1
    );
}

/// Issue 14: confirmation is a duration. The `_secs` key wins wherever it is written; the
/// deprecated round count is converted with the cluster's own round interval and said so;
/// the liveness keys are checked like every other key.
#[test]
fn confirmation_durations_and_the_deprecated_round_counts() {
    let c = ok("\
defaults:
  verdict:
    open_after_rounds: 4
    resolve_after_rounds: 2
clusters:
  - name: a
    bootstrap_servers: [a:1]
    verdict:
      open_after_secs: 3
      liveness_interval_ms: 0
  - name: b
    bootstrap_servers: [b:1]
    round_interval_secs: 20
");
    let (a, b) = (&c.clusters[0].verdict, &c.clusters[1].verdict);
    assert_eq!(a.open_after, Duration::from_secs(3));
    assert_eq!(
        a.resolve_after,
        Duration::from_secs(9),
        "1 x 10 s, less a tenth"
    );
    assert_eq!(a.deprecated_rounds, Some((None, Some(2))));
    assert_eq!(a.keys.liveness_interval, Duration::ZERO, "0 turns it off");
    assert_eq!(
        b.open_after,
        Duration::from_secs(54),
        "3 x 20 s, less a tenth"
    );
    assert!(b
        .deprecation("b")
        .is_some_and(|m| m.contains("deprecated") && m.contains("_secs")));
    let got: Vec<String> = problems(
        "clusters:\n  - name: a\n    bootstrap_servers: [a:1]\n    verdict:\n      liveness_floor_ms: 5\n",
    )
    .iter()
    .map(short)
    .collect();
    assert_eq!(
        got,
        ["5:26: liveness_floor_ms 5 is out of range (expected an integer from 100 to 600000)"]
    );
}

/// Issue 28 item 3: static labels per cluster, checked where they are written.
#[test]
fn cluster_labels_are_checked() {
    let c = ok(&format!(
        "{MINIMAL}    labels: {{env: prod, team: payments}}\n"
    ));
    assert_eq!(c.clusters[0].labels["env"], "prod");
    assert_eq!(c.clusters[0].labels["team"], "payments");
    let got: Vec<String> = problems(&format!(
        "{MINIMAL}    labels: {{cluster: x, 2env: y, __meta: z, ok: ''}}\n"
    ))
    .iter()
    .map(short)
    .collect();
    assert!(
        got.iter()
            .any(|p| p.contains("label 'cluster' is one the watchdog sets itself")),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|p| p.contains("'2env' is not a valid label name")),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|p| p.contains("'__meta' is not a valid label name")),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|p| p.contains("label 'ok' has an empty or too long value")),
        "{got:?}"
    );
}
