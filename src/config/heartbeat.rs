//! The top-level `heartbeat:` block: the dead man's switch (`alert::heartbeat`), a URL
//! called every `interval_secs` while the watchdog sees its clusters.

use std::time::Duration;

use super::checks;
use super::ctx::Ctx;
use super::read::{choice, int, Fields};
use super::schema as s;
use super::secret::{readable_file, secret, Need};
use super::types::{HeartbeatConfig, Secret};
use super::yaml::Entry;

pub(crate) fn heartbeat(cx: &mut Ctx, e: Option<&Entry>) -> Option<Option<HeartbeatConfig>> {
    let Some(e) = e.filter(|e| !e.value.is_null()) else {
        return Some(None);
    };
    let mut f = Fields::open(&mut cx.rep, &e.value, Some(e), "heartbeat".into())?;
    let url = secret(cx, &mut f, &s::HEARTBEAT_URL, Need::Required);
    let format_entry = f.get(s::HEARTBEAT_FORMAT);
    let interval_entry = f.get(s::HEARTBEAT_INTERVAL.key);
    let timeout_entry = f.get(s::HEARTBEAT_TIMEOUT.key);
    let ca_entry = f.get(s::HEARTBEAT_CA_FILE);
    f.finish(&mut cx.rep, &|_| None);
    // Every key is read whatever the others gave, so all their problems show at once.
    let format = format_entry.map_or(Some(s::HEARTBEAT_FORMAT_DEFAULT), |x| {
        choice(&mut cx.rep, x, s::HEARTBEAT_FORMATS).map(|v| v.value)
    });
    let read = |cx: &mut Ctx, entry: Option<&Entry>, spec: &s::IntSpec| match entry {
        None => Some(spec.default),
        Some(x) => int(&mut cx.rep, x, spec).map(|v| v.value),
    };
    let interval = read(cx, interval_entry, &s::HEARTBEAT_INTERVAL);
    let timeout = read(cx, timeout_entry, &s::HEARTBEAT_TIMEOUT);
    let ca_file = ca_entry.map_or(Some(None), |c| readable_file(cx, c).map(Some));
    let url = url
        .ok()
        .flatten()
        .and_then(|u| match checks::webhook_url(&u.value) {
            // With its file, so the URL follows it (`config::live`).
            Ok(target) => Some((
                match &u.file {
                    Some(file) => Secret::from_file(u.value.trim(), file.clone()),
                    None => Secret::new(u.value.trim()),
                },
                target,
            )),
            Err((m, x)) => {
                cx.rep
                    .add(u.pos, format!("heartbeat.{}: {m}", u.key), Some(x));
                None
            }
        });
    let (interval, timeout) = (interval?, timeout?);
    // A beat that may outlast the interval would run into the next one.
    if timeout >= interval * 1000 {
        cx.rep.add(
            timeout_entry.map_or(e.key_pos, |x| x.value.pos),
            format!("heartbeat.timeout_ms {timeout} is not shorter than interval_secs {interval}"),
            Some(format!("at most {} ms", interval * 1000 - 1)),
        );
        return None;
    }
    let (url, target) = url?;
    Some(Some(HeartbeatConfig {
        url,
        target,
        format: format?,
        interval: Duration::from_secs(interval),
        timeout: Duration::from_millis(timeout),
        ca_file: ca_file?,
    }))
}
