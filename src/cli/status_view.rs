//! `kafka-watchdog status`: a running daemon's `/status` as a terminal page that refreshes
//! in place. Fetching is separate from rendering, which is pure (the document, the clock
//! and the terminal's traits come in, text comes out) so every shape of `/status` can be
//! tested from a fixture.
//!
//! The document is read as untyped JSON: a `status` built from one version must show what
//! it can of a daemon of another, where a typed parse would refuse a renamed field.

use std::fmt::Write as _;

use serde_json::Value;

use crate::judge::report::Severity;

use super::client::StatusError;

fn cluster_severity(c: &Value) -> Severity {
    match c["severity"].as_str() {
        Some("ok") => Severity::Ok,
        Some("warning") => Severity::Warning,
        Some("critical") => Severity::Critical,
        // Unreachable, or a word this version does not know: not known to be fine.
        _ => Severity::Unreachable,
    }
}

/// The worst cluster's severity, as `check` reports it: the exit code is its `exit_code`.
/// A daemon that has completed no round yet knows nothing: unreachable.
pub fn worst(doc: &Value) -> Severity {
    let clusters = doc["clusters"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    if clusters.is_empty() {
        return Severity::Unreachable;
    }
    clusters
        .iter()
        .map(cluster_severity)
        .max()
        .unwrap_or(Severity::Unreachable)
}

/// How the page is drawn.
#[derive(Debug, Clone)]
pub struct View {
    /// Unix seconds, for "time in state" and "ago".
    pub now: f64,
    /// ANSI colours (only on a terminal, and not with NO_COLOR).
    pub color: bool,
    /// Cut lines to this many characters (the terminal's width), or not at all.
    pub width: Option<usize>,
}

/// Whether to colour: on a terminal, unless NO_COLOR is set to anything non-empty
/// (https://no-color.org).
pub fn use_color(is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    is_terminal && no_color.is_none_or(|v| v.is_empty())
}

const RED: &str = "31";

const GREEN: &str = "32";

const YELLOW: &str = "33";

const BOLD: &str = "1";

fn paint(view: &View, code: &str, text: &str) -> String {
    if view.color {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

fn state_color(state: &str) -> &'static str {
    match state {
        "healthy" | "ok" => GREEN,
        "zombie" | "down" | "critical" | "unreachable" => RED,
        _ => YELLOW,
    }
}

/// A padded cell: the padding is computed on the plain text, so colours do not shift
/// the columns.
fn cell(view: &View, code: &str, text: &str, width: usize) -> String {
    let pad = width.saturating_sub(text.chars().count());
    format!("{}{}", paint(view, code, text), " ".repeat(pad))
}

/// "3s", "4m05s", "2h10m", "3d04h".
pub fn duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "-".into();
    }
    let s = secs.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// The RULE and EVIDENCE cells of a node's row: its worst rule (and how many more fired),
/// and every rule's detail.
fn rules_and_evidence(hits: &Value) -> (String, String) {
    let hits = hits.as_array().map(Vec::as_slice).unwrap_or(&[]);
    let Some(first) = hits.first() else {
        return ("-".into(), "-".into());
    };
    let rule = text(&first["rule"], "?");
    let rules = if hits.len() > 1 {
        format!("{rule} (+{})", hits.len() - 1)
    } else {
        rule.to_string()
    };
    let evidence = hits
        .iter()
        .map(|h| text(&h["detail"], ""))
        .collect::<Vec<_>>()
        .join("; ");
    (rules, evidence)
}

fn address(a: &Value) -> &str {
    match a.as_str() {
        Some(a) if !a.is_empty() => a,
        _ => "?",
    }
}

fn text<'a>(v: &'a Value, default: &'a str) -> &'a str {
    v.as_str().unwrap_or(default)
}

fn ago(view: &View, t: &Value) -> Option<String> {
    t.as_f64().map(|t| duration(view.now - t))
}

/// The continuous liveness check in a few characters: its last answer time while it
/// answers, else how long it has been silent or that its port refuses.
fn liveness(l: &Value) -> String {
    if l.is_null() {
        return "-".into();
    }
    let silence = l["silence_seconds"].as_f64().unwrap_or(0.0);
    let threshold = l["threshold_seconds"].as_f64().unwrap_or(f64::INFINITY);
    if l["refused"].as_bool() == Some(true) {
        format!("refused {}", duration(silence))
    } else if silence >= threshold {
        format!("silent {}", duration(silence))
    } else {
        match l["last_latency_seconds"].as_f64() {
            Some(s) if s < 1.0 => format!("{:.0} ms", s * 1000.0),
            Some(s) => format!("{s:.1} s"),
            None => "-".into(),
        }
    }
}

fn render_cluster(out: &mut Vec<String>, view: &View, c: &Value) {
    let brokers = c["brokers"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    out.push(cluster_headline(view, c, brokers.len()));
    for f in c["bootstrap_failures"].as_array().into_iter().flatten() {
        out.push(format!(
            "  bootstrap {}: {} ({})",
            text(&f["address"], "?"),
            paint(view, RED, text(&f["failure"]["kind"], "failed")),
            text(&f["failure"]["detail"], "")
        ));
    }
    render_brokers(out, view, brokers);
    render_quorum(out, view, &c["quorum"]);
    render_coordinators(out, view, "group", &c["group_coordinators"]);
    render_coordinators(out, view, "transaction", &c["txn_coordinators"]);
    render_partitions(out, view, &c["partitions"], !brokers.is_empty());
    let split = c["split_brain"].as_array().map_or(0, Vec::len);
    if split > 0 {
        out.push(format!(
            "  {}",
            paint(
                view,
                RED,
                &format!("split brain: {split} stale leadership claim(s)")
            )
        ));
    }
    if let Some(canary) = c.get("canary").filter(|v| !v.is_null()) {
        out.push(canary_line(view, canary));
    }
}

/// `CRITICAL cluster orders (id): round 12, 3 broker(s), 40 partition(s), reached 2 s ago`.
fn cluster_headline(view: &View, c: &Value, brokers: usize) -> String {
    let sev = cluster_severity(c);
    let mut head = format!(
        "{} cluster {}",
        paint(
            view,
            &format!("{BOLD};{}", state_color(&sev.as_label().to_lowercase())),
            sev.as_label()
        ),
        paint(view, BOLD, text(&c["name"], "?"))
    );
    if let Some(id) = c["cluster_id"].as_str() {
        let _ = write!(head, " ({id})");
    }
    let _ = write!(
        head,
        ": round {}, {brokers} broker(s), {} partition(s)",
        c["round"].as_u64().unwrap_or(0),
        c["partitions"]["observed"].as_u64().unwrap_or(0)
    );
    match ago(view, &c["last_success_at"]) {
        Some(a) if c["reachable"].as_bool() == Some(true) => {
            let _ = write!(head, ", reached {a} ago");
        }
        Some(a) => {
            let _ = write!(
                head,
                ", {} (last reached {a} ago)",
                paint(view, RED, "not reached")
            );
        }
        None => {
            let _ = write!(
                head,
                ", {}",
                paint(view, RED, "never reached since the watchdog started")
            );
        }
    }
    head
}

/// A row per broker: state, for how long, liveness, first rule and evidence.
fn render_brokers(out: &mut Vec<String>, view: &View, brokers: &[Value]) {
    if !brokers.is_empty() {
        out.push(format!(
            "  {:<6} {:<22} {:<9} {:>7}  {:<14} {:<24} EVIDENCE",
            "BROKER", "ADDRESS", "STATE", "FOR", "LIVENESS", "RULE"
        ));
    }
    for b in brokers {
        let state = text(&b["state"], "?");
        let (rules, evidence) = rules_and_evidence(&b["hits"]);
        let address = address(&b["address"]);
        out.push(format!(
            "  {:<6} {:<22} {} {:>7}  {:<14} {:<24} {}",
            b["broker"].as_i64().map_or("?".into(), |i| i.to_string()),
            address,
            cell(view, state_color(state), state, 9),
            ago(view, &b["state_since"]).unwrap_or_else(|| "-".into()),
            liveness(&b["liveness"]),
            rules,
            evidence
        ));
    }
}

/// `partitions: offline 0, under_min_isr 0, ...`, the non-zero ones in colour.
fn render_partitions(out: &mut Vec<String>, view: &View, p: &Value, has_brokers: bool) {
    let n = |k: &str| p[k].as_u64().unwrap_or(0);
    if n("observed") == 0 && !has_brokers {
        return;
    }
    let problems = [
        ("offline", n("offline")),
        ("under_min_isr", n("under_min_isr")),
        ("under_replicated", n("under_replicated")),
        ("leader_not_in_isr", n("leader_not_in_isr")),
    ];
    let line = problems
        .iter()
        .map(|(k, v)| {
            let s = format!("{k} {v}");
            match (*v, *k) {
                (0, _) => s,
                (_, "under_replicated") => paint(view, YELLOW, &s),
                _ => paint(view, RED, &s),
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    out.push(format!("  partitions: {line}"));
}

/// `canary <topic>: ready, 3/3 partition(s) written this round`.
fn canary_line(view: &View, canary: &Value) -> String {
    let state = text(&canary["status"]["state"], "?");
    let written = canary["partitions"]
        .as_array()
        .filter(|ps| !ps.is_empty())
        .map(|ps| {
            let ok = ps
                .iter()
                .filter(|p| !p["produce_seconds"].is_null())
                .count();
            format!(", {ok}/{} partition(s) written this round", ps.len())
        })
        .unwrap_or_default();
    let detail = canary["status"]["detail"]
        .as_str()
        .map(|d| format!(" ({d})"))
        .unwrap_or_default();
    format!(
        "  canary {}: {}{written}{detail}",
        text(&canary["topic"], "?"),
        paint(view, if state == "ready" { GREEN } else { YELLOW }, state)
    )
}

/// The group coordinators (issue 26): how many shards answered the probe and the slowest
/// answer, then a line per broker whose coordinator does not answer or answers errors.
/// Nothing when they are not probed.
fn render_coordinators(out: &mut Vec<String>, view: &View, kind: &str, g: &Value) {
    let Some(brokers) = g["brokers"].as_array() else {
        return;
    };
    if let Some(why) = g["blind"].as_str() {
        out.push(format!(
            "  {kind} coordinators: {}",
            paint(view, YELLOW, &format!("not probed ({why})"))
        ));
        return;
    }
    let shards = |b: &Value| b["shards"].as_array().map_or(0, Vec::len);
    let answered: usize = brokers
        .iter()
        .filter(|b| b["probe"] == "answered")
        .map(shards)
        .sum();
    let slowest = brokers
        .iter()
        .filter_map(|b| b["latency_seconds"].as_f64())
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
    let mut line = format!(
        "  {kind} coordinators: {answered}/{} shard(s) answered on {} broker(s)",
        g["offsets_partitions"].as_u64().unwrap_or(0),
        brokers.len()
    );
    if let Some(s) = slowest {
        let _ = write!(line, ", slowest {:.0} ms", s * 1000.0);
    }
    out.push(line);
    for b in brokers {
        let errors = b["errors"].as_array().map_or(0, Vec::len);
        let probe = text(&b["probe"], "?");
        if probe == "answered" && errors == 0 || probe == "not_yet" {
            continue;
        }
        let mut what = match probe {
            "unanswered" => format!(
                "{} probe(s) unanswered in a row{}",
                b["unanswered_in_a_row"].as_u64().unwrap_or(0),
                b["unanswered_seconds"]
                    .as_f64()
                    .map(|s| format!(" for {}", duration(s)))
                    .unwrap_or_default()
            ),
            "failed" => format!("probe failed: {}", text(&b["failure"], "?")),
            _ => String::new(),
        };
        if errors > 0 {
            if !what.is_empty() {
                what.push_str("; ");
            }
            let _ = write!(what, "{errors} shard(s) answer coordinator errors");
        }
        out.push(format!(
            "    broker {} ({} shard(s)): {}",
            b["broker"],
            shards(b),
            paint(view, RED, &what)
        ));
    }
}

/// The KRaft control plane (issue 25): the quorum's leader and progress, its problem when it
/// is out, and a row per controller. Nothing for a cluster whose quorum is not looked at.
fn render_quorum(out: &mut Vec<String>, view: &View, q: &Value) {
    if q.is_null() {
        return;
    }
    let leader = q["leader"]
        .as_i64()
        .map_or_else(|| paint(view, RED, "no leader"), |l| format!("leader {l}"));
    let mut line = format!("  quorum: {leader}");
    if let Some(e) = q["epoch"].as_i64() {
        let _ = write!(line, " (epoch {e})");
    }
    if let Some(hw) = q["high_watermark"].as_i64() {
        let _ = write!(line, ", high watermark {hw}");
    }
    if let Some(still) = q["high_watermark_still_seconds"].as_f64() {
        let _ = write!(line, ", still for {}", duration(still));
    }
    if let Some(kind) = q["problem"]["kind"].as_str() {
        let _ = write!(
            line,
            ", {}: {}",
            paint(view, RED, kind),
            text(&q["problem"]["detail"], "")
        );
    } else if q["settling"].as_bool() == Some(true) {
        let _ = write!(line, ", settling after an outage");
    }
    out.push(line);
    let controllers = q["controllers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if controllers.is_empty() {
        return;
    }
    out.push(format!(
        "  {:<10} {:<22} {:<9} {:<6} {:<24} EVIDENCE",
        "CONTROLLER", "ADDRESS", "STATE", "LEADS", "RULE"
    ));
    for ctl in controllers {
        let state = text(&ctl["state"], "?");
        let (rules, evidence) = rules_and_evidence(&ctl["hits"]);
        let address = address(&ctl["address"]);
        out.push(format!(
            "  {:<10} {:<22} {} {:<6} {:<24} {}",
            ctl["controller"]
                .as_i64()
                .map_or("?".into(), |i| i.to_string()),
            address,
            cell(view, state_color(state), state, 9),
            if ctl["leader"].as_bool() == Some(true) {
                "yes"
            } else {
                "-"
            },
            rules,
            evidence
        ));
    }
}

fn render_incidents(out: &mut Vec<String>, view: &View, doc: &Value) {
    let open: Vec<&Value> = doc["incidents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["resolved_at"].is_null())
        .collect();
    out.push(String::new());
    if open.is_empty() {
        out.push(format!("{}: none", paint(view, BOLD, "OPEN INCIDENTS")));
        return;
    }
    out.push(format!(
        "{} ({})",
        paint(view, BOLD, "OPEN INCIDENTS"),
        open.len()
    ));
    for i in open {
        let sev = text(&i["severity"], "?");
        let since = i["started_at"]
            .as_f64()
            // Incidents carry Unix milliseconds.
            .map(|ms| duration(view.now - ms / 1000.0))
            .unwrap_or_else(|| "-".into());
        // A silenced incident pages nobody; the view says so, and until when.
        let silenced = i["silenced"]["ends_at"]
            .as_f64()
            .map(|ms| {
                format!(
                    " [silenced {}: {}]",
                    duration(ms / 1000.0 - view.now),
                    text(&i["silenced"]["comment"], "")
                )
            })
            .unwrap_or_default();
        out.push(format!(
            "  {} {:<8} {:<20} for {:>7}  {}{silenced}",
            cell(view, state_color(sev), &sev.to_uppercase(), 8),
            text(&i["cluster"], "?"),
            text(&i["kind"], "?"),
            since,
            text(&i["summary"], "")
        ));
    }
}

fn render_webhooks(out: &mut Vec<String>, view: &View, doc: &Value) {
    for w in doc["webhooks"].as_array().into_iter().flatten() {
        let depth = w["queue_depth"].as_u64().unwrap_or(0);
        let dropped = w["dropped"].as_u64().unwrap_or(0);
        if depth == 0 && dropped == 0 {
            continue;
        }
        let mut line = format!(
            "  webhook {}: {depth} waiting, {dropped} dropped",
            text(&w["receiver"], "?")
        );
        if let Some(f) = w["last_failure"].as_str() {
            let _ = write!(line, ", last failure: {f}");
        }
        out.push(paint(view, YELLOW, &line));
    }
}

/// Cuts a line to `width` visible characters; escape sequences are not counted, and an
/// open colour is closed.
fn cut(line: &str, width: usize) -> String {
    let mut out = String::new();
    let (mut visible, mut in_escape, mut cut_short) = (0, false, false);
    for ch in line.chars() {
        if in_escape {
            out.push(ch);
            in_escape = ch != 'm';
            continue;
        }
        if ch == '\x1b' {
            in_escape = true;
            out.push(ch);
            continue;
        }
        if visible >= width {
            cut_short = true;
            continue;
        }
        out.push(ch);
        visible += 1;
    }
    if cut_short && out.contains('\x1b') {
        out.push_str("\x1b[0m");
    }
    out
}

/// The whole page for one `/status` document.
pub fn render(doc: &Value, source: &str, view: &View) -> String {
    let mut lines = Vec::new();
    lines.push(format!(
        "kafka-watchdog {} {} at {source}, overall {}",
        text(&doc["instance_id"], "?"),
        text(&doc["version"], "?"),
        {
            let w = worst(doc).as_label();
            paint(view, state_color(&w.to_lowercase()), w)
        }
    ));
    if doc["config_reload_success"].as_bool() == Some(false) {
        lines.push(paint(
            view,
            YELLOW,
            "the last configuration reload was refused: the previous configuration runs",
        ));
    }
    let clusters = doc["clusters"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    if clusters.is_empty() {
        lines.push("no cluster has completed a round yet".into());
    }
    for c in clusters {
        lines.push(String::new());
        render_cluster(&mut lines, view, c);
    }
    render_incidents(&mut lines, view, doc);
    render_webhooks(&mut lines, view, doc);
    let mut out = String::new();
    for l in lines {
        match view.width {
            Some(w) => out.push_str(&cut(&l, w)),
            None => out.push_str(&l),
        }
        out.push('\n');
    }
    out
}

/// The page when the daemon could not be asked.
pub fn render_error(e: &StatusError, view: &View) -> String {
    format!(
        "kafka-watchdog status: {}\n",
        paint(view, RED, &e.to_string())
    )
}

/// Moves the cursor home, then each line clears what the previous page left to its right
/// and the end clears below: no blank flash between pages, as a full clear would give.
pub fn frame(page: &str) -> String {
    let mut out = String::from("\x1b[H");
    for l in page.lines() {
        out.push_str(l);
        out.push_str("\x1b[K\n");
    }
    out.push_str("\x1b[J");
    out
}

/// The terminal's width, when stdout is one.
pub fn terminal_width() -> Option<usize> {
    crate::sys::terminal_columns()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../../tests/fixtures/status.json");
    /// started_at of the fixture's rounds.
    const ROUND_AT: f64 = 1_796_130_361.385_254_4;

    fn doc() -> Value {
        serde_json::from_str(FIXTURE).unwrap()
    }

    fn plain(now: f64) -> View {
        View {
            now,
            color: false,
            width: None,
        }
    }

    fn line_with<'a>(page: &'a str, needle: &str) -> &'a str {
        page.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{page}"))
    }

    #[test]
    fn brokers_with_state_rule_evidence_and_time_in_state() {
        let page = render(&doc(), "http://127.0.0.1:9644", &plain(ROUND_AT + 15.0));
        let zombie = line_with(&page, "127.0.0.12:9092");
        // 185 s before the round plus 15 s after it.
        assert!(
            zombie.contains("zombie") && zombie.contains("3m20s"),
            "{zombie}"
        );
        assert!(zombie.contains("no_answer (+1)"), "{zombie}");
        assert!(
            zombie.contains("no answer to Metadata within 3000 ms")
                && zombie.contains("missing from the ISR of all 9 partitions"),
            "{zombie}"
        );
        let down = line_with(&page, "127.0.0.13:9092");
        assert!(
            down.contains("down") && down.contains("57s") && down.contains("connection_refused")
        );
        assert!(zombie.contains("silent 3m05s"), "liveness: {zombie}");
        assert!(down.contains("refused 57s"), "liveness: {down}");
        assert!(
            line_with(&page, "127.0.0.11:9092").contains(" 3 ms "),
            "liveness: {page}"
        );
        let healthy = line_with(&page, "127.0.0.11:9092");
        assert!(
            healthy.contains("healthy") && healthy.ends_with(" -"),
            "{healthy}"
        );
        assert!(line_with(&page, "cluster lab").starts_with("CRITICAL cluster lab (ZjnBIDMbWeQRK3B5vMH2JQ): round 3, 4 broker(s), 9 partition(s), reached 15s ago"), "{page}");
        assert!(page.starts_with(
            "kafka-watchdog fixture 0.1.0 at http://127.0.0.1:9644, overall UNREACHABLE\n"
        ));
        assert!(!page.contains('\x1b'), "no colour asked: {page}");
    }

    #[test]
    fn a_cluster_never_reached_says_so_with_its_bootstrap_failures() {
        let page = render(&doc(), "x", &plain(ROUND_AT + 1.0));
        let head = line_with(&page, "cluster gone");
        assert!(
            head.starts_with("UNREACHABLE cluster gone: round 3, 0 broker(s)"),
            "{head}"
        );
        assert!(
            head.contains("never reached since the watchdog started"),
            "{head}"
        );
        assert!(page.contains(
            "  bootstrap 127.0.0.1:1: connection_refused (connection to 127.0.0.1:1 refused)\n\
             \x20 canary __kafka_watchdog_canary: missing (topic __kafka_watchdog_canary does not exist yet)\n"
        ), "{page}");
    }

    #[test]
    fn the_control_plane_has_its_quorum_line_and_a_row_per_controller() {
        let mut d = doc();
        d["clusters"][0]["quorum"] = serde_json::json!({
            "leader": 100,
            "epoch": 6,
            "high_watermark": 900,
            "high_watermark_still_seconds": 3.0,
            "problem": {"kind": "leader_not_advancing", "detail": "controller 100 applies nothing"},
            "settling": true,
            "controllers": [
                {"controller": 100, "address": "127.0.0.110:9093", "state": "zombie", "leader": true,
                 "hits": [{"rule": "controller_wedged", "state": "zombie", "detail": "its high watermark stands"}]},
                {"controller": 101, "address": "127.0.0.111:9093", "state": "healthy", "leader": false, "hits": []}
            ]
        });
        let page = render(&d, "x", &plain(ROUND_AT + 1.0));
        let quorum = line_with(&page, "  quorum:");
        assert_eq!(
            quorum,
            "  quorum: leader 100 (epoch 6), high watermark 900, still for 3s, leader_not_advancing: controller 100 applies nothing"
        );
        let wedged = line_with(&page, "127.0.0.110:9093");
        assert!(
            wedged.starts_with("  100        127.0.0.110:9093       zombie    yes    controller_wedged        its high watermark stands"),
            "{wedged}"
        );
        let healthy = line_with(&page, "127.0.0.111:9093");
        assert!(healthy.contains("healthy   -      -"), "{healthy}");
        // A cluster whose quorum is not looked at (ZooKeeper, or not asked) has no such lines.
        assert!(!render(&doc(), "x", &plain(ROUND_AT + 1.0)).contains("quorum:"));
    }

    /// Issue 26: the group coordinators' probe on the status view: a summary line, and a
    /// line for each broker whose coordinator does not answer or answers errors.
    #[test]
    fn the_group_coordinators_have_a_summary_and_a_line_per_broker_in_trouble() {
        let mut d = doc();
        d["clusters"][0]["group_coordinators"] = serde_json::json!({
            "observed_at": ROUND_AT,
            "offsets_partitions": 6,
            "timeout_seconds": 1.0,
            "blind": null,
            "brokers": [
                {"broker": 1, "shards": [0, 3], "probe": "answered", "latency_seconds": 0.004,
                 "unanswered_in_a_row": 0, "errors": []},
                {"broker": 2, "shards": [1, 4], "probe": "unanswered", "latency_seconds": null,
                 "unanswered_in_a_row": 5, "unanswered_seconds": 2.0, "errors": []},
                {"broker": 3, "shards": [2, 5], "probe": "answered", "latency_seconds": 0.012,
                 "unanswered_in_a_row": 0, "errors": [{"shard": 5, "error": "NOT_COORDINATOR", "seconds": 70.0}]}
            ]
        });
        let page = render(&d, "x", &plain(ROUND_AT + 1.0));
        assert_eq!(
            line_with(&page, "group coordinators:"),
            "  group coordinators: 4/6 shard(s) answered on 3 broker(s), slowest 12 ms"
        );
        assert_eq!(
            line_with(&page, "    broker 2"),
            "    broker 2 (2 shard(s)): 5 probe(s) unanswered in a row for 2s"
        );
        assert_eq!(
            line_with(&page, "    broker 3"),
            "    broker 3 (2 shard(s)): 1 shard(s) answer coordinator errors"
        );
        assert!(!page.contains("    broker 1 ("), "{page}");
        // Not probed: no such lines.
        assert!(!render(&doc(), "x", &plain(ROUND_AT + 1.0)).contains("group coordinators"));
    }

    #[test]
    fn the_transaction_coordinators_have_their_own_summary() {
        let mut d = doc();
        d["clusters"][0]["txn_coordinators"] = serde_json::json!({
            "observed_at": ROUND_AT,
            "offsets_partitions": 50,
            "timeout_seconds": 1.0,
            "blind": null,
            "brokers": [
                {"broker": 1, "shards": [0, 3], "probe": "answered", "latency_seconds": 0.030,
                 "unanswered_in_a_row": 0, "errors": [
                     {"shard": 3, "error": "CONCURRENT_TRANSACTIONS", "seconds": 4.0}]}
            ]
        });
        let page = render(&d, "x", &plain(ROUND_AT + 1.0));
        assert_eq!(
            line_with(&page, "transaction coordinators:"),
            "  transaction coordinators: 2/50 shard(s) answered on 1 broker(s), slowest 30 ms"
        );
        assert!(line_with(&page, "    broker 1").starts_with("    broker 1 (2 shard(s))"));
        assert!(!page.contains("group coordinators"), "{page}");
        d["clusters"][0]["txn_coordinators"]["blind"] = "no topic yet".into();
        let page = render(&d, "x", &plain(ROUND_AT + 1.0));
        assert!(
            page.contains("transaction coordinators: not probed (no topic yet)"),
            "{page}"
        );
    }

    #[test]
    fn open_incidents_are_listed_with_their_age() {
        let page = render(&doc(), "x", &plain(ROUND_AT + 10.0));
        assert!(page.contains("OPEN INCIDENTS (2)\n"), "{page}");
        let zombie = line_with(&page, "broker 2 of lab is a zombie");
        assert!(zombie.starts_with("  CRITICAL lab      broker"), "{zombie}");
        // Started 190 s before the round (milliseconds in the document).
        assert!(zombie.contains("for   3m20s"), "{zombie}");
        let mut d = doc();
        d["incidents"][0]["silenced"] = serde_json::json!({
            "id": "s-1", "ends_at": (ROUND_AT + 3600.0) * 1000.0, "comment": "upgrade"
        });
        let page = render(&d, "x", &plain(ROUND_AT));
        assert!(page.contains("[silenced 1h00m: upgrade]"), "{page}");
        d["incidents"] = Value::Array(vec![]);
        assert!(render(&d, "x", &plain(ROUND_AT)).contains("OPEN INCIDENTS: none\n"));
    }

    #[test]
    fn colour_only_when_asked_and_columns_stay_aligned() {
        let page = render(
            &doc(),
            "x",
            &View {
                now: ROUND_AT,
                color: true,
                width: None,
            },
        );
        let zombie = line_with(&page, "127.0.0.12:9092");
        assert!(zombie.contains("\x1b[31mzombie\x1b[0m   "), "{zombie:?}");
        assert_eq!(strip_ansi(&page), render(&doc(), "x", &plain(ROUND_AT)));
        assert!(use_color(true, None));
        assert!(!use_color(false, None));
        assert!(!use_color(true, Some(std::ffi::OsStr::new("1"))));
        assert!(use_color(true, Some(std::ffi::OsStr::new(""))));
    }

    /// The text a terminal shows: colour escapes removed.
    fn strip_ansi(s: &str) -> String {
        let mut out = String::new();
        let mut esc = false;
        for c in s.chars() {
            if c == '\x1b' {
                esc = true;
            } else if esc {
                esc = c != 'm';
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn lines_are_cut_to_the_terminal_without_breaking_colours() {
        let view = View {
            now: ROUND_AT,
            color: true,
            width: Some(40),
        };
        let page = render(&doc(), "x", &view);
        for l in page.lines() {
            let visible = strip_ansi(l);
            assert!(visible.chars().count() <= 40, "{l:?}");
            // Whatever colour the line opened is closed by its end.
            if let Some(last) = l.rfind("\x1b[") {
                assert!(l[last..].starts_with("\x1b[0m"), "{l:?}");
            }
        }
    }

    #[test]
    fn exit_code_is_the_worst_cluster_like_check() {
        assert_eq!(worst(&doc()), Severity::Unreachable);
        let mut d = doc();
        d["clusters"] = Value::Array(
            d["clusters"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["name"] == "lab")
                .cloned()
                .collect(),
        );
        assert_eq!(worst(&d), Severity::Critical);
        d["clusters"][0]["severity"] = "ok".into();
        assert_eq!(worst(&d).exit_code(), 0);
        d["clusters"] = Value::Array(vec![]);
        assert_eq!(worst(&d), Severity::Unreachable);
    }

    #[test]
    fn durations() {
        assert_eq!(duration(0.4), "0s");
        assert_eq!(duration(59.0), "59s");
        assert_eq!(duration(245.0), "4m05s");
        assert_eq!(duration(7800.0), "2h10m");
        assert_eq!(duration(3.0 * 86_400.0 + 4.0 * 3600.0), "3d04h");
        assert_eq!(duration(-5.0), "-");
    }

    #[test]
    fn frames_redraw_in_place() {
        assert_eq!(frame("a\nb\n"), "\x1b[Ha\x1b[K\nb\x1b[K\n\x1b[J");
    }
}
