//! Walks the document and builds the resolved `Config`. The top level is read here; a
//! cluster (with the `defaults:` merge) in `cluster`, a webhook in `webhook`, and values
//! read from the environment or from files in `secret`.

use std::collections::HashMap;
use std::path::PathBuf;

use super::checks;
use super::cluster::cluster;
use super::ctx::Ctx;
use super::keys::SlotKind;
use super::layer::{empty_layer, layer};
use super::read::{list, text, Fields, Set};
use super::report::Report;
use super::schema as s;
use super::types::*;
use super::webhook::webhook;
use super::yaml::{shorten, Entry, Kind, Node, Pos};

pub(crate) fn config(cx: &mut Ctx, root: Option<&Node>) -> Option<Config> {
    let expected_top = "a mapping with at least a 'clusters' list";
    let root = match root {
        Some(n) if !n.is_null() => n,
        _ => {
            cx.rep.add(
                Pos::START,
                "the configuration is empty".into(),
                Some(expected_top.into()),
            );
            return None;
        }
    };
    if !matches!(root.kind, Kind::Map(_)) {
        cx.rep.add(
            root.pos,
            format!("the top level is {}", root.describe()),
            Some(expected_top.into()),
        );
        return None;
    }
    let mut f = Fields::open(&mut cx.rep, root, None, String::new())?;

    let instance_id = instance_id(cx, f.get("instance_id"));
    let http = super::http::http(cx, f.get("http"));
    let log = s::LogLayer::read_block(&mut cx.rep, &mut f, "log")
        .alone()
        .values();
    let state_dir = state_dir(cx, f.get("state_dir"));
    let defaults = defaults(cx, f.get("defaults"));
    let clusters_entry = f.get("clusters");
    let webhooks_entry = f.get("webhooks");
    let silences_entry = f.get("silences");
    let peers_entry = f.get("peers");
    let peers = super::peers::peers(cx, peers_entry);
    let heartbeat = super::heartbeat::heartbeat(cx, f.get("heartbeat"));

    let mut names: HashMap<String, Pos> = HashMap::new();
    let clusters = match clusters_entry {
        None => {
            f.missing(
                &mut cx.rep,
                "clusters",
                "a list of clusters, each with name and bootstrap_servers".into(),
            );
            None
        }
        Some(e) => cluster_list(cx, e, &defaults, &mut names),
    };
    let webhooks = match webhooks_entry {
        Some(e) if !e.value.is_null() => webhook_list(cx, e, &names),
        _ => Some(Vec::new()),
    };
    f.finish(&mut cx.rep, &|_| None);
    let silences = super::silences::silences(cx, silences_entry, &names);

    let (Some(clusters), Some(webhooks), Some(peers), Some(heartbeat)) =
        (clusters, webhooks, peers, heartbeat)
    else {
        return None;
    };
    let http = http?;
    if let (Some(p), Some(auth), Some(e)) = (&peers, &http.auth, peers_entry) {
        // Sent with every ask, the key is kept apart from what writes silences.
        if auth.holds(&p.key) {
            cx.rep.add(
                e.key_pos,
                "the peer key is the http.auth credential: a peer would hold what writes silences"
                    .into(),
                Some("a peer key of its own (peers.key_file or key_env)".into()),
            );
            return None;
        }
    }
    Some(Config {
        instance_id: instance_id?,
        http_listen: http.listen,
        http_external_url: http.external_url,
        http_runbooks_url: http.runbooks_url,
        http_tls: http.tls,
        http_auth: http.auth,
        log: log?,
        state_dir: state_dir?,
        clusters,
        webhooks,
        silences: silences?,
        peers,
        heartbeat,
        warnings: Vec::new(),
    })
}

