//! One webhook: where it sends, in which format, and for what.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::build::Ctx;
use super::checks;
use super::read::{self, list, text, text_node, Fields, Report, Set};
use super::schema as s;
use super::secret::{secret, Need};
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
    let raw_name = match f.get("name") {
        Some(e) => text(&mut cx.rep, e, s::NAME_EXPECTED),
        None => {
            f.missing(&mut cx.rep, "name", s::NAME_EXPECTED.into());
            None
        }
    };
    let name = raw_name
        .as_ref()
        .and_then(|n| match checks::name(&n.value, "webhook") {
            Ok(()) => Some(n.value.clone()),
            Err((m, x)) => {
                cx.rep.add(n.value_pos, m, Some(x));
                None
            }
        });
    let url = secret(cx, &mut f, &s::WEBHOOK_URL, Need::Required);
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
        Some(e) => headers(&mut cx.rep, e),
    };
    // Only the generic body is signed, and only PagerDuty routes by key; a secret given
    // where it is never used is more likely a mistake than a plan.
    let (hmac_need, routing_need) = match format {
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
    };
    let hmac = secret(cx, &mut f, &s::WEBHOOK_HMAC_SECRET, hmac_need);
    let routing = secret(cx, &mut f, &s::WEBHOOK_ROUTING_KEY, routing_need);
    f.finish(&mut cx.rep, &|_| None);

    let (url, target) = match url {
        Ok(Some(u)) => match checks::webhook_url(&u.value) {
            Ok(target) => (Some(Secret::new(u.value.trim())), Some(target)),
            Err((m, x)) => {
                cx.rep.add(u.pos, format!("{}: {m}", u.key), Some(x));
                (None, None)
            }
        },
        _ => (None, None),
    };
    let built = (|| {
        let d = delivery.values()?;
        Some(WebhookConfig {
            name: name?,
            url: url?,
            target: target?,
            format: format?,
            min_severity: min_severity?,
            clusters: cluster_names?,
            // 0 is how the file says "never repeat". PagerDuty's Events API has no
            // "still open" event: a reminder is a trigger, and a trigger after a person
            // resolved the alert opens it again. So PagerDuty repeats only when asked to
            // (its own escalation policies re-notify).
            repeat_interval: {
                let r = delivery.repeat_interval.as_ref()?;
                let unset = matches!(r.from, read::Origin::Builtin);
                let secs = if unset && format == Some(WebhookFormat::PagerDuty) {
                    0
                } else {
                    r.value
                };
                (secs > 0).then(|| Duration::from_secs(secs))
            },
            send_resolved: d.send_resolved,
            timeout: d.timeout,
            tls_verify: d.tls_verify,
            headers: headers?,
            hmac_secret: hmac.ok()?.map(|s| Secret::new(s.value)),
            routing_key: routing.ok()?.map(|s| Secret::new(s.value)),
        })
    })();
    (raw_name, built)
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

fn headers(rep: &mut Report, e: &Entry) -> Option<BTreeMap<String, String>> {
    let entries = match &e.value.kind {
        Kind::Map(entries) => entries,
        _ if e.value.is_null() => return Some(BTreeMap::new()),
        _ => {
            rep.add(
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
            rep.add(h.key_pos, m, Some(x));
            ok = false;
            continue;
        }
        if out.keys().any(|k| k.eq_ignore_ascii_case(&h.key)) {
            rep.add(
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
        let Some(v) = text(rep, h, "a header value").map(|t| t.value) else {
            ok = false;
            continue;
        };
        if let Err((m, x)) = checks::header_value(&v, &h.key) {
            rep.add(h.value.pos, m, Some(x));
            ok = false;
            continue;
        }
        out.insert(h.key.clone(), v);
    }
    ok.then_some(out)
}
