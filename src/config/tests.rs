use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;

/// Environment for tests: a fixed map, so no test touches the process environment.
fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

fn no_env(_: &str) -> Option<String> {
    None
}

fn ok(text: &str) -> Config {
    match parse_with_env(text, "t.yaml", &no_env) {
        Ok(c) => c,
        Err(e) => panic!("expected a valid config, got:\n{e}"),
    }
}

fn problems_env(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Vec<Problem> {
    match parse_with_env(text, "t.yaml", env) {
        Ok(_) => panic!("expected problems, the config loaded:\n{text}"),
        Err(ConfigError::Invalid { problems }) => {
            assert!(!problems.is_empty());
            problems
        }
        Err(e) => panic!("unexpected error {e}"),
    }
}

fn problems(text: &str) -> Vec<Problem> {
    problems_env(text, &no_env)
}

/// The single problem of `text`, as `LINE:COL: MESSAGE (expected ...)`.
fn one(text: &str) -> String {
    let p = problems(text);
    assert_eq!(p.len(), 1, "expected one problem, got {p:#?}");
    short(&p[0])
}

fn short(p: &Problem) -> String {
    let full = p.to_string();
    full.strip_prefix(&format!("{}:", p.file))
        .unwrap_or(&full)
        .to_string()
}

/// A directory of its own for one test, removed when the test ends.
struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir() -> TempDir {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "kafka-watchdog-config-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    TempDir(dir)
}

const MINIMAL: &str = "clusters:\n  - name: lab\n    bootstrap_servers: [\"127.0.0.11:9092\"]\n";

/// A cluster block with `extra` lines added at the cluster's indentation.
fn cluster_with(extra: &str) -> String {
    let mut s = MINIMAL.to_string();
    for line in extra.lines() {
        s.push_str("    ");
        s.push_str(line);
        s.push('\n');
    }
    s
}

// ---------------------------------------------------------------------------------------
// The example from the brief: three problems in three places, all reported.

#[test]
fn three_problems_at_once_with_positions() {
    let text = "\
instance_id: watchdog-a
clusters:
  - name: one
    bootstrap_servers:
      - broker1:9092
    round_interval_secs: 10
    bootstrap_server: [x]
  - name: two
    bootstrap_servers:
      - broker1:9092
      - broker2:99999
  - name: three
    bootstrap_servers: [broker3:9092]
    round_interval_secs: 10
    request_timeout_ms: 15000
";
    let err = parse_with_env(text, "lab.yaml", &no_env).unwrap_err();
    assert_eq!(
        err.to_string(),
        "\
lab.yaml:7:5: unknown key 'bootstrap_server' in clusters[0], did you mean 'bootstrap_servers'? (expected one of: name, bootstrap_servers, controllers, security, round_interval_secs, connect_timeout_ms, request_timeout_ms, topic_config_refresh_secs, forget_broker_after_secs, full_metadata_partition_budget, topics, canary, coordinators, certificates, verdict, librdkafka, host, labels)
lab.yaml:11:9: 'broker2:99999' is not a host:port (expected a port from 1 to 65535)
lab.yaml:15:5: request_timeout_ms 15000 is not below round_interval_secs (10 s) (expected a value under 10000)
lab.yaml: 3 problems"
    );
    let ConfigError::Invalid { problems } = err else {
        panic!("not Invalid")
    };
    assert_eq!(problems[1].line, 11);
    assert_eq!(problems[1].column, 9);
    assert_eq!(
        problems[1].expected.as_deref(),
        Some("a port from 1 to 65535")
    );
}

#[test]
fn count_line_is_singular_for_one_problem() {
    let err = parse_with_env("clusters: []\n", "a.yaml", &no_env).unwrap_err();
    assert_eq!(
        err.to_string(),
        "a.yaml:1:1: clusters is empty (expected at least one cluster)\na.yaml: 1 problem"
    );
}

#[test]
fn type_error_in_one_cluster_does_not_hide_another() {
    let text = "\
clusters:
  - name: a
    bootstrap_servers: [a:1]
    round_interval_secs: ten
    canary: yes please
  - name: b
    bootstrap_servers: [b:0]
    verdict:
      open_after_rounds: 0
";
    let got: Vec<String> = problems(text).iter().map(short).collect();
    assert_eq!(
        got,
        [
            "4:26: wrong type for round_interval_secs: the text 'ten' (expected an integer from 1 to 3600)",
            "5:13: wrong type for canary: the text 'yes please' (expected a mapping of keys to values)",
            "7:25: 'b:0' is not a host:port (expected a port from 1 to 65535)",
            "9:26: open_after_rounds 0 is out of range (expected an integer from 1 to 1000)",
        ]
    );
}

// ---------------------------------------------------------------------------------------
// One message per kind of mistake: text, line and column.

#[test]
fn yaml_syntax_error_has_parser_position() {
    let got = one("clusters:\n  - name: [lab\n    bootstrap_servers: x\n");
    assert!(
        got.starts_with("YAML syntax error") || got.contains(": YAML syntax error"),
        "{got}"
    );
    let p = &problems("clusters:\n  - name: [lab\n    bootstrap_servers: x\n")[0];
    assert!(p.line >= 2, "{p:?}");

    let p = &problems("a: 'unterminated\n")[0];
    assert!(p.message.starts_with("YAML syntax error: "), "{p:?}");

    // A tab used for indentation.
    let p = &problems("clusters:\n\t- name: x\n")[0];
    assert_eq!(
        (p.line, p.message.starts_with("YAML syntax error")),
        (2, true),
        "{p:?}"
    );
}

#[test]
fn empty_list_and_scalar_files() {
    let expected = "(expected a mapping with at least a 'clusters' list)";
    for text in ["", "\n\n", "# only a comment\n", "~\n", "---\n"] {
        assert_eq!(
            one(text),
            format!("1:1: the configuration is empty {expected}"),
            "{text:?}"
        );
    }
    assert_eq!(
        one("- a\n- b\n"),
        format!("1:1: the top level is a list {expected}")
    );
    assert_eq!(
        one("hello world\n"),
        format!("1:1: the top level is the text 'hello world' {expected}")
    );
    assert_eq!(
        one("  42\n"),
        format!("1:3: the top level is the number 42 {expected}")
    );
}

#[test]
fn second_document_is_refused() {
    assert_eq!(
        one(&format!("{MINIMAL}---\n{MINIMAL}")),
        "4:1: a second YAML document starts here (expected a single document)"
    );
}

#[test]
fn missing_required_keys_point_at_the_mapping() {
    let got: Vec<String> = problems("clusters:\n  - bootstrap_servers: [a:1]\n  - name: b\n")
        .iter()
        .map(short)
        .collect();
    assert_eq!(
        got,
        [
            "2:5: missing required key 'name' in clusters[0] (expected 1 to 64 characters from A-Z a-z 0-9 _ . -)",
            "3:5: missing required key 'bootstrap_servers' in clusters[1] (expected a list of host:port addresses)",
        ]
    );
    assert_eq!(
        one("instance_id: x\n"),
        "1:1: missing required key 'clusters' in the top level (expected a list of clusters, each with name and bootstrap_servers)"
    );
}

#[test]
fn duplicate_cluster_name_points_at_the_second() {
    let text = format!("{MINIMAL}  - name: lab\n    bootstrap_servers: [b:1]\n");
    assert_eq!(
        one(&text),
        "4:11: duplicate cluster name 'lab' (first used at line 2) (expected a name not used by another cluster)"
    );
}

#[test]
fn empty_clusters_and_bad_names() {
    assert_eq!(
        one("clusters:\n"),
        "1:1: wrong type for clusters: no value (expected a list of clusters)"
    );
    assert_eq!(
        one("clusters:\n  - name: 'lab one'\n    bootstrap_servers: [a:1]\n"),
        "2:11: 'lab one' is not a valid cluster name (expected 1 to 64 characters from A-Z a-z 0-9 _ . -)"
    );
    let long = "x".repeat(65);
    assert!(one(&format!(
        "clusters:\n  - name: {long}\n    bootstrap_servers: [a:1]\n"
    ))
    .contains("is not a valid cluster name"));
}

#[test]
fn bootstrap_server_forms() {
    let c = ok("clusters:\n  - name: a\n    bootstrap_servers: ['[::1]:9092', 'h-1.example:1', '10.0.0.1:65535']\n");
    assert_eq!(
        c.clusters[0].bootstrap_servers,
        ["[::1]:9092", "h-1.example:1", "10.0.0.1:65535"]
    );
    // A comma-separated string, as in a properties file.
    let c = ok("clusters:\n  - name: a\n    bootstrap_servers: 'a:1, b:2'\n");
    assert_eq!(c.clusters[0].bootstrap_servers, ["a:1", "b:2"]);

    let cases = [
        ("broker", "'broker' is not a host:port (expected host:port, e.g. broker1:9092 or [::1]:9092)"),
        ("'::1:9092'", "'::1:9092' is not a host:port (expected an IPv6 address in brackets, e.g. [::1]:9092)"),
        ("'[::g]:1'", "'::g' is not an IPv6 address (expected host:port, e.g. broker1:9092 or [::1]:9092)"),
        ("'a:0'", "'a:0' is not a host:port (expected a port from 1 to 65535)"),
        ("'a:port'", "'a:port' is not a host:port (expected a port from 1 to 65535)"),
        ("'bad host:1'", "'bad host' is not a valid host name (expected host:port, e.g. broker1:9092 or [::1]:9092)"),
    ];
    for (value, message) in cases {
        let text = format!("clusters:\n  - name: a\n    bootstrap_servers:\n      - {value}\n");
        assert_eq!(one(&text), format!("4:9: {message}"), "{value}");
    }
    assert_eq!(
        one("clusters:\n  - name: a\n    bootstrap_servers: []\n"),
        "3:5: bootstrap_servers is empty (expected at least one host:port address)"
    );
}

#[test]
fn controllers_are_optional_host_ports_with_an_optional_node_id() {
    let c = ok(MINIMAL);
    assert!(c.clusters[0].controllers.is_empty());
    let c = ok("clusters:\n  - name: a\n    bootstrap_servers: [a:1]\n    controllers: ['0@127.0.0.10:9093', 'c2:9093']\n");
    assert_eq!(
        c.clusters[0].controllers,
        [
            crate::config::ControllerAddress {
                id: Some(0),
                address: "127.0.0.10:9093".into()
            },
            crate::config::ControllerAddress {
                id: None,
                address: "c2:9093".into()
            },
        ]
    );
    // Pasted from controller.quorum.voters.
    let c = ok("clusters:\n  - name: a\n    bootstrap_servers: [a:1]\n    controllers: '1@c1:9093,2@c2:9093'\n");
    assert_eq!(c.clusters[0].controllers.len(), 2);
    let cases = [
        (
            "'x@c1:9093'",
            "'x' is not a node id (expected a node id from 0, as in 3000@controller-1:9093)",
        ),
        (
            "'-1@c1:9093'",
            "'-1' is not a node id (expected a node id from 0, as in 3000@controller-1:9093)",
        ),
        (
            "'c1'",
            "'c1' is not a host:port (expected host:port, e.g. broker1:9092 or [::1]:9092)",
        ),
        (
            "'c1:9093,c1:9093'",
            "controller c1:9093 is listed twice (expected each controller once)",
        ),
    ];
    for (value, message) in cases {
        let text = format!("clusters:\n  - name: a\n    bootstrap_servers: [a:1]\n    controllers:\n      - {value}\n");
        assert_eq!(one(&text), format!("5:9: {message}"), "{value}");
    }
    // A cluster's own key: `defaults:` cannot carry it.
    assert!(
        problems(&format!("defaults:\n  controllers: [c:1]\n{MINIMAL}"))
            .iter()
            .any(|p| p.message.contains("controllers")),
        "defaults must refuse controllers"
    );
}

#[test]
fn wrong_types_are_named() {
    let cases = [
        ("round_interval_secs: '10'", "4:26: wrong type for round_interval_secs: the text '10' (expected an integer from 1 to 3600)"),
        ("round_interval_secs: 1.5", "4:26: wrong type for round_interval_secs: the number 1.5 (expected an integer from 1 to 3600)"),
        ("round_interval_secs: [1]", "4:26: wrong type for round_interval_secs: a list (expected an integer from 1 to 3600)"),
        ("round_interval_secs:", "4:5: wrong type for round_interval_secs: no value (expected an integer from 1 to 3600)"),
        ("round_interval_secs: 0", "4:26: round_interval_secs 0 is out of range (expected an integer from 1 to 3600)"),
        ("round_interval_secs: 99999999999999999999999999999999999999999", "4:26: round_interval_secs 99999999999999999999999999999999999999999 is out of range (expected an integer from 1 to 3600)"),
        ("canary: {enabled: 'yes'}", "4:23: wrong type for enabled: the text 'yes' (expected true or false)"),
        ("canary: {interval_ms: 50}", "4:27: interval_ms 50 is out of range (expected an integer from 100 to 60000)"),
        ("verdict: {latency_degraded_factor: 1}", "4:40: latency_degraded_factor 1 is out of range (expected a number above 1 and at most 1000)"),
        ("verdict: {catch_up_window_secs: 5}", "4:37: catch_up_window_secs 5 is out of range (expected an integer from 10 to 86400)"),
        ("verdict: {restart_grace_secs: -1}", "4:35: restart_grace_secs -1 is out of range (expected an integer from 0 to 86400)"),
        ("verdict: {latency_degraded_factor: .nan}", "4:40: latency_degraded_factor NaN is out of range (expected a number above 1 and at most 1000)"),
        ("topics: [x]", "4:13: wrong type for topics: a list (expected a mapping of keys to values)"),
    ];
    for (line, want) in cases {
        assert_eq!(one(&cluster_with(line)), want, "{line}");
    }
}

#[test]
fn unknown_keys_and_hints() {
    assert_eq!(
        one(&format!("{MINIMAL}webhook: []\n")),
        "4:1: unknown key 'webhook' in the top level, did you mean 'webhooks'? (expected one of: instance_id, http, log, state_dir, defaults, clusters, webhooks, silences)"
    );
    assert_eq!(
        one(&cluster_with("canary: {tpoic: x}")),
        "4:14: unknown key 'tpoic' in clusters[0].canary, did you mean 'topic'? (expected one of: enabled, topic, manage_topic, replication_factor, min_insync_replicas, produce_timeout_ms, interval_ms, lost_after_secs, acks1_probe, reassign_stable_secs, reassign_min_interval_secs, elect_preferred_leaders)"
    );
    // The unit suffix left off.
    assert!(one(&cluster_with("request_timeout: 5")).contains(
        "unknown key 'request_timeout' in clusters[0], did you mean 'request_timeout_ms'?"
    ));
    // Nothing close: no hint.
    let got = one(&cluster_with("colour: blue"));
    assert!(
        got.starts_with("4:5: unknown key 'colour' in clusters[0] (expected one of: name,"),
        "{got}"
    );
    assert_eq!(
        one(&format!("{MINIMAL}log: {{level: info, colour: x}}\n")),
        "4:20: unknown key 'colour' in log (expected one of: level, format)"
    );
}

#[test]
fn merge_keys_get_their_own_message() {
    let text = format!("{MINIMAL}    <<: {{round_interval_secs: 5}}\n");
    assert_eq!(
        one(&text),
        "4:5: YAML merge keys ('<<') are not supported; shared settings go in the defaults block (expected one of: name, bootstrap_servers, controllers, security, round_interval_secs, connect_timeout_ms, request_timeout_ms, topic_config_refresh_secs, forget_broker_after_secs, full_metadata_partition_budget, topics, canary, coordinators, certificates, verdict, librdkafka, host, labels)"
    );
}

#[test]
fn duplicate_yaml_keys() {
    let text = format!("{MINIMAL}    round_interval_secs: 20\n    round_interval_secs: 30\n");
    assert_eq!(
        one(&text),
        "5:5: duplicate key 'round_interval_secs' (first set at line 4) (expected each key once per mapping)"
    );
}

#[test]
fn enum_values_and_case_hints() {
    assert_eq!(
        one(&format!("{MINIMAL}log: {{level: verbose}}\n")),
        "4:14: 'verbose' is not a valid level (expected one of: trace, debug, info, warn, error)"
    );
    assert_eq!(
        one(&cluster_with("security: {protocol: sasl_ssl}")),
        "4:26: 'sasl_ssl' is not a valid protocol, did you mean 'SASL_SSL'? (expected one of: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"
    );
}

#[test]
fn http_external_url_names_the_status_page_in_links() {
    let c = ok(&format!(
        "{MINIMAL}http: {{listen: '0.0.0.0:9644', external_url: 'https://wd.example.com/kafka'}}\n"
    ));
    assert_eq!(c.status_url(), "https://wd.example.com/kafka/status");
    let c = ok(&format!(
        "{MINIMAL}http: {{external_url: 'https://wd.example.com/'}}\n"
    ));
    assert_eq!(c.status_url(), "https://wd.example.com/status");
    let c = ok(&format!("{MINIMAL}http: {{listen: '127.0.0.1:9650'}}\n"));
    assert_eq!(c.status_url(), "http://127.0.0.1:9650/status");
    let p = one(&format!(
        "{MINIMAL}http: {{external_url: 'wd.example.com'}}\n"
    ));
    assert!(
        p.starts_with("4:22: 'wd.example.com' is not an absolute http or https URL (expected the absolute http(s) URL"),
        "{p}"
    );
}

#[test]
fn http_listen_and_instance_id() {
    assert_eq!(
        one(&format!("{MINIMAL}http: {{listen: 'localhost:9644'}}\n")),
        "4:16: 'localhost:9644' is not a socket address (expected an IP address and port, e.g. 127.0.0.1:9644 or [::]:9644)"
    );
    let c = ok(&format!(
        "{MINIMAL}http: {{listen: '[::1]:1'}}\ninstance_id: wd-1\n"
    ));
    assert_eq!(c.http_listen.to_string(), "[::1]:1");
    assert_eq!(c.instance_id, "wd-1");
    assert!(one(&format!("{MINIMAL}instance_id: ''\n")).contains("is not a usable instance_id"));
}

#[test]
fn invalid_regexes_report_the_regex_reason() {
    let got: Vec<String> = problems(&cluster_with("topics:\n  include: ['(abc', 'a)|(b', ok]"))
        .iter()
        .map(short)
        .collect();
    assert_eq!(
        got,
        [
            "5:17: invalid regex '(abc': unclosed group (expected a regular expression, matched against the whole topic name)",
            "5:25: invalid regex 'a)|(b': unopened group (expected a regular expression, matched against the whole topic name)",
        ]
    );
}

#[test]
fn topic_filter_matches_whole_names() {
    let c = ok(&cluster_with(
        "topics:\n  include: ['orders\\..*', payments]\n  exclude: ['.*\\.tmp']",
    ));
    let t = &c.clusters[0].topics;
    assert!(t.matches("orders.eu"));
    assert!(t.matches("payments"));
    assert!(!t.matches("payments-v2"), "patterns match whole names");
    assert!(!t.matches("xorders.eu"));
    assert!(!t.matches("orders.eu.tmp"));
    assert_eq!(t.include_patterns(), ["orders\\..*", "payments"]);
    // A single pattern may be written without a list.
    let c = ok(&cluster_with("topics: {include: 'a.*'}"));
    assert!(c.clusters[0].topics.matches("abc"));
}

#[test]
fn canary_topic_name_rules() {
    for bad in ["'.'", "'..'", "'a b'", "'ä'"] {
        let got = one(&cluster_with(&format!("canary: {{topic: {bad}}}")));
        assert!(got.contains("is not a valid Kafka topic name"), "{got}");
    }
    let c = ok(&cluster_with("canary: {topic: my.canary_topic-1}"));
    assert_eq!(c.clusters[0].canary.topic, "my.canary_topic-1");
}

// ---------------------------------------------------------------------------------------
// Defaults.

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
    assert_eq!(k.round_interval, Duration::from_secs(10));
    assert_eq!(k.connect_timeout, Duration::from_millis(2000));
    assert_eq!(k.request_timeout, Duration::from_millis(3000));
    assert_eq!(k.topic_config_refresh, Duration::from_secs(300));
    assert_eq!(k.forget_broker_after, Duration::from_secs(3600));
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
            liveness_interval: Duration::from_millis(400),
            liveness_floor: Duration::from_millis(1000),
            latency_degraded_factor: 5.0,
            restart_grace: Duration::from_secs(120),
            catch_up_window: Duration::from_secs(60),
            flap_window: Duration::from_secs(120),
            flap_start_changes: 6,
            flap_stop_changes: 2,
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

    assert_eq!(a.round_interval, Duration::from_secs(20));
    assert_eq!(a.request_timeout, Duration::from_millis(4000));
    assert_eq!(a.connect_timeout, Duration::from_millis(2000), "built-in");
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
    assert_eq!(a.verdict.latency_degraded_factor, 2.5);
    assert_eq!(a.librdkafka["socket.keepalive.enable"], "true");
    assert_eq!(a.librdkafka["fetch.wait.max.ms"], "100");

    assert_eq!(b.round_interval, Duration::from_secs(30));
    assert_eq!(
        b.request_timeout,
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
    assert_eq!(b.verdict.catch_up_window, Duration::from_secs(300));
    assert_eq!(b.verdict.restart_grace, Duration::ZERO);
    assert_eq!(
        a.verdict.catch_up_window,
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

// ---------------------------------------------------------------------------------------
// Security and secrets.

const SASL: &str = "\
clusters:
  - name: lab
    bootstrap_servers: [a:1]
    security:
      protocol: SASL_PLAINTEXT
      sasl:
        mechanism: SCRAM-SHA-256
";

#[test]
fn secrets_from_the_environment() {
    let text = format!("{SASL}        username_env: KW_USER\n        password_env: KW_PASS\n");
    let env = env_of(&[("KW_USER", "watchdog"), ("KW_PASS", "s3cret")]);
    let c = parse_with_env(&text, "t.yaml", &env).unwrap();
    let sasl = c.clusters[0].security.sasl.as_ref().unwrap();
    assert_eq!(sasl.mechanism, SaslMechanism::ScramSha256);
    assert_eq!(sasl.username, "watchdog");
    assert_eq!(sasl.password.expose(), "s3cret");
    let dump = format!("{c:?}");
    assert!(!dump.contains("s3cret") && dump.contains("***"), "{dump}");
    assert_eq!(sasl.password.to_string(), "***");

    let got: Vec<String> = problems_env(&text, &env_of(&[("KW_USER", "")]))
        .iter()
        .map(short)
        .collect();
    assert_eq!(
        got,
        [
            "8:23: environment variable KW_USER (username_env) is empty (expected a non-empty variable in the daemon's environment)",
            "9:23: environment variable KW_PASS (password_env) is not set (expected a non-empty variable in the daemon's environment)",
        ]
    );
}

#[test]
fn secrets_from_files() {
    let dir = temp_dir();
    std::fs::write(dir.join("pw"), "line one\n").unwrap();
    std::fs::write(dir.join("crlf"), "pw\r\n").unwrap();
    std::fs::write(dir.join("two"), "pw\n\n").unwrap();
    std::fs::write(dir.join("empty"), "\n").unwrap();
    let with = |user: &str, pw: &str| {
        format!(
            "{SASL}        username_file: {}\n        password_file: {}\n",
            dir.join(user).display(),
            dir.join(pw).display()
        )
    };
    let c = ok(&with("crlf", "pw"));
    let sasl = c.clusters[0].security.sasl.clone().unwrap();
    assert_eq!(sasl.username, "pw");
    assert_eq!(sasl.password.expose(), "line one");
    let c = ok(&with("two", "pw"));
    assert_eq!(
        c.clusters[0].security.sasl.as_ref().unwrap().username,
        "pw\n",
        "only one newline is trimmed"
    );

    let got: Vec<String> = problems(&with("missing", "empty"))
        .iter()
        .map(short)
        .collect();
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(
        got[0].starts_with("8:24: cannot read username_file '"),
        "{got:#?}"
    );
    assert!(
        got[0].ends_with("(expected a readable file holding the value)"),
        "{got:#?}"
    );
    assert!(
        got[1].starts_with("9:24: password_file '") && got[1].contains("' is empty"),
        "{got:#?}"
    );
}

#[test]
fn inline_password_is_rejected() {
    let text = format!("{SASL}        username: u\n        password: hunter2\n");
    let got = one(&text);
    assert_eq!(
        got,
        "9:9: an inline password is not accepted: it would sit in the configuration file in clear text (expected password_env or password_file)"
    );
    assert!(!got.contains("hunter2"));
}

#[test]
fn secret_groups_need_exactly_one_key() {
    let text =
        format!("{SASL}        username: u\n        username_env: U\n        password_env: P\n");
    let env = env_of(&[("U", "u"), ("P", "p")]);
    assert_eq!(
        problems_env(&text, &env).iter().map(short).collect::<Vec<_>>(),
        ["9:9: 'username' and 'username_env' are both set in clusters[0].security.sasl (expected exactly one of username, username_env, username_file)"]
    );
    assert_eq!(
        one(&format!("{SASL}        username: u\n")),
        "7:9: missing password in clusters[0].security.sasl (expected password_env or password_file)"
    );
    let text = "clusters:\n  - name: a\n    bootstrap_servers: [a:1]\n    security:\n      protocol: SASL_SSL\n      sasl: {username: u, password_env: P}\n";
    assert_eq!(
        short(&problems_env(text, &env_of(&[("P", "p")]))[0]),
        "6:13: missing required key 'mechanism' in clusters[0].security.sasl (expected one of: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM)"
    );
}

#[test]
fn sasl_and_tls_blocks_follow_the_protocol() {
    let base = "clusters:\n  - name: a\n    bootstrap_servers: [a:1]\n    security:\n";
    assert_eq!(
        one(&format!("{base}      protocol: SASL_SSL\n")),
        "5:17: protocol SASL_SSL needs a sasl block in clusters[0].security (expected sasl: with mechanism, username and password_env or password_file)"
    );
    assert_eq!(
        one(&format!("{base}      sasl: {{mechanism: PLAIN}}\n")),
        "5:7: sasl is set but protocol is PLAINTEXT (expected protocol SASL_PLAINTEXT or SASL_SSL, or no sasl block)"
    );
}

#[test]
fn tls_settings() {
    let base = "clusters:\n  - name: a\n    bootstrap_servers: [a:1]\n    security:\n";
    // SSL without a tls block: verification on, system roots.
    let c = ok(&format!("{base}      protocol: SSL\n"));
    assert_eq!(c.clusters[0].security.tls, Some(TlsConfig::default()));
    assert!(
        !c.clusters[0]
            .security
            .tls
            .as_ref()
            .unwrap()
            .insecure_skip_verify
    );

    let dir = temp_dir();
    for f in ["ca.pem", "c.pem", "k.pem"] {
        std::fs::write(dir.join(f), "x").unwrap();
    }
    let text = format!(
        "{base}      protocol: SSL\n      tls:\n        ca_file: {d}/ca.pem\n        cert_file: {d}/c.pem\n        key_file: {d}/k.pem\n        server_name: kafka.example\n        insecure_skip_verify: true\n",
        d = dir.display()
    );
    let tls = ok(&text).clusters[0].security.tls.clone().unwrap();
    assert_eq!(tls.ca_file, Some(dir.join("ca.pem")));
    assert_eq!(
        tls.client_cert,
        Some(ClientCert {
            cert_file: dir.join("c.pem"),
            key_file: dir.join("k.pem")
        })
    );
    assert_eq!(tls.server_name.as_deref(), Some("kafka.example"));
    assert!(tls.insecure_skip_verify);

    let text = format!(
        "{base}      protocol: SSL\n      tls:\n        ca_file: {d}/nope.pem\n        cert_file: {d}/c.pem\n",
        d = dir.display()
    );
    let got: Vec<String> = problems(&text).iter().map(short).collect();
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(
        got[0].starts_with("7:18: cannot read ca_file '")
            && got[0].ends_with("(expected a readable file)"),
        "{got:#?}"
    );
    assert_eq!(got[1], "8:9: cert_file is set but key_file is not (expected both cert_file and key_file, or neither)");
}

#[test]
fn tls_block_refused_without_tls_protocol() {
    let text = "clusters:\n  - name: a\n    bootstrap_servers: [a:1]\n    security:\n      protocol: SASL_PLAINTEXT\n      sasl: {mechanism: PLAIN, username: u, password_env: P}\n      tls: {}\n";
    let got = problems_env(text, &env_of(&[("P", "p")]));
    assert_eq!(
        got.iter().map(short).collect::<Vec<_>>(),
        ["7:7: tls is set but protocol is SASL_PLAINTEXT (expected protocol SSL or SASL_SSL, or no tls block)"]
    );
}

#[test]
fn relative_paths_follow_the_config_file() {
    let dir = temp_dir();
    std::fs::write(dir.join("pw"), "p\n").unwrap();
    std::fs::write(
        dir.join("c.yaml"),
        format!("state_dir: state\n{SASL}        username: u\n        password_file: pw\n"),
    )
    .unwrap();
    let c = load(&dir.join("c.yaml")).unwrap();
    assert_eq!(c.state_dir, dir.join("state"));
    assert_eq!(
        c.clusters[0]
            .security
            .sasl
            .as_ref()
            .unwrap()
            .password
            .expose(),
        "p"
    );
}

// ---------------------------------------------------------------------------------------
// librdkafka escape hatch.

#[test]
fn librdkafka_reserved_keys_name_the_key_to_use() {
    let cases = [
        ("bootstrap.servers", "bootstrap_servers"),
        ("security.protocol", "security.protocol"),
        ("sasl.mechanism", "security.sasl.mechanism"),
        ("sasl.mechanisms", "security.sasl.mechanism"),
        ("sasl.username", "security.sasl.username"),
        (
            "sasl.password",
            "security.sasl.password_env or security.sasl.password_file",
        ),
        ("ssl.ca.location", "security.tls.ca_file"),
        ("ssl.certificate.location", "security.tls.cert_file"),
        ("ssl.key.location", "security.tls.key_file"),
        (
            "enable.ssl.certificate.verification",
            "security.tls.insecure_skip_verify",
        ),
    ];
    for (key, instead) in cases {
        assert_eq!(
            one(&cluster_with(&format!("librdkafka:\n  {key}: x"))),
            format!("5:7: librdkafka property '{key}' is set by the watchdog itself in clusters[0].librdkafka (expected the {instead} key instead)")
        );
    }
    assert_eq!(
        one(&format!("defaults:\n  librdkafka:\n    SASL.Password: x\n{MINIMAL}")),
        "3:5: librdkafka property 'sasl.password' is set by the watchdog itself in defaults.librdkafka (expected the security.sasl.password_env or security.sasl.password_file key instead)"
    );
}

#[test]
fn librdkafka_values_are_stringified() {
    let c = ok(&cluster_with(
        "librdkafka:\n  socket.keepalive.enable: true\n  fetch.wait.max.ms: 100\n  x.ratio: 0.5\n  client.rack: 'eu-1a'\n  debug: broker,protocol",
    ));
    let l = &c.clusters[0].librdkafka;
    assert_eq!(l["socket.keepalive.enable"], "true");
    assert_eq!(l["fetch.wait.max.ms"], "100");
    assert_eq!(l["x.ratio"], "0.5");
    assert_eq!(l["client.rack"], "eu-1a");
    assert_eq!(l["debug"], "broker,protocol");
    assert_eq!(
        problems(&cluster_with("librdkafka:\n  a.b:\n  c.d: [1]"))
            .iter()
            .map(short)
            .collect::<Vec<_>>(),
        [
            "5:7: wrong type for a.b: no value (expected a value (text, number or boolean))",
            "6:12: wrong type for c.d: a list (expected a value (text, number or boolean))",
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Webhooks.

#[test]
fn webhooks_resolve() {
    let text = format!(
        "{MINIMAL}webhooks:
  - name: slack
    url_env: SLACK_URL
    format: slack
    clusters: [lab]
    repeat_interval_secs: 0
  - name: pd
    url: https://events.pagerduty.com/v2/enqueue
    format: pagerduty
    min_severity: critical
    routing_key_env: PD_KEY
  - name: own
    url: http://127.0.0.1:9645/hook
    hmac_secret_env: HMAC
    headers: {{X-Team: kafka, X-Num: 7}}
    timeout_ms: 1500
    tls_verify: false
    send_resolved: false
"
    );
    let env = env_of(&[
        ("SLACK_URL", "https://hooks.slack.com/services/T0/B0/tok"),
        ("PD_KEY", "rk"),
        ("HMAC", "hm"),
    ]);
    let c = parse_with_env(&text, "t.yaml", &env).unwrap();
    let [slack, pd, own] = &c.webhooks[..] else {
        panic!("three webhooks")
    };
    assert_eq!(
        slack.url.expose(),
        "https://hooks.slack.com/services/T0/B0/tok"
    );
    assert_eq!(slack.target, "https://hooks.slack.com");
    assert_eq!(slack.format, WebhookFormat::Slack);
    assert_eq!(slack.min_severity, Severity::Warning);
    assert_eq!(slack.repeat_interval, None);
    assert!(slack.covers("lab") && !slack.covers("other"));
    assert!(!format!("{slack:?}").contains("tok"));

    assert_eq!(pd.routing_key.as_ref().map(Secret::expose), Some("rk"));
    assert_eq!(pd.min_severity, Severity::Critical);
    // A PagerDuty reminder is a trigger, which re-opens an alert a person resolved.
    assert_eq!(pd.repeat_interval, None);
    assert!(pd.covers("anything"));
    assert_eq!(own.repeat_interval, Some(Duration::from_secs(3600)));

    assert_eq!(own.format, WebhookFormat::Generic);
    assert_eq!(own.target, "http://127.0.0.1:9645");
    assert_eq!(own.hmac_secret.as_ref().map(Secret::expose), Some("hm"));
    assert_eq!(own.headers["X-Num"], "7");
    assert_eq!(own.timeout, Duration::from_millis(1500));
    assert!(!own.tls_verify && !own.send_resolved && own.routing_key.is_none());
}

#[test]
fn webhook_problems() {
    let text = format!(
        "{MINIMAL}webhooks:
  - name: a
    url: ftp://example.com/
    format: pagerduty
    hmac_secret_env: H
    clusters: [lab, labb]
  - name: a
    url_env: URL
    routing_key_file: /x
    headers: {{'bad header': x}}
  - format: generic
    url: 'https://ok.example/'
    url_file: /y
"
    );
    let got: Vec<String> = problems_env(&text, &env_of(&[("URL", "not a url")]))
        .iter()
        .map(short)
        .collect();
    assert_eq!(
        got,
        [
            "5:5: missing routing key in webhooks[0] (expected routing_key_env or routing_key_file)",
            "6:10: url: URL scheme 'ftp' is not supported (expected an http:// or https:// URL with a host)",
            "8:5: hmac_secret_env is set in webhooks[0] but format is not generic (expected no HMAC secret here)",
            "9:21: 'labb' is not a configured cluster, did you mean 'lab'? (expected one of: lab)",
            "10:11: duplicate webhook name 'a' (first used at line 5) (expected a name not used by another webhook)",
            "11:14: url_env: the URL does not parse (relative URL without a base) (expected an http:// or https:// URL with a host)",
            "12:5: routing_key_file is set in webhooks[1] but format is not pagerduty (expected no routing key here)",
            "13:15: 'bad header' is not a valid HTTP header name (expected letters, digits and !#$%&'*+-.^_`|~)",
            "14:5: missing required key 'name' in webhooks[2] (expected 1 to 64 characters from A-Z a-z 0-9 _ . -)",
            "16:5: 'url' and 'url_file' are both set in webhooks[2] (expected exactly one of url, url_env, url_file)",
        ]
    );
    assert!(
        !got.iter().any(|l| l.contains("not a url")),
        "the URL value is never echoed"
    );
}

#[test]
fn group_interval_defaults_to_30_s_and_0_sends_every_update() {
    let text = format!(
        "{MINIMAL}webhooks:
  - name: a
    url: http://127.0.0.1:1/
  - name: b
    url: http://127.0.0.1:1/
    group_interval_secs: 0
  - name: c
    url: http://127.0.0.1:1/
    group_interval_secs: 120
"
    );
    let c = ok(&text);
    let got: Vec<Option<Duration>> = c.webhooks.iter().map(|w| w.group_interval).collect();
    assert_eq!(
        got,
        [
            Some(Duration::from_secs(30)),
            None,
            Some(Duration::from_secs(120))
        ]
    );
    assert_eq!(
        one(&format!(
            "{MINIMAL}webhooks:\n  - name: a\n    url: http://127.0.0.1:1/\n    group_interval_secs: 7200\n"
        )),
        "7:26: group_interval_secs 7200 is out of range (expected an integer from 0 to 3600)"
    );
}

#[test]
fn a_slack_bot_token_makes_url_the_web_api_base() {
    let dir = temp_dir();
    std::fs::write(dir.join("slack-token"), "xoxb-1-2-abc\n").unwrap();
    let text = format!(
        "{MINIMAL}webhooks:
  - name: bot
    format: slack
    slack_bot_token_file: {token}
    slack_channel: '#kafka-ops'
  - name: bot-local
    format: slack
    url: http://127.0.0.1:9/api
    slack_bot_token_env: SLACK_TOKEN
    slack_channel: C0123ABCD
  - name: hook
    format: slack
    url: https://hooks.slack.com/services/T/B/x
",
        token = dir.join("slack-token").display()
    );
    let c = parse_with_env(&text, "t.yaml", &env_of(&[("SLACK_TOKEN", "xoxb-env")]))
        .unwrap_or_else(|e| panic!("{e}"));
    let [bot, local, hook] = &c.webhooks[..] else {
        panic!("three webhooks")
    };
    let b = bot.slack_bot.as_ref().expect("bot mode");
    assert_eq!(
        b.token.expose(),
        "xoxb-1-2-abc",
        "the file's newline dropped"
    );
    assert_eq!(b.channel, "#kafka-ops");
    assert_eq!(bot.url.expose(), "https://slack.com/api/");
    assert_eq!(bot.target, "https://slack.com");
    assert!(
        !format!("{bot:?}").contains("xoxb"),
        "the token never prints"
    );
    let l = local.slack_bot.as_ref().expect("bot mode");
    assert_eq!(l.token.expose(), "xoxb-env");
    assert_eq!(
        local.url.expose(),
        "http://127.0.0.1:9/api/",
        "methods are joined below the base"
    );
    assert!(hook.slack_bot.is_none(), "no token: the incoming webhook");
}

#[test]
fn slack_bot_problems_say_what_is_wrong_and_what_is_right() {
    let text = format!(
        "{MINIMAL}webhooks:
  - name: no-channel
    format: slack
    slack_bot_token_env: T
  - name: channel-without-token
    format: slack
    url: https://hooks.slack.com/services/T/B/x
    slack_channel: '#ops'
  - name: not-slack
    url: http://127.0.0.1:1/
    slack_bot_token_env: T
  - name: webhook-as-base
    format: slack
    url: https://hooks.slack.com/services/T/B/x
    slack_bot_token_env: T
    slack_channel: 'kafka ops'
  - name: inline
    format: slack
    slack_bot_token: xoxb-in-the-file
    slack_channel: C1
  - name: no-url
    format: slack
"
    );
    let got: Vec<String> = problems_env(&text, &env_of(&[("T", "xoxb-t")]))
        .iter()
        .map(short)
        .collect();
    assert_eq!(
        got,
        [
            "5:5: missing required key 'slack_channel' in webhooks[0] (expected a channel id (C0123ABCD) or name (#kafka-ops))",
            "11:5: slack_channel is set in webhooks[1] but there is no slack_bot_token_env or slack_bot_token_file (an incoming webhook posts where it was made) (expected no slack_channel here)",
            "14:5: slack_bot_token_env is set in webhooks[2] but format is not slack (expected no Slack bot token here)",
            "17:10: url: with a Slack bot token, url is the Web API's base, and this is an incoming webhook's URL (expected https://slack.com/api/ (the default: leave url out), or drop slack_bot_token_* to keep the incoming webhook)",
            "19:20: 'kafka ops' is not a Slack channel (expected a channel id (C0123ABCD) or name (#kafka-ops), 1 to 80 characters from a-z 0-9 - _)",
            "22:5: an inline slack_bot_token is not accepted: it would sit in the configuration file in clear text (expected slack_bot_token_env or slack_bot_token_file)",
            "24:5: missing URL in webhooks[5] (expected exactly one of url, url_env, url_file)",
        ]
    );
    assert!(
        !got.iter().any(|l| l.contains("xoxb")),
        "no token is echoed"
    );
}

// ---------------------------------------------------------------------------------------
// Hostile input.

#[test]
fn aliases_work_within_budget() {
    let text = "\
x-common: &common
  round_interval_secs: 5
clusters:
  - name: a
    bootstrap_servers: &servers [a:1, b:1]
  - name: b
    bootstrap_servers: *servers
x-end: *common
";
    let got = problems(text);
    // The x- keys are unknown, but the aliases themselves are fine.
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(got.iter().all(|p| p.message.starts_with("unknown key 'x-")));
}

#[test]
fn alias_bomb_is_refused() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let p = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    text.push_str(MINIMAL);
    let started = std::time::Instant::now();
    let got = problems(&text);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(
        got[0]
            .message
            .starts_with("the document expands to more than 100000 YAML nodes"),
        "{got:#?}"
    );
    assert_eq!(
        got[0].expected.as_deref(),
        Some("a configuration without alias bombs")
    );
}

#[test]
fn deep_nesting_is_refused() {
    // Past the schema's few levels, below the parser's own limit: refused here.
    let text = format!("{}{}", "[".repeat(100), "]".repeat(100));
    let got = problems(&text);
    assert_eq!(got.len(), 1);
    assert_eq!(
        short(&got[0]),
        "1:65: nesting deeper than 64 levels (expected a configuration of a few levels)"
    );
    // Far deeper: the parser's recursion limit answers first. Either way, one problem.
    for text in [
        format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
        format!("a: {}", "{a: ".repeat(100_000)),
        "- ".repeat(10_000),
    ] {
        let got = problems(&text);
        assert_eq!(got.len(), 1, "{got:#?}");
    }
}

#[test]
fn not_utf8_is_one_problem() {
    let dir = temp_dir();
    let path = dir.join("bin.yaml");
    std::fs::write(&path, b"clusters:\n  - name: \xff\xfe\n").unwrap();
    let err = load(&path).unwrap_err();
    let ConfigError::Invalid { problems } = &err else {
        panic!("{err}")
    };
    assert_eq!(problems.len(), 1);
    assert_eq!((problems[0].line, problems[0].column), (2, 11));
    assert_eq!(problems[0].message, "the file is not UTF-8 text");

    let big = dir.join("big.yaml");
    std::fs::write(&big, vec![b'#'; 5 * 1024 * 1024]).unwrap();
    let err = load(&big).unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("{}:1:1: the file is larger than", big.display())),
        "{err}"
    );

    let err = load(&dir.join("absent.yaml")).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }), "{err}");
    assert!(err.to_string().starts_with("cannot read "));
}

