//! A broker's log directories, each a filesystem of its own as in production. The first,
//! `n<id>/data`, is a tmpfs of `DATA_DIR_MIB`: on the host's disk, every broker would
//! report the free space of the disk the lab (and the build beside it) happens to share,
//! and a nearly full CI disk made all three "run out of space" at once. The second
//! (`kafka-lab up --log-dirs 2`) is a small tmpfs mounted on `n<id>/data2`, Kafka's
//! `log.dirs` naming it after the first, and the filler file takes its last byte
//! (`kafka-lab fill N`). Kafka keeps its metadata log in the first directory
//! (`metadata.log.dir` defaults to it), so losing the second one leaves the broker up:
//! Kafka takes only that directory offline.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::LabError;
use crate::sys::run;

/// The size of each broker's second log directory.
pub const SMALL_DIR_MIB: u32 = 64;
/// The size of each broker's first log directory. A tmpfs takes memory only for what is
/// written (the lab's tests write a few MiB); this cap is far above that, and large
/// enough that the canary's pace never forecasts it full within the watchdog's hours.
pub const DATA_DIR_MIB: u32 = 4096;
/// The file `fill` writes into the small directory; Kafka ignores files at a log
/// directory's top level that are not its own.
pub const FILLER: &str = "kafka-lab-filler";
/// The line a Kafka broker (2.8 to 4.4, LogManager) logs when it takes a log directory
/// offline, followed by the directory.
pub const OFFLINE_LINE: &str = "Stopping serving logs in dir";

/// Whether `dir` is a mount point, as /proc/self/mountinfo lists them.
pub fn is_mounted(dir: &Path) -> bool {
    mount_points().iter().any(|m| m == dir)
}

/// Every mount point at or below `root`, deepest first (the order to unmount them in).
pub fn mounts_under(root: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = mount_points()
        .into_iter()
        .filter(|m| m.starts_with(root))
        .collect();
    found.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    found.dedup();
    found
}

fn mount_points() -> Vec<PathBuf> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(unescape(m)))
        .collect()
}

/// mountinfo writes space, tab, newline and backslash in octal (`\040`).
fn unescape(field: &str) -> String {
    let mut out = String::new();
    let mut rest = field;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest
            .get(i + 1..i + 4)
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(c) => {
                out.push(c as char);
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Mounts a tmpfs of `SMALL_DIR_MIB` on `dir` (created if missing), owned by the node's
/// user, unless one is mounted there already.
pub fn mount_small(dir: &Path, uid: u32, gid: u32) -> Result<(), LabError> {
    mount_tmpfs(dir, SMALL_DIR_MIB, uid, gid)
}

/// Mounts a tmpfs of `mib` MiB on `dir` (created if missing), owned by the node's user,
/// unless one is mounted there already.
pub fn mount_tmpfs(dir: &Path, mib: u32, uid: u32, gid: u32) -> Result<(), LabError> {
    fs::create_dir_all(dir).map_err(|e| LabError::io(dir, e))?;
    if is_mounted(dir) {
        return Ok(());
    }
    run(
        "mount",
        &[
            "-t",
            "tmpfs",
            "-o",
            &format!("size={mib}m,mode=0755,uid={uid},gid={gid}"),
            "kafka-lab",
            &dir.display().to_string(),
        ],
    )
    .map(|_| ())
}

/// Unmounts `dir`; lazily when something still holds it (a process that outlived the lab's
/// kill), so that `down` can remove the folder either way.
pub fn unmount(dir: &Path) -> Result<(), LabError> {
    let d = dir.display().to_string();
    if run("umount", &[&d]).is_ok() {
        return Ok(());
    }
    run("umount", &["-l", &d]).map(|_| ())
}

/// Bytes an unprivileged writer could still write in the filesystem of `dir`.
pub fn free_bytes(dir: &Path) -> Result<u64, LabError> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| LabError::Invalid(format!("{}: {e}", dir.display())))?;
    // SAFETY: statvfs writes into the struct we own; the path is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(LabError::io(dir, std::io::Error::last_os_error()));
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Writes the filler into `dir` until the filesystem refuses another byte (ENOSPC): in MiB
/// chunks, then in 512-byte ones for the last partial page. Returns the bytes written.
pub fn fill(dir: &Path) -> Result<u64, LabError> {
    let path = dir.join(FILLER);
    let mut file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| LabError::io(&path, e))?;
    let mut written = 0u64;
    for chunk in [1 << 20, 512] {
        let buf = vec![0u8; chunk];
        loop {
            match file.write(&buf) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(LabError::io(&path, e)),
            }
        }
    }
    Ok(written)
}

