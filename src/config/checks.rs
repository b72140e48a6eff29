//! Checks of single values, free of positions: each returns what is wrong and what would
//! be right, and the caller attaches the place.

use std::net::Ipv6Addr;

use regex::{Regex, RegexBuilder};

use super::yaml::shorten;

/// Compiled-size cap per pattern, so a pathological pattern fails loading instead of
/// eating memory at every round.
pub(crate) const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Label names the watchdog's metrics, alert rules and Alertmanager bodies use already.
pub(crate) const LABELS_RESERVED: &[&str] = &[
    "alertname",
    "broker",
    "cluster",
    "controller",
    "dedup_key",
    "event",
    "instance",
    "instance_id",
    "job",
    "kind",
    "le",
    "outcome",
    "partition",
    "quantile",
    "receiver",
    "request",
    "rule",
    "severity",
    "state",
    "topic",
];

/// Label names on the metrics page beside `LABELS_RESERVED`, which a static label may take
/// (it only joins `cluster_labels`) but the cluster label may not: it is on every series.
pub(crate) const METRIC_LABELS: &[&str] = &[
    "acks",
    "address",
    "alertmanager",
    "legacy_alertname",
    "path",
    "peer",
    "port",
    "reason",
    "schedule",
    "target",
    "task",
    "version",
];

/// `metrics.cluster_label`: a label name Prometheus keeps as it is (not `__`-prefixed, not
/// `job` or `instance`, which the scrape sets), and none the watchdog puts beside it.
pub(crate) fn cluster_label(s: &str) -> Result<(), Bad> {
    if s == crate::model::metric_kit::CLUSTER_LABEL {
        return Ok(());
    }
    label_name(s).map_err(|e| {
        if LABELS_RESERVED.contains(&s) {
            bad(
                format!("label '{s}' is one the watchdog or the scrape sets itself"),
                "another name, e.g. kafka_cluster",
            )
        } else {
            e
        }
    })?;
    if METRIC_LABELS.contains(&s) {
        return Err(bad(
            format!("label '{s}' is one the watchdog sets itself"),
            "another name, e.g. kafka_cluster",
        ));
    }
    Ok(())
}

/// Names become Prometheus label values and file names, hence the narrow charset.
pub(crate) const NAME_MAX_CHARS: usize = 64;
pub(crate) const NAME_EXPECTED: &str = "1 to 64 characters from A-Z a-z 0-9 _ . -";

/// Slack's channel names are at most 80 characters; ids are shorter.
pub(crate) const SLACK_CHANNEL_MAX_CHARS: usize = 80;

/// The Web API's base when `url` is not given with a bot token.
pub(crate) const SLACK_API_DEFAULT: &str = "https://slack.com/api/";

/// What is wrong, and what would be right.
pub(crate) type Bad = (String, String);

fn bad(message: impl Into<String>, expected: impl Into<String>) -> Bad {
    (message.into(), expected.into())
}

/// Cluster and webhook names.
pub(crate) fn name(s: &str, what: &str) -> Result<(), Bad> {
    let ok_chars = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if !s.is_empty() && s.chars().count() <= NAME_MAX_CHARS && ok_chars {
        Ok(())
    } else {
        Err(bad(
            format!("'{}' is not a valid {what} name", shorten(s)),
            NAME_EXPECTED,
        ))
    }
}

/// A static label's name: Prometheus's syntax, not reserved by Prometheus (`__`) nor by
/// the watchdog's own labels.
pub(crate) fn label_name(s: &str) -> Result<(), Bad> {
    let mut chars = s.chars();
    let syntax = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !syntax || s.starts_with("__") {
        return Err(bad(
            format!("'{}' is not a valid label name", shorten(s)),
            "a letter or _ then letters, digits and _ (not starting with __)",
        ));
    }
    if LABELS_RESERVED.contains(&s) {
        return Err(bad(
            format!("label '{s}' is one the watchdog sets itself"),
            "another name (env, team, region, ...)",
        ));
    }
    Ok(())
}

/// Kafka's own rule for topic names (`Topic.validate`).
pub(crate) fn topic_name(s: &str) -> Result<(), Bad> {
    let ok_chars = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if !s.is_empty() && s.len() <= 249 && ok_chars && s != "." && s != ".." {
        Ok(())
    } else {
        Err(bad(
            format!("'{}' is not a valid Kafka topic name", shorten(s)),
            "1 to 249 characters from a-z A-Z 0-9 . _ -, not '.' or '..'",
        ))
    }
}

const HOST_PORT_EXAMPLE: &str = "host:port, e.g. broker1:9092 or [::1]:9092";

/// A bootstrap address as librdkafka and the protocol client will both take it.
pub(crate) fn host_port(s: &str) -> Result<(), Bad> {
    let not = || format!("'{}' is not a host:port", shorten(s));
    let port = if let Some(rest) = s.strip_prefix('[') {
        let Some((inner, after)) = rest.split_once(']') else {
            return Err(bad(not(), "a closing ']' after an IPv6 address"));
        };
        if inner.parse::<Ipv6Addr>().is_err() {
            return Err(bad(
                format!("'{}' is not an IPv6 address", shorten(inner)),
                HOST_PORT_EXAMPLE,
            ));
        }
        let Some(port) = after.strip_prefix(':') else {
            return Err(bad(not(), HOST_PORT_EXAMPLE));
        };
        port
    } else {
        let Some((host, port)) = s.rsplit_once(':') else {
            return Err(bad(not(), HOST_PORT_EXAMPLE));
        };
        if host.contains(':') {
            return Err(bad(not(), "an IPv6 address in brackets, e.g. [::1]:9092"));
        }
        if !valid_host(host) {
            return Err(bad(
                format!("'{}' is not a valid host name", shorten(host)),
                HOST_PORT_EXAMPLE,
            ));
        }
        port
    };
    match port.parse::<u32>() {
        Ok(p) if (1..=65535).contains(&p) => Ok(()),
        _ => Err(bad(not(), "a port from 1 to 65535")),
    }
}

