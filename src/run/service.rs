//! systemd integration (`Type=notify`): readiness, reload and stop notices, a one-line
//! status, and watchdog pings that stop when a loop stops making progress (the daemon
//! asks `model::progress`, the board `/healthz` reads).
//!
//! Every notice goes through `sd_notify::notify`, which does nothing when `NOTIFY_SOCKET`
//! is unset, so the same daemon runs unchanged in a terminal, in a container or in a test.
//! A notice that cannot be delivered is logged and otherwise ignored: a missing manager is
//! no reason to stop watching Kafka, and a manager that expects pings will act by itself.
//!
//! Crate choice: `sd-notify` is a few hundred lines over `libc` with no C library to link,
//! unlike `libsystemd` bindings, and covers every notice systemd 252 (Debian 12) reads.

use std::time::Duration;

use sd_notify::NotifyState;

use crate::judge::report::ClusterReport;
use crate::judge::verdict::BrokerState;

/// The shortest silence tolerated from any round loop. Short round intervals (1 s) would
/// otherwise turn a scheduling hiccup or a slow DNS answer into a restart.
pub const MIN_ALLOWED_SILENCE: Duration = Duration::from_secs(30);

fn send(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "cannot notify the service manager");
    }
}

/// READY=1. Sent once the HTTP listener is bound and the round loops are spawned, not once
/// Kafka is healthy: reporting an unhealthy Kafka is the service working. Also sent after
/// every reload, successful or not, because systemd keeps the unit in "reloading" until it
/// sees READY=1 again.
pub fn ready() {
    send(&[NotifyState::Ready]);
}

/// RELOADING=1 with the current CLOCK_MONOTONIC time. systemd 252 does not need the time,
/// but 253+ (`Type=notify-reload`) refuses a reload notice without it, so the unit can move
/// to that type later without touching the code.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(t) => send(&[NotifyState::Reloading, t]),
        Err(_) => send(&[NotifyState::Reloading]),
    }
}

/// STOPPING=1: shutdown has begun. systemd then stops expecting watchdog pings, so a long
/// drain is not mistaken for a hang.
pub fn stopping() {
    send(&[NotifyState::Stopping]);
}

/// STATUS=, shown by `systemctl status`. Newlines would end the field early, so they are
/// replaced.
pub fn status(line: &str) {
    let line = line.replace('\n', " ");
    send(&[NotifyState::Status(&line)]);
}

/// WATCHDOG=1. Call it only when no watched loop is stuck (`model::progress`).
pub fn watchdog_ping() {
    send(&[NotifyState::Watchdog]);
}

/// `WatchdogSec=` of the unit, when systemd expects pings from this process. Ping at half
/// of it, as sd_watchdog_enabled(3) advises, so one late tick is not a restart.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled()
}

/// How long a cluster's loop may go without ending a round before it counts as stuck:
/// two round intervals, or one interval plus the longest round the daemon lets run before
/// it abandons it (a round against hung brokers legitimately takes that long), and never
/// less than `MIN_ALLOWED_SILENCE`.
pub fn allowed_silence(round_interval: Duration, round_limit: Duration) -> Duration {
    (round_interval * 2)
        .max(round_interval + round_limit)
        .max(MIN_ALLOWED_SILENCE)
}

/// The counts behind the STATUS= line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusCounts {
    pub clusters: usize,
    /// Clusters without a first report yet.
    pub waiting: usize,
    pub unreachable: usize,
    pub brokers: usize,
    pub zombie: usize,
    pub down: usize,
    pub degraded: usize,
    pub unknown: usize,
}

