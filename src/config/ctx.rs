//! What every builder carries while it reads one file: the report of problems, the
//! environment secrets are read from, and the folder relative paths start from.

use std::path::{Path, PathBuf};

use super::report::Report;

pub(crate) struct Ctx<'a, 'f> {
    pub rep: Report<'f>,
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Relative paths in the file are taken from here (the file's directory), so the
    /// meaning of a configuration does not depend on where the daemon was started.
    pub base_dir: Option<&'a Path>,
}

impl Ctx<'_, '_> {
    pub(crate) fn path(&self, written: &str) -> PathBuf {
        let p = PathBuf::from(written);
        match self.base_dir {
            Some(base) if p.is_relative() => base.join(p),
            _ => p,
        }
    }
}
