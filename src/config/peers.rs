//! The top-level `peers:` block: the other watchdogs that watch the same clusters (the Helm
//! chart's replicas), so that a silence added on one holds on all and a receiver that does
//! not deduplicate hears each event once (`alert::peers`).

use std::time::Duration;

use super::ctx::Ctx;
use super::read::{int, list, text, text_node, Fields};
use super::schema as s;
use super::secret::{readable_file, secret, Need};
use super::types::Secret;
use super::types::{PeerDns, PeersConfig};
use super::yaml::{shorten, Entry};

const URL_EXPECTED: &str =
    "the base URL of another watchdog's HTTP server, e.g. http://kafka-watchdog-1.kafka-watchdog-pods:9644";
const DNS_EXPECTED: &str = "a DNS name and port whose every address is a watchdog, e.g. kafka-watchdog-pods.monitoring.svc:9644 (the chart's headless service)";

pub(crate) fn peers(cx: &mut Ctx, e: Option<&Entry>) -> Option<Option<PeersConfig>> {
    let Some(e) = e.filter(|e| !e.value.is_null()) else {
        return Some(None);
    };
    let mut f = Fields::open(&mut cx.rep, &e.value, Some(e), "peers".into())?;
    let urls_entry = f.get(s::PEERS_URLS);
    let dns_entry = f.get(s::PEERS_DNS);
    let scheme_entry = f.get(s::PEERS_DNS_SCHEME);
    let poll_entry = f.get(s::PEERS_POLL_INTERVAL.key);
    let takeover_entry = f.get(s::PEERS_TAKEOVER.key);
    let ca_entry = f.get(s::PEERS_CA_FILE);
    let key = secret(cx, &mut f, &s::PEERS_KEY, Need::Optional);
    f.finish(&mut cx.rep, &|_| None);
    let key = peer_key(cx, e, key);
    let names_none = urls_entry.is_none() && dns_entry.is_none();
    if names_none {
        cx.rep.add(
            e.key_pos,
            "peers names no other watchdog".into(),
            Some(format!(
                "peers.urls ({URL_EXPECTED}) or peers.dns ({DNS_EXPECTED})"
            )),
        );
    }
    if scheme_entry.is_some() && dns_entry.is_none() {
        cx.rep.warn(
            e.key_pos,
            "peers.dns_scheme is set without peers.dns: it is not used".into(),
            Some("peers.dns with the headless service's name and port".into()),
        );
    }
    // Every key is read whatever the others gave, so all their problems show at once.
    let urls = urls_entry.map_or(Some(Vec::new()), |u| urls(cx, u));
    let dns = dns_entry.map_or(Some(None), |d| dns(cx, d).map(Some));
    let scheme = scheme_entry.map_or(Some(s::PEERS_DNS_SCHEME_DEFAULT.to_string()), |x| {
        scheme(cx, x)
    });
    let timing = timing(cx, e, poll_entry, takeover_entry);
    let ca_file = ca_entry.map_or(Some(None), |c| readable_file(cx, c).map(Some));
    if names_none {
        return None;
    }
    let (urls, dns, scheme, (poll_interval, takeover), ca_file, key) =
        (urls?, dns?, scheme?, timing?, ca_file?, key?);
    Some(Some(PeersConfig {
        urls,
        dns: dns.map(|(host, port)| PeerDns { host, port, scheme }),
        poll_interval,
        takeover,
        ca_file,
        key,
    }))
}

const KEY_EXPECTED: &str = "peers.key_file (or key_env) holding at least 32 random characters, the same on every instance, e.g. the output of `head -c 32 /dev/urandom | base64` (the Helm chart makes one)";

