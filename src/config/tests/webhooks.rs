//! Webhooks and the Slack bot: what they resolve to and what is refused.

use super::*;

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
    assert_eq!(own.headers["X-Num"].expose(), "7");
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
    assert_eq!(h["X-Team"].expose(), "kafka");
    assert_eq!(h["X-Api-Key"].expose(), "from-the-env");
    assert_eq!(h["Authorization"].expose(), "from-a-file");
    assert_eq!(
        h["Authorization"].file(),
        Some(dir.join("key").as_path()),
        "remembered, to be watched"
    );
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

/// Issue 39 item 3: an Alertmanager cluster of several, each listed in `urls`; `url` alone
/// keeps meaning one Alertmanager.
#[test]
fn an_alertmanager_receiver_takes_the_urls_of_every_member() {
    let text = format!(
        "{MINIMAL}webhooks:
  - name: am
    format: alertmanager
    urls:
      - http://am-0.example:9093/api/v2/alerts
      - http://am-1.example:9093/api/v2/alerts
  - name: one
    format: alertmanager
    url: http://am.example:9093/api/v2/alerts
"
    );
    let c = ok(&text);
    let [am, one] = &c.webhooks[..] else {
        panic!("two webhooks")
    };
    assert_eq!(am.url.expose(), "http://am-0.example:9093/api/v2/alerts");
    assert_eq!(am.target, "http://am-0.example:9093");
    let more: Vec<(&str, &str)> = am
        .more_urls
        .iter()
        .map(|e| (e.url.expose(), e.target.as_str()))
        .collect();
    assert_eq!(
        more,
        [(
            "http://am-1.example:9093/api/v2/alerts",
            "http://am-1.example:9093"
        )]
    );
    assert_eq!(one.target, "http://am.example:9093");
    assert!(one.more_urls.is_empty());
}

#[test]
fn urls_with_url_or_another_format_or_nothing_in_it_is_refused() {
    let text = format!(
        "{MINIMAL}webhooks:
  - name: a
    format: alertmanager
    url: http://am.example:9093/api/v2/alerts
    urls: [http://am-1.example:9093/api/v2/alerts]
  - name: b
    format: slack
    urls: [https://hooks.slack.com/services/T0/B0/x]
  - name: c
    format: alertmanager
    urls: []
  - name: d
    format: alertmanager
    urls: [http://am-0.example:9093/api/v2/alerts, 'ftp://x/', http://am-0.example:9093/api/v2/alerts]
"
    );
    let got: Vec<String> = problems(&text).iter().map(short).collect();
    assert_eq!(
        got,
        [
            "8:5: 'url' and 'urls' are both set in webhooks[0] (expected url for one Alertmanager, or urls listing each Alertmanager of a cluster, the first included)",
            "11:5: urls is set in webhooks[1] but format is not alertmanager (expected url, the one receiver)",
            "14:11: urls lists no URL (expected a list of http:// or https:// URLs, one per Alertmanager)",
            "17:52: urls: URL scheme 'ftp' is not supported (expected an http:// or https:// URL with a host)",
            "17:64: urls: this URL is listed twice (expected each Alertmanager once)",
        ]
    );
}

/// A URL read from `url_file` remembers its file, so delivery watches it (issue 39 item 2).
#[test]
fn a_url_from_a_file_remembers_it() {
    let dir = std::env::temp_dir().join(format!("kw-url-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("url");
    std::fs::write(&file, "https://hooks.example/T0/tok\n").unwrap();
    let text = format!(
        "{MINIMAL}webhooks:\n  - name: a\n    url_file: {}\n",
        file.display()
    );
    let c = ok(&text);
    assert_eq!(c.webhooks[0].url.expose(), "https://hooks.example/T0/tok");
    assert_eq!(c.webhooks[0].url.file(), Some(file.as_path()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 38 item 10: `tls_verify: false` (and the brokers' `insecure_skip_verify: true`)
/// loaded without a word. Both load, with a warning at the key that names what to do.
#[test]
fn turning_certificate_verification_off_gives_a_warning() {
    let c = ok(&format!(
        "{MINIMAL}webhooks:\n  - name: own\n    url: https://hooks.example/x\n    tls_verify: false\n"
    ));
    assert_eq!(
        c.warnings,
        ["t.yaml:7:5: webhooks[0].tls_verify is false: the receiver's certificate is not checked, so anyone on the path can read, alter or swallow its notifications (expected ca_file with the CA that signed the receiver's certificate, and tls_verify left true)"]
    );
    let c = ok(&cluster_with(
        "security:\n  protocol: SSL\n  tls:\n    insecure_skip_verify: true",
    ));
    assert_eq!(
        c.warnings,
        ["t.yaml:7:9: clusters[0].security.tls.insecure_skip_verify is true: the brokers' certificates are not checked, so anyone on the path can read and answer the watchdog's requests (expected ca_file with the CA that signed the brokers' certificates, and insecure_skip_verify left false)"]
    );
    // Written as the defaults are, or not at all: no warning.
    assert!(ok(&format!(
        "{MINIMAL}webhooks:\n  - name: own\n    url: https://hooks.example/x\n    tls_verify: true\n"
    ))
    .warnings
    .is_empty());
    assert!(ok(&cluster_with(
        "security:\n  protocol: SSL\n  tls:\n    insecure_skip_verify: false"
    ))
    .warnings
    .is_empty());
}
