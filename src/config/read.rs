//! Readers that turn tree nodes into typed values. None of them stops at a bad value: each
//! records a problem and returns `None`, and the caller carries on with the next field, so
//! one run reports everything that is wrong.

use super::report::Report;
use super::spec::{FloatSpec, IntSpec};
use super::yaml::{shorten, Entry, Kind, Node, Pos, Value};

/// A value and where it was written: the key, for messages about the setting as a whole
/// (conflicts between keys), and the value, for messages about what was written.
#[derive(Debug, Clone)]
pub(crate) struct Set<T> {
    pub value: T,
    pub key_pos: Pos,
    pub value_pos: Pos,
}

impl<T> Set<T> {
    fn at(e: &Entry, value: T) -> Self {
        Set {
            value,
            key_pos: e.key_pos,
            value_pos: e.value.pos,
        }
    }
}

/// The keys of one mapping. Every key the schema knows is asked for with `get`, so when
/// `finish` runs, the keys asked for are exactly the keys this mapping may have and the
/// rest are unknown: the list in the "expected one of" message cannot drift from the
/// reader.
pub(crate) struct Fields<'n> {
    pub path: String,
    /// Where the mapping is, or its key when it is empty: for "missing key" messages.
    pub pos: Pos,
    entries: &'n [Entry],
    taken: Vec<bool>,
    known: Vec<&'static str>,
}

const NO_ENTRIES: &[Entry] = &[];

#[cfg(test)]
thread_local! {
    /// Every key asked for on this thread, by its path: the reference test's view of
    /// what the readers know.
    pub(crate) static ASKED: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl<'n> Fields<'n> {
    /// `None` (with a problem) when `node` is not a mapping. An empty value (`canary:`
    /// with nothing after it) reads as an empty mapping.
    pub(crate) fn open(
        rep: &mut Report,
        node: &'n Node,
        key: Option<&Entry>,
        path: String,
    ) -> Option<Self> {
        let entries: &'n [Entry] = match &node.kind {
            Kind::Map(entries) => entries,
            _ if node.is_null() => NO_ENTRIES,
            _ => {
                let name = key.map_or(path.as_str(), |k| k.key.as_str());
                rep.add(
                    node.pos,
                    format!("wrong type for {name}: {}", node.describe()),
                    Some("a mapping of keys to values".into()),
                );
                return None;
            }
        };
        let pos = match (entries.is_empty(), key) {
            (true, Some(k)) => k.key_pos,
            _ => node.pos,
        };
        Some(Fields {
            path,
            pos,
            entries,
            taken: vec![false; entries.len()],
            known: Vec::new(),
        })
    }

    pub(crate) fn get(&mut self, key: &'static str) -> Option<&'n Entry> {
        #[cfg(test)]
        ASKED.with(|a| a.borrow_mut().push(self.child(key)));
        self.known.push(key);
        self.get_unlisted(key)
    }

    /// Takes a key without offering it in "expected one of": for keys that exist only to
    /// be refused with a better message than "unknown key".
    pub(crate) fn get_unlisted(&mut self, key: &str) -> Option<&'n Entry> {
        let i = self.entries.iter().position(|e| e.key == key)?;
        self.taken[i] = true;
        Some(&self.entries[i])
    }

    pub(crate) fn child(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    pub(crate) fn missing(&self, rep: &mut Report, key: &str, expected: String) {
        self.missing_what(rep, &format!("required key '{key}'"), expected);
    }

    pub(crate) fn missing_what(&self, rep: &mut Report, what: &str, expected: String) {
        rep.add(
            self.pos,
            format!("missing {what} in {}", self.where_()),
            Some(expected),
        );
    }

    pub(crate) fn where_(&self) -> String {
        if self.path.is_empty() {
            "the top level".to_string()
        } else {
            self.path.clone()
        }
    }

    /// Reports every key nobody asked for. `advice` may replace the generic message for
    /// a key that is known to be misplaced.
    pub(crate) fn finish(&self, rep: &mut Report, advice: &dyn Fn(&str) -> Option<String>) {
        for (e, taken) in self.entries.iter().zip(&self.taken) {
            if *taken {
                continue;
            }
            let key = shorten(&e.key);
            let mut message = match advice(&e.key) {
                Some(m) => m,
                None if e.key == "<<" => {
                    "YAML merge keys ('<<') are not supported; shared settings go in the defaults block"
                        .to_string()
                }
                None => format!("unknown key '{key}' in {}", self.where_()),
            };
            if let Some(near) = suggest(&e.key, &self.known) {
                message.push_str(&format!(", did you mean '{near}'?"));
            }
            rep.add(
                e.key_pos,
                message,
                Some(format!("one of: {}", self.known.join(", "))),
            );
        }
    }
}

/// The known key closest to a misspelt one, if it is close enough to be a typo: a few
/// edits away, or the same name with its unit suffix left off (`round_interval`).
pub(crate) fn suggest<'k>(unknown: &str, known: &[&'k str]) -> Option<&'k str> {
    let norm = unknown.to_ascii_lowercase().replace('-', "_");
    if norm.chars().count() > 64 {
        return None;
    }
    let budget = match norm.chars().count() {
        0..=4 => 1,
        5..=10 => 2,
        _ => 3,
    };
    let mut best: Option<(usize, &'k str)> = None;
    for &k in known {
        let d = if k.starts_with(&format!("{norm}_")) {
            1
        } else {
            edit_distance(&norm, k)
        };
        if d <= budget && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, k));
        }
    }
    best.map(|(_, k)| k)
}

