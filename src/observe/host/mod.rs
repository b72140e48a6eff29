//! Host mode: when the watchdog runs on a broker's own host, it also looks at the broker's
//! process, the way an operator would with `ps`, `ss` and `df`: is the process there, in
//! what state (running, stopped by a signal, stuck in I/O, exited), is its CPU time moving,
//! how many threads and descriptors it holds, does something (it) listen on its ports, and
//! how full its log directories are. The verdict puts that beside what the Kafka protocol
//! said: "process 4711 stopped by a signal, port 9092 listening, no request answered for
//! 12 s".
//!
//! Files: `stat` parses `/proc/<pid>/stat`, `sockets` the TCP tables and descriptor links,
//! `locate` finds the process, `disk` asks statvfs, `process` reads one process's `/proc`
//! entries. Parsers are pure and tested with fixture strings; this file ties them into one
//! observation per broker and round.

pub mod disk;
pub mod locate;
pub mod metrics;
pub mod process;
pub mod sockets;
pub mod stat;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{HostBrokerConfig, HostConfig, PortSpec};
use crate::model::blocking::Pool;
use crate::model::round::BrokerId;

// The data a look yields is plain observation; it lives with the other observations so that
// the pure stages read it without depending on the code that reads /proc.
pub use crate::model::round::{HostObservation, LogDirSeen, PortSeen, ProcessSeen, ProcessState};

/// `systemctl show` and all reads of one broker together: a hung NFS log directory or a
/// wedged systemd must cost one late observation, never the round.
const LOOK_TIMEOUT: Duration = Duration::from_secs(3);

/// Host reads (`/proc`, pid files, statvfs of log directories) blocked at once, at most. A
/// broker hung in storage can block a read of its `/proc` files for as long as it hangs; a
/// read that timed out keeps its thread until then. Without a cap every look would leave
/// one more thread behind, until tokio's blocking pool (which the webhook spool shares)
/// was full of them (issue 27 item 9). At the cap, a look is not attempted and says so.
pub const BLOCKED_READS_CAP: usize = 4;

/// The host reads of one owner (a cluster's host observer, a remediator): at most
/// `BLOCKED_READS_CAP` of them unfinished at any time (`model::blocking`).
pub fn read_pool() -> Pool {
    Pool::new("host reads", BLOCKED_READS_CAP)
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Another user's process: see docs/install.md for the capabilities that allow it.
    #[error("cannot read {path}: permission denied (the broker runs as another user; grant CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE, see docs/install.md)")]
    Denied { path: String },
    #[error(transparent)]
    Parse(#[from] ParseError),
}

/// A `/proc` file whose content is not what the kernel writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected {file} format: {why}")]
pub struct ParseError {
    pub file: &'static str,
    pub why: String,
}

impl ParseError {
    pub fn new(file: &'static str, why: &str) -> Self {
        ParseError {
            file,
            why: why.to_string(),
        }
    }
}

/// CPU time of a process at the last round, to tell whether it moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CpuMark {
    pid: u32,
    start_ticks: u64,
    ticks: u64,
}

/// Observes the brokers of one cluster that run on this host, round after round.
pub struct HostObserver {
    config: HostConfig,
    proc_root: PathBuf,
    clock_ticks: f64,
    last_cpu: BTreeMap<BrokerId, CpuMark>,
    look_timeout: Duration,
    reads: Pool,
}

/// Clock ticks per second, for utime and stime (100 on every common Linux).
pub fn clock_ticks() -> f64 {
    crate::sys::clock_ticks_per_second().map_or(100.0, |t| t as f64)
}

impl HostObserver {
    pub fn new(config: HostConfig) -> Self {
        Self::with_proc_root(config, PathBuf::from("/proc"))
    }

    /// Reads another directory as `/proc` (for tests).
    pub fn with_proc_root(config: HostConfig, proc_root: PathBuf) -> Self {
        HostObserver {
            config,
            proc_root,
            clock_ticks: clock_ticks(),
            last_cpu: BTreeMap::new(),
            look_timeout: LOOK_TIMEOUT,
            reads: read_pool(),
        }
    }

    /// Another deadline per look (tests).
    pub fn with_look_timeout(mut self, timeout: Duration) -> Self {
        self.look_timeout = timeout;
        self
    }

