//! Thin wrappers over the host tools and kernel interfaces the lab drives: Unix users,
//! processes and their /proc state, signals.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::LabError;

/// Runs a host tool and returns its stdout, or an error carrying its stderr.
pub fn run(tool: &str, args: &[&str]) -> Result<String, LabError> {
    let out = Command::new(tool)
        .args(args)
        .output()
        .map_err(|e| LabError::Tool {
            tool: tool.into(),
            detail: format!("cannot run: {e}"),
        })?;
    if !out.status.success() {
        return Err(LabError::Tool {
            tool: tool.into(),
            detail: format!(
                "`{} {}` failed: {}",
                tool,
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// uid and gid of a user, if it exists.
pub fn user_ids(name: &str) -> Option<(u32, u32)> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() > 3 && f[0] == name {
            Some((f[2].parse().ok()?, f[3].parse().ok()?))
        } else {
            None
        }
    })
}

/// Creates a system user without home or shell, or returns the existing one.
pub fn ensure_user(name: &str) -> Result<(u32, u32), LabError> {
    if let Some(ids) = user_ids(name) {
        return Ok(ids);
    }
    run(
        "useradd",
        &[
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            name,
        ],
    )?;
    user_ids(name).ok_or_else(|| LabError::Tool {
        tool: "useradd".into(),
        detail: format!("user {name} missing after creation"),
    })
}

/// Removes a lab user, ending whatever still runs as it first.
pub fn remove_user(name: &str) -> Result<(), LabError> {
    let Some((uid, _)) = user_ids(name) else {
        return Ok(());
    };
    // userdel refuses a user that any live process has. CI once failed `down` with "user
    // kafkalab0 is currently used by process 508" after the node's JVM had been killed and
    // waited for: whatever outlived that wait (a JVM slow to exit on a loaded machine, a tool
    // started as the user) is ended here rather than failing the teardown.
    for (pid, zombie) in processes_of(uid) {
        if !zombie {
            signal(pid, libc::SIGKILL)?;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_of(uid).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // What may be left is a zombie its parent has not reaped yet: it holds nothing of the
    // user's but its uid, so --force removes the user anyway.
    run("userdel", &["--force", name]).map(|_| ())
}

/// The processes whose real uid is `uid`, each with whether it is a zombie.
fn processes_of(uid: u32) -> Vec<(u32, bool)> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let field = |key: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(key))
                    .map(str::trim)
            };
            let real_uid = field("Uid:")?
                .split_whitespace()
                .next()?
                .parse::<u32>()
                .ok()?;
            let zombie = field("State:")?.starts_with('Z');
            (real_uid == uid).then_some((pid, zombie))
        })
        .collect()
}

/// What /proc says about a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcState {
    Running,
    /// Stopped by a signal (SIGSTOP): the process and its sockets exist, nothing runs.
    Stopped,
    /// Gone, or a zombie waiting to be reaped.
    Dead,
}

/// The state of `pid`, if it is still the process whose command line contains `marker`
/// (guards against a recycled pid). A process whose command line reads empty is not taken
/// for it: kernel threads have none, and a scan of every pid must not find them.
pub fn proc_state(pid: u32, marker: &str) -> ProcState {
    read_state(pid, marker, false)
}

/// [`proc_state`] of a pid the lab started itself: one whose command line reads empty is
/// in the middle of an `execve` (or exiting), judged by its state alone.
pub fn started_state(pid: u32, marker: &str) -> ProcState {
    read_state(pid, marker, true)
}

fn read_state(pid: u32, marker: &str, ours: bool) -> ProcState {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return ProcState::Dead;
    };
    if cmdline.is_empty() && !ours {
        return ProcState::Dead;
    }
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return ProcState::Dead;
    };
    state_of(&cmdline, &stat, marker)
}

/// [`proc_state`] from what /proc gave. An empty command line is a process in the middle of
/// an `execve` (the new image's arguments are not in place yet: a node's start goes sh ->
/// setsid -> java, two of them) or a zombie: judged by its state alone. A start was once
/// called an exit because a look fell in that window (CI, twice in a day).
fn state_of(cmdline: &[u8], stat: &str, marker: &str) -> ProcState {
    if !cmdline.is_empty() && !String::from_utf8_lossy(cmdline).contains(marker) {
        return ProcState::Dead;
    }
    // The command name may contain spaces or parentheses; the state follows the last ')'.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next())
        .unwrap_or("X");
    match state {
        "T" | "t" => ProcState::Stopped,
        "Z" | "X" | "x" => ProcState::Dead,
        _ => ProcState::Running,
    }
}

pub fn signal(pid: u32, sig: i32) -> Result<(), LabError> {
    // SAFETY: kill(2) has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid as i32, sig) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ESRCH) {
            return Err(LabError::Tool {
                tool: "kill".into(),
                detail: format!("signal {sig} to pid {pid}: {err}"),
            });
        }
    }
    Ok(())
}