impl StatusCounts {
    /// Counts over the latest report of each cluster; `clusters` is how many the running
    /// configuration names.
    pub fn from_reports<'a>(
        clusters: usize,
        reports: impl IntoIterator<Item = &'a ClusterReport>,
    ) -> Self {
        let mut c = StatusCounts {
            clusters,
            ..StatusCounts::default()
        };
        let mut seen = 0;
        for r in reports {
            seen += 1;
            if !r.reachable {
                c.unreachable += 1;
            }
            for v in &r.verdicts {
                c.brokers += 1;
                match v.state {
                    BrokerState::Healthy => {}
                    BrokerState::Zombie => c.zombie += 1,
                    BrokerState::Down => c.down += 1,
                    BrokerState::Degraded => c.degraded += 1,
                    BrokerState::Unknown => c.unknown += 1,
                }
            }
        }
        c.waiting = clusters.saturating_sub(seen);
        c
    }

    /// One line, worst news first after the cluster count, e.g.
    /// `3 clusters, 1 zombie broker, 2 degraded brokers`.
    pub fn line(&self) -> String {
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut parts = vec![plural(self.clusters, "cluster", "clusters")];
        if self.unreachable > 0 {
            parts.push(format!("{} unreachable", self.unreachable));
        }
        for (n, state) in [
            (self.zombie, "zombie"),
            (self.down, "down"),
            (self.degraded, "degraded"),
            (self.unknown, "unknown"),
        ] {
            if n > 0 {
                parts.push(plural(
                    n,
                    &format!("{state} broker"),
                    &format!("{state} brokers"),
                ));
            }
        }
        if self.waiting > 0 {
            parts.push(format!("{} waiting for a first round", self.waiting));
        } else if parts.len() == 1 {
            parts.push(plural(self.brokers, "broker healthy", "brokers healthy"));
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn allowance_is_the_largest_of_two_intervals_interval_plus_limit_and_the_floor() {
        assert_eq!(allowed_silence(S, S), MIN_ALLOWED_SILENCE);
        assert_eq!(allowed_silence(60 * S, 20 * S), 120 * S);
        assert_eq!(allowed_silence(15 * S, 39 * S), 54 * S);
    }

    #[test]
    fn status_lines() {
        let all_good = StatusCounts {
            clusters: 3,
            brokers: 9,
            ..StatusCounts::default()
        };
        assert_eq!(all_good.line(), "3 clusters, 9 brokers healthy");
        let bad = StatusCounts {
            clusters: 3,
            unreachable: 1,
            brokers: 9,
            zombie: 1,
            degraded: 2,
            ..StatusCounts::default()
        };
        assert_eq!(
            bad.line(),
            "3 clusters, 1 unreachable, 1 zombie broker, 2 degraded brokers"
        );
        let starting = StatusCounts {
            clusters: 1,
            waiting: 1,
            ..StatusCounts::default()
        };
        assert_eq!(starting.line(), "1 cluster, 1 waiting for a first round");
    }

    #[test]
    fn status_counts_from_no_reports_wait_for_every_cluster() {
        let c = StatusCounts::from_reports(2, std::iter::empty());
        assert_eq!(c.waiting, 2);
        assert_eq!(c.line(), "2 clusters, 2 waiting for a first round");
    }

    /// The only test that touches NOTIFY_SOCKET and WATCHDOG_*: one test, so no other test
    /// of this process can observe the variables (sd_notify reads them at each call).
    #[test]
    fn notices_reach_a_notify_socket_and_vanish_without_one() {
        use std::os::unix::net::UnixDatagram;

        let dir = std::env::temp_dir().join(format!(
            "kw-notify-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let sock = UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let recv = || {
            let mut buf = [0u8; 4096];
            let n = sock.recv(&mut buf).unwrap();
            String::from_utf8(buf[..n].to_vec()).unwrap()
        };

        std::env::set_var("NOTIFY_SOCKET", &path);
        ready();
        assert_eq!(recv(), "READY=1\n");
        reloading();
        let msg = recv();
        let mut lines = msg.lines();
        assert_eq!(lines.next(), Some("RELOADING=1"));
        let usec: u64 = lines
            .next()
            .and_then(|l| l.strip_prefix("MONOTONIC_USEC="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no MONOTONIC_USEC in {msg:?}"));
        assert!(usec > 0);
        status("2 clusters,\n1 zombie broker");
        assert_eq!(recv(), "STATUS=2 clusters, 1 zombie broker\n");
        watchdog_ping();
        assert_eq!(recv(), "WATCHDOG=1\n");
        stopping();
        assert_eq!(recv(), "STOPPING=1\n");

        std::env::set_var("WATCHDOG_USEC", "20000000");
        std::env::remove_var("WATCHDOG_PID");
        assert_eq!(watchdog_interval(), Some(Duration::from_secs(20)));
        // Pings meant for another process (a parent that exec'd us) are not ours to send.
        std::env::set_var("WATCHDOG_PID", (std::process::id() + 1).to_string());
        assert_eq!(watchdog_interval(), None);
        std::env::set_var("WATCHDOG_PID", std::process::id().to_string());
        assert_eq!(watchdog_interval(), Some(Duration::from_secs(20)));
        std::env::remove_var("WATCHDOG_USEC");
        std::env::remove_var("WATCHDOG_PID");
        assert_eq!(watchdog_interval(), None);

        std::env::remove_var("NOTIFY_SOCKET");
        ready();
        watchdog_ping();
        sock.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        let err = sock.recv(&mut buf).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);

        drop(sock);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
