//! The `heartbeat:` block: the dead man's switch.

use super::*;

fn heartbeat_with(block: &str) -> String {
    minimal_with("heartbeat", block)
}

#[test]
fn a_heartbeat_loads_with_its_defaults_and_its_url_a_secret() {
    let c = ok(&heartbeat_with("url: https://hc-ping.example/5e1f0a7c"));
    let h = c.heartbeat.expect("heartbeat");
    assert_eq!(h.url.expose(), "https://hc-ping.example/5e1f0a7c");
    assert_eq!(h.target, "https://hc-ping.example");
    assert_eq!(h.format, HeartbeatFormat::Healthchecks);
    assert_eq!(h.interval, Duration::from_secs(60));
    assert_eq!(h.timeout, Duration::from_millis(5000));
    assert!(
        !format!("{h:?}").contains("5e1f0a7c"),
        "the URL never prints"
    );
    assert_eq!(ok(MINIMAL).heartbeat, None);

    let env = env_of(&[("KW_AM", "http://alertmanager:9093/api/v2/alerts")]);
    let c = parse_with_env(
        &heartbeat_with(
            "url_env: KW_AM\nformat: alertmanager\ninterval_secs: 30\ntimeout_ms: 2000",
        ),
        "t.yaml",
        &env,
    )
    .unwrap();
    let h = c.heartbeat.unwrap();
    assert_eq!(h.format, HeartbeatFormat::Alertmanager);
    assert_eq!(h.interval, Duration::from_secs(30));
    assert_eq!(h.timeout, Duration::from_millis(2000));
}

/// Its file is kept, so the URL follows it (`config::live`, issue 39 item 2).
#[test]
fn a_heartbeat_url_from_a_file_remembers_it() {
    let dir = std::env::temp_dir().join(format!("kw-heartbeat-url-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("url");
    std::fs::write(&file, "https://hc-ping.example/5e1f0a7c\n").unwrap();
    let c = ok(&heartbeat_with(&format!("url_file: {}", file.display())));
    let h = c.heartbeat.expect("heartbeat");
    assert_eq!(h.url.expose(), "https://hc-ping.example/5e1f0a7c");
    assert_eq!(h.url.file(), Some(file.as_path()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn heartbeat_problems_name_the_line_and_what_would_be_right() {
    let missing = one(&heartbeat_with("format: pagerduty"));
    assert!(missing.contains("heartbeat URL"), "{missing}");
    let format = one(&heartbeat_with(
        "url: http://x/ping\nformat: deadmanssnitch",
    ));
    assert!(
        format.contains("'deadmanssnitch' is not a valid format")
            && format.contains("healthchecks, pagerduty, alertmanager"),
        "{format}"
    );
    let url = one(&heartbeat_with("url: hc-ping.example/abc"));
    assert!(
        url.contains("heartbeat.url: the URL does not parse"),
        "{url}"
    );
    let slow = one(&heartbeat_with(
        "url: http://x/ping\ninterval_secs: 10\ntimeout_ms: 10000",
    ));
    assert!(
        slow.contains("heartbeat.timeout_ms 10000 is not shorter than interval_secs 10")
            && slow.contains("at most 9999 ms"),
        "{slow}"
    );
    let short = one(&heartbeat_with("url: http://x/ping\ninterval_secs: 5"));
    assert!(short.contains("interval_secs 5 is out of range"), "{short}");
}
