//! One cluster: the keys only a cluster has (name, bootstrap servers, security, host), and
//! its shared settings merged over `defaults:` (`layer`).

use super::checks;
use super::ctx::Ctx;
use super::layer::{layer, merge, Layer};
use super::read::{list, text, text_node, Fields, Set};
use super::report::Report;
use super::schema as s;
use super::security::security;
use super::types::*;
use super::yaml::{Entry, Kind, Node};
use std::collections::BTreeMap;

pub(crate) fn cluster(
    cx: &mut Ctx,
    node: &Node,
    idx: usize,
    defaults: &Layer,
) -> (Option<Set<String>>, Option<ClusterConfig>) {
    let path = format!("clusters[{idx}]");
    let Some(mut f) = Fields::open(&mut cx.rep, node, None, path.clone()) else {
        return (None, None);
    };
    let (raw_name, name) = cx.name(&mut f, "cluster");
    let bootstrap_servers = match f.get("bootstrap_servers") {
        Some(e) => bootstrap(&mut cx.rep, e),
        None => {
            f.missing(
                &mut cx.rep,
                "bootstrap_servers",
                "a list of host:port addresses".into(),
            );
            None
        }
    };
    let controllers = match f.get(s::CONTROLLERS_KEY) {
        Some(e) => controllers(&mut cx.rep, e),
        None => Some(Vec::new()),
    };
    let security_path = f.child("security");
    let security = match f.get("security") {
        Some(e) => security(cx, e, security_path),
        None => Some(Security {
            protocol: s::PROTOCOL_DEFAULT,
            sasl: None,
            tls: None,
        }),
    };
    let own = layer(cx, &mut f);
    let host = match f.get(s::HOST_KEY) {
        None => Some(None),
        Some(e) => super::host::host(cx, e, f.child(s::HOST_KEY)).map(Some),
    };
    let labels = match f.get(s::LABELS_KEY) {
        None => Some(BTreeMap::new()),
        Some(e) => labels(&mut cx.rep, e),
    };
    let cluster_pos = f.pos;
    f.finish(&mut cx.rep, &|_| None);

    let label = name.clone().unwrap_or_else(|| path.clone());
    let merged = merge(cx, &own, defaults, &label, cluster_pos);
    let built = (|| {
        let m = merged?;
        Some(ClusterConfig {
            name: name?,
            bootstrap_servers: bootstrap_servers?,
            controllers: controllers?,
            security: security?,
            timing: m.timing,
            topics: m.topics,
            canary: m.canary,
            coordinators: m.coordinators,
            certificates: m.certificates,
            verdict: m.verdict,
            librdkafka: m.librdkafka,
            host: host?,
            labels: labels?,
        })
    })();
    (raw_name, built)
}

/// `labels:`: names to values, each checked.
fn labels(rep: &mut Report, e: &Entry) -> Option<BTreeMap<String, String>> {
    let entries = match &e.value.kind {
        Kind::Map(entries) => entries,
        _ if e.value.is_null() => return Some(BTreeMap::new()),
        _ => {
            rep.add(
                e.value.pos,
                format!("wrong type for labels: {}", e.value.describe()),
                Some("a mapping of label names to values, as env: prod".into()),
            );
            return None;
        }
    };
    let mut out = BTreeMap::new();
    let mut ok = true;
    if entries.len() > s::LABELS_MAX {
        rep.add(
            e.key_pos,
            format!("{} labels, more than {}", entries.len(), s::LABELS_MAX),
            Some(format!("at most {} labels", s::LABELS_MAX)),
        );
        ok = false;
    }
    for l in entries {
        if let Err((m, x)) = checks::label_name(&l.key) {
            rep.add(l.key_pos, m, Some(x));
            ok = false;
            continue;
        }
        let most = s::LABEL_VALUE_MAX_CHARS;
        match text(
            rep,
            l,
            &format!("a label value (text, at most {most} characters)"),
        ) {
            Some(v) if !v.value.is_empty() && v.value.chars().count() <= most => {
                out.insert(l.key.clone(), v.value);
            }
            Some(v) => {
                rep.add(
                    v.value_pos,
                    format!("label '{}' has an empty or too long value", l.key),
                    Some(format!("1 to {most} characters")),
                );
                ok = false;
            }
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// `controllers:`: `host:port` or `id@host:port` entries, a comma-separated text too (as
/// Kafka's `controller.quorum.voters` or `--bootstrap-controller` take them).
fn controllers(rep: &mut Report, e: &Entry) -> Option<Vec<ControllerAddress>> {
    let expected = s::CONTROLLERS_EXPECTED;
    let items = list(rep, e, expected, true)?;
    let mut out: Vec<ControllerAddress> = Vec::new();
    let mut ok = true;
    for item in items {
        let Some(t) = text_node(rep, item, s::CONTROLLERS_KEY, expected) else {
            ok = false;
            continue;
        };
        for part in t.split(',').map(str::trim) {
            let (id, address) = match part.split_once('@') {
                Some((id, address)) => match id.parse::<i32>() {
                    Ok(id) if id >= 0 => (Some(id), address),
                    _ => {
                        rep.add(
                            item.pos,
                            format!("'{id}' is not a node id"),
                            Some("a node id from 0, as in 3000@controller-1:9093".into()),
                        );
                        ok = false;
                        continue;
                    }
                },
                None => (None, part),
            };
            if let Err((m, x)) = checks::host_port(address) {
                rep.add(item.pos, m, Some(x));
                ok = false;
                continue;
            }
            if out.iter().any(|c| c.address == address) {
                rep.add(
                    item.pos,
                    format!("controller {address} is listed twice"),
                    Some("each controller once".into()),
                );
                ok = false;
                continue;
            }
            out.push(ControllerAddress {
                id,
                address: address.to_string(),
            });
        }
    }
    ok.then_some(out)
}

fn bootstrap(rep: &mut Report, e: &Entry) -> Option<Vec<String>> {
    let expected = "a list of host:port addresses";
    let items = list(rep, e, expected, true)?;
    if items.is_empty() {
        rep.add(
            e.key_pos,
            "bootstrap_servers is empty".into(),
            Some("at least one host:port address".into()),
        );
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for item in items {
        let Some(t) = text_node(rep, item, "bootstrap_servers", expected) else {
            ok = false;
            continue;
        };
        // A comma-separated string is how Kafka tools take this list; accepting it
        // saves a round trip for people pasting from a properties file.
        for part in t.split(',').map(str::trim) {
            match checks::host_port(part) {
                Ok(()) => out.push(part.to_string()),
                Err((m, x)) => {
                    rep.add(item.pos, m, Some(x));
                    ok = false;
                }
            }
        }
    }
    ok.then_some(out)
}