#[test]
fn odd_yaml_features() {
    // Tags: !!str makes text; custom tags are refused; a BOM is ignored.
    assert_eq!(
        one(&cluster_with("round_interval_secs: !!str 5")),
        "4:26: wrong type for round_interval_secs: the text '5' (expected an integer from 1 to 3600)"
    );
    assert_eq!(
        one(&cluster_with("round_interval_secs: !custom 30")),
        "4:26: YAML tag '!custom' is not supported here (expected an untagged value)"
    );
    ok(&format!("\u{feff}{MINIMAL}"));
    // Complex keys.
    assert_eq!(
        one(&format!("{MINIMAL}? [a]\n: b\n")),
        "4:3: a list used as a mapping key (expected a plain key name)"
    );
    // Hex and octal integers follow YAML 1.2.
    let c = ok(&cluster_with(
        "round_interval_secs: 0x10\nrequest_timeout_ms: 0o17",
    ));
    assert_eq!(c.clusters[0].round_interval, Duration::from_secs(16));
    assert_eq!(c.clusters[0].request_timeout, Duration::from_millis(15));
}

/// A small deterministic generator: the test must not depend on an RNG crate, and a
/// failure must reproduce.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn check_never_panics(text: &str) {
    let result = std::panic::catch_unwind(|| parse_with_env(text, "fuzz.yaml", &no_env));
    match result {
        Err(_) => panic!("panicked on input {text:?}"),
        Ok(Ok(_)) => {}
        Ok(Err(ConfigError::Invalid { problems })) => {
            assert!(!problems.is_empty(), "{text:?}");
            for p in &problems {
                assert!(p.line >= 1 && p.column >= 1, "{p:?} for {text:?}");
                assert!(!p.message.is_empty());
            }
        }
        Ok(Err(e)) => panic!("unexpected {e} for {text:?}"),
    }
}

