//! Reads one process's entries under `/proc`: its `stat`, the states of its threads, its
//! open descriptors, and the TCP listeners of its network namespace. Parsing is in `stat`
//! and `sockets`; this file only reads.

use std::collections::HashSet;
use std::path::Path;

use super::sockets::{parse_net_tcp, socket_inode, Listener};
use super::stat::{parse_stat, ProcStat, ProcessState};
use super::HostError;

/// How many thread entries are read at most: a JVM with thousands of threads must not
/// make one round read thousands of files.
const MAX_TASKS_READ: usize = 4096;

/// What one look at a process found.
#[derive(Debug, Clone)]
pub struct ProcessReading {
    pub stat: ProcStat,
    /// Threads in uninterruptible wait (D); `None` when the thread list cannot be read.
    pub threads_in_io_wait: Option<u32>,
    /// Open descriptors and the socket inodes among them, or why they cannot be read.
    pub fds: Result<Fds, String>,
}

#[derive(Debug, Clone, Default)]
pub struct Fds {
    pub count: u64,
    pub sockets: HashSet<u64>,
}

fn read_to_string(path: &Path) -> Result<String, HostError> {
    std::fs::read_to_string(path).map_err(|source| HostError::Read {
        path: path.display().to_string(),
        source,
    })
}

pub fn read_process(proc_root: &Path, pid: u32) -> Result<ProcessReading, HostError> {
    let dir = proc_root.join(pid.to_string());
    let stat = parse_stat(&read_to_string(&dir.join("stat"))?)?;
    Ok(ProcessReading {
        threads_in_io_wait: threads_in_io_wait(&dir),
        fds: fds(&dir).map_err(|e| e.to_string()),
        stat,
    })
}

fn threads_in_io_wait(dir: &Path) -> Option<u32> {
    let tasks = std::fs::read_dir(dir.join("task")).ok()?;
    let mut n = 0;
    for t in tasks.flatten().take(MAX_TASKS_READ) {
        // A thread that ended between the listing and the read is simply not counted.
        if let Ok(text) = std::fs::read_to_string(t.path().join("stat")) {
            if parse_stat(&text).is_ok_and(|s| s.state == ProcessState::DiskSleep) {
                n += 1;
            }
        }
    }
    Some(n)
}

/// Reading another user's descriptors needs ptrace access (CAP_SYS_PTRACE, or
/// CAP_DAC_READ_SEARCH for the listing): a refusal is reported, not a failure.
fn fds(dir: &Path) -> Result<Fds, HostError> {
    let fd_dir = dir.join("fd");
    let entries = std::fs::read_dir(&fd_dir).map_err(|source| match source.kind() {
        std::io::ErrorKind::PermissionDenied => HostError::Denied {
            path: fd_dir.display().to_string(),
        },
        _ => HostError::Read {
            path: fd_dir.display().to_string(),
            source,
        },
    })?;
    let mut out = Fds::default();
    for e in entries.flatten() {
        out.count += 1;
        if let Ok(target) = std::fs::read_link(e.path()) {
            if let Some(inode) = target.to_str().and_then(socket_inode) {
                out.sockets.insert(inode);
            }
        }
    }
    Ok(out)
}

/// Every TCP listener (IPv4 and IPv6) of the network namespace of `pid`, or of the
/// watchdog's own namespace when there is no process to ask.
pub fn read_listeners(proc_root: &Path, pid: Option<u32>) -> Result<Vec<Listener>, HostError> {
    let base = match pid {
        Some(p) if proc_root.join(p.to_string()).join("net/tcp").exists() => {
            proc_root.join(p.to_string()).join("net")
        }
        _ => proc_root.join("net"),
    };
    let mut out = parse_net_tcp(&read_to_string(&base.join("tcp"))?);
    // A kernel without IPv6 has no tcp6 table; that is not an error.
    if let Ok(text) = std::fs::read_to_string(base.join("tcp6")) {
        out.extend(parse_net_tcp(&text));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_process() {
        let r = read_process(Path::new("/proc"), std::process::id()).unwrap();
        assert_eq!(r.stat.pid, std::process::id());
        assert!(r.stat.num_threads >= 1);
        let fds = r.fds.expect("own descriptors are readable");
        assert!(fds.count >= 3, "stdin, stdout, stderr at least");
        assert!(r.threads_in_io_wait.is_some());
    }

    #[test]
    fn a_process_that_does_not_exist_is_an_error() {
        let e = read_process(Path::new("/proc"), u32::MAX - 1).unwrap_err();
        assert!(matches!(e, HostError::Read { .. }), "{e}");
    }

    #[test]
    fn its_own_listener_is_found_with_its_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let me = std::process::id();
        let all = read_listeners(Path::new("/proc"), Some(me)).unwrap();
        let mine = all
            .iter()
            .find(|x| x.port == port)
            .expect("the listener is in the table");
        let fds = read_process(Path::new("/proc"), me).unwrap().fds.unwrap();
        assert!(fds.sockets.contains(&mine.inode));
    }
}
