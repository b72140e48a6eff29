//! Where a valid configuration meets this machine: a `state_dir` that is a file (or lies under
//! one), an `http.listen` address another process holds. The daemon stops on these with
//! exit status 78 (EX_CONFIG) because restarting cannot fix them, and `check-config` finds
//! them before the start where it can.
//!
//! `check-config` alone runs as ExecReload= too, while the daemon itself holds the port and
//! owns the state directory, and by hand as another user than the service's: it only looks at
//! what is true for everybody (is the path a directory). `check-config --startup` (the unit's
//! ExecStartPre=) also binds the listen address for a moment and writes a test file into an
//! existing state directory, as the daemon is about to.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// A start-up failure that restarting cannot fix: the daemon exits 78 on it.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("state_dir {path}: {why}")]
    StateDir { path: PathBuf, why: String },
    #[error("http.listen {addr}: {why}")]
    Listen { addr: SocketAddr, why: String },
}

/// The problem of `dir` that no user can get around: it, or the nearest part of its path
/// that exists, is not a directory. Creates nothing.
pub fn state_dir_shape(dir: &Path) -> Option<StartupError> {
    let mut at = Some(dir);
    while let Some(p) = at {
        match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => return None,
            Ok(_) if p == dir => {
                return Some(StartupError::StateDir {
                    path: dir.to_path_buf(),
                    why: "is a file, not a directory (expected a directory for incident state, or a path where one can be created)".into(),
                })
            }
            Ok(_) => {
                return Some(StartupError::StateDir {
                    path: dir.to_path_buf(),
                    why: format!(
                        "cannot be created: {} is a file, not a directory",
                        p.display()
                    ),
                })
            }
            // Missing (or under a file: ENOTDIR): look at the parent, which says which.
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                at = p.parent()
            }
            // Unreadable (no search permission for this user): the service's user may differ.
            Err(_) => return None,
        }
    }
    None
}

/// An existing state directory this process cannot write into. Writes and removes a test
/// file, as the daemon does at start.
pub fn state_dir_writable(dir: &Path) -> Option<StartupError> {
    if !dir.is_dir() {
        return None;
    }
    let probe = dir.join(".check-config-write-test");
    match std::fs::write(&probe, b"") {
        Ok(()) => {
            let _ = std::fs::remove_file(probe);
            None
        }
        Err(e) => Some(StartupError::StateDir {
            path: dir.to_path_buf(),
            why: format!("not writable by this user: {e}"),
        }),
    }
}

/// Whether a bind failure is the configuration's (78) rather than a passing condition.
pub fn listen_error(addr: SocketAddr, e: &std::io::Error) -> Option<StartupError> {
    let why = match e.kind() {
        ErrorKind::AddrInUse => {
            "the port is in use by another process (another kafka-watchdog? choose another http.listen)".to_string()
        }
        ErrorKind::AddrNotAvailable => "the address is not one of this host's".to_string(),
        ErrorKind::PermissionDenied => {
            "not permitted (a port below 1024 needs CAP_NET_BIND_SERVICE)".to_string()
        }
        _ => return None,
    };
    Some(StartupError::Listen { addr, why })
}

/// Binds `addr` and lets it go again at once.
pub fn listen_free(addr: SocketAddr) -> Option<StartupError> {
    match std::net::TcpListener::bind(addr) {
        Ok(_) => None,
        Err(e) => Some(listen_error(addr, &e).unwrap_or(StartupError::Listen {
            addr,
            why: format!("cannot listen: {e}"),
        })),
    }
}

/// What `check-config` adds to the file's validation; `startup` for ExecStartPre=.
pub fn check(config: &crate::config::Config, startup: bool) -> Vec<StartupError> {
    let mut problems: Vec<StartupError> = state_dir_shape(&config.state_dir).into_iter().collect();
    if startup {
        if problems.is_empty() {
            problems.extend(state_dir_writable(&config.state_dir));
        }
        problems.extend(listen_free(config.http_listen));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kw-preflight-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn state_dir_shape_names_the_file_in_the_way() {
        let d = temp("shape");
        let f = d.join("f");
        std::fs::write(&f, "x").unwrap();
        let e = state_dir_shape(&f).unwrap().to_string();
        assert!(e.contains("is a file, not a directory"), "{e}");
        let e = state_dir_shape(&f.join("a/b")).unwrap().to_string();
        assert!(e.contains(&format!("{} is a file", f.display())), "{e}");
        assert!(state_dir_shape(&d).is_none());
        assert!(state_dir_shape(&d.join("missing/deeper")).is_none());
        assert!(!d.join("missing").exists());
    }

    #[test]
    fn only_lasting_bind_failures_are_configuration_errors() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        for kind in [
            ErrorKind::AddrInUse,
            ErrorKind::AddrNotAvailable,
            ErrorKind::PermissionDenied,
        ] {
            assert!(listen_error(a, &kind.into()).is_some(), "{kind:?}");
        }
        assert!(listen_error(a, &ErrorKind::Interrupted.into()).is_none());
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let e = listen_free(held.local_addr().unwrap()).unwrap().to_string();
        assert!(e.contains("in use"), "{e}");
    }
}
