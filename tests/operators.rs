//! The operator's tools against the real binary, with no lab: a daemon whose one cluster
//! cannot be reached still serves /status and /metrics, which is all these need.
//!
//! `a_real_scrape_passes_promtool_check_metrics` needs promtool (Debian package
//! `prometheus`; scripts/check-dashboards installs it, and CI runs that first).

mod common;

use std::io::{Read, Write};
use std::process::{Command, Output};
use std::time::Duration;

use common::watchdog::Watchdog;

/// The configuration of a daemon watching a cluster nobody serves (port 1 refuses at once),
/// fast enough for tests; `{dir}` in `http_extra` is the daemon's folder, where `dir_files`
/// are written.
fn daemon_yaml(
    http_extra: &str,
    dir_files: &[(&str, &str)],
) -> impl FnOnce(u16, &std::path::Path) -> String {
    let extra = http_extra.to_string();
    let files: Vec<(String, String)> = dir_files
        .iter()
        .map(|(n, c)| (n.to_string(), c.to_string()))
        .collect();
    move |port, dir| {
        for (n, c) in &files {
            std::fs::write(dir.join(n), c).unwrap();
        }
        format!(
            "instance_id: ops-test\nhttp:\n  listen: 127.0.0.1:{port}\n{extra}state_dir: {state}\n\
             clusters:\n  - name: nowhere\n    bootstrap_servers: [127.0.0.1:1]\n    \
             round_interval_secs: 2\n    connect_timeout_ms: 1000\n    request_timeout_ms: 1000\n    \
             canary:\n      produce_timeout_ms: 1000\n",
            state = dir.join("state").display(),
            extra = extra.replace("{dir}", &dir.display().to_string()),
        )
    }
}

/// That daemon, started; the harness waits for it over plain http.
fn daemon(name: &str, http_extra: &str, dir_files: &[(&str, &str)]) -> Watchdog {
    Watchdog::start_yaml(name, daemon_yaml(http_extra, dir_files))
}

