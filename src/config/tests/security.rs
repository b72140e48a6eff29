//! SASL, TLS, OAUTHBEARER, AWS_MSK_IAM and secrets (environment, files, never inline).

use super::*;

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

#[test]
fn oauthbearer_extensions_are_names_of_letters_to_visible_text() {
    let base = format!(
        "{SASL_OF}        mechanism: OAUTHBEARER\n        token_endpoint_url: https://idp/t\n        client_id: c\n        client_secret_env: S\n"
    );
    let env = env_of(&[("S", "x")]);
    let c = parse_with_env(
        &format!("{base}        extensions:\n          logicalCluster: lkc-abc123\n          identityPoolId: pool-Ab12\n"),
        "t.yaml",
        &env,
    )
    .unwrap();
    let o = c.clusters[0]
        .security
        .sasl
        .as_ref()
        .unwrap()
        .oauthbearer
        .clone()
        .unwrap();
    assert_eq!(
        o.extensions,
        vec![
            ("logicalCluster".to_string(), "lkc-abc123".to_string()),
            ("identityPoolId".to_string(), "pool-Ab12".to_string()),
        ]
    );
    let none = parse_with_env(&base, "t.yaml", &env).unwrap();
    assert!(none.clusters[0]
        .security
        .sasl
        .as_ref()
        .unwrap()
        .oauthbearer
        .as_ref()
        .unwrap()
        .extensions
        .is_empty());

    let bad: Vec<String> = problems_env(
        &format!("{base}        extensions:\n          auth: x\n          logical_cluster: y\n          ok: \"\"\n"),
        &env,
    )
    .iter()
    .map(short)
    .collect();
    assert_eq!(bad.len(), 3, "{bad:#?}");
    assert!(
        bad[0].contains("'auth' is not an OAUTHBEARER extension name"),
        "{bad:#?}"
    );
    assert!(bad[0].contains("letters only, and not 'auth'"), "{bad:#?}");
    assert!(bad[1].contains("'logical_cluster' is not"), "{bad:#?}");
    assert!(
        bad[2].contains("extension 'ok' has an empty value"),
        "{bad:#?}"
    );
    let not_a_map = problems_env(&format!("{base}        extensions: lkc-1\n"), &env);
    assert_eq!(not_a_map.len(), 1);
    let not_a_map = short(&not_a_map[0]);
    assert!(
        not_a_map.contains("wrong type for extensions"),
        "{not_a_map}"
    );

    let aws = one(&format!(
        "{SASL_OF}        mechanism: AWS_MSK_IAM\n        region: eu-west-1\n        extensions:\n          a: b\n"
    ));
    assert!(
        aws.contains("extensions is set but mechanism is AWS_MSK_IAM"),
        "{aws}"
    );
}
