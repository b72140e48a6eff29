//! Rules from host mode, when the broker runs on the watchdog's host: its process gone,
//! exited, stopped or alive without answering, its port not listening, its log
//! directories full or unreadable.

use super::facts::BrokerFacts;
use super::rules_access::silent_failure;
use super::{hit, RuleHit, VerdictSettings};
use crate::judge::rule::{BrokerState, Rule};
use crate::model::round::HostObservation;

// Host mode. Each rule says what the host shows in one sentence with what the protocol
// said, so the evidence reads like an operator's notes: "process 4711 stopped by a signal,
// port 9092 listening, no request answered for 12 s".

/// "no request answered for 12 s", or nothing while it answers.
pub(super) fn silence(f: &BrokerFacts) -> String {
    if f.probe.answered() {
        return "it answers requests".into();
    }
    match f.silent_for {
        Some(d) => format!("no request answered for {} s", d.as_secs()),
        None => "no request answered this round".into(),
    }
}

/// The process in words: pid, state, CPU, threads, descriptors.
pub(super) fn process_words(h: &HostObservation) -> String {
    let Some(p) = &h.process else {
        return match &h.not_found {
            Some(why) => format!("no process found ({why})"),
            None => "no process found".into(),
        };
    };
    let mut parts = vec![format!("process {} {}", p.pid, p.state.words())];
    match p.cpu_advancing {
        Some(true) => parts.push("CPU time advancing".into()),
        Some(false) => parts.push(format!("CPU time not advancing ({:.1} s)", p.cpu_seconds)),
        None => {}
    }
    let mut threads = format!("{} threads", p.threads);
    if let Some(d) = p.threads_in_io_wait.filter(|d| *d > 0) {
        threads.push_str(&format!(", {d} in uninterruptible I/O wait (D)"));
    }
    parts.push(threads);
    match (&p.open_fds, &p.open_fds_error) {
        (Some(n), _) => parts.push(format!("{n} open fds")),
        (None, Some(_)) => parts.push("open fds: cannot read (permission)".into()),
        (None, None) => {}
    }
    parts.join(", ")
}

/// The configured ports in words: "port 127.0.0.11:9092 listening (its socket)".
pub(super) fn ports_words(h: &HostObservation) -> Option<String> {
    if let Some(e) = &h.ports_error {
        return Some(format!("ports: {e}"));
    }
    if h.ports.is_empty() {
        return None;
    }
    let words: Vec<String> = h
        .ports
        .iter()
        .map(|p| {
            let whose = match p.owned_by_process {
                Some(true) => " (its socket)",
                Some(false) => " (by another process)",
                None => "",
            };
            if p.listening {
                format!("port {} listening{whose}", p.port)
            } else {
                format!("port {} not listening", p.port)
            }
        })
        .collect();
    Some(words.join(", "))
}

/// Process, ports and silence in one sentence.
pub(super) fn host_sentence(h: &HostObservation, f: &BrokerFacts) -> String {
    let mut parts = vec![process_words(h)];
    parts.extend(ports_words(h));
    parts.push(silence(f));
    parts.join("; ")
}

pub(super) fn process_gone(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let h = f.host?;
    if !h.process_gone() {
        return None;
    }
    if f.probe.answered() {
        // Something answers at its address: the lookup is more likely wrong than Kafka.
        return hit(
            Rule::ProcessGone,
            BrokerState::Degraded,
            format!(
                "{}; yet the broker answers at {}: check the host.brokers process setting",
                process_words(h),
                f.probe.endpoint.address()
            ),
        );
    }
    hit(Rule::ProcessGone, BrokerState::Down, host_sentence(h, f))
}

pub(super) fn process_exited(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let h = f.host?;
    let p = h.process.as_ref()?;
    p.state
        .has_exited()
        .then(|| hit(Rule::ProcessExited, BrokerState::Down, host_sentence(h, f)))
        .flatten()
}

pub(super) fn process_stopped(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let h = f.host?;
    let p = h.process.as_ref()?;
    // A stopped process serves nothing whatever its port says: the kernel still completes
    // TCP handshakes for it, which is why a port check calls it alive.
    p.state
        .is_stopped()
        .then(|| {
            hit(
                Rule::ProcessStopped,
                BrokerState::Zombie,
                host_sentence(h, f),
            )
        })
        .flatten()
}

pub(super) fn process_alive_no_answer(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let h = f.host?;
    let p = h.process.as_ref()?;
    if p.state.is_stopped()
        || p.state.has_exited()
        || f.cluster_invisible
        || !f.probe.tcp_open()
        || f.probe.answered()
        || silent_failure(f).is_none()
    {
        return None;
    }
    hit(
        Rule::ProcessAliveNoAnswer,
        BrokerState::Zombie,
        host_sentence(h, f),
    )
}

pub(super) fn port_not_listening(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let h = f.host?;
    let p = h.process.as_ref()?;
    if p.state.has_exited() {
        return None;
    }
    let bad: Vec<String> = h
        .ports
        .iter()
        .filter_map(|port| match (port.listening, port.owned_by_process) {
            (false, _) => Some(format!("nothing listens on {}", port.port)),
            (true, Some(false)) => Some(format!("{} is held by another process", port.port)),
            _ => None,
        })
        .collect();
    if bad.is_empty() {
        return None;
    }
    hit(
        Rule::PortNotListening,
        BrokerState::Degraded,
        format!(
            "process {} is {}, but {}",
            p.pid,
            p.state.words(),
            bad.join(", ")
        ),
    )
}

pub(super) fn log_dir_low_space(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let h = f.host?;
    let low: Vec<String> = h
        .low_log_dirs()
        .map(|d| {
            format!(
                "log dir {}: {} free of {} ({:.1}%)",
                d.path,
                crate::model::words::human_bytes(d.free_bytes.unwrap_or(0)),
                crate::model::words::human_bytes(d.total_bytes.unwrap_or(0)),
                d.free_ratio.unwrap_or(0.0) * 100.0
            )
        })
        .collect();
    if low.is_empty() {
        return None;
    }
    hit(
        Rule::LogDirLowSpace,
        BrokerState::Degraded,
        format!(
            "low free space, below {:.1}%: {}",
            h.log_dir_min_free_ratio * 100.0,
            low.join("; ")
        ),
    )
}

pub(super) fn log_dir_unreadable(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let h = f.host?;
    let bad: Vec<String> = h
        .log_dirs
        .iter()
        .filter_map(|d| d.error.as_ref().map(|e| format!("{} ({e})", d.path)))
        .collect();
    if bad.is_empty() {
        return None;
    }
    hit(
        Rule::LogDirUnreadable,
        BrokerState::Degraded,
        format!("free space cannot be read: {}", bad.join("; ")),
    )
}
