//! The few files the watchdog reads of itself for its health: which CPU cgroup it is in
//! (`/proc/self/cgroup`) and how long that cgroup and its ancestors were throttled
//! (`cpu.stat`). Kept in one place, off the async workers (the caller runs
//! [`cpu_refused`] on the blocking pool), and pure below the one function that reads.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the CPU controller's hierarchy is mounted: cgroup v1 (the `cpu` controller,
/// alone or with `cpuacct`) or v2 (one unified hierarchy).
const V1_ROOTS: [&str; 2] = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"];
const V2_ROOT: &str = "/sys/fs/cgroup";

/// The process's CPU cgroup as `/proc/self/cgroup` names it: the path within the v1 `cpu`
/// hierarchy when that controller is on v1, else the path in the v2 hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuCgroup {
    V1(String),
    V2(String),
}

/// Reads `/proc/<pid>/cgroup`'s text.
pub fn parse_cgroup(text: &str) -> Option<CpuCgroup> {
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(CpuCgroup::V2(path.to_string()));
        } else if controllers.split(',').any(|c| c == "cpu") {
            return Some(CpuCgroup::V1(path.to_string()));
        }
    }
    v2
}

/// The throttled time `cpu.stat` gives: `throttled_usec` (v2) or `throttled_time`, in
/// nanoseconds (v1).
pub fn parse_throttled(cpu_stat: &str) -> Option<Duration> {
    cpu_stat.lines().find_map(|l| {
        let (key, value) = l.split_once(' ')?;
        let n: u64 = value.trim().parse().ok()?;
        match key {
            "throttled_usec" => Some(Duration::from_micros(n)),
            "throttled_time" => Some(Duration::from_nanos(n)),
            _ => None,
        }
    })
}

/// The `cpu.stat` files of the cgroup at `path` under `root` and of its ancestors, the
/// cgroup first, the root itself left out (nothing throttles it): a quota on any of them
/// refuses the watchdog CPU.
pub fn stat_files(root: &Path, path: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dir = PathBuf::from(path.trim_start_matches('/'));
    while !dir.as_os_str().is_empty() {
        out.push(root.join(&dir).join("cpu.stat"));
        if !dir.pop() {
            break;
        }
    }
    out
}

/// The throttled time of each of the watchdog's CPU cgroups (its own first, then its
/// ancestors), by file: what a quota refused it so far. Empty when nothing can be read
/// (no cgroup, a v1 layout mounted elsewhere): the tick's lag still shows starvation.
pub fn cpu_refused(
    proc_self: &Path,
    v1_roots: &[&Path],
    v2_root: &Path,
) -> Vec<(PathBuf, Duration)> {
    let Some(group) = std::fs::read_to_string(proc_self.join("cgroup"))
        .ok()
        .as_deref()
        .and_then(parse_cgroup)
    else {
        return Vec::new();
    };
    let files = match &group {
        CpuCgroup::V1(path) => match v1_roots.iter().find(|r| r.join("cpu.stat").exists()) {
            Some(root) => stat_files(root, path),
            None => return Vec::new(),
        },
        CpuCgroup::V2(path) => stat_files(v2_root, path),
    };
    files
        .into_iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(&f).ok()?;
            Some((f, parse_throttled(&text)?))
        })
        .collect()
}

/// [`cpu_refused`] of this process where Linux mounts the hierarchies.
pub fn own_cpu_refused() -> Vec<(PathBuf, Duration)> {
    let v1: Vec<&Path> = V1_ROOTS.iter().map(Path::new).collect();
    cpu_refused(Path::new("/proc/self"), &v1, Path::new(V2_ROOT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_cgroup_is_found_on_v1_and_v2() {
        let hybrid = "9:name=systemd:/\n4:memory:/x\n1:cpu,cpuacct:/kafka-lab-wd\n0::/\n";
        assert_eq!(
            parse_cgroup(hybrid),
            Some(CpuCgroup::V1("/kafka-lab-wd".into()))
        );
        let unified = "0::/system.slice/kafka-watchdog.service\n";
        assert_eq!(
            parse_cgroup(unified),
            Some(CpuCgroup::V2("/system.slice/kafka-watchdog.service".into()))
        );
        assert_eq!(parse_cgroup("garbage"), None);
    }

    #[test]
    fn throttled_time_is_read_in_either_unit() {
        let v2 = "usage_usec 100\nnr_periods 5\nnr_throttled 2\nthrottled_usec 250000\n";
        assert_eq!(parse_throttled(v2), Some(Duration::from_millis(250)));
        let v1 = "nr_periods 5\nnr_throttled 2\nthrottled_time 1500000000\n";
        assert_eq!(parse_throttled(v1), Some(Duration::from_millis(1500)));
        assert_eq!(parse_throttled("usage_usec 1\n"), None);
    }

    #[test]
    fn a_cgroup_and_its_ancestors_are_read_the_root_left_out() {
        let root = Path::new("/r");
        assert_eq!(
            stat_files(root, "/a/b"),
            vec![
                PathBuf::from("/r/a/b/cpu.stat"),
                PathBuf::from("/r/a/cpu.stat")
            ]
        );
        assert!(stat_files(root, "/").is_empty());
    }

    #[test]
    fn the_files_of_a_fixture_tree_are_read() {
        let dir = std::env::temp_dir().join(format!("kw-own-cgroup-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (proc_self, v2) = (dir.join("proc"), dir.join("cg"));
        std::fs::create_dir_all(&proc_self).unwrap();
        std::fs::create_dir_all(v2.join("svc/wd")).unwrap();
        std::fs::write(proc_self.join("cgroup"), "0::/svc/wd\n").unwrap();
        std::fs::write(v2.join("svc/wd/cpu.stat"), "throttled_usec 7\n").unwrap();
        std::fs::write(v2.join("svc/cpu.stat"), "throttled_usec 9\n").unwrap();
        let got = cpu_refused(&proc_self, &[], &v2);
        assert_eq!(
            got,
            vec![
                (v2.join("svc/wd/cpu.stat"), Duration::from_micros(7)),
                (v2.join("svc/cpu.stat"), Duration::from_micros(9)),
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
