//! The top-level `silences:` list: planned quiet written into the file (a maintenance
//! window known in advance). Each entry is checked by the same rules as a silence added
//! through the HTTP API, with the file's position in every message.

use std::collections::HashMap;
use std::time::SystemTime;

use super::ctx::Ctx;
use super::read::{list, text, Fields};
use super::yaml::{Entry, Pos};
use crate::model::silence::{Origin, Request, Silence};

const EXPECTED: &str = "a list of silences, each with ends_at (RFC 3339) and comment, and optionally cluster, broker, kind, starts_at";

pub(crate) fn silences(
    cx: &mut Ctx,
    e: Option<&Entry>,
    clusters: &HashMap<String, Pos>,
) -> Option<Vec<Silence>> {
    let Some(e) = e else {
        return Some(Vec::new());
    };
    if e.value.is_null() {
        return Some(Vec::new());
    }
    let items = list(&mut cx.rep, e, EXPECTED, false)?;
    let mut known: Vec<String> = clusters.keys().cloned().collect();
    known.sort_unstable();
    let mut out = Vec::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let Some(mut f) = Fields::open(&mut cx.rep, item, None, format!("silences[{i}]")) else {
            ok = false;
            continue;
        };
        let mut read = |key: &'static str, expected: &str| {
            f.get(key).and_then(|entry| {
                text(&mut cx.rep, entry, expected).map(|t| (t.value, entry.value.pos))
            })
        };
        let cluster = read("cluster", "a configured cluster's name");
        let broker = read("broker", "a broker id");
        let kind = read("kind", "an incident kind, e.g. broker or under_replicated");
        let starts_at = read("starts_at", "an RFC 3339 time, e.g. 2026-12-01T22:00:00Z");
        let ends_at = read("ends_at", "an RFC 3339 time, e.g. 2026-12-02T02:00:00Z");
        let comment = read("comment", "why, for the next person");
        // Offered by the API, not here: said once, where it is written.
        if let Some(d) = f.get_unlisted("duration") {
            cx.rep.add(
                d.key_pos,
                format!("silences[{i}]: a silence in the file ends at a written time: use ends_at, not duration"),
                Some("ends_at: an RFC 3339 time, e.g. 2026-12-02T02:00:00Z".into()),
            );
            ok = false;
            f.finish(&mut cx.rep, &|_| None);
            continue;
        }
        f.finish(&mut cx.rep, &|_| None);
        let broker_id = match &broker {
            None => None,
            Some((b, pos)) => match b.trim().parse::<i32>() {
                Ok(id) if id >= 0 => Some(id),
                _ => {
                    cx.rep.add(
                        *pos,
                        format!("'{b}' is not a broker id"),
                        Some("a whole number, 0 or more".into()),
                    );
                    ok = false;
                    continue;
                }
            },
        };
        let request = Request {
            cluster: cluster.as_ref().map(|(c, _)| c.clone()),
            broker: broker_id,
            kind: kind.as_ref().map(|(k, _)| k.clone()),
            starts_at: starts_at.as_ref().map(|(t, _)| t.clone()),
            ends_at: ends_at.as_ref().map(|(t, _)| t.clone()),
            duration: None,
            comment: comment.as_ref().map(|(c, _)| c.clone()).unwrap_or_default(),
            created_by: Some("config".into()),
        };
        match request.check(&known, SystemTime::now(), Origin::Config) {
            Ok(s) => out.push(s),
            Err(why) => {
                // The message names the field; point at it when it was written.
                let m = why.0;
                let pos = [
                    ("cluster", &cluster),
                    ("kind", &kind),
                    ("comment", &comment),
                    ("starts_at", &starts_at),
                    ("ends_at", &ends_at),
                ]
                .into_iter()
                .find(|(name, v)| m.contains(name) && v.is_some())
                .and_then(|(_, v)| v.as_ref().map(|(_, p)| *p))
                .or_else(|| ends_at.as_ref().map(|(_, p)| *p))
                .unwrap_or(item.pos);
                cx.rep
                    .add(pos, format!("silences[{i}]: {m}"), Some(EXPECTED.into()));
                ok = false;
            }
        }
    }
    ok.then_some(out)
}