/// Optimal string alignment distance: edits, counting a swap of neighbours as one.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        d[i * width] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = v;
        }
    }
    d[a.len() * width + b.len()]
}

/// An empty value is reported at its key: the parser places it after the colon, where
/// nothing is written.
fn wrong_type(rep: &mut Report, e: &Entry, expected: String) {
    rep.add(
        if e.value.is_null() {
            e.key_pos
        } else {
            e.value.pos
        },
        format!("wrong type for {}: {}", e.key, e.value.describe()),
        Some(expected),
    );
}

pub(crate) fn int(rep: &mut Report, e: &Entry, spec: &IntSpec) -> Option<Set<u64>> {
    let Some(scalar) = e.value.scalar() else {
        wrong_type(rep, e, spec.expected());
        return None;
    };
    match scalar.value() {
        Value::Int(i) if i >= i128::from(spec.min) && i <= i128::from(spec.max) => {
            // The range check makes the conversion infallible.
            u64::try_from(i).ok().map(|v| Set::at(e, v))
        }
        Value::Int(_) => {
            // Quoted as written: a numeral too long for i128 must not print as its clamp.
            rep.add(
                e.value.pos,
                format!("{} {} is out of range", e.key, shorten(&scalar.text)),
                Some(spec.expected()),
            );
            None
        }
        _ => {
            wrong_type(rep, e, spec.expected());
            None
        }
    }
}

pub(crate) fn float(rep: &mut Report, e: &Entry, spec: &FloatSpec) -> Option<Set<f64>> {
    let value = match e.value.scalar().map(|s| s.value()) {
        Some(Value::Float(f)) => f,
        // Exact for every integer a person would write here.
        Some(Value::Int(i)) => i as f64,
        _ => {
            wrong_type(rep, e, spec.expected());
            return None;
        }
    };
    if value.is_finite() && value > spec.above && value <= spec.max {
        Some(Set::at(e, value))
    } else {
        rep.add(
            e.value.pos,
            format!("{} {value} is out of range", e.key),
            Some(spec.expected()),
        );
        None
    }
}

pub(crate) fn boolean(rep: &mut Report, e: &Entry) -> Option<Set<bool>> {
    match e.value.scalar().map(|s| s.value()) {
        Some(Value::Bool(b)) => Some(Set::at(e, b)),
        _ => {
            wrong_type(rep, e, "true or false".into());
            None
        }
    }
}

