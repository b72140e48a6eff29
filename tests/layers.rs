//! The pipeline order declared at the top of src/lib.rs, checked: each stage is a folder of
//! src/, no stage uses a later one, and no modules use each other round a circle (within a
//! stage or across). Read from the source text (no Kafka, no build of anything else), so it
//! runs in a blink. Test code is left out: a test may use whatever it needs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// module -> used module -> files that use it. A module is `stage::name` (`config` for a
/// stage that is one module).
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The table of src/lib.rs, in order: stage -> its modules (empty: the stage is one module).
struct Stages {
    order: Vec<String>,
    modules: BTreeMap<String, Vec<String>>,
}

impl Stages {
    fn read(lib: &str) -> Stages {
        let mut order = Vec::new();
        let mut modules = BTreeMap::new();
        for line in lib.lines() {
            let Some(row) = line.strip_prefix("//! |") else {
                continue;
            };
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            if cells.len() < 2 || cells[0] == "stage" || cells[0].starts_with('-') {
                continue;
            }
            let stage = cells[0].trim_matches('`').trim_end_matches('/').to_string();
            let ms: Vec<String> = cells[1]
                .split(',')
                .map(|m| m.trim().to_string())
                .filter(|m| !m.is_empty() && m != "-")
                .collect();
            assert!(
                modules.insert(stage.clone(), ms).is_none(),
                "{stage} is twice in the table of src/lib.rs"
            );
            order.push(stage);
        }
        Stages { order, modules }
    }

    fn index(&self, stage: &str) -> Option<usize> {
        self.order.iter().position(|s| s == stage)
    }

