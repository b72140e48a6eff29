//! The top-level `peers:` block: the other watchdogs that watch the same clusters (the Helm
//! chart's replicas), so that a silence added on one holds on all and a receiver that does
//! not deduplicate hears each event once (`alert::peers`).

use std::time::Duration;

use super::build::Ctx;
use super::read::{int, list, text, text_node, Fields};
use super::schema as s;
use super::secret::readable_file;
use super::types::{PeerDns, PeersConfig};
use super::yaml::{shorten, Entry};

const URL_EXPECTED: &str =
    "the base URL of another watchdog's HTTP server, e.g. http://kafka-watchdog-1.kafka-watchdog-pods:9644";
const DNS_EXPECTED: &str = "a DNS name and port whose every address is a watchdog, e.g. kafka-watchdog-pods.monitoring.svc:9644 (the chart's headless service)";

pub(crate) fn peers(cx: &mut Ctx, e: Option<&Entry>) -> Option<Option<PeersConfig>> {
    let Some(e) = e else {
        return Some(None);
    };
    if e.value.is_null() {
        return Some(None);
    }
    let mut f = Fields::open(&mut cx.rep, &e.value, Some(e), "peers".into())?;
    let urls_entry = f.get(s::PEERS_URLS);
    let dns_entry = f.get(s::PEERS_DNS);
    let scheme_entry = f.get(s::PEERS_DNS_SCHEME);
    let poll_entry = f.get(s::PEERS_POLL_INTERVAL.key);
    let takeover_entry = f.get(s::PEERS_TAKEOVER.key);
    let ca_entry = f.get(s::PEERS_CA_FILE);
    f.finish(&mut cx.rep, &|_| None);
    let mut ok = true;

    let mut urls = Vec::new();
    if let Some(ue) = urls_entry {
        match list(&mut cx.rep, ue, URL_EXPECTED, true) {
            None => ok = false,
            Some(items) => {
                for (i, item) in items.iter().enumerate() {
                    let what = format!("peers.urls[{i}]");
                    let Some(t) = text_node(&mut cx.rep, item, &what, URL_EXPECTED) else {
                        ok = false;
                        continue;
                    };
                    match url::Url::parse(t.trim()) {
                        Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => {
                            urls.push(u);
                        }
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
            }
        }
    }

    let dns = match dns_entry {
        None => None,
        Some(de) => match text(&mut cx.rep, de, DNS_EXPECTED) {
            None => {
                ok = false;
                None
            }
            Some(t) => match super::checks::host_port(t.value.trim()) {
                Ok(()) => {
                    let (host, port) = t.value.trim().rsplit_once(':').unwrap_or_default();
                    Some((
                        host.trim_matches(['[', ']']).to_string(),
                        port.parse().unwrap_or(0),
                    ))
                }
                Err((m, x)) => {
                    cx.rep.add(t.value_pos, m, Some(x));
                    ok = false;
                    None
                }
            },
        },
    };
    let scheme = match scheme_entry {
        None => "http".to_string(),
        Some(se) => match text(&mut cx.rep, se, "http or https") {
            Some(t) if matches!(t.value.as_str(), "http" | "https") => t.value,
            Some(t) => {
                cx.rep.add(
                    t.value_pos,
                    format!(
                        "'{}' is not a scheme of the peers' HTTP servers",
                        shorten(&t.value)
                    ),
                    Some("http or https".into()),
                );
                ok = false;
                String::new()
            }
            None => {
                ok = false;
                String::new()
            }
        },
    };
    if scheme_entry.is_some() && dns.is_none() && dns_entry.is_none() {
        cx.rep.warn(
            e.key_pos,
            "peers.dns_scheme is set without peers.dns: it is not used".into(),
            Some("peers.dns with the headless service's name and port".into()),
        );
    }
    if urls_entry.is_none() && dns_entry.is_none() {
        cx.rep.add(
            e.key_pos,
            "peers names no other watchdog".into(),
            Some(format!(
                "peers.urls ({URL_EXPECTED}) or peers.dns ({DNS_EXPECTED})"
            )),
        );
        ok = false;
    }
    let secs = |cx: &mut Ctx, entry: Option<&Entry>, spec: &s::IntSpec| match entry {
        None => Some(spec.default),
        Some(x) => int(&mut cx.rep, x, spec).map(|v| v.value),
    };
    let poll = secs(cx, poll_entry, &s::PEERS_POLL_INTERVAL);
    let takeover = secs(cx, takeover_entry, &s::PEERS_TAKEOVER);
    let ca_file = match ca_entry {
        None => Some(None),
        Some(ce) => readable_file(cx, ce).map(Some),
    };
    if let (Some(p), Some(t)) = (poll, takeover) {
        // A peer is gone when it has not answered for the takeover time: it needs a few
        // looks in that time, or one lost answer makes a sender change hands.
        if p * 3 > t * 1000 {
            cx.rep.add(
                takeover_entry.map_or(e.key_pos, |x| x.value.pos),
                format!(
                    "peers.takeover_secs {t} is shorter than three looks at the peers ({} ms each)",
                    p
                ),
                Some(format!(
                    "at least {} s, or a shorter poll_interval_ms",
                    (p * 3).div_ceil(1000)
                )),
            );
            ok = false;
        }
    }
    let (poll, takeover, ca_file) = (poll?, takeover?, ca_file?);
    ok.then(|| {
        Some(PeersConfig {
            urls,
            dns: dns.map(|(host, port)| PeerDns { host, port, scheme }),
            poll_interval: Duration::from_millis(poll),
            takeover: Duration::from_secs(takeover),
            ca_file,
        })
    })
}