fn status(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kafka-watchdog"))
        .arg("status")
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run kafka-watchdog status")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn status_once_shows_a_daemon_with_an_unreachable_cluster() {
    let w = daemon("ops-status", "", &[]);
    let url = format!("http://127.0.0.1:{}", w.port);
    for args in [
        vec!["--once", "--url", url.as_str()],
        vec![
            "--once",
            "-c",
            w.dir.join("watchdog.yaml").to_str().unwrap(),
        ],
    ] {
        let out = status(&args);
        let page = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(3),
            "{args:?}: unreachable like `check`; stdout:\n{page}\nstderr:\n{}",
            text(&out.stderr)
        );
        assert!(
            page.starts_with(&format!(
                "kafka-watchdog ops-test {} at {url}, overall UNREACHABLE\n",
                env!("CARGO_PKG_VERSION")
            )),
            "{page}"
        );
        assert!(
            page.contains("UNREACHABLE cluster nowhere: round ")
                && page.contains("never reached since the watchdog started"),
            "{page}"
        );
        assert!(
            page.contains("  bootstrap 127.0.0.1:1: connection_refused"),
            "{page}"
        );
        assert!(!page.contains('\x1b'), "NO_COLOR and no terminal: {page:?}");
    }
    // For scripts (issue 28 item 7): the /status document, the same exit code.
    let out = status(&["--once", "--url", &url, "--output", "json"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["instance_id"], "ops-test", "{doc:#}");
    assert_eq!(doc["clusters"][0]["name"], "nowhere", "{doc:#}");
    let out = status(&["--url", &url, "--output", "json"]);
    assert_eq!(out.status.code(), Some(64), "json is for --once");
    // `check` and `silence list` too.
    let cfg = w.dir.join("watchdog.yaml");
    let out = Command::new(env!("CARGO_BIN_EXE_kafka-watchdog"))
        .args(["check", "--output", "json", "-c"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["severity"], "unreachable", "{doc:#}");
    assert_eq!(doc["exit_code"], 3, "{doc:#}");
    let out = Command::new(env!("CARGO_BIN_EXE_kafka-watchdog"))
        .args(["silence", "list", "--output", "json", "-c"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["silences"], serde_json::json!([]), "{doc:#}");
}

#[test]
fn status_uses_the_configured_credential() {
    let w = daemon(
        "ops-auth",
        "  auth:\n    bearer_token_file: {dir}/token\n",
        &[("token", "t0ken-for-status\n")],
    );
    let cfg = w.dir.join("watchdog.yaml");
    let out = status(&["--once", "-c", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("cluster nowhere"));
    // Without the configuration there is no credential: the daemon refuses, status says why.
    let url = format!("http://127.0.0.1:{}", w.port);
    let out = status(&["--once", "--url", &url]);
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty());
    assert!(
        text(&out.stderr).contains("wants a credential"),
        "{}",
        text(&out.stderr)
    );
    // The configuration's credential with another address for the same daemon.
    let other = format!("http://localhost:{}/", w.port);
    let out = status(&["--once", "-c", cfg.to_str().unwrap(), "--url", &other]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(&format!("at {other},")));
}

/// `status -c` reads only the file's http block and state directory (issue 28 item 7): the
/// operator may not be able to read a cluster's secrets, and a cluster being edited must
/// not keep them from asking the daemon. A wrong http block is still a wrong file.
#[test]
fn status_with_a_file_needs_only_its_http_section() {
    let w = daemon(
        "ops-http-only",
        "  auth:\n    bearer_token_file: {dir}/token\n",
        &[("token", "t0ken-for-status\n")],
    );
    let running = std::fs::read_to_string(w.dir.join("watchdog.yaml")).unwrap();
    // The same file as the operator reads it: the cluster's password is a file this user
    // cannot read (it does not exist here), and an edit in progress left a key unknown.
    let edited = running.replace(
        "    bootstrap_servers: [127.0.0.1:1]\n",
        "    bootstrap_servers: [127.0.0.1:1]\n    security:\n      protocol: SASL_PLAINTEXT\n      sasl: {mechanism: PLAIN, username: u, password_file: /nonexistent/kafka-password}\n    half_written_key: 1\n",
    );
    assert_ne!(running, edited);
    let cfg = w.dir.join("operator.yaml");
    std::fs::write(&cfg, &edited).unwrap();
    let out = status(&["--once", "-c", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("cluster nowhere"),
        "{}",
        text(&out.stdout)
    );
    // A wrong http block is still refused, with its line.
    std::fs::write(
        &cfg,
        edited.replace(&format!("listen: 127.0.0.1:{}", w.port), "listen: nowhere"),
    )
    .unwrap();
    let out = status(&["--once", "-c", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(78), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("'nowhere' is not a socket address"),
        "{}",
        text(&out.stderr)
    );
}

/// `http.tls`: status asks over https and trusts what the daemon's cert_file holds (here
/// the test server certificate followed by its CA, as a file with the chain may).
#[test]
fn status_over_https_trusts_the_configured_certificate() {
    let testdata =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/observe/wire/testdata");
    let read = |f: &str| std::fs::read_to_string(testdata.join(f)).unwrap();
    let chain = format!("{}{}", read("server.pem"), read("ca.pem"));
    let port = common::watchdog::free_port();
    let dir = common::watchdog::temp_dir("ops-tls");
    let cfg = dir.join("watchdog.yaml");
    let yaml = daemon_yaml(
        "  tls:\n    cert_file: {dir}/chain.pem\n    key_file: {dir}/server.key\n",
        &[("chain.pem", &chain), ("server.key", &read("server.key"))],
    )(port, &dir);
    std::fs::write(&cfg, yaml).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kafka-watchdog"))
        .args(["run", "-c"])
        .arg(&cfg)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("watchdog.log")).unwrap())
        .spawn()
        .unwrap();
    // Until the first round, /status lists no cluster.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (out, page) = loop {
        let out = status(&["--once", "-c", cfg.to_str().unwrap()]);
        let page = text(&out.stdout);
        if page.contains("cluster nowhere") || std::time::Instant::now() > deadline {
            break (out, page);
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    let plain = status(&["--once", "--url", &format!("http://127.0.0.1:{port}")]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(out.status.code(), Some(3), "{page}{}", text(&out.stderr));
    assert!(
        page.starts_with(&format!(
            "kafka-watchdog ops-test {} at https://127.0.0.1:{port},",
            env!("CARGO_PKG_VERSION"),
        )),
        "{page}"
    );
    assert!(page.contains("cluster nowhere"), "{page}");
    // Plain http to the TLS port gets no /status document.
    assert_eq!(plain.status.code(), Some(3));
    assert!(plain.stdout.is_empty());
}

#[test]
fn status_without_a_daemon_or_with_a_bad_url() {
    let out = status(&["--once", "--url", "http://127.0.0.1:1"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stderr).contains("no answer from http://127.0.0.1:1/status"));
    let out = status(&["--once", "--url", "127.0.0.1:9644"]);
    assert_eq!(out.status.code(), Some(78), "{}", text(&out.stderr));
    let out = status(&["--once"]);
    // A usage error is 64 (EX_USAGE): 2 would read as critical to Nagios (issue 28 item 7).
    assert_eq!(out.status.code(), Some(64), "-c or --url is required");
    assert!(
        text(&out.stderr).contains("--config"),
        "{}",
        text(&out.stderr)
    );
    let out = status(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("--once"));
    let out = status(&["--once", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(64));
}

/// GET /metrics with the given Accept header (or none): content type and body.
fn scrape(port: u16, accept: Option<&str>) -> (String, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: x\r\n{accept}\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_string)
        })
        .unwrap();
    (content_type, body.to_string())
}

#[test]
fn a_real_scrape_passes_promtool_check_metrics() {
    let w = daemon("ops-promtool", "", &[]);
    let (om_type, om) = scrape(
        w.port,
        Some("application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3"),
    );
    assert!(
        om_type.starts_with("application/openmetrics-text"),
        "{om_type}"
    );
    assert!(om.ends_with("# EOF\n"));
    for accept in [Some("text/plain;version=0.0.4"), None] {
        let (content_type, body) = scrape(w.port, accept);
        assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
        assert!(body.contains("\nprocess_start_time_seconds "), "{body}");
        // Every process_* name the dashboard reads is served.
        let dashboard = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards/kafka-watchdog.json"),
        )
        .unwrap();
        let mut used = 0;
        for (i, _) in dashboard.match_indices("process_") {
            if dashboard[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let name: String = dashboard[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name == "process_" {
                continue; // prose: "process_* metrics"
            }
            used += 1;
            assert!(
                body.contains(&format!("\n{name} ")),
                "{name} used by the dashboard, not served"
            );
        }
        assert!(used >= 4, "the dashboard reads the process metrics");
        let mut child = match Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => panic!(
                "promtool not found ({e}): run scripts/check-dashboards once, it installs the Debian package prometheus"
            ),
        };
        child
            .stdin
            .take()
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
            "promtool check metrics ({accept:?}):\n{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
}

/// The lab tests read /metrics through the harness (no Accept header, so the text format
/// 0.0.4 now): counters, gauges and histograms still parse and keep their names.
#[test]
fn the_harness_still_reads_the_text_format() {
    let w = daemon("ops-parse", "", &[]);
    let scrape = w.metrics();
    let rounds = w.metric("kafka_watchdog_rounds_total", &[("cluster", "nowhere")]);
    assert!(rounds.is_some_and(|v| v >= 1.0), "{rounds:?}");
    assert_eq!(
        w.metric(
            "kafka_watchdog_cluster_reachable",
            &[("cluster", "nowhere")]
        ),
        Some(0.0)
    );
    assert!(scrape.samples.iter().any(|s| s.metric == "process_open_fds"
        && matches!(s.value, prometheus_parse::Value::Gauge(v) if v >= 3.0)));
    assert!(scrape
        .samples
        .iter()
        .any(|s| s.metric == "kafka_watchdog_rounds_total"
            && matches!(s.value, prometheus_parse::Value::Counter(_))));
}

/// Issue 27 item 13: every secret the configuration can hold (a SASL password, the HTTP
/// bearer token, a webhook's HMAC key and a header's value) given to a daemon that logs at
/// debug, pages, and is asked for /status: none of them appears in its log, in /status, in
/// a webhook body or in its command line.
#[test]
fn no_configured_secret_is_in_the_log_status_webhooks_or_arguments() {
    let sink = common::watchdog::Receiver::start();
    let secrets = [
        ("sasl-password", "Sasl-Pw-7f3a9e41"),
        ("token", "Bearer-Tok-2c4f6b93"),
        ("hmac", "Hmac-Key-9b1c2d57"),
        ("header", "Header-Key-5e8d1a06"),
    ];
    let url = sink.url();
    let w = Watchdog::start_yaml("ops-secrets", move |port, dir| {
        for (name, value) in secrets {
            std::fs::write(dir.join(name), value).unwrap();
        }
        let d = dir.display();
        format!(
            "instance_id: ops-test\nlog:\n  level: debug\nhttp:\n  listen: 127.0.0.1:{port}\n  auth:\n    bearer_token_file: {d}/token\n\
             state_dir: {d}/state\n\
             clusters:\n  - name: nowhere\n    bootstrap_servers: [127.0.0.1:1]\n    \
             round_interval_secs: 2\n    connect_timeout_ms: 1000\n    request_timeout_ms: 1000\n    \
             canary:\n      enabled: false\n    verdict:\n      open_after_secs: 0\n    \
             security:\n      protocol: SASL_PLAINTEXT\n      sasl:\n        mechanism: SCRAM-SHA-512\n        username: watchdog\n        password_file: {d}/sasl-password\n\
             webhooks:\n  - name: hooks\n    url: {url}\n    format: generic\n    min_severity: info\n    \
             hmac_secret_file: {d}/hmac\n    headers:\n      X-Api-Key: {{value_file: {d}/header}}\n"
        )
    });
    sink.wait(
        "the unreachable cluster paged",
        Duration::from_secs(60),
        |v| v["kind"] == "cluster_unreachable",
    );
    let cfg = w.dir.join("watchdog.yaml");
    let status = status(&["--once", "--output", "json", "-c", cfg.to_str().unwrap()]);
    assert_eq!(status.status.code(), Some(3), "{}", text(&status.stderr));
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", w.pid())).unwrap();
    let places = [
        ("the log", w.log()),
        ("/status", text(&status.stdout)),
        (
            "the webhooks",
            serde_json::Value::Array(sink.received()).to_string(),
        ),
        ("the command line", text(&cmdline)),
    ];
    assert!(places[1].1.contains("nowhere"), "{}", places[1].1);
    for (name, secret) in secrets {
        for (place, content) in &places {
            assert!(
                !content.contains(secret),
                "the {name} secret is in {place}:\n{content}"
            );
        }
    }
}

/// Issue 39: `KAFKA_WATCHDOG_CRASH_AT` (abort at a named point, for the crash tests of
/// `tests/own_faults.rs`) was live in every build, so anyone who could set the daemon's
/// environment could make a production watchdog abort after its next saved incident. It is
/// compiled only with the `crash-points` feature (which `lab-tests` turns on); a build
/// without features, as every release is, has no trace of it. scripts/check-release looks
/// for the same string in the release's binary.
#[cfg(not(feature = "crash-points"))]
#[test]
fn a_build_without_features_has_no_crash_hook() {
    let bin = std::fs::read(env!("CARGO_BIN_EXE_kafka-watchdog")).unwrap();
    let needle = b"KAFKA_WATCHDOG_CRASH_AT";
    assert!(
        !bin.windows(needle.len()).any(|w| w == needle),
        "the binary holds {}",
        String::from_utf8_lossy(needle)
    );
}
