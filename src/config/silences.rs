//! The top-level `silences:` list: planned quiet written into the file (a maintenance
//! window known in advance). Each entry is checked by the same rules as a silence added
//! through the HTTP API, with the file's position in every message.

use std::collections::HashMap;
use std::time::SystemTime;

use super::ctx::Ctx;
use super::read::{list, text, Fields};
use super::yaml::{Entry, Node, Pos};
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
        match silence(cx, item, i, &known) {
            Some(s) => out.push(s),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// One entry's fields as written, each with where it was written.
struct Written {
    cluster: Option<(String, Pos)>,
    broker: Option<(String, Pos)>,
    kind: Option<(String, Pos)>,
    starts_at: Option<(String, Pos)>,
    ends_at: Option<(String, Pos)>,
    comment: Option<(String, Pos)>,
}

impl Written {
    fn read(cx: &mut Ctx, f: &mut Fields) -> Written {
        let mut read = |key: &'static str, expected: &str| {
            f.get(key).and_then(|entry| {
                text(&mut cx.rep, entry, expected).map(|t| (t.value, entry.value.pos))
            })
        };
        Written {
            cluster: read("cluster", "a configured cluster's name"),
            broker: read("broker", "a broker id"),
            kind: read("kind", "an incident kind, e.g. broker or under_replicated"),
            starts_at: read("starts_at", "an RFC 3339 time, e.g. 2026-12-01T22:00:00Z"),
            ends_at: read("ends_at", "an RFC 3339 time, e.g. 2026-12-02T02:00:00Z"),
            comment: read("comment", "why, for the next person"),
        }
    }

    /// Where the field a problem names was written (the message names the field), else
    /// `ends_at`, which every silence has.
    fn pos_of(&self, problem: &str) -> Option<Pos> {
        [
            ("cluster", &self.cluster),
            ("kind", &self.kind),
            ("comment", &self.comment),
            ("starts_at", &self.starts_at),
            ("ends_at", &self.ends_at),
        ]
        .into_iter()
        .find(|(name, v)| problem.contains(name) && v.is_some())
        .and_then(|(_, v)| v.as_ref().map(|(_, p)| *p))
        .or_else(|| self.ends_at.as_ref().map(|(_, p)| *p))
    }

    fn request(&self, broker: Option<i32>) -> Request {
        let value = |v: &Option<(String, Pos)>| v.as_ref().map(|(x, _)| x.clone());
        Request {
            cluster: value(&self.cluster),
            broker,
            kind: value(&self.kind),
            starts_at: value(&self.starts_at),
            ends_at: value(&self.ends_at),
            duration: None,
            comment: value(&self.comment).unwrap_or_default(),
            created_by: Some("config".into()),
        }
    }
}

/// Entry `i`, checked by the API's rules; `None` when a problem was reported.
fn silence(cx: &mut Ctx, item: &Node, i: usize, known: &[String]) -> Option<Silence> {
    let mut f = Fields::open(&mut cx.rep, item, None, format!("silences[{i}]"))?;
    let w = Written::read(cx, &mut f);
    // Offered by the API, not here: said once, where it is written.
    if let Some(d) = f.get_unlisted("duration") {
        cx.rep.add(
            d.key_pos,
            format!("silences[{i}]: a silence in the file ends at a written time: use ends_at, not duration"),
            Some("ends_at: an RFC 3339 time, e.g. 2026-12-02T02:00:00Z".into()),
        );
        f.finish(&mut cx.rep, &|_| None);
        return None;
    }
    f.finish(&mut cx.rep, &|_| None);
    let broker = match &w.broker {
        None => None,
        Some((b, pos)) => match b.trim().parse::<i32>() {
            Ok(id) if id >= 0 => Some(id),
            _ => {
                cx.rep.add(
                    *pos,
                    format!("'{b}' is not a broker id"),
                    Some("a whole number, 0 or more".into()),
                );
                return None;
            }
        },
    };
    match w
        .request(broker)
        .check(known, SystemTime::now(), Origin::Config)
    {
        Ok(s) => Some(s),
        Err(why) => {
            let m = why.0;
            let pos = w.pos_of(&m).unwrap_or(item.pos);
            cx.rep
                .add(pos, format!("silences[{i}]: {m}"), Some(EXPECTED.into()));
            None
        }
    }
}
