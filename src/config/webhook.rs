//! One webhook: where it sends, in which format, and for what.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::checks;
use super::ctx::Ctx;
use super::read::{self, list, text, text_node, Fields, Set};
use super::report::Report;
use super::schema as s;
use super::secret::{secret, Got, Need};
use super::types::*;
use super::yaml::{shorten, Entry, Kind, Node, Pos};

pub(crate) fn webhook(
    cx: &mut Ctx,
    node: &Node,
    idx: usize,
    clusters: &HashMap<String, Pos>,
) -> (Option<Set<String>>, Option<WebhookConfig>) {
    let path = format!("webhooks[{idx}]");
    let Some(mut f) = Fields::open(&mut cx.rep, node, None, path) else {
        return (None, None);
    };
    let (raw_name, name) = cx.name(&mut f, "webhook");
    // Required unless a Slack bot token makes it the Web API's base, which has a default:
    // decided once the format and the token are read.
    let url = secret(cx, &mut f, &s::WEBHOOK_URL, Need::Optional);
    let kind = s::WebhookKindLayer::read(&mut cx.rep, &mut f).alone();
    // `None` when written wrong (already reported): the checks that depend on it stand down.
    let format = kind.format.as_ref().map(|r| r.value);
    let min_severity = kind.min_severity.as_ref().map(|r| r.value);
    let cluster_names = match f.get("clusters") {
        None => Some(Vec::new()),
        Some(e) if e.value.is_null() => Some(Vec::new()),
        Some(e) => webhook_clusters(&mut cx.rep, e, clusters),
    };
    let delivery = s::WebhookDeliveryLayer::read(&mut cx.rep, &mut f).alone();
    let headers = match f.get("headers") {
        None => Some(BTreeMap::new()),
        Some(e) => headers(cx, e, &f.path),
    };
    let (hmac_need, routing_need) = signing_needs(format);
    let ca_file = match f.get("ca_file") {
        None => Some(None),
        Some(e) => pem_certificates(cx, e).map(Some),
    };
    let hmac = secret(cx, &mut f, &s::WEBHOOK_HMAC_SECRET, hmac_need);
    let routing = secret(cx, &mut f, &s::WEBHOOK_ROUTING_KEY, routing_need);
    let (slack_bot, token_given) = slack_bot(cx, &mut f, format);
    // A Slack token given but unreadable was reported; the URL is not missing then.
    let bot_given = format == Some(WebhookFormat::Slack) && token_given;
    if matches!(url, Ok(None)) && !bot_given {
        f.missing_what(&mut cx.rep, s::WEBHOOK_URL.what, s::WEBHOOK_URL.choices());
    }
    f.finish(&mut cx.rep, &|_| None);

    let (url, target) = destination(&mut cx.rep, url, bot_given);
    let built = (|| {
        let d = delivery.values()?;
        Some(WebhookConfig {
            name: name?,
            url: url?,
            target: target?,
            format: format?,
            min_severity: min_severity?,
            clusters: cluster_names?,
            repeat_interval: repeat_interval(delivery.repeat_interval.as_ref()?, format?),
            send_resolved: d.send_resolved,
            timeout: d.timeout,
            tls_verify: d.tls_verify,
            ca_file: ca_file?,
            headers: headers?,
            hmac_secret: hmac.ok()?.map(Got::into_secret),
            routing_key: routing.ok()?.map(Got::into_secret),
            group_interval: (!d.group_interval.is_zero()).then_some(d.group_interval),
            slack_bot: slack_bot.ok()?,
        })
    })();
    (raw_name, built)
}

/// Which of the two signing secrets this format may or must have. Only the generic body is
/// signed, and only PagerDuty routes by key; a secret given where it is never used is more
/// likely a mistake than a plan.
fn signing_needs(format: Option<WebhookFormat>) -> (Need, Need) {
    match format {
        Some(WebhookFormat::Generic) => {
            (Need::Optional, Need::Forbidden("format is not pagerduty"))
        }
        Some(WebhookFormat::PagerDuty) => {
            (Need::Forbidden("format is not generic"), Need::Required)
        }
        Some(_) => (
            Need::Forbidden("format is not generic"),
            Need::Forbidden("format is not pagerduty"),
        ),
        None => (Need::Ignore, Need::Ignore),
    }
}

