//! The seeds of the targets besides `config_load` (the example configurations) and
//! `wire_decode` (written by `observe::wire`'s guard tests): real answers, bodies and
//! requests, in each target's input layout. `KAFKA_WATCHDOG_FUZZ_SEEDS=fuzz/corpus cargo
//! test --lib fuzz::seeds` writes them to `fuzz/corpus/<target>/`.

use std::path::Path;
use std::time::Duration;

use super::{now, TARGETS};
use crate::alert::peers::auth::{Nonce, PeerKey};
use crate::alert::peers::{Answer, Delivery, SlackMessage};
use crate::model::round::QuorumAnswer;
use crate::model::silence::{Origin, Request};
use crate::observe::wire;

fn wire_seed(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus/wire_decode")
        .join(name);
    let input = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // `[api key][version]` off: the body.
    input[4..].to_vec()
}

fn chunk(out: &mut Vec<u8>, body: &[u8]) {
    out.extend(u16::try_from(body.len()).unwrap().to_be_bytes());
    out.extend(body);
}

/// Four looks 1.5 s apart at a quorum whose leader answers the same high watermark each
/// time (a wedged controller), a follower refuses, one controller is silent, and the
/// broker forwards the answer and says what it applied.
fn describe_quorum(version: i16) -> Vec<u8> {
    let body = wire_seed(&format!("DescribeQuorum-v{version}"));
    assert!(matches!(
        wire::describe_quorum_for_fuzzing(version, &body),
        Ok(Ok(QuorumAnswer::Leader(_)))
    ));
    let mut out = vec![version as u8];
    for _ in 0..4 {
        out.extend(1500u16.to_be_bytes());
        out.push(1);
        chunk(&mut out, &body);
        out.push(0);
        out.push(1);
        chunk(&mut out, b"");
        out.push(1);
        chunk(&mut out, &body);
        out.push(1);
        out.extend(4990u16.to_be_bytes());
    }
    out
}

/// Three looks five minutes apart at a broker with one live and one failed directory.
fn describe_log_dirs(version: i16) -> Vec<u8> {
    let body = wire_seed(&format!("DescribeLogDirs-v{version}"));
    assert!(
        matches!(wire::describe_log_dirs_for_fuzzing(version, &body), Ok(Ok(d)) if d.len() == 2)
    );
    let mut out = vec![version as u8];
    for _ in 0..3 {
        out.extend(300u16.to_be_bytes());
        chunk(&mut out, &body);
    }
    out
}

fn tagged(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend(body);
    out
}