#[test]
fn random_input_never_panics() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let alphabet: Vec<char> = "abc:-[]{}&*!|>'\"#%@`,?~ \n\t\r0123456789.\\é\u{0}\u{feff}"
        .chars()
        .collect();
    for _ in 0..400 {
        let len = rng.below(200);
        let text: String = (0..len)
            .map(|_| alphabet[rng.below(alphabet.len())])
            .collect();
        check_never_panics(&text);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        check_never_panics(&String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn mutated_configs_never_panic() {
    let seeds = [
        include_str!("../../config/example.yaml"),
        include_str!("../../config/lab.yaml"),
        include_str!("../../config/lab-sasl.yaml"),
    ];
    let mut rng = XorShift(42);
    let inserts = [
        ":", "-", "[", "]", "{", "}", "&a ", "*a", "\n", "  ", "'", "\"", "#", "|", "0", "null",
        "true", "- x", "\t", "!!str ", "<<: ", "? ",
    ];
    for round in 0..600 {
        let mut text: Vec<char> = seeds[round % seeds.len()].chars().collect();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(text.len() + 1);
            match rng.below(3) {
                0 => {
                    let end = (at + rng.below(20)).min(text.len());
                    text.drain(at..end);
                }
                1 => {
                    let ins = inserts[rng.below(inserts.len())];
                    for (i, c) in ins.chars().enumerate() {
                        text.insert(at + i, c);
                    }
                }
                _ => {
                    // Duplicate a slice: repeats keys and blocks.
                    let end = (at + rng.below(80)).min(text.len());
                    let copy: Vec<char> = text[at..end].to_vec();
                    let to = rng.below(text.len() + 1);
                    for (i, c) in copy.into_iter().enumerate() {
                        text.insert(to + i, c);
                    }
                }
            }
        }
        check_never_panics(&text.into_iter().collect::<String>());
    }
}

// ---------------------------------------------------------------------------------------
// The shipped examples.

fn example_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config")
        .join(name)
}

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
    assert_eq!(lab.round_interval, Duration::from_secs(5));
    assert_eq!(lab.request_timeout, Duration::from_millis(2000));
    assert_eq!(lab.connect_timeout, Duration::from_millis(1000));
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
    assert!(!orders.topics.matches("__consumer_offsets"));
    assert!(!orders.topics.matches("tmp.x"));
    assert!(payments.topics.matches("tmp.x"), "defaults' exclude list");
    assert_eq!(payments.security.protocol, SecurityProtocol::SaslSsl);
    assert_eq!(payments.round_interval, Duration::from_secs(15));
    assert_eq!(payments.verdict.open_after, Duration::from_secs(30));
    assert_eq!(payments.verdict.resolve_after, Duration::from_secs(20));
    assert_eq!(payments.verdict.deprecated_rounds, None);
    assert_eq!(
        payments.verdict.liveness_interval,
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

// ---------------------------------------------------------------------------------------
// The HTTP server: HTTPS and credentials.

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/observe/wire/testdata");

fn http_with(block: &str) -> String {
    let mut s = format!("{MINIMAL}http:\n");
    for line in block.lines() {
        s.push_str("  ");
        s.push_str(line);
        s.push('\n');
    }
    s
}

#[test]
fn http_tls_and_auth_load() {
    let dir = temp_dir();
    std::fs::write(dir.join("token"), "c2VjcmV0.token==\n").unwrap();
    let c = ok(&http_with(&format!(
        "tls:\n  cert_file: {TESTDATA}/server.pem\n  key_file: {TESTDATA}/server.key\nauth:\n  bearer_token_file: {}",
        dir.join("token").display()
    )));
    let tls = c.http_tls.as_ref().unwrap();
    assert_eq!(tls.cert_file, Path::new(TESTDATA).join("server.pem"));
    assert!(tls.server_config().is_ok());
    assert_eq!(
        c.http_auth,
        Some(HttpAuth::Bearer {
            token: Secret::new("c2VjcmV0.token==")
        })
    );
    assert_eq!(c.http_listen.to_string(), "127.0.0.1:9644");

    let env = env_of(&[("KW_HTTP_PASSWORD", "pa:ss wörd")]);
    let c = parse_with_env(
        &http_with("auth:\n  basic:\n    username: prometheus\n    password_env: KW_HTTP_PASSWORD"),
        "t.yaml",
        &env,
    )
    .unwrap();
    assert_eq!(
        c.http_auth,
        Some(HttpAuth::Basic {
            username: "prometheus".into(),
            password: Secret::new("pa:ss wörd")
        })
    );
    assert_eq!(c.http_tls, None);

    let c = ok(MINIMAL);
    assert_eq!((c.http_tls, c.http_auth), (None, None));
}

#[test]
fn http_tls_problems() {
    assert_eq!(
        one(&http_with(&format!("tls: {{cert_file: {TESTDATA}/server.pem}}"))),
        "5:8: missing required key 'key_file' in http.tls (expected a PEM file holding its private key)"
    );
    let dir = temp_dir();
    std::fs::write(dir.join("not.pem"), "hello\n").unwrap();
    let got = one(&http_with(&format!(
        "tls:\n  cert_file: {}\n  key_file: {TESTDATA}/server.key",
        dir.join("not.pem").display()
    )));
    assert!(got.starts_with("6:16: cert_file '"), "{got}");
    assert!(
        got.ends_with("not.pem': holds no CERTIFICATE block (expected a PEM file with the server certificate first, then any intermediates)"),
        "{got}"
    );
    let got = one(&http_with(&format!(
        "tls:\n  cert_file: {TESTDATA}/server.pem\n  key_file: {TESTDATA}/client.key"
    )));
    assert!(got.starts_with("7:15: key_file '"), "{got}");
    assert!(
        got.contains("client.key': is not the key of the certificate in "),
        "{got}"
    );
    let got = one(&http_with(&format!(
        "tls:\n  cert_file: {TESTDATA}/server.pem\n  key_file: {TESTDATA}/server.pem"
    )));
    assert!(
        got.contains("server.pem': holds no private key block (an encrypted key is not accepted)"),
        "{got}"
    );
    let got = one(&http_with(&format!(
        "tls:\n  cert_file: {TESTDATA}/server.pem\n  key_file: {TESTDATA}/missing.key"
    )));
    assert!(got.starts_with("7:15: cannot read key_file '"), "{got}");
}

#[test]
fn http_auth_problems() {
    assert_eq!(
        one(&http_with("auth: {}")),
        "5:3: missing a credential in http.auth (expected basic (username and password_env or password_file) or bearer_token_env or bearer_token_file)"
    );
    assert_eq!(
        one(&http_with("auth:\n  bearer_token: abc")),
        "6:5: an inline bearer_token is not accepted: it would sit in the configuration file in clear text (expected bearer_token_env or bearer_token_file)"
    );
    let env = env_of(&[("P", "pw"), ("T", "token"), ("SPACE", "a b")]);
    let got: Vec<String> = problems_env(
        &http_with("auth:\n  basic: {username: u, password_env: P}\n  bearer_token_env: T"),
        &env,
    )
    .iter()
    .map(short)
    .collect();
    assert_eq!(
        got,
        ["7:5: bearer_token_env is set in http.auth but basic is set too (expected no bearer token here)"]
    );
    let got: Vec<String> = problems_env(
        &http_with("auth:\n  basic: {username: 'a:b', password_env: P}"),
        &env,
    )
    .iter()
    .map(short)
    .collect();
    assert_eq!(
        got,
        ["6:23: the username holds a colon or a control character (expected a username without ':' (HTTP Basic ends the name at the first colon))"]
    );
    let got: Vec<String> = problems_env(&http_with("auth: {bearer_token_env: SPACE}"), &env)
        .iter()
        .map(short)
        .collect();
    assert_eq!(
        got,
        ["5:28: the bearer token from bearer_token_env holds a character a bearer token cannot carry (a space, a newline, ...) (expected letters, digits and - . _ ~ + / only, then optional '=' padding)"]
    );
    let got: Vec<String> = problems_env(
        &http_with("auth:\n  basic: {username: u}\n  token_file: x"),
        &env,
    )
    .iter()
    .map(short)
    .collect();
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(
        got[0].starts_with("6:12: missing password in http.auth.basic"),
        "{got:#?}"
    );
    assert!(
        got[1].starts_with("7:5: unknown key 'token_file' in http.auth"),
        "{got:#?}"
    );
}

#[test]
fn example_http_block_loads_uncommented() {
    let dir = temp_dir();
    std::fs::write(dir.join("http-password"), "pw\n").unwrap();
    let shipped = std::fs::read_to_string(example_path("example.yaml")).unwrap();
    let commented = "  # tls:\n  #   cert_file: /etc/kafka-watchdog/http.crt\n  #   key_file: /etc/kafka-watchdog/http.key\n";
    let basic = "  # auth:\n  #   basic:\n  #     username: prometheus\n  #     password_file: /run/credentials/kafka-watchdog.service/http-password\n";
    assert!(shipped.contains(commented) && shipped.contains(basic));
    let http = shipped
        .replace(
            commented,
            &format!("  tls:\n    cert_file: {TESTDATA}/server.pem\n    key_file: {TESTDATA}/server.key\n"),
        )
        .replace(
            basic,
            &format!(
                "  auth:\n    basic:\n      username: prometheus\n      password_file: {}/http-password\n",
                dir.display()
            ),
        );
    // The rest of the example needs its own files; only the http block is under test.
    let start = http.find("http:\n").unwrap();
    let end = http[start..].find("\nlog:").unwrap() + start;
    let c = ok(&format!("{MINIMAL}{}\n", &http[start..end]));
    assert!(c.http_tls.is_some());
    assert!(matches!(c.http_auth, Some(HttpAuth::Basic { .. })));
}

// ---------------------------------------------------------------------------------------
// Host mode and remediation (`clusters[].host`).

const HOST_FULL: &str = "\
host:
  log_dir_min_free_ratio: 0.1
  remediation_cooldown_secs: 600
  remediation_max_per_day: 2
  brokers:
    - id: 1
      process:
        systemd_unit: kafka.service
      log_dirs: [/var/lib/kafka/a, data/b]
      ports: [9092, \"127.0.0.11:9091\", \"[::1]:9093\"]
      remediation:
        enabled: true
        dry_run: true
        command: [systemctl, restart, kafka.service]
        before_command: [jcmd, \"{pid}\", Thread.print]
        zombie_for_secs: 60
        timeout_secs: 90
        before_timeout_secs: 20
    - id: 2
      process:
        cmdline_regex: 'kafka\\.Kafka .*/n2/'
    - id: 3
      process:
        pid_file: /run/kafka-3.pid
";

#[test]
fn host_mode_every_key() {
    let c = ok(&cluster_with(HOST_FULL));
    let h = c.clusters[0].host.as_ref().expect("host block");
    assert_eq!(h.log_dir_min_free_ratio, 0.1);
    assert_eq!(h.remediation_cooldown, Duration::from_secs(600));
    assert_eq!(h.remediation_max_per_day, 2);
    assert_eq!(h.brokers.len(), 3);
    let b1 = h.broker(1).unwrap();
    assert_eq!(
        b1.process,
        ProcessLocator::SystemdUnit("kafka.service".into())
    );
    assert_eq!(
        b1.log_dirs,
        vec![PathBuf::from("/var/lib/kafka/a"), PathBuf::from("data/b")]
    );
    let ports: Vec<String> = b1.ports.iter().map(|p| p.to_string()).collect();
    assert_eq!(ports, ["9092", "127.0.0.11:9091", "[::1]:9093"]);
    let r = b1.remediation.as_ref().unwrap();
    assert!(r.enabled && r.dry_run);
    assert_eq!(r.command, ["systemctl", "restart", "kafka.service"]);
    assert_eq!(
        r.before_command.as_deref(),
        Some(&["jcmd".to_string(), "{pid}".into(), "Thread.print".into()][..])
    );
    assert_eq!(r.zombie_for, Duration::from_secs(60));
    assert_eq!(r.timeout, Duration::from_secs(90));
    assert_eq!(r.before_timeout, Duration::from_secs(20));
    match &h.broker(2).unwrap().process {
        ProcessLocator::Cmdline { regex, source } => {
            assert_eq!(source, "kafka\\.Kafka .*/n2/");
            assert!(regex.is_match("java -cp x kafka.Kafka /tmp/kafka-lab/n2/server.properties"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        h.broker(3).unwrap().process,
        ProcessLocator::PidFile("/run/kafka-3.pid".into())
    );
    assert!(h.broker(3).unwrap().remediation.is_none());
}

#[test]
fn host_mode_defaults() {
    assert!(
        ok(MINIMAL).clusters[0].host.is_none(),
        "off unless configured"
    );
    let c = ok(&cluster_with(
        "host:\n  brokers:\n    - id: 0\n      process: {pid_file: k.pid}\n      remediation:\n        command: [/bin/true]\n",
    ));
    let h = c.clusters[0].host.as_ref().unwrap();
    assert_eq!(h.log_dir_min_free_ratio, 0.05);
    assert_eq!(h.remediation_cooldown, Duration::from_secs(1800));
    assert_eq!(h.remediation_max_per_day, 3);
    let b = &h.brokers[0];
    assert!(b.log_dirs.is_empty() && b.ports.is_empty());
    let r = b.remediation.as_ref().unwrap();
    assert!(!r.enabled, "a remediation block does nothing until enabled");
    assert!(!r.dry_run);
    assert_eq!(r.before_command, None);
    assert_eq!(r.zombie_for, Duration::from_secs(120));
    assert_eq!(r.timeout, Duration::from_secs(300));
    assert_eq!(r.before_timeout, Duration::from_secs(60));
}

#[test]
fn host_mode_relative_paths_follow_the_file() {
    let dir = temp_dir();
    let file = dir.join("w.yaml");
    std::fs::write(
        &file,
        cluster_with("host:\n  brokers:\n    - id: 1\n      process: {pid_file: run/k.pid}\n      log_dirs: data\n"),
    )
    .unwrap();
    let c = load(&file).unwrap();
    let b = &c.clusters[0].host.as_ref().unwrap().brokers[0];
    assert_eq!(b.process, ProcessLocator::PidFile(dir.join("run/k.pid")));
    assert_eq!(b.log_dirs, vec![dir.join("data")]);
}

#[test]
fn host_mode_problems_with_positions() {
    let text = cluster_with(
        "\
host:
  log_dir_min_free_ratio: 0
  remediation_max_per_day: 0
  brokers:
    - id: 1
      process:
        systemd_unit: kafka.service
        pid_file: /run/k.pid
      ports: [0, 70000, \"localhost:9092\", x]
    - id: 1
      process: {cmdline_regex: '(unclosed'}
      remediation:
        command: \"systemctl restart kafka\"
        before_command: [jcmd, \"{PID}\", Thread.print]
        zombie_for_secs: 0
        restart: true
    - process: {}
      log_dirs: [\"\"]
      remediation:
        command: []
    - id: 4
      process: {systemd_unit: \"a/b\"}
      remediation:
        enabled: yes
        command: [\"\", x]
",
    );
    let got: Vec<String> = problems(&text).iter().map(short).collect();
    assert_eq!(
        got,
        [
            "5:31: log_dir_min_free_ratio 0 is out of range (expected a number above 0 and at most 1)",
            "6:32: remediation_max_per_day 0 is out of range (expected an integer from 1 to 1000)",
            "11:13: systemd_unit and pid_file are both set in clusters[0].host.brokers[0].process (expected exactly one of systemd_unit, pid_file, cmdline_regex)",
            "12:19: '0' is not a port (expected a port (9092) or address:port (127.0.0.1:9092, [::1]:9092))",
            "12:22: '70000' is not a port (expected a port (9092) or address:port (127.0.0.1:9092, [::1]:9092))",
            "12:29: 'localhost:9092' is not a port (expected a port (9092) or address:port (127.0.0.1:9092, [::1]:9092))",
            "12:47: 'x' is not a port (expected a port (9092) or address:port (127.0.0.1:9092, [::1]:9092))",
            "13:15: broker 1 is listed twice in host.brokers (first at line 8) (expected each broker once)",
            "14:36: invalid regex '(unclosed': unclosed group (expected a regular expression, searched in the process's command line)",
            "16:22: command must be a list of arguments, not the text 'systemctl restart kafka' (expected a list of arguments, program first, e.g. [systemctl, restart, kafka.service])",
            "17:36: unknown placeholder '{PID}' in before_command (expected one of {pid}, {broker}, {cluster})",
            "18:30: zombie_for_secs 0 is out of range (expected an integer from 1 to 86400)",
            "19:13: unknown key 'restart' in clusters[0].host.brokers[1].remediation (expected one of: enabled, dry_run, command, before_command, zombie_for_secs, timeout_secs, before_timeout_secs)",
            "20:11: missing required key 'id' in clusters[0].host.brokers[2] (expected the broker's node.id / broker.id)",
            "20:11: missing a way to find the process in clusters[0].host.brokers[2].process (expected exactly one of systemd_unit, pid_file, cmdline_regex)",
            "21:22: empty log directory path (expected a directory path)",
            "23:13: command is empty (expected a list of arguments, program first, e.g. [systemctl, restart, kafka.service])",
            "25:35: 'a/b' is not a systemd unit name (expected a unit name such as kafka.service)",
            "27:22: wrong type for enabled: the text 'yes' (expected true or false)",
            "28:23: command has an empty program name (expected a list of arguments, program first, e.g. [systemctl, restart, kafka.service])",
        ]
    );
}

#[test]
fn host_mode_needs_brokers_and_stays_out_of_defaults() {
    assert_eq!(
        one(&cluster_with("host:\n  log_dir_min_free_ratio: 0.2\n")),
        "5:7: missing required key 'brokers' in clusters[0].host (expected a list of the brokers on this host, each with id and process)"
    );
    assert_eq!(
        one(&cluster_with("host:\n  brokers: []\n")),
        "5:7: clusters[0].host.brokers is empty (expected at least one broker, or no host block)"
    );
    let text = format!("defaults:\n  host:\n    brokers: []\n{MINIMAL}");
    assert!(
        one(&text).starts_with("2:3: 'host' cannot be set in defaults, only in each cluster"),
        "{}",
        one(&text)
    );
}

#[test]
fn example_host_block_loads_uncommented() {
    let shipped = std::fs::read_to_string(example_path("example.yaml")).unwrap();
    let start = shipped
        .find("    # host:\n")
        .expect("the host block is shown");
    let end = start
        + shipped[start..]
            .find("\n\n")
            .expect("a blank line after the block");
    let block: String = shipped[start..end]
        .lines()
        .filter_map(|l| {
            let l = l.strip_prefix("    ")?;
            // Lines of the block start "# " at the block's indentation; explanations
            // nested as "# #" or "#   #" stay comments.
            let l = l.strip_prefix("# ")?;
            (!l.trim_start().starts_with('#')).then(|| format!("    {l}\n"))
        })
        .filter(|l| {
            l.trim_start()
                .starts_with(|c: char| c.is_ascii_alphabetic() || c == '-')
        })
        .collect();
    let c = ok(&format!("{MINIMAL}{block}"));
    let h = c.clusters[0].host.as_ref().expect("host");
    assert_eq!(h.log_dir_min_free_ratio, 0.05);
    assert_eq!(h.remediation_cooldown, Duration::from_secs(1800));
    let b = &h.brokers[0];
    assert_eq!(
        b.process,
        ProcessLocator::SystemdUnit("kafka.service".into())
    );
    assert_eq!(b.ports.len(), 2);
    let r = b.remediation.as_ref().unwrap();
    assert!(!r.enabled && r.dry_run);
    assert_eq!(r.before_command.as_ref().unwrap()[1], "{pid}");
}

#[test]
fn example_slack_bot_block_loads_uncommented() {
    let dir = temp_dir();
    std::fs::write(dir.join("slack-bot-token"), "xoxb-example\n").unwrap();
    let shipped = std::fs::read_to_string(example_path("example.yaml")).unwrap();
    let start = shipped
        .find("  # - name: slack-bot\n")
        .expect("the example shows a Slack bot");
    let block: String = shipped[start..]
        .lines()
        .take_while(|l| l.starts_with("  #"))
        .filter_map(|l| {
            let l = l.strip_prefix("  # ")?;
            (!l.trim_start().starts_with('#')).then(|| format!("  {l}\n"))
        })
        .collect();
    let block = block.replace(
        "/run/credentials/kafka-watchdog.service/",
        &format!("{}/", dir.display()),
    );
    let c = ok(&format!("{MINIMAL}webhooks:\n{block}"));
    let w = &c.webhooks[0];
    assert_eq!(w.format, WebhookFormat::Slack);
    assert_eq!(w.url.expose(), "https://slack.com/api/");
    let bot = w.slack_bot.as_ref().expect("bot mode");
    assert_eq!(bot.token.expose(), "xoxb-example");
    assert_eq!(bot.channel, "#kafka-ops");
    assert_eq!(w.group_interval, Some(Duration::from_secs(30)));
}

#[test]
fn example_silences_block_loads_uncommented() {
    let shipped = std::fs::read_to_string(example_path("example.yaml")).unwrap();
    let start = shipped
        .find("# silences:\n")
        .expect("the example shows silences");
    let block: String = shipped[start..]
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| format!("{}\n", l.strip_prefix("# ").unwrap_or("")))
        .collect();
    let text = format!(
        "clusters:\n  - name: payments-eu\n    bootstrap_servers: [\"127.0.0.11:9092\"]\n{block}"
    );
    let c = ok(&text);
    assert_eq!(c.silences.len(), 1);
    let s = &c.silences[0];
    assert_eq!(s.broker, Some(3));
    assert_eq!(s.cluster.as_deref(), Some("payments-eu"));
    assert_eq!(s.origin, crate::model::silence::Origin::Config);
    assert_eq!(s.comment, "disk replacement on broker 3, CHG-4711");
}

#[test]
fn silences_in_the_file_are_checked_where_they_are_written() {
    let got: Vec<String> = problems(&format!(
        "{MINIMAL}silences:\n  - cluster: elsewhere\n    ends_at: '2030-01-01T00:00:00Z'\n    comment: x\n  - ends_at: tomorrow\n    comment: y\n  - kind: zombie\n    ends_at: '2030-01-01T00:00:00Z'\n    comment: z\n  - duration: 2h\n    comment: w\n"
    ))
    .iter()
    .map(short)
    .collect();
    assert_eq!(got.len(), 4, "{got:#?}");
    assert!(
        got[0].starts_with("5:14: silences[0]: cluster 'elsewhere' is not watched"),
        "{got:#?}"
    );
    assert!(
        got[1].starts_with("8:14: silences[1]: ends_at: 'tomorrow' is not an RFC 3339 time"),
        "{got:#?}"
    );
    assert!(
        got[2].starts_with("10:11: silences[2]: kind 'zombie' is unknown"),
        "{got:#?}"
    );
    assert!(
        got.iter().any(|p| p.contains("use ends_at, not duration")),
        "{got:#?}"
    );
    // A window that is over is merely over, not an error: the file may be older than it.
    let c = ok(&format!(
        "{MINIMAL}silences:\n  - ends_at: '2001-01-01T00:00:00Z'\n    comment: old window\n"
    ));
    assert!(!c.silences[0].is_active(std::time::SystemTime::now()));
}

// ---------------------------------------------------------------------------------------
// OAUTHBEARER and AWS_MSK_IAM.

const SASL_OF: &str = "\
clusters:
  - name: lab
    bootstrap_servers: [a:1]
    security:
      protocol: SASL_SSL
      sasl:
";

#[test]
fn oauthbearer_takes_a_token_endpoint_and_client_credentials() {
    let text = format!(
        "{SASL_OF}        mechanism: OAUTHBEARER\n        token_endpoint_url: https://idp.example/realms/k/protocol/openid-connect/token\n        client_id: watchdog\n        client_secret_env: KW_SECRET\n        scope: kafka\n"
    );
    let env = env_of(&[("KW_SECRET", "s3cret-oidc")]);
    let c = parse_with_env(&text, "t.yaml", &env).unwrap();
    let sasl = c.clusters[0].security.sasl.as_ref().unwrap();
    assert_eq!(sasl.mechanism, SaslMechanism::OAuthBearer);
    let o = sasl.oauthbearer.as_ref().unwrap();
    assert_eq!(
        o.token_endpoint_url,
        "https://idp.example/realms/k/protocol/openid-connect/token"
    );
    assert_eq!(o.client_id, "watchdog");
    assert_eq!(o.client_secret.expose(), "s3cret-oidc");
    assert_eq!(o.scope.as_deref(), Some("kafka"));
    assert!(sasl.aws_msk_iam.is_none());
    assert!(!format!("{c:?}").contains("s3cret-oidc"));
}

#[test]
fn oauthbearer_problems_are_named() {
    let base = format!("{SASL_OF}        mechanism: OAUTHBEARER\n");
    let got: Vec<String> = problems_env(&base, &env_of(&[]))
        .iter()
        .map(short)
        .collect();
    assert_eq!(got.len(), 3, "{got:#?}");
    assert!(
        got.iter().any(|p| p.contains("missing client id")),
        "{got:#?}"
    );
    assert!(
        got.iter().any(|p| p.contains("missing client secret")),
        "{got:#?}"
    );
    assert!(
        got.iter()
            .any(|p| p.contains("missing required key 'token_endpoint_url'")),
        "{got:#?}"
    );
    let inline = one(&format!(
        "{base}        token_endpoint_url: https://idp/t\n        client_id: c\n        client_secret: hunter2\n"
    ));
    assert!(
        inline.contains("inline client_secret is not accepted"),
        "{inline}"
    );
    let user = one(&format!(
        "{base}        token_endpoint_url: https://idp/t\n        client_id: c\n        client_secret_file: Cargo.toml\n        username: u\n"
    ));
    assert!(
        user.contains("username is set in clusters[0].security.sasl but mechanism OAUTHBEARER"),
        "{user}"
    );
    let url = problems_env(
        &format!("{base}        token_endpoint_url: ftp://idp/t\n        client_id: c\n        client_secret_env: S\n"),
        &env_of(&[("S", "x")]),
    );
    assert_eq!(url.len(), 1);
    assert!(
        short(&url[0]).contains("scheme 'ftp'"),
        "{}",
        short(&url[0])
    );
}

#[test]
fn aws_msk_iam_takes_a_region_and_no_password() {
    let text = format!("{SASL_OF}        mechanism: AWS_MSK_IAM\n        region: eu-west-1\n        profile: msk\n");
    let c = ok(&text);
    let a = c.clusters[0]
        .security
        .sasl
        .as_ref()
        .unwrap()
        .aws_msk_iam
        .clone()
        .unwrap();
    assert_eq!(a.region, "eu-west-1");
    assert_eq!(a.profile.as_deref(), Some("msk"));

    let no_region = format!("{SASL_OF}        mechanism: AWS_MSK_IAM\n");
    let c = parse_with_env(
        &no_region,
        "t.yaml",
        &env_of(&[("AWS_REGION", "us-east-2")]),
    )
    .unwrap();
    let a = c.clusters[0]
        .security
        .sasl
        .clone()
        .unwrap()
        .aws_msk_iam
        .unwrap();
    assert_eq!(a.region, "us-east-2");
    let got: Vec<String> = problems_env(&no_region, &env_of(&[]))
        .iter()
        .map(short)
        .collect();
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(got[0].contains("missing required key 'region'"), "{got:#?}");

    let foreign = one(&format!(
        "{SASL_OF}        mechanism: AWS_MSK_IAM\n        region: eu-west-1\n        scope: kafka\n"
    ));
    assert!(
        foreign.contains("scope is set but mechanism is AWS_MSK_IAM"),
        "{foreign}"
    );
    let scram_with_region = one(&format!(
        "{SASL_OF}        mechanism: PLAIN\n        username: u\n        password_file: Cargo.toml\n        region: eu-west-1\n"
    ));
    assert!(
        scram_with_region.contains("region is set but mechanism is PLAIN"),
        "{scram_with_region}"
    );
}

#[test]
fn oauthbearer_properties_belong_to_the_config_keys() {
    let text = "clusters:\n  - name: a\n    bootstrap_servers: [a:1]\n    librdkafka:\n      sasl.oauthbearer.client.secret: x\n";
    let p = one(text);
    assert!(p.contains("client_secret_env"), "{p}");
}

#[test]
fn example_lab_oauth_loads() {
    let dir = temp_dir();
    std::fs::write(dir.join("client.secret"), "lab-secret\n").unwrap();
    let text = std::fs::read_to_string(example_path("lab-oauth.yaml"))
        .unwrap()
        .replace("/tmp/kafka-lab/oauth/", &format!("{}/", dir.display()));
    let path = dir.join("lab-oauth.yaml");
    std::fs::write(&path, text).unwrap();
    let c = load(&path).unwrap_or_else(|e| panic!("{e}"));
    let lab = &c.clusters[0];
    assert_eq!(lab.bootstrap_servers[0], "127.0.0.11:9292");
    assert_eq!(lab.security.protocol, SecurityProtocol::SaslPlaintext);
    let sasl = lab.security.sasl.as_ref().unwrap();
    assert_eq!(sasl.mechanism, SaslMechanism::OAuthBearer);
    let o = sasl.oauthbearer.as_ref().unwrap();
    assert_eq!(o.token_endpoint_url, "http://127.0.0.1:9650/token");
    assert_eq!(o.client_id, "watchdog");
    assert_eq!(o.client_secret.expose(), "lab-secret");
    let shipped = std::fs::read_to_string(example_path("lab-oauth.yaml")).unwrap();
    assert!(shipped.contains("client_secret_file: /tmp/kafka-lab/oauth/client.secret"));
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
    assert_eq!(a.liveness_interval, Duration::ZERO, "0 turns it off");
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

/// Issue 27 item 13: a webhook header often carries a credential (an API key, a bearer
/// token); like every other secret it may come from the environment or a file, never only
/// from the configuration in clear text.
#[test]
fn webhook_header_values_come_from_the_environment_or_a_file() {
    let dir = temp_dir();
    std::fs::write(dir.join("key"), "from-a-file\n").unwrap();
    let text = format!(
        "{MINIMAL}webhooks:
  - name: a
    url: https://hooks.example/x
    headers:
      X-Team: kafka
      X-Api-Key: {{value_env: API_KEY}}
      Authorization: {{value_file: {}}}
",
        dir.join("key").display()
    );
    let c = parse_with_env(&text, "t.yaml", &env_of(&[("API_KEY", "from-the-env")])).unwrap();
    let h = &c.webhooks[0].headers;
    assert_eq!(h["X-Team"], "kafka");
    assert_eq!(h["X-Api-Key"], "from-the-env");
    assert_eq!(h["Authorization"], "from-a-file");
    // A variable that is not set, and a key the mapping does not know, are problems with
    // a line number.
    let text = format!(
        "{MINIMAL}webhooks:
  - name: a
    url: https://hooks.example/x
    headers:
      X-Api-Key: {{value_env: NOPE}}
      X-Other: {{value_envv: A}}
"
    );
    let got: Vec<String> = problems(&text).iter().map(short).collect();
    assert!(
        got.iter()
            .any(|p| p.contains("environment variable NOPE (value_env) is not set")),
        "{got:?}"
    );
    assert!(got.iter().any(|p| p.contains("value_envv")), "{got:?}");
}

/// Issue 27 item 13: a secret file others can read is a secret no more. The configuration
/// loads (the file may be shared with a group on purpose) with a warning that says where
/// and what to do; `check-config` prints it and the daemon logs it.
#[test]
fn a_secret_file_others_can_read_gives_a_warning() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir();
    let pw = dir.join("pw");
    std::fs::write(&pw, "s3cret\n").unwrap();
    let text = format!(
        "{SASL}        username: u\n        password_file: {}\n",
        pw.display()
    );
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o644)).unwrap();
    let c = ok(&text);
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(
        c.warnings[0].contains("can be read by others than its owner (mode 644)")
            && c.warnings[0].contains(&format!("chmod 600 {}", pw.display())),
        "{:?}",
        c.warnings
    );
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(ok(&text).warnings.is_empty());
}

/// Issue 27 item 14: `ca_file` on a webhook is checked when the file is loaded.
#[test]
fn a_webhook_ca_file_must_hold_certificates() {
    let dir = temp_dir();
    std::fs::write(dir.join("not.pem"), "hello\n").unwrap();
    let ca = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/observe/wire/testdata/ca.pem"
    );
    let hook = |file: &str| {
        format!("{MINIMAL}webhooks:\n  - name: a\n    url: https://hooks.example/x\n    ca_file: {file}\n")
    };
    let c = ok(&hook(ca));
    assert_eq!(
        c.webhooks[0].ca_file.as_deref(),
        Some(std::path::Path::new(ca))
    );
    let p = one(&hook(&dir.join("not.pem").display().to_string()));
    assert!(p.contains("holds no PEM certificate"), "{p}");
    let p = one(&hook("/no/such/ca.pem"));
    assert!(p.contains("cannot read ca_file"), "{p}");
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
