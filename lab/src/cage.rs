//! A process that is no lab node (the watchdog under test) made unwell the ways a node can
//! be: starved of CPU (`cpu::limit_process`), stopped and continued (SIGSTOP/SIGCONT), or
//! losing a share of its TCP packets, with rules in the lab's own iptables chains that
//! match its cgroup v2 group.
//!
//! A socket carries the cgroup its process was in when it was made, and that is what
//! `-m cgroup --path` matches: a process moved into the group later keeps sending its old
//! connections' packets unmatched. So the process must start inside the group:
//! [`Cage::launcher`] writes a script that joins it and then execs the real binary.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::LabError;
use crate::netfault::{CHAIN, CHAIN_IN};

/// The connection mark of a caged process's connections ("KW").
const MARK: &str = "0x4b570000/0xffff0000";

/// The unified hierarchy, where `-m cgroup --path` looks: `/sys/fs/cgroup/unified` beside
/// cgroup v1 controllers, else `/sys/fs/cgroup` itself.
fn v2_root() -> PathBuf {
    let hybrid = PathBuf::from("/sys/fs/cgroup/unified");
    if hybrid.join("cgroup.procs").exists() {
        hybrid
    } else {
        PathBuf::from("/sys/fs/cgroup")
    }
}

/// Moves every process of the group `dir` into the group `to` (its parent), so that `dir`
/// can be removed.
pub fn empty_into(dir: &Path, to: &Path) -> Result<(), LabError> {
    let procs = dir.join("cgroup.procs");
    let listed = fs::read_to_string(&procs).unwrap_or_default();
    let target = to.join("cgroup.procs");
    for pid in listed.split_whitespace() {
        // A process that exited meanwhile is gone from the group anyway.
        let _ = fs::write(&target, pid);
    }
    Ok(())
}

/// The cgroup v2 group `kafka-lab-<name>-net` of one process, and what is done to it.
/// Dropping it removes its packet rules and the group.
pub struct Cage {
    name: String,
    dir: PathBuf,
}

impl Cage {
    pub fn new(name: &str) -> Result<Cage, LabError> {
        let group = format!("kafka-lab-{name}-net");
        let dir = v2_root().join(&group);
        fs::create_dir_all(&dir).map_err(|e| LabError::io(&dir, e))?;
        Ok(Cage {
            name: name.to_string(),
            dir,
        })
    }

    /// The group's path below the unified root, as `--path` takes it.
    fn path(&self) -> String {
        format!("kafka-lab-{}-net", self.name)
    }

    fn tag(&self) -> String {
        format!("kafka-lab:{}:loss", self.name)
    }

    /// A script in `folder` that joins the group and then execs `bin` with its arguments:
    /// run it in place of `bin`.
    pub fn launcher(&self, bin: &Path, folder: &Path) -> Result<PathBuf, LabError> {
        fs::create_dir_all(folder).map_err(|e| LabError::io(folder, e))?;
        let script = folder.join(format!("{}-in-cage.sh", self.name));
        let text = format!(
            "#!/bin/sh\necho $$ > '{}'\nexec '{}' \"$@\"\n",
            self.dir.join("cgroup.procs").display(),
            bin.display()
        );
        fs::write(&script, text).map_err(|e| LabError::io(&script, e))?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755))
            .map_err(|e| LabError::io(&script, e))?;
        Ok(script)
    }

    /// Loses `percent` % of the packets of the group's TCP connections, both ways, at
    /// random, from now on: its packets mark their connection (CONNMARK, in the lab's
    /// OUTPUT chain), and the packets of marked connections are dropped as they arrive (the
    /// lab's INPUT chain), so the sender's TCP sees them lost and sends them again, as on a
    /// real network. Connection tracking is on for the host while the rules exist.
    /// `heal` and `down` flush both chains too.
    pub fn lose(&self, percent: u32) -> Result<(), LabError> {
        crate::netfault::ensure_chain()?;
        crate::netfault::ensure_in_chain()?;
        let p = format!("{:.4}", f64::from(percent.min(100)) / 100.0);
        let (path, tag) = (self.path(), self.tag());
        crate::netfault::append(
            CHAIN,
            &[
                "-p",
                "tcp",
                "-m",
                "cgroup",
                "--path",
                &path,
                "-m",
                "comment",
                "--comment",
                &tag,
                "-j",
                "CONNMARK",
                "--set-xmark",
                MARK,
            ],
        )?;
        crate::netfault::append(
            CHAIN_IN,
            &[
                "-p",
                "tcp",
                "-m",
                "connmark",
                "--mark",
                MARK,
                "-m",
                "statistic",
                "--mode",
                "random",
                "--probability",
                &p,
                "-m",
                "comment",
                "--comment",
                &tag,
                "-j",
                "DROP",
            ],
        )
    }

    /// Removes the packet rules of [`lose`](Self::lose).
    pub fn stop_losing(&self) -> Result<(), LabError> {
        crate::netfault::remove_tagged(&self.tag())
    }
}

impl Drop for Cage {
    fn drop(&mut self) {
        if let Err(e) = self.stop_losing() {
            eprintln!("cage {}: {e}", self.name);
        }
        let root = v2_root();
        let _ = empty_into(&self.dir, &root);
        let _ = fs::remove_dir(&self.dir);
    }
}
