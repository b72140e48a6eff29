//! The layer order declared at the top of src/lib.rs, checked: no module of an earlier layer
//! uses a later one, and no modules use each other round a circle. Read from the source
//! text (no Kafka, no build of anything else), so it runs in a blink.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Uses the table does not allow yet, each with why; the check fails when one is no longer
/// there, so the list only shrinks.
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "config",
        "silence",
        "the configuration holds its silences already parsed as `silence::Silence`",
    ),
    (
        "incident",
        "silence",
        "the incident book marks incidents silenced, and a silence matches incidents by kind",
    ),
];

type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The table of src/lib.rs: module -> layer index.
fn layers(lib: &str) -> (BTreeMap<String, usize>, Vec<String>) {
    let mut of = BTreeMap::new();
    let mut names = Vec::new();
    for line in lib.lines() {
        let Some(row) = line.strip_prefix("//! |") else {
            continue;
        };
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        if cells.len() < 2 || cells[0] == "layer" || cells[0].starts_with('-') {
            continue;
        }
        for m in cells[1].split(',').map(str::trim).filter(|m| !m.is_empty()) {
            assert!(
                of.insert(m.to_string(), names.len()).is_none(),
                "{m} is in two layers of src/lib.rs"
            );
        }
        names.push(cells[0].to_string());
    }
    (of, names)
}

/// Text with comments, string and char literals blanked, so that braces and paths are code.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
        } else if c == b'r' && matches!(b.get(i + 1), Some(b'"') | Some(b'#')) && !ident(b, i) {
            // Raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            j += 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            i = j + close.len();
            out.push_str("\"\"");
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' {
            // A char literal ('x', '\n', '{'); anything else is a lifetime.
            let end = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|&x| x == b'\'')
                    .map(|p| i + 3 + p)
            } else if b.get(i + 2) == Some(&b'\'') {
                Some(i + 3)
            } else {
                None
            };
            match end {
                Some(e) => {
                    out.push_str("' '");
                    i = e;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            out.push(c as char);
            i += 1;
        }
    }
    out
}

fn ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// `code` without the bodies of `#[cfg(test)] mod name { ... }`, and the names of the
/// `#[cfg(test)] mod name;` files it declares.
fn without_tests(code: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut test_files = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = rest[at + "#[cfg(test)]".len()..].trim_start();
        let decl = after
            .strip_prefix("pub(crate) ")
            .or_else(|| after.strip_prefix("pub "))
            .unwrap_or(after);
        let Some(m) = decl.strip_prefix("mod ") else {
            // A test-only item other than a module: skip the attribute only.
            rest = after;
            continue;
        };
        let name: String = m
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let m = m[name.len()..].trim_start();
        if let Some(r) = m.strip_prefix(';') {
            test_files.push(name);
            rest = r;
        } else {
            assert!(m.starts_with('{'), "cannot read `mod {name}`");
            let mut depth = 0;
            let mut end = None;
            for (i, c) in m.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(i + 1);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            rest = &m[end.unwrap_or_else(|| panic!("unbalanced `mod {name}`"))..];
        }
    }
    out.push_str(rest);
    (out, test_files)
}