/// The URL to send to, checked, and its scheme, host and port (what logs may show). With a
/// Slack bot token the URL is the Web API's base, which has a default.
fn destination(
    rep: &mut Report,
    url: Result<Option<Got>, ()>,
    bot_given: bool,
) -> (Option<Secret>, Option<String>) {
    match url {
        Ok(Some(u)) => {
            let checked = checks::webhook_url(&u.value).and_then(|target| {
                if bot_given {
                    checks::slack_api_base(&u.value)?;
                }
                Ok(target)
            });
            match checked {
                Ok(target) if bot_given => (Some(Secret::new(api_base(&u.value))), Some(target)),
                Ok(target) => (Some(Secret::new(u.value.trim())), Some(target)),
                Err((m, x)) => {
                    rep.add(u.pos, format!("{}: {m}", u.key), Some(x));
                    (None, None)
                }
            }
        }
        Ok(None) if bot_given => (
            Some(Secret::new(s::SLACK_API_DEFAULT)),
            checks::webhook_url(s::SLACK_API_DEFAULT).ok(),
        ),
        _ => (None, None),
    }
}

/// `repeat_interval_secs`: 0 is how the file says "never repeat". PagerDuty's Events API
/// has no "still open" event: a reminder is a trigger, and a trigger after a person
/// resolved the alert opens it again. So PagerDuty repeats only when asked to (its own
/// escalation policies re-notify).
fn repeat_interval(r: &read::Resolved<u64>, format: WebhookFormat) -> Option<Duration> {
    let unset = matches!(r.from, read::Origin::Builtin);
    let secs = if unset && format == WebhookFormat::PagerDuty {
        0
    } else {
        r.value
    };
    (secs > 0).then(|| Duration::from_secs(secs))
}

/// The Web API's methods are joined to the base (`<base>chat.update`), which needs its
/// trailing slash: without it, joining would replace the base's last segment.
fn api_base(url: &str) -> String {
    let url = url.trim();
    if url.ends_with('/') {
        url.to_string()
    } else {
        format!("{url}/")
    }
}

/// The bot token and channel of a Slack receiver that uses the Web API, and whether a token
/// was given at all (read or not). `Ok(None)`: an incoming webhook (or another format);
/// `Err(())`: a problem was reported.
fn slack_bot(
    cx: &mut Ctx,
    f: &mut Fields,
    format: Option<WebhookFormat>,
) -> (Result<Option<SlackBot>, ()>, bool) {
    let token = slack_token(cx, f, format);
    // Taken whatever the token, so that it is never reported as an unknown key.
    let channel = f.get(s::WEBHOOK_SLACK_CHANNEL);
    let given = !matches!(token, Ok(None));
    (
        token.and_then(|t| slack_channel(cx, f, channel, format, t)),
        given,
    )
}

fn slack_token(
    cx: &mut Ctx,
    f: &mut Fields,
    format: Option<WebhookFormat>,
) -> Result<Option<String>, ()> {
    let need = match format {
        Some(WebhookFormat::Slack) => Need::Optional,
        Some(_) => Need::Forbidden("format is not slack"),
        None => Need::Ignore,
    };
    Ok(secret(cx, f, &s::WEBHOOK_SLACK_BOT_TOKEN, need)?.map(|t| t.value))
}

/// `slack_channel`, which goes with a token and only with one.
fn slack_channel(
    cx: &mut Ctx,
    f: &Fields,
    channel: Option<&Entry>,
    format: Option<WebhookFormat>,
    token: Option<String>,
) -> Result<Option<SlackBot>, ()> {
    let token = match token {
        Some(t) => t,
        None => {
            if let Some(e) = channel {
                let why = if format == Some(WebhookFormat::Slack) {
                    format!(
                        "there is no {} or {} (an incoming webhook posts where it was made)",
                        s::WEBHOOK_SLACK_BOT_TOKEN.env,
                        s::WEBHOOK_SLACK_BOT_TOKEN.file
                    )
                } else {
                    "format is not slack".to_string()
                };
                cx.rep.add(
                    e.key_pos,
                    format!("{} is set in {} but {why}", e.key, f.where_()),
                    Some(format!("no {} here", s::WEBHOOK_SLACK_CHANNEL)),
                );
                return Err(());
            }
            return Ok(None);
        }
    };
    let expected = "a channel id (C0123ABCD) or name (#kafka-ops)";
    let Some(e) = channel else {
        f.missing(&mut cx.rep, s::WEBHOOK_SLACK_CHANNEL, expected.into());
        return Err(());
    };
    let channel = text(&mut cx.rep, e, expected).ok_or(())?;
    if let Err((m, x)) = checks::slack_channel(&channel.value) {
        cx.rep.add(channel.value_pos, m, Some(x));
        return Err(());
    }
    Ok(Some(SlackBot {
        token: Secret::new(token),
        channel: channel.value,
    }))
}

