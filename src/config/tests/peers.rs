//! The `peers:` block: the other watchdogs on the same clusters.

use super::*;

fn peers_with(block: &str) -> String {
    minimal_with("peers", block)
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