/// The `http:` block and `state_dir` alone (`config::load_client_section`): the other
/// keys are neither read nor reported.
pub(crate) fn client_section(cx: &mut Ctx, root: Option<&Node>) -> Option<super::ClientSection> {
    let root = match root {
        Some(n) if matches!(n.kind, Kind::Map(_)) => n,
        Some(n) => {
            cx.rep.add(
                n.pos,
                format!("the top level is {}", n.describe()),
                Some("a mapping with at least a 'clusters' list".into()),
            );
            return None;
        }
        None => {
            cx.rep.add(
                Pos::START,
                "the configuration is empty".into(),
                Some("a mapping with at least a 'clusters' list".into()),
            );
            return None;
        }
    };
    let mut f = Fields::open(&mut cx.rep, root, None, String::new())?;
    let http = super::http::http(cx, f.get("http"));
    let state_dir = state_dir(cx, f.get("state_dir"));
    let (http, state_dir) = (http?, state_dir?);
    Some(super::ClientSection {
        http_listen: http.listen,
        http_tls: http.tls,
        http_auth: http.auth,
        state_dir,
    })
}

fn instance_id(cx: &mut Ctx, e: Option<&Entry>) -> Option<String> {
    let Some(e) = e else {
        return Some(default_instance_id());
    };
    let t = text(&mut cx.rep, e, "a name for this watchdog")?;
    match checks::instance_id(&t.value, s::INSTANCE_ID_MAX_CHARS) {
        Ok(()) => Some(t.value),
        Err((m, x)) => {
            cx.rep.add(t.value_pos, m, Some(x));
            None
        }
    }
}

fn state_dir(cx: &mut Ctx, e: Option<&Entry>) -> Option<PathBuf> {
    let Some(e) = e else {
        return Some(PathBuf::from(s::STATE_DIR_DEFAULT));
    };
    let t = text(&mut cx.rep, e, "a directory path")?;
    if t.value.trim().is_empty() {
        cx.rep.add(
            t.value_pos,
            "state_dir is empty".into(),
            Some("a directory path".into()),
        );
        return None;
    }
    Some(cx.path(&t.value))
}

/// The `defaults:` block as a layer under every cluster's own keys.
fn defaults(cx: &mut Ctx, e: Option<&Entry>) -> super::layer::Layer {
    let Some(e) = e else {
        return empty_layer(SlotKind::Unset);
    };
    let Some(mut df) = Fields::open(&mut cx.rep, &e.value, Some(e), "defaults".into()) else {
        return empty_layer(SlotKind::Bad);
    };
    let layer = layer(cx, &mut df);
    df.finish(&mut cx.rep, &|k| {
        s::CLUSTER_ONLY_KEYS
            .contains(&k)
            .then(|| format!("'{k}' cannot be set in defaults, only in each cluster"))
    });
    layer
}

/// Every cluster, each read whatever happened to the others; `names` gets their names.
fn cluster_list(
    cx: &mut Ctx,
    e: &Entry,
    defaults: &super::layer::Layer,
    names: &mut HashMap<String, Pos>,
) -> Option<Vec<ClusterConfig>> {
    let items = list(&mut cx.rep, e, "a list of clusters", false)?;
    if items.is_empty() {
        cx.rep.add(
            e.key_pos,
            "clusters is empty".into(),
            Some("at least one cluster".into()),
        );
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let (name, c) = cluster(cx, item, i, defaults);
        if let Some(n) = name {
            unique(&mut cx.rep, names, n, "cluster");
        }
        match c {
            Some(c) => out.push(c),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// Every webhook, each read whatever happened to the others.
fn webhook_list(
    cx: &mut Ctx,
    e: &Entry,
    clusters: &HashMap<String, Pos>,
) -> Option<Vec<WebhookConfig>> {
    let items = list(&mut cx.rep, e, "a list of webhooks", false)?;
    let mut hook_names: HashMap<String, Pos> = HashMap::new();
    let mut out = Vec::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let (name, w) = webhook(cx, item, i, clusters);
        if let Some(n) = name {
            unique(&mut cx.rep, &mut hook_names, n, "webhook");
        }
        match w {
            Some(w) => out.push(w),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// Names label metrics and route notifications, so the second use of one is reported
/// where it is written, with the line of the first.
fn unique(rep: &mut Report, seen: &mut HashMap<String, Pos>, name: Set<String>, what: &str) {
    if let Some(first) = seen.get(&name.value) {
        rep.add(
            name.value_pos,
            format!(
                "duplicate {what} name '{}' (first used at line {})",
                shorten(&name.value),
                first.line
            ),
            Some(format!("a name not used by another {what}")),
        );
    } else {
        seen.insert(name.value, name.value_pos);
    }
}
