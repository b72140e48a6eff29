//! The real `kafka-watchdog` process: started with a config the caller wrote, waited for
//! until `/readyz` says 200, read over plain HTTP, killed when dropped. The integration tests
//! and the lab benchmarks each write their own config; starting, waiting and reading are
//! here once.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the config is refused by {bin} check-config:\n{output}\n--- config:\n{yaml}")]
    Refused {
        bin: String,
        output: String,
        yaml: String,
    },
    /// `log_tail`: the last lines the daemon logged, usually why.
    #[error("the watchdog was not ready within {} s; the end of its log ({}):\n{log_tail}", within.as_secs(), path.display())]
    NotReady {
        within: Duration,
        path: PathBuf,
        log_tail: String,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LaunchError {
    let what = what.into();
    move |source| LaunchError::Io { what, source }
}

/// Where watchdogs listen unless a test needs an address of their own.
pub const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// How to start one watchdog.
pub struct Launch<'a> {
    /// The `kafka-watchdog` binary.
    pub bin: &'a Path,
    /// Where the config and the log go; created if missing.
    pub dir: &'a Path,
    /// The address and port the config makes it listen on (usually [`LOOPBACK`]).
    pub host: IpAddr,
    pub port: u16,
    pub yaml: &'a str,
    /// Run `check-config` first, so a config the daemon refuses is reported as such rather
    /// than as a daemon that never became ready.
    pub check_config: bool,
    pub ready_within: Duration,
    /// Environment variables the daemon gets beside the inherited ones.
    pub env: &'a [(&'a str, &'a str)],
}

/// A running kafka-watchdog; killed when dropped.
pub struct Watchdog {
    child: Child,
    pub host: IpAddr,
    pub port: u16,
    pub dir: PathBuf,
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // A failed check's output is all a CI run keeps: the daemon's last words go with it.
        if std::thread::panicking() {
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(80)..].join("\n");
            eprintln!(
                "--- the end of the watchdog's log ({}):\n{tail}",
                self.dir.join("watchdog.log").display()
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Watchdog {
    /// Writes `watchdog.yaml` into the folder, starts `run -c` on it with stderr to
    /// `watchdog.log`, and waits until `/readyz` answers 200 (a round completed).
    pub fn launch(l: &Launch) -> Result<Watchdog, LaunchError> {
        std::fs::create_dir_all(l.dir).map_err(io(format!("create {}", l.dir.display())))?;
        let config = l.dir.join("watchdog.yaml");
        std::fs::write(&config, l.yaml).map_err(io(format!("write {}", config.display())))?;
        if l.check_config {
            let check = Command::new(l.bin)
                .args(["check-config", "-c"])
                .arg(&config)
                .output()
                .map_err(io(format!("run {}", l.bin.display())))?;
            if !check.status.success() {
                return Err(LaunchError::Refused {
                    bin: l.bin.display().to_string(),
                    output: format!(
                        "{}{}",
                        String::from_utf8_lossy(&check.stdout),
                        String::from_utf8_lossy(&check.stderr)
                    ),
                    yaml: l.yaml.to_string(),
                });
            }
        }
        let log =
            std::fs::File::create(l.dir.join("watchdog.log")).map_err(io("create watchdog.log"))?;
        let child = Command::new(l.bin)
            .args(["run", "-c"])
            .arg(&config)
            .envs(l.env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(io(format!("start {}", l.bin.display())))?;
        let w = Watchdog {
            child,
            host: l.host,
            port: l.port,
            dir: l.dir.to_path_buf(),
        };
        let deadline = Instant::now() + l.ready_within;
        loop {
            if let Ok((200, _)) = w.get("/readyz") {
                return Ok(w);
            }
            if Instant::now() > deadline {
                let log = w.log();
                let lines: Vec<&str> = log.lines().collect();
                return Err(LaunchError::NotReady {
                    within: l.ready_within,
                    path: w.log_path(),
                    log_tail: lines[lines.len().saturating_sub(60)..].join("\n"),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `within` for the daemon to end on its own; its exit status, or None
    /// while it still runs.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("watchdog.log")
    }

    /// What the daemon logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// A plain HTTP/1.0 GET: status code and body.
    pub fn get(&self, path: &str) -> std::io::Result<(u16, String)> {
        http_get_at(self.host, self.port, path)
    }

    /// `/status`, parsed; an error unless it answers 200 with JSON.
    pub fn status(&self) -> std::io::Result<Value> {
        let (code, body) = self.get("/status")?;
        status_json(code, &body)
    }

    /// [`status`](Self::status) without blocking the runtime it is awaited on.
    pub async fn status_async(&self) -> std::io::Result<Value> {
        let (code, body) = http_get_async_at(self.host, self.port, "/status").await?;
        status_json(code, &body)
    }
}

fn status_json(code: u16, body: &str) -> std::io::Result<Value> {
    if code != 200 {
        return Err(std::io::Error::other(format!(
            "GET /status: HTTP {code}: {body}"
        )));
    }
    serde_json::from_str(body).map_err(std::io::Error::other)
}

/// A free TCP port on loopback (bound, then released).
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn split_response(raw: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(raw);
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// HTTP/1.0 GET of 127.0.0.1:`port`, so the server closes the connection after the body.
pub fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    http_get_at(LOOPBACK, port, path)
}

/// [`http_get`] of another address.
pub fn http_get_at(host: IpAddr, port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let addr = SocketAddr::new(host, port);
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n")?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    Ok(split_response(&raw))
}

/// [`http_get`] on the runtime, with a 5 s deadline.
pub async fn http_get_async(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    http_get_async_at(LOOPBACK, port, path).await
}

async fn http_get_async_at(host: IpAddr, port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let get = async {
        let mut s = tokio::net::TcpStream::connect((host, port)).await?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
            .await?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = tokio::time::timeout(Duration::from_secs(5), get)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "GET timed out"))??;
    Ok(split_response(&raw))
}

/// The verdict of broker `id` in the first cluster of a /status document.
pub fn broker(status: &Value, id: i32) -> Option<&Value> {
    status["clusters"][0]["brokers"]
        .as_array()?
        .iter()
        .find(|b| b["broker"] == id)
}

/// Broker id -> verdict state, in the first cluster of a /status document.
pub fn broker_states(status: &Value) -> std::collections::BTreeMap<i32, String> {
    status["clusters"][0]["brokers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| {
            Some((
                i32::try_from(b["broker"].as_i64()?).ok()?,
                b["state"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// KRaft controller id -> verdict state (`clusters[0].quorum.controllers[]`), empty when the
/// watchdog sees no control plane.
pub fn controller_states(status: &Value) -> std::collections::BTreeMap<i32, String> {
    status["clusters"][0]["quorum"]["controllers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            Some((
                i32::try_from(c["controller"].as_i64()?).ok()?,
                c["state"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// Names of the rules that fired for controller `id`, in the first cluster.
pub fn controller_rules(status: &Value, id: i32) -> Vec<String> {
    status["clusters"][0]["quorum"]["controllers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["controller"] == id))
        .and_then(|c| c["hits"].as_array())
        .map(|hits| {
            hits.iter()
                .filter_map(|h| h["rule"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Names of the rules that fired for broker `id`, in the first cluster.
pub fn broker_rules(status: &Value, id: i32) -> Vec<String> {
    broker(status, id)
        .and_then(|b| b["hits"].as_array())
        .map(|hits| {
            hits.iter()
                .filter_map(|h| h["rule"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The round number of the first cluster.
pub fn status_round(status: &Value) -> Option<u64> {
    status["clusters"][0]["round"].as_u64()
}
