//! Running a remediation command: an argv (never a shell string), placeholders replaced,
//! a deadline, stdin closed, a clean environment (the watchdog's own holds its secrets:
//! `*_env` passwords and tokens), stderr's tail kept for the event with anything that looks
//! like a secret masked. Runs on tokio, so a slow command never holds up a round.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

/// How much of stderr is kept for logs and the event: the end is where the error is.
pub const STDERR_TAIL_BYTES: usize = 2048;

/// The only variables of the watchdog's environment a command gets: what finding
/// programs, a locale, a home and a JVM take. Everything else (secrets read from the
/// environment above all) stays behind (issue 27 item 8).
const PASSED_ENV: [&str; 11] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "JAVA_HOME",
];

/// What a command's stderr may say that must not reach /status, webhooks or logs: values
/// given to secret-sounding keys (`password=...`, `"token": "..."`) and HTTP credentials.
pub fn redact(text: &str) -> String {
    static KEYED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r#"(?i)((?:password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credentials?|sasl\.jaas\.config)["']?\s*[:=]\s*["']?)[^\s"',;]+"#,
        )
        .expect("a valid pattern")
    });
    static SCHEMED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
            .expect("a valid pattern")
    });
    let text = KEYED.replace_all(text, "${1}[redacted]");
    SCHEMED.replace_all(&text, "${1} [redacted]").into_owned()
}

/// What the placeholders of a command stand for.
#[derive(Debug, Clone, Copy)]
pub struct Values<'a> {
    pub pid: Option<u32>,
    pub broker: i32,
    pub cluster: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("the command needs {{pid}} but host mode found no process")]
    NoPid,
}

/// The argv with `{pid}`, `{broker}` and `{cluster}` replaced.
pub fn expand(argv: &[String], v: &Values) -> Result<Vec<String>, ExpandError> {
    argv.iter()
        .map(|a| {
            let mut out = a
                .replace("{broker}", &v.broker.to_string())
                .replace("{cluster}", v.cluster);
            if out.contains("{pid}") {
                let pid = v.pid.ok_or(ExpandError::NoPid)?;
                out = out.replace("{pid}", &pid.to_string());
            }
            Ok(out)
        })
        .collect()
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// "exit status 0", "killed by signal 9", "timed out after 60 s (killed)", "cannot
    /// start: No such file or directory".
    pub status: String,
    pub success: bool,
    pub duration: Duration,
    /// The last `STDERR_TAIL_BYTES` of stderr, lossily decoded.
    pub stderr_tail: String,
}

/// Where stdout goes: nowhere, or a file kept for the post-mortem (a thread dump).
pub enum Output<'a> {
    Discard,
    /// stdout and stderr both, in the file.
    File(&'a Path),
}

/// Runs `argv` to its end or to `timeout`, and tells how it ended.
pub async fn run(argv: &[String], timeout: Duration, output: Output<'_>) -> Ran {
    let started = Instant::now();
    let failed = |status: String| Ran {
        status,
        success: false,
        duration: started.elapsed(),
        stderr_tail: String::new(),
    };
    let Some((program, args)) = argv.split_first() else {
        return failed("empty command".into());
    };
    let mut cmd = command(program, args);
    let keep_stderr = match direct_output(&mut cmd, output) {
        Ok(keep) => keep,
        Err(why) => return failed(why),
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot start {program}: {e}")),
    };
    let stderr = child.stderr.take().filter(|_| keep_stderr);
    let (status, success, tail) = wait(&mut child, stderr, program, timeout).await;
    Ran {
        status,
        success,
        duration: started.elapsed(),
        stderr_tail: redact(String::from_utf8_lossy(&tail).trim()),
    }
}

/// The command with stdin closed, killed if dropped, and only `PASSED_ENV` of the
/// watchdog's environment.
fn command(program: &str, args: &[String]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .env_clear()
        .envs(
            PASSED_ENV
                .iter()
                .filter_map(|k| Some((k, std::env::var_os(k)?))),
        );
    cmd
}

