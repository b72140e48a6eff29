//! The `peers:` block: the other watchdogs on the same clusters.

use super::*;

/// A peer key file of 48 characters, owner-only, shared by the tests of this file.
fn key_file() -> PathBuf {
    let path = std::env::temp_dir().join(format!("kw-peer-key-{}", std::process::id()));
    if !path.exists() {
        let tmp = path
            .with_extension(format!("{:?}", std::thread::current().id()).replace(['(', ')'], ""));
        std::fs::write(&tmp, "k".repeat(48)).unwrap();
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let _ = std::fs::rename(&tmp, &path);
    }
    path
}

/// The `peers:` block `block`, with a key unless it names one.
fn peers_with(block: &str) -> String {
    if block.contains("key") {
        return minimal_with("peers", block);
    }
    minimal_with(
        "peers",
        &format!("{block}\nkey_file: {}", key_file().display()),
    )
}

#[test]
fn peers_by_url_and_by_dns_load_with_their_defaults() {
    let c = ok(&peers_with(
        "urls: [http://wd-1.wd-pods:9644/, https://wd-2.example:9644]\ndns: wd-pods.monitoring.svc:9644",
    ));
    let p = c.peers.expect("peers");
    let urls: Vec<String> = p.urls.iter().map(|u| u.to_string()).collect();
    assert_eq!(
        urls,
        ["http://wd-1.wd-pods:9644/", "https://wd-2.example:9644/"]
    );
    let dns = p.dns.expect("dns");
    assert_eq!(
        (dns.host.as_str(), dns.port, dns.scheme.as_str()),
        ("wd-pods.monitoring.svc", 9644, "http")
    );
    assert_eq!(p.poll_interval, Duration::from_millis(1000));
    assert_eq!(p.takeover, Duration::from_secs(10));
    assert_eq!(ok(MINIMAL).peers, None);
}

#[test]
fn peers_problems_name_the_line_and_what_would_be_right() {
    let empty = one(&peers_with("poll_interval_ms: 500"));
    assert!(empty.contains("peers names no other watchdog"), "{empty}");
    assert!(
        empty.contains("peers.urls") && empty.contains("peers.dns"),
        "{empty}"
    );
    let url = one(&peers_with("urls: [wd-1:9644]"));
    assert!(
        url.contains("peers.urls[0]: 'wd-1:9644' is not an absolute http or https URL"),
        "{url}"
    );
    let dns = one(&peers_with("dns: wd-pods"));
    assert!(dns.contains("'wd-pods' is not a host:port"), "{dns}");
    let scheme = one(&peers_with("dns: wd:9644\ndns_scheme: ftp"));
    assert!(scheme.contains("'ftp' is not a scheme"), "{scheme}");
    let short = one(&peers_with(
        "urls: [http://wd-1:9644]\npoll_interval_ms: 2000\ntakeover_secs: 5",
    ));
    assert!(
        short.contains(
            "peers.takeover_secs 5 is shorter than three looks at the peers (2000 ms each)"
        ) && short.contains("at least 6 s"),
        "{short}"
    );
    let unknown = one(&peers_with("urls: [http://wd-1:9644]\ntakeover: 5"));
    assert!(unknown.contains("takeover"), "{unknown}");
}

/// Issue 38 item 5: peers prove who they are with a key of their own; a `peers:` block
/// without one does not load, and says what would be right.
#[test]
fn peers_need_a_key_of_their_own() {
    let none = one(&minimal_with("peers", "urls: [http://wd-1:9644]"));
    assert!(
        none.contains("4:1: peers has no key")
            && none.contains("no longer with its http.auth credential")
            && none.contains("peers.key_file (or key_env) holding at least 32 random characters"),
        "{none}"
    );
    let env = env_of(&[("KW_PEER", "short"), ("KW_TOKEN", &"t".repeat(40))]);
    let short = problems_env(
        &minimal_with("peers", "urls: [http://wd-1:9644]\nkey_env: KW_PEER"),
        &env,
    );
    assert!(
        short[0]
            .to_string()
            .contains("the peer key (key_env) is shorter than 32 characters"),
        "{short:?}"
    );
    let inline = one(&minimal_with("peers", "urls: [http://wd-1:9644]\nkey: abc"));
    assert!(inline.contains("an inline key is not accepted"), "{inline}");
    let same = format!(
        "{}http:\n  auth: {{bearer_token_env: KW_TOKEN}}\n",
        minimal_with("peers", "urls: [http://wd-1:9644]\nkey_env: KW_TOKEN")
    );
    let same = problems_env(&same, &env);
    assert!(
        same[0]
            .to_string()
            .contains("the peer key is the http.auth credential"),
        "{same:?}"
    );
    let p = ok(&peers_with("urls: [http://wd-1:9644]")).peers.unwrap();
    assert_eq!(p.key.expose(), "k".repeat(48));
}