/// The peer key, required: an answer that no key signs could come from anything on the
/// path (issue 38 item 5), and without one the instances would have to ask each other
/// with the credential that writes silences.
fn peer_key(
    cx: &mut Ctx,
    block: &Entry,
    got: Result<Option<super::secret::Got>, ()>,
) -> Option<Secret> {
    let got = match got {
        Ok(Some(g)) => g,
        Ok(None) => {
            cx.rep.add(
                block.key_pos,
                "peers has no key: an answer from a peer is taken only when signed with a key every instance shares, and this watchdog asks its peers with it (no longer with its http.auth credential)".into(),
                Some(KEY_EXPECTED.into()),
            );
            return None;
        }
        Err(()) => return None,
    };
    if got.value.trim().chars().count() < s::PEERS_KEY_MIN_CHARS {
        cx.rep.add(
            got.pos,
            format!(
                "the peer key ({}) is shorter than {} characters",
                got.key,
                s::PEERS_KEY_MIN_CHARS
            ),
            Some(KEY_EXPECTED.into()),
        );
        return None;
    }
    // With its file, so the key follows it (`config::live`).
    Some(got.into_secret())
}

fn urls(cx: &mut Ctx, e: &Entry) -> Option<Vec<url::Url>> {
    let items = list(&mut cx.rep, e, URL_EXPECTED, true)?;
    let mut out = Vec::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let what = format!("peers.urls[{i}]");
        let Some(t) = text_node(&mut cx.rep, item, &what, URL_EXPECTED) else {
            ok = false;
            continue;
        };
        match url::Url::parse(t.trim()) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => out.push(u),
            _ => {
                cx.rep.add(
                    item.pos,
                    format!(
                        "{what}: '{}' is not an absolute http or https URL",
                        shorten(&t)
                    ),
                    Some(URL_EXPECTED.into()),
                );
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

fn dns(cx: &mut Ctx, e: &Entry) -> Option<(String, u16)> {
    let t = text(&mut cx.rep, e, DNS_EXPECTED)?;
    let value = t.value.trim();
    if let Err((m, x)) = super::checks::host_port(value) {
        cx.rep.add(t.value_pos, m, Some(x));
        return None;
    }
    // host_port checked the shape: a host (an IPv6 one in brackets) and a port.
    let (host, port) = value.rsplit_once(':')?;
    Some((
        host.trim_matches(['[', ']']).to_string(),
        port.parse().ok()?,
    ))
}

fn scheme(cx: &mut Ctx, e: &Entry) -> Option<String> {
    let t = text(&mut cx.rep, e, "http or https")?;
    if matches!(t.value.as_str(), "http" | "https") {
        return Some(t.value);
    }
    cx.rep.add(
        t.value_pos,
        format!(
            "'{}' is not a scheme of the peers' HTTP servers",
            shorten(&t.value)
        ),
        Some("http or https".into()),
    );
    None
}

/// The poll interval and the takeover time, which must allow a few looks.
fn timing(
    cx: &mut Ctx,
    block: &Entry,
    poll_entry: Option<&Entry>,
    takeover_entry: Option<&Entry>,
) -> Option<(Duration, Duration)> {
    let read = |cx: &mut Ctx, entry: Option<&Entry>, spec: &s::IntSpec| match entry {
        None => Some(spec.default),
        Some(x) => int(&mut cx.rep, x, spec).map(|v| v.value),
    };
    let poll = read(cx, poll_entry, &s::PEERS_POLL_INTERVAL);
    let takeover = read(cx, takeover_entry, &s::PEERS_TAKEOVER);
    let (poll, takeover) = (poll?, takeover?);
    // A peer is gone when it has not answered for the takeover time: it needs a few looks
    // in that time, or one lost answer makes the sender change hands.
    if poll * 3 > takeover * 1000 {
        cx.rep.add(
            takeover_entry.map_or(block.key_pos, |x| x.value.pos),
            format!(
                "peers.takeover_secs {takeover} is shorter than three looks at the peers ({poll} ms each)"
            ),
            Some(format!(
                "at least {} s, or a shorter poll_interval_ms",
                (poll * 3).div_ceil(1000)
            )),
        );
        return None;
    }
    Some((Duration::from_millis(poll), Duration::from_secs(takeover)))
}