/// Points stdout and stderr where `output` says; true when stderr is piped for its tail,
/// an error (the command's status) when the output file cannot be made.
fn direct_output(cmd: &mut tokio::process::Command, output: Output<'_>) -> Result<bool, String> {
    match output {
        Output::Discard => {
            cmd.stdout(Stdio::null()).stderr(Stdio::piped());
            Ok(true)
        }
        Output::File(path) => {
            let file = std::fs::File::create(path)
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            let err = file
                .try_clone()
                .map_err(|e| format!("cannot share {}: {e}", path.display()))?;
            cmd.stdout(file).stderr(err);
            Ok(false)
        }
    }
}

/// How long stderr is still read once the command has ended: what it wrote before its end
/// is in the pipe by then. A process it started in the background may hold the pipe open
/// for as long as it runs (a broker a restart script started), so the end of the pipe is
/// never waited for.
const STDERR_DRAIN: Duration = Duration::from_millis(500);

/// Reads a piped stderr to its end into `tail`, keeping the last `STDERR_TAIL_BYTES`;
/// nothing when it is not piped.
async fn read_tail(stderr: Option<tokio::process::ChildStderr>, tail: Arc<Mutex<Vec<u8>>>) {
    let Some(mut s) = stderr else {
        return;
    };
    let mut buf = [0u8; 4096];
    // Read to the end so the child never blocks on a full pipe; keep only the tail.
    while let Ok(n) = s.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > STDERR_TAIL_BYTES {
            let excess = tail.len() - STDERR_TAIL_BYTES;
            tail.drain(..excess);
        }
    }
}

/// Waits for the child until `timeout`, then kills it, reading its stderr meanwhile: its
/// status, whether it succeeded, and the tail (none when it was killed).
async fn wait(
    child: &mut tokio::process::Child,
    stderr: Option<tokio::process::ChildStderr>,
    program: &str,
    timeout: Duration,
) -> (String, bool, Vec<u8>) {
    let tail = Arc::new(Mutex::new(Vec::new()));
    // Never stopped: it ends when the last holder of the pipe closes it. A broker started
    // in the background that writes to a closed pipe would get SIGPIPE and die; the task
    // keeps at most the tail in memory meanwhile.
    let reader = tokio::spawn(read_tail(stderr, tail.clone()));
    let waited = tokio::time::timeout(timeout, child.wait()).await;
    if waited.is_ok() {
        let _ = tokio::time::timeout(STDERR_DRAIN, reader).await;
    }
    let tail = std::mem::take(&mut *tail.lock().unwrap_or_else(PoisonError::into_inner));
    match waited {
        Ok(Ok(st)) => (describe(st), st.success(), tail),
        Ok(Err(e)) => (format!("cannot wait for {program}: {e}"), false, tail),
        Err(_) => {
            // SIGKILL reaches the command itself; processes it started and detached are
            // its own business (a restart script's broker must survive this).
            let _ = child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
            (
                format!("timed out after {} s (killed)", timeout.as_secs_f64()),
                false,
                Vec::new(),
            )
        }
    }
}

