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
