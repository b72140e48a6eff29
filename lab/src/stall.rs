//! Stops chosen threads of a broker's JVM and leaves the others running: the faults Kafka
//! does not repair. Stopping the request handlers and network threads (`data-plane-kafk`)
//! leaves the KRaft heartbeat thread going, so the broker stays registered and unfenced
//! while it answers nothing (incident 1's zombie, which only a watchdog sees); stopping
//! the replica fetchers (`ReplicaFetcherT`) is incident 2's dead fetcher thread. On the
//! control plane: a KRaft controller's event handler (`quorum-controll`), which applies
//! every request and writes every record while the Raft threads beside it keep the
//! leadership; and a broker's metadata loader (`kafka-N-metadat`), which applies the
//! metadata log its Raft fetch keeps receiving. Coordinators: a broker's group coordinator
//! (Kafka 4's event processors, `group-coordinat`), which alone answers its groups' offset
//! and membership requests while the broker serves everything else; and its transaction
//! coordinator's own threads (`TxnMarkerSender`, `transaction-log`).
//!
//! HotSpot names each native thread after its Java thread, cut to 15 bytes, in
//! /proc/<pid>/task/<tid>/comm. One thread stops alone under ptrace (PTRACE_SEIZE, then
//! PTRACE_INTERRUPT) and resumes on PTRACE_DETACH or when its tracer exits, so the tracer
//! is a small process that lives as long as the fault: forked twice (reparented to init,
//! own session), named `kafka-lab-stall`, its pid kept in the lab state. It rescans the
//! threads every half second, since fetcher threads are started lazily and restarted, and
//! exits when the broker's process is gone.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::LabError;

/// The name of a tracer process, in /proc/<pid>/comm.
pub const TRACER_NAME: &str = "kafka-lab-stall";

const RESCAN: Duration = Duration::from_millis(500);

/// Which threads of the node to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// Request handlers, network processors and acceptors.
    DataPlane,
    /// Replica fetchers.
    Fetchers,
    /// A KRaft controller's event handler (`QuorumController`'s event queue thread,
    /// `quorum-controller-<id>-event-handler`).
    Controller,
    /// A broker's metadata loader/publisher (`kafka-<id>-metadata-loader-event-handler`).
    Metadata { node: i32 },
    /// A broker's group coordinator (Kafka 4's new coordinator runtime): its event
    /// processors `group-coordinator-event-processor-0..3` (`group.coordinator.threads`),
    /// which run every group request (OffsetCommit, OffsetFetch, JoinGroup, Heartbeat,
    /// DescribeGroups, ListGroups, ...), and its timer `group-coordinator-reaper`; all five
    /// read `group-coordinat`. The classic coordinator (Kafka 2.8, 3.x) has no threads of
    /// its own: it runs on the request handlers.
    GroupCoordinator,
    /// A broker's transaction coordinator threads: `TxnMarkerSenderThread-<id>`, which
    /// writes the commit and abort markers to the partitions of a transaction that ends,
    /// and `transaction-log-manager-0`, the scheduler that loads `__transaction_state`
    /// partitions when the broker becomes their leader and aborts timed-out transactions.
    /// Every release has them (4.4 has no transaction coordinator runtime: InitProducerId,
    /// AddPartitionsToTxn and EndTxn run on the request handlers).
    TxnCoordinator,
}

/// HotSpot's native thread name: the Java name cut to 15 bytes.
fn comm_of(java_name: &str) -> String {
    java_name.chars().take(15).collect()
}

impl Threads {
    /// Their names in /proc/<pid>/task/<tid>/comm (15 bytes of the Java thread name).
    pub fn comms(self) -> Vec<String> {
        match self {
            Threads::DataPlane => vec!["data-plane-kafk".into()],
            Threads::Fetchers => vec!["ReplicaFetcherT".into()],
            Threads::Controller => vec![comm_of("quorum-controller-0-event-handler")],
            Threads::Metadata { node } => {
                vec![comm_of(&format!(
                    "kafka-{node}-metadata-loader-event-handler"
                ))]
            }
            Threads::GroupCoordinator => vec![comm_of("group-coordinator-event-processor-0")],
            Threads::TxnCoordinator => vec![
                comm_of("TxnMarkerSenderThread-1"),
                comm_of("transaction-log-manager-0"),
            ],
        }
    }
}

