//! Free space of a log directory, from statvfs(3). `libc` is already in the dependency
//! tree (tokio, the lab); `nix` would add a crate for one call.

use std::path::Path;

use super::HostError;

/// Space of the file system holding a directory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Space {
    pub total_bytes: u64,
    /// What the broker's (unprivileged) user can still write: `f_bavail`, not `f_bfree`,
    /// since the root reserve is not Kafka's to use.
    pub free_bytes: u64,
    /// `free_bytes / total_bytes`; 0 for a file system of size 0.
    pub free_ratio: f64,
}

/// Pure: the numbers statvfs returns, in bytes and as a ratio.
pub fn space(blocks: u64, blocks_available: u64, fragment_size: u64) -> Space {
    let total_bytes = blocks.saturating_mul(fragment_size);
    let free_bytes = blocks_available.saturating_mul(fragment_size);
    Space {
        total_bytes,
        free_bytes,
        free_ratio: if total_bytes == 0 {
            0.0
        } else {
            free_bytes as f64 / total_bytes as f64
        },
    }
}

pub fn statvfs(path: &Path) -> Result<Space, HostError> {
    let fs = crate::sys::statvfs(path).map_err(|source| HostError::Read {
        path: path.display().to_string(),
        source,
    })?;
    Ok(space(fs.blocks, fs.blocks_available, fs.fragment_size))
}

pub use crate::model::words::human_bytes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios() {
        let s = space(1000, 250, 4096);
        assert_eq!(s.total_bytes, 4_096_000);
        assert_eq!(s.free_bytes, 1_024_000);
        assert!((s.free_ratio - 0.25).abs() < 1e-9);
        assert_eq!(space(0, 0, 4096).free_ratio, 0.0);
        assert_eq!(space(u64::MAX, u64::MAX, 4096).total_bytes, u64::MAX);
    }

    #[test]
    fn the_root_file_system_has_a_size() {
        let s = statvfs(Path::new("/")).unwrap();
        assert!(s.total_bytes > 0 && s.free_bytes <= s.total_bytes);
        assert!(statvfs(Path::new("/no/such/dir/kw")).is_err());
    }

    #[test]
    fn human_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(16 * 1024 * 1024), "16.0 MiB");
        assert_eq!(human_bytes(3 * 1024 * 1024 * 1024 / 2), "1.5 GiB");
    }
}