/// Removes the filler from `dir`; false when there was none.
pub fn unfill(dir: &Path) -> Result<bool, LabError> {
    let path = dir.join(FILLER);
    match fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(LabError::io(&path, e)),
    }
}

/// The partitions Kafka keeps in log directory `dir` (its `<topic>-<partition>` folders;
/// not the metadata log, nor folders being deleted or moved: `-delete`, `-future`,
/// `-stray`), sorted.
pub fn partitions_in(dir: &Path) -> Vec<(String, i32)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, i32)> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            if !e.file_type().ok()?.is_dir() {
                return None;
            }
            partition_of(&e.file_name().to_string_lossy())
        })
        .collect();
    out.sort();
    out
}

fn partition_of(name: &str) -> Option<(String, i32)> {
    let (topic, number) = name.rsplit_once('-')?;
    let partition = number.parse::<i32>().ok()?;
    if topic.is_empty()
        || topic == "__cluster_metadata"
        || !number.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    Some((topic.to_string(), partition))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_folders_are_told_from_kafkas_other_folders() {
        assert_eq!(partition_of("orders-0"), Some(("orders".into(), 0)));
        assert_eq!(
            partition_of("kafka-lab-fill-2-11"),
            Some(("kafka-lab-fill-2".into(), 11))
        );
        assert_eq!(
            partition_of("__consumer_offsets-2"),
            Some(("__consumer_offsets".into(), 2))
        );
        assert_eq!(partition_of("__cluster_metadata-0"), None);
        assert_eq!(
            partition_of("orders-0.0b8c3a1e5d2f4b7c9a6e1f0d2c3b4a59-delete"),
            None
        );
        assert_eq!(partition_of("orders-0.abc-future"), None);
        assert_eq!(partition_of("orders-0.abc-stray"), None);
        assert_eq!(partition_of("orders--1"), Some(("orders-".into(), 1)));
        assert_eq!(partition_of("lost+found"), None);
    }

    #[test]
    fn mountinfo_escapes_are_read_back() {
        assert_eq!(unescape("/tmp/a\\040b"), "/tmp/a b");
        assert_eq!(unescape("/tmp/plain"), "/tmp/plain");
    }

    /// The filler leaves nothing for anyone else, root included: Kafka's next write that
    /// needs a page fails with ENOSPC.
    #[test]
    fn the_filler_takes_a_small_tmpfs_to_its_last_byte_and_goes_again() {
        assert_eq!(unsafe { libc::geteuid() }, 0, "the lab's tests run as root");
        let dir = std::env::temp_dir().join(format!("kafka-lab-fill-test-{}", std::process::id()));
        mount_small(&dir, 0, 0).expect("mount a tmpfs");
        let result = (|| {
            assert!(is_mounted(&dir));
            let written = fill(&dir)?;
            assert!(written >= u64::from(SMALL_DIR_MIB - 1) << 20, "{written}");
            assert_eq!(free_bytes(&dir)?, 0);
            let more = fs::write(dir.join("one-more"), b"x");
            assert_eq!(more.map_err(|e| e.raw_os_error()), Err(Some(libc::ENOSPC)));
            assert!(unfill(&dir)?);
            assert!(!unfill(&dir)?);
            // tmpfs gives the pages back when the last holder of the file lets go, and a
            // process another test forks while the filler is open holds it until its exec:
            // on a loaded machine that is a while (CI saw it), so the space may come late.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while free_bytes(&dir)? <= u64::from(SMALL_DIR_MIB - 1) << 20
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            assert!(free_bytes(&dir)? > u64::from(SMALL_DIR_MIB - 1) << 20);
            Ok::<(), LabError>(())
        })();
        unmount(&dir).expect("unmount");
        let _ = fs::remove_dir_all(&dir);
        assert!(!is_mounted(&dir));
        result.unwrap();
    }
}
