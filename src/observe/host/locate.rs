//! Finding a broker's process: the MainPID of a systemd unit, a pid file, or the oldest
//! process whose command line matches a pattern. Parsers are pure; the lookups read
//! `/proc` (or the directory given as its root, for tests) and ask systemd.

use std::path::{Path, PathBuf};
use std::time::Duration;

use regex::Regex;

use super::stat::parse_stat;
use crate::config::ProcessLocator;

/// The outcome of one lookup: a pid, or why there is none, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub pid: Option<u32>,
    /// Why no pid, or something worth knowing about the one found (several matches).
    pub note: Option<String>,
    /// The lookup did not finish (the host reads were blocked, or it ran past its
    /// deadline): no pid then says nothing of the process.
    pub blocked: bool,
}

impl Located {
    fn found(pid: u32) -> Self {
        Located {
            pid: Some(pid),
            note: None,
            blocked: false,
        }
    }

    fn none(why: impl Into<String>) -> Self {
        Located {
            pid: None,
            note: Some(why.into()),
            blocked: false,
        }
    }

    /// The lookup did not finish: `why`.
    pub(super) fn blocked(why: impl Into<String>) -> Self {
        Located {
            blocked: true,
            ..Located::none(why)
        }
    }
}

/// A pid as a pid file or `systemctl show -p MainPID --value` writes it. 0 is systemd's
/// "no main process" and is no pid.
pub fn parse_pid(text: &str) -> Option<u32> {
    text.split_whitespace()
        .next()?
        .parse::<u32>()
        .ok()
        .filter(|p| *p > 0)
}

/// A `cmdline` file (arguments separated by NUL) as one line of text.
pub fn cmdline_text(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw)
        .trim_end_matches('\0')
        .replace('\0', " ")
}

