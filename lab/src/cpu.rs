//! CPU starvation of one node through a cgroup CPU quota: the process keeps running and
//! answering, slowly, which is how an overloaded or swapping broker looks from outside.

use std::fs;
use std::path::PathBuf;

use crate::error::LabError;

const V1_ROOT: &str = "/sys/fs/cgroup/cpu";
const V2_ROOT: &str = "/sys/fs/cgroup";
const PERIOD_US: u64 = 100_000;

fn group(node: i32) -> (PathBuf, bool) {
    group_named(&format!("kafka-lab-n{node}"))
}

/// The CPU group `name` (its folder, and whether it is cgroup v1's).
fn group_named(name: &str) -> (PathBuf, bool) {
    let v1 = PathBuf::from(V1_ROOT);
    if v1.join("cpu.cfs_quota_us").exists() {
        (v1.join(name), true)
    } else {
        (PathBuf::from(V2_ROOT).join(name), false)
    }
}

fn write(path: PathBuf, value: &str) -> Result<(), LabError> {
    fs::write(&path, value).map_err(|e| LabError::io(&path, e))
}

/// Limits `pid` to `percent` of one CPU.
pub fn limit(node: i32, pid: u32, percent: u32) -> Result<(), LabError> {
    limit_in(group(node), pid, percent)
}

/// Limits `pid`, a process that is no lab node (the watchdog under test), to `percent` of
/// one CPU in the group `kafka-lab-<name>`; [`release`] ends it.
pub fn limit_process(name: &str, pid: u32, percent: u32) -> Result<(), LabError> {
    limit_in(group_named(&format!("kafka-lab-{name}")), pid, percent)
}

/// Lifts the limit of [`limit_process`], moves its processes back to the root group and
/// removes the group.
pub fn release(name: &str) -> Result<(), LabError> {
    let (dir, v1) = group_named(&format!("kafka-lab-{name}"));
    if !dir.exists() {
        return Ok(());
    }
    if v1 {
        write(dir.join("cpu.cfs_quota_us"), "-1")?;
    } else {
        write(dir.join("cpu.max"), &format!("max {PERIOD_US}"))?;
    }
    let root = dir.parent().map(PathBuf::from).unwrap_or_default();
    crate::cage::empty_into(&dir, &root)?;
    fs::remove_dir(&dir).map_err(|e| LabError::io(&dir, e))
}

fn limit_in((dir, v1): (PathBuf, bool), pid: u32, percent: u32) -> Result<(), LabError> {
    fs::create_dir_all(&dir).map_err(|e| LabError::io(&dir, e))?;
    let quota = PERIOD_US * u64::from(percent.clamp(1, 100)) / 100;
    if v1 {
        write(dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
        write(dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
    } else {
        write(dir.join("cpu.max"), &format!("{quota} {PERIOD_US}"))?;
    }
    write(dir.join("cgroup.procs"), &pid.to_string())
}

/// Lifts the quota; the process stays in the group, which then no longer limits it.
pub fn unlimit(node: i32) -> Result<(), LabError> {
    let (dir, v1) = group(node);
    if !dir.exists() {
        return Ok(());
    }
    if v1 {
        write(dir.join("cpu.cfs_quota_us"), "-1")
    } else {
        write(dir.join("cpu.max"), &format!("max {PERIOD_US}"))
    }
}

/// Removes the group (only possible once its processes are gone).
pub fn remove(node: i32) -> Result<(), LabError> {
    let (dir, _) = group(node);
    if dir.exists() {
        fs::remove_dir(&dir).map_err(|e| LabError::io(&dir, e))?;
    }
    Ok(())
}

pub fn exists(node: i32) -> bool {
    group(node).0.exists()
}
