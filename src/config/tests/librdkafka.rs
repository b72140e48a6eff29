//! The librdkafka escape hatch: reserved keys and values.

use super::*;

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

/// Issue 38 item 10: librdkafka properties that carry a credential (a key passphrase, a
/// private key, a keystore, an OAuth secret or assertion) were passed through as plain
/// settings, outside the watchdog's handling of secrets. Each is refused, naming what to
/// write instead.
#[test]
fn librdkafka_credentials_are_refused_with_the_keys_to_use() {
    let key_file = "security.tls.key_file with the key unencrypted: the watchdog takes no key passphrase (openssl pkey -in encrypted.pem -out key.pem decrypts one)";
    let key_pem = "security.tls.key_file and security.tls.cert_file: PEM files";
    let keystore = "security.tls.cert_file and security.tls.key_file: PEM files (openssl pkcs12 -in keystore.p12 -nodes prints both)";
    let client_secret = "security.sasl.client_secret_env or security.sasl.client_secret_file";
    let grant = "security.sasl.client_secret_env or security.sasl.client_secret_file: the watchdog gets OAUTHBEARER tokens with the client credentials grant";
    let oauth = "security.sasl with mechanism OAUTHBEARER (token_endpoint_url, client_id, client_secret_env or client_secret_file, scope, extensions): the watchdog hands the canary its tokens itself";
    let cases = [
        ("ssl.key.password", key_file),
        ("ssl.key.pem", key_pem),
        ("ssl_key", key_pem),
        ("ssl.keystore.location", keystore),
        ("ssl.keystore.password", keystore),
        (
            "sasl.oauthbearer.client.credentials.client.secret",
            client_secret,
        ),
        ("sasl.oauthbearer.assertion.private.key.passphrase", grant),
        ("sasl.oauthbearer.assertion.private.key.pem", grant),
        ("sasl.oauthbearer.assertion.private.key.file", grant),
        ("sasl.oauthbearer.assertion.file", grant),
        ("sasl.oauthbearer.config", oauth),
    ];
    for (key, instead) in cases {
        assert_eq!(
            one(&cluster_with(&format!("librdkafka:\n  {key}: x"))),
            format!("5:7: librdkafka property '{key}' in clusters[0].librdkafka carries a credential, which goes through the watchdog's own keys (expected {instead} instead)")
        );
    }
    // Any other OAUTHBEARER property: the canary's tokens come from the watchdog.
    assert_eq!(
        one(&format!(
            "defaults:\n  librdkafka:\n    SASL.OAuthBearer.Grant.Type: x\n{MINIMAL}"
        )),
        format!("3:5: librdkafka property 'sasl.oauthbearer.grant.type' is set by the watchdog itself in defaults.librdkafka (expected {oauth} instead)")
    );
    // Certificates are not secret: the PEM forms of the public parts still pass.
    let c = ok(&cluster_with(
        "librdkafka:\n  ssl.ca.pem: x\n  ssl.certificate.pem: y",
    ));
    assert_eq!(c.clusters[0].librdkafka.len(), 2);
}