/// Waits until `pid` is dead; false on timeout.
pub fn wait_dead(pid: u32, marker: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if proc_state(pid, marker) == ProcState::Dead {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    proc_state(pid, marker) == ProcState::Dead
}

/// True when something accepts TCP connections at `addr`.
pub fn port_open(addr: &str) -> bool {
    addr.parse()
        .ok()
        .and_then(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_millis(300)).ok())
        .is_some()
}

/// True when ZooKeeper at `addr` answers the `ruok` four-letter command with `imok` (it
/// serves; an open port alone can precede that).
pub fn zookeeper_ok(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(a) = addr.parse() else { return false };
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&a, Duration::from_millis(300)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut answer = String::new();
    s.write_all(b"ruok").is_ok() && s.read_to_string(&mut answer).is_ok() && answer == "imok"
}

/// Starts `program args` detached from the caller (own session, reparented to init), as the
/// given user, with stdout and stderr appended to `log`. Returns the pid.
pub fn spawn_detached(
    program: &str,
    args: &[String],
    uid: u32,
    gid: u32,
    cwd: &Path,
    log: &Path,
) -> Result<u32, LabError> {
    use std::os::unix::process::CommandExt;
    // sh starts the program in the background and prints its pid; `setsid` execs in place
    // (a background job is not a group leader), so the printed pid is the program's.
    let script = "setsid \"$@\" >>\"$LAB_LOG\" 2>&1 </dev/null & echo $!";
    let mut cmd = Command::new("/bin/sh");
    // A node outlives whoever started it: it must not keep their open files, such as the
    // lock of a `flock ... cargo test` that would then never be released.
    // Marked close-on-exec rather than closed, so the pipe std uses to report a failed exec
    // stays usable. SAFETY: close_range is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(|| {
            libc::close_range(
                3,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC as libc::c_int,
            );
            Ok(())
        });
    }
    let out = cmd
        .arg("-c")
        .arg(script)
        .arg("sh")
        .arg(program)
        .args(args)
        .env("LAB_LOG", log)
        .current_dir(cwd)
        .uid(uid)
        .gid(gid)
        .output()
        .map_err(|e| LabError::Tool {
            tool: program.into(),
            detail: format!("cannot start: {e}"),
        })?;
    let pid = String::from_utf8_lossy(&out.stdout).trim().parse::<u32>();
    match pid {
        Ok(p) if out.status.success() => Ok(p),
        _ => Err(LabError::Tool {
            tool: program.into(),
            detail: format!(
                "start failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        }),
    }
}

/// Recursively hands a folder to a user.
pub fn chown_tree(path: &Path, uid: u32, gid: u32) -> Result<(), LabError> {
    run(
        "chown",
        &["-R", &format!("{uid}:{gid}"), &path.display().to_string()],
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_between_two_execs_is_running_and_a_recycled_pid_is_not_ours() {
        let stat = |state: &str| format!("4242 (java) {state} 1 4242 4242 0 -1");
        let ours = b"java\0-cp\0x\0/tmp/kafka-lab/n4/server.properties\0";
        let marker = "/tmp/kafka-lab/n4/";
        assert_eq!(state_of(ours, &stat("S"), marker), ProcState::Running);
        assert_eq!(state_of(ours, &stat("T"), marker), ProcState::Stopped);
        assert_eq!(state_of(ours, &stat("Z"), marker), ProcState::Dead);
        // In the middle of an execve the command line reads empty: not an exit.
        assert_eq!(state_of(b"", &stat("R"), marker), ProcState::Running);
        assert_eq!(state_of(b"", &stat("Z"), marker), ProcState::Dead);
        // Someone else's process under a recycled pid.
        assert_eq!(state_of(b"bash\0", &stat("S"), marker), ProcState::Dead);
        // A command name with a parenthesis.
        assert_eq!(
            state_of(ours, "4242 (a) b) S 1 4242", marker),
            ProcState::Running
        );
    }
    use std::os::unix::process::CommandExt;

    /// Taking the lab down once failed on CI with "user kafkalab0 is currently used by
    /// process 508": something still ran as a node's user after its node was killed. Whatever
    /// it was, `down` must end it and remove the user.
    #[test]
    fn a_user_with_a_process_still_running_is_removed() {
        assert_eq!(
            unsafe { libc::geteuid() },
            0,
            "the lab's tests run as root (scripts/test)"
        );
        let name = "kafkalabtest";
        let (uid, gid) = ensure_user(name).expect("create the test user");
        let mut child = Command::new("sleep")
            .arg("60")
            .uid(uid)
            .gid(gid)
            .spawn()
            .expect("start a process as the user");
        let removed = remove_user(name);
        let _ = child.kill();
        let _ = child.wait();
        removed.expect("the user is removed");
        assert_eq!(user_ids(name), None);
        assert!(processes_of(uid).is_empty(), "nothing runs as the user");
    }
}