/// Any scalar but null, as written: `name: 2024` is the name "2024". `expected` describes
/// the text wanted, for the message when the value is a list, a mapping or empty.
pub(crate) fn text(rep: &mut Report, e: &Entry, expected: &str) -> Option<Set<String>> {
    if e.value.is_null() {
        wrong_type(rep, e, expected.to_string());
        return None;
    }
    text_node(rep, &e.value, &e.key, expected).map(|t| Set::at(e, t))
}

pub(crate) fn text_node(rep: &mut Report, n: &Node, what: &str, expected: &str) -> Option<String> {
    match n.scalar() {
        Some(s) if !matches!(s.value(), Value::Null) => Some(s.text.clone()),
        _ => {
            rep.add(
                n.pos,
                format!("wrong type for {what}: {}", n.describe()),
                Some(expected.to_string()),
            );
            None
        }
    }
}

/// One of a fixed set of spellings. A value that differs only in case gets a hint, since
/// Kafka's own tools are not consistent about case.
pub(crate) fn choice<T: Copy>(
    rep: &mut Report,
    e: &Entry,
    options: &[(&'static str, T)],
) -> Option<Set<T>> {
    let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
    let expected = format!("one of: {}", names.join(", "));
    let t = text(rep, e, &expected)?;
    if let Some((_, v)) = options.iter().find(|(n, _)| *n == t.value) {
        return Some(Set::at(e, *v));
    }
    let mut message = format!("'{}' is not a valid {}", shorten(&t.value), e.key);
    if let Some((n, _)) = options
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(&t.value))
    {
        message.push_str(&format!(", did you mean '{n}'?"));
    }
    rep.add(e.value.pos, message, Some(expected));
    None
}

/// The items of a list. A single scalar is taken as a list of one where `lenient`, so
/// `include: ".*"` works as the operator meant.
pub(crate) fn list<'n>(
    rep: &mut Report,
    e: &'n Entry,
    expected: &str,
    lenient: bool,
) -> Option<&'n [Node]> {
    match &e.value.kind {
        Kind::Seq(items) => Some(items),
        Kind::Scalar(_) if lenient && !e.value.is_null() => Some(std::slice::from_ref(&e.value)),
        _ => {
            wrong_type(rep, e, expected.to_string());
            None
        }
    }
}

/// A key as read: not written, written wrong (already reported), or a value. `Bad` is
/// kept apart from `Unset` so that a wrong value never quietly becomes a default.
pub(crate) enum Slot<T> {
    Unset,
    Bad,
    Set(Set<T>),
}

impl<T> Slot<T> {
    pub(crate) fn read(e: Option<&Entry>, read: impl FnOnce(&Entry) -> Option<Set<T>>) -> Self {
        match e {
            None => Slot::Unset,
            Some(e) => read(e).map_or(Slot::Bad, Slot::Set),
        }
    }
}

/// Where a resolved value came from, so a conflict can point at the line to change.
#[derive(Clone, Copy)]
pub(crate) enum Origin {
    Builtin,
    Cluster(Pos),
    Defaults(Pos),
}

pub(crate) struct Resolved<T> {
    pub value: T,
    pub from: Origin,
}

/// Cluster value, else defaults value, else built-in. `None` when the winning value was
/// written wrong (its problem is already reported).
pub(crate) fn pick<T: Clone>(
    cluster: &Slot<T>,
    defaults: &Slot<T>,
    builtin: T,
) -> Option<Resolved<T>> {
    let from_set = |s: &Set<T>, from: Origin| {
        Some(Resolved {
            value: s.value.clone(),
            from,
        })
    };
    match (cluster, defaults) {
        (Slot::Set(c), _) => from_set(c, Origin::Cluster(c.key_pos)),
        (Slot::Bad, _) | (Slot::Unset, Slot::Bad) => None,
        (Slot::Unset, Slot::Set(d)) => from_set(d, Origin::Defaults(d.key_pos)),
        (Slot::Unset, Slot::Unset) => Some(Resolved {
            value: builtin,
            from: Origin::Builtin,
        }),
    }
}
