//! The top-level `silences:` list: planned quiet written into the file (a maintenance
//! window known in advance). Each entry is checked by the same rules as a silence added
//! through the HTTP API, with the file's position in every message.

use std::collections::HashMap;
use std::time::SystemTime;

use super::ctx::Ctx;
use super::read::{list, text, text_node, Fields};
use super::yaml::{Entry, Node, Pos};
use crate::model::schedule::{self, Weekly};
use crate::model::silence::{parse_duration, silence_id, Origin, Request, Silence};

const EXPECTED: &str = "a list of silences, each with ends_at (RFC 3339) or weekly, and comment, and optionally cluster, broker, kind, starts_at";
const WEEKLY: &str = "weekly: {days: [sat, sun], start: \"02:00\", duration: 3h, zone: UTC}";
/// The end of a weekly silence that names none: it recurs for as long as the file says so.
const NO_END: &str = "9999-12-31T00:00:00Z";

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
    // Read on even when wrong, so every problem of the entry is said at once.
    let weekly = f.get("weekly").map(|e| weekly(cx, e, i));
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
    let weekly = match weekly {
        Some(None) => return None,
        Some(Some(w)) => Some(w),
        None => None,
    };
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
    let mut request = w.request(broker);
    if weekly.is_some() && request.ends_at.is_none() {
        request.ends_at = Some(NO_END.into());
    }
    match request.check(known, SystemTime::now(), Origin::Config) {
        Ok(mut s) => {
            if weekly.is_some() {
                s.weekly = weekly;
                s.id = silence_id(&s);
            }
            Some(s)
        }
        Err(why) => {
            let m = why.0;
            let pos = w.pos_of(&m).unwrap_or(item.pos);
            cx.rep
                .add(pos, format!("silences[{i}]: {m}"), Some(EXPECTED.into()));
            None
        }
    }
}

/// `silences[i].weekly`: days, start, duration and zone (UTC when not written), each
/// checked where it is written.
fn weekly(cx: &mut Ctx, e: &Entry, i: usize) -> Option<Weekly> {
    let mut f = Fields::open(
        &mut cx.rep,
        &e.value,
        Some(e),
        format!("silences[{i}].weekly"),
    )?;
    let days = f.get("days");
    let start = f.get("start");
    let length = f.get("duration");
    let zone = f.get("zone");
    f.finish(&mut cx.rep, &|_| None);
    let mut ok = true;
    let mut need = |key: &str, v: Option<&Entry>| {
        if v.is_none() {
            f.missing(&mut cx.rep, key, WEEKLY.into());
            ok = false;
        }
    };
    need("days", days);
    need("start", start);
    need("duration", length);
    if !ok {
        return None;
    }
    let days = weekly_days(cx, days?);
    let start = weekly_field(cx, start?, schedule::parse_start);
    let length = weekly_field(cx, length?, |t| {
        parse_duration(t).and_then(|d| schedule::check_length(d, t))
    });
    let offset = match zone {
        None => Some(0),
        Some(z) => weekly_field(cx, z, schedule::parse_zone),
    };
    Some(Weekly {
        days: days?,
        start_minute: start?,
        length_secs: length?,
        offset_secs: offset?,
    })
}

fn weekly_days(cx: &mut Ctx, e: &Entry) -> Option<Vec<u8>> {
    let expected = "days of the week, e.g. [sat, sun]";
    let items = list(&mut cx.rep, e, expected, true)?;
    let names: Vec<String> = items
        .iter()
        .map(|n| text_node(&mut cx.rep, n, "days", expected))
        .collect::<Option<_>>()?;
    match schedule::parse_days(&names) {
        Ok(d) => Some(d),
        Err(m) => {
            cx.rep
                .add(e.value.pos, format!("{}: {m}", e.key), Some(WEEKLY.into()));
            None
        }
    }
}

/// One scalar field of `weekly`, read by `parse`; a problem at its value.
fn weekly_field<T>(cx: &mut Ctx, e: &Entry, parse: fn(&str) -> Result<T, String>) -> Option<T> {
    let t = text(&mut cx.rep, e, WEEKLY)?;
    match parse(&t.value) {
        Ok(v) => Some(v),
        Err(m) => {
            cx.rep
                .add(e.value.pos, format!("{}: {m}", e.key), Some(WEEKLY.into()));
            None
        }
    }
}
