//! Sys: the watchdog's few calls into C (libc and librdkafka), each behind a safe function.
//! This is the one module allowed `unsafe` (the crate denies it everywhere else), so an
//! audit of memory safety reads this file and nothing more. Each block says why it is sound.

#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rdkafka::client::{Client, ClientContext};
use rdkafka::message::BorrowedMessage;

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the path holds a NUL byte"))
}

/// A filesystem's size as statvfs(3) gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsBlocks {
    /// Blocks in the filesystem, of `fragment_size` bytes.
    pub blocks: u64,
    /// Blocks an unprivileged writer may still use.
    pub blocks_available: u64,
    pub fragment_size: u64,
}

/// statvfs(3) of the filesystem that holds `path`.
pub fn statvfs(path: &Path) -> io::Result<FsBlocks> {
    let c = c_path(path)?;
    // SAFETY: statvfs fills the zeroed struct it is given and reads only `c`, a valid
    // NUL-terminated string that lives across the call.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // The field widths differ between targets; every one fits u64.
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    Ok(FsBlocks {
        blocks: u64::from(st.f_blocks),
        blocks_available: u64::from(st.f_bavail),
        fragment_size: st.f_frsize as u64,
    })
}

/// Clock ticks per second (the unit of /proc's utime and stime), when the system says.
pub fn clock_ticks_per_second() -> Option<u64> {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(t).ok().filter(|t| *t > 0)
}

/// The memory page size in bytes (the unit of /proc's statm), when the system says.
pub fn page_size() -> Option<u64> {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(p).ok().filter(|p| *p > 0)
}

/// The width in columns of the terminal on stdout, when stdout is one.
pub fn terminal_columns() -> Option<usize> {
    // SAFETY: TIOCGWINSZ fills the zeroed winsize it is given and touches nothing else.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}

/// Takes an exclusive flock(2) on `file` without waiting: `Ok(false)` when another open
/// file description (another process, or another open of the same file) holds it. The lock
/// lasts until every descriptor of this open file is closed, the process's end included
/// (a SIGKILL too). `std::fs::File::try_lock` does the same from Rust 1.89, above this
/// crate's rust-version.
pub fn try_lock_exclusive(file: &std::fs::File) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock only acts on the descriptor, which `file` keeps open across the call.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// A clock's time since its own epoch, as clock_gettime(2) reads it.
fn clock(id: libc::clockid_t) -> Option<std::time::Duration> {
    // SAFETY: clock_gettime fills the zeroed timespec it is given and reads nothing else.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    if unsafe { libc::clock_gettime(id, &mut ts) } != 0 {
        return None;
    }
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok()?;
    Some(std::time::Duration::new(secs, nanos))
}

/// How far CLOCK_BOOTTIME is ahead of CLOCK_MONOTONIC: the time the system spent
/// suspended since it booted. It grows only across a suspend, which the monotonic clock
/// (every timer of the watchdog) does not see.
pub fn suspended_since_boot() -> Option<std::time::Duration> {
    // Monotonic first: a tick between the two reads can only make the difference larger,
    // by nanoseconds, never negative.
    let mono = clock(libc::CLOCK_MONOTONIC)?;
    let boot = clock(libc::CLOCK_BOOTTIME)?;
    Some(boot.saturating_sub(mono))
}

/// What the kernel counts of one TCP connection (TCP_INFO), for telling lost packets
/// from a silent peer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpCounters {
    /// Data segments sent, retransmissions included (`tcpi_data_segs_out`).
    pub data_segs_out: u32,
    /// Segments retransmitted over the connection's life (`tcpi_total_retrans`).
    pub total_retrans: u32,
    /// Retransmission timeouts in a row of the oldest unacknowledged segment
    /// (`tcpi_retransmits`): above 0, data sent is not acknowledged and is being sent again.
    pub retransmits_now: u8,
    /// Segments sent and not yet acknowledged (`tcpi_unacked`).
    pub unacked: u32,
}

/// TCP_INFO of the socket `fd`; an error when `fd` is no TCP socket (or none at all).
pub fn tcp_info(fd: std::os::fd::RawFd) -> io::Result<TcpCounters> {
    // SAFETY: getsockopt writes at most `len` bytes into the zeroed tcp_info it is given
    // and sets `len` to what it wrote; any fd value is safe to pass (a bad one is EBADF or
    // ENOTSOCK). The fields read are plain integers, valid whatever the kernel filled.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpCounters {
        data_segs_out: info.tcpi_data_segs_out,
        total_retrans: info.tcpi_total_retrans,
        retransmits_now: info.tcpi_retransmits,
        unacked: info.tcpi_unacked,
    })
}