fn webhook_clusters(
    rep: &mut Report,
    e: &Entry,
    known: &HashMap<String, Pos>,
) -> Option<Vec<String>> {
    let expected = "a list of cluster names (empty for all clusters)";
    let items = list(rep, e, expected, true)?;
    let mut out = Vec::new();
    let mut ok = true;
    for item in items {
        let Some(n) = text_node(rep, item, "clusters", expected) else {
            ok = false;
            continue;
        };
        if known.contains_key(&n) {
            out.push(n);
        } else {
            let mut names: Vec<&str> = known.keys().map(String::as_str).collect();
            names.sort_unstable();
            let hint = read::suggest(&n, &names)
                .map(|s| format!(", did you mean '{s}'?"))
                .unwrap_or_default();
            rep.add(
                item.pos,
                format!("'{}' is not a configured cluster{hint}", shorten(&n)),
                Some(format!("one of: {}", names.join(", "))),
            );
            ok = false;
        }
    }
    ok.then_some(out)
}

/// A readable file holding at least one PEM certificate (checked now, not at the first
/// delivery).
fn pem_certificates(cx: &mut Ctx, e: &Entry) -> Option<std::path::PathBuf> {
    let path = super::secret::readable_file(cx, e)?;
    let bytes = std::fs::read(&path).unwrap_or_default();
    if reqwest::Certificate::from_pem_bundle(&bytes).is_ok_and(|c| !c.is_empty()) {
        return Some(path);
    }
    cx.rep.add(
        e.value.pos,
        format!("ca_file '{}' holds no PEM certificate", path.display()),
        Some("a file of one or more -----BEGIN CERTIFICATE----- blocks".into()),
    );
    None
}

/// Header names to values. A value is text, or a mapping that reads it like every other
/// secret (`value_env`, `value_file`): a header often carries a credential, which must not
/// sit in the file in clear text.
fn headers(cx: &mut Ctx, e: &Entry, path: &str) -> Option<BTreeMap<String, String>> {
    let entries = match &e.value.kind {
        Kind::Map(entries) => entries,
        _ if e.value.is_null() => return Some(BTreeMap::new()),
        _ => {
            cx.rep.add(
                e.value.pos,
                format!("wrong type for headers: {}", e.value.describe()),
                Some("a mapping of header names to values".into()),
            );
            return None;
        }
    };
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut ok = true;
    for h in entries {
        if let Err((m, x)) = checks::header_name(&h.key) {
            cx.rep.add(h.key_pos, m, Some(x));
            ok = false;
            continue;
        }
        if out.keys().any(|k| k.eq_ignore_ascii_case(&h.key)) {
            cx.rep.add(
                h.key_pos,
                format!(
                    "header '{}' is set twice (names ignore case)",
                    shorten(&h.key)
                ),
                Some("each header once".into()),
            );
            ok = false;
            continue;
        }
        let v = if matches!(h.value.kind, Kind::Map(_)) {
            let got = Fields::open(
                &mut cx.rep,
                &h.value,
                Some(h),
                format!("{path}.headers.{}", h.key),
            )
            .and_then(|mut hf| {
                let got = secret(cx, &mut hf, &s::WEBHOOK_HEADER_VALUE, Need::Required);
                hf.finish(&mut cx.rep, &|_| None);
                got.ok().flatten()
            });
            match got {
                Some(g) => g.value,
                None => {
                    ok = false;
                    continue;
                }
            }
        } else {
            match text(
                &mut cx.rep,
                h,
                "a header value, or a mapping with value_env or value_file",
            ) {
                Some(t) => t.value,
                None => {
                    ok = false;
                    continue;
                }
            }
        };
        if let Err((m, x)) = checks::header_value(&v, &h.key) {
            cx.rep.add(h.value.pos, m, Some(x));
            ok = false;
            continue;
        }
        out.insert(h.key.clone(), v);
    }
    ok.then_some(out)
}
