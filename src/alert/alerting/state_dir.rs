//! The state directory before anything is kept in it: private to the daemon's user (the
//! incident book, silences, notification spools and the local API token are nobody
//! else's to read), writable, and held by one instance at a time (two instances on one
//! directory would each overwrite the other's incident book and send from the same spools).

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::AlertingError;

/// The file in the state directory whose lock says which process uses the directory; it
/// holds that process's id, for the message another instance gives.
pub const LOCK_FILE: &str = "lock";

/// Held for as long as the process uses the state directory: the kernel lets the lock go
/// when the process ends, however it ends, so a crashed instance never blocks the next.
#[derive(Debug)]
pub struct StateDirLock {
    _file: File,
}

/// Creates `dir` (0700, its missing parents as the umask says), makes an existing one
/// private when it is this user's, locks it and checks it can be written.
pub(super) fn prepare(dir: &Path) -> Result<StateDirLock, AlertingError> {
    let err = |error| AlertingError::StateDir {
        path: dir.display().to_string(),
        error,
    };
    make_private(dir).map_err(err)?;
    let lock = lock(dir)?;
    let probe = dir.join(".write-test");
    std::fs::write(&probe, b"").map_err(err)?;
    let _ = std::fs::remove_file(probe);
    Ok(lock)
}

fn make_private(dir: &Path) -> std::io::Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists && dir.is_dir() => {}
        Err(e) => return Err(e),
    }
    let mode = std::fs::metadata(dir)?.permissions().mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    // Made by an earlier version (0755) or by hand. Tightened rather than only warned
    // about: nothing of the watchdog's is meant for other users, and a warning at every
    // start about a directory the daemon itself made would be noise. A directory that is
    // not this user's (a volume mounted for a container, shared through its group) is
    // left as its owner set it.
    match std::fs::set_permissions(dir, Permissions::from_mode(0o700)) {
        Ok(()) => tracing::warn!(
            dir = %dir.display(),
            was = format!("{mode:o}"),
            "the state directory could be read by other users: made it 0700"
        ),
        Err(e) => tracing::info!(
            dir = %dir.display(),
            mode = format!("{mode:o}"),
            error = %e,
            "the state directory can be read by other users and is not this user's to change; left as it is"
        ),
    }
    Ok(())
}

fn lock(dir: &Path) -> Result<StateDirLock, AlertingError> {
    let path = dir.join(LOCK_FILE);
    let err = |error| AlertingError::StateDir {
        path: dir.display().to_string(),
        error,
    };
    // Not truncated on open: the file names the holder until the lock is ours.
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(err)?;
    let held = match crate::sys::try_lock_exclusive(&file) {
        Ok(taken) => !taken,
        // A filesystem without locks (ENOLCK, EOPNOTSUPP) must not keep the watchdog from
        // watching: it runs, unguarded, and says so.
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "cannot lock the state directory: a second instance on it would not be refused");
            false
        }
    };
    if held {
        let holder = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        return Err(AlertingError::InUse {
            path: dir.display().to_string(),
            holder: holder.map_or_else(
                || format!("the holder of {}", path.display()),
                |pid| format!("process {pid}, the holder of {}", path.display()),
            ),
        });
    }
    file.set_len(0).map_err(err)?;
    file.write_all(format!("{}\n", std::process::id()).as_bytes())
        .map_err(err)?;
    Ok(StateDirLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("kw-state-dir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_new_state_dir_is_made_0700_under_ordinary_parents() {
        let root = temp("new");
        let dir = root.join("a/state");
        let _lock = prepare(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        // The parents are not the watchdog's alone: the umask decides them.
        assert_ne!(mode(&root.join("a")), 0o700);
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn an_existing_state_dir_others_can_read_is_made_0700() {
        let dir = temp("loose");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, Permissions::from_mode(0o755)).unwrap();
        let _lock = prepare(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_held_state_dir_is_refused_naming_the_holder_until_it_is_let_go() {
        let dir = temp("held");
        let first = prepare(&dir).unwrap();
        let e = prepare(&dir).unwrap_err().to_string();
        let lock = dir.join(LOCK_FILE);
        assert_eq!(
            e,
            format!(
                "state directory {} is in use by another kafka-watchdog (process {}, the holder of {}) (expected a state_dir of its own for each instance)",
                dir.display(),
                std::process::id(),
                lock.display()
            )
        );
        drop(first);
        let _again = prepare(&dir).unwrap();
        assert_eq!(
            std::fs::read_to_string(&lock).unwrap(),
            format!("{}\n", std::process::id())
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