/// Makes a named pipe at `path` (tests: a /proc file whose read blocks).
#[cfg(test)]
pub fn mkfifo(path: &Path) -> io::Result<()> {
    let c = c_path(path)?;
    // SAFETY: `c` is a valid NUL-terminated path that lives across the call.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The broker that a delivered (or failed) message was sent to, as librdkafka recorded it:
/// `None` when it was never sent to one. rust-rdkafka does not expose it.
pub fn message_broker_id(message: &BorrowedMessage<'_>) -> Option<i32> {
    // SAFETY: the message pointer is valid for the borrow, and
    // rd_kafka_message_broker_id only reads a field of it.
    let id = unsafe { rdkafka::bindings::rd_kafka_message_broker_id(message.ptr()) };
    (id >= 0).then_some(id)
}

/// Hands librdkafka an OAUTHBEARER token for `client`, with its SASL extensions (the canary
/// sets every token itself: rust-rdkafka's refresh callback passes no extensions).
pub fn set_oauthbearer_token<C: ClientContext>(
    client: &Client<C>,
    token: &CStr,
    lifetime_ms: i64,
    principal: &CStr,
    extensions: &[(CString, CString)],
) -> Result<(), String> {
    let mut err = [0 as std::os::raw::c_char; 512];
    // librdkafka takes the extensions as one array of names and values, alternating.
    let mut flat: Vec<*const std::os::raw::c_char> = extensions
        .iter()
        .flat_map(|(k, v)| [k.as_ptr(), v.as_ptr()])
        .collect();
    // SAFETY: the client pointer is live for the borrow; the strings (and `flat`, which
    // points into `extensions`) outlive the call, which copies them; `flat` holds
    // `flat.len()` valid pointers (an even number) and is not written through; err is a
    // writable buffer of its size.
    let code = unsafe {
        rdkafka::bindings::rd_kafka_oauthbearer_set_token(
            client.native_ptr(),
            token.as_ptr(),
            lifetime_ms,
            principal.as_ptr(),
            if flat.is_empty() {
                std::ptr::null_mut()
            } else {
                flat.as_mut_ptr()
            },
            flat.len(),
            err.as_mut_ptr(),
            err.len(),
        )
    };
    if code == rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Ok(());
    }
    // librdkafka writes a NUL-terminated message into err (read up to the first NUL, or
    // the whole buffer if it wrote none).
    let bytes: Vec<u8> = err
        .iter()
        .map(|c| *c as u8)
        .take_while(|b| *b != 0)
        .collect();
    let msg = String::from_utf8_lossy(&bytes);
    Err(format!("librdkafka refused the token: {msg}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_filesystem_has_blocks_and_the_system_its_units() {
        let fs = statvfs(Path::new("/")).unwrap();
        assert!(fs.blocks > 0 && fs.fragment_size > 0 && fs.blocks_available <= fs.blocks);
        assert!(statvfs(Path::new("/no/such/dir")).is_err());
        assert!(statvfs(Path::new("a\0b")).is_err());
        assert_eq!(clock_ticks_per_second(), Some(100));
        assert!(page_size().is_some_and(|p| p >= 4096));
    }

    #[test]
    fn the_clocks_and_a_sockets_counters_are_read() {
        // Whatever this machine slept, the difference is a time, not an error.
        assert!(suspended_since_boot().is_some());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server, _) = listener.accept().unwrap();
        use std::io::Write;
        use std::os::fd::AsRawFd;
        client.write_all(b"ping").unwrap();
        let c = tcp_info(client.as_raw_fd()).unwrap();
        assert!(c.data_segs_out >= 1, "{c:?}");
        assert_eq!(c.total_retrans, 0, "{c:?}");
        assert!(tcp_info(-1).is_err());
        // A file is no socket.
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        assert!(tcp_info(f.as_raw_fd()).is_err());
    }

    #[test]
    fn a_fifo_is_made_once() {
        let p = std::env::temp_dir().join(format!("kw-sys-fifo-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        mkfifo(&p).unwrap();
        assert!(mkfifo(&p).is_err());
        std::fs::remove_file(&p).unwrap();
    }
}