fn valid_host(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|label| {
            !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

/// A TLS server name override: a DNS name or an IP address.
pub(crate) fn server_name(s: &str) -> Result<(), Bad> {
    if valid_host(s) || s.parse::<std::net::IpAddr>().is_ok() {
        Ok(())
    } else {
        Err(bad(
            format!("'{}' is not a host name", shorten(s)),
            "a DNS name or an IP address",
        ))
    }
}

/// A full-match pattern. The pattern is first compiled alone, so that its error message
/// points into what the operator wrote, and so that an unbalanced pattern cannot escape
/// the anchoring group added around it.
pub(crate) fn pattern(src: &str) -> Result<Regex, Bad> {
    let compile = |p: &str| RegexBuilder::new(p).size_limit(REGEX_SIZE_LIMIT).build();
    let expected = "a regular expression, matched against the whole topic name";
    if let Err(e) = compile(src) {
        return Err(bad(
            format!("invalid regex '{}': {}", shorten(src), regex_reason(&e)),
            expected,
        ));
    }
    compile(&format!("^(?:{src})$")).map_err(|e| {
        bad(
            format!("invalid regex '{}': {}", shorten(src), regex_reason(&e)),
            expected,
        )
    })
}

/// The regex crate's message is several lines with a caret diagram; the last line says
/// what is wrong, which is what fits on one line of a problem list.
fn regex_reason(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .map(str::to_string)
        .unwrap_or_else(|| text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// A webhook URL. Nothing of the URL appears in the message: it may carry a token.
/// Returns what may be shown of it (scheme, host, port).
pub(crate) fn webhook_url(s: &str) -> Result<String, Bad> {
    let expected = "an http:// or https:// URL with a host";
    let url = url::Url::parse(s.trim())
        .map_err(|e| bad(format!("the URL does not parse ({e})"), expected))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad(
            format!("URL scheme '{}' is not supported", shorten(url.scheme())),
            expected,
        ));
    }
    let Some(host) = url.host_str() else {
        return Err(bad("the URL has no host", expected));
    };
    Ok(match url.port() {
        Some(p) => format!("{}://{host}:{p}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    })
}

/// A Slack channel as `chat.postMessage` takes it: an id (`C0123ABCD`) or a name, with or
/// without its `#` (Slack's names are lowercase letters, digits, `-` and `_`).
pub(crate) fn slack_channel(s: &str) -> Result<(), Bad> {
    let name = s.strip_prefix('#').unwrap_or(s);
    let ok = !name.is_empty()
        && name.chars().count() <= SLACK_CHANNEL_MAX_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(bad(
            format!("'{}' is not a Slack channel", shorten(s)),
            format!("a channel id (C0123ABCD) or name (#kafka-ops), 1 to {SLACK_CHANNEL_MAX_CHARS} characters from a-z 0-9 - _"),
        ))
    }
}

/// With a bot token, `url` is the Web API's base; an incoming webhook's URL there is a
/// leftover from before the token, and every call to it would fail.
pub(crate) fn slack_api_base(s: &str) -> Result<(), Bad> {
    let host = url::Url::parse(s.trim())
        .ok()
        .and_then(|u| u.host_str().map(str::to_string));
    if host.as_deref() == Some("hooks.slack.com") {
        return Err(bad(
            "with a Slack bot token, url is the Web API's base, and this is an incoming webhook's URL",
            format!("{SLACK_API_DEFAULT} (the default: leave url out), or drop slack_bot_token_* to keep the incoming webhook"),
        ));
    }
    Ok(())
}

/// RFC 9110 token characters.
pub(crate) fn header_name(s: &str) -> Result<(), Bad> {
    let ok = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c));
    if ok {
        Ok(())
    } else {
        Err(bad(
            format!("'{}' is not a valid HTTP header name", shorten(s)),
            "letters, digits and !#$%&'*+-.^_`|~",
        ))
    }
}

pub(crate) fn header_value(s: &str, name: &str) -> Result<(), Bad> {
    if s.chars().any(|c| c.is_control() && c != '\t') {
        Err(bad(
            format!(
                "header {} has a control character or line break in its value",
                shorten(name)
            ),
            "a single line of text",
        ))
    } else {
        Ok(())
    }
}

pub(crate) fn env_var_name(s: &str) -> Result<(), Bad> {
    if !s.is_empty() && !s.contains(['=', '\0']) && !s.chars().any(char::is_whitespace) {
        Ok(())
    } else {
        Err(bad(
            format!("'{}' is not an environment variable name", shorten(s)),
            "a name such as KW_LAB_PASSWORD",
        ))
    }
}

/// Free text for an identifier that travels in records and payloads.
pub(crate) fn instance_id(s: &str, max: usize) -> Result<(), Bad> {
    if !s.trim().is_empty() && s.chars().count() <= max && !s.chars().any(char::is_control) {
        Ok(())
    } else {
        Err(bad(
            format!("'{}' is not a usable instance_id", shorten(s)),
            format!("1 to {max} printable characters"),
        ))
    }
}
