//! Values that are not written in the file: secrets from the environment or from files,
//! and certificate files that must be readable. All are read while loading, so a missing
//! one is a problem with a line number rather than a failure at the first connection.

use std::path::PathBuf;

use super::checks;
use super::ctx::Ctx;
use super::live;
use super::read::{text, Fields, Set};
use super::schema::{self as s, SecretKeys};
use super::types::Secret;
use super::yaml::{Entry, Pos};

/// Certificates and keys are opened now, not at the first connection, so that
/// `check-config` catches a wrong path or permission before a restart does.
pub(crate) fn readable_file(cx: &mut Ctx, e: &Entry) -> Option<PathBuf> {
    let t = text(&mut cx.rep, e, "a file path")?;
    let path = cx.path(&t.value);
    let result = std::fs::metadata(&path).and_then(|m| {
        if m.is_file() {
            std::fs::File::open(&path).map(|_| ())
        } else {
            Err(std::io::Error::other("not a regular file"))
        }
    });
    match result {
        Ok(()) => Some(path),
        Err(err) => {
            cx.rep.add(
                t.value_pos,
                format!("cannot read {} '{}': {err}", e.key, path.display()),
                Some("a readable file".into()),
            );
            None
        }
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Need {
    Required,
    Optional,
    /// Not meaningful here; the reason names the setting that would make it so.
    Forbidden(&'static str),
    /// Nothing can be decided (a key it depends on is wrong): the keys are only taken
    /// so that they are not reported as unknown.
    Ignore,
}

/// A value read through one of the keys of a `SecretKeys` group.
pub(crate) struct Got {
    pub value: String,
    pub key: String,
    pub pos: Pos,
    /// Where it was read from, through the `*_file` key.
    pub file: Option<PathBuf>,
}

impl Got {
    /// The value as a secret that remembers its file.
    pub fn into_secret(self) -> Secret {
        match self.file {
            Some(file) => Secret::from_file(self.value, file),
            None => Secret::new(self.value),
        }
    }
}

/// Reads a value given inline, through an environment variable, or in a file.
/// `Err(())`: a problem was reported. `Ok(None)`: not given and not needed.
pub(crate) fn secret(
    cx: &mut Ctx,
    f: &mut Fields,
    keys: &SecretKeys,
    need: Need,
) -> Result<Option<Got>, ()> {
    let inline = if keys.inline_allowed {
        f.get(keys.inline)
    } else {
        f.get_unlisted(keys.inline)
    };
    let env = f.get(keys.env);
    let file = f.get(keys.file);
    if matches!(need, Need::Ignore) {
        return Err(());
    }
    let given: Vec<&Entry> = [inline, env, file].into_iter().flatten().collect();
    if let Need::Forbidden(reason) = need {
        return forbidden(cx, f, keys, &given, reason);
    }
    let ok = inline.is_none_or(|e| inline_accepted(cx, keys, e));
    let Some(e) = one_given(cx, f, keys, &given)? else {
        if matches!(need, Need::Required) && ok {
            f.missing_what(&mut cx.rep, keys.what, keys.choices());
        }
        return if ok && matches!(need, Need::Optional) {
            Ok(None)
        } else {
            Err(())
        };
    };
    let (value, file) = if e.key == keys.env {
        (from_env(cx, e), None)
    } else if e.key == keys.file {
        from_file(cx, e).map_or((None, None), |(v, path)| (Some(v), Some(path)))
    } else {
        (text(&mut cx.rep, e, &keys.choices()), None)
    };
    match value {
        Some(v) if ok => Ok(Some(Got {
            value: v.value,
            key: e.key.clone(),
            pos: v.value_pos,
            file,
        })),
        _ => Err(()),
    }
}

/// Every key of a secret that may not be given here is a problem where it is written.
fn forbidden(
    cx: &mut Ctx,
    f: &Fields,
    keys: &SecretKeys,
    given: &[&Entry],
    reason: &str,
) -> Result<Option<Got>, ()> {
    for e in given {
        cx.rep.add(
            e.key_pos,
            format!("{} is set in {} but {reason}", e.key, f.where_()),
            Some(format!("no {} here", keys.what)),
        );
    }
    if given.is_empty() {
        Ok(None)
    } else {
        Err(())
    }
}

/// Whether the inline key, written, may be: some secrets refuse one.
fn inline_accepted(cx: &mut Ctx, keys: &SecretKeys, inline: &Entry) -> bool {
    if keys.inline_allowed {
        return true;
    }
    cx.rep.add(
        inline.key_pos,
        format!(
            "an inline {} is not accepted: it would sit in the configuration file in clear text",
            keys.inline
        ),
        Some(keys.choices()),
    );
    false
}

/// The one way the secret was given (a refused inline key does not count); two are a
/// problem.
fn one_given<'e>(
    cx: &mut Ctx,
    f: &Fields,
    keys: &SecretKeys,
    given: &[&'e Entry],
) -> Result<Option<&'e Entry>, ()> {
    let candidates: Vec<&Entry> = given
        .iter()
        .copied()
        .filter(|e| keys.inline_allowed || e.key != keys.inline)
        .collect();
    if candidates.len() > 1 {
        cx.rep.add(
            candidates[1].key_pos,
            format!(
                "'{}' and '{}' are both set in {}",
                candidates[0].key,
                candidates[1].key,
                f.where_()
            ),
            Some(keys.choices()),
        );
        return Err(());
    }
    Ok(candidates.first().copied())
}

fn from_env(cx: &mut Ctx, e: &Entry) -> Option<Set<String>> {
    let name = text(&mut cx.rep, e, "an environment variable name")?;
    if let Err((m, x)) = checks::env_var_name(&name.value) {
        cx.rep.add(name.value_pos, m, Some(x));
        return None;
    }
    match (cx.env)(&name.value) {
        Some(v) if !v.is_empty() => Some(Set { value: v, ..name }),
        found => {
            let state = if found.is_some() { "empty" } else { "not set" };
            cx.rep.add(
                name.value_pos,
                format!("environment variable {} ({}) is {state}", name.value, e.key),
                Some("a non-empty variable in the daemon's environment".into()),
            );
            None
        }
    }
}

/// Reads a secret file, with the value rules the credential watcher applies to it later
/// (`live::secret_text`); also returns where it was.
fn from_file(cx: &mut Ctx, e: &Entry) -> Option<(Set<String>, PathBuf)> {
    let written = text(&mut cx.rep, e, "a file path")?;
    let path = cx.path(&written.value);
    // A secret others can read is a secret no more (issue 27 item 13). Loaded all the
    // same: the file may be shared on purpose (a group the daemon's user belongs to).
    if let Ok(m) = std::fs::metadata(&path) {
        use std::os::unix::fs::PermissionsExt;
        let mode = m.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            cx.rep.warn(
                written.value_pos,
                format!(
                    "{} '{}' can be read by others than its owner (mode {mode:o})",
                    e.key,
                    path.display()
                ),
                Some(format!("chmod 600 {}", path.display())),
            );
        }
    }
    let read = live::read_bounded(&path, s::SECRET_FILE_MAX_BYTES);
    let value = match read {
        Err(err) => Err((
            format!("cannot read {} '{}': {err}", e.key, path.display()),
            "a readable file holding the value",
        )),
        Ok(bytes) => live::secret_text(bytes).map_err(|why| {
            let expected = if why.contains("UTF-8") {
                "a text file holding the value"
            } else {
                "a file holding the value"
            };
            (format!("{} '{}' {why}", e.key, path.display()), expected)
        }),
    };
    match value {
        Ok(value) => Some((Set { value, ..written }, path)),
        Err((m, expected)) => {
            cx.rep.add(written.value_pos, m, Some(expected.into()));
            None
        }
    }
}
