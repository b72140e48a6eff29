//! A cluster's `host:` block: the brokers that run on the watchdog's own host, how to find
//! each one's process, its log directories and ports, and the guarded remediation it may
//! get. Only a cluster may have it (not `defaults:`): broker ids belong to one cluster.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;

use regex::RegexBuilder;

use super::ctx::Ctx;
use super::read::{int, list, text, text_node, Fields};
use super::schema as s;
use super::types::*;
use super::yaml::{shorten, Entry, Kind, Node, Pos, Value};

pub(crate) fn host(cx: &mut Ctx, e: &Entry, path: String) -> Option<HostConfig> {
    let mut f = Fields::open(&mut cx.rep, &e.value, Some(e), path)?;
    let limits = s::HostLimitsLayer::read(&mut cx.rep, &mut f);
    let brokers = match f.get(s::HOST_BROKERS_KEY) {
        None => {
            f.missing(
                &mut cx.rep,
                s::HOST_BROKERS_KEY,
                "a list of the brokers on this host, each with id and process".into(),
            );
            None
        }
        Some(be) => brokers(cx, be, f.child(s::HOST_BROKERS_KEY)),
    };
    f.finish(&mut cx.rep, &|_| None);
    let limits = limits.alone().values()?;
    Some(HostConfig {
        log_dir_min_free_ratio: limits.log_dir_min_free_ratio,
        remediation_cooldown: limits.remediation_cooldown,
        // The schema's range stops far inside u32.
        remediation_max_per_day: u32::try_from(limits.remediation_max_per_day).ok()?,
        brokers: brokers?,
    })
}