/// A token whose payload is `{"sub":"watchdog","exp":<now + 1 h>}` (unsigned: the
/// watchdog never checks the signature, the broker does).
fn jwt() -> String {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    let exp = super::NOW_UNIX_SECS + 3600;
    format!(
        "{}.{}.c2ln",
        b64(r#"{"alg":"RS256","typ":"JWT"}"#),
        b64(&format!(r#"{{"sub":"watchdog","exp":{exp}}}"#))
    )
}

fn slack(method: u8, status: u16, retry_after: &str, body: &str) -> Vec<u8> {
    let mut out = vec![method];
    out.extend(status.to_be_bytes());
    out.push(retry_after.len() as u8);
    out.extend(retry_after.as_bytes());
    out.extend(body.as_bytes());
    out
}

/// What `/api/v1/peer` answers: a silence, a delivery.
fn peer_answer() -> Vec<u8> {
    let silence = Request {
        cluster: Some("payments".into()),
        broker: Some(2),
        kind: Some("broker".into()),
        duration: Some("2h".into()),
        comment: "disk swap on broker 2".into(),
        ..Request::default()
    }
    .check(&["payments".into()], now(), Origin::Api)
    .unwrap();
    let answer = Answer {
        instance_id: "watchdog-a".into(),
        version: "0.1.0".into(),
        clusters: vec!["payments".into()],
        silences: vec![silence],
        deliveries: vec![Delivery {
            seq: 7,
            receiver: "slack".into(),
            dedup_key: "kafka-watchdog/payments/broker-2/broker".into(),
            event: "opened".into(),
            severity: "critical".into(),
            at: now() - Duration::from_secs(3),
            started_at: Some(now() - Duration::from_secs(3)),
            open_until: Some(now()),
            message: Some(SlackMessage {
                channel: "C024BE91L".into(),
                ts: "1799999997.000100".into(),
            }),
        }],
    };
    serde_json::to_vec_pretty(&answer).unwrap()
}

fn http(mode: u8, request: &str) -> Vec<u8> {
    tagged(mode, request.replace('\n', "\r\n").as_bytes())
}

fn all() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut add = |target: &'static str, name: &str, input: Vec<u8>| {
        out.push((target, name.to_string(), input));
    };
    for v in 0..=2 {
        add(
            "describe_quorum",
            &format!("wedged-leader-v{v}"),
            describe_quorum(v),
        );
    }
    for v in 1..=4 {
        add(
            "describe_log_dirs",
            &format!("one-failed-v{v}"),
            describe_log_dirs(v),
        );
    }
    let token = format!(
        r#"{{"access_token":"{}","token_type":"Bearer","expires_in":3600}}"#,
        jwt()
    );
    assert!(wire::oauth_answer_for_fuzzing(true, token.as_bytes()).is_ok());
    add("oauth_token", "token", tagged(1, token.as_bytes()));
    let token = format!(r#"{{"access_token":"{}","token_type":"Bearer"}}"#, jwt());
    assert!(wire::oauth_answer_for_fuzzing(true, token.as_bytes()).is_ok());
    add("oauth_token", "token-jwt-exp", tagged(1, token.as_bytes()));
    add(
        "oauth_token",
        "refused",
        tagged(0, br#"{"error":"invalid_client","error_description":"Invalid client or Invalid client credentials"}"#),
    );
    add(
        "oauth_token",
        "challenge",
        tagged(0, br#"{"status":"invalid_token","scope":"","openid-configuration":"https://idp.example/.well-known/openid-configuration"}"#),
    );
    add("peer_answer", "answer", peer_answer());
    add(
        "slack_answer",
        "posted",
        slack(
            0,
            200,
            "",
            r#"{"ok":true,"channel":"C024BE91L","ts":"1700000000.000100","message":{"text":"x"}}"#,
        ),
    );
    add(
        "slack_answer",
        "rate-limited",
        slack(0, 429, "30", r#"{"ok":false,"error":"ratelimited"}"#),
    );
    add(
        "slack_answer",
        "gone",
        slack(1, 200, "", r#"{"ok":false,"error":"message_not_found"}"#),
    );
    add(
        "slack_answer",
        "unavailable",
        slack(
            1,
            503,
            "Wed, 21 Oct 2026 07:28:00 GMT",
            "<html>Service Unavailable</html>",
        ),
    );
    add(
        "silences",
        "api-request",
        tagged(0, br#"{"cluster":"payments","broker":2,"kind":"broker","duration":"2h","comment":"disk swap","created_by":"alice"}"#),
    );
    add(
        "silences",
        "api-request-until",
        tagged(0, br#"{"starts_at":"2027-01-15T09:00:00+01:00","ends_at":"2027-01-15T12:00:00Z","comment":"maintenance window"}"#),
    );
    let file = serde_json::to_vec_pretty(&vec![serde_json::from_slice::<Answer>(&peer_answer())
        .unwrap()
        .silences[0]
        .clone()])
    .unwrap();
    add("silences", "saved-file", tagged(1, &file));
    for (name, text) in [
        ("duration", "1h30m"),
        ("rfc3339", "2026-12-01T14:00:00Z"),
        ("rfc3339-offset", "2026-12-01T14:00:00.123456+02:00"),
        ("http-date", "Wed, 21 Oct 2026 07:28:00 GMT"),
        ("seconds", "120"),
    ] {
        add("time", name, text.as_bytes().to_vec());
    }
    add("http_request", "metrics", http(0, "GET /metrics HTTP/1.1\nHost: localhost:9644\nAccept: application/openmetrics-text;version=1.0.0\n\n"));
    add(
        "http_request",
        "status-basic",
        http(
            2,
            "GET /status HTTP/1.1\nHost: kw.example\nAuthorization: Basic b3BzOnBhc3M6d29yZA==\n\n",
        ),
    );
    add("http_request", "peer-bearer", http(3, "GET /api/v1/peer HTTP/1.1\nHost: 127.0.0.1:9644\nAuthorization: Bearer bearer-token\n\n"));
    let body = r#"{"broker":2,"duration":"2h","comment":"disk swap"}"#;
    add(
        "http_request",
        "silence-add",
        http(0, &format!("POST /api/v1/silences HTTP/1.1\nHost: localhost:9644\nAuthorization: Bearer local-token\nContent-Type: application/json\nContent-Length: {}\n\n{body}", body.len())),
    );
    add("http_request", "silence-expire", http(0, "DELETE /api/v1/silences/s-0123456789ab HTTP/1.1\nHost: [::1]:9644\nAuthorization: Bearer local-token\n\n"));
    add("http_request", "probes-keep-alive", http(1, "GET /healthz HTTP/1.1\nHost: x\n\nGET /readyz HTTP/1.1\nHost: x\n\nHEAD /api/v1/silences HTTP/1.1\nHost: x\n\n"));
    // A peer's ask signed with the key (refused as too old or too new by the time the
    // seed is replayed: the signature is still checked first), and a connection past the
    // caps asking a probe and a page.
    let nonce = Nonce::fresh().unwrap();
    let ask = PeerKey::new(super::http::PEER_KEY).ask(&nonce, now());
    add(
        "http_request",
        "peer-ask-signed",
        http(
            4 | 1,
            &format!(
                "GET /api/v1/peer HTTP/1.1\nHost: 10.0.0.7:9644\nKafka-Watchdog-Peer: {ask}\n\n"
            ),
        ),
    );
    add(
        "http_request",
        "probes-lane",
        http(
            8 | 2,
            "GET /readyz HTTP/1.1\nHost: x\n\nGET /status HTTP/1.1\nHost: x\n\n",
        ),
    );
    out
}

/// Every seed goes through its target; with `KAFKA_WATCHDOG_FUZZ_SEEDS` set to a folder,
/// they are written to `<folder>/<target>/<name>`.
#[test]
fn seeds_pass_their_targets() {
    let out = std::env::var_os("KAFKA_WATCHDOG_FUZZ_SEEDS").map(std::path::PathBuf::from);
    for (target, name, input) in all() {
        let (_, run) = TARGETS.iter().find(|(t, _)| *t == target).unwrap();
        run(&input);
        if let Some(dir) = &out {
            let dir = dir.join(target);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(&name), &input).unwrap();
        }
    }
}