/// Numbered entries of a `/proc`-like directory: the pids.
fn pids(proc_root: &Path) -> Vec<u32> {
    std::fs::read_dir(proc_root)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

fn start_ticks(proc_root: &Path, pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    parse_stat(&text).ok().map(|s| s.start_ticks)
}

/// Of several candidates, the oldest: a broker's JVM outlives the helper processes
/// (scripts, `jcmd`, a `grep`) whose command lines may name the same things.
fn oldest(proc_root: &Path, candidates: &[u32]) -> Option<u32> {
    candidates
        .iter()
        .copied()
        .min_by_key(|p| (start_ticks(proc_root, *p).unwrap_or(u64::MAX), *p))
}

pub fn alive(proc_root: &Path, pid: u32) -> bool {
    proc_root.join(pid.to_string()).join("stat").exists()
}

/// The processes whose command line matches `re`, this watchdog excluded (its own command
/// line may contain the pattern).
pub fn matching(proc_root: &Path, re: &Regex, own_pid: u32) -> Vec<u32> {
    let mut out: Vec<u32> = pids(proc_root)
        .into_iter()
        .filter(|p| *p != own_pid)
        .filter(|p| {
            std::fs::read(proc_root.join(p.to_string()).join("cmdline"))
                .is_ok_and(|raw| !raw.is_empty() && re.is_match(&cmdline_text(&raw)))
        })
        .collect();
    out.sort_unstable();
    out
}

pub fn by_cmdline(proc_root: &Path, re: &Regex, src: &str) -> Located {
    let found = matching(proc_root, re, std::process::id());
    match found.as_slice() {
        [] => Located::none(format!("no process's command line matches '{src}'")),
        [one] => Located::found(*one),
        many => {
            let pid = oldest(proc_root, many).unwrap_or(many[0]);
            Located {
                pid: Some(pid),
                note: Some(format!(
                    "{} processes match '{src}'; the oldest ({pid}) is taken",
                    many.len()
                )),
                blocked: false,
            }
        }
    }
}

pub fn by_pid_file(proc_root: &Path, path: &Path) -> Located {
    match std::fs::read_to_string(path) {
        Err(e) => Located::none(format!("cannot read pid file {}: {e}", path.display())),
        Ok(text) => match parse_pid(&text) {
            None => Located::none(format!("pid file {} holds no pid", path.display())),
            Some(pid) if alive(proc_root, pid) => Located::found(pid),
            Some(pid) => Located::none(format!(
                "pid file {} names {pid}, which is not running",
                path.display()
            )),
        },
    }
}

/// The unit's cgroup under the unified hierarchy.
fn unit_cgroup(unit: &str) -> PathBuf {
    Path::new("/sys/fs/cgroup/system.slice")
        .join(unit)
        .join("cgroup.procs")
}

/// MainPID from systemd; when `systemctl` cannot be run (a container without it, a
/// sandbox without the bus), the oldest process of the unit's cgroup, which is its main
/// process unless it forked and exited.
pub async fn by_systemd_unit(proc_root: &Path, unit: &str, timeout: Duration) -> Located {
    let out = tokio::time::timeout(
        timeout,
        tokio::process::Command::new("systemctl")
            .args(["show", "-p", "MainPID", "--value", "--", unit])
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await;
    // A systemctl that does not answer leaves the process unknown, whatever the cgroup says.
    let timed_out = out.is_err();
    let systemctl = match out {
        Ok(Ok(o)) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            return match parse_pid(&text) {
                Some(pid) => Located::found(pid),
                None => Located::none(format!("systemd unit {unit} has no main process")),
            };
        }
        Ok(Ok(o)) => format!(
            "systemctl show {unit} failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Ok(Err(e)) => format!("cannot run systemctl: {e}"),
        Err(_) => format!("systemctl show {unit} took over {} s", timeout.as_secs()),
    };
    let procs = unit_cgroup(unit);
    match std::fs::read_to_string(&procs) {
        Ok(text) => {
            let candidates: Vec<u32> = text.lines().filter_map(parse_pid).collect();
            match oldest(proc_root, &candidates) {
                Some(pid) => Located::found(pid),
                None => not_found(
                    timed_out,
                    format!("{systemctl}; {} is empty", procs.display()),
                ),
            }
        }
        Err(e) => not_found(
            timed_out,
            format!("{systemctl}; cannot read {}: {e}", procs.display()),
        ),
    }
}

/// No pid: `why`, and whether the lookup was cut short before it could tell.
fn not_found(blocked: bool, why: String) -> Located {
    if blocked {
        Located::blocked(why)
    } else {
        Located::none(why)
    }
}

/// Finds the process as configured. Pid files and command lines are read in the bounded
/// pool of host reads (`super::read_pool`): a command line is read from `/proc`, where a
/// process hung in storage can block the read for as long as it hangs.
pub async fn locate(
    loc: &ProcessLocator,
    proc_root: &Path,
    timeout: Duration,
    pool: &crate::model::blocking::Pool,
) -> Located {
    let root = proc_root.to_path_buf();
    let read = match loc {
        ProcessLocator::SystemdUnit(unit) => {
            return by_systemd_unit(proc_root, unit, timeout).await
        }
        ProcessLocator::PidFile(path) => {
            let path = path.clone();
            pool.run("finding the process", timeout, move || {
                by_pid_file(&root, &path)
            })
            .await
        }
        ProcessLocator::Cmdline { regex, source } => {
            let (regex, source) = (regex.clone(), source.clone());
            pool.run("finding the process", timeout, move || {
                by_cmdline(&root, &regex, &source)
            })
            .await
        }
    };
    read.unwrap_or_else(|e| not_found(e.unfinished(), e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_as_written_by_pid_files_and_systemctl() {
        assert_eq!(parse_pid("4711\n"), Some(4711));
        assert_eq!(parse_pid("  4711  extra"), Some(4711));
        assert_eq!(parse_pid("0\n"), None, "systemd: no main process");
        assert_eq!(parse_pid(""), None);
        assert_eq!(parse_pid("-3"), None);
        assert_eq!(parse_pid("99999999999"), None);
        assert_eq!(parse_pid("abc"), None);
    }

    #[test]
    fn cmdlines() {
        assert_eq!(
            cmdline_text(b"java\0-Xmx1g\0kafka.Kafka\0/etc/kafka/server.properties\0"),
            "java -Xmx1g kafka.Kafka /etc/kafka/server.properties"
        );
        assert_eq!(cmdline_text(b""), "");
        assert_eq!(cmdline_text(b"\xffjava\0"), "\u{fffd}java");
    }

    /// A fake `/proc` with three processes: two JVMs matching, one shell.
    fn fake_proc() -> PathBuf {
        let root = std::env::temp_dir().join(format!(
            "kw-host-locate-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        let stat = |pid: u32, start: u64| {
            format!("{pid} (java) S 1 1 1 0 -1 0 0 0 0 0 10 5 0 0 20 0 50 0 {start} 0 0")
        };
        for (pid, cmd, start) in [
            (
                300u32,
                "java\0kafka.Kafka\0/srv/n1/server.properties\0",
                900u64,
            ),
            (200, "java\0kafka.Kafka\0/srv/n1/server.properties\0", 100),
            (100, "bash\0-c\0echo\0", 50),
        ] {
            let d = root.join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cmdline"), cmd).unwrap();
            std::fs::write(d.join("stat"), stat(pid, start)).unwrap();
        }
        std::fs::create_dir_all(root.join("self")).unwrap();
        root
    }

    #[test]
    fn command_line_lookup_takes_the_oldest_match() {
        let root = fake_proc();
        let re = Regex::new("kafka\\.Kafka .*/n1/").unwrap();
        assert_eq!(matching(&root, &re, 0), vec![200, 300]);
        assert_eq!(matching(&root, &re, 200), vec![300], "own pid excluded");
        let l = by_cmdline(&root, &re, "n1");
        assert_eq!(l.pid, Some(200));
        assert!(l.note.unwrap().contains("2 processes match"));
        let none = by_cmdline(&root, &Regex::new("zookeeper").unwrap(), "zookeeper");
        assert_eq!(none.pid, None);
        assert!(none.note.unwrap().contains("no process"));
        let _ = std::fs::remove_dir_all(root);
    }

    /// Whatever this machine is (systemd or not, systemctl installed or not), a unit that
    /// does not exist yields no pid and a reason, within the deadline.
    #[tokio::test]
    async fn an_unknown_systemd_unit_has_no_pid_and_says_why() {
        let started = std::time::Instant::now();
        let l = by_systemd_unit(
            Path::new("/proc"),
            "kw-no-such-unit-for-tests.service",
            Duration::from_secs(3),
        )
        .await;
        assert_eq!(l.pid, None);
        let why = l.note.unwrap();
        assert!(
            why.contains("kw-no-such-unit-for-tests.service"),
            "the reason names the unit: {why}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn pid_file_lookup_checks_the_process_exists() {
        let root = fake_proc();
        let file = root.join("kafka.pid");
        std::fs::write(&file, "300\n").unwrap();
        assert_eq!(by_pid_file(&root, &file).pid, Some(300));
        std::fs::write(&file, "301\n").unwrap();
        let gone = by_pid_file(&root, &file);
        assert_eq!(gone.pid, None);
        assert!(gone.note.unwrap().contains("301, which is not running"));
        std::fs::write(&file, "").unwrap();
        assert!(by_pid_file(&root, &file)
            .note
            .unwrap()
            .contains("holds no pid"));
        let missing = by_pid_file(&root, &root.join("nope.pid"));
        assert!(missing.note.unwrap().starts_with("cannot read pid file"));
        let _ = std::fs::remove_dir_all(root);
    }
}