fn brokers(cx: &mut Ctx, e: &Entry, path: String) -> Option<Vec<HostBrokerConfig>> {
    let items = list(&mut cx.rep, e, "a list of brokers", false)?;
    if items.is_empty() {
        cx.rep.add(
            e.key_pos,
            format!("{path} is empty"),
            Some("at least one broker, or no host block".into()),
        );
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    let mut seen: HashMap<i32, Pos> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        match broker(cx, item, format!("{path}[{i}]"), &mut seen) {
            Some(b) => out.push(b),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

fn broker(
    cx: &mut Ctx,
    node: &Node,
    path: String,
    seen: &mut HashMap<i32, Pos>,
) -> Option<HostBrokerConfig> {
    let mut f = Fields::open(&mut cx.rep, node, None, path)?;
    let id = broker_id(cx, &mut f, seen);
    let process = match f.get("process") {
        None => {
            f.missing(&mut cx.rep, "process", process_expected());
            None
        }
        Some(pe) => process(cx, pe, f.child("process")),
    };
    let log_dirs = match f.get(s::HOST_LOG_DIRS_KEY) {
        None => Some(Vec::new()),
        Some(le) if le.value.is_null() => Some(Vec::new()),
        Some(le) => log_dirs(cx, le),
    };
    let ports = match f.get(s::HOST_PORTS_KEY) {
        None => Some(Vec::new()),
        Some(pe) if pe.value.is_null() => Some(Vec::new()),
        Some(pe) => ports(cx, pe),
    };
    let remediation = match f.get(s::REMEDIATION_KEY) {
        None => Some(None),
        Some(re) => remediation(cx, re, f.child(s::REMEDIATION_KEY)).map(Some),
    };
    f.finish(&mut cx.rep, &|_| None);
    Some(HostBrokerConfig {
        broker_id: id?,
        process: process?,
        log_dirs: log_dirs?,
        ports: ports?,
        remediation: remediation?,
    })
}

/// The broker's id, once in the host's list (`seen`: the ids before it, where written).
fn broker_id(cx: &mut Ctx, f: &mut Fields, seen: &mut HashMap<i32, Pos>) -> Option<i32> {
    let Some(ie) = f.get(s::HOST_BROKER_ID.key) else {
        f.missing(
            &mut cx.rep,
            s::HOST_BROKER_ID.key,
            "the broker's node.id / broker.id".into(),
        );
        return None;
    };
    let v = int(&mut cx.rep, ie, &s::HOST_BROKER_ID)?;
    // The range check makes the conversion infallible.
    let id = i32::try_from(v.value).ok()?;
    if let Some(first) = seen.get(&id) {
        cx.rep.add(
            v.value_pos,
            format!(
                "broker {id} is listed twice in host.brokers (first at line {})",
                first.line
            ),
            Some("each broker once".into()),
        );
        return None;
    }
    seen.insert(id, v.value_pos);
    Some(id)
}

/// The log directories whose free space is checked, relative to the file's folder.
fn log_dirs(cx: &mut Ctx, e: &Entry) -> Option<Vec<PathBuf>> {
    let items = list(&mut cx.rep, e, "a list of directory paths", true)?;
    let mut dirs = Vec::new();
    let mut ok = true;
    for item in items {
        match text_node(&mut cx.rep, item, s::HOST_LOG_DIRS_KEY, "a directory path") {
            Some(t) if !t.trim().is_empty() => dirs.push(cx.path(&t)),
            Some(_) => {
                cx.rep.add(
                    item.pos,
                    "empty log directory path".into(),
                    Some("a directory path".into()),
                );
                ok = false;
            }
            None => ok = false,
        }
    }
    ok.then_some(dirs)
}

fn process_expected() -> String {
    format!(
        "exactly one of {}, {}, {}",
        s::HOST_PROCESS_SYSTEMD_UNIT,
        s::HOST_PROCESS_PID_FILE,
        s::HOST_PROCESS_CMDLINE_REGEX
    )
}

fn process(cx: &mut Ctx, e: &Entry, path: String) -> Option<ProcessLocator> {
    let mut f = Fields::open(&mut cx.rep, &e.value, Some(e), path)?;
    let unit = f.get(s::HOST_PROCESS_SYSTEMD_UNIT);
    let pid_file = f.get(s::HOST_PROCESS_PID_FILE);
    let cmdline = f.get(s::HOST_PROCESS_CMDLINE_REGEX);
    f.finish(&mut cx.rep, &|_| None);
    let given: Vec<&Entry> = [unit, pid_file, cmdline].into_iter().flatten().collect();
    match given.as_slice() {
        [] => {
            f.missing_what(&mut cx.rep, "a way to find the process", process_expected());
            return None;
        }
        [_] => {}
        [_, second, ..] => {
            cx.rep.add(
                second.key_pos,
                format!(
                    "{} and {} are both set in {}",
                    given[0].key,
                    second.key,
                    f.where_()
                ),
                Some(process_expected()),
            );
            return None;
        }
    }
    if let Some(ue) = unit {
        return systemd_unit(cx, ue);
    }
    if let Some(pe) = pid_file {
        return pid_file_locator(cx, pe);
    }
    cmdline_locator(cx, cmdline?)
}

fn systemd_unit(cx: &mut Ctx, e: &Entry) -> Option<ProcessLocator> {
    let t = text(&mut cx.rep, e, "a systemd unit name such as kafka.service")?;
    let bad = t.value.is_empty()
        || t.value.starts_with('-')
        || t.value.contains('/')
        || t.value.chars().any(|c| c.is_whitespace() || c.is_control());
    if bad {
        cx.rep.add(
            t.value_pos,
            format!("'{}' is not a systemd unit name", shorten(&t.value)),
            Some("a unit name such as kafka.service".into()),
        );
        return None;
    }
    Some(ProcessLocator::SystemdUnit(t.value))
}

fn pid_file_locator(cx: &mut Ctx, e: &Entry) -> Option<ProcessLocator> {
    let t = text(&mut cx.rep, e, "a file path")?;
    if t.value.trim().is_empty() {
        cx.rep.add(
            t.value_pos,
            "pid_file is empty".into(),
            Some("a file path".into()),
        );
        return None;
    }
    // Not checked for existence: the file is gone while the broker is down, which is
    // exactly a state host mode must report.
    Some(ProcessLocator::PidFile(cx.path(&t.value)))
}

fn cmdline_locator(cx: &mut Ctx, e: &Entry) -> Option<ProcessLocator> {
    let t = text(&mut cx.rep, e, "a regular expression")?;
    match RegexBuilder::new(&t.value)
        .size_limit(s::REGEX_SIZE_LIMIT)
        .build()
    {
        Ok(regex) => Some(ProcessLocator::Cmdline {
            regex,
            source: t.value,
        }),
        Err(err) => {
            let reason = err
                .to_string()
                .lines()
                .rev()
                .find_map(|l| l.trim().strip_prefix("error: ").map(str::to_string))
                .unwrap_or_else(|| "it does not compile".into());
            cx.rep.add(
                t.value_pos,
                format!("invalid regex '{}': {reason}", shorten(&t.value)),
                Some("a regular expression, searched in the process's command line".into()),
            );
            None
        }
    }
}

const PORT_EXPECTED: &str = "a port (9092) or address:port (127.0.0.1:9092, [::1]:9092)";

fn ports(cx: &mut Ctx, e: &Entry) -> Option<Vec<PortSpec>> {
    let items = list(&mut cx.rep, e, "a list of ports", true)?;
    let mut out = Vec::new();
    let mut ok = true;
    for item in items {
        match port(item) {
            Some(p) => out.push(p),
            None => {
                let shown = item
                    .scalar()
                    .map(|s| shorten(&s.text))
                    .unwrap_or_else(|| item.describe());
                cx.rep.add(
                    item.pos,
                    format!("'{shown}' is not a port"),
                    Some(PORT_EXPECTED.into()),
                );
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

fn port(n: &Node) -> Option<PortSpec> {
    let in_range = |p: i128| u16::try_from(p).ok().filter(|p| *p > 0);
    let sc = n.scalar()?;
    if let Value::Int(p) = sc.value() {
        return Some(PortSpec {
            addr: None,
            port: in_range(p)?,
        });
    }
    let text = sc.text.trim();
    if let Ok(p) = text.parse::<u16>() {
        return (p > 0).then_some(PortSpec {
            addr: None,
            port: p,
        });
    }
    let sa: std::net::SocketAddr = text.parse().ok()?;
    (sa.port() > 0).then_some(PortSpec {
        addr: Some(match sa.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        }),
        port: sa.port(),
    })
}

fn remediation(cx: &mut Ctx, e: &Entry, path: String) -> Option<RemediationConfig> {
    let mut f = Fields::open(&mut cx.rep, &e.value, Some(e), path)?;
    let switches = s::RemediationSwitchesLayer::read(&mut cx.rep, &mut f);
    let command = match f.get(s::REMEDIATION_COMMAND_KEY) {
        None => {
            f.missing(
                &mut cx.rep,
                s::REMEDIATION_COMMAND_KEY,
                "a list of arguments, e.g. [systemctl, restart, kafka.service]".into(),
            );
            None
        }
        Some(ce) => argv(cx, ce),
    };
    let before = match f.get(s::REMEDIATION_BEFORE_COMMAND_KEY) {
        None => Some(None),
        Some(be) if be.value.is_null() => Some(None),
        Some(be) => argv(cx, be).map(Some),
    };
    let times = s::RemediationTimesLayer::read(&mut cx.rep, &mut f);
    f.finish(&mut cx.rep, &|_| None);
    let switches = switches.alone().values();
    let times = times.alone().values();
    let (switches, times) = (switches?, times?);
    Some(RemediationConfig {
        enabled: switches.enabled,
        dry_run: switches.dry_run,
        command: command?,
        before_command: before?,
        zombie_for: times.zombie_for,
        timeout: times.timeout,
        before_timeout: times.before_timeout,
    })
}

/// A command as a list of arguments. A single string is refused rather than split: how
/// to split it (a shell's quoting rules) is exactly the ambiguity a list avoids.
fn argv(cx: &mut Ctx, e: &Entry) -> Option<Vec<String>> {
    let expected = "a list of arguments, program first, e.g. [systemctl, restart, kafka.service]";
    if !matches!(e.value.kind, Kind::Seq(_)) {
        cx.rep.add(
            if e.value.is_null() {
                e.key_pos
            } else {
                e.value.pos
            },
            format!(
                "{} must be a list of arguments, not {}",
                e.key,
                e.value.describe()
            ),
            Some(expected.into()),
        );
        return None;
    }
    let items = list(&mut cx.rep, e, expected, false)?;
    if items.is_empty() {
        cx.rep.add(
            e.key_pos,
            format!("{} is empty", e.key),
            Some(expected.into()),
        );
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let Some(arg) = text_node(&mut cx.rep, item, &e.key, "an argument (text)") else {
            ok = false;
            continue;
        };
        if i == 0 && arg.trim().is_empty() {
            cx.rep.add(
                item.pos,
                format!("{} has an empty program name", e.key),
                Some(expected.into()),
            );
            ok = false;
        }
        if arg.contains('\0') {
            cx.rep.add(
                item.pos,
                "an argument holds a NUL character".into(),
                Some("text without NUL".into()),
            );
            ok = false;
        }
        for unknown in unknown_placeholders(&arg) {
            cx.rep.add(
                item.pos,
                format!("unknown placeholder '{unknown}' in {}", e.key),
                Some(format!("one of {}", s::REMEDIATION_PLACEHOLDERS.join(", "))),
            );
            ok = false;
        }
        out.push(arg);
    }
    ok.then_some(out)
}

/// `{word}` tokens that are not placeholders the runner replaces: a typo (`{PID}`) would
/// otherwise reach the command as literal text.
fn unknown_placeholders(arg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = arg;
    while let Some(start) = rest.find('{') {
        let after = &rest[start..];
        let Some(end) = after.find('}') else { break };
        let token = &after[..=end];
        let word = &token[1..token.len() - 1];
        if !word.is_empty()
            && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !s::REMEDIATION_PLACEHOLDERS.contains(&token)
        {
            out.push(token.to_string());
        }
        rest = &after[end + 1..];
    }
    out
}