    /// One look at every configured broker.
    pub async fn observe(&mut self) -> BTreeMap<BrokerId, HostObservation> {
        let mut out = BTreeMap::new();
        for b in self.config.brokers.clone() {
            let obs = self.observe_broker(&b).await;
            out.insert(b.broker_id, obs);
        }
        out
    }

    async fn observe_broker(&mut self, b: &HostBrokerConfig) -> HostObservation {
        let timeout = self.look_timeout;
        let located = self.find_process(b).await;
        let root = self.proc_root.clone();
        let cfg = b.clone();
        let pid = located.pid;
        let mut obs = HostObservation::unseen(
            b.broker_id,
            b.process.describe(),
            self.config.log_dir_min_free_ratio,
        );
        if pid.is_none() && located.blocked {
            obs.error = located.note;
            return obs;
        }
        // /proc reads are quick, but statvfs on a hung network file system is not, nor is
        // a read of a process hung in storage: the bounded pool, under a deadline.
        let reads = self
            .reads
            .run(
                "reading /proc and the log directories",
                timeout,
                move || read_all(&root, &cfg, pid),
            )
            .await;
        let raw = match reads {
            Ok(raw) => raw,
            Err(why) => {
                obs.error = Some(why.to_string());
                return obs;
            }
        };
        let (process, not_found) = match (pid, raw.process) {
            (None, _) => (None, located.note.clone()),
            (Some(_), Ok(reading)) => (Some(reading), None),
            // The process ended between the lookup and the read.
            (Some(p), Err(e)) => (None, Some(format!("process {p} vanished: {e}"))),
        };
        obs.locate_note = if pid.is_some() { located.note } else { None };
        obs.not_found = not_found;
        obs.process = process.as_ref().map(|r| self.process_seen(b.broker_id, r));
        if process.is_none() {
            self.last_cpu.remove(&b.broker_id);
        }
        let sockets = process.as_ref().and_then(|r| r.fds.as_ref().ok());
        match raw.listeners {
            Ok(listeners) => obs.ports = ports_seen(&b.ports, &listeners, sockets),
            Err(e) => obs.ports_error = Some(e.to_string()),
        }
        obs.log_dirs = raw.log_dirs;
        obs
    }

    /// Finds the broker's process, within the look's deadline.
    async fn find_process(&self, b: &HostBrokerConfig) -> locate::Located {
        let timeout = self.look_timeout;
        tokio::time::timeout(
            timeout,
            locate::locate(&b.process, &self.proc_root, timeout, &self.reads),
        )
        .await
        .unwrap_or_else(|_| {
            locate::Located::blocked(format!(
                "finding the process took over {} s",
                timeout.as_secs_f64()
            ))
        })
    }

    fn process_seen(&mut self, broker: BrokerId, r: &process::ProcessReading) -> ProcessSeen {
        let ticks = r.stat.utime_ticks.saturating_add(r.stat.stime_ticks);
        let mark = CpuMark {
            pid: r.stat.pid,
            start_ticks: r.stat.start_ticks,
            ticks,
        };
        let advancing = self
            .last_cpu
            .get(&broker)
            .filter(|m| m.pid == mark.pid && m.start_ticks == mark.start_ticks)
            .map(|m| ticks > m.ticks);
        self.last_cpu.insert(broker, mark);
        let (open_fds, open_fds_error) = match &r.fds {
            Ok(f) => (Some(f.count), None),
            Err(e) => (None, Some(e.clone())),
        };
        ProcessSeen {
            pid: r.stat.pid,
            state: r.stat.state,
            threads: r.stat.num_threads,
            threads_in_io_wait: r.threads_in_io_wait,
            cpu_seconds: ticks as f64 / self.clock_ticks,
            cpu_advancing: advancing,
            open_fds,
            open_fds_error,
        }
    }
}

