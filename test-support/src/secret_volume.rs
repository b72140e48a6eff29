//! A Kubernetes Secret as the kubelet mounts it, for the credential rotation tests: each key
//! is a link `<key> -> ..data/<key>`, `..data` a link to a folder `..<version>` holding the
//! files. An update writes a new `..<version>` folder, points `..data_tmp` at it and renames
//! that over `..data` (one atomic step for every key at once), then removes the old folder:
//! a file opened by its path before sees the old content whole, after the new.

use std::path::Path;

/// Mounts (first call) or updates (later calls) the Secret in `dir` to hold `files`.
pub fn write(dir: &Path, version: &str, files: &[(&str, &[u8])]) -> std::io::Result<()> {
    let folder = format!("..{version}");
    std::fs::create_dir_all(dir.join(&folder))?;
    for (name, content) in files {
        std::fs::write(dir.join(&folder).join(name), content)?;
    }
    let old = std::fs::read_link(dir.join("..data")).ok();
    let _ = std::fs::remove_file(dir.join("..data_tmp"));
    std::os::unix::fs::symlink(&folder, dir.join("..data_tmp"))?;
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data"))?;
    for (name, _) in files {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), link)?;
        }
    }
    match old {
        Some(old) if old != Path::new(&folder) => std::fs::remove_dir_all(dir.join(old)),
        _ => Ok(()),
    }
}
