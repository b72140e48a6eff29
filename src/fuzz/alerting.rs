//! What peers, Slack and the silences' writers hand alerting: a peer's answer to
//! `/api/v1/peer`, Slack's Web API answers, and silences from the API or the saved file.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::{now, Input};
use crate::alert::notify::slack_bot::api;
use crate::alert::peers::{self, Delivery, Peers, View};
use crate::alert::silence::Silences;
use crate::model::silence::{to_json, Origin, Request};

const TAKEOVER: Duration = Duration::from_secs(10);

/// A peer's answer body, parsed as `alert::peers::sync` parses it once its signature
/// holds (a peer with the key may still be buggy), then taken in: heard (its deliveries
/// kept), whose turn it is for events like each it delivered, and its silences merged
/// into this instance's, each checked as the API checks one.
pub fn peer_answer(data: &[u8]) {
    let Ok(answer) = peers::parse_answer(data) else {
        return;
    };
    let now = now();
    let me = "watchdog-b";
    let peers = Peers::new(me, TAKEOVER, Duration::from_secs(1));
    peers.heard("http://watchdog-a:9644", &answer, now);
    let _ = peers.stats(now);
    let views = BTreeMap::from([(
        answer.instance_id.clone(),
        View {
            url: "http://watchdog-a:9644".into(),
            clusters: answer.clusters.clone(),
            deliveries: answer.deliveries.clone(),
            seen_at: now,
        },
    )]);
    let cluster = answer.clusters.first().map_or("fuzz", String::as_str);
    for d in answer.deliveries.iter().take(16) {
        // This instance's own event like the one the peer delivered, happening now.
        let mine = Delivery {
            seq: 0,
            at: now,
            ..d.clone()
        };
        let _ = peers::turn(me, &views, &BTreeSet::new(), cluster, &mine, now, TAKEOVER);
    }
    let mut silences = Silences::default();
    let known = ["payments".to_string(), "orders".to_string()];
    let merged = silences.merge(answer.silences, &known, now);
    for (id, why) in &merged.refused {
        let _ = format!("{id}: {why}");
    }
    peers.silences_refused(&answer.instance_id, merged.refused);
    show(&silences);
}

/// `[tag]` (even: chat.postMessage, odd: chat.update), `[HTTP status: u16]`, `[n]` and n
/// bytes of `Retry-After`, then the body: judged as the Slack bot judges an answer.
pub fn slack_answer(data: &[u8]) {
    let mut input = Input::new(data);
    let method = if input.byte() % 2 == 0 {
        api::POST_MESSAGE
    } else {
        api::UPDATE
    };
    let status = input.u16();
    let n = usize::from(input.byte());
    let retry_after = std::str::from_utf8(input.take(n)).ok();
    let answer = api::judge(
        method,
        status,
        retry_after,
        input.rest(),
        now(),
        Duration::from_secs(300),
    );
    let _ = format!("{answer:?}");
}

/// `[tag]` (even: a request to the silences API, odd: a saved `silences.json`), then the
/// JSON. A request is checked as the API checks it and added; either way the silences are
/// shown as the API and `/status` show them, expired, and saved: what was saved must load
/// again with the same silences.
pub fn silences(data: &[u8]) {
    let mut input = Input::new(data);
    let from_file = input.byte() % 2 == 1;
    let body = input.rest();
    let now = now();
    let mut store = if from_file {
        match Silences::from_file_bytes(body) {
            Ok(s) => s,
            Err(_) => return,
        }
    } else {
        let Ok(request) = serde_json::from_slice::<Request>(body) else {
            return;
        };
        let clusters = ["payments".to_string(), "orders".to_string()];
        let mut store = Silences::default();
        match request.check(&clusters, now, Origin::Api) {
            Ok(s) => {
                let _ = store.add(s, now);
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
        store
    };
    show(&store);
    let ids: Vec<String> = store.runtime().iter().map(|s| s.id.clone()).collect();
    for id in &ids {
        let _ = store.expire(id, now + Duration::from_secs(1));
    }
    store.prune(now + Duration::from_secs(2 * 86_400));
    let saved = serde_json::to_vec_pretty(&store.runtime()).expect("silences serialize");
    let loaded = Silences::from_file_bytes(&saved).expect("a saved silences file loads");
    assert_eq!(
        loaded.runtime().iter().map(|s| &s.id).collect::<Vec<_>>(),
        store.runtime().iter().map(|s| &s.id).collect::<Vec<_>>(),
        "the silences saved are not the silences loaded"
    );
}

/// Every silence as the API lists it, as `/status` and the logs describe it.
fn show(silences: &Silences) {
    let now = now();
    for s in silences.all() {
        let _ = to_json(&s, now);
        let _ = s.describe();
        let _ = s.mark();
    }
    let _ = silences.active(now);
}