/// What each configured port shows: whether something listens on it, and whether that is
/// the broker's process (known when its descriptors were read).
fn ports_seen(
    ports: &[PortSpec],
    listeners: &[sockets::Listener],
    fds: Option<&process::Fds>,
) -> Vec<PortSeen> {
    ports
        .iter()
        .map(|spec| {
            let serving: Vec<_> = listeners
                .iter()
                .filter(|l| sockets::serves(l, spec.addr, spec.port))
                .collect();
            PortSeen {
                port: spec.to_string(),
                listening: !serving.is_empty(),
                owned_by_process: match fds {
                    Some(fds) if !serving.is_empty() => {
                        Some(serving.iter().any(|l| fds.sockets.contains(&l.inode)))
                    }
                    _ => None,
                },
            }
        })
        .collect()
}

/// Everything read from the file system for one broker, before interpretation.
struct RawReads {
    process: Result<process::ProcessReading, HostError>,
    listeners: Result<Vec<sockets::Listener>, HostError>,
    log_dirs: Vec<LogDirSeen>,
}

fn read_all(proc_root: &Path, b: &HostBrokerConfig, pid: Option<u32>) -> RawReads {
    let process = match pid {
        Some(p) => process::read_process(proc_root, p),
        None => Err(HostError::Read {
            path: proc_root.display().to_string(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no process"),
        }),
    };
    let listeners = if b.ports.is_empty() {
        Ok(Vec::new())
    } else {
        process::read_listeners(proc_root, pid)
    };
    let log_dirs = b
        .log_dirs
        .iter()
        .map(|d| match disk::statvfs(d) {
            Ok(s) => LogDirSeen {
                path: d.display().to_string(),
                total_bytes: Some(s.total_bytes),
                free_bytes: Some(s.free_bytes),
                free_ratio: Some(s.free_ratio),
                error: None,
            },
            Err(e) => LogDirSeen {
                path: d.display().to_string(),
                total_bytes: None,
                free_bytes: None,
                free_ratio: None,
                error: Some(e.to_string()),
            },
        })
        .collect();
    RawReads {
        process,
        listeners,
        log_dirs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{PortSpec, ProcessLocator};

    /// Host mode with one broker, 7, and the default limits.
    fn only(broker: HostBrokerConfig) -> HostConfig {
        HostConfig {
            log_dir_min_free_ratio: 0.05,
            remediation_cooldown: Duration::from_secs(60),
            remediation_max_per_day: 3,
            brokers: vec![broker],
        }
    }

    /// Broker 7 found by its command line, nothing else looked at.
    fn by_cmdline(pattern: &str) -> HostConfig {
        only(HostBrokerConfig {
            broker_id: 7,
            process: ProcessLocator::Cmdline {
                regex: regex::Regex::new(pattern).unwrap(),
                source: pattern.into(),
            },
            log_dirs: Vec::new(),
            ports: Vec::new(),
            remediation: None,
        })
    }

    fn config_for_self(port: u16) -> HostConfig {
        only(HostBrokerConfig {
            broker_id: 7,
            process: ProcessLocator::PidFile(pid_file()),
            log_dirs: vec![PathBuf::from("/"), PathBuf::from("/no/such/kw/dir")],
            ports: vec![
                PortSpec {
                    addr: Some("127.0.0.1".parse().unwrap()),
                    port,
                },
                PortSpec {
                    addr: Some("127.0.0.1".parse().unwrap()),
                    port: 1,
                },
            ],
            remediation: None,
        })
    }

    /// A lookup that finished and found nothing is a process not found, whatever its
    /// words: a command-line pattern that reads "took over" was taken for a lookup past its
    /// deadline (the note was searched for those words), and the broker reported unseen
    /// instead of gone.
    #[tokio::test]
    async fn a_finished_lookup_that_found_nothing_is_not_found_whatever_it_says() {
        let root = std::env::temp_dir().join(format!("kw-host-words-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let config = by_cmdline("took over");
        let mut o = HostObserver::with_proc_root(config, root.clone());
        let seen = o.observe().await.remove(&7).unwrap();
        assert_eq!(seen.error, None, "{seen:?}");
        assert!(
            seen.not_found
                .as_deref()
                .is_some_and(|n| n.contains("no process's command line matches")),
            "{seen:?}"
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    /// Issue 27 item 9: a broker hung in storage blocks reads of its `/proc` files; the
    /// lookup read them on the async runtime (with two worker threads, two such reads
    /// stalled the whole daemon), and each timed-out read left a blocked thread behind.
    /// Here a command line that is a FIFO nobody writes blocks every read of it. Looks run
    /// on a single-threaded runtime: one read on it would hang the look for good. Each
    /// look ends by its deadline, and at most `BLOCKED_READS_CAP` reads stay blocked.
    #[test]
    fn a_proc_read_that_blocks_costs_a_late_look_never_the_runtime() {
        let root = std::env::temp_dir().join(format!("kw-host-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("4242")).unwrap();
        let fifo = root.join("4242").join("cmdline");
        crate::sys::mkfifo(&fifo).unwrap();
        let config = by_cmdline("kafka");
        let (done, looks) = std::sync::mpsc::channel();
        let root_here = root.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let mut o = HostObserver::with_proc_root(config, root_here)
                    .with_look_timeout(Duration::from_millis(200));
                for _ in 0..8 {
                    let started = std::time::Instant::now();
                    let seen = o.observe().await.remove(&7).unwrap();
                    let _ = done.send((started.elapsed(), seen, o.reads.free()));
                }
            });
        });
        let mut notes = Vec::new();
        for k in 0..8 {
            let (took, seen, free) = looks
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("look {k} never ended: the runtime is blocked"));
            assert!(took < Duration::from_secs(2), "look {k} took {took:?}");
            assert!(seen.process.is_none(), "{seen:?}");
            assert!(free <= BLOCKED_READS_CAP);
            notes.push(format!(
                "{} {}",
                seen.not_found.unwrap_or_default(),
                seen.error.unwrap_or_default()
            ));
        }
        assert!(notes[0].contains("took over"), "{notes:?}");
        assert!(
            notes[7].contains("not attempted") && notes[7].contains("still blocked"),
            "{notes:?}"
        );
        // A writer comes and goes: every blocked read ends, their threads are free.
        for _ in 0..20 {
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo);
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_dir_all(&root);
    }

    fn pid_file() -> PathBuf {
        std::env::temp_dir().join(format!("kw-host-self-{}.pid", std::process::id()))
    }

    /// The test process observes itself: found by pid file, running, its own listener
    /// owned by it, a port nobody listens on, one log directory readable and one not.
    #[tokio::test]
    async fn observes_its_own_process() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::fs::write(pid_file(), format!("{}\n", std::process::id())).unwrap();
        let mut o = HostObserver::new(config_for_self(port));
        let first = o.observe().await.remove(&7).unwrap();
        let p = first.process.clone().expect("found");
        assert_eq!(p.pid, std::process::id());
        assert!(matches!(
            p.state,
            ProcessState::Running | ProcessState::Sleeping
        ));
        assert_eq!(p.cpu_advancing, None, "first look");
        assert!(p.open_fds.unwrap() >= 3);
        assert_eq!(first.ports[0].port, format!("127.0.0.1:{port}"));
        assert!(first.ports[0].listening);
        assert_eq!(first.ports[0].owned_by_process, Some(true));
        assert!(!first.ports[1].listening);
        assert_eq!(first.ports[1].owned_by_process, None);
        assert!(first.log_dirs[0].free_ratio.is_some());
        assert!(first.log_dirs[1].error.is_some());
        // Burn some CPU so the second look sees it move.
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(60) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        let second = o.observe().await.remove(&7).unwrap();
        assert!(second.process.unwrap().cpu_advancing.is_some());
        std::fs::write(pid_file(), "999999999\n").unwrap();
        let gone = o.observe().await.remove(&7).unwrap();
        assert!(gone.process.is_none());
        assert!(gone.not_found.unwrap().contains("not running"));
        assert!(!gone.ports[1].listening);
        let _ = std::fs::remove_file(pid_file());
    }

    #[test]
    fn low_log_dirs_use_the_configured_ratio() {
        let dir = |ratio: Option<f64>| LogDirSeen {
            path: "/d".into(),
            total_bytes: None,
            free_bytes: None,
            free_ratio: ratio,
            error: None,
        };
        let obs = HostObservation {
            log_dirs: vec![dir(Some(0.01)), dir(Some(0.5)), dir(None)],
            ..HostObservation::unseen(1, String::new(), 0.05)
        };
        assert_eq!(obs.low_log_dirs().count(), 1);
    }
}
