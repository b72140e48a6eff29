//! What every builder carries while it reads one file: the report of problems, the
//! environment secrets are read from, and the folder relative paths start from.

use std::path::{Path, PathBuf};

use super::checks;
use super::read::{text, Fields, Set};
use super::report::Report;

pub(crate) struct Ctx<'a, 'f> {
    pub rep: Report<'f>,
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Relative paths in the file are taken from here (the file's directory), so the
    /// meaning of a configuration does not depend on where the daemon was started.
    pub base_dir: Option<&'a Path>,
}

impl Ctx<'_, '_> {
    /// The required `name` of a cluster or webhook (`what`): as written (for labels of
    /// later problems even when it is invalid), and checked.
    pub(crate) fn name(
        &mut self,
        f: &mut Fields,
        what: &str,
    ) -> (Option<Set<String>>, Option<String>) {
        let raw = match f.get("name") {
            Some(e) => text(&mut self.rep, e, checks::NAME_EXPECTED),
            None => {
                f.missing(&mut self.rep, "name", checks::NAME_EXPECTED.into());
                None
            }
        };
        let name = raw
            .as_ref()
            .and_then(|n| match checks::name(&n.value, what) {
                Ok(()) => Some(n.value.clone()),
                Err((m, x)) => {
                    self.rep.add(n.value_pos, m, Some(x));
                    None
                }
            });
        (raw, name)
    }

    pub(crate) fn path(&self, written: &str) -> PathBuf {
        let p = PathBuf::from(written);
        match self.base_dir {
            Some(base) if p.is_relative() => base.join(p),
            _ => p,
        }
    }
}