/// The threads of `pid` whose name is one of `comms`; `None` when the process is gone.
pub fn threads_named(pid: u32, comms: &[String]) -> Option<Vec<i32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    Some(
        tasks
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|tid| {
                std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                    .is_ok_and(|c| comms.iter().any(|n| c.trim_end() == n))
            })
            .collect(),
    )
}

/// Whether `pid` is a live tracer (guards against a recycled pid).
pub fn is_tracer(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == TRACER_NAME)
        && crate::sys::proc_state(pid, "") != crate::sys::ProcState::Dead
}

/// Starts a tracer that stops `threads` of process `pid` until it is ended. Returns its pid
/// and how many threads it stopped on its first scan.
pub fn start(pid: u32, threads: Threads) -> Result<(u32, u32), LabError> {
    let fail = |detail: String| LabError::Tool {
        tool: "ptrace".into(),
        detail,
    };
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(fail(format!("pipe: {}", std::io::Error::last_os_error())));
    }
    let (read_end, write_end) = (fds[0], fds[1]);
    // SAFETY: the child only calls fork, setsid and _exit before the grandchild runs the
    // tracer, which uses system calls and the allocator (fork-safe in glibc), no lock of
    // the parent's (no stdio, no environment).
    let child = unsafe { libc::fork() };
    if child < 0 {
        let e = std::io::Error::last_os_error();
        // SAFETY: closing descriptors this function owns.
        unsafe {
            libc::close(read_end);
            libc::close(write_end);
        }
        return Err(fail(format!("fork: {e}")));
    }
    if child == 0 {
        // SAFETY: see above; the intermediate child exits at once so the tracer is
        // reparented to init and never becomes the caller's zombie.
        unsafe {
            libc::close(read_end);
            libc::setsid();
            if libc::fork() != 0 {
                libc::_exit(0);
            }
        }
        tracer(pid, threads, write_end);
    }
    // SAFETY: closing our copy of the write end; reaping the intermediate child.
    unsafe {
        libc::close(write_end);
        libc::waitpid(child, std::ptr::null_mut(), 0);
    }
    let report = read_report(read_end, Duration::from_secs(10));
    // SAFETY: closing a descriptor this function owns.
    unsafe { libc::close(read_end) };
    let [tracer_pid, stopped, errno] =
        report.ok_or_else(|| fail(format!("the tracer for pid {pid} did not report in 10 s")))?;
    if errno != 0 {
        return Err(fail(format!(
            "cannot stop the {} threads of pid {pid}: {}",
            threads.comms().join(" or "),
            std::io::Error::from_raw_os_error(errno)
        )));
    }
    Ok((tracer_pid as u32, stopped as u32))
}

/// Ends a tracer: it detaches its threads (they resume) and exits.
pub fn stop(tracer: u32) -> Result<(), LabError> {
    if !is_tracer(tracer) {
        return Ok(());
    }
    crate::sys::signal(tracer, libc::SIGTERM)?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if !is_tracer(tracer) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Its exit detaches the threads too.
    crate::sys::signal(tracer, libc::SIGKILL)
}

