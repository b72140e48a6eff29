//! The report: every run of a subcommand appends one section to `report.json`, and
//! `report.md` is regenerated from the whole file, showing the latest section of each kind.
//! JSON is the record (raw trials included); Markdown is what people read.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::{json, Value};

use crate::sys::{self, Machine};

/// The order in which sections appear in report.md.
const ORDER: &[&str] = &[
    "scale",
    "fanout",
    "detect",
    "false-positives",
    "routine",
    "noise",
    "own-faults",
    "own-faults-unwell",
    "overhead",
    "fuzz",
];

#[derive(Debug, Clone, Serialize)]
pub struct Table {
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

impl Table {
    pub fn new(title: &str, columns: &[&str]) -> Table {
        Table {
            title: title.into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<Value>) {
        self.rows.push(row);
    }

    /// Prints the table as aligned text, as the run goes.
    pub fn print(&self) {
        println!("{}", self.title);
        let cells: Vec<Vec<String>> = std::iter::once(self.columns.clone())
            .chain(self.rows.iter().map(|r| r.iter().map(cell).collect()))
            .collect();
        let widths: Vec<usize> = (0..self.columns.len())
            .map(|i| {
                cells
                    .iter()
                    .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for r in &cells {
            let line: Vec<String> = r
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:>w$}"))
                .collect();
            println!("  {}", line.join("  "));
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Section {
    pub name: String,
    pub started_at: String,
    pub finished_at: String,
    pub machine: Machine,
    pub params: Value,
    pub tables: Vec<Table>,
    pub notes: Vec<String>,
    /// Per-trial or per-round data behind the tables.
    pub raw: Value,
}

impl Section {
    pub fn new(name: &str, params: Value) -> Section {
        Section {
            name: name.into(),
            started_at: sys::utc_now(),
            finished_at: String::new(),
            machine: sys::machine(),
            params,
            tables: Vec::new(),
            notes: Vec::new(),
            raw: Value::Null,
        }
    }

    pub fn note(&mut self, text: impl Into<String>) {
        let text = text.into();
        println!("note: {text}");
        self.notes.push(text);
    }
}

/// Rounds to a sensible number of digits for a table cell, keeping JSON numbers numeric.
pub fn num(x: f64, decimals: i32) -> Value {
    if !x.is_finite() {
        return Value::Null;
    }
    let f = 10f64.powi(decimals);
    json!((x * f).round() / f)
}

pub fn opt_num(x: Option<f64>, decimals: i32) -> Value {
    x.map_or(Value::Null, |v| num(v, decimals))
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => "n/a".into(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        other => other.to_string(),
    }
}

pub struct Output {
    dir: PathBuf,
}

impl Output {
    pub fn new(dir: PathBuf) -> Output {
        Output { dir }
    }

    fn json_path(&self) -> PathBuf {
        self.dir.join("report.json")
    }

    fn md_path(&self) -> PathBuf {
        self.dir.join("report.md")
    }

    /// Appends a finished section to report.json and rewrites report.md.
    pub fn append(&self, mut section: Section) -> Result<()> {
        section.finished_at = sys::utc_now();
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))?;
        let mut doc = self.load()?;
        doc["machine"] = serde_json::to_value(&section.machine)?;
        doc["sections"]
            .as_array_mut()
            .expect("sections is an array")
            .push(serde_json::to_value(&section)?);
        write_atomic(&self.json_path(), &serde_json::to_string_pretty(&doc)?)?;
        self.regenerate_md(&doc)?;
        println!(
            "wrote {} and {}",
            self.json_path().display(),
            self.md_path().display()
        );
        Ok(())
    }

    /// Rewrites report.md from report.json alone.
    pub fn regenerate(&self) -> Result<()> {
        let doc = self.load()?;
        self.regenerate_md(&doc)
    }

    fn load(&self) -> Result<Value> {
        let path = self.json_path();
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let mut doc: Value = serde_json::from_str(&text)
                    .with_context(|| format!("{} is not JSON", path.display()))?;
                if !doc["sections"].is_array() {
                    doc["sections"] = json!([]);
                }
                Ok(doc)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(json!({"schema_version": 1, "machine": null, "sections": []}))
            }
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    fn regenerate_md(&self, doc: &Value) -> Result<()> {
        write_atomic(&self.md_path(), &markdown(doc))
    }
}

fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

/// The latest section of each kind, in a fixed order, as Markdown tables.
pub fn markdown(doc: &Value) -> String {
    let empty = Vec::new();
    let sections = doc["sections"].as_array().unwrap_or(&empty);
    let mut out = String::from("# kafka-watchdog benchmarks\n\n");
    out.push_str("Generated from `report.json` by `kafka-watchdog-bench`; each section is the latest run of its kind with those parameters, the latest parameters first.\n");
    let mut names: Vec<&str> = ORDER.to_vec();
    for s in sections {
        if let Some(n) = s["name"].as_str() {
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    for name in names {
        let runs: Vec<&Value> = sections.iter().filter(|s| s["name"] == name).collect();
        // A run with other parameters (say, only some sizes) does not hide the last full one.
        let mut shown: Vec<&Value> = Vec::new();
        for s in runs.iter().rev() {
            let params = &s["params"];
            if shown.contains(&params) {
                continue;
            }
            shown.push(params);
            let same = runs.iter().filter(|r| &r["params"] == params).count();
            section_md(&mut out, name, s, same - 1);
        }
    }
    out
}

fn section_md(out: &mut String, name: &str, s: &Value, earlier: usize) {
    let empty = Vec::new();
    {
        let m = &s["machine"];
        out.push_str(&format!("\n## {name}\n\n"));
        out.push_str(&format!(
            "Run {} ({} build) on {} ({} CPUs, {} GiB, Linux {}, {}; load average {} at the start).",
            text(&s["started_at"]),
            text(&m["build"]),
            text(&m["cpu_model"]),
            text(&m["nproc"]),
            text(&m["memory_gib"]),
            text(&m["kernel"]),
            text(&m["rustc"]),
            text(&m["loadavg"]),
        ));
        if earlier > 0 {
            out.push_str(&format!(
                " {earlier} earlier run(s) with these parameters are kept in report.json."
            ));
        }
        out.push('\n');
        if let Some(params) = s["params"].as_object() {
            if !params.is_empty() {
                let p: Vec<String> = params
                    .iter()
                    .map(|(k, v)| format!("{k}={}", compact(v)))
                    .collect();
                out.push_str(&format!("\nParameters: {}\n", p.join(", ")));
            }
        }
        for t in s["tables"].as_array().unwrap_or(&empty) {
            out.push_str(&format!("\n### {}\n\n", text(&t["title"])));
            let cols: Vec<String> = t["columns"]
                .as_array()
                .unwrap_or(&empty)
                .iter()
                .map(text)
                .collect();
            out.push_str(&format!("| {} |\n", cols.join(" | ")));
            out.push_str(&format!(
                "|{}|\n",
                cols.iter().map(|_| "---").collect::<Vec<_>>().join("|")
            ));
            for r in t["rows"].as_array().unwrap_or(&empty) {
                let cells: Vec<String> = r
                    .as_array()
                    .unwrap_or(&empty)
                    .iter()
                    .map(|c| cell(c).replace('|', "\\|"))
                    .collect();
                out.push_str(&format!("| {} |\n", cells.join(" | ")));
            }
        }
        let notes = s["notes"].as_array().unwrap_or(&empty);
        if !notes.is_empty() {
            out.push('\n');
            for n in notes {
                out.push_str(&format!("- {}\n", text(n)));
            }
        }
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "?".into(),
        other => other.to_string(),
    }
}

fn compact(v: &Value) -> String {
    match v {
        Value::Array(a) => a.iter().map(compact).collect::<Vec<_>>().join("/"),
        other => text(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_shows_the_latest_section_of_each_kind() {
        let section = |name: &str, value: i64| {
            json!({
                "name": name, "started_at": "2026-01-01T00:00:00Z",
                "machine": {"build": "release", "cpu_model": "cpu", "nproc": 2,
                            "memory_gib": 24.0, "kernel": "6", "rustc": "rustc 1"},
                "params": {"runs": 5, "brokers": [50, 200]},
                "tables": [{"title": "t", "columns": ["a", "b"], "rows": [[value, null]]}],
                "notes": ["n"]
            })
        };
        let doc =
            json!({"sections": [section("fanout", 1), section("scale", 2), section("fanout", 3)]});
        let md = markdown(&doc);
        assert!(md.find("## scale").unwrap() < md.find("## fanout").unwrap());
        assert!(md.contains("| 3 | n/a |"), "{md}");
        assert!(!md.contains("| 1 | n/a |"), "{md}");
        assert!(md.contains("brokers=50/200"), "{md}");
        assert!(md.contains("1 earlier run(s)"), "{md}");
    }

    #[test]
    fn numbers_are_rounded_and_non_finite_is_null() {
        assert_eq!(num(1.23456, 2), json!(1.23));
        assert_eq!(num(f64::NAN, 2), Value::Null);
        assert_eq!(opt_num(None, 1), Value::Null);
    }
}
