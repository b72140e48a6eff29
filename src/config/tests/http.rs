//! The HTTP server: HTTPS and credentials.

use super::*;

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/observe/wire/testdata");

fn http_with(block: &str) -> String {
    minimal_with("http", block)
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
            // Read from its file, which it remembers: another file is another secret.
            token: Secret::from_file("c2VjcmV0.token==", dir.join("token"))
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