/// Three i32: tracer pid, threads stopped, errno (0 when fine).
fn read_report(fd: libc::c_int, timeout: Duration) -> Option<[i32; 3]> {
    let mut buf = [0u8; 12];
    let mut got = 0;
    let deadline = Instant::now() + timeout;
    while got < buf.len() {
        let left = deadline.checked_duration_since(Instant::now())?;
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, a valid descriptor.
        let n = unsafe { libc::poll(&mut p, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            return None;
        }
        // SAFETY: reading into the unfilled rest of a local buffer.
        let r = unsafe {
            libc::read(
                fd,
                buf[got..].as_mut_ptr() as *mut libc::c_void,
                buf.len() - got,
            )
        };
        if r <= 0 {
            return None;
        }
        got += r as usize;
    }
    let int = |i: usize| i32::from_ne_bytes(buf[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
    Some([int(0), int(1), int(2)])
}

static ENDED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_end(_: libc::c_int) {
    ENDED.store(true, Ordering::SeqCst);
}

/// Stops one thread; the errno when it cannot.
fn stop_thread(tid: i32) -> Result<(), i32> {
    let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY: ptrace and waitpid on a thread id, no memory passed.
    unsafe {
        if libc::ptrace(libc::PTRACE_SEIZE, tid, 0, 0) != 0 {
            return Err(errno());
        }
        if libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) != 0 {
            let e = errno();
            libc::ptrace(libc::PTRACE_DETACH, tid, 0, 0);
            return Err(e);
        }
        let mut status = 0;
        if libc::waitpid(tid, &mut status, libc::__WALL) != tid {
            return Err(errno());
        }
    }
    Ok(())
}

/// The tracer's life: stop every matching thread, again every half second, until a
/// signal ends it or the process is gone.
fn tracer(pid: u32, threads: Threads, report: libc::c_int) -> ! {
    // SAFETY: naming this process, redirecting its standard descriptors to /dev/null,
    // closing what it inherited, and installing a handler that only stores an atomic.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"kafka-lab-stall".as_ptr(), 0, 0, 0);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        for fd in 0..3 {
            libc::dup2(null, fd);
        }
        for fd in 3..1024 {
            if fd != report {
                libc::close(fd);
            }
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_end as *const () as usize;
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    let mut stopped: BTreeSet<i32> = BTreeSet::new();
    let mut report = Some(report);
    let comms = threads.comms();
    loop {
        if ENDED.load(Ordering::SeqCst) {
            for tid in &stopped {
                // SAFETY: detaching a thread this process traces.
                unsafe { libc::ptrace(libc::PTRACE_DETACH, *tid, 0, 0) };
            }
            // SAFETY: ends the process without running the caller's exit handlers.
            unsafe { libc::_exit(0) };
        }
        let Some(tids) = threads_named(pid, &comms) else {
            // SAFETY: as above; the broker's process is gone, its threads with it.
            unsafe { libc::_exit(0) };
        };
        let mut first_error = 0;
        for tid in tids {
            if stopped.contains(&tid) {
                continue;
            }
            match stop_thread(tid) {
                Ok(()) => {
                    stopped.insert(tid);
                }
                Err(e) => first_error = if first_error == 0 { e } else { first_error },
            }
        }
        // Threads that ended (a fetcher shut down by the broker) leave the set.
        loop {
            let mut status = 0;
            // SAFETY: reaping exited tracees without blocking.
            let tid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::__WALL) };
            if tid <= 0 {
                break;
            }
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                stopped.remove(&tid);
            }
        }
        if let Some(fd) = report.take() {
            let errno = if stopped.is_empty() { first_error } else { 0 };
            let mut buf = [0u8; 12];
            // SAFETY: getpid has no preconditions.
            buf[..4].copy_from_slice(&unsafe { libc::getpid() }.to_ne_bytes());
            buf[4..8].copy_from_slice(&(stopped.len() as i32).to_ne_bytes());
            buf[8..].copy_from_slice(&errno.to_ne_bytes());
            // SAFETY: writing a local buffer to the report pipe, then closing it.
            unsafe {
                libc::write(fd, buf.as_ptr() as *const libc::c_void, buf.len());
                libc::close(fd);
            }
            if errno != 0 {
                // SAFETY: as above.
                unsafe { libc::_exit(1) };
            }
        }
        std::thread::sleep(RESCAN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_names_are_the_java_names_cut_to_fifteen_bytes() {
        assert_eq!(Threads::Controller.comms(), ["quorum-controll"]);
        assert_eq!(Threads::Metadata { node: 2 }.comms(), ["kafka-2-metadat"]);
        // Ids of more digits leave fewer letters of the name.
        assert_eq!(Threads::Metadata { node: 100 }.comms(), ["kafka-100-metad"]);
        assert_eq!(Threads::DataPlane.comms(), ["data-plane-kafk"]);
        // The event processors and the reaper share one name.
        assert_eq!(Threads::GroupCoordinator.comms(), ["group-coordinat"]);
        assert_eq!(comm_of("group-coordinator-reaper"), "group-coordinat");
        assert_eq!(
            Threads::TxnCoordinator.comms(),
            ["TxnMarkerSender", "transaction-log"]
        );
    }
}