/// The crate's top-level modules a piece of code names: `crate::x` and
/// `use crate::{x, y::z}`.
fn used(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level names of the group, at brace depth zero.
            let mut depth = 0;
            let mut name = String::new();
            let mut at_start = true;
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => at_start = true,
                    c if depth == 0 && at_start && (c.is_alphanumeric() || c == '_') => {
                        name.push(c)
                    }
                    _ if !name.is_empty() => {
                        out.insert(std::mem::take(&mut name));
                        at_start = false;
                    }
                    _ => {}
                }
            }
            if !name.is_empty() {
                out.insert(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// Every .rs file under `dir`, sorted.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// module -> used module -> files that use it, for the code that is not test code.
fn graph() -> Graph {
    let root = src();
    let mut all = Vec::new();
    files(&root, &mut all);
    let mut code_of = BTreeMap::new();
    // Files and folders that `#[cfg(test)] mod x;` declares: test code wherever they are.
    let mut test_only = BTreeSet::new();
    for path in &all {
        let (code, test_files) = without_tests(&code_only(&std::fs::read_to_string(path).unwrap()));
        // `mod x;` in a/mod.rs or a.rs lives in a/x.rs or a/x/.
        let base = if path.file_stem().unwrap() == "mod" {
            path.parent().unwrap().to_path_buf()
        } else {
            path.with_extension("")
        };
        for t in test_files {
            test_only.insert(base.join(format!("{t}.rs")));
            test_only.insert(base.join(t));
        }
        code_of.insert(path.clone(), code);
    }
    let mut g = Graph::new();
    for (path, code) in &code_of {
        let rel = path.strip_prefix(&root).unwrap();
        if test_only.iter().any(|t| path.starts_with(t))
            || rel == Path::new("lib.rs")
            || rel == Path::new("main.rs")
        {
            continue;
        }
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap();
        let module = first.trim_end_matches(".rs").to_string();
        let entry = g.entry(module.clone()).or_default();
        for u in used(code) {
            if u != module {
                entry
                    .entry(u)
                    .or_default()
                    .insert(rel.display().to_string());
            }
        }
    }
    g
}

fn known(from: &str, to: &str) -> bool {
    KNOWN.iter().any(|(f, t, _)| *f == from && *t == to)
}

/// A circle through `start`, if the uses (without the known ones) make one.
fn circle(g: &Graph, start: &str) -> Option<Vec<String>> {
    fn dfs(
        g: &Graph,
        at: &str,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in g.get(at).into_iter().flat_map(|m| m.keys()) {
            if known(at, next) {
                continue;
            }
            if next == start {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if dfs(g, next, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_string()];
    dfs(g, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn earlier_layers_use_no_later_ones_and_nothing_is_a_circle() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let (layer_of, names) = layers(&lib);
    assert!(names.len() > 3, "no layer table at the top of src/lib.rs");
    let g = graph();

    let mut problems = Vec::new();
    let declared: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect();
    for m in &declared {
        if !layer_of.contains_key(m) {
            problems.push(format!(
                "module {m} is in no layer of the table in src/lib.rs"
            ));
        }
    }
    for m in layer_of.keys() {
        if !declared.contains(m) {
            problems.push(format!(
                "the table in src/lib.rs names {m}, which is no module"
            ));
        }
    }
    for (from, uses) in &g {
        let Some(&lf) = layer_of.get(from) else {
            continue;
        };
        for (to, files) in uses {
            let Some(&lt) = layer_of.get(to) else {
                continue;
            };
            if lt > lf && !known(from, to) {
                problems.push(format!(
                    "{from} (layer {}) uses {to} (layer {}, later) in {}",
                    names[lf],
                    names[lt],
                    files.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    for m in g.keys() {
        if let Some(c) = circle(&g, m) {
            problems.push(format!("circle: {}", c.join(" -> ")));
        }
    }
    for (from, to, why) in KNOWN {
        if !g.get(*from).is_some_and(|u| u.contains_key(*to)) {
            problems.push(format!(
                "{from} no longer uses {to} ({why}): take it off KNOWN in tests/layers.rs"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_reader_sees_every_form_of_use() {
    let code = code_only(
        "use crate::{model::round::{A, B}, model::words};\n\
         // crate::commented\n\
         let s = \"crate::quoted\";\n\
         let c = '{';\n\
         x = crate::config::X;\n\
         #[cfg(test)]\nmod tests { use crate::run::daemon; fn f() { let _ = '}'; } }\n\
         #[cfg(test)]\nmod tests_fake;\n\
         y = crate::observe::wire::Z;",
    );
    let (code, files) = without_tests(&code);
    assert_eq!(files, ["tests_fake"]);
    let got: Vec<String> = used(&code).into_iter().collect();
    assert_eq!(got, ["config", "observe", "wire", "words"]);
}
