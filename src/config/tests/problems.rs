//! Problems reported with their place: several at once, and one message per kind of mistake.

use super::*;

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
        "4:1: unknown key 'webhook' in the top level, did you mean 'webhooks'? (expected one of: instance_id, http, log, state_dir, defaults, clusters, webhooks, silences, peers, heartbeat)"
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

/// Webhooks link to `<http.runbooks_url>#<alert>`; without it, to this watchdog's
/// /runbooks as people reach it (beside /status). A `#` of its own would break every link.
#[test]
fn http_runbooks_url_is_where_webhooks_link_for_runbooks() {
    let c = ok(&format!(
        "{MINIMAL}http: {{listen: '127.0.0.1:9650', external_url: 'https://wd.example.com/kafka'}}\n"
    ));
    assert_eq!(c.runbooks_url(), "https://wd.example.com/kafka/runbooks");
    let c = ok(&format!("{MINIMAL}http: {{listen: '127.0.0.1:9650'}}\n"));
    assert_eq!(c.runbooks_url(), "http://127.0.0.1:9650/runbooks");
    let c = ok(&format!(
        "{MINIMAL}http: {{runbooks_url: 'https://wiki.example.com/kw/runbooks'}}\n"
    ));
    assert_eq!(c.runbooks_url(), "https://wiki.example.com/kw/runbooks");
    let p = one(&format!(
        "{MINIMAL}http: {{runbooks_url: 'https://wiki.example.com/kw#runbooks'}}\n"
    ));
    assert!(p.contains("has a #: links add #<alert name> to it"), "{p}");
}