fn describe(st: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => "ended".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn placeholders() {
        let v = Values {
            pid: Some(4711),
            broker: 2,
            cluster: "lab",
        };
        assert_eq!(
            expand(
                &argv(&["jcmd", "{pid}", "Thread.print", "--b={broker}@{cluster}"]),
                &v
            )
            .unwrap(),
            argv(&["jcmd", "4711", "Thread.print", "--b=2@lab"])
        );
        let no_pid = Values { pid: None, ..v };
        assert_eq!(
            expand(&argv(&["jcmd", "{pid}"]), &no_pid),
            Err(ExpandError::NoPid)
        );
        assert_eq!(
            expand(&argv(&["systemctl", "restart", "kafka"]), &no_pid).unwrap(),
            argv(&["systemctl", "restart", "kafka"])
        );
    }

    #[tokio::test]
    async fn exit_status_and_stderr_tail() {
        let r = run(
            &argv(&["/bin/sh", "-c", "echo out; echo oops >&2; exit 3"]),
            Duration::from_secs(10),
            Output::Discard,
        )
        .await;
        assert_eq!(r.status, "exit status 3");
        assert!(!r.success);
        assert_eq!(r.stderr_tail, "oops");
        let ok = run(
            &argv(&["/bin/true"]),
            Duration::from_secs(10),
            Output::Discard,
        )
        .await;
        assert!(ok.success);
        assert_eq!(ok.status, "exit status 0");
    }

    /// Issue 27 item 8: the command gets none of the watchdog's environment but the
    /// allowed few (its secrets come from `*_env` variables), and what it prints that looks
    /// like a secret is masked before it is published.
    #[tokio::test]
    async fn a_command_gets_a_clean_environment_and_its_secrets_are_masked() {
        // The test process's environment has CARGO_* variables; none may reach the command.
        assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
        let r = run(
            &argv(&[
                "/bin/sh",
                "-c",
                "env >&2; echo 'sasl password=hunter2, \"token\": \"abc123\"' >&2; echo 'Authorization: Bearer eyJhbGciOiJFUzI1NiJ9' >&2",
            ]),
            Duration::from_secs(10),
            Output::Discard,
        )
        .await;
        assert!(r.success, "{r:?}");
        let t = &r.stderr_tail;
        assert!(!t.contains("CARGO_"), "{t}");
        assert!(t.contains("PATH="), "PATH is passed: {t}");
        assert!(!t.contains("hunter2") && !t.contains("abc123"), "{t}");
        assert!(!t.contains("eyJhbGciOiJFUzI1NiJ9"), "{t}");
        assert!(t.contains("password=[redacted]"), "{t}");
        assert!(t.contains("Bearer [redacted]"), "{t}");
        // Words that merely mention a secret stay readable.
        assert_eq!(redact("token refresh failed"), "token refresh failed");
    }

    #[tokio::test]
    async fn only_the_tail_of_a_long_stderr_is_kept() {
        let r = run(
            &argv(&[
                "/bin/sh",
                "-c",
                "head -c 100000 /dev/zero | tr '\\0' a >&2; echo END >&2",
            ]),
            Duration::from_secs(10),
            Output::Discard,
        )
        .await;
        assert!(r.success, "{r:?}");
        assert!(r.stderr_tail.len() <= STDERR_TAIL_BYTES);
        assert!(
            r.stderr_tail.ends_with("aEND"),
            "{}",
            &r.stderr_tail[r.stderr_tail.len() - 10..]
        );
    }

    /// A restart script that starts the broker in the background leaves it holding the
    /// script's stderr. The script's own end is what counts: it succeeded, with what it
    /// said. (The run waited for the pipe to close and reported the script killed at its
    /// deadline, with no tail.)
    #[tokio::test]
    async fn a_command_whose_detached_child_keeps_stderr_open_ends_when_it_exits() {
        let started = Instant::now();
        let r = run(
            &argv(&["/bin/sh", "-c", "echo starting >&2; sleep 6 & exit 0"]),
            Duration::from_secs(4),
            Output::Discard,
        )
        .await;
        assert_eq!(r.status, "exit status 0", "{r:?}");
        assert!(r.success);
        assert_eq!(r.stderr_tail, "starting");
        assert!(started.elapsed() < Duration::from_secs(3), "{r:?}");
    }

    #[tokio::test]
    async fn a_command_past_its_deadline_is_killed() {
        let started = Instant::now();
        let r = run(
            &argv(&["/bin/sleep", "30"]),
            Duration::from_millis(300),
            Output::Discard,
        )
        .await;
        assert_eq!(r.status, "timed out after 0.3 s (killed)");
        assert!(!r.success);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn a_missing_program_is_reported() {
        let r = run(
            &argv(&["/no/such/kw-program"]),
            Duration::from_secs(1),
            Output::Discard,
        )
        .await;
        assert!(
            r.status.starts_with("cannot start /no/such/kw-program"),
            "{}",
            r.status
        );
        assert!(!r.success);
        let r = run(&[], Duration::from_secs(1), Output::Discard).await;
        assert_eq!(r.status, "empty command");
    }

    #[tokio::test]
    async fn output_to_a_file_keeps_stdout_and_stderr() {
        let path = std::env::temp_dir().join(format!("kw-run-{}.txt", std::process::id()));
        let r = run(
            &argv(&["/bin/sh", "-c", "echo dump; echo warn >&2"]),
            Duration::from_secs(10),
            Output::File(&path),
        )
        .await;
        assert!(r.success);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("dump") && text.contains("warn"), "{text}");
        let _ = std::fs::remove_file(path);
    }
}