    /// The module a path from the crate root (`observe::wire::client::Client`) is in.
    fn module_of(&self, path: &[String]) -> Option<String> {
        let stage = path.first()?;
        let ms = self.modules.get(stage)?;
        if ms.is_empty() {
            return Some(stage.clone());
        }
        // Anything else under a stage's mod.rs would be an item of the stage's own: the
        // mod.rs files hold only their modules, so a shorter path is no use of a module.
        let m = path.get(1)?;
        ms.contains(m).then(|| format!("{stage}::{m}"))
    }
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

/// The paths a piece of code names, from the crate root: `crate::a::b`, `use crate::{a::{b,
/// c}, d}`, and `super::x` resolved from `here` (the module path of the file).
fn used(code: &str, here: &[String]) -> BTreeSet<Vec<String>> {
    let b = code.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < b.len() {
        if !code.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let rest = &code[i..];
        let starts = rest.starts_with("crate::") || rest.starts_with("super::");
        let before = code[..i].chars().next_back();
        let joined = code[..i].ends_with("::");
        if !starts || joined || before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$')
        {
            i += 1;
            continue;
        }
        let mut base: Vec<String> = Vec::new();
        let mut j = i;
        if rest.starts_with("crate::") {
            j += "crate::".len();
        } else {
            base = here.to_vec();
            while code[j..].starts_with("super::") {
                base.pop();
                j += "super::".len();
            }
        }
        j = tree(code, j, base, &mut out);
        i = j.max(i + 1);
    }
    out
}

/// Reads one use tree at `at` (`a::b`, `a::{b, c::d}`, `{a, b}`), adding each full path under
/// `base` to `out`; returns where it ends.
fn tree(
    code: &str,
    mut at: usize,
    mut base: Vec<String>,
    out: &mut BTreeSet<Vec<String>>,
) -> usize {
    let b = code.as_bytes();
    loop {
        while at < b.len() && b[at].is_ascii_whitespace() {
            at += 1;
        }
        if b.get(at) == Some(&b'{') {
            at += 1;
            loop {
                at = tree(code, at, base.clone(), out);
                while at < b.len() && (b[at].is_ascii_whitespace() || b[at] == b',') {
                    at += 1;
                }
                if at >= b.len() || b[at] == b'}' {
                    return at + 1;
                }
            }
        }
        let name: String = code[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        at += name.len();
        if !name.is_empty() && name != "self" {
            base.push(name);
        }
        if code[at..].starts_with("::") {
            at += 2;
        } else {
            if !base.is_empty() {
                out.insert(base);
            }
            return at;
        }
    }
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

/// The module path of a file: src/a/b.rs and src/a/b/mod.rs are `a::b`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_str().unwrap().to_string())
        .collect();
    let last = parts.pop().unwrap();
    if last != "mod.rs" && last != "lib.rs" && last != "main.rs" {
        parts.push(last.trim_end_matches(".rs").to_string());
    }
    parts
}

/// Uses between modules in the code that is not test code, and the stages' folders as
/// found: stage -> the modules its mod.rs declares outside test code.
fn graph(stages: &Stages) -> (Graph, BTreeMap<String, BTreeSet<String>>) {
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
    let mut declared = BTreeMap::new();
    for (path, code) in &code_of {
        let rel = path.strip_prefix(&root).unwrap();
        if test_only.iter().any(|t| path.starts_with(t)) {
            continue;
        }
        let here = module_path(rel);
        if here.len() == 1 && rel.ends_with("mod.rs") {
            let mods: BTreeSet<String> = code
                .lines()
                .filter_map(|l| l.trim().strip_prefix("pub mod "))
                .map(|l| l.trim_end_matches(';').to_string())
                .collect();
            declared.insert(here[0].clone(), mods);
        }
        let Some(from) = stages.module_of(&here) else {
            continue;
        };
        let entry = g.entry(from.clone()).or_default();
        for path in used(code, &here) {
            if let Some(to) = stages.module_of(&path) {
                if to != from {
                    entry
                        .entry(to)
                        .or_default()
                        .insert(rel.display().to_string());
                }
            }
        }
    }
    (g, declared)
}

/// A circle through `start`, if the uses make one.
fn circle(g: &Graph, start: &str) -> Option<Vec<String>> {
    fn dfs(
        g: &Graph,
        at: &str,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in g.get(at).into_iter().flat_map(|m| m.keys()) {
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

fn stage_of(module: &str) -> &str {
    module.split("::").next().unwrap()
}

/// What is wrong with the uses `g` under the order of `stages`.
fn problems(stages: &Stages, g: &Graph) -> Vec<String> {
    let mut problems = Vec::new();
    for (from, uses) in g {
        let sf = stage_of(from);
        for (to, files) in uses {
            let st = stage_of(to);
            if stages.index(st) > stages.index(sf) {
                problems.push(format!(
                    "{from} (stage {sf}) uses {to} (stage {st}, later) in {}",
                    files.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    let mut circles = BTreeSet::new();
    for m in g.keys() {
        if let Some(mut c) = circle(g, m) {
            // One line per circle, whichever module it was found from.
            c.pop();
            let first = c.iter().enumerate().min_by_key(|(_, m)| *m).unwrap().0;
            c.rotate_left(first);
            c.push(c[0].clone());
            circles.insert(c);
        }
    }
    for c in circles {
        problems.push(format!("circle: {}", c.join(" -> ")));
    }
    problems
}

#[test]
fn no_stage_uses_a_later_one_and_nothing_is_a_circle() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let stages = Stages::read(&lib);
    assert!(
        stages.order.len() > 3,
        "no stage table at the top of src/lib.rs"
    );
    let (g, declared) = graph(&stages);

    let mut problems = problems(&stages, &g);
    let in_lib: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect();
    let in_table: BTreeSet<String> = stages.order.iter().cloned().collect();
    for m in in_lib.difference(&in_table) {
        problems.push(format!(
            "src/lib.rs declares {m}, which is no stage of its table"
        ));
    }
    for m in in_table.difference(&in_lib) {
        problems.push(format!(
            "the table in src/lib.rs names {m}, which src/lib.rs does not declare"
        ));
    }
    for (stage, ms) in &stages.modules {
        if !src().join(stage).is_dir() {
            problems.push(format!("stage {stage} is no folder of src/"));
        }
        if ms.is_empty() {
            continue;
        }
        let listed: BTreeSet<String> = ms.iter().cloned().collect();
        let found = declared.get(stage).cloned().unwrap_or_default();
        for m in found.difference(&listed) {
            problems.push(format!(
                "src/{stage}/mod.rs declares {m}, which the table does not list"
            ));
        }
        for m in listed.difference(&found) {
            problems.push(format!(
                "the table lists {stage}::{m}, which src/{stage}/mod.rs does not declare"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The check itself fails on what it is there to catch.
#[test]
fn a_backward_use_and_a_circle_are_problems() {
    let stages = Stages::read(
        "//! | stage | modules | what |\n\
         //! |---|---|---|\n\
         //! | model | round | x |\n\
         //! | config | - | x |\n\
         //! | judge | verdict, report | x |\n",
    );
    fn add(g: &mut Graph, from: &str, to: &str) {
        g.entry(from.into())
            .or_default()
            .entry(to.into())
            .or_default()
            .insert("f.rs".into());
    }
    let mut g = Graph::new();
    add(&mut g, "judge::verdict", "model::round");
    add(&mut g, "judge::verdict", "config");
    assert_eq!(problems(&stages, &g), Vec::<String>::new());
    add(&mut g, "model::round", "config");
    assert_eq!(
        problems(&stages, &g),
        ["model::round (stage model) uses config (stage config, later) in f.rs"]
    );

    let mut g = Graph::new();
    add(&mut g, "judge::report", "judge::verdict");
    add(&mut g, "judge::verdict", "judge::report");
    assert_eq!(
        problems(&stages, &g),
        ["circle: judge::report -> judge::verdict -> judge::report"]
    );
}

#[test]
fn the_reader_sees_every_form_of_use() {
    let code = code_only(
        "use crate::{model::{round::{A, B}, words}, alert::incident::{self, X}};\n\
         // crate::commented\n\
         let s = \"crate::quoted\";\n\
         let c = '{';\n\
         x = crate::config::X;\n\
         #[cfg(test)]\nmod tests { use crate::run::daemon; fn f() { let _ = '}'; } }\n\
         #[cfg(test)]\nmod tests_fake;\n\
         use super::super::health::Health;\n\
         y = crate::observe::wire::Z;",
    );
    let (code, files) = without_tests(&code);
    assert_eq!(files, ["tests_fake"]);
    let here: Vec<String> = ["judge", "verdict", "facts"].map(String::from).to_vec();
    let stages = Stages::read(
        "//! | model | round, words | x |\n//! | config | - | x |\n\
         //! | observe | wire | x |\n//! | judge | health | x |\n//! | alert | incident | x |\n",
    );
    let got: BTreeSet<String> = used(&code, &here)
        .iter()
        .filter_map(|p| stages.module_of(p))
        .collect();
    let want = [
        "alert::incident",
        "config",
        "judge::health",
        "model::round",
        "model::words",
        "observe::wire",
    ];
    assert_eq!(got.into_iter().collect::<Vec<_>>(), want);
}

/// A test file that starts a lab (`lab()`, `lab_of`, `lab_with` from tests/common) needs
/// root and Kafka: it is declared in Cargo.toml behind the `lab-tests` feature, so that a
/// plain `cargo test` runs anywhere (issue 29) and `scripts/test` still runs it. And no
/// file is behind the feature that needs no lab.
#[test]
fn tests_that_start_a_lab_are_behind_the_lab_tests_feature() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let gated: BTreeSet<String> = manifest
        .split("[[test]]")
        .skip(1)
        .filter(|t| t.contains("required-features = [\"lab-tests\"]"))
        .filter_map(|t| {
            let name = t.split("name = \"").nth(1)?;
            Some(name.split('"').next()?.to_string())
        })
        .collect();
    let mut starts_a_lab = BTreeSet::new();
    for entry in std::fs::read_dir(root.join("tests")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let code = code_only(&std::fs::read_to_string(&path).unwrap());
        let uses_lab = ["lab()", "lab_of(", "lab_with("]
            .iter()
            .any(|call| code.contains(call));
        if uses_lab {
            starts_a_lab.insert(path.file_stem().unwrap().to_string_lossy().into_owned());
        }
    }
    let ungated: Vec<&String> = starts_a_lab.difference(&gated).collect();
    assert!(
        ungated.is_empty(),
        "tests/ files that start a lab but are not behind the lab-tests feature in Cargo.toml \
         (add a [[test]] entry with required-features = [\"lab-tests\"]): {ungated:?}"
    );
    let needless: Vec<&String> = gated.difference(&starts_a_lab).collect();
    assert!(
        needless.is_empty(),
        "behind the lab-tests feature without starting a lab: {needless:?}"
    );
}

/// The rungs of the table in src/config/mod.rs, earliest first: rung -> its modules.
fn config_rungs() -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(src().join("config/mod.rs")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("//! |"))
        .map(|row| row.split('|').map(str::trim).collect::<Vec<_>>())
        .filter(|cells| cells.len() > 2 && cells[0].parse::<u32>().is_ok())
        .map(|cells| {
            cells[1]
                .split(',')
                .map(|m| m.trim().to_string())
                .filter(|m| !m.is_empty())
                .collect()
        })
        .collect()
}

/// What is wrong with the uses among config's modules (`uses`: module -> modules it uses)
/// under `rungs`: a use of a later rung, or a module in no rung or in two.
fn config_problems(
    rungs: &[Vec<String>],
    modules: &BTreeSet<String>,
    uses: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut rung_of = BTreeMap::new();
    for (i, r) in rungs.iter().enumerate() {
        for m in r {
            if rung_of.insert(m.clone(), i).is_some() {
                problems.push(format!("config::{m} is in two rungs"));
            }
        }
    }
    for m in modules {
        if !rung_of.contains_key(m) {
            problems.push(format!(
                "config::{m} is in no rung of the table in src/config/mod.rs"
            ));
        }
    }
    for m in rung_of.keys() {
        if !modules.contains(m) {
            problems.push(format!(
                "the table in src/config/mod.rs names {m}, which is no module of config"
            ));
        }
    }
    for (from, tos) in uses {
        for to in tos {
            if let (Some(f), Some(t)) = (rung_of.get(from), rung_of.get(to)) {
                if t > f {
                    problems.push(format!(
                        "config::{from} (rung {}) uses config::{to} (rung {}, later)",
                        f + 1,
                        t + 1
                    ));
                }
            }
        }
    }
    problems
}

/// Issue 29 item 2: config is no longer one circle of files; its modules keep the order
/// the table at the top of src/config/mod.rs gives them.
#[test]
fn config_modules_keep_their_inner_order() {
    let rungs = config_rungs();
    assert!(rungs.len() > 5, "no rung table in src/config/mod.rs");
    let dir = src().join("config");
    let mut all = Vec::new();
    files(&dir, &mut all);
    let mod_rs = without_tests(&code_only(
        &std::fs::read_to_string(dir.join("mod.rs")).unwrap(),
    ))
    .0;
    // The modules config declares outside test code.
    let modules: BTreeSet<String> = mod_rs
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            l.strip_prefix("mod ")
                .or_else(|| l.strip_prefix("pub mod "))
                .or_else(|| l.strip_prefix("pub(crate) mod "))
        })
        .map(|l| l.trim_end_matches(';').to_string())
        .collect();
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &all {
        let rel = path.strip_prefix(src()).unwrap();
        let here = module_path(rel);
        let Some(me) = here.get(1).filter(|m| modules.contains(*m)) else {
            continue;
        };
        let code = without_tests(&code_only(&std::fs::read_to_string(path).unwrap())).0;
        for used in used(&code, &here) {
            if used.first().map(String::as_str) != Some("config") {
                continue;
            }
            if let Some(to) = used.get(1).filter(|m| modules.contains(*m) && *m != me) {
                uses.entry(me.clone()).or_default().insert(to.clone());
            }
        }
    }
    let problems = config_problems(&rungs, &modules, &uses);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The inner-order check fails on what it is there to catch.
#[test]
fn a_use_of_a_later_rung_is_a_problem() {
    let rungs = vec![vec!["yaml".to_string()], vec!["read".to_string()]];
    let modules: BTreeSet<String> = ["yaml", "read"].iter().map(|s| s.to_string()).collect();
    let mut uses = BTreeMap::new();
    uses.insert("read".to_string(), BTreeSet::from(["yaml".to_string()]));
    assert!(config_problems(&rungs, &modules, &uses).is_empty());
    uses.insert("yaml".to_string(), BTreeSet::from(["read".to_string()]));
    assert_eq!(
        config_problems(&rungs, &modules, &uses),
        ["config::yaml (rung 1) uses config::read (rung 2, later)"]
    );
}
