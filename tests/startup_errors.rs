//! Start-up problems that come from the configuration meeting the machine (a state_dir that
//! is a file, a listen port someone else holds) end the real binary with 78 (EX_CONFIG), so
//! systemd's RestartPreventExitStatus=78 stops retrying, and `check-config` finds what it can
//! before the start. No Kafka needed: the cluster is an address where nothing listens.

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::watchdog::temp_dir;

fn yaml(listen: &str, state_dir: &Path) -> String {
    format!(
        "instance_id: startup\nhttp:\n  listen: {listen}\nstate_dir: {}\nclusters:\n  - name: nowhere\n    \
         bootstrap_servers: [127.0.0.1:1]\n    connect_timeout_ms: 300\n    request_timeout_ms: 300\n    \
         canary:\n      enabled: false\n",
        state_dir.display()
    )
}

/// Runs the binary with `args` and the config file, killing it if it outlives `limit`
/// (a daemon that started serving instead of failing).
fn run(dir: &Path, config: &str, args: &[&str], limit: Duration) -> Output {
    let file = dir.join("config.yaml");
    std::fs::write(&file, config).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kafka-watchdog"))
        .args(args)
        .arg("-c")
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kafka-watchdog");
    let end = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// A port on loopback that this test holds open for as long as the listener lives.
fn busy_port() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    (l, addr)
}

fn free_listen() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

#[test]
fn run_with_a_state_dir_that_is_a_file_exits_78() {
    let dir = temp_dir("startup-statefile");
    let state = dir.join("state");
    std::fs::write(&state, "not a directory").unwrap();
    let o = run(
        &dir,
        &yaml(&free_listen(), &state),
        &["run"],
        Duration::from_secs(10),
    );
    assert_eq!(o.status.code(), Some(78), "stderr: {}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("state_dir"), "{err}");
    assert!(err.contains(&state.display().to_string()), "{err}");
}

#[test]
fn run_on_a_busy_port_exits_78() {
    let dir = temp_dir("startup-busy");
    let (_held, listen) = busy_port();
    let o = run(
        &dir,
        &yaml(&listen, &dir.join("state")),
        &["run"],
        Duration::from_secs(10),
    );
    assert_eq!(o.status.code(), Some(78), "stderr: {}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("http.listen"), "{err}");
    assert!(err.contains(&listen), "{err}");
}

#[test]
fn check_config_finds_a_state_dir_that_is_a_file_or_under_one() {
    let dir = temp_dir("startup-check-statefile");
    let file = dir.join("plain-file");
    std::fs::write(&file, "x").unwrap();
    for state in [file.clone(), file.join("below")] {
        let o = run(
            &dir,
            &yaml(&free_listen(), &state),
            &["check-config"],
            Duration::from_secs(10),
        );
        assert_eq!(
            o.status.code(),
            Some(78),
            "{}: {}",
            state.display(),
            stderr(&o)
        );
        let err = stderr(&o);
        assert!(err.contains("state_dir"), "{err}");
        assert!(err.contains(&file.display().to_string()), "{err}");
    }
    // A state directory that does not exist yet is fine: the daemon (or systemd's
    // StateDirectory=) creates it, and check-config creates nothing.
    let later = dir.join("not-yet").join("state");
    let o = run(
        &dir,
        &yaml(&free_listen(), &later),
        &["check-config"],
        Duration::from_secs(10),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        !dir.join("not-yet").exists(),
        "check-config created the state dir"
    );
}

#[test]
fn check_config_startup_binds_the_listen_address_plain_check_config_does_not() {
    let dir = temp_dir("startup-check-port");
    let (held, listen) = busy_port();
    let cfg = yaml(&listen, &dir.join("state"));
    // ExecReload= runs plain check-config while the daemon itself holds the port: it must pass.
    let o = run(&dir, &cfg, &["check-config"], Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // ExecStartPre= runs it with --startup: nothing may hold the port before the start.
    let o = run(
        &dir,
        &cfg,
        &["check-config", "--startup"],
        Duration::from_secs(10),
    );
    assert_eq!(o.status.code(), Some(78), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("http.listen") && err.contains(&listen),
        "{err}"
    );
    drop(held);
    let o = run(
        &dir,
        &cfg,
        &["check-config", "--startup"],
        Duration::from_secs(10),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// Issue 38 item 10: two instances on one state directory both ran, each overwriting the
/// other's incident book, spools and silences. The second now stops with 78 and a sentence
/// naming the directory and the holder, while the first goes on; the directory it created
/// is its user's alone (0700).
#[test]
fn a_second_instance_on_the_same_state_dir_exits_78_and_the_first_goes_on() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("startup-two-on-one");
    let state = dir.join("state");
    let first_dir = dir.join("first");
    std::fs::create_dir_all(&first_dir).unwrap();
    let first_cfg = first_dir.join("config.yaml");
    std::fs::write(&first_cfg, yaml(&free_listen(), &state)).unwrap();
    let mut first = Command::new(env!("CARGO_BIN_EXE_kafka-watchdog"))
        .args(["run", "-c"])
        .arg(&first_cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the first kafka-watchdog");
    // The first holds the directory once its pid is in the lock file.
    let lock = state.join("lock");
    let end = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&lock).map_or(true, |s| s.trim() != first.id().to_string()) {
        assert!(
            Instant::now() < end,
            "the first instance never took {}",
            lock.display()
        );
        assert!(
            first.try_wait().unwrap().is_none(),
            "the first instance exited"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "state_dir created with mode {mode:o}");

    let o = run(
        &dir,
        &yaml(&free_listen(), &state),
        &["run"],
        Duration::from_secs(10),
    );
    let still_running = first.try_wait().unwrap().is_none();
    let _ = first.kill();
    let _ = first.wait();
    assert_eq!(o.status.code(), Some(78), "stderr: {}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("state_dir {}", state.display()))
            && err.contains("in use by another kafka-watchdog")
            && err.contains(&format!("process {}", first.id())),
        "{err}"
    );
    assert!(still_running, "the first instance stopped");
}
